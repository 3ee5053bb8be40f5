r"""Closed-loop flight: trajectory -> controller -> allocation -> simulator, logged in chunks.

One step at time ``t_k = k dt``:

.. math::

    r_k = \mathrm{traj}(t_k) + o, \quad (w_k, c_{k+1}) = \mathrm{control}(x_k, r_k, g, c_k), \quad
    Ω^{cmd}_k = \mathrm{allocate}(w_k), \quad x_{k+1} = \mathrm{sim.step}(Ω^{cmd}_k),

with per-drone reference offsets ``o``: :func:`quadsim.loop.brain.make_brain`'s per-step function
(the one home of reference, sensors, controller and allocation), then the plant. Rates are
whole numbers of physics steps, validated once (:func:`quadsim.loop.brain.loop_periods`): the
controller runs every ``gains.dt / dt`` steps (the command held in between), the IMU and the
motion capture at their own rates. The controller reads the true state; sensor readings are
simulated alongside and logged. The IMU's accelerometer uses the mean acceleration over its
period (exact at rest and for constant acceleration; the first sample reads ``a_0 = 0``).

Three runners fly it and log the same samples (``meta["loop"]`` says which ran,
``meta["loop_reason"]`` why not a faster one; :mod:`quadsim.loop.paths` has the rules), all driven
by one driver (:func:`quadsim.loop.driver.drive`: chunks, progress, signals, faults, the hand-over
of each chunk). The **compiled loop** (``"compiled"``, the default on the ``native`` backend,
:mod:`quadsim.loop.compiled_runner`) runs reference, controller, allocation, plant and world of
every drone as one C step (:mod:`quadsim.loop.closed_loop`), a chunk per call; per-drone model
parameters are inputs of that step, and the Dryden turbulence (the Simulator's discretisation and
gust state) and the sensors run inside the C step, their normals drawn in C. The **scan loop**
(``"scan"``, the default on the ``jax`` backend, :mod:`quadsim.loop.closed_loop_jax`) runs the
same per-step function as the Python loop and the simulator's plant step as one ``jax.lax.scan``
per chunk, with the sensor noise and the gusts made per chunk and passed in as scanned inputs. The
**Python loop** (``"python"``, :mod:`quadsim.loop.step_runner`) runs the rest: reference,
controller, allocation and sensors form one pure function per step; with JAX installed it is
compiled (float64, inside a local ``jax.enable_x64`` block), otherwise (or when the controller
cannot be traced by JAX) it runs on NumPy, around ``sim.step``. Every random number is
counter-based (:mod:`quadsim.physics.noise`): a function of ``(seed, stream, step, drone)``, so
the three loops, any batch size and any chunking draw the same.

**Your own controller.** Any pure function ``control(state, ref, gains, ctrl_state) ->
(command, ctrl_state)`` written over the array API (like :mod:`quadsim.loop.control`), with any
gains and controller-state records (NamedTuples of arrays, nested tuples, one array, or ``None``),
flies on every loop: it is traced into the C step by CasADi on ``native`` and into the scan on
``jax`` when it can be, and run per step otherwise. The command is a body wrench ``(..., 4)``
(allocated by :func:`quadsim.physics.rotors.allocate`) or rotor speeds ``(..., n_rotors)`` [RPM]
(clipped to ``[rpm_min, rpm_max]``, no allocation), told apart by its last axis
(:func:`~quadsim.loop.brain.command_kind`; a quadrotor's 4 is a wrench unless
``command="rpm"``). When tracing fails the flight falls back to a slower loop, says why in
``meta["loop_reason"]`` and warns once with :class:`TraceFallbackWarning`.

The log is a ``dict`` of time-major NumPy arrays (see :mod:`quadsim.app.io` for the keys and units),
handed to ``on_chunk`` every ``chunk_steps`` steps (fewer when a chunk would pass
:data:`~quadsim.loop.driver.CHUNK_BYTES`; ``chunk_steps=None``: on the compiled loop, chunks of
about :data:`~quadsim.loop.driver.CHUNK_SECONDS` of wall time each, so few drones make few
calls), so a long flight streams to disk and a Ctrl-C, SIGTERM or SIGHUP keeps
every completed chunk (:attr:`FlightResult.interrupted`). A flight that completes also logs the
end sample at ``t = duration`` (its command is computed and logged but not applied).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ..engines.sim import fault_report
from ..physics import rotors
from ..physics.integrators import INTEGRATORS
from ..physics.noise import check_seed
from . import driver
from .brain import (
    COMMANDS,
    Sensors,
    checked_sensors,
    first_drone,
    initial_brain_state,
    loop_periods,
    rates_hz,
)
from .closed_loop_jax import build_scan
from .closed_loop_native import compile_for_simulator
from .compiled_runner import CompiledRunner
from .driver import Chunking, drive
from .parts import Controller, Sensor, log_columns, part_params
from .parts.checks import check_sensor
from .paths import compiled_path_reason, scan_path_reason
from .step_runner import StepLoop, StepRunner, one_line

__all__ = [
    "FlightResult",
    "TraceFallbackWarning",
    "fly",
    "run_meta",
]

class FlightResult(NamedTuple):
    """What :func:`fly` returns.

    Attributes:
        log: Time-major arrays of the recorded samples (concatenated chunks; empty dict when
            ``keep_log`` is false).
        meta: Run metadata (drone, dt, duration, n, rotor limits and geometry, ...), with
            ``faults``: every drone of a batch that diverged and was frozen
            (:func:`quadsim.engines.sim.fault_report`: drone, step, time, quantity; a single
            drone raises instead).
        steps: Control steps completed.
        interrupted: True when the flight stopped on ``KeyboardInterrupt`` (Ctrl-C, or a
            signal the caller turned into one, see :class:`quadsim.app.signals.Interrupted`);
            the log holds every completed chunk.
        wall_time: Wall-clock time of the flight loop [s].
        signal: Number of the signal that stopped the flight (``SIGINT`` for a plain
            ``KeyboardInterrupt``), or ``None``.
    """

    log: dict
    meta: dict
    steps: int
    interrupted: bool
    wall_time: float
    signal: int | None = None


class TraceFallbackWarning(UserWarning):
    """The controller (or trajectory) could not be traced: :func:`fly` runs a slower loop.

    Issued once per flight, one line: what could not be traced, by what (CasADi for the compiled
    loop, JAX for the scan and the per-step JIT), and the loop that runs instead. The same
    reason is in ``meta["loop_reason"]``. Silence it with ``warnings.simplefilter("ignore",
    TraceFallbackWarning)``; make it an error with ``"error"`` to insist on a fast loop.
    """


def run_meta(sim: Any, duration: float, extra: dict | None = None) -> dict:
    """A run's metadata: the one place it is built (``fly``'s result, the log, the summary).

    Args:
        sim: The :class:`~quadsim.engines.sim.Simulator` flown.
        duration: Flight time [s] (whole steps).
        extra: More entries, or ones the caller knows better (a scenario gives ``model``,
            ``integrator``, ``dtype`` as written, ``scenario``, ``name``, ``controller``,
            ``trajectory``, ``seed``, ``output``); they win over those read from ``sim``.

    Returns:
        ``drone`` (preset name), ``dt`` [s], ``duration`` [s], ``n``, ``n_rotors``,
        ``rotor_positions`` [m], ``rpm_min``, ``rpm_max`` [RPM], ``backend``, ``model``,
        ``integrator``, ``dtype``, then ``extra``.
    """
    d = sim.drone
    meta = {
        "drone": d.name,
        "dt": sim.dt,
        "duration": duration,
        "n": sim.n,
        "n_rotors": int(d.mixing_matrix.shape[1]),
        "rotor_positions": np.asarray(d.rotor_positions).tolist(),
        "rpm_min": float(d.rpm_min),
        "rpm_max": float(d.rpm_max),
        "backend": getattr(sim, "backend", None),
        "model": getattr(getattr(sim, "system", None), "model", None),
        "integrator": _integrator_name(getattr(sim, "integrator", None)),
        "dtype": _dtype_name(getattr(sim, "dtype", None)),
    }
    meta.update(extra or {})
    return meta


def _integrator_name(fn: Any) -> str | None:
    """Registry name of an integrator function (:data:`quadsim.physics.integrators.INTEGRATORS`)."""
    if fn is None or isinstance(fn, str):
        return fn
    names = [name for name, f in INTEGRATORS.items() if f is fn]
    return names[0] if names else getattr(fn, "__name__", None)


def _dtype_name(dtype: Any) -> str | None:
    """``"float32"`` / ``"float64"`` of a NumPy, JAX or torch dtype."""
    if dtype is None or isinstance(dtype, str):
        return dtype
    return getattr(dtype, "__name__", None) or str(dtype).rpartition(".")[2]


def fly(
    sim: Any, trajectory: Callable[[Any], Any], control: Callable, gains: Any, *,
    duration: float, ctrl_state: Any = None, allocator: Any = None, ref_offset: Any = None,
    sensors: Any = None, seed: int | None = None, log_every: int = 1,
    chunk_steps: int | None = 1000, on_chunk: Callable[[dict], None] | None = None,
    progress: Callable[[int, int], None] | None = None, keep_log: bool = True,
    meta: dict | None = None, jit: bool | None = None, compiled: bool | None = None,
    command: str | None = None, estimator: Any = None,
) -> FlightResult:  # fmt: skip
    """Fly ``sim`` (already reset) along ``trajectory`` for ``duration`` seconds.

    Sample ``k`` of the log is taken at ``t_k`` before the step: state ``x_k``, reference
    ``r_k``, the command computed from them, and the sensor readings at ``t_k``.

    Args:
        sim: A :class:`~quadsim.engines.sim.Simulator` with a rotor-level model.
        trajectory: Callable ``t -> Reference`` (:mod:`quadsim.loop.trajectories`).
        control: Controller ``(state, ref, gains, ctrl_state) -> (command, ctrl_state)``
            (:mod:`quadsim.loop.control`, or your own written over the array API): the command is a
            body wrench ``(n, 4)`` or rotor speeds ``(n, n_rotors)`` [RPM] (``command``).
        gains: The controller's gains record (any object; NamedTuples of numbers and NumPy
            arrays trace as constants).
        duration: Flight time [s]; rounded to whole steps.
        ctrl_state: Initial controller state, per drone (leading axis ``n``): a NamedTuple or
            tuple of arrays, one array, or ``None``. Default:
            :func:`~quadsim.loop.brain.initial_ctrl_state` (the controller's ``init_state``
            attribute, :func:`quadsim.loop.control.init_state` for the built-in gains, else
            ``None``).
        allocator: From :func:`quadsim.physics.rotors.make_allocator` (default: ``sim.drone``'s).
        ref_offset: Per-drone reference offsets ``(n, 3)`` or ``(3,)`` [m] (formations).
        sensors: What the loop reads and logs, one collection
            (:func:`~quadsim.loop.brain.checked_sensors`): a
            :class:`~quadsim.loop.brain.Sensors` record (``Sensors(imu=ImuParams, mocap=...,
            baro=..., gnss=..., power=..., charge=..., parts=(...))``) or a list of sensor parts
            (``[Imu(load_imu("bmi088")), Rangefinder()]``, :mod:`quadsim.loop.parts`). The IMU
            (:class:`~quadsim.physics.sensors.ImuParams`) reads at its rate; motion capture
            (``MocapParams``), the barometer (``BaroParams``, logged ``baro_alt``) and GNSS
            (``GnssParams``, logged ``gnss_pos``, ``gnss_vel``) likewise; with ``power``
            (:class:`~quadsim.physics.power.PowerParams` or a preset name, ``"cf21_stock"``) the
            rotor commands go through the battery's PWM chain, which starts at ``charge`` (0..1,
            a number or ``(n,)``), and ``battery_v``, ``battery_i``, ``battery_p``,
            ``battery_charge`` are logged (``None``: an ideal supply); every other part is read
            at its rate on every loop and logged as ``<name>_<output>`` (names must differ).
            ``None``: no sensors.
        seed: Key of the sensor noise (default: ``sim.seed``): the IMU of drone ``i`` at step
            ``k`` reads :func:`quadsim.physics.noise.normals` ``(seed, "imu", k, i)`` (motion
            capture ``"mocap"``, the IMU's turn-on bias ``"imu_init"`` at the flight's first step),
            so a drone's readings do not depend on the batch, the chunking or the loop.
        log_every: Record every ``log_every``-th step.
        chunk_steps: Steps per chunk handed to ``on_chunk``; ``None``: on the compiled loop
            about :data:`~quadsim.loop.driver.CHUNK_SECONDS` of wall time per chunk (the first
            sized for :data:`~quadsim.loop.driver.FIRST_CHUNK_RATE`), 1000 steps on the others.
        on_chunk: Called with each completed chunk (a log dict).
        progress: Called as ``progress(steps_done, steps_total)`` after each chunk.
        keep_log: Keep the concatenated log in the result (turn off for huge streamed runs).
        meta: Extra metadata merged into the result's ``meta`` (:func:`run_meta`).
        jit: Run reference, controller, allocation and sensors as one JAX-compiled float64
            function (about 25x faster than NumPy per step; costs ~1-3 s of compilation).
            ``None``: when JAX is installed and the controller traces. The results are the
            same to rounding. ``False`` also rules out the compiled and the scan loop.
        compiled: ``None``: the backend's fast loop (the compiled C loop on ``native``, the
            scan on ``jax``; module docstring) where :mod:`quadsim.loop.paths` allows it and the
            controller traces, else the per-step loop, warning once
            (:class:`TraceFallbackWarning`); ``True`` requires the fast loop, ``False`` rules it
            out. Every loop logs the same samples (equal to rounding in float64; on a float32
            simulator the compiled loop also runs the brain in float32); ``meta["loop"]`` and
            ``meta["loop_reason"]`` say which ran and why.
        command: What the controller's command is: ``None`` (the controller's ``command``
            attribute if it has one, else ``"auto"``), ``"auto"`` (by the size of its last
            axis, :func:`~quadsim.loop.brain.command_kind`: 4 is a wrench, ``n_rotors`` rotor
            speeds), ``"wrench"`` or ``"rpm"`` (needed for rotor speeds on a quadrotor).
        estimator: What the controller reads instead of the true state: an estimator of
            :mod:`quadsim.loop.estimation` (e.g.
            :class:`~quadsim.loop.estimation.estimators.EkfEstimator`, fed by ``imu`` and
            ``mocap``), which runs inside every loop (traced into the compiled one); its outputs
            (``est_*``) are logged. ``None``: the truth.

    Returns:
        :class:`FlightResult`. After the flight ``sim`` holds the state, flags and clock of the
        last step computed (on the compiled and scan paths loaded back through ``sim.k``,
        ``sim.state`` and ``sim.status``; an interrupted compiled or scan flight stops at a
        chunk's end, and its gust state may have advanced past it: it drew for the chunk in
        flight).

    Raises:
        ValueError: Bad arguments, or ``compiled=True`` where the fast loop cannot run (the
            message says why).
    """
    timed = chunk_steps is None
    total, chunk_steps, cap, command = _sizes(sim, control, duration, log_every, chunk_steps,
                                              command)  # fmt: skip
    n, dt = sim.n, sim.dt
    offset = (
        np.zeros((n, 3))
        if ref_offset is None
        else np.broadcast_to(np.asarray(ref_offset, dtype=np.float64), (n, 3))
    )
    seed = sim.seed if seed is None else check_seed(seed)
    sens = checked_sensors(sensors)
    _check_parts(sim, sens)
    periods = loop_periods(sim.dt, gains, sens)  # validated once
    flight = _Flight(sim, trajectory, control, gains, allocator, sens, command, ctrl_state,
                     offset, total, log_every, chunk_steps, seed, periods, estimator)  # fmt: skip
    make, loop_meta = _runner(flight, jit, compiled)
    chunking = Chunking(log_every, cap, n, chunk_steps, timed and loop_meta["loop"] == "compiled")
    t0 = time.perf_counter()
    chunks, k, interrupted, stop_signal = drive(make(), total, chunking, float(dt), on_chunk,
                                                progress, keep_log)  # fmt: skip
    wall = time.perf_counter() - t0
    log = {key: np.concatenate([c[key] for c in chunks]) for key in chunks[0]} if chunks else {}
    rates = {"rates_hz": rates_hz(dt, periods, sens)}
    meta_out = run_meta(sim, total * dt, meta) | loop_meta | rates
    meta_out["faults"] = fault_report(sim.status, float(dt))
    if sens.parts:
        meta_out["columns"] = log_columns(sens.parts)
        meta_out["part_params"] = part_params(sens.parts)
    return FlightResult(log, meta_out, k, interrupted, wall, stop_signal)


def _check_parts(sim: Any, sens: Sensors) -> None:
    """Each sensor part held to its declaration before anything flies, the error naming it."""
    for part in sens.parts:
        try:
            check_sensor(part, sim.dt, sim.world, sim.drone.gravity_vec, n=min(sim.n, 2))
        except ValueError as e:
            raise ValueError(f"sensor part {part.name!r}: {e}") from None


def _sizes(sim: Any, control: Callable, duration: float, log_every: Any, chunk_steps: Any,
           command: Any) -> tuple[int, int, int, str | None]:  # fmt: skip
    """Checked: ``(total steps, chunk steps (1000 for a timed one), the chunk cap, command)``."""
    if not (duration > 0 and math.isfinite(duration)):
        raise ValueError(f"duration must be a positive number of seconds; got {duration!r}")
    steps = 1000 if chunk_steps is None else chunk_steps
    if int(log_every) != log_every or log_every < 1 or int(steps) != steps or steps < 1:
        raise ValueError("log_every and chunk_steps must be positive integers (or None)")
    if sim.system.n_cmd != sim.drone.mixing_matrix.shape[1]:
        raise ValueError("fly needs a rotor-level model (first_principles or euler_zyx)")
    command = getattr(control, "command", None) if command is None else command
    if command is not None and command not in COMMANDS:
        raise ValueError(f"command must be one of {COMMANDS}; got {command!r}")
    steps = max(log_every, steps - steps % log_every)
    R = sim.drone.mixing_matrix.shape[1]
    sample_bytes = 8 * sim.n * (48 + 2 * R)  # about what one logged sample of the batch holds
    cap = max(1, driver.CHUNK_BYTES // sample_bytes) * log_every
    return max(1, round(duration / sim.dt)), min(steps, cap), cap, command


class _Flight(NamedTuple):
    """What every runner of one flight is built from (:func:`fly`'s arguments, checked)."""

    sim: Any
    trajectory: Callable
    control: Callable
    gains: Any
    allocator: Any
    sens: Sensors
    command: str | None
    ctrl_state: Any
    offset: np.ndarray
    total: int
    log_every: int
    chunk_steps: int
    seed: int
    periods: Any
    estimator: Any


def _runner(f: _Flight, jit: bool | None,
            compiled: bool | None) -> tuple[Callable[[], Any], dict]:  # fmt: skip
    """The fastest runner that can fly ``f``: ``(a thunk that makes it when the clock starts,
    {"loop": ..., "loop_reason": ...})``; warns once (:class:`TraceFallbackWarning`) when the
    controller could not be traced for a faster one."""  # noqa: D205, D209
    sim = f.sim
    kw = {"ctrl_state": f.ctrl_state, "sensors": f.sens, "jit": jit}
    backend = getattr(sim, "backend", None)
    if compiled is False:
        reason = "compiled=False"
    elif backend == "jax":
        reason = scan_path_reason(sim, f.control, f.gains, **kw)
    else:
        reason = compiled_path_reason(sim, f.control, f.gains, allocator=f.allocator, **kw)
    fast = "scan" if backend == "jax" else "compiled"
    failed: list[tuple[str, str]] = []  # (by what, why) it could not be traced: one warning
    who = None  # the part whose code failed to trace (None: the controller, or unknown)
    if reason is None and fast == "compiled":
        try:
            loop, bstate0 = _compile_native(f)
            return (lambda: CompiledRunner(sim, loop, bstate0, f.offset, f.log_every, f.sens,
                                           f.seed, f.estimator),
                    {"loop": "compiled", "loop_reason": None})  # fmt: skip
        except Exception as e:  # any failure to trace or build falls back
            who = culprit(e) or who
            reason = f"the closed loop could not be compiled: {who_said(who, e)}"
            failed.append(("by CasADi", one_line(e)))
    if reason is None and fast == "scan":
        try:
            make = build_scan(sim, f.trajectory, f.control, f.gains, f.allocator, f.sens,
                              f.command, f.ctrl_state, f.offset, f.total, f.log_every,
                              f.chunk_steps, f.seed, f.periods, f.estimator)  # fmt: skip
            return make, {"loop": "scan", "loop_reason": None}
        except Exception as e:  # the controller (or trajectory) does not trace: per step
            who = culprit(e) or who
            reason = f"the closed loop could not be traced by JAX: {who_said(who, e)}"
            failed.append(("by JAX into the scan", one_line(e)))
    if compiled:
        raise ValueError(f"compiled=True, but the {fast} loop cannot run: {reason}")
    allocator = rotors.make_allocator(sim.drone) if f.allocator is None else f.allocator
    step_loop = StepLoop(sim, f.trajectory, f.control, f.gains, allocator, f.sens, f.command,
                         f.ctrl_state, f.offset, jit, f.seed, f.periods, f.estimator)  # fmt: skip
    if step_loop.why:
        why = step_loop.why
        same = bool(failed) and failed[-1][1] == why
        failed.append(("by JAX per step", why))
        reason = (f"{reason}; nor per step" if same else
                  f"{reason}; the per-step function could not be traced by JAX: {why}")
    if failed:
        _warn_fallback(who or _controller_name(f.control), failed,
                       f"the per-step Python loop on {step_loop.backend}")  # fmt: skip
    return (lambda: StepRunner(step_loop, f.log_every)), {"loop": "python", "loop_reason": reason}


def _controller_name(control: Callable) -> str:
    return f"controller {getattr(control, '__qualname__', None) or type(control).__name__}"


def culprit(e: BaseException) -> str | None:
    """The part whose code raised ``e``: the innermost frame of its traceback that runs a sensor
    part's or a controller part's method (``"sensor part 'tof' (Rangefinder)"``), or ``None``."""  # noqa: D205, D209
    found, tb = None, e.__traceback__
    while tb is not None:
        me = tb.tb_frame.f_locals.get("self")
        if isinstance(me, Sensor):
            found = f"sensor part {me.name!r} ({type(me).__name__})"
        elif isinstance(me, Controller):
            found = _controller_name(me)
        tb = tb.tb_next
    return found


def who_said(who: str | None, e: BaseException) -> str:
    """``"<who>: Type: message"`` (the error alone when ``who`` is ``None``)."""
    return f"{who}: {one_line(e)}" if who else one_line(e)


def _warn_fallback(who: str, failed: list[tuple[str, str]], ran: str) -> None:
    """The one-line :class:`TraceFallbackWarning` of a flight whose fast loop could not run
    (``who``: the part that could not be traced)."""  # noqa: D205, D209
    import warnings

    parts: list[list[str]] = []  # [by what, ..., why]: the same error said once
    for by, why in failed:
        if parts and parts[-1][-1] == why:
            parts[-1].insert(-1, by)
        else:
            parts.append([by, why])
    said = "; nor ".join(f"{' nor '.join(p[:-1])} ({p[-1]})" for p in parts)
    warnings.warn(f"fly: {who} could not be traced {said}; flying {ran} (slower)",
                  TraceFallbackWarning, stacklevel=4)  # fmt: skip


def _compile_native(f: _Flight) -> tuple[Any, Any]:
    """The compiled closed loop of a flight and its per-drone initial brain state."""
    bstate0 = initial_brain_state(f.sim, f.control, f.gains, f.ctrl_state, f.sens, f.periods,
                                  f.seed, estimator=f.estimator)  # fmt: skip
    loop = compile_for_simulator(f.sim, f.control, f.gains, f.trajectory, sens=f.sens,
                                 brain_state=first_drone(bstate0), command=f.command,
                                 periods=f.periods, estimator=f.estimator)  # fmt: skip
    return loop, bstate0
