"""Single-drone Gymnasium environments: :class:`HoverEnv` and :class:`TrackEnv`.

Both are thin shells around :class:`~quadsim.app.envs.core.QuadCore` with ``n = 1``; observation,
action, reward, termination and randomisation are defined there and in ``docs/envs.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from ...loop.initial import make_trajectory as make
from .core import QuadCore
from .starts import check_state, known_keys
from .tasks import HoverTask, TrackTask

__all__ = ["HoverEnv", "QuadsimEnv", "TrackEnv", "check_options", "make_trajectory", "spaces"]


def spaces(core: QuadCore) -> tuple[gym.spaces.Box, gym.spaces.Box]:
    """Single-environment ``(observation_space, action_space)`` of a core (float32 boxes).

    Observations are unbounded except the rotation-matrix entries and the last action, which
    lie in ``[-1, 1]``; actions lie in ``[-1, 1]``.
    """
    low = np.full(core.obs_dim, -np.inf, dtype=np.float32)
    high = np.full(core.obs_dim, np.inf, dtype=np.float32)
    bounded = slice(6, 15), slice(18, 18 + core.act_dim)
    for s in bounded:
        low[s], high[s] = -1.0, 1.0
    obs = gym.spaces.Box(low, high, dtype=np.float32)
    act = gym.spaces.Box(-1.0, 1.0, (core.act_dim,), dtype=np.float32)
    return obs, act


def check_options(options: Any, known: tuple[str, ...]) -> dict:
    """A reset's ``options`` as a dict (``None``: empty), if it is one with only ``known`` keys.

    Raises:
        TypeError: ``options`` is neither a dict nor ``None``.
        ValueError: An unknown key.
    """
    return known_keys(options, known, "reset: options", "reset: options", "a dict or None")


def make_trajectory(trajectory: str | Callable) -> Callable:
    """A trajectory callable from a name (``"circle"``, ``"lemniscate"``) or a callable.

    ``"circle"``: radius 1 m at 1 m/s around (0, 0, 1) m; ``"lemniscate"``: Gerono figure
    eight of half-width 1 m at a mean 1 m/s around (0, 0, 1) m.
    """
    if callable(trajectory):
        return trajectory

    if trajectory == "circle":
        return make("circle", radius=1.0, speed=1.0, center=(0.0, 0.0, 1.0))
    if trajectory == "lemniscate":
        return make("lemniscate", size=1.0, speed=1.0, center=(0.0, 0.0, 1.0))
    raise ValueError(
        f"trajectory must be 'circle', 'lemniscate' or a callable t -> Reference; got "
        f"{trajectory!r}"
    )


class CoreEnv:
    """What the single and the vectorised environments share: ``core``, their
    :class:`~quadsim.app.envs.core.QuadCore`, and its simulator."""  # noqa: D205, D209

    core: QuadCore

    @property
    def sim(self) -> Any:
        """The underlying :class:`~quadsim.engines.sim.Simulator` (one drone per environment)."""
        return self.core.sim


class QuadsimEnv(CoreEnv, gym.Env):
    """One drone on a task (:class:`~quadsim.app.envs.tasks.HoverTask` or ``TrackTask``).

    Args:
        task: The task.
        action_level: ``"rotor_speeds"``, ``"pwm"``, ``"thrust_rates"`` or ``"thrust_attitude"``.
        max_episode_steps: Internal truncation in control steps (``None``: none; the
            registered ids get a :class:`gymnasium.wrappers.TimeLimit` of 500 steps instead).
        render_mode: Only ``None`` (no rendering).
        **kwargs: Options of :class:`~quadsim.app.envs.core.QuadCore` (``drone``, ``dt``,
            ``sim_steps_per_action``, ``backend`` (default ``"auto"``), ``dtype``, ``world``,
            ``init``, ``termination``, ``reward``, ``action_options``, ``compiled``).
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 (gymnasium API)

    def __init__(
        self, task: Any, action_level: str = "rotor_speeds", *,
        max_episode_steps: int | None = None, render_mode: str | None = None, **kwargs: Any,
    ) -> None:  # fmt: skip
        if render_mode is not None:
            raise ValueError(f"render_mode must be None (no rendering); got {render_mode!r}")
        self.render_mode = None
        self.core = QuadCore(1, task, action_level=action_level,
                             max_episode_steps=max_episode_steps, **kwargs)  # fmt: skip
        self.observation_space, self.action_space = spaces(self.core)
        self.metadata = {"render_modes": [], "render_fps": 1.0 / self.core.control_dt}

    def reset(
        self, *, seed: int | None = None, options: dict | None = None
    ) -> tuple[np.ndarray, dict]:
        """Start an episode from a random initial state.

        Args:
            seed: Seed of :attr:`np_random` (the initial-state generator).
            options: Optional ``{"state": {"pos": ..., "attitude": ..., "vel": ...,
                "ang_vel": ...}}`` overriding the drawn initial state (any subset; finite, a
                unit quaternion, speed and body rate within the world's fault limits:
                :func:`~quadsim.app.envs.starts.check_state`).

        Raises:
            TypeError: ``options`` is not a dict (or ``None``), or its ``state`` is not one.
            ValueError: An unknown option, or a bad ``state``, naming its key.
        """
        state = check_options(options, ("state",)).get("state")
        check_state(state, 1, self.core.world, self.core.dtype)  # before anything is drawn
        super().reset(seed=seed)
        self.core.reset(np.ones(1, bool), self.np_random, full=True, state=state)
        return self.core.observe()[0], {"time": 0.0}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        """One control step; ``info`` has ``crashed``, ``fault``, ``out_of_bounds``, ``tilted``,
        ``pos_error`` [m] and ``time`` [s] (and ``sensors``: the sensor parts' readings).

        An action of another shape than the action space's ``(k,)`` (e.g. a batch ``(1, k)``)
        raises ``ValueError``; one that holds a NaN is a fault (docs/envs.md)."""  # noqa: D205, D209
        action = np.asarray(action)
        if action.shape != self.action_space.shape:
            raise ValueError(f"action must have shape {self.action_space.shape} (the action "
                             f"space's); got {action.shape}")  # fmt: skip
        obs, reward, term, trunc, info = self.core.step(action[None])
        info = {k: {n: _first(r) for n, r in v.items()} if k == "sensors" else v[0].item()
                for k, v in info.items()}  # fmt: skip
        return obs[0], float(reward[0]), bool(term[0]), bool(trunc[0]), info


def _first(v: np.ndarray) -> Any:
    """The first environment's entry of a per-environment array: a number, or an array."""
    return v[0].item() if np.ndim(v[0]) == 0 else np.array(v[0])


class HoverEnv(QuadsimEnv):
    """Hover at ``target`` (``quadsim/Hover-v0``).

    Args:
        target: World target position [m].
        action_level: See :class:`QuadsimEnv`.
        **kwargs: See :class:`QuadsimEnv`.
    """

    def __init__(
        self, target: Any = (0.0, 0.0, 1.0), action_level: str = "rotor_speeds", **kwargs: Any
    ) -> None:
        super().__init__(HoverTask(target), action_level, **kwargs)


class TrackEnv(QuadsimEnv):
    """Track a reference trajectory (``quadsim/Track-v0``).

    Args:
        trajectory: ``"circle"`` (default), ``"lemniscate"`` or a callable ``t -> Reference``
            (:mod:`quadsim.loop.trajectories`).
        future: Look-ahead times [s] of the reference points in the observation.
        action_level: See :class:`QuadsimEnv`.
        **kwargs: See :class:`QuadsimEnv`.
    """

    def __init__(
        self, trajectory: str | Callable = "circle", future: Any = (0.1, 0.25, 0.5),
        action_level: str = "rotor_speeds", **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(TrackTask(make_trajectory(trajectory), future), action_level, **kwargs)
