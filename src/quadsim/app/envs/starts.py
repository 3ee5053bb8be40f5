r"""The initial states of new episodes: the ranges of the draw and the plant state built from it.

Initial states are drawn uniformly around the task's reference at ``t = 0``: position offset per
axis ``±pos`` [m], roll and pitch ``±tilt`` [rad], yaw ``±yaw`` [rad], velocity per axis ``±vel``
[m/s], body rates per axis ``±ang_vel`` [rad/s] (or uniform in a ball of radius
``ang_vel_norm``), each shifted by the centres of :class:`InitRanges`; rotors start at hover
speed. :func:`start_state` turns a draw into the plant state (the NumPy reference path of
:class:`~quadsim.app.envs.core.QuadCore` and the compiled env step call it).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from ...physics._array import namespace
from ...physics.rotation import kfrom_euler

__all__ = ["InitRanges", "check_init", "start_state"]


class InitRanges(NamedTuple):
    """Half-widths of the uniform initial-state distribution around the reference at t = 0.

    The draws are shifted by the centres (``pos_center``, ``vel_center``).

    Attributes:
        pos: Position offset per axis [m] (one number, or one per axis).
        vel: Velocity per axis [m/s] (one number, or one per axis).
        tilt: Roll and pitch [rad].
        yaw: Yaw [rad].
        ang_vel: Body rates per axis [rad/s].
        pos_center: Centre of the position offsets [m] ``(3,)`` (default none).
        vel_center: Centre of the velocities [m/s] ``(3,)`` (default none).
        ang_vel_norm: If set, body rates uniform in the ball of this radius [rad/s] instead of
            ``±ang_vel`` per axis.
    """

    pos: Any = 0.5
    vel: Any = 0.5
    tilt: float = 0.3
    yaw: float = math.pi
    ang_vel: float = 0.5
    pos_center: Any = (0.0, 0.0, 0.0)
    vel_center: Any = (0.0, 0.0, 0.0)
    ang_vel_norm: float | None = None


def check_init(r: InitRanges) -> InitRanges:
    """``r`` if its half-widths are finite and >= 0 and its centres finite (else ValueError)."""
    for name in ("pos", "vel", "tilt", "yaw", "ang_vel", "ang_vel_norm"):
        v = getattr(r, name)
        a = np.asarray(0.0 if v is None else v, dtype=np.float64)
        if a.shape not in ((), (3,)) or not np.all(np.isfinite(a) & (a >= 0)):
            raise ValueError(f"init.{name} must be >= 0 (one number or 3); got {v!r}")
    for name in ("pos_center", "vel_center"):
        a = np.asarray(getattr(r, name), dtype=np.float64)
        if a.shape != (3,) or not np.all(np.isfinite(a)):
            raise ValueError(f"init.{name} must be 3 finite numbers; got {getattr(r, name)!r}")
    return r


def start_state(pos: Any, rpy: Any, vel: Any, ang_vel: Any, floor: float | None) -> tuple:
    """The plant state of new episodes (pure, array API; the compiled step traces it).

    Args:
        pos: Drawn positions ``(..., 3)`` [m].
        rpy: Drawn roll, pitch, yaw ``(..., 3)`` [rad] (ZYX Euler).
        vel: Drawn velocities ``(..., 3)`` [m/s].
        ang_vel: Drawn body rates ``(..., 3)`` [rad/s].
        floor: Lowest start height [m] (the ground's height plus 5 cm), or ``None``.

    Returns:
        ``(pos, quat, vel, ang_vel)``: ``pos`` with ``z`` raised to ``floor`` where below it,
        ``quat`` ``(..., 4)`` (xyzw) of ``rpy``.
    """
    xp = namespace(pos, rpy)
    quat = xp.stack(kfrom_euler(xp, (rpy[..., 0], rpy[..., 1], rpy[..., 2])), axis=-1)
    if floor is not None:
        z = xp.maximum(pos[..., 2], floor)
        pos = xp.stack([pos[..., 0], pos[..., 1], z], axis=-1)
    return pos, quat, vel, ang_vel
