"""The pure step of a batch of drones: :func:`make_step`, :func:`step` and :func:`rollout`.

Data path (one step, command held over it)::

    x, u ──► integrator(f = system.deriv(·, u, params, env)) ──► world.apply ──► x', status'

:func:`make_step` is that step over flat components (:func:`quadsim.engines.state.state_to_comps`)
and the one step of every engine: the array engines (:mod:`quadsim.engines.array_engine`) call it
on arrays, the native engine (:mod:`quadsim.engines.sim_native`) evaluates it on CasADi symbols
and compiles it to C. :func:`step` and :func:`rollout` apply it to a
:class:`~quadsim.engines.state.State` of any batch shape; :func:`rollout` runs ``T`` steps, on JAX
under ``lax.scan`` over a structure-of-arrays carry, elsewhere in a Python loop.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, NamedTuple

from ..physics._array import namespace, unstack
from ..physics.integrators import rk4
from ..physics.models._rigid import numeric_params
from ..physics.systems import Env, System
from ..physics.world import Status, World
from ..physics.world import apply as world_apply
from .state import initial_status, state_from_comps, state_to_comps

__all__ = ["as_env", "is_jax", "make_step", "rollout", "step"]


def as_env(xp: Any, wind: Any, dist_f: Any, dist_t: Any) -> Env:
    """The :class:`~quadsim.physics.systems.Env` of world-frame terms ``(..., 3)`` (each may be
    ``None``), split into components."""  # noqa: D205, D209
    return Env(*(None if a is None else unstack(a) for a in (wind, dist_f, dist_t)))


def is_jax(xp: Any) -> bool:
    """Whether ``xp`` is a JAX namespace."""
    return "jax" in getattr(xp, "__name__", "")


def make_step(
    system: System,
    params: dict | SimpleNamespace,
    dt: float,
    integrator: Callable = rk4,
    world: World | None = None,
    *,
    xp: Any,
    like: Any = None,
) -> Callable:
    """A pure step over flat components: ``step_fn(x, u, status, k, env) -> (x, status)``.

    The one step of every engine: the array engines call it on arrays, the native engine
    (:mod:`quadsim.engines.sim_native`) evaluates it once on CasADi symbols and compiles the result.

    Args:
        system: The model's :class:`~quadsim.physics.systems.System`.
        params: Model parameters by name (e.g. from :class:`~quadsim.physics.params.Params`); each
            may carry a leading batch shape (per-drone values). Or a namespace of parameters already
            in kernel form (what :func:`quadsim.physics.models._rigid.numeric_params` returns;
            Python floats or CasADi symbols for the native engine), used as it is.
        dt: Step [s].
        integrator: One of :mod:`quadsim.physics.integrators`.
        world: Contacts, crashes and faults, or ``None`` for free flight without checks.
        xp: Array namespace (or :data:`quadsim.physics._array.CASADI_OPS`).
        like: An array with the dtype and device to compute in (not needed for a namespace of
            parameters).
    """
    if isinstance(params, SimpleNamespace):
        p = params
    else:
        p = numeric_params(xp, like, system.param_spec, **{k: params[k] for k in system.param_spec})
    sl = system.slices()

    def step_fn(x: tuple, u: tuple, status: Status, k: Any, env: Env) -> tuple[tuple, Status]:
        x1 = integrator(lambda y: system.deriv(y, u, p, xp, env), x, dt, system, xp)
        if world is None:
            return x1, status
        return world_apply(x, x1, status, k, (k + 1) * dt, world, sl, xp)

    if world is None or not getattr(xp, "__name__", "").startswith("jax"):
        return step_fn

    import jax

    def jax_step_fn(x: tuple, u: tuple, status: Status, k: Any, env: Env) -> tuple[tuple, Status]:
        """The world's checks behind a ``lax.cond`` (always true): a fusion boundary.

        The checks read every state component; fused with the integrator, XLA duplicates the
        integrator into each consumer (three times the operations, about ten times the time per
        step, a slower compile). Behind the boundary the same operations run once.
        """
        x1 = integrator(lambda y: system.deriv(y, u, p, xp, env), x, dt, system, xp)

        def apply(x: tuple, x1: tuple, status: Status) -> tuple[tuple, Status]:
            x2, new = world_apply(x, x1, status, k, (k + 1) * dt, world, sl, xp)
            return x2, jax.tree.map(lambda a, b: a.astype(b.dtype), new, status)

        return jax.lax.cond(xp.asarray(k) >= 0, apply, lambda x, x1, status: (x1, status),
                            x, x1, status)  # fmt: skip

    return jax_step_fn


def step(
    state: NamedTuple, cmd: Any, dt: float, *, system: System, params: dict,
    integrator: Callable = rk4, world: World | None = None, status: Status | None = None,
    k: int = 0, wind: Any = None, dist_f: Any = None, dist_t: Any = None,
) -> tuple[NamedTuple, Status | None]:  # fmt: skip
    """Advance a batch of drones by one step of ``dt`` seconds (pure).

    Args:
        state: :class:`State` or :class:`EulerState` with batch shape ``...``.
        cmd: Commands ``(..., n_cmd)``: rotor speeds [RPM] or ``(F [N], τ [N m])`` (wrench).
        dt: Step [s].
        system: The model layout, :func:`quadsim.physics.systems.make_system`.
        params: Model parameters by name (optionally per drone).
        integrator: An integrator function.
        world: Contacts and fault checks, or ``None``.
        status: Flags before the step (``None``: all clear; only used with ``world``).
        k: Index of this step (for crash times and fault records).
        wind: World wind velocity [m/s], ``(..., 3)``.
        dist_f: World disturbance force [N], ``(..., 3)``.
        dist_t: World disturbance torque [N m], ``(..., 3)``.

    Returns:
        ``(state, status)`` after the step (``status`` is ``None`` without a world).
    """
    xp = namespace(state.pos)
    fn = make_step(system, params, dt, integrator, world, xp=xp, like=state.pos)
    if world is not None and status is None:
        status = initial_status(xp, tuple(state.pos.shape[:-1]), dtype=state.pos.dtype)
    env = as_env(xp, wind, dist_f, dist_t)
    x, status = fn(state_to_comps(state), unstack(cmd), status, k, env)
    return state_from_comps(x, system, xp, state.pos), status


def rollout(
    state: NamedTuple, cmds: Any, dt: float, *, system: System, params: dict,
    integrator: Callable = rk4, world: World | None = None, status: Status | None = None,
    k0: int = 0, wind: Any = None, gusts: Any = None, dist_f: Any = None, dist_t: Any = None,
    record: bool = True, steps: int | None = None,
) -> tuple[NamedTuple, Status | None, NamedTuple | None]:  # fmt: skip
    """Run ``T`` steps (pure); on JAX under ``jax.lax.scan``.

    Args:
        state: Initial state, batch shape ``...``.
        cmds: Commands ``(T, ..., n_cmd)``, one per step (zero-order hold), or with ``steps``
            one command ``(..., n_cmd)`` held for ``T = steps`` steps.
        dt: Step [s].
        system: The model layout.
        params: Model parameters by name.
        integrator: An integrator function.
        world: Contacts and fault checks, or ``None``.
        status: Initial flags (``None``: all clear).
        k0: Index of the first step.
        wind: Constant world wind [m/s], ``(..., 3)``.
        gusts: Per-step world wind added to ``wind`` [m/s], ``(T, ..., 3)`` (e.g. Dryden).
        dist_f: Constant world disturbance force [N].
        dist_t: Constant world disturbance torque [N m].
        record: Also return the trajectory: the state after every step, leading axis ``T``.
        steps: Hold ``cmds`` for this many steps (no per-step command array is built).

    Returns:
        ``(final_state, status, trajectory)``.
    """
    xp = namespace(state.pos)
    fn = make_step(system, params, dt, integrator, world, xp=xp, like=state.pos)
    if world is not None and status is None:
        status = initial_status(xp, tuple(state.pos.shape[:-1]), dtype=state.pos.dtype)
    env = as_env(xp, wind, dist_f, dist_t)
    x = state_to_comps(state)
    n_steps = int(steps) if steps is not None else cmds.shape[0]

    def env_at(g: Any) -> Env:
        if g is None:
            return env
        gw = unstack(g)
        w = gw if env.wind is None else tuple(a + b for a, b in zip(env.wind, gw, strict=True))
        return env._replace(wind=w)

    if is_jax(xp):
        import jax

        def body(carry, inp):
            xc, st = carry
            u, kk, g = inp
            u = unstack(cmds if steps is not None else u)
            xn, st = fn(xc, u, st, kk, env_at(g))
            return (xn, st), (xn if record else None)

        ks = k0 + xp.arange(n_steps, dtype=xp.int32)
        per_step = None if steps is not None else cmds
        (x, status), traj = jax.lax.scan(body, (x, status), (per_step, ks, gusts))
    else:
        traj = [] if record else None
        held = unstack(cmds) if steps is not None else None
        for i in range(n_steps):
            g = None if gusts is None else gusts[i]
            u = held if steps is not None else unstack(cmds[i])
            x, status = fn(x, u, status, k0 + i, env_at(g))
            if record:
                traj.append(x)
        if record:
            traj = tuple(xp.stack([t[j] for t in traj]) for j in range(len(x))) if traj else None
    final = state_from_comps(x, system, xp, state.pos)
    trajectory = None
    if record and traj is not None:
        trajectory = state_from_comps(tuple(traj), system, xp, state.pos)
    return final, status, trajectory
