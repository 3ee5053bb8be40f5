"""Layer 2, engines: the :class:`~quadsim.engines.sim.Simulator` shell over one engine interface.

The state records (``state``), the pure step (``stepping``), the engine interface and the array
engines on NumPy, JAX, PyTorch (``array_engine``), and the compiled C rollouts (``native``,
``sim_native``). Imports from ``physics`` only.
"""
