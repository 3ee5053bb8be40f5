"""Flight logs on disk: :class:`LogWriter`, :func:`write_log`, :func:`read_log`.

Conversions between the log dict of (T, N, ...) arrays and the long Arrow table (one row per
sample and drone) written to Parquet and CSV; pyarrow is imported only when used.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .columns import Field, column_units, declared_fields, names_of, units_of
from .strict_json import strict_dumps

FORMAT = "quadsim-log"
VERSION = 1
META_KEY = b"quadsim"
"""The Parquet schema-metadata key of a log's document (format, run metadata, units, N, R)."""


def _data(fields: tuple[Field, ...]) -> tuple[Field, ...]:
    return tuple(f for f in fields if f.key not in ("time", "drone"))


def _check_chunk(
    chunk: Mapping[str, Any], fields: tuple[Field, ...]
) -> tuple[dict[str, np.ndarray], int, int, int]:
    """Validate a chunk; return (numpy arrays, T, N, R) (R = 0 without rotor keys)."""
    known = {f.key for f in _data(fields)}
    unknown = sorted(k for k in chunk if k not in known and k != "time")
    if unknown:
        raise ValueError(
            f"log chunk: unknown key(s) {unknown}; known keys: {sorted(known)} "
            "(add a row to quadsim.app.io.COLUMNS, or declare a sensor part's outputs in "
            "meta['columns'])"
        )
    for f in fields:
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
    for f in _data(fields):
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
    pa: Any, arrs: Mapping[str, np.ndarray], N: int, R: int, meta: Mapping[str, Any],
    declared: tuple[Field, ...],
) -> Any:  # fmt: skip
    fields = []
    for f in declared:
        if f.key == "drone":
            typ = pa.int32()
        elif f.key == "time":
            typ = pa.float64()
        elif f.key in arrs:
            typ = _pa_type(pa, f, arrs[f.key])
        else:
            continue
        for name, unit in zip(names_of(f, R), units_of(f, R), strict=True):
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
    return pa.schema(fields, metadata={META_KEY: strict_dumps(doc).encode()})


def _long_columns(
    arrs: Mapping[str, np.ndarray], schema: Any, T: int, N: int, R: int,
    fields: tuple[Field, ...],
) -> list[np.ndarray]:  # fmt: skip
    """(T, N, ...) arrays -> one flat (T*N,) array per schema column, time-major then drone."""
    cols: dict[str, np.ndarray] = {
        "time": np.repeat(np.asarray(arrs["time"], dtype=np.float64), N),
        "drone": np.tile(np.arange(N, dtype=np.int32), T),
    }
    for f in _data(fields):
        if f.key not in arrs:
            continue
        names = names_of(f, R)
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


def _with_meta(raw: Any, meta: Mapping[str, Any]) -> dict:
    """Schema metadata ``raw`` with its run metadata replaced by ``meta`` (when given)."""
    doc = json.loads(raw[META_KEY])
    if meta:
        doc["meta"] = meta
    return {META_KEY: strict_dumps(doc).encode()}


def chunk_table(
    chunk: Mapping[str, Any], meta: Mapping[str, Any] | None = None, schema: Any = None
) -> Any:
    """A log chunk as a long Arrow table (one row per sample and drone), schema with metadata.

    Args:
        chunk: ``{"time": (T,), "pos": (T, N, 3), ...}`` (see :data:`COLUMNS`).
        meta: Run metadata stored in the schema.
        schema: The schema of an earlier chunk; the chunk must have the same columns.

    Raises:
        ValueError: On unknown keys, bad shapes, or columns differing from ``schema``.
    """
    import pyarrow as pa

    if schema is None:
        fields = declared_fields(meta)
        arrs, T, N, R = _check_chunk(chunk, fields)
        schema = _schema(pa, arrs, N, R, json.loads(strict_dumps(dict(meta or {}))), fields)
    else:
        doc = json.loads(schema.metadata[META_KEY])
        fields = declared_fields(doc.get("meta"))
        arrs, T, N, R = _check_chunk(chunk, fields)
        if (N, R) != (doc["n"], doc["n_rotors"]):
            raise ValueError(
                f"log chunk: (N, R) = {(N, R)} differs from the first chunk's "
                f"{(doc['n'], doc['n_rotors'])}"
            )
    cols = _long_columns(arrs, schema, T, N, R, fields)
    arrays = [_arrow(pa, c, fl.type) for c, fl in zip(cols, schema, strict=True)]
    return pa.Table.from_arrays(arrays, schema=schema)


def _arrow(pa: Any, values: np.ndarray, typ: Any) -> Any:
    """A flat, contiguous NumPy column ``(m,)`` as an Arrow array of ``typ`` (no nulls) over its
    memory, booleans packed into bits. ``pa.array`` would do the same, but it looks for NumPy's
    masked arrays and so imports ``numpy.ma`` (about 20 ms of every flight's start-up)."""  # noqa: D205, D209
    data = np.packbits(values, bitorder="little") if pa.types.is_boolean(typ) else values
    return pa.Array.from_buffers(typ, len(values), [None, pa.py_buffer(data)])


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
        self.meta = json.loads(strict_dumps(dict(meta or {})))
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

    def _open(self, schema: Any) -> None:
        import pyarrow.csv as pcsv
        import pyarrow.parquet as pq

        doc = json.loads(schema.metadata[META_KEY])
        self._schema = schema
        self._shape = (doc["n"], doc["n_rotors"])
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # dictionary encoding only for the drone index: on float columns it costs 4x the time
        self._pq = pq.ParquetWriter(
            self.path, self._schema, compression=self.compression, use_dictionary=["drone"]
        )
        if self.csv_path is not None:
            self.csv_path.parent.mkdir(parents=True, exist_ok=True)
            self._csv_file = open(self.csv_path, "wb")  # closed in close()
            units = column_units(doc["n_rotors"])
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
        if self._closed:
            raise ValueError("LogWriter is closed")
        self.write_table(chunk_table(chunk, self.meta, self._schema))

    def write_table(self, table: Any) -> None:
        """Append a long Arrow table made by :func:`chunk_table` (or read from a part file).

        Raises:
            ValueError: If its columns or (N, R) differ from the first table's.
        """
        if self._closed:
            raise ValueError("LogWriter is closed")
        if self._schema is None:
            self._open(table.schema.with_metadata(_with_meta(table.schema.metadata, self.meta)))
        elif table.schema.names != self._schema.names:
            raise ValueError("log chunk: columns differ from the first chunk's")
        else:
            doc = json.loads(table.schema.metadata[META_KEY])
            if (doc["n"], doc["n_rotors"]) != self._shape:
                raise ValueError(
                    f"log chunk: (N, R) = {(doc['n'], doc['n_rotors'])} differs from the first "
                    f"chunk's {self._shape}"
                )
        if table.num_rows == 0:
            return
        table = table.replace_schema_metadata(self._schema.metadata)
        self._pq.write_table(table)
        if self._csv is not None:
            self._csv.write_table(table.replace_schema_metadata(None))
            self._csv_file.flush()
        self.rows += table.num_rows
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

        table = pq.ParquetFile(p).read()  # not read_table: it imports pandas where installed
        raw = (table.schema.metadata or {}).get(META_KEY)
        doc = json.loads(raw) if raw else {}
        meta = doc.get("meta", {})
        n = doc.get("n")
    return from_table(table, n, p, meta), meta


def column_numpy(column: Any) -> np.ndarray:
    """A table's column (an Arrow ``ChunkedArray``) of numbers or booleans as one NumPy array.

    Read from the chunks' data buffers (booleans unpacked from their bits): pyarrow's own
    ``to_numpy`` imports pandas where pandas is installed, about 0.4 s of every command that
    reads a log. Columns of other types or with nulls go through ``to_numpy``.
    """
    import pyarrow as pa

    typ = column.type
    if column.null_count or not (pa.types.is_integer(typ) or pa.types.is_floating(typ)
                                 or pa.types.is_boolean(typ)):  # fmt: skip
        return column.to_numpy()
    chunks = [c for c in column.chunks if len(c)]
    if pa.types.is_boolean(typ):
        dtype = np.dtype(bool)
        parts = [np.unpackbits(np.frombuffer(c.buffers()[1], np.uint8), bitorder="little")
                 [c.offset : c.offset + len(c)].astype(bool) for c in chunks]  # fmt: skip
    else:
        dtype = np.dtype(typ.to_pandas_dtype())
        parts = [np.frombuffer(c.buffers()[1], dtype, len(c), c.offset * dtype.itemsize)
                 for c in chunks]  # fmt: skip
    if not parts:
        return np.zeros(0, dtype)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def from_table(table: Any, n: int | None, p: Path,
               meta: Mapping[str, Any] | None = None) -> dict[str, np.ndarray]:  # fmt: skip
    """The log dict of a long table (:func:`chunk_table`'s inverse), with the columns ``meta``
    declares (``meta["columns"]``); ``n`` drones (``None``: from the ``drone`` column).

    Raises:
        ValueError: Naming ``p``, if the rows are not a complete time-major (T, N) grid.
    """  # noqa: D205
    names = set(table.column_names)
    for req in ("time", "drone"):
        if req not in names:
            raise ValueError(f"{p}: column {req!r} missing; not a quadsim log")
    drone = column_numpy(table.column("drone"))
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
        return column_numpy(table.column(name))

    time = col("time")
    log: dict[str, np.ndarray] = {"time": time[::n] if n else time[:0]}
    for f in _data(declared_fields(meta)):
        cols = names_of(f, R)
        if not cols or cols[0] not in names:
            continue
        if f.per_rotor or len(cols) > 1:
            log[f.key] = np.stack([col(c) for c in cols], axis=-1).reshape(T, n, len(cols))
        else:
            log[f.key] = col(cols[0]).reshape(T, n)
    return log
