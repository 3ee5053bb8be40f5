"""Which loop flies a flight: the rules of the two fast paths, checked before anything is built.

:func:`quadsim.loop.flight.fly` runs the compiled C loop on the ``native`` backend
(:func:`compiled_path_reason`), the JAX scan on ``jax`` (:func:`scan_path_reason`), and the
per-step loop otherwise or when the controller cannot be traced; :func:`flight_loop` says which
and why before a flight (``quadsim fly`` prints it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..engines.native import available
from ..physics._array import to_numpy
from ..physics.sensors import mocap_delay_steps
from . import control as control_module
from .brain import checked_sensors, ctrl_leaves
from .records import jax_or_none

__all__ = ["MOCAP_DELAY_MAX", "compiled_path_reason", "flight_loop", "scan_path_reason"]

MOCAP_DELAY_MAX = 64
"""Longest motion-capture delay [steps] the compiled loop carries (a delay line of 3 d rows)."""


def compiled_path_reason(
    sim: Any, control: Callable, gains: Any, *, ctrl_state: Any = None, allocator: Any = None,
    sensors: Any = None, jit: bool | None = None,
) -> str | None:  # fmt: skip
    """Why :func:`fly` cannot run this flight as the compiled closed loop, or ``None`` if it can.

    The compiled loop (:mod:`quadsim.loop.closed_loop`) needs the ``native`` backend with CasADi and
    a C compiler, the default allocator, a rotor-level quaternion model, a motion-capture delay
    of at most :data:`MOCAP_DELAY_MAX` steps, and
    geometric or PID gains for :func:`quadsim.loop.control.control`; any other controller is traced
    as it is, from the initial controller state ``ctrl_state`` (arrays with a leading drone axis,
    in NamedTuples or tuples; :func:`initial_ctrl_state`). ``jit=False`` asks for the Python
    loop. Per-drone model parameters, Dryden turbulence, an IMU and motion capture are compiled
    (the sensors are read inside the C step, their noise drawn there, see :func:`fly`).
    Whether the controller traces is only known by tracing it: ``fly`` then runs a slower loop,
    says so in ``meta["loop_reason"]`` and warns (:class:`TraceFallbackWarning`).

    Args:
        sim: The :class:`~quadsim.engines.sim.Simulator`.
        control: The controller.
        gains: Its gains record.
        ctrl_state: Initial controller state given to ``fly``.
        allocator: Allocator given to ``fly``.
        sensors: The sensors given to ``fly`` (:func:`~quadsim.loop.brain.checked_sensors`).
        jit: ``fly``'s ``jit``.

    Returns:
        A short reason (``"a custom allocator: ..."``), or ``None``.
    """
    if jit is False:
        return "jit=False: the per-step Python loop was asked for"
    backend = getattr(sim, "backend", None)
    if backend != "native":
        return (f"backend {backend!r}: only 'native' compiles the closed loop"
                + (" (and 'jax' scans it)" if backend != "jax" else ""))  # fmt: skip
    if control is control_module.control and not isinstance(
        gains, control_module.GeometricGains | control_module.PidGains
    ):
        return f"gains of type {type(gains).__name__}: only geometric and PID gains are compiled"
    if ctrl_state is not None:
        bad = _ctrl_state_problem(ctrl_state, sim.n)
        if bad:
            return f"ctrl_state: {bad}"
    if allocator is not None:
        return "a custom allocator: the compiled loop uses the drone's default allocator"
    mocap = checked_sensors(sensors).mocap
    if mocap is not None:
        try:
            d = mocap_delay_steps(mocap, sim.dt)
        except (ValueError, TypeError, AttributeError) as e:
            return f"mocap: {e}"
        if d > MOCAP_DELAY_MAX:
            return (f"mocap latency of {d} steps: the compiled loop carries at most "
                    f"{MOCAP_DELAY_MAX}")  # fmt: skip
    system = sim.system
    if system.attitude != "quat" or system.n_cmd != sim.drone.mixing_matrix.shape[1]:
        return (f"model {getattr(system, 'model', None)!r}: the compiled loop needs a rotor-level "
                "quaternion model (first_principles)")  # fmt: skip

    if not available():
        return "quadsim.engines.native is unavailable (needs CasADi and a C compiler)"
    return None


def scan_path_reason(
    sim: Any, control: Callable, gains: Any, *, ctrl_state: Any = None, sensors: Any = None,
    jit: bool | None = None,
) -> str | None:  # fmt: skip
    """Why :func:`fly` cannot run this flight as one ``jax.lax.scan`` per chunk, or ``None``.

    The scan loop (:mod:`quadsim.loop.closed_loop_jax`) needs the ``jax`` backend, a rotor-level
    quaternion model, and ``jit`` not ``False``; the
    controller (built-in or your own) must be traceable by JAX, which only tracing tells
    (``fly`` falls back and says so). Any allocator, initial controller state, per-drone model
    parameters, Dryden turbulence, IMU and motion capture are scanned.

    Args:
        sim: The :class:`~quadsim.engines.sim.Simulator`.
        control: The controller.
        gains: Its gains record.
        ctrl_state: Initial controller state given to ``fly``.
        sensors: The sensors given to ``fly`` (every sensor is scanned).
        jit: ``fly``'s ``jit``.

    Returns:
        A short reason, or ``None``.
    """
    if jit is False:
        return "jit=False: the per-step Python loop was asked for"
    backend = getattr(sim, "backend", None)
    if backend != "jax":
        return f"backend {backend!r}: only 'jax' scans the closed loop"
    system = sim.system
    if system.attitude != "quat" or system.n_cmd != sim.drone.mixing_matrix.shape[1]:
        return (f"model {getattr(system, 'model', None)!r}: the scan loop needs a rotor-level "
                "quaternion model (first_principles)")  # fmt: skip
    if jax_or_none() is None:
        return "JAX is not installed"
    return None


def flight_loop(sim: Any, control: Callable, gains: Any, **kwargs: Any) -> tuple[str, str | None]:
    """The loop :func:`fly` will run, ``(loop, reason)``, as far as it is known before tracing.

    ``loop`` is ``"compiled"`` (``native``, :func:`compiled_path_reason` is ``None``), ``"scan"``
    (``jax``, :func:`scan_path_reason` is ``None``) or ``"python"``, and ``reason`` says why the
    faster loop of the backend does not run (``None`` when it does). Tracing the controller can
    still fail; ``fly``'s ``meta`` then corrects it. ``kwargs`` are ``fly``'s ``ctrl_state``,
    ``allocator``, ``sensors``, ``jit`` and ``compiled`` (others are ignored).
    """
    compiled = kwargs.pop("compiled", None)
    kwargs.pop("seed", None)
    if compiled is False:
        return "python", "compiled=False"
    if getattr(sim, "backend", None) == "jax":
        kwargs.pop("allocator", None)
        reason = scan_path_reason(sim, control, gains, **kwargs)
        return ("scan" if reason is None else "python"), reason
    reason = compiled_path_reason(sim, control, gains, **kwargs)
    return ("compiled" if reason is None else "python"), reason


def _ctrl_state_problem(ctrl_state: Any, n: int) -> str | None:
    """Why a per-drone controller state cannot be stored in the compiled state, or ``None``."""
    try:
        leaves = ctrl_leaves(ctrl_state)
    except TypeError as e:
        return str(e)
    for name, leaf in leaves:
        try:
            a = np.asarray(to_numpy(leaf))
        except Exception:  # anything that is not an array
            return f"{name} is not an array ({type(leaf).__name__})"
        if a.dtype.kind not in "biuf":
            return f"{name} is not a numeric array ({a.dtype})"
        if a.ndim and a.shape[0] not in (1, n):
            return f"{name} has shape {a.shape}: the leading axis must be the {n} drones"
    return None
