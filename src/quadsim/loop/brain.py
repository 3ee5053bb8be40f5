r"""The closed loop's per-step function: the one home of reference, sensors, controller, allocation.

All three loops of :func:`quadsim.loop.flight.fly` run this function: the per-step Python loop calls
it (on NumPy, or jitted by JAX), the scan loop scans it (:mod:`quadsim.loop.closed_loop_jax`) and
the compiled loop traces it into C (:mod:`quadsim.loop.closed_loop`); only the plant step around it
differs (the engine's). At step ``k`` of the simulator, ``j`` steps into the flight, with the
periods ``m_c, m_i, m_m`` [steps] of :class:`Periods`:

.. math::

    r_k &= \mathrm{traj}(k\,dt) + o && \text{every step (logged)} \\
    (u, c) &\leftarrow \mathrm{control}(x_k, r_k, g, c),\;
        Ω^{cmd} = \mathrm{allocate}(u) && \text{if } j \equiv 0 \pmod{m_c}\text{, else held} \\
    a &= (v_k - v_{last}) / (m_i\,dt),\; (ω_m, a_m, b) = \mathrm{imu}(q_k, ω_k, a, b, z)
        && \text{if } j \equiv 0 \pmod{m_i}\text{, else held} \\
    p_m &= \mathrm{mocap}(\text{delay line} \leftarrow x_k, z) && \text{if }
        j \equiv 0 \pmod{m_m}\text{, else held (the delay line moves every step)}

and so on for the barometer, GNSS and every sensor part (:mod:`quadsim.loop.sensing`, which
holds the sensors' step; the parts: :mod:`quadsim.loop.parts`).

The command ``Ω^{cmd}`` is held between controller updates (zero-order hold) and the plant is
stepped with it every step. ``v_{last}`` is the velocity at the previous IMU sample, so the
accelerometer reads the mean acceleration over its own period (exact at rest and for constant
acceleration; ``0`` at the first sample). ``z`` are the step's standard normals (IMU 12, motion
capture 6; :func:`quadsim.physics.noise.normals` of ``(seed, stream, k, drone)``).

Everything is array-API code over the batch (NumPy, JAX, or CasADi through
:class:`~quadsim.physics._symbolic.SymArray`), and the "else held" is a ``where`` (both sides
computed), so the function has no branches a tracer cannot follow. With every period 1 nothing is
held and
:class:`BrainState` carries no ``held`` record.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ..engines.state import State
from ..physics import power as pw
from ..physics._array import namespace, to_numpy
from ..physics.commands import COMMANDS, command_allocation, command_kind
from . import control as control_module
from .parts import Context, part_outputs
from .parts.standard import STANDARD, standard_parts
from .records import numpy_state
from .sensing import due, make_sense, pick, tree_map

__all__ = [
    "COMMANDS",
    "BrainState",
    "Held",
    "Periods",
    "Sensors",
    "brain_init",
    "brain_outputs",
    "checked_sensors",
    "command_allocation",
    "command_kind",
    "ctrl_leaves",
    "first_drone",
    "initial_brain_state",
    "initial_ctrl_state",
    "loop_periods",
    "make_brain",
    "noise_groups",
    "part_periods",
    "rates_hz",
    "sensor_parts",
    "state_leaves",
]


class Sensors(NamedTuple):
    """The loop's sensors: the one record that carries them through the loop and its runners.

    Attributes:
        imu: :class:`~quadsim.physics.sensors.ImuParams` or ``None`` (and likewise below).
        mocap: :class:`~quadsim.physics.sensors.MocapParams`.
        baro: :class:`~quadsim.physics.sensors.BaroParams`.
        gnss: :class:`~quadsim.physics.sensors.GnssParams`.
        power: :class:`~quadsim.physics.power.PowerParams`: the rotors get their command through
            the battery's PWM chain and its voltage is read, as the Crazyflie's firmware reads
            ``vbat``.
        charge: The battery's charge at the start, 0..1 (a number or ``(n,)``).
        parts: Sensor parts (:mod:`quadsim.loop.parts`), in the order they are read.
    """

    imu: Any = None
    mocap: Any = None
    baro: Any = None
    gnss: Any = None
    power: Any = None
    charge: Any = 1.0
    parts: tuple = ()


def checked_sensors(sensors: Any = None) -> Sensors:
    """``sensors`` as a checked :class:`Sensors` record, as :func:`quadsim.loop.flight.fly` takes.

    Args:
        sensors: ``None`` (no sensors), a :class:`Sensors` record, or a collection of sensor
            parts (:mod:`quadsim.loop.parts`): the built-in
            :class:`~quadsim.loop.parts.standard.Imu`, ``Mocap``, ``Baro`` and ``Gnss`` go to
            their fields (one of each at most), the others to :attr:`Sensors.parts` in their
            order. A record's ``power`` may be a preset name (``"cf21_stock"``).

    Raises:
        ValueError: Something that is not a sensor part, two parts of one name, or two of one
            built-in kind.
    """
    if sensors is None:
        return Sensors()
    if not isinstance(sensors, Sensors):
        if isinstance(sensors, str | bytes) or not hasattr(sensors, "__iter__"):
            raise ValueError(f"sensors: expected a Sensors record or a collection of sensor parts "
                             f"(quadsim.loop.parts); got {sensors!r}")  # fmt: skip
        slots: dict[str, Any] = {}
        others = []
        for part in sensors:
            kind = next((k for k, cls in STANDARD.items() if type(part) is cls), None)
            if kind is None:
                others.append(part)
            elif kind in slots:
                raise ValueError(f"sensors: two {kind} parts; a flight has one at most")
            else:
                slots[kind] = part.params_record
        sensors = Sensors(**slots, parts=tuple(others))
    parts = tuple(sensors.parts or ())
    names = [getattr(p, "name", None) for p in (*standard_parts(sensors), *parts)]
    for p in parts:
        if not (isinstance(getattr(p, "name", None), str) and hasattr(p, "measure")
                and hasattr(p, "outputs")):  # fmt: skip
            raise ValueError(f"sensors: {p!r} is not a sensor part (quadsim.loop.parts)")
    if len(set(names)) != len(names):
        raise ValueError(f"sensors: two sensor parts share a name: {names}")
    power = pw.load_power(sensors.power) if isinstance(sensors.power, str) else sensors.power
    return sensors._replace(parts=parts, power=power)


class Periods(NamedTuple):
    """Update periods in physics steps (integers >= 1), from :func:`loop_periods`.

    Attributes:
        control: Steps per controller update (the command is held in between).
        imu: Steps per IMU sample.
        mocap: Steps per motion-capture sample.
        imu_dt: The IMU's sample period [s] (its noise is discretised at it): ``imu * dt``,
            or ``dt`` for an IMU faster than the physics (its samples averaged over a step).
        baro: Steps per barometer sample.
        gnss: Steps per GNSS fix.
        parts: Steps per sample of each sensor part (in :attr:`Sensors.parts` order).
    """

    control: int = 1
    imu: int = 1
    mocap: int = 1
    imu_dt: float | None = None
    baro: int = 1
    gnss: int = 1
    parts: tuple = ()


MAX_PERIOD = 2**24
"""The longest period of a controller or sensor [physics steps] (``j mod m`` is exact below it
in float32; at 1 kHz, 4.7 hours)."""


def _steps_per(period: float, dt: float, what: str, faster_ok: bool) -> int:
    """Whole physics steps per ``period``; 1 for a faster source whose rate is a multiple."""
    ratio = period / dt
    if not (math.isfinite(ratio) and ratio > 0):
        raise ValueError(f"{what} has a period of {period:.9g} s; expected a finite period > 0")
    m = round(ratio)
    if m > MAX_PERIOD:  # the loop counts steps in floats: exact up to 2^24 in float32
        raise ValueError(f"{what} has a period of {period:.9g} s, {m:,} physics steps; at most "
                         f"{MAX_PERIOD:,} (dt = {dt:.9g} s)")  # fmt: skip
    if m >= 1 and math.isclose(ratio, m, rel_tol=1e-9):
        return int(m)
    per = dt / period
    if faster_ok and ratio < 1 and math.isclose(per, round(per), rel_tol=1e-9):
        return 1
    hint = ("a whole number of physics steps" if not faster_ok else
            "a whole number of physics steps, or the physics step a whole number of periods")
    raise ValueError(f"{what} has a period of {period:.9g} s, which is not {hint} "
                     f"(dt = {dt:.9g} s)")  # fmt: skip


def loop_periods(dt: float, gains: Any = None, sens: Sensors | None = None, *,
                 control_dt: float | None = None) -> Periods:  # fmt: skip
    """The loop's periods, validated once (issue 10: rates are integer multiples of ``dt``).

    Args:
        dt: Physics step [s].
        gains: The controller's gains; its ``dt`` [s] (when it has one) is the control period,
            a whole number of physics steps (the gains are designed for it).
        sens: The :class:`Sensors`. The IMU's period ``1/rate`` is a whole number of steps, or
            a whole fraction of one (a faster IMU is read once per step, its samples averaged:
            its noise is discretised at ``dt``); motion capture follows the same rule; the
            barometer's, GNSS's and every part's period is a whole number of physics steps (a
            part without a ``rate`` reads every step).
        control_dt: The control period [s] when there are no gains yet (a scenario's
            ``controller.rate``); ``gains.dt`` otherwise.

    Raises:
        ValueError: A period that fits neither rule, naming it and ``dt``.
    """
    dt = float(dt)
    sens = Sensors() if sens is None else sens
    control = 1
    g_dt = getattr(gains, "dt", control_dt)
    if g_dt is not None:
        name = getattr(gains, "name", "")
        what = f"the controller (gains {name})" if name else "the controller"
        control = _steps_per(float(g_dt), dt, what, faster_ok=False)
    parts = sensor_parts(sens)
    ms = [1 if p.rate is None else
          _steps_per(1.0 / p.rate, dt, f"{p.label or f'sensor {p.name}'} ({p.rate:g} Hz)",
                     p.faster_ok) for p in parts]  # fmt: skip
    n_std = len(parts) - len(sens.parts)
    std = {p.kind: m for p, m in zip(parts[:n_std], ms, strict=False)}
    m_i = std.get("imu", 1)
    return Periods(control, m_i, std.get("mocap", 1), m_i * dt if "imu" in std else None,
                   std.get("baro", 1), std.get("gnss", 1), tuple(ms[n_std:]))


def sensor_parts(sens: Sensors) -> tuple:
    """Every sensor of ``sens`` as a part, in the order the loop reads them: the built-in ones
    (:func:`quadsim.loop.parts.standard.standard_parts`), then :attr:`Sensors.parts`."""  # noqa: D205, D209
    return (*standard_parts(sens), *sens.parts)


def part_periods(periods: Periods, sens: Sensors) -> tuple:
    """The periods [steps] of :func:`sensor_parts`, in its order."""
    std = {"imu": periods.imu, "mocap": periods.mocap, "baro": periods.baro,
           "gnss": periods.gnss}  # fmt: skip
    return (*(std[p.kind] for p in standard_parts(sens)), *periods.parts)


def rates_hz(dt: float, periods: Periods, sens: Sensors | None = None) -> dict:
    """The loop's rates [Hz] as a run reports them (``meta`` and ``summary.json``).

    ``physics``, ``control``, and ``imu`` (its sample rate: the physics rate for an IMU averaged
    over each step), ``mocap``, ``baro``, ``gnss`` and each sensor part by name when present.
    """
    sens = Sensors() if sens is None else sens
    rates = {"physics": 1.0 / dt, "control": 1.0 / (periods.control * dt)}
    for part, m in zip(sensor_parts(sens), part_periods(periods, sens), strict=True):
        rates[part.name] = 1.0 / (m * dt)
    return rates


def initial_ctrl_state(control: Callable, gains: Any, ctrl_state: Any, n: int, xp: Any = None,
                       dtype: Any = None) -> Any:  # fmt: skip
    """The controller state a flight starts from (per drone, leading axis ``n``).

    In this order: ``ctrl_state`` when given (as it is); ``control.init_state(gains, (n,), xp,
    dtype)`` when the controller has such an attribute; :func:`quadsim.loop.control.init_state` for
    the built-in gains records; ``None`` otherwise (a stateless controller gets ``None`` and
    what it returns as its state is handed back on the next step).
    """
    if ctrl_state is not None:
        return ctrl_state
    init = getattr(control, "init_state", None)
    if callable(init):
        return init(gains, (n,), xp, dtype)
    if isinstance(gains, control_module.GeometricGains | control_module.PidGains):
        return control_module.init_state(gains, (n,), xp, dtype)
    return None


def initial_brain_state(sim: Any, control: Callable, gains: Any, ctrl_state: Any, sens: Any,
                        periods: Any, seed: int, xp: Any = np,
                        estimator: Any = None) -> Any:  # fmt: skip
    """The brain state at a flight's start (:func:`brain_init`), float64.

    Of every drone of ``sim`` at its current step, on the namespace ``xp``; ``ctrl_state``
    ``None`` starts the controller from its initial state (:func:`initial_ctrl_state`).
    """
    state = numpy_state(sim.state)
    cstate = initial_ctrl_state(control, gains, ctrl_state, sim.n, xp, xp.float64)
    return brain_init(sim.n, cstate, state.pos, state.quat, state.vel, sens=sens,
                      dt=float(sim.dt), periods=periods, seed=seed, k0=int(sim.k),
                      n_rotors=sim.drone.mixing_matrix.shape[1], xp=xp, estimator=estimator,
                      world=getattr(sim, "world", None))  # fmt: skip


def ctrl_leaves(tree: Any, prefix: str = "ctrl") -> list[tuple[str, Any]]:
    """``(row name, leaf)`` of a state record, depth first.

    A state is ``None`` (no rows), an array or number (one leaf, ``prefix``), or a tuple or
    NamedTuple of states (``prefix_<field>``, ``prefix_<index>`` for plain tuples); ``None``
    fields hold no rows. The built-in controller states give ``ctrl_pos_int``,
    ``ctrl_wrench_est``, ...

    Raises:
        TypeError: Another container (a dict, a list).
    """
    if tree is None:
        return []
    if isinstance(tree, tuple):
        names = getattr(tree, "_fields", None) or [str(i) for i in range(len(tree))]
        return [leaf for name, v in zip(names, tree, strict=True)
                for leaf in ctrl_leaves(v, f"{prefix}_{name}")]  # fmt: skip
    if isinstance(tree, dict | list):
        raise TypeError(f"a controller state of NamedTuples, tuples and arrays is stored; "
                        f"{prefix} is a {type(tree).__name__}")  # fmt: skip
    return [(prefix, tree)]


def tree_rebuild(tree: Any, leaves: Any) -> Any:
    """``tree`` with its leaves replaced, in :func:`ctrl_leaves` order, from the iterator."""
    return tree_map(lambda _: next(leaves), tree)


class Held(NamedTuple):
    """The command held between controller updates (``None`` for what updates every step)."""

    cmd_rpm: Any = None
    cmd_wrench: Any = None
    lost_wrench: Any = None
    saturated: Any = None


class BrainState(NamedTuple):
    """The per-drone state of :func:`make_brain` (a pytree of arrays, leading axis ``n``).

    Attributes:
        j: Steps since the flight's start ``(n,)`` (float; selects the updates).
        ctrl: The controller's state (any tree of arrays, or ``None``).
        held: :class:`Held` command, or ``None`` when the controller runs every step.
        est: The estimator's state (``make_brain(estimator=...)``), or ``None``.
        battery: The battery's charge ``(n,)`` (0..1), or ``None`` without a power chain.
        parts: One ``(state, held)`` per sensor part of :func:`sensor_parts` (``held``: its
            outputs between samples, or ``None`` when it reads every step or holds its own), or
            ``()``.
    """

    j: Any
    ctrl: Any
    held: Any
    est: Any = None
    battery: Any = None
    parts: tuple = ()


def brain_init(n: int, ctrl: Any, pos: Any, quat: Any, vel: Any, *, sens: Sensors | None = None,
               dt: float, periods: Periods, seed: int = 0, k0: int = 0, n_rotors: int = 4,
               xp: Any = np, estimator: Any = None, world: Any = None) -> BrainState:  # fmt: skip
    """The brain state at a flight's start (step ``k0``): float64 arrays of ``xp``.

    Every sensor part starts from its ``init`` (the built-in ones: the IMU's turn-on biases,
    the delay lines of motion capture and GNSS holding the start state, the barometer's bias,
    :mod:`quadsim.loop.parts.standard`); the held outputs start at zero (every update runs at
    ``j = 0``); an estimator with an ``init`` method starts from ``estimator.init(n, pos, vel,
    quat, seed=, k0=, xp=)``; with a power chain the battery starts at ``sens.charge`` (0..1, a
    number or ``(n,)``).
    """
    sens = Sensors() if sens is None else sens
    f64 = xp.float64
    pos, quat, vel = (xp.asarray(np.asarray(a, np.float64)) for a in (pos, quat, vel))
    held = None
    if periods.control > 1:
        held = Held(xp.zeros((n, n_rotors), dtype=f64), xp.zeros((n, 4), dtype=f64),
                    xp.zeros((n, 4), dtype=f64), xp.zeros((n,), dtype=xp.bool))  # fmt: skip
    est = None
    if estimator is not None and hasattr(estimator, "init"):
        est = estimator.init(n, np.asarray(pos), np.asarray(vel), np.asarray(quat), seed=seed,
                             k0=k0, xp=xp)  # fmt: skip
    battery = None
    if sens.power is not None:
        q = np.broadcast_to(np.asarray(sens.charge, np.float64), (n,))
        if not np.all((q >= 0) & (q <= 1)):
            raise ValueError(f"battery_charge must be in 0..1; got {sens.charge!r}")
        battery = xp.asarray(q.copy())
    parts = _parts_init(sens, periods, n, pos, quat, vel, dt, seed, k0, xp, world)
    return BrainState(xp.zeros((n,), dtype=f64), ctrl, held, est, battery, parts)


def _parts_init(sens: Sensors, periods: Periods, n: int, pos: Any, quat: Any, vel: Any,
                dt: float, seed: int, k0: int, xp: Any, world: Any) -> tuple:  # fmt: skip
    """``(state, held)`` of every sensor part at the start: its ``init``, zeros held."""
    truth = State(pos, quat, vel, xp.zeros((n, 3), dtype=xp.float64), None)
    out = []
    for part, m in zip(sensor_parts(sens), part_periods(periods, sens), strict=True):
        held = None
        if m > 1 and not part.holds:
            held = tuple(xp.zeros((n, o.size) if o.size > 1 else (n,), dtype=xp.float64)
                         for o in part.outputs)  # fmt: skip
        ctx = Context(dt, xp, seed, k0, world, period=m)
        out.append((part.init(n, truth, ctx), held))
    return tuple(out)


def brain_outputs(sens: Sensors | None = None, estimator: Any = None) -> list[tuple[str, int]]:
    """``(name, size)`` of the brain's outputs besides the reference and the command, in the
    order every loop logs them: the sensor readings (``gyro``, ``accel`` with an IMU,
    ``mocap_pos`` and its time stamp ``mocap_stamp`` with motion capture, ``baro_alt`` with a
    barometer, ``gnss_pos``, ``gnss_vel`` and ``gnss_stamp`` with GNSS), then the estimator's
    ``outputs``. A time stamp [s] is when the delivered reading was taken (its latency before
    the sample that delivered it). With a power chain: ``battery_v`` [V], ``battery_i`` [A],
    ``battery_p`` [W] and ``battery_charge`` (0..1), then every sensor part's
    ``<name>_<output>`` (:func:`quadsim.loop.parts.part_outputs`), before the estimator's."""  # noqa: D205, D209
    sens = Sensors() if sens is None else sens
    out = part_outputs(standard_parts(sens))
    if sens.power is not None:
        out += [("battery_v", 1), ("battery_i", 1), ("battery_p", 1), ("battery_charge", 1)]
    out += part_outputs(sens.parts)
    return out + list(getattr(estimator, "outputs", None) or [])


def noise_groups(sens: Sensors | None = None) -> tuple[tuple[str, int], ...]:
    """The ``(stream, count)`` groups of the brain's normals (:mod:`quadsim.physics.noise`): the
    IMU's, motion capture's, the barometer's, GNSS's, then every part's ``streams``."""  # noqa: D205, D209
    sens = Sensors() if sens is None else sens
    return tuple(g for part in sensor_parts(sens) for g in part.streams)


def first_drone(tree: Any) -> Any:
    """The first drone's leaves of a per-drone state tree (a template of structure and shape)."""

    def first(leaf: Any) -> np.ndarray:
        a = np.asarray(to_numpy(leaf), np.float64)
        return a if a.ndim == 0 else a[0]

    return tree_rebuild(tree, iter([first(leaf) for _, leaf in ctrl_leaves(tree)]))


def state_leaves(bstate: BrainState, sens: Sensors | None = None) -> list[tuple[str, Any]]:
    """``(row name, leaf)`` of a brain state, field by field.

    ``j``, ``ctrl_*``, ``held_*``, ``est_*``, ``battery``: :func:`ctrl_leaves` of each field,
    prefixed by its name; a sensor part's state and held readings by the part's name when
    ``sens`` names them (``imu_state_gyro_bias``, ``imu_vel``, ``mocap_line_pos_buf``,
    ``baro_held_0``, ...), else ``parts_<i>_0_*`` and ``parts_<i>_1_*``.
    """
    out = [leaf for name in BrainState._fields[:-1]
           for leaf in ctrl_leaves(getattr(bstate, name), name)]  # fmt: skip
    if sens is None:
        return out + ctrl_leaves(bstate.parts, "parts")
    for part, (state, held) in zip(sensor_parts(sens), bstate.parts, strict=True):
        out += ctrl_leaves(state, part.name) + ctrl_leaves(held, f"{part.name}_held")
    return out


def _powered(out: dict, charge: Any, power: Any, dt: float, xp: Any) -> tuple[dict, Any]:
    """The rotor command as the battery lets the motors turn (:mod:`quadsim.physics.power`): the
    firmware's PWM compensates the voltage, so a command gets through up to the speed of full
    PWM at the present voltage ``V`` (``saturated`` where cut); ``V`` and the current at the
    power of the speeds that get through; the charge integrated over the step."""  # noqa: D205, D209
    rpm = out["cmd_rpm"]
    v0, _ = pw.battery_state(charge, pw.electrical_power(rpm, power), power)
    top = pw.rpm_from_pwm(pw.PWM_FULL + 0.0 * rpm, v0[..., None], power)
    cut = rpm > top
    rpm = xp.minimum(rpm, top)
    p = pw.electrical_power(rpm, power)
    v, i = pw.battery_state(charge, p, power)
    sat = out["saturated"]
    sat = sat > 0.5 if hasattr(sat, "shape") else sat
    for r in range(cut.shape[-1]):  # (the traced namespaces have no ``any``)
        sat = xp.logical_or(sat, cut[..., r])
    out = out | {"cmd_rpm": rpm, "battery_v": v, "battery_i": i, "battery_p": p,
                 "saturated": sat,
                 "battery_charge": pw.discharge(charge, p, dt, power)}
    return out, out["battery_charge"]


def make_brain(trajectory: Callable, control: Callable, gains: Any, allocator: Any,
               sens: Sensors | None, g_vec: Any, dt: float, command: str | None = None,
               periods: Periods | None = None, estimator: Callable | None = None, *,
               world: Any = None) -> Callable:  # fmt: skip
    """The per-step function ``brain(k, pos, quat, vel, ang_vel, offset, bstate, z, ref=None)``.

    It returns ``(out, bstate)`` (module docstring).

    Args:
        trajectory: ``t -> Reference``; or ``None``: the controller's reference is the
            function's ``ref`` argument, a set point given each step (the Gymnasium action
            levels give the agent's action to their inner loop), and ``out`` has no ``ref_*``.
        control: ``(state, ref, gains, cstate) -> (command, cstate)``. A controller with a
            ``reads`` attribute (names of readings, e.g. ``("tof_range", "tof_valid")``) is
            called ``control(state, ref, gains, cstate, readings)`` with those readings.
        gains: Its gains.
        allocator: :class:`~quadsim.physics.rotors.Allocator`.
        sens: The :class:`Sensors` read at every step (:mod:`quadsim.loop.sensing`); their
            readings join ``out`` (:func:`brain_outputs`). With a power chain (``sens.power``)
            the rotor command goes through the battery's PWM chain (:func:`_powered`; state
            :attr:`BrainState.battery`, outputs ``battery_*``). ``None``: no sensors.
        g_vec: Gravity [m/s²] ``(3,)``.
        dt: Physics step [s].
        command: What the controller's command is (:func:`command_kind`).
        periods: :func:`loop_periods` (default: every period one step).
        estimator: The estimator slot: ``(k, truth, readings, est_state) -> (state, est_state)``
            gives the state the controller reads, from the true state (a
            :class:`~quadsim.engines.state.State`), this step's ``readings`` (``gyro``, ``accel``,
            ``mocap_pos``, ``mocap_quat``, the parts' ``<name>_<output>`` as present, and
            ``imu_fresh``, ``mocap_fresh``, ``<name>_fresh``: whether the reading was taken at
            this step) and its own state (:attr:`BrainState.est`). ``None``: the truth (the
            controller reads the true state; no estimator state). An estimator with a
            ``log(est)`` method adds what it returns to ``out`` (its ``outputs``,
            :func:`brain_outputs`); one with ``init`` gets its state from :func:`brain_init`.
        world: The :class:`~quadsim.physics.world.World` the sensor parts see, or ``None``.

    The function's ``out`` holds ``ref_pos``, ``ref_vel``, ``ref_yaw``, ``cmd_rpm`` (what the
    plant gets), ``cmd_wrench``, ``lost_wrench``, ``saturated`` and the sensors' readings; ``k``
    is the simulator's step (``t = k dt``), ``pos ... ang_vel`` the true state ``(n, .)``,
    ``offset`` the reference offsets ``(n, 3)``, ``z`` the normals ``(n, n_z)`` of
    :func:`noise_groups`. Without a trajectory and sensors, ``pos``, ``vel`` and ``offset`` may be
    ``None`` (a controller that reads only the attitude and the body rates).

    Raises:
        ValueError: A controller that reads readings no sensor gives.
    """
    sens = Sensors() if sens is None else sens
    periods = Periods(parts=(1,) * len(sens.parts)) if periods is None else periods
    m_c = periods.control
    parts = sensor_parts(sens)
    at, o = [], 0  # where each part's normals start in z
    for part in parts:
        at.append(o)
        o += sum(c for _, c in part.streams)
    sense = make_sense(parts, part_periods(periods, sens), g_vec, dt, tuple(at), world)
    reads = tuple(getattr(control, "reads", None) or ())
    given = {name for name, _ in brain_outputs(sens)}
    missing = [r for r in reads if r not in given and not r.endswith("_fresh")]
    if missing:
        raise ValueError(f"the controller reads {missing}, which no sensor gives (readings: "
                         f"{sorted(given)})")  # fmt: skip
    power = sens.power

    def brain(k, pos, quat, vel, ang_vel, offset, bs, z, ref=None):
        xp = namespace(quat)
        held, j = bs.held, bs.j
        # 1. sensors, each at its period (they read the true state x_k)
        truth = State(pos, quat, vel, ang_vel, None)
        out, readings, part_states = sense(k, truth, bs, z)
        # 2. the estimator slot: the state the controller reads
        state, est = truth, bs.est
        if estimator is not None:
            state, est = estimator(k, state, readings, est)
            if hasattr(estimator, "log"):
                out |= estimator.log(est)
        # 3. reference, controller (at its period) and allocation
        if trajectory is not None:
            ref = trajectory(k * dt)
            ref_pos = xp.asarray(ref.pos) + offset
            ref = ref._replace(pos=ref_pos)
            out["ref_pos"] = ref_pos
            out["ref_vel"] = xp.broadcast_to(xp.asarray(ref.vel), pos.shape)
            out["ref_yaw"] = xp.broadcast_to(xp.asarray(ref.yaw), pos.shape[:-1])
        if reads:
            output, cstate = control(state, ref, gains, bs.ctrl, {r: readings[r] for r in reads})
        else:
            output, cstate = control(state, ref, gains, bs.ctrl)
        wrench, alloc = command_allocation(output, allocator, command)
        out |= {"cmd_rpm": alloc.rpm, "cmd_wrench": wrench, "lost_wrench": alloc.lost,
                "saturated": alloc.saturated}  # fmt: skip
        if m_c > 1:
            now = due(j, m_c, xp)
            cstate = pick(now, cstate, bs.ctrl, xp)
            for key in ("cmd_rpm", "cmd_wrench", "lost_wrench", "saturated"):
                out[key] = pick(now, out[key], getattr(held, key), xp)
        if held is not None:
            held = Held(*(out[key] for key in Held._fields))
        battery = bs.battery
        if power is not None:  # 4. the command through the battery's PWM chain
            out, battery = _powered(out, battery, power, dt, xp)
        return out, BrainState(j + 1, cstate, held, est, battery, part_states)

    return brain
