"""A scenario's drones at the start: per-drone parameters, formation and initial state.

:func:`draw_initial` draws them from the scenario's ``seed`` in a fixed order (validation draws
once, assembly reuses the draws); :func:`check_start` checks that no drone starts below the
floor or inside a wall or box, naming the key that put it there.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...loop.initial import Spread, reference_start, sample_start
from ...physics.world import below_floor, box_containing

__all__ = ["check_start", "draw_initial"]


def _rng(seed: int, stream: int) -> np.random.Generator:
    """The generator of random stream ``stream`` of a scenario's ``seed``."""
    return np.random.default_rng([seed, stream])


def draw_initial(v: dict, drone: Any, traj: Any) -> dict:
    """Per-drone parameters and initial state, drawn from ``seed`` (stream 1) in a fixed order.

    Draws mass, inertia, then (:func:`quadsim.loop.initial.sample_start`) position, velocity and
    attitude deviations, each a standard normal ``(n, 3)`` times its std.

    Returns:
        ``per_drone`` (``mass``/``J`` arrays), ``offset`` (formation, (n, 3)), ``base`` (the start
        before formation and noise, (3,)), ``pos``, ``vel``, ``rpy`` ((n, 3) or broadcastable).
    """
    ini, rnd = v["initial"], v["randomize"]
    n = v[""]["n"]
    r = _rng(v[""]["seed"], 1)
    per_drone: dict[str, np.ndarray] = {}
    if rnd["mass_rel"] > 0:
        per_drone["mass"] = drone.mass * (1 + r.uniform(-1, 1, n) * rnd["mass_rel"])
    if rnd["inertia_rel"] > 0:
        scale = 1 + r.uniform(-1, 1, (n, 3)) * rnd["inertia_rel"]
        per_drone["J"] = np.asarray(drone.J)[None] * (scale[:, :, None] * scale[:, None, :]) ** 0.5
    offset = np.zeros((n, 3))
    if rnd["spacing"] > 0:
        side = math.ceil(math.sqrt(n))
        ij = np.stack([np.arange(n) % side, np.arange(n) // side], axis=1).astype(float)
        offset[:, :2] = (ij - (side - 1) / 2) * rnd["spacing"]
    if ini["start_on_reference"]:
        base, vel, yaw = reference_start(traj)
        vel = np.broadcast_to(vel, (n, 3))
        rpy = np.array([*np.deg2rad(ini["rpy_deg"][:2]), yaw])
    else:
        base, vel = np.asarray(ini["pos"]), np.asarray(ini["vel"])
        rpy = np.deg2rad(ini["rpy_deg"])
    start = sample_start(
        r,
        n,
        pos=base,
        vel=vel,
        rpy=rpy,
        offset=offset,
        spread=_spreads(rnd),
    )
    out = {"per_drone": per_drone, "offset": offset, "base": base}
    if rnd["ang_vel_max"] > 0:  # drawn last: the other draws stay as they were without it
        out["ang_vel"] = np.asarray(ini["ang_vel"]) + start.ang_vel
    return out | {"pos": start.pos, "vel": start.vel, "rpy": start.rpy}


def _spreads(rnd: dict) -> dict:
    """The initial-state spreads of ``[randomize]``: normal (``*_std``) or uniform
    (``*_range``) per quantity, body rates in a ball (``ang_vel_max``, when set)."""  # noqa: D205, D209
    def one(std: float, half: list) -> Spread:
        return Spread("uniform", tuple(half)) if any(half) else Spread("normal", std)

    out = {
        "pos": one(rnd["pos_std"], rnd["pos_range"]),
        "vel": one(rnd["vel_std"], rnd["vel_range"]),
        "rpy": one(math.radians(rnd["rpy_std_deg"]), list(np.radians(rnd["rpy_range_deg"]))),
    }
    if rnd["ang_vel_max"] > 0:
        out["ang_vel"] = Spread("ball", rnd["ang_vel_max"])
    return out


def check_start(v: dict, world: Any, init: dict, fail: Any) -> None:
    """No drone starts below the floor or inside a wall or box; name the key that put it there.

    Args:
        v: Validated values (section -> key -> value).
        world: The scenario's :class:`~quadsim.physics.world.World`.
        init: The draws of :func:`draw_initial` (``base``, ``offset``, ``pos``).
        fail: The error builder of the file (:func:`quadsim.app.scenario.locations.failer`).

    Raises:
        ValueError: The key that put a drone there (``initial.pos``, ``trajectory.center`` or
            ``waypoints``, ``randomize.spacing``, ``randomize.pos_std``), and where it would start.
    """
    walls = len(v["world"]["walls"])

    def first(points: np.ndarray) -> tuple[int, str] | None:
        """The first blocked point: its drone and what blocks it."""
        pts = np.broadcast_to(points, (v[""]["n"], 3))
        floor, box = below_floor(world, pts), box_containing(world, pts)
        bad = np.flatnonzero(floor | (box >= 0))
        if bad.size == 0:
            return None
        i, j = int(bad[0]), int(box[bad[0]])
        if floor[i]:
            why = f"below the floor (world.ground_height = {world.ground.height})"
        else:
            why = f"inside world.walls[{j}]" if j < walls else f"inside world.boxes[{j - walls}]"
        return i, f"drone {i} would start at {np.round(pts[i], 6).tolist()}, {why}"

    base = init["base"]
    hit = first(base)
    if hit is not None:
        if not v["initial"]["start_on_reference"]:
            raise fail("initial", "pos", hit[1].replace("drone 0 would start", "the start is"))
        traj = v["trajectory"]
        key = "waypoints" if traj["kind"] == "min_snap" else "center"
        msg = hit[1].replace("drone 0 would start", "the reference starts")
        raise fail("trajectory", key, f"initial.start_on_reference: {msg}")
    hit = first(base + init["offset"])
    if hit is not None:
        raise fail("randomize", "spacing", f"the formation: {hit[1]}")
    hit = first(init["pos"])
    if hit is not None:
        raise fail("randomize", "pos_std", f"the random draw (seed = {v['']['seed']}): {hit[1]}")
