r"""Sensors: an IMU (gyroscope + accelerometer) and motion capture, with explicit randomness.

Frames: world ENU (z up), body FLU; ``quat`` (xyzw) maps body to world, ``R_wb = to_matrix(q)``.

**IMU model** (per axis; the IEEE-952 / Kalibr noise model)::

    ω_m(t) = s_g ⊙ ω(t) + b_g0 + b_g(t) + n_g(t),     ḃ_g(t) = w_g(t)
    a_m(t) = s_a ⊙ f(t) + b_a0 + b_a(t) + n_a(t),     ḃ_a(t) = w_a(t)
    f      = R_wbᵀ (a - g)

``ω`` is the body angular velocity, ``a`` the world acceleration of the body and ``g`` the
gravity vector (ENU ``(0, 0, -9.81)``), so ``f`` is the specific force: at rest the
accelerometer reads ``R_wbᵀ (0, 0, +9.81)``, i.e. ``+9.81 m/s²`` up when level; in free fall 0.
``s`` are scale factors (1 = ideal), ``b_0`` constant biases, ``b(t)`` the in-run bias.
``n`` and ``w`` are white noises with ``E[n(t) n(s)] = N² δ(t - s)`` and ``E[w(t) w(s)] = K² δ``:
``N`` is the noise density [unit/√Hz] (angle / velocity random walk), ``K`` the bias random walk
density [unit/s/√Hz] (rate random walk). The Allan variance of this model is
``σ²(τ) = N²/τ + K² τ/3`` (slope -1/2, then +1/2 on a log-log plot of ``σ``).

**Exact discretisation** at the sample period ``dt``. A sample is the average of the signal over
one period, so white noise becomes ``σ_d = N/√dt`` per sample (its average over ``τ = m dt``
again has variance ``N²/τ``, exactly). The bias is a Wiener process: its increments over
``dt`` are independent ``N(0, K² dt)``, so ``b_{k+1} = b_k + K √dt w_k`` with ``w_k ~ N(0, 1)``
is exact at the sample times for every ``dt``. Sample ``k`` uses ``b_k``; the drift of the bias
within one period (variance ``K² dt/3``) is neglected, relative size ``(K dt/N)²/3``.

**Bias instability.** Data sheets quote the in-run bias stability ``B`` (the minimum of the Allan
deviation, a flicker-noise floor) rather than ``K``. :func:`load_imu` replaces the flicker floor
by the random walk whose Allan curve has the same minimum together with the white noise ``N``:
``min_τ σ²(τ) = 2 N K/√3`` at ``τ* = √3 N/K``, hence ``K = √3 B²/(2 N)``. This is a modelling
assumption (the model has no flicker term); ``docs/sensors.md`` lists the resulting values.

**Motion capture** delivers the pose ``latency`` seconds old (an integer number ``k`` of sample
periods; a delay line of the last ``k`` true poses) plus noise::

    p_m = p(t - latency) + σ_p ⊙ z_p,    q_m = q(t - latency) ⊗ exp(σ_θ ⊙ z_θ)

(attitude noise is a body-frame rotation vector applied through the exponential map).

Randomness is explicit: every noisy function takes ``noise``: a ``numpy.random.Generator``, a JAX
PRNG key, a ``torch.Generator``, or an array of standard normal samples ``z`` (the pure core;
shapes ``(..., 12)`` for :func:`imu_measure`, ``(..., 6)`` for :func:`imu_init` and
:func:`mocap_measure`). The same generator state, key or ``z`` gives bitwise the same readings.
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from array_api_compat import device as _device
from array_api_compat import is_array_api_obj

from . import rotation
from ._array import as_like, check_shape, namespace
from .wind import normal_noise

__all__ = [
    "G_N",
    "IMU_INIT_NOISE_DIM",
    "IMU_NOISE_DIM",
    "MOCAP_NOISE_DIM",
    "ImuParams",
    "ImuReading",
    "ImuState",
    "MocapParams",
    "MocapReading",
    "MocapState",
    "allan_deviation",
    "bias_walk_from_instability",
    "check_imu_params",
    "imu_discrete_std",
    "imu_init",
    "imu_measure",
    "list_imu_presets",
    "load_imu",
    "mocap_delay_steps",
    "mocap_init",
    "mocap_measure",
]

G_N = 9.80665  # standard gravity [m/s^2], defines the unit g (µg, mg) of data sheets
IMU_NOISE_DIM = 12  # z[..., 0:3] gyro white, 3:6 accel white, 6:9 gyro walk, 9:12 accel walk
IMU_INIT_NOISE_DIM = 6  # z[..., 0:3] gyro turn-on bias, 3:6 accel turn-on bias
MOCAP_NOISE_DIM = 6  # z[..., 0:3] position, 3:6 attitude (body rotation vector)


class ImuParams(NamedTuple):
    """IMU noise parameters in SI units. Per-axis values are scalars or shape ``(3,)`` (body xyz).

    :func:`check_imu_params` returns a copy with every per-axis value as a read-only float64
    ``(3,)`` array; the IMU functions call it, and skip the checks for a record it (or
    :func:`load_imu`) returned, so validate once before a loop. Pass the record to jitted code by
    closure (the ``name`` string is not an array).

    Attributes:
        gyro_noise_density: White rate noise ``N_g`` [rad/s/√Hz] (angle random walk), >= 0.
        gyro_bias_walk: Bias random walk ``K_g`` [rad/s²/√Hz] (rate random walk), >= 0.
        accel_noise_density: White noise ``N_a`` [m/s²/√Hz] (velocity random walk), >= 0.
        accel_bias_walk: Bias random walk ``K_a`` [m/s³/√Hz], >= 0.
        rate: Sample rate [Hz], > 0; ``dt = 1/rate`` unless given to :func:`imu_measure`.
        gyro_bias: Constant bias ``b_g0`` [rad/s].
        accel_bias: Constant bias ``b_a0`` [m/s²].
        gyro_scale: Scale factors ``s_g`` [1] (1 = ideal).
        accel_scale: Scale factors ``s_a`` [1].
        gyro_bias_std: Std of the turn-on in-run bias ``b_g(0)`` drawn by :func:`imu_init`
            [rad/s], >= 0.
        accel_bias_std: Std of ``b_a(0)`` [m/s²], >= 0.
        name: Preset or file name.
    """

    gyro_noise_density: Any
    gyro_bias_walk: Any
    accel_noise_density: Any
    accel_bias_walk: Any
    rate: float
    gyro_bias: Any = 0.0
    accel_bias: Any = 0.0
    gyro_scale: Any = 1.0
    accel_scale: Any = 1.0
    gyro_bias_std: Any = 0.0
    accel_bias_std: Any = 0.0
    name: str = "custom"


class ImuState(NamedTuple):
    """In-run biases ``b_g`` [rad/s] and ``b_a`` [m/s²], each ``(..., 3)`` (body frame)."""

    gyro_bias: Any
    accel_bias: Any


class ImuReading(NamedTuple):
    """One IMU sample: ``gyro`` [rad/s] and ``accel`` (specific force) [m/s²], ``(..., 3)``."""

    gyro: Any
    accel: Any


class MocapParams(NamedTuple):
    """Motion-capture noise and delay.

    Attributes:
        pos_std: Position noise std [m], scalar or ``(3,)`` (world xyz), >= 0.
        att_std: Attitude noise std [rad] of the body rotation vector, scalar or ``(3,)``, >= 0.
        latency: Delay of the delivered pose [s], >= 0, an integer number of sample periods.
        rate: Sample rate [Hz], > 0; ``dt = 1/rate`` unless given to :func:`mocap_init`.
    """

    pos_std: Any
    att_std: Any
    latency: float
    rate: float


class MocapState(NamedTuple):
    """Delay line: the last ``k`` true poses, oldest first.

    Attributes:
        pos_buf: Positions [m], shape ``(..., k, 3)``.
        quat_buf: Attitudes (xyzw), shape ``(..., k, 4)``.
        count: Integer array, shape ``()``: samples taken so far, saturating at ``k``.
    """

    pos_buf: Any
    quat_buf: Any
    count: Any


class MocapReading(NamedTuple):
    """Delivered pose ``pos`` [m] ``(..., 3)``, ``quat`` ``(..., 4)``, and ``valid`` ``(...)``.

    ``valid`` is False while the delivered pose is still the initial fill of the delay line
    (the first ``k`` samples), True once it is a pose passed to :func:`mocap_measure`.
    """

    pos: Any
    quat: Any
    valid: Any


# ----------------------------------------------------------------------------- validation


def _vec3(value: Any, name: str, nonneg: bool = False) -> np.ndarray:
    """A finite per-axis value as a read-only float64 ``(3,)`` array (scalars broadcast)."""
    try:
        a = np.array(value, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{name} must be a number or 3 numbers; got {value!r}") from e
    if a.shape not in ((), (3,)):
        raise ValueError(f"{name} must be a scalar or have shape (3,); got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be finite; got {a.tolist()}")
    if nonneg and np.any(a < 0.0):
        raise ValueError(f"{name} must be >= 0; got {a.tolist()}")
    out = np.broadcast_to(a, (3,)).copy()
    out.flags.writeable = False
    return out


def _positive(value: Any, name: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{name} must be a finite number > 0; got {value!r}") from e
    if not (math.isfinite(v) and v > 0.0):
        raise ValueError(f"{name} must be a finite number > 0; got {value!r}")
    return v


_CHECKED: list[ImuParams] = []  # the last records returned by check_imu_params
_NONNEG = {
    "gyro_noise_density",
    "gyro_bias_walk",
    "accel_noise_density",
    "accel_bias_walk",
    "gyro_bias_std",
    "accel_bias_std",
}


def check_imu_params(params: ImuParams) -> ImuParams:
    """Validate ``params``; return it with per-axis fields as read-only float64 ``(3,)`` arrays.

    Raises:
        ValueError: Naming the field: a density, walk or std < 0, a non-finite value, a shape
            other than scalar or ``(3,)``, or ``rate`` not > 0.
    """
    for done in _CHECKED:
        if done is params:  # already validated (its arrays are read-only copies)
            return params
    if not isinstance(params, ImuParams):
        raise ValueError(f"params must be an ImuParams; got {type(params).__name__}")
    fields = {}
    for name in ImuParams._fields:
        v = getattr(params, name)
        if name == "rate":
            fields[name] = _positive(v, "rate")
        elif name == "name":
            fields[name] = str(v)
        else:
            fields[name] = _vec3(v, name, nonneg=name in _NONNEG)
    out = ImuParams(**fields)
    _CHECKED.insert(0, out)  # identity cache: repeated calls with ``out`` skip the checks
    del _CHECKED[8:]
    return out


def _dt(dt: Any, rate: float) -> float:
    return 1.0 / rate if dt is None else _positive(dt, "dt")


def _is_float_array(x: Any) -> bool:
    """``x`` is an array with a real floating dtype (pre-drawn normals, not a PRNG key)."""
    if not is_array_api_obj(x):
        return False
    try:
        return bool(namespace(x).isdtype(x.dtype, "real floating"))
    except (TypeError, ValueError, AttributeError):  # e.g. typed JAX keys (dtype key<fry>)
        return False


def _normals(noise: Any, batch: tuple[int, ...], k: int, xp: Any, like: Any) -> Any:
    """Standard normals ``(..., k)``: given (checked and cast like ``like``) or drawn."""
    if _is_float_array(noise):
        check_shape(noise, (k,), "noise")
        return as_like(xp, noise, like)
    if noise is None:
        raise ValueError(
            f"noise is required: a numpy Generator, a JAX key, a torch Generator or standard "
            f"normal samples of shape (..., {k})"
        )
    npgen = isinstance(noise, np.random.Generator)
    z = normal_noise(noise, (*batch, k), xp=xp if npgen else None, dtype=like.dtype)
    return as_like(xp, z, like) if npgen else z


def _batch(*arrays: Any, drop: int = 1) -> tuple[int, ...]:
    return tuple(np.broadcast_shapes(*(tuple(a.shape[: a.ndim - drop]) for a in arrays)))


# ----------------------------------------------------------------------------- IMU


def imu_discrete_std(params: ImuParams, dt: float | None = None) -> dict[str, np.ndarray]:
    """Per-sample standard deviations at sample period ``dt`` (default ``1/params.rate``) [s].

    Returns:
        ``{"gyro": N_g/√dt, "accel": N_a/√dt, "gyro_walk": K_g √dt, "accel_walk": K_a √dt}``,
        each float64 ``(3,)`` [rad/s, m/s², rad/s, m/s²].
    """
    p = check_imu_params(params)
    r = math.sqrt(_dt(dt, p.rate))
    return {
        "gyro": p.gyro_noise_density / r,
        "accel": p.accel_noise_density / r,
        "gyro_walk": p.gyro_bias_walk * r,
        "accel_walk": p.accel_bias_walk * r,
    }


def imu_init(
    params: ImuParams,
    batch_shape: int | tuple[int, ...] = (),
    noise: Any = None,
    *,
    xp: Any = None,
    dtype: Any = None,
) -> ImuState:
    """Initial in-run biases: the turn-on bias ``b(0) = bias_std ⊙ z`` (zero if no std).

    Args:
        params: IMU parameters.
        batch_shape: Batch shape ``...`` (ignored when ``noise`` is an array: its shape rules).
        noise: Generator, JAX key, torch Generator, or standard normals ``(..., 6)``
            (``IMU_INIT_NOISE_DIM``). May be None when both ``*_bias_std`` are zero.
        xp: Namespace for the zero state or a NumPy Generator's samples (default NumPy).
        dtype: Floating dtype (default float64 for NumPy, the backend default otherwise).

    Returns:
        :class:`ImuState` with arrays of shape ``(..., 3)``.
    """
    p = check_imu_params(params)
    batch = (int(batch_shape),) if isinstance(batch_shape, int) else tuple(batch_shape)
    if noise is None:
        if np.any(p.gyro_bias_std > 0.0) or np.any(p.accel_bias_std > 0.0):
            raise ValueError("noise is required when gyro_bias_std or accel_bias_std is > 0")
        xp = np if xp is None else xp
        zeros = xp.zeros((*batch, 3), dtype=dtype)
        return ImuState(zeros, xp.zeros((*batch, 3), dtype=dtype))
    if _is_float_array(noise):
        z = noise
        check_shape(z, (IMU_INIT_NOISE_DIM,), "noise")
    else:
        z = normal_noise(noise, (*batch, IMU_INIT_NOISE_DIM), xp=xp, dtype=dtype)
    zx = namespace(z)
    return ImuState(
        as_like(zx, p.gyro_bias_std, z) * z[..., 0:3],
        as_like(zx, p.accel_bias_std, z) * z[..., 3:6],
    )


def imu_measure(
    quat: Any,
    ang_vel: Any,
    acc_world: Any,
    gravity_vec: Any,
    params: ImuParams,
    imu_state: ImuState,
    dt: float | None,
    noise: Any,
) -> tuple[ImuReading, ImuState]:
    """One IMU sample and the advanced bias state (pure; equations in the module docstring).

    Args:
        quat: Attitude (body to world, xyzw), shape ``(..., 4)``.
        ang_vel: Body angular velocity ``ω`` [rad/s], shape ``(..., 3)``.
        acc_world: World-frame acceleration ``a`` of the IMU [m/s²], ``(..., 3)`` (0 at rest).
        gravity_vec: Gravity ``g`` [m/s²], ``(3,)`` or ``(..., 3)``, e.g. ``Params.gravity_vec``.
        params: IMU parameters.
        imu_state: In-run biases ``b_k`` (from :func:`imu_init` or the previous call).
        dt: Sample period [s] (a Python float), or None for ``1/params.rate``.
        noise: Generator, JAX key, torch Generator, or standard normals ``(..., 12)``
            (``IMU_NOISE_DIM``: gyro white, accel white, gyro walk, accel walk).

    Returns:
        ``(reading, state)``: :class:`ImuReading` ``(..., 3)`` arrays at sample ``k`` and the
        biases ``b_{k+1}``. Arrays follow the namespace and dtype of ``ang_vel``; batch shapes
        broadcast. The state may be a NumPy array for any backend (it is converted).

    Raises:
        ValueError: Bad shapes, ``dt`` not > 0, or invalid ``params`` (naming the argument).
    """
    check_shape(quat, (4,), "quat")
    check_shape(ang_vel, (3,), "ang_vel")
    check_shape(acc_world, (3,), "acc_world")
    p = check_imu_params(params)
    r = math.sqrt(_dt(dt, p.rate))
    xp = namespace(quat, ang_vel, acc_world)

    def c(v: Any) -> Any:
        return as_like(xp, v, ang_vel)

    g = c(gravity_vec)
    check_shape(g, (3,), "gravity_vec")
    bg, ba = c(imu_state.gyro_bias), c(imu_state.accel_bias)
    check_shape(bg, (3,), "imu_state.gyro_bias")
    check_shape(ba, (3,), "imu_state.accel_bias")
    batch = _batch(quat, ang_vel, acc_world, g, bg, ba)
    z = _normals(noise, batch, IMU_NOISE_DIM, xp, ang_vel)
    f = rotation.rotate_inverse(quat, acc_world - g)
    gyro_k = (p.gyro_scale, p.gyro_bias, p.gyro_noise_density / r, p.gyro_bias_walk * r)
    accel_k = (p.accel_scale, p.accel_bias, p.accel_noise_density / r, p.accel_bias_walk * r)
    k = np.stack((*gyro_k, *accel_k))
    k = c(k)  # one conversion for the eight (3,) constants
    sg, b0g, sdg, swg, sa, b0a, sda, swa = (k[i, :] for i in range(8))
    gyro = sg * ang_vel + b0g + bg + sdg * z[..., 0:3]
    accel = sa * f + b0a + ba + sda * z[..., 3:6]
    bg_next = bg + swg * z[..., 6:9]
    ba_next = ba + swa * z[..., 9:12]
    return ImuReading(gyro, accel), ImuState(bg_next, ba_next)


# ----------------------------------------------------------------------------- mocap


def mocap_delay_steps(params: MocapParams, dt: float | None = None) -> int:
    """Latency in sample periods, ``k = latency/dt`` (``dt`` default ``1/params.rate``) [s].

    Raises:
        ValueError: If ``latency`` < 0 or not an integer multiple of ``dt`` (1e-9 relative).
    """
    dt = _dt(dt, _positive(params.rate, "rate"))
    lat = float(params.latency)
    if not (math.isfinite(lat) and lat >= 0.0):
        raise ValueError(f"latency must be finite and >= 0 s; got {params.latency!r}")
    x = lat / dt
    k = round(x)
    if abs(x - k) > 1e-9 * max(1.0, x):
        raise ValueError(
            f"latency must be an integer multiple of the sample period dt = {dt!r} s; "
            f"got latency = {lat!r} s = {x!r} periods"
        )
    return int(k)


def _check_mocap(params: MocapParams) -> tuple[np.ndarray, np.ndarray]:
    if not isinstance(params, MocapParams):
        raise ValueError(f"params must be a MocapParams; got {type(params).__name__}")
    _positive(params.rate, "rate")
    return _vec3(params.pos_std, "pos_std", nonneg=True), _vec3(params.att_std, "att_std", True)


def mocap_init(pos: Any, quat: Any, params: MocapParams, dt: float | None = None) -> MocapState:
    """Delay line filled with the initial pose (the body rested there before ``t = 0``).

    Args:
        pos: Initial position [m], ``(..., 3)``.
        quat: Initial attitude (xyzw), ``(..., 4)``.
        params: Mocap parameters.
        dt: Sample period [s], default ``1/params.rate``; ``latency/dt`` must be an integer.

    Returns:
        :class:`MocapState` with buffers ``(..., k, 3)``, ``(..., k, 4)`` and ``count = 0``.
    """
    check_shape(pos, (3,), "pos")
    check_shape(quat, (4,), "quat")
    _check_mocap(params)
    k = mocap_delay_steps(params, dt)
    xp = namespace(pos, quat)
    batch = _batch(pos, quat)
    p = xp.broadcast_to(pos, (*batch, 3))[..., None, :]
    q = xp.broadcast_to(as_like(xp, quat, pos), (*batch, 4))[..., None, :]
    if k:
        pbuf, qbuf = xp.concat([p] * k, axis=-2), xp.concat([q] * k, axis=-2)
    else:
        pbuf = xp.zeros((*batch, 0, 3), dtype=pos.dtype, device=_device(pos))
        qbuf = xp.zeros((*batch, 0, 4), dtype=pos.dtype, device=_device(pos))
    return MocapState(pbuf, qbuf, xp.zeros((), dtype=xp.int32, device=_device(pos)))


def mocap_measure(
    pos: Any, quat: Any, params: MocapParams, mocap_state: MocapState, noise: Any
) -> tuple[MocapReading, MocapState]:
    """Push the current true pose, deliver the one ``k`` samples old plus noise (pure).

    Args:
        pos: True position now [m], ``(..., 3)`` (same batch shape as the state).
        quat: True attitude now (xyzw), ``(..., 4)``.
        params: Mocap parameters (the noise stds; the delay ``k`` is the state's buffer length).
        mocap_state: From :func:`mocap_init` or the previous call.
        noise: Generator, JAX key, torch Generator, or standard normals ``(..., 6)``
            (``MOCAP_NOISE_DIM``: position, attitude rotation vector).

    Returns:
        ``(reading, state)``; arrays follow the namespace and dtype of ``pos``.
    """
    check_shape(pos, (3,), "pos")
    check_shape(quat, (4,), "quat")
    pos_std, att_std = _check_mocap(params)
    xp = namespace(pos, quat)
    pbuf, qbuf = mocap_state.pos_buf, mocap_state.quat_buf
    if pbuf.ndim < 2:
        raise ValueError(f"mocap_state.pos_buf must have shape (..., k, 3); got {pbuf.shape}")
    k = pbuf.shape[-2]
    batch = _batch(pos, quat)
    if tuple(pbuf.shape[:-2]) != batch or tuple(qbuf.shape) != (*batch, k, 4):
        raise ValueError(
            f"mocap_state buffers must have shapes {(*batch, k, 3)} and {(*batch, k, 4)} for "
            f"pos/quat batch shape {batch}; got {tuple(pbuf.shape)} and {tuple(qbuf.shape)}"
        )
    q = as_like(xp, quat, pos)
    if k:
        p_old, q_old = pbuf[..., 0, :], qbuf[..., 0, :]
        p_new = xp.broadcast_to(pos, (*batch, 3))[..., None, :]
        q_new = xp.broadcast_to(q, (*batch, 4))[..., None, :]
        pbuf = xp.concat((pbuf[..., 1:, :], p_new), axis=-2)
        qbuf = xp.concat((qbuf[..., 1:, :], q_new), axis=-2)
    else:
        p_old, q_old = pos, q
    z = _normals(noise, batch, MOCAP_NOISE_DIM, xp, pos)
    p_m = p_old + as_like(xp, pos_std, pos) * z[..., 0:3]
    q_m = rotation.multiply(q_old, rotation.exp(as_like(xp, att_std, pos) * z[..., 3:6]))
    count = mocap_state.count
    valid = xp.broadcast_to(count >= k, batch)
    count = xp.where(count < k, count + 1, count)
    return MocapReading(p_m, q_m, valid), MocapState(pbuf, qbuf, count)


# ----------------------------------------------------------------------------- Allan


def allan_deviation(x: Any, dt: float, taus: Any) -> tuple[np.ndarray, np.ndarray]:
    """Overlapping Allan deviation of a rate record (NumPy, float64).

    With ``θ_j = dt Σ_{i<j} x_i`` (``j = 0..n``) and ``τ = m dt``::

        σ²(τ) = Σ_{j=0}^{n-2m} (θ_{j+2m} - 2 θ_{j+m} + θ_j)² / (2 τ² (n - 2m + 1))

    White noise of density ``N`` (``σ_d = N/√dt``) gives ``σ(τ) = N/√τ`` exactly; a bias random
    walk ``K`` gives ``K √(τ/3)`` for ``m >> 1``.

    Args:
        x: Samples, shape ``(n, ...)``: time along axis 0, any trailing channels.
        dt: Sample period [s], > 0.
        taus: Averaging times [s], each rounded to ``m = round(τ/dt)`` with ``1 <= m <= n/2``.

    Returns:
        ``(taus_used, adev)``: ``m dt`` ``(T,)`` and the deviations ``(T, ...)`` [unit of x].
    """
    x = np.asarray(x, dtype=np.float64)
    dt = _positive(dt, "dt")
    if x.ndim < 1 or x.shape[0] < 2:
        raise ValueError(f"x must have shape (n, ...) with n >= 2; got shape {x.shape}")
    taus = np.atleast_1d(np.asarray(taus, dtype=np.float64))
    n = x.shape[0]
    m = np.rint(taus / dt).astype(np.int64)
    if taus.ndim != 1 or np.any(m < 1) or np.any(2 * m > n):
        raise ValueError(
            f"taus must be a 1-D list of times in [dt, n dt/2] = [{dt}, {n * dt / 2}] s; "
            f"got {taus.tolist()}"
        )
    theta = np.concatenate([np.zeros((1, *x.shape[1:])), np.cumsum(x, axis=0) * dt])
    out = np.empty((m.size, *x.shape[1:]))
    for i, mi in enumerate(m):
        d = theta[2 * mi :] - 2.0 * theta[mi : n + 1 - mi] + theta[: n + 1 - 2 * mi]
        out[i] = np.sqrt(np.mean(d * d, axis=0) / 2.0) / (mi * dt)
    return m * dt, out


# ----------------------------------------------------------------------------- presets

_D2R = math.pi / 180.0
_U_GYRO_DENS = {
    "rad/s/sqrt(Hz)": 1.0,
    "deg/s/sqrt(Hz)": _D2R,
    "deg/sqrt(hr)": _D2R / 60.0,
    "rad/sqrt(s)": 1.0,
}
_U_GYRO_WALK = {"rad/s^2/sqrt(Hz)": 1.0, "deg/s^2/sqrt(Hz)": _D2R, "deg/hr/sqrt(hr)": _D2R / 216e3}
_U_GYRO = {"rad/s": 1.0, "deg/s": _D2R, "deg/hr": _D2R / 3600.0}
_U_ACC_DENS = {
    "m/s^2/sqrt(Hz)": 1.0,
    "ug/sqrt(Hz)": G_N * 1e-6,
    "mg/sqrt(Hz)": G_N * 1e-3,
    "m/s/sqrt(hr)": 1.0 / 60.0,
}
_U_ACC_WALK = {"m/s^3/sqrt(Hz)": 1.0, "ug/s/sqrt(Hz)": G_N * 1e-6, "m/s^2/sqrt(hr)": 1.0 / 60.0}
_U_ACC = {"m/s^2": 1.0, "mg": G_N * 1e-3, "ug": G_N * 1e-6}
_REQ = object()
# key -> (accepted units {unit: factor to SI}, default)
_IMU_KEYS: dict[str, tuple[dict[str, float], Any]] = {
    "rate": ({"Hz": 1.0}, _REQ),
    "gyro_noise_density": (_U_GYRO_DENS, _REQ),
    "gyro_bias_walk": (_U_GYRO_WALK, None),
    "gyro_bias_instability": (_U_GYRO, None),
    "gyro_bias": (_U_GYRO, 0.0),
    "gyro_bias_std": (_U_GYRO, 0.0),
    "gyro_scale": ({"1": 1.0}, 1.0),
    "accel_noise_density": (_U_ACC_DENS, _REQ),
    "accel_bias_walk": (_U_ACC_WALK, None),
    "accel_bias_instability": (_U_ACC, None),
    "accel_bias": (_U_ACC, 0.0),
    "accel_bias_std": (_U_ACC, 0.0),
    "accel_scale": ({"1": 1.0}, 1.0),
}
_TEXT_KEYS = ("name", "description")
_FIELDS = {"value", "unit", "source", "note"}


def _norm_unit(unit: str) -> str:
    """Canonical spelling: no spaces, ° -> deg, µ/μ -> u, √X -> sqrt(X), ² ³ -> ^2 ^3."""
    s = "".join(str(unit).split())
    for a, b in (("°", "deg"), ("µ", "u"), ("μ", "u"), ("²", "^2"), ("³", "^3"), ("sec", "s")):
        s = s.replace(a, b)
    return re.sub(r"√\(?([A-Za-z]+)\)?", r"sqrt(\1)", s)


def bias_walk_from_instability(instability: Any, noise_density: Any) -> np.ndarray:
    """Bias random walk ``K = √3 B²/(2 N)`` whose Allan minimum with ``N`` equals ``B``.

    The model ``σ²(τ) = N²/τ + K² τ/3`` has its minimum ``2 N K/√3`` at ``τ* = √3 N/K``; setting
    it to ``B²`` gives ``K``. An assumption standing in for the flicker floor a data sheet's
    in-run bias stability describes.

    Args:
        instability: ``B`` [unit], scalar or ``(3,)``, >= 0.
        noise_density: ``N`` [unit/√Hz], scalar or ``(3,)``; > 0 where ``B > 0``.

    Returns:
        ``K`` [unit/s/√Hz], float64 ``(3,)``.
    """
    B = _vec3(instability, "bias_instability", nonneg=True)
    N = _vec3(noise_density, "noise_density", nonneg=True)
    if np.any((B > 0.0) & (N <= 0.0)):
        raise ValueError("noise_density must be > 0 to convert a bias instability to a bias walk")
    return np.where(B > 0.0, math.sqrt(3.0) * B * B / (2.0 * np.where(N > 0.0, N, 1.0)), 0.0)


def _preset_root() -> Any:
    return resources.files("quadsim") / "presets" / "sensors"


def list_imu_presets() -> list[str]:
    """Sorted names of the packaged IMU presets (``quadsim/presets/sensors/*.toml``)."""
    return sorted(p.name[:-5] for p in _preset_root().iterdir() if p.name.endswith(".toml"))


def load_imu(name_or_path: str | os.PathLike[str]) -> ImuParams:
    """Load an IMU from a preset name (``"adis16470"``, ``"bmi088"``) or a TOML file path.

    Every value is an inline table ``{ value, unit, source, note }`` (presets must give ``unit``
    and ``source``; a user file may give a bare number in the first listed unit); units are
    converted to SI here. Give at most one of ``*_bias_walk`` and ``*_bias_instability`` per
    sensor; an instability ``B`` becomes ``K = √3 B²/(2 N)`` (:func:`bias_walk_from_instability`);
    neither means no bias walk. See ``docs/sensors.md``.

    Raises:
        ValueError: Naming the file (or preset) and the key: unknown key or unit, bad shape,
            missing required value, negative density, both walk and instability given.
        FileNotFoundError: A path that does not exist.
    """
    is_path = not isinstance(name_or_path, str) or name_or_path.endswith(".toml")
    if is_path or any(s in name_or_path for s in {os.sep, os.altsep or "/", "/"}):
        path = Path(name_or_path)
        where, stem, preset, raw = str(path), path.stem, False, path.read_bytes()
    else:
        names = list_imu_presets()
        if name_or_path not in names:
            raise ValueError(f"unknown IMU preset {name_or_path!r}; available presets: {names}")
        where, stem, preset = f"IMU preset {name_or_path!r}", name_or_path, True
        raw = (_preset_root() / f"{name_or_path}.toml").read_bytes()
    try:
        doc = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{where}: malformed TOML: {e}") from e

    def fail(key: str, msg: str) -> ValueError:
        return ValueError(f"{where}: key {key!r}: {msg}")

    allowed = [*_TEXT_KEYS, *_IMU_KEYS]
    for key in doc:
        if key not in allowed:
            raise fail(key, f"unknown key; allowed: {allowed}")
    for key in _TEXT_KEYS:
        if not isinstance(doc.get(key, ""), str):
            raise fail(key, f"must be a string; got {doc.get(key)!r}")
    v = {k: _entry(doc, k, preset, fail) for k in _IMU_KEYS}
    for s in ("gyro", "accel"):
        walk, inst = v.pop(f"{s}_bias_walk"), v.pop(f"{s}_bias_instability")
        if walk is not None and inst is not None:
            raise fail(f"{s}_bias_walk", f"give at most one of it and '{s}_bias_instability'")
        dens = v[f"{s}_noise_density"]
        if inst is not None:
            if np.any(inst < 0.0) or np.any(dens < 0.0):
                raise fail(f"{s}_bias_instability", "instability and noise density must be >= 0")
            try:
                walk = bias_walk_from_instability(inst, dens)
            except ValueError as e:
                raise fail(f"{s}_bias_instability", str(e)) from e
        v[f"{s}_bias_walk"] = 0.0 if walk is None else walk
    v["rate"] = float(v["rate"]) if v["rate"].ndim == 0 else v["rate"]
    try:
        return check_imu_params(ImuParams(**v, name=doc.get("name", stem)))
    except ValueError as e:
        key = str(e).split(" ", 1)[0]
        raise fail(key, str(e)) from e


def _entry(doc: dict[str, Any], key: str, preset: bool, fail: Any) -> Any:
    """The value of ``key`` in SI units (float64 array), its default, or None."""
    units, default = _IMU_KEYS[key]
    if key not in doc:
        if default is _REQ:
            raise fail(key, "required key is missing")
        return None if default is None else np.asarray(default, dtype=np.float64)
    entry = doc[key]
    if isinstance(entry, dict):
        extra = set(entry) - _FIELDS
        if extra:
            raise fail(key, f"unknown field(s) {sorted(extra)}; allowed: {sorted(_FIELDS)}")
        if "value" not in entry:
            raise fail(key, "value table has no 'value'")
        if preset and not ("unit" in entry and "source" in entry):
            raise fail(key, "presets must give 'unit' and 'source' for every value")
        value, unit = entry["value"], entry.get("unit", next(iter(units)))
    elif preset:
        raise fail(key, "presets must give { value, unit, source }")
    else:
        value, unit = entry, next(iter(units))
    norm = _norm_unit(unit)
    if norm not in units:
        raise fail(key, f"unit {unit!r} not accepted; use one of {list(units)}")

    def number(x: Any) -> bool:
        return isinstance(x, int | float) and not isinstance(x, bool)

    if not (number(value) or (isinstance(value, list) and all(number(x) for x in value))):
        raise fail(key, f"value must be a number or a list of 3 numbers; got {value!r}")
    a = np.asarray(value, dtype=np.float64)
    shapes = ((),) if key == "rate" else ((), (3,))
    if a.shape not in shapes:
        raise fail(key, f"wrong shape {a.shape}; expected one of {list(shapes)}")
    if not np.all(np.isfinite(a)):
        raise fail(key, f"must be finite; got {value!r}")
    return a * units[norm]
