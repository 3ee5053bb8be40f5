r"""``quadsim eval POLICY``: success, recovery time, crashes and final error of a policy file.

``N`` episodes (``--episodes``, default 1000) of the environment (``--env``, default the
policy's), all at once in one vector environment, the policy deterministic
(:class:`~quadsim.rl.policy.MlpPolicy`, no RL library). Per episode, with ``e(t) = ‖p - p_ref‖``:

* **success**: the episode reaches its time limit without terminating (crash, divergence, out
  of bounds, tilt) and ends within :data:`SUCCESS_RADIUS` of the target;
* **recovery time**: the first time from which ``e`` stays below :data:`SUCCESS_RADIUS` to the
  end (successful episodes);
* **crash**: terminated by the world (floor, wall, box); ``terminated_rate`` counts every
  termination;
* **final position error**: ``e`` at the episode's last step.

JSON (``--json FILE``): ``env_id``, ``episodes``, ``success_rate``, ``crash_rate``,
``terminated_rate``, ``mean_recovery_time_s``, ``median_recovery_time_s``,
``mean_final_pos_error_m``, ``episode_s``, ``seed``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["SUCCESS_RADIUS", "evaluate", "main", "make_vector_env", "success"]

SUCCESS_RADIUS = 0.1
"""A hover is reached within this distance of the target [m]."""


def make_vector_env(env_id: str, num_envs: int, *, autoreset: str = "SameStep",
                    max_episode_steps: int | None = None, **kwargs: Any) -> Any:  # fmt: skip
    """A quadsim vector environment by id (``quadsim/Hover-v0``, ...).

    Raises:
        ValueError: An unknown id, naming the known ones.
    """
    import importlib

    from gymnasium.vector import AutoresetMode

    from ..envs import ENV_IDS, MAX_EPISODE_STEPS

    if env_id not in ENV_IDS:
        raise ValueError(f"unknown environment {env_id!r}; known: {sorted(ENV_IDS)}")
    module, _, name = ENV_IDS[env_id][1].rpartition(":")
    cls = getattr(importlib.import_module(module.replace("quadsim.envs", "quadsim.app.envs")), name)
    steps = MAX_EPISODE_STEPS if max_episode_steps is None else max_episode_steps
    return cls(num_envs, autoreset_mode=AutoresetMode(autoreset), max_episode_steps=steps, **kwargs)


def success(final_obs: np.ndarray, terminated: Any, truncated: Any) -> np.ndarray:
    """Whether finished episodes succeeded: time limit, not terminated, within the radius."""
    err = np.linalg.norm(np.asarray(final_obs)[..., :3], axis=-1)
    return np.asarray(truncated, bool) & ~np.asarray(terminated, bool) & (err < SUCCESS_RADIUS)


def disturbance_options(wind: float = 0.0, turbulence: str | None = None, latency: float = 0.0,
                        obs_noise: Any = None, gyro: str | None = None) -> dict:  # fmt: skip
    """Environment options of ``--wind W --turbulence T --latency S --obs-noise P,V,R,W --gyro
    IMU`` (none when all are off): the fields of :class:`quadsim.envs.disturbances.Disturbances`,
    the latency drawn in ``0..S`` s."""  # noqa: D205, D209
    d: dict = {}
    if wind:
        d["wind"] = float(wind)
    if turbulence not in (None, "none"):
        d["turbulence"] = turbulence
    if latency:
        d["latency"] = (0.0, float(latency))
    if obs_noise is not None and any(obs_noise):
        d["obs_noise"] = tuple(float(v) for v in obs_noise)
    if gyro is not None:
        d["gyro"] = gyro
    return {"disturbances": d} if d else {}


def _cli_disturbances(args: Any) -> dict:
    """:func:`disturbance_options` of ``quadsim train``'s or ``eval``'s arguments."""
    return disturbance_options(args.wind, args.turbulence, args.latency, args.obs_noise,
                               args.gyro)  # fmt: skip


def evaluate(policy: Any, env_id: str, episodes: int = 1000, seed: int = 0,
             action_level: str | None = None, env_options: dict | None = None) -> dict:  # fmt: skip
    """Fly ``episodes`` episodes with the policy; the metrics of the module docstring.

    ``env_options``: more options of the environment (e.g. :func:`disturbance_options`).
    """
    if not (isinstance(episodes, int) and episodes >= 1):
        raise ValueError(f"--episodes must be a positive integer; got {episodes!r}")
    level = action_level or policy.meta.get("action_level", "rotor_speeds")
    # each env flies one episode; what a finished env does afterwards is not looked at
    from .policy import observation_options

    opts = observation_options(policy.meta)  # the observation it was trained on
    env = make_vector_env(env_id, episodes, autoreset="NextStep", action_level=level, **opts,
                          **(env_options or {}))  # fmt: skip
    policy.check(
        env.single_observation_space.shape[0],
        env.single_action_space.shape[0],
        f"policy for {env_id} ({level})",
    )
    obs, _ = env.reset(seed=seed)
    n, steps = episodes, env.core.max_episode_steps
    dt = env.core.control_dt
    alive = np.ones(n, bool)
    term = np.zeros(n, bool)
    crashed = np.zeros(n, bool)
    last_out = np.zeros(n, int)  # last step with the error outside the radius
    err = np.linalg.norm(obs[:, :3], axis=1)
    final_err = err.copy()
    for k in range(1, steps + 1):
        obs, _, terminated, truncated, info = env.step(policy(obs).astype(np.float32))
        err = np.linalg.norm(obs[:, :3], axis=1)
        live = alive.copy()
        final_err[live] = err[live]
        last_out[live & (err >= SUCCESS_RADIUS)] = k
        ends = live & (terminated | truncated)
        term |= live & terminated
        crashed |= live & np.asarray(info.get("crashed", np.zeros(n)), bool)
        alive &= ~ends
        if not alive.any():
            break
    ok = ~term & (final_err < SUCCESS_RADIUS)
    rec = last_out[ok] * dt
    env.close()
    return {
        "env_id": env_id,
        "action_level": level,
        "episodes": n,
        "success_rate": float(ok.mean()),
        "crash_rate": float(crashed.mean()),
        "terminated_rate": float(term.mean()),
        "mean_recovery_time_s": float(rec.mean()) if rec.size else math.nan,
        "median_recovery_time_s": float(np.median(rec)) if rec.size else math.nan,
        "mean_final_pos_error_m": float(final_err.mean()),
        "episode_s": steps * dt,
        "seed": seed,
        "disturbances": (env_options or {}).get("disturbances"),
    }


def main(args: Any) -> int:
    """``quadsim eval POLICY [--env ID] [--episodes N] [--json FILE] [--seed K] [--wind W]
    [--turbulence T] [--latency S] [--obs-noise P,V,R,W] [--gyro IMU]``."""  # noqa: D205, D209
    from .policy import load_policy

    pol = load_policy(args.policy)
    env_id = args.env or pol.meta.get("env_id")
    if not env_id:
        raise ValueError(f"{args.policy}: the policy names no environment; give --env")
    res = evaluate(pol, env_id, args.episodes, args.seed,
                   env_options=_cli_disturbances(args))  # fmt: skip
    print(
        f"{env_id} ({res['action_level']}), {res['episodes']} episodes of "
        f"{res['episode_s']:g} s: success {100 * res['success_rate']:.1f} %, crashes "
        f"{100 * res['crash_rate']:.1f} %, terminated {100 * res['terminated_rate']:.1f} %, "
        f"recovery {res['mean_recovery_time_s']:.2f} s (median "
        f"{res['median_recovery_time_s']:.2f} s), final error "
        f"{res['mean_final_pos_error_m']:.3f} m"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2) + "\n", encoding="utf-8")
    return 0 if res["success_rate"] > 0 else 1
