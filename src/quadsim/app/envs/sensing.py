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
the environments have run since they were built (never reset: every episode draws new numbers),
``drone`` the environment's index and ``seed`` drawn at each full reset. The first reading of an
episode (at its reset, which comes at the same ``k`` as the step that ended the last one) draws
from the stream's reset twin :func:`reset_stream` instead, so that the two readings have their
own numbers; the compiled env step (:mod:`quadsim.app.envs.compiled_sensing`) draws the same
normals in C. The observation gains the outputs ``<name>_<output>`` in part order
(``sum(size)`` entries, :attr:`EnvSensors.size`), and ``info["sensors"]`` holds them by name with
the ``<name>_fresh`` flags ``(n,)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...engines.state import State
from ...loop.brain import (
    BrainState,
    Periods,
    Sensors,
    ctrl_leaves,
    first_drone,
    loop_periods,
    noise_groups,
    tree_rebuild,
)
from ...loop.parts import Context, part_outputs
from ...loop.sensing import make_sense, pick
from ...physics.noise import normals
from ..scenario.parts import load_parts

__all__ = ["EnvSensors", "reset_stream"]


def reset_stream(stream: str) -> str:
    """The stream of the normals of an episode's first reading (at its reset) for a part's
    ``stream`` (module docstring): ``"<stream>:reset"``, hashed to its own numbers
    (:func:`quadsim.physics.noise.stream_id`)."""  # noqa: D205, D209
    return f"{stream}:reset"


def _at_rest(n: int) -> State:
    """``n`` drones at rest, level, at the origin (a state for the parts' ``init`` templates)."""
    return State(np.zeros((n, 3)), np.tile([0.0, 0.0, 0.0, 1.0], (n, 1)), np.zeros((n, 3)),
                 np.zeros((n, 3)))  # fmt: skip


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
        parts = load_parts(tables, dt, world, gravity, _fail, n=n)
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
        self.groups = noise_groups(self.sens)
        """``(stream, count)`` of the normals of a reading, in the order of its ``z``."""
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
                state): the first reading of an episode, at a reset, with the normals of the
                streams' :func:`reset_stream`.
        """
        if self.parts and not self._state:  # read before any reset: every drone starts here
            self.reset(np.ones(self.n, bool), truth)
        j = np.asarray(control_steps, np.float64) * self.substeps
        groups = self.groups if which is None else [(reset_stream(s), c) for s, c in self.groups]
        z = [normals(self.seed, stream, self.k, np.arange(self.n), count)
             for stream, count in groups]  # fmt: skip
        z = np.concatenate(z, -1) if z else np.zeros((self.n, 0))
        values, readings, state = self.measure(self.k, truth, j, self._state, self._held, z)
        values = [np.reshape(np.asarray(v, np.float64), (self.n, size))
                  for v, (_, size) in zip(values, self.outputs, strict=True)]  # fmt: skip
        held = np.concatenate(values, axis=1) if values else np.zeros((self.n, 0))
        fresh = {k: np.broadcast_to(np.asarray(v, bool), (self.n,)).copy()
                 for k, v in readings.items() if k.endswith("_fresh")}  # fmt: skip
        if which is not None:
            keep = ~np.asarray(which, bool)
            state = tuple(pick(~keep, s, o, np) for s, o in zip(state, self._state,
                                                               strict=True))  # fmt: skip
            held[keep] = self._held[keep]
            fresh = {k: np.where(keep, self._fresh.get(k, False), v) for k, v in fresh.items()}
        self._state, self._held, self._fresh = state, held, fresh
        return held.copy(), self.named(held) | {k: v.copy() for k, v in fresh.items()}

    def measure(self, k: Any, truth: State, j: Any, states: tuple, held: Any,
                z: Any) -> tuple[list, dict, tuple]:  # fmt: skip
        """One reading of every part by the loop's sensing step (both paths run this).

        Args:
            k: Physics steps since the environments were built (the parts' ``k``).
            truth: The true state (``(n, ...)``; one environment's without the leading axis when
                traced, :mod:`quadsim.app.envs.compiled_sensing`).
            j: Physics steps since the episode began (``control steps * substeps``) ``(n,)``.
            states: Each part's state (a tree of arrays, or ``None``).
            held: The readings held so far ``(n, size)`` (``(size,)`` for one environment).
            z: The normals of the reading ``(n, count)``, groups :attr:`groups`.

        Returns:
            ``(values, readings, states)``: each output's reading (in :attr:`outputs` order),
            ``{key: reading}`` with the ``<name>_fresh`` flags, and the parts' next states.
        """
        bs = BrainState(j, None, None, parts=tuple(
            zip(states, self._held_parts(held), strict=True)))  # fmt: skip
        out, readings, new = self._sense(k, truth, bs, z)
        return [out[key] for key, _ in self.outputs], readings, tuple(s for s, _ in new)

    def template(self) -> tuple:
        """One environment's part states at a start (a template of their structure and shapes,
        :func:`quadsim.loop.brain.first_drone`)."""  # noqa: D205, D209
        ctx = Context(self.dt, np, self.seed, self.k, self.world, self.gravity)
        return tuple(first_drone(part.init(1, _at_rest(1), ctx)) for part in self.parts)

    def named(self, held: np.ndarray) -> dict:
        """``{<name>_<output>: (n,) or (n, size)}`` of readings ``(n, size)``."""
        out, col = {}, 0
        for key, size in self.outputs:
            out[key] = held[:, col] if size == 1 else held[:, col:col + size]
            col += size
        return out

    def _held_parts(self, held: Any) -> list:
        """Each part's held outputs of the readings ``held`` ``(..., size)`` (as
        :func:`~quadsim.loop.sensing.make_sense` takes them), or ``None`` for a part that reads at
        every physics step."""  # noqa: D205, D209
        out, col = [], 0
        for part, m in zip(self.parts, self.periods.parts, strict=True):
            named = []
            for o in part.outputs:
                named.append(held[..., col] if o.size == 1 else held[..., col:col + o.size])
                col += o.size
            out.append(tuple(named) if m > 1 else None)
        return out

    def snapshot(self, memory: bool) -> dict[str, Any]:
        """What decides the coming readings (:mod:`quadsim.app.envs.snapshot`): the step count
        ``k`` and the seed, and with ``memory`` (the reference path; the compiled one keeps them
        in its state) the held readings, fresh flags and the parts' states, as copies."""  # noqa: D205, D209
        out: dict[str, Any] = {"k": int(self.k), "seed": int(self.seed)}
        if memory:
            out["held"] = self._held.copy()
            out.update({f"fresh.{k}": v.copy() for k, v in self._fresh.items()})
            leaves = ctrl_leaves(self._state, "state")
            out.update({f"state.{name}": np.array(v) for name, v in leaves})
        return out

    def restore(self, snap: dict[str, Any]) -> None:
        """Put back a :meth:`snapshot` of sensors built alike."""
        self.k, self.seed = int(snap["k"]), int(snap["seed"])
        if "held" not in snap:
            return
        self._held = np.array(snap["held"], np.float64)
        self._fresh = {k[6:]: np.array(v, bool) for k, v in snap.items() if k.startswith("fresh.")}
        if not self._state:  # the structure of the parts' states: their init
            self.reset(np.ones(self.n, bool), _at_rest(self.n))
        self._state = tree_rebuild(self._state, iter([np.array(snap[f"state.{name}"]) for name, _
                                                      in ctrl_leaves(self._state, "state")]))

    def advance(self) -> None:
        """Count one control step of physics (the normals' step index moves on)."""
        self.k += self.substeps
