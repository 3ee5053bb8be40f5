"""Strict JSON: NumPy values to plain Python, non-finite floats to ``null`` (never ``NaN``)."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from typing import Any

import numpy as np


def jsonable(x: Any) -> Any:
    """Numpy scalars/arrays -> Python; non-finite floats -> None (JSON null)."""
    if isinstance(x, Mapping):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    if isinstance(x, np.generic):
        return jsonable(x.item())
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, (str, int, bool)) or x is None:
        return x
    if isinstance(x, os.PathLike):
        return os.fspath(x)
    return str(x)


def strict_dumps(obj: Any, **kw: Any) -> str:
    """``json.dumps`` of :func:`jsonable` ``(obj)`` that refuses NaN (strict JSON)."""
    return json.dumps(jsonable(obj), allow_nan=False, **kw)
