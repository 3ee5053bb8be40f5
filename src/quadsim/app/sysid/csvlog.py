"""Numeric CSV logs read cell by cell; every error names the file, the row and the column.

**Rows** are the file's own line numbers as an editor shows them: 1-based, the header is row 1,
blank lines count (and are skipped), a ``.gz`` file's lines are those of its decompressed text.
Every message uses that count, whichever column it is about.

**Columns.** Only the columns asked for are read: their cells must be finite numbers. The other
columns are not read and not checked (any text), but every row must have as many fields as the
header (a row with fewer or more is a damaged or truncated row). A column name must appear once
in the header.

**Files.** Gzip is recognised by its content (not by the name); the text must be UTF-8 (a byte
order mark is ignored). An empty file, binary data, a gzip stream cut short and malformed CSV
are :class:`LogError` as well, each naming the file (and the row where there is one).
"""

from __future__ import annotations

import csv
import gzip
import io
import math
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["Columns", "LogError", "read_columns"]


class LogError(ValueError):
    """A log that cannot be used (bad input: the command line exits 2).

    The message is ``FILE: row N, column 'C': what is wrong; got V``, the parts without a value
    left out (``FILE: column 'C': ...`` for a whole column, ``FILE: ...`` for the file).

    Attributes:
        path: The file (``None``: data given in memory, the message starts with ``what``).
        row: The row (the file's line number), or ``None``.
        column: The column's name (a tuple for a group of columns), or ``None``.
        got: The offending text as written in the file, or ``None``.
    """

    def __init__(
        self,
        path: str | Path | None,
        what: str,
        *,
        row: int | str | None = None,
        column: str | tuple[str, ...] | None = None,
        got: str | None = None,
    ) -> None:
        self.path, self.row, self.column, self.got = path, row, column, got
        where = []
        if row is not None:
            where.append(f"row {row}")
        if isinstance(column, tuple):
            where.append("columns " + ", ".join(repr(c) for c in column))
        elif column is not None:
            where.append(f"column {column!r}")
        msg = ", ".join(where) + ": " + what if where else what
        if got is not None:
            msg += f"; got {got}"
        super().__init__(f"{path}: {msg}" if path is not None else msg)


class Columns:
    """The columns read from a log (:func:`read_columns`).

    Attributes:
        path: The file.
        header: The header's names (stripped of spaces).
        data: ``{name: (T,) float64}`` for the columns asked for.
        lines: ``(T,)`` the file's line number of each data row.
    """

    def __init__(
        self, path: Path, header: list[str], data: dict[str, np.ndarray], lines: np.ndarray,
        text: str,
    ) -> None:  # fmt: skip
        self.path, self.header, self.data, self.lines = path, header, data, lines
        self._text = text

    def __getitem__(self, name: str) -> np.ndarray:
        return self.data[name]

    def __len__(self) -> int:
        return len(self.lines)

    def cell(self, i: int, name: str) -> str:
        """The text of data row ``i``'s cell in column ``name``, as written in the file."""
        k = self.header.index(name)
        reader = csv.reader(io.StringIO(self._text, newline=""))
        start = 1
        for row in reader:
            if start == self.lines[i]:
                return row[k].strip()
            start = reader.line_num + 1
        return ""  # not reached for a row of this file

    def error(self, i: int, column: str | Sequence[str], what: str) -> LogError:
        """A :class:`LogError` at data row ``i`` naming ``column`` (or a group) and its text."""
        if isinstance(column, str):
            return LogError(self.path, what, row=int(self.lines[i]), column=column,
                            got=self.cell(i, column))  # fmt: skip
        got = "(" + ", ".join(self.cell(i, c) for c in column) + ")"
        return LogError(self.path, what, row=int(self.lines[i]), column=tuple(column), got=got)


def _text(path: Path) -> str:
    """The file's text: gzip recognised by its magic bytes, UTF-8, no NUL character."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise LogError(path, "no such file") from None
    except IsADirectoryError:
        raise LogError(path, "is a directory, not a log file") from None
    except OSError as e:
        raise LogError(path, f"cannot be read ({e.strerror or e})") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (EOFError, OSError, zlib.error) as e:
            raise LogError(path, f"unreadable or truncated gzip file ({e})") from None
    if not raw.strip():
        raise LogError(path, "empty file (no header row)")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        row = raw.count(b"\n", 0, e.start) + 1
        raise LogError(path, f"not UTF-8 text (byte 0x{raw[e.start]:02x}): binary data, not a "
                       "CSV log", row=row) from None  # fmt: skip
    nul = text.find("\0")
    if nul >= 0:
        raise LogError(path, "a NUL character: binary data, not a CSV log",
                       row=text.count("\n", 0, nul) + 1)  # fmt: skip
    return text


def _header(path: Path, reader: Any, names: Sequence[str]) -> list[str]:
    try:
        header = [h.strip() for h in next(reader, [])]
    except csv.Error as e:
        raise LogError(path, f"malformed CSV ({e})", row="1 (header)") from None
    if not any(header):
        raise LogError(path, "empty header row", row="1 (header)")
    seen: dict[str, int] = {}
    for j, h in enumerate(header, start=1):
        if h and h in seen:
            raise LogError(path, f"appears twice in the header (fields {seen[h]} and {j})",
                           row="1 (header)", column=h)  # fmt: skip
        seen[h] = j
    missing = [c for c in names if c not in seen]
    if missing:
        raise LogError(path, f"missing column {missing[0]!r} (all missing: {missing})",
                       row="1 (header)")  # fmt: skip
    return header


def read_columns(path: str | Path, names: Sequence[str], *, min_rows: int = 1) -> Columns:
    """The columns ``names`` of a CSV log, every cell checked (see the module docstring).

    Args:
        path: A CSV file, plain or gzip-compressed.
        names: The columns to read; each must be in the header, once.
        min_rows: The fewest data rows accepted.

    Raises:
        LogError: An unreadable, empty, binary or truncated file, a missing or repeated column,
            a row with another number of fields than the header, a cell that is not a finite
            number, or fewer than ``min_rows`` data rows.
    """
    path = Path(path)
    text = _text(path)
    reader = csv.reader(io.StringIO(text, newline=""))
    header = _header(path, reader, names)
    idx = [header.index(c) for c in names]
    values: list[list[float]] = [[] for _ in names]
    lines: list[int] = []
    while True:
        line = reader.line_num + 1  # where the row starts (a quoted field may hold line breaks)
        try:
            row = next(reader, None)
        except csv.Error as e:
            raise LogError(path, f"malformed CSV ({e})", row=line) from None
        if row is None:
            break
        if not row:
            continue  # a blank line
        if len(row) != len(header):
            more = "more fields than columns" if len(row) > len(header) else (
                f"truncated row; column {header[len(row)]!r} missing")  # fmt: skip
            raise LogError(path, f"{len(row)} fields, the header has {len(header)} ({more})",
                           row=line)  # fmt: skip
        for c, k, out in zip(names, idx, values, strict=True):
            cell = row[k]
            try:
                v = float(cell)
            except ValueError:
                what = "empty cell" if not cell.strip() else "not a number"
                raise LogError(path, what, row=line, column=c, got=repr(cell.strip())) from None
            if not math.isfinite(v):
                raise LogError(path, "not a finite number", row=line, column=c,
                               got=repr(cell.strip()))  # fmt: skip
            out.append(v)
        lines.append(line)
    if len(lines) < min_rows:
        raise LogError(path, f"only {len(lines)} data rows (truncated?); at least {min_rows} "
                       "needed")  # fmt: skip
    data = {c: np.asarray(v, dtype=np.float64) for c, v in zip(names, values, strict=True)}
    return Columns(path, header, data, np.asarray(lines, dtype=np.int64), text)
