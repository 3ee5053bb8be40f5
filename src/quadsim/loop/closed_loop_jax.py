r"""The closed loop on JAX: :func:`quadsim.loop.flight.fly`'s ``"scan"`` loop, one ``lax.scan``.

One step ``k`` of every drone is the Python loop's, fused into one XLA program:

.. math::

    (\mathrm{out}_k, s_{k+1}) = \mathrm{brain}(k, x_k, o, s_k, z_k), \quad
    x_{k+1} = \mathrm{plant}(x_k, Ω^{cmd}_k, w_k),

where ``brain`` is the very per-step function of the Python loop
(:func:`quadsim.loop.brain.make_brain`: reference, controller, allocation or rotor command, IMU and
motion capture, each at its period; float64), ``s`` its state
(:class:`~quadsim.loop.brain.BrainState`), ``plant`` the simulator's step
(:func:`quadsim.engines.stepping.make_step` of its model, parameters, integrator and world, in its
dtype, as its :class:`~quadsim.engines.array_engine.ArrayEngine` builds it), and ``z_k`` (sensor
normals) and ``w_k`` (mean wind plus Dryden gust) the random inputs: counter-based
(:mod:`quadsim.physics.noise`), made on the host per call (:class:`quadsim.loop.flight.Draws`) and
scanned in; so the scan logs the Python loop's samples (to rounding: about 1e-15 relative in
float64), for any chunking.

A call runs ``S`` sampling periods of ``L = log_every`` steps (``S L`` steps; the first step of
each period is recorded) as a ``lax.scan`` over periods around a ``lax.scan`` over steps; steps
past the call's ``steps`` are skipped by ``lax.cond``, so every call has the same shapes and the
program (one copy of the step) compiles once per flight. The end sample of a flight (at ``t =
duration``: the brain without the plant step) is a call of one step whose carry is dropped. The
carry holds the plant state and world flags in the simulator's dtype (cast back after every
step, so the brain's float64 never widens them), the step index and the brain's state.

Compilation (XLA, before the flight's clock starts) costs about as much as the per-step loop's
two programs (brain and plant step): several seconds for the first-principles model with RK4 on
CPU, most of it the plant's. JAX's persistent compilation cache
(``jax.config.update("jax_compilation_cache_dir", ...)``) makes later runs of the same flight
configuration start at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..engines.state import state_class, state_from_comps, state_to_comps
from ..engines.stepping import make_step
from ..physics import rotors
from ..physics._array import unstack
from ..physics.systems import Env
from ..physics.world import Status
from . import driver
from .brain import initial_brain_state, make_brain, noise_groups
from .records import jax_x64
from .step_runner import sensor_normals

__all__ = ["Draws", "ScanLoop", "ScanRunner", "build_scan"]


class ScanLoop:
    """The compiled scan of :mod:`quadsim.loop.closed_loop_jax` for one flight's shapes.

    Args:
        sim: The JAX :class:`~quadsim.engines.sim.Simulator` (its model, parameters, integrator,
        world,
            dtype and wind).
        brain: The Python loop's per-step function (:func:`quadsim.loop.brain.make_brain` on
            ``jax.numpy``).
        n_noise: Sensor normals per drone and step (0, 12 or 18).
        gusty: The wind is per step (Dryden turbulence) rather than held.
        every: ``L``, steps per sampling period.
        periods: ``S``, sampling periods per call.
    """

    def __init__(self, sim: Any, brain: Callable, n_noise: int, gusty: bool, every: int,
                 periods: int) -> None:  # fmt: skip
        import jax
        import jax.numpy as jnp


        self.n, self.n_noise, self.gusty = sim.n, n_noise, gusty
        self.every, self.periods = every, periods
        self.dtype, self.dt, self.world = sim.dtype, float(sim.dt), sim.world is not None
        system, dt, dtype = sim.system, float(sim.dt), sim.dtype
        # the simulator's step (on JAX the world's checks sit behind a fusion boundary)
        plant = make_step(system, sim.model_params, dt, sim.integrator, sim.world, xp=jnp,
                          like=jnp.zeros((), dtype=dtype))  # fmt: skip

        mean = sim.mean_wind
        held = None if mean is None or gusty else np.asarray(mean, np.float64)
        f64 = jnp.float64

        def think(carry, z, offset):
            """The brain at the carry's state: ``(out, record, brain states)``."""
            state, status, k, bstate = carry
            pos, quat, vel, ang_vel = (a.astype(f64) for a in state[:4])
            out, bstate = brain(k.astype(f64), pos, quat, vel, ang_vel, offset, bstate, z)
            rotor = out["cmd_rpm"] if state.rotor_vel is None else state.rotor_vel.astype(f64)
            none = jnp.zeros((self.n,), dtype=jnp.bool_)
            flags = {name: none if status is None else getattr(status, name)
                     for name in ("crashed", "landed")}  # fmt: skip
            rec = {key: out[key] for key in sorted(out)}
            heat = getattr(state, "motor_heat", None)
            heat = {} if heat is None else {"motor_heat": heat.astype(f64)}
            rec.update(pos=pos, quat=quat, vel=vel, ang_vel=ang_vel, rotor_rpm=rotor, **heat,
                       **flags)  # fmt: skip
            return out, rec, bstate

        def step(carry, inp, offset):
            """One closed-loop step: ``(carry, record of the state before it)``."""
            z, w = inp
            state, status, k = carry[:3]
            out, rec, bstate = think(carry, z, offset)
            u = unstack(out["cmd_rpm"].astype(dtype))
            wind = w if w is not None else (None if held is None else jnp.asarray(held))
            env = Env(None if wind is None else unstack(wind.astype(dtype)), None, None)
            # the plant behind a fusion fence too (the brain's outputs materialised once)
            x, status = jax.lax.cond(k >= 0, lambda x, u, s: plant(x, u, s, k, env),
                                     lambda x, u, s: (x, s), state_to_comps(state), u,
                                     status)  # fmt: skip
            new = (state_from_comps(x, system, jnp, state.pos), status, k + 1, bstate)
            # the carry keeps its types (the brain may hand back weakly typed or wider values)
            new = jax.tree.map(lambda a, b: jnp.asarray(a).astype(b.dtype), new, carry)
            return new, rec

        def chunk(carry, offset, z, w, n_steps):
            """``S`` periods of ``L`` steps, the first ``n_steps`` of them run."""
            S, L = self.periods, self.every
            idx = jnp.arange(S * L).reshape(S, L)
            first = (z[0, 0], None if w is None else w[0, 0])
            rec0 = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype),
                                jax.eval_shape(lambda c, i: step(c, i, offset)[1], carry, first))

            def inner(state, inp):
                c, rbuf = state
                zi, wi, i, j = inp
                c, rec = jax.lax.cond(i < n_steps, lambda c, a, r: step(c, a, offset),
                                      lambda c, a, r: (c, r), c, (zi, wi), rbuf)  # fmt: skip
                rbuf = jax.tree.map(lambda a, b: jnp.where(j == 0, a, b), rec, rbuf)
                return (c, rbuf), None

            def period(c, inp):
                zp, wp, ip = inp
                (c, rbuf), _ = jax.lax.scan(inner, (c, rec0), (zp, wp, ip, jnp.arange(L)))
                return c, rbuf

            return jax.lax.scan(period, carry, (z, w, idx))

        self._chunk = jax.jit(chunk)
        self._compiled = None

    def inputs(self, z: np.ndarray | None, wind: np.ndarray | None) -> tuple:
        """Per-step inputs of a call (its first steps), padded to ``S L`` steps."""
        S, L, n = self.periods, self.every, self.n
        zz = np.zeros((S * L, n, self.n_noise))
        if z is not None and self.n_noise:
            zz[: len(z)] = z
        ww = None
        if self.gusty:
            ww = np.zeros((S * L, n, 3))
            if wind is not None:
                ww[: len(wind)] = wind
            ww = ww.reshape(S, L, n, 3)
        return zz.reshape(S, L, n, self.n_noise), ww

    def compile(self, carry: Any, offset: np.ndarray) -> None:
        """Trace and compile for these shapes (raises whatever tracing the controller raises)."""
        z, w = self.inputs(None, None)
        self._compiled = self._chunk.lower(carry, offset, z, w, np.int64(0)).compile()

    def __call__(self, carry: Any, offset: np.ndarray, z: np.ndarray | None,
                 wind: np.ndarray | None, steps: int) -> tuple:  # fmt: skip
        """Run ``1 <= steps <= S L`` steps: ``(carry, records)``.

        ``z`` and ``wind`` hold the inputs of the steps; ``records`` (a dict of NumPy arrays)
        has the sample of each started period, ``(ceil(steps / L), n, ...)``.
        """
        import jax

        zz, ww = self.inputs(z, wind)
        with jax.enable_x64(True):  # the program's int64 and float64 (only around the call)
            carry, recs = self._compiled(carry, offset, zz, ww, np.int64(steps))
        m = -(-steps // self.every)
        recs = jax.device_get(recs)
        return carry, {key: np.asarray(v[:m]) for key, v in recs.items()}


def initial_carry(sim: Any, bstate: Any) -> tuple:
    """The scan's carry at the simulator's current state (JAX arrays).

    ``(state, status, k, brain state)`` (:class:`quadsim.loop.brain.BrainState`).
    """
    import jax
    import jax.numpy as jnp

    tree = (sim.state, sim.status, jnp.asarray(sim.k, dtype=jnp.int64), bstate)
    return jax.tree.map(jnp.asarray, tree)


class ScanRunner:
    """:class:`ScanLoop` in chunks for :func:`quadsim.loop.driver.drive`.

    Each chunk is run in calls of at most ``S L`` steps with the draws of those steps
    (``draws(a, b)``, :class:`quadsim.loop.flight.Draws`; the flight's last call also draws for
    the end sample). :meth:`settle` leaves ``sim`` at the state, flags and clock of the last
    completed chunk (as the compiled loop leaves it).
    """

    def __init__(self, sim: Any, loop: ScanLoop, carry: Any, offset: np.ndarray,
                 log_every: int, draws: Any) -> None:  # fmt: skip
        self.sim, self.loop, self.carry, self.offset = sim, loop, carry, offset
        self.L, self.draws = log_every, draws
        self.k_sim0 = int(sim.k)
        self.per_call = loop.periods * loop.every
        self.latest = (carry, 0)
        self._flown: tuple = ([], None)  # the records of the chunk just flown, their steps

    def start(self) -> None:
        """Nothing to prime: the carry holds the start."""

    def advance(self, k: int, steps: int, last: bool) -> None:
        """Fly steps ``k .. k + steps - 1`` in scan calls (see ``driver.Runner``)."""
        loop, offset, carry = self.loop, self.offset, self.carry
        parts = []
        done = 0
        while done < steps:
            s = min(self.per_call, steps - done)
            a = k + done
            end = last and done + s == steps
            z = w = None
            if loop.n_noise or loop.gusty:
                z, w = self.draws(a, a + s - 1 + end)
            carry, rec = loop(carry, offset, None if z is None else z[:s],
                              None if w is None else w[:s], s)  # fmt: skip
            parts.append(rec)
            done += s
            if end:  # the end sample: one more step, recorded, its carry discarded
                zs = None if z is None else z[s:]
                parts.append(loop(carry, offset, zs, None if w is None else w[s:], 1)[1])
        self.carry = carry
        self.latest = (carry, k + steps)
        idx = k + self.L * np.arange(-(-steps // self.L))
        if last:
            idx = np.r_[idx, k + steps]
        self._flown = (parts, idx)

    def records(self) -> dict:
        """The samples of the steps just flown, in the per-step loop's keys and order."""
        parts, idx = self._flown
        chunk = {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}
        return _log_order(chunk, (self.k_sim0 + idx) * float(self.sim.dt))

    def fault(self) -> tuple[int, int] | None:
        """A single drone's fault in the last carry (as ``Simulator.step`` raises it)."""
        status = self.carry[1]
        if self.sim.n != 1 or status is None:
            return None
        return (int(np.asarray(status.fault_step).reshape(-1)[0]),
                int(np.asarray(status.fault_code).reshape(-1)[0]))  # fmt: skip

    def settle(self) -> None:
        """Put the state, flags and clock of the last completed chunk into ``sim``."""
        (state, status, *_), steps = self.latest
        self.sim.k = self.k_sim0 + steps
        self.sim.state = state_class(self.sim.system)(*state)
        if status is not None:
            self.sim.status = Status(*status)


class Draws:
    """The per-step random inputs of the scan loop for a range of steps.

    Counter-based (:mod:`quadsim.physics.noise`), so a range is a pure function of its steps: the
    sensor normals of sample ``j`` (:func:`~quadsim.loop.step_runner.sensor_normals`) and the
    world wind of step ``j``
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



def build_scan(sim: Any, trajectory: Callable, control: Callable, gains: Any, allocator: Any,
               sens: Any, command: Any, ctrl_state: Any, offset: np.ndarray, total: int,
               log_every: int, chunk_steps: int, seed: int, periods: Any,
               estimator: Any = None) -> Callable[[], ScanRunner]:  # fmt: skip
    """Build and compile the scan of a flight (:func:`quadsim.loop.flight.fly`'s arguments);
    returns a thunk of its :class:`ScanRunner`, made when the flight's clock starts."""  # noqa: D205, D209
    import jax


    allocator = rotors.make_allocator(sim.drone) if allocator is None else allocator
    n, dt = sim.n, float(sim.dt)
    g_vec = np.asarray(sim.drone.gravity_vec, dtype=np.float64)
    nz = sum(count for _, count in noise_groups(sens))
    gusty = sim.dryden is not None
    L = log_every
    per_call = -(-min(chunk_steps, total) // L)
    if nz or gusty:  # the per-step inputs of one call stay under CHUNK_BYTES
        per_call = min(per_call, max(1, driver.CHUNK_BYTES // (8 * n * (3 + nz) * L)))
    with jax_x64(jax):
        import jax.numpy as jnp

        brain = make_brain(trajectory, control, gains, allocator, sens, g_vec, dt, command,
                           periods, estimator, world=getattr(sim, "world", None))  # fmt: skip
        loop = ScanLoop(sim, brain, nz, gusty, L, per_call)
        bstate = initial_brain_state(sim, control, gains, ctrl_state, sens, periods, seed, jnp,
                                     estimator)  # fmt: skip
        loop.compile(initial_carry(sim, bstate), offset)

    def start() -> ScanRunner:
        with jax_x64(jax):
            carry = initial_carry(sim, bstate)
        return ScanRunner(sim, loop, carry, offset, log_every, Draws(sim, seed, sens, total))

    return start


def _log_order(rec: dict, times: np.ndarray) -> dict:
    """The Python loop's keys and order: the brain's (sorted), then time, state and flags."""
    state_keys = ("pos", "quat", "vel", "ang_vel", "rotor_rpm", "motor_heat", "crashed",
                  "landed")  # fmt: skip
    out = {key: rec[key] for key in rec if key not in state_keys}
    out["time"] = np.asarray(times, np.float64)
    out.update({key: rec[key] for key in state_keys if key in rec})
    return out
