r"""The batched core shared by the single and the vectorised environments: :class:`QuadCore`.

One :class:`~quadsim.engines.sim.Simulator` with ``n`` drones (one per environment) at physics step
``dt``; each control step holds the action for ``sim_steps_per_action`` physics steps (default
500 Hz physics, 100 Hz control). What a step returns is defined by the modules the core calls:

* observation: :mod:`quadsim.app.envs.observation`;
* reward and termination (crash, fault, position error, tilt): :mod:`quadsim.app.envs.reward`;
* truncation: ``max_episode_steps`` control steps (``None``: never);
* initial states, drawn around the task's reference (:mod:`quadsim.app.envs.tasks`) at ``t = 0``:
  :mod:`quadsim.app.envs.starts`.

This module also holds the environments' default world (:data:`ENV_WORLD`) and the choice of the
simulator backend (:func:`resolve_backend`).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ...engines.native import available
from ...engines.sim import SimulationError, Simulator
from ...loop.initial import Spread, sample_start
from ...physics._array import to_numpy
from ...physics.envelope import envelope
from ...physics.params import Params, load_params
from ...physics.world import Ground, Status, World
from .actions import NAN_FAULT, clean_action, make_action_level
from .compiled import CompiledStep
from .disturbances import DisturbanceState, check_disturbances
from .observation import finite, observation, observation_size
from .observer import advance, integrate_error, make_observer, normalized
from .reward import RewardWeights, Termination, check_weights, outcome
from .sensing import EnvSensors
from .starts import InitRanges, check_init, check_state, start_state

__all__ = ["ENV_WORLD", "QuadCore", "resolve_backend"]

ENV_WORLD = World(ground=Ground(height=0.0, crash_speed=0.0))
"""Default world of the environments: any descending contact with the floor at z = 0 is a crash."""


def resolve_backend(backend: str, warn: bool) -> str:
    """``"auto"``: ``"native"`` when a C compiler and CasADi are there, else ``"numpy"``."""
    if backend != "auto":
        return backend

    if available():
        return "native"
    if warn:
        warnings.warn(
            "quadsim envs: the native backend is not available (CasADi or a C compiler missing); "
            "falling back to the much slower numpy backend",
            RuntimeWarning,
            stacklevel=3,
        )
    return "numpy"


class QuadCore:
    """``n`` environments over one simulator (NumPy arrays with a leading axis ``n``).

    Two paths compute the same step:

    * the reference path: the action level in NumPy (its inner loop at every physics substep,
      :func:`quadsim.app.envs.actions.inner_loop`), the :class:`~quadsim.engines.sim.Simulator` for
      the plant, :func:`~quadsim.app.envs.observation.observation` and
      :func:`~quadsim.app.envs.reward.outcome` in NumPy; any backend;
    * the compiled path (``backend="native"``, :mod:`quadsim.app.envs.compiled`): the same functions
      traced for one drone into one C function that runs a whole control step (inner loop and
      plant for every substep, observation, reward and flags) of all environments in one call.
      Python only draws new starts (:meth:`reset`) and copies the results out.

    Args:
        n: Number of environments.
        task: :class:`~quadsim.app.envs.tasks.HoverTask` or
            :class:`~quadsim.app.envs.tasks.TrackTask`.
        action_level: ``"rotor_speeds"``, ``"pwm"``, ``"thrust_rates"`` or ``"thrust_attitude"``.
        drone: Preset name, TOML path or :class:`~quadsim.physics.params.Params`.
        dt: Physics step [s].
        sim_steps_per_action: Physics steps per control step.
        backend: Simulator backend, or ``"auto"`` (native when available, else numpy).
        dtype: Simulator dtype.
        world: :class:`~quadsim.physics.world.World` (default :data:`ENV_WORLD`).
        init: :class:`~quadsim.app.envs.starts.InitRanges`.
        termination: :class:`~quadsim.app.envs.reward.Termination`.
        reward: :class:`~quadsim.app.envs.reward.RewardWeights`.
        max_episode_steps: Truncation length in control steps, or ``None``.
        warn_fallback: Warn when ``"auto"`` falls back to numpy.
        action_options: Extra keyword arguments of the action level (e.g. ``max_rate``).
        compiled: ``None`` (default): the compiled path when the backend is ``native`` and the
            task's trajectory traces (else the reference path, reason in
            :attr:`compiled_reason`); ``True``: require it (``ValueError`` if impossible);
            ``False``: the reference path.
        disturbances: :class:`~quadsim.app.envs.disturbances.Disturbances` (or a dict of its
            fields): action latency, wind and observation noise; default none.
        observe_rotors: Observe the rotor-speed estimate of :mod:`quadsim.app.envs.observer`
            (:mod:`quadsim.app.envs.observation`).
        observe_integral: Observe the position-error integral of :mod:`quadsim.app.envs.observer`.
        observe_body: Also observe the position error and the velocity in the body frame.
        sensors: Sensor parts, ``{name: table}`` as a scenario's ``[sensors.<name>]`` tables
            (:mod:`quadsim.app.envs.sensing`): their readings end the observation and are in
            ``info["sensors"]``; the compiled path traces them
            (:mod:`quadsim.app.envs.compiled_sensing`; a part that does not trace keeps the
            reference path, reason in :attr:`compiled_reason`).
    """

    def __init__(
        self, n: int, task: Any, *, action_level: str = "rotor_speeds",
        drone: Any = "cf2x_L250", dt: float = 1 / 500, sim_steps_per_action: int = 5,
        backend: str = "auto", dtype: str = "float64", world: World | None = ENV_WORLD,
        init: InitRanges | None = None, termination: Termination | None = None,
        reward: RewardWeights | None = None, max_episode_steps: int | None = None,
        warn_fallback: bool = False, action_options: dict | None = None,
        compiled: bool | None = None, disturbances: Any = None, observe_rotors: bool = False,
        observe_integral: bool = False, observe_body: bool = False, sensors: dict | None = None,
    ) -> None:  # fmt: skip
        if not (isinstance(sim_steps_per_action, int) and sim_steps_per_action >= 1):
            raise ValueError(
                f"sim_steps_per_action must be a positive integer; got {sim_steps_per_action!r}"
            )
        if max_episode_steps is not None and not (
            isinstance(max_episode_steps, int) and max_episode_steps >= 1
        ):
            raise ValueError(
                f"max_episode_steps must be a positive integer or None; got {max_episode_steps!r}"
            )
        if compiled not in (None, True, False):
            raise ValueError(f"compiled must be None, True or False; got {compiled!r}")
        for name, v in (("observe_rotors", observe_rotors), ("observe_integral", observe_integral),
                        ("observe_body", observe_body)):  # fmt: skip
            if v not in (True, False):
                raise ValueError(f"{name} must be True or False; got {v!r}")
        self.n, self.task = n, task
        self.params = drone if isinstance(drone, Params) else load_params(drone)
        self.dt, self.substeps = float(dt), sim_steps_per_action
        self.control_dt = self.dt * sim_steps_per_action
        self.backend = resolve_backend(backend, warn_fallback)
        self.dtype, self.world = dtype, world
        self.init = r = check_init(InitRanges() if init is None else InitRanges(*init))
        self._spread = {
            "pos": Spread("uniform", r.pos),
            "rpy": Spread("uniform", (r.tilt, r.tilt, r.yaw)),
            "vel": Spread("uniform", r.vel),
            "ang_vel": Spread("uniform", r.ang_vel) if r.ang_vel_norm is None
            else Spread("ball", r.ang_vel_norm),
        }  # fmt: skip
        self.termination = Termination() if termination is None else Termination(*termination)
        weights = RewardWeights() if reward is None else RewardWeights(*reward)
        self.weights = check_weights(weights)
        self.max_episode_steps = max_episode_steps
        self.level = make_action_level(action_level, self.params, n, self.dt,
                                       **(action_options or {}))  # fmt: skip
        self.act_dim = self.level.dim

        self.disturbances = check_disturbances(disturbances, self.control_dt)
        self.dist = DisturbanceState(self.disturbances, n, self.dt, sim_steps_per_action)

        self.observe_rotors = bool(observe_rotors)
        self.observer = make_observer(self.params, self.dt, envelope(self.params).hover_rpm)
        self.n_rotors = int(self.params.mixing_matrix.shape[1])
        self.observe_integral = bool(observe_integral)
        self.observe_body = bool(observe_body)
        self.sensing = None if not sensors else EnvSensors(
            sensors, n, self.dt, sim_steps_per_action, world, self.params.gravity_vec)
        self._sensor_obs = np.zeros((n, 0 if self.sensing is None else self.sensing.size))
        self._readings: dict = {}
        self.obs_dim = observation_size(
            self.act_dim, self.n_rotors, self.observe_rotors, self.observe_integral,
            self.observe_body, len(task.future) if task.name == "track" else None,
        ) + self._sensor_obs.shape[1]
        self._rotor_est = np.full((n, self.n_rotors), self.observer.hover)
        self._err_int = np.zeros((n, 3))
        self._want_compiled = compiled
        self.compiled = None
        self.compiled_reason = ""
        self._sim = None
        self.build_sim()
        self._steps = np.zeros(n, dtype=np.int64)
        self._last_action = np.zeros((n, self.act_dim))

    # -- simulator --------------------------------------------------------------------------------
    def build_sim(self, params: dict | None = None) -> None:
        """(Re)create the simulator, with per-environment parameter overrides ``params``."""
        self._sim = Simulator(self.params, n=self.n, dt=self.dt, backend=self.backend,
                              dtype=self.dtype, world=self.world, params=params)  # fmt: skip
        want = self._want_compiled
        if want is False:
            self.compiled_reason = "compiled=False"
        elif self.backend != "native":
            self.compiled_reason = f"backend {self.backend!r} (the compiled step needs native)"
        else:
            old = self.compiled
            try:
                self.compiled = CompiledStep(self, self._sim, cache=old)
                self.compiled_reason = ""
            except NotImplementedError as e:
                self.compiled, self.compiled_reason = None, str(e)
        if want and self.compiled is None:
            raise ValueError(f"compiled=True: the compiled env step is not possible here "
                             f"({self.compiled_reason})")  # fmt: skip

    @property
    def floor(self) -> float | None:
        """Lowest start height [m]: 5 cm above the world's ground, ``None`` without one."""
        if self.world is None or self.world.ground is None:
            return None
        return self.world.ground.height + 0.05

    @property
    def sim(self) -> Any:
        """The :class:`~quadsim.engines.sim.Simulator` (on the compiled path: brought up to date
        with the compiled states when read; changes made to it are not seen by the envs)."""  # noqa: D205, D209
        if self.compiled is not None:
            self.compiled.sync(self._sim)
        return self._sim

    @property
    def steps(self) -> np.ndarray:
        """Control steps of the current episode ``(n,)`` (int64)."""
        if self.compiled is not None:
            return self.compiled.steps()
        return self._steps

    @property
    def last_action(self) -> np.ndarray:
        """The action applied in the last step ``(n, k)`` (zeros after a reset)."""
        if self.compiled is not None:
            return self.compiled.last_action()
        return self._last_action

    @property
    def error_integral(self) -> np.ndarray:
        """The position-error integral ``(n, 3)`` [m s] (:mod:`quadsim.app.envs.observer`; zeros
        when ``observe_integral`` is off)."""  # noqa: D205, D209
        if self.compiled is not None and self.observe_integral:
            return self.compiled.error_integral()
        return self._err_int

    @property
    def rotor_estimate(self) -> np.ndarray:
        """The observer's rotor speeds ``(n, N)`` [RPM] (:mod:`quadsim.app.envs.observer`; the hover
        speed when ``observe_rotors`` is off)."""  # noqa: D205, D209
        if self.compiled is not None and self.observe_rotors:
            return self.compiled.rotor_estimate()
        return self._rotor_est

    @property
    def battery(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The pwm level's batteries: ``(charge (n,) 0..1, voltage (n,) [V])``, the voltage the
        next step holds; ``None`` for the other levels."""  # noqa: D205, D209
        if self.level.name != "pwm":
            return None
        if self.compiled is not None:
            return self.compiled.battery()
        return self.level.charge.copy(), self.level.voltage.copy()

    def nominal(self, name: str) -> np.ndarray:
        """Nominal value of the model parameter ``name``."""
        if name not in self._sim.model_params:
            raise ValueError(
                f"randomize_params: {name!r} is not a model parameter; choose from "
                f"{sorted(self._sim.model_params)}"
            )
        return np.asarray(getattr(self.params, name), dtype=np.float64)

    # -- episodes ---------------------------------------------------------------------------------
    def draw_start(self, rng: np.random.Generator, m: int) -> Any:
        """Deviations of ``m`` new starts from the reference at ``t = 0``: the uniform draws of
        :class:`~quadsim.app.envs.starts.InitRanges` plus its centres (position, velocity)."""  # noqa: D205, D209
        d = sample_start(rng, m, spread=self._spread)
        r = self.init
        return d._replace(pos=d.pos + np.asarray(r.pos_center, dtype=np.float64),
                          vel=d.vel + np.asarray(r.vel_center, dtype=np.float64))

    def reset(
        self, which: np.ndarray, rng: np.random.Generator, full: bool = False,
        state: dict | None = None,
    ) -> None:  # fmt: skip
        """Draw new initial states for the environments selected by the mask ``which`` ``(n,)``.

        Args:
            which: Boolean mask ``(n,)``.
            rng: Generator of the random initial states.
            full: Restart the whole simulator (clock and flags), else only those drones.
            state: Overrides of the drawn values, broadcast to the selected environments:
                ``pos`` [m], ``attitude`` (xyzw), ``vel`` [m/s], ``ang_vel`` [rad/s]
                (checked by :func:`~quadsim.app.envs.starts.check_state`).

        Raises:
            TypeError, ValueError: A bad ``state`` (:func:`~quadsim.app.envs.starts.check_state`),
                before anything is drawn.
        """
        idx = np.flatnonzero(which)
        m = idx.size
        state = check_state(state, m, self.world, self.dtype)
        if m == 0:
            return
        ref_pos, ref_vel = self.task.reference(np.zeros(m))
        dev = self.draw_start(rng, m)
        if self.disturbances.active:
            if full:
                self.dist.seed(rng)
            self.dist.draw(idx, rng)
        start = dev._replace(pos=ref_pos + dev.pos, vel=ref_vel + dev.vel)
        pos, quat, vel, ang_vel = start_state(start.pos, start.rpy, start.vel, start.ang_vel,
                                              self.floor)  # fmt: skip
        pos = state.get("pos", pos)
        quat = state.get("attitude", quat)
        vel = state.get("vel", vel)
        ang_vel = state.get("ang_vel", ang_vel)
        seed = None  # the sensor parts' noise seed, drawn at a full reset
        if self.sensing is not None and full:
            seed = self.sensing.seed = int(rng.integers(2**31))
        if self.compiled is not None:
            check = {"attitude": "quat"}
            self.compiled.reset(idx, full, {"pos": pos, "quat": quat, "vel": vel,
                                            "ang_vel": ang_vel},
                                {check.get(k, k) for k in state})  # fmt: skip
            return
        if full:
            self._sim.reset(pos=pos, attitude=quat, vel=vel, ang_vel=ang_vel)
        else:
            self._sim.reset_drones(idx, pos=pos, attitude=quat, vel=vel, ang_vel=ang_vel)
        self._steps[idx] = 0
        self._last_action[idx] = 0.0
        self._rotor_est[idx] = self.observer.hover
        self._err_int[idx] = 0.0
        self.level.reset(which)
        if self.sensing is not None:  # the episode's first reading, at its start
            truth = self._sim.state
            self.sensing.reset(which, truth, seed)
            self._sensor_obs, readings = self.sensing.read(truth, self._steps, which)
            self._readings = readings

    def step_autoreset(
        self, action: np.ndarray, done: np.ndarray, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict]:
        """:meth:`step`, in which the environments ``done`` start new episodes instead.

        The Gymnasium ``NEXT_STEP`` autoreset: the environments of the mask ``done`` ignore their
        action, draw a new start (:meth:`reset`) and return its observation with reward 0, both
        flags false, ``time`` 0 and ``pos_error`` the norm of the observed position error. The
        compiled path draws the deviations and builds the new starts inside its one call
        (:func:`~quadsim.app.envs.starts.start_state` on the reference at ``t = 0``); the
        reference path steps everyone, then resets and observes (the same draws and results).
        """
        if self.compiled is not None:  # the new starts are built inside the compiled step
            start = self.draw_start(rng, int(np.count_nonzero(done)))
            wind = None
            if self.disturbances.active:  # the order of the reference path: step, then reset
                wind = self.dist.advance()
                self.dist.draw(np.flatnonzero(done), rng)
            obs, reward, terminated, truncated, info = self.compiled.step(
                action, done, start, wind, self.dist.delay
            )
        else:
            obs, reward, terminated, truncated, info = self._step(action)
            self.reset(done, rng)
            obs = self._observe()[0]
            reward[done], terminated[done], truncated[done] = 0.0, False, False
            for key in ("crashed", "fault", "out_of_bounds", "tilted", "time"):
                info[key][done] = 0
            if "battery_v" in info:  # the new episodes' batteries, as the compiled path
                info["battery_v"][done] = self.level.voltage[done]
            if self.sensing is not None:  # the new episodes' first readings, as observed
                info["sensors"] = {k: np.copy(v) for k, v in self._readings.items()}
        info["pos_error"][done] = np.linalg.norm(obs[done, :3], axis=1)
        return self.dist.noisy(obs), reward, terminated, truncated, info

    def observe(self) -> np.ndarray:
        """Observations ``(n, obs_dim)`` float32 of the current states (with the sensor noise of
        :attr:`disturbances`, a new draw each call)."""  # noqa: D205, D209
        if self.compiled is not None:
            return self.dist.noisy(self.compiled.observe())
        obs, _ = self._observe()
        return self.dist.noisy(obs)

    def _observe(self) -> tuple[np.ndarray, tuple]:
        st = self._sim.state
        pos, vel = np.asarray(st.pos, np.float64), np.asarray(st.vel, np.float64)
        quat, w = np.asarray(st.quat, np.float64), np.asarray(st.ang_vel, np.float64)
        t = self._steps * self.control_dt
        ref_pos, ref_vel = self.task.reference(t)
        ahead = self.task.ahead(t) if self.task.name == "track" else None
        rotors = None
        if self.observe_rotors:
            rotors = normalized(self._rotor_est, self.observer)
        integral = self._err_int if self.observe_integral else None
        obs, e_p, e_v, R_zz = observation(pos, quat, vel, w, self._last_action, ref_pos, ref_vel,
                                          ahead, rotors, integral, self.observe_body)  # fmt: skip
        if self.sensing is not None:  # a part's NaN or inf as any observation's (no fault)
            obs = np.concatenate([obs, finite(self._sensor_obs)], axis=1)
        obs = obs.astype(np.float32)
        if not np.all(np.isfinite(obs)):  # beyond float32's range
            obs = np.nan_to_num(obs, nan=0.0, posinf=1e6, neginf=-1e6)
        return obs, (e_p, e_v, w, R_zz)

    def step(self, action: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                                dict]:  # fmt: skip
        """One control step of every environment.

        Returns:
            ``(obs (n, d) float32, reward (n,), terminated (n,), truncated (n,), info)``; info
            holds per-environment arrays ``crashed``, ``fault``, ``out_of_bounds``, ``tilted``
            (bool), ``pos_error`` [m] and ``time`` [s] (of the true state).
        """
        obs, reward, terminated, truncated, info = self._step(action)
        return self.dist.noisy(obs), reward, terminated, truncated, info

    def _fault(self, which: np.ndarray) -> None:
        """Flag the drones ``which`` ``(n,)`` as faulted at the coming physics step (a NaN action),
        as the simulator flags a diverged one: it stays at its present state (the simulator's
        status; without a world the simulator flags and freezes nothing)."""  # noqa: D205, D209
        sim = self._sim
        status = sim.status
        if status is None:
            return
        st = Status(*(np.array(to_numpy(f)) for f in status))
        new = which & ~(st.crashed.astype(bool) | (st.fault_step >= 0))
        sim.status = st._replace(
            fault_step=np.where(new, sim.k, st.fault_step).astype(st.fault_step.dtype),
            fault_code=np.where(new, NAN_FAULT, st.fault_code).astype(st.fault_code.dtype))

    def _substeps(self, a: np.ndarray) -> tuple[list, bool]:
        """The physics substeps of a control step with the clipped actions ``a`` ``(n, k)``.

        Returns:
            ``(sent, diverged)``: the rotor commands the observer is fed (the inner loop's, else
            the action's as sent, one per substep) and whether the single drone (``n = 1``)
            diverged (its simulator raised; it goes on frozen at its last good state).
        """
        sim, level, late, wind = self._sim, self.level, None, None
        sent = [] if level.inner_loop else [level.command(a, None)] * self.substeps
        if self.disturbances.active:  # the wind of this control step; the latency
            wind, late = self.dist.advance(), self.dist.delay[:, None]
        elif not level.inner_loop:
            try:
                sim.rollout(sent[0], record=False, steps=self.substeps)
            except SimulationError:
                return sent, True
            return sent, False
        diverged = False
        for j in range(self.substeps):
            aj = a if late is None else np.where(j < late, self._last_action, a)
            cmd = level.command(aj, sim.state if level.inner_loop else None)
            sent += [cmd] if level.inner_loop else []
            try:
                sim.step(cmd, wind=wind)
            except SimulationError:  # n == 1: frozen by the simulator, the substeps go on
                diverged = True
        return sent, diverged

    def _step(self, action: np.ndarray) -> tuple:
        """:meth:`step` without the observation noise."""
        active = self.disturbances.active
        if self.compiled is not None:
            wind = self.dist.advance() if active else None
            return self.compiled.step(action, wind=wind, delay=self.dist.delay)

        a, nan = clean_action(action, self.n, self.act_dim)
        sim, obs_ = self._sim, self.observer
        if nan.any():
            self._fault(nan)
        sent, diverged = self._substeps(a)
        for cmd in sent if self.observe_rotors else ():
            self._rotor_est = advance(self._rotor_est, cmd, obs_)
        if hasattr(self.level, "advance"):  # a level with a battery (pwm)
            self.level.advance(np.asarray(sim.state.rotor_vel), self.control_dt)
        self._steps += 1
        if self.sensing is not None:
            self.sensing.advance()
            self._sensor_obs, self._readings = self.sensing.read(sim.state, self._steps)
        prev, self._last_action = self._last_action, a
        if self.observe_integral:
            ref_pos, _ = self.task.reference(self._steps * self.control_dt)
            e_p = np.asarray(sim.state.pos, np.float64) - ref_pos
            self._err_int = integrate_error(self._err_int, e_p, self.control_dt)
        obs, (e_p, e_v, w, R_zz) = self._observe()
        status = sim.status
        n = self.n
        crashed = np.zeros(n, bool) if status is None else np.array(status.crashed, bool)
        fault = nan | diverged
        if status is not None:
            fault |= np.asarray(status.fault_step) >= 0
        reward, terminated, out, tilted, dist = outcome(
            e_p, e_v, w, a, prev, crashed, fault, R_zz, self.weights, self.termination
        )  # fmt: skip
        if self.max_episode_steps is None:
            truncated = np.zeros(n, bool)
        else:
            truncated = self._steps >= self.max_episode_steps
        info = {"crashed": crashed, "fault": fault, "out_of_bounds": out, "tilted": tilted,
                "pos_error": dist, "time": self._steps * self.control_dt}  # fmt: skip
        if hasattr(self.level, "voltage"):
            info["battery_v"] = self.level.voltage.copy()
        if self.sensing is not None:
            info["sensors"] = {k: np.copy(v) for k, v in self._readings.items()}
        return obs, reward, terminated, truncated, info
