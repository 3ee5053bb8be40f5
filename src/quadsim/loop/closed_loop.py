r"""The closed loop traced end to end: reference, controller, allocation and plant in one C step.

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

Compiled state of one drone (structure of arrays, drone index last, see
:attr:`quadsim.loop.closed_loop_native.ClosedLoop.rows`)::

    x = [plant state (system.size) | world flags (5, with a world) | brain state (its leaves
         flattened, :func:`quadsim.loop.brain.state_leaves`: ``j``, ``ctrl_<field>``,
         ``held_<output>``, ``est_*``, ``battery``, then each sensor part's by its name:
         ``imu_bias_gyro_bias``, ``imu_vel``, ``mocap_line_pos_buf``, ``mocap_line_count``,
         ``<part>_held_<i>``, ..., as present) | s | cmd_rpm (n_rotors) | cmd_wrench (4) |
         saturated | sample outputs (``sample=True``) | gyro, accel (3 + 3, with an IMU) |
         mocap_pos (3, with motion capture) | the estimator's outputs (``est_*``, with an
         estimator; :func:`quadsim.loop.brain.brain_outputs`)]
    u = wind [m/s], world frame (3)          held over a call, or one per step
    p = [reference offset o [m] (3) | per-drone model parameters (n_var)]
                                              shared (3 + n_var,) or per drone (3 + n_var, N)
    z = standard normals: each sensor part's streams (IMU 12 | motion capture 6 | ...),
        drawn in C for (seed, drone, s)

The controller state is a NamedTuple (or tuple, nested) of arrays, one array, or ``None``
(:func:`ctrl_leaves`); like every leaf of the brain state it is stored as floats of the loop's
dtype, so integer and boolean fields come back as floats (0/1 for booleans), which ``where`` and
arithmetic treat alike. :meth:`quadsim.loop.closed_loop_native.ClosedLoop.initial_state` takes a
per-drone initial state.

``s`` is the step counter (a float: exact to 2^24 steps in float32, 2^53 in float64); the rows
after it are outputs only: the command computed at step ``s - 1`` from ``x_{s-1}`` (so a
recorded sample holds ``x_{s}`` and the command that led to it). With a
:class:`~quadsim.physics.world.World`, :func:`quadsim.physics.world.apply` (ground contact, crashes,
faults) runs after the integrator as in the Simulator, and its flags ``landed, crashed, crash_time,
fault_step, fault_code`` (floats: 0/1, s, step index, code) follow the plant state.

**Set points and open loop.** Without a trajectory the controller's reference is an input, a
set point given each step after the wind (``ref_inputs``); without a controller there is no
brain (no sensors, estimator, controller, allocation or brain state) and the rotor command
[RPM] itself is the input after the wind, as ``Simulator.step`` takes it. The Gymnasium envs'
compiled step (:mod:`quadsim.app.envs.compiled`) runs this same step so: its thrust levels'
inner loop as the controller with the agent's action as the set point, ``rotor_speeds`` open
loop.

**Per-drone model parameters.** ``params`` entries may carry a leading drone axis (as
``Simulator(params=...)`` gives them, e.g. a mass per drone). Entries equal for every drone stay
numeric constants that CasADi folds; each entry that differs becomes one row of ``p`` after the
offset (:func:`per_drone_params` lists them, ``quadsim.engines.sim_native`` does the same for the
plant alone). The controller gains and the allocator stay the nominal drone's, as in
:func:`quadsim.loop.flight.fly`'s Python loop.

**Wind.** ``u`` is the mean wind (held over a call, per drone). With the Simulator's Dryden
turbulence (:func:`quadsim.loop.closed_loop_native.compile_for_simulator`), the step carries the
gust state (5) and advances it
by :func:`quadsim.physics.wind.dryden_step` on the normals ``(Simulator seed, "dryden", s, drone)``
drawn in C, adding the gust, turned to the world along the mean's direction, to ``u``: the
Simulator's own process, so a gusty flight passes no per-step input.

**Sensors** are read inside the step by the brain (every sensor part's ``measure``, traced:
:mod:`quadsim.loop.sensing`), from the normals ``z`` of
:func:`quadsim.physics.noise.normals` ``(seed, "imu" | "mocap" | ..., s, drone)``, which the C
loop draws itself (:func:`quadsim.engines.native.compile_rollout`'s ``noise``): a reading
depends on neither the batch nor the chunking.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..engines.sim_native import kernel_params, varying_params
from ..engines.stepping import make_step
from ..physics._array import CASADI_OPS
from ..physics._symbolic import SymArray, symbolic
from ..physics.systems import Env
from ..physics.wind import dryden_step, gust_to_world
from ..physics.world import Status
from .brain import (
    Sensors,
    brain_init,
    brain_outputs,
    ctrl_leaves,
    first_drone,
    loop_periods,
    make_brain,
    noise_groups,
    state_leaves,
    tree_rebuild,
)
from .control import init_state

__all__ = ["DEFAULT_CTRL", "closed_loop_step", "per_drone_params"]

DEFAULT_CTRL = object()
"""``closed_loop_step``'s default controller state: :func:`quadsim.loop.control.init_state`."""


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
    per_drone = tuple(k for k in system.param_spec
                      if np.ndim(params[k]) > len(system.param_spec[k]))  # fmt: skip
    varying = varying_params(system, params, per_drone)
    values = np.stack([col for _, _, col in varying]) if varying else None
    return varying, values


def closed_loop_step(
    system: Any, params: dict, control: Callable, gains: Any, trajectory: Callable,
    allocator: Any, dt: float, integrator: Callable, dtype: Any = np.float64,
    world: Any = None, sample: bool = False, *, sens: Any = None,
    gravity_vec: Any = (0.0, 0.0, -9.81), ctrl_state: Any = DEFAULT_CTRL, brain_state: Any = None,
    command: str | None = None, periods: Any = None, dryden: Any = None, estimator: Any = None,
    ref_inputs: int = 0,
) -> tuple[Any, dict[str, slice], Any]:  # fmt: skip
    """The one-drone closed-loop step as a CasADi ``SX`` Function (see the module docstring).

    The step is :func:`quadsim.loop.brain.make_brain`'s function traced on CasADi scalars, then the
    plant (the model, the integrator, the world).

    Args:
        system: The plant's :class:`~quadsim.physics.systems.System` (a rotor-level model).
        params: Model parameters by name: one drone's, or with a leading drone axis where they
            differ per drone (:func:`per_drone_params`; those entries become ``p[3:]``).
        control: Controller ``(state, ref, gains, cstate) -> (command, cstate)``: the command is
            a wrench (4) or rotor speeds (n_rotors) [RPM] (``command``); ``None``: open loop.
        gains: The controller's gains record (shared by all drones).
        trajectory: Callable ``t -> Reference``; ``None``: a set point (module docstring).
        allocator: :class:`~quadsim.physics.rotors.Allocator` of the drone.
        dt: Physics step [s].
        integrator: One of :mod:`quadsim.physics.integrators`.
        dtype: Nominal dtype of the trace (``finfo``-dependent tolerances follow it).
        world: :class:`~quadsim.physics.world.World`, or ``None`` for free flight.
        sample: Also output the whole sample of the step, as :func:`quadsim.loop.flight.fly` logs
            it: the plant state and world flags *before* the step (``prev_`` + their names),
            the reference (``ref_pos``, ``ref_vel``, ``ref_yaw``) and the allocation's
            ``lost_wrench``. A record taken after step ``s`` then holds the log sample of
            ``t_{s-1}`` (:attr:`quadsim.loop.closed_loop_native.ClosedLoop.sample`).
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
        ref_inputs: Size of the set point among the inputs (with ``trajectory=None``).

    Returns:
        ``(F, rows, template)``: ``F(x, u, p[, z]) -> x_next`` (``z`` with a sensor, its groups
        :func:`noise_groups`; ``u``: the wind, then any set point or rotor command), the row
        slices of ``x`` by field name and one drone's brain state template (``None`` open loop).

    Raises:
        ValueError: ``imu`` or ``mocap`` without ``sample``, a command of another size, a
            period that is not a whole number of steps, a controller that returns a state of
            another structure, no trajectory and no set point, or a sample without a brain.
        TypeError: Whatever the controller raises when it cannot be traced.
    """
    import casadi as cs

    if control is None:
        return _open_loop_step(system, params, dt, integrator, dtype, world, sample)
    sens = Sensors() if sens is None else sens
    n_ref = _checked_inputs(sens, estimator, sample, trajectory, ref_inputs)
    if periods is None:
        periods = loop_periods(dt, gains, sens)
    if brain_state is None:
        brain_state = _brain_template(gains, ctrl_state, sens, dt, periods, system.n_cmd,
                                      estimator, world)  # fmt: skip
    bfields = [(name, tuple(np.shape(v))) for name, v in state_leaves(brain_state, sens)]
    sensed = brain_outputs(sens, estimator)
    rows, n_x = _rows(system, world, dryden, bfields, sample, sensed)
    varying, _ = per_drone_params(system, params)
    X, U = cs.SX.sym("x", n_x), cs.SX.sym("u", 3 + n_ref)
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
                     symbolic([Z[i] for i in range(n_s)], dtype),
                     ref=symbolic([U[3 + i] for i in range(n_ref)], dtype) if n_ref else None)
    got = [(name, tuple(np.shape(getattr(v, "a", v)))) for name, v in state_leaves(bs1, sens)]
    if got != bfields:
        raise ValueError(f"the controller returned a state of another structure: "
                         f"{[g for g in got if g not in bfields]} instead of "
                         f"{[b for b in bfields if b not in got]}")  # fmt: skip
    rpm = _entries(out["cmd_rpm"], dtype)
    gust = None if dryden is None else (sym("gust_state"), [Z[n_s + i] for i in range(5)], dryden)
    p = kernel_params(system, params, varying, [P[3 + i] for i in range(len(varying))])
    x1, flags, gust1 = _plant(system, p, xs, rows, rpm, U, gust, integrator, world, k, dt, dtype)
    b1 = [e for _, f in state_leaves(bs1) for e in _entries(f, dtype)]
    extra = _outputs(out, xs, rows, system, world, dryden, sample, sensed, dtype)
    outv = cs.vertcat(*x1, *flags, *gust1, *b1, k + 1, *rpm, *extra)
    F = cs.Function("quadsim_closed_loop", [X, U, P, *([Z] if n_z else [])], [outv])
    return F, rows, brain_state


def _checked_inputs(sens: Any, estimator: Any, sample: bool, trajectory: Any,
                    ref_inputs: int) -> int:  # fmt: skip
    """The size of the set point among the inputs (0 with a trajectory), after checking that
    sensors and an estimator come with the sample and a step without a trajectory with a set
    point (:func:`closed_loop_step`'s ``ValueError``)."""  # noqa: D205, D209
    sensing = [sens.imu, sens.mocap, sens.baro, sens.gnss, sens.power, *sens.parts, estimator]
    if any(x is not None for x in sensing) and not sample:
        raise ValueError("sensors and an estimator need sample=True (they read the sample's "
                         "rows)")  # fmt: skip
    if trajectory is not None:
        return 0
    if int(ref_inputs) < 1:
        raise ValueError(f"without a trajectory the set point is an input: ref_inputs must be "
                         f">= 1; got {ref_inputs!r}")  # fmt: skip
    return int(ref_inputs)


def _open_loop_step(system: Any, params: dict, dt: float, integrator: Callable, dtype: Any,
                    world: Any, sample: bool) -> tuple[Any, dict[str, slice], None]:  # fmt: skip
    """:func:`closed_loop_step` without a brain: the plant, its world and the step counter, on
    the rotor command given among the inputs (``u = [wind (3) | cmd_rpm (n_rotors)]``); the
    rows are the plant state, the world's flags, ``step`` and the output ``cmd_rpm``."""  # noqa: D205, D209
    import casadi as cs

    if sample:
        raise ValueError("a step without a brain has no sample (control=None needs sample=False)")
    rows, n_x = _rows(system, world, None, [], False, [], brain=False)
    varying, _ = per_drone_params(system, params)
    X, U = cs.SX.sym("x", n_x), cs.SX.sym("u", 3 + system.n_cmd)
    P = cs.SX.sym("p", 3 + len(varying))
    xs = [X[i] for i in range(n_x)]
    k, rpm = xs[rows["step"].start], [U[3 + i] for i in range(system.n_cmd)]
    p = kernel_params(system, params, varying, [P[3 + i] for i in range(len(varying))])
    x1, flags, _ = _plant(system, p, xs, rows, rpm, U, None, integrator, world, k, dt, dtype)
    F = cs.Function("quadsim_open_loop", [X, U, P], [cs.vertcat(*x1, *flags, k + 1, *rpm)])
    return F, rows, None


def _outputs(out: dict, xs: list, rows: dict, system: Any, world: Any, dryden: Any,
             sample: bool, sensed: list, dtype: Any) -> list:  # fmt: skip
    """The step's outputs after the rotor command, in the order of ``rows``: the wrench and
    saturation, with ``sample`` the sample's state, flags, reference, lost wrench and gust
    state (all before the step), then the sensors' and estimator's outputs."""  # noqa: D205, D209
    extra = [e for key in ("cmd_wrench", "saturated") for e in _entries(out[key], dtype)]
    if sample:
        n_flags = len(Status._fields) if world is not None else 0
        extra += xs[:system.size + n_flags]
        extra += [e for key in ("ref_pos", "ref_vel", "ref_yaw", "lost_wrench")
                  for e in _entries(out[key], dtype)]  # fmt: skip
        if dryden is not None:
            extra += xs[rows["gust_state"]]
    return extra + [e for key, _ in sensed for e in _entries(out[key], dtype)]


def _brain_template(gains: Any, ctrl_state: Any, sens: Any, dt: float, periods: Any,
                    n_rotors: int, estimator: Any, world: Any) -> Any:  # fmt: skip
    """One drone's brain state as the step's template, from the controller state ``ctrl_state``
    (default: :func:`quadsim.loop.control.init_state` of the gains)."""  # noqa: D205, D209
    cstate0 = init_state(gains, ()) if ctrl_state is DEFAULT_CTRL else ctrl_state
    lead = [np.asarray(leaf)[None] for _, leaf in ctrl_leaves(cstate0)]
    ctrl = tree_rebuild(cstate0, iter(lead))
    return first_drone(brain_init(
        1, ctrl, np.zeros((1, 3)), np.array([[0.0, 0.0, 0.0, 1.0]]), np.zeros((1, 3)),
        sens=sens, dt=dt, periods=periods, n_rotors=n_rotors, estimator=estimator,
        world=world))  # fmt: skip


def _rows(system: Any, world: Any, dryden: Any, bfields: list, sample: bool,
          sensed: list, brain: bool = True) -> tuple[dict[str, slice], int]:  # fmt: skip
    """The rows of the step's state by field, and their count: the plant state, the world's
    flags, the gust state, the brain state, the step, then the outputs (without a ``brain``
    only the rotor command)."""  # noqa: D205, D209
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
    outputs = [("cmd_rpm", system.n_cmd)]
    if brain:
        outputs += [("cmd_wrench", 4), ("saturated", 1)]
    if sample:
        outputs += [("prev_" + name, size) for name, size in system.fields]
        outputs += [("prev_" + name, 1) for name in Status._fields if world is not None]
        outputs += [("ref_pos", 3), ("ref_vel", 3), ("ref_yaw", 1), ("lost_wrench", 4)]
        if dryden is not None:
            outputs.append(("prev_gust_state", 5))
    outputs += sensed
    for name, size in outputs:
        rows[name], at = slice(at, at + size), at + size
    return rows, at


def _plant(system: Any, p: Any, xs: list, rows: dict, rpm: list, U: Any, gust: Any,
           integrator: Callable, world: Any, k: Any, dt: float, dtype: Any) -> tuple:  # fmt: skip
    """The plant's step on the traced rows: ``(state after, world flags, gust state after)``,
    by the engines' one step (:func:`quadsim.engines.stepping.make_step`).

    ``gust`` is ``(gust state, its normals, discretisation)`` with Dryden turbulence, else
    ``None``; the wind ``U`` is held over the step.
    """  # noqa: D205
    wind, gust1 = (U[0], U[1], U[2]), []
    if gust is not None:  # the Simulator's Dryden process, one step (its state before it)
        wind, gust1 = _gusty_wind(U, *gust, dtype)
    step = make_step(system, p, dt, integrator, world, xp=CASADI_OPS)
    st = None if world is None else Status(*(xs[rows[name].start] for name in Status._fields))
    x1, st = step(tuple(xs[:system.size]), tuple(rpm), st, k, Env(wind=wind))
    return x1, [] if world is None else list(st), gust1


def _gusty_wind(U: Any, state: SymArray, noise: list, disc: Any, dtype: Any) -> tuple:
    """World wind of one step with Dryden turbulence: ``(wind (3 SX), next gust state (5 SX))``.

    The mean wind ``U`` plus the gust of :func:`quadsim.physics.wind.dryden_step` rotated by
    :func:`quadsim.physics.wind.gust_to_world` along the mean's horizontal direction (``+x`` when
    calm, as the Simulator sets it up).
    """
    import casadi as cs


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


