"""Where things are in a scenario file: its text, the line of a key, errors that name both.

:func:`read_text` reads a scenario (or sweep) file, or says why it cannot; :func:`line_of` finds
the line where a TOML key is set (bare, quoted, dotted or inside an inline table); :func:`failer`
makes the error builder of a file, ``ValueError("FILE: section.key (line N): what is wrong")``.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

__all__ = ["failer", "line_of", "read_text"]


_BARE = r"[A-Za-z0-9_-]+"
_BASIC = r'"(?:[^"\\\n]|\\.)*"'
_LITERAL = r"'[^'\n]*'"
_KEY_PART = re.compile(rf"[ \t]*({_BARE}|{_BASIC}|{_LITERAL})[ \t]*")


def _parse_key(s: str, i: int) -> tuple[list[str], int] | None:
    """A TOML key at ``s[i:]`` (bare, "basic", 'literal', dotted) -> (parts, end), or None."""
    parts = []
    while True:
        m = _KEY_PART.match(s, i)
        if not m:
            return None
        tok, i = m.group(1), m.end()
        if tok[0] == '"':
            try:
                tok = tomllib.loads(f"k = {tok}")["k"]
            except tomllib.TOMLDecodeError:
                tok = tok[1:-1]
        elif tok[0] == "'":
            tok = tok[1:-1]
        parts.append(tok)
        if s.startswith(".", i):
            i += 1
            continue
        return parts, i


def _in_inline(s: str, keys: list[str]) -> bool:
    """Whether the inline table text ``s`` (after ``key =``) sets the key path ``keys``."""
    for j, c in enumerate(s):
        if c not in "{,":
            continue
        parsed = _parse_key(s, j + 1)
        if parsed is None or not s.startswith("=", parsed[1]):
            continue
        path, rest = parsed[0], s[parsed[1] + 1 :]
        if path == keys or (path == keys[: len(path)] and _in_inline(rest, keys[len(path) :])):
            return True
    return False


def line_of(text: str, section: str, key: str) -> int | None:
    """1-based line where ``section.key`` is set (``key=""``: where ``[section]`` opens).

    Keys may be bare, "quoted" or 'quoted' (any Unicode), dotted (``wind.mean = ...`` at the top
    level), or inside an inline table (``wind = { mean = ... }``); a dotted ``section`` is a
    subtable (``"sensors.tof"``: ``[sensors.tof]``). A key that is not written falls back to the
    line that opens its section, else None.
    """
    target = [*(section.split(".") if section else []), *([key] if key else [])]
    table: list[str] = []
    fallback = None
    for no, line in enumerate(text.splitlines(), 1):
        head = re.match(r"[ \t]*\[\[?", line)
        if head:
            parsed = _parse_key(line, head.end())
            close = "]]" if head.group().endswith("[[") else "]"
            if parsed and re.match(rf"[ \t]*{re.escape(close)}[ \t]*(#.*)?$", line[parsed[1] :]):
                table = parsed[0]
                if table == target:
                    return no
                if fallback is None and section and table == section.split("."):
                    fallback = no
                continue
        parsed = _parse_key(line, 0)
        if parsed is None or not line.startswith("=", parsed[1]):
            continue
        path = table + parsed[0]
        if path == target:
            return no
        k = len(path)
        if k < len(target) and path == target[:k]:  # opens an inline table holding the target
            if _in_inline(line[parsed[1] + 1 :], target[k:]):
                return no
            if fallback is None:
                fallback = no
    return fallback


def read_text(p: Path) -> str:
    """The text of scenario file ``p``, or a ``ValueError`` saying why it cannot be had.

    Raises:
        ValueError: ``FILE: what is wrong`` for a file that is missing, a directory,
            unreadable or not text (NUL bytes, not UTF-8).
    """
    if p.is_dir():
        raise ValueError(f"{p}: is a directory, not a scenario file")
    if not p.exists():
        raise ValueError(f"{p}: scenario file not found")
    try:
        data = p.read_bytes()
    except OSError as e:
        raise ValueError(f"{p}: cannot read: {e.strerror or e}") from e
    if b"\0" in data:
        raise ValueError(f"{p}: not a text file (contains NUL bytes)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{p}: not a text file (not UTF-8: {e.reason} at byte {e.start})") from e


def failer(where: str, raw: str) -> Any:
    """``fail(section, key, msg)`` -> ``ValueError("FILE: section.key (line N): msg")``.

    ``where`` names the file in the message; the line is :func:`line_of` in its text ``raw``
    (``""``: unknown, the message names the key without a line). ``section=""`` is the top
    level, where the key may be a whole section (``fail("", "wind", "must be a table")``).
    """

    def fail(section: str, key: str, msg: str) -> ValueError:
        path = f"{section}.{key}" if section else key
        line = line_of(raw, section, key) if raw else None
        at = f" (line {line})" if line else ""
        return ValueError(f"{where}: {path}{at}: {msg}")

    return fail
