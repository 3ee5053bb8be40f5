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

Submodules: :mod:`~quadsim.app.io.columns` (the column table), :mod:`~quadsim.app.io.log` (Parquet
and CSV writer and reader) and :mod:`~quadsim.app.io.summary` (run summaries; the definitions of the
summary statistics are in its docstring).
"""

from __future__ import annotations

from .columns import COLUMNS, Field, column_units, describe_columns
from .log import FORMAT as FORMAT
from .log import VERSION as VERSION
from .log import LogWriter, read_log, write_log
from .summary import SummaryAccumulator, format_summary_table, summarize, tilt, write_summary

__all__ = [
    "COLUMNS",
    "Field",
    "LogWriter",
    "SummaryAccumulator",
    "column_units",
    "describe_columns",
    "format_summary_table",
    "read_log",
    "summarize",
    "tilt",
    "write_log",
    "write_summary",
]
