r"""The initial states of new episodes: the ranges of the draw and the plant state built from it.

Initial states are drawn uniformly around the task's reference at ``t = 0``: position offset per
axis ``±pos`` [m], roll and pitch ``±tilt`` [rad], yaw ``±yaw`` [rad], velocity per axis ``±vel``
[m/s], body rates per axis ``±ang_vel`` [rad/s] (or uniform in a ball of radius
``ang_vel_norm``), each shifted by the centres of :class:`InitRanges`; rotors start at hover
speed. :func:`start_state` turns a draw into the plant state (the NumPy reference path of
:class:`~quadsim.app.envs.core.QuadCore` and the compiled env step call it); :func:`check_state`
checks a reset's given start (``reset(options={"state": ...})``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from ...physics._array import namespace
from ...physics.rotation import kfrom_euler

__all__ = ["STATE_KEYS", "InitRanges", "check_init", "check_state", "known_keys", "start_state"]

STATE_KEYS = {"pos": 3, "attitude": 4, "vel": 3, "ang_vel": 3}
"""The keys of a reset's given start (:func:`check_state`) and their sizes."""


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


def known_keys(value: Any, known: Any, what: str, short: str, expect: str) -> dict:
    """``value`` as a dict (``None``: empty), if it is a mapping with only ``known`` keys.

    Raises:
        TypeError: ``"<what> must be <expect>; got ..."``: not a mapping.
        ValueError: ``"<short>: unknown keys [...]; use ..."``.
    """
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(f"{what} must be {expect}; got {type(value).__name__} "
                        f"{value!r:.80}")  # fmt: skip
    unknown = sorted(map(repr, set(value) - set(known)))
    if unknown:
        raise ValueError(f"{short}: unknown keys [{', '.join(unknown)}]; use "
                         f"{', '.join(known)}")  # fmt: skip
    return dict(value)


def check_state(state: Any, m: int, world: Any, dtype: Any = "float64") -> dict[str, np.ndarray]:
    """A reset's given start, checked: ``{key: (m, size) float64 array}``.

    Args:
        state: ``None``, or a dict of any of ``pos`` [m], ``attitude`` (xyzw quaternion),
            ``vel`` [m/s] and ``ang_vel`` [rad/s], each one row or one row per environment reset.
        m: Number of environments reset.
        world: The environments' :class:`~quadsim.physics.world.World` (its fault limits), or
            ``None``.
        dtype: The simulator's dtype: the values must be finite in it.

    Raises:
        TypeError: ``state`` is not a dict.
        ValueError: Naming the key: an unknown key, a value that is not ``size`` numbers (or
            ``(m, size)``), not finite, an attitude that is not a unit quaternion (to 1e-6), a
            speed above the world's ``limits.max_speed`` or a body rate above its
            ``limits.max_rate`` (a start the simulator would flag as a fault at once).
    """
    state = known_keys(state, STATE_KEYS, "reset state (options['state'])", "reset state",
                       f"a dict of {', '.join(STATE_KEYS)}")  # fmt: skip
    if not state:
        return {}
    limits = None if world is None else world.limits
    bounds = {"vel": ("speed", "m/s", "max_speed"), "ang_vel": ("body rate", "rad/s", "max_rate")}
    out = {}
    for key, size in STATE_KEYS.items():
        if key not in state:
            continue
        try:
            v = np.broadcast_to(np.asarray(state[key], dtype=np.float64), (m, size))
        except (TypeError, ValueError) as e:
            raise ValueError(f"reset state: {key} must be {size} numbers, or ({m}, {size}); got "
                             f"{state[key]!r}") from e  # fmt: skip
        with np.errstate(over="ignore"):
            finite = np.isfinite(v.astype(dtype))
        if not finite.all():
            raise ValueError(f"reset state: {key} must be finite ({np.dtype(dtype)}); got "
                             f"{v[~finite.all(axis=1)][0].tolist()}")  # fmt: skip
        with np.errstate(over="ignore"):
            norm = np.sqrt(np.sum(v * v, axis=1))
        if key == "attitude" and np.any(np.abs(norm - 1.0) > 1e-6):
            raise ValueError(f"reset state: attitude must be a unit quaternion (xyzw); got norm "
                             f"{norm[np.argmax(np.abs(norm - 1.0))]:.6g}")  # fmt: skip
        if limits is not None and key in bounds:
            what, unit, name = bounds[key]
            lim = getattr(limits, name)
            if np.max(norm) > lim:
                raise ValueError(f"reset state: {key}: a {what} of {np.max(norm):.6g} {unit} "
                                 f"is above the world's fault limit {name} = {lim:g} "
                                 f"{unit}")  # fmt: skip
        out[key] = v
    return out
