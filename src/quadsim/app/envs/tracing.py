"""The tracing side of the compiled env step (:mod:`quadsim.app.envs.compiled`).

One environment's column as CasADi ``SX`` symbols (:class:`Trace`), and the helpers that turn
traced values and state trees into the scalars of its rows and back.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...loop.brain import ctrl_leaves, tree_rebuild
from ...physics._symbolic import SymArray, SymbolicNamespace, symbolic
from .actions import Attitude
from .observation import observation
from .observer import normalized

__all__ = [
    "Trace", "cse", "flat", "traced_reference", "tree_entries", "tree_of", "tree_rows",
]  # fmt: skip


def cse(expr: Any) -> Any:
    """``expr`` with common subexpressions merged (e.g. what every substep recomputes from the
    held action), where CasADi offers ``cse``."""  # noqa: D205, D209
    import os

    import casadi as cs

    if os.environ.get("QUADSIM_NO_CSE") or not hasattr(cs, "cse"):
        return expr
    return cs.cse(expr)


def flat(a: Any, dtype: Any) -> list[Any]:
    """CasADi scalars of a traced array (a :class:`SymArray`, or numbers that stayed numbers)."""
    if not isinstance(a, SymArray):
        a = SymArray(np.asarray(a, dtype=np.float64), dtype)
    return a.entries()


def tree_rows(tree: Any, prefix: str) -> list[tuple[str, int]]:
    """``(row name, size)`` of the leaves of a state tree (:func:`quadsim.loop.brain.ctrl_leaves`:
    ``<prefix>_<field>``, depth first), as the compiled state stores them."""  # noqa: D205, D209
    return [(name, int(np.size(leaf))) for name, leaf in ctrl_leaves(tree, prefix)]


def tree_entries(tree: Any, prefix: str, dtype: Any) -> list[Any]:
    """The CasADi scalars of a traced state tree, in the order of :func:`tree_rows`."""
    return [e for _, leaf in ctrl_leaves(tree, prefix) for e in flat(leaf, dtype)]


def tree_of(template: Any, prefix: str, entries: list, dtype: Any) -> Any:
    """The tree of ``template``'s structure and leaf shapes holding the CasADi scalars
    ``entries`` (in the order of :func:`tree_rows`), each leaf a :class:`SymArray`."""  # noqa: D205, D209
    leaves, at = [], 0
    for _, leaf in ctrl_leaves(template, prefix):
        size = int(np.size(leaf))
        leaves.append(SymArray(symbolic(entries[at:at + size], dtype).a.reshape(np.shape(leaf)),
                               dtype))  # fmt: skip
        at += size
    if at != len(entries):
        raise ValueError(f"{prefix}: {len(entries)} entries for a tree of {at}")
    return tree_rebuild(template, iter(leaves))


def traced_reference(task: Any, t: SymArray, xp: Any) -> tuple[Any, Any, Any]:
    """``(ref_pos, ref_vel, ahead)`` of the task at the traced time ``t`` (constants if fixed)."""
    track = task.name == "track"
    if task.constant is not None:
        pos, vel = task.constant
        ahead = np.broadcast_to(pos, (len(task.future), 3)) if track else None
        return pos, vel, ahead
    try:
        ref = task.trajectory(t)
        ahead = None
        if track:
            pts = [task.trajectory(t + tau).pos for tau in task.future]
            ahead = xp.stack(pts) if pts else np.zeros((0, 3))
    except Exception as e:  # a user callable that only takes numbers or NumPy arrays
        raise NotImplementedError(
            f"the task's trajectory does not trace with symbolic time ({type(e).__name__}: {e})"
        ) from e
    return ref.pos, ref.vel, ahead


class Trace:
    """The symbols of one environment's column in the traced step and the helpers on them.

    Args:
        step: The :class:`~quadsim.app.envs.compiled.CompiledStep` being compiled (rows, core,
            plant, dtype).
        n_varying: Number of per-drone model parameters (inputs ``p``).
        n_z: Number of standard normals (input ``z``, drawn in C; 0: none).

    Attributes:
        X, U, P, Z: The CasADi ``SX`` inputs: state column, inputs, per-drone parameters,
            normals.
        xs: The scalars of ``X``.
        inputs: The compiled functions' inputs (``P`` only with per-drone parameters or normals,
            ``Z`` only with normals).
        fresh: Whether the environment starts anew (``NEXT_STEP`` autoreset), once traced.
        new: The column of its new episode (the start state of a ``NEXT_STEP`` autoreset), once
            traced.
    """

    def __init__(self, step: Any, n_varying: int, n_z: int = 0) -> None:
        import casadi as cs

        self.core, self.rows, self.dtype = step.core, step.rows, step.dtype
        self.xp = SymbolicNamespace.of(step.dtype)
        self.nx, self.sl = step.system.size, step.system.slices()
        self.X, self.U = cs.SX.sym("x", step.n_x), cs.SX.sym("u", step.n_u)
        self.P = cs.SX.sym("p", n_varying)
        self.xs = [self.X[i] for i in range(step.n_x)]
        self.Z = cs.SX.sym("z", n_z)
        self.inputs = ([self.X, self.U, self.P, self.Z] if n_z else
                       [self.X, self.U, self.P] if n_varying else [self.X, self.U])  # fmt: skip
        self.observer = step.core.observer if step.core.observe_rotors else None
        self.fresh: Any = None
        self.new: list = []

    def sym(self, name: str) -> SymArray:
        """The rows ``name`` of the state column."""
        return symbolic(self.xs[self.rows[name]], self.dtype)

    def tree(self, template: Any, prefix: str) -> Any:
        """The tree of ``template``'s structure whose leaves are its rows (:func:`tree_rows`)."""
        return tree_of(template, prefix, [e for name, _ in tree_rows(template, prefix)
                                          for e in self.xs[self.rows[name]]], self.dtype)

    def rotor_est(self) -> SymArray | None:
        """The observer's rotor-speed estimate in the column (``None`` unless observed)."""
        return self.sym("rotor_est") if self.observer else None

    def error_integral(self) -> SymArray | None:
        """The position-error integral in the column (``None`` unless observed)."""
        return self.sym("err_int") if self.core.observe_integral else None

    def attitude(self, x: tuple) -> Attitude:
        """The attitude and body rates of the plant state ``x``."""
        return Attitude(symbolic(x[self.sl["quat"]], self.dtype),
                        symbolic(x[self.sl["ang_vel"]], self.dtype))  # fmt: skip

    def observe(self, x: tuple, steps: Any, action: SymArray, est: SymArray | None,
                integral: SymArray | None) -> tuple:  # fmt: skip
        """:func:`~quadsim.app.envs.observation.observation` of the plant state ``x`` after
        ``steps`` control steps, on the task's reference at that time."""  # noqa: D205, D209
        core, sl, dtype = self.core, self.sl, self.dtype
        t = symbolic([steps * core.control_dt], dtype)[0]
        ref_pos, ref_vel, ahead = traced_reference(core.task, t, self.xp)
        rotors = None if est is None else normalized(est, self.observer)
        return observation(symbolic(x[sl["pos"]], dtype), symbolic(x[sl["quat"]], dtype),
                           symbolic(x[sl["vel"]], dtype), symbolic(x[sl["ang_vel"]], dtype),
                           action, ref_pos, ref_vel, ahead, rotors, integral,
                           core.observe_body)  # fmt: skip

    def keep(self, stepped: list, rows: slice) -> list:
        """The stepped values of the ``rows``, or the new episode's where ``fresh``."""
        import casadi as cs

        return [cs.if_else(self.fresh, b, e) for e, b in zip(stepped, self.new[rows], strict=True)]


