"""Simulation: :class:`State`, pure :func:`step` and :func:`rollout`, engines, :class:`Simulator`.

Data path (one step, command held over it)::

    x, u ──► integrator(f = system.deriv(·, u, params, env)) ──► world.apply ──► x', status'

Everything up to the engines is a pure function of arrays (:func:`make_step` is the one step).
An :class:`Engine` holds a batch's state, flags and step index in its own layout and advances
them with that step: :class:`ArrayEngine` on NumPy and PyTorch (a Python loop over the step) and
on JAX (the step ``jax.jit``-compiled, :func:`rollout` under ``lax.scan`` over a
structure-of-arrays carry); :class:`quadsim.engines.sim_native.NativeEngine` evaluates the same step
on CasADi symbols and compiles it to C. :class:`Simulator` is the imperative shell: it checks and
broadcasts inputs, draws the wind (:mod:`quadsim.physics.wind`: ``x_{k+1} = A_d x_k + L_d n_k``,
gust ``C x_{k+1}`` rotated to ENU, plus the mean), counts steps and raises on a diverged single
drone; it never branches on the backend.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, NamedTuple, Protocol

import numpy as np

from ..physics._array import check_real, namespace, stack, to_numpy, unstack
from ..physics.integrators import rk4
from ..physics.models._rigid import numeric_params
from ..physics.systems import Env, System, make_system
from ..physics.world import FAULT_NAMES, Status, World
from ..physics.world import apply as world_apply

__all__ = [
    "ArrayEngine",
    "Engine",
    "EulerState",
    "SimulationError",
    "Simulator",
    "State",
    "Wind",
    "diverged",
    "initial_status",
    "make_engine",
    "make_step",
    "rollout",
    "step",
]


class State(NamedTuple):
    """Quaternion-model state; every field has the batch shape ``...`` plus its own size.

    Attributes:
        pos: World position [m], ``(..., 3)``.
        quat: Attitude xyzw, body to world, ``(..., 4)``.
        vel: World velocity [m/s], ``(..., 3)``.
        ang_vel: Body angular velocity [rad/s], ``(..., 3)``.
        rotor_vel: Rotor speeds [RPM], ``(..., N)``, or ``None`` without rotor dynamics.
    """

    pos: Any
    quat: Any
    vel: Any
    ang_vel: Any
    rotor_vel: Any = None


class EulerState(NamedTuple):
    """Euler-model state: as :class:`State` with ``rpy`` (roll, pitch, yaw [rad]) for ``quat``."""

    pos: Any
    rpy: Any
    vel: Any
    ang_vel: Any
    rotor_vel: Any = None


DEFAULT_WORLD = World()
"""Seed 001's sticky ground at z = 0, no obstacles, default fault limits."""


class Wind(NamedTuple):
    """Wind for a :class:`Simulator`: a constant mean plus optional Dryden turbulence.

    Attributes:
        mean: World-frame mean wind [m/s], shape ``(3,)`` or ``(n, 3)`` (per drone).
        turbulence: :class:`~quadsim.physics.wind.DrydenParams` or ``None``. Gusts are generated in
            the turbulence axes (``u`` along the horizontal mean wind, or +x when calm) with the
            counter-based normals of the simulator's seed (:mod:`quadsim.physics.noise`), and added
            to the mean.
    """

    mean: Any = (0.0, 0.0, 0.0)
    turbulence: Any = None


class SimulationError(RuntimeError):
    """A single-drone simulation diverged (which quantity, at which step and time)."""


def diverged(step: int, code: int, dt: float) -> SimulationError:
    """The error of a single drone that diverged at ``step`` (fault ``code``,
    :data:`~quadsim.physics.world.FAULT_NAMES`), for every loop that finds one."""  # noqa: D205, D209
    return SimulationError(
        f"drone diverged: {FAULT_NAMES[code]} at step {step} (t = {(step + 1) * dt:.6g} s); "
        "the state was kept at its last good value"
    )


def state_to_comps(state: NamedTuple) -> tuple:
    """The flat component tuple of a state (the kernels' ``x``).

    The fields in order, each split along its last axis (``pos`` 3, ``quat`` 4 or ``rpy`` 3,
    ``vel`` 3, ``ang_vel`` 3, ``rotor_vel`` N); ``None`` fields are left out.
    """
    return tuple(c for f in state if f is not None for c in unstack(f))


def state_from_comps(x: tuple, system: System, xp: Any, like: Any) -> NamedTuple:
    """A :class:`State` (:class:`EulerState` for Euler models) from the components ``x``.

    ``x`` is laid out as :func:`state_to_comps` makes it for ``system``; the fields are stacked
    on ``xp`` like ``like`` (dtype, device).
    """
    fields = {name: stack(xp, x[s], like) for name, s in system.slices().items()}
    cls = State if system.attitude == "quat" else EulerState
    return cls(**fields)


def _env(xp: Any, wind: Any, dist_f: Any, dist_t: Any) -> Env:
    return Env(*(None if a is None else unstack(a) for a in (wind, dist_f, dist_t)))


def check_unit_quat(quat: np.ndarray, drones: np.ndarray, where: str) -> None:
    """``ValueError`` naming the first drone whose attitude ``(m, 4)`` is not unit to 1e-6."""
    norm = np.linalg.norm(quat, axis=-1)
    bad = np.flatnonzero(np.abs(norm - 1.0) > 1e-6)
    if bad.size:
        i = bad[0]
        raise ValueError(f"{where}: attitude must be a unit quaternion (xyzw); drone "
                         f"{drones[i]} has norm {norm[i]:.6g}")  # fmt: skip


def initial_status(
    xp: Any, batch_shape: tuple[int, ...], device: Any = None, dtype: Any = None
) -> Status:
    """All-clear :class:`~quadsim.physics.world.Status` for a batch.

    ``crash_time`` has ``dtype`` (default: the namespace's default float; float32 on torch).
    """
    false = xp.zeros(batch_shape, dtype=xp.bool, device=device)
    return Status(
        landed=false,
        crashed=false,
        crash_time=xp.full(batch_shape, math.nan, dtype=dtype, device=device),
        fault_step=xp.full(batch_shape, -1, dtype=xp.int32, device=device),
        fault_code=xp.zeros(batch_shape, dtype=xp.int32, device=device),
    )


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


def _params_of(drone: Any, system: System) -> dict:
    from ..physics.params import Params, load_params

    params = drone if isinstance(drone, Params) else load_params(drone)
    return {k: getattr(params, k) for k in system.param_spec}


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
    x, status = fn(state_to_comps(state), unstack(cmd), status, k, _env(xp, wind, dist_f, dist_t))
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
    env = _env(xp, wind, dist_f, dist_t)
    x = state_to_comps(state)
    n_steps = int(steps) if steps is not None else cmds.shape[0]

    def env_at(g: Any) -> Env:
        if g is None:
            return env
        gw = unstack(g)
        w = gw if env.wind is None else tuple(a + b for a, b in zip(env.wind, gw, strict=True))
        return env._replace(wind=w)

    if _is_jax(xp):
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


def _is_jax(xp: Any) -> bool:
    return "jax" in getattr(xp, "__name__", "")


def _backend(name: str, dtype: str) -> tuple[Any, Any]:
    if dtype not in ("float32", "float64"):
        raise ValueError(f"dtype must be 'float32' or 'float64'; got {dtype!r}")
    if name == "numpy":
        import array_api_compat.numpy as xnp

        return xnp, getattr(xnp, dtype)
    if name == "jax":
        from .signals import interrupt_after

        with interrupt_after():  # Ctrl-C inside jaxlib's module initialisation can crash Python
            import jax

        if dtype == "float64":
            jax.config.update("jax_enable_x64", True)  # asked for explicitly: float64 on JAX
        return jax.numpy, getattr(jax.numpy, dtype)
    if name == "torch":
        from .signals import interrupt_after

        with interrupt_after():  # as jax: a C extension's initialisation is not to be cut
            import array_api_compat.torch as xt

        return xt, getattr(xt, dtype)
    if name == "native":
        import array_api_compat.numpy as xnp

        from .native import available

        if not available():
            raise ValueError(
                "backend 'native' needs CasADi (pip install 'quadsim[casadi]') and a C compiler "
                "with GCC vector extensions (gcc or clang; set CC to choose one)"
            )
        return xnp, getattr(xnp, dtype)
    raise ValueError(f"backend must be 'numpy', 'jax', 'torch' or 'native'; got {name!r}")


# -- engines ------------------------------------------------------------------------------------
class Engine(Protocol):
    """What a :class:`Simulator` drives: a batch's state, flags and step index, and their steps.

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


def as_cmd(cmd: Any, shape: tuple[int, ...], xp: Any, dtype: Any) -> Any:
    """``cmd`` broadcast to ``shape`` as an ``xp`` array of ``dtype`` (``ValueError`` if not:
    another shape, or values that are not real numbers, such as complex numbers or text)."""  # noqa: D205, D209
    check_real(cmd if hasattr(cmd, "dtype") else np.asarray(cmd), "cmd")
    a = np.asarray(cmd, dtype=np.float64) if not hasattr(cmd, "device") else cmd
    try:
        a = np.array(np.broadcast_to(a, shape)) if isinstance(a, np.ndarray) else a
    except ValueError:
        raise ValueError(f"cmd must broadcast to shape {shape}; got {np.shape(cmd)}") from None
    if tuple(a.shape) != shape:
        raise ValueError(f"cmd must have shape {shape}; got {tuple(a.shape)}")
    return xp.asarray(a, dtype=dtype)


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

        if _is_jax(xp):
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
            self._state, u, self._status, self._k, _env(xp, *ext)
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
        from .sim_native import NativeEngine

        per_drone = tuple(k for k in params if np.ndim(params[k]) > len(system.param_spec[k]))
        return NativeEngine(system, params, per_drone, dt, integrator, world, np.dtype(dtype))
    return ArrayEngine(system, params, dt, integrator, world, xp, dtype)


class Simulator:
    """A batch of drones stepping in time: the thin imperative shell around an :class:`Engine`.

    The shell holds the plant only: the engine (chosen once from ``backend`` by
    :func:`make_engine`) holds the state, flags and step index; the shell turns arguments into
    arrays, adds the wind of :mod:`quadsim.physics.wind` (its turbulence drawn from :attr:`seed`,
    counter-based: :mod:`quadsim.physics.noise`), and keeps :attr:`k`.

    Example::

        sim = Simulator(drone="cf2x_L250", n=64, dt=1 / 500, backend="jax", dtype="float32")
        sim.reset(pos=np.array([0.0, 0.0, 1.0]))
        state = sim.step(np.full((64, 4), sim.hover_rpm))

    Args:
        drone: Preset name, TOML path or :class:`~quadsim.physics.params.Params`.
        n: Number of drones (batch size).
        dt: Step [s].
        model: Registered model name (``first_principles``, ``euler_zyx``, ``wrench``).
        integrator: Integrator function (:mod:`quadsim.physics.integrators`) or its name.
        backend: ``"numpy"``, ``"jax"``, ``"torch"``, or ``"native"`` (the same step traced with
            CasADi and compiled to vectorised multi-threaded C; needs a C compiler).
        dtype: ``"float32"`` or ``"float64"``.
        seed: Key of the simulator's random numbers, an integer in ``[0, 2**64)``: the Dryden
            turbulence of drone ``i`` at step ``k`` is :func:`quadsim.physics.noise.normals`
            ``(seed, "dryden", k, i)`` (the same in any batch), :func:`quadsim.loop.flight.fly`'s
            sensor noise uses it too, and :attr:`rng` (a NumPy generator for your own draws) is
            seeded with it; nothing is global.
        world: :class:`~quadsim.physics.world.World` (default: sticky ground at z = 0) or ``None``.
        rotor_dynamics: Model rotor speeds as states (rotor-level models).
        params: Per-drone overrides: model parameter name -> array with leading size ``n``
            (domain randomisation), e.g. ``{"mass": masses}``.
        wind: :class:`Wind` (mean and turbulence), or ``None`` for still air.

    Attributes:
        mean_wind: The mean wind ``(n, 3)`` [m/s], or ``None`` in still air.
        dryden: The turbulence discretised at ``dt``
            (:func:`~quadsim.physics.wind.dryden_discretize`), or ``None``.
        gust_state: The turbulence's state ``(n, 5)``; ``None`` until the first step after a
            reset draws the stationary start (:meth:`gust_start`). Loops that run the gusts
            themselves (the compiled closed loop) put theirs back here.
    """

    def __init__(
        self, drone: Any = "cf2x_L250", n: int = 1, dt: float = 1 / 500, *,
        model: str = "first_principles", integrator: Callable | str = rk4,
        backend: str = "numpy", dtype: str = "float64", seed: int = 0,
        world: World | None = DEFAULT_WORLD, rotor_dynamics: bool = True,
        params: dict | None = None, wind: Wind | None = None,
    ) -> None:  # fmt: skip
        from ..physics.envelope import envelope
        from ..physics.integrators import INTEGRATORS
        from ..physics.params import Params, PhysicalError, check_physical, load_params

        if not (isinstance(n, int) and n >= 1):
            raise ValueError(f"n must be a positive integer; got {n!r}")
        if not (dt > 0 and math.isfinite(dt)):
            raise ValueError(f"dt must be a positive number of seconds; got {dt!r}")
        if isinstance(integrator, str):
            if integrator not in INTEGRATORS:
                raise ValueError(
                    f"unknown integrator {integrator!r}; choose from {list(INTEGRATORS)}"
                )
            integrator = INTEGRATORS[integrator]
        self.drone = drone if isinstance(drone, Params) else load_params(drone)
        n_rotors = self.drone.mixing_matrix.shape[1]
        self.system = make_system(model, n_rotors, rotor_dynamics and model != "wrench")
        self.n, self.dt, self.world, self.integrator = n, float(dt), world, integrator
        self.xp, self.dtype = _backend(backend, dtype)
        self.backend = backend
        from ..physics.noise import check_seed

        self.seed = check_seed(seed)
        self.rng = np.random.default_rng(seed)
        self.hover_rpm = envelope(self.drone).hover_rpm
        model_params = _params_of(self.drone, self.system)
        for key, value in (params or {}).items():
            if key not in model_params:
                raise ValueError(f"params: {key!r} is not a parameter of model {model!r}")
            value = np.asarray(value, dtype=np.float64)
            if value.shape[:1] != (n,):
                raise ValueError(
                    f"params[{key!r}] must have leading size n = {n}; got {value.shape}"
                )
            try:  # the physical rules of presets, per drone (quadsim.physics.params.check_physical)
                check_physical({key: value})
            except PhysicalError as e:
                at = "".join(f"[{i}]" for i in e.index)
                raise ValueError(f"params[{key!r}]{at}: {e.reason}") from None
            model_params[key] = value
        if "J" in (params or {}) and "J_inv" not in (params or {}):
            model_params["J_inv"] = np.linalg.inv(model_params["J"])
        self.model_params = model_params
        self.wind = wind
        self._setup_wind(wind)
        self._engine = make_engine(backend, self.system, model_params, self.dt, integrator, world,
                                   self.xp, self.dtype)  # fmt: skip
        self.reset()

    # -- state ------------------------------------------------------------------------------------
    @property
    def state(self) -> NamedTuple:
        """The current :class:`State` (or :class:`EulerState`), each field ``(n, size)``.

        Assigning a state (same fields and shapes) continues from it, clock and flags kept.
        """
        return self._state

    @state.setter
    def state(self, value: NamedTuple) -> None:
        self._engine.load(value, self._engine.status(), self.k)
        self._state = self._engine.state()

    @property
    def status(self) -> Status | None:
        """Per-drone flags (:class:`~quadsim.physics.world.Status`), ``None`` without a world."""
        return self._engine.status()

    @status.setter
    def status(self, value: Status | None) -> None:
        self._engine.load(self._state, value, self.k)
        self._state = self._engine.state()

    def reset(
        self, pos: Any = None, attitude: Any = None, vel: Any = None, ang_vel: Any = None,
        rotor_vel: Any = None, *, seed: int | None = None,
    ) -> NamedTuple:  # fmt: skip
        """Start again at time 0 with all flags clear (and a new generator if ``seed`` is given).

        Each argument broadcasts to the batch: position [m] (default origin), attitude (xyzw
        quaternion, or roll/pitch/yaw for the Euler model; default level), velocity [m/s], body
        rates [rad/s] (default zero), rotor speeds [RPM] (default hover).

        Raises:
            ValueError: A value is not finite, or a quaternion's norm differs from 1 by more than
                1e-6 (naming the drone).
        """
        n, xp = self.n, self.xp
        if seed is not None:
            from ..physics.noise import check_seed

            self.seed = check_seed(seed)
            self.rng = np.random.default_rng(seed)
        att_size = 4 if self.system.attitude == "quat" else 3
        default_att = [0.0, 0.0, 0.0, 1.0] if att_size == 4 else [0.0, 0.0, 0.0]
        sizes = dict(self.system.fields)

        def arr(value, default, name):
            a = np.broadcast_to(np.asarray(default if value is None else value, dtype=np.float64),
                                (n, sizes[name])) if name in sizes else None  # fmt: skip
            if a is not None and not np.all(np.isfinite(a)):
                raise ValueError(f"reset: {name} must be finite")
            if name == "quat":
                check_unit_quat(a, np.arange(n), "reset")
            return None if a is None else xp.asarray(np.array(a), dtype=self.dtype)

        fields = [
            arr(pos, [0.0, 0.0, 0.0], "pos"),
            arr(attitude, default_att, "quat" if att_size == 4 else "rpy"),
            arr(vel, [0.0] * 3, "vel"),
            arr(ang_vel, [0.0] * 3, "ang_vel"),
            arr(rotor_vel, [self.hover_rpm] * self.system.n_cmd, "rotor_vel"),
        ]
        cls = State if att_size == 4 else EulerState
        status = initial_status(xp, (n,), dtype=self.dtype) if self.world is not None else None
        self.k = 0
        self.gust_state = None  # drawn at the first step, so reset(seed=s) == Simulator(seed=s)
        self._engine.load(cls(*fields), status, 0)
        self._state = self._engine.state()
        return self._state

    def reset_drones(
        self, which: Any, pos: Any = None, attitude: Any = None, vel: Any = None,
        ang_vel: Any = None, rotor_vel: Any = None,
    ) -> NamedTuple:  # fmt: skip
        """Reset only the drones selected by ``which`` (the others and the clock go on).

        For vectorised environments with autoreset. Each argument broadcasts to ``(m, k)`` for the
        ``m`` selected drones (defaults as in :meth:`reset`); their flags are cleared.

        Args:
            which: Boolean mask ``(n,)`` or integer indices of the drones to reset.
            pos: Position [m] (default origin).
            attitude: xyzw quaternion, or roll/pitch/yaw for the Euler model (default level).
            vel: Velocity [m/s] (default zero).
            ang_vel: Body rates [rad/s] (default zero).
            rotor_vel: Rotor speeds [RPM] (default hover).

        Raises:
            ValueError: As :meth:`reset`.
        """
        idx = np.arange(self.n)[np.asarray(which)]
        if idx.size == 0:
            return self._state
        att_size = 4 if self.system.attitude == "quat" else 3
        defaults = {
            "pos": [0.0] * 3, "vel": [0.0] * 3, "ang_vel": [0.0] * 3,
            "quat": [0.0, 0.0, 0.0, 1.0], "rpy": [0.0] * 3,
            "rotor_vel": [self.hover_rpm] * self.system.n_cmd,
        }  # fmt: skip
        given = {"pos": pos, "quat" if att_size == 4 else "rpy": attitude, "vel": vel,
                 "ang_vel": ang_vel, "rotor_vel": rotor_vel}  # fmt: skip
        fields = {}
        for name, old in self._state._asdict().items():
            if old is None:
                fields[name] = None
                continue
            new = np.array(to_numpy(old), dtype=np.float64)
            value = given.get(name)
            value = defaults[name] if value is None else value
            value = np.broadcast_to(np.asarray(value, dtype=np.float64), (idx.size, new.shape[1]))
            if not np.all(np.isfinite(value)):
                raise ValueError(f"reset_drones: {name} must be finite")
            if name == "quat":
                check_unit_quat(value, idx, "reset_drones")
            new[idx] = value
            fields[name] = new
        status = self._engine.status()
        if status is not None:
            flags = [np.array(to_numpy(s)) for s in status]
            for f, clear in zip(flags, (False, False, math.nan, -1, 0), strict=True):
                f[idx] = clear
            status = Status(*flags)
        self._engine.load(type(self._state)(**fields), status, self.k)
        self._state = self._engine.state()
        return self._state

    def _setup_wind(self, wind: Wind | None) -> None:
        """The wind's parts: :attr:`mean_wind` ``(n, 3)`` [m/s] or ``None`` (no wind),
        :attr:`dryden` (the turbulence discretised at ``dt``, :func:`~quadsim.physics.wind.
        dryden_discretize`) or ``None``; :attr:`gust_state` ``(n, 5)`` is the turbulence's
        state, ``None`` until the first step after a reset draws the stationary start."""  # noqa: D205, D209
        self.dryden = None
        if wind is None:
            self.mean_wind = None
            return
        mean = np.broadcast_to(np.asarray(wind.mean, dtype=np.float64), (self.n, 3))
        if not np.all(np.isfinite(mean)):
            raise ValueError("wind.mean must be finite")
        self.mean_wind = mean
        if wind.turbulence is not None:
            from ..physics.wind import dryden_discretize

            self.dryden = dryden_discretize(wind.turbulence, self.dt)
            horiz = mean[:, :2].copy()
            calm = np.linalg.norm(horiz, axis=1) < 1e-9
            horiz[calm] = (1.0, 0.0)
            # the u axis of the turbulence, (cos, sin) per drone, contiguous per component
            unit = horiz / np.linalg.norm(horiz, axis=1, keepdims=True)
            self._wind_dir = np.asfortranarray(unit)

    def wind_sequence(self, steps: int, k0: int | None = None) -> np.ndarray | None:
        """World wind of steps ``k0 .. k0 + steps - 1``, ``(steps, n, 3)``; advances the gusts.

        The mean wind plus, with turbulence, the Dryden process of :mod:`quadsim.physics.wind`
        (:func:`~quadsim.physics.wind.dryden_sequence` over the chunk, rotated to ENU by
        :func:`~quadsim.physics.wind.gust_to_world`), driven by
        :func:`quadsim.physics.noise.normals` of
        :attr:`seed` at each step (``k0`` defaults to :attr:`k`); the stationary start is
        drawn at the first step after a reset.
        """
        if self.mean_wind is None:
            return None
        out = np.empty((steps, self.n, 3))
        if self.dryden is None:
            out[:] = self.mean_wind
            return out
        from ..physics.noise import normals
        from ..physics.wind import dryden_sequence, gust_to_world

        k0 = self.k if k0 is None else int(k0)
        start = self.gust_start(k0)  # the stationary start after a reset: no transient
        noise = normals(self.seed, "dryden", k0 + np.arange(steps)[:, None], np.arange(self.n), 5)
        self.gust_state, gusts = dryden_sequence(start, noise, self.dryden)
        out[:] = self.mean_wind + gust_to_world(gusts, self._wind_dir, unit=True)
        return out

    def gust_start(self, k0: int | None = None) -> np.ndarray | None:
        """The gust state ``(n, 5)`` step ``k0`` (default :attr:`k`) starts from:
        :attr:`gust_state`, or the stationary start drawn there after a reset (``None`` without
        turbulence); changes nothing."""  # noqa: D205, D209
        if self.dryden is None:
            return None
        if self.gust_state is not None:
            return self.gust_state
        from ..physics.noise import normals
        from ..physics.wind import dryden_init

        k0 = self.k if k0 is None else int(k0)
        return dryden_init(self.dryden, normals(self.seed, "dryden_init", k0, np.arange(self.n), 5))

    @property
    def time(self) -> float:
        """Simulated time [s]."""
        return self.k * self.dt

    # -- stepping ---------------------------------------------------------------------------------
    def _cmd(self, cmd: Any, lead: tuple[int, ...]) -> Any:
        return as_cmd(cmd, (*lead, self.n, self.system.n_cmd), self.xp, self.dtype)

    def step(self, cmd: Any, wind: Any = None, dist_f: Any = None, dist_t: Any = None) -> Any:
        """Advance all drones by ``dt`` with command ``cmd`` ``(n, n_cmd)`` (broadcast).

        ``wind`` [m/s] (added to the simulator's :class:`Wind`), ``dist_f`` [N] and ``dist_t``
        [N m] are world-frame, ``(3,)`` or ``(n, 3)``, held over the step.

        Raises:
            SimulationError: For a single drone (``n == 1``) whose state diverged.
        """
        seq = self.wind_sequence(1)
        if seq is not None:
            wind = seq[0] if wind is None else seq[0] + np.asarray(wind)
        self._state = self._engine.step(cmd, (wind, dist_f, dist_t))
        self.k += 1
        self._check_single()
        return self._state

    def step_wrench(
        self, wrench: Any, wind: Any = None, dist_f: Any = None, dist_t: Any = None
    ) -> Any:
        """Advance by ``dt`` with a body wrench ``(n, 4)`` = ``[F (N), τx, τy, τz (N m)]``.

        The wrench becomes desired rotor speeds as in the closed loop
        (:func:`quadsim.physics.commands.command_allocation`:
        :func:`quadsim.physics.rotors.allocate`,
        saturation priorities: collective thrust and roll/pitch before yaw); the rotors then
        follow their own dynamics, so the wrench the body feels comes from the actual rotor
        speeds. The allocation of this step is kept in :attr:`last_allocation` (``lost`` says
        what saturation cost). For the ``wrench`` model the wrench is applied directly.
        """
        w = np.asarray(to_numpy(wrench), dtype=np.float64)
        if w.shape[-1:] != (4,):
            raise ValueError(f"wrench must have shape (n, 4); got {w.shape}")
        if self.system.model == "wrench":
            return self.step(w, wind, dist_f, dist_t)
        from ..physics.commands import command_allocation
        from ..physics.rotors import make_allocator

        if getattr(self, "_allocator", None) is None:
            self._allocator = make_allocator(self.drone)
        # the closed loop's own step from a command to rotor speeds (quadsim.physics.commands)
        _, self.last_allocation = command_allocation(np.broadcast_to(w, (self.n, 4)),
                                                     self._allocator, "wrench")  # fmt: skip
        return self.step(self.last_allocation.rpm, wind, dist_f, dist_t)

    def rollout(self, cmds: Any, record: bool = True, steps: int | None = None) -> Any:
        """Run ``T`` steps and return the trajectory (states after each step, leading axis T).

        Args:
            cmds: Commands ``(T, n, n_cmd)``, one per step; or, with ``steps``, one command
                ``(n, n_cmd)`` held for ``T = steps`` steps.
            record: Return the trajectory (else ``None``; only the final state is kept).
            steps: Number of steps for a held command.
        """
        held = steps is not None
        T = int(steps) if held else int(np.shape(cmds)[0])
        u = self._cmd(cmds, () if held else (T,))
        seq = self.wind_sequence(T)
        traj = self._engine.rollout(u, seq, record, T if held else None)
        self._state = self._engine.state()
        self.k += T
        self._check_single()
        return traj

    def _check_single(self) -> None:
        if self.n != 1 or self.world is None:
            return
        k, code = self._engine.fault()
        if k >= 0:
            raise diverged(k, code, self.dt)
