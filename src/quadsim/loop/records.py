"""What every loop logs and hands on: the state as NumPy float64, one logged sample, JAX's mode.

A sample ``k`` of a flight's log is taken at ``t_k`` before the step: the brain's outputs
(reference, command, sensor readings, estimates; sorted by name), the time, the state ``x_k``,
the rotor speeds (the actual ones with rotor dynamics, else the command) and the world's flags.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from ..engines.state import State, WarmState
from ..physics._array import to_numpy
from ..physics.rotation import from_euler

__all__ = ["flag", "jax_or_none", "jax_x64", "log_record", "numpy_state"]


def numpy_state(state: Any) -> State:
    """A :class:`~quadsim.engines.state.State` (:class:`~quadsim.engines.state.WarmState` with a
    motor warm-up) of NumPy float64; Euler angles become quaternions."""  # noqa: D205, D209
    fields = [None if f is None else to_numpy(f).astype(np.float64) for f in state]
    cls = WarmState if hasattr(state, "motor_heat") else State
    if hasattr(state, "rpy"):
        pos, rpy, vel, ang_vel, *rest = fields
        return cls(pos, from_euler(rpy), vel, ang_vel, *rest)
    return cls(*fields)


def flag(status: Any, name: str, n: int) -> np.ndarray:
    """The world's flag ``name`` (``crashed``, ``landed``) ``(n,)``; all false without a world."""
    return to_numpy(getattr(status, name)) if status is not None else np.zeros(n, bool)


def log_record(out: dict, state: Any, t: float, rpm: Any, status: Any, n: int) -> dict:
    """One logged sample of the per-step loops: the brain's outputs (sorted: JAX's order either
    way), the time, the state ``x_k``, the rotor speeds (actual, else the command ``rpm``), the
    motors' warm-up states (with a warm-up) and the world's flags (``status``, ``None`` without a
    world)."""  # noqa: D205, D209
    rec = {key: np.asarray(out[key]) for key in sorted(out)}
    rec.update(
        time=np.asarray(t),
        pos=state.pos,
        quat=state.quat,
        vel=state.vel,
        ang_vel=state.ang_vel,
        rotor_rpm=state.rotor_vel if state.rotor_vel is not None else rpm,
    )
    if getattr(state, "motor_heat", None) is not None:
        rec["motor_heat"] = state.motor_heat
    rec.update(crashed=flag(status, "crashed", n), landed=flag(status, "landed", n))
    return rec


def jax_or_none() -> Any:
    """The ``jax`` module, or ``None`` when JAX is not installed."""
    try:
        import jax
    except ImportError:
        return None
    return jax


def jax_x64(jax: Any) -> Any:
    """Float64 for JAX inside the block only (the process-wide setting is left alone).

    ``jax`` is the module or ``None`` (then a no-op context, for the NumPy loop).
    """
    return jax.enable_x64(True) if jax is not None else contextlib.nullcontext()
