"""The engine interface and the array engine: :class:`Engine`, :class:`ArrayEngine`.

An :class:`Engine` holds a batch's state, flags and step index in its own layout and advances
them with the one pure step (:func:`quadsim.engines.stepping.make_step`): :class:`ArrayEngine` on
NumPy and PyTorch (a Python loop over the step) and on JAX (the step ``jax.jit``-compiled,
:func:`~quadsim.engines.stepping.rollout` under ``lax.scan``);
:class:`quadsim.engines.sim_native.NativeEngine` evaluates the same step on CasADi symbols and
compiles it to C. :func:`make_engine` picks the engine of a backend, :func:`backend_namespace`
its array namespace and dtype.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

import numpy as np

from ..physics._array import numpy_namespace, unstack
from ..physics.systems import System
from ..physics.world import Status, World
from .native import available
from .signals import interrupt_after
from .sim_native import NativeEngine
from .state import as_cmd, state_from_comps, state_to_comps
from .stepping import as_env, is_jax, make_step, rollout

__all__ = ["ArrayEngine", "Engine", "backend_namespace", "make_engine"]


def backend_namespace(name: str, dtype: str) -> tuple[Any, Any]:
    """``(xp, dtype)``: the array namespace and floating dtype of a backend (NumPy's for
    ``native``); ``ValueError`` for an unknown backend or dtype, or a missing backend."""  # noqa: D205, D209
    if dtype not in ("float32", "float64"):
        raise ValueError(f"dtype must be 'float32' or 'float64'; got {dtype!r}")
    if name == "numpy":
        xnp = numpy_namespace()
        return xnp, getattr(xnp, dtype)
    if name == "jax":

        with interrupt_after():  # Ctrl-C inside jaxlib's module initialisation can crash Python
            import jax
        if dtype == "float64":
            jax.config.update("jax_enable_x64", True)  # asked for explicitly: float64 on JAX
        return jax.numpy, getattr(jax.numpy, dtype)
    if name == "torch":

        with interrupt_after():  # as jax: a C extension's initialisation is not to be cut
            import array_api_compat.torch as xt

        return xt, getattr(xt, dtype)
    if name == "native":
        xnp = numpy_namespace()
        if not available():
            raise ValueError(
                "backend 'native' needs CasADi (pip install 'quadsim[casadi]') and a C compiler "
                "with GCC vector extensions (gcc or clang; set CC to choose one)"
            )
        return xnp, getattr(xnp, dtype)
    raise ValueError(f"backend must be 'numpy', 'jax', 'torch' or 'native'; got {name!r}")


class Engine(Protocol):
    """What a :class:`~quadsim.engines.sim.Simulator` drives: a batch's state, flags, step index.

    An engine owns its data layout; nothing outside it reads that layout. Every engine advances
    the same pure step (:func:`make_step`): :class:`ArrayEngine` on an array namespace (NumPy,
    JAX under ``jax.jit``, PyTorch), :class:`quadsim.engines.sim_native.NativeEngine` compiled to C.
    World-frame terms ``ext = (wind, dist_f, dist_t)`` are each ``None`` or NumPy-like,
    broadcastable to ``(n, 3)``.
    """

    def load(self, state: NamedTuple, status: Status | None, k: int) -> None:
        """Take over a state (arrays or NumPy, ``(n, size)`` per field), flags and step index."""

    def step(self, cmd: Any, ext: tuple) -> NamedTuple:
        """One step with ``cmd`` ``(n, n_cmd)`` held; returns the new state."""

    def rollout(self, u: Any, gusts: Any, record: bool, steps: int | None) -> NamedTuple | None:
        """``T`` steps: ``u`` ``(T, n, n_cmd)``, or ``(n, n_cmd)`` held for ``T = steps``.

        ``gusts`` is the per-step world wind ``(T, n, 3)`` [m/s] or ``None``. Returns the
        states after every step (leading axis ``T``) when ``record``, else ``None``.
        """

    def state(self) -> NamedTuple:
        """The current state, each field ``(n, size)``."""

    def status(self) -> Status | None:
        """The current flags (``None`` without a world)."""

    def fault(self, i: int = 0) -> tuple[int, int]:
        """``(fault_step, fault_code)`` of drone ``i`` (``-1``: no fault; needs a world)."""


class ArrayEngine:
    """The pure :func:`make_step` and :func:`rollout` on an array namespace.

    On JAX both are ``jax.jit``-compiled (the rollout under ``lax.scan``); on NumPy and PyTorch
    they run as they are. The state is kept as a :class:`State` of ``xp`` arrays.

    Args:
        system: Model layout.
        params: Model parameters by name (per-drone entries with leading size ``n``).
        dt: Step [s].
        integrator: Integrator function.
        world: World, or ``None``.
        xp: Array namespace.
        dtype: Floating dtype of ``xp``.
    """

    def __init__(
        self, system: System, params: dict, dt: float, integrator: Callable, world: World | None,
        xp: Any, dtype: Any,
    ) -> None:  # fmt: skip
        self.xp, self.dtype, self.n_cmd = xp, dtype, system.n_cmd
        like = xp.zeros((), dtype=dtype)
        fn = make_step(system, params, dt, integrator, world, xp=xp, like=like)

        def state_step(state, cmd, status, k, env):
            x, status = fn(state_to_comps(state), unstack(cmd), status, k, env)
            return state_from_comps(x, system, xp, state.pos), status

        def run(state, u, status, k0, gusts, record, steps):
            return rollout(
                state, u, dt, system=system, params=params, integrator=integrator, world=world,
                status=status, k0=k0, gusts=gusts, record=record, steps=steps,
            )  # fmt: skip

        if is_jax(xp):
            import jax

            state_step = jax.jit(state_step)
            run = jax.jit(run, static_argnames=("record", "steps"))
        self._step, self._run = state_step, run

    def load(self, state: NamedTuple, status: Status | None, k: int) -> None:
        """Take over a state, flags and step index (converted to ``xp`` arrays)."""
        xp = self.xp
        self._state = type(state)(
            *(None if f is None else xp.asarray(f, dtype=self.dtype) for f in state)
        )
        self._status = None if status is None else Status(*(xp.asarray(f) for f in status))
        self._k, self._n = int(k), int(self._state.pos.shape[0])

    def step(self, cmd: Any, ext: tuple) -> NamedTuple:
        """One step (see :class:`Engine`)."""
        xp = self.xp
        u = as_cmd(cmd, (self._n, self.n_cmd), xp, self.dtype)
        ext = [None if a is None else xp.asarray(np.array(a, dtype=float), dtype=self.dtype)
               for a in ext]  # fmt: skip
        self._state, self._status = self._step(
            self._state, u, self._status, self._k, as_env(xp, *ext)
        )
        self._k += 1
        return self._state

    def rollout(self, u: Any, gusts: Any, record: bool, steps: int | None) -> NamedTuple | None:
        """``T`` steps (see :class:`Engine`)."""
        T = int(steps) if steps is not None else int(u.shape[0])
        gusts = None if gusts is None else self.xp.asarray(gusts, dtype=self.dtype)
        self._state, self._status, traj = self._run(
            self._state, u, self._status, self._k, gusts, record, steps
        )
        self._k += T
        return traj

    def state(self) -> NamedTuple:
        """The current state."""
        return self._state

    def status(self) -> Status | None:
        """The current flags."""
        return self._status

    def fault(self, i: int = 0) -> tuple[int, int]:
        """``(fault_step, fault_code)`` of drone ``i``."""
        st = self._status
        return int(np.asarray(st.fault_step)[i]), int(np.asarray(st.fault_code)[i])


def make_engine(
    backend: str, system: System, params: dict, dt: float, integrator: Callable,
    world: World | None, xp: Any, dtype: Any,
) -> Engine:  # fmt: skip
    """The :class:`Engine` of a backend: ``native`` compiles, the others are array engines."""
    if backend == "native":

        per_drone = tuple(k for k in params if np.ndim(params[k]) > len(system.param_spec[k]))
        return NativeEngine(system, params, per_drone, dt, integrator, world, np.dtype(dtype))
    return ArrayEngine(system, params, dt, integrator, world, xp, dtype)
