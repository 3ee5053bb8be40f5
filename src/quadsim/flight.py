r"""Closed-loop flight: trajectory -> controller -> allocation -> simulator, logged in chunks.

One control step at time ``t_k = k dt`` (the controller runs at the simulator's rate):

.. math::

    r_k = \mathrm{traj}(t_k) + o, \quad (w_k, c_{k+1}) = \mathrm{control}(x_k, r_k, g, c_k), \quad
    Ω^{cmd}_k = \mathrm{allocate}(w_k), \quad x_{k+1} = \mathrm{sim.step}(Ω^{cmd}_k),

with per-drone reference offsets ``o``. The controller reads the true state; sensor readings
(IMU, motion capture) are simulated alongside and logged. The IMU's accelerometer at ``t_k`` uses
the mean acceleration over the last step, ``a_k = (v_k - v_{k-1}) / dt`` (exact at rest and for
constant acceleration; the first sample takes ``a_0 = 0``).

Two loops log the same samples. The **compiled loop** (the default on the ``native`` backend,
:func:`compiled_path_reason`) runs reference, controller, allocation, plant and world of every
drone as one C step (:mod:`quadsim.closed_loop`), a chunk per call; per-drone model parameters
are inputs of that step, Dryden gusts are drawn per chunk with the Simulator's own functions
and passed as the per-step wind, and the sensor readings (which do not feed back: the
controller reads the true state) are computed per chunk in NumPy from the recorded samples with
the sensor functions themselves, the same generators and the same draw order (the C step only
carries the previous velocity and the motion-capture delay line). The **Python loop** runs the
rest: reference, controller, allocation and sensors form one pure function per step; with JAX
installed it is compiled (float64, inside a local ``jax.enable_x64`` block), otherwise it runs on
NumPy, around ``sim.step``. Sensor noise comes from one NumPy generator either way.

The log is a ``dict`` of time-major NumPy arrays (see :mod:`quadsim.io` for the keys and units),
handed to ``on_chunk`` every ``chunk_steps`` steps (fewer when a chunk would pass
:data:`CHUNK_BYTES`), so a long flight streams to disk and a Ctrl-C, SIGTERM or SIGHUP keeps
every completed chunk (:attr:`FlightResult.interrupted`). A flight that completes also logs the
end sample at ``t = duration`` (its command is computed and logged but not applied).
"""

from __future__ import annotations

import contextlib
import math
import signal
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ._array import to_numpy

__all__ = [
    "CHUNK_BYTES",
    "FlightResult",
    "Interrupted",
    "compiled_path_reason",
    "fly",
    "raise_on_signals",
    "run_meta",
]

CHUNK_BYTES = 32 * 2**20
"""A chunk holds at most about this many bytes of log (so memory stays bounded for many drones)."""


class FlightResult(NamedTuple):
    """What :func:`fly` returns.

    Attributes:
        log: Time-major arrays of the recorded samples (concatenated chunks; empty dict when
            ``keep_log`` is false).
        meta: Run metadata (drone, dt, duration, n, rotor limits and geometry, ...).
        steps: Control steps completed.
        interrupted: True when the flight stopped on ``KeyboardInterrupt`` (Ctrl-C, or a
            signal the caller turned into one, see :class:`Interrupted`); the log holds every
            completed chunk.
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


class Interrupted(KeyboardInterrupt):
    """A stop requested by a signal (SIGINT, SIGTERM, SIGHUP); ``signum`` says which.

    A ``KeyboardInterrupt``, so everything that keeps a run's results on Ctrl-C does the same
    for the others. :func:`raise_on_signals` installs handlers that raise it.
    """

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = int(signum)


STOP_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)
"""The signals that stop a flight and keep what it computed (exit code 128 + signal)."""


def raise_on_signals() -> None:
    """Make SIGINT, SIGTERM and SIGHUP raise :class:`Interrupted` (main thread only)."""

    def handler(signum: int, frame: Any) -> None:
        raise Interrupted(signum)

    for s in STOP_SIGNALS:
        signal.signal(s, handler)


def run_meta(sim: Any, duration: float, extra: dict | None = None) -> dict:
    """A run's metadata: the one place it is built (``fly``'s result, the log, the summary).

    Args:
        sim: The :class:`~quadsim.sim.Simulator` flown.
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
    """Registry name of an integrator function (:data:`quadsim.integrators.INTEGRATORS`)."""
    from .integrators import INTEGRATORS

    if fn is None or isinstance(fn, str):
        return fn
    names = [name for name, f in INTEGRATORS.items() if f is fn]
    return names[0] if names else getattr(fn, "__name__", None)


def _dtype_name(dtype: Any) -> str | None:
    """``"float32"`` / ``"float64"`` of a NumPy, JAX or torch dtype."""
    if dtype is None or isinstance(dtype, str):
        return dtype
    return getattr(dtype, "__name__", None) or str(dtype).rpartition(".")[2]


def _make_brain(trajectory, control, gains, allocator, imu, mocap, g_vec, dt, xp):
    """The per-step function: reference, sensors, controller and allocation (pure)."""
    from . import rotors

    def brain(t, pos, quat, vel, ang_vel, vel_prev, offset, cstate, imu_state, mocap_state, z):
        from .sim import State

        ref = trajectory(t)
        ref_pos = xp.asarray(ref.pos) + offset
        ref = ref._replace(pos=ref_pos)
        state = State(pos, quat, vel, ang_vel, None)
        wrench, cstate = control(state, ref, gains, cstate)
        alloc = rotors.allocate(wrench, allocator)
        out = {
            "ref_pos": ref_pos,
            "ref_vel": xp.broadcast_to(xp.asarray(ref.vel), pos.shape),
            "ref_yaw": xp.broadcast_to(xp.asarray(ref.yaw), pos.shape[:-1]),
            "cmd_rpm": alloc.rpm,
            "cmd_wrench": wrench,
            "lost_wrench": alloc.lost,
            "saturated": alloc.saturated,
        }
        if imu is not None:
            from .sensors import imu_measure

            acc = (vel - vel_prev) / dt
            reading, imu_state = imu_measure(
                quat, ang_vel, acc, g_vec, imu, imu_state, dt, z[..., :12]
            )
            out["gyro"], out["accel"] = reading.gyro, reading.accel
        if mocap is not None:
            from .sensors import mocap_measure

            reading, mocap_state = mocap_measure(pos, quat, mocap, mocap_state, z[..., 12:18])
            out["mocap_pos"] = reading.pos
        return out, cstate, imu_state, mocap_state

    return brain


def _jax_or_none() -> Any:
    try:
        import jax
    except ImportError:
        return None
    return jax


MOCAP_DELAY_MAX = 64
"""Longest motion-capture delay [steps] the compiled loop carries (a delay line of 3 d rows)."""


def compiled_path_reason(
    sim: Any, control: Callable, gains: Any, *, ctrl_state: Any = None, allocator: Any = None,
    imu: Any = None, mocap: Any = None, jit: bool | None = None, rng: Any = None,
) -> str | None:  # fmt: skip
    """Why :func:`fly` cannot run this flight as the compiled closed loop, or ``None`` if it can.

    The compiled loop (:mod:`quadsim.closed_loop`) needs the ``native`` backend with CasADi and
    a C compiler, :func:`quadsim.control.control` with geometric or PID gains, the default
    allocator, a zero initial controller state, a rotor-level quaternion model, a NumPy
    generator for the sensor noise and a motion-capture delay of at most
    :data:`MOCAP_DELAY_MAX` steps; ``jit=False`` asks for the Python loop. Per-drone model
    parameters, Dryden turbulence, an IMU and motion capture are compiled (the sensors are
    computed from the recorded samples, see :func:`fly`). (Tracing can still fail on something
    unforeseen: ``fly`` then runs the Python loop and says so.)

    Args:
        sim: The :class:`~quadsim.sim.Simulator`.
        control: The controller.
        gains: Its gains record.
        ctrl_state: Initial controller state given to ``fly``.
        allocator: Allocator given to ``fly``.
        imu: IMU parameters given to ``fly``.
        mocap: Motion-capture parameters given to ``fly``.
        jit: ``fly``'s ``jit``.
        rng: ``fly``'s ``rng`` (``None``: the simulator's generator).

    Returns:
        A short reason (``"a custom allocator: ..."``), or ``None``.
    """
    from . import control as control_module

    if jit is False:
        return "jit=False: the per-step Python loop was asked for"
    if getattr(sim, "backend", None) != "native":
        return f"backend {getattr(sim, 'backend', None)!r}: only 'native' compiles the closed loop"
    if control is not control_module.control:
        return "a custom controller: only quadsim.control.control is compiled"
    if not isinstance(gains, control_module.GeometricGains | control_module.PidGains):
        return f"gains of type {type(gains).__name__}: only geometric and PID gains are compiled"
    if ctrl_state is not None:
        return "ctrl_state given: the compiled loop starts from a zero controller state"
    if allocator is not None:
        return "a custom allocator: the compiled loop uses the drone's default allocator"
    if (imu is not None or mocap is not None) and rng is not None and not isinstance(
        rng, np.random.Generator
    ):
        return f"rng of type {type(rng).__name__}: the compiled loop draws from a NumPy Generator"
    if mocap is not None:
        from .sensors import mocap_delay_steps

        try:
            d = mocap_delay_steps(mocap, sim.dt)
        except (ValueError, TypeError, AttributeError) as e:
            return f"mocap: {e}"
        if d > MOCAP_DELAY_MAX:
            return (f"mocap latency of {d} steps: the compiled loop carries at most "
                    f"{MOCAP_DELAY_MAX}")  # fmt: skip
    system = sim.system
    if system.attitude != "quat" or system.n_cmd != sim.drone.mixing_matrix.shape[1]:
        return (f"model {getattr(system, 'model', None)!r}: the compiled loop needs a rotor-level "
                "quaternion model (first_principles)")  # fmt: skip
    from .native import available

    if not available():
        return "quadsim.native is unavailable (needs CasADi and a C compiler)"
    return None


class _Draws:
    """The random draws of :func:`fly`'s Python loop, made a range of steps at a time.

    The Python loop draws, for each step ``j`` (relative to the flight's start): the sensor
    normals ``z_j`` ``(n, n_noise)`` from ``rng`` (in ``think``, for sample ``j``), then, in
    ``Simulator.step``, the Dryden noise ``(1, n, 5)`` from ``sim.rng`` (preceded once by the
    stationary start ``(n, 5)``); the end sample ``j = total`` draws ``z`` only. Normals drawn
    one after the other equal one block drawn at once (NumPy's ``Generator`` keeps no state
    between calls but its bit generator's), so a range of steps is one block per generator,
    split by columns when ``rng`` is ``sim.rng``. The gusts then go through the Simulator's own
    functions and state (:func:`quadsim.wind.dryden_init`, :func:`~quadsim.wind.dryden_sequence`,
    :func:`~quadsim.wind.gust_to_world`, ``sim._gust_state``), as ``Simulator._wind_sequence``.
    """

    def __init__(self, sim: Any, rng: np.random.Generator, n_noise: int, total: int) -> None:
        self.sim, self.rng, self.nz, self.total, self.n = sim, rng, n_noise, total, sim.n
        self.gusty = getattr(sim, "_dryden", None) is not None
        self.shared = rng is sim.rng

    def __call__(self, a: int, b: int) -> tuple[np.ndarray, np.ndarray | None]:
        """Draws of steps ``a..b`` (inclusive): ``(z (m, n, n_noise), wind (m, n, 3) or None)``.

        ``wind`` is the world wind of each step [m/s] (mean + gust), ``None`` without
        turbulence; the wind of step ``total`` (never applied) is the mean, drawn from nothing.
        """
        sim, rng, nz, n = self.sim, self.rng, self.nz, self.n
        m = b - a + 1
        mg = max(0, min(b, self.total - 1) - a + 1) if self.gusty else 0
        z = np.empty((m, n, nz))
        g = np.empty((mg, n, 5))
        init = None
        need_init = mg > 0 and sim._gust_state is None
        if not (self.shared and nz and mg):  # independent streams (or only one of them)
            if nz:
                z[:] = rng.standard_normal((m, n, nz))
            if mg:
                init = sim.rng.standard_normal((n, 5)) if need_init else None
                g[:] = sim.rng.standard_normal((mg, n, 5))
        else:  # one generator: z_j, [the stationary start], gust noise_j, z_{j+1}, ...
            i = 0
            if need_init:
                z[0] = rng.standard_normal((n, nz))
                init = rng.standard_normal((n, 5))
                g[0] = rng.standard_normal((n, 5))
                i = 1
            if mg > i:
                block = rng.standard_normal((mg - i, n * (nz + 5)))
                z[i:mg] = block[:, : n * nz].reshape(-1, n, nz)
                g[i:] = block[:, n * nz :].reshape(-1, n, 5)
            if m > mg:
                z[mg:] = rng.standard_normal((m - mg, n, nz))
        if not self.gusty:
            return z, None
        from .wind import dryden_init, dryden_sequence, gust_to_world

        wind = np.empty((m, n, 3))
        wind[:] = sim._mean_wind
        if mg:
            if init is not None:
                sim._gust_state = dryden_init(sim._dryden, init)
            sim._gust_state, gusts = dryden_sequence(sim._gust_state, g, sim._dryden)
            wind[:mg] = sim._mean_wind + gust_to_world(gusts, sim._wind_dir, unit=True)
        return z, wind


class _Sensors:
    """IMU and motion-capture readings of recorded samples, as the Python loop computes them.

    The readings do not feed back (the controller reads the true state), so they are computed
    per chunk in NumPy from the samples the compiled loop records, with the sensor functions
    themselves (:func:`quadsim.sensors.imu_measure`, :func:`quadsim.sensors.mocap_measure`)
    and the normals ``z_j`` of the Python loop (:class:`_Draws`). The IMU's in-run bias is a
    random walk independent of the state, ``b_{j+1} = b_j + σ_w z_j[6:12]``, advanced over
    every step (a cumulative sum, the same additions in the same order); the accelerometer
    uses ``a_j = (v_j - v_{j-1})/dt`` from the sample's ``prev_vel`` and ``vel_before``;
    motion capture adds its noise to ``mocap_true_pos``, the position ``d`` steps old.
    """

    def __init__(self, sim: Any, imu: Any, mocap: Any, rng: np.random.Generator) -> None:
        self.imu, self.mocap, self.dt, self.n = imu, mocap, float(sim.dt), sim.n
        self.g_vec = np.asarray(sim.drone.gravity_vec, dtype=np.float64)
        self.bias = None
        if imu is not None:
            from .sensors import check_imu_params, imu_discrete_std, imu_init

            self.imu = check_imu_params(imu)
            std = imu_discrete_std(self.imu, self.dt)
            self.walk = np.concatenate([std["gyro_walk"], std["accel_walk"]])
            b0 = imu_init(self.imu, (self.n,), rng.standard_normal((self.n, 6)), xp=np,
                          dtype=np.float64)  # fmt: skip
            self.bias = np.concatenate([np.asarray(b0.gyro_bias), np.asarray(b0.accel_bias)], -1)

    def advance(self, z: np.ndarray) -> np.ndarray | None:
        """In-run biases ``(m, n, 6)`` at the steps of ``z`` ``(m, n, n_noise)``; advances them."""
        if self.imu is None:
            return None
        inc = self.walk * z[..., 6:12]
        b = np.cumsum(np.concatenate([self.bias[None], inc]), axis=0)
        self.bias = b[-1]
        return b[:-1]

    def readings(self, fields: dict, z: np.ndarray, bias: np.ndarray | None) -> dict:
        """``gyro``, ``accel``, ``mocap_pos`` ``(m, n, 3)`` of samples ``fields`` ``(m, n, .)``.

        ``z`` and ``bias`` are those of the same samples.
        """
        out: dict = {}
        if self.imu is not None:
            from .sensors import ImuState, imu_measure

            def f(name: str) -> np.ndarray:
                return np.asarray(fields[name], np.float64)

            acc = (f("prev_vel") - f("vel_before")) / self.dt
            reading, _ = imu_measure(
                f("prev_quat"), f("prev_ang_vel"), acc, self.g_vec, self.imu,
                ImuState(bias[..., :3], bias[..., 3:]), self.dt, z[..., :12],
            )  # fmt: skip
            out["gyro"], out["accel"] = reading.gyro, reading.accel
        if self.mocap is not None:
            from .sensors import MocapState, mocap_measure

            pos = np.asarray(fields["mocap_true_pos"], np.float64)
            quat = np.asarray(fields["prev_quat"], np.float64)
            batch = pos.shape[:-1]
            empty = MocapState(np.zeros((*batch, 0, 3)), np.zeros((*batch, 0, 4)),
                               np.zeros((), np.int32))  # fmt: skip
            reading, _ = mocap_measure(pos, quat, self.mocap, empty, z[..., 12:18])
            out["mocap_pos"] = reading.pos
        return out


def _fly_compiled(
    sim: Any, loop: Any, gains: Any, offset: np.ndarray, total: int, log_every: int,
    chunk_steps: int, on_chunk: Callable | None, progress: Callable | None, keep_log: bool,
    imu: Any = None, mocap: Any = None, rng: np.random.Generator | None = None,
) -> tuple[list[dict], int, bool, int | None]:  # fmt: skip
    """:func:`fly`'s loop on the compiled closed loop: ``(chunks, steps, interrupted, signal)``.

    The loop carries the log sample of the step before (``sample=True``), so a record taken
    after step ``s`` is sample ``s - 1``. The compiled state therefore runs one step ahead of
    the samples handed over: one priming step records sample 0, each chunk's call records the
    samples ``k + L, k + 2L, ...`` (the last one waits for the next chunk), and the end sample
    at ``t = duration`` is read from the state one step past the end, whose plant step is
    discarded. The random draws (sensor noise, Dryden gusts) are made per call in the Python
    loop's order (:class:`_Draws`) and the sensor readings computed from the records
    (:class:`_Sensors`). A call whose per-step inputs would pass :data:`CHUNK_BYTES` is split
    into several rollout calls of whole sampling periods.
    """
    from .control import init_state
    from .sim import SimulationError, State
    from .world import FAULT_NAMES, Status

    n, dt, rows = sim.n, sim.dt, loop.rows
    k_sim0 = int(sim.k)
    state0 = _numpy_state(sim.state)
    status0 = sim.status
    flag_dtype = _flag(status0, "crashed", n).dtype
    names = [name for name, _ in loop.system.fields]
    x = loop.initial_state(n, **{name: getattr(state0, name) for name in names})
    x = x.astype(np.float64)
    if status0 is not None:
        for name, value in zip(Status._fields, status0, strict=True):
            x[rows[name]] = to_numpy(value).astype(np.float64)[None]
    cstate = init_state(gains, (n,))
    for name, value in zip(cstate._fields, cstate, strict=True):
        x[rows["ctrl_" + name]] = np.asarray(value, np.float64).reshape(n, -1).T
    x[rows["step"]] = k_sim0
    x = x.astype(loop.dtype)
    rng = sim.rng if rng is None else rng
    n_noise = (18 if mocap is not None else 12) if (imu or mocap) else 0
    sensors = _Sensors(sim, imu, mocap, rng)  # draws the IMU's turn-on biases first
    draws = _Draws(sim, rng, n_noise, total)
    per_step = n_noise > 0 or draws.gusty
    wind = getattr(sim, "wind", None)
    held = None if wind is None else np.broadcast_to(np.asarray(wind.mean, np.float64), (n, 3))
    seg_max = chunk_steps
    if per_step:  # per-step inputs (wind, noise) of one rollout call stay under CHUNK_BYTES
        per = max(1, CHUNK_BYTES // (8 * n * (3 + 5 + n_noise)))
        seg_max = max(log_every, per - per % log_every)
    done = [0]  # steps handed to the rollout so far (relative to the flight's start)

    def run(x: np.ndarray, steps: int, every: int) -> tuple[np.ndarray, dict, dict]:
        """``steps`` steps from ``x``: ``(x, records, final)``, sensors included.

        ``records`` holds the samples recorded every ``every`` steps, ``final`` the sample of
        the state reached (both dicts of ``(m, n, ...)`` fields).
        """
        recs, final = [], {}
        left = steps
        while left:
            s = min(seg_max, left)
            a = done[0]
            z, w = draws(a, a + s - 1) if per_step else (None, None)
            out = loop.run(x, s, record_every=every, wind=held if w is None else w,
                           offset=offset)  # fmt: skip
            x, rec = out.x, out.fields
            done[0] += s
            left -= s
            bias = sensors.advance(z) if n_noise else None
            if rec and n_noise:  # sample j = a - 1 + every * (1, 2, ...) uses z_j, bias_j
                i = every * np.arange(1, len(rec["cmd_rpm"]) + 1) - 1
                rec = rec | sensors.readings(rec, z[i], None if bias is None else bias[i])
            if rec:
                recs.append(rec)
            if not left:
                final = as_record(x)
                if n_noise:
                    final |= sensors.readings(final, z[-1:],
                                              None if bias is None else bias[-1:])  # fmt: skip
        rec = {key: np.concatenate([r[key] for r in recs]) for key in recs[0]} if recs else {}
        return x, rec, final

    brain_keys = sorted(["ref_pos", "ref_vel", "ref_yaw", "cmd_rpm", "cmd_wrench", "lost_wrench",
                         "saturated", *(["gyro", "accel"] if imu is not None else []),
                         *(["mocap_pos"] if mocap is not None else [])])  # fmt: skip

    def samples(fields: dict, sl: Any) -> dict:
        """Log samples ``fields[sl]`` (records, or a final state as one record) as fly logs them."""

        def f(name: str) -> np.ndarray:
            return np.asarray(fields[name][sl], np.float64)

        m = f("cmd_rpm").shape[0]
        rotor = "prev_rotor_vel" if "prev_rotor_vel" in fields else "cmd_rpm"
        flags = {}
        for name in ("crashed", "landed"):
            key = "prev_" + name
            flags[name] = (np.asarray(fields[key][sl]).astype(flag_dtype) if key in fields
                           else np.zeros((m, n), flag_dtype))  # fmt: skip
        brain = {key: f(key) for key in brain_keys if key != "saturated"}
        brain["ref_yaw"] = brain["ref_yaw"][..., 0]
        brain["saturated"] = np.asarray(fields["saturated"][sl])
        return {
            **{key: brain[key] for key in brain_keys}, "time": None,
            "pos": f("prev_pos"), "quat": f("prev_quat"), "vel": f("prev_vel"),
            "ang_vel": f("prev_ang_vel"), "rotor_rpm": f(rotor), **flags,
        }  # fmt: skip

    def as_record(x: np.ndarray) -> dict:
        """The compiled state ``(n_x, n)`` as one record ``(1, n, size)`` by field."""
        rec = {name: x[s].T[None] for name, s in rows.items()}
        for name in ("saturated", "prev_landed", "prev_crashed"):
            if name in rec:
                rec[name] = rec[name][..., 0] > 0.5
        return rec

    def load_back(rec: dict, steps: int) -> None:
        """Put the plant state and flags of a record (sample ``steps``) into ``sim``."""
        sim.k = k_sim0 + steps
        fields = [np.asarray(rec["prev_" + name][-1], np.float64) if "prev_" + name in rec
                  else None for name in State._fields]  # fmt: skip
        sim.state = State(*fields)
        if status0 is not None:
            sim.status = Status(*(
                np.asarray(rec["prev_" + name][-1]).reshape(n).astype(to_numpy(old).dtype)
                for name, old in zip(Status._fields, status0, strict=True)
            ))  # fmt: skip

    def check_fault(rec: dict) -> None:
        """Raise as ``Simulator.step`` does for a single drone that diverged."""
        if n != 1 or status0 is None:
            return
        k = int(np.asarray(rec["prev_fault_step"][-1]).reshape(-1)[0])
        if k >= 0:
            code = int(np.asarray(rec["prev_fault_code"][-1]).reshape(-1)[0])
            raise SimulationError(
                f"drone diverged: {FAULT_NAMES[code]} at step {k} (t = {(k + 1) * dt:.6g} s); "
                "the state was kept at its last good value"
            )

    chunks: list[dict] = []
    k = 0
    interrupted, stop_signal = False, None
    latest, latest_k = None, 0  # the record of the last plant state computed, and its step
    try:
        x, _, pending = run(x, 1, 0)
        latest = pending
        while k < total:
            n_chunk = min(chunk_steps, total - k)
            last = k + n_chunk == total
            x, rec, final = run(x, n_chunk, log_every)
            m = len(rec["cmd_rpm"]) if rec else 0
            idx = k + log_every * np.arange(1, m + 1)  # the sample index of each record
            if last:
                keep = int(np.sum(idx < total))
                parts = [pending] + ([{key: v[:keep] for key, v in rec.items()}] if keep else [])
                parts.append(final)
                latest = final
                sample_k = [k, *idx[:keep].tolist(), total]
            else:  # a whole number of periods: the last record is the final state's sample
                parts = [pending, {key: v[:-1] for key, v in rec.items()}]
                pending = final
                latest = pending
                sample_k = [k, *idx[:-1].tolist()]
            latest_k = k + n_chunk
            check_fault(latest)
            logged = [samples(p, slice(None)) for p in parts]
            chunk = {key: np.concatenate([s[key] for s in logged]) if key != "time"
                     else (k_sim0 + np.asarray(sample_k)) * dt for key in logged[0]}  # fmt: skip
            with _interrupt_after():  # the chunk reaches the writer and the log, or neither
                k += n_chunk
                if on_chunk is not None:
                    on_chunk(chunk)
                if keep_log:
                    chunks.append(chunk)
            if progress is not None:
                progress(k, total)
    except KeyboardInterrupt as e:
        interrupted, stop_signal = True, getattr(e, "signum", int(signal.SIGINT))
    finally:
        if latest is not None:
            load_back(latest, latest_k)
    return chunks, k, interrupted, stop_signal


def fly(
    sim: Any,
    trajectory: Callable[[Any], Any],
    control: Callable,
    gains: Any,
    *,
    duration: float,
    ctrl_state: Any = None,
    allocator: Any = None,
    ref_offset: Any = None,
    imu: Any = None,
    mocap: Any = None,
    rng: np.random.Generator | None = None,
    log_every: int = 1,
    chunk_steps: int = 1000,
    on_chunk: Callable[[dict], None] | None = None,
    progress: Callable[[int, int], None] | None = None,
    keep_log: bool = True,
    meta: dict | None = None,
    jit: bool | None = None,
    compiled: bool | None = None,
) -> FlightResult:
    """Fly ``sim`` (already reset) along ``trajectory`` for ``duration`` seconds.

    Sample ``k`` of the log is taken at ``t_k`` before the step: state ``x_k``, reference
    ``r_k``, the command computed from them, and the sensor readings at ``t_k``.

    Args:
        sim: A :class:`~quadsim.sim.Simulator` with a rotor-level model.
        trajectory: Callable ``t -> Reference`` (:mod:`quadsim.trajectories`).
        control: Controller ``(state, ref, gains, ctrl_state) -> (wrench (n, 4), ctrl_state)``
            (:mod:`quadsim.control`).
        gains: The controller's gains record.
        duration: Flight time [s]; rounded to whole steps.
        ctrl_state: Initial controller state (default: :func:`quadsim.control.init_state`).
        allocator: From :func:`quadsim.rotors.make_allocator` (default: built from ``sim.drone``).
        ref_offset: Per-drone reference offsets ``(n, 3)`` or ``(3,)`` [m] (formations).
        imu: :class:`~quadsim.sensors.ImuParams` to simulate and log an IMU at the control
            rate, or ``None``.
        mocap: :class:`~quadsim.sensors.MocapParams` to simulate and log motion capture.
        rng: Generator of the sensor noise (default: ``sim.rng``).
        log_every: Record every ``log_every``-th step.
        chunk_steps: Steps per chunk handed to ``on_chunk``.
        on_chunk: Called with each completed chunk (a log dict).
        progress: Called as ``progress(steps_done, steps_total)`` after each chunk.
        keep_log: Keep the concatenated log in the result (turn off for huge streamed runs).
        meta: Extra metadata merged into the result's ``meta`` (:func:`run_meta`).
        jit: Run reference, controller, allocation and sensors as one JAX-compiled float64
            function (about 25x faster than NumPy per step; costs ~1-3 s of compilation).
            ``None``: when JAX is installed. The results are the same to rounding.
            ``False`` also rules out the compiled loop.
        compiled: Run the whole closed loop compiled to C, a chunk per call
            (:mod:`quadsim.closed_loop`): ``None`` when :func:`compiled_path_reason` allows it,
            ``True`` to require it, ``False`` for the per-step Python loop. Both paths log the
            same samples, sensor noise and gusts included (equal to rounding in float64, and
            they leave ``sim``, its generator and its gust state alike after a completed
            flight); on a float32 simulator the compiled loop also runs reference, controller
            and allocation in float32. The path that ran
            and why are in ``meta["loop"]`` (``"compiled"`` or ``"python"``) and
            ``meta["loop_reason"]``.

    Returns:
        :class:`FlightResult`. After the flight ``sim`` holds the state, flags and clock of the
        last step computed (on the compiled path loaded back through ``sim.k``, ``sim.state``
        and ``sim.status``; an interrupted compiled flight stops at a chunk's end, and its
        generators and gust state may have advanced past it: they drew for the chunk in flight).

    Raises:
        ValueError: Bad arguments, or ``compiled=True`` where the compiled loop cannot run (the
            message says why).
    """
    from . import rotors
    from .control import init_state

    if not (duration > 0 and math.isfinite(duration)):
        raise ValueError(f"duration must be a positive number of seconds; got {duration!r}")
    if (
        int(log_every) != log_every
        or log_every < 1
        or int(chunk_steps) != chunk_steps
        or (chunk_steps < 1)
    ):
        raise ValueError("log_every and chunk_steps must be positive integers")
    if sim.system.n_cmd != sim.drone.mixing_matrix.shape[1]:
        raise ValueError("fly needs a rotor-level model (first_principles or euler_zyx)")
    n, dt = sim.n, sim.dt
    total = max(1, round(duration / dt))
    chunk_steps = max(log_every, chunk_steps - chunk_steps % log_every)
    R = sim.drone.mixing_matrix.shape[1]
    sample_bytes = 8 * n * (48 + 2 * R)  # about what one logged sample of the batch holds
    cap = max(1, CHUNK_BYTES // sample_bytes) * log_every
    chunk_steps = min(chunk_steps, cap)
    offset = (
        np.zeros((n, 3))
        if ref_offset is None
        else np.broadcast_to(np.asarray(ref_offset, dtype=np.float64), (n, 3))
    )
    reason = "compiled=False" if compiled is False else compiled_path_reason(
        sim, control, gains, ctrl_state=ctrl_state, allocator=allocator, imu=imu, mocap=mocap,
        jit=jit, rng=rng,
    )  # fmt: skip
    loop = None
    if reason is None:
        from .closed_loop import compile_for_simulator

        try:
            delay = None
            if mocap is not None:
                from .sensors import mocap_delay_steps

                delay = mocap_delay_steps(mocap, dt)
            loop = compile_for_simulator(sim, control, gains, trajectory, imu=imu is not None,
                                         mocap_delay=delay)  # fmt: skip
        except Exception as e:  # any failure to trace or build falls back
            reason = f"the closed loop could not be compiled: {type(e).__name__}: {e}"
    if compiled and loop is None:
        raise ValueError(f"compiled=True, but the compiled loop cannot run: {reason}")
    loop_meta = {"loop": "python" if loop is None else "compiled", "loop_reason": reason}
    if loop is not None:
        t0 = time.perf_counter()
        chunks, k, interrupted, stop_signal = _fly_compiled(
            sim, loop, gains, offset, total, log_every, chunk_steps, on_chunk, progress, keep_log,
            imu, mocap, rng,
        )  # fmt: skip
        wall = time.perf_counter() - t0
        log = {key: np.concatenate([c[key] for c in chunks]) for key in chunks[0]} if chunks else {}
        meta_out = run_meta(sim, total * dt, meta) | loop_meta
        return FlightResult(log, meta_out, k, interrupted, wall, stop_signal)

    jax = _jax_or_none() if jit in (None, True) else None
    if jit and jax is None:
        raise ValueError("jit=True needs JAX (pip install 'quadsim[jax]')")
    allocator = rotors.make_allocator(sim.drone) if allocator is None else allocator
    rng = sim.rng if rng is None else rng
    g_vec = np.asarray(sim.drone.gravity_vec, dtype=np.float64)
    xp = np
    if jax is not None:
        import jax.numpy as jnp

        xp = jnp
    brain = _make_brain(trajectory, control, gains, allocator, imu, mocap, g_vec, dt, xp)
    state = _numpy_state(sim.state)
    with _x64(jax):
        cstate = init_state(gains, (n,), xp, xp.float64) if ctrl_state is None else ctrl_state
        imu_state = mocap_state = None
        if imu is not None:
            from .sensors import imu_init

            imu_state = imu_init(imu, (n,), rng.standard_normal((n, 6)), xp=xp, dtype=xp.float64)
        if mocap is not None:
            from .sensors import mocap_init

            mocap_state = mocap_init(xp.asarray(state.pos), xp.asarray(state.quat), mocap, dt)
        if jax is not None:
            brain = jax.jit(brain)
    n_noise = (18 if mocap is not None else 12) if (imu or mocap) else 0

    rows: dict[str, list] = {}
    chunks: list[dict] = []
    k = 0
    interrupted, stop_signal = False, None
    vel_prev = state.vel

    def think(state: Any, vel_prev: Any, brain_state: tuple) -> tuple:
        """Reference, controller, allocation and sensors at the current time."""
        z = rng.standard_normal((n, n_noise)) if n_noise else np.zeros((n, 0))
        with _x64(jax):
            out, *brain_state = brain(
                sim.time, state.pos, state.quat, state.vel, state.ang_vel, vel_prev, offset,
                *brain_state, z,
            )  # fmt: skip
            rpm = np.asarray(out["cmd_rpm"])
        return out, rpm, tuple(brain_state)

    def record(out: dict, rpm: np.ndarray, state: Any, t: float) -> None:
        status = sim.status
        rec = {key: np.asarray(out[key]) for key in sorted(out)}  # JAX's order, with or without
        rec.update(
            time=np.asarray(t),
            pos=state.pos,
            quat=state.quat,
            vel=state.vel,
            ang_vel=state.ang_vel,
            rotor_rpm=state.rotor_vel if state.rotor_vel is not None else rpm,
            crashed=_flag(status, "crashed", n),
            landed=_flag(status, "landed", n),
        )
        for key, value in rec.items():
            rows.setdefault(key, []).append(np.array(value))

    brain_state = (cstate, imu_state, mocap_state)
    t0 = time.perf_counter()
    try:
        while k < total:
            n_chunk = min(chunk_steps, total - k)
            for i in range(n_chunk):
                t = sim.time
                out, rpm, brain_state = think(state, vel_prev, brain_state)
                if (k + i) % log_every == 0:
                    record(out, rpm, state, t)
                vel_prev = state.vel
                state = _numpy_state(sim.step(rpm))
            if k + n_chunk == total:  # the end sample, at t = duration
                out, rpm, brain_state = think(state, vel_prev, brain_state)
                record(out, rpm, state, sim.time)
            chunk = {key: np.stack(v) for key, v in rows.items()}
            rows = {}
            with _interrupt_after():  # the chunk reaches the writer and the log, or neither
                k += n_chunk
                if on_chunk is not None and chunk:
                    on_chunk(chunk)
                if keep_log and chunk:
                    chunks.append(chunk)
            if progress is not None:
                progress(k, total)
    except KeyboardInterrupt as e:
        interrupted, stop_signal = True, getattr(e, "signum", int(signal.SIGINT))
    wall = time.perf_counter() - t0
    log = {key: np.concatenate([c[key] for c in chunks]) for key in chunks[0]} if chunks else {}
    meta_out = run_meta(sim, total * dt, meta) | loop_meta
    return FlightResult(log, meta_out, k, interrupted, wall, stop_signal)


@contextlib.contextmanager
def _interrupt_after() -> Any:
    """Hold SIGINT, SIGTERM and SIGHUP arriving inside the block until the block is done.

    A held signal is raised again afterwards, to whatever handler was installed before.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = {s: signal.signal(s, lambda signum, frame: caught.append(signum))
                for s in STOP_SIGNALS}  # fmt: skip
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    if caught:
        signal.raise_signal(caught[0])


def _flag(status: Any, name: str, n: int) -> np.ndarray:
    return to_numpy(getattr(status, name)) if status is not None else np.zeros(n, bool)


def _x64(jax: Any) -> Any:
    """Float64 for JAX inside the block only (the process-wide setting is left alone)."""
    return jax.enable_x64(True) if jax is not None else contextlib.nullcontext()


def _numpy_state(state: Any) -> Any:
    """A :class:`~quadsim.sim.State` with NumPy float64 fields; Euler angles become quaternions."""
    from .sim import State

    fields = [None if f is None else to_numpy(f).astype(np.float64) for f in state]
    if hasattr(state, "rpy"):
        from .rotation import from_euler

        pos, rpy, vel, ang_vel, rotor_vel = fields
        return State(pos, from_euler(rpy), vel, ang_vel, rotor_vel)
    return State(*fields)
