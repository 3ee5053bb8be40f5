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
        brain_keys = sorted(["ref_pos", "ref_vel", "ref_yaw", "cmd_rpm", "cmd_wrench",
                             "lost_wrench", "saturated", *(k for k, _ in sensed)])  # fmt: skip
        scalars = {"ref_yaw", *(k for k, size in sensed if size == 1)}
        self._log = self._log_rows(brain_keys, scalars)
        self.pending: np.ndarray | None = None  # the compiled state holding sample k
        self.latest: np.ndarray | None = None  # the last compiled state computed
        self.latest_k = 0
        self._flown: tuple = ([], [])  # the compiled states of the samples just flown, their steps

    def _log_rows(self, brain_keys: list, scalars: set) -> list[tuple[str, Any, str]]:
        """What :meth:`records` logs, in ``fly``'s order: ``(key, rows of the compiled state or
        None (an all-false flag), kind)``, kind ``"float"``, ``"scalar"``, ``"bool"`` or
        ``"flag"``; the plant state and the flags from the sample's ``prev_`` rows."""  # noqa: D205, D209
        rows = self.rows
        log = [(key, rows[key], "bool" if key == "saturated" else
                "scalar" if key in scalars else "float") for key in brain_keys]  # fmt: skip
        log += [(key, rows["prev_" + key], "float") for key in ("pos", "quat", "vel", "ang_vel")]
        log.append(("rotor_rpm", rows.get("prev_rotor_vel", rows["cmd_rpm"]), "float"))
        if "prev_motor_heat" in rows:
            log.append(("motor_heat", rows["prev_motor_heat"], "float"))
        log += [(key, rows.get("prev_" + key), "flag") for key in ("crashed", "landed")]
        return log

    def _run(self, steps: int, every: int) -> tuple[np.ndarray, np.ndarray]:
        """``steps`` steps: ``(the compiled states recorded every ``every`` steps (m, n_x, n),
        the state reached (n_x, n))``."""  # noqa: D205, D209
        out = self.loop.run(self.x, steps, record_every=every, wind=self.held,
                            offset=self.offset, seed=self.seed,
                            plant_seed=self.sim.seed)  # fmt: skip
        self.x = out.x
        return out.records, out.x

    def start(self) -> None:
        """The priming step: it records sample 0."""
        _, self.pending = self._run(1, 0)
        self.latest = self.pending

    def advance(self, k: int, steps: int, last: bool) -> None:
        """Fly steps ``k .. k + steps - 1`` in one C call (see ``driver.Runner``)."""
        L, total = self.L, k + steps
        rec, final = self._run(steps, L)
        idx = k + L * np.arange(1, len(rec) + 1)  # the sample index of each record
        if last:
            keep = int(np.sum(idx < total))
            parts = [self.pending[None], rec[:keep], final[None]]
            self.latest = final
            sample_k = [k, *idx[:keep].tolist(), total]
        else:  # a whole number of periods: the last record is the final state's sample
            parts = [self.pending[None], rec[:-1]]
            self.pending = self.latest = final
            sample_k = [k, *idx[:-1].tolist()]
        self.latest_k = total
        self._flown = (parts, sample_k)  # views: no copy of the chunk before it is logged

    def records(self) -> dict:
        """The samples of the steps just flown, as ``fly`` logs them: each field written once
        into its log array from the compiled states (float64; flags as booleans)."""  # noqa: D205, D209
        parts, sample_k = self._flown  # each (m_i, n_x, n)
        m, n = sum(len(p) for p in parts), self.n
        out: dict = {}
        for key, rows, kind in self._log:
            if key == "pos":
                out["time"] = (self.k_sim0 + np.asarray(sample_k)) * self.dt
            if rows is None:  # a flag without a world
                out[key] = np.zeros((m, n), self.flag_dtype)
                continue
            boolean = kind in ("bool", "flag")
            size = 1 if boolean or kind == "scalar" else rows.stop - rows.start
            a = np.empty((m, n, size), bool if boolean else np.float64)
            at = 0
            for p in parts:
                v = np.swapaxes(p[:, rows, :], 1, 2)
                a[at : at + len(p)] = v[..., :1] > 0.5 if boolean else v
                at += len(p)
            out[key] = (a[..., 0].astype(self.flag_dtype, copy=False) if kind == "flag" else
                        a[..., 0] if size == 1 and kind != "float" else a)  # fmt: skip
        return out

    def fault(self) -> tuple[int, int] | None:
        """A single drone's fault in the last record (as ``Simulator.step`` raises it)."""
        if self.n != 1 or self.status0 is None or self.latest is None:
            return None
        x, rows = self.latest, self.rows
        return (int(x[rows["prev_fault_step"]][0, 0]),
                int(x[rows["prev_fault_code"]][0, 0]))  # fmt: skip

    def settle(self) -> None:
        """Put the plant state, flags and gust state of the last record into ``sim``."""
        x, sim, n, rows = self.latest, self.sim, self.n, self.rows
        if x is None:
            return
        sim.k = self.k_sim0 + self.latest_k
        cls = state_class(sim.system)
        fields = [np.asarray(x[rows["prev_" + name]].T, np.float64) if "prev_" + name in rows
                  else None for name in cls._fields]  # fmt: skip
        status = None
        if self.status0 is not None:
            status = Status(*(
                (x[rows["prev_" + name]] > 0.5 if name in ("landed", "crashed")
                 else x[rows["prev_" + name]]).reshape(n).astype(to_numpy(old).dtype)
                for name, old in zip(Status._fields, self.status0, strict=True)
            ))  # fmt: skip
        sim.restore(cls(*fields), status)
        if "prev_gust_state" in rows:  # the gust state after the steps flown, as the Simulator's
            sim.gust_state = np.asarray(x[rows["prev_gust_state"]].T, np.float64)
