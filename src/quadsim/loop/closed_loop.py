r"""The closed loop compiled end to end: reference, controller, allocation and plant in one C step.

One step ``s`` of one drone, traced once with CasADi ``SX`` symbols and compiled by
:func:`quadsim.engines.native.compile_rollout` into a vectorised many-drone rollout (issue 10, item
2):

.. math::

    (\mathrm{out}_s, b_{s+1}) = \mathrm{brain}(s, x_s, o, b_s, z_s), \quad
    x_{s+1} = \mathrm{integrator}(\dot x = f(x, Ω^{cmd}_s, p, v_{wind}), x_s, dt),

where ``brain`` is :func:`quadsim.loop.brain.make_brain`'s per-step function (reference, sensors,
controller and allocation, each at its period; the one :func:`quadsim.loop.flight.fly`'s other loops
run), ``b`` its state (:class:`~quadsim.loop.brain.BrainState`) and ``Ω^{cmd}_s`` the rotor command
it outputs. Nothing is re-written: the trajectory's ``__call__``, the controller, the
allocation and the sensor models run on :class:`quadsim.physics._symbolic.SymArray` (their array-API
code path, element by element on CasADi scalars), and the plant is the model's ``deriv`` and the
integrator on :data:`quadsim.physics._array.CASADI_OPS`, as the native
:class:`~quadsim.engines.sim.Simulator` builds it.

Compiled state of one drone (structure of arrays, drone index last, see :attr:`ClosedLoop.rows`)::

    x = [plant state (system.size) | world flags (5, with a world) | brain state (its leaves
         flattened: ``j``, ``ctrl_<field>``, ``imu_gyro_bias``, ``imu_accel_bias``,
         ``imu_vel``, ``mocap_pos_buf``, ``mocap_quat_buf``, ``mocap_count``, ``held_<output>``,
         as present) | s | cmd_rpm (n_rotors) | cmd_wrench (4) | saturated | sample outputs
         (``sample=True``) | gyro, accel (3 + 3, with an IMU) | mocap_pos (3, with motion
         capture) | the estimator's outputs (``est_*``, with an estimator;
         :func:`quadsim.loop.brain.brain_outputs`)]
    u = wind [m/s], world frame (3)          held over a call, or one per step
    p = [reference offset o [m] (3) | per-drone model parameters (n_var)]
                                              shared (3 + n_var,) or per drone (3 + n_var, N)
    z = standard normals: IMU (12) | motion capture (6), drawn in C for (seed, drone, s)

The controller state is a NamedTuple (or tuple, nested) of arrays, one array, or ``None``
(:func:`ctrl_leaves`); like every leaf of the brain state it is stored as floats of the loop's
dtype, so integer and boolean fields come back as floats (0/1 for booleans), which ``where`` and
arithmetic treat alike. :meth:`ClosedLoop.initial_state` takes a per-drone initial state.

``s`` is the step counter (a float: exact to 2^24 steps in float32, 2^53 in float64); the rows
after it are outputs only: the command computed at step ``s - 1`` from ``x_{s-1}`` (so a
recorded sample holds ``x_{s}`` and the command that led to it). With a
:class:`~quadsim.physics.world.World`, :func:`quadsim.physics.world.apply` (ground contact, crashes,
faults) runs after the integrator as in the Simulator, and its flags ``landed, crashed, crash_time,
fault_step, fault_code`` (floats: 0/1, s, step index, code) follow the plant state.

**Per-drone model parameters.** ``params`` entries may carry a leading drone axis (as
``Simulator(params=...)`` gives them, e.g. a mass per drone). Entries equal for every drone stay
numeric constants that CasADi folds; each entry that differs becomes one row of ``p`` after the
offset (:func:`per_drone_params` lists them, ``quadsim.engines.sim_native`` does the same for the
plant alone). The controller gains and the allocator stay the nominal drone's, as in
:func:`quadsim.loop.flight.fly`'s Python loop.

**Wind.** ``u`` is the mean wind (held over a call, per drone). With the Simulator's Dryden
turbulence (:func:`compile_for_simulator`), the step carries the gust state (5) and advances it
by :func:`quadsim.physics.wind.dryden_step` on the normals ``(Simulator seed, "dryden", s, drone)``
drawn in C, adding the gust, turned to the world along the mean's direction, to ``u``: the
Simulator's own process, so a gusty flight passes no per-step input.

**Sensors** are read inside the step by the brain (:func:`quadsim.physics.sensors.imu_measure`,
:func:`quadsim.physics.sensors.mocap_measure`, traced), from the normals ``z`` of
:func:`quadsim.physics.noise.normals` ``(seed, "imu" | "mocap", s, drone)``, which the C loop draws
itself (:func:`quadsim.engines.native.compile_rollout`'s ``noise``): a reading depends on neither
the batch nor the chunking.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ..physics._array import CASADI_OPS
from ..physics._symbolic import SymArray, symbolic
from .brain import ctrl_leaves, noise_groups

__all__ = [
    "ClosedLoop",
    "ClosedLoopRun",
    "closed_loop_step",
    "compile_closed_loop",
    "compile_for_simulator",
    "ctrl_leaves",
    "noise_groups",
    "per_drone_params",
]

_INIT = object()  # closed_loop_step's default controller state: quadsim.loop.control.init_state


class ClosedLoopRun(NamedTuple):
    """What :meth:`ClosedLoop.run` returns (recorded arrays are sample-major, then drone).

    Attributes:
        x: Final compiled states ``(n_x, N)``.
        time: Times of the samples ``(n_rec,)`` [s].
        fields: Recorded fields by name (the rows of :attr:`ClosedLoop.rows`), ``(n_rec, N,
            size)``: the plant fields (``pos``, ``quat``, ``vel``, ``ang_vel``, ``rotor_vel``),
            the world flags, the controller state (``ctrl_*``), ``step`` and the command of the
            step before each sample (``cmd_rpm``, ``cmd_wrench``, ``saturated``);
            ``saturated``, ``landed`` and ``crashed`` are booleans ``(n_rec, N)``.
    """

    x: np.ndarray
    time: np.ndarray
    fields: dict


def per_drone_params(system: Any, params: dict) -> tuple[list[tuple], np.ndarray | None]:
    """The model-parameter entries that differ between drones, in the order of ``p[3:]``.

    Args:
        system: The plant's :class:`~quadsim.physics.systems.System`.
        params: Model parameters by name; an entry with more dimensions than its trailing shape
            in ``system.param_spec`` has a leading drone axis ``N``.

    Returns:
        ``(varying, values)``: ``(name, index, column)`` of every entry that differs between
        drones (``index`` into the trailing shape, ``column`` its ``(N,)`` values), and those
        columns stacked ``(n_var, N)`` (float64), or ``None`` when every drone is the same.
    """
    from ..engines.sim_native import varying_params

    per_drone = tuple(k for k in system.param_spec
                      if np.ndim(params[k]) > len(system.param_spec[k]))  # fmt: skip
    varying = varying_params(system, params, per_drone)
    values = np.stack([col for _, _, col in varying]) if varying else None
    return varying, values


def closed_loop_step(
    system: Any, params: dict, control: Callable, gains: Any, trajectory: Callable,
    allocator: Any, dt: float, integrator: Callable, dtype: Any = np.float64,
    world: Any = None, sample: bool = False, *, sens: Any = None,
    gravity_vec: Any = (0.0, 0.0, -9.81), ctrl_state: Any = _INIT, brain_state: Any = None,
    command: str | None = None, periods: Any = None, dryden: Any = None, estimator: Any = None,
) -> tuple[Any, dict[str, slice], Any]:  # fmt: skip
    """The one-drone closed-loop step as a CasADi ``SX`` Function (see the module docstring).

    The step is :func:`quadsim.loop.brain.make_brain`'s function traced on CasADi scalars, then the
    plant (the model, the integrator, the world).

    Args:
        system: The plant's :class:`~quadsim.physics.systems.System` (a rotor-level model).
        params: Model parameters by name: one drone's, or with a leading drone axis where they
            differ per drone (:func:`per_drone_params`; those entries become ``p[3:]``).
        control: Controller ``(state, ref, gains, cstate) -> (command, cstate)``: the command is
            a wrench (4) or rotor speeds (n_rotors) [RPM] (``command``).
        gains: The controller's gains record (shared by all drones).
        trajectory: Callable ``t -> Reference``.
        allocator: :class:`~quadsim.physics.rotors.Allocator` of the drone.
        dt: Physics step [s].
        integrator: One of :mod:`quadsim.physics.integrators`.
        dtype: Nominal dtype of the trace (``finfo``-dependent tolerances follow it).
        world: :class:`~quadsim.physics.world.World`, or ``None`` for free flight.
        sample: Also output the whole sample of the step, as :func:`quadsim.loop.flight.fly` logs
            it: the plant state and world flags *before* the step (``prev_`` + their names),
            the reference (``ref_pos``, ``ref_vel``, ``ref_yaw``) and the allocation's
            ``lost_wrench``. A record taken after step ``s`` then holds the log sample of
            ``t_{s-1}`` (:attr:`ClosedLoop.sample`).
        sens: The :class:`~quadsim.loop.brain.Sensors` read in the loop (needs ``sample``):
            their readings (:func:`quadsim.loop.brain.brain_outputs`: ``gyro`` [rad/s],
            ``accel`` [m/s²], ``mocap_pos`` [m], ``baro_alt``, ``gnss_*``, ``battery_*`` with a
            power chain, each part's ``<name>_<output>``) are outputs; ``None``: no sensors.
        gravity_vec: Gravity [m/s²] for the accelerometer.
        ctrl_state: The controller state of one drone, as a template of its structure and
            shapes (values unused; :func:`ctrl_leaves`); ``None`` for a stateless controller;
            default :func:`quadsim.loop.control.init_state` ``(gains, ())``.
        brain_state: One drone's :class:`~quadsim.loop.brain.BrainState` as the template instead
            (it carries the controller state); default built by
            :func:`~quadsim.loop.brain.brain_init`.
        command: What the controller's command is (:func:`quadsim.loop.brain.command_kind`).
        periods: :class:`~quadsim.loop.brain.Periods`; default
            :func:`~quadsim.loop.brain.loop_periods` of ``dt``, the gains and the sensors.
        dryden: :class:`~quadsim.physics.wind.DrydenDiscrete` at ``dt`` for Dryden turbulence in the
            step: the state ``gust_state`` (5) advances by :func:`quadsim.physics.wind.dryden_step`
            on the normals ``(plant seed, "dryden", s, drone)`` (noise group key 1) and the gust,
            turned to the world by :func:`quadsim.physics.wind.gust_to_world` along the mean wind
            ``u`` (``+x`` when calm), is added to it; with ``sample``, output ``prev_gust_state``.
        estimator: The brain's estimator (:func:`quadsim.loop.brain.make_brain`), traced too: its
            state joins the brain state's rows (``est_*``) and its outputs follow the
            sensors' (needs ``sample``).

    Returns:
        ``(F, rows, template)``: ``F(x, u, p[, z]) -> x_next`` (``z`` with a sensor, its groups
        :func:`noise_groups`), the row slices of ``x`` by field name and one drone's brain
        state template.

    Raises:
        ValueError: ``imu`` or ``mocap`` without ``sample``, a command of another size, a
            period that is not a whole number of steps, or a controller that returns a state of
            another structure.
        TypeError: Whatever the controller raises when it cannot be traced.
    """
    import casadi as cs

    from ..physics.systems import Env
    from ..physics.world import Status
    from ..physics.world import apply as world_apply
    from .brain import (
        Sensors,
        brain_init,
        brain_outputs,
        first_drone,
        loop_periods,
        make_brain,
        state_leaves,
        tree_rebuild,
    )
    from .control import init_state

    sens = Sensors() if sens is None else sens
    sensing = [sens.imu, sens.mocap, sens.baro, sens.gnss, sens.power, *sens.parts, estimator]
    if any(x is not None for x in sensing) and not sample:
        raise ValueError("sensors and an estimator need sample=True (they read the sample's "
                         "rows)")  # fmt: skip
    if periods is None:
        periods = loop_periods(dt, gains, sens)
    nx, nc = system.size, system.n_cmd
    if brain_state is None:
        cstate0 = init_state(gains, ()) if ctrl_state is _INIT else ctrl_state
        lead = [np.asarray(leaf)[None] for _, leaf in ctrl_leaves(cstate0)]
        ctrl = tree_rebuild(cstate0, iter(lead))
        brain_state = first_drone(brain_init(
            1, ctrl, np.zeros((1, 3)), np.array([[0.0, 0.0, 0.0, 1.0]]), np.zeros((1, 3)),
            sens=sens, dt=dt, periods=periods, n_rotors=nc, estimator=estimator,
            world=world))  # fmt: skip
    bfields = [(name, tuple(np.shape(v))) for name, v in state_leaves(brain_state)]
    rows: dict[str, slice] = {}
    at = 0
    for name, size in system.fields:
        rows[name], at = slice(at, at + size), at + size
    for name in Status._fields if world is not None else ():
        rows[name], at = slice(at, at + 1), at + 1
    if dryden is not None:
        rows["gust_state"], at = slice(at, at + 5), at + 5
    for name, shape in bfields:
        size = math.prod(shape)
        rows[name], at = slice(at, at + size), at + size
    rows["step"], at = slice(at, at + 1), at + 1
    outputs = [("cmd_rpm", nc), ("cmd_wrench", 4), ("saturated", 1)]
    if sample:
        outputs += [("prev_" + name, size) for name, size in system.fields]
        outputs += [("prev_" + name, 1) for name in Status._fields if world is not None]
        outputs += [("ref_pos", 3), ("ref_vel", 3), ("ref_yaw", 1), ("lost_wrench", 4)]
        if dryden is not None:
            outputs.append(("prev_gust_state", 5))
    sensed = brain_outputs(sens, estimator)
    outputs += sensed
    for name, size in outputs:
        rows[name], at = slice(at, at + size), at + size
    n_x = at

    varying, _ = per_drone_params(system, params)
    X, U = cs.SX.sym("x", n_x), cs.SX.sym("u", 3)
    P = cs.SX.sym("p", 3 + len(varying))
    n_s = sum(count for _, count in noise_groups(sens))
    n_z = n_s + (5 if dryden is not None else 0)
    Z = cs.SX.sym("z", n_z)
    xs = [X[i] for i in range(n_x)]

    def sym(name: str, shape: tuple[int, ...] | None = None) -> SymArray:
        a = symbolic(xs[rows[name]], dtype)
        return a if shape is None else SymArray(a.a.reshape(shape), dtype)

    k = xs[rows["step"].start]
    bs = tree_rebuild(brain_state, iter([sym(name, shape) for name, shape in bfields]))
    brain = make_brain(trajectory, control, gains, allocator, sens,
                       np.asarray(gravity_vec, np.float64), dt, command, periods, estimator,
                       world=world)  # fmt: skip
    out, bs1 = brain(SymArray(k, dtype), sym("pos"), sym("quat"), sym("vel"), sym("ang_vel"),
                     symbolic([P[0], P[1], P[2]], dtype), bs,
                     symbolic([Z[i] for i in range(n_s)], dtype))  # fmt: skip
    got = [(name, tuple(np.shape(getattr(v, "a", v)))) for name, v in state_leaves(bs1)]
    if got != bfields:
        raise ValueError(f"the controller returned a state of another structure: "
                         f"{[g for g in got if g not in bfields]} instead of "
                         f"{[b for b in bfields if b not in got]}")  # fmt: skip
    rpm = _entries(out["cmd_rpm"], dtype)

    from ..engines.sim_native import kernel_params

    p = kernel_params(system, params, varying, [P[3 + i] for i in range(len(varying))])
    wind, gust1 = (U[0], U[1], U[2]), []
    if dryden is not None:  # the Simulator's Dryden process, one step (its state before it)
        wind, gust1 = _gusty_wind(U, sym("gust_state"), [Z[n_s + i] for i in range(5)], dryden,
                                  dtype)  # fmt: skip
    env = Env(wind=wind, dist_f=None, dist_t=None)
    x0 = tuple(xs[:nx])
    x1 = integrator(lambda y: system.deriv(y, tuple(rpm), p, CASADI_OPS, env), x0, dt, system,
                    CASADI_OPS)  # fmt: skip
    flags = []
    if world is not None:
        st = Status(*(xs[rows[name].start] for name in Status._fields))
        x1, st = world_apply(x0, x1, st, k, (k + 1) * dt, world, system.slices(), CASADI_OPS)
        flags = list(st)
    b1 = [e for _, f in state_leaves(bs1) for e in _entries(f, dtype)]
    extra = []  # the outputs after the command, in the order of ``rows``
    if sample:
        n_flags = len(Status._fields) if world is not None else 0
        extra = [*x0, *xs[nx:nx + n_flags]]  # fmt: skip
        extra += [e for key in ("ref_pos", "ref_vel", "ref_yaw", "lost_wrench")
                  for e in _entries(out[key], dtype)]  # fmt: skip
        if dryden is not None:
            extra += xs[rows["gust_state"]]
    extra += [e for key, _ in sensed for e in _entries(out[key], dtype)]
    head = [e for key in ("cmd_wrench", "saturated") for e in _entries(out[key], dtype)]
    outv = cs.vertcat(*x1, *flags, *gust1, *b1, k + 1, *rpm, *head, *extra)
    F = cs.Function("quadsim_closed_loop", [X, U, P, *([Z] if n_z else [])], [outv])
    return F, rows, brain_state


def _gusty_wind(U: Any, state: SymArray, noise: list, disc: Any, dtype: Any) -> tuple:
    """World wind of one step with Dryden turbulence: ``(wind (3 SX), next gust state (5 SX))``.

    The mean wind ``U`` plus the gust of :func:`quadsim.physics.wind.dryden_step` rotated by
    :func:`quadsim.physics.wind.gust_to_world` along the mean's horizontal direction (``+x`` when
    calm, as the Simulator sets it up).
    """
    import casadi as cs

    from ..physics.wind import dryden_step, gust_to_world

    x1, gust = dryden_step(state, symbolic(noise, dtype), disc)
    norm = cs.sqrt(U[0] * U[0] + U[1] * U[1])
    calm = norm < 1e-9
    safe = cs.if_else(calm, 1.0, norm)
    d = symbolic([cs.if_else(calm, 1.0, U[0] / safe), cs.if_else(calm, 0.0, U[1] / safe)], dtype)
    g = gust_to_world(gust, d, unit=True).entries()
    return (U[0] + g[0], U[1] + g[1], U[2] + g[2]), x1.entries()


def _entries(a: Any, dtype: Any) -> list[Any]:
    """CasADi scalars of a traced array (a :class:`SymArray`, or numbers that stayed numbers)."""
    return (a if isinstance(a, SymArray) else SymArray(np.asarray(a, np.float64), dtype)).entries()


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
        from .brain import Periods, Sensors

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
        ctrl_state: Any = None, brain_state: Any = None,
    ) -> np.ndarray:  # fmt: skip
        """Compiled states ``(n_x, n)`` at step 0.

        Each field broadcasts to ``(n, size)`` (rotor speeds default to hover). The rest is the
        brain's state (:class:`~quadsim.loop.brain.BrainState`): ``brain_state`` per drone (leaves
        ``(n, ...)``, of the structure the loop was traced with), or
        :func:`~quadsim.loop.brain.brain_init` of the start pose (the IMU's turn-on biases of seed
        0, the motion-capture delay line full of the start position) with the controller state
        ``ctrl_state`` (leaves ``(n, ...)`` or broadcasting to it: a leading axis of 1, or a
        scalar), or zero.

        Raises:
            ValueError: ``ctrl_state`` or ``brain_state`` of another structure or shape.
        """
        from ..physics._array import to_numpy
        from .brain import brain_init, state_leaves, tree_rebuild

        X = np.zeros((self.n_x, n))
        given = {"pos": pos, "quat": quat, "vel": vel, "ang_vel": ang_vel,
                 "rotor_vel": self._hover if rotor_vel is None else rotor_vel}  # fmt: skip
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
        leaves = state_leaves(brain_state)
        names = [name for name, _ in state_leaves(self._template)]
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
            return ClosedLoopRun(x, np.zeros(0), {})
        time = (k0 + record_every * np.arange(1, rec.shape[0] + 1)) * self.dt
        fields = {name: np.swapaxes(rec[:, s, :], 1, 2) for name, s in self.rows.items()}
        for name in ("saturated", "landed", "crashed", "prev_landed", "prev_crashed"):
            if name in fields:
                fields[name] = fields[name][..., 0] > 0.5
        return ClosedLoopRun(x, time, fields)


def compile_closed_loop(
    drone: Any, gains: Any, trajectory: Callable, dt: float | None = None,
    dtype: Any = np.float32, *, control: Callable | None = None,
    model: str = "first_principles", rotor_dynamics: bool = True,
    integrator: Callable | str = "rk4", world: Any = None, threads: int | None = None,
    ctrl_state: Any = _INIT, command: str | None = None,
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
        command: What the controller's command is (:func:`quadsim.loop.flight.command_kind`).

    Returns:
        :class:`ClosedLoop`.

    Raises:
        ValueError: If ``dt`` and ``gains.dt`` differ, or the model is not rotor-level.
    """
    from ..engines.native import compile_rollout
    from ..physics.envelope import envelope
    from ..physics.integrators import INTEGRATORS
    from ..physics.params import Params, load_params
    from ..physics.rotors import make_allocator
    from ..physics.systems import make_system
    from .control import control as default_control

    params = drone if isinstance(drone, Params) else load_params(drone)
    dt = float(gains.dt) if dt is None else float(dt)
    if not math.isclose(dt, float(gains.dt), rel_tol=1e-12):
        raise ValueError(f"dt = {dt} s differs from the gains' control period {gains.dt} s")
    integrator = INTEGRATORS[integrator] if isinstance(integrator, str) else integrator
    n_rot = params.mixing_matrix.shape[1]
    system = make_system(model, n_rot, rotor_dynamics)
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
    threads: int | None = None, sens: Any = None, ctrl_state: Any = _INIT,
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
    from ..engines.native import compile_rollout
    from ..physics.envelope import envelope
    from ..physics.rotors import make_allocator

    system = sim.system
    params = {k: sim.model_params[k] for k in system.param_spec}
    F, rows, template = closed_loop_step(
        system, params, control, gains, trajectory, make_allocator(sim.drone), float(sim.dt),
        sim.integrator, np.dtype(sim.dtype), sim.world, sample, sens=sens,
        gravity_vec=np.asarray(sim.drone.gravity_vec, np.float64), ctrl_state=ctrl_state,
        brain_state=brain_state, command=command, periods=periods,
        dryden=sim.dryden, estimator=estimator,
    )  # fmt: skip
    groups = (noise_groups(sens)
              + ((("dryden", 5, 1),) if "gust_state" in rows else ()))  # fmt: skip
    rollout = compile_rollout(F, np.dtype(sim.dtype), threads=threads, noise=groups)
    hover = envelope(sim.drone).hover_rpm
    values = per_drone_params(system, params)[1]
    if periods is None:
        from .brain import loop_periods

        periods = loop_periods(float(sim.dt), gains, sens)
    return ClosedLoop(rollout, rows, template, system, float(sim.dt), hover, values, sens,
                      periods, estimator, sim.world)  # fmt: skip
