"""Layer 2, engines: the :class:`~quadsim.engines.sim.Simulator` shell over one engine interface.

The array engines (NumPy, JAX, PyTorch) and the compiled C rollouts (``native``,
``sim_native``). Imports from ``physics`` only.
"""
