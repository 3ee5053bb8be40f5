r"""Complementary filter: Mahony attitude with gyro-bias estimation, strapdown position observer.

The cheap estimator of the closed loop: an IMU (gyroscope ``ω_m`` [rad/s], accelerometer
``f_m`` [m/s²], the specific force in the body frame) at period ``dt``, and a position sensor
(motion capture or GNSS) at period ``T`` that may also deliver the attitude. Frames: world ENU,
body FLU, ``quat`` (xyzw) maps body to world, ``R = R_wb(q̂)``, gravity ``g`` = ``g_vec``
(``(0, 0, -9.81)``). Reference: R. Mahony, T. Hamel, J.-M. Pflimlin, "Nonlinear complementary
filters on the special orthogonal group", IEEE TAC 53(5), 2008 (the *explicit* complementary
filter with bias estimation).

**Attitude** (Mahony's explicit filter)::

    q̂̇ = ½ q̂ ⊗ (ω_m - b̂ + k_P σ, 0),      b̂̇ = -k_I σ,      |b̂_i| ≤ b_max

The correction ``σ`` (body frame, rad; the rate correction is ``k_P σ``) sums reference
directions, each the measured body direction ``v`` crossed with the one the estimate predicts
``v̂ = Rᵀ v_0``: ``σ = Σ k_i v_i × v̂_i``. For a small body-frame error ``R = R_true exp([δ]×)``
it is ``σ ≈ -Σ k_i (δ - v_i (v_i·δ))``, so ``δ̇ = b - b̂ - k_P (...)`` and the error obeys
``s² + k_P s + k_I`` per observed axis: natural frequency ``√k_I``, damping ``k_P / (2√k_I)``.

(a) *Attitude measurement* ``q_m`` (motion capture), all three axes at once: the body-frame
rotation vector from the estimate to the measurement,

    ``σ_q = log(q̂* ⊗ q_m)``  (``= -δ`` exactly, for any angle below π),

which is the vector form for three orthogonal directions (``2 sin``) with the angle itself in
place of its sine, so it does not fade near 180°.

(b) *Accelerometer* (weight ``k_a``): the measured direction ``f_m/|f_m|`` against the estimate
of the world specific force ``f_w = a - g`` seen in the body frame. A flying quadrotor's
accelerometer reads the thrust specific force ``Rᵀ (a - g)``, which (without drag) points
along body z whatever the tilt, so the classic assumption ``a = 0`` pulls the estimate level:
in a turn the tilt error is the bank angle itself. A gain that vanishes away from 1 g cannot see
this either: a 1 m/s² turn tilts the thrust by 5.8° but changes ``|f|`` only by 0.5 %
(``|f| = g √(1 + (a_h/g)²)``). The filter therefore *compensates* with the world acceleration
estimated by the position observer below: ``â = R f_m + g + c``, the strapdown acceleration plus
the acceleration ``c`` the position fixes had to add (``c = l_2 e / T`` at each fix, held in
between; see below). Its reference is ``v_0 = w â - g``, i.e. in the body frame

    ``v̂ ∝ w f_m + Rᵀ (w c + (w - 1) g)``,     ``σ_a = (f_m/|f_m|) × (v̂/|v̂|)``,

with ``w = accel_comp`` (1: compensated, 0: the classic filter) while a position fix is at most
``pos_timeout`` old, else ``w = 0`` (without fixes ``c`` is stale, and ``a = 0`` is the best
guess). With ``w = 1``, ``σ_a ∝ f × Rᵀ c``: a tilt error ``δ`` makes the strapdown acceleration
wrong by ``g × δ``; the position fixes learn that as ``c`` and the accelerometer term rotates the
estimate until ``c`` vanishes (the velocity-aided attitude of GNSS/INS observers). In one
horizontal axis, with continuous gains ``λ_1 = 2ζω``, ``λ_2 = ω²``, the error obeys
``s⁴ + λ_1 s³ + λ_2 s² + k_P k_a λ_2 s + k_I k_a λ_2`` (without the bias,
``s³ + λ_1 s² + λ_2 s + k_P k_a λ_2``, stable for ``k_P k_a < 2ζω`` by Routh): the position
observer must be faster than the tilt loop.

Discretisation (``ι`` is the correction integrated over the step; fixes count for their
period ``T``, the Euler form of a correction held over ``T``)::

    q⁻ = q̂ ⊗ exp((ω_m - b̂) dt)                           (prediction, exact for constant rate)
    ι  = k_a σ_a(q⁻) dt + [fresh q_m] σ_q(q⁻) T
    q̂ ← normalise(q⁻ ⊗ exp(k_P ι)),    b̂ ← clip(b̂ - k_I ι, ±b_max)

**Position and velocity** (strapdown prediction, second-order complementary correction)::

    a = R(q̂) f_m + g,    v ← v + a dt,    p ← p + v dt + ½ a dt²
    at a fresh position fix p_m:  e = p_m - p,  p ← p + l_1 e,  v ← v + l_2 e,  c ← l_2 e / T

The IMU sample at ``t_k`` is taken as the mean over ``(t_{k-1}, t_k]`` (as the closed loop's IMU
reads, :mod:`quadsim.loop.brain`), so the velocity update is exact for exact data. Between fixes the
estimate runs open loop for ``T``; the post-fix error ``(p̃, ṽ)`` then evolves as

    ``[[1 - l_1, (1 - l_1) T], [-l_2, 1 - l_2 T]]``,   ``z² - (2 - l_1 - l_2 T) z + (1 - l_1)``,

and ``l_1, l_2`` place its poles at ``z = exp(s T)`` of the continuous poles
``s² + 2ζω s + ω²`` (:func:`position_observer_gains`)::

    l_1 = 1 - e^{-2ζωT},    l_2 = (1 + e^{-2ζωT} - 2 e^{-ζωT} C) / T,
    C = cos(ω√(1-ζ²) T)  (ζ < 1),   cosh(ω√(ζ²-1) T)  (ζ > 1),   1  (ζ = 1)

(``l_1 ≈ 2ζωT``, ``l_2 ≈ ω² T`` for ``ωT ≪ 1``). A constant acceleration error ``Δa`` leaves a
position error ``Δa/ω²``; position noise ``σ_p`` passes as roughly ``σ_p √(ζωT)``.

**Default gains** (:class:`ComplementaryGains`) suit a quadrotor with a 500-1000 Hz MEMS IMU and
100 Hz motion capture (``T = 0.01 s``, attitude noise ``σ_θ = 0.5°``). ``k_P = 1 /s``,
``k_I = 0.3 /s²``: the loop ``s² + s + 0.3`` (``√k_I = 0.55 rad/s``, damping 0.91) leaves ~2 %
of a gyro-bias step after 10 s, while the motion-capture noise reaches the bias estimate as
``σ_θ k_I √(T/(2 k_P)) ≈ 0.011 °/s`` and the attitude as ``σ_θ √(k_P T/2) ≈ 0.035°`` per axis
(``k_P = 2, k_I = 1`` settles faster but doubles the bias noise); ``k_P T = 0.01`` per fix, far
from the overshoot at 1. ``k_a = 1`` weighs the gravity direction like the measured attitude.
``ω = 4 rad/s``, ``ζ = 1`` for the position observer: ``2ζω = 8 > k_P k_a = 1`` keeps the
compensated tilt loop stable and well damped, a 0.01 m/s² acceleration error costs 0.6 mm, and
the 1 mm position noise passes as ~0.2 mm. For GNSS (1-10 Hz, metres of noise) lower ``ω`` and
``k_P k_a`` together. ``b_max = 0.1 rad/s`` bounds the bias integrator (anti-windup after a
large initial error; MEMS zero-rate offsets are a few °/s at most).

Every function is array-API code over leading batch axes (NumPy, JAX under ``jit``, CasADi
through :class:`~quadsim.physics._symbolic.SymArray`): the "fresh" flags select with ``where``, and
the gains are Python numbers fixed when the code is traced.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
from array_api_compat import is_array_api_obj

from ...physics import rotation
from ...physics._array import as_like, check_shape, namespace, stack, unstack
from ...physics.rotation import kcross
from ...physics.sensors._validate import finite_number

__all__ = [
    "ComplementaryGains",
    "ComplementaryState",
    "check_complementary_gains",
    "complementary_init",
    "complementary_output",
    "complementary_step",
    "position_observer_gains",
]

AGE_NEVER = 1.0e9
"""``pos_age`` [s] of a filter that has not had a position fix (ages saturate here)."""

_TINY = 1e-6  # [m/s²] norms below this give a zero accelerometer correction (free fall)


class ComplementaryGains(NamedTuple):
    """Gains of the complementary filter (Python numbers; equations in the module docstring).

    Attributes:
        k_p: Attitude proportional gain ``k_P`` [1/s], >= 0.
        k_i: Gyro-bias integral gain ``k_I`` [1/s²], >= 0.
        accel_weight: Weight ``k_a`` of the accelerometer direction relative to a measured
            attitude [1], >= 0 (0: the accelerometer does not correct the attitude).
        accel_comp: Fraction ``w`` of the estimated world acceleration removed from the
            accelerometer's reference [1], in [0, 1] (1: compensated; 0: the classic filter that
            assumes unaccelerated flight).
        pos_bandwidth: Position observer bandwidth ``ω`` [rad/s], >= 0.
        pos_damping: Position observer damping ``ζ`` [1], >= 0.
        meas_period: Sample period ``T`` of the position/attitude sensor [s], > 0.
        pos_timeout: Position fixes older than this no longer compensate the accelerometer [s],
            >= 0.
        gyro_bias_max: Bound ``b_max`` of each gyro-bias component [rad/s], >= 0.
    """

    k_p: float = 1.0
    k_i: float = 0.3
    accel_weight: float = 1.0
    accel_comp: float = 1.0
    pos_bandwidth: float = 4.0
    pos_damping: float = 1.0
    meas_period: float = 0.01
    pos_timeout: float = 0.5
    gyro_bias_max: float = 0.1


class ComplementaryState(NamedTuple):
    """Filter state of a batch ``...`` of drones.

    Attributes:
        pos: Position estimate ``(..., 3)`` [m] (world).
        vel: Velocity estimate ``(..., 3)`` [m/s] (world).
        quat: Attitude estimate ``(..., 4)`` (xyzw, body to world, unit norm).
        gyro_bias: Gyro-bias estimate ``(..., 3)`` [rad/s] (body).
        acc_world: Strapdown world acceleration ``R f_m + g`` of the last sample ``(..., 3)``
            [m/s²] (0 at the start).
        acc_corr: Acceleration ``c`` the last position fix added, ``l_2 e / T``, ``(..., 3)``
            [m/s²]; ``acc_world + acc_corr`` is the world acceleration estimate.
        pos_age: Time since the last position fix ``(...)`` [s] (:data:`AGE_NEVER` before one).
    """

    pos: Any
    vel: Any
    quat: Any
    gyro_bias: Any
    acc_world: Any
    acc_corr: Any
    pos_age: Any


_CHECKED: list[ComplementaryGains] = []  # the last records returned by the check


def check_complementary_gains(gains: ComplementaryGains) -> ComplementaryGains:
    """Validate ``gains``; return them with every field a Python float.

    Raises:
        ValueError: Naming the field: a value that is not a finite number, a negative one,
            ``meas_period`` not > 0, ``accel_comp`` > 1, or ``k_p * meas_period`` > 1 (a fix
            would move the attitude past the measurement).
    """
    for done in _CHECKED:
        if done is gains:
            return gains
    if not isinstance(gains, ComplementaryGains):
        raise ValueError(f"gains must be a ComplementaryGains; got {type(gains).__name__}")
    vals = {}
    for name in ComplementaryGains._fields:
        vals[name] = finite_number(getattr(gains, name), f"gains.{name}", nonneg=True)
    if vals["meas_period"] <= 0.0:
        raise ValueError(f"gains.meas_period must be > 0 s; got {gains.meas_period!r}")
    if vals["accel_comp"] > 1.0:
        raise ValueError(f"gains.accel_comp must be in [0, 1]; got {gains.accel_comp!r}")
    if vals["k_p"] * vals["meas_period"] > 1.0:
        raise ValueError(
            f"gains.k_p * gains.meas_period must be <= 1 (a fix would overshoot the measured "
            f"attitude); got k_p = {gains.k_p!r} 1/s, meas_period = {gains.meas_period!r} s"
        )
    out = ComplementaryGains(**vals)
    _CHECKED.insert(0, out)
    del _CHECKED[8:]
    return out


def position_observer_gains(bandwidth: float, damping: float, period: float) -> tuple[float, float]:
    """Fix gains ``(l_1 [1], l_2 [1/s])`` placing the post-fix error poles at ``exp(s T)``.

    ``s`` are the roots of ``s² + 2ζω s + ω²`` (module docstring).

    Args:
        bandwidth: ``ω`` [rad/s], >= 0.
        damping: ``ζ`` [1], >= 0.
        period: Fix period ``T`` [s], > 0.
    """
    w, z, T = float(bandwidth), float(damping), float(period)
    decay = math.exp(-z * w * T)
    d = 1.0 - z * z
    if d > 0.0:
        c = math.cos(w * math.sqrt(d) * T)
    elif d < 0.0:
        c = math.cosh(w * math.sqrt(-d) * T)
    else:
        c = 1.0
    l1 = 1.0 - decay * decay
    l2 = (1.0 + decay * decay - 2.0 * decay * c) / T
    return l1, l2


def complementary_init(
    pos: Any, vel: Any, quat: Any, *, xp: Any = None, dtype: Any = None
) -> ComplementaryState:
    """Initial state: the given pose and velocity, zero bias and accelerations, no fix yet.

    Args:
        pos: Initial position ``(..., 3)`` [m].
        vel: Initial velocity ``(..., 3)`` [m/s].
        quat: Initial attitude ``(..., 4)`` (xyzw, any nonzero norm; normalised).
        xp: Array namespace (default: that of ``pos`` if it is an array, else NumPy).
        dtype: Floating dtype (default: that of ``pos`` if it is a floating array, else float64
            for NumPy, the namespace default otherwise).

    Returns:
        :class:`ComplementaryState` with the broadcast batch shape of the inputs.
    """
    if xp is None:
        xp = namespace(pos) if is_array_api_obj(pos) else np
    if dtype is None:
        pd = getattr(pos, "dtype", None)
        if pd is not None and xp.isdtype(pd, "real floating"):
            dtype = pd
        elif xp is np:
            dtype = np.float64
    p = xp.asarray(pos, dtype=dtype)
    v = xp.asarray(vel, dtype=p.dtype)
    q = xp.asarray(quat, dtype=p.dtype)
    check_shape(p, (3,), "pos")
    check_shape(v, (3,), "vel")
    check_shape(q, (4,), "quat")
    batch = tuple(np.broadcast_shapes(p.shape[:-1], v.shape[:-1], q.shape[:-1]))
    p = xp.broadcast_to(p, (*batch, 3))
    v = xp.broadcast_to(v, (*batch, 3))
    q = rotation.normalize(xp.broadcast_to(q, (*batch, 4)))
    z3 = xp.zeros((*batch, 3), dtype=p.dtype)
    age = xp.full(batch, AGE_NEVER, dtype=p.dtype)
    return ComplementaryState(p, v, q, z3, z3, z3, age)


def _cross(xp: Any, a: Any, b: Any) -> Any:
    return stack(xp, kcross(unstack(a), unstack(b)), a)


def _unit(xp: Any, v: Any) -> Any:
    """``v/|v|`` over the last axis, 0 where ``|v| < _TINY``."""
    n = xp.sqrt(xp.sum(v * v, axis=-1, keepdims=True))
    return v / xp.maximum(n, _TINY)


def _gate(xp: Any, fresh: Any, new: Any, old: Any) -> Any:
    """``new`` where ``fresh`` ``(...)`` (None: always), else ``old``; arrays ``(..., n)``."""
    if fresh is None:
        return new
    return xp.where(fresh[..., None], new, old)


def complementary_step(
    state: ComplementaryState,
    gyro: Any,
    accel: Any,
    g_vec: Any,
    dt: float,
    gains: ComplementaryGains,
    *,
    pos_meas: Any = None,
    pos_fresh: Any = None,
    quat_meas: Any = None,
    quat_fresh: Any = None,
) -> ComplementaryState:
    """Advance the filter by one IMU sample, then apply the fresh measurements (pure).

    The state is the estimate at ``t_{k-1}``; the IMU sample and the measurements are those of
    ``t_k``; the result is the estimate at ``t_k`` (equations in the module docstring).

    Args:
        state: :class:`ComplementaryState` at ``t_{k-1}``.
        gyro: Gyroscope reading ``ω_m`` ``(..., 3)`` [rad/s].
        accel: Accelerometer reading (specific force) ``f_m`` ``(..., 3)`` [m/s²].
        g_vec: Gravity ``(3,)`` or ``(..., 3)`` [m/s²], e.g. ``(0, 0, -9.81)``.
        dt: IMU sample period [s], a Python float > 0.
        gains: :class:`ComplementaryGains`.
        pos_meas: Measured position ``(..., 3)`` [m], or None (no position sensor).
        pos_fresh: Bool ``(...)``: where ``pos_meas`` is a new sample (None: always).
        quat_meas: Measured attitude ``(..., 4)`` (xyzw, unit norm), or None.
        quat_fresh: Bool ``(...)``: where ``quat_meas`` is a new sample (None: always).

    Returns:
        :class:`ComplementaryState` at ``t_k``.

    Raises:
        ValueError: Bad shapes, ``dt`` not > 0, or invalid ``gains`` (naming the field).
    """
    g = check_complementary_gains(gains)
    dt = float(dt)
    if not (math.isfinite(dt) and dt > 0.0):
        raise ValueError(f"dt must be a finite number > 0 s; got {dt!r}")
    check_shape(gyro, (3,), "gyro")
    check_shape(accel, (3,), "accel")
    xp = namespace(state.pos, state.quat, gyro, accel)
    like = state.pos
    gyro, accel = as_like(xp, gyro, like), as_like(xp, accel, like)
    gv = as_like(xp, g_vec, like)
    check_shape(gv, (3,), "g_vec")

    # attitude: prediction, then the corrections at the predicted attitude (all at t_k)
    q_pred = rotation.multiply(state.quat, rotation.exp((gyro - state.gyro_bias) * dt))
    age = xp.minimum(state.pos_age + dt, AGE_NEVER)
    zero = 0.0 * like[..., 0]
    w = xp.where(age <= g.pos_timeout, zero + g.accel_comp, zero)[..., None]
    v_est = w * accel + rotation.rotate_inverse(q_pred, w * state.acc_corr + (w - 1.0) * gv)
    sigma_a = _cross(xp, _unit(xp, accel), _unit(xp, v_est))
    iota = (g.accel_weight * dt) * sigma_a
    if quat_meas is not None:
        check_shape(quat_meas, (4,), "quat_meas")
        qm = as_like(xp, quat_meas, like)
        sigma_q = rotation.log(rotation.multiply(rotation.conjugate(q_pred), qm))
        iota = iota + g.meas_period * _gate(xp, quat_fresh, sigma_q, 0.0 * sigma_q)
    quat = rotation.normalize(rotation.multiply(q_pred, rotation.exp(g.k_p * iota)))
    bias = xp.clip(state.gyro_bias - g.k_i * iota, -g.gyro_bias_max, g.gyro_bias_max)

    # position and velocity: strapdown prediction, then the fix
    acc = rotation.rotate(quat, accel) + gv
    pos = state.pos + state.vel * dt + (0.5 * dt * dt) * acc
    vel = state.vel + acc * dt
    corr = state.acc_corr
    if pos_meas is not None:
        check_shape(pos_meas, (3,), "pos_meas")
        l1, l2 = position_observer_gains(g.pos_bandwidth, g.pos_damping, g.meas_period)
        e = _gate(xp, pos_fresh, as_like(xp, pos_meas, like) - pos, 0.0 * pos)
        pos = pos + l1 * e
        vel = vel + l2 * e
        corr = _gate(xp, pos_fresh, (l2 / g.meas_period) * e, corr)
        age = zero if pos_fresh is None else xp.where(pos_fresh, zero, age)
    batch = tuple(np.broadcast_shapes(pos.shape, vel.shape, corr.shape, acc.shape))[:-1]
    return ComplementaryState(
        xp.broadcast_to(pos, (*batch, 3)),
        xp.broadcast_to(vel, (*batch, 3)),
        xp.broadcast_to(quat, (*batch, 4)),
        xp.broadcast_to(bias, (*batch, 3)),
        xp.broadcast_to(acc, (*batch, 3)),
        xp.broadcast_to(corr, (*batch, 3)),
        xp.broadcast_to(age, batch),
    )


def complementary_output(state: ComplementaryState, gyro: Any) -> tuple[Any, Any, Any, Any]:
    """The estimate a controller reads.

    Args:
        state: :class:`ComplementaryState`.
        gyro: The latest gyroscope reading ``(..., 3)`` [rad/s].

    Returns:
        ``(pos [m] (..., 3), vel [m/s] (..., 3), quat (..., 4), ang_vel [rad/s] (..., 3))`` with
        ``ang_vel = gyro - gyro_bias``.
    """
    check_shape(gyro, (3,), "gyro")
    xp = namespace(state.pos, gyro)
    return state.pos, state.vel, state.quat, as_like(xp, gyro, state.pos) - state.gyro_bias
