r"""Where a flight starts: its reference, built from a name, and initial states drawn around it.

Shared by scenario files (:mod:`quadsim.app.scenario`) and the Gymnasium environments
(:mod:`quadsim.app.envs`), so both build a reference and sample a start the same way.

**Reference** (:func:`make_trajectory`): a trajectory of :mod:`quadsim.loop.trajectories` from its
kind (``hover``, ``step``, ``circle``, ``lemniscate``, ``min_snap``) and keyword parameters named
as in a scenario's ``[trajectory]`` section.

**Start** (:func:`sample_start`): nominal values (the reference at ``t = 0`` or given ones) plus
per-drone offsets ``o_i`` (formations) and random deviations, drawn from one
``numpy.random.Generator`` in the order the caller lists them:

.. math::

    p_i = p_0 + o_i + δp_i, \quad v_i = v_0 + δv_i, \quad (φ, θ, ψ)_i = (φ_0, θ_0, ψ_0) + δ_i,
    \quad ω_i = ω_0 + δω_i,

each ``δ`` per axis either ``Normal(0, σ²)`` (:class:`Spread` ``"normal"``, ``σ``) or
``Uniform(-h, h)`` (``"uniform"``, ``h``, one number or one per axis).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np

from . import trajectories as tr

__all__ = ["TRAJECTORY_KINDS", "Spread", "Start", "make_trajectory", "sample_start"]

TRAJECTORY_KINDS = ("hover", "step", "circle", "lemniscate", "min_snap")
"""Kinds :func:`make_trajectory` builds."""


def make_trajectory(
    kind: str,
    *,
    center: Any = (0.0, 0.0, 1.0),
    yaw: float = 0.0,
    radius: float = 1.0,
    speed: float = 1.0,
    size: float = 1.0,
    period: float | None = None,
    target: Any = (1.0, 0.0, 1.0),
    t_step: float = 1.0,
    rise_time: float = 0.0,
    waypoints: Any = None,
    segment_times: Any = None,
) -> Callable:
    """The trajectory ``t -> Reference`` of ``kind`` (keys as in a scenario's ``[trajectory]``).

    Args:
        kind: One of :data:`TRAJECTORY_KINDS`.
        center: Hover point; centre of the circle and the figure eight; start of a step [m].
        yaw: Constant yaw [rad] (all kinds).
        radius: Circle radius [m].
        speed: Circle speed; figure-eight mean speed when ``period`` is ``None``; minimum-snap
            mean speed when ``segment_times`` is ``None`` [m/s].
        size: Figure-eight half width [m].
        period: Figure-eight period [s] (``None``: from ``speed``).
        target: Step: position after the step [m].
        t_step: Step: time of the step [s].
        rise_time: Step: 0 for a jump, else the duration of a smooth move [s].
        waypoints: Minimum snap: ``(k, 3)`` waypoints [m].
        segment_times: Minimum snap: ``k - 1`` segment durations [s] (``None``: from ``speed``).

    Raises:
        ValueError: An unknown kind, or parameters the trajectory rejects.
    """
    if kind == "hover":
        return tr.Hover(pos=tuple(center), yaw=yaw)
    if kind == "step":
        return tr.Step(
            start=tuple(center), end=tuple(target), t_step=t_step, rise_time=rise_time, yaw=yaw
        )
    if kind == "circle":
        return tr.Circle(radius=radius, speed=speed, center=tuple(center), yaw=yaw)
    if kind == "lemniscate":
        timing = {"speed": speed} if period is None else {"period": period}
        return tr.Lemniscate(size=size, center=tuple(center), yaw=yaw, **timing)
    if kind == "min_snap":
        wps = np.asarray(waypoints, dtype=float)
        if segment_times is not None:
            return tr.MinSnap(wps, durations=segment_times, yaw=yaw)
        return tr.MinSnap(wps, speed=speed, yaw=yaw)
    raise ValueError(f"unknown trajectory kind {kind!r}; choose from {list(TRAJECTORY_KINDS)}")


class Spread(NamedTuple):
    """How one initial quantity deviates from its nominal value, per axis.

    Attributes:
        kind: ``"normal"`` (``scale`` is the standard deviation σ), ``"uniform"`` (``scale``
            is the half-width h of ``[-h, h]``) or ``"ball"`` (uniform in the ball of radius
            ``scale``, one number: a direction uniform on the sphere from three normals, the
            radius ``scale u^(1/3)``; 4 variates per draw).
        scale: One number, or one per axis ``(3,)`` (same unit as the quantity).
    """

    kind: str
    scale: Any

    def draw(self, rng: np.random.Generator, m: int) -> np.ndarray:
        """``m`` deviations ``(m, 3)`` drawn from ``rng`` (``3 m`` variates, row-major)."""
        if self.kind == "normal":
            return rng.normal(0, 1, (m, 3)) * self.scale
        if self.kind == "ball":
            d = rng.normal(0, 1, (m, 3))
            d /= np.maximum(np.linalg.norm(d, axis=1, keepdims=True), 1e-300)
            return d * (float(self.scale) * rng.uniform(0.0, 1.0, (m, 1)) ** (1 / 3))
        if self.kind != "uniform":
            raise ValueError(
                f"Spread kind must be 'normal', 'uniform' or 'ball'; got {self.kind!r}"
            )
        if np.ndim(self.scale) == 0:
            return rng.uniform(-self.scale, self.scale, (m, 3))
        # per axis: the same distribution, computed as (2u - 1) h
        return rng.uniform(-1.0, 1.0, (m, 3)) * tuple(self.scale)


class Start(NamedTuple):
    """Initial states of ``m`` drones; a field is ``None`` when neither given nor drawn.

    Attributes:
        pos: Position ``(m, 3)`` [m] (or broadcastable).
        vel: Velocity, world frame [m/s].
        rpy: Roll, pitch, yaw [rad].
        ang_vel: Body rates [rad/s].
    """

    pos: Any
    vel: Any
    rpy: Any
    ang_vel: Any


def reference_start(trajectory: Callable, t: Any = 0.0) -> tuple[np.ndarray, np.ndarray, float]:
    """Position (3,) [m], velocity (3,) [m/s] and yaw [rad] of ``trajectory`` at ``t``."""
    ref = trajectory(t)
    return (
        np.asarray(ref.pos, dtype=float),
        np.asarray(ref.vel, dtype=float),
        float(ref.yaw),
    )


def sample_start(
    rng: np.random.Generator,
    m: int,
    *,
    pos: Any = None,
    vel: Any = None,
    rpy: Any = None,
    ang_vel: Any = None,
    offset: Any = None,
    spread: Mapping[str, Spread] | None = None,
) -> Start:
    """Initial states of ``m`` drones: nominal values, offsets, then random deviations.

    Args:
        rng: Generator of the deviations; drawn in the order of ``spread``'s keys, ``3 m``
            variates each (a zero scale still draws, so one key's scale never shifts another's
            draws).
        m: Number of drones.
        pos: Nominal position [m] ((3,) or (m, 3)); ``None``: zero.
        vel: Nominal velocity [m/s]; ``None``: zero.
        rpy: Nominal roll, pitch, yaw [rad]; ``None``: zero.
        ang_vel: Nominal body rates [rad/s]; ``None``: zero.
        offset: Per-drone position offsets ``(m, 3)`` [m] added before the deviation.
        spread: Field name (``pos``, ``vel``, ``rpy``, ``ang_vel``) -> :class:`Spread`.

    Returns:
        :class:`Start`; a field with neither a nominal value nor a spread is ``None``, a field
        with only a spread is the deviation itself.
    """
    out = {"pos": pos, "vel": vel, "rpy": rpy, "ang_vel": ang_vel}
    if offset is not None:
        out["pos"] = (0.0 if pos is None else pos) + offset
    for key, s in (spread or {}).items():
        if key not in out:
            raise ValueError(f"spread: unknown field {key!r}; use {list(out)}")
        d = s.draw(rng, m)
        out[key] = d if out[key] is None else out[key] + d
    return Start(**out)
