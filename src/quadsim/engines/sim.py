"""The simulator: :class:`Simulator`, its :class:`Wind`, the :class:`SimulationError` of a drone.

Data path (one step, command held over it)::

    x, u ──► integrator(f = system.deriv(·, u, params, env)) ──► world.apply ──► x', status'

Below the shell: the state records (:mod:`quadsim.engines.state`); the one pure step,
:func:`~quadsim.engines.stepping.make_step`, with :func:`~quadsim.engines.stepping.step` and
:func:`~quadsim.engines.stepping.rollout` (:mod:`quadsim.engines.stepping`); and the engines that
hold a batch's state, flags and step index and advance them with that step
(:mod:`quadsim.engines.array_engine`; :class:`quadsim.engines.sim_native.NativeEngine`).
:class:`Simulator` is the imperative shell: it checks and broadcasts inputs, draws the wind
(:mod:`quadsim.physics.wind`: ``x_{k+1} = A_d x_k + L_d n_k``, gust ``C x_{k+1}`` rotated to ENU,
plus the mean), counts steps and raises on a diverged single drone; it never branches on the
backend.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ..physics._array import to_numpy
from ..physics.commands import command_allocation
from ..physics.envelope import envelope
from ..physics.integrators import INTEGRATORS, rk4
from ..physics.noise import check_seed, normals
from ..physics.params import Params, PhysicalError, check_physical, load_params
from ..physics.rotors import make_allocator
from ..physics.systems import System, has_warmup, make_system
from ..physics.wind import dryden_discretize, dryden_init, dryden_sequence, gust_to_world
from ..physics.world import FAULT_NAMES, Status, World
from .array_engine import backend_namespace, make_engine
from .state import as_cmd, check_unit_quat, initial_status, state_class

__all__ = ["SimulationError", "Simulator", "Wind", "diverged", "fault_report"]


DEFAULT_WORLD = World()
"""Seed 001's sticky ground at z = 0, no obstacles, default fault limits."""


class Wind(NamedTuple):
    """Wind for a :class:`Simulator`: a constant mean plus optional Dryden turbulence.

    Attributes:
        mean: World-frame mean wind [m/s], shape ``(3,)`` or ``(n, 3)`` (per drone).
        turbulence: :class:`~quadsim.physics.wind.DrydenParams` or ``None``. Gusts are generated in
            the turbulence axes (``u`` along the horizontal mean wind, or +x when calm) with the
            counter-based normals of the simulator's seed (:mod:`quadsim.physics.noise`), and added
            to the mean.
    """

    mean: Any = (0.0, 0.0, 0.0)
    turbulence: Any = None


class SimulationError(RuntimeError):
    """A single-drone simulation diverged (which quantity, at which step and time)."""


def diverged(step: int, code: int, dt: float) -> SimulationError:
    """The error of a single drone that diverged at ``step`` (fault ``code``,
    :data:`~quadsim.physics.world.FAULT_NAMES`), for every loop that finds one."""  # noqa: D205, D209
    return SimulationError(
        f"drone diverged: {FAULT_NAMES[code]} at step {step} (t = {(step + 1) * dt:.6g} s); "
        "the state was kept at its last good value"
    )


def fault_report(status: Status | None, dt: float) -> list[dict]:
    """Every drone of a batch that diverged, as :func:`diverged` words it for a single drone.

    Args:
        status: The batch's flags (:attr:`Simulator.status`), ``None`` without a world.
        dt: Time step [s] (the fault at step ``k`` is in the state at ``t = (k + 1) dt``).

    Returns:
        One dict per faulted drone, in drone order: ``drone`` (index), ``step`` (the step whose
        result was bad), ``time_s``, ``quantity`` (what diverged,
        :data:`~quadsim.physics.world.FAULT_NAMES`); ``[]`` without a world or a fault.
    """
    if status is None:
        return []
    steps = np.asarray(to_numpy(status.fault_step)).reshape(-1)
    codes = np.asarray(to_numpy(status.fault_code)).reshape(-1)
    return [{"drone": int(i), "step": int(steps[i]), "time_s": (int(steps[i]) + 1) * float(dt),
             "quantity": FAULT_NAMES[int(codes[i])]}
            for i in np.flatnonzero(steps >= 0)]  # fmt: skip


def _params_of(drone: Any, system: System) -> dict:

    params = drone if isinstance(drone, Params) else load_params(drone)
    return {k: getattr(params, k) for k in system.param_spec}


class Simulator:
    """A batch of drones stepping in time: the thin imperative shell around an engine.

    The shell holds the plant only: the engine (an :class:`~quadsim.engines.array_engine.Engine`,
    chosen once from ``backend`` by :func:`~quadsim.engines.array_engine.make_engine`) holds the
    state, flags and step index; the shell turns arguments into arrays, adds the wind of
    :mod:`quadsim.physics.wind` (its turbulence drawn from :attr:`seed`, counter-based:
    :mod:`quadsim.physics.noise`), and keeps :attr:`k`.

    Example::

        sim = Simulator(drone="cf2x_L250", n=64, dt=1 / 500, backend="jax", dtype="float32")
        sim.reset(pos=np.array([0.0, 0.0, 1.0]))
        state = sim.step(np.full((64, 4), sim.hover_rpm))

    Args:
        drone: Preset name, TOML path or :class:`~quadsim.physics.params.Params`.
        n: Number of drones (batch size).
        dt: Step [s].
        model: Registered model name (``first_principles``, ``euler_zyx``, ``wrench``).
        integrator: Integrator function (:mod:`quadsim.physics.integrators`) or its name.
        backend: ``"numpy"``, ``"jax"``, ``"torch"``, or ``"native"`` (the same step traced with
            CasADi and compiled to vectorised multi-threaded C; needs a C compiler).
        dtype: ``"float32"`` or ``"float64"``.
        seed: Key of the simulator's random numbers, an integer in ``[0, 2**64)``: the Dryden
            turbulence of drone ``i`` at step ``k`` is :func:`quadsim.physics.noise.normals`
            ``(seed, "dryden", k, i)`` (the same in any batch), :func:`quadsim.loop.flight.fly`'s
            sensor noise uses it too, and :attr:`rng` (a NumPy generator for your own draws) is
            seeded with it; nothing is global.
        world: :class:`~quadsim.physics.world.World` (default: sticky ground at z = 0) or ``None``.
        rotor_dynamics: Model rotor speeds as states (rotor-level models).
        params: Per-drone overrides: model parameter name -> array with leading size ``n``
            (domain randomisation), e.g. ``{"mass": masses}``.
        wind: :class:`Wind` (mean and turbulence), or ``None`` for still air.

    Attributes:
        mean_wind: The mean wind ``(n, 3)`` [m/s], or ``None`` in still air.
        dryden: The turbulence discretised at ``dt``
            (:func:`~quadsim.physics.wind.dryden_discretize`), or ``None``.
        gust_state: The turbulence's state ``(n, 5)``; ``None`` until the first step after a
            reset draws the stationary start (:meth:`gust_start`). Loops that run the gusts
            themselves (the compiled closed loop) put theirs back here.
    """

    def __init__(
        self, drone: Any = "cf2x_L250", n: int = 1, dt: float = 1 / 500, *,
        model: str = "first_principles", integrator: Callable | str = rk4,
        backend: str = "numpy", dtype: str = "float64", seed: int = 0,
        world: World | None = DEFAULT_WORLD, rotor_dynamics: bool = True,
        params: dict | None = None, wind: Wind | None = None,
    ) -> None:  # fmt: skip

        if not (isinstance(n, int) and n >= 1):
            raise ValueError(f"n must be a positive integer; got {n!r}")
        if not (dt > 0 and math.isfinite(dt)):
            raise ValueError(f"dt must be a positive number of seconds; got {dt!r}")
        if isinstance(integrator, str):
            if integrator not in INTEGRATORS:
                raise ValueError(
                    f"unknown integrator {integrator!r}; choose from {list(INTEGRATORS)}"
                )
            integrator = INTEGRATORS[integrator]
        self.drone = drone if isinstance(drone, Params) else load_params(drone)
        warm = has_warmup(self.drone, params)
        if warm and model == "wrench":
            warnings.warn(f"{self.drone.name}: warmup_coef (motor warm-up) is not flown by the "
                          f"wrench model, which has no rotors", stacklevel=2)  # fmt: skip
        n_rotors = self.drone.mixing_matrix.shape[1]
        self.system = make_system(model, n_rotors, rotor_dynamics and model != "wrench",
                                  warm and model != "wrench")  # fmt: skip
        self.n, self.dt, self.world, self.integrator = n, float(dt), world, integrator
        self.xp, self.dtype = backend_namespace(backend, dtype)
        self.backend = backend

        self.seed = check_seed(seed)
        self.rng = np.random.default_rng(seed)
        self.hover_rpm = envelope(self.drone).hover_rpm
        model_params = _params_of(self.drone, self.system)
        for key, value in (params or {}).items():
            if key not in model_params:
                raise ValueError(f"params: {key!r} is not a parameter of model {model!r}")
            value = np.asarray(value, dtype=np.float64)
            if value.shape[:1] != (n,):
                raise ValueError(
                    f"params[{key!r}] must have leading size n = {n}; got {value.shape}"
                )
            try:  # the physical rules of presets, per drone (quadsim.physics.params.check_physical)
                check_physical({key: value})
            except PhysicalError as e:
                at = "".join(f"[{i}]" for i in e.index)
                raise ValueError(f"params[{key!r}]{at}: {e.reason}") from None
            model_params[key] = value
        if "J" in (params or {}) and "J_inv" not in (params or {}):
            model_params["J_inv"] = np.linalg.inv(model_params["J"])
        self.model_params = model_params
        self.wind = wind
        self._setup_wind(wind)
        self._engine = make_engine(backend, self.system, model_params, self.dt, integrator, world,
                                   self.xp, self.dtype)  # fmt: skip
        self.reset()

    # -- state ------------------------------------------------------------------------------------
    @property
    def state(self) -> NamedTuple:
        """The current :class:`State` (or :class:`EulerState`), each field ``(n, size)``.

        Assigning a state (same fields and shapes) continues from it, clock and flags kept.
        """
        return self._state

    @state.setter
    def state(self, value: NamedTuple) -> None:
        self._engine.load(value, self._engine.status(), self.k)
        self._state = self._engine.state()

    @property
    def status(self) -> Status | None:
        """Per-drone flags (:class:`~quadsim.physics.world.Status`), ``None`` without a world."""
        return self._engine.status()

    @status.setter
    def status(self, value: Status | None) -> None:
        self._engine.load(self._state, value, self.k)
        self._state = self._engine.state()

    def restore(self, state: NamedTuple, status: Status | None = None) -> None:
        """Continue from ``state`` with the flags ``status`` (``None``: the flags kept), clock
        kept: what assigning :attr:`state` and then :attr:`status` does, in one load."""  # noqa: D205, D209
        self._engine.load(state, self._engine.status() if status is None else status, self.k)
        self._state = self._engine.state()

    def reset(
        self, pos: Any = None, attitude: Any = None, vel: Any = None, ang_vel: Any = None,
        rotor_vel: Any = None, *, seed: int | None = None,
    ) -> NamedTuple:  # fmt: skip
        """Start again at time 0 with all flags clear (and a new generator if ``seed`` is given).

        Each argument broadcasts to the batch: position [m] (default origin), attitude (xyzw
        quaternion, or roll/pitch/yaw for the Euler model; default level), velocity [m/s], body
        rates [rad/s] (default zero), rotor speeds [RPM] (default hover); a drone with a motor
        warm-up starts cold (``motor_heat`` 0).

        Raises:
            ValueError: A value is not finite, or a quaternion's norm differs from 1 by more than
                1e-6 (naming the drone).
        """
        n, xp = self.n, self.xp
        if seed is not None:

            self.seed = check_seed(seed)
            self.rng = np.random.default_rng(seed)
        att_size = 4 if self.system.attitude == "quat" else 3
        default_att = [0.0, 0.0, 0.0, 1.0] if att_size == 4 else [0.0, 0.0, 0.0]
        sizes = dict(self.system.fields)

        def arr(value, default, name):
            a = np.broadcast_to(np.asarray(default if value is None else value, dtype=np.float64),
                                (n, sizes[name])) if name in sizes else None  # fmt: skip
            if a is not None and not np.all(np.isfinite(a)):
                raise ValueError(f"reset: {name} must be finite")
            if name == "quat":
                check_unit_quat(a, np.arange(n), "reset")
            return None if a is None else xp.asarray(np.array(a), dtype=self.dtype)

        fields = [
            arr(pos, [0.0, 0.0, 0.0], "pos"),
            arr(attitude, default_att, "quat" if att_size == 4 else "rpy"),
            arr(vel, [0.0] * 3, "vel"),
            arr(ang_vel, [0.0] * 3, "ang_vel"),
            arr(rotor_vel, [self.hover_rpm] * self.system.n_cmd, "rotor_vel"),
            arr(None, [0.0] * self.system.n_cmd, "motor_heat"),
        ]
        cls = state_class(self.system)
        fields = fields[:len(cls._fields)]
        status = initial_status(xp, (n,), dtype=self.dtype) if self.world is not None else None
        self.k = 0
        self.gust_state = None  # drawn at the first step, so reset(seed=s) == Simulator(seed=s)
        self._engine.load(cls(*fields), status, 0)
        self._state = self._engine.state()
        return self._state

    def reset_drones(
        self, which: Any, pos: Any = None, attitude: Any = None, vel: Any = None,
        ang_vel: Any = None, rotor_vel: Any = None,
    ) -> NamedTuple:  # fmt: skip
        """Reset only the drones selected by ``which`` (the others and the clock go on).

        For vectorised environments with autoreset. Each argument broadcasts to ``(m, k)`` for the
        ``m`` selected drones (defaults as in :meth:`reset`); their flags are cleared.

        Args:
            which: Boolean mask ``(n,)`` or integer indices of the drones to reset.
            pos: Position [m] (default origin).
            attitude: xyzw quaternion, or roll/pitch/yaw for the Euler model (default level).
            vel: Velocity [m/s] (default zero).
            ang_vel: Body rates [rad/s] (default zero).
            rotor_vel: Rotor speeds [RPM] (default hover).

        Raises:
            ValueError: As :meth:`reset`.
        """
        idx = np.arange(self.n)[np.asarray(which)]
        if idx.size == 0:
            return self._state
        att_size = 4 if self.system.attitude == "quat" else 3
        defaults = {
            "pos": [0.0] * 3, "vel": [0.0] * 3, "ang_vel": [0.0] * 3,
            "quat": [0.0, 0.0, 0.0, 1.0], "rpy": [0.0] * 3,
            "rotor_vel": [self.hover_rpm] * self.system.n_cmd,
            "motor_heat": [0.0] * self.system.n_cmd,
        }  # fmt: skip
        given = {"pos": pos, "quat" if att_size == 4 else "rpy": attitude, "vel": vel,
                 "ang_vel": ang_vel, "rotor_vel": rotor_vel}  # fmt: skip
        fields = {}
        for name, old in self._state._asdict().items():
            if old is None:
                fields[name] = None
                continue
            new = np.array(to_numpy(old), dtype=np.float64)
            value = given.get(name)
            value = defaults[name] if value is None else value
            value = np.broadcast_to(np.asarray(value, dtype=np.float64), (idx.size, new.shape[1]))
            if not np.all(np.isfinite(value)):
                raise ValueError(f"reset_drones: {name} must be finite")
            if name == "quat":
                check_unit_quat(value, idx, "reset_drones")
            new[idx] = value
            fields[name] = new
        status = self._engine.status()
        if status is not None:
            flags = [np.array(to_numpy(s)) for s in status]
            for f, clear in zip(flags, (False, False, math.nan, -1, 0), strict=True):
                f[idx] = clear
            status = Status(*flags)
        self._engine.load(type(self._state)(**fields), status, self.k)
        self._state = self._engine.state()
        return self._state

    def _setup_wind(self, wind: Wind | None) -> None:
        """The wind's parts: :attr:`mean_wind` ``(n, 3)`` [m/s] or ``None`` (no wind),
        :attr:`dryden` (the turbulence discretised at ``dt``, :func:`~quadsim.physics.wind.
        dryden_discretize`) or ``None``; :attr:`gust_state` ``(n, 5)`` is the turbulence's
        state, ``None`` until the first step after a reset draws the stationary start."""  # noqa: D205, D209
        self.dryden = None
        if wind is None:
            self.mean_wind = None
            return
        mean = np.broadcast_to(np.asarray(wind.mean, dtype=np.float64), (self.n, 3))
        if not np.all(np.isfinite(mean)):
            raise ValueError("wind.mean must be finite")
        self.mean_wind = mean
        if wind.turbulence is not None:

            self.dryden = dryden_discretize(wind.turbulence, self.dt)
            horiz = mean[:, :2].copy()
            calm = np.linalg.norm(horiz, axis=1) < 1e-9
            horiz[calm] = (1.0, 0.0)
            # the u axis of the turbulence, (cos, sin) per drone, contiguous per component
            unit = horiz / np.linalg.norm(horiz, axis=1, keepdims=True)
            self._wind_dir = np.asfortranarray(unit)

    def wind_sequence(self, steps: int, k0: int | None = None) -> np.ndarray | None:
        """World wind of steps ``k0 .. k0 + steps - 1``, ``(steps, n, 3)``; advances the gusts.

        The mean wind plus, with turbulence, the Dryden process of :mod:`quadsim.physics.wind`
        (:func:`~quadsim.physics.wind.dryden_sequence` over the chunk, rotated to ENU by
        :func:`~quadsim.physics.wind.gust_to_world`), driven by
        :func:`quadsim.physics.noise.normals` of
        :attr:`seed` at each step (``k0`` defaults to :attr:`k`); the stationary start is
        drawn at the first step after a reset.
        """
        if self.mean_wind is None:
            return None
        out = np.empty((steps, self.n, 3))
        if self.dryden is None:
            out[:] = self.mean_wind
            return out

        k0 = self.k if k0 is None else int(k0)
        start = self.gust_start(k0)  # the stationary start after a reset: no transient
        noise = normals(self.seed, "dryden", k0 + np.arange(steps)[:, None], np.arange(self.n), 5)
        self.gust_state, gusts = dryden_sequence(start, noise, self.dryden)
        out[:] = self.mean_wind + gust_to_world(gusts, self._wind_dir, unit=True)
        return out

    def gust_start(self, k0: int | None = None) -> np.ndarray | None:
        """The gust state ``(n, 5)`` step ``k0`` (default :attr:`k`) starts from:
        :attr:`gust_state`, or the stationary start drawn there after a reset (``None`` without
        turbulence); changes nothing."""  # noqa: D205, D209
        if self.dryden is None:
            return None
        if self.gust_state is not None:
            return self.gust_state

        k0 = self.k if k0 is None else int(k0)
        return dryden_init(self.dryden, normals(self.seed, "dryden_init", k0, np.arange(self.n), 5))

    @property
    def time(self) -> float:
        """Simulated time [s]."""
        return self.k * self.dt

    # -- stepping ---------------------------------------------------------------------------------
    def _cmd(self, cmd: Any, lead: tuple[int, ...]) -> Any:
        return as_cmd(cmd, (*lead, self.n, self.system.n_cmd), self.xp, self.dtype)

    def step(self, cmd: Any, wind: Any = None, dist_f: Any = None, dist_t: Any = None) -> Any:
        """Advance all drones by ``dt`` with command ``cmd`` ``(n, n_cmd)`` (broadcast).

        ``wind`` [m/s] (added to the simulator's :class:`Wind`), ``dist_f`` [N] and ``dist_t``
        [N m] are world-frame, ``(3,)`` or ``(n, 3)``, held over the step.

        Raises:
            SimulationError: For a single drone (``n == 1``) whose state diverged.
        """
        seq = self.wind_sequence(1)
        if seq is not None:
            wind = seq[0] if wind is None else seq[0] + np.asarray(wind)
        self._state = self._engine.step(cmd, (wind, dist_f, dist_t))
        self.k += 1
        self._check_single()
        return self._state

    def step_wrench(
        self, wrench: Any, wind: Any = None, dist_f: Any = None, dist_t: Any = None
    ) -> Any:
        """Advance by ``dt`` with a body wrench ``(n, 4)`` = ``[F (N), τx, τy, τz (N m)]``.

        The wrench becomes desired rotor speeds as in the closed loop
        (:func:`quadsim.physics.commands.command_allocation`:
        :func:`quadsim.physics.rotors.allocate`,
        saturation priorities: collective thrust and roll/pitch before yaw); the rotors then
        follow their own dynamics, so the wrench the body feels comes from the actual rotor
        speeds. The allocation of this step is kept in :attr:`last_allocation` (``lost`` says
        what saturation cost). For the ``wrench`` model the wrench is applied directly.
        """
        w = np.asarray(to_numpy(wrench), dtype=np.float64)
        if w.shape[-1:] != (4,):
            raise ValueError(f"wrench must have shape (n, 4); got {w.shape}")
        if self.system.model == "wrench":
            return self.step(w, wind, dist_f, dist_t)

        if getattr(self, "_allocator", None) is None:
            self._allocator = make_allocator(self.drone)
        # the closed loop's own step from a command to rotor speeds (quadsim.physics.commands)
        _, self.last_allocation = command_allocation(np.broadcast_to(w, (self.n, 4)),
                                                     self._allocator, "wrench")  # fmt: skip
        return self.step(self.last_allocation.rpm, wind, dist_f, dist_t)

    def rollout(self, cmds: Any, record: bool = True, steps: int | None = None) -> Any:
        """Run ``T`` steps and return the trajectory (states after each step, leading axis T).

        Args:
            cmds: Commands ``(T, n, n_cmd)``, one per step; or, with ``steps``, one command
                ``(n, n_cmd)`` held for ``T = steps`` steps.
            record: Return the trajectory (else ``None``; only the final state is kept).
            steps: Number of steps for a held command.
        """
        held = steps is not None
        T = int(steps) if held else int(np.shape(cmds)[0])
        u = self._cmd(cmds, () if held else (T,))
        seq = self.wind_sequence(T)
        traj = self._engine.rollout(u, seq, record, T if held else None)
        self._state = self._engine.state()
        self.k += T
        self._check_single()
        return traj

    def _check_single(self) -> None:
        if self.n != 1 or self.world is None:
            return
        k, code = self._engine.fault()
        if k >= 0:
            raise diverged(k, code, self.dt)
