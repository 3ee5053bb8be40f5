"""The flight logs of :mod:`quadsim.app.sysid.replay`: read, and checked for physical sense.

:func:`load_log` reads the columns of :data:`REQUIRED_COLUMNS` cell by cell
(:func:`quadsim.app.sysid.csvlog.read_columns`: rows are the file's line numbers, the header
being row 1; columns not in the list are not read and not checked) and then refuses, naming the
file, the row and the column (``FILE: row N, column 'C': what is wrong; got V``, ``V`` as
written in the file), the first row (the smallest line number) holding:

* a PWM outside ``0..65535`` (:data:`PWM_RANGE`);
* a battery voltage outside :data:`VBAT_RANGE_V`, 2.0-4.5 V: the motor model is the Crazyflie
  2.1's (one LiPo cell, power preset ``cf21_stock``), from its 3.0 V cut-off less 1 V (a cell
  sags below its cut-off under load: NanoBench's B6 logs 2.85 V in flight) to its 4.2 V full
  charge plus 0.3 V;
* an accelerometer or gyro reading outside the BMI088's range as the Crazyflie firmware sets it
  (±24 g, ±2000 deg/s per axis) plus 5 % for its calibration (:data:`ACC_RANGE_G`,
  :data:`GYRO_RANGE_RAD_S`);
* a position (Vicon, onboard EKF) beyond ±100 m or a Vicon velocity beyond ±50 m/s
  (:data:`POS_RANGE_M`, :data:`VEL_RANGE_M_S`);
* a quaternion (Vicon ``qx..qw``, onboard ``att_stateEstimate_qx..qw``) whose norm is not 1
  within :data:`QUAT_NORM_TOL` (0.01; the logs hold 2e-3 at worst): a zero quaternion is no
  attitude;
* a time ``t`` that does not increase, or a step longer than :data:`GAP_FACTOR` (5) times the
  median sample period (the logs hold steps of 2 periods, one dropped sample, at most).

A median sample period outside :data:`PERIOD_RANGE_S` (0.1 to 25 ms: the 10 Hz low-pass needs
more than 20 Hz, and a period of picoseconds is a time column in the wrong unit) and a log with
no row in flight are refused naming the column. :func:`check_fittable` refuses data from which
the fits of :func:`~quadsim.app.sysid.replay.replay` cannot be made (too few airborne samples, a
PWM, accelerometer, Vicon attitude or gyro that never changes), saying which;
:func:`check_distinct` refuses the same flight given twice (by content, :func:`flight_digest`),
which held out would be fitted on itself.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..validation import nanobench
from .csvlog import Columns, LogError, read_columns

__all__ = [
    "ACC_RANGE_G",
    "GAP_FACTOR",
    "GYRO_RANGE_RAD_S",
    "MIN_AIRBORNE",
    "MIN_ROWS",
    "PERIOD_RANGE_S",
    "POS_RANGE_M",
    "PWM_RANGE",
    "QUAT_NORM_TOL",
    "REQUIRED_COLUMNS",
    "VBAT_RANGE_V",
    "VEL_RANGE_M_S",
    "check_distinct",
    "check_fittable",
    "check_period",
    "flight_digest",
    "load_log",
]

REQUIRED_COLUMNS = (*nanobench.FLIGHT_COLUMNS, "pwr_pm_vbat")
"""The NanoBench columns :func:`load_log` reads and checks (those of
:func:`~quadsim.app.validation.nanobench.load_flight` and the battery voltage)."""

PWM_RANGE = (0.0, 65535.0)
"""The PWM's range (16 bits)."""

VBAT_RANGE_V = (2.0, 4.5)
"""Plausible battery voltages [V] of the motor model's one-cell battery (module docstring)."""

ACC_RANGE_G = 24.0 * 1.05
"""Largest accelerometer reading per axis [g] (BMI088 at ±24 g, plus 5 %)."""

GYRO_RANGE_RAD_S = math.radians(2000.0) * 1.05
"""Largest gyro reading per axis [rad/s] (BMI088 at ±2000 deg/s, plus 5 %)."""

POS_RANGE_M = 100.0
"""Largest position coordinate [m] (a motion-capture room is a few metres across)."""

VEL_RANGE_M_S = 50.0
"""Largest velocity component [m/s]."""

QUAT_NORM_TOL = 0.01
"""How far from 1 a logged quaternion's norm may be."""

GAP_FACTOR = 5.0
"""The longest time step accepted, in median sample periods."""

PERIOD_RANGE_S = (1e-4, 0.025)
"""The median sample periods accepted [s]."""

MIN_ROWS = 50
"""The fewest data rows of a log."""

MIN_AIRBORNE = 100
"""The fewest airborne samples the fits need (1 s at 100 Hz; the delays are searched over
0.4 s)."""

_PWM = tuple(f"motor_motor_m{i}" for i in range(1, 5))
_BOUNDS: tuple[tuple[tuple[str, ...], float, float, str], ...] = (
    (_PWM, *PWM_RANGE, "PWM outside 0..65535"),
    (("pwr_pm_vbat",), *VBAT_RANGE_V,
     "battery voltage outside 2.0..4.5 V (one Crazyflie cell, power preset cf21_stock)"),
    (tuple(f"imu_acc_{a}" for a in "xyz"), -ACC_RANGE_G, ACC_RANGE_G,
     f"accelerometer beyond the BMI088's range (±{ACC_RANGE_G:.1f} g)"),
    (tuple(f"imu_gyro_{a}" for a in "xyz"), -GYRO_RANGE_RAD_S, GYRO_RANGE_RAD_S,
     f"gyro beyond the BMI088's range (±{GYRO_RANGE_RAD_S:.1f} rad/s)"),
    (("px", "py", "pz", *(f"est_stateEstimate_{a}" for a in "xyz")), -POS_RANGE_M, POS_RANGE_M,
     f"position beyond ±{POS_RANGE_M:g} m"),
    (("vx", "vy", "vz"), -VEL_RANGE_M_S, VEL_RANGE_M_S, f"velocity beyond ±{VEL_RANGE_M_S:g} m/s"),
)  # fmt: skip
_QUATS = (
    (("qx", "qy", "qz", "qw"), "Vicon"),
    (tuple(f"att_stateEstimate_q{a}" for a in "xyzw"), "onboard EKF"),
)


def _first(mask: np.ndarray) -> int | None:
    idx = np.flatnonzero(mask)
    return int(idx[0]) if len(idx) else None


def _violations(cols: Columns) -> list[tuple[int, int, LogError]]:
    """Every check's first violation: ``(data row index, check order, error)``."""
    found: list[tuple[int, int, LogError]] = []
    for names, lo, hi, what in _BOUNDS:
        for name in names:
            v = cols[name]
            i = _first((v < lo) | (v > hi))
            if i is not None:
                found.append((i, len(found), cols.error(i, name, what)))
    for names, who in _QUATS:
        with np.errstate(over="ignore"):  # a norm of inf is refused like any other
            norm = np.linalg.norm(np.stack([cols[n] for n in names], axis=-1), axis=-1)
        i = _first(np.abs(norm - 1.0) > QUAT_NORM_TOL)
        if i is not None:
            what = (f"{who} quaternion of norm {norm[i]:.3g}, not a unit quaternion (within "
                    f"{QUAT_NORM_TOL:g})")  # fmt: skip
            found.append((i, len(found), cols.error(i, names, what)))
    t = cols["t"]
    step = np.diff(t)
    i = _first(step <= 0.0)
    if i is not None:
        what = f"time does not increase (row {cols.lines[i]} has {cols.cell(i, 't')})"
        found.append((i + 1, len(found), cols.error(i + 1, "t", what)))
    return found


def check_period(dt: float, path: str | Path | None = None) -> None:
    """Refuse a median sample period ``dt`` [s] outside :data:`PERIOD_RANGE_S`.

    Raises:
        LogError: Naming column ``t`` (and ``path``).
    """
    lo, hi = PERIOD_RANGE_S
    if not (lo <= dt <= hi):
        raise LogError(path, f"median sample period {dt:.3g} s, outside {1e3 * lo:g} to "
                       f"{1e3 * hi:g} ms (a log at 40 Hz to 10 kHz; time in seconds)",
                       column="t")  # fmt: skip


def _check(cols: Columns) -> None:
    """Raise the violation at the smallest row (ties: the first check), else a bad period."""
    found = _violations(cols)
    step = np.diff(cols["t"])
    med = float(np.median(step))
    lo, hi = PERIOD_RANGE_S
    i = _first(step > GAP_FACTOR * med) if lo <= med <= hi else None
    if i is not None:
        what = (
            f"a gap of {step[i]:.3g} s after row {cols.lines[i]}, more than "
            f"{GAP_FACTOR:g} times the median sample period ({med:.3g} s)"
        )
        found.append((i + 1, len(found), cols.error(i + 1, "t", what)))
    if found:
        raise min(found, key=lambda f: (f[0], f[1]))[2]
    check_period(med, cols.path)


def load_log(path: str | Path, fmt: str = "nanobench") -> dict[str, Any]:
    """A flight log, checked cell by cell and for physical sense (the module docstring), as
    :func:`~quadsim.app.validation.nanobench.flight_from_columns`'s dict plus ``"vbat"``
    ``(T,)`` [V] (``pwr_pm_vbat``), ``"lines"`` ``(T,)`` (each sample's line in the file) and
    ``"path"``.

    Raises:
        LogError: (a ``ValueError``) an unknown format, an unreadable or truncated file, a
            missing or repeated column, a row with another number of fields than the header, a
            cell that is not a finite number, a value out of its physical range, time not
            increasing or with a gap, fewer than :data:`MIN_ROWS` rows or none in flight; the
            message starts with the file and names the row and the column.
    """  # noqa: D205
    path = Path(path)
    if fmt != "nanobench":
        raise LogError(path, f"unknown log format {fmt!r} (known: 'nanobench')")
    cols = read_columns(path, REQUIRED_COLUMNS, min_rows=MIN_ROWS)
    _check(cols)
    flight = nanobench.flight_from_columns(path, cols.data)
    flight["vbat"] = cols["pwr_pm_vbat"]
    flight["lines"] = cols.lines
    if not np.any(flight["flying"]):
        raise LogError(path, f"no row in flight (PWM above {nanobench.PWM_FLYING:g})",
                       column="motor_motor_m1")  # fmt: skip
    flight["path"] = str(path)
    return flight


def _rows(flight: dict[str, Any], keep: np.ndarray) -> str:
    """``rows A-B`` (the file's lines) of the samples ``keep``, or ``samples A-B``."""
    idx = np.flatnonzero(keep)
    if "lines" in flight:
        return f"rows {flight['lines'][idx[0]]}-{flight['lines'][idx[-1]]}"
    return f"samples {idx[0]}-{idx[-1]}"


def check_fittable(flight: dict[str, Any], keep: np.ndarray, dt: float) -> None:
    """Refuse a flight whose replay fits cannot be made, saying what in the data prevents them.

    Args:
        flight: :func:`load_log`'s dict (or one in memory, see
            :func:`~quadsim.app.sysid.replay.replay`).
        keep: ``(T,)`` the airborne samples (:func:`~quadsim.app.sysid.replay.airborne`).
        dt: The median sample period [s].

    Raises:
        LogError: Fewer than :data:`MIN_AIRBORNE` airborne samples; a PWM, accelerometer z,
            Vicon attitude or gyro axis that never changes over them; a median sample period outside
            :data:`PERIOD_RANGE_S`. The message names the file (when the flight has a
            ``"path"``) and the columns.
    """
    path = flight.get("path")
    check_period(dt, path)
    n = int(np.sum(keep))
    if n < MIN_AIRBORNE:
        raise LogError(path, f"only {n} samples airborne (motor 1's PWM above "
                       f"{nanobench.PWM_FLYING:g} and the Vicon height 5 cm above its first "
                       f"0.5 s); at least {MIN_AIRBORNE} needed to fit the mass and the "
                       "delays", column=("motor_motor_m1", "pz"))  # fmt: skip
    span = _rows(flight, keep)
    pwm = np.asarray(flight["pwm"], dtype=np.float64)[keep]
    if np.all(np.ptp(pwm, axis=0) == 0.0):
        raise LogError(path, f"the PWM never changes over the {n} airborne samples ({span}): "
                       "the rotors' time constant and the PWM delays cannot be fitted",
                       column=_PWM)  # fmt: skip
    acc = np.asarray(flight["accel"], dtype=np.float64)[keep]
    if np.ptp(acc[:, 2]) == 0.0:
        raise LogError(path, f"the accelerometer's z never changes over the {n} airborne "
                       f"samples ({span}): the mass and the PWM-to-IMU delay cannot be fitted",
                       column="imu_acc_z")  # fmt: skip
    if "quat" in flight and np.all(np.ptp(np.asarray(flight["quat"])[keep], axis=0) == 0.0):
        raise LogError(path, f"the Vicon attitude never changes over the {n} airborne samples "
                       f"({span}): the IMU-to-Vicon delay cannot be fitted",
                       column=("qx", "qy", "qz", "qw"))  # fmt: skip
    gyro = np.asarray(flight["gyro"], dtype=np.float64)[keep]
    for j, a in enumerate("xyz"):
        if np.ptp(gyro[:, j]) == 0.0:
            raise LogError(path, f"the gyro's {a} never changes over the {n} airborne samples "
                           f"({span}): the angular acceleration cannot be compared",
                           column=f"imu_gyro_{a}")  # fmt: skip


def flight_digest(flight: dict[str, Any]) -> str:
    """The SHA-256 (hex) of a flight's data: every array of its dict (name, dtype, shape and
    values) but the file's line numbers, so that the same flight read from two files (another
    name, gzipped or not) has one digest."""  # noqa: D205, D209
    h = hashlib.sha256()
    for key in sorted(flight):
        v = flight[key]
        if key == "lines" or not isinstance(v, np.ndarray | list | tuple):
            continue
        a = np.ascontiguousarray(v)
        h.update(f"{key}:{a.dtype.str}:{a.shape};".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def check_distinct(flights: Sequence[dict[str, Any]]) -> None:
    """Refuse a flight given twice: the same content (:func:`flight_digest`) under two paths
    or names, which a held-out evaluation would fit on itself.

    Raises:
        LogError: Naming the second file (or flight) and the first.
    """  # noqa: D205
    seen: dict[str, int] = {}
    for i, f in enumerate(flights):
        j = seen.setdefault(flight_digest(f), i)
        if j != i:
            first = flights[j].get("path") or flights[j].get("name") or f"flight {j + 1}"
            raise LogError(f.get("path") or f.get("name") or None, f"the same flight as "
                           f"{first} (identical data): a flight given twice would be held out "
                           "against itself; give each flight once")  # fmt: skip
