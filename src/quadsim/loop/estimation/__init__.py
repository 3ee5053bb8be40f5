"""State estimation in the closed loop: estimators fed by the simulated sensors.

Submodules:

* :mod:`quadsim.loop.estimation.eskf`: the error-state (multiplicative) extended Kalman filter on
  position, velocity, attitude and the IMU biases, with delayed fusion for late measurements;
* :mod:`quadsim.loop.estimation.complementary`: the complementary (Mahony) filter, the cheap case.

Their errors against the truth (RMSE, NEES, absolute and relative trajectory errors) are analysis
of logged flights, in the application layer: :mod:`quadsim.app.analysis`.

Every estimator is pure array-API code over a batch of drones (NumPy, JAX, or CasADi through
:class:`~quadsim.physics._symbolic.SymArray`, so the compiled closed loop traces it).
"""
