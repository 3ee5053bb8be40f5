r"""The batched core shared by the single and the vectorised environments.

One :class:`~quadsim.engines.sim.Simulator` with ``n`` drones (one per environment) at physics step
``dt``; each control step holds the action for ``sim_steps_per_action`` physics steps (default
500 Hz physics, 100 Hz control). With the position error ``e_p = p - p_ref(t)`` [m], the velocity
error ``e_v = v - v_ref(t)`` [m/s] (hover: ``v_ref = 0``), body rates ``ω`` [rad/s] and actions
``a_t``:

* observation (float32), in this order: ``e_p`` (3), ``v`` (3, world), ``R_wb`` row-major (9),
  ``ω`` (3, body), ``a_{t-1}`` (k, the action just applied; zeros after a reset), with
  ``observe_rotors`` the rotor-speed estimate ``Ω̂`` (N, normalised like the rotor_speeds action;
  :mod:`quadsim.app.envs.observer`: the nominal motor model run on the commands sent), with
  ``observe_integral`` the position-error integral ``I / I_max`` (3, same module), with
  ``observe_body`` the position error and the velocity in the body frame ``R^T e_p``, ``R^T v``
  (3 + 3: what the rotors can act on, the same for every heading); tracking adds
  ``v_ref(t)`` (3) and ``p - p_ref(t + τ_j)`` (3 per look-ahead time ``τ_j``);
* reward ``r = exp(-(w_p ‖e_p‖ + w_v ‖e_v‖ + w_ω ‖ω‖ + w_a ‖a_t - a_{t-1}‖
  + w_R (1 - R_zz) / 2))`` ∈ (0, 1] (``(1 - R_zz) / 2`` is 0 upright, 1 upside down),
  minus ``crash_penalty`` on the step that terminates;
* termination: crash (the world's ground impact, boxes or bounds), a simulator fault (diverged
  state), ``‖e_p‖ > max_pos_error`` or tilt ``arccos(R_zz) > max_tilt``;
* truncation: ``max_episode_steps`` control steps (``None``: never).

Initial states are drawn uniformly around the reference at ``t = 0``: position offset per axis
``±pos`` [m], roll and pitch ``±tilt`` [rad], yaw ``±yaw`` [rad], velocity per axis ``±vel``
[m/s], body rates per axis ``±ang_vel`` [rad/s] (or uniform in a ball of radius
``ang_vel_norm``); rotors start at hover speed.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ...loop.initial import Spread, make_trajectory, sample_start
from ...physics._array import namespace
from ...physics.rotation import kfrom_euler, rotate_inverse, to_matrix
from ...physics.world import Ground, World
from .actions import make_action_level
from .observer import INTEGRAL_MAX

__all__ = [
    "ENV_WORLD",
    "HoverTask",
    "InitRanges",
    "QuadCore",
    "RewardWeights",
    "Termination",
    "TrackTask",
    "observation",
    "observation_size",
    "outcome",
    "resolve_backend",
    "start_state",
]

ENV_WORLD = World(ground=Ground(height=0.0, crash_speed=0.0))
"""Default world of the environments: any descending contact with the floor at z = 0 is a crash."""


class InitRanges(NamedTuple):
    """Half-widths of the uniform initial-state distribution around the reference at t = 0.

    The draws are shifted by the centres (``pos_center``, ``vel_center``).

    Attributes:
        pos: Position offset per axis [m] (one number, or one per axis).
        vel: Velocity per axis [m/s] (one number, or one per axis).
        tilt: Roll and pitch [rad].
        yaw: Yaw [rad].
        ang_vel: Body rates per axis [rad/s].
        pos_center: Centre of the position offsets [m] ``(3,)`` (default none).
        vel_center: Centre of the velocities [m/s] ``(3,)`` (default none).
        ang_vel_norm: If set, body rates uniform in the ball of this radius [rad/s] instead of
            ``±ang_vel`` per axis.
    """

    pos: Any = 0.5
    vel: Any = 0.5
    tilt: float = 0.3
    yaw: float = math.pi
    ang_vel: float = 0.5
    pos_center: Any = (0.0, 0.0, 0.0)
    vel_center: Any = (0.0, 0.0, 0.0)
    ang_vel_norm: float | None = None


def _check_init(r: InitRanges) -> InitRanges:
    """``r`` if its half-widths are finite and >= 0 and its centres finite (else ValueError)."""
    for name in ("pos", "vel", "tilt", "yaw", "ang_vel", "ang_vel_norm"):
        v = getattr(r, name)
        a = np.asarray(0.0 if v is None else v, dtype=np.float64)
        if a.shape not in ((), (3,)) or not np.all(np.isfinite(a) & (a >= 0)):
            raise ValueError(f"init.{name} must be >= 0 (one number or 3); got {v!r}")
    for name in ("pos_center", "vel_center"):
        a = np.asarray(getattr(r, name), dtype=np.float64)
        if a.shape != (3,) or not np.all(np.isfinite(a)):
            raise ValueError(f"init.{name} must be 3 finite numbers; got {getattr(r, name)!r}")
    return r


class RewardWeights(NamedTuple):
    """Weights of the reward (module docstring), all finite and >= 0.

    ``r = exp(-(w_p ‖e_p‖ + w_v ‖e_v‖ + w_ω ‖ω‖ + w_a ‖Δa‖ + w_R (1 - R_zz) / 2))``.

    Attributes:
        pos: ``w_p`` [1/m].
        vel: ``w_v`` [s/m].
        ang_vel: ``w_ω`` [s/rad].
        action_rate: ``w_a`` (per unit of normalised action change).
        crash_penalty: Subtracted on the step that terminates the episode.
        attitude: ``w_R`` (on ``(1 - R_zz) / 2``: 0 upright, 1 upside down; default 0, Recover-v0
            :data:`quadsim.app.envs.recover.REWARD`).
    """

    pos: float = 1.0
    vel: float = 0.1
    ang_vel: float = 0.05
    action_rate: float = 0.05
    crash_penalty: float = 10.0
    attitude: float = 0.0


def _check_weights(w: RewardWeights) -> RewardWeights:
    """``w`` if every weight is a finite number >= 0 (else ValueError naming it)."""
    for name, v in w._asdict().items():
        ok = isinstance(v, (int, float, np.floating, np.integer)) and not isinstance(v, bool)
        if not (ok and math.isfinite(v) and v >= 0):
            raise ValueError(f"reward.{name} must be a finite number >= 0; got {v!r}")
    return w


class Termination(NamedTuple):
    """Termination limits besides crashes and faults (``None`` disables one).

    Attributes:
        max_pos_error: Largest distance to the reference ``‖e_p‖`` [m].
        max_tilt: Largest angle between body z and world z [rad].
    """

    max_pos_error: float | None = 2.0
    max_tilt: float | None = math.pi / 2


class TrackTask:
    """Follow a trajectory ``traj(t) -> Reference`` (:mod:`quadsim.loop.trajectories`).

    A trajectory that is constant from the start (``duration == 0``, e.g.
    :class:`~quadsim.loop.trajectories.Hover`) is evaluated once.

    Args:
        trajectory: Callable of time [s] (any shape ``(...)``) returning a
            :class:`~quadsim.loop.trajectories.Reference` with ``pos``, ``vel`` of shape ``(...,
            3)``.
        future: Look-ahead times ``τ_j`` [s] of the reference points in the observation.
    """

    name = "track"

    def __init__(self, trajectory: Callable, future: Any = (0.1, 0.25, 0.5)) -> None:
        if not callable(trajectory):
            raise ValueError(f"trajectory must be a callable t -> Reference; got {trajectory!r}")
        self.trajectory = trajectory
        self.future = tuple(float(x) for x in future)
        self._constant = None
        if getattr(trajectory, "duration", None) == 0.0:
            ref = trajectory(0.0)
            self._constant = (np.asarray(ref.pos, dtype=np.float64),
                              np.asarray(ref.vel, dtype=np.float64))  # fmt: skip

    def reference(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Reference position and velocity ``(n, 3)`` at times ``t`` ``(n,)`` [s]."""
        shape = (*np.shape(t), 3)
        if self._constant is not None:
            pos, vel = self._constant
        else:
            ref = self.trajectory(np.asarray(t, dtype=np.float64))
            pos, vel = np.asarray(ref.pos, dtype=np.float64), np.asarray(ref.vel, dtype=np.float64)
        return np.broadcast_to(pos, shape), np.broadcast_to(vel, shape)

    def ahead(self, t: np.ndarray) -> np.ndarray:
        """Reference positions ``(n, J, 3)`` at ``t + τ_j``."""
        t = np.asarray(t, dtype=np.float64)
        if not self.future:
            return np.zeros((*t.shape, 0, 3))
        tt = t[..., None] + np.asarray(self.future)
        if self._constant is not None:
            return np.broadcast_to(self._constant[0], (*tt.shape, 3))
        pos = np.asarray(self.trajectory(tt).pos, dtype=np.float64)
        return np.broadcast_to(pos, (*tt.shape, 3))


class HoverTask(TrackTask):
    """Hold a fixed target position (yaw is free): :class:`TrackTask` of a hover reference.

    Args:
        target: World target [m], ``(3,)``.
    """

    name = "hover"

    def __init__(self, target: Any = (0.0, 0.0, 1.0)) -> None:
        target = np.asarray(target, dtype=np.float64)
        if target.shape != (3,) or not np.all(np.isfinite(target)):
            raise ValueError(f"target must be a finite (3,) position [m]; got {target!r}")
        super().__init__(make_trajectory("hover", center=tuple(target.tolist())), future=())
        self.target = target


def start_state(pos: Any, rpy: Any, vel: Any, ang_vel: Any, floor: float | None) -> tuple:
    """The plant state of new episodes (pure, array API; the compiled step traces it).

    Args:
        pos: Drawn positions ``(..., 3)`` [m].
        rpy: Drawn roll, pitch, yaw ``(..., 3)`` [rad] (ZYX Euler).
        vel: Drawn velocities ``(..., 3)`` [m/s].
        ang_vel: Drawn body rates ``(..., 3)`` [rad/s].
        floor: Lowest start height [m] (the ground's height plus 5 cm), or ``None``.

    Returns:
        ``(pos, quat, vel, ang_vel)``: ``pos`` with ``z`` raised to ``floor`` where below it,
        ``quat`` ``(..., 4)`` (xyzw) of ``rpy``.
    """
    xp = namespace(pos, rpy)
    quat = xp.stack(kfrom_euler(xp, (rpy[..., 0], rpy[..., 1], rpy[..., 2])), axis=-1)
    if floor is not None:
        z = xp.maximum(pos[..., 2], floor)
        pos = xp.stack([pos[..., 0], pos[..., 1], z], axis=-1)
    return pos, quat, vel, ang_vel


def observation_size(act_dim: int, n_rotors: int, rotors: bool = False, integral: bool = False,
                     body: bool = False, look_ahead: int | None = None) -> int:  # fmt: skip
    """The length of :func:`observation`'s vector: ``act_dim`` actions, ``n_rotors`` rotors,
    the options observed, and tracking's ``look_ahead`` points (``None``: hover)."""  # noqa: D205, D209
    return (18 + act_dim + (n_rotors if rotors else 0) + (3 if integral else 0)
            + (6 if body else 0) + (0 if look_ahead is None else 3 + 3 * look_ahead))  # fmt: skip


def observation(
    pos: Any, quat: Any, vel: Any, ang_vel: Any, last_action: Any, ref_pos: Any, ref_vel: Any,
    ahead: Any = None, rotors: Any = None, integral: Any = None, body: bool = False,
) -> tuple[Any, Any, Any, Any]:  # fmt: skip
    """The observation and the errors behind the reward (pure, array API, batch shape ``...``).

    The one implementation of the module docstring's observation: :class:`QuadCore` calls it on
    NumPy arrays, the compiled env step (:mod:`quadsim.app.envs.compiled`) traces it for one drone.

    Args:
        pos: World position ``(..., 3)`` [m].
        quat: Attitude ``(..., 4)`` (xyzw).
        vel: World velocity ``(..., 3)`` [m/s].
        ang_vel: Body rates ``(..., 3)`` [rad/s].
        last_action: The action just applied ``(..., k)``.
        ref_pos: Reference position at the current time [m].
        ref_vel: Reference velocity at the current time [m/s].
        ahead: Reference positions at the look-ahead times ``(..., J, 3)`` (tracking), or
            ``None`` (hover: no reference terms).
        rotors: The observed rotor-speed estimate ``(..., N)``
            (:func:`quadsim.app.envs.observer.normalized`), or ``None`` (not observed).
        integral: The position-error integral ``(..., 3)`` [m s]
            (:func:`quadsim.app.envs.observer.integrate_error`), or ``None`` (not observed).
        body: Also observe ``R^T e_p`` and ``R^T v`` (the body frame).

    Returns:
        ``(obs, e_p, e_v, R_zz)``: observation ``(..., obs_dim)`` in the state's dtype (non-finite
        entries as ``numpy.nan_to_num`` with ±1e6), position and velocity errors, and ``R_zz``.
    """
    xp = namespace(pos, quat, vel, ang_vel)
    R = to_matrix(quat)
    e_p = pos - ref_pos
    R9 = xp.reshape(R, (*R.shape[:-2], 9))
    parts = [e_p, vel, xp.clip(R9, -1.0, 1.0), ang_vel, last_action]
    if rotors is not None:
        parts.append(rotors)
    if integral is not None:
        parts.append(integral * (1.0 / INTEGRAL_MAX))
    if body:
        parts += [rotate_inverse(quat, e_p), rotate_inverse(quat, vel)]
    if ahead is not None:
        d = pos[..., None, :] - ahead
        parts += [ref_vel, xp.reshape(d, (*d.shape[:-2], d.shape[-2] * 3))]
    obs = xp.concat([xp.broadcast_to(p, (*e_p.shape[:-1], p.shape[-1])) for p in parts], axis=-1)
    big = xp.where(obs > 0.0, 1e6, xp.where(obs < 0.0, -1e6, 0.0))
    obs = xp.where(xp.abs(obs) < math.inf, obs, big)
    return obs, e_p, vel - ref_vel, R[..., 2, 2]


def outcome(
    e_p: Any, e_v: Any, ang_vel: Any, action: Any, prev_action: Any, crashed: Any, fault: Any,
    R_zz: Any, weights: RewardWeights, termination: Termination,
) -> tuple[Any, Any, Any, Any, Any]:  # fmt: skip
    """Reward and termination of a control step (pure, array API; module docstring).

    Args:
        e_p: Position error ``(..., 3)`` [m].
        e_v: Velocity error ``(..., 3)`` [m/s].
        ang_vel: Body rates [rad/s] ``(..., 3)``.
        action: This step's action ``(..., k)``.
        prev_action: The previous step's action ``(..., k)``.
        crashed: The simulator's crash flags ``(...)`` (booleans).
        fault: The simulator's fault flags ``(...)`` (booleans).
        R_zz: ``cos`` of the tilt ``(...)``.
        weights: :class:`RewardWeights`.
        termination: :class:`Termination`.

    Returns:
        ``(reward, terminated, out_of_bounds, tilted, pos_error)``.
    """
    xp = namespace(e_p, e_v, ang_vel)

    def norm(v: Any) -> Any:
        return xp.sqrt(xp.sum(v * v, axis=-1))

    dist = norm(e_p)
    terminated = crashed | fault
    never = xp.zeros_like(dist) > 0.0
    out = never if termination.max_pos_error is None else dist > termination.max_pos_error
    tilted = never if termination.max_tilt is None else R_zz < math.cos(termination.max_tilt)
    if termination.max_pos_error is not None:
        terminated = terminated | out
    if termination.max_tilt is not None:
        terminated = terminated | tilted
    wt = weights
    cost = (wt.pos * dist + wt.vel * norm(e_v) + wt.ang_vel * norm(ang_vel)
            + wt.action_rate * norm(action - prev_action))  # fmt: skip
    if wt.attitude:  # (left out at 0: nothing changes for the envs that do not use it)
        cost = cost + wt.attitude * 0.5 * (1.0 - R_zz)
    reward = xp.exp(-cost) - wt.crash_penalty * terminated
    reward = xp.where(xp.abs(reward) < math.inf, reward, -wt.crash_penalty)
    return reward, terminated, out, tilted, dist


def resolve_backend(backend: str, warn: bool) -> str:
    """``"auto"``: ``"native"`` when a C compiler and CasADi are there, else ``"numpy"``."""
    if backend != "auto":
        return backend
    from ...engines.native import available

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
      the plant, :func:`observation` and :func:`outcome` in NumPy; any backend;
    * the compiled path (``backend="native"``, :mod:`quadsim.app.envs.compiled`): the same functions
      traced for one drone into one C function that runs a whole control step (inner loop and
      plant for every substep, observation, reward and flags) of all environments in one call.
      Python only draws new starts (:meth:`reset`) and copies the results out.

    Args:
        n: Number of environments.
        task: :class:`HoverTask` or :class:`TrackTask`.
        action_level: ``"rotor_speeds"``, ``"pwm"``, ``"thrust_rates"`` or ``"thrust_attitude"``.
        drone: Preset name, TOML path or :class:`~quadsim.physics.params.Params`.
        dt: Physics step [s].
        sim_steps_per_action: Physics steps per control step.
        backend: Simulator backend, or ``"auto"`` (native when available, else numpy).
        dtype: Simulator dtype.
        world: :class:`~quadsim.physics.world.World` (default :data:`ENV_WORLD`).
        init: :class:`InitRanges`.
        termination: :class:`Termination`.
        reward: :class:`RewardWeights`.
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
            (module docstring).
        observe_integral: Observe the position-error integral of :mod:`quadsim.app.envs.observer`.
        observe_body: Also observe the position error and the velocity in the body frame.
    """

    def __init__(
        self, n: int, task: Any, *, action_level: str = "rotor_speeds",
        drone: Any = "cf2x_L250", dt: float = 1 / 500, sim_steps_per_action: int = 5,
        backend: str = "auto", dtype: str = "float64", world: World | None = ENV_WORLD,
        init: InitRanges | None = None, termination: Termination | None = None,
        reward: RewardWeights | None = None, max_episode_steps: int | None = None,
        warn_fallback: bool = False, action_options: dict | None = None,
        compiled: bool | None = None, disturbances: Any = None, observe_rotors: bool = False,
        observe_integral: bool = False, observe_body: bool = False,
    ) -> None:  # fmt: skip
        from ...physics.params import Params, load_params

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
        self.init = r = _check_init(InitRanges() if init is None else InitRanges(*init))
        self._spread = {
            "pos": Spread("uniform", r.pos),
            "rpy": Spread("uniform", (r.tilt, r.tilt, r.yaw)),
            "vel": Spread("uniform", r.vel),
            "ang_vel": Spread("uniform", r.ang_vel) if r.ang_vel_norm is None
            else Spread("ball", r.ang_vel_norm),
        }  # fmt: skip
        self.termination = Termination() if termination is None else Termination(*termination)
        weights = RewardWeights() if reward is None else RewardWeights(*reward)
        self.weights = _check_weights(weights)
        self.max_episode_steps = max_episode_steps
        self.level = make_action_level(action_level, self.params, n, self.dt,
                                       **(action_options or {}))  # fmt: skip
        self.act_dim = self.level.dim
        from .disturbances import DisturbanceState, check_disturbances

        self.disturbances = check_disturbances(disturbances, self.control_dt)
        self.dist = DisturbanceState(self.disturbances, n, self.dt, sim_steps_per_action)
        from ...physics.envelope import envelope
        from .observer import make_observer

        self.observe_rotors = bool(observe_rotors)
        self.observer = make_observer(self.params, self.dt, envelope(self.params).hover_rpm)
        self.n_rotors = int(self.params.mixing_matrix.shape[1])
        self.observe_integral = bool(observe_integral)
        self.observe_body = bool(observe_body)
        self.obs_dim = observation_size(
            self.act_dim, self.n_rotors, self.observe_rotors, self.observe_integral,
            self.observe_body, len(task.future) if task.name == "track" else None,
        )
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
        from ...engines.sim import Simulator

        self._sim = Simulator(self.params, n=self.n, dt=self.dt, backend=self.backend,
                              dtype=self.dtype, world=self.world, params=params)  # fmt: skip
        want = self._want_compiled
        if want is False:
            self.compiled_reason = "compiled=False"
        elif self.backend != "native":
            self.compiled_reason = f"backend {self.backend!r} (the compiled step needs native)"
        else:
            from .compiled import CompiledStep

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
        :class:`InitRanges` plus its centres (position, velocity)."""  # noqa: D205, D209
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
                ``pos`` [m], ``attitude`` (xyzw), ``vel`` [m/s], ``ang_vel`` [rad/s].
        """
        idx = np.flatnonzero(which)
        m = idx.size
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
        state = dict(state or {})
        unknown = set(state) - {"pos", "attitude", "vel", "ang_vel"}
        if unknown:
            raise ValueError(f"reset state: unknown keys {sorted(unknown)}; use pos, attitude, "
                             "vel, ang_vel")  # fmt: skip
        pos = state.get("pos", pos)
        quat = state.get("attitude", quat)
        vel = state.get("vel", vel)
        ang_vel = state.get("ang_vel", ang_vel)
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

    def step_autoreset(
        self, action: np.ndarray, done: np.ndarray, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict]:
        """:meth:`step`, in which the environments ``done`` start new episodes instead.

        The Gymnasium ``NEXT_STEP`` autoreset: the environments of the mask ``done`` ignore their
        action, draw a new start (:meth:`reset`) and return its observation with reward 0, both
        flags false, ``time`` 0 and ``pos_error`` the norm of the observed position error. The
        compiled path draws the deviations and builds the new starts inside its one call
        (:func:`start_state` on the reference at ``t = 0``); the reference path steps everyone,
        then resets and observes (the same draws and results).
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
            from .observer import normalized

            rotors = normalized(self._rotor_est, self.observer)
        integral = self._err_int if self.observe_integral else None
        obs, e_p, e_v, R_zz = observation(pos, quat, vel, w, self._last_action, ref_pos, ref_vel,
                                          ahead, rotors, integral, self.observe_body)  # fmt: skip
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

    def _step(self, action: np.ndarray) -> tuple:
        """:meth:`step` without the observation noise."""
        active = self.disturbances.active
        if self.compiled is not None:
            wind = self.dist.advance() if active else None
            return self.compiled.step(action, wind=wind, delay=self.dist.delay)
        from ...engines.sim import SimulationError
        from .observer import advance

        a = np.clip(np.asarray(action, dtype=np.float64).reshape(self.n, self.act_dim), -1, 1)
        sim, level, obs_ = self._sim, self.level, self.observer
        # the observer's commands: the inner loop's (thrust levels), else the action as sent
        sent = [] if level.inner_loop else [level.command(a, None)] * self.substeps
        diverged = False
        try:
            if active:  # the wind of this control step; the last action until the latency
                wind, late = self.dist.advance(), self.dist.delay[:, None]
                for j in range(self.substeps):
                    aj = np.where(j < late, self._last_action, a)
                    cmd = level.command(aj, sim.state if level.inner_loop else None)
                    sent += [cmd] if level.inner_loop else []
                    sim.step(cmd, wind=wind)
            elif not level.inner_loop:
                sim.rollout(sent[0], record=False, steps=self.substeps)
            else:
                for _ in range(self.substeps):
                    sent.append(level.command(a, sim.state))
                    sim.step(sent[-1])
        except SimulationError:  # n == 1: the state is kept at its last good value
            diverged = True
        for cmd in sent if self.observe_rotors else ():
            self._rotor_est = advance(self._rotor_est, cmd, obs_)
        if hasattr(self.level, "advance"):  # a level with a battery (pwm)
            self.level.advance(np.asarray(sim.state.rotor_vel), self.control_dt)
        self._steps += 1
        prev, self._last_action = self._last_action, a
        if self.observe_integral:
            from .observer import integrate_error

            ref_pos, _ = self.task.reference(self._steps * self.control_dt)
            e_p = np.asarray(sim.state.pos, np.float64) - ref_pos
            self._err_int = integrate_error(self._err_int, e_p, self.control_dt)
        obs, (e_p, e_v, w, R_zz) = self._observe()
        status = sim.status
        n = self.n
        crashed = np.zeros(n, bool) if status is None else np.array(status.crashed, bool)
        fault = np.full(n, diverged)
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
        return obs, reward, terminated, truncated, info
