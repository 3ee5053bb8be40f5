"""A training run's folder as one unit, and the same command picking it up bit for bit.

After every PPO iteration, in this order:

1. ``checkpoint.zip`` (written whole, flushed to disk, then renamed over the old one: the
   commit point): Stable-Baselines3's model with its optimiser, and a member :data:`RESUME`
   (NumPy arrays and a JSON text, read without pickles) with everything else that decides what
   comes next: the model's last observation, episode starts and episode-info window
   (:func:`restore_model`; Stable-Baselines3 pickles its own copies, which are never read:
   :mod:`quadsim.app.rl.checkpoint`), the random generators (PyTorch's, NumPy's global one,
   Python's), the environments' state (:meth:`quadsim.app.envs.QuadsimVectorEnv.get_state`:
   their generator, physics, counters, disturbances), the training wrapper's return and length
   accumulators and outcome windows, the run's ``state.json`` content and its ``progress.csv``
   row;
2. ``policy.npz``, then ``state.json``, then the ``progress.csv`` row.

A run stopped anywhere (a signal, a full disk, a kill) leaves the last committed checkpoint;
resuming (:func:`read_resume`) takes the run's state from it, rewrites ``state.json`` and
``policy.npz`` if they lag behind it and cuts ``progress.csv`` to its step count (adding its row
if it is missing): the folder is consistent again and the run continues as if it had not
stopped (:func:`restore`).
"""

from __future__ import annotations

import csv
import io
import json
import math
import random
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from ..io.files import atomic_write
from ..io.strict_json import strict_dumps

__all__ = ["PROGRESS_HEADER", "RESUME", "read_resume", "read_state", "reconcile_progress",
           "restore", "restore_model", "save_checkpoint", "write_state"]  # fmt: skip

RESUME = "quadsim_resume.npz"
"""The member of ``checkpoint.zip`` with the resume state (Stable-Baselines3 ignores it)."""

PROGRESS_HEADER = ["wall_s", "steps", "episodes", "success_rate", "mean_return", "mean_length"]
"""The columns of ``progress.csv``."""


def _nonneg_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v >= 0


_CHECKS = {
    "steps": (_nonneg_int, "a non-negative integer"),
    "wall_s": (_number, "a finite number of seconds >= 0"),
    "episodes": (_nonneg_int, "a non-negative integer"),
    "env_id": (lambda v: isinstance(v, str), "a string"),
    "algo": (lambda v: isinstance(v, str), "a string"),
    "seed": (_nonneg_int, "a non-negative integer"),
    "num_envs": (lambda v: _nonneg_int(v) and v >= 4, "an integer >= 4"),
    "action_level": (lambda v: isinstance(v, str), "a string"),
    "episode_steps": (lambda v: _nonneg_int(v) and v >= 1, "a positive integer"),
    "env_options": (lambda v: isinstance(v, dict), "a JSON object"),
    "obs_dim": (lambda v: v is None or (_nonneg_int(v) and v >= 1), "a positive integer"),
    "success_rate": (lambda v: _number(v) and v <= 1, "a number in 0..1"),
    "threads": (lambda v: _nonneg_int(v) and v >= 1, "a positive integer"),
}
"""The keys of ``state.json`` (``env_options``, ``obs_dim`` and ``threads``, the PyTorch threads a
run chose, may be missing: older runs)."""

_OPTIONAL = ("env_options", "obs_dim", "success_rate", "threads")


def check_state(state: Any, where: str) -> dict:
    """``state`` if it is a run's state (keys and types of :data:`_CHECKS`), else ValueError
    ``WHERE: KEY: must be ...; got ...``."""  # noqa: D205, D209
    if not isinstance(state, dict):
        raise ValueError(f"{where}: must be a JSON object (a training run's state); got "
                         f"{json.dumps(state)[:60]}")  # fmt: skip
    for key, (ok, what) in _CHECKS.items():
        if key not in state:
            if key in _OPTIONAL:
                continue
            raise ValueError(f"{where}: {key}: missing (a training run's state has "
                             f"{', '.join(k for k in _CHECKS if k not in _OPTIONAL)})")
        if not ok(state[key]):
            raise ValueError(f"{where}: {key}: must be {what}; got {state[key]!r}")
    return state


def read_state(path: Path) -> dict:
    """The checked content of a run's ``state.json`` (ValueError naming the file and key)."""
    try:
        text = path.read_text(encoding="utf-8")
        state = json.loads(text)
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not a training run's state (not a text file)") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not a training run's state (not JSON: {e})") from None
    return check_state(state, str(path))


def write_state(path: Path, state: dict) -> None:
    """Write ``state.json`` whole or not at all, on disk before it replaces the old one."""
    text = strict_dumps(state, indent=2) + "\n"
    atomic_write(path, lambda p: p.write_text(text, encoding="utf-8"), durable=True)


def _split(prefix: str, state: dict, arrays: dict, plain: dict) -> None:
    for k, v in state.items():
        if isinstance(v, np.ndarray):
            arrays[f"{prefix}{k}"] = v
        else:
            plain[k] = v


def save_checkpoint(path: Path, model: Any, env: Any, state: dict, row: list) -> None:
    """Write ``checkpoint.zip`` (module docstring) whole or not at all, flushed to disk."""
    import torch

    arrays: dict[str, np.ndarray] = {"torch_rng": torch.get_rng_state().numpy().copy()}
    np_state = np.random.get_state(legacy=False)  # noqa: NPY002 (SB3 shuffles with it)
    arrays["np_random.key"] = np_state["state"]["key"]
    if model._last_obs is not None:  # the model's own rollout state (restore_model)
        arrays["sb3.last_obs"] = np.asarray(model._last_obs)
        arrays["sb3.last_episode_starts"] = np.asarray(model._last_episode_starts)
    infos = list(model.ep_info_buffer or ())
    for k, dtype in (("r", np.float64), ("l", np.int64), ("t", np.float64)):
        arrays[f"sb3.ep_info.{k}"] = np.array([i[k] for i in infos], dtype).reshape(len(infos))
    env_plain: dict = {}
    _split("env.", env.venv.get_state(), arrays, env_plain)
    wrapper_plain: dict = {}
    _split("wrapper.", env.get_state(), arrays, wrapper_plain)
    doc = {"state": state, "row": row, "python_random": random.getstate(),
           "np_random": {"pos": np_state["state"]["pos"], "has_gauss": np_state["has_gauss"],
                         "gauss": np_state["gauss"]},
           "env": env_plain, "wrapper": wrapper_plain}  # fmt: skip
    buf = io.BytesIO()
    np.savez(buf, json=np.array(json.dumps(doc)), **arrays)

    def write(tmp: Path) -> None:
        model.save(tmp)
        with zipfile.ZipFile(tmp, "a") as z:
            z.writestr(RESUME, buf.getvalue())

    atomic_write(path, write, durable=True)


def read_resume(path: Path) -> dict | None:
    """The resume state of ``checkpoint.zip`` (``None`` for a checkpoint of an older quadsim).

    Returns:
        ``{"state", "row", "doc", "arrays"}``: the run's state (checked as ``state.json``), its
        progress row, the JSON part and the arrays.

    Raises:
        ValueError: ``FILE: ...`` for a file that is not a readable checkpoint.
    """
    try:
        with zipfile.ZipFile(path) as z:
            if RESUME not in z.namelist():
                return None
            raw = z.read(RESUME)
        with np.load(io.BytesIO(raw), allow_pickle=False) as f:  # no object arrays
            arrays = {k: f[k] for k in f.files}
        _check_arrays(arrays, f"{path}: {RESUME}")
        doc = json.loads(str(arrays.pop("json")))
        state = check_state(doc["state"], f"{path}: {RESUME}: state")
    except (OSError, EOFError, KeyError, TypeError, ValueError, zipfile.BadZipFile) as e:
        if isinstance(e, ValueError) and str(e).startswith(str(path)):
            raise
        why = str(e)
        if "allow_pickle" in why:  # NumPy's advice to unpickle
            why = f"{RESUME} holds Python objects (pickles), which are never loaded"
        raise ValueError(f"{path}: not a readable checkpoint ({type(e).__name__}: {why}); choose "
                         "another --out") from None  # fmt: skip
    return {"state": state, "row": doc.get("row"), "doc": doc, "arrays": arrays}


_SHAPES = {"json": ((), "U"), "torch_rng": (None, "u"), "np_random.key": ((624,), "u")}
"""The members of :data:`RESUME` of a known shape and kind (``None``: one dimension)."""


def _check_arrays(arrays: dict, where: str) -> None:
    """Every member of :data:`RESUME` an array of numbers or text (a member without ``.npy``
    reads as bytes), those of :data:`_SHAPES` of their shape and kind."""  # noqa: D205, D209
    for key, a in arrays.items():
        if not isinstance(a, np.ndarray) or a.dtype.kind not in "biufU":
            raise ValueError(f"{where}: {key}: must be an array of numbers or text")
    for key, (shape, kind) in _SHAPES.items():
        a = arrays.get(key)
        fits = a is not None and (a.shape == shape if shape is not None else a.ndim == 1)
        if not fits or a.dtype.kind != kind:
            raise ValueError(f"{where}: {key}: missing, or not the array it must be")


def restore_model(resume: dict, model: Any, path: Path) -> bool:
    """Put back the model's last observation, episode starts and episode-info window of
    :func:`read_resume` (``path``: the checkpoint, for messages); ``False`` when the checkpoint
    holds none (an older quadsim's: the model starts new episodes).

    Raises:
        ValueError: ``FILE: quadsim_resume.npz: KEY: ...`` for arrays that do not fit the model's
            environments.
    """  # noqa: D205
    from collections import deque

    arrays = resume["arrays"]
    if "sb3.last_obs" not in arrays:
        return False
    env, where = model.get_env(), f"{path}: {RESUME}"
    shapes = {"sb3.last_obs": ((env.num_envs, *env.observation_space.shape),
                               np.dtype(env.observation_space.dtype)),
              "sb3.last_episode_starts": ((env.num_envs,), np.dtype(bool))}  # fmt: skip
    for key, (shape, dtype) in shapes.items():
        a = arrays.get(key)
        if a is None or a.shape != shape or a.dtype != dtype:
            got = "missing" if a is None else f"{a.dtype} of shape {a.shape}"
            raise ValueError(f"{where}: {key}: must be {dtype} of shape {shape} (these "
                             f"environments); got {got}")  # fmt: skip
    info = [arrays.get(f"sb3.ep_info.{k}") for k in "rlt"]
    if any(a is None or a.ndim != 1 or a.dtype.kind not in "if" or len(a) != len(info[0])
           for a in info):  # fmt: skip
        raise ValueError(f"{where}: sb3.ep_info: must be three number arrays of one length")
    model._last_obs = arrays["sb3.last_obs"].copy()
    model._last_episode_starts = arrays["sb3.last_episode_starts"].copy()
    model.ep_info_buffer = deque(
        ({"r": float(r), "l": int(n), "t": float(t)} for r, n, t in zip(*info, strict=True)),
        maxlen=model._stats_window_size)  # fmt: skip
    model.ep_success_buffer = deque(maxlen=model._stats_window_size)  # no "is_success" infos
    return True


def restore(resume: dict, env: Any) -> None:
    """Put back the generators, the environments' and the wrapper's state of :func:`read_resume`
    (after the model is loaded: loading it reseeds the generators).

    Raises:
        ValueError: A state that does not fit these environments (the run then goes on from new
            episodes).
    """  # noqa: D205
    import torch

    doc, arrays = resume["doc"], resume["arrays"]

    def part(prefix: str, plain: dict) -> dict:
        out = dict(plain)
        out.update({k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)})
        return out

    try:
        env.venv.set_state(part("env.", doc["env"]))
        env.set_state(part("wrapper.", doc["wrapper"]))
        npr = doc["np_random"]
        legacy = {"bit_generator": "MT19937",
                  "state": {"key": arrays["np_random.key"], "pos": npr["pos"]},
                  "has_gauss": npr["has_gauss"], "gauss": npr["gauss"]}  # fmt: skip
        np.random.set_state(legacy)  # noqa: NPY002
        v, state, gauss = doc["python_random"]
        random.setstate((v, tuple(state), gauss))
        torch.set_rng_state(torch.from_numpy(arrays["torch_rng"].copy()))
    except (KeyError, TypeError, IndexError, AttributeError, RuntimeError, OverflowError) as e:
        raise ValueError(f"{RESUME}: a state that does not fit ({type(e).__name__}: "
                         f"{str(e)[:120]})") from None  # fmt: skip


def reconcile_progress(path: Path, steps: int, row: list | None) -> None:
    """Cut ``progress.csv`` to the rows up to ``steps`` (one per step count), adding ``row`` (the
    checkpoint's) if the file lacks it: after a run stopped between the checkpoint and the row,
    or one that failed to write its checkpoint after the row of an older quadsim."""  # noqa: D205, D209
    rows: list[list[str]] = []
    seen: set[int] = set()
    kept: list[list[str]] | None = None
    if path.exists():
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        if text and not text.endswith("\n"):
            lines = lines[:-1]  # a row cut short by a failed write
        kept = list(csv.reader(lines))[1:]
        for r in kept:
            try:
                n = int(r[1])
            except (IndexError, ValueError):
                continue
            if len(r) == len(PROGRESS_HEADER) and n <= steps and n not in seen:
                rows.append(r)
                seen.add(n)
    if steps not in seen and row is not None:
        rows.append([str(v) for v in row])
    if rows == kept and (not rows or int(rows[-1][1]) == steps):
        return  # already the checkpoint's

    def write(tmp: Path) -> None:
        with open(tmp, "w", newline="", encoding="utf-8") as fh:
            csv.writer(fh).writerows([PROGRESS_HEADER, *rows])

    atomic_write(path, write)
