"""Files written whole or not at all: the one home of the temporary-name-then-rename write."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

__all__ = ["atomic_write"]


def atomic_write(path: str | os.PathLike[str], write: Callable[[Path], object], *,
                 durable: bool = False) -> Path:  # fmt: skip
    """Call ``write(tmp)`` on a temporary name next to ``path`` (``<name>.partial<suffix>``,
    so writers that add or check a suffix keep it), then rename it over ``path``; with
    ``durable`` the data are flushed to disk before the rename. A reader sees the old file or
    the new one, never half of one; an interrupted write leaves only the temporary file."""  # noqa: D205, D209
    p = Path(path)
    tmp = p.with_name(p.name + ".partial" + p.suffix)
    write(tmp)
    if durable:
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
    os.replace(tmp, p)
    return p
