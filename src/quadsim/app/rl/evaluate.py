r"""``quadsim eval POLICY``: success, recovery time, crashes and final error of a policy file.

``N`` episodes (``--episodes``, default 1000) of the environment (``--env``, default the
policy's), all at once in one vector environment, the policy deterministic
(:class:`~quadsim.app.rl.policy.MlpPolicy`, no RL library). Per episode, with ``e(t) = ‖p -
p_ref‖``:

* **success**: the episode reaches its time limit without terminating (crash, divergence, out
  of bounds, tilt) and ends within :data:`SUCCESS_RADIUS` of the target;
* **recovery time**: the first time from which ``e`` stays below :data:`SUCCESS_RADIUS` to the
  end (successful episodes);
* **crash**: terminated by the world (floor, wall, box); ``terminated_rate`` counts every
  termination;
* **final position error**: ``e`` at the episode's last step.

JSON (``--json FILE``, strict: ``null`` for a value that does not exist, written whole):
``env_id``, ``action_level``, ``episodes``, ``success_rate``, ``crash_rate``,
``terminated_rate``, ``mean_recovery_time_s``, ``median_recovery_time_s``,
``mean_final_pos_error_m``, ``episode_s``, ``seed``, ``disturbances``. The exit code is 1, with
a line saying so, when no episode succeeded. The environment must observe what the policy was
trained on (:func:`policy_env`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from ..io.files import atomic_write
from ..io.strict_json import strict_dumps
from .policy import OBSERVATION_OPTIONS, load_policy, observation_options

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
    cls = getattr(importlib.import_module(module), name)
    steps = MAX_EPISODE_STEPS if max_episode_steps is None else max_episode_steps
    return cls(num_envs, autoreset_mode=AutoresetMode(autoreset), max_episode_steps=steps, **kwargs)


def success(final_obs: np.ndarray, terminated: Any, truncated: Any) -> np.ndarray:
    """Whether finished episodes succeeded: time limit, not terminated, within the radius."""
    err = np.linalg.norm(np.asarray(final_obs)[..., :3], axis=-1)
    return np.asarray(truncated, bool) & ~np.asarray(terminated, bool) & (err < SUCCESS_RADIUS)


def disturbance_options(wind: float = 0.0, turbulence: str | None = None, latency: float = 0.0,
                        obs_noise: Any = None, gyro: str | None = None) -> dict:  # fmt: skip
    """Environment options of ``--wind W --turbulence T --latency S --obs-noise P,V,R,W --gyro
    IMU`` (none when all are off): the fields of
    :class:`quadsim.app.envs.disturbances.Disturbances`,
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


def cli_disturbances(args: Any) -> dict:
    """:func:`disturbance_options` of ``quadsim train``'s or ``eval``'s arguments."""
    return disturbance_options(args.wind, args.turbulence, args.latency, args.obs_noise,
                               args.gyro)  # fmt: skip


def _options_text(opts: dict) -> str:
    on = [k for k, v in opts.items() if v]
    return ", ".join(on) if on else "none of the options"


def policy_env(policy: Any, env_id: str, num_envs: int, action_level: str | None = None,
               env_options: dict | None = None) -> Any:  # fmt: skip
    """The ``NextStep`` vector environment ``env_id`` that feeds ``policy`` what it was trained on.

    On the environment the policy file names (``meta["env_id"]``), the environment is built with
    the observation options the file records (:data:`~quadsim.app.rl.policy.OBSERVATION_OPTIONS`).
    On another one, it is built as that id defines it (plus ``observe_integral``, an option of
    any environment) and accepted only if its observation holds the same quantities in the same
    order (the same options and size) at the policy's action level.

    Raises:
        ValueError: ``POLICY: ...`` naming what differs (the options, the sizes, the level).
    """
    from ..envs.actions import ACTION_LEVELS

    where = getattr(policy, "path", "") or "the policy"
    own = policy.meta.get("action_level", "rotor_speeds")
    if own not in ACTION_LEVELS:
        raise ValueError(f"{where}: meta action_level must be one of {sorted(ACTION_LEVELS)}; "
                         f"got {own!r}")  # fmt: skip
    level = action_level or own
    if level != own:
        raise ValueError(f"{where}: a {own!r} policy; it cannot act at the {level!r} level")
    opts = observation_options(policy.meta)  # the observation it was trained on
    trained_on = policy.meta.get("env_id")
    other = trained_on is not None and trained_on != env_id
    build = {"observe_integral": opts["observe_integral"]} if other else opts
    env = make_vector_env(env_id, num_envs, autoreset="NextStep", action_level=level, **build,
                          **(env_options or {}))  # fmt: skip
    if other:
        has = {k: bool(getattr(env.core, k)) for k in OBSERVATION_OPTIONS}
        differ = [k for k in OBSERVATION_OPTIONS if has[k] != opts[k]]
        if differ:
            env.close()
            raise ValueError(
                f"{where}: a policy for {trained_on}, which observes with "
                f"{_options_text(opts)}; {env_id} observes with {_options_text(has)} (they "
                f"differ in {', '.join(differ)}): evaluate it on {trained_on} (leave out --env)"
            )
    try:
        policy.check(env.single_observation_space.shape[0], env.single_action_space.shape[0],
                     f"{where}: a policy for {trained_on or env_id} ({level}) on {env_id}")
    except ValueError:
        env.close()
        raise
    return env


def evaluate(policy: Any, env_id: str, episodes: int = 1000, seed: int = 0,
             action_level: str | None = None, env_options: dict | None = None) -> dict:  # fmt: skip
    """Fly ``episodes`` episodes with the policy; the metrics of the module docstring.

    ``env_options``: more options of the environment (e.g. :func:`disturbance_options`).

    Raises:
        ValueError: A bad count or seed, or an environment whose observation or action level is
            not the policy's (:func:`policy_env`).
    """
    if isinstance(episodes, bool) or not (isinstance(episodes, int) and episodes >= 1):
        raise ValueError(f"--episodes must be a positive integer; got {episodes!r}")
    if isinstance(seed, bool) or not (isinstance(seed, int) and seed >= 0):
        raise ValueError(f"--seed must be a non-negative integer; got {seed!r}")
    # each env flies one episode; what a finished env does afterwards is not looked at
    env = policy_env(policy, env_id, episodes, action_level, env_options)
    level = env.core.level.name
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
    [--turbulence T] [--latency S] [--obs-noise P,V,R,W] [--gyro IMU]``.

    Exit 0 when some episode succeeded, 1 (with a line saying so) when none did.
    """  # noqa: D205
    import sys

    from ..envs import ENV_IDS

    if isinstance(args.seed, int) and args.seed < 0:
        raise ValueError(f"--seed must be a non-negative integer; got {args.seed}")
    if args.json:
        parent = Path(args.json).parent
        if not parent.is_dir():
            raise ValueError(f"--json {args.json}: no such directory {str(parent)!r}")
    pol = load_policy(args.policy)
    env_id = args.env or pol.meta.get("env_id")
    if not env_id:
        raise ValueError(f"{args.policy}: the policy names no environment; give --env")
    if not args.env and env_id not in ENV_IDS:
        raise ValueError(f"{args.policy}: meta env_id {env_id!r} is not a known environment "
                         f"({', '.join(sorted(ENV_IDS))}); give --env")  # fmt: skip
    res = evaluate(pol, env_id, args.episodes, args.seed,
                   env_options=cli_disturbances(args))  # fmt: skip
    rec = res["mean_recovery_time_s"]
    rec_text = (f"recovery {rec:.2f} s (median {res['median_recovery_time_s']:.2f} s)"
                if math.isfinite(rec) else "no recovery time (no success)")  # fmt: skip
    print(
        f"{env_id} ({res['action_level']}), {res['episodes']} episodes of "
        f"{res['episode_s']:g} s: success {100 * res['success_rate']:.1f} %, crashes "
        f"{100 * res['crash_rate']:.1f} %, terminated {100 * res['terminated_rate']:.1f} %, "
        f"{rec_text}, final error {res['mean_final_pos_error_m']:.3f} m"
    )
    if args.json:
        text = strict_dumps(res, indent=2) + "\n"  # strict JSON: no NaN (null instead)
        atomic_write(Path(args.json), lambda p: p.write_text(text, encoding="utf-8"))
    if res["success_rate"] > 0:
        return 0
    print(f"quadsim: no episode succeeded (0 of {res['episodes']}); exit status 1",
          file=sys.stderr)  # fmt: skip
    return 1
