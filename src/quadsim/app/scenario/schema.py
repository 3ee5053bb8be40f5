"""The scenario schema: every key of a scenario file, its type, default and meaning.

:data:`SCHEMA` (section -> key -> :class:`Key`) is the one place where defaults live;
``docs/scenarios.md`` prints it (:func:`schema_markdown`, checked by a test). :func:`type_ok`
checks a parsed value against a key's type, and :data:`EXPECT` says what a type is in an error
message.
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["EXPECT", "REQUIRED", "SCHEMA", "Key", "schema_markdown", "type_ok"]


class Key(NamedTuple):
    """One scenario key: expected type, default (``REQUIRED`` if none) and meaning."""

    type: str  # "float", "int", "bool", "str", "vec3", "list", "table", "floats"
    default: Any
    doc: str
    choices: tuple | None = None
    positive: bool = False
    nonneg: bool = False


REQUIRED = object()
"""The default of a key that must be written (validation says ``missing`` otherwise)."""
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
            "str", "geometric", "Controller: `geometric`, `pid`, `policy` (a trained policy "
            "file, `path`), or a controller part (`package.module:Class` or an entry point; its "
            "other keys are its parameters; docs/parts.md).",
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
            "int", 0, "Steps the loop runs between hand-overs to the log (progress, Ctrl-C); "
            "0: about 0.1 s of wall time each on the compiled loop, 1000 steps on the others.",
            nonneg=True,
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


def type_ok(kind: str, v: Any) -> bool:
    """Whether ``v`` (as parsed from TOML) has the schema type ``kind`` (:attr:`Key.type`).

    Numbers are ints or floats but not bools; ``vec3`` is a list of three numbers, ``floats`` a
    list of numbers; any other type (``list``) is a list.
    """
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
        return isinstance(v, list) and len(v) == 3 and all(type_ok("float", x) for x in v)
    if kind == "floats":
        return isinstance(v, list) and all(type_ok("float", x) for x in v)
    return isinstance(v, list)


EXPECT = {
    "float": "a number",
    "int": "an integer",
    "bool": "true or false",
    "str": "a string",
    "vec3": "a list of 3 numbers",
    "floats": "a list of numbers",
    "list": "a list",
}
"""What each schema type reads as in an error message (``expected a number``)."""


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
