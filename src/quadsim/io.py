r"""Flight logs on disk (Parquet, CSV) and run summaries.

A *log* is a ``dict[str, numpy.ndarray]`` of time-major arrays (T samples, N drones, R rotors):
``"time"`` (T,) [s] and per-drone arrays of shape (T, N) or (T, N, k) (see :data:`COLUMNS`).

**On disk** a log is a *long* table: one row per sample and drone, ordered time-major then drone
(row ``t N + i`` is drone ``i`` at sample ``t``), with columns ``time`` (float64 [s]) and
``drone`` (int32) followed by flat columns (``x, y, z, qx, ..., rpm_0, ...``). The mapping from
log keys to columns and units is the single table :data:`COLUMNS`, used by the writer, the reader
and the docs (:func:`describe_columns`).

* Parquet: every field carries the metadata ``{"unit": ..., "description": ...}``; the schema
  carries the key ``"quadsim"``, a JSON object ``{"format": "quadsim-log", "version": 1,
  "meta": <run metadata>, "units": {column: unit}, "n": N, "n_rotors": R}``. Each written chunk
  is one row group; the footer is written by :meth:`LogWriter.close`, so a run stopped with
  Ctrl-C inside ``with LogWriter(...)`` leaves a valid file holding every completed chunk.
* CSV: the same columns and rows; units live in the header, each name written ``name [unit]``
  (``time [s], drone [index], x [m], ..., saturated [bool]``); flags are ``true``/``false``,
  floats are written in their shortest round-trip form. The run metadata is not in the CSV
  (it is in the Parquet file and ``summary.json``).

**Summary** (:func:`summarize`). With position error ``e = pos - ref_pos`` [m] and only the
samples before a drone's first crash counted ("flying" samples):

* ``tracking_rms_m = sqrt(mean |e|^2)`` over all drones and flying samples with ``time >= t_from``
  (per drone likewise), ``tracking_max_m = max |e|``;
* tilt = angle between body z and world z, ``atan2(sqrt(z_x^2 + z_y^2), z_z)`` with
  ``z = R_wb e_z``; reported in degrees;
* each sample stands for the interval until the next one (sample-and-hold; the last one for
  the median step ``dt``): ``sim_time_s = t_last - t_first + dt``; time in rotor saturation
  sums those intervals where the allocation flag ``saturated`` is set (if the log has no
  ``saturated``: where any ``cmd_rpm`` lies at ``rpm_min`` or ``rpm_max``);
* ``real_time_factor = sim_time_s / wall_time_s`` (simulated seconds of the whole batch per
  wall-clock second) and ``drone_seconds_per_wall_second = N sim_time_s / wall_time_s``.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

__all__ = [
    "COLUMNS",
    "Field",
    "LogWriter",
    "column_units",
    "describe_columns",
    "format_summary_table",
    "read_log",
    "summarize",
    "tilt",
    "write_log",
    "write_summary",
]

FORMAT = "quadsim-log"
VERSION = 1
_META_KEY = b"quadsim"


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
    _f("crashed", "crashed", "bool", "drone has crashed", kind="b"),
    _f("landed", "landed", "bool", "drone rests on the ground", kind="b"),
)
_BY_KEY = {f.key: f for f in COLUMNS}
_DATA = tuple(f for f in COLUMNS if f.key not in ("time", "drone"))


def _names(field: Field, n_rotors: int) -> list[str]:
    if field.per_rotor:
        return [field.columns[0].format(i=i) for i in range(n_rotors)]
    return list(field.columns)


def _units(field: Field, n_rotors: int) -> list[str]:
    return [field.units[0]] * n_rotors if field.per_rotor else list(field.units)


def column_units(n_rotors: int, keys: Iterable[str] | None = None) -> dict[str, str]:
    """Column name -> unit for ``n_rotors`` rotors (all keys, or ``time``, ``drone`` + ``keys``)."""
    want = None if keys is None else {"time", "drone", *keys}
    out: dict[str, str] = {}
    for f in COLUMNS:
        if want is None or f.key in want:
            out.update(zip(_names(f, n_rotors), _units(f, n_rotors), strict=True))
    return out


def describe_columns(n_rotors: int = 4) -> str:
    """The column table as Markdown (log key, columns, unit, meaning), for the docs."""
    lines = ["| log key | columns | unit | meaning |", "|---|---|---|---|"]
    for f in COLUMNS:
        cols = (
            ", ".join(_names(f, n_rotors))
            if not f.per_rotor
            else (f"{f.columns[0].format(i=0)} … {f.columns[0].format(i=n_rotors - 1)}")
        )
        units = ", ".join(dict.fromkeys(f.units))
        lines.append(f"| `{f.key}` | {cols} | {units} | {f.description} |")
    return "\n".join(lines)


# --------------------------------------------------------------------------- JSON helpers


def _jsonable(x: Any) -> Any:
    """Numpy scalars/arrays -> Python; non-finite floats -> None (JSON null)."""
    if isinstance(x, Mapping):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist())
    if isinstance(x, np.generic):
        return _jsonable(x.item())
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, (str, int, bool)) or x is None:
        return x
    if isinstance(x, os.PathLike):
        return os.fspath(x)
    return str(x)


def _dumps(obj: Any, **kw: Any) -> str:
    return json.dumps(_jsonable(obj), allow_nan=False, **kw)


# --------------------------------------------------------------------------- writer


def _check_chunk(chunk: Mapping[str, Any]) -> tuple[dict[str, np.ndarray], int, int, int]:
    """Validate a chunk; return (numpy arrays, T, N, R) (R = 0 without rotor keys)."""
    unknown = sorted(k for k in chunk if k not in _BY_KEY or k == "drone")
    if unknown:
        raise ValueError(
            f"log chunk: unknown key(s) {unknown}; known keys: {[f.key for f in _DATA]} "
            "(add a row to quadsim.io.COLUMNS)"
        )
    for f in COLUMNS:
        if f.required and f.key not in chunk:
            raise ValueError(f"log chunk: missing required key {f.key!r}")
    arrs = {k: np.asarray(v) for k, v in chunk.items()}
    time = arrs["time"]
    if time.ndim != 1:
        raise ValueError(f"log chunk: 'time' must have shape (T,), got {time.shape}")
    T = time.shape[0]
    pos = arrs["pos"]
    if pos.ndim != 3 or pos.shape[0] != T or pos.shape[2] != 3:
        raise ValueError(f"log chunk: 'pos' must have shape (T={T}, N, 3), got {pos.shape}")
    N = pos.shape[1]
    R = 0
    for f in _DATA:
        if f.key not in arrs:
            continue
        a = arrs[f.key]
        if f.per_rotor:
            if a.ndim != 3 or a.shape[:2] != (T, N):
                raise ValueError(
                    f"log chunk: {f.key!r} must have shape (T={T}, N={N}, R), got {a.shape}"
                )
            if R and a.shape[2] != R:
                raise ValueError(f"log chunk: {f.key!r} has {a.shape[2]} rotors, expected {R}")
            R = a.shape[2]
            continue
        k = len(f.columns)
        want = (T, N, k) if k > 1 else (T, N)
        if a.shape != want:
            raise ValueError(f"log chunk: {f.key!r} must have shape {want}, got {a.shape}")
    return arrs, T, N, R


def _pa_type(pa: Any, f: Field, a: np.ndarray) -> Any:
    if f.kind == "b":
        return pa.bool_()
    return pa.float32() if a.dtype == np.float32 else pa.float64()


def _schema(
    pa: Any, arrs: Mapping[str, np.ndarray], N: int, R: int, meta: Mapping[str, Any]
) -> Any:
    fields = []
    for f in COLUMNS:
        if f.key == "drone":
            typ = pa.int32()
        elif f.key == "time":
            typ = pa.float64()
        elif f.key in arrs:
            typ = _pa_type(pa, f, arrs[f.key])
        else:
            continue
        for name, unit in zip(_names(f, R), _units(f, R), strict=True):
            fields.append(
                pa.field(
                    name, typ, nullable=False, metadata={"unit": unit, "description": f.description}
                )
            )
    units = {fl.name: fl.metadata[b"unit"].decode() for fl in fields}
    doc = {
        "format": FORMAT,
        "version": VERSION,
        "meta": meta,
        "units": units,
        "n": N,
        "n_rotors": R,
    }
    return pa.schema(fields, metadata={_META_KEY: _dumps(doc).encode()})


def _long_columns(
    arrs: Mapping[str, np.ndarray], schema: Any, T: int, N: int, R: int
) -> list[np.ndarray]:
    """(T, N, ...) arrays -> one flat (T*N,) array per schema column, time-major then drone."""
    cols: dict[str, np.ndarray] = {
        "time": np.repeat(np.asarray(arrs["time"], dtype=np.float64), N),
        "drone": np.tile(np.arange(N, dtype=np.int32), T),
    }
    for f in _DATA:
        if f.key not in arrs:
            continue
        names = _names(f, R)
        a = arrs[f.key].reshape(T * N, -1)
        for j, name in enumerate(names):
            cols[name] = a[:, j]
    out = []
    for fl in schema:
        if fl.name not in cols:
            raise ValueError(
                f"log chunk: column {fl.name!r} missing (keys must match the first chunk)"
            )
        out.append(np.ascontiguousarray(cols[fl.name], dtype=fl.type.to_pandas_dtype()))
    if len(cols) != len(schema):
        extra = sorted(set(cols) - set(schema.names))
        raise ValueError(f"log chunk: columns {extra} not in the first chunk")
    return out


class LogWriter:
    """Stream log chunks to Parquet (and optionally CSV); use it as a context manager.

    ``write`` appends a chunk as one Parquet row group (and CSV rows); ``close`` writes the
    Parquet footer, also when the ``with`` block is left by an exception (e.g. Ctrl-C), so the
    file stays readable with every completed chunk. The schema (which optional keys, N, R,
    float32 or float64) is fixed by the first chunk. If no chunk was written, ``close`` writes
    no file.

    Args:
        path: Parquet file to create (parent directories are created).
        meta: Run metadata (JSON-able; NumPy values converted), stored in the schema.
        csv_path: Also write the rows to this CSV file (header ``name [unit]``).
        compression: Parquet codec (``"zstd"``, ``"snappy"``, ``"none"`` ...).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        meta: Mapping[str, Any] | None = None,
        csv_path: str | os.PathLike[str] | None = None,
        compression: str = "zstd",
    ):
        import pyarrow  # noqa: F401  (fail early with ImportError when missing)

        self.path = Path(path)
        self.csv_path = None if csv_path is None else Path(csv_path)
        self.meta = json.loads(_dumps(dict(meta or {})))
        self.compression = compression
        self.rows = 0
        self.chunks = 0
        self._pq: Any = None
        self._csv: Any = None
        self._csv_file: Any = None
        self._schema: Any = None
        self._shape: tuple[int, int] | None = None
        self._closed = False

    def __enter__(self) -> LogWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _open(self, arrs: Mapping[str, np.ndarray], N: int, R: int) -> None:
        import pyarrow as pa
        import pyarrow.csv as pcsv
        import pyarrow.parquet as pq

        self._schema = _schema(pa, arrs, N, R, self.meta)
        self._shape = (N, R)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # dictionary encoding only for the drone index: on float columns it costs 4x the time
        self._pq = pq.ParquetWriter(
            self.path, self._schema, compression=self.compression, use_dictionary=["drone"]
        )
        if self.csv_path is not None:
            self.csv_path.parent.mkdir(parents=True, exist_ok=True)
            self._csv_file = open(self.csv_path, "wb")  # closed in close()
            units = column_units(R)
            header = ",".join(f"{n} [{units[n]}]" for n in self._schema.names)
            self._csv_file.write((header + "\n").encode())
            self._csv = pcsv.CSVWriter(
                self._csv_file,
                self._schema.remove_metadata(),
                write_options=pcsv.WriteOptions(include_header=False),
            )

    def write(self, chunk: Mapping[str, Any]) -> None:
        """Append a chunk: ``{"time": (T,), "pos": (T, N, 3), ...}`` (see :data:`COLUMNS`).

        Raises:
            ValueError: On unknown keys, bad shapes, or keys/N/R differing from the first chunk.
        """
        import pyarrow as pa

        if self._closed:
            raise ValueError("LogWriter is closed")
        arrs, T, N, R = _check_chunk(chunk)
        if self._schema is None:
            self._open(arrs, N, R)
        elif (N, R) != self._shape:
            raise ValueError(
                f"log chunk: (N, R) = {(N, R)} differs from the first chunk's {self._shape}"
            )
        if T == 0:
            return
        cols = _long_columns(arrs, self._schema, T, N, R)
        table = pa.Table.from_arrays(cols, schema=self._schema)
        self._pq.write_table(table)
        if self._csv is not None:
            self._csv.write_table(table.replace_schema_metadata(None))
            self._csv_file.flush()
        self.rows += T * N
        self.chunks += 1

    def close(self) -> None:
        """Write the Parquet footer and close the files (idempotent)."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._pq is not None:
                self._pq.close()
        finally:
            if self._csv is not None:
                self._csv.close()
            if self._csv_file is not None:
                self._csv_file.close()


def write_log(
    path: str | os.PathLike[str],
    log: Mapping[str, Any],
    meta: Mapping[str, Any] | None = None,
    csv_path: str | os.PathLike[str] | None = None,
) -> None:
    """Write a whole log (one chunk) to Parquet (and CSV); see :class:`LogWriter`."""
    with LogWriter(path, meta, csv_path=csv_path) as w:
        w.write(log)


# --------------------------------------------------------------------------- reader


def read_log(path: str | os.PathLike[str]) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Read a log written by :class:`LogWriter` (Parquet, or CSV by the ``.csv`` suffix).

    Returns:
        ``(log, meta)``: the log dict of (T, N, ...) arrays (the inverse of the writer: values
        and dtypes are bitwise those written) and the run metadata (``{}`` for CSV).

    Raises:
        ValueError: If the rows are not a complete time-major (T, N) grid.
    """
    p = Path(path)
    if p.suffix.lower() == ".csv":
        import pyarrow as pa
        import pyarrow.csv as pcsv

        with open(p, encoding="utf-8") as fh:
            header = fh.readline().strip().split(",")
        types = {
            h: pa.bool_()
            if h.endswith("[bool]")
            else pa.int32()
            if h.split(" [")[0] == "drone"
            else pa.float64()
            for h in header
        }
        table = pcsv.read_csv(p, convert_options=pcsv.ConvertOptions(column_types=types))
        table = table.rename_columns([n.split(" [")[0] for n in table.column_names])
        meta: dict[str, Any] = {}
        n = None
    else:
        import pyarrow.parquet as pq

        table = pq.read_table(p)
        raw = (table.schema.metadata or {}).get(_META_KEY)
        doc = json.loads(raw) if raw else {}
        meta = doc.get("meta", {})
        n = doc.get("n")
    return _from_table(table, n, p), meta


def _from_table(table: Any, n: int | None, p: Path) -> dict[str, np.ndarray]:
    names = set(table.column_names)
    for req in ("time", "drone"):
        if req not in names:
            raise ValueError(f"{p}: column {req!r} missing; not a quadsim log")
    drone = table.column("drone").to_numpy()
    if n is None:
        n = int(drone.max()) + 1 if drone.size else 0
    rows = table.num_rows
    if rows and (n == 0 or rows % n):
        raise ValueError(f"{p}: {rows} rows is not a multiple of N = {n} drones")
    T = rows // n if n else 0
    if not np.array_equal(drone, np.tile(np.arange(n, dtype=drone.dtype), T)):
        raise ValueError(f"{p}: rows are not ordered time-major then drone 0..{n - 1}")
    R = max(
        (
            int(c.split("_")[-1]) + 1
            for c in names
            if c.startswith(("rpm_", "cmd_rpm_")) and c.split("_")[-1].isdigit()
        ),
        default=0,
    )

    def col(name: str) -> np.ndarray:
        return table.column(name).to_numpy()

    time = col("time")
    log: dict[str, np.ndarray] = {"time": time[::n] if n else time[:0]}
    for f in _DATA:
        cols = _names(f, R)
        if not cols or cols[0] not in names:
            continue
        if f.per_rotor or len(cols) > 1:
            log[f.key] = np.stack([col(c) for c in cols], axis=-1).reshape(T, n, len(cols))
        else:
            log[f.key] = col(cols[0]).reshape(T, n)
    return log


# --------------------------------------------------------------------------- summary


def _sample_dt(time: np.ndarray, meta: Mapping[str, Any]) -> np.ndarray:
    """Interval [s] each sample stands for (sample-and-hold), shape (T,)."""
    T = time.shape[0]
    if T == 0:
        return np.zeros(0)
    if T > 1:
        d = np.diff(time)
        last = float(np.median(d))
    else:
        d = np.zeros(0)
        last = float(meta.get("dt") or 0.0)
    return np.concatenate([d, [last]])


def tilt(quat: np.ndarray) -> np.ndarray:
    """Angle [rad] between body z and world z of xyzw quaternions ``(..., 4)`` -> ``(...)``."""
    q = np.asarray(quat, dtype=np.float64)
    x, y, z, w = (q[..., i] for i in range(4))
    n2 = x * x + y * y + z * z + w * w
    zx = 2.0 * (x * z + w * y)
    zy = 2.0 * (y * z - w * x)
    zz = w * w + z * z - x * x - y * y  # = n2 (1 - 2(x²+y²)/n2)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.arctan2(np.hypot(zx, zy) / n2, zz / n2)


def _nanmax(a: np.ndarray, axis: Any = None) -> Any:
    a = np.where(np.isfinite(a), a, -np.inf)
    m = np.max(a, axis=axis, initial=-np.inf)
    return np.where(np.isinf(m) & (m < 0), np.nan, m)


def summarize(
    log: Mapping[str, Any],
    meta: Mapping[str, Any] | None,
    wall_time: float,
    interrupted: bool = False,
    t_from: float = 0.0,
) -> dict[str, Any]:
    """Summary statistics of a flight log (definitions in the module docstring).

    Args:
        log: Log dict (``time`` (T,), ``pos`` (T, N, 3), ``quat``, optionally ``ref_pos``,
            ``saturated``, ``cmd_rpm``, ``crashed``...).
        meta: Run metadata (``rpm_min``, ``rpm_max``, ``dt`` used when present).
        wall_time: Wall-clock time of the run [s].
        interrupted: The run was stopped early (Ctrl-C).
        t_from: Tracking error counts samples with ``time >= t_from`` [s] (settling skipped).

    Returns:
        A JSON-able dict: ``interrupted``, ``n_drones``, ``n_samples``, ``sim_time_s``,
        ``wall_time_s``, ``real_time_factor``, ``drone_seconds_per_wall_second``, ``t_from_s``,
        ``tracking_rms_m``, ``tracking_max_m``, ``max_tilt_deg``, ``saturation_time_s`` (worst
        drone), ``saturation_fraction`` (of all drone-samples), ``crash_count``, ``crashes``
        (list of ``{"drone", "time_s"}``), ``landed_count`` (at the last sample) and
        ``per_drone`` (list of per-drone dicts). Missing quantities are ``None``; NaN only
        where no finite sample exists.
    """
    meta = dict(meta or {})
    time = np.asarray(log["time"], dtype=np.float64)
    pos = np.asarray(log["pos"], dtype=np.float64)
    T, N = pos.shape[:2]
    dt = _sample_dt(time, meta)
    sim_time = float(dt.sum())

    crashed = np.asarray(log.get("crashed", np.zeros((T, N), bool)), dtype=bool)
    ever = np.logical_or.accumulate(crashed, axis=0) if T else crashed
    flying = ~ever
    crash_idx = np.argmax(crashed, axis=0) if T else np.zeros(N, int)
    crash_t = [float(time[crash_idx[i]]) if T and crashed[:, i].any() else None for i in range(N)]
    crashes = sorted(
        ({"drone": i, "time_s": t} for i, t in enumerate(crash_t) if t is not None),
        key=lambda c: (c["time_s"], c["drone"]),
    )

    # tracking error
    err_rms_d = np.full(N, np.nan)
    err_max_d = np.full(N, np.nan)
    rms = mx = None
    if "ref_pos" in log:
        e = np.linalg.norm(pos - np.asarray(log["ref_pos"], dtype=np.float64), axis=-1)
        use = flying & (time >= t_from)[:, None] & np.isfinite(e)
        e2 = np.where(use, e * e, 0.0)
        cnt = use.sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            err_rms_d = np.sqrt(e2.sum(axis=0) / cnt)
            rms = float(np.sqrt(e2.sum() / cnt.sum())) if cnt.sum() else math.nan
        err_max_d = _nanmax(np.where(use, e, np.nan), axis=0)
        mx = float(_nanmax(np.where(use, e, np.nan)))

    # tilt
    til = np.degrees(tilt(log["quat"]))
    til_d = _nanmax(np.where(flying, til, np.nan), axis=0)
    max_tilt = float(_nanmax(np.where(flying, til, np.nan)))

    # saturation
    sat = None
    if "saturated" in log:
        sat = np.asarray(log["saturated"], dtype=bool)
    elif "cmd_rpm" in log and "rpm_min" in meta and "rpm_max" in meta:
        c = np.asarray(log["cmd_rpm"], dtype=np.float64)
        tol = 1e-9 * max(abs(float(meta["rpm_max"])), 1.0)
        sat = np.any(
            (c >= float(meta["rpm_max"]) - tol) | (c <= float(meta["rpm_min"]) + tol), axis=-1
        )
    if sat is not None:
        sat = sat & flying
        sat_d = (sat * dt[:, None]).sum(axis=0)
        sat_time = float(sat_d.max()) if N else 0.0
        sat_frac = float(sat_d.sum() / (N * sim_time)) if N and sim_time > 0 else math.nan
    else:
        sat_d = np.full(N, np.nan)
        sat_time = sat_frac = None

    landed = np.asarray(log["landed"], dtype=bool)[-1] if "landed" in log and T else None
    wall = float(wall_time)
    with np.errstate(divide="ignore", invalid="ignore"):
        rtf = sim_time / wall if wall > 0 else math.inf
    per_drone = [
        {
            "drone": i,
            "tracking_rms_m": float(err_rms_d[i]),
            "tracking_max_m": float(err_max_d[i]),
            "max_tilt_deg": float(til_d[i]),
            "saturation_time_s": float(sat_d[i]),
            "crash_time_s": crash_t[i],
            "landed": None if landed is None else bool(landed[i]),
        }
        for i in range(N)
    ]
    return {
        "interrupted": bool(interrupted),
        "drone": meta.get("drone"),
        "scenario": meta.get("scenario"),
        "n_drones": int(N),
        "n_samples": int(T),
        "sim_time_s": sim_time,
        "wall_time_s": wall,
        "real_time_factor": rtf,
        "drone_seconds_per_wall_second": N * rtf,
        "t_from_s": float(t_from),
        "tracking_rms_m": rms,
        "tracking_max_m": mx,
        "max_tilt_deg": max_tilt,
        "saturation_time_s": sat_time,
        "saturation_fraction": sat_frac,
        "crash_count": len(crashes),
        "crashes": crashes,
        "landed_count": None if landed is None else int(landed.sum()),
        "per_drone": per_drone,
    }


def write_summary(path: str | os.PathLike[str], summary: Mapping[str, Any]) -> None:
    """Write a summary as indented JSON; NaN and ±inf become ``null``."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(_dumps(summary, indent=2) + "\n")


def _fmt(v: Any, unit: str = "", prec: int = 4) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "n/a" if v is None or math.isnan(v) else ("inf" if v > 0 else "-inf")
    if isinstance(v, float):
        return f"{v:.{prec}g}{(' ' + unit) if unit else ''}"
    return f"{v}{(' ' + unit) if unit else ''}"


def format_summary_table(summary: Mapping[str, Any], max_crashes: int = 5) -> str:
    """A short plain-text table of a :func:`summarize` result (two columns, no dependencies)."""
    s = summary
    crashes = s.get("crashes") or []
    ct = ", ".join(f"#{c['drone']} at {_fmt(c['time_s'], 's')}" for c in crashes[:max_crashes])
    if len(crashes) > max_crashes:
        ct += f", ... ({len(crashes) - max_crashes} more)"
    frac = s.get("saturation_fraction")
    rows = [
        ("status", "INTERRUPTED" if s.get("interrupted") else "completed"),
        ("drones x samples", f"{s.get('n_drones')} x {s.get('n_samples')}"),
        ("sim time", _fmt(s.get("sim_time_s"), "s")),
        ("wall time", _fmt(s.get("wall_time_s"), "s")),
        (
            "real-time factor",
            _fmt(s.get("real_time_factor"), "x")
            + f"  ({_fmt(s.get('drone_seconds_per_wall_second'))} drone-s/s)",
        ),
        (
            "tracking RMS" + (f" (t >= {_fmt(s.get('t_from_s'))} s)" if s.get("t_from_s") else ""),
            _fmt(s.get("tracking_rms_m"), "m"),
        ),
        ("tracking max", _fmt(s.get("tracking_max_m"), "m")),
        ("max tilt", _fmt(s.get("max_tilt_deg"), "deg")),
        (
            "rotor saturation",
            _fmt(s.get("saturation_time_s"), "s")
            + ("" if frac is None else f"  ({_fmt(100 * frac if math.isfinite(frac) else frac)}%)"),
        ),
        ("crashes", f"{s.get('crash_count', 0)}" + (f": {ct}" if ct else "")),
    ]
    w = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{w}}  {v}" for k, v in rows)
