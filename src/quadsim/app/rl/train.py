r"""``quadsim train ENV_ID``: PPO (Stable-Baselines3) on a quadsim vector environment.

``quadsim train ENV_ID [--algo ppo] [--seconds S | --steps N] [--seed K] [--out DIR] [--envs
M] [--action-level LEVEL] [--wind W] [--turbulence T] [--latency S] [--obs-noise P,V,R,W]
[--gyro IMU] [--observe-integral] [--threads N]`` trains on ``M`` environments batched in one
simulator (default 256, Recover-v0 1024; the compiled env step), in a mean wind up to ``W`` m/s,
Dryden gusts, an action latency and sensor noise when asked (domain randomisation:
:mod:`quadsim.envs.disturbances`; evaluation is in still air unless ``quadsim eval`` is told
otherwise), and writes to ``DIR`` (default ``runs/train_<env>``):

* ``progress.csv``: one row per PPO iteration: ``wall_s``, ``steps``, ``episodes``,
  ``success_rate`` (of the last 1,000 training episodes, :func:`quadsim.rl.evaluate.success`),
  ``mean_return``, ``mean_length``; TensorBoard logs under ``tb/`` when ``tensorboard`` is
  installed;
* ``checkpoint.zip`` (Stable-Baselines3's model, with its optimiser) and ``state.json``
  (steps, wall time so far), both rewritten after every iteration, whole or not at all: the
  same command again **resumes** (``--seconds`` and ``--steps`` are totals over the runs);
* ``policy.npz``: the policy as a plain MLP (:mod:`quadsim.rl.policy`) for ``quadsim eval``
  and ``quadsim fly`` (no RL library needed to run it).

**Defaults** (measured on Hover-v0, docs/rl.md): 256 environments (Recover-v0: 1024,
:data:`NUM_ENVS`), episodes of 200 control steps
(2 s; ``--episode-steps``; Recover-v0: 300, :data:`EPISODE_STEPS`) for training, PPO with
rollouts of 64 steps per environment, 4 minibatches, 5 epochs, learning rate 1e-3, γ = 0.98,
λ = 0.95, no entropy bonus (Recover-v0: 0.005 and γ = 0.99, :data:`PPO_DEFAULTS`), a 64-64 tanh
MLP; PyTorch on two threads (``--threads``, :data:`TORCH_THREADS`; at most the machine's cores).

SIGINT and SIGTERM stop training at the end of the iteration in progress, after its
checkpoint.
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
    from .evaluate import success

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
    """Write the PPO policy's deterministic MLP as a policy file (:mod:`quadsim.rl.policy`)."""
    import torch

    from .policy import save_policy

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


def train(env_id: str, out: str | os.PathLike[str], *, algo: str = "ppo",
          seconds: float | None = None, steps: int | None = None, seed: int = 0,
          num_envs: int | None = None, action_level: str = "rotor_speeds",
          episode_steps: int | None = None, threads: int | None = None,
          progress: bool = True, log: Any = None, ppo: dict | None = None,
          env_options: dict | None = None) -> dict:  # fmt: skip
    """Train (or resume) and return ``{"steps", "wall_s", "episodes", "success_rate", ...}``.

    ``env_options``: more options of the training environments (``disturbances``,
    ``observe_integral``; ``--wind``, ``--turbulence``, ``--observe-integral``).

    Raises:
        ValueError: An unknown env or algorithm, a bad budget, a directory holding another run.
    """
    from ..io.files import atomic_write
    from .evaluate import make_vector_env

    if algo not in ALGOS:
        raise ValueError(f"unknown algorithm {algo!r}; available: {list(ALGOS)}")
    if (seconds is None) == (steps is None):
        raise ValueError("give one of --seconds and --steps")
    if seconds is not None and not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"--seconds must be positive; got {seconds!r}")
    if steps is not None and steps < 1:
        raise ValueError(f"--steps must be a positive integer; got {steps!r}")
    if episode_steps is None:
        episode_steps = EPISODE_STEPS.get(env_id, 200)
    out_dir = Path(out)
    state_path, ckpt = out_dir / "state.json", out_dir / "checkpoint.zip"
    old = json.loads(state_path.read_text()) if state_path.exists() and ckpt.exists() else None
    if num_envs is None:  # a run being resumed keeps its batch size (the default may change)
        num_envs = (old or {}).get("num_envs") or NUM_ENVS.get(env_id, 256)
    if not (isinstance(num_envs, int) and num_envs >= 4):
        raise ValueError(f"--envs must be an integer >= 4; got {num_envs!r}")
    if threads is None:
        threads = min(TORCH_THREADS, os.cpu_count() or 1)
    if not (isinstance(threads, int) and threads >= 1):
        raise ValueError(f"--threads must be a positive integer; got {threads!r}")
    env_options = dict(env_options or {})
    venv = make_vector_env(env_id, num_envs, max_episode_steps=episode_steps,
                           action_level=action_level, **env_options)  # fmt: skip
    out_dir.mkdir(parents=True, exist_ok=True)
    config = {"env_id": env_id, "algo": algo, "seed": seed, "num_envs": num_envs,
              "action_level": action_level, "episode_steps": episode_steps,
              "env_options": env_options,
              "obs_dim": int(venv.single_observation_space.shape[0])}  # fmt: skip
    state = {"steps": 0, "wall_s": 0.0, "episodes": 0, **config}
    if old is not None:
        old.setdefault("env_options", {})  # a run from before the option
        if "obs_dim" not in old:  # a run from before the observation options: its policy's
            from .policy import load_policy

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
        state = old
    import torch
    from stable_baselines3 import PPO

    from .policy import OBSERVATION_OPTIONS

    torch.set_num_threads(threads)
    env = make_sb3_env(venv, seed)
    n_steps = 64
    kw = {
        "n_steps": n_steps,
        "batch_size": num_envs * n_steps // 4,
        "n_epochs": 5,
        "learning_rate": 1e-3,
        "gamma": 0.98,
        "gae_lambda": 0.95,
        "ent_coef": 0.0,
        "policy_kwargs": {"net_arch": [64, 64]},
        "seed": seed,
        "verbose": 0,
        **PPO_DEFAULTS.get(env_id, {}),
        **(ppo or {}),
    }
    if state["steps"]:
        model = PPO.load(ckpt, env=env, **{k: kw[k] for k in ("seed",)})
        if log:
            log(f"resuming at {state['steps']} steps ({state['wall_s']:.1f} s trained)")
    else:
        model = PPO("MlpPolicy", env, **kw)
    model.set_logger(_sb3_logger(out_dir))
    meta = {
        "env_id": env_id,
        "action_level": action_level,
        "obs_dim": int(venv.single_observation_space.shape[0]),
        "act_dim": int(venv.single_action_space.shape[0]),
        "algo": algo,
        "seed": seed,
        **{k: bool(getattr(venv.core, k)) for k in OBSERVATION_OPTIONS},
        "physics_dt": float(venv.core.dt),
        "trained_with": env_options,
    }
    csv_path = out_dir / "progress.csv"
    new_csv = not csv_path.exists() or not state["steps"]
    fh = open(csv_path, "w" if new_csv else "a", newline="", encoding="utf-8")
    writer = csv.writer(fh)
    if new_csv:
        writer.writerow(
            ["wall_s", "steps", "episodes", "success_rate", "mean_return", "mean_length"]
        )
    per_iter = num_envs * n_steps
    total = steps if steps is not None else None
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=total or float(seconds), initial=min(state["steps"], total or 0) if
                   total else min(state["wall_s"], float(seconds)), unit="step" if total else "s",
                   desc=f"training {env_id}", leave=False, dynamic_ncols=True)  # fmt: skip
    stop = {"sig": None}

    def handler(signum: int, frame: Any) -> None:
        stop["sig"] = signum

    old_h = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    base_episodes = int(state["episodes"])
    try:
        while stop["sig"] is None:
            if total is not None and state["steps"] >= total:
                break
            if seconds is not None and state["wall_s"] >= seconds:
                break
            t0 = time.perf_counter()
            model.learn(per_iter, reset_num_timesteps=False, tb_log_name="ppo")
            dt = time.perf_counter() - t0
            state["steps"] = int(model.num_timesteps)
            state["wall_s"] += dt
            outs = env.outcomes
            state["episodes"] = base_episodes + env.episodes
            rate = float(np.mean(outs)) if outs else 0.0
            writer.writerow(
                [
                    f"{state['wall_s']:.3f}",
                    state["steps"],
                    state["episodes"],
                    f"{rate:.4f}",
                    f"{np.mean(env.returns) if env.returns else 0:.3f}",
                    f"{np.mean(env.lengths) if env.lengths else 0:.1f}",
                ]
            )
            fh.flush()
            atomic_write(ckpt, model.save)
            export_policy(model, out_dir / "policy.npz", meta)
            atomic_write(state_path, lambda p: p.write_text(json.dumps(state, indent=2) + "\n"))
            state["success_rate"] = rate
            if bar is not None:
                bar.update(per_iter if total else min(dt, max(bar.total - bar.n, 0.0)))
                bar.set_postfix(success=f"{rate:.2f}")
    finally:
        for s, h in old_h.items():
            signal.signal(s, h)
        fh.close()
        if bar is not None:
            bar.close()
        env.close()
    state["signal"] = stop["sig"]
    return state


def _env_options(args: Any) -> dict:
    from .evaluate import _cli_disturbances

    opts = _cli_disturbances(args)
    if args.observe_integral:
        opts["observe_integral"] = True
    return opts


def main(args: Any) -> int:
    """``quadsim train ...`` (parsed by :mod:`quadsim.cli`)."""
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
