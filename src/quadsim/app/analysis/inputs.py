"""Input checks of the analysis functions: finite float64 arrays of the expected shapes.

Every function raises ``ValueError`` with a one-line message naming the argument, so a wrong
shape or a NaN in a logged flight is reported where it enters, not as a broadcasting error later.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["as_array", "as_quat", "same_samples", "same_shape"]


def as_array(x: Any, name: str, trailing: Sequence[int] = (), ndims: Sequence[int] = ()) -> Any:
    """``x`` as a finite float64 array of shape ``(..., *trailing)``, else ``ValueError``.

    Args:
        x: Array-like input.
        name: Argument name for the messages.
        trailing: Required trailing dimensions.
        ndims: Allowed numbers of dimensions (any if empty).

    Returns:
        The float64 array, shape ``(..., *trailing)``.
    """
    try:
        a = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a numeric array; got {type(x).__name__}") from exc
    n = len(trailing)
    if a.ndim < n or a.shape[a.ndim - n :] != tuple(trailing) or (ndims and a.ndim not in ndims):
        want = (
            " or ".join(
                "(" + ", ".join(["T", "n"][: k - n] + [str(d) for d in trailing]) + ")"
                for k in ndims
            )
            or "(" + ", ".join(["...", *map(str, trailing)]) + ")"
        )
        raise ValueError(f"{name} must have shape {want}; got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be finite; got NaN or infinite values")
    return a


def as_quat(x: Any, name: str, ndims: Sequence[int] = (2, 3)) -> Any:
    """Finite quaternions ``(..., 4)`` (xyzw) of nonzero norm, normalised.

    Args:
        x: Array-like quaternions, shape ``(..., 4)``.
        name: Argument name for the messages.
        ndims: Allowed numbers of dimensions (any if empty).

    Returns:
        Unit quaternions, float64, the shape of ``x``.
    """
    q = as_array(x, name, (4,), ndims)
    norm = np.linalg.norm(q, axis=-1, keepdims=True)
    if np.any(norm <= 1e-12):
        raise ValueError(f"{name} must have nonzero norm; got a zero quaternion")
    return q / norm


def same_shape(a: Any, b: Any, name_a: str, name_b: str) -> None:
    """Raise ``ValueError`` unless arrays ``a`` and ``b`` have the same shape."""
    if a.shape != b.shape:
        raise ValueError(
            f"{name_a} and {name_b} must have the same shape; got {a.shape} and {b.shape}"
        )


def same_samples(a: Any, b: Any, name_a: str, name_b: str) -> None:
    """Raise ``ValueError`` unless ``b`` has the samples (and drones) of ``a``.

    ``a`` and ``b`` are ``(T, ..., k)`` arrays whose last dimensions may differ (e.g. positions
    ``(T, 3)`` against quaternions ``(T, 4)``).
    """
    if a.shape[0] != b.shape[0] or a.shape[1:-1] != b.shape[1:-1]:
        raise ValueError(
            f"{name_b} must have the same samples (and drones) as {name_a}; got {b.shape} for "
            f"{a.shape}"
        )
