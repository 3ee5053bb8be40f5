"""Entries of quadsim's TOML data files (drone presets, controller gains, sensor presets).

A value is written bare (in the canonical unit) or as an inline table
``{ value, unit, source, note }``; packaged files must give ``unit`` and ``source``. Each file
kind has its own table of keys, accepted units (unit -> factor to the canonical unit) and shapes;
this module reads one entry, the part they share.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

FIELDS = frozenset({"value", "unit", "source", "note"})


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
) -> tuple[np.ndarray, Any]:
    """The raw value of ``doc[key]`` (present) as float64 and the factor of its unit.

    Args:
        doc: The parsed TOML document.
        key: The key to read (must be in ``doc``).
        units: Accepted units -> factor to the canonical unit (the first one).
        packaged: The file ships with quadsim: ``unit`` and ``source`` are required.
        packaged_name: What packaged files are called in messages ("presets", ...).
        normalize: Maps a written unit to its spelling in ``units``.
        fail: ``fail(key, message)`` -> the exception to raise (names file and key).

    Raises:
        The exception of ``fail``: unknown fields, no ``value``, missing ``unit``/``source`` in a
        packaged file, a unit not accepted, a value that is not numbers, or a ragged list.
    """
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
