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

Three loops log the same samples (``meta["loop"]`` says which ran, ``meta["loop_reason"]`` why
not a faster one). The **compiled loop** (``"compiled"``, the default on the ``native`` backend,
:func:`compiled_path_reason`) runs reference, controller, allocation, plant and world of every
drone as one C step (:mod:`quadsim.loop.closed_loop`), a chunk per call; per-drone model parameters
are inputs of that step, and the Dryden turbulence (the Simulator's discretisation and gust
state) and the sensors run inside the C step with the functions themselves, traced, their
normals drawn in C. The **scan loop** (``"scan"``, the
default on the ``jax`` backend, :func:`scan_path_reason`) runs the same per-step function as the
Python loop and the simulator's plant step as one ``jax.lax.scan`` per chunk
(:mod:`quadsim.loop.closed_loop_jax`), with the sensor noise and the gusts made per chunk and passed
in as scanned inputs. The **Python loop** (``"python"``) runs the rest: reference, controller,
allocation and sensors form one pure function per step; with JAX installed it is compiled
(float64, inside a local ``jax.enable_x64`` block), otherwise (or when the controller cannot be
traced by JAX) it runs on NumPy, around ``sim.step``. Every random number is counter-based
(:mod:`quadsim.physics.noise`): a function of ``(seed, stream, step, drone)``, so the three loops,
any batch size and any chunking draw the same.

**Your own controller.** Any pure function ``control(state, ref, gains, ctrl_state) ->
(command, ctrl_state)`` written over the array API (like :mod:`quadsim.loop.control`), with any
gains and controller-state records (NamedTuples of arrays, nested tuples, one array, or ``None``),
flies on every loop: it is traced into the C step by CasADi on ``native`` and into the scan on
``jax`` when it can be, and run per step otherwise. The command is a body wrench ``(..., 4)``
(allocated by :func:`quadsim.physics.rotors.allocate`) or rotor speeds ``(..., n_rotors)`` [RPM]
(clipped to ``[rpm_min, rpm_max]``, no allocation), told apart by its last axis
(:func:`command_kind`; a quadrotor's 4 is a wrench unless ``command="rpm"``). When tracing fails the
flight falls back to a slower loop, says why in ``meta["loop_reason"]`` and warns once with
:class:`TraceFallbackWarning`.

The log is a ``dict`` of time-major NumPy arrays (see :mod:`quadsim.app.io` for the keys and units),
handed to ``on_chunk`` every ``chunk_steps`` steps (fewer when a chunk would pass
:data:`CHUNK_BYTES`; ``chunk_steps=None``: on the compiled loop, chunks of about
:data:`CHUNK_SECONDS` of wall time each, so few drones make few calls), so a long flight streams
to disk and a Ctrl-C, SIGTERM or SIGHUP keeps
every completed chunk (:attr:`FlightResult.interrupted`). A flight that completes also logs the
end sample at ``t = duration`` (its command is computed and logged but not applied).
"""

from __future__ import annotations

import contextlib
import math
import signal
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ..engines.signals import interrupt_after
from ..physics._array import to_numpy
from .brain import (
    COMMANDS,
    Sensors,
    command_allocation,
    command_kind,
    initial_ctrl_state,
    noise_groups,
)
from .parts import log_columns

__all__ = [
    "CHUNK_BYTES",
    "FlightResult",
    "TraceFallbackWarning",
    "command_allocation",
    "command_kind",
    "compiled_path_reason",
    "flight_loop",
    "fly",
    "initial_ctrl_state",
    "run_meta",
    "scan_path_reason",
]

CHUNK_BYTES = 32 * 2**20
"""A chunk holds at most about this many bytes of log (so memory stays bounded for many drones)."""
CHUNK_SECONDS = 0.1
"""With ``chunk_steps=None`` a compiled chunk lasts about this long [s] (progress, Ctrl-C)."""
FIRST_CHUNK_RATE = 2e6
"""[drone-steps/s] the rate the first such chunk is sized for (then the measured one)."""


class FlightResult(NamedTuple):
    """What :func:`fly` returns.

    Attributes:
        log: Time-major arrays of the recorded samples (concatenated chunks; empty dict when
            ``keep_log`` is false).
        meta: Run metadata (drone, dt, duration, n, rotor limits and geometry, ...).
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
    from ..physics.integrators import INTEGRATORS

    if fn is None or isinstance(fn, str):
        return fn
    names = [name for name, f in INTEGRATORS.items() if f is fn]
    return names[0] if names else getattr(fn, "__name__", None)


def _dtype_name(dtype: Any) -> str | None:
    """``"float32"`` / ``"float64"`` of a NumPy, JAX or torch dtype."""
    if dtype is None or isinstance(dtype, str):
        return dtype
    return getattr(dtype, "__name__", None) or str(dtype).rpartition(".")[2]


def jax_or_none() -> Any:
    """The ``jax`` module, or ``None`` when JAX is not installed."""
    try:
        import jax
    except ImportError:
        return None
    return jax


MOCAP_DELAY_MAX = 64
"""Longest motion-capture delay [steps] the compiled loop carries (a delay line of 3 d rows)."""


def compiled_path_reason(
    sim: Any, control: Callable, gains: Any, *, ctrl_state: Any = None, allocator: Any = None,
    imu: Any = None, mocap: Any = None, jit: bool | None = None,
) -> str | None:  # fmt: skip
    """Why :func:`fly` cannot run this flight as the compiled closed loop, or ``None`` if it can.

    The compiled loop (:mod:`quadsim.loop.closed_loop`) needs the ``native`` backend with CasADi and
    a C compiler, the default allocator, a rotor-level quaternion model, a motion-capture delay
    of at most :data:`MOCAP_DELAY_MAX` steps, and
    geometric or PID gains for :func:`quadsim.loop.control.control`; any other controller is traced
    as it is, from the initial controller state ``ctrl_state`` (arrays with a leading drone axis,
    in NamedTuples or tuples; :func:`initial_ctrl_state`). ``jit=False`` asks for the Python
    loop. Per-drone model parameters, Dryden turbulence, an IMU and motion capture are compiled
    (the sensors are read inside the C step, their noise drawn there, see :func:`fly`).
    Whether the controller traces is only known by tracing it: ``fly`` then runs a slower loop,
    says so in ``meta["loop_reason"]`` and warns (:class:`TraceFallbackWarning`).

    Args:
        sim: The :class:`~quadsim.engines.sim.Simulator`.
        control: The controller.
        gains: Its gains record.
        ctrl_state: Initial controller state given to ``fly``.
        allocator: Allocator given to ``fly``.
        imu: IMU parameters given to ``fly``.
        mocap: Motion-capture parameters given to ``fly``.
        jit: ``fly``'s ``jit``.

    Returns:
        A short reason (``"a custom allocator: ..."``), or ``None``.
    """
    from . import control as control_module

    if jit is False:
        return "jit=False: the per-step Python loop was asked for"
    backend = getattr(sim, "backend", None)
    if backend != "native":
        return (f"backend {backend!r}: only 'native' compiles the closed loop"
                + (" (and 'jax' scans it)" if backend != "jax" else ""))  # fmt: skip
    if control is control_module.control and not isinstance(
        gains, control_module.GeometricGains | control_module.PidGains
    ):
        return f"gains of type {type(gains).__name__}: only geometric and PID gains are compiled"
    if ctrl_state is not None:
        bad = _ctrl_state_problem(ctrl_state, sim.n)
        if bad:
            return f"ctrl_state: {bad}"
    if allocator is not None:
        return "a custom allocator: the compiled loop uses the drone's default allocator"
    if mocap is not None:
        from ..physics.sensors import mocap_delay_steps

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
    from ..engines.native import available

    if not available():
        return "quadsim.engines.native is unavailable (needs CasADi and a C compiler)"
    return None


def scan_path_reason(
    sim: Any, control: Callable, gains: Any, *, ctrl_state: Any = None, imu: Any = None,
    mocap: Any = None, jit: bool | None = None,
) -> str | None:  # fmt: skip
    """Why :func:`fly` cannot run this flight as one ``jax.lax.scan`` per chunk, or ``None``.

    The scan loop (:mod:`quadsim.loop.closed_loop_jax`) needs the ``jax`` backend, a rotor-level
    quaternion model, and ``jit`` not ``False``; the
    controller (built-in or your own) must be traceable by JAX, which only tracing tells
    (``fly`` falls back and says so). Any allocator, initial controller state, per-drone model
    parameters, Dryden turbulence, IMU and motion capture are scanned.

    Args:
        sim: The :class:`~quadsim.engines.sim.Simulator`.
        control: The controller.
        gains: Its gains record.
        ctrl_state: Initial controller state given to ``fly``.
        imu: IMU parameters given to ``fly``.
        mocap: Motion-capture parameters given to ``fly``.
        jit: ``fly``'s ``jit``.

    Returns:
        A short reason, or ``None``.
    """
    if jit is False:
        return "jit=False: the per-step Python loop was asked for"
    backend = getattr(sim, "backend", None)
    if backend != "jax":
        return f"backend {backend!r}: only 'jax' scans the closed loop"
    system = sim.system
    if system.attitude != "quat" or system.n_cmd != sim.drone.mixing_matrix.shape[1]:
        return (f"model {getattr(system, 'model', None)!r}: the scan loop needs a rotor-level "
                "quaternion model (first_principles)")  # fmt: skip
    if jax_or_none() is None:
        return "JAX is not installed"
    return None


def flight_loop(sim: Any, control: Callable, gains: Any, **kwargs: Any) -> tuple[str, str | None]:
    """The loop :func:`fly` will run, ``(loop, reason)``, as far as it is known before tracing.

    ``loop`` is ``"compiled"`` (``native``, :func:`compiled_path_reason` is ``None``), ``"scan"``
    (``jax``, :func:`scan_path_reason` is ``None``) or ``"python"``, and ``reason`` says why the
    faster loop of the backend does not run (``None`` when it does). Tracing the controller can
    still fail; ``fly``'s ``meta`` then corrects it. ``kwargs`` are ``fly``'s ``ctrl_state``,
    ``allocator``, ``imu``, ``mocap``, ``jit`` and ``compiled`` (others are ignored).
    """
    compiled = kwargs.pop("compiled", None)
    kwargs.pop("seed", None)
    if compiled is False:
        return "python", "compiled=False"
    if getattr(sim, "backend", None) == "jax":
        kwargs.pop("allocator", None)
        reason = scan_path_reason(sim, control, gains, **kwargs)
        return ("scan" if reason is None else "python"), reason
    reason = compiled_path_reason(sim, control, gains, **kwargs)
    return ("compiled" if reason is None else "python"), reason


def _ctrl_state_problem(ctrl_state: Any, n: int) -> str | None:
    """Why a per-drone controller state cannot be stored in the compiled state, or ``None``."""
    from .closed_loop import ctrl_leaves

    try:
        leaves = ctrl_leaves(ctrl_state)
    except TypeError as e:
        return str(e)
    for name, leaf in leaves:
        try:
            a = np.asarray(to_numpy(leaf))
        except Exception:  # anything that is not an array
            return f"{name} is not an array ({type(leaf).__name__})"
        if a.dtype.kind not in "biuf":
            return f"{name} is not a numeric array ({a.dtype})"
        if a.ndim and a.shape[0] not in (1, n):
            return f"{name} has shape {a.shape}: the leading axis must be the {n} drones"
    return None


def sensor_normals(seed: int, sens: Any, steps: Any, n: int) -> np.ndarray:
    """The sensors' normals ``z`` ``(m, n, n_noise)`` of the samples at the steps ``(m,)``.

    :func:`quadsim.physics.noise.normals` ``(seed, stream, k, drone)`` of the groups of
    :func:`quadsim.loop.brain.noise_groups`, as the compiled loop draws them in C.
    """
    from ..physics.noise import normals

    k, d = np.asarray(steps)[:, None], np.arange(n)[None]
    groups = noise_groups(sens)
    z = [normals(seed, stream, k, d, count) for stream, count in groups]
    return np.concatenate(z, -1) if z else np.zeros((k.shape[0], n, 0))


class _Draws:
    """The per-step random inputs of the scan loop for a range of steps.

    Counter-based (:mod:`quadsim.physics.noise`), so a range is a pure function of its steps: the
    sensor normals of sample ``j`` (:func:`sensor_normals`) and the world wind of step ``j``
    (mean + Dryden gust) from the Simulator's own
    :meth:`~quadsim.engines.sim.Simulator.wind_sequence` at the absolute step, which advances
    ``sim``'s gust state (ask for the ranges in order). The wind of step
    ``total`` (never applied) is the mean.
    """

    def __init__(self, sim: Any, seed: int, sens: Any, total: int) -> None:
        self.sim, self.seed, self.sens, self.total = sim, seed, sens, total
        self.k0, self.n = int(sim.k), sim.n
        self.gusty = sim.dryden is not None

    def __call__(self, a: int, b: int) -> tuple[Any, Any]:
        """Draws of steps ``a..b`` (inclusive, relative to the flight's start).

        Returns:
            ``(z (m, n, n_noise) or None without sensors, wind (m, n, 3) or None without
            turbulence)``.
        """
        sim, n, m = self.sim, self.n, b - a + 1
        z = None
        if noise_groups(self.sens):
            z = sensor_normals(self.seed, self.sens, self.k0 + np.arange(a, b + 1), n)
        if not self.gusty:
            return z, None
        mg = max(0, min(b, self.total - 1) - a + 1)
        wind = np.empty((m, n, 3))
        wind[:] = sim.mean_wind
        if mg:
            wind[:mg] = sim.wind_sequence(mg, self.k0 + a)
        return z, wind


class _Chunking:
    """The compiled loop's chunk length [steps]: ``chunk_steps``, or timed (:data:`CHUNK_SECONDS`
    per chunk, from :data:`FIRST_CHUNK_RATE` then the rate measured), a multiple of
    ``log_every`` below ``cap``."""  # noqa: D205, D209

    def __init__(self, log_every: int, cap: int, n: int, steps: int, timed: bool) -> None:
        self.log_every, self.cap, self.n, self.timed = log_every, cap, n, timed
        self.steps = self._fit(CHUNK_SECONDS * FIRST_CHUNK_RATE / n) if timed else steps

    def _fit(self, steps: float) -> int:
        L = self.log_every
        return int(min(self.cap, max(L, L * round(steps / L))))

    def took(self, steps: int, seconds: float) -> None:
        """A chunk of ``steps`` took ``seconds``: size the next one."""
        if self.timed and seconds > 0.0:
            self.steps = self._fit(CHUNK_SECONDS * steps / seconds)


def _fly_compiled(
    sim: Any, loop: Any, bstate0: Any, offset: np.ndarray, total: int, log_every: int,
    chunking: Any, on_chunk: Callable | None, progress: Callable | None, keep_log: bool,
    sens: Sensors | None = None, seed: int = 0, estimator: Any = None,
) -> tuple[list[dict], int, bool, int | None]:  # fmt: skip
    """:func:`fly`'s loop on the compiled closed loop: ``(chunks, steps, interrupted, signal)``.

    The loop carries the log sample of the step before (``sample=True``), so a record taken
    after step ``s`` is sample ``s - 1``. The compiled state therefore runs one step ahead of
    the samples handed over: one priming step records sample 0, each chunk's call records the
    samples ``k + L, k + 2L, ...`` (the last one waits for the next chunk), and the end sample
    at ``t = duration`` is read from the state one step past the end, whose plant step is
    discarded. The sensors and the Dryden turbulence run inside the C step (their normals drawn
    there, the turbulence from the Simulator's gust state and seed, which it gets back), so a
    call has no per-step inputs: one rollout call per chunk.
    """
    from ..engines.sim import SimulationError, State
    from ..physics.world import FAULT_NAMES, Status

    n, dt, rows = sim.n, sim.dt, loop.rows
    k_sim0 = int(sim.k)
    state0 = numpy_state(sim.state)
    status0 = sim.status
    flag_dtype = _flag(status0, "crashed", n).dtype
    names = [name for name, _ in loop.system.fields]
    x = loop.initial_state(n, **{name: getattr(state0, name) for name in names},
                           brain_state=bstate0)  # fmt: skip
    x = x.astype(np.float64)
    if status0 is not None:
        for name, value in zip(Status._fields, status0, strict=True):
            x[rows[name]] = to_numpy(value).astype(np.float64)[None]
    x[rows["step"]] = k_sim0
    if "gust_state" in rows:  # the turbulence runs in the step, from the Simulator's state
        x[rows["gust_state"]] = np.asarray(sim.gust_start(), np.float64).T
    x = x.astype(loop.dtype)
    wind = getattr(sim, "wind", None)
    held = None if wind is None else np.broadcast_to(np.asarray(sim.mean_wind, np.float64),
                                                     (n, 3))  # fmt: skip

    def run(x: np.ndarray, steps: int, every: int) -> tuple[np.ndarray, dict, dict]:
        """``steps`` steps from ``x``: ``(x, records, final)``.

        ``records`` holds the samples recorded every ``every`` steps, ``final`` the sample of
        the state reached (both dicts of ``(m, n, ...)`` fields).
        """
        out = loop.run(x, steps, record_every=every, wind=held, offset=offset, seed=seed,
                       plant_seed=sim.seed)  # fmt: skip
        return out.x, out.fields, as_record(out.x)

    from .brain import brain_outputs

    sens = Sensors() if sens is None else sens
    sensed = brain_outputs(sens, estimator)
    brain_keys = sorted(["ref_pos", "ref_vel", "ref_yaw", "cmd_rpm", "cmd_wrench", "lost_wrench",
                         "saturated", *(k for k, _ in sensed)])  # fmt: skip
    scalars = ["ref_yaw", *(k for k, size in sensed if size == 1)]

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
        for key in scalars:
            brain[key] = brain[key][..., 0]
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
        if "prev_gust_state" in rec:  # the gust state after the steps flown, as the Simulator's
            sim.gust_state = np.asarray(rec["prev_gust_state"][-1], np.float64)

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
            n_chunk = min(chunking.steps, total - k)
            last = k + n_chunk == total
            t_call = time.perf_counter()
            x, rec, final = run(x, n_chunk, log_every)
            chunking.took(n_chunk, time.perf_counter() - t_call)
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
            with interrupt_after():  # the chunk reaches the writer and the log, or neither
                k += n_chunk
                hand_over(chunk, on_chunk, keep_log, chunks)
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
    seed: int | None = None,
    log_every: int = 1,
    chunk_steps: int | None = 1000,
    on_chunk: Callable[[dict], None] | None = None,
    progress: Callable[[int, int], None] | None = None,
    keep_log: bool = True,
    meta: dict | None = None,
    jit: bool | None = None,
    compiled: bool | None = None,
    command: str | None = None,
    estimator: Any = None,
    baro: Any = None,
    gnss: Any = None,
    power: Any = None,
    battery_charge: Any = 1.0,
    parts: Any = (),
) -> FlightResult:
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
            tuple of arrays, one array, or ``None``. Default: :func:`initial_ctrl_state` (the
            controller's ``init_state`` attribute, :func:`quadsim.loop.control.init_state` for the
            built-in gains, else ``None``).
        allocator: From :func:`quadsim.physics.rotors.make_allocator` (default: built from
        ``sim.drone``).
        ref_offset: Per-drone reference offsets ``(n, 3)`` or ``(3,)`` [m] (formations).
        imu: :class:`~quadsim.physics.sensors.ImuParams` to simulate and log an IMU at the control
            rate, or ``None``.
        mocap: :class:`~quadsim.physics.sensors.MocapParams` to simulate and log motion capture.
        seed: Key of the sensor noise (default: ``sim.seed``): the IMU of drone ``i`` at step
            ``k`` reads :func:`quadsim.physics.noise.normals` ``(seed, "imu", k, i)`` (motion
            capture ``"mocap"``, the IMU's turn-on bias ``"imu_init"`` at the flight's first step),
            so a drone's readings do not depend on the batch, the chunking or the loop.
        log_every: Record every ``log_every``-th step.
        chunk_steps: Steps per chunk handed to ``on_chunk``; ``None``: on the compiled loop
            about :data:`CHUNK_SECONDS` of wall time per chunk (the first sized for
            :data:`FIRST_CHUNK_RATE`), 1000 steps on the others.
        on_chunk: Called with each completed chunk (a log dict).
        progress: Called as ``progress(steps_done, steps_total)`` after each chunk.
        keep_log: Keep the concatenated log in the result (turn off for huge streamed runs).
        meta: Extra metadata merged into the result's ``meta`` (:func:`run_meta`).
        jit: Run reference, controller, allocation and sensors as one JAX-compiled float64
            function (about 25x faster than NumPy per step; costs ~1-3 s of compilation).
            ``None``: when JAX is installed and the controller traces. The results are the
            same to rounding. ``False`` also rules out the compiled and the scan loop.
        compiled: Run the backend's fast loop: the whole closed loop compiled to C on
            ``native`` (:mod:`quadsim.loop.closed_loop`), a chunk per call, or one ``lax.scan`` per
            chunk on ``jax`` (:mod:`quadsim.loop.closed_loop_jax`). ``None`` when
            :func:`compiled_path_reason` / :func:`scan_path_reason` allow it and the controller
            traces, ``True`` to require it, ``False`` for the per-step Python loop. All paths
            log the same samples, sensor noise and gusts included (equal to rounding in
            float64, and they leave ``sim`` and its gust state alike after a completed
            flight); on a float32 simulator the compiled loop also runs reference,
            controller and allocation in float32. The path that ran and why are in
            ``meta["loop"]`` (``"compiled"``, ``"scan"`` or ``"python"``) and
            ``meta["loop_reason"]``; a controller that cannot be traced also warns
            (:class:`TraceFallbackWarning`).
        command: What the controller's command is: ``None`` (the controller's ``command``
            attribute if it has one, else ``"auto"``), ``"auto"`` (by the size of its last
            axis, :func:`command_kind`: 4 is a wrench, ``n_rotors`` rotor speeds), ``"wrench"``
            or ``"rpm"`` (needed for rotor speeds on a quadrotor).
        estimator: What the controller reads instead of the true state: an estimator of
            :mod:`quadsim.loop.estimation` (e.g.
            :class:`~quadsim.loop.estimation.estimators.EkfEstimator`, fed by ``imu`` and
            ``mocap``), which runs inside every loop (traced into the compiled one); its outputs
            (``est_*``) are logged. ``None``: the truth.
        baro: :class:`~quadsim.physics.sensors.BaroParams` to simulate and log a barometer
            (``baro_alt``, normals ``(seed, "baro", k, i)``).
        gnss: :class:`~quadsim.physics.sensors.GnssParams` to simulate and log GNSS fixes
            (``gnss_pos``, ``gnss_vel``, normals ``(seed, "gnss", k, i)``).
        power: :class:`~quadsim.physics.power.PowerParams` (or a preset name, ``"cf21_stock"``): the
            rotor commands go through the battery's PWM chain (the speed a full PWM gives at
            the sagging voltage caps them) and ``battery_v``, ``battery_i``, ``battery_p``,
            ``battery_charge`` are logged (:func:`quadsim.loop.brain.make_brain`). ``None``: an
            ideal supply.
        battery_charge: The battery's charge at the start, 0..1 (a number or ``(n,)``).
        parts: Sensor parts (:mod:`quadsim.loop.parts`, e.g.
            :class:`~quadsim.loop.parts.rangefinder.Rangefinder`), read at their rates on every
            loop and logged as ``<name>_<output>``; their names must differ.

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
    from ..physics import rotors

    if not (duration > 0 and math.isfinite(duration)):
        raise ValueError(f"duration must be a positive number of seconds; got {duration!r}")
    timed = chunk_steps is None
    chunk_steps = 1000 if timed else chunk_steps
    if (
        int(log_every) != log_every
        or log_every < 1
        or int(chunk_steps) != chunk_steps
        or (chunk_steps < 1)
    ):
        raise ValueError("log_every and chunk_steps must be positive integers (or None)")
    if sim.system.n_cmd != sim.drone.mixing_matrix.shape[1]:
        raise ValueError("fly needs a rotor-level model (first_principles or euler_zyx)")
    command = getattr(control, "command", None) if command is None else command
    if command is not None and command not in COMMANDS:
        raise ValueError(f"command must be one of {COMMANDS}; got {command!r}")
    n, dt = sim.n, sim.dt
    total = max(1, round(duration / dt))
    chunk_steps = max(log_every, chunk_steps - chunk_steps % log_every)
    R = sim.drone.mixing_matrix.shape[1]
    sample_bytes = 8 * n * (48 + 2 * R)  # about what one logged sample of the batch holds
    cap = max(1, CHUNK_BYTES // sample_bytes) * log_every
    chunk_steps = min(chunk_steps, cap)
    chunking = _Chunking(log_every, cap, n, chunk_steps, timed)
    offset = (
        np.zeros((n, 3))
        if ref_offset is None
        else np.broadcast_to(np.asarray(ref_offset, dtype=np.float64), (n, 3))
    )
    backend = getattr(sim, "backend", None)
    from ..physics.noise import check_seed

    seed = sim.seed if seed is None else check_seed(seed)
    from .brain import loop_periods

    if isinstance(power, str):
        from ..physics.power import load_power

        power = load_power(power)
    sens = Sensors(imu, mocap, baro, gnss, power, battery_charge, _check_parts(parts))
    periods = loop_periods(sim.dt, gains, sens)  # validated once
    kw = {"ctrl_state": ctrl_state, "imu": imu, "mocap": mocap, "jit": jit}
    if compiled is False:
        reason = "compiled=False"
    elif backend == "jax":
        reason = scan_path_reason(sim, control, gains, **kw)
    else:
        reason = compiled_path_reason(sim, control, gains, allocator=allocator, **kw)
    fast = "scan" if backend == "jax" else "compiled"
    failed: list[tuple[str, str]] = []  # (by what, why) it could not be traced: one warning
    loop = None
    if reason is None and fast == "compiled":
        try:
            loop, bstate0 = _compile_native(sim, control, gains, trajectory, ctrl_state, sens,
                                            command, periods, seed, estimator)  # fmt: skip
        except Exception as e:  # any failure to trace or build falls back
            reason = f"the closed loop could not be compiled: {_one_line(e)}"
            failed.append(("by CasADi", _one_line(e)))
    scan = None
    if reason is None and fast == "scan":
        try:
            scan = _build_scan(sim, trajectory, control, gains, allocator, sens, command,
                               ctrl_state, offset, total, log_every, chunk_steps, seed,
                               periods, estimator)  # fmt: skip
        except Exception as e:  # the controller (or trajectory) does not trace: per step
            reason = f"the closed loop could not be traced by JAX: {_one_line(e)}"
            failed.append(("by JAX into the scan", _one_line(e)))
    if compiled and loop is None and scan is None:
        raise ValueError(f"compiled=True, but the {fast} loop cannot run: {reason}")
    if loop is not None:
        loop_meta = {"loop": "compiled", "loop_reason": None}
        t0 = time.perf_counter()
        chunks, k, interrupted, stop_signal = _fly_compiled(
            sim, loop, bstate0, offset, total, log_every, chunking, on_chunk, progress,
            keep_log, sens, seed, estimator,
        )  # fmt: skip
    elif scan is not None:
        from .closed_loop_jax import fly_scan

        loop_meta = {"loop": "scan", "loop_reason": None}
        t0 = time.perf_counter()
        scan_loop, carry, draws = scan()
        chunks, k, interrupted, stop_signal = fly_scan(
            sim, scan_loop, carry, offset, total, log_every, chunk_steps, on_chunk, progress,
            keep_log, draws,
        )  # fmt: skip
    else:
        allocator = rotors.make_allocator(sim.drone) if allocator is None else allocator
        run, brain_name, why = _python_loop(
            sim, trajectory, control, gains, allocator, sens, command, ctrl_state, offset,
            total, log_every, chunk_steps, on_chunk, progress, keep_log, jit, seed, periods,
            estimator,
        )  # fmt: skip
        if why:
            same = bool(failed) and failed[-1][1] == why
            failed.append(("by JAX per step", why))
            reason = (f"{reason}; nor per step" if same else
                      f"{reason}; the per-step function could not be traced by JAX: {why}")
        loop_meta = {"loop": "python", "loop_reason": reason}
        if failed:
            _warn_fallback(control, failed, f"the per-step Python loop on {brain_name}")
        t0 = time.perf_counter()
        chunks, k, interrupted, stop_signal = run()
    wall = time.perf_counter() - t0
    log = {key: np.concatenate([c[key] for c in chunks]) for key in chunks[0]} if chunks else {}
    from .brain import rates_hz

    rates = {"rates_hz": rates_hz(dt, periods, sens)}
    meta_out = run_meta(sim, total * dt, meta) | loop_meta | rates
    if sens.parts:
        meta_out["columns"] = log_columns(sens.parts)
    return FlightResult(log, meta_out, k, interrupted, wall, stop_signal)


def _check_parts(parts: Any) -> tuple:
    """``parts`` as a tuple of sensor parts with distinct names (:mod:`quadsim.loop.parts`)."""
    parts = tuple(parts or ())
    names = [getattr(p, "name", None) for p in parts]
    for p, name in zip(parts, names, strict=True):
        if not (isinstance(name, str) and hasattr(p, "measure") and hasattr(p, "outputs")):
            raise ValueError(f"parts: {p!r} is not a sensor part (quadsim.loop.parts)")
    if len(set(names)) != len(names):
        raise ValueError(f"parts: two sensor parts share a name: {names}")
    return parts


def _one_line(e: BaseException, limit: int = 300) -> str:
    """``"Type: first line of the message"`` (JAX's errors run to many lines)."""
    text = str(e).strip().splitlines()
    line = f"{type(e).__name__}: {text[0] if text else ''}".rstrip(": ")
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _warn_fallback(control: Callable, failed: list[tuple[str, str]], ran: str) -> None:
    """The one-line :class:`TraceFallbackWarning` of a flight whose fast loop could not run."""
    import warnings

    parts: list[list[str]] = []  # [by what, ..., why]: the same error said once
    for by, why in failed:
        if parts and parts[-1][-1] == why:
            parts[-1].insert(-1, by)
        else:
            parts.append([by, why])
    said = "; nor ".join(f"{' nor '.join(p[:-1])} ({p[-1]})" for p in parts)
    name = getattr(control, "__qualname__", None) or type(control).__name__
    warnings.warn(f"fly: controller {name} could not be traced {said}; flying {ran} (slower)",
                  TraceFallbackWarning, stacklevel=3)  # fmt: skip


def initial_brain_state(sim, control, gains, ctrl_state, sens, periods, seed, xp=np,
                        estimator=None):  # fmt: skip
    """The brain state at the flight's start (:func:`quadsim.loop.brain.brain_init`), float64.

    Of every drone of ``sim`` at its current step, on the namespace ``xp``; ``ctrl_state``
    ``None`` starts the controller from its initial state (:func:`initial_ctrl_state`).
    """
    from .brain import brain_init

    state = numpy_state(sim.state)
    cstate = initial_ctrl_state(control, gains, ctrl_state, sim.n, xp, xp.float64)
    return brain_init(sim.n, cstate, state.pos, state.quat, state.vel, sens=sens,
                      dt=float(sim.dt), periods=periods, seed=seed, k0=int(sim.k),
                      n_rotors=sim.drone.mixing_matrix.shape[1], xp=xp, estimator=estimator,
                      world=getattr(sim, "world", None))  # fmt: skip


def _compile_native(sim, control, gains, trajectory, ctrl_state, sens, command, periods,
                    seed, estimator=None):  # fmt: skip
    """The compiled closed loop of a flight and its per-drone initial brain state."""
    from .brain import first_drone
    from .closed_loop import compile_for_simulator

    bstate0 = initial_brain_state(sim, control, gains, ctrl_state, sens, periods, seed,
                                  estimator=estimator)  # fmt: skip
    loop = compile_for_simulator(sim, control, gains, trajectory, sens=sens,
                                 brain_state=first_drone(bstate0), command=command,
                                 periods=periods, estimator=estimator)  # fmt: skip
    return loop, bstate0


def _n_noise(sens: Any) -> int:
    return sum(count for _, count in noise_groups(sens))


def _build_scan(sim, trajectory, control, gains, allocator, sens, command, ctrl_state,
                offset, total, log_every, chunk_steps, seed, periods, estimator=None):  # fmt: skip
    """Build and compile the scan of a flight; returns a thunk of ``(loop, carry, draws)``."""
    import jax

    from ..physics import rotors
    from .brain import make_brain
    from .closed_loop_jax import ScanLoop, initial_carry

    allocator = rotors.make_allocator(sim.drone) if allocator is None else allocator
    n, dt = sim.n, float(sim.dt)
    g_vec = np.asarray(sim.drone.gravity_vec, dtype=np.float64)
    nz = _n_noise(sens)
    gusty = sim.dryden is not None
    L = log_every
    per_call = -(-min(chunk_steps, total) // L)
    if nz or gusty:  # the per-step inputs of one call stay under CHUNK_BYTES
        per_call = min(per_call, max(1, CHUNK_BYTES // (8 * n * (3 + nz) * L)))
    with jax_x64(jax):
        import jax.numpy as jnp

        brain = make_brain(trajectory, control, gains, allocator, sens, g_vec, dt, command,
                           periods, estimator, world=getattr(sim, "world", None))  # fmt: skip
        loop = ScanLoop(sim, brain, nz, gusty, L, per_call)
        bstate = initial_brain_state(sim, control, gains, ctrl_state, sens, periods, seed, jnp,
                                     estimator)  # fmt: skip
        loop.compile(initial_carry(sim, bstate), offset)

    def start() -> tuple:
        with jax_x64(jax):
            carry = initial_carry(sim, bstate)
        return loop, carry, _Draws(sim, seed, sens, total)

    return start


def _python_loop(sim, trajectory, control, gains, allocator, sens, command, ctrl_state,
                 offset, total, log_every, chunk_steps, on_chunk, progress, keep_log, jit,
                 seed, periods, estimator=None):  # fmt: skip
    """The per-step Python loop: ``(run, "JAX" or "NumPy", why JAX could not trace or None)``.

    ``run()`` flies and returns ``(chunks, steps, interrupted, signal)``. With JAX (``jit`` not
    ``False``) the per-step function is traced once up front; when that fails and ``jit`` is
    ``None`` it runs on NumPy instead (``jit=True`` raises).
    """
    from .brain import make_brain

    n, dt = sim.n, float(sim.dt)
    jax = jax_or_none() if jit in (None, True) else None
    if jit and jax is None:
        raise ValueError("jit=True needs JAX (pip install 'quadsim[jax]')")
    g_vec = np.asarray(sim.drone.gravity_vec, dtype=np.float64)
    state = numpy_state(sim.state)
    n_noise = _n_noise(sens)
    why = None

    def setup(jax: Any) -> tuple:
        """``(brain, brain state)`` on JAX (traced) or NumPy."""
        brain = make_brain(trajectory, control, gains, allocator, sens, g_vec, dt, command,
                           periods, estimator, world=getattr(sim, "world", None))  # fmt: skip
        with jax_x64(jax):
            xp = np
            if jax is not None:
                import jax.numpy as xp
            bstate = initial_brain_state(sim, control, gains, ctrl_state, sens, periods, seed, xp,
                                         estimator)  # fmt: skip
            if jax is not None:
                brain = jax.jit(brain)
                z = np.zeros((n, n_noise))
                brain.lower(sim.k, state.pos, state.quat, state.vel, state.ang_vel, offset,
                            bstate, z)  # fmt: skip
        return brain, bstate

    if jax is not None:
        try:
            brain, bstate = setup(jax)
        except Exception as e:  # the controller (or trajectory) does not trace: NumPy
            if jit:
                raise
            why, jax = _one_line(e), None
    if jax is None:
        brain, bstate = setup(None)

    def run() -> tuple[list[dict], int, bool, int | None]:
        rows: dict[str, list] = {}
        chunks: list[dict] = []
        k = 0
        interrupted, stop_signal = False, None
        state = numpy_state(sim.state)

        def think(state: Any, bstate: Any) -> tuple:
            """Reference, controller, allocation and sensors at the current step."""
            z = sensor_normals(seed, sens, [sim.k], n)[0]
            with jax_x64(jax):
                out, bstate = brain(sim.k, state.pos, state.quat, state.vel, state.ang_vel,
                                    offset, bstate, z)  # fmt: skip
                rpm = np.asarray(out["cmd_rpm"])
            return out, rpm, bstate

        def record(out: dict, rpm: np.ndarray, state: Any, t: float) -> None:
            rec = log_record(out, state, t, rpm, sim.status, n)
            for key, value in rec.items():
                rows.setdefault(key, []).append(np.array(value))

        brain_state = bstate
        try:
            while k < total:
                n_chunk = min(chunk_steps, total - k)
                for i in range(n_chunk):
                    t = sim.time
                    out, rpm, brain_state = think(state, brain_state)
                    if (k + i) % log_every == 0:
                        record(out, rpm, state, t)
                    state = numpy_state(sim.step(rpm))
                if k + n_chunk == total:  # the end sample, at t = duration
                    out, rpm, brain_state = think(state, brain_state)
                    record(out, rpm, state, sim.time)
                chunk = {key: np.stack(v) for key, v in rows.items()}
                rows = {}
                with interrupt_after():  # the chunk reaches the writer and the log, or neither
                    k += n_chunk
                    hand_over(chunk, on_chunk, keep_log, chunks)
                if progress is not None:
                    progress(k, total)
        except KeyboardInterrupt as e:
            interrupted, stop_signal = True, getattr(e, "signum", int(signal.SIGINT))
        return chunks, k, interrupted, stop_signal

    return run, "JAX" if jax is not None else "NumPy", why


def hand_over(chunk: dict, on_chunk: Callable[[dict], None] | None, keep_log: bool,
              chunks: list[dict]) -> None:  # fmt: skip
    """Give a completed, non-empty chunk to ``on_chunk`` and to the kept log ``chunks``.

    Every loop calls it inside :func:`~quadsim.engines.signals.interrupt_after`, right after
    counting the chunk's steps, so a signal finds the chunk in the writer and the log, or in
    neither.
    """
    if not chunk:
        return
    if on_chunk is not None:
        on_chunk(chunk)
    if keep_log:
        chunks.append(chunk)


def log_record(out: dict, state: Any, t: float, rpm: Any, status: Any, n: int) -> dict:
    """One logged sample of the per-step loops: the brain's outputs (sorted: JAX's order either
    way), the time, the state ``x_k``, the rotor speeds (actual, else the command ``rpm``) and
    the world's flags (``status``, ``None`` without a world)."""  # noqa: D205, D209
    rec = {key: np.asarray(out[key]) for key in sorted(out)}
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
    return rec


def _flag(status: Any, name: str, n: int) -> np.ndarray:
    return to_numpy(getattr(status, name)) if status is not None else np.zeros(n, bool)


def jax_x64(jax: Any) -> Any:
    """Float64 for JAX inside the block only (the process-wide setting is left alone).

    ``jax`` is the module or ``None`` (then a no-op context, for the NumPy loop).
    """
    return jax.enable_x64(True) if jax is not None else contextlib.nullcontext()


def numpy_state(state: Any) -> Any:
    """A :class:`~quadsim.engines.sim.State` of NumPy float64; Euler angles become quaternions."""
    from ..engines.sim import State

    fields = [None if f is None else to_numpy(f).astype(np.float64) for f in state]
    if hasattr(state, "rpy"):
        from ..physics.rotation import from_euler

        pos, rpy, vel, ang_vel, rotor_vel = fields
        return State(pos, from_euler(rpy), vel, ang_vel, rotor_vel)
    return State(*fields)
