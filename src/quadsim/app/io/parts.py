"""Crash-safe flight logs: every chunk is a whole Parquet file on disk as soon as it is written.

During a run the log lives in a folder of part files, ``trajectory.parts/part-000000.parquet``,
``part-000001.parquet``, ... Each part is written under a temporary name, flushed to the disk
(``fsync``) and renamed, so a part exists whole or not at all: a hard kill (SIGKILL, the OOM
killer, power loss) loses at most the chunk in flight. Each part's schema carries the run
metadata (as in :mod:`quadsim.io.log`) and its own record ``{"index", "wall_time_s"}``
(the wall-clock time of the flight when the chunk was handed over).

:func:`merge_parts` turns the folder into the single ``trajectory.parquet`` (and CSV), one part
at a time (memory bounded by a chunk, not the flight), computing the summary on the way and
keeping the samples of the first few drones for the figures; the folder is removed only after
the merged file is complete. ``quadsim recover DIR`` runs the same merge on what a killed run
left behind.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from .log import _META_KEY, LogWriter, _from_table, chunk_table
from .summary import SummaryAccumulator

PARTS = "trajectory.parts"
_PART_KEY = b"quadsim_part"


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
    """Write each log chunk as its own durable Parquet file in ``folder``.

    Args:
        folder: The parts folder (created; must not hold parts of another run).
        meta: Run metadata stored in every part.
        compression: Parquet codec.
        durable: ``fsync`` each part before it counts (off only for throwaway logs).
    """

    def __init__(
        self,
        folder: str | os.PathLike[str],
        meta: Mapping[str, Any],
        compression: str = "zstd",
        durable: bool = True,
    ):
        import pyarrow  # noqa: F401  (fail early with ImportError when missing)

        self.folder = Path(folder)
        self.meta = dict(meta)
        self.compression = compression
        self.durable = durable
        self.count = 0
        self._schema: Any = None
        self.folder.mkdir(parents=True, exist_ok=True)
        if any(self.folder.glob("part-*.parquet")):
            raise ValueError(f"{self.folder}: holds the parts of another run")

    def write(self, chunk: Mapping[str, Any], wall_time: float) -> Path:
        """Write one chunk (a log dict) as the next part; returns its path once it is durable."""
        import pyarrow.parquet as pq

        table = chunk_table(chunk, self.meta, self._schema)
        if self._schema is None:
            self._schema = table.schema
        record = {"index": self.count, "wall_time_s": float(wall_time)}
        md = dict(table.schema.metadata)
        md[_PART_KEY] = json.dumps(record).encode()
        table = table.replace_schema_metadata(md)
        path = self.folder / f"part-{self.count:06d}.parquet"
        tmp = path.with_suffix(".tmp")
        with open(tmp, "wb") as fh:
            pq.write_table(table, fh, compression=self.compression, use_dictionary=["drone"])
            fh.flush()
            if self.durable:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
        if self.durable:
            _fsync_dir(self.folder)
        self.count += 1
        return path


def part_files(folder: str | os.PathLike[str]) -> list[Path]:
    """The complete part files of ``folder`` in order (temporary files are ignored)."""
    return sorted(Path(folder).glob("part-*.parquet"))


class Merged(NamedTuple):
    """What :func:`merge_parts` returns.

    Attributes:
        meta: Run metadata (from the parts).
        summary: The summary accumulated over every part (call ``.result(...)``).
        parts: Number of parts merged.
        wall_time: Wall-clock time of the flight when the last part was written [s].
        head: Log dict of the first ``keep_drones`` drones (for the figures); ``{}`` if none.
    """

    meta: dict
    summary: SummaryAccumulator
    parts: int
    wall_time: float
    head: dict


def merge_parts(
    folder: str | os.PathLike[str],
    parquet: str | os.PathLike[str],
    csv: str | os.PathLike[str] | None = None,
    *,
    t_from: float = 0.0,
    keep_drones: int = 0,
    remove: bool = True,
) -> Merged:
    """Merge the part files of ``folder`` into one Parquet log (and CSV), summarising on the way.

    The merged file is written under a temporary name and renamed when complete; the folder is
    removed after that (``remove``), so an interrupted merge can be run again.

    Args:
        folder: Parts folder written by :class:`PartWriter`.
        parquet: The merged Parquet file.
        csv: Also write the rows as CSV here.
        t_from: Tracking errors in the summary count samples with ``time >= t_from`` [s].
        keep_drones: Keep the samples of drones ``0 .. keep_drones - 1`` in memory
            (:attr:`Merged.head`).
        remove: Delete the folder once the merged files are in place.

    Raises:
        ValueError: If the folder holds no complete part.
    """
    import pyarrow.parquet as pq  # ParquetFile, not read_table: no pyarrow.dataset import

    folder, parquet = Path(folder), Path(parquet)
    files = part_files(folder)
    if not files:
        raise ValueError(f"{folder}: no complete log chunk to recover")
    first = pq.read_schema(files[0])
    doc = json.loads(first.metadata[_META_KEY])
    meta, n = doc.get("meta", {}), int(doc["n"])
    acc = SummaryAccumulator(meta, t_from)
    k = min(keep_drones, n)
    heads: list[dict] = []
    record = {"wall_time_s": 0.0}
    tmp_pq = parquet.with_name(parquet.name + ".tmp")
    tmp_csv = None if csv is None else Path(csv).with_name(Path(csv).name + ".tmp")
    with LogWriter(tmp_pq, meta, csv_path=tmp_csv) as w:
        for f in files:
            with pq.ParquetFile(f) as pf:
                table = pf.read()
            record = json.loads(table.schema.metadata[_PART_KEY])
            w.write_table(table)
            log = _from_table(table, n, f)
            acc.add(log)
            if k > 0:  # the first k drones of every sample (rows are time-major, then drone)
                heads.append({key: v if key == "time" else v[:, :k] for key, v in log.items()})
    os.replace(tmp_pq, parquet)
    if tmp_csv is not None:
        os.replace(tmp_csv, csv)
    head = {}
    if heads:
        head = {key: np.concatenate([h[key] for h in heads]) for key in heads[0]}
    if remove:
        shutil.rmtree(folder, ignore_errors=True)
    return Merged(meta, acc, len(files), float(record["wall_time_s"]), head)

