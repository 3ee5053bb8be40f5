"""Validation of quadsim's models and estimators against real flight data.

* :mod:`quadsim.app.validation.nanobench`: quadsim's error-state EKF run offline on real
  Crazyflie 2.1 flights of the NanoBench data set (IMU plus Vicon) and its absolute trajectory
  error compared with the onboard EKF's (``docs/validation_nanobench.md``).
"""
