r"""IMU preintegration over a sliding window: the EKF's estimate carried to now in O(1).

With a measurement latency of ``L`` IMU samples the filter runs ``L`` samples behind; the
controller reads the filter's state carried to now through the ``L`` samples that wait in the
buffer (:class:`~quadsim.loop.estimation.estimators.EkfEstimator`). Re-propagating them costs ``L``
strapdown steps per step. Preintegrated over the window, in the body frame at its start
(Lupton and Sukkarieh 2012; Forster et al. 2017), the samples ``(ω_i, a_i, Δt_i)`` (bias-corrected
rate [rad/s] and specific force [m/s²]) give

.. math::

    ΔT = \sum Δt_i,\quad Δq = \prod \exp(ω_i Δt_i),\quad
    Δv = \sum R(Δq_{<i})\, a_i Δt_i,\quad
    Δp = \sum \big(Δv_{<i} Δt_i + ½ R(Δq_{<i})\, a_i Δt_i²\big),

and the strapdown of :func:`~quadsim.loop.estimation.eskf.strapdown` from ``(p, v, q)`` through the
window is, exactly,

.. math::

    p' = p + v ΔT + ½ g ΔT² + R(q) Δp, \quad v' = v + g ΔT + R(q) Δv, \quad q' = q ⊗ Δq.

The window slides by one sample per step: :func:`push` appends the newest sample (the recursion
above) and :func:`pop` removes the oldest ``(δq_0 = \exp(ω_0 Δt_0), a_0, Δt_0)`` by inverting it,

.. math::

    Δq ← δq_0^{-1} ⊗ Δq, \quad Δv ← R(δq_0)ᵀ (Δv - a_0 Δt_0), \quad
    Δp ← R(δq_0)ᵀ \big(Δp - ½ a_0 Δt_0² - a_0 Δt_0 (ΔT - Δt_0)\big), \quad ΔT ← ΔT - Δt_0,

so the carry costs two sample updates and one composition whatever ``L``. A pop undoes the
push of the same sample to rounding when both use the same bias estimates; the estimator
corrects each with the estimates of its own time (a change of estimate while a sample waits,
micrometres over the window, stays until the next rebuild), and rounding errors are not removed
by later slides either (an error in ``Δv`` stays, ``Δp`` integrates it), so the estimator
rebuilds the window from its buffered readings with the present estimates every ``8 L`` steps
(in the compiled loop only then; the tests measure the drift without it).

A window is one array ``(..., 11)``: ``Δq`` (4, xyzw), ``Δv`` (3) [m/s], ``Δp`` (3) [m],
``ΔT`` (1) [s]; a pushed sample ``(..., 8)``: ``δq`` (4), ``a`` (3) [m/s²], ``Δt`` (1) [s]
(``Δt = 0`` for an IMU reading that is not new: the identity).
"""

from __future__ import annotations

from typing import Any

from ...physics import rotation
from ...physics._array import as_like, namespace

__all__ = ["SAMPLE_SIZE", "WINDOW_SIZE", "apply", "empty", "pop", "push", "sample"]

WINDOW_SIZE = 11
"""Numbers in a window: ``Δq`` (4), ``Δv`` (3), ``Δp`` (3), ``ΔT`` (1)."""
SAMPLE_SIZE = 8
"""Numbers in a pushed sample: ``δq`` (4), ``a`` (3), ``Δt`` (1)."""


def empty(like: Any) -> Any:
    """The empty window ``(..., 11)`` (identity), batch and namespace of ``like`` ``(..., k)``."""
    xp = namespace(like)
    zero = 0.0 * like[..., :1]
    one = zero + 1.0
    return xp.concat([zero, zero, zero, one, *([zero] * 7)], axis=-1)


def sample(gyro: Any, accel: Any, dt: Any) -> Any:
    """A sample to push ``(..., 8)`` from a bias-corrected rate ``(..., 3)`` [rad/s], specific
    force ``(..., 3)`` [m/s²] and period ``dt`` ``(..., 1)`` [s] (0 for a reading that is not
    new)."""  # noqa: D205, D209
    xp = namespace(gyro, accel)
    return xp.concat([rotation.exp(gyro * dt), accel, dt + 0.0 * accel[..., :1]], axis=-1)


def push(win: Any, s: Any) -> Any:
    """The window with sample ``s`` appended (module docstring)."""
    xp = namespace(win, s)
    dq, dv, dp, T = win[..., 0:4], win[..., 4:7], win[..., 7:10], win[..., 10:11]
    dt = s[..., 7:8]
    Ra = rotation.rotate(dq, s[..., 4:7])
    dp = dp + dv * dt + (0.5 * dt * dt) * Ra
    dv = dv + Ra * dt
    dq = rotation.multiply(dq, s[..., 0:4])  # unit to rounding (apply normalises; rebuilt)
    return xp.concat([dq, dv, dp, T + dt], axis=-1)


def pop(win: Any, s: Any) -> Any:
    """The window without its oldest sample ``s`` (as pushed; module docstring)."""
    xp = namespace(win, s)
    dq, dv, dp, T = win[..., 0:4], win[..., 4:7], win[..., 7:10], win[..., 10:11]
    q0, a0, dt = s[..., 0:4], s[..., 4:7], s[..., 7:8]
    T = T - dt
    v0 = a0 * dt
    Rt = _mT(rotation.to_matrix(q0), xp)  # R(δq_0)ᵀ, once for both vectors
    dp = _mv(Rt, dp - (0.5 * dt) * v0 - v0 * T, xp)
    dv = _mv(Rt, dv - v0, xp)
    dq = rotation.multiply(rotation.conjugate(q0), dq)
    return xp.concat([dq, dv, dp, T], axis=-1)


def _mT(M: Any, xp: Any) -> Any:
    """The transpose of ``M`` ``(..., 3, 3)``."""
    return xp.stack([M[..., :, 0], M[..., :, 1], M[..., :, 2]], axis=-2)


def _mv(M: Any, v: Any, xp: Any) -> Any:
    """``M v`` for ``M`` ``(..., 3, 3)`` and ``v`` ``(..., 3)``."""
    return xp.sum(M * v[..., None, :], axis=-1)


def apply(pos: Any, vel: Any, quat: Any, win: Any, g_vec: Any) -> tuple[Any, Any, Any]:
    """``(pos, vel, quat)`` carried through the window (module docstring): ``(..., 3)`` [m],
    ``(..., 3)`` [m/s], ``(..., 4)``; ``g_vec`` gravity ``(3,)`` [m/s²]."""  # noqa: D205, D209
    xp = namespace(pos, win)
    g = as_like(xp, g_vec, pos)
    T = win[..., 10:11]
    R = rotation.to_matrix(quat)  # once for both vectors
    pos = pos + vel * T + (0.5 * T * T) * g + _mv(R, win[..., 7:10], xp)
    vel = vel + g * T + _mv(R, win[..., 4:7], xp)
    quat = rotation.normalize(rotation.multiply(quat, win[..., 0:4]))
    return pos, vel, quat
