"""Bind a drone's parameters to a model function: :func:`parametrize`."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from .params import Params, load_params

__all__ = ["parametrize"]


def parametrize(fn: Callable, drone: Any, xp: Any = None, device: Any = None) -> functools.partial:
    """Bind ``drone``'s values to the keyword-only parameters of a model function.

    Args:
        fn: A model function such as :func:`quadsim.physics.models.first_principles.dynamics` or its
            ``symbolic_dynamics`` twin. Every keyword-only parameter without a default must be a
            field of :class:`quadsim.physics.params.Params`; ones with defaults (``small_angle``)
            stay free.
        drone: A preset name, a path to a TOML file, or a :class:`~quadsim.physics.params.Params`.
        xp: Optional array namespace (``numpy``, ``jax.numpy``, ``torch``, ...) to convert the
            values to once, ahead of time. By default they stay read-only float64 NumPy arrays and
            each call casts them to the dtype and device of the state.
        device: Device for the converted arrays (with ``xp``).

    Returns:
        ``functools.partial(fn, **values)``.

    Raises:
        ValueError: If the drone cannot be loaded, or ``fn`` needs a parameter the record lacks.
    """
    params = drone if isinstance(drone, Params) else load_params(drone)
    kwargs = {}
    for p in inspect.signature(fn).parameters.values():
        if p.kind is not inspect.Parameter.KEYWORD_ONLY or p.name == "name":
            continue
        if p.name in Params._fields:
            value = getattr(params, p.name)
            if xp is not None:
                value = xp.asarray(np.array(value, dtype=np.float64), device=device)
            kwargs[p.name] = value
        elif p.default is inspect.Parameter.empty:
            raise ValueError(f"{fn.__qualname__} needs parameter {p.name!r}, which Params lacks")
    if not kwargs:
        raise ValueError(f"{fn.__qualname__} takes no drone parameters")
    return functools.partial(fn, **kwargs)
