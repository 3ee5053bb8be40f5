"""Checks across a scenario's keys: impossible combinations and ranges one key cannot express.

Run on values whose types and signs :func:`quadsim.app.scenario.validate.validate_doc` has
already checked key by key; each error names the key to change (through ``fail``,
:func:`quadsim.app.scenario.locations.failer`). :func:`check_run` gives the notices to print
before a validated scenario flies (the estimates and advice of :mod:`quadsim.app.preflight`).
"""

from __future__ import annotations

import math
import tomllib
from typing import Any

import numpy as np

from ...loop.brain import Sensors, loop_periods
from ...loop.control import load_gains
from ...loop.control.gains import thrust_cap
from ...physics.params import load_params
from ...physics.sensors import dropout_thresholds
from ..preflight import (
    SAY_TIME_ABOVE,
    dt_advice,
    estimate_time,
    fastest_time_constant,
    format_duration,
)
from .locations import failer
from .presets import gains_name, mocap_params
from .schema import type_ok

__all__ = ["check_combinations", "check_ranges", "check_run"]


def check_combinations(v: dict, fail: Any) -> None:
    """Impossible combinations, named by key path."""
    _check_spreads(v["randomize"], fail)
    _check_waypoints(v["trajectory"], fail)
    _check_steps(v, fail)
    _check_mocap(v, fail)
    _check_estimator(v, fail)
    _check_obstacles(v["world"], fail)


def _check_spreads(rnd: dict, fail: Any) -> None:
    """``[randomize]``: spreads small enough to draw from, and one of std and range per quantity."""
    for key in ("pos_std", "vel_std", "rpy_std_deg", "pos_range", "vel_range", "rpy_range_deg",
                "ang_vel_max"):  # fmt: skip
        if max(np.atleast_1d(rnd[key])) > 1e6:  # a draw from it would overflow the state
            raise fail("randomize", key, f"must be at most 1e6; got {rnd[key]!r}")
    for std, rng in (("pos_std", "pos_range"), ("vel_std", "vel_range"),
                     ("rpy_std_deg", "rpy_range_deg")):  # fmt: skip
        if rnd[std] > 0 and any(rnd[rng]):
            raise fail("randomize", rng, f"give one of randomize.{std} and randomize.{rng}")


def _check_waypoints(traj: dict, fail: Any) -> None:
    """A minimum-snap reference: at least two finite waypoints, one positive time per segment."""
    if traj["kind"] != "min_snap":
        return
    wps = traj["waypoints"]
    if wps is None:
        raise fail("trajectory", "waypoints", "required for trajectory.kind = 'min_snap'")
    if len(wps) < 2 or not all(type_ok("vec3", w) and all(map(_finite, w)) for w in wps):
        raise fail("trajectory", "waypoints", "expected a list of at least two finite [x, y, z]")
    times = traj["segment_times"]
    if times is not None and (len(times) != len(wps) - 1 or min(times) <= 0):
        raise fail(
            "trajectory",
            "segment_times",
            f"expected {len(wps) - 1} positive durations; got {times!r}",
        )


def _check_steps(v: dict, fail: Any) -> None:
    """The duration holds a step; the integrator suits the backend and the model."""
    sim = v["sim"]
    if v[""]["duration"] < sim["dt"]:
        raise fail("", "duration", f"shorter than one step (sim.dt = {sim['dt']})")
    if sim["integrator"] == "rk45" and sim["backend"] != "numpy":
        raise fail("sim", "integrator", "rk45 runs on the numpy backend only")
    if sim["model"] == "euler_zyx" and sim["integrator"] == "geometric":
        raise fail("sim", "integrator", "geometric integration needs a quaternion model")


def _check_mocap(v: dict, fail: Any) -> None:
    """Motion capture: latency a multiple of its period, dropout and gap, rate against ``dt``."""
    sim = v["sim"]
    lat, rate = v["sensors"]["mocap_latency"], v["sensors"]["mocap_rate"]
    period = sim["dt"] if rate is None else 1.0 / rate
    what = f"sim.dt = {sim['dt']}" if rate is None else f"its period 1/mocap_rate = {period:g}"
    if lat < 0 or abs(lat / period - round(lat / period)) > 1e-9:
        raise fail("sensors", "mocap_latency", f"must be a non-negative multiple of {what} s; "
                   f"got {lat}")  # fmt: skip
    sv = v["sensors"]
    for key in ("mocap_dropout", "mocap_gap"):
        try:
            dropout_thresholds(mocap_params(sv | {"mocap_pos_std": 0.0}, sim["dt"]))
        except ValueError as e:
            if key.removeprefix("mocap_") in str(e).split()[0]:
                raise fail("sensors", key, str(e)) from None
    if rate is not None:
        try:
            loop_periods(sim["dt"], None, Sensors(mocap=mocap_params(v["sensors"], sim["dt"])))
        except ValueError as e:
            raise fail("sensors", "mocap_rate", f"{rate:g} Hz: {e}") from None


def _check_estimator(v: dict, fail: Any) -> None:
    """An estimator (not the truth) has an IMU and a position sensor to read."""
    est = v["estimator"]["kind"]
    if est != "truth" and v["sensors"]["imu"] == "none":
        raise fail("estimator", "kind", f"{est!r} needs an IMU (sensors.imu)")
    if est != "truth" and v["sensors"]["mocap_pos_std"] is None and v["sensors"]["gnss"] == "none":
        raise fail("estimator", "kind", f"{est!r} needs a position sensor: motion capture "
                   "(sensors.mocap_pos_std) or GNSS (sensors.gnss)")  # fmt: skip


def _check_obstacles(world: dict, fail: Any) -> None:
    """Each entry of ``world.walls`` and ``world.boxes`` has the expected keys and values."""
    for i, w in enumerate(world["walls"]):
        if not (
            isinstance(w, dict)
            and w.get("axis") in ("x", "y", "z")
            and _finite(w.get("at"))
            and w.get("side", 1) in (1, -1)
            and set(w) <= {"axis", "at", "side"}
        ):
            raise fail(
                "world",
                "walls",
                f"entry {i}: expected {{axis = 'x'|'y'|'z', at = finite number, side = 1|-1}}; "
                f"got {w!r}",
            )
    for i, b in enumerate(world["boxes"]):
        if not (
            isinstance(b, dict)
            and set(b) == {"lo", "hi"}
            and type_ok("vec3", b["lo"])
            and type_ok("vec3", b["hi"])
            and all(map(_finite, b["lo"] + b["hi"]))
            and all(lo < hi for lo, hi in zip(b["lo"], b["hi"], strict=True))
        ):
            raise fail(
                "world",
                "boxes",
                f"entry {i}: expected {{lo = [x, y, z], hi = [x, y, z]}}, finite, with lo < hi; "
                f"got {b!r}",
            )


def _finite(x: Any) -> bool:
    """A finite number (not a bool)."""
    return type_ok("float", x) and math.isfinite(x)


def check_ranges(v: dict, fail: Any) -> None:
    """Ranges that one key's type and sign do not express."""
    for key in ("mass_rel", "inertia_rel"):
        f = v["randomize"][key]
        if not f < 1.0:
            raise fail("randomize", key, f"must be < 1 (a fraction of the nominal value); got {f}")
    e = v["world"]["restitution"]
    if e is not None and not 0.0 <= e <= 1.0:
        raise fail("world", "restitution", f"must lie in [0, 1]; got {e}")


def check_run(sc: Any) -> list[str]:
    """Notices to print before a run: its estimated time when long, step-size advice.

    Args:
        sc: A validated :class:`~quadsim.app.scenario.Scenario`.

    Returns:
        Lines to show the user (estimated time of a long run, step-size advice). The memory
        check (:func:`quadsim.app.preflight.memory_problem`) runs earlier, in
        :func:`quadsim.app.scenario.load_scenario`, before anything is allocated per drone.
    """
    v = sc.values
    n, sim = v[""]["n"], v["sim"]
    steps = max(1, round(v[""]["duration"] / sim["dt"]))
    notices = []
    est = estimate_time(n, steps, sim["backend"], v["output"]["log_every"])
    if est > SAY_TIME_ABOVE:
        notices.append(
            f"quadsim: {steps:,} steps of {n} drone{'s' * (n != 1)}: this run will take about "
            f"{format_duration(est)}"
        )
    if sc.prepared is not None:  # the drone with its overrides, and its gains, as validated
        drone, gains = sc.prepared.drone, sc.prepared.gains
    else:
        drone = load_params(v["drone"]["preset"])
        gains = load_gains(gains_name(v), drone=drone, dt=sim["dt"])
    tau, what = fastest_time_constant(drone, gains)
    advice = dt_advice(sim["dt"], sim["integrator"], sim["dtype"], tau, what)
    if advice:
        notices.append(f"quadsim: warning: {_where(sc, 'sim.dt')}: {advice}")
    notices += _ignored_start(sc)
    if sc.prepared is not None:
        short = _thrust_short(sc.prepared.trajectory, v[""]["duration"], drone, gains)
        if short:
            notices.append(f"quadsim: warning: {_where(sc, 'trajectory.kind')}: {short}")
    return notices


def _ignored_start(sc: Any) -> list[str]:
    """Warnings for ``initial.pos`` and ``initial.vel`` written in the file while
    ``initial.start_on_reference`` puts the drones on the reference instead."""  # noqa: D205, D209
    if not sc.values["initial"]["start_on_reference"] or not sc.text:
        return []
    try:
        written = tomllib.loads(sc.text).get("initial", {})
    except tomllib.TOMLDecodeError:  # validated already; a text that differs says nothing here
        return []
    return [f"quadsim: warning: {_where(sc, f'initial.{k}')}: has no effect: "
            "initial.start_on_reference (true by default) starts the drones on the reference; "
            "set it to false to start there" for k in ("pos", "vel")
            if isinstance(written, dict) and k in written]  # fmt: skip


def _thrust_short(trajectory: Any, duration: float, drone: Any, gains: Any) -> str | None:
    """Why the controller's thrust cap falls short of what the reference needs, ``m |a_ref - g|``
    at its peak over the flight (2001 samples), or ``None``. A cap below the weight is warned
    about where the gains are loaded (:func:`quadsim.loop.control.gains.hover_problem`)."""  # noqa: D205, D209
    if not hasattr(gains, "thrust_max"):
        return None
    cap, weight = thrust_cap(gains, drone), float(gains.mass * gains.gravity)
    t = np.linspace(0.0, float(duration), 2001)
    try:
        acc = np.asarray(trajectory(t).acc, dtype=np.float64)
    except Exception:  # a reference that takes one time at a time: not checked here
        return None
    if cap < weight or acc.shape[-1:] != (3,) or acc.ndim < 2:
        return None
    need = float(gains.mass) * np.linalg.norm(acc + np.array([0.0, 0.0, float(gains.gravity)]),
                                               axis=-1)
    need = need.reshape(t.shape[0], -1).max(axis=-1)
    i = int(np.argmax(need))
    if need[i] <= cap:
        return None
    return (f"the reference needs up to {need[i]:.3g} N of thrust (at t = {t[i]:.3g} s) and the "
            f"controller's cap is {cap:.3g} N (weight {weight:.3g} N): the drone will fall "
            "behind it; fly it slower or smaller, or raise max_thrust_ratio")  # fmt: skip


def _where(sc: Any, path: str) -> str:
    """``FILE: KEY (line N)`` for a scenario key (the line where the file sets it, if it does)."""
    section, _, key = path.rpartition(".")
    return str(failer(sc.source, sc.text)(section, key, "")).removesuffix(": ")
