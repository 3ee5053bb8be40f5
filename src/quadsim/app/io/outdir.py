"""An output folder belongs to one run at a time, and a failure never deletes earlier results.

**The lock.** :func:`claim` takes an exclusive advisory lock (``flock``) on ``DIR/.quadsim.lock``
for as long as a command writes ``DIR``; a second command that asks for the same folder is
refused at once (:class:`FolderBusyError`, a ``ValueError``: exit 2) with the process that holds it.
The kernel drops the lock when its process ends, however it ends (SIGKILL and the OOM killer
included), so a lock never goes stale; the file holds ``{"pid", "command", "started"}`` only to
name the holder, and is removed when the holder lets go.

**Earlier results.** A run that writes fixed names (``quadsim fly``, ``quadsim ros2``) moves the
earlier run's files into ``DIR/.previous/`` once it has produced something (:func:`set_aside`:
its first log chunk, or its summary), and deletes them once its own results are in place
(:func:`discard`). Until then nothing is touched: a bad option, a failed build or a compiler
that does not work leaves ``DIR`` as it was, and a run that fails after starting puts the
earlier files back (:func:`restore`). A run killed hard leaves ``.previous/`` beside its log
parts; ``quadsim recover`` finishes the replacement, and a run that left no part gets its
earlier files back the next time the folder is claimed.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from .parts import PARTS, part_files

__all__ = ["LOCK", "PREVIOUS", "FolderBusyError", "claim", "discard", "holder", "restore",
           "set_aside"]  # fmt: skip

LOCK = ".quadsim.lock"
"""The lock file's name inside a claimed folder."""

PREVIOUS = ".previous"
"""Where the earlier run's files wait while a new run writes (inside the folder)."""


class FolderBusyError(ValueError):
    """The folder is being written by another process (bad input: exit 2).

    Attributes:
        folder: The folder.
        holder: ``{"pid", "command", "started"}`` of the process holding it (``{}`` if unread).
    """

    def __init__(self, folder: Path, holder: dict) -> None:
        self.folder, self.holder = folder, holder
        who = f"process {holder['pid']}" if holder.get("pid") else "another process"
        if holder.get("command"):
            who += f" ({holder['command']}"
            who += f", since {holder['started']})" if holder.get("started") else ")"
        super().__init__(f"{folder}: in use by {who}; wait for it to finish or choose another "
                         "--out")  # fmt: skip


def _read_holder(path: Path) -> dict:
    try:
        doc = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _command() -> str:
    argv = [Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python", *sys.argv[1:]]
    return " ".join(argv)[:500]


def _acquire(folder: Path, command: str | None) -> int:
    """Lock ``folder/LOCK``; returns the locked descriptor (see :func:`claim`)."""
    path = folder / LOCK
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise FolderBusyError(folder, _read_holder(path)) from None
            raise
        # the holder before us removes the file as it lets go: the lock must be on the file
        # that the name leads to now, not on one that was unlinked meanwhile
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    doc = {"pid": os.getpid(), "command": command or _command(),
           "started": time.strftime("%Y-%m-%d %H:%M:%S")}  # fmt: skip
    os.ftruncate(fd, 0)
    os.write(fd, (json.dumps(doc) + "\n").encode())
    return fd


@contextlib.contextmanager
def claim(folder: str | os.PathLike[str], command: str | None = None) -> Iterator[Path]:
    """Hold ``folder`` (created if needed) for this process while the block runs.

    A leftover ``.previous/`` of a run killed hard is settled first (where that run left no
    log parts): put back if the run wrote none of its results, deleted if it wrote some.

    Args:
        folder: The output folder.
        command: What to tell a second command about the holder (default: this process's
            command line).

    Raises:
        FolderBusyError: Another process holds the folder.
        OSError: The folder cannot be made or the lock file written.
    """
    out = Path(folder)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out}: exists and is not a directory")
    out.mkdir(parents=True, exist_ok=True)
    fd = _acquire(out, command)
    try:
        prev = out / PREVIOUS
        if prev.is_dir() and not part_files(out / PARTS):
            if any((out / p.name).exists() for p in prev.iterdir()):
                discard(out)
            else:
                restore(out)
        yield out
    finally:
        with contextlib.suppress(OSError):
            os.unlink(out / LOCK)  # first: whoever opens it next locks a new file
        os.close(fd)


def holder(folder: str | os.PathLike[str]) -> dict | None:
    """``{"pid", "command", "started"}`` of the process holding ``folder``, or ``None``."""
    path = Path(folder) / LOCK
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return _read_holder(path)
    finally:
        os.close(fd)
    return None


def set_aside(folder: str | os.PathLike[str], names: Iterable[str]) -> list[str]:
    """Move the earlier run's files among ``names`` into ``folder/.previous/``.

    Called again, it moves only what has appeared since (nothing, for the same run). Returns the
    names moved."""  # noqa: D209
    out = Path(folder)
    prev = out / PREVIOUS
    moved = []
    for name in names:
        src = out / name
        if src.is_file():
            prev.mkdir(exist_ok=True)
            os.replace(src, prev / name)
            moved.append(name)
    return moved


def discard(folder: str | os.PathLike[str]) -> None:
    """Delete the earlier run's files set aside (the new run's results are in place)."""
    shutil.rmtree(Path(folder) / PREVIOUS, ignore_errors=True)


def restore(folder: str | os.PathLike[str]) -> list[str]:
    """Put the files set aside back where the new run left no file of the same name."""
    out = Path(folder)
    prev = out / PREVIOUS
    back = []
    if not prev.is_dir():
        return back
    for src in sorted(prev.iterdir()):
        if src.is_file() and not (out / src.name).exists():
            os.replace(src, out / src.name)
            back.append(src.name)
    shutil.rmtree(prev, ignore_errors=True)
    return back
