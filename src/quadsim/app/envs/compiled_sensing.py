r"""The sensor parts in the compiled env step (:mod:`quadsim.app.envs.compiled`).

The parts are read as on the reference path (:meth:`quadsim.app.envs.sensing.EnvSensors.measure`:
the loop's own sensing step, :func:`quadsim.loop.sensing.make_sense`), traced for one environment
on CasADi scalars. Rows of the compiled state, after the observers' (:meth:`SensorRows.layout`)::

    [sensor_<name>_state... (each part's state: the leaves of its init, as
     :func:`quadsim.app.envs.tracing.tree_rows`) | sensor_held (size: the readings, in
     EnvSensors.outputs order) | sensor_<name>_fresh (1 per part, 0/1)]

and one input, ``sensor_k`` (the physics steps ``k`` the environments have run). A read at the end
of the control step gives, with ``c`` the control steps of the episode after the step and ``m`` a
part's period,

.. math::

    (y, s') = \mathrm{measure}(k, x, s, z), \quad
    \mathrm{held}' = y \text{ where } c m_s \equiv 0 \pmod m, \text{ else held}

(``m_s`` the substeps), and an environment that starts anew (``fresh``: a ``NEXT_STEP`` autoreset
in the step, a reset in the refresh) reads its first reading instead: ``s`` the part's ``init`` of
its start state, ``c = 0`` and the normals of the reset streams
(:func:`quadsim.app.envs.sensing.reset_stream`). The normals are the input ``z`` = [the reading's
groups | their reset twins], drawn in C by :func:`quadsim.engines.native.compile_rollout` for
``(seed, stream, k, environment)``: the reference path's numbers.

A part whose ``measure`` or ``init`` does not trace (NumPy calls on its input, a Python ``if`` on
an array), or whose ``init`` depends on the seed or the step (``ctx.seed``, ``ctx.k0``), raises
``NotImplementedError`` naming it: the env keeps the reference path with that reason.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...engines.state import State
from ...loop.brain import ctrl_leaves
from ...loop.parts import Context
from ...physics._symbolic import SymArray, symbolic
from .sensing import reset_stream
from .tracing import Trace, flat, tree_entries, tree_of, tree_rows

__all__ = ["SensorRows"]


class SensorRows:
    """The sensor parts' rows of the compiled state and their traced read (module docstring).

    Args:
        sensing: The env's :class:`~quadsim.app.envs.sensing.EnvSensors` (its parts, periods,
            outputs, seed and step count ``k``, which the compiled step advances).
    """

    def __init__(self, sensing: Any) -> None:
        self.sensing = sensing
        self.template = sensing.template()
        self.prefixes = [f"sensor_{part.name}_state" for part in sensing.parts]
        self.fresh_rows = [f"sensor_{part.name}_fresh" for part in sensing.parts]
        self.n_z = sum(count for _, count in sensing.groups)
        self.noise = (*sensing.groups, *((reset_stream(s), c) for s, c in sensing.groups))
        """The groups of the normals input ``z`` (``compile_rollout``'s ``noise``)."""

    def layout(self) -> list[tuple[str, int]]:
        """``(row name, size)`` of the sensor rows, in order (module docstring)."""
        rows = [r for state, prefix in zip(self.template, self.prefixes, strict=True)
                for r in tree_rows(state, prefix)]  # fmt: skip
        rows.append(("sensor_held", self.sensing.size))
        return rows + [(name, 1) for name in self.fresh_rows]

    def span(self, rows: dict) -> slice:
        """The rows of :meth:`layout` in the compiled state of row slices ``rows``."""
        first, last = self.layout()[0][0], self.fresh_rows[-1]
        return slice(rows[first].start, rows[last].stop)

    def fill(self, col: np.ndarray, rows: dict) -> None:
        """Write the parts' template states into the compiled state column ``col`` (held readings
        and fresh flags stay 0: the readings before the first reset)."""  # noqa: D205, D209
        for state, prefix in zip(self.template, self.prefixes, strict=True):
            for name, leaf in ctrl_leaves(state, prefix):
                col[rows[name]] = np.ravel(leaf)

    # -- the trace --------------------------------------------------------------------------------
    def read(self, tr: Trace, x: tuple, fresh: Any, steps: Any, k: Any) -> list:
        """The traced sensor rows after a read of the plant state ``x`` (CasADi scalars, the rows
        of :meth:`layout` in order); ``fresh``: the first reading of an episode instead, ``steps``
        the control steps of the episode (0 where ``fresh``), ``k`` the input ``sensor_k``.

        Raises:
            NotImplementedError: A part that does not trace (module docstring).
        """  # noqa: D205
        import casadi as cs

        s, dtype, sl = self.sensing, tr.dtype, tr.sl
        field = {name: symbolic(x[rows], dtype) for name, rows in sl.items()}
        truth = State(*(field.get(f) for f in State._fields))
        start = State(*(None if v is None else SymArray(v.a.reshape(1, -1), dtype)
                        for v in truth))  # fmt: skip
        states = []
        for part, template, prefix in zip(s.parts, self.template, self.prefixes, strict=True):
            new = self._init(part, tr, start, template, prefix)
            old = tree_entries(tr.tree(template, prefix), prefix, dtype)
            keep = [cs.if_else(fresh, a, b) for a, b in zip(new, old, strict=True)]
            states.append(tree_of(template, prefix, keep, dtype))
        Z, n = tr.Z, self.n_z
        z = symbolic([cs.if_else(fresh, Z[n + i], Z[i]) for i in range(n)], dtype)
        k = symbolic([k], dtype)[0]
        j = symbolic([steps * float(s.substeps)], dtype)[0]
        try:
            values, readings, states = s.measure(k, truth, j, tuple(states), tr.sym("sensor_held"),
                                                 z)  # fmt: skip
        except Exception as e:
            raise NotImplementedError(self._why(e, tr, k, truth, states, z)) from e
        out = []
        for part, template, prefix, state in zip(s.parts, self.template, self.prefixes, states,
                                                 strict=True):  # fmt: skip
            got = tree_entries(state, prefix, dtype)
            if len(got) != len(tree_entries(template, prefix, dtype)):
                raise NotImplementedError(f"sensor part {part.name!r}: its measure returns a "
                                          "state of another size than its init")  # fmt: skip
            out += got
        out += [e for v in values for e in flat(v, dtype)]
        for part in s.parts:
            f = readings[f"{part.name}_fresh"]
            out += flat(tr.xp.where(f, 1.0, 0.0), dtype) if isinstance(f, SymArray) else \
                [cs.SX(float(bool(f)))]  # fmt: skip
        return out

    def _init(self, part: Any, tr: Trace, start: State, template: Any, prefix: str) -> list:
        """The traced ``init`` of ``part`` at the start state ``start`` (one environment, a leading
        axis of 1), as the scalars of ``template``'s leaves."""  # noqa: D205, D209
        import casadi as cs

        s, got = self.sensing, []
        for seed in (0, 1):  # the reference path's init sees the seed and k of the reset
            ctx = Context(s.dt, tr.xp, seed, seed, s.world, s.gravity)
            try:
                state = part.init(1, start, ctx)
                got.append(tree_entries(state, prefix, tr.dtype))
            except Exception as e:
                raise NotImplementedError(f"sensor part {part.name!r}: its init does not trace "
                                          f"({type(e).__name__}: {e})") from e  # fmt: skip
        if len(got[0]) != len(tree_entries(template, prefix, tr.dtype)):
            raise NotImplementedError(f"sensor part {part.name!r}: its init gives a state of "
                                      "another size for one environment")  # fmt: skip
        if str(cs.vertcat(*got[0])) != str(cs.vertcat(*got[1])):
            raise NotImplementedError(f"sensor part {part.name!r}: its init depends on the seed "
                                      "or the step (ctx.seed, ctx.k0)")  # fmt: skip
        return got[0]

    def _why(self, e: Exception, tr: Trace, k: Any, truth: State, states: list, z: Any) -> str:
        """The reason a traced read failed: the first part whose ``measure`` alone fails."""
        at = 0
        for part, state in zip(self.sensing.parts, states, strict=True):
            count = sum(c for _, c in part.streams)
            try:
                got, _ = part.measure(k, truth, state, z[..., at:at + count],
                                      Context(self.sensing.dt, tr.xp, world=self.sensing.world,
                                              gravity=self.sensing.gravity))  # fmt: skip
                for o in part.outputs:  # traced arrays (or numbers) of the declared sizes
                    if len(flat(got[o.name], tr.dtype)) != o.size:
                        raise ValueError(f"{o.name!r} is not of size {o.size}")
            except Exception as err:
                return (f"sensor part {part.name!r}: its measure does not trace "
                        f"({type(err).__name__}: {err})")  # fmt: skip
            at += count
        return f"the sensor parts do not trace ({type(e).__name__}: {e})"

    # -- the values -------------------------------------------------------------------------------
    def readings(self, X: np.ndarray, rows: dict, n: int) -> dict:
        """``info["sensors"]`` of the compiled states ``X`` (``n`` environments): the readings by
        ``<name>_<output>`` (float64) and the ``<name>_fresh`` flags (bool)."""  # noqa: D205, D209
        out = self.sensing.named(X[rows["sensor_held"], :n].T.astype(np.float64))
        for part, row in zip(self.sensing.parts, self.fresh_rows, strict=True):
            out[f"{part.name}_fresh"] = X[rows[row].start, :n] > 0.5
        return out
