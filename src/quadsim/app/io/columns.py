"""The log-key -> column table (:data:`COLUMNS`): column names, units and descriptions."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple


class Field(NamedTuple):
    """One log key and its flat columns.

    Attributes:
        key: Key in the log dict.
        columns: Column names; a single ``"name_{i}"`` template when ``per_rotor``.
        units: Unit of each column (same length as ``columns``).
        kind: ``"f"`` float (dtype kept), ``"b"`` bool.
        per_rotor: The array is (T, N, R), one column per rotor.
        required: The writer refuses a chunk without it.
        description: What the columns hold.
    """

    key: str
    columns: tuple[str, ...]
    units: tuple[str, ...]
    kind: str
    per_rotor: bool
    required: bool
    description: str


def _f(
    key: str,
    cols: str,
    units: str | tuple[str, ...],
    desc: str,
    *,
    kind: str = "f",
    per_rotor: bool = False,
    required: bool = False,
) -> Field:
    names = tuple(cols.split())
    u = (units,) * len(names) if isinstance(units, str) else units
    return Field(key, names, u, kind, per_rotor, required, desc)


#: The log-key -> columns table (``time`` and ``drone`` are the index columns).
COLUMNS: tuple[Field, ...] = (
    _f("time", "time", "s", "simulation time of the sample", required=True),
    _f("drone", "drone", "index", "drone index 0..N-1 (int32; not a log key)"),
    _f("pos", "x y z", "m", "position, world ENU", required=True),
    _f("quat", "qx qy qz qw", "1", "attitude quaternion xyzw, body FLU -> world", required=True),
    _f("vel", "vx vy vz", "m/s", "velocity, world frame"),
    _f("ang_vel", "wx wy wz", "rad/s", "angular velocity, body frame"),
    _f("rotor_rpm", "rpm_{i}", "RPM", "actual rotor speed", per_rotor=True),
    _f("motor_heat", "heat_{i}", "1",
       "motor warm-up state (0 cold, 1 warm in hover; a drone with a warm-up)", per_rotor=True),
    _f("cmd_rpm", "cmd_rpm_{i}", "RPM", "commanded rotor speed (after allocation)", per_rotor=True),
    _f(
        "cmd_wrench",
        "cmd_thrust cmd_tau_x cmd_tau_y cmd_tau_z",
        ("N", "N m", "N m", "N m"),
        "controller wrench: collective thrust along body z, body torque",
    ),
    _f(
        "lost_wrench",
        "lost_thrust lost_tau_x lost_tau_y lost_tau_z",
        ("N", "N m", "N m", "N m"),
        "requested minus achieved wrench (allocation)",
    ),
    _f("saturated", "saturated", "bool", "allocation could not meet the request", kind="b"),
    _f("ref_pos", "ref_x ref_y ref_z", "m", "reference position"),
    _f("ref_vel", "ref_vx ref_vy ref_vz", "m/s", "reference velocity"),
    _f("ref_yaw", "ref_yaw", "rad", "reference yaw"),
    _f("gyro", "gyro_x gyro_y gyro_z", "rad/s", "IMU gyroscope reading, body frame"),
    _f("accel", "accel_x accel_y accel_z", "m/s^2", "IMU accelerometer reading, body frame"),
    _f("mocap_pos", "mocap_x mocap_y mocap_z", "m", "motion-capture position, world"),
    _f("mocap_stamp", "mocap_stamp", "s", "time the delivered motion-capture pose was taken"),
    _f("baro_alt", "baro_alt", "m", "barometric altitude reading (bias and noise included)"),
    _f("gnss_pos", "gnss_x gnss_y gnss_z", "m", "GNSS position fix, world ENU"),
    _f("gnss_vel", "gnss_vx gnss_vy gnss_vz", "m/s", "GNSS velocity fix, world"),
    _f("gnss_stamp", "gnss_stamp", "s", "time the delivered GNSS fix was taken"),
    _f("battery_v", "battery_v", "V", "battery terminal voltage (sim.command = pwm)"),
    _f("battery_i", "battery_i", "A", "battery current"),
    _f("battery_p", "battery_p", "W", "electrical power drawn (electronics and motors)"),
    _f("battery_charge", "battery_charge", "1", "battery charge, 0..1"),
    _f("est_pos", "est_x est_y est_z", "m", "estimated position, world (the estimator's)"),
    _f("est_vel", "est_vx est_vy est_vz", "m/s", "estimated velocity, world"),
    _f("est_quat", "est_qx est_qy est_qz est_qw", "1", "estimated attitude quaternion xyzw"),
    _f("est_accel_bias", "est_bax est_bay est_baz", "m/s^2", "estimated accelerometer bias"),
    _f("est_gyro_bias", "est_bgx est_bgy est_bgz", "rad/s", "estimated gyroscope bias"),
    _f(
        "est_cov",
        "est_var_x est_var_y est_var_z est_var_vx est_var_vy est_var_vz est_var_rx est_var_ry "
        "est_var_rz est_var_bax est_var_bay est_var_baz est_var_bgx est_var_bgy est_var_bgz",
        ("m^2",) * 3 + ("m^2/s^2",) * 3 + ("rad^2",) * 3 + ("m^2/s^4",) * 3 + ("rad^2/s^2",) * 3,
        "error covariance diagonal of the EKF (position, velocity, body attitude error, biases), "
        "at the filter's time (the motion-capture latency earlier)",
    ),
    _f("est_nees", "est_nees", "1", "NEES of position, velocity and attitude (9 dof), EKF"),
    _f("crashed", "crashed", "bool", "drone has crashed", kind="b"),
    _f("landed", "landed", "bool", "drone rests on the ground", kind="b"),
)
_BY_KEY = {f.key: f for f in COLUMNS}
_DATA = tuple(f for f in COLUMNS if f.key not in ("time", "drone"))


def declared_fields(meta: Mapping[str, Any] | None) -> tuple[Field, ...]:
    """:data:`COLUMNS` and the columns a run declares in ``meta["columns"]`` (its sensor parts'
    outputs, :func:`quadsim.loop.parts.log_columns`: ``{"key", "columns", "units",
    "description"}`` each; float columns).

    Raises:
        ValueError: A declared key that is already a column, or a malformed declaration.
    """  # noqa: D205
    extra = []
    for c in (meta or {}).get("columns") or ():
        try:
            f = Field(str(c["key"]), tuple(map(str, c["columns"])), tuple(map(str, c["units"])),
                      "f", False, False, str(c.get("description", "")))  # fmt: skip
        except (KeyError, TypeError) as e:
            raise ValueError(f"log metadata: a malformed column declaration {c!r} ({e})") from None
        if f.key in _BY_KEY or len(f.columns) != len(f.units) or not f.columns:
            raise ValueError(f"log metadata: column declaration {f.key!r} clashes with a "
                             f"built-in column or has no columns")  # fmt: skip
        extra.append(f)
    return COLUMNS + tuple(extra)


def names_of(field: Field, n_rotors: int) -> list[str]:
    """The column names of ``field`` for ``n_rotors`` rotors."""
    if field.per_rotor:
        return [field.columns[0].format(i=i) for i in range(n_rotors)]
    return list(field.columns)


def units_of(field: Field, n_rotors: int) -> list[str]:
    """The unit of each column of ``field`` for ``n_rotors`` rotors."""
    return [field.units[0]] * n_rotors if field.per_rotor else list(field.units)


def column_units(n_rotors: int, keys: Iterable[str] | None = None) -> dict[str, str]:
    """Column name -> unit for ``n_rotors`` rotors (all keys, or ``time``, ``drone`` + ``keys``)."""
    want = None if keys is None else {"time", "drone", *keys}
    out: dict[str, str] = {}
    for f in COLUMNS:
        if want is None or f.key in want:
            out.update(zip(names_of(f, n_rotors), units_of(f, n_rotors), strict=True))
    return out


def describe_columns(n_rotors: int = 4) -> str:
    """The column table as Markdown (log key, columns, unit, meaning), for the docs."""
    lines = ["| log key | columns | unit | meaning |", "|---|---|---|---|"]
    for f in COLUMNS:
        cols = (
            ", ".join(names_of(f, n_rotors))
            if not f.per_rotor
            else (f"{f.columns[0].format(i=0)} … {f.columns[0].format(i=n_rotors - 1)}")
        )
        units = ", ".join(dict.fromkeys(f.units))
        lines.append(f"| `{f.key}` | {cols} | {units} | {f.description} |")
    return "\n".join(lines)
