"""Crash-safe flight logs: every chunk is a whole Parquet file on disk as soon as it is written.

During a run the log lives in a folder of part files, ``trajectory.parts/part-000000.parquet``,
``part-000001.parquet``, ... The loop hands its chunks over every ``chunk_steps`` steps; the
writer keeps them in memory and closes a part when it holds :data:`FLUSH_BYTES` or when
:data:`FLUSH_SECONDS` of wall time have passed since the last part, whichever comes first, and
at the end of the run (:meth:`PartWriter.flush`). So a short flight of one drone writes one part,
not one per chunk, and a long one writes about one a second. Each part is written under a
temporary name, flushed to the disk (``fsync``) and renamed, so a part exists whole or not at
all: a hard kill (SIGKILL, the OOM killer, power loss) loses at most what was handed over since
the last part, one second of the flight's wall time or 64 MB of log, and the chunk in flight.
Each part's schema carries the run metadata (as in :mod:`quadsim.app.io.log`) and its own record
``{"index", "wall_time_s"}`` (the wall-clock time of the flight when its last chunk was handed
over).

:func:`merge_parts` turns the folder into the single ``trajectory.parquet`` (and CSV), one part
at a time (memory bounded by a chunk, not the flight), computing the summary on the way and
keeping the samples of the first few drones for the figures; the folder is removed only after
the merged file is complete. ``quadsim recover DIR`` runs the same merge on what a killed run
left behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from .files import atomic_write, naming
from .log import META_KEY, LogWriter, chunk_table, from_table
from .summary import SummaryAccumulator

PARTS = "trajectory.parts"
_PART_KEY = b"quadsim_part"
FLUSH_BYTES = 64 * 2**20
"""A part is closed once the chunks handed over since the last one hold this many bytes."""
FLUSH_SECONDS = 1.0
"""... or once this much wall time [s] has passed since the last part (what a hard kill loses)."""


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # not every platform opens directories
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class PartWriter:
    """Write a run's log chunks as durable Parquet part files in ``folder``.

    Chunks are kept in memory until they hold ``flush_bytes`` or ``flush_seconds`` have passed
    since the last part (checked as each chunk arrives); then they become one part. Call
    :meth:`flush` at the end of the run (and before anything reads the folder).

    Args:
        folder: The parts folder (created with the first part, so a run that stops or fails
            before it leaves none; must not hold parts of another run).
        meta: Run metadata stored in every part.
        compression: Parquet codec.
        durable: ``fsync`` each part before it counts (off only for throwaway logs).
        flush_bytes: Close a part when the chunks held reach this many bytes (> 0).
        flush_seconds: ... or when this much wall time [s] has passed since the last part
            (``0``: every chunk is a part).
        before_first_part: Called once, just before the first part is written (a run's
            earlier results are set aside then: the new run has something on disk).
    """

    def __init__(
        self,
        folder: str | os.PathLike[str],
        meta: Mapping[str, Any],
        compression: str = "zstd",
        durable: bool = True,
        flush_bytes: int = FLUSH_BYTES,
        flush_seconds: float = FLUSH_SECONDS,
        before_first_part: Any = None,
    ):
        import pyarrow  # noqa: F401  (fail early with ImportError when missing)

        if not flush_bytes > 0 or not flush_seconds >= 0:
            raise ValueError(f"flush_bytes must be > 0 and flush_seconds >= 0; got "
                             f"{flush_bytes!r}, {flush_seconds!r}")  # fmt: skip
        self.folder = Path(folder)
        self.meta = dict(meta)
        self.compression = compression
        self.durable = durable
        self.flush_bytes = flush_bytes
        self.flush_seconds = float(flush_seconds)
        self.before_first_part = before_first_part
        self.count = 0
        self.chunks = 0
        self.written: dict[str, Any] | None = {}
        """The tables of the parts written, by file name, while all of them total at most
        ``flush_bytes`` (:func:`merge_parts` takes them instead of reading the files back);
        ``None`` once a run has written more (a long run holds none of its log in memory)."""
        self._kept_bytes = 0
        self._schema: Any = None
        self._held: list[Mapping[str, Any]] = []
        self._held_bytes = 0
        self._wall = 0.0
        self._since = time.monotonic()
        if part_files(self.folder):
            raise ValueError(f"{self.folder}: holds the parts of another run")

    def write(self, chunk: Mapping[str, Any], wall_time: float) -> Path | None:
        """Hand over one chunk (a log dict) at ``wall_time`` [s] of the flight; returns the part
        written when this chunk closed one, else ``None``."""  # noqa: D205, D209
        self._held.append(chunk)
        self._held_bytes += sum(np.asarray(v).nbytes for v in chunk.values())
        self._wall = float(wall_time)
        self.chunks += 1
        if (self._held_bytes >= self.flush_bytes
                or time.monotonic() - self._since >= self.flush_seconds):  # fmt: skip
            return self.flush()
        return None

    def flush(self) -> Path | None:
        """Write the chunks held as the next part; returns its path once it is durable (``None``
        when nothing was held)."""  # noqa: D205, D209
        import pyarrow.parquet as pq

        if not self._held:
            return None
        if self.count == 0 and self.before_first_part is not None:
            self.before_first_part()
        held = self._held
        chunk = held[0] if len(held) == 1 else {
            key: np.concatenate([np.asarray(c[key]) for c in held]) for key in held[0]}  # fmt: skip
        table = chunk_table(chunk, self.meta, self._schema)
        if self._schema is None:
            self._schema = table.schema
        record = {"index": self.count, "wall_time_s": self._wall}
        md = dict(table.schema.metadata)
        md[_PART_KEY] = json.dumps(record).encode()
        table = table.replace_schema_metadata(md)
        path = self.folder / f"part-{self.count:06d}.parquet"

        def write(tmp: Path) -> None:
            with open(tmp, "wb") as fh:
                pq.write_table(table, fh, compression=self.compression, use_dictionary=["drone"])
                fh.flush()
                if self.durable:
                    os.fsync(fh.fileno())

        first = self.count == 0 and not self.folder.is_dir()
        self.folder.mkdir(parents=True, exist_ok=True)
        try:
            atomic_write(path, write)
        except BaseException:
            if first:  # the folder made for a part that was not written: no empty folder left
                with contextlib.suppress(OSError):
                    self.folder.rmdir()
            raise
        if self.durable:
            _fsync_dir(self.folder)
        self._kept_bytes += table.nbytes
        if self.written is not None and self._kept_bytes <= self.flush_bytes:
            self.written[path.name] = table  # durable on disk, and still in hand
        else:
            self.written = None
        self.count += 1
        self._held, self._held_bytes = [], 0
        self._since = time.monotonic()
        return path


def part_files(folder: str | os.PathLike[str]) -> list[Path]:
    """The complete part files of ``folder`` in order (temporary files are ignored)."""
    return sorted(Path(folder).glob("part-*.parquet"))


class Damaged(NamedTuple):
    """A part file that could not be merged.

    Attributes:
        path: Where it is now (moved to ``trajectory.damaged/`` by :func:`merge_parts`).
        reason: Why it was skipped (``Parquet magic bytes not found``, ``empty file``, ...).
        after_s: Time of the last sample before the gap [s] (``None`` at the start).
        before_s: Time of the first sample after the gap [s] (``None`` at the end).
    """

    path: Path
    reason: str
    after_s: float | None
    before_s: float | None


class Merged(NamedTuple):
    """What :func:`merge_parts` returns.

    Attributes:
        meta: Run metadata (from the parts).
        summary: The summary accumulated over every part (call ``.result(...)``).
        parts: Number of parts merged.
        wall_time: Wall-clock time of the flight when the last part was written [s].
        head: Log dict of the first ``keep_drones`` drones (for the figures); ``{}`` if none.
        damaged: The parts skipped, in order (``[]`` normally).
    """

    meta: dict
    summary: SummaryAccumulator
    parts: int
    wall_time: float
    head: dict
    damaged: tuple[Damaged, ...] = ()


DAMAGED = "trajectory.damaged"
"""Where :func:`merge_parts` moves the part files it could not read (next to the parts folder)."""


class _UnreadableError(Exception):
    """A part file that is not a readable quadsim part (the message says why)."""


def _read_part(f: Path, table: Any = None) -> tuple[Any, dict, dict]:
    """``(table, log document, part record)`` of a part file.

    ``table``: the one this process wrote to it (:attr:`PartWriter.written`), taken instead of
    reading the file back.

    Raises:
        _UnreadableError: Saying why the file is not a readable quadsim part.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq  # ParquetFile, not read_table: no pyarrow.dataset import

    if table is not None:
        return (table, *_part_meta(table))
    try:
        if f.stat().st_size == 0:
            raise _UnreadableError("empty file")
        with pq.ParquetFile(f) as pf:
            table = pf.read()
    except (OSError, pa.ArrowException, ValueError) as e:
        if isinstance(e, FileNotFoundError):
            raise
        raise _UnreadableError(str(e).splitlines()[0] if str(e) else type(e).__name__) from None
    return (table, *_part_meta(table))


def _part_meta(table: Any) -> tuple[dict, dict]:
    """``(log document, part record)`` of a part's table (:class:`_UnreadableError` if none)."""
    md = table.schema.metadata or {}
    if META_KEY not in md or _PART_KEY not in md:
        raise _UnreadableError("not a quadsim log part (no quadsim metadata)")
    try:
        doc, record = json.loads(md[META_KEY]), json.loads(md[_PART_KEY])
        float(record["wall_time_s"]), int(doc["n"]), int(doc["n_rotors"])
    except (ValueError, TypeError, KeyError) as e:
        raise _UnreadableError(f"damaged quadsim metadata ({type(e).__name__}: {e})") from None
    return doc, record


def read_part_meta(folder: str | os.PathLike[str]) -> tuple[dict, dict]:
    """``(run metadata, part record)`` of the last readable part of ``folder``.

    Raises:
        ValueError: If no part can be read (naming each file and why).
    """
    bad = []
    for f in reversed(part_files(folder)):
        try:
            _, doc, record = _read_part(f)
        except _UnreadableError as e:
            bad.append(f"{f.name}: {e}")
            continue
        return doc.get("meta", {}), record
    raise ValueError(f"{folder}: no part can be read ({'; '.join(reversed(bad))})")


def merge_parts(
    folder: str | os.PathLike[str],
    parquet: str | os.PathLike[str],
    csv: str | os.PathLike[str] | None = None,
    *,
    t_from: float = 0.0,
    keep_drones: int = 0,
    written: Mapping[str, Any] | None = None,
) -> Merged:
    """Merge the part files of ``folder`` into one Parquet log (and CSV), summarising on the way.

    The merged files are written under temporary names (``.partial``) and renamed when complete;
    the folder is left as it is (:func:`remove_parts` clears it once the caller has written what
    depends on it), so an interrupted merge can be run again. A part that cannot be read
    (truncated, empty, not a quadsim part, another run's) is skipped and listed in
    :attr:`Merged.damaged` with the gap it leaves; every good part is merged.

    Args:
        folder: Parts folder written by :class:`PartWriter`.
        parquet: The merged Parquet file.
        csv: Also write the rows as CSV here.
        t_from: Tracking errors in the summary count samples with ``time >= t_from`` [s].
        keep_drones: Keep the samples of drones ``0 .. keep_drones - 1`` in memory
            (:attr:`Merged.head`).
        written: Tables this process wrote to part files, by file name
            (:attr:`PartWriter.written`): merged from memory, not read back (the files are
            durable before they are listed there, and a recovery still reads them).

    Raises:
        ValueError: If the folder holds no readable part (naming each file and why).
    """
    folder = Path(folder)
    files = part_files(folder)
    written = written or {}
    if not files:
        raise ValueError(f"{folder}: no complete log chunk to recover")
    bad: list[str] = []
    for f in files:  # the run's metadata and columns: the first readable part's
        try:
            first, doc, _ = _read_part(f, written.get(f.name))
            break
        except _UnreadableError as e:
            bad.append(f"{f.name}: {e}")
    else:
        raise ValueError(f"{folder}: no part can be read ({'; '.join(bad)})")
    meta, n, columns = doc.get("meta", {}), int(doc["n"]), first.schema.names
    acc = SummaryAccumulator(meta, t_from)
    k = min(keep_drones, n)
    heads: list[dict] = []
    record = {"wall_time_s": 0.0}
    skipped: list[tuple[Path, str, float | None]] = []  # part, why, last sample time before it
    resumed: dict[Path, float] = {}  # first sample time after each skipped part
    last_t: float | None = None

    def merge(w: LogWriter) -> None:
        nonlocal record, last_t
        for f in files:
            try:
                table, doc, rec = _read_part(f, written.get(f.name))
                if doc.get("meta", {}) != meta or table.schema.names != columns:
                    raise _UnreadableError("from another run (its metadata or columns differ)")
                try:
                    log = from_table(table, n, f, meta)
                except ValueError as e:  # rows not as a part writer lays them out
                    raise _UnreadableError(str(e).removeprefix(f"{f}: ")) from None
            except _UnreadableError as e:
                skipped.append((f, str(e), last_t))
                continue
            if len(log["time"]):
                for g, _, _ in skipped:
                    resumed.setdefault(g, float(log["time"][0]))
                last_t = float(log["time"][-1])
            record = rec
            w.write_table(table)
            acc.add(log)
            if k > 0:  # the first k drones of every sample (rows are time-major, then drone)
                heads.append({key: v if key == "time" else v[:, :k] for key, v in log.items()})

    def write_parquet(tmp_pq: Path) -> None:
        if csv is None:
            with LogWriter(tmp_pq, meta) as w:
                merge(w)
            return

        def write_both(tmp_csv: Path) -> None:
            with naming(tmp_csv), LogWriter(tmp_pq, meta, csv_path=tmp_csv) as w:
                merge(w)

        atomic_write(csv, write_both)

    atomic_write(parquet, write_parquet)
    head = {}
    if heads:
        head = {key: np.concatenate([h[key] for h in heads]) for key in heads[0]}
    damaged = tuple(Damaged(f, why, t, resumed.get(f)) for f, why, t in skipped)
    return Merged(meta, acc, len(files) - len(damaged), float(record["wall_time_s"]), head,
                  damaged)  # fmt: skip


def remove_parts(folder: str | os.PathLike[str],
                 damaged: tuple[Damaged, ...] = ()) -> tuple[Damaged, ...]:  # fmt: skip
    """Delete a merged parts folder, keeping its damaged parts in ``trajectory.damaged/`` next
    to it; returns ``damaged`` with their new paths."""  # noqa: D205, D209
    folder = Path(folder)
    kept = []
    for d in damaged:
        where = folder.parent / DAMAGED / d.path.name
        if d.path.exists():
            where.parent.mkdir(exist_ok=True)
            os.replace(d.path, where)
        kept.append(d._replace(path=where))
    shutil.rmtree(folder, ignore_errors=True)
    return tuple(kept)
