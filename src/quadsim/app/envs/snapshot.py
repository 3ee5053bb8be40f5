"""The full state of a :class:`~quadsim.app.envs.core.QuadCore`, taken and put back exactly.

:meth:`QuadsimVectorEnv.get_state() <quadsim.app.envs.QuadsimVectorEnv.get_state>` and ``set_state``
use it (a training run that resumes continues bit for bit as if it had not stopped, docs/rl.md).
What decides an environment's future, on either path:

* the per-step counters and memories of :class:`QuadCore` (``steps``, the last action, the
  rotor-speed estimate, the error integral), the action level's memory (the thrust levels'
  inner loop, the pwm batteries);
* the disturbances: the per-episode draws, the gusts and their generator's state;
* the sensor parts' step count and noise seed (on the reference path also their held readings,
  fresh flags and states; the compiled path keeps those in its state array);
* on the compiled path, its whole state array (plant, flags, clock, inner memories, counters,
  observations) and input array; on the reference path, the simulator's state, flags and clock.

A state is a flat ``dict``: NumPy arrays (copies) and JSON values (numbers, booleans, the
generators' states), so that it can be stored in an ``.npz`` file and a JSON text.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["core_state", "set_core_state"]

_CORE = ("_steps", "_last_action", "_rotor_est", "_err_int")
_DIST = ("delay", "mean", "dir", "wind", "gust")
_LEVEL = ("charge", "voltage")  # the pwm batteries


def core_state(core: Any) -> dict[str, Any]:
    """The state of ``core`` (module docstring): names to arrays (copies) or JSON values."""
    s: dict[str, Any] = {k: np.array(getattr(core, k)) for k in _CORE}
    s.update({f"dist.{k}": np.array(getattr(core.dist, k)) for k in _DIST})
    s["dist.rng"] = core.dist.rng.bit_generator.state
    level = core.level
    s.update({f"level.{k}": np.array(getattr(level, k)) for k in _LEVEL if hasattr(level, k)})
    inner = getattr(level, "inner", None)
    if inner is not None:
        s.update({f"level.inner.{k}": np.array(v) for k, v in inner._asdict().items()})
    c = core.compiled
    if core.sensing is not None:  # their step count and seed (and memory on the reference path)
        s.update({f"sensing.{k}": v for k, v in core.sensing.snapshot(c is None).items()})
    if c is not None:
        s.update({"compiled.X": c._X.copy(), "compiled.U": c._U.copy(),
                  "compiled.clock": int(c._clock), "compiled.stale": bool(c._stale),
                  "compiled.fresh": bool(c._fresh)})  # fmt: skip
        return s
    sim = core._sim
    s["sim.k"] = int(sim.k)
    s.update({f"sim.state.{k}": np.array(v) for k, v in sim.state._asdict().items()})
    if sim.status is not None:
        s.update({f"sim.status.{k}": np.array(v) for k, v in sim.status._asdict().items()})
    return s


def _take(state: dict, key: str, like: Any) -> np.ndarray:
    """``state[key]`` as an array of ``like``'s shape and dtype (ValueError if it is not)."""
    if key not in state:
        raise ValueError(f"environment state: {key} missing")
    a = np.asarray(state[key])
    want = np.asarray(like)
    if a.shape != want.shape:
        raise ValueError(f"environment state: {key} has shape {a.shape}; the environments "
                         f"have {want.shape}")  # fmt: skip
    return a.astype(want.dtype, copy=True)


def set_core_state(core: Any, state: dict[str, Any]) -> None:
    """Put back a state of :func:`core_state` taken from a core built the same way.

    Raises:
        ValueError: A state of another path, size or layout (naming the entry).
    """
    compiled = "compiled.X" in state
    if compiled != (core.compiled is not None):
        raise ValueError("environment state: taken on the "
                         f"{'compiled' if compiled else 'reference'} path; these environments "
                         f"run on the {'compiled' if core.compiled else 'reference'} path")
    for k in _CORE:
        setattr(core, k, _take(state, k, getattr(core, k)))
    for k in _DIST:
        setattr(core.dist, k, _take(state, f"dist.{k}", getattr(core.dist, k)))
    core.dist.rng = np.random.default_rng()
    core.dist.rng.bit_generator.state = state["dist.rng"]
    level = core.level
    for k in _LEVEL:
        if hasattr(level, k):
            setattr(level, k, _take(state, f"level.{k}", getattr(level, k)))
    inner = getattr(level, "inner", None)
    if inner is not None:
        level.inner = type(inner)(**{k: _take(state, f"level.inner.{k}", v)
                                     for k, v in inner._asdict().items()})  # fmt: skip
    if core.sensing is not None:
        core.sensing.restore({k[8:]: v for k, v in state.items() if k.startswith("sensing.")})
    c = core.compiled
    if c is not None:
        c._X[...] = _take(state, "compiled.X", c._X)
        c._U[...] = _take(state, "compiled.U", c._U)
        c._clock = int(state["compiled.clock"])
        c._stale, c._fresh = bool(state["compiled.stale"]), bool(state["compiled.fresh"])
        c._dirty = True  # the simulator is brought up to these states when read
        return
    sim = core._sim
    sim.k = int(state["sim.k"])
    st = sim.state
    sim.state = type(st)(**{k: _take(state, f"sim.state.{k}", v)
                            for k, v in st._asdict().items()})  # fmt: skip
    if sim.status is not None:
        sim.status = type(sim.status)(**{k: _take(state, f"sim.status.{k}", v)
                                         for k, v in sim.status._asdict().items()})  # fmt: skip
