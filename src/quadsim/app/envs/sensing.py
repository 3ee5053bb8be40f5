r"""Sensor parts in the environments: their readings join the observation.

``sensors={"tof": {"kind": "rangefinder"}, "sonar": {"kind": "pkg.module:Sonar", "rate": 10}}``
are the scenario's ``[sensors.<name>]`` tables: the parts are built and checked by the scenario's
loader (:func:`quadsim.app.scenario.parts.load_parts`) and read by the loop's own sensing step
(:func:`quadsim.loop.sensing.make_sense`), so a part behaves in an env as in ``quadsim fly``.

An env reads at the end of each control step, so a part's period is a whole number of control
steps: ``m_c = (control rate) / (part rate)`` (a part without a rate reads every control step).
It reads where ``c ≡ 0 (mod m_c)``, ``c`` the control steps since the drone's episode began
(so at ``c = 0``, the reset), and holds its reading in between. Its normals are
:func:`quadsim.physics.noise.normals` ``(seed, stream, k, drone)`` with ``k`` the physics steps
the environments have run since they were built (never reset: every episode draws new numbers)
and ``seed`` drawn at the first reset. The observation gains the outputs ``<name>_<output>`` in
part order (``sum(size)`` entries, :attr:`EnvSensors.size`), and ``info["sensors"]`` holds them
by name with the ``<name>_fresh`` flags.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...engines.state import State
from ...loop.brain import BrainState, Periods, Sensors, loop_periods, noise_groups
from ...loop.parts import Context, part_outputs
from ...loop.sensing import make_sense, pick
from ...physics.noise import normals
from ..scenario.parts import load_parts

__all__ = ["EnvSensors"]


def _fail(section: str, key: str, why: str) -> ValueError:
    return ValueError(f"sensors: {section}.{key}: {why}")


class EnvSensors:
    """The sensor parts of ``n`` environments (module docstring).

    Args:
        tables: ``{name: table}``, each table a scenario's ``[sensors.<name>]``.
        n: Number of environments.
        dt: Physics step [s].
        substeps: Physics steps per control step.
        world: The environments' :class:`~quadsim.physics.world.World`, or ``None``.
        gravity: Gravity vector [m/s²] ``(3,)``.

    Raises:
        ValueError: ``sensors: sensors.<name>.<key>: why`` for a table the scenario would refuse,
            or a part whose period is not a whole number of control steps.
    """

    def __init__(self, tables: dict, n: int, dt: float, substeps: int, world: Any,
                 gravity: Any) -> None:  # fmt: skip
        if not isinstance(tables, dict) or not all(isinstance(t, dict) for t in tables.values()):
            raise ValueError(f"sensors must be a dict of tables {{name: {{'kind': ...}}}}; "
                             f"got {tables!r}")  # fmt: skip
        parts = load_parts(tables, dt, world, gravity, _fail)
        control_hz = 1.0 / (dt * substeps)
        periods = []
        for part in parts:
            if part.rate is None:
                periods.append(substeps)
                continue
            m = loop_periods(dt, None, Sensors(parts=(part,))).parts[0]
            if m % substeps:
                raise ValueError(
                    f"sensors: sensors.{part.name}.rate: an env reads its sensors at its control "
                    f"steps ({control_hz:g} Hz): the rate must divide that; got {part.rate:g} Hz")
            periods.append(m)
        self.parts, self.n, self.dt, self.world = parts, n, float(dt), world
        self.gravity = np.asarray(gravity, np.float64)
        self.substeps = substeps
        self.sens = Sensors(parts=parts)
        self.periods = Periods(parts=tuple(periods))
        self.outputs = part_outputs(parts)
        self.size = sum(size for _, size in self.outputs)
        part_at, o = {}, 0
        for part in parts:
            part_at[part.name] = o
            o += sum(c for _, c in part.streams)
        self._sense = make_sense(parts, self.periods.parts, self.gravity, self.dt,
                                 tuple(part_at[p.name] for p in parts), world)  # fmt: skip
        self.seed = 0
        self.k = 0
        self._state: tuple = ()
        self._held = np.zeros((n, self.size))
        self._fresh: dict = {}

    def names(self) -> list[str]:
        """The observation's sensor entries: ``<name>_<output>`` (``_<i>`` for a vector)."""
        return [key if size == 1 else f"{key}_{i}" for key, size in self.outputs
                for i in range(size)]  # fmt: skip

    def reset(self, which: np.ndarray, truth: State, seed: int | None = None) -> None:
        """Restart the parts of the environments of the mask ``which`` ``(n,)`` from ``truth``
        (``(n, ...)``, every drone; only the selected ones are used); ``seed``: the noise seed."""  # noqa: D205, D209
        if seed is not None:
            self.seed = int(seed)
        ctx = Context(self.dt, np, self.seed, self.k, self.world, self.gravity)
        fresh = tuple(part.init(self.n, truth, ctx) for part in self.parts)
        if not self._state:
            self._state = fresh
        else:
            mask = np.asarray(which, bool)
            self._state = tuple(pick(mask, f, s, np)
                                for f, s in zip(fresh, self._state, strict=True))  # fmt: skip

    def read(self, truth: State, control_steps: np.ndarray,
             which: np.ndarray | None = None) -> tuple[np.ndarray, dict]:  # fmt: skip
        """The readings ``(n, size)`` now, and ``{key: (n,) or (n, s)}`` with the fresh flags.

        Args:
            truth: The true state ``(n, ...)`` now.
            control_steps: Control steps since each drone's episode began ``(n,)`` (0 at a
                reset): a part reads where this is a multiple of its period.
            which: Read only these drones ``(n,)`` bool (the others keep their readings and
                state): the first reading of an episode, at a reset. Its normals are those of
                drone ``n + i`` at the step, so they differ from the step's own.
        """
        if self.parts and not self._state:  # read before any reset: every drone starts here
            self.reset(np.ones(self.n, bool), truth)
        j = np.asarray(control_steps, np.float64) * self.substeps
        bs = BrainState(j, None, None, parts=tuple(
            zip(self._state, self._held_parts(), strict=True)))  # fmt: skip
        drones = np.arange(self.n) + (0 if which is None else self.n)
        z = [normals(self.seed, stream, self.k, drones, count)
             for stream, count in noise_groups(self.sens)]  # fmt: skip
        z = np.concatenate(z, -1) if z else np.zeros((self.n, 0))
        out, readings, new = self._sense(self.k, truth, bs, z)
        state = tuple(s for s, _ in new)
        values = [np.reshape(np.asarray(out[key], np.float64), (self.n, size))
                  for key, size in self.outputs]  # fmt: skip
        held = np.concatenate(values, axis=1) if values else np.zeros((self.n, 0))
        readings = {key: np.asarray(v) for key, v in readings.items()}
        if which is not None:
            keep = ~np.asarray(which, bool)
            state = tuple(pick(~keep, s, o, np) for s, o in zip(state, self._state,
                                                               strict=True))  # fmt: skip
            held[keep] = self._held[keep]
            readings = self.named(held) | {
                k: np.where(keep, self._fresh.get(k, False), np.broadcast_to(v, keep.shape))
                for k, v in readings.items() if k.endswith("_fresh")}  # fmt: skip
        self._state, self._held = state, held
        self._fresh = {k: np.broadcast_to(v, (self.n,)).copy() for k, v in readings.items()
                       if k.endswith("_fresh")}  # fmt: skip
        return held.copy(), readings

    def named(self, held: np.ndarray) -> dict:
        """``{<name>_<output>: (n,) or (n, size)}`` of readings ``(n, size)``."""
        out, col = {}, 0
        for key, size in self.outputs:
            out[key] = held[:, col] if size == 1 else held[:, col:col + size]
            col += size
        return out

    def _held_parts(self) -> list:
        """Each part's held outputs (as :func:`~quadsim.loop.sensing.make_sense` takes them), or
        ``None`` for a part that reads at every physics step."""  # noqa: D205, D209
        out, col = [], 0
        for part, m in zip(self.parts, self.periods.parts, strict=True):
            named = []
            for o in part.outputs:
                block = self._held[:, col:col + o.size]
                named.append(block[:, 0] if o.size == 1 else block)
                col += o.size
            out.append(tuple(named) if m > 1 else None)
        return out

    def advance(self) -> None:
        """Count one control step of physics (the normals' step index moves on)."""
        self.k += self.substeps
