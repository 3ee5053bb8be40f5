"""``checkpoint.zip`` read back without unpickling anything (issue 40).

Stable-Baselines3 writes a model as a zip file: ``data``, a JSON object of the model's
attributes in which whatever JSON cannot hold (the policy class, the spaces, the schedules, the
last observation, the episode-info deques) is an object ``{":serialized:": <base64 cloudpickle>,
...}``; ``policy.pth`` and ``policy.optimizer.pth``, PyTorch state dicts; ``pytorch_variables.pth``,
``_stable_baselines3_version`` and ``system_info.txt``. quadsim adds
:data:`~quadsim.app.rl.resume.RESUME`. ``PPO.load`` unpickles every serialized entry, so a
crafted checkpoint would run code as a run resumes. Here the model is built as a new run builds
it (``PPO("MlpPolicy", env, ...)``) and takes from the checkpoint only:

* from ``data``, plain JSON values: the counters (:data:`COUNTERS`: ``num_timesteps`` and those
  of the logs) and the PPO settings the run was started with (:data:`SETTINGS`, as ``PPO.load``
  kept them); a serialized entry is never decoded (the new model has its own policy class,
  spaces and schedules, and the last observation is in :data:`~quadsim.app.rl.resume.RESUME`);
* the weights and the optimiser's state, read by ``torch.load(weights_only=True)`` (tensors,
  numbers and containers, nothing else) and checked against the new model's (names, shapes,
  dtypes, the optimiser's parameter groups) before they are loaded.

A checkpoint with anything else (a member that has no place in it, a missing one, a value of
another type, such as a serialized entry where a number belongs, a tensor of another shape) is
refused: ValueError ``FILE: MEMBER: KEY: ...`` (``quadsim train`` exits 2).
"""

from __future__ import annotations

import io
import json
import math
import warnings
import zipfile
import zlib
from pathlib import Path
from typing import Any

from .resume import RESUME

__all__ = ["COUNTERS", "MEMBERS", "SETTINGS", "load_model", "read_checkpoint"]

MEMBERS = ("data", "policy.pth", "policy.optimizer.pth", "pytorch_variables.pth",
           "_stable_baselines3_version", "system_info.txt", RESUME)  # fmt: skip
"""The members a training checkpoint may hold (the first three it must; the other torch file,
``pytorch_variables.pth``, is empty for PPO and not read)."""

_REQUIRED = MEMBERS[:3]


def _count(v: Any) -> bool:
    return type(v) is int and v >= 0


def _positive(v: Any) -> bool:
    return type(v) is int and v >= 1


def _number(v: Any) -> bool:
    return type(v) in (int, float) and math.isfinite(v) and v >= 0


COUNTERS = {
    "num_timesteps": (_count, "a non-negative integer"),
    "_n_updates": (_count, "a non-negative integer"),
    "_episode_num": (_count, "a non-negative integer"),
    "_current_progress_remaining": (lambda v: _number(v) and v <= 1, "a number in 0..1"),
}
"""The model's counters taken from ``data`` (``num_timesteps`` must be there)."""

SETTINGS = {
    "n_steps": (_positive, "a positive integer"),
    "batch_size": (_positive, "a positive integer"),
    "n_epochs": (_positive, "a positive integer"),
    "learning_rate": (lambda v: _number(v) and v > 0, "a positive number"),
    "gamma": (lambda v: _number(v) and v <= 1, "a number in 0..1"),
    "gae_lambda": (lambda v: _number(v) and v <= 1, "a number in 0..1"),
    "ent_coef": (_number, "a finite number >= 0"),
    "vf_coef": (_number, "a finite number >= 0"),
    "max_grad_norm": (lambda v: _number(v) and v > 0, "a positive number"),
    "normalize_advantage": (lambda v: type(v) is bool, "true or false"),
    "target_kl": (lambda v: v is None or (_number(v) and v > 0), "null or a positive number"),
    "policy_kwargs": (lambda v: type(v) is dict and set(v) == {"net_arch"}
                      and type(v["net_arch"]) is list and all(map(_positive, v["net_arch"])),
                      'an object {"net_arch": [positive integers]}'),
}  # fmt: skip
"""The PPO settings taken from ``data`` where it has them (over those of a new run)."""


def _got(v: Any) -> str:
    if isinstance(v, dict) and ":serialized:" in v:
        return "a serialized (pickled) object, which is never unpickled"
    return repr(v)[:80]


def _take(data: dict, table: dict, where: str, required: tuple = ()) -> dict:
    out = {}
    for key, (ok, what) in table.items():
        if key not in data:
            if key in required:
                raise ValueError(f"{where}: {key}: missing")
            continue
        if not ok(data[key]):
            raise ValueError(f"{where}: {key}: must be {what}; got {_got(data[key])}")
        out[key] = data[key]
    return out


def _torch_member(z: zipfile.ZipFile, name: str, where: str) -> Any:
    """A ``.pth`` member read by PyTorch's weights-only reader (no code runs)."""
    import torch

    try:
        with warnings.catch_warnings():  # its notes on a file's pickle protocol: not ours to say
            warnings.simplefilter("ignore")
            return torch.load(io.BytesIO(z.read(name)), map_location="cpu", weights_only=True)
    except Exception as e:  # untrusted bytes: whatever the reader raises is a refusal
        first = (str(e).strip().splitlines() or [""])[0][:160]
        raise ValueError(f"{where}: {name}: not a state dict of plain tensors "
                         f"({type(e).__name__}: {first})") from None  # fmt: skip


def read_checkpoint(path: Path) -> dict:
    """What a resumed run takes from ``checkpoint.zip`` (module docstring), read and checked
    without unpickling anything.

    Returns:
        ``{"counters", "settings", "policy", "optimizer"}``: the counters and the settings of
        ``data``, the policy's and the optimiser's state dicts.

    Raises:
        ValueError: ``FILE: ...`` for a file that is not a readable checkpoint, naming the member
            and the key.
    """  # noqa: D205
    where = str(path)
    try:
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
            odd = [n for n in names if n not in MEMBERS]
            if odd:
                raise ValueError(f"{where}: {odd[0]}: not a member of a training checkpoint "
                                 f"(it holds {', '.join(MEMBERS)})")  # fmt: skip
            missing = [n for n in _REQUIRED if n not in names]
            if missing:
                raise ValueError(f"{where}: {missing[0]}: missing (a training checkpoint holds "
                                 f"{', '.join(_REQUIRED)})")  # fmt: skip
            raw = z.read("data")
            policy = _torch_member(z, "policy.pth", where)
            optimizer = _torch_member(z, "policy.optimizer.pth", where)
    except (OSError, EOFError, zipfile.BadZipFile, RuntimeError, NotImplementedError,
            zlib.error) as e:  # fmt: skip
        raise ValueError(f"{where}: not a readable checkpoint ({type(e).__name__}: {e}); choose "
                         "another --out") from None  # fmt: skip
    try:
        data = json.loads(raw.decode("utf-8"))
    except ValueError as e:
        raise ValueError(f"{where}: data: not JSON ({e})") from None
    if type(data) is not dict:
        raise ValueError(f"{where}: data: must be a JSON object; got {_got(data)}")
    return {"counters": _take(data, COUNTERS, f"{where}: data", ("num_timesteps",)),
            "settings": _take(data, SETTINGS, f"{where}: data"),
            "policy": policy, "optimizer": optimizer}  # fmt: skip


def _tensor_text(t: Any) -> str:
    import torch

    if not isinstance(t, torch.Tensor):
        return f"a {type(t).__name__}"
    return f"a {str(t.dtype).removeprefix('torch.')} tensor of shape {tuple(t.shape)}"


def _check_policy(sd: Any, want: dict, where: str) -> None:
    """The policy's state dict ``sd`` has the names, shapes and dtypes of ``want``'s."""
    import torch

    if not isinstance(sd, dict):
        raise ValueError(f"{where}: must be a state dict; got a {type(sd).__name__}")
    extra, missing = sorted(set(sd) - set(want), key=str), [k for k in want if k not in sd]
    if extra or missing:
        what = f"{missing[0]}: missing" if missing else f"{extra[0]!r}: not this policy's"
        raise ValueError(f"{where}: {what} (this policy has {', '.join(want)})")
    for k, t in want.items():
        v = sd[k]
        if not (isinstance(v, torch.Tensor) and v.shape == t.shape and v.dtype == t.dtype):
            raise ValueError(f"{where}: {k}: must be {_tensor_text(t)}; got {_tensor_text(v)}")


def _same_kind(v: Any, ref: Any) -> bool:
    if ref is None:
        return v is None or type(v) is bool
    if type(ref) is tuple:
        return (type(v) is tuple and len(v) == len(ref)
                and all(map(_same_kind, v, ref)))  # fmt: skip
    if type(ref) in (int, float):
        return type(v) in (int, float) and math.isfinite(v)
    return type(v) is type(ref)


def _check_optimizer(sd: Any, optimizer: Any, where: str) -> None:
    """The optimiser's state dict ``sd`` fits ``optimizer``: its parameter groups (keys, kinds of
    value, parameters) and, per parameter, tensors of its shape (``step``: a scalar)."""  # noqa: D205, D209
    import torch

    want = optimizer.state_dict()
    params = [p for g in optimizer.param_groups for p in g["params"]]
    if not isinstance(sd, dict) or set(sd) != {"state", "param_groups"}:
        raise ValueError(f"{where}: must be an optimiser's state dict (state, param_groups)")
    groups = sd["param_groups"]
    if type(groups) is not list or len(groups) != len(want["param_groups"]):
        raise ValueError(f"{where}: param_groups: must be a list of "
                         f"{len(want['param_groups'])}")  # fmt: skip
    for i, (g, w) in enumerate(zip(groups, want["param_groups"], strict=True)):
        if not isinstance(g, dict) or set(g) != set(w):
            raise ValueError(f"{where}: param_groups[{i}]: must have the keys {', '.join(w)}")
        bad = [k for k in w if (g[k] != w[k] if k == "params" else not _same_kind(g[k], w[k]))]
        if bad:
            raise ValueError(f"{where}: param_groups[{i}]: {bad[0]}: must be like "
                             f"{w[bad[0]]!r}; got {g[bad[0]]!r}"[:300])  # fmt: skip
    state = sd["state"]
    if not isinstance(state, dict):
        raise ValueError(f"{where}: state: must be a dict")
    for i, s in state.items():
        if type(i) is not int or not 0 <= i < len(params) or not isinstance(s, dict):
            raise ValueError(f"{where}: state: {i!r}: not a parameter's state")
        for name, v in s.items():
            shape = () if name == "step" else tuple(params[i].shape)
            if not (isinstance(v, torch.Tensor) and v.is_floating_point()
                    and tuple(v.shape) == shape):  # fmt: skip
                raise ValueError(f"{where}: state: {i}: {name}: must be a float tensor of shape "
                                 f"{shape}; got {_tensor_text(v)}")  # fmt: skip


def load_model(path: Path, saved: dict, env: Any, kw: dict) -> Any:
    """A PPO model built as a new run builds it (``kw``, over which the checkpoint's
    :data:`SETTINGS`), with the checkpoint's weights, optimiser state and counters
    (``saved``: :func:`read_checkpoint`); its last observation is ``None``
    (:func:`quadsim.app.rl.resume.restore_model` puts it back).

    Raises:
        ValueError: ``FILE: MEMBER: KEY: ...`` for weights or an optimiser state that do not fit
            the model.
    """  # noqa: D205
    from stable_baselines3 import PPO

    model = PPO("MlpPolicy", env, **{**kw, **saved["settings"]})
    policy = model.policy
    want = policy.state_dict()
    _check_policy(saved["policy"], want, f"{path}: policy.pth")
    _check_optimizer(saved["optimizer"], policy.optimizer, f"{path}: policy.optimizer.pth")
    try:
        policy.load_state_dict(saved["policy"], strict=True)
        policy.optimizer.load_state_dict(saved["optimizer"])
    except (RuntimeError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path}: the weights do not fit the model ({type(e).__name__}: "
                         f"{str(e)[:200]})") from None  # fmt: skip
    for key, value in saved["counters"].items():
        setattr(model, key, value)
    return model
