"""Layer 1, physics: pure array-API functions and the data they need.

Equations of motion (``models``, ``systems``), integrators, rotations, rotor and allocation
models, Dryden turbulence, contacts and faults (``world``), sensor models, counter-based random
numbers (``noise``), drone parameters and their presets. One code path for NumPy, JAX, PyTorch
and CasADi. Imports nothing from the layers above (``engines``, ``loop``, ``app``).
"""
