r"""The loop's sensors at one step: every sensor part, each at its period.

:func:`make_sense` builds the function :func:`quadsim.loop.brain.make_brain` calls first at every
step: from the true state ``x_k`` it gives the readings of every sensor part
(:mod:`quadsim.loop.parts`; the built-in IMU, motion capture, barometer and GNSS are parts too,
:mod:`quadsim.loop.parts.standard`), ``(readings, state) = part.measure(k, x_k, state, z, ctx)``,
a reading taken where ``j ≡ 0 (mod m)`` (``m`` its period in physics steps, ``j`` the steps since
the flight's start) and held in between.

``z`` holds the step's standard normals, cut into each part's group in the order of
:func:`quadsim.loop.brain.noise_groups`. Everything is array-API code with ``where`` for the
holds, so the function traces on CasADi and JAX.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..physics._array import namespace
from .parts import Context, output_key


def due(j: Any, m: int, xp: Any) -> Any:
    """``j ≡ 0 (mod m)`` for float step counts ``j`` (exact for integers below 2^24 / 2^53)."""
    return (j - m * xp.floor(j / m)) == 0


def tree_map(fn: Any, tree: Any, *rest: Any) -> Any:
    """``fn(leaf, *leaves of rest)`` at every leaf of ``tree``, in the tree's structure.

    A tree is ``None`` (kept), a tuple or NamedTuple of trees (rebuilt as the same type), or a
    leaf (an array or number); the trees of ``rest`` have the structure of ``tree``. Leaves are
    visited depth first, left to right (the order of :func:`quadsim.loop.brain.ctrl_leaves`).
    """
    if tree is None:
        return None
    if isinstance(tree, tuple):
        items = [tree_map(fn, *parts) for parts in zip(tree, *rest, strict=True)]
        return type(tree)(*items) if hasattr(tree, "_fields") else tuple(items)
    return fn(tree, *rest)


def pick(when: Any, new: Any, old: Any, xp: Any) -> Any:
    """``new`` where ``when`` (per drone, ``(n,)``), else ``old``; over trees of arrays."""

    def leaf(a: Any, b: Any) -> Any:
        extra = len(np.shape(a)) - len(np.shape(when))
        d = xp.reshape(when, (*np.shape(when), *([1] * extra))) if extra > 0 else when
        return xp.where(d, a, b)

    return tree_map(leaf, new, old)


def sampled(m: int, j: Any, new: Any, held: Callable[[], Any], xp: Any) -> tuple[Any, Any]:
    """A sensor read every ``m`` steps: ``(fresh, values)``.

    ``fresh`` is where the sample is due (``True`` when ``m == 1``, else :func:`due` of the step
    count ``j`` ``(n,)``); ``values`` is the tree ``new`` where fresh, else ``held()`` (the
    values held since the last sample, a tree like ``new``; called only when ``m > 1``).
    """
    if not m > 1:
        return True, new
    fresh = due(j, m, xp)
    return fresh, pick(fresh, new, held(), xp)


def make_sense(parts: tuple, periods: tuple, g_vec: Any, dt: float, at: tuple,
               world: Any = None) -> Any:  # fmt: skip
    """The sensors' step ``sense(k, truth, bs, z) -> (out, readings, states)``.

    ``parts`` are every sensor part in the order they are read (the built-in ones first,
    :func:`quadsim.loop.brain.sensor_parts`), ``periods`` their periods [steps], ``at`` where
    each one's normals start in ``z``. ``truth`` is the true
    :class:`~quadsim.engines.state.State` ``(n, ...)``, ``bs`` the
    :class:`~quadsim.loop.brain.BrainState` (``j`` and ``parts``: one ``(state, held)`` per
    part), ``z`` the normals ``(n, n_z)``. ``out`` holds the logged readings by key
    (:func:`quadsim.loop.parts.output_key`), ``readings`` what the estimator and the controller
    read (every output and the ``<name>_fresh`` flags), ``states`` the parts' next ``(state,
    held)``.

    A part reads at every step; where its period ``m > 1`` its readings are taken where
    ``j ≡ 0 (mod m)`` and held in between (its state too, for a part with
    :attr:`~quadsim.loop.parts.Sensor.held_state`); a part that holds its own readings
    (:attr:`~quadsim.loop.parts.Sensor.holds`) is told where a sample is due and says itself
    which readings are new.
    """

    def sense(k: Any, truth: Any, bs: Any, z: Any) -> tuple[dict, dict, tuple]:
        xp = namespace(truth.quat)
        out: dict = {}
        readings: dict = {}
        states = []
        for part, m, a, (state, held) in zip(parts, periods, at, bs.parts, strict=True):
            now = due(bs.j, m, xp) if part.holds and m > 1 else True
            ctx = Context(dt, xp, world=world, gravity=g_vec, period=m, due=now)
            count = sum(c for _, c in part.streams)
            got, new = part.measure(k, truth, state, z[..., a:a + count], ctx)
            values = tuple(got[o.name] for o in part.outputs)
            if part.holds:
                fresh = got["fresh"]
            elif part.held_state:
                fresh, (values, new) = sampled(m, bs.j, (values, new),
                                               lambda h=held, s=state: (h, s), xp)  # fmt: skip
            else:
                fresh, values = sampled(m, bs.j, values, lambda h=held: h, xp)
            for o, v in zip(part.outputs, values, strict=True):
                key = output_key(part, o)
                readings[key] = v
                if o.logged:
                    out[key] = v
            readings[f"{part.name}_fresh"] = fresh
            states.append((new, values if m > 1 and not part.holds else None))
        return out, readings, tuple(states)

    return sense
