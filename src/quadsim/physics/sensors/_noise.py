"""Standard normal samples for the noisy sensor functions, and broadcast batch shapes.

A private module of :mod:`quadsim.physics.sensors`: its functions serve the sibling sensor
modules only.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from array_api_compat import is_array_api_obj

from .._array import as_like, check_shape, namespace
from ..wind import normal_noise


def is_float_array(x: Any) -> bool:
    """``x`` is an array with a real floating dtype (pre-drawn normals, not a PRNG key)."""
    if not is_array_api_obj(x):
        return False
    try:
        return bool(namespace(x).isdtype(x.dtype, "real floating"))
    except (TypeError, ValueError, AttributeError):  # e.g. typed JAX keys (dtype key<fry>)
        return False


def standard_normals(noise: Any, batch: tuple[int, ...], k: int, xp: Any, like: Any) -> Any:
    """Standard normals ``(..., k)``: given (checked and cast like ``like``) or drawn.

    ``noise`` is pre-drawn samples ``(..., k)``, or a NumPy/torch generator or JAX key that
    draws ``(*batch, k)`` of ``like``'s dtype (``xp``: the namespace of ``like``).
    """
    if is_float_array(noise):
        check_shape(noise, (k,), "noise")
        return as_like(xp, noise, like)
    if noise is None:
        raise ValueError(
            f"noise is required: a numpy Generator, a JAX key, a torch Generator or standard "
            f"normal samples of shape (..., {k})"
        )
    npgen = isinstance(noise, np.random.Generator)
    z = normal_noise(noise, (*batch, k), xp=xp if npgen else None, dtype=like.dtype)
    return as_like(xp, z, like) if npgen else z


def common_batch(*arrays: Any, drop: int = 1) -> tuple[int, ...]:
    """Broadcast batch shape of ``arrays``, each without its last ``drop`` axes."""
    return tuple(np.broadcast_shapes(*(tuple(a.shape[: a.ndim - drop]) for a in arrays)))
