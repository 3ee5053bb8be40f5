r"""Error-state (multiplicative) extended Kalman filter: IMU propagation, pose/position updates.

Frames: world ENU (z up), body FLU; ``quat`` (xyzw) maps body to world, ``R = R(q)``. The
filter keeps a *nominal* state ``x̂ = (p, v, q, b_a, b_g[, b_h])`` (position [m], velocity
[m/s], attitude, accelerometer bias [m/s²], gyroscope bias [rad/s], and with a barometer its
bias [m]) and the covariance ``P`` of the *error* state (Solà, "Quaternion kinematics for the
error-state Kalman filter", 2017, §5 and §6, with the local attitude error)

.. math::

    δx = (δp, δv, δθ, δb_a, δb_g[, δb_h]) ∈ ℝ^{15 (16)}, \qquad
    q_{true} = q̂ ⊗ \exp(δθ) \quad (δθ \text{ in the body frame}).

**Propagation** with an IMU sample ``(ω_m, a_m)`` over its period ``Δt`` (the strapdown step,
:func:`strapdown`): ``ω = ω_m - b_g``, ``a = a_m - b_a``, ``a_w = R a + g``,

.. math::

    p ← p + v Δt + ½ a_w Δt², \quad v ← v + a_w Δt, \quad q ← q ⊗ \exp(ω Δt),

and ``P ← F P Fᵀ + Q`` with the first-order transition of the error dynamics
``δṗ = δv``, ``δv̇ = -R[a]_× δθ - R δb_a - R n_a``, ``δθ̇ = -[ω]_× δθ - δb_g - n_g``,
``δḃ = w``:

.. math::

    F = \begin{pmatrix} I & IΔt & -½R[a]_×Δt² & -½RΔt² & 0 \\
                         0 & I & -R[a]_×Δt & -RΔt & 0 \\
                         0 & 0 & \exp(-ωΔt) & 0 & -IΔt \\
                         0 & 0 & 0 & I & 0 \\ 0 & 0 & 0 & 0 & I \end{pmatrix},
    \quad Q = \mathrm{diag}(0,\; R N_a² Rᵀ Δt,\; N_g² Δt,\; K_a² Δt,\; K_g² Δt[,\; K_h² Δt])

(``N`` the noise densities, ``K`` the bias random walks of
:class:`~quadsim.physics.sensors.ImuParams`; a sample that is the mean over ``Δt`` has white noise
``N/√Δt``, so ``N² Δt`` is exactly the velocity and angle variance it adds).

**Updates** are linear in the error state with ``H`` rows that pick components: position
``z = p + n``, velocity, altitude ``z = p_z + b_h + n``, and attitude through the residual
``r = \log(q̂^{-1} ⊗ q_m)`` (body frame, the same local error: ``H = [0\; 0\; I\; 0\; 0]``).
Rows are fused one scalar at a time (exact for a diagonal ``R``): ``s = h P hᵀ + σ²``,
``k = P hᵀ / s``, ``δx ← δx + k (r - h δx)``, ``P ← P - k (P hᵀ)ᵀ`` (the outer product of one
vector: ``P`` stays symmetric to rounding). The accumulated ``δx`` is then injected:
``p += δp``, ``v += δv``, ``q ← q ⊗ \exp(δθ)``, biases ``+= δb`` (the covariance reset
``G = I - [½ δθ]_×``, of order ``|δθ|``, is neglected, as is usual).

Everything is array-API code over the batch ``...`` (NumPy, JAX, CasADi through
:class:`~quadsim.physics._symbolic.SymArray`): a measurement that is not fresh leaves the state as
it was through a select (``where``), so nothing branches on values in Python, and the compiled
loop evaluates the update only when some drone of a vector has one
(:mod:`quadsim.engines.native_schedule`). ``P`` is stored as its upper
triangle, row by row (``d(d+1)/2`` numbers, :func:`pack`, :func:`unpack`): every operation
computes only those entries (in the compiled loop the lower triangle is never evaluated).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from ...physics import rotation
from ...physics._array import as_like, namespace

__all__ = [
    "EskfNoise",
    "EskfState",
    "altitude_rows",
    "attitude_rows",
    "correct",
    "error_dim",
    "eskf_init",
    "eskf_predict",
    "inject",
    "nees",
    "pack",
    "position_rows",
    "propagate_cov",
    "strapdown",
    "unpack",
    "velocity_rows",
]

POS, VEL, ATT, ACCEL_BIAS, GYRO_BIAS, BARO_BIAS = 0, 3, 6, 9, 12, 15
"""First index of each block of the error state."""


class EskfNoise(NamedTuple):
    """Process noise of the filter (the IMU's), SI; per-axis values ``(3,)`` or scalars.

    Attributes:
        gyro_noise_density: ``N_g`` [rad/s/√Hz].
        accel_noise_density: ``N_a`` [m/s²/√Hz].
        gyro_bias_walk: ``K_g`` [rad/s²/√Hz].
        accel_bias_walk: ``K_a`` [m/s³/√Hz].
        baro_bias_walk: ``K_h`` [m/√s] of the barometer's bias (with a barometer).
    """

    gyro_noise_density: Any
    accel_noise_density: Any
    gyro_bias_walk: Any
    accel_bias_walk: Any
    baro_bias_walk: float = 0.0


class EskfState(NamedTuple):
    """The filter's nominal state and error covariance (batch ``...``).

    Attributes:
        pos: ``(..., 3)`` [m].
        vel: ``(..., 3)`` [m/s].
        quat: ``(..., 4)`` xyzw, unit.
        accel_bias: ``(..., 3)`` [m/s²].
        gyro_bias: ``(..., 3)`` [rad/s].
        baro_bias: ``(..., 1)`` [m], or ``None`` (no barometer: a 15-dimensional error).
        cov: The error covariance's upper triangle ``(..., d(d+1)/2)`` (:func:`unpack` gives
            ``(..., d, d)``), ``d`` = 15 or 16 (:func:`error_dim`).
    """

    pos: Any
    vel: Any
    quat: Any
    accel_bias: Any
    gyro_bias: Any
    baro_bias: Any
    cov: Any


def error_dim(state: EskfState) -> int:
    """Size of the error state: 15, or 16 with a barometer bias."""
    return 15 if state.baro_bias is None else 16


def _triu(d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(rows, cols, where)``: the upper triangle's indices, row by row, and the packed index
    of every entry ``(d, d)`` of the symmetric matrix."""  # noqa: D205, D209
    iu, ju = np.triu_indices(d)
    where = np.zeros((d, d), dtype=np.intp)
    where[iu, ju] = where[ju, iu] = np.arange(iu.size)
    return iu, ju, where


def pack(M: Any) -> Any:
    """The upper triangle of ``M`` ``(..., d, d)``, row by row ``(..., d(d+1)/2)``."""
    iu, ju, _ = _triu(M.shape[-1])
    return M[..., iu, ju]


def unpack(cov: Any) -> Any:
    """The symmetric matrix ``(..., d, d)`` of a packed upper triangle ``(..., d(d+1)/2)``."""
    d = round((math.sqrt(8 * cov.shape[-1] + 1) - 1) / 2)
    return cov[..., _triu(d)[2]]


def eskf_init(pos: Any, vel: Any, quat: Any, std: Any, *, baro: bool = False,
              xp: Any = None, dtype: Any = None) -> EskfState:  # fmt: skip
    """A filter at ``(pos, vel, quat)`` with zero biases and a diagonal covariance.

    Args:
        pos: ``(..., 3)`` [m].
        vel: ``(..., 3)`` [m/s].
        quat: ``(..., 4)`` xyzw.
        std: Initial standard deviations, ``(d,)`` (``d`` = 15, or 16 with ``baro``): position,
            velocity, attitude [rad], accelerometer bias, gyroscope bias, barometer bias.
        baro: Whether the filter estimates a barometer bias.
        xp: Namespace (default that of ``pos``).
        dtype: Floating dtype (default that of ``pos``).

    Raises:
        ValueError: ``std`` of the wrong size, negative or not finite.
    """
    d = 16 if baro else 15
    s = np.asarray(std, dtype=np.float64)
    if s.shape != (d,) or not np.all(np.isfinite(s)) or np.any(s < 0):
        raise ValueError(f"std must be {d} finite standard deviations >= 0; got {std!r}")
    xp = namespace(pos) if xp is None else xp
    pos = xp.asarray(pos, dtype=dtype)
    batch = tuple(pos.shape[:-1])
    zero = xp.zeros((*batch, 3), dtype=pos.dtype)
    cov = xp.broadcast_to(as_like(xp, pack(np.diag(s * s)), pos), (*batch, d * (d + 1) // 2))
    q = rotation.normalize(xp.asarray(quat, dtype=pos.dtype))
    bh = xp.zeros((*batch, 1), dtype=pos.dtype) if baro else None
    return EskfState(pos, xp.asarray(vel, dtype=pos.dtype) + zero, q, zero, zero, bh, cov)


def _skew(xp: Any, v: Any) -> Any:
    """``[v]_×`` ``(..., 3, 3)`` of ``v`` ``(..., 3)``."""
    x, y, z = v[..., 0], v[..., 1], v[..., 2]
    o = 0.0 * x
    return xp.stack([xp.stack([o, -z, y], axis=-1), xp.stack([z, o, -x], axis=-1),
                     xp.stack([-y, x, o], axis=-1)], axis=-2)  # fmt: skip


def _mT(xp: Any, a: Any) -> Any:
    """Transpose of the last two axes."""
    nd = len(a.shape)
    if hasattr(xp, "matrix_transpose"):
        return xp.matrix_transpose(a)
    return xp.permute_dims(a, (*range(nd - 2), nd - 1, nd - 2))


def strapdown(pos: Any, vel: Any, quat: Any, gyro: Any, accel: Any, g_vec: Any,
              dt: float) -> tuple[Any, Any, Any, Any]:  # fmt: skip
    """One strapdown step with bias-corrected IMU readings (module docstring).

    Args:
        pos: ``(..., 3)`` [m].
        vel: ``(..., 3)`` [m/s].
        quat: ``(..., 4)`` xyzw.
        gyro: ``ω = ω_m - b_g`` ``(..., 3)`` [rad/s].
        accel: ``a = a_m - b_a`` ``(..., 3)`` specific force [m/s²].
        g_vec: Gravity ``(3,)`` [m/s²].
        dt: Period [s].

    Returns:
        ``(pos, vel, quat, R)`` after the step; ``R`` ``(..., 3, 3)`` is the rotation at its
        start (the propagation's Jacobians use it).
    """
    xp = namespace(pos, quat, accel)
    R = rotation.to_matrix(quat)
    a_w = xp.sum(R * accel[..., None, :], axis=-1) + as_like(xp, g_vec, pos)
    pos = pos + vel * dt + (0.5 * dt * dt) * a_w
    vel = vel + a_w * dt
    quat = rotation.normalize(rotation.multiply(quat, rotation.exp(gyro * dt)))
    return pos, vel, quat, R


def eskf_predict(state: EskfState, gyro: Any, accel: Any, g_vec: Any, dt: float,
                 noise: EskfNoise) -> EskfState:  # fmt: skip
    """Propagate with one IMU sample of period ``dt`` [s] (module docstring).

    Args:
        state: :class:`EskfState`.
        gyro: Gyroscope reading ``ω_m`` ``(..., 3)`` [rad/s].
        accel: Accelerometer reading ``a_m`` (specific force) ``(..., 3)`` [m/s²].
        g_vec: Gravity ``(3,)`` [m/s²].
        dt: Sample period [s] (a Python float).
        noise: :class:`EskfNoise`.
    """
    s = state
    w = gyro - s.gyro_bias
    a = accel - s.accel_bias
    pos, vel, quat, R = strapdown(s.pos, s.vel, s.quat, w, a, g_vec, dt)
    cov = propagate_cov(s, R, w * dt, a * dt, dt, noise)
    return EskfState(pos, vel, quat, s.accel_bias, s.gyro_bias, s.baro_bias, cov)


def propagate_cov(state: EskfState, R: Any, w_dt: Any, a_dt: Any, dt: Any,
                  noise: EskfNoise) -> Any:  # fmt: skip
    """The covariance ``P ← F P Fᵀ + Q`` over an interval (module docstring), packed.

    For one sample ``w_dt = ω Δt`` and ``a_dt = a Δt`` (bias-corrected); for an interval of
    several, their sums, ``dt`` the interval [s] (a float or ``(..., 1)``) and ``R`` ``(..., 3,
    3)`` the attitude in it: the mean rate and specific force over the interval stand for the
    samples (``F`` to first order in the interval, what a filter that predicts its covariance
    at a lower rate than its IMU does; an interval of length 0 leaves ``P`` as it is).
    """
    s = state
    xp = namespace(s.pos, s.cov, w_dt)
    d = error_dim(s)
    batch = tuple(s.pos.shape[:-1])
    c = lambda m: xp.broadcast_to(as_like(xp, m, s.pos), (*batch, *np.shape(m)))  # noqa: E731
    T = dt[..., None] if hasattr(dt, "shape") and dt.shape else dt  # (..., 1, 1) or a float
    eye, zero = c(np.eye(3)), c(np.zeros((3, 3)))
    Ra_dt = R @ _skew(xp, a_dt)  # R [a]× Δt
    Rt_w = rotation.to_matrix(rotation.exp(-w_dt))  # exp(-[ω]× Δt)
    rows = [
        [eye, eye * T, (-0.5 * T) * Ra_dt, (-0.5 * T * T) * R, zero],
        [zero, eye, -Ra_dt, -T * R, zero],
        [zero, zero, Rt_w, zero, -T * eye],
        [zero, zero, zero, eye, zero],
        [zero, zero, zero, zero, eye],
    ]
    F = xp.concat([xp.concat(r, axis=-1) for r in rows], axis=-2)
    full = unpack(s.cov)
    P = full[..., :15, :15]
    Pn = (F @ P) @ _mT(xp, F)  # only its upper triangle is kept (and so computed, traced)
    na2 = np.broadcast_to(np.asarray(noise.accel_noise_density, np.float64) ** 2, (3,))
    ng2 = np.broadcast_to(np.asarray(noise.gyro_noise_density, np.float64) ** 2, (3,))
    ka2 = np.broadcast_to(np.asarray(noise.accel_bias_walk, np.float64) ** 2, (3,))
    kg2 = np.broadcast_to(np.asarray(noise.gyro_bias_walk, np.float64) ** 2, (3,))
    if np.all(na2 == na2[0]):  # isotropic: R N² Rᵀ = N² I
        Qv = c(np.diag(na2)) * T
    else:
        Qv = (R * as_like(xp, na2, s.pos)[..., None, :]) @ _mT(xp, R) * T
    q_rest = c(np.diag(np.concatenate([ng2, ka2, kg2]))) * T
    z3, z9 = c(np.zeros((3, 3))), c(np.zeros((3, 9)))
    Q = xp.concat([
        xp.concat([z3, z3, z9], axis=-1),
        xp.concat([z3, Qv, z9], axis=-1),
        xp.concat([_mT(xp, z9), _mT(xp, z9), q_rest], axis=-1),
    ], axis=-2)  # fmt: skip
    Pn = Pn + Q
    if d == 16:  # the barometer bias: a random walk, coupled to the rest through P only
        Pb = full[..., :15, 15:16]
        top = xp.concat([Pn, F @ Pb], axis=-1)
        corner = full[..., 15:16, 15:16] + float(noise.baro_bias_walk) ** 2 * T
        bottom = xp.concat([_mT(xp, F @ Pb), corner], axis=-1)
        Pn = xp.concat([top, bottom], axis=-2)
    return pack(Pn)


def correct(state: EskfState, rows: list[tuple[dict[int, float], Any, Any]],
            fresh: Any) -> EskfState:  # fmt: skip
    """Fuse scalar measurements one by one and inject the error (module docstring).

    Args:
        state: :class:`EskfState`.
        rows: ``(h, r, var)`` per scalar: ``h`` the nonzero entries of the ``H`` row
            ``{index: coefficient}``, ``r`` the residual at the nominal state ``(...)``,
            ``var`` its noise variance (a number or ``(...)``).
        fresh: ``(...)`` bool or 0/1: whether the measurement is new (else nothing changes).
    """
    s = state
    xp = namespace(s.pos, s.cov)
    d = error_dim(s)
    iu, ju, where = _triu(d)
    cov = s.cov
    dx = 0.0 * s.pos[..., 0:1] + np.zeros(d)
    for h, r, var in rows:
        Ph = sum(coef * cov[..., where[:, i]] for i, coef in h.items())  # P hᵀ (..., d)
        s_ = sum(coef * Ph[..., i] for i, coef in h.items()) + var
        y = r - sum(coef * dx[..., i] for i, coef in h.items())
        k = Ph / s_[..., None]  # the gain
        dx = dx + k * y[..., None]
        cov = cov - k[..., iu] * Ph[..., ju]  # P - k (P hᵀ)ᵀ, upper triangle only
    new = inject(s._replace(cov=cov), dx)
    if fresh is True:
        return new
    # a select, not a zero gain: the compiled loop then skips the update when no lane has one
    return EskfState(*(None if a is None else xp.where(_col(fresh, a), a, b)
                       for a, b in zip(new, s, strict=True)))  # fmt: skip


def _col(fresh: Any, like: Any) -> Any:
    """``fresh`` ``(...)`` as a column ``(..., 1)`` that broadcasts against ``like``."""
    return fresh[..., None] if hasattr(fresh, "shape") and fresh.shape else fresh


def inject(state: EskfState, dx: Any) -> EskfState:
    """The nominal state corrected by the error ``dx`` ``(..., d)`` (module docstring)."""
    s = state
    q = rotation.normalize(rotation.multiply(s.quat, rotation.exp(dx[..., ATT:ATT + 3])))
    bh = None if s.baro_bias is None else s.baro_bias + dx[..., BARO_BIAS:BARO_BIAS + 1]
    return EskfState(s.pos + dx[..., POS:POS + 3], s.vel + dx[..., VEL:VEL + 3], q,
                     s.accel_bias + dx[..., ACCEL_BIAS:ACCEL_BIAS + 3],
                     s.gyro_bias + dx[..., GYRO_BIAS:GYRO_BIAS + 3], bh, s.cov)  # fmt: skip


def position_rows(state: EskfState, pos: Any, std: Any) -> list:
    """Rows of a position measurement ``pos`` ``(..., 3)`` [m] with noise ``std`` ``(3,)``."""
    sd = np.broadcast_to(np.asarray(std, np.float64), (3,))
    return [({POS + i: 1.0}, pos[..., i] - state.pos[..., i], float(sd[i]) ** 2)
            for i in range(3)]  # fmt: skip


def velocity_rows(state: EskfState, vel: Any, std: Any) -> list:
    """Rows of a velocity measurement ``vel`` ``(..., 3)`` [m/s] with noise ``std`` ``(3,)``."""
    sd = np.broadcast_to(np.asarray(std, np.float64), (3,))
    return [({VEL + i: 1.0}, vel[..., i] - state.vel[..., i], float(sd[i]) ** 2)
            for i in range(3)]  # fmt: skip


def attitude_rows(state: EskfState, quat: Any, std: Any) -> list:
    """Rows of an attitude measurement ``quat`` ``(..., 4)``, its noise a body-frame rotation
    vector of std ``std`` ``(3,)`` [rad] (:func:`quadsim.physics.sensors.mocap_measure`)."""  # noqa: D205, D209
    sd = np.broadcast_to(np.asarray(std, np.float64), (3,))
    r = rotation.log(rotation.multiply(rotation.conjugate(state.quat), quat))
    return [({ATT + i: 1.0}, r[..., i], float(sd[i]) ** 2) for i in range(3)]


def altitude_rows(state: EskfState, alt: Any, std: float) -> list:
    """The row of a barometric altitude ``alt`` ``(...)`` [m] = ``p_z + b_h`` + noise ``std``."""
    if state.baro_bias is None:
        raise ValueError("an altitude measurement needs a filter with a barometer bias")
    pred = state.pos[..., 2] + state.baro_bias[..., 0]
    return [({POS + 2: 1.0, BARO_BIAS: 1.0}, alt - pred, float(std) ** 2)]


def nees(state: EskfState, pos: Any, vel: Any, quat: Any) -> Any:
    r"""Normalised estimation error squared of position, velocity and attitude ``(...)``.

    ``e = (p - p̂, v - v̂, \log(q̂^{-1} ⊗ q))`` (9 degrees of freedom) and ``eᵀ P_9^{-1} e``
    with ``P_9`` the leading 9x9 block, solved by an unrolled Cholesky factorisation (so it
    traces too).
    """
    xp = namespace(state.pos, state.cov)
    att = rotation.log(rotation.multiply(rotation.conjugate(state.quat), quat))
    e = xp.concat([pos - state.pos, vel - state.vel, att], axis=-1)
    P = unpack(state.cov)
    n = 9
    L = [[None] * n for _ in range(n)]
    for j in range(n):
        acc = P[..., j, j] - sum((L[j][k] * L[j][k] for k in range(j)), 0.0 * P[..., 0, 0])
        L[j][j] = xp.sqrt(xp.maximum(acc, 1e-30))
        for i in range(j + 1, n):
            acc = P[..., i, j] - sum((L[i][k] * L[j][k] for k in range(j)), 0.0 * P[..., 0, 0])
            L[i][j] = acc / L[j][j]
    y = []  # L y = e
    for i in range(n):
        y.append((e[..., i] - sum((L[i][k] * y[k] for k in range(i)), 0.0 * e[..., 0]))
                 / L[i][i])  # fmt: skip
    return sum(v * v for v in y)

