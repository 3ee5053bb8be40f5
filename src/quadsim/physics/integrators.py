r"""Integrators: pure functions ``integrator(f, x, dt, system, ops) -> x_next``.

``x`` is a flat tuple of state components (see :mod:`quadsim.physics.systems`), ``f(x) -> x_dot``
the model derivative with the command held over the step (zero-order hold), ``dt`` the step [s],
``system`` the layout (which components are rates, where the attitude is), ``ops`` the array
namespace (or :data:`quadsim.physics._array.CASADI_OPS`). They are passed to the simulator as
functions.

* :func:`euler`: ``x + dt f(x)``; first order.
* :func:`semi_implicit`: rates first, ``r' = r + dt f_r(x)``, then the kinematics with the new
  rates, ``k' = k + dt f_k(k, r')`` (symplectic Euler); first order, far better energy behaviour.
* :func:`rk4`: classical Runge-Kutta, then the quaternion is renormalised (seed 001); fourth order.
  The stage quaternions ``q + h k`` are not of unit length (``|q + ½dt k_1|² = 1 + ¼dt²|q̇|²``);
  the models take them as they are, since ``R(q)`` is exact for any nonzero norm
  (:mod:`quadsim.physics.rotation`), so this is RK4 of the model with ``R(q/|q|)``.
* :func:`geometric`: like :func:`semi_implicit`, but the attitude is advanced on the rotation
  group, ``q' = q ⊗ exp(ω' dt)`` (seed 002), so a quaternion never leaves unit norm (for Euler
  angles the same rotation is applied and converted back).
* :func:`rk45`: adaptive Dormand-Prince through :func:`scipy.integrate.solve_ivp` over one step,
  keeping the last state (seed 003); a NumPy reference path, the quaternion renormalised after.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ._array import eps_of
from .rotation import kexp, kfrom_euler, kqmul, kto_euler

__all__ = ["INTEGRATORS", "euler", "geometric", "rk4", "rk45", "semi_implicit"]


def _axpy(x: tuple, k: tuple, h: Any) -> tuple:
    return tuple(a + h * b for a, b in zip(x, k, strict=True))


def _renormalize(x: tuple, system: Any, ops: Any) -> tuple:
    if system.attitude != "quat":
        return x
    q = system.slices()["quat"]
    c = x[q]
    inv = 1.0 / ops.sqrt(c[0] * c[0] + c[1] * c[1] + c[2] * c[2] + c[3] * c[3])
    return (*x[: q.start], *(a * inv for a in c), *x[q.stop :])


def euler(f: Callable, x: tuple, dt: Any, system: Any, ops: Any) -> tuple:
    """Explicit Euler step (no renormalisation: it shows the method's own drift)."""
    return _axpy(x, f(x), dt)


def semi_implicit(f: Callable, x: tuple, dt: Any, system: Any, ops: Any) -> tuple:
    """Semi-implicit (symplectic) Euler: rates first, then kinematics with the new rates."""
    rate = system.rate_mask()
    k1 = f(x)
    x_r = tuple(a + dt * b if r else a for a, b, r in zip(x, k1, rate, strict=True))
    k2 = f(x_r)
    out = tuple(a if r else a + dt * b for a, b, r in zip(x_r, k2, rate, strict=True))
    return _renormalize(out, system, ops)


def rk4(f: Callable, x: tuple, dt: Any, system: Any, ops: Any) -> tuple:
    """Classical fourth-order Runge-Kutta, quaternion renormalised after the step."""
    k1 = f(x)
    k2 = f(_axpy(x, k1, 0.5 * dt))
    k3 = f(_axpy(x, k2, 0.5 * dt))
    k4 = f(_axpy(x, k3, dt))
    h = dt / 6.0
    out = tuple(
        a + h * (b + 2.0 * c + 2.0 * d + e) for a, b, c, d, e in zip(x, k1, k2, k3, k4, strict=True)
    )
    return _renormalize(out, system, ops)


def geometric(f: Callable, x: tuple, dt: Any, system: Any, ops: Any) -> tuple:
    """Semi-implicit Euler with the attitude advanced by the exponential map ``q ⊗ exp(ω dt)``."""
    rate = system.rate_mask()
    sl = system.slices()
    k1 = f(x)
    x_r = tuple(a + dt * b if r else a for a, b, r in zip(x, k1, rate, strict=True))
    w = x_r[sl["ang_vel"]]
    eps = eps_of(ops, x[0])
    dq = kexp(ops, tuple(dt * c for c in w), (46080.0 * eps) ** (1.0 / 3.0))
    if system.attitude == "quat":
        att = kqmul(x[sl["quat"]], dq)
        a_sl = sl["quat"]
    else:
        att = kto_euler(ops, kqmul(kfrom_euler(ops, x[sl["rpy"]]), dq), math.sqrt(eps))
        a_sl = sl["rpy"]
    vel = x_r[sl["vel"]]
    pos = tuple(p + dt * v for p, v in zip(x[sl["pos"]], vel, strict=True))
    return (*pos, *att, *x_r[a_sl.stop :])


def rk45(
    f: Callable, x: tuple, dt: Any, system: Any, ops: Any, *, rtol: float = 1e-10,
    atol: float = 1e-12,
) -> tuple:  # fmt: skip
    """Adaptive RK45 (``scipy.integrate.solve_ivp``) over one step; NumPy states only.

    The whole batch is integrated as one system (shared step-size control), which makes this a
    reference path for a single drone or a few, not a fast one. Use ``functools.partial`` to set
    ``rtol`` and ``atol``.

    Raises:
        TypeError: If the state is not NumPy.
        RuntimeError: If the solver fails (the message is SciPy's).
    """
    import numpy as np
    from scipy.integrate import solve_ivp

    if not all(isinstance(c, np.ndarray | np.generic | float | int) for c in x):
        raise TypeError("rk45 is the NumPy reference integrator; got non-NumPy state components")
    arrays = np.broadcast_arrays(*[np.asarray(c, dtype=np.float64) for c in x])
    shape = arrays[0].shape
    n = len(arrays)

    def fun(_t: float, y: np.ndarray) -> np.ndarray:
        comps = tuple(y.reshape(n, *shape))
        out = np.broadcast_arrays(*[np.asarray(c, dtype=np.float64) for c in f(comps)])
        return np.stack(out).ravel()

    sol = solve_ivp(fun, (0.0, float(dt)), np.stack(arrays).ravel(), method="RK45", rtol=rtol,
                    atol=atol)  # fmt: skip
    if not sol.success:
        raise RuntimeError(f"rk45 failed over one step of {dt} s: {sol.message}")
    last = sol.y[:, -1].reshape(n, *shape)
    dtype = getattr(x[0], "dtype", np.float64)
    return _renormalize(tuple(np.asarray(c, dtype=dtype) for c in last), system, np)


INTEGRATORS: dict[str, Callable] = {
    "euler": euler,
    "semi_implicit": semi_implicit,
    "rk4": rk4,
    "geometric": geometric,
    "rk45": rk45,
}
"""Integrators by name, for the outer shells (scenario files, command line)."""
