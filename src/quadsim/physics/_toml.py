"""Entries of quadsim's TOML data files (drone presets, controller gains, sensor presets).

A value is written bare (in the canonical unit) or as an inline table
``{ value, unit, source, note }``; packaged files must give ``unit`` and ``source``. Each file
kind has its own table of keys, accepted units (unit -> factor to the canonical unit) and shapes;
this module holds the parts they share: finding and parsing a file (:func:`open_toml`), checking
its keys (:func:`check_keys`) and reading one entry (:func:`read_entry`).
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

FIELDS = frozenset({"value", "unit", "source", "note"})
REQUIRED: Any = object()
"""The default of a key that a file must give (in the key tables of each file kind)."""


def open_toml(
    name_or_path: str | os.PathLike[str], names: Sequence[str], root: Any, label: str, plural: str
) -> tuple[dict[str, Any], str, str, bool]:
    """A packaged file by name, or a TOML file by path, read and parsed.

    A string ending in ``.toml`` or containing a path separator, and any ``os.PathLike``, is a
    path; anything else names the packaged file ``root / f"{name}.toml"``, one of ``names``.

    Args:
        name_or_path: The packaged name or the path.
        names: The packaged names (an unknown one is refused, listing them).
        root: The folder of the packaged files (a path or an ``importlib.resources`` traversable).
        label: What a packaged file is called in messages (``"preset"``, ``"IMU preset"``, ...).
        plural: What the list of ``names`` is called in messages (``"presets"``, ...).

    Returns:
        ``(document, where, stem, packaged)``: ``where`` names the file in messages (the path,
        or ``f"{label} {name!r}"``), ``stem`` is the name without ``.toml``.

    Raises:
        ValueError: An unknown packaged name, or malformed TOML (naming the file).
        FileNotFoundError: A path that does not exist.
    """
    is_path = not isinstance(name_or_path, str) or name_or_path.endswith(".toml")
    if is_path or any(s in name_or_path for s in (os.sep, os.altsep or "/", "/")):
        path = Path(name_or_path)
        where, stem, packaged, raw = str(path), path.stem, False, path.read_bytes()
    else:
        if name_or_path not in names:
            raise ValueError(f"unknown {label} {name_or_path!r}; available {plural}: {names}")
        where, stem, packaged = f"{label} {name_or_path!r}", name_or_path, True
        raw = (root / f"{name_or_path}.toml").read_bytes()
    try:
        doc = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{where}: malformed TOML: {e}") from e
    return doc, where, stem, packaged


def check_keys(
    doc: dict[str, Any],
    allowed: Sequence[str],
    text_keys: Sequence[str],
    fail: Callable[[str, str], Exception],
    unknown: str = "unknown key",
) -> None:
    """Refuse a key of ``doc`` not in ``allowed`` and a ``text_keys`` value that is not a string.

    Raises:
        The exception of ``fail(key, message)``; an unknown key's message is ``unknown`` followed
        by the allowed keys.
    """
    for key in doc:
        if key not in allowed:
            raise fail(key, f"{unknown}; allowed: {allowed}")
    for key in text_keys:
        if not isinstance(doc.get(key, ""), str):
            raise fail(key, f"must be a string; got {doc.get(key)!r}")


def is_numeric(x: Any) -> bool:
    """A number, or a (nested) list of numbers (booleans are not numbers here)."""
    if isinstance(x, list):
        return all(is_numeric(y) for y in x)
    return isinstance(x, int | float) and not isinstance(x, bool)


def read_entry(
    doc: dict[str, Any],
    key: str,
    units: dict[str, Any],
    *,
    packaged: bool,
    packaged_name: str,
    normalize: Callable[[str], str],
    fail: Callable[[str, str], Exception],
    default: Any = REQUIRED,
) -> tuple[Any, Any]:
    """The raw value of ``doc[key]`` as float64 and the factor of its unit, or the default.

    Args:
        doc: The parsed TOML document.
        key: The key to read.
        units: Accepted units -> factor to the canonical unit (the first one).
        packaged: The file ships with quadsim: ``unit`` and ``source`` are required.
        packaged_name: What packaged files are called in messages ("presets", ...).
        normalize: Maps a written unit to its spelling in ``units``.
        fail: ``fail(key, message)`` -> the exception to raise (names file and key).
        default: The value of an absent key (a number or list of them, or ``None``);
            :data:`REQUIRED` (the default): the key must be given.

    Returns:
        ``(raw float64 array, unit factor)`` of a present key; ``(default as a float64 array, or
        None; None)`` of an absent one.

    Raises:
        The exception of ``fail``: a required key missing, unknown fields, no ``value``, missing
        ``unit``/``source`` in a packaged file, a unit not accepted, a value that is not numbers,
        or a ragged list.
    """
    if key not in doc:
        if default is REQUIRED:
            raise fail(key, "required key is missing")
        return (None if default is None else np.asarray(default, dtype=np.float64)), None
    entry = doc[key]
    if isinstance(entry, dict):
        extra = set(entry) - FIELDS
        if extra:
            raise fail(key, f"unknown field(s) {sorted(extra)}; allowed: {sorted(FIELDS)}")
        if "value" not in entry:
            raise fail(key, "value table has no 'value'")
        if packaged and not ("unit" in entry and "source" in entry):
            raise fail(key, f"{packaged_name} must give 'unit' and 'source' for every value")
        value, unit = entry["value"], entry.get("unit", next(iter(units)))
    elif packaged:
        raise fail(key, f"{packaged_name} must give {{ value, unit, source }}")
    else:
        value, unit = entry, next(iter(units))
    norm = normalize(str(unit))
    if norm not in units:
        raise fail(key, f"unit {unit!r} not accepted; use one of {list(units)}")
    if not is_numeric(value):
        raise fail(key, f"value must be a number or a list of numbers; got {value!r}")
    try:
        a = np.asarray(value, dtype=np.float64)
    except ValueError as e:
        raise fail(key, f"value has a ragged shape: {value!r}") from e
    return a, units[norm]

