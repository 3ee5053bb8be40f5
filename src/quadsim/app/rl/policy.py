r"""A trained policy as a plain array file, run without any RL library.

The file (``policy.npz``, NumPy's ``savez``) holds a small MLP, deterministic (the Gaussian
policy's mean):

.. math::

    h_0 = o, \quad h_{j+1} = \tanh(W_j h_j + b_j)\ (j < L - 1), \quad
    a = \mathrm{clip}(W_{L-1} h_{L-1} + b_{L-1}, -1, 1)

with the arrays ``W0, b0, ..., W{L-1}, b{L-1}`` (``W_j`` shape ``(out, in)``) and the metadata
``env_id``, ``action_level``, ``obs_dim``, ``act_dim``, ``observe_rotors``,
``observe_integral`` and ``observe_body`` (the observation holds the rotor-speed estimate, the
position-error integral, :mod:`quadsim.app.envs.observer`, the body-frame position error and
velocity, :func:`quadsim.app.envs.observation.observation`; absent: no) and ``physics_dt``
(the environment's physics step [s], the observer's step) (JSON in ``meta``). ``o`` is the
environment's observation (docs/envs.md), ``a`` its normalised action.

:func:`load_policy` checks the file (missing, not an ``.npz`` archive, missing arrays, arrays
that are not real numbers, shapes that do not chain, non-finite weights, a ``meta`` that is not
a JSON object or has a key of the wrong type) and raises ``ValueError`` naming the file and the
array or key; :meth:`MlpPolicy.check` the sizes against an environment.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from ..io.files import atomic_write

__all__ = ["OBSERVATION_OPTIONS", "MlpPolicy", "load_policy", "observation_options", "save_policy"]

OBSERVATION_OPTIONS = ("observe_rotors", "observe_integral", "observe_body")
"""The environment options that shape the observation, recorded in a policy file's ``meta``."""


class MlpPolicy:
    """The MLP of a policy file: ``__call__(obs (..., obs_dim)) -> action (..., act_dim)``."""

    def __init__(self, weights: list[tuple[np.ndarray, np.ndarray]], meta: dict,
                 path: str = "") -> None:  # fmt: skip
        self.weights = weights
        self.meta = dict(meta)
        self.path = path  # the file it was read from (for messages), or ""
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

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as fh:  # a file, not a name: np.savez would add ".npz" to a name
            np.savez(fh, meta=np.array(json.dumps(meta)), **arrays)

    return atomic_write(p, write)


def _array(p: Path, z: Any, key: str) -> np.ndarray:
    """The array ``key`` of the open archive ``z``: real numbers (else ValueError naming it)."""
    try:
        a = z[key]
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, KeyError) as e:
        raise ValueError(f"{p}: {key}: not a NumPy array ({_why(e)})") from None
    if not isinstance(a, np.ndarray):  # a member without ".npy": NumPy gives its bytes
        raise ValueError(f"{p}: {key}: not a NumPy array (a {len(a)}-byte file)")
    if key == "meta":
        return a
    if a.dtype.kind not in "fiu":
        raise ValueError(f"{p}: {key}: must hold real numbers; got dtype {a.dtype}")
    return a


def _why(e: BaseException) -> str:
    """A reader's complaint without NumPy's advice to unpickle (policy files hold no objects)."""
    msg = str(e) or type(e).__name__
    if "allow_pickle" in msg:
        return "it holds Python objects, not numbers"
    return msg


def _read_meta(p: Path, raw: np.ndarray) -> dict:
    """The ``meta`` entry as a dict, its keys checked (``FILE: meta KEY: ...``)."""
    if raw.dtype.kind != "U" or raw.shape != ():
        raise ValueError(f"{p}: meta: must be a JSON text; got a {raw.dtype} array of shape "
                         f"{raw.shape}")  # fmt: skip
    try:
        meta = json.loads(str(raw))
    except json.JSONDecodeError as e:
        raise ValueError(f"{p}: meta: not JSON ({e})") from None
    if not isinstance(meta, dict):
        raise ValueError(f"{p}: meta: must be a JSON object; got {type(meta).__name__}")
    for key in ("env_id", "action_level"):
        if key in meta and not isinstance(meta[key], str):
            raise ValueError(f"{p}: meta {key} must be a string; got {meta[key]!r}")
    for key in OBSERVATION_OPTIONS:
        if not isinstance(meta.get(key, False), bool):
            raise ValueError(f"{p}: meta {key} must be true or false; got {meta[key]!r}")
    for key in ("obs_dim", "act_dim"):
        v = meta.get(key, 1)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{p}: meta {key} must be a positive integer; got {v!r}")
    h = meta.get("physics_dt", 0.002)
    if isinstance(h, bool) or not isinstance(h, int | float) or not 0 < h < 1:
        raise ValueError(f"{p}: meta physics_dt must be a step in (0, 1) s; got {h!r}")
    return meta


def load_policy(path: str | os.PathLike[str]) -> MlpPolicy:
    """Read and check a policy file.

    Raises:
        ValueError: ``FILE: what is wrong`` (missing, not an ``.npz`` archive, an array that is
            not real numbers, shapes, non-finite weights, ``meta`` not a JSON object or a key of
            the wrong type), naming the array or the ``meta`` key.
    """
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"{p}: no such policy file")
    if not zipfile.is_zipfile(p):
        with open(p, "rb") as fh:
            zip_head = fh.read(2) == b"PK"
        raise ValueError(f"{p}: not a policy file (" + ("a damaged .npz archive)" if zip_head
                         else "not an .npz archive)"))  # fmt: skip
    try:
        with np.load(p, allow_pickle=False) as z:
            if "meta" not in z.files:
                raise ValueError(f"{p}: not a policy file: no 'meta' entry")
            data = {k: _array(p, z, k) for k in z.files}
    except (OSError, EOFError, zipfile.BadZipFile) as e:
        raise ValueError(f"{p}: not a policy file (a damaged .npz archive: {_why(e)})") from None
    meta = _read_meta(p, data.pop("meta"))
    weights = []
    j = 0
    while f"W{j}" in data:
        w, b = data.pop(f"W{j}"), data.pop(f"b{j}", None)
        if b is None or w.ndim != 2 or b.shape != (w.shape[0],) or 0 in w.shape:
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
    if data:
        raise ValueError(f"{p}: unexpected arrays {sorted(data)} (layers W0, b0, ... must be "
                         "numbered from 0 without a gap)")  # fmt: skip
    pol = MlpPolicy(weights, meta, str(p))
    for key, val in (("obs_dim", pol.obs_dim), ("act_dim", pol.act_dim)):
        if key in meta and meta[key] != val:
            raise ValueError(f"{p}: meta {key} = {meta[key]} but the layers give {val}")
    return pol
