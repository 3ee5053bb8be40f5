"""Batch state records and their flat components: :class:`State`, :class:`EulerState`.

A state holds one field per quantity, each with the batch shape ``...`` plus its own size
(:class:`State` for quaternion models, :class:`EulerState` for Euler models). The kernels work on
its flat components (:func:`state_to_comps`; :func:`state_from_comps` stacks them back)::

    x = (p_x, p_y, p_z, q_x, q_y, q_z, q_w, v_x, v_y, v_z, ω_x, ω_y, ω_z, Ω_1, ..., Ω_N)

(``rpy`` for ``quat`` in an Euler state; no ``Ω`` without rotor dynamics). :func:`initial_status`
makes a batch's all-clear :class:`~quadsim.physics.world.Status`; :func:`check_unit_quat` checks a
given attitude, ``| ‖q‖ - 1 | <= 1e-6`` per drone; :func:`as_cmd` checks and broadcasts a command.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from ..physics._array import check_real, stack, unstack
from ..physics.systems import System
from ..physics.world import Status

__all__ = [
    "EulerState",
    "State",
    "WarmEulerState",
    "WarmState",
    "as_cmd",
    "check_unit_quat",
    "initial_status",
    "state_class",
    "state_from_comps",
    "state_to_comps",
]


class State(NamedTuple):
    """Quaternion-model state; every field has the batch shape ``...`` plus its own size.

    Attributes:
        pos: World position [m], ``(..., 3)``.
        quat: Attitude xyzw, body to world, ``(..., 4)``.
        vel: World velocity [m/s], ``(..., 3)``.
        ang_vel: Body angular velocity [rad/s], ``(..., 3)``.
        rotor_vel: Rotor speeds [RPM], ``(..., N)``, or ``None`` without rotor dynamics.
    """

    pos: Any
    quat: Any
    vel: Any
    ang_vel: Any
    rotor_vel: Any = None


class EulerState(NamedTuple):
    """Euler-model state: as :class:`State` with ``rpy`` (roll, pitch, yaw [rad]) for ``quat``."""

    pos: Any
    rpy: Any
    vel: Any
    ang_vel: Any
    rotor_vel: Any = None


class WarmState(NamedTuple):
    """:class:`State` of drones with a motor warm-up (``warmup_coef > 0``): the same fields and
    ``motor_heat``, the motors' warm-up states ``θ`` [1] ``(..., N)`` (0 cold, 1 warm in hover;
    :mod:`quadsim.physics.motor_thermal`). A class of its own, so a :class:`State` keeps its
    five fields."""  # noqa: D205, D209

    pos: Any
    quat: Any
    vel: Any
    ang_vel: Any
    rotor_vel: Any
    motor_heat: Any


class WarmEulerState(NamedTuple):
    """:class:`EulerState` with ``motor_heat`` (:class:`WarmState`)."""

    pos: Any
    rpy: Any
    vel: Any
    ang_vel: Any
    rotor_vel: Any
    motor_heat: Any


def state_class(system: System) -> type:
    """The state class of ``system``: :class:`State` or :class:`EulerState`, or their
    ``Warm`` twins when it carries ``motor_heat``."""  # noqa: D205, D209
    warm = any(name == "motor_heat" for name, _ in system.fields)
    if system.attitude == "quat":
        return WarmState if warm else State
    return WarmEulerState if warm else EulerState


def state_to_comps(state: NamedTuple) -> tuple:
    """The flat component tuple of a state (the kernels' ``x``).

    The fields in order, each split along its last axis (``pos`` 3, ``quat`` 4 or ``rpy`` 3,
    ``vel`` 3, ``ang_vel`` 3, ``rotor_vel`` N, ``motor_heat`` N); ``None`` fields are left out.
    """
    return tuple(c for f in state if f is not None for c in unstack(f))


def state_from_comps(x: tuple, system: System, xp: Any, like: Any) -> NamedTuple:
    """A :class:`State` (:class:`EulerState` for Euler models) from the components ``x``.

    ``x`` is laid out as :func:`state_to_comps` makes it for ``system``; the fields are stacked
    on ``xp`` like ``like`` (dtype, device).
    """
    fields = {name: stack(xp, x[s], like) for name, s in system.slices().items()}
    cls = state_class(system)
    return cls(**{name: fields.get(name) for name in cls._fields})


def check_unit_quat(quat: np.ndarray, drones: np.ndarray, where: str) -> None:
    """``ValueError`` naming the first drone whose attitude ``(m, 4)`` is not unit to 1e-6."""
    norm = np.linalg.norm(quat, axis=-1)
    bad = np.flatnonzero(np.abs(norm - 1.0) > 1e-6)
    if bad.size:
        i = bad[0]
        raise ValueError(f"{where}: attitude must be a unit quaternion (xyzw); drone "
                         f"{drones[i]} has norm {norm[i]:.6g}")  # fmt: skip


def initial_status(
    xp: Any, batch_shape: tuple[int, ...], device: Any = None, dtype: Any = None
) -> Status:
    """All-clear :class:`~quadsim.physics.world.Status` for a batch.

    ``crash_time`` has ``dtype`` (default: the namespace's default float; float32 on torch).
    """
    false = xp.zeros(batch_shape, dtype=xp.bool, device=device)
    return Status(
        landed=false,
        crashed=false,
        crash_time=xp.full(batch_shape, math.nan, dtype=dtype, device=device),
        fault_step=xp.full(batch_shape, -1, dtype=xp.int32, device=device),
        fault_code=xp.zeros(batch_shape, dtype=xp.int32, device=device),
    )


def as_cmd(cmd: Any, shape: tuple[int, ...], xp: Any, dtype: Any) -> Any:
    """``cmd`` broadcast to ``shape`` as an ``xp`` array of ``dtype`` (``ValueError`` if not:
    another shape, or values that are not real numbers, such as complex numbers or text)."""  # noqa: D205, D209
    check_real(cmd if hasattr(cmd, "dtype") else np.asarray(cmd), "cmd")
    a = np.asarray(cmd, dtype=np.float64) if not hasattr(cmd, "device") else cmd
    try:
        a = np.array(np.broadcast_to(a, shape)) if isinstance(a, np.ndarray) else a
    except ValueError:
        raise ValueError(f"cmd must broadcast to shape {shape}; got {np.shape(cmd)}") from None
    if tuple(a.shape) != shape:
        raise ValueError(f"cmd must have shape {shape}; got {tuple(a.shape)}")
    return xp.asarray(a, dtype=dtype)
