"""Files written whole or not at all, and disk errors that name their file.

:func:`atomic_write` is the one home of the temporary-name-then-rename write: the temporary file
is ``<name>.partial`` (no data suffix, so nothing mistakes it for data), removed when the write
fails. :func:`naming` gives an ``OSError`` raised without a file name (PyArrow's, a full disk
inside a library) the name of the file being written, and :func:`describe` turns one into the
line the command line prints (``DIR/part-000003.parquet: No space left on device``, then the
notes a command added: what is kept and how to recover it).
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = ["atomic_write", "describe", "naming"]


@contextlib.contextmanager
def naming(path: str | os.PathLike[str]) -> Iterator[None]:
    """Re-raise an ``OSError`` that carries no file name with ``path`` as its file name."""
    try:
        yield
    except OSError as e:
        if e.filename is not None:
            raise
        strerror = os.strerror(e.errno) if e.errno else (e.strerror or str(e))
        named = OSError(e.errno or errno.EIO, strerror, os.fspath(path))
        for note in getattr(e, "__notes__", ()):
            named.add_note(note)
        raise named from e


def describe(e: OSError) -> str:
    """``FILE: what went wrong`` and the notes added on the way (one string, lines joined)."""
    what = e.strerror or str(e)
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        what = f"{what} (the disk is full)"
    head = f"{e.filename}: {what}" if e.filename is not None else what
    if getattr(e, "filename2", None):
        head = f"{e.filename} -> {e.filename2}: {what}"
    return "\n".join([head, *getattr(e, "__notes__", ())])


def report_bad_input(e: ValueError | OSError) -> int:
    """Print a refused input (its message) or a file error (:func:`describe`) as one
    ``quadsim: ...`` message on stderr; return the exit code of bad input, 2."""  # noqa: D205, D209
    print(f"quadsim: {describe(e) if isinstance(e, OSError) else e}", file=sys.stderr)
    return 2


def atomic_write(path: str | os.PathLike[str], write: Callable[[Path], object], *,
                 durable: bool = False) -> Path:  # fmt: skip
    """Call ``write(tmp)`` on ``<name>.partial`` next to ``path``, then rename it over ``path``.

    With ``durable`` the data are flushed to disk before the rename. A reader sees the old file
    or the new one, never half of one; a failed write removes the temporary file and raises the
    ``OSError`` with ``path`` named (:func:`naming`). ``write`` must not add a suffix of its own
    to the name it is given (``np.savez`` does: give it an open file).
    """
    p = Path(path)
    tmp = p.with_name(p.name + ".partial")
    try:
        with naming(p):
            write(tmp)
            if durable:
                with open(tmp, "rb") as fh:
                    os.fsync(fh.fileno())
            os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return p
