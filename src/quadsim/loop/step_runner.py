"""The per-step loop as a runner of :func:`quadsim.loop.driver.drive`, and its one step.

Reference, sensors, estimator, controller and allocation form one pure function per step
(:func:`quadsim.loop.brain.make_brain`); with JAX it is compiled once (float64, inside a local
``jax.enable_x64`` block), otherwise (or when the controller cannot be traced by JAX) it runs on
NumPy, around ``Simulator.step``. :class:`StepLoop` is that step, for whoever steps the loop
one tick at a time (the live ROS 2 node); :class:`StepRunner` flies chunks of it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..physics.noise import normals
from .brain import initial_brain_state, make_brain, noise_groups
from .records import jax_or_none, jax_x64, log_record, numpy_state

__all__ = ["StepLoop", "StepRunner", "one_line", "sensor_normals"]


def one_line(e: BaseException, limit: int = 300) -> str:
    """``"Type: first line of the message"`` (JAX's errors run to many lines)."""
    text = str(e).strip().splitlines()
    line = f"{type(e).__name__}: {text[0] if text else ''}".rstrip(": ")
    return line if len(line) <= limit else line[: limit - 3] + "..."


def sensor_normals(seed: int, sens: Any, steps: Any, n: int) -> np.ndarray:
    """The sensors' normals ``z`` ``(m, n, n_noise)`` of the samples at the steps ``(m,)``.

    :func:`quadsim.physics.noise.normals` ``(seed, stream, k, drone)`` of the groups of
    :func:`quadsim.loop.brain.noise_groups`, as the compiled loop draws them in C.
    """
    k, d = np.asarray(steps)[:, None], np.arange(n)[None]
    groups = noise_groups(sens)
    z = [normals(seed, stream, k, d, count) for stream, count in groups]
    return np.concatenate(z, -1) if z else np.zeros((k.shape[0], n, 0))


NOISE_BLOCK = 100
"""Steps of sensor normals drawn at once (:meth:`StepLoop.normals`; the same numbers as one by
one): about 0.13 ms a block, small enough not to stall a 1 kHz ROS 2 tick, large enough that a
step's share is a few µs."""


class StepLoop:
    """One closed-loop step at a time: the brain (traced by JAX when it can be) and its state.

    Args:
        sim: The :class:`~quadsim.engines.sim.Simulator` (rotor-level model), at the start.
        trajectory: ``t -> Reference``, or ``None``: then every :meth:`think` takes the reference
            (``ref0`` is one to trace the step with).
        control, gains, ctrl_state, command, estimator: As :func:`quadsim.loop.flight.fly`.
        allocator: From :func:`quadsim.physics.rotors.make_allocator`.
        sens: The loop's sensors (:class:`~quadsim.loop.brain.Sensors`).
        offset: Reference offsets ``(n, 3)`` [m].
        jit: ``None``: JAX when installed and the step traces; ``True``: JAX or raise;
            ``False``: NumPy.
        seed: Key of the sensor noise.
        periods: From :func:`quadsim.loop.brain.loop_periods`.

    Attributes:
        backend: ``"JAX"`` or ``"NumPy"``: what runs the step.
        why: Why JAX could not trace the step (``None``: it did, or was not asked to).
    """

    def __init__(self, sim: Any, trajectory: Any, control: Any, gains: Any, allocator: Any,
                 sens: Any, command: Any, ctrl_state: Any, offset: np.ndarray,
                 jit: bool | None, seed: int, periods: Any, estimator: Any = None,
                 ref0: Any = None) -> None:  # fmt: skip
        self.sim, self.sens, self.seed, self.offset = sim, sens, seed, offset
        self.n = sim.n
        self.ref0 = ref0
        jax = jax_or_none() if jit in (None, True) else None
        if jit and jax is None:
            raise ValueError("jit=True needs JAX (pip install 'quadsim[jax]')")
        g_vec = np.asarray(sim.drone.gravity_vec, dtype=np.float64)
        self._z, self._z_k0 = np.zeros((0,)), 0
        self.why = None

        def setup(jax: Any) -> tuple:
            """``(brain, brain state)`` on JAX (traced) or NumPy."""
            brain = make_brain(trajectory, control, gains, allocator, sens, g_vec,
                               float(sim.dt), command, periods, estimator,
                               world=getattr(sim, "world", None))  # fmt: skip
            with jax_x64(jax):
                xp = np
                if jax is not None:
                    import jax.numpy as xp
                bstate = initial_brain_state(sim, control, gains, ctrl_state, sens, periods,
                                             seed, xp, estimator)  # fmt: skip
                if jax is not None:
                    brain = jax.jit(brain)
                    brain.lower(*self._args(numpy_state(sim.state), bstate, ref0))
            return brain, bstate

        if jax is not None:
            try:
                self.brain, self.bstate = setup(jax)
            except Exception as e:  # the controller (or trajectory) does not trace: NumPy
                if jit:
                    raise
                self.why, jax = one_line(e), None
        if jax is None:
            self.brain, self.bstate = setup(None)
        self.jax = jax
        self.backend = "JAX" if jax is not None else "NumPy"

    def _args(self, state: Any, bstate: Any, ref: Any) -> tuple:
        """The brain's arguments at the Simulator's step."""
        args = (self.sim.k, state.pos, state.quat, state.vel, state.ang_vel, self.offset, bstate,
                self.normals())  # fmt: skip
        return args if ref is None else (*args, ref)

    def normals(self) -> np.ndarray:
        """The sensors' standard normals of the Simulator's step ``(n, n_z)``."""
        k = int(self.sim.k)
        if not (self._z_k0 <= k < self._z_k0 + len(self._z)):
            self._z_k0 = k
            self._z = sensor_normals(self.seed, self.sens, np.arange(k, k + NOISE_BLOCK), self.n)
        return self._z[k - self._z_k0]

    def warm(self) -> None:
        """Run the compiled step once and throw the result away (a pure function), so the
        first real step is not the one that compiles."""  # noqa: D205, D209
        if self.jax is not None:
            with jax_x64(self.jax):
                args = self._args(numpy_state(self.sim.state), self.bstate, self.ref0)
                self.jax.block_until_ready(self.brain(*args))

    def think(self, state: Any, ref: Any = None) -> tuple[dict, np.ndarray]:
        """The brain at ``state`` (the Simulator's step): ``(outputs, rotor command (n, N)
        [RPM])``; the brain state moves on."""  # noqa: D205, D209
        with jax_x64(self.jax):
            out, self.bstate = self.brain(*self._args(state, self.bstate, ref))
            rpm = np.asarray(out["cmd_rpm"])
        return out, rpm


class StepRunner:
    """:class:`StepLoop` in chunks for :func:`quadsim.loop.driver.drive`: the step, then
    ``Simulator.step`` (which raises for a diverged single drone itself)."""  # noqa: D205, D209

    def __init__(self, step_loop: StepLoop, log_every: int) -> None:
        self.loop, self.sim, self.L = step_loop, step_loop.sim, log_every
        self.state = numpy_state(self.sim.state)
        self._rows: dict[str, list] = {}

    def start(self) -> None:
        """Nothing to prime: the Simulator holds the state."""

    def _record(self, rows: dict, out: dict, rpm: np.ndarray, t: float) -> None:
        rec = log_record(out, self.state, t, rpm, self.sim.status, self.sim.n)
        for key, value in rec.items():
            rows.setdefault(key, []).append(np.array(value))

    def advance(self, k: int, steps: int, last: bool) -> None:
        """Fly steps ``k .. k + steps - 1``, recording their samples (see ``driver.Runner``)."""
        self._rows = rows = {}
        sim = self.sim
        for i in range(steps):
            t = sim.time
            out, rpm = self.loop.think(self.state)
            if (k + i) % self.L == 0:
                self._record(rows, out, rpm, t)
            self.state = numpy_state(sim.step(rpm))
        if last:  # the end sample, at t = duration
            out, rpm = self.loop.think(self.state)
            self._record(rows, out, rpm, sim.time)

    def records(self) -> dict:
        """The samples of the steps just flown."""
        return {key: np.stack(v) for key, v in self._rows.items()}

    def fault(self) -> None:
        """``None``: ``Simulator.step`` raises for a diverged drone itself."""
        return None

    def settle(self) -> None:
        """Nothing: the Simulator was stepped in place."""
