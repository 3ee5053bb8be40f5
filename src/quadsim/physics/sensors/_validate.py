"""Validation of sensor parameters: records, finite numbers and vectors, positive numbers, periods.

A private module of :mod:`quadsim.physics.sensors`: its functions serve the sibling sensor
modules, and :func:`finite_number` also the estimators' gain checks
(:mod:`quadsim.loop.estimation.complementary`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np


def axis_vec3(value: Any, name: str, nonneg: bool = False) -> np.ndarray:
    """A finite per-axis value as a read-only float64 ``(3,)`` array (scalars broadcast)."""
    try:
        a = np.array(value, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{name} must be a number or 3 numbers; got {value!r}") from e
    if a.shape not in ((), (3,)):
        raise ValueError(f"{name} must be a scalar or have shape (3,); got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be finite; got {a.tolist()}")
    if nonneg and np.any(a < 0.0):
        raise ValueError(f"{name} must be >= 0; got {a.tolist()}")
    out = np.broadcast_to(a, (3,)).copy()
    out.flags.writeable = False
    return out


def finite_number(value: Any, name: str, nonneg: bool = False) -> float:
    """``value`` as a finite float (``>= 0`` with ``nonneg``), else a ValueError naming ``name``."""
    try:
        v = float(value)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{name} must be a finite number; got {value!r}") from e
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite; got {value!r}")
    if nonneg and v < 0.0:
        raise ValueError(f"{name} must be >= 0; got {value!r}")
    return v


def positive_number(value: Any, name: str) -> float:
    """``value`` as a finite float ``> 0`` (a rate [Hz], a period [s], ...), else a ValueError."""
    try:
        v = float(value)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{name} must be a finite number > 0; got {value!r}") from e
    if not (math.isfinite(v) and v > 0.0):
        raise ValueError(f"{name} must be a finite number > 0; got {value!r}")
    return v


def sample_period(dt: Any, rate: float) -> float:
    """Sample period [s]: ``dt`` if given (checked ``> 0``), else ``1 / rate`` (``rate`` [Hz])."""
    return 1.0 / rate if dt is None else positive_number(dt, "dt")


def checked_record(params: Any, cls: type, check: Callable[[Any, str], Any]) -> Any:
    """A new ``cls`` (a sensor's parameter NamedTuple) of ``params``, every field validated.

    ``rate`` becomes a finite float ``> 0`` [Hz], ``name`` a ``str``, every other field
    ``check(value, field_name)`` (which raises a ``ValueError`` naming the field), in field order.

    Raises:
        ValueError: If ``params`` is not a ``cls``, or a field is invalid (naming it).
    """
    if not isinstance(params, cls):
        article = "an" if cls.__name__[0] in "AEIOU" else "a"
        raise ValueError(f"params must be {article} {cls.__name__}; got {type(params).__name__}")
    fields: dict[str, Any] = {}
    for name in cls._fields:  # type: ignore[attr-defined]
        v = getattr(params, name)
        if name == "rate":
            fields[name] = positive_number(v, "rate")
        elif name == "name":
            fields[name] = str(v)
        else:
            fields[name] = check(v, name)
    return cls(**fields)
