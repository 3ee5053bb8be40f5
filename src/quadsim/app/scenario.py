"""Scenario files: one TOML file describes a flight; validated before anything runs.

The schema is :data:`SCHEMA` (section -> key -> :class:`Key`), the one place where defaults live;
``docs/scenarios.md`` prints it (:func:`schema_markdown`, checked by a test). Loading turns
strings into objects (presets, integrators, controllers, trajectories, sensors, world) here and
nowhere else. Every error is a ``ValueError`` that names the file, the key path (``trajectory.
radius``), the line where it can be found, and what was expected.

Example (``examples/figure8_wind.toml``)::

    duration = 12.0
    seed = 1
    [drone]
    preset = "cf2x_L250"
    [trajectory]
    kind = "lemniscate"
    [wind]
    turbulence = "moderate"
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

__all__ = [
    "SCHEMA",
    "Assembly",
    "Key",
    "Scenario",
    "build",
    "default_backend",
    "fly_assembly",
    "load_scenario",
    "resolved_files",
    "schema_markdown",
    "validate_doc",
]


class Key(NamedTuple):
    """One scenario key: expected type, default (``REQUIRED`` if none) and meaning."""

    type: str  # "float", "int", "bool", "str", "vec3", "list", "table", "floats"
    default: Any
    doc: str
    choices: tuple | None = None
    positive: bool = False
    nonneg: bool = False


REQUIRED = object()
_NONE = None

SCHEMA: dict[str, dict[str, Key]] = {
    "": {
        "name": Key("str", "", "Free-form name of the run (shown in the summary)."),
        "duration": Key("float", 10.0, "Simulated time [s].", positive=True),
        "seed": Key(
            "int", 0, "Seed of every random draw (wind, sensors, randomisation); >= 0.", nonneg=True
        ),
        "n": Key("int", 1, "Number of drones flown in one batch.", positive=True),
    },
    "drone": {
        "preset": Key(
            "str", "cf2x_L250", "Preset name (`quadsim presets`) or path to a TOML file."
        ),
        "mass": Key("float", _NONE, "Override: mass [kg].", positive=True),
        "inertia": Key(
            "vec3",
            _NONE,
            "Override: diagonal inertia [kg m^2]; positive, J1 + J2 >= J3 and permutations.",
        ),
        "drag_coef": Key("float", _NONE, "Override: quadratic drag k_d [N s^2/m^2], >= 0."),
    },
    "sim": {
        "model": Key(
            "str", "first_principles", "Dynamics model.", choices=("first_principles", "euler_zyx")
        ),
        "integrator": Key(
            "str",
            "rk4",
            "Integrator.",
            choices=("euler", "semi_implicit", "rk4", "geometric", "rk45"),
        ),
        "dt": Key("float", 0.002, "Physics and control step [s].", positive=True),
        "backend": Key(
            "str",
            "auto",
            "Array backend; `auto`: the fastest available, `native` where CasADi and a C compiler "
            "are there, else `numpy` (always `numpy` for the rk45 integrator), resolved when the "
            "file is loaded.",
            choices=("numpy", "jax", "torch", "native", "auto"),
        ),
        "dtype": Key("str", "float64", "Floating-point type.", choices=("float32", "float64")),
        "rotor_dynamics": Key("bool", True, "Rotor speeds lag the command (motor model)."),
        "command": Key(
            "str", "rpm", "What reaches the motors: `rpm`, the rotor speeds the controller asks "
            "for (an ideal supply); `pwm`, those speeds through the battery's PWM chain "
            "(`sim.power`): capped at what full PWM gives at the sagging voltage, with the "
            "battery's voltage, current, power and charge logged and the energy in the summary.",
            choices=("rpm", "pwm"),
        ),
        "power": Key(
            "str", "cf21_stock", "Power preset (battery, PWM-and-voltage motor model, power; "
            "`quadsim.physics.power`) or path to a TOML file; with `sim.command = \"pwm\"`.",
        ),
        "battery_charge": Key(
            "float", 1.0, "Battery charge at the start, 0..1; with `sim.command = \"pwm\"`.",
            nonneg=True,
        ),
    },
    "initial": {
        "pos": Key(
            "vec3", [0.0, 0.0, 1.0], "Initial position [m]; default: the reference at t = 0."
        ),
        "rpy_deg": Key("vec3", [0.0, 0.0, 0.0], "Initial roll, pitch, yaw [deg]."),
        "vel": Key("vec3", [0.0, 0.0, 0.0], "Initial velocity, world frame [m/s]."),
        "ang_vel": Key("vec3", [0.0, 0.0, 0.0], "Initial body rates [rad/s]."),
        "start_on_reference": Key(
            "bool",
            True,
            "Start at the reference's position, velocity and yaw at t = 0 (ignores pos and vel).",
        ),
    },
    "randomize": {
        "mass_rel": Key(
            "float", 0.0, "Per-drone mass, uniform within ± this fraction (0 <= f < 1)."
        ),
        "inertia_rel": Key(
            "float", 0.0, "Per-drone inertia, uniform within ± this fraction (0 <= f < 1)."
        ),
        "pos_std": Key("float", 0.0, "Initial position noise, std per axis [m]."),
        "vel_std": Key("float", 0.0, "Initial velocity noise, std per axis [m/s]."),
        "rpy_std_deg": Key("float", 0.0, "Initial roll/pitch/yaw noise, std [deg]."),
        "pos_range": Key(
            "vec3", [0.0, 0.0, 0.0], "Initial position, uniform within ± this per axis [m] "
            "(instead of pos_std).", nonneg=True
        ),
        "vel_range": Key(
            "vec3", [0.0, 0.0, 0.0], "Initial velocity, uniform within ± this per axis [m/s] "
            "(instead of vel_std).", nonneg=True
        ),
        "rpy_range_deg": Key(
            "vec3", [0.0, 0.0, 0.0], "Initial roll, pitch, yaw, uniform within ± this [deg] "
            "(instead of rpy_std_deg).", nonneg=True
        ),
        "ang_vel_max": Key(
            "float", 0.0, "Initial body rates uniform in the ball of this radius around "
            "initial.ang_vel [rad/s] (any axis, any magnitude up to it).", nonneg=True
        ),
        "spacing": Key(
            "float",
            0.0,
            "Formation: drones on a grid this far apart [m] (>= 0), "
            "each flying the reference shifted by its offset.",
            nonneg=True,
        ),
    },
    "controller": {
        "kind": Key(
            "str", "geometric", "Controller; `policy`: a trained policy file (`path`).",
            choices=("geometric", "pid", "policy"),
        ),
        "path": Key(
            "str", "", "Policy: the policy file (`quadsim train`'s policy.npz; docs/rl.md)."
        ),
        "gains": Key(
            "str",
            "",
            "Gains file name (`quadsim/physics/presets/gains`) or path; default `<preset>_<kind>`.",
        ),
        "rate": Key(
            "float", _NONE,
            "Controller rate [Hz]; its period must be a whole number of physics steps (the "
            "command is held in between); default the physics rate 1/sim.dt (a policy: "
            "100 Hz, the environments' control rate).",
            positive=True,
        ),
    },
    "trajectory": {
        "kind": Key(
            "str",
            "hover",
            "Reference.",
            choices=("hover", "step", "circle", "lemniscate", "min_snap"),
        ),
        "center": Key(
            "vec3", [0.0, 0.0, 1.0], "Hover point / centre of circle and figure eight [m]."
        ),
        "radius": Key("float", 1.0, "Circle radius [m].", positive=True),
        "speed": Key("float", 1.0, "Circle speed; minimum-snap mean speed [m/s].", positive=True),
        "size": Key(
            "float",
            1.0,
            "Figure eight (Gerono): half width; it spans 2 size x size [m].",
            positive=True,
        ),
        "period": Key("float", 8.0, "Figure-eight period [s].", positive=True),
        "yaw": Key("float", 0.0, "Constant yaw [rad] (hover, step, circle, figure eight)."),
        "target": Key("vec3", [1.0, 0.0, 1.0], "Step: position after the step [m]."),
        "t_step": Key("float", 1.0, "Step: time of the step [s]."),
        "rise_time": Key(
            "float",
            0.0,
            "Step: 0 for a jump, else a smooth rest-to-rest move taking this long [s].",
        ),
        "waypoints": Key("list", _NONE, "Minimum snap: list of [x, y, z] waypoints [m]."),
        "segment_times": Key(
            "floats",
            _NONE,
            "Minimum snap: duration of each segment [s]; default from the distance at `speed`.",
        ),
    },
    "wind": {
        "mean": Key("vec3", [0.0, 0.0, 0.0], "Mean wind, world frame [m/s]."),
        "turbulence": Key(
            "str",
            "none",
            "Dryden turbulence (MIL-F-8785C low altitude).",
            choices=("none", "light", "moderate", "severe"),
        ),
        "altitude": Key("float", 10.0, "Altitude for the Dryden scales [m].", positive=True),
        "airspeed": Key("float", 1.0, "Airspeed for the Dryden scales [m/s].", positive=True),
    },
    "sensors": {
        "imu": Key("str", "none", "IMU preset (`adis16470`, `bmi088`), TOML path, or none."),
        "mocap_pos_std": Key(
            "float", _NONE, "Motion capture: position noise std [m]; omit for no motion capture."
        ),
        "mocap_att_std": Key("float", 0.0, "Motion capture: attitude noise std [rad]."),
        "mocap_latency": Key(
            "float", 0.0, "Motion capture latency [s] (a multiple of its sample period)."
        ),
        "mocap_rate": Key(
            "float", _NONE, "Motion capture sample rate [Hz]; omit for every physics step.",
            positive=True,
        ),
        "mocap_dropout": Key(
            "float", 0.0, "Motion capture: probability that a sample starts a gap, in [0, 1).",
            nonneg=True,
        ),
        "mocap_gap": Key("float", 1.0, "Motion capture: mean gap length [samples], >= 1."),
        "baro": Key("str", "none", "Barometer preset (`bmp388`), TOML path, or none."),
        "gnss": Key("str", "none", "GNSS receiver preset (`ublox_m9n`), TOML path, or none."),
        "gnss_pos_std": Key(
            "float", _NONE, "GNSS: white position noise std per axis [m], replacing the "
            "preset's white and correlated errors; omit for the preset's.", nonneg=True,
        ),
        "gnss_latency": Key(
            "float", _NONE, "GNSS: latency [s] (a multiple of its fix period) replacing the "
            "preset's; omit for the preset's.", nonneg=True,
        ),
    },
    "estimator": {
        "kind": Key(
            "str", "truth", "What the controller reads: the true state, or an estimate fed by "
            "the sensors (ekf: error-state EKF; complementary: Mahony filter; both need an IMU).",
            choices=("truth", "ekf", "complementary"),
        ),
        "latency_compensation": Key(
            "bool", True, "EKF: fuse late motion capture at its own time (delayed fusion)."
        ),
        "mocap_attitude": Key("bool", True, "EKF: fuse the motion-capture attitude too."),
        "init_pos_std": Key("float", 1e-3, "EKF: initial position std [m].", nonneg=True),
        "init_vel_std": Key("float", 1e-2, "EKF: initial velocity std [m/s].", nonneg=True),
        "init_att_std": Key("float", 0.0175, "EKF: initial attitude std [rad].", nonneg=True),
        "gyro_bias_noise": Key(
            "float", _NONE, "EKF: gyro-bias process noise [rad/s^2/sqrt(Hz)]; omit for the IMU "
            "preset's bias walk.", nonneg=True,
        ),
        "accel_bias_noise": Key(
            "float", _NONE, "EKF: accelerometer-bias process noise [m/s^3/sqrt(Hz)]; omit for the "
            "IMU preset's.", nonneg=True,
        ),
        "k_p": Key("float", 1.0, "Complementary: attitude gain k_P [1/s].", nonneg=True),
        "k_i": Key("float", 0.3, "Complementary: gyro-bias gain k_I [1/s^2].", nonneg=True),
    },
    "world": {
        "ground": Key("bool", True, "A floor at z = ground_height."),
        "ground_height": Key("float", 0.0, "Floor height [m]."),
        "restitution": Key(
            "float", _NONE, "Bounce coefficient in [0, 1]; omit for seed 001's sticky floor."
        ),
        "friction": Key(
            "float", 0.0, "Coulomb friction coefficient of the floor, >= 0.", nonneg=True
        ),
        "crash_speed": Key(
            "float", 2.0, "Touching the floor faster than this is a crash [m/s]; 0: any "
            "descending touch (as the environments).", nonneg=True
        ),
        "walls": Key("list", [], "Walls: list of {axis = 'x', at = 3.0, side = 1}."),
        "boxes": Key("list", [], "Obstacles: list of {lo = [x, y, z], hi = [x, y, z]} [m]."),
    },
    "output": {
        "log_every": Key("int", 1, "Record every k-th step.", positive=True),
        "chunk_steps": Key(
            "int", 500, "Steps the loop runs between hand-overs to the log (progress, Ctrl-C).",
            positive=True,
        ),
        "part_seconds": Key(
            "float", 1.0, "Close a durable log part after this much wall time [s] (what a hard "
            "kill loses); 0: a part per hand-over.", nonneg=True,
        ),
        "part_mb": Key(
            "float", 64.0, "... or once the log held in memory reaches this size [MB].",
            positive=True,
        ),
        "csv": Key("bool", False, "Also write trajectory.csv."),
        "plots": Key("bool", True, "Write the PNG figures."),
        "plot_drones": Key("int", 4, "Drones drawn in the figures.", positive=True),
        "settle": Key("float", 0.0, "Tracking errors in the summary start at this time [s]."),
    },
}
"""The scenario schema: section (``""`` = top level) -> key -> :class:`Key`."""


class Prepared(NamedTuple):
    """What validating a scenario computed, and assembling it reuses (nothing is drawn twice).

    Attributes:
        drone: The nominal :class:`~quadsim.physics.params.Params` (preset and overrides).
        trajectory: The reference ``t -> Reference``.
        world: The :class:`~quadsim.physics.world.World`.
        initial: Per-drone parameters and initial state (see :func:`_initial`).
        gains: The controller's gains.
    """

    drone: Any
    trajectory: Any
    world: Any
    initial: dict
    gains: Any


class Scenario(NamedTuple):
    """A validated scenario: section -> key -> value (defaults filled), and where it came from.

    ``text`` is the file's text, for the line numbers of errors found while building (``""``:
    unknown, errors then name the key without a line). ``prepared`` holds what validation
    computed (drone, trajectory, world, the random draws, gains) for :func:`build`; ``None``:
    :func:`build` computes it again from ``values``.
    """

    values: dict
    source: str
    text: str = ""
    prepared: Prepared | None = None

    def get(self, path: str) -> Any:
        """Value at ``"section.key"`` (or ``"key"`` for the top level)."""
        section, _, key = path.rpartition(".")
        return self.values[section][key]


_BARE = r"[A-Za-z0-9_-]+"
_BASIC = r'"(?:[^"\\\n]|\\.)*"'
_LITERAL = r"'[^'\n]*'"
_KEY_PART = re.compile(rf"[ \t]*({_BARE}|{_BASIC}|{_LITERAL})[ \t]*")


def _parse_key(s: str, i: int) -> tuple[list[str], int] | None:
    """A TOML key at ``s[i:]`` (bare, "basic", 'literal', dotted) -> (parts, end), or None."""
    parts = []
    while True:
        m = _KEY_PART.match(s, i)
        if not m:
            return None
        tok, i = m.group(1), m.end()
        if tok[0] == '"':
            try:
                tok = tomllib.loads(f"k = {tok}")["k"]
            except tomllib.TOMLDecodeError:
                tok = tok[1:-1]
        elif tok[0] == "'":
            tok = tok[1:-1]
        parts.append(tok)
        if s.startswith(".", i):
            i += 1
            continue
        return parts, i


def _in_inline(s: str, keys: list[str]) -> bool:
    """Whether the inline table text ``s`` (after ``key =``) sets the key path ``keys``."""
    for j, c in enumerate(s):
        if c not in "{,":
            continue
        parsed = _parse_key(s, j + 1)
        if parsed is None or not s.startswith("=", parsed[1]):
            continue
        path, rest = parsed[0], s[parsed[1] + 1 :]
        if path == keys or (path == keys[: len(path)] and _in_inline(rest, keys[len(path) :])):
            return True
    return False


def line_of(text: str, section: str, key: str) -> int | None:
    """1-based line where ``section.key`` is set (``key=""``: where ``[section]`` opens).

    Keys may be bare, "quoted" or 'quoted' (any Unicode), dotted (``wind.mean = ...`` at the top
    level), or inside an inline table (``wind = { mean = ... }``). A key that is not written
    falls back to the line that opens its section, else None.
    """
    target = [p for p in (section, key) if p]
    table: list[str] = []
    fallback = None
    for no, line in enumerate(text.splitlines(), 1):
        head = re.match(r"[ \t]*\[\[?", line)
        if head:
            parsed = _parse_key(line, head.end())
            close = "]]" if head.group().endswith("[[") else "]"
            if parsed and re.match(rf"[ \t]*{re.escape(close)}[ \t]*(#.*)?$", line[parsed[1] :]):
                table = parsed[0]
                if table == target:
                    return no
                if fallback is None and section and table == [section]:
                    fallback = no
                continue
        parsed = _parse_key(line, 0)
        if parsed is None or not line.startswith("=", parsed[1]):
            continue
        path = table + parsed[0]
        if path == target:
            return no
        k = len(path)
        if k < len(target) and path == target[:k]:  # opens an inline table holding the target
            if _in_inline(line[parsed[1] + 1 :], target[k:]):
                return no
            if fallback is None:
                fallback = no
    return fallback


def _type_ok(kind: str, v: Any) -> bool:
    num = isinstance(v, int | float) and not isinstance(v, bool)
    if kind == "float":
        return num
    if kind == "int":
        return isinstance(v, int) and not isinstance(v, bool)
    if kind == "bool":
        return isinstance(v, bool)
    if kind == "str":
        return isinstance(v, str)
    if kind == "vec3":
        return isinstance(v, list) and len(v) == 3 and all(_type_ok("float", x) for x in v)
    if kind == "floats":
        return isinstance(v, list) and all(_type_ok("float", x) for x in v)
    return isinstance(v, list)


_EXPECT = {
    "float": "a number",
    "int": "an integer",
    "bool": "true or false",
    "str": "a string",
    "vec3": "a list of 3 numbers",
    "floats": "a list of numbers",
    "list": "a list",
}


def load_scenario(path_or_text: str | os.PathLike[str], *, text: bool = False) -> Scenario:
    """Read and validate a scenario file (or, with ``text=True``, TOML text).

    Besides types and ranges this loads the drone (preset and overrides) and the IMU and checks
    them with :func:`quadsim.physics.params.check_physical`, draws the randomisation exactly as
    :func:`build` will and checks every drone, and checks that no drone starts below the floor
    or inside a wall or box.

    Raises:
        ValueError: ``FILE: KEY (line N): what is wrong``; or ``FILE: what is wrong`` for a file
            that is missing, a directory, unreadable or not text.
    """
    if text:
        raw, where = str(path_or_text), "<scenario>"
    else:
        raw, where = _read_text(Path(path_or_text)), str(path_or_text)
    try:
        doc = tomllib.loads(raw)
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{where}: malformed TOML: {e}") from e
    return validate_doc(doc, where, raw)


def validate_doc(doc: dict, where: str, raw: str = "") -> Scenario:
    """Validate a parsed scenario document (what :func:`load_scenario` does after reading the
    TOML): ``where`` names it in errors, ``raw`` (its text, or ``""``) gives the line numbers.

    Raises:
        ValueError: ``WHERE: KEY (line N): what is wrong``.
    """  # noqa: D205
    fail = _failer(where, raw)

    values: dict[str, dict] = {}
    for section, keys in SCHEMA.items():
        given = doc if section == "" else doc.get(section, {})
        if not isinstance(given, dict):
            raise fail("", section, "must be a table ([section])")
        out = {}
        for key, spec in keys.items():
            if key not in given:
                if spec.default is REQUIRED:
                    raise fail(section, key, f"missing; expected {_EXPECT[spec.type]}")
                out[key] = spec.default
                continue
            v = given[key]
            if not _type_ok(spec.type, v):
                raise fail(section, key, f"expected {_EXPECT[spec.type]}; got {v!r}")
            if spec.type == "float":
                v = float(v)
                if not math.isfinite(v):
                    raise fail(section, key, f"must be finite; got {v!r}")
            if spec.type in ("vec3", "floats"):
                v = [float(x) for x in v]
                if not all(math.isfinite(x) for x in v):
                    raise fail(section, key, f"must be finite; got {v!r}")
            if spec.positive and v <= 0:
                raise fail(section, key, f"must be positive; got {v!r}")
            if spec.nonneg and (min(v) if isinstance(v, list) else v) < 0:
                raise fail(section, key, f"must be >= 0; got {v!r}")
            if spec.type in ("float",) and key.endswith(("_rel", "_std", "_std_deg")) and v < 0:
                raise fail(section, key, f"must be >= 0; got {v!r}")
            if spec.choices is not None and v not in spec.choices:
                raise fail(section, key, f"expected one of {list(spec.choices)}; got {v!r}")
            out[key] = v
        unknown = [k for k in given if k not in keys and not (section == "" and k in SCHEMA)]
        if unknown:
            valid = sorted(keys) if section else sorted([*keys, *[s for s in SCHEMA if s]])
            raise fail(section, unknown[0], f"unknown key; valid keys here: {valid}")
        values[section] = out
    if values["sim"]["backend"] == "auto":
        values["sim"]["backend"] = default_backend(values["sim"]["integrator"])
    _check_combinations(values, fail)
    _check_ranges(values, fail)
    from .preflight import memory_problem  # before anything is drawn per drone

    problem = memory_problem(values[""]["n"], values["sim"]["backend"])
    if problem:
        raise fail("", "n", problem)
    prepared = _prepare(values, fail)
    return Scenario(values, where, raw, prepared)


def default_backend(integrator: str = "rk4") -> str:
    """What ``sim.backend = "auto"`` means here: the fastest backend that runs ``integrator``.

    ``"native"`` where CasADi and a C compiler are available
    (:func:`quadsim.engines.native.available`), else ``"numpy"``; ``"numpy"`` for ``rk45`` (adaptive
    steps run on NumPy only).
    """
    if integrator == "rk45":
        return "numpy"
    from ..engines.native import available

    return "native" if available() else "numpy"


def _read_text(p: Path) -> str:
    """The text of scenario file ``p``, or a ``ValueError`` saying why it cannot be had."""
    if p.is_dir():
        raise ValueError(f"{p}: is a directory, not a scenario file")
    if not p.exists():
        raise ValueError(f"{p}: scenario file not found")
    try:
        data = p.read_bytes()
    except OSError as e:
        raise ValueError(f"{p}: cannot read: {e.strerror or e}") from e
    if b"\0" in data:
        raise ValueError(f"{p}: not a text file (contains NUL bytes)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{p}: not a text file (not UTF-8: {e.reason} at byte {e.start})") from e


def _failer(where: str, raw: str) -> Any:
    """``fail(section, key, msg)`` -> ``ValueError("FILE: section.key (line N): msg")``."""

    def fail(section: str, key: str, msg: str) -> ValueError:
        path = f"{section}.{key}" if section else key
        line = line_of(raw, section, key) if raw else None
        at = f" (line {line})" if line else ""
        return ValueError(f"{where}: {path}{at}: {msg}")

    return fail


def _check_combinations(v: dict, fail: Any) -> None:
    """Impossible combinations, named by key path."""
    traj, sim = v["trajectory"], v["sim"]
    rnd = v["randomize"]
    for key in ("pos_std", "vel_std", "rpy_std_deg", "pos_range", "vel_range", "rpy_range_deg",
                "ang_vel_max"):  # fmt: skip
        if max(np.atleast_1d(rnd[key])) > 1e6:  # a draw from it would overflow the state
            raise fail("randomize", key, f"must be at most 1e6; got {rnd[key]!r}")
    for std, rng in (("pos_std", "pos_range"), ("vel_std", "vel_range"),
                     ("rpy_std_deg", "rpy_range_deg")):  # fmt: skip
        if rnd[std] > 0 and any(rnd[rng]):
            raise fail("randomize", rng, f"give one of randomize.{std} and randomize.{rng}")
    if traj["kind"] == "min_snap":
        wps = traj["waypoints"]
        if wps is None:
            raise fail("trajectory", "waypoints", "required for trajectory.kind = 'min_snap'")
        if len(wps) < 2 or not all(_type_ok("vec3", w) and all(map(_finite, w)) for w in wps):
            raise fail(
                "trajectory", "waypoints", "expected a list of at least two finite [x, y, z]"
            )
        times = traj["segment_times"]
        if times is not None and (len(times) != len(wps) - 1 or min(times) <= 0):
            raise fail(
                "trajectory",
                "segment_times",
                f"expected {len(wps) - 1} positive durations; got {times!r}",
            )
    if v[""]["duration"] < sim["dt"]:
        raise fail("", "duration", f"shorter than one step (sim.dt = {sim['dt']})")
    if sim["integrator"] == "rk45" and sim["backend"] != "numpy":
        raise fail("sim", "integrator", "rk45 runs on the numpy backend only")
    if sim["model"] == "euler_zyx" and sim["integrator"] == "geometric":
        raise fail("sim", "integrator", "geometric integration needs a quaternion model")
    lat, rate = v["sensors"]["mocap_latency"], v["sensors"]["mocap_rate"]
    period = sim["dt"] if rate is None else 1.0 / rate
    what = f"sim.dt = {sim['dt']}" if rate is None else f"its period 1/mocap_rate = {period:g}"
    if lat < 0 or abs(lat / period - round(lat / period)) > 1e-9:
        raise fail("sensors", "mocap_latency", f"must be a non-negative multiple of {what} s; "
                   f"got {lat}")  # fmt: skip
    from ..physics.sensors import dropout_thresholds

    sv = v["sensors"]
    for key in ("mocap_dropout", "mocap_gap"):
        try:
            dropout_thresholds(_mocap_params(sv | {"mocap_pos_std": 0.0}, sim["dt"]))
        except ValueError as e:
            if key.removeprefix("mocap_") in str(e).split()[0]:
                raise fail("sensors", key, str(e)) from None
    if rate is not None:
        from ..loop.brain import loop_periods

        try:
            loop_periods(sim["dt"], mocap=_mocap_params(v["sensors"], sim["dt"]))
        except ValueError as e:
            raise fail("sensors", "mocap_rate", f"{rate:g} Hz: {e}") from None
    est = v["estimator"]["kind"]
    if est != "truth" and v["sensors"]["imu"] == "none":
        raise fail("estimator", "kind", f"{est!r} needs an IMU (sensors.imu)")
    if est != "truth" and v["sensors"]["mocap_pos_std"] is None and v["sensors"]["gnss"] == "none":
        raise fail("estimator", "kind", f"{est!r} needs a position sensor: motion capture "
                   "(sensors.mocap_pos_std) or GNSS (sensors.gnss)")  # fmt: skip
    for i, w in enumerate(v["world"]["walls"]):
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
    for i, b in enumerate(v["world"]["boxes"]):
        if not (
            isinstance(b, dict)
            and set(b) == {"lo", "hi"}
            and _type_ok("vec3", b["lo"])
            and _type_ok("vec3", b["hi"])
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
    return _type_ok("float", x) and math.isfinite(x)


def schema_markdown() -> str:
    """The defaults table of ``docs/scenarios.md``."""
    out = ["| key | type | default | meaning |", "| --- | --- | --- | --- |"]
    for section, keys in SCHEMA.items():
        for key, spec in keys.items():
            path = f"{section}.{key}" if section else key
            d = "(none)" if spec.default is None else repr(spec.default).replace("|", "\\|")
            doc = spec.doc + (
                f" One of {', '.join(map(str, spec.choices))}." if spec.choices else ""
            )
            out.append(f"| `{path}` | {spec.type} | `{d}` | {doc} |")
    return "\n".join(out) + "\n"


def _rng(seed: int, stream: int) -> np.random.Generator:
    return np.random.default_rng([seed, stream])


class Assembly(NamedTuple):
    """A scenario assembled into the objects of a flight (what :func:`build` returns).

    The first ten fields are the arguments of :func:`quadsim.loop.flight.fly`.

    Attributes:
        sim: The :class:`~quadsim.engines.sim.Simulator`, reset to the initial states.
        trajectory: The reference ``t -> Reference``.
        control: The controller function.
        gains: Its gains.
        ref_offset: Per-drone reference offsets ``(n, 3)`` [m] (formation).
        imu: :class:`~quadsim.physics.sensors.ImuParams`, or ``None``.
        mocap: :class:`~quadsim.physics.sensors.MocapParams`, or ``None``.
        duration: Flight time [s] (``duration`` of the file).
        output: The ``[output]`` section.
        seed: Key of the sensor noise and the turbulence (the scenario's ``seed``,
            :mod:`quadsim.physics.noise`).
        drone: The nominal :class:`~quadsim.physics.params.Params` (the controller's model).
        estimator: What the controller reads instead of the truth
            (:mod:`quadsim.loop.estimation.estimators`), or ``None``.
        baro: :class:`~quadsim.physics.sensors.BaroParams`, or ``None``.
        gnss: :class:`~quadsim.physics.sensors.GnssParams`, or ``None``.
        power: :class:`~quadsim.physics.power.PowerParams` (``sim.command = "pwm"``), or ``None``.
        battery_charge: The battery's charge at the start (0..1).
        meta: The run's metadata (:func:`quadsim.loop.flight.run_meta`): drone, time step, duration
            in whole steps, rotors, backend, model, integrator, dtype, scenario, name,
            controller, trajectory, seed and output options (``animate``: ``None``).
    """

    sim: Any
    trajectory: Any
    control: Any
    gains: Any
    ref_offset: np.ndarray
    imu: Any
    mocap: Any
    duration: float
    output: dict
    seed: int
    drone: Any
    meta: dict
    estimator: Any = None
    baro: Any = None
    gnss: Any = None
    power: Any = None
    battery_charge: float = 1.0


def build(sc: Scenario) -> Assembly:
    """Assemble a validated scenario into the objects of a flight (:func:`quadsim.loop.flight.fly`).

    Reuses what :func:`load_scenario` computed (``sc.prepared``: drone, trajectory, world, the
    random draws, gains); draws nothing new but the simulator's and sensors' generators.
    """
    from ..engines.sim import Simulator, Wind
    from ..loop.control import control as control_fn
    from ..loop.flight import run_meta

    v = sc.values
    top, sm = v[""], v["sim"]
    seed, n = top["seed"], top["n"]
    prep = sc.prepared or _prepare(v, _failer(sc.source, sc.text))
    init = {key: _copy(val) for key, val in prep.initial.items()}  # the sim must not alias them

    wv = v["wind"]
    wind = None
    if any(wv["mean"]) or wv["turbulence"] != "none":
        turb = None
        if wv["turbulence"] != "none":
            from ..physics.wind import dryden_preset

            turb = dryden_preset(wv["turbulence"], wv["altitude"], wv["airspeed"])
        wind = Wind(mean=tuple(wv["mean"]), turbulence=turb)

    sim = Simulator(
        prep.drone,
        n=n,
        dt=sm["dt"],
        model=sm["model"],
        integrator=sm["integrator"],
        backend=sm["backend"],
        dtype=sm["dtype"],
        seed=seed,
        world=prep.world,
        rotor_dynamics=sm["rotor_dynamics"],
        params=init["per_drone"] or None,
        wind=wind,
    )
    rpy = init["rpy"]
    if sm["model"] == "euler_zyx":
        attitude = rpy
    else:
        from ..physics.rotation import from_euler

        attitude = from_euler(rpy)
    ang_vel = init.get("ang_vel", v["initial"]["ang_vel"])  # per drone from a sweep axis
    sim.reset(pos=init["pos"], attitude=attitude, vel=init["vel"], ang_vel=ang_vel)

    imu = mocap = None
    sv = v["sensors"]
    if sv["imu"] != "none":
        from ..physics.sensors import load_imu

        imu = load_imu(sv["imu"])  # checked by load_scenario
    if sv["mocap_pos_std"] is not None:
        mocap = _mocap_params(sv, sm["dt"])
    baro, gnss = _baro_gnss(sv, _failer(sc.source, sc.text))
    power = _power(sm, prep.drone, _failer(sc.source, sc.text))
    estimator = _estimator(v["estimator"], imu, mocap, prep.drone, sm["dt"], prep.gains, baro,
                           gnss)  # fmt: skip
    o = v["output"]
    meta = run_meta(
        sim,
        max(1, round(top["duration"] / sim.dt)) * sim.dt,
        {
            "model": sm["model"],
            "integrator": sm["integrator"],
            "dtype": sm["dtype"],
            "scenario": sc.source,
            "name": top["name"] or Path(sc.source).stem,
            "controller": v["controller"]["kind"],
            "estimator": v["estimator"]["kind"],
            "command": sm["command"],
            **({"power": power.name, "hover_endurance_s": _hover_endurance(power, prep.drone)}
               if power is not None else {}),
            "trajectory": v["trajectory"]["kind"],
            "seed": seed,
            "output": {
                "csv": o["csv"],
                "plots": o["plots"],
                "animate": None,
                "settle": o["settle"],
                "plot_drones": o["plot_drones"],
            },
        },
    )
    if v["controller"]["kind"] == "policy":
        from .rl.controller import policy_control as control_fn
    return Assembly(
        sim=sim,
        trajectory=prep.trajectory,
        control=control_fn,
        gains=prep.gains,
        ref_offset=init["offset"],
        imu=imu,
        mocap=mocap,
        duration=top["duration"],
        output=o,
        seed=seed,
        drone=prep.drone,
        meta=meta,
        estimator=estimator,
        baro=baro,
        gnss=gnss,
        power=power,
        battery_charge=sm["battery_charge"],
    )


def fly_assembly(objs: Assembly, **kwargs: Any) -> Any:
    """:func:`quadsim.loop.flight.fly` of an assembled scenario: its simulator, reference,
    controller, offsets, sensors, estimator, battery and seed; ``kwargs`` are ``fly``'s other
    arguments (``log_every``, ``chunk_steps``, ``on_chunk``, ``keep_log``, ``meta``, ...)."""  # noqa: D205, D209
    from ..loop.flight import fly

    return fly(objs.sim, objs.trajectory, objs.control, objs.gains, duration=objs.duration,
               ref_offset=objs.ref_offset, imu=objs.imu, mocap=objs.mocap,
               estimator=objs.estimator, baro=objs.baro, gnss=objs.gnss, power=objs.power,
               battery_charge=objs.battery_charge, seed=objs.seed, **kwargs)  # fmt: skip


def _power(sm: dict, drone: Any, fail: Any) -> Any:
    """The power chain of a ``[sim]`` section (``sim.command = "pwm"``), or ``None``."""
    if sm["command"] != "pwm":
        return None
    from ..physics.power import list_power_presets, load_power

    if sm["battery_charge"] > 1:
        raise fail("sim", "battery_charge", f"must be in 0..1; got {sm['battery_charge']}")
    return _load_named(fail, "sim", "power", sm["power"], load_power, list_power_presets(),
                       "power preset", "available")  # fmt: skip


def _hover_endurance(power: Any, drone: Any) -> float:
    """Seconds of hover on a full battery (:func:`quadsim.physics.power.hover_endurance`)."""
    from ..physics.envelope import envelope
    from ..physics.power import hover_endurance

    return hover_endurance(power, envelope(drone).hover_rpm, drone.mixing_matrix.shape[1])


def _mocap_params(sv: dict, dt: float) -> Any:
    """The :class:`~quadsim.physics.sensors.MocapParams` of a ``[sensors]`` section."""
    from ..physics.sensors import MocapParams

    rate = sv["mocap_rate"]
    return MocapParams(pos_std=sv["mocap_pos_std"], att_std=sv["mocap_att_std"],
                       latency=sv["mocap_latency"],
                       rate=1.0 / dt if rate is None else rate, dropout=sv["mocap_dropout"],
                       gap=sv["mocap_gap"])  # fmt: skip


def _baro_gnss(sv: dict, fail: Any) -> tuple[Any, Any]:
    """The barometer and GNSS of a ``[sensors]`` section (``None`` where absent); a preset or
    file that does not load names its key."""  # noqa: D205, D209
    from ..physics.sensors import list_baro_presets, list_gnss_presets, load_baro, load_gnss

    out = []
    for key, load, names, what in (("baro", load_baro, list_baro_presets, "barometer preset"),
                                   ("gnss", load_gnss, list_gnss_presets, "GNSS preset")):
        name = sv[key]
        out.append(None if name == "none" else
                   _load_named(fail, "sensors", key, name, load, names(), what, "available",
                               none=True))  # fmt: skip
    gnss = out[1]
    if gnss is not None and sv["gnss_pos_std"] is not None:
        sd = sv["gnss_pos_std"]
        gnss = gnss._replace(pos_std_h=sd, pos_std_v=sd, gm_std_h=0.0, gm_std_v=0.0)
    if gnss is not None and sv["gnss_latency"] is not None:
        gnss = gnss._replace(latency=sv["gnss_latency"])
    if gnss is not None:
        from ..physics.sensors import check_gnss_params, gnss_delay_steps

        try:
            gnss_delay_steps(check_gnss_params(gnss))
        except ValueError as e:
            raise fail("sensors", "gnss_latency" if sv["gnss_latency"] is not None else "gnss",
                       str(e)) from None  # fmt: skip
    return out[0], gnss


def _estimator(ev: dict, imu: Any, mocap: Any, drone: Any, dt: float, gains: Any,
               baro: Any = None, gnss: Any = None) -> Any:  # fmt: skip
    """The estimator of an ``[estimator]`` section (``None`` for the truth); its noise comes
    from the sensors' presets."""  # noqa: D205, D209
    kind = ev["kind"]
    if kind == "truth":
        return None
    from ..loop.brain import loop_periods
    from ..loop.estimation.estimators import (
        ComplementaryEstimator,
        EkfEstimator,
        default_init_std,
    )

    periods = loop_periods(dt, gains, imu, mocap, baro=baro, gnss=gnss)
    if kind == "complementary":
        from ..loop.estimation.complementary import ComplementaryGains

        fix = periods.mocap if mocap is not None else periods.gnss
        g = ComplementaryGains(k_p=ev["k_p"], k_i=ev["k_i"], meas_period=float(fix) * dt)
        return ComplementaryEstimator(imu, mocap, drone.gravity_vec, dt, periods, gains=g,
                                      gnss=gnss)  # fmt: skip
    std = default_init_std(imu, ev["init_pos_std"], ev["init_vel_std"], ev["init_att_std"])
    return EkfEstimator(imu, mocap, drone.gravity_vec, dt, periods, init_std=std,
                        latency_compensation=ev["latency_compensation"],
                        mocap_attitude=ev["mocap_attitude"], gnss=gnss, baro=baro,
                        gyro_bias_noise=ev["gyro_bias_noise"],
                        accel_bias_noise=ev["accel_bias_noise"])  # fmt: skip


def _copy(x: Any) -> Any:
    """A copy of the arrays in ``x`` (an array or a dict of arrays)."""
    if isinstance(x, dict):
        return {k: np.array(a) for k, a in x.items()}
    return np.array(x)


def _check_ranges(v: dict, fail: Any) -> None:
    """Ranges that one key's type and sign do not express."""
    for key in ("mass_rel", "inertia_rel"):
        f = v["randomize"][key]
        if not f < 1.0:
            raise fail("randomize", key, f"must be < 1 (a fraction of the nominal value); got {f}")
    e = v["world"]["restitution"]
    if e is not None and not 0.0 <= e <= 1.0:
        raise fail("world", "restitution", f"must lie in [0, 1]; got {e}")


def _load_named(fail: Any, section: str, key: str, name: str, load: Any, names: list[str],
                what: str, avail: str, none: bool = False) -> Any:  # fmt: skip
    """``load(name)`` of a preset name or file path given at ``section.key``; an unknown
    preset, a missing or unreadable file, or what the loader rejects names the key (the one
    home of that rule for the drone and the sensors; ``none``: "none" is also a choice)."""  # noqa: D205, D209
    if not _is_path(name) and name not in names:
        shown = ["none", *names] if none else names
        raise fail(section, key, f"unknown {what} {name!r}; {avail}: {shown}")
    if _is_path(name) and not Path(name).is_file():
        label = what.removesuffix(" preset").removesuffix("preset") or "preset"
        raise fail(section, key, f"{label} file not found: {name}")
    try:
        return load(name)
    except ValueError as e:
        raise fail(section, key, str(e)) from None
    except OSError as e:
        raise fail(section, key, f"cannot read {name}: {e.strerror or e}") from None


def resolved_files(sc: Scenario) -> dict[str, str]:
    """The files a validated scenario reads besides itself: ``{"section.key": path}``.

    Every key that names a file by path and is used: ``drone.preset``, ``sim.power`` (with
    ``sim.command = "pwm"``), ``controller.gains`` (or ``controller.path`` for a policy),
    ``sensors.imu``, ``sensors.baro`` and ``sensors.gnss``. Paths are as written (a relative one
    is relative to the directory the scenario was validated in); presets named by name are
    packaged with quadsim and not listed.
    """
    v = sc.values
    named = [("drone", "preset"), ("sensors", "imu"), ("sensors", "baro"), ("sensors", "gnss")]
    if v["sim"]["command"] == "pwm":
        named.append(("sim", "power"))
    out = {f"{s}.{k}": v[s][k] for s, k in named if v[s][k] != "none" and _is_path(v[s][k])}
    if v["controller"]["kind"] == "policy":
        out["controller.path"] = v["controller"]["path"]
    elif _is_path(_gains_name(v)):
        out["controller.gains"] = _gains_name(v)
    return out


def _is_path(name: str) -> bool:
    """Whether a preset argument is a path (as in :func:`quadsim.physics.params.load_params`)."""
    return name.endswith(".toml") or any(c in name for c in {os.sep, os.altsep or "/", "/"})


def _load_drone(v: dict, fail: Any) -> Any:
    """The nominal drone: the preset (``drone.preset``) with the overrides, physically checked."""
    from ..physics.envelope import envelope
    from ..physics.params import PhysicalError, check_physical, list_presets, load_params

    dr = v["drone"]
    drone = _load_named(fail, "drone", "preset", dr["preset"], load_params, list_presets(),
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


def _load_world(v: dict) -> Any:
    """The :class:`~quadsim.physics.world.World` of ``[world]`` (walls first, then boxes)."""
    from ..physics.world import Box, Ground, World, wall

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


def _check_imu(v: dict, fail: Any) -> None:
    name = v["sensors"]["imu"]
    if name == "none":
        return
    from ..physics.sensors import list_imu_presets, load_imu

    imu = _load_named(fail, "sensors", "imu", name, load_imu, list_imu_presets(), "IMU preset",
                      "available", none=True)  # fmt: skip
    from ..loop.brain import loop_periods

    try:  # the IMU's period against the physics step (the loop's rule, checked once here)
        loop_periods(v["sim"]["dt"], None, imu)
    except ValueError as e:
        raise fail("sensors", "imu", f"{e}; choose sim.dt to fit") from None


def _initial(v: dict, drone: Any, traj: Any) -> dict:
    """Per-drone parameters and initial state, drawn from ``seed`` (stream 1) in a fixed order.

    Draws mass, inertia, then (:func:`quadsim.loop.initial.sample_start`) position, velocity and
    attitude deviations, each a standard normal ``(n, 3)`` times its std.

    Returns:
        ``per_drone`` (``mass``/``J`` arrays), ``offset`` (formation, (n, 3)), ``base`` (the start
        before formation and noise, (3,)), ``pos``, ``vel``, ``rpy`` ((n, 3) or broadcastable).
    """
    from ..loop.initial import reference_start, sample_start

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
    from ..loop.initial import Spread

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


def _check_start(v: dict, world: Any, init: dict, fail: Any) -> None:
    """No drone starts below the floor or inside a wall or box; name the key that put it there."""
    from ..physics.world import below_floor, box_containing

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


def _prepare(v: dict, fail: Any) -> Prepared:
    """Drone, trajectory, world, initial draws and gains of a scenario, every check passed."""
    from ..physics.params import PhysicalError, check_physical

    _check_imu(v, fail)
    drone = _load_drone(v, fail)
    try:
        traj = _trajectory(v["trajectory"])
    except ValueError as e:  # what the trajectory itself rejects (e.g. coinciding waypoints)
        key = "waypoints" if v["trajectory"]["kind"] == "min_snap" else "kind"
        raise fail("trajectory", key, str(e)) from None
    world = _load_world(v)
    init = _initial(v, drone, traj)
    try:  # cannot fail for mass_rel < 1; inertia draws can break the triangle inequality
        check_physical(init["per_drone"])
    except PhysicalError as e:
        key = "mass_rel" if e.key == "mass" else "inertia_rel"
        at = f"drone {e.index[0]}: " if e.index else ""
        raise fail("randomize", key, f"{at}{e.reason}; lower randomize.{key}") from None
    _check_start(v, world, init, fail)
    gains = _check_gains(v, drone, fail)
    return Prepared(drone, traj, world, init, gains)


def _gains_name(v: dict) -> str:
    ct = v["controller"]
    return ct["gains"] or f"{Path(v['drone']['preset']).stem}_{ct['kind']}"


def _check_gains(v: dict, drone: Any, fail: Any) -> Any:
    """The controller's gains: the file exists, loads, and suits the drone and ``sim.dt``."""
    from ..loop.control import load_gains

    rate = v["controller"]["rate"]
    if v["controller"]["kind"] == "policy" and rate is None:
        rate = 100.0  # the environments' control rate, which the policy was trained at
    dt = v["sim"]["dt"] if rate is None else 1.0 / rate
    if rate is not None:
        from ..loop.brain import loop_periods

        try:
            loop_periods(v["sim"]["dt"], control_dt=dt)
        except ValueError as e:
            raise fail("controller", "rate", f"{rate:g} Hz: {e}") from None
    if v["controller"]["kind"] == "policy":
        from .rl.controller import policy_gains

        if not v["controller"]["path"]:
            raise fail("controller", "path", "kind = \"policy\" needs the policy file")
        try:
            return policy_gains(v["controller"]["path"], drone, dt)
        except ValueError as e:
            raise fail("controller", "path", str(e)) from None
    try:
        gains = load_gains(_gains_name(v), drone=drone, dt=dt)
    except ValueError as e:
        hint = "" if v["controller"]["gains"] else " (the default for drone.preset and kind)"
        raise fail("controller", "gains", f"{e}{hint}") from None
    if type(gains).__name__.lower().removesuffix("gains") != v["controller"]["kind"]:
        raise fail("controller", "gains", f"are not {v['controller']['kind']} gains")
    return gains


def _trajectory(t: dict) -> Any:
    """The reference of ``[trajectory]`` (:func:`quadsim.loop.initial.make_trajectory`)."""
    from ..loop.initial import make_trajectory

    params = {key: val for key, val in t.items() if key != "kind"}
    return make_trajectory(t["kind"], **params)
