r"""Vectorised environments over one batched simulator (:class:`QuadsimVectorEnv`).

``num_envs`` drones in one :class:`~quadsim.engines.sim.Simulator` (``backend="auto"``: the compiled
native backend, or NumPy with a warning when no C compiler is found). On the native backend one
:meth:`~QuadsimVectorEnv.step` is one call into compiled C (inner loops, plant, observation,
reward and flags of all environments, :mod:`quadsim.app.envs.compiled`); otherwise the action
levels are vectorised NumPy. Either way there is no per-environment Python loop.
Observation, action, reward and termination are those of the single environments
(:mod:`quadsim.app.envs.core`).

Autoreset (``metadata["autoreset_mode"]``, Gymnasium 1.x semantics):

* ``NEXT_STEP`` (default): an environment that terminated or truncated is reset by the next
  :meth:`step`, which ignores its action and returns its first observation with reward 0 and
  both flags false. Only the finished drones are reset (:meth:`Simulator.reset_drones`).
* ``SAME_STEP``: finished environments are reset within the step; the returned observation is
  the new episode's first one and ``info["final_obs"]`` (object array, ``info["_final_obs"]``
  mask) and ``info["final_info"]`` hold the last one.
* ``DISABLED``: reset finished environments with ``reset(options={"reset_mask": mask})``.

Randomisation: initial states per environment and episode (from :attr:`np_random`); with
``randomize_params={"mass": 0.1, ...}`` every environment gets its own model parameters, the
nominal value times a factor drawn uniformly in ``[1 - x, 1 + x]`` (one factor per environment
and parameter), drawn at every full :meth:`reset` (kept across autoresets).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from .core import QuadCore
from .single import CoreEnv, check_options, make_trajectory, spaces
from .snapshot import core_state, set_core_state
from .starts import check_state
from .tasks import HoverTask, TrackTask

__all__ = ["HoverVectorEnv", "QuadsimVectorEnv", "TrackVectorEnv"]

_INFO_KEYS = ("crashed", "fault", "out_of_bounds", "tilted", "pos_error", "time")


class QuadsimVectorEnv(CoreEnv, VectorEnv):
    """``num_envs`` drones on one task, stepped together.

    Args:
        task: :class:`~quadsim.app.envs.tasks.HoverTask` or ``TrackTask``.
        num_envs: Number of environments.
        action_level: ``"rotor_speeds"``, ``"pwm"``, ``"thrust_rates"`` or ``"thrust_attitude"``.
        max_episode_steps: Truncation in control steps (``None``: none).
        autoreset_mode: :class:`gymnasium.vector.AutoresetMode` (or its value string).
        randomize_params: Model parameter name -> relative half-width of its per-environment
            factor (e.g. ``{"mass": 0.1}`` for ±10 %).
        render_mode: Only ``None``.
        **kwargs: Options of :class:`~quadsim.app.envs.core.QuadCore` (``drone``, ``dt``,
            ``sim_steps_per_action``, ``backend``, ``dtype``, ``world``, ``init``,
            ``termination``, ``reward``, ``action_options``, ``compiled``).
    """

    metadata: dict[str, Any] = {  # noqa: RUF012 (gymnasium API)
        "render_modes": [],
        "autoreset_mode": AutoresetMode.NEXT_STEP,
    }

    def __init__(
        self, task: Any, num_envs: int = 1, action_level: str = "rotor_speeds", *,
        max_episode_steps: int | None = 500,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        randomize_params: dict[str, float] | None = None, render_mode: str | None = None,
        **kwargs: Any,
    ) -> None:  # fmt: skip
        if not (isinstance(num_envs, int) and num_envs >= 1):
            raise ValueError(f"num_envs must be a positive integer; got {num_envs!r}")
        if render_mode is not None:
            raise ValueError(f"render_mode must be None (no rendering); got {render_mode!r}")
        self.autoreset_mode = AutoresetMode(autoreset_mode)
        kwargs.setdefault("warn_fallback", True)
        self.core = QuadCore(num_envs, task, action_level=action_level,
                             max_episode_steps=max_episode_steps, **kwargs)  # fmt: skip
        self.randomize_params = dict(randomize_params or {})
        for name, width in self.randomize_params.items():
            self.core.nominal(name)  # validates the name
            if not (0.0 <= float(width) < 1.0):
                raise ValueError(
                    f"randomize_params[{name!r}] must be a relative half-width in [0, 1); "
                    f"got {width!r}"
                )
        self.num_envs = num_envs
        self.single_observation_space, self.single_action_space = spaces(self.core)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.metadata = {"render_modes": [], "autoreset_mode": self.autoreset_mode,
                         "render_fps": 1.0 / self.core.control_dt}  # fmt: skip
        self.render_mode = None
        self.param_values: dict[str, np.ndarray] = {}
        self._done = np.zeros(num_envs, bool)

    def reset(
        self, *, seed: int | None = None, options: dict | None = None
    ) -> tuple[np.ndarray, dict]:
        """Reset all environments (or, with ``options={"reset_mask": mask}``, those selected).

        Args:
            seed: Seed of :attr:`np_random`, which draws all initial states and parameters.
            options: ``reset_mask`` (bool ``(num_envs,)``): reset only these, keeping the
                simulator and parameters; ``state``: initial-state overrides as in
                :meth:`quadsim.app.envs.HoverEnv.reset` (one row, or one per environment
                reset).

        Raises:
            TypeError: ``options`` is not a dict (or ``None``), or its ``state`` is not one.
            ValueError: An unknown option, a bad ``reset_mask`` or ``state`` (naming its key).
        """
        options = check_options(options, ("reset_mask", "state"))
        mask = options.get("reset_mask")
        state = options.get("state")
        if mask is not None:
            mask = np.asarray(mask)
            if mask.shape != (self.num_envs,) or mask.dtype != np.bool_:
                raise ValueError(
                    f"options['reset_mask'] must be a bool array of shape ({self.num_envs},); "
                    f"got {mask.dtype} {mask.shape}"
                )
        m = self.num_envs if mask is None else int(np.count_nonzero(mask))
        check_state(state, m, self.core.world, self.core.dtype)  # before anything is drawn
        super().reset(seed=seed)
        rng = self.np_random
        if mask is not None:
            self.core.reset(mask, rng, state=state)
            self._done[mask] = False
        else:
            if self.randomize_params:
                self._draw_params(rng)
            self.core.reset(np.ones(self.num_envs, bool), rng, full=True, state=state)
            self._done[:] = False
        return self.core.observe(), {}

    def get_state(self) -> dict[str, Any]:
        """Everything that decides the environments' future, to continue bit for bit later.

        The generator of :attr:`np_random`, the finished-environment mask, the drawn parameters
        and the core's state (:mod:`quadsim.app.envs.snapshot`): a flat ``dict`` of NumPy arrays
        (copies) and JSON values. :meth:`set_state` on an environment built with the same
        arguments puts it back; stepping both with the same actions then gives the same results.
        """
        state = {"rng": self.np_random.bit_generator.state, "done": self._done.copy()}
        state.update({f"param.{k}": np.array(v) for k, v in self.param_values.items()})
        state.update({f"core.{k}": v for k, v in core_state(self.core).items()})
        return state

    def set_state(self, state: dict[str, Any]) -> None:
        """Put back a state of :meth:`get_state` (of an environment built the same way).

        Raises:
            ValueError: A state of other environments (another size, path or layout).
        """
        params = {k[6:]: np.array(v) for k, v in state.items() if k.startswith("param.")}
        if params and set(params) != set(self.randomize_params):
            raise ValueError(f"environment state: parameters {sorted(params)} drawn; these "
                             f"environments draw {sorted(self.randomize_params)}")  # fmt: skip
        if params or self.param_values:
            self.param_values = params
            self.core.build_sim(params or None)
        set_core_state(self.core, {k[5:]: v for k, v in state.items() if k.startswith("core.")})
        done = np.asarray(state["done"], bool)
        if done.shape != self._done.shape:
            raise ValueError(f"environment state: {done.shape[0]} environments; these are "
                             f"{self.num_envs}")  # fmt: skip
        self._done = done.copy()
        self.np_random.bit_generator.state = state["rng"]

    def _draw_params(self, rng: np.random.Generator) -> None:
        n = self.num_envs
        values = {}
        for name, width in self.randomize_params.items():
            nominal = self.core.nominal(name)
            factor = rng.uniform(1.0 - width, 1.0 + width, n)
            values[name] = factor.reshape((n,) + (1,) * nominal.ndim) * nominal
        self.param_values = values
        self.core.build_sim(values)

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict]:
        """Step every environment (autoreset per :attr:`autoreset_mode`).

        Returns:
            ``(obs (n, d) float32, reward (n,) float64, terminated (n,), truncated (n,), info)``
            with ``info`` arrays ``crashed``, ``fault``, ``out_of_bounds``, ``tilted``,
            ``pos_error`` [m], ``time`` [s] (and ``_key`` masks, all true).
        """
        actions = np.asarray(actions)
        if actions.shape != self.action_space.shape:
            raise ValueError(
                f"actions must have shape {self.action_space.shape}; got {actions.shape}"
            )
        mode = self.autoreset_mode
        if mode == AutoresetMode.DISABLED and self._done.any():
            raise RuntimeError(
                "autoreset is disabled: reset the finished environments with "
                "reset(options={'reset_mask': mask}) before stepping"
            )
        if mode == AutoresetMode.NEXT_STEP and self._done.any():
            obs, reward, terminated, truncated, info = self.core.step_autoreset(
                actions, self._done, self.np_random
            )  # fmt: skip
        else:
            obs, reward, terminated, truncated, info = self.core.step(actions)
        finished = terminated | truncated
        infos: dict[str, Any] = {}
        masks = np.ones((len(_INFO_KEYS), self.num_envs), bool)  # one allocation, 6 rows
        for key, mask in zip(_INFO_KEYS, masks, strict=True):
            infos[key], infos["_" + key] = info[key], mask
        if "battery_v" in info:  # the pwm action level's batteries
            infos["battery_v"], infos["_battery_v"] = info["battery_v"], masks[0].copy()
        if "sensors" in info:  # the sensor parts' readings (their own masks)
            infos["sensors"] = {}
            for key, v in info["sensors"].items():
                infos["sensors"][key], infos["sensors"]["_" + key] = v, masks[0].copy()
            infos["_sensors"] = masks[0].copy()
        if mode == AutoresetMode.SAME_STEP and finished.any():
            final_obs = np.full(self.num_envs, None, dtype=object)
            for i in np.flatnonzero(finished):
                final_obs[i] = obs[i]
            infos["final_obs"], infos["_final_obs"] = final_obs, finished.copy()
            infos["final_info"] = {k: v for k, v in infos.items() if k.lstrip("_") in _INFO_KEYS}
            infos["_final_info"] = finished.copy()
            self.core.reset(finished, self.np_random)
            obs = self.core.observe()
            self._done[:] = False
        else:
            self._done = finished
        return obs, reward, terminated, truncated, infos


class HoverVectorEnv(QuadsimVectorEnv):
    """Vectorised :class:`~quadsim.app.envs.HoverEnv` (``make_vec("quadsim/Hover-v0", ...)``).

    Args:
        num_envs: Number of environments.
        target: World target position [m].
        action_level: See :class:`QuadsimVectorEnv`.
        **kwargs: See :class:`QuadsimVectorEnv`.
    """

    def __init__(
        self, num_envs: int = 1, target: Any = (0.0, 0.0, 1.0),
        action_level: str = "rotor_speeds", **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(HoverTask(target), num_envs, action_level, **kwargs)


class TrackVectorEnv(QuadsimVectorEnv):
    """Vectorised :class:`~quadsim.app.envs.TrackEnv` (``make_vec("quadsim/Track-v0", ...)``).

    Args:
        num_envs: Number of environments.
        trajectory: ``"circle"``, ``"lemniscate"`` or a callable ``t -> Reference``.
        future: Look-ahead times [s] of the reference points in the observation.
        action_level: See :class:`QuadsimVectorEnv`.
        **kwargs: See :class:`QuadsimVectorEnv`.
    """

    def __init__(
        self, num_envs: int = 1, trajectory: str | Callable = "circle",
        future: Any = (0.1, 0.25, 0.5), action_level: str = "rotor_speeds", **kwargs: Any,
    ) -> None:  # fmt: skip
        task = TrackTask(make_trajectory(trajectory), future)
        super().__init__(task, num_envs, action_level, **kwargs)
