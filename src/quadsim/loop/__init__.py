"""Layer 3, the flight stack: controllers, references, and the closed loop around an engine.

``control`` and ``trajectories``; ``initial`` (start sampling); ``brain`` (the closed loop's
per-step function: reference, sensors, controller, allocation); ``flight`` (``fly`` and its
three loops), ``closed_loop`` (compiled to C) and ``closed_loop_jax`` (one ``lax.scan`` per
chunk). Imports from ``physics`` and ``engines``.
"""
