r"""A trained policy as a plain array file, run without any RL library.

The file (``policy.npz``, NumPy's ``savez``) holds a small MLP, deterministic (the Gaussian
policy's mean):

.. math::

    h_0 = o, \quad h_{j+1} = \tanh(W_j h_j + b_j)\ (j < L - 1), \quad
    a = \mathrm{clip}(W_{L-1} h_{L-1} + b_{L-1}, -1, 1)

with the arrays ``W0, b0, ..., W{L-1}, b{L-1}`` (``W_j`` shape ``(out, in)``) and the metadata
``env_id``, ``action_level``, ``obs_dim``, ``act_dim``, ``observe_rotors``,
``observe_integral`` and ``observe_body`` (the observation holds the rotor-speed estimate, the
position-error integral, :mod:`quadsim.envs.observer`, the body-frame position error and
velocity, :func:`quadsim.envs.core.observation`; absent: no) and ``physics_dt``
(the environment's physics step [s], the observer's step) (JSON in ``meta``). ``o`` is the
environment's observation (docs/envs.md), ``a`` its normalised action.

:func:`load_policy` checks the file (missing, not an ``.npz``, missing arrays, shapes that do not
chain, non-finite weights, dimensions that do not match an environment) and raises
``ValueError`` naming the file.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["OBSERVATION_OPTIONS", "MlpPolicy", "load_policy", "observation_options", "save_policy"]

OBSERVATION_OPTIONS = ("observe_rotors", "observe_integral", "observe_body")
"""The environment options that shape the observation, recorded in a policy file's ``meta``."""


class MlpPolicy:
    """The MLP of a policy file: ``__call__(obs (..., obs_dim)) -> action (..., act_dim)``."""

    def __init__(self, weights: list[tuple[np.ndarray, np.ndarray]], meta: dict) -> None:
        self.weights = weights
        self.meta = dict(meta)
        self.obs_dim = int(weights[0][0].shape[1])
        self.act_dim = int(weights[-1][0].shape[0])

    def __call__(self, obs: Any) -> np.ndarray:
        """Actions in ``[-1, 1]`` ``(..., act_dim)`` of observations ``(..., obs_dim)``."""
        h = np.asarray(obs, dtype=np.float64)
        for j, (w, b) in enumerate(self.weights):
            h = h @ w.T + b
            if j < len(self.weights) - 1:
                h = np.tanh(h)
        return np.clip(h, -1.0, 1.0)

    def check(self, obs_dim: int, act_dim: int, where: str = "") -> None:
        """Raise ``ValueError`` unless the policy fits an env's observation and action sizes."""
        if (self.obs_dim, self.act_dim) != (obs_dim, act_dim):
            raise ValueError(
                f"{where}: the policy maps {self.obs_dim} observations to "
                f"{self.act_dim} actions; the environment has {obs_dim} and "
                f"{act_dim}"
            )


def observation_options(meta: dict) -> dict:
    """The environment options a policy was trained with that shape its observation (an option
    its ``meta`` does not record is off: the file predates it)."""  # noqa: D205, D209
    return {k: bool(meta.get(k, False)) for k in OBSERVATION_OPTIONS}


def save_policy(path: str | os.PathLike[str], weights: list[tuple[Any, Any]], meta: dict) -> Path:
    """Write a policy file (module docstring), whole or not at all."""
    p = Path(path)
    arrays = {}
    for j, (w, b) in enumerate(weights):
        arrays[f"W{j}"] = np.asarray(w, dtype=np.float64)
        arrays[f"b{j}"] = np.asarray(b, dtype=np.float64)
    from ..io.files import atomic_write

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as fh:  # a file, not a name: np.savez would add ".npz" to a name
            np.savez(fh, meta=np.array(json.dumps(meta)), **arrays)

    return atomic_write(p, write)


def load_policy(path: str | os.PathLike[str]) -> MlpPolicy:
    """Read and check a policy file.

    Raises:
        ValueError: ``FILE: what is wrong`` (missing, corrupt, shapes, non-finite weights).
    """
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"{p}: no such policy file")
    try:
        with np.load(p, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as e:
        raise ValueError(f"{p}: not a policy file (a NumPy .npz): {e}") from None
    try:
        meta = json.loads(str(data.pop("meta")))
    except (KeyError, json.JSONDecodeError):
        raise ValueError(f"{p}: not a policy file: no 'meta' entry") from None
    weights = []
    j = 0
    while f"W{j}" in data:
        w, b = data.pop(f"W{j}"), data.pop(f"b{j}", None)
        if b is None or w.ndim != 2 or b.shape != (w.shape[0],):
            raise ValueError(
                f"{p}: layer {j}: W{j} must be (out, in) and b{j} (out,); got "
                f"{w.shape} and {None if b is None else b.shape}"
            )
        if weights and weights[-1][0].shape[0] != w.shape[1]:
            raise ValueError(
                f"{p}: layer {j} takes {w.shape[1]} inputs, layer {j - 1} gives "
                f"{weights[-1][0].shape[0]}"
            )
        if not (np.all(np.isfinite(w)) and np.all(np.isfinite(b))):
            raise ValueError(f"{p}: layer {j} has non-finite weights")
        weights.append((w.astype(np.float64), b.astype(np.float64)))
        j += 1
    if not weights:
        raise ValueError(f"{p}: not a policy file: no layers W0, b0, ...")
    if not isinstance(meta, dict):
        raise ValueError(f"{p}: not a policy file: 'meta' is not a JSON object")
    for key in OBSERVATION_OPTIONS:
        if not isinstance(meta.get(key, False), bool):
            raise ValueError(f"{p}: meta {key} must be true or false; got {meta[key]!r}")
    h = meta.get("physics_dt", 0.002)
    if isinstance(h, bool) or not isinstance(h, int | float) or not 0 < h < 1:
        raise ValueError(f"{p}: meta physics_dt must be a step in (0, 1) s; got {h!r}")
    pol = MlpPolicy(weights, meta)
    for key, val in (("obs_dim", pol.obs_dim), ("act_dim", pol.act_dim)):
        if key in meta and int(meta[key]) != val:
            raise ValueError(f"{p}: meta {key} = {meta[key]} but the layers give {val}")
    return pol
