"""quadsim: physics-based quadrotor simulation."""

__version__ = "0.1.0"
