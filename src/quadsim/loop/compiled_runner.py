"""The compiled closed loop as a runner of :func:`quadsim.loop.driver.drive`: a chunk per C call.

The loop (:mod:`quadsim.loop.closed_loop`) carries the log sample of the step before
(``sample=True``), so a record taken after step ``s`` is sample ``s - 1``. The compiled state
therefore runs one step ahead of the samples handed over: one priming step records sample 0,
each chunk's call records the samples ``k + L, k + 2L, ...`` (the last one waits for the next
chunk), and the end sample at ``t = duration`` is read from the state one step past the end,
whose plant step is discarded. The sensors and the Dryden turbulence run inside the C step
(their normals drawn there, the turbulence from the Simulator's gust state and seed, which it
gets back), so a call has no per-step inputs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..engines.state import state_class
from ..physics._array import to_numpy
from ..physics.world import Status
from .brain import Sensors, brain_outputs
from .records import flag, numpy_state

__all__ = ["CompiledRunner"]


class CompiledRunner:
    """Fly ``sim`` on the compiled ``loop`` from the brain state ``bstate0`` (per drone).

    Args:
        sim: The :class:`~quadsim.engines.sim.Simulator` (its state, flags, clock and gust
            state are where the flight starts, and are put back after it).
        loop: From :func:`quadsim.loop.closed_loop_native.compile_for_simulator`.
        bstate0: The brain state of every drone at the start.
        offset: Reference offsets ``(n, 3)`` [m].
        log_every: Record every ``log_every``-th step.
        sens: The flight's sensors (:class:`~quadsim.loop.brain.Sensors`).
        seed: Key of the sensor noise.
        estimator: The estimator in the loop, or ``None``.
    """

    def __init__(self, sim: Any, loop: Any, bstate0: Any, offset: np.ndarray, log_every: int,
                 sens: Sensors | None = None, seed: int = 0,
                 estimator: Any = None) -> None:  # fmt: skip
        self.sim, self.loop, self.offset, self.L, self.seed = sim, loop, offset, log_every, seed
        n, rows = sim.n, loop.rows
        self.n, self.rows, self.dt = n, rows, sim.dt
        self.k_sim0 = int(sim.k)
        state0 = numpy_state(sim.state)
        self.status0 = sim.status
        self.flag_dtype = flag(self.status0, "crashed", n).dtype
        names = [name for name, _ in loop.system.fields]
        x = loop.initial_state(n, **{name: getattr(state0, name) for name in names},
                               brain_state=bstate0)  # fmt: skip
        x = x.astype(np.float64)
        if self.status0 is not None:
            for name, value in zip(Status._fields, self.status0, strict=True):
                x[rows[name]] = to_numpy(value).astype(np.float64)[None]
        x[rows["step"]] = self.k_sim0
        if "gust_state" in rows:  # the turbulence runs in the step, from the Simulator's state
            x[rows["gust_state"]] = np.asarray(sim.gust_start(), np.float64).T
        self.x = x.astype(loop.dtype)
        self.held = (None if getattr(sim, "wind", None) is None else
                     np.broadcast_to(np.asarray(sim.mean_wind, np.float64), (n, 3)))  # fmt: skip
        sensed = brain_outputs(Sensors() if sens is None else sens, estimator)
        self.brain_keys = sorted(["ref_pos", "ref_vel", "ref_yaw", "cmd_rpm", "cmd_wrench",
                                  "lost_wrench", "saturated", *(k for k, _ in sensed)])  # fmt: skip
        self.scalars = ["ref_yaw", *(k for k, size in sensed if size == 1)]
        self.pending: dict | None = None  # the record of sample k, from the step before
        self.latest: dict | None = None  # the record of the last plant state computed
        self.latest_k = 0
        self._flown: tuple = ([], [])  # the records of the chunk just flown, their steps

    def _run(self, steps: int, every: int) -> tuple[dict, dict]:
        """``steps`` steps: ``(records every ``every`` steps, the state reached as a record)``."""
        out = self.loop.run(self.x, steps, record_every=every, wind=self.held,
                            offset=self.offset, seed=self.seed,
                            plant_seed=self.sim.seed)  # fmt: skip
        self.x = out.x
        return out.fields, self._as_record(out.x)

    def _as_record(self, x: np.ndarray) -> dict:
        """The compiled state ``(n_x, n)`` as one record ``(1, n, size)`` by field."""
        rec = {name: x[s].T[None] for name, s in self.rows.items()}
        for name in ("saturated", "prev_landed", "prev_crashed"):
            if name in rec:
                rec[name] = rec[name][..., 0] > 0.5
        return rec

    def _samples(self, fields: dict) -> dict:
        """Log samples of records (or a final state as one record) as ``fly`` logs them."""

        def f(name: str) -> np.ndarray:
            return np.asarray(fields[name], np.float64)

        m, n = f("cmd_rpm").shape[0], self.n
        rotor = "prev_rotor_vel" if "prev_rotor_vel" in fields else "cmd_rpm"
        flags = {}
        for name in ("crashed", "landed"):
            key = "prev_" + name
            flags[name] = (np.asarray(fields[key]).astype(self.flag_dtype) if key in fields
                           else np.zeros((m, n), self.flag_dtype))  # fmt: skip
        brain = {key: f(key) for key in self.brain_keys if key != "saturated"}
        for key in self.scalars:
            brain[key] = brain[key][..., 0]
        brain["saturated"] = np.asarray(fields["saturated"])
        heat = {"motor_heat": f("prev_motor_heat")} if "prev_motor_heat" in fields else {}
        return {
            **{key: brain[key] for key in self.brain_keys}, "time": None,
            "pos": f("prev_pos"), "quat": f("prev_quat"), "vel": f("prev_vel"),
            "ang_vel": f("prev_ang_vel"), "rotor_rpm": f(rotor), **heat, **flags,
        }  # fmt: skip

    def start(self) -> None:
        """The priming step: it records sample 0."""
        _, self.pending = self._run(1, 0)
        self.latest = self.pending

    def advance(self, k: int, steps: int, last: bool) -> None:
        """Fly steps ``k .. k + steps - 1`` in one C call (see ``driver.Runner``)."""
        L, total = self.L, k + steps
        rec, final = self._run(steps, L)
        m = len(rec["cmd_rpm"]) if rec else 0
        idx = k + L * np.arange(1, m + 1)  # the sample index of each record
        if last:
            keep = int(np.sum(idx < total))
            parts = [self.pending] + ([{key: v[:keep] for key, v in rec.items()}] if keep else [])
            parts.append(final)
            self.latest = final
            sample_k = [k, *idx[:keep].tolist(), total]
        else:  # a whole number of periods: the last record is the final state's sample
            parts = [self.pending, {key: v[:-1] for key, v in rec.items()}]
            self.pending = self.latest = final
            sample_k = [k, *idx[:-1].tolist()]
        self.latest_k = total
        self._flown = (parts, sample_k)

    def records(self) -> dict:
        """The samples of the steps just flown, as ``fly`` logs them."""
        parts, sample_k = self._flown
        logged = [self._samples(p) for p in parts]
        return {key: np.concatenate([s[key] for s in logged]) if key != "time"
                else (self.k_sim0 + np.asarray(sample_k)) * self.dt
                for key in logged[0]}  # fmt: skip

    def fault(self) -> tuple[int, int] | None:
        """A single drone's fault in the last record (as ``Simulator.step`` raises it)."""
        if self.n != 1 or self.status0 is None or self.latest is None:
            return None
        rec = self.latest
        return (int(np.asarray(rec["prev_fault_step"][-1]).reshape(-1)[0]),
                int(np.asarray(rec["prev_fault_code"][-1]).reshape(-1)[0]))  # fmt: skip

    def settle(self) -> None:
        """Put the plant state, flags and gust state of the last record into ``sim``."""
        rec, sim, n = self.latest, self.sim, self.n
        if rec is None:
            return
        sim.k = self.k_sim0 + self.latest_k
        cls = state_class(sim.system)
        fields = [np.asarray(rec["prev_" + name][-1], np.float64) if "prev_" + name in rec
                  else None for name in cls._fields]  # fmt: skip
        sim.state = cls(*fields)
        if self.status0 is not None:
            sim.status = Status(*(
                np.asarray(rec["prev_" + name][-1]).reshape(n).astype(to_numpy(old).dtype)
                for name, old in zip(Status._fields, self.status0, strict=True)
            ))  # fmt: skip
        if "prev_gust_state" in rec:  # the gust state after the steps flown, as the Simulator's
            sim.gust_state = np.asarray(rec["prev_gust_state"][-1], np.float64)
