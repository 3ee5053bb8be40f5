r"""World: ground, axis-aligned walls and boxes, bounds, crash and fault flags.

Applied after each integration step to the drone's centre of mass (a point), branch-free
(``where``), on any backend:

* **Ground** at height ``h`` (world z up). Sticky (seed 001, ``restitution=None``): below the
  floor the drone is put back on it, its linear and angular velocities are zeroed, and it is
  *landed*. With a restitution ``e`` the vertical velocity becomes ``-e v_z`` and Coulomb friction
  ``μ`` removes up to ``μ (1 + e) |v_z|`` of the horizontal speed. An impact faster than
  ``crash_speed`` [m/s] is a crash.
* **Boxes** (axis-aligned, ``lo < p < hi``) and walls (a box unbounded on all but one side, e.g.
  seed 001's wall at x = 3 m, :func:`wall`) and leaving the **bounds** box are crashes.
* A **crash** records its time; a crashed drone stays where it crashed (previous position,
  velocities zeroed) for the rest of the run.
* A **fault**: a non-finite state component, a speed above ``max_speed`` [m/s], a body rate above
  ``max_rate`` [rad/s] or a rotor speed above ``max_rotor`` [RPM]. The drone keeps its last good
  state, and the step index and the quantity are recorded; the rest of the batch goes on.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

__all__ = [
    "FAULT_NAMES",
    "Box",
    "Ground",
    "Limits",
    "Status",
    "World",
    "apply",
    "below_floor",
    "blocked",
    "box_containing",
    "out_of_bounds",
    "wall",
]

INF = math.inf

FAULT_NAMES = ("none", "non-finite state", "speed", "body rate", "rotor speed")
"""Meaning of :attr:`Status.fault_code`."""


class Ground(NamedTuple):
    """A horizontal floor.

    Attributes:
        height: Floor height [m].
        restitution: ``None`` for seed 001's sticky floor, else the coefficient ``e`` in [0, 1].
        friction: Coulomb friction coefficient ``μ`` (with restitution).
        crash_speed: Vertical impact speed [m/s] above which touching the floor is a crash.
    """

    height: float = 0.0
    restitution: float | None = None
    friction: float = 0.0
    crash_speed: float = INF


class Box(NamedTuple):
    """An axis-aligned box ``lo < p < hi`` [m] (use ``±inf`` for unbounded sides)."""

    lo: tuple[float, float, float]
    hi: tuple[float, float, float]


def wall(axis: str, at: float, side: int = +1) -> Box:
    """A wall: the half-space beyond ``at`` [m] along ``axis`` (``side=+1``) or before it (-1)."""
    i = "xyz".index(axis)
    lo, hi = [-INF] * 3, [INF] * 3
    (lo if side > 0 else hi)[i] = at
    return Box(tuple(lo), tuple(hi))


class Limits(NamedTuple):
    """Fault thresholds: speeds beyond these flag the drone (``inf`` disables)."""

    max_speed: float = 1e3
    max_rate: float = 1e3
    max_rotor: float = 1e6


class World(NamedTuple):
    """Ground (or ``None``), obstacles, bounds (or ``None``) and fault limits."""

    ground: Ground | None = Ground()
    boxes: tuple[Box, ...] = ()
    bounds: Box | None = None
    limits: Limits = Limits()


def _points(points: Any) -> np.ndarray:
    p = np.asarray(points, dtype=np.float64)
    if p.shape[-1:] != (3,):
        raise ValueError(f"points must have shape (..., 3); got {p.shape}")
    return p


def below_floor(world: World, points: Any) -> np.ndarray:
    """Which points [m], shape ``(..., 3)``, lie below the floor (``z < height``; none without).

    A point exactly on the floor is not below it (a drone may start landed). Pure NumPy, the same
    test :func:`apply` makes.
    """
    p = _points(points)
    if world.ground is None:
        return np.zeros(p.shape[:-1], dtype=bool)
    return p[..., 2] < world.ground.height


def box_containing(world: World, points: Any) -> np.ndarray:
    """Index into ``world.boxes`` of the first box (or wall) holding each point, -1 for none.

    Inside means strictly ``lo < p < hi`` on every axis, as in :func:`apply` (a point on a face
    is outside). Shape ``(...)`` for points of shape ``(..., 3)``.
    """
    p = _points(points)
    out = np.full(p.shape[:-1], -1, dtype=np.int64)
    for i in reversed(range(len(world.boxes))):  # the first box wins
        b = world.boxes[i]
        inside = np.all((p > np.asarray(b.lo)) & (p < np.asarray(b.hi)), axis=-1)
        out = np.where(inside, i, out)
    return out


def out_of_bounds(world: World, points: Any) -> np.ndarray:
    """Which points leave ``world.bounds`` (``p < lo`` or ``p > hi`` on some axis; none without)."""
    p = _points(points)
    if world.bounds is None:
        return np.zeros(p.shape[:-1], dtype=bool)
    b = world.bounds
    return np.any((p < np.asarray(b.lo)) | (p > np.asarray(b.hi)), axis=-1)


def blocked(world: World, points: Any) -> np.ndarray:
    """Which points a drone cannot occupy: below the floor, inside a box or wall, out of bounds."""
    return below_floor(world, points) | (box_containing(world, points) >= 0) | out_of_bounds(
        world, points
    )


class Status(NamedTuple):
    """Per-drone flags, arrays of the batch shape.

    Attributes:
        landed: On the ground this step (bool).
        crashed: Crashed at some step (bool); the drone is frozen.
        crash_time: Time of the crash [s] (NaN if none).
        fault_step: Step index of the first fault (-1 if none); the drone is frozen.
        fault_code: Index into :data:`FAULT_NAMES`.
    """

    landed: Any
    crashed: Any
    crash_time: Any
    fault_step: Any
    fault_code: Any


def _any(ops: Any, conds: list) -> Any:
    out = conds[0]
    for c in conds[1:]:
        out = ops.logical_or(out, c)
    return out


def _all(ops: Any, conds: list) -> Any:
    out = conds[0]
    for c in conds[1:]:
        out = ops.logical_and(out, c)
    return out


def apply(
    x_prev: tuple, x_new: tuple, status: Status, step: Any, t_new: Any, world: World, sl: dict,
    ops: Any,
) -> tuple[tuple, Status]:  # fmt: skip
    """Contacts, crashes and faults after one step, over flat component tuples.

    Args:
        x_prev: State before the step (flat components, layout ``sl``).
        x_new: State after the integrator.
        status: Flags before the step.
        step: Index of this step (0-based), for the fault record.
        t_new: Time after the step [s], for the crash record.
        world: The world.
        sl: Field slices of the layout (``System.slices()``).
        ops: Array namespace.

    Returns:
        ``(x, status)`` after the step.
    """
    x = list(x_new)
    pz = sl["pos"].start + 2
    vel, rates = sl["vel"], sl["ang_vel"]
    false = x_prev[pz] < -INF  # all False, batch shaped (NaN < -inf is False too)
    landed, crash_now = false, false
    g = world.ground
    if g is not None:
        below = x[pz] < g.height
        vz = x[vel.start + 2]
        crash_now = ops.logical_or(crash_now, ops.logical_and(below, -vz > g.crash_speed))
        x[pz] = ops.where(below, g.height, x[pz])
        if g.restitution is None:
            for i in [*range(vel.start, vel.stop), *range(rates.start, rates.stop)]:
                x[i] = ops.where(below, 0.0, x[i])
            landed = below
        else:
            vx, vy = x[vel.start], x[vel.start + 1]
            vh = ops.sqrt(vx * vx + vy * vy)
            cut = g.friction * (1.0 + g.restitution) * ops.abs(vz)
            scale = ops.where(vh > cut, (vh - cut) / ops.where(vh > 0, vh, 1.0), 0.0)
            x[vel.start] = ops.where(below, vx * scale, vx)
            x[vel.start + 1] = ops.where(below, vy * scale, vy)
            x[vel.start + 2] = ops.where(below, -g.restitution * vz, vz)
            landed = ops.logical_and(below, ops.abs(vz) * g.restitution < 1e-3)
    p = [x[i] for i in range(sl["pos"].start, sl["pos"].stop)]
    for b in world.boxes:
        inside = _all(ops, [ops.logical_and(p[i] > b.lo[i], p[i] < b.hi[i]) for i in range(3)])
        crash_now = ops.logical_or(crash_now, inside)
    if world.bounds is not None:
        b = world.bounds
        out = _any(ops, [ops.logical_or(p[i] < b.lo[i], p[i] > b.hi[i]) for i in range(3)])
        crash_now = ops.logical_or(crash_now, out)

    lim = world.limits
    finite = _all(ops, [ops.abs(c) < INF for c in x])  # NaN compares False; CasADi folds c == c
    v = x[vel]
    w = x[rates]
    speed_bad = v[0] * v[0] + v[1] * v[1] + v[2] * v[2] > lim.max_speed**2
    rate_bad = w[0] * w[0] + w[1] * w[1] + w[2] * w[2] > lim.max_rate**2
    rotor_bad = false
    if "rotor_vel" in sl:
        rotor_bad = _any(ops, [ops.abs(c) > lim.max_rotor for c in x[sl["rotor_vel"]]])
    zero = 0 * status.fault_code
    code = ops.where(rotor_bad, zero + 4, zero)
    for bad, k in ((rate_bad, 3), (speed_bad, 2), (ops.logical_not(finite), 1)):
        code = ops.where(bad, zero + k, code)
    frozen = ops.logical_or(status.crashed, status.fault_step >= 0)
    fault_now = ops.logical_and(code > 0, ops.logical_not(frozen))
    crash_now = ops.logical_and(ops.logical_and(crash_now, ops.logical_not(frozen)),
                                ops.logical_not(fault_now))  # fmt: skip
    keep = ops.logical_or(frozen, ops.logical_or(fault_now, crash_now))
    out = []
    for i, (a, b) in enumerate(zip(x_prev, x, strict=True)):
        held = a
        if vel.start <= i < vel.stop or rates.start <= i < rates.stop:
            held = ops.where(crash_now, 0.0, a)  # a crashed drone stops where it crashed
        out.append(ops.where(keep, held, b))
    new = Status(
        landed=ops.logical_and(landed, ops.logical_not(keep)),
        crashed=ops.logical_or(status.crashed, crash_now),
        crash_time=ops.where(crash_now, t_new, status.crash_time),
        fault_step=ops.where(fault_now, 0 * status.fault_step + step, status.fault_step),
        fault_code=ops.where(fault_now, code, status.fault_code),
    )
    return tuple(out), new
