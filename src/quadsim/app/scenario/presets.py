"""Names that stand for files: presets and paths, loaded into the objects of a scenario.

:func:`load_named` is the one home of the rule for a preset name or file path (an unknown
preset, a missing or unreadable file, or what the loader rejects names the key);
:func:`is_path` tells the two apart and :func:`gains_name` names the controller's gains file.
The loaders turn validated sections into objects: the drone (:func:`load_drone`), the world
(:func:`load_world`), the reference (:func:`load_trajectory`), the controller part (:mod:`.parts`)
and the motion capture (:func:`mocap_params`); :func:`check_imu` checks the IMU.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from ...loop.brain import Sensors, loop_periods
from ...loop.initial import make_trajectory
from ...physics.envelope import envelope
from ...physics.params import PhysicalError, check_physical, list_presets, load_params
from ...physics.sensors import MocapParams, list_imu_presets, load_imu
from ...physics.world import Box, Ground, World, wall

__all__ = ["check_imu", "gains_name", "is_path", "load_drone", "load_named",
           "load_trajectory", "load_world", "mocap_params"]  # fmt: skip


def load_named(fail: Any, section: str, key: str, name: str, load: Any, names: list[str],
               what: str, avail: str, none: bool = False) -> Any:  # fmt: skip
    """``load(name)`` of a preset name or file path given at ``section.key``; an unknown
    preset, a missing or unreadable file, or what the loader rejects names the key (the one
    home of that rule for the drone and the sensors; ``none``: "none" is also a choice)."""  # noqa: D205, D209
    if not is_path(name) and name not in names:
        shown = ["none", *names] if none else names
        raise fail(section, key, f"unknown {what} {name!r}; {avail}: {shown}")
    if is_path(name) and not Path(name).is_file():
        label = what.removesuffix(" preset").removesuffix("preset") or "preset"
        raise fail(section, key, f"{label} file not found: {name}")
    try:
        return load(name)
    except ValueError as e:
        raise fail(section, key, str(e)) from None
    except OSError as e:
        raise fail(section, key, f"cannot read {name}: {e.strerror or e}") from None


def is_path(name: str) -> bool:
    """Whether a preset argument is a path (as in :func:`quadsim.physics.params.load_params`)."""
    return name.endswith(".toml") or any(c in name for c in {os.sep, os.altsep or "/", "/"})


def gains_name(v: dict) -> str:
    """The gains file that validated values ``v`` name: ``controller.gains``, else the default
    ``<stem of drone.preset>_<controller.kind>`` (a file name or path for
    :func:`quadsim.loop.control.load_gains`)."""  # noqa: D205, D209
    ct = v["controller"]
    return ct["gains"] or f"{Path(v['drone']['preset']).stem}_{ct['kind']}"


def load_drone(v: dict, fail: Any) -> Any:
    """The nominal drone: the preset (``drone.preset``) with the overrides, physically checked."""
    dr = v["drone"]
    drone = load_named(fail, "drone", "preset", dr["preset"], load_params, list_presets(),
                       "preset", "available presets")  # fmt: skip
    over: dict[str, Any] = {}
    if dr["mass"] is not None:
        over["mass"] = dr["mass"]
    if dr["inertia"] is not None:
        over["J"] = np.diag(dr["inertia"])
    if dr["drag_coef"] is not None:
        over["drag_coef"] = dr["drag_coef"]
    try:
        check_physical(over)
    except PhysicalError as e:
        raise fail("drone", {"J": "inertia"}.get(e.key, e.key), e.reason) from None
    if "J" in over:
        over["J_inv"] = np.linalg.inv(over["J"])
    drone = drone._replace(**over)
    try:
        envelope(drone)
    except ValueError as e:  # the simulator starts its rotors at hover speed
        key = "mass" if dr["mass"] is not None else "preset"
        raise fail("drone", key, f"cannot hover, so it cannot be flown: {e}") from None
    return drone


def load_world(v: dict) -> Any:
    """The :class:`~quadsim.physics.world.World` of ``[world]`` (walls first, then boxes)."""
    wd = v["world"]
    ground = None
    if wd["ground"]:
        ground = Ground(
            height=wd["ground_height"],
            restitution=wd["restitution"],
            friction=wd["friction"],
            crash_speed=wd["crash_speed"],
        )
    boxes = tuple(wall(w["axis"], float(w["at"]), int(w.get("side", 1))) for w in wd["walls"])
    boxes += tuple(Box(tuple(b["lo"]), tuple(b["hi"])) for b in wd["boxes"])
    return World(ground=ground, boxes=boxes)


def check_imu(v: dict, fail: Any) -> None:
    """The IMU of ``sensors.imu`` (if any) loads, and its sample period fits ``sim.dt``."""
    name = v["sensors"]["imu"]
    if name == "none":
        return
    imu = load_named(fail, "sensors", "imu", name, load_imu, list_imu_presets(), "IMU preset",
                     "available", none=True)  # fmt: skip
    try:  # the IMU's period against the physics step (the loop's rule, checked once here)
        loop_periods(v["sim"]["dt"], None, Sensors(imu))
    except ValueError as e:
        raise fail("sensors", "imu", f"{e}; choose sim.dt to fit") from None


def load_trajectory(t: dict) -> Any:
    """The reference of ``[trajectory]`` (:func:`quadsim.loop.initial.make_trajectory`)."""
    params = {key: val for key, val in t.items() if key != "kind"}
    return make_trajectory(t["kind"], **params)


def mocap_params(sv: dict, dt: float) -> Any:
    """The :class:`~quadsim.physics.sensors.MocapParams` of a ``[sensors]`` section."""
    rate = sv["mocap_rate"]
    return MocapParams(pos_std=sv["mocap_pos_std"], att_std=sv["mocap_att_std"],
                       latency=sv["mocap_latency"],
                       rate=1.0 / dt if rate is None else rate, dropout=sv["mocap_dropout"],
                       gap=sv["mocap_gap"])  # fmt: skip
