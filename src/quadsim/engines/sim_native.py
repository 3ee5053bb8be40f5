"""The simulator's native engine: the same step, traced with CasADi and compiled to C.

:func:`quadsim.engines.stepping.make_step` (model kernel, integrator, world contacts, crash and
fault flags) is itself evaluated once on CasADi ``SX`` symbols for one drone (nothing of it is
copied here) and handed to :func:`quadsim.engines.native.compile_rollout`. :class:`NativeEngine`
implements the engine interface :class:`quadsim.engines.array_engine.Engine`; the packed layout
below never leaves it.
The compiled state vector extends the model state::

    x_ext = [model state (system.size) | landed, crashed, crash_time, fault_step, fault_code | k]
    u_ext = [command (n_cmd) | wind (3) | dist_f (3) | dist_t (3)]          (world frame)
    p     = per-drone parameters, flattened in ``ROTOR_PARAMS``/``WRENCH_PARAMS`` order

Shared parameters are baked in as constants (CasADi folds them); only the parameters that vary
per drone become inputs. Booleans travel as 0.0/1.0, the step index as a float (exact to 2^24
steps in float32, 2^53 in float64).
"""

from __future__ import annotations

import functools
import math
from types import SimpleNamespace
from typing import Any

import numpy as np

from ..physics._array import CASADI_OPS
from ..physics.systems import Env, System
from ..physics.world import Status, World
from . import native_memo
from .native import compile_rollout
from .state import as_cmd, state_class
from .stepping import make_step

__all__ = ["NativeEngine"]

N_STATUS = 5


def varying_params(system: System, params: dict, per_drone: tuple[str, ...]) -> list[tuple]:
    """``(name, index, values)`` of every per-drone parameter entry that differs between drones.

    ``index`` is the entry's index in the parameter's trailing shape, ``values`` its ``(n,)``
    float64 values over the drones; entries equal for all drones are left out.
    """
    out = []
    for name in system.param_spec:
        if name in per_drone:
            value = np.asarray(params[name], dtype=np.float64)
            for idx in np.ndindex(value.shape[1:]):
                col = value[(slice(None), *idx)]
                if not np.all(col == col[0]):
                    out.append((name, idx, col))
    return out


def traced_params(system: System, params: dict) -> dict:
    """What a trace of ``params`` sees (:func:`kernel_params`), for keying it
    (:mod:`quadsim.engines.native_memo`): ``{name: (value, varies)}``, the value every drone
    shares (float64, 0 where the drones differ) and the mask of the entries that differ (the
    trace's inputs, whose values it never sees)."""  # noqa: D205, D209
    per_drone = tuple(k for k in system.param_spec
                      if np.ndim(params[k]) > len(system.param_spec[k]))  # fmt: skip
    varies = {(name, idx) for name, idx, _ in varying_params(system, params, per_drone)}
    out = {}
    for name in system.param_spec:
        value = np.array(params[name], dtype=np.float64)
        if name in per_drone:
            value = np.array(value[0])
        mask = np.zeros(value.shape, dtype=bool)
        for idx in np.ndindex(value.shape):
            if (name, idx) in varies:
                mask[idx], value[idx] = True, 0.0
        out[name] = (value, mask)
    return out


def kernel_params(system: System, params: dict, varying: list[tuple], p_sym: Any) -> Any:
    """Parameter namespace for the kernels: floats, except ``p_sym`` entries where drones differ.

    ``varying`` is :func:`varying_params`'s list, ``p_sym[i]`` the symbol of its ``i``-th entry.

    Entries equal for every drone (e.g. the zero off-diagonals of per-drone inertias) stay
    constants that CasADi folds, so per-drone parameters cost only their loads.
    """
    slot = {(name, idx): p_sym[i] for i, (name, idx, _) in enumerate(varying)}
    out = {}
    for name in system.param_spec:
        value = np.asarray(params[name], dtype=np.float64)
        if value.ndim > len(system.param_spec[name]):
            value = value[0]  # uniform entries: any drone's value
        entries = np.empty(value.shape, dtype=object)
        for idx in np.ndindex(value.shape):
            entries[idx] = slot.get((name, idx), float(value[idx]))
        out[name] = entries.tolist() if value.ndim else entries[()]
    return SimpleNamespace(**out)


class NativeEngine:
    """Compiled steps and rollouts of a simulator configuration over structure-of-arrays data.

    Args:
        system: Model layout.
        params: Model parameters by name; entries named in ``per_drone`` have leading size ``n``.
        per_drone: Names of the per-drone parameters.
        dt: Step [s].
        integrator: Integrator function.
        world: World, or ``None``.
        dtype: ``np.float32`` or ``np.float64``.
    """

    def __init__(
        self, system: System, params: dict, per_drone: tuple[str, ...], dt: float,
        integrator: Any, world: World | None, dtype: Any,
    ) -> None:  # fmt: skip
        self.system, self.dtype, self.has_world = system, np.dtype(dtype), world is not None
        nx, nc = system.size, system.n_cmd
        self.n_ext, self.n_in = nx + N_STATUS + 1, nc + 9
        self.per_drone, self.slices = per_drone, system.slices()
        # the rows of each field of the state class, in its order (None: a field it lacks)
        self._field_slices = [self.slices.get(name) for name in state_class(system)._fields]
        self._fault_rows = (nx + 3, nx + 4)  # fault_step, fault_code
        varying = varying_params(system, params, per_drone)
        self._params = np.stack([v for _, _, v in varying]).astype(self.dtype) if varying else None
        self._build = (params, varying, dt, integrator, world)

    @functools.cached_property
    def _rollout(self) -> Any:
        """The compiled step, traced and built (or loaded from the cache) on first use.

        A run that the compiled closed loop flies never steps the engine and skips the trace.
        """
        params, varying, dt, integrator, world = self._build
        memo = native_memo.key("native_engine", self.system, traced_params(self.system, params),
                               dt, integrator, world, self.dtype)  # fmt: skip
        hit = native_memo.load(memo)
        if hit is not None:  # traced before with these inputs: its library
            return hit[0]
        import casadi as cs

        system, nx, nc = self.system, self.system.size, self.system.n_cmd
        X, U = cs.SX.sym("x", self.n_ext), cs.SX.sym("u", self.n_in)
        P = cs.SX.sym("p", len(varying))
        p = kernel_params(system, params, varying, P)
        x = tuple(X[i] for i in range(nx))
        st = Status(*(X[nx + i] for i in range(N_STATUS)))
        k = X[self.n_ext - 1]
        u = [U[i] for i in range(self.n_in)]
        env = Env(wind=tuple(u[nc : nc + 3]), dist_f=tuple(u[nc + 3 : nc + 6]),
                  dist_t=tuple(u[nc + 6 : nc + 9]))  # fmt: skip
        step = make_step(system, p, dt, integrator, world, xp=CASADI_OPS)  # the one pure step
        x1, st = step(x, tuple(u[:nc]), st, k, env)
        out = cs.vertcat(*x1, *st, k + 1)
        inputs = [X, U, P] if varying else [X, U]
        rollout = compile_rollout(cs.Function("quadsim_step", inputs, [out]), self.dtype)
        native_memo.save(memo, rollout, None)
        return rollout

    def pack(self, state: Any, status: Status | None, k: int) -> np.ndarray:
        """Extended SoA state ``(n_ext, n)`` from a :class:`~quadsim.engines.state.State`, flags."""
        comps = [np.asarray(f, dtype=np.float64).T for f in state if f is not None]
        n = comps[0].shape[1]
        if status is None:
            flags = np.zeros((N_STATUS, n))
            flags[2], flags[3] = math.nan, -1.0
        else:
            flags = np.stack([np.asarray(s, dtype=np.float64) for s in status])
        return np.concatenate([*comps, flags, np.full((1, n), float(k))]).astype(self.dtype)

    def unpack_state(self, X: np.ndarray, cls: type) -> Any:
        """The model state (views) of an extended SoA state ``(..., n_ext, n)``."""
        if X.ndim == 2:
            return cls(*[None if s is None else X[s].T for s in self._field_slices])
        return cls(**{name: np.swapaxes(X[..., s, :], -1, -2) for name, s in self.slices.items()})

    def unpack(self, X: np.ndarray, cls: type) -> tuple[Any, Status]:
        """``(state, status)`` views of an extended SoA state (the last axes are batch axes)."""
        nx = self.system.size
        f = X[..., nx : nx + N_STATUS, :]
        status = Status(
            landed=f[..., 0, :] > 0.5,
            crashed=f[..., 1, :] > 0.5,
            crash_time=f[..., 2, :].astype(np.float64),
            fault_step=f[..., 3, :].astype(np.int32),
            fault_code=f[..., 4, :].astype(np.int32),
        )
        return self.unpack_state(X, cls), status

    def inputs(
        self, cmd: np.ndarray, wind: Any = None, dist_f: Any = None, dist_t: Any = None
    ) -> np.ndarray:
        """Extended inputs ``(..., n_in, n)`` from commands ``(..., n, n_cmd)`` and world terms."""
        cmd = np.asarray(cmd)
        lead, n = cmd.shape[:-2], cmd.shape[-2]
        U = np.zeros((*lead, self.n_in, n), dtype=self.dtype)
        nc = self.system.n_cmd
        U[..., :nc, :] = np.swapaxes(cmd, -1, -2)
        for j, a in enumerate((wind, dist_f, dist_t)):
            if a is not None:
                U[..., nc + 3 * j : nc + 3 * j + 3, :] = np.swapaxes(
                    np.broadcast_to(np.asarray(a), (*lead, n, 3)), -1, -2)  # fmt: skip
        return U

    def run(self, X: np.ndarray, U: np.ndarray, steps: int, record: bool) -> tuple:
        """Advance ``steps`` steps; ``U`` is ``(n_in, n)`` or ``(steps, n_in, n)``."""
        return self._rollout(X, U, self._params, steps=steps, record_every=1 if record else 0)

    # -- the engine interface (quadsim.engines.array_engine.Engine): the packed layout stays in here
    # -------------
    def load(self, state: Any, status: Status | None, k: int) -> None:
        """Take over a state ``(n, size)`` per field, flags and step index (packed here)."""
        self._X = self.pack(state, status, k)
        self._cls, self._n_drones = type(state), self._X.shape[1]
        self._loaded = False  # the step hot path binds its buffers when first used

    def _bind(self) -> None:
        """Copy the packed states into the padded buffers advanced by :meth:`step` (bound once)."""
        X = self._X
        n = X.shape[1]
        lanes = self._rollout.lanes
        n_pad = -(-n // lanes) * lanes
        if getattr(self, "_n", None) != n:
            P = self._params
            if P is not None and P.ndim == 2 and n_pad != n:
                P = np.concatenate([P, np.repeat(P[:, -1:], n_pad - n, axis=1)], axis=1)
            self._Xp = np.zeros((self.n_ext, n_pad), self.dtype)
            self._Up = np.zeros((self.n_in, n_pad), self.dtype)
            self._advance = self._rollout.bind(self._Xp, self._Up, P)
            self._n, self._ext_zero = n, True
        self._Xp[:, :n] = X
        self._Xp[:, n:] = X[:, -1:]  # padding lanes repeat the last drone
        self._loaded = True

    def step(self, cmd: Any, ext: tuple) -> Any:
        """One step of the loaded states (the ``Simulator.step`` hot path).

        Args:
            cmd: Commands ``(n, n_cmd)`` (broadcast).
            ext: ``(wind, dist_f, dist_t)``, each ``None`` or broadcastable to ``(n, 3)``.

        Returns:
            The new state (views of a copy of the packed states).
        """
        n, nc = self._n_drones, self.n_in - 9
        cmd = np.asarray(cmd, dtype=np.float64)
        if cmd.shape != (n, nc):

            cmd = as_cmd(cmd, (n, nc), np, self.dtype)
        if not self._loaded:
            self._bind()
        Up = self._Up
        ct = cmd.T
        Up[:nc, :n] = ct
        Up[:nc, n:] = ct[:, -1:]
        if not (self._ext_zero and ext[0] is None and ext[1] is None and ext[2] is None):
            for j, a in enumerate(ext):
                rows = slice(nc + 3 * j, nc + 3 * j + 3)
                Up[rows, :n] = 0.0 if a is None else np.broadcast_to(a, (n, 3)).T
                Up[rows, n:] = Up[rows, n - 1 : n]
            self._ext_zero = all(a is None for a in ext)
        self._advance()
        self._X = X = self._Xp[:, :n].copy()
        return self._cls(*[None if s is None else X[s].T for s in self._field_slices])

    def rollout(self, u: Any, gusts: Any, record: bool, steps: int | None) -> Any:
        """``T`` steps from the loaded states (see :class:`quadsim.engines.array_engine.Engine`)."""
        T = int(steps) if steps is not None else int(np.shape(u)[0])
        if steps is not None and gusts is not None:
            u = np.broadcast_to(np.asarray(u), (T, *np.shape(u)))
        self._X, rec = self.run(self._X, self.inputs(u, gusts), T, record)
        self._loaded = False
        return self.unpack_state(rec, self._cls) if record else None

    def state(self) -> Any:
        """The current state (views of the packed states)."""
        return self.unpack_state(self._X, self._cls)

    def status(self) -> Status | None:
        """The current flags (``None`` without a world)."""
        return self.unpack(self._X, self._cls)[1] if self.has_world else None

    def fault(self, i: int = 0) -> tuple[int, int]:
        """``(fault_step, fault_code)`` of drone ``i``."""
        (a, b), X = self._fault_rows, self._X
        return int(X[a, i]), int(X[b, i])
