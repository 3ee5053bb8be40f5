"""The compiled closed loop of many drones: built from the traced step, run a chunk per call.

:func:`compile_closed_loop` (a drone preset, gains and a trajectory) and
:func:`compile_for_simulator` (everything a :class:`~quadsim.engines.sim.Simulator` holds) trace
:func:`quadsim.loop.closed_loop.closed_loop_step` once and compile it with
:func:`quadsim.engines.native.compile_rollout` into vectorised multi-threaded C; :class:`ClosedLoop`
holds the result, builds the compiled state of many drones (the layout in
:mod:`quadsim.loop.closed_loop`) and runs it for a number of steps, recording every
``record_every``-th.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ..engines import native_memo
from ..engines.native import compile_rollout
from ..engines.sim_native import traced_params
from ..physics._array import to_numpy
from ..physics.envelope import envelope
from ..physics.integrators import INTEGRATORS
from ..physics.params import Params, load_params
from ..physics.rotors import make_allocator
from ..physics.systems import has_warmup, make_system
from .brain import (
    Periods,
    Sensors,
    brain_init,
    ctrl_leaves,
    loop_periods,
    noise_groups,
    state_leaves,
    tree_rebuild,
)
from .closed_loop import DEFAULT_CTRL, closed_loop_step, per_drone_params
from .control import control as default_control

__all__ = ["ClosedLoop", "ClosedLoopRun", "compile_closed_loop", "compile_for_simulator"]


class ClosedLoopRun(NamedTuple):
    """What :meth:`ClosedLoop.run` returns (recorded arrays are sample-major, then drone).

    Attributes:
        x: Final compiled states ``(n_x, N)``.
        time: Times of the samples ``(n_rec,)`` [s].
        records: The recorded compiled states ``(n_rec, n_x, N)`` as the C rollout wrote them.
        rows: Their row slices by field name (:attr:`ClosedLoop.rows`).
    """

    x: np.ndarray
    time: np.ndarray
    records: np.ndarray
    rows: dict

    @property
    def fields(self) -> dict:
        """The recorded fields by name (the rows of :attr:`ClosedLoop.rows`), ``(n_rec, N,
        size)``: the plant fields (``pos``, ``quat``, ``vel``, ``ang_vel``, ``rotor_vel``), the
        world flags, the controller state (``ctrl_*``), ``step`` and the command of the step
        before each sample (``cmd_rpm``, ``cmd_wrench``, ``saturated``); ``saturated``,
        ``landed`` and ``crashed`` are booleans ``(n_rec, N)``. Views of :attr:`records` (made
        on each access)."""  # noqa: D205, D209
        if not len(self.records):
            return {}
        out = {name: np.swapaxes(self.records[:, s, :], 1, 2) for name, s in self.rows.items()}
        for name in ("saturated", "landed", "crashed", "prev_landed", "prev_crashed"):
            if name in out:
                out[name] = out[name][..., 0] > 0.5
        return out


class ClosedLoop:
    """A compiled closed loop of many drones (build it with :func:`compile_closed_loop`).

    Attributes:
        rows: Row slices of the compiled state by field name (module docstring).
        n_x: Compiled state size of one drone.
        dt: Step [s].
        dtype: Floating-point type of the computation.
        rollout: The :class:`~quadsim.engines.native.NativeRollout`.
        system: The plant's :class:`~quadsim.physics.systems.System`.
        sample: Whether the compiled state carries the log sample of the step before
            (``closed_loop_step(..., sample=True)``).
        params: Per-drone model-parameter values ``(n_var, N)`` (``p[3:]``, see
            :func:`per_drone_params`), or ``None`` when all drones share the model; a loop with
            per-drone parameters runs exactly ``N`` drones.
    """

    def __init__(self, rollout: Any, rows: dict, template: Any, system: Any, dt: float,
                 hover_rpm: float, params: np.ndarray | None = None, sens: Any = None,
                 periods: Any = None, estimator: Any = None,
                 world: Any = None) -> None:  # fmt: skip

        self.rollout, self.rows, self.system, self.dt = rollout, rows, system, dt
        self.dtype, self.n_x = rollout.dtype, rollout.n_state
        self._template, self._hover = template, hover_rpm
        self._sens = Sensors() if sens is None else sens
        self._periods = Periods() if periods is None else periods
        self._estimator, self._world = estimator, world
        self.sample = "ref_pos" in rows
        self.params = None if params is None else np.asarray(params, np.float64)

    def initial_state(
        self, n: int, pos: Any = (0.0, 0.0, 0.0), quat: Any = (0.0, 0.0, 0.0, 1.0),
        vel: Any = (0.0, 0.0, 0.0), ang_vel: Any = (0.0, 0.0, 0.0), rotor_vel: Any = None,
        ctrl_state: Any = None, brain_state: Any = None, motor_heat: Any = 0.0,
    ) -> np.ndarray:  # fmt: skip
        """Compiled states ``(n_x, n)`` at step 0.

        Each field broadcasts to ``(n, size)`` (rotor speeds default to hover; motors with a
        warm-up start cold, ``motor_heat`` 0). The rest is the
        brain's state (:class:`~quadsim.loop.brain.BrainState`): ``brain_state`` per drone (leaves
        ``(n, ...)``, of the structure the loop was traced with), or
        :func:`~quadsim.loop.brain.brain_init` of the start pose (the IMU's turn-on biases of seed
        0, the motion-capture delay line full of the start position) with the controller state
        ``ctrl_state`` (leaves ``(n, ...)`` or broadcasting to it: a leading axis of 1, or a
        scalar), or zero.

        Raises:
            ValueError: ``ctrl_state`` or ``brain_state`` of another structure or shape.
        """
        X = np.zeros((self.n_x, n))
        given = {"pos": pos, "quat": quat, "vel": vel, "ang_vel": ang_vel,
                 "rotor_vel": self._hover if rotor_vel is None else rotor_vel,
                 "motor_heat": motor_heat}  # fmt: skip
        for name, size in self.system.fields:
            X[self.rows[name]] = np.broadcast_to(np.asarray(given[name], np.float64), (n, size)).T
        if "crash_time" in self.rows:  # the Simulator's all-clear flags
            X[self.rows["crash_time"]], X[self.rows["fault_step"]] = math.nan, -1.0
        what = "brain_state"
        if brain_state is None:
            what = "ctrl_state"
            tmpl = self._template.ctrl
            if ctrl_state is None:
                ctrl_state = tree_rebuild(tmpl, iter([np.zeros((n, *np.shape(v)))
                                                      for _, v in ctrl_leaves(tmpl)]))  # fmt: skip
            field = {name: X[self.rows[name]].T for name in ("pos", "quat", "vel")}
            brain_state = brain_init(n, ctrl_state, field["pos"], field["quat"], field["vel"],
                                     sens=self._sens, dt=self.dt, periods=self._periods,
                                     n_rotors=self.system.n_cmd, estimator=self._estimator,
                                     world=self._world)  # fmt: skip
        leaves = state_leaves(brain_state, self._sens)
        names = [name for name, _ in state_leaves(self._template, self._sens)]
        if [name for name, _ in leaves] != names:
            got = [name for name, _ in leaves if name not in names]
            want = [name for name in names if name not in [m for m, _ in leaves]]
            raise ValueError(f"{what} has the leaves {got}; this loop stores {want}")
        for name, leaf in leaves:
            a = np.asarray(to_numpy(leaf), np.float64)
            rows = self.rows[name]
            size = rows.stop - rows.start
            a = a.reshape(1, 1) if a.ndim == 0 else a.reshape(a.shape[0], -1)
            try:
                X[rows] = np.broadcast_to(a, (n, size)).T
            except ValueError:
                raise ValueError(f"{what}: {name} of shape {np.shape(leaf)} does not fit {n} "
                                 f"drones of {size} values") from None  # fmt: skip
        return X.astype(self.dtype)

    def run(self, x0: np.ndarray, steps: int, record_every: int = 1, wind: Any = None,
            offset: Any = None, seed: int = 0, plant_seed: int = 0) -> ClosedLoopRun:  # fmt: skip
        """Advance ``steps`` closed-loop steps of every drone in one call into the C rollout.

        Args:
            x0: Compiled states ``(n_x, N)`` (:meth:`initial_state` or a previous run's ``x``).
            steps: Steps to run.
            record_every: ``k > 0`` records after steps ``k, 2k, ...``; 0 records nothing.
            wind: World wind [m/s], ``(3,)``, ``(N, 3)`` (held) or ``(steps, N, 3)``; default 0.
                With Dryden turbulence in the step, the mean wind (held), to which it adds gusts.
            offset: Reference offsets [m], ``(3,)`` (shared) or ``(N, 3)``; default 0.
            seed: Key of the sensor noise (:mod:`quadsim.physics.noise`); the step counter is ``s``.
            plant_seed: Key of the turbulence in the step (the Simulator's ``seed``).

        Returns:
            :class:`ClosedLoopRun`.

        Raises:
            ValueError: ``N`` differs from the number of drones of the per-drone parameters.
        """
        x0 = np.asarray(x0)
        n = x0.shape[1]
        if wind is None:
            u = np.zeros((3, n), self.dtype)
        else:
            w = np.asarray(wind, np.float64)
            u = (np.moveaxis(np.broadcast_to(w, (steps, n, 3)), -1, -2) if w.ndim == 3
                 else np.broadcast_to(w, (n, 3)).T)  # fmt: skip
        p = (np.zeros(3) if offset is None else np.asarray(offset, np.float64))
        p = p.T if p.ndim == 2 else p
        if self.params is not None:
            if self.params.shape[1] != n:
                raise ValueError(f"this loop has per-drone model parameters for "
                                 f"{self.params.shape[1]} drones; got {n}")  # fmt: skip
            p = np.concatenate([np.broadcast_to(p.reshape(3, -1), (3, n)), self.params])
        k0 = float(x0[self.rows["step"].start, 0])
        x, rec = self.rollout(x0, u, p, steps=steps, record_every=record_every, seed=seed,
                              step0=round(k0), seed2=plant_seed)  # fmt: skip
        if rec is None:
            rec = np.zeros((0, *x.shape), x.dtype)
        time = (k0 + record_every * np.arange(1, rec.shape[0] + 1)) * self.dt
        return ClosedLoopRun(x, time, rec, self.rows)


def compile_closed_loop(
    drone: Any, gains: Any, trajectory: Callable, dt: float | None = None,
    dtype: Any = np.float32, *, control: Callable | None = None,
    model: str = "first_principles", rotor_dynamics: bool = True,
    integrator: Callable | str = "rk4", world: Any = None, threads: int | None = None,
    ctrl_state: Any = DEFAULT_CTRL, command: str | None = None,
) -> ClosedLoop:  # fmt: skip
    """Trace and compile the closed loop (module docstring) for one drone type.

    Args:
        drone: Preset name or :class:`~quadsim.physics.params.Params`.
        gains: Controller gains record (``load_gains(..., drone=..., dt=dt)``).
        trajectory: Callable ``t -> Reference`` (:mod:`quadsim.loop.trajectories`).
        dt: Step [s] (default: ``gains.dt``; they must agree).
        dtype: ``np.float32`` or ``np.float64``.
        control: Controller (default: :func:`quadsim.loop.control.control`).
        model: Rotor-level quaternion plant model (``first_principles``).
        rotor_dynamics: Model the rotor speeds as states.
        integrator: Name in :data:`quadsim.physics.integrators.INTEGRATORS` or the function.
        world: :class:`~quadsim.physics.world.World` (ground, boxes, bounds, limits), or ``None``
            (default) for free flight.
        threads: Threads of the rollout (:func:`quadsim.engines.native.compile_rollout`).
        ctrl_state: One drone's controller state as a template (:func:`closed_loop_step`);
            default :func:`quadsim.loop.control.init_state`.
        command: What the controller's command is (:func:`quadsim.loop.brain.command_kind`).

    Returns:
        :class:`ClosedLoop`.

    Raises:
        ValueError: If ``dt`` and ``gains.dt`` differ, or the model is not rotor-level.
    """
    params = drone if isinstance(drone, Params) else load_params(drone)
    dt = float(gains.dt) if dt is None else float(dt)
    if not math.isclose(dt, float(gains.dt), rel_tol=1e-12):
        raise ValueError(f"dt = {dt} s differs from the gains' control period {gains.dt} s")
    integrator = INTEGRATORS[integrator] if isinstance(integrator, str) else integrator
    n_rot = params.mixing_matrix.shape[1]
    system = make_system(model, n_rot, rotor_dynamics, has_warmup(params))
    if system.n_cmd != n_rot or system.attitude != "quat":
        raise ValueError(f"the closed loop needs a rotor-level quaternion model "
                         f"(first_principles); got {model!r}")  # fmt: skip
    model_params = {k: getattr(params, k) for k in system.param_spec}
    F, rows, template = closed_loop_step(
        system, model_params, control or default_control, gains, trajectory,
        make_allocator(params), dt, integrator, dtype, world, ctrl_state=ctrl_state,
        command=command,
    )  # fmt: skip
    rollout = compile_rollout(F, dtype, threads=threads)
    return ClosedLoop(rollout, rows, template, system, dt, envelope(params).hover_rpm)


def compile_for_simulator(
    sim: Any, control: Callable, gains: Any, trajectory: Callable, *, sample: bool = True,
    threads: int | None = None, sens: Any = None, ctrl_state: Any = DEFAULT_CTRL,
    brain_state: Any = None, command: str | None = None, periods: Any = None,
    estimator: Any = None,
) -> ClosedLoop:  # fmt: skip
    """The closed loop around a :class:`~quadsim.engines.sim.Simulator`'s plant (compiled ``fly``).

    The plant is the simulator's: its model (``sim.system``), model parameters
    (``sim.model_params``; per-drone ones become inputs, :func:`per_drone_params`), integrator,
    world, Dryden turbulence (in the step, :func:`closed_loop_step`'s ``dryden``), step and dtype;
    the allocator is the default one of the nominal ``sim.drone`` and the gains are used as given,
    as in the Python loop. Eligibility (a quaternion rotor-level model, ...) is checked by
    :func:`quadsim.loop.paths.compiled_path_reason`, not here.

    Args:
        sim: The simulator.
        control: Controller ``(state, ref, gains, cstate) -> (command, cstate)``.
        gains: The controller's gains record.
        trajectory: Callable ``t -> Reference``.
        sample: Carry the log sample of the step before (:func:`closed_loop_step`).
        threads: Threads of the rollout (:func:`quadsim.engines.native.compile_rollout`).
        sens: The :class:`~quadsim.loop.brain.Sensors` read in the loop, or ``None``.
        ctrl_state: One drone's controller state as a template (:func:`closed_loop_step`);
            default :func:`quadsim.loop.control.init_state`.
        brain_state: One drone's brain state as the template instead (:func:`closed_loop_step`).
        command: What the controller's command is (:func:`quadsim.loop.brain.command_kind`).
        periods: :class:`~quadsim.loop.brain.Periods` (default:
        :func:`~quadsim.loop.brain.loop_periods`).
        estimator: The brain's estimator (:func:`closed_loop_step`), or ``None`` (the truth).

    Returns:
        :class:`ClosedLoop` (with per-drone parameters it runs exactly ``sim.n`` drones).
    """
    system = sim.system
    params = {k: sim.model_params[k] for k in system.param_spec}
    args = (system, traced_params(system, params), control, gains, trajectory, sim.drone,
            float(sim.dt), sim.integrator,
            np.dtype(sim.dtype), sim.world, sample, sens,
            "default" if ctrl_state is DEFAULT_CTRL else ctrl_state, brain_state, command,
            periods, sim.dryden, estimator)  # fmt: skip
    memo = native_memo.key("compile_for_simulator", *args)
    hit = native_memo.load(memo, threads)
    if hit is not None:  # the same inputs traced before: its library and layout
        rollout, (rows, template) = hit
    else:
        F, rows, template = closed_loop_step(
            system, params, control, gains, trajectory, make_allocator(sim.drone),
            float(sim.dt), sim.integrator, np.dtype(sim.dtype), sim.world, sample, sens=sens,
            gravity_vec=np.asarray(sim.drone.gravity_vec, np.float64), ctrl_state=ctrl_state,
            brain_state=brain_state, command=command, periods=periods,
            dryden=sim.dryden, estimator=estimator,
        )  # fmt: skip
        groups = (noise_groups(sens)
                  + ((("dryden", 5, 1),) if "gust_state" in rows else ()))  # fmt: skip
        rollout = compile_rollout(F, np.dtype(sim.dtype), threads=threads, noise=groups)
        native_memo.save(memo, rollout, (rows, template))
    hover = envelope(sim.drone).hover_rpm
    values = per_drone_params(system, params)[1]
    if periods is None:

        periods = loop_periods(float(sim.dt), gains, sens)
    return ClosedLoop(rollout, rows, template, system, float(sim.dt), hover, values, sens,
                      periods, estimator, sim.world)  # fmt: skip
