r"""``quadsim train ENV_ID``: PPO (Stable-Baselines3) on a quadsim vector environment.

``quadsim train ENV_ID [--algo ppo] [--seconds S | --steps N] [--seed K] [--out DIR] [--envs
M] [--action-level LEVEL] [--wind W] [--turbulence T] [--latency S] [--obs-noise P,V,R,W]
[--gyro IMU] [--observe-integral] [--threads N]`` trains on ``M`` environments batched in one
simulator (default 256, Recover-v0 1024; the compiled env step), in a mean wind up to ``W`` m/s,
Dryden gusts, an action latency and sensor noise when asked (domain randomisation:
:mod:`quadsim.app.envs.disturbances`; evaluation is in still air unless ``quadsim eval`` is told
otherwise), and writes to ``DIR`` (default ``runs/train_<env>``):

* ``progress.csv``: one row per PPO iteration: ``wall_s``, ``steps``, ``episodes``,
  ``success_rate`` (of the last 1,000 training episodes, :func:`quadsim.app.rl.evaluate.success`),
  ``mean_return``, ``mean_length``; TensorBoard logs under ``tb/`` when ``tensorboard`` is
  installed;
* ``checkpoint.zip`` (Stable-Baselines3's model, with its optimiser, and the state that makes a
  resumed run continue bit for bit) and ``state.json`` (steps, wall time so far), both rewritten
  after every iteration, whole or not at all: the same command again **resumes**
  (``--seconds`` and ``--steps`` are totals over the runs), reading the checkpoint without
  unpickling anything (:mod:`quadsim.app.rl.checkpoint`: a crafted one is refused, exit 2, and
  runs no code);
* ``policy.npz``: the policy as a plain MLP (:mod:`quadsim.app.rl.policy`) for ``quadsim eval``
  and ``quadsim fly`` (no RL library needed to run it).

**Defaults** (measured on Hover-v0, docs/rl.md): 256 environments (Recover-v0: 1024,
:data:`NUM_ENVS`), episodes of 200 control steps
(2 s; ``--episode-steps``; Recover-v0: 300, :data:`EPISODE_STEPS`) for training, PPO with
rollouts of 64 steps per environment, 4 minibatches, 5 epochs, learning rate 1e-3, γ = 0.98,
λ = 0.95, no entropy bonus (Recover-v0: 0.005 and γ = 0.99, :data:`PPO_DEFAULTS`), a 64-64 tanh
MLP; PyTorch on two threads (``--threads``, :data:`TORCH_THREADS`; at most the machine's cores).

The output folder is held for the run (:func:`quadsim.app.io.outdir.claim`: a second command into
it exits 2 naming the holder). SIGINT, SIGTERM and SIGHUP stop training at the end of the
iteration in progress, after its checkpoint; the same command resumes bit for bit
(:mod:`quadsim.app.rl.resume`). A batch that does not fit in the available memory is refused
before anything is allocated (:mod:`quadsim.app.rl.budget`).
"""

from __future__ import annotations

import csv
import json
import math
import os
import signal
import time
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np

from ..io.files import atomic_write, naming
from ..io.outdir import claim
from ..signals import stop_flag
from .budget import check_resources, idle_cores
from .checkpoint import load_model, read_checkpoint
from .evaluate import cli_disturbances, make_vector_env, success
from .policy import OBSERVATION_OPTIONS, load_policy, save_policy
from .resume import (
    PROGRESS_HEADER,
    read_resume,
    read_state,
    reconcile_progress,
    restore,
    restore_model,
    save_checkpoint,
    write_state,
)

__all__ = ["ALGOS", "export_policy", "main", "make_sb3_env", "train"]

ALGOS = ("ppo",)

NUM_ENVS = {"quadsim/Recover-v0": 1024}
"""Environments in the batch per environment id (default 256): Recover learns its rare hard
throws better from a larger batch (docs/rl.md; 300-s runs on two threads: 91.6 % instead of
90.8 % of the throws in still air; trained in wind and flown in moderate turbulence, 87.8 %
instead of 85.4 %, the mean of two training seeds and three draws of throws each)."""

EPISODE_STEPS = {"quadsim/Recover-v0": 300}
"""Training episode length [control steps] per environment (default 200): a throw needs about
2.5 s to recover (measured, docs/rl.md)."""

TORCH_THREADS = 2
"""PyTorch threads for the PPO update and the policy's forward passes (``--threads``; at most the
cores). Measured on Recover-v0's 512 environments on the 2-core machine: 293 ms per PPO
iteration with 2 threads against 427 ms with 1 (the update's 8,192-sample minibatches split
well; docs/rl.md). The same seed and thread count give the same run."""

def auto_threads() -> tuple[int, str | None]:
    """``(threads, what to say)``: :data:`TORCH_THREADS`, at most the cores that other processes
    leave idle now (at least one): two PyTorch threads beside a busy process ran 35-80x slower
    than one (issue 40), so a busy machine costs at most the share it takes. Chosen once, when
    the model is made (the same thread count keeps a run reproducible); ``--threads`` overrides
    it. The line to say is ``None`` unless fewer than the default were taken."""  # noqa: D205, D209
    cores = os.cpu_count() or 1
    idle = idle_cores()
    free = cores if idle is None else int(idle + 0.5)
    n = max(1, min(TORCH_THREADS, cores, free))
    if n >= min(TORCH_THREADS, cores):
        return n, None
    return n, (f"PyTorch on {n} thread{'s' * (n > 1)}: other processes keep {cores - free} of "
               f"the {cores} cores busy (--threads N to choose)")  # fmt: skip


PPO_DEFAULTS = {"quadsim/Recover-v0": {"ent_coef": 0.005, "gamma": 0.99}}
"""PPO settings per environment over the common defaults (docs/rl.md): Recover's policy collapses
its exploration noise on a plateau without an entropy bonus (0.005: 68 % instead of 63 %), and
plans over about 1 s (γ = 0.99: 83 % instead of 78 % with the rotor observer; 0.995: 58 %)."""


def _vec_env_base() -> type:
    from stable_baselines3.common.vec_env import VecEnv

    return VecEnv


def make_sb3_env(venv: Any, seed: int) -> Any:
    """A quadsim vector environment (``SAME_STEP`` autoreset) as a Stable-Baselines3 ``VecEnv``:
    ``terminal_observation`` and ``TimeLimit.truncated`` in the infos, returns and lengths in
    ``info["episode"]``, and ``outcomes`` (the success of each finished episode)."""  # noqa: D205, D209
    base = _vec_env_base()

    class _Env(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            self.venv = venv  # before VecEnv.__init__, which asks get_attr("render_mode")
            super().__init__(venv.num_envs, venv.single_observation_space, venv.single_action_space)
            self.venv = venv
            self.ret = np.zeros(venv.num_envs)
            self.len = np.zeros(venv.num_envs, dtype=np.int64)
            self.outcomes: deque = deque(maxlen=1000)
            self.returns: deque = deque(maxlen=1000)
            self.lengths: deque = deque(maxlen=1000)
            self.episodes = 0
            self._seed = seed
            self.t0 = time.perf_counter()

        def reset(self) -> np.ndarray:
            obs, _ = self.venv.reset(seed=self._seed)
            self.ret[:] = 0.0
            self.len[:] = 0
            return obs

        def step_async(self, actions: np.ndarray) -> None:
            self._actions = actions

        def step_wait(self) -> tuple:
            obs, r, term, trunc, info = self.venv.step(np.asarray(self._actions, np.float32))
            done = term | trunc
            self.ret += r
            self.len += 1
            infos: list[dict] = [{} for _ in range(self.num_envs)]
            idx = np.flatnonzero(done)
            if idx.size:
                final = np.stack([info["final_obs"][i] for i in idx])
                ok = success(final, term[idx], trunc[idx])
                for j, i in enumerate(idx):
                    infos[i]["terminal_observation"] = final[j]
                    infos[i]["TimeLimit.truncated"] = bool(trunc[i] and not term[i])
                    infos[i]["episode"] = {
                        "r": float(self.ret[i]),
                        "l": int(self.len[i]),
                        "t": time.perf_counter() - self.t0,
                    }
                    self.outcomes.append(bool(ok[j]))
                    self.returns.append(float(self.ret[i]))
                    self.lengths.append(int(self.len[i]))
                self.episodes += idx.size
                self.ret[idx] = 0.0
                self.len[idx] = 0
            return obs, r.astype(np.float32), done, infos

        def close(self) -> None:
            self.venv.close()

        def get_attr(self, name: str, indices: Any = None) -> list:
            return [getattr(self.venv, name, None)] * self.venv.num_envs

        def set_attr(self, name: str, value: Any, indices: Any = None) -> None:
            return None

        def env_method(self, name: str, *args: Any, indices: Any = None, **kw: Any) -> list:
            return [None] * self.num_envs

        def env_is_wrapped(self, wrapper_class: Any, indices: Any = None) -> list:
            return [False] * self.num_envs

        def seed(self, seed: int | None = None) -> list:
            self._seed = seed
            return [None] * self.num_envs

        def get_state(self) -> dict:
            return {"ret": self.ret.copy(), "len": self.len.copy(),
                    "outcomes": np.array(self.outcomes, bool),
                    "returns": np.array(self.returns, np.float64),
                    "lengths": np.array(self.lengths, np.int64), "episodes": int(self.episodes)}

        def set_state(self, s: dict) -> None:
            if np.shape(s["ret"]) != self.ret.shape or np.shape(s["len"]) != self.len.shape:
                raise ValueError(f"training state: {np.shape(s['ret'])[0]} environments; "
                                 f"these are {self.num_envs}")  # fmt: skip
            self.ret[:], self.len[:] = s["ret"], s["len"]
            for name in ("outcomes", "returns", "lengths"):
                setattr(self, name, deque(np.asarray(s[name]).tolist(), maxlen=1000))
            self.episodes = int(s["episodes"])

    return _Env()


def _sb3_logger(out_dir: Path) -> Any:
    """Stable-Baselines3's logger, set once: TensorBoard under ``out_dir/tb`` when installed,
    else nothing (left to itself, every ``learn`` call would make a new ``SB3-<time>`` folder in
    the temporary directory)."""  # noqa: D205, D209
    from stable_baselines3.common.logger import Logger, configure

    try:
        import tensorboard  # noqa: F401
    except ImportError:
        return Logger(folder=None, output_formats=[])
    return configure(str(out_dir / "tb"), ["tensorboard"])


def export_policy(model: Any, path: Path, meta: dict) -> Path:
    """Write the PPO policy's deterministic MLP as a policy file (:mod:`quadsim.app.rl.policy`)."""
    import torch

    pol = model.policy
    layers = [m for m in pol.mlp_extractor.policy_net if isinstance(m, torch.nn.Linear)]
    acts = [m for m in pol.mlp_extractor.policy_net if not isinstance(m, torch.nn.Linear)]
    if not all(isinstance(a, torch.nn.Tanh) for a in acts) or len(acts) != len(layers):
        raise ValueError("only tanh MLP policies can be exported")
    weights = [
        (m.weight.detach().cpu().numpy(), m.bias.detach().cpu().numpy())
        for m in [*layers, pol.action_net]
    ]
    return save_policy(path, weights, meta)


N_STEPS = 64
"""Rollout steps per environment in a PPO iteration."""


def _check_args(algo: str, seconds: Any, steps: Any, seed: Any, num_envs: Any, threads: Any,
                episode_steps: Any) -> None:  # fmt: skip
    def is_int(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    if algo not in ALGOS:
        raise ValueError(f"unknown algorithm {algo!r}; available: {list(ALGOS)}")
    if (seconds is None) == (steps is None):
        raise ValueError("give one of --seconds and --steps")
    if seconds is not None and not (isinstance(seconds, int | float) and math.isfinite(seconds)
                                    and seconds > 0):  # fmt: skip
        raise ValueError(f"--seconds must be positive; got {seconds!r}")
    if steps is not None and not (is_int(steps) and steps >= 1):
        raise ValueError(f"--steps must be a positive integer; got {steps!r}")
    if not (is_int(seed) and 0 <= seed < 2**32):
        raise ValueError(f"--seed must be an integer in 0..2^32-1; got {seed!r}")
    if num_envs is not None and not (is_int(num_envs) and num_envs >= 4):
        raise ValueError(f"--envs must be an integer >= 4; got {num_envs!r}")
    if threads is not None and not (is_int(threads) and threads >= 1):
        raise ValueError(f"--threads must be a positive integer; got {threads!r}")
    if episode_steps is not None and not (is_int(episode_steps) and episode_steps >= 1):
        raise ValueError(f"--episode-steps must be a positive integer; got {episode_steps!r}")


def _probe(env_id: str, action_level: str, episode_steps: int, env_options: dict) -> tuple:
    """``(obs_dim, act_dim)`` of the training environments, from one on the reference path: the
    id, the level and the options are checked before anything is written or allocated."""  # noqa: D205, D209
    opts = {**env_options, "backend": "numpy", "compiled": False}
    probe = make_vector_env(env_id, 1, max_episode_steps=episode_steps,
                            action_level=action_level, **opts)  # fmt: skip
    try:
        return int(probe.single_observation_space.shape[0]), int(probe.single_action_space.shape[0])
    finally:
        probe.close()


def train(env_id: str, out: str | os.PathLike[str], *, algo: str = "ppo",
          seconds: float | None = None, steps: int | None = None, seed: int = 0,
          num_envs: int | None = None, action_level: str = "rotor_speeds",
          episode_steps: int | None = None, threads: int | None = None,
          progress: bool = True, log: Any = None, ppo: dict | None = None,
          env_options: dict | None = None) -> dict:  # fmt: skip
    """Train (or resume) and return ``{"steps", "wall_s", "episodes", "success_rate", ...}``.

    ``env_options``: more options of the training environments (``disturbances``,
    ``observe_integral``; ``--wind``, ``--turbulence``, ``--observe-integral``). The output
    folder is held for the run (:func:`quadsim.app.io.outdir.claim`); SIGINT, SIGTERM and SIGHUP
    stop it after the iteration in progress and its checkpoint (``"signal"`` in the result).

    Raises:
        ValueError: An unknown env or algorithm, a bad budget, a directory holding another run
            or held by another process, a batch that does not fit in memory, a damaged
            ``state.json`` or checkpoint (naming the file and key).
        OSError: A file that cannot be written, naming it, with a note of what is kept.
    """
    import contextlib

    _check_args(algo, seconds, steps, seed, num_envs, threads, episode_steps)
    if episode_steps is None:
        episode_steps = EPISODE_STEPS.get(env_id, 200)
    env_options = dict(env_options or {})
    dims = _probe(env_id, action_level, episode_steps, env_options)
    out_dir = Path(out)
    created = not out_dir.exists()
    run = {"env_id": env_id, "algo": algo, "seed": seed, "num_envs": num_envs,
           "action_level": action_level, "episode_steps": episode_steps,
           "env_options": env_options, "obs_dim": dims[0]}  # fmt: skip
    try:
        with claim(out_dir):
            return _train_locked(out_dir, run, dims, seconds, steps, threads, progress, log, ppo)
    except ValueError:
        if created:  # a refusal leaves no empty folder behind
            with contextlib.suppress(OSError):
                out_dir.rmdir()
        raise


def _previous(out_dir: Path) -> tuple[dict | None, dict | None, int | None, dict | None]:
    """``(state, resume, steps in state.json, model)`` of the run in ``out_dir`` (``state``
    ``None``: none to resume): the state from the checkpoint (the commit point,
    :mod:`quadsim.app.rl.resume`), ``state.json`` checked, and what the model takes from the
    checkpoint (:func:`quadsim.app.rl.checkpoint.read_checkpoint`), all read and checked before
    anything is built."""  # noqa: D205, D209
    state_path, ckpt = out_dir / "state.json", out_dir / "checkpoint.zip"
    if not ckpt.exists():
        return None, None, None, None
    resume = read_resume(ckpt)
    old = read_state(state_path) if state_path.exists() else None
    on_file = None if old is None else old["steps"]
    state = dict(resume["state"]) if resume is not None else old
    saved = read_checkpoint(ckpt) if state is not None and state["steps"] else None
    return state, resume, on_file, saved


def _settle(out_dir: Path, model: Any, state: dict, meta: dict, resume: dict | None,
            on_file: int | None) -> None:  # fmt: skip
    """Bring ``state.json``, ``policy.npz`` and ``progress.csv`` up to a resumed checkpoint (a
    run stopped between its writes), writing only what lags behind."""  # noqa: D205, D209
    try:
        if on_file != state["steps"] or not (out_dir / "policy.npz").is_file():
            write_state(out_dir / "state.json", state)
            export_policy(model, out_dir / "policy.npz", meta)
        reconcile_progress(out_dir / "progress.csv", state["steps"],
                           resume["row"] if resume else None)  # fmt: skip
    except OSError as e:
        e.add_note(_kept(out_dir, state["steps"]))
        raise


def _check_same_run(out_dir: Path, old: dict, config: dict) -> None:
    old.setdefault("env_options", {})  # a run from before the option
    if "obs_dim" not in old:  # a run from before the observation options: its policy's
        try:
            old["obs_dim"] = load_policy(out_dir / "policy.npz").obs_dim
        except ValueError:
            old["obs_dim"] = None
    now = json.loads(json.dumps(config))  # as state.json holds it (tuples as lists)
    differ = [k for k in now if old.get(k) != now[k]]
    if differ:
        what = "; ".join(f"{k} {old.get(k)!r} there, {now[k]!r} here" for k in differ)
        raise ValueError(f"{out_dir} holds another training run ({what}); choose another "
                         "--out")  # fmt: skip


def _train_locked(out_dir: Path, run: dict, dims: tuple, seconds: float | None,
                  steps: int | None, threads: int | None, progress: bool, log: Any,
                  ppo: dict | None) -> dict:  # fmt: skip
    """:func:`train` in its claimed folder."""
    env_id = run["env_id"]
    old, resume, on_file, saved = _previous(out_dir)
    if run["num_envs"] is None:  # a run being resumed keeps its batch size (the default may change)
        run["num_envs"] = (old or {}).get("num_envs") or NUM_ENVS.get(env_id, 256)
    check_resources(run["num_envs"], *dims, N_STEPS, log)
    if old is not None:
        _check_same_run(out_dir, old, run)
    state = old if old is not None else {"steps": 0, "wall_s": 0.0, "episodes": 0, **run}
    venv = make_vector_env(env_id, run["num_envs"], max_episode_steps=run["episode_steps"],
                           action_level=run["action_level"], **run["env_options"])  # fmt: skip
    env = make_sb3_env(venv, run["seed"])
    try:
        model = _model(out_dir, env, state, (resume, saved), run, threads, ppo, log)

        meta = {"env_id": env_id, "action_level": run["action_level"], "obs_dim": dims[0],
                "act_dim": dims[1], "algo": run["algo"], "seed": run["seed"],
                **{k: bool(getattr(venv.core, k)) for k in OBSERVATION_OPTIONS},
                "physics_dt": float(venv.core.dt), "trained_with": run["env_options"]}  # fmt: skip
        if state["steps"]:
            _settle(out_dir, model, state, meta, resume, on_file)
        if resume is not None:
            try:
                restore(resume, env)  # last: loading the model reseeded the generators
            except ValueError as e:  # e.g. no C compiler now: the other path's state
                model._last_obs = None  # the next iteration starts new episodes
                if log:
                    log(f"{out_dir / 'checkpoint.zip'}: {e}: the run goes on from new episodes, "
                        "not bit for bit as an unstopped run")  # fmt: skip
        return _loop(model, env, out_dir, state, meta, seconds, steps, progress)
    finally:
        env.close()


def _model(out_dir: Path, env: Any, state: dict, previous: tuple, run: dict,
           threads: int | None, ppo: dict | None, log: Any) -> Any:  # fmt: skip
    """A new PPO model, or the checkpoint's (``previous``: its resume state and what the model
    takes from it, :func:`_previous`; with its last observation: no reset), on ``threads``
    PyTorch threads (``None``: the count a resumed run chose, else :func:`auto_threads`, said
    once the model is made; kept in the state)."""  # noqa: D205, D209
    import torch
    from stable_baselines3 import PPO

    if threads is None and state.get("threads"):  # a resumed run keeps the count it chose
        threads = int(state["threads"])
    threads, said = (threads, None) if threads is not None else auto_threads()
    state["threads"] = threads
    torch.set_num_threads(threads)
    num_envs, env_id = run["num_envs"], run["env_id"]
    kw = {
        "n_steps": N_STEPS,
        "batch_size": num_envs * N_STEPS // 4,
        "n_epochs": 5,
        "learning_rate": 1e-3,
        "gamma": 0.98,
        "gae_lambda": 0.95,
        "ent_coef": 0.0,
        "policy_kwargs": {"net_arch": [64, 64]},
        "seed": run["seed"],
        "verbose": 0,
        **PPO_DEFAULTS.get(env_id, {}),
        **(ppo or {}),
    }
    if not state["steps"]:
        model = PPO("MlpPolicy", env, **kw)
    else:  # built as new, then the checkpoint's weights: nothing in it is unpickled
        ckpt, (resume, saved) = out_dir / "checkpoint.zip", previous
        model = load_model(ckpt, saved, env, kw)
        last = resume is not None and restore_model(resume, model, ckpt)
        state["steps"] = int(model.num_timesteps)
        env.episodes = int(state["episodes"])
        if log:
            log(f"resuming at {state['steps']} steps ({state['wall_s']:.1f} s trained)")
            if not last:
                log(f"the checkpoint holds no {'last observation' if resume else 'environment'}"
                    " state (an older quadsim): the run goes on from new episodes, not bit for "
                    "bit as an unstopped run")  # fmt: skip
    if said and log:
        log(said)
    model.set_logger(_sb3_logger(out_dir))
    return model


def _kept(out_dir: Path, steps: int) -> str:
    if steps:
        return (f"kept: {out_dir / 'checkpoint.zip'}, the last complete checkpoint ({steps} "
                "steps), and the state.json, policy.npz and progress.csv that go with it; the "
                "same command resumes from it")  # fmt: skip
    return f"kept: nothing yet in {out_dir} (no iteration was saved); the same command starts again"


def _commit(out_dir: Path, model: Any, env: Any, state: dict, row: list, meta: dict,
            fh: Any, done: int) -> None:  # fmt: skip
    """Write one iteration: the checkpoint (the commit point), then policy.npz, state.json and
    the progress row (:mod:`quadsim.app.rl.resume`); a disk error says what is kept."""  # noqa: D205, D209
    try:
        save_checkpoint(out_dir / "checkpoint.zip", model, env, state, row)
    except OSError as e:
        e.add_note(_kept(out_dir, done))
        raise
    try:
        export_policy(model, out_dir / "policy.npz", meta)
        write_state(out_dir / "state.json", state)
        with naming(out_dir / "progress.csv"):
            csv.writer(fh).writerow(row)
            fh.flush()
    except OSError as e:
        e.add_note(f"kept: {out_dir / 'checkpoint.zip'}, complete at {state['steps']} steps; the "
                   "same command resumes from it and brings state.json, policy.npz and "
                   "progress.csv up to it")  # fmt: skip
        raise


def _loop(model: Any, env: Any, out_dir: Path, state: dict, meta: dict, seconds: float | None,
          total: int | None, progress: bool) -> dict:  # fmt: skip
    """PPO iterations until the budget is spent or a stop signal came; the final state."""
    csv_path = out_dir / "progress.csv"
    if not state["steps"]:

        def header(tmp: Path) -> None:
            with open(tmp, "w", newline="", encoding="utf-8") as fh:
                csv.writer(fh).writerow(PROGRESS_HEADER)

        try:
            atomic_write(csv_path, header)
        except OSError as e:
            e.add_note(_kept(out_dir, 0))
            raise
    per_iter = env.num_envs * N_STEPS
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=total or float(seconds), initial=min(state["steps"], total) if total
                   else min(state["wall_s"], float(seconds)), unit="step" if total else "s",
                   desc=f"training {meta['env_id']}", leave=False, dynamic_ncols=True)  # fmt: skip
    fh = open(csv_path, "a", newline="", encoding="utf-8")
    try:
        with stop_flag() as stop:
            while not stop:
                if total is not None and state["steps"] >= total:
                    break
                if seconds is not None and state["wall_s"] >= seconds:
                    break
                t0 = time.perf_counter()
                model.learn(per_iter, reset_num_timesteps=False, tb_log_name="ppo")
                dt = time.perf_counter() - t0
                done = state["steps"]
                state["steps"] = int(model.num_timesteps)
                state["wall_s"] += dt
                state["episodes"] = int(env.episodes)
                rate = float(np.mean(env.outcomes)) if env.outcomes else 0.0
                state["success_rate"] = rate
                row = [f"{state['wall_s']:.3f}", state["steps"], state["episodes"], f"{rate:.4f}",
                       f"{np.mean(env.returns) if env.returns else 0:.3f}",
                       f"{np.mean(env.lengths) if env.lengths else 0:.1f}"]  # fmt: skip
                _commit(out_dir, model, env, state, row, meta, fh, done)
                if bar is not None:
                    bar.update(per_iter if total else min(dt, max(bar.total - bar.n, 0.0)))
                    bar.set_postfix(success=f"{rate:.2f}")
        state["signal"] = stop.signum
    finally:
        fh.close()
        if bar is not None:
            bar.close()
    return state

def _env_options(args: Any) -> dict:
    opts = cli_disturbances(args)
    if args.observe_integral:
        opts["observe_integral"] = True
    return opts


def main(args: Any) -> int:
    """``quadsim train ...`` (parsed by :mod:`quadsim.app.cli`)."""
    import sys

    env_id = args.env_id
    out = args.out or str(Path("runs") / f"train_{env_id.split('/')[-1].split('-')[0].lower()}")
    res = train(env_id, out, algo=args.algo, seconds=args.seconds, steps=args.steps,
                seed=args.seed, num_envs=args.envs, action_level=args.action_level,
                episode_steps=args.episode_steps, threads=args.threads, progress=not args.quiet,
                env_options=_env_options(args),
                log=lambda s: print(f"quadsim train: {s}", file=sys.stderr))  # fmt: skip
    if not args.quiet:
        print(
            f"{env_id}: {res['steps']} steps in {res['wall_s']:.1f} s of training, "
            f"{res['episodes']} episodes, training success {100 * res.get('success_rate', 0):.1f}"
            f" % (last 1000 episodes); wrote {out}/policy.npz"
        )
    if res["signal"] is not None:
        print(
            f"quadsim: training interrupted ({signal.Signals(res['signal']).name}); the same "
            "command resumes",
            file=sys.stderr,
        )
        return 128 + res["signal"]
    return 0
