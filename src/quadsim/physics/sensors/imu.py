r"""IMU (gyroscope + accelerometer): parameters, state, readings and the sampling functions.

Frames: world ENU (z up), body FLU; ``quat`` (xyzw) maps body to world, ``R_wb = to_matrix(q)``,
exact for any nonzero norm (``c q`` is the same attitude as ``q``, see
:mod:`quadsim.physics.rotation`).

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
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from .. import rotation
from .._array import as_like, check_shape, namespace
from ..wind import normal_noise
from ._noise import common_batch, is_float_array, standard_normals
from ._validate import axis_vec3, checked_record, sample_period

IMU_NOISE_DIM = 12  # z[..., 0:3] gyro white, 3:6 accel white, 6:9 gyro walk, 9:12 accel walk
IMU_INIT_NOISE_DIM = 6  # z[..., 0:3] gyro turn-on bias, 3:6 accel turn-on bias


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
    out = checked_record(params, ImuParams,
                         lambda v, name: axis_vec3(v, name, nonneg=name in _NONNEG))
    _CHECKED.insert(0, out)  # identity cache: repeated calls with ``out`` skip the checks
    del _CHECKED[8:]
    return out


def imu_discrete_std(params: ImuParams, dt: float | None = None) -> dict[str, np.ndarray]:
    """Per-sample standard deviations at sample period ``dt`` (default ``1/params.rate``) [s].

    Returns:
        ``{"gyro": N_g/√dt, "accel": N_a/√dt, "gyro_walk": K_g √dt, "accel_walk": K_a √dt}``,
        each float64 ``(3,)`` [rad/s, m/s², rad/s, m/s²].
    """
    p = check_imu_params(params)
    r = math.sqrt(sample_period(dt, p.rate))
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
    if is_float_array(noise):
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
        quat: Attitude (body to world, xyzw), shape ``(..., 4)``, any nonzero norm.
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
    r = math.sqrt(sample_period(dt, p.rate))
    xp = namespace(quat, ang_vel, acc_world)

    def c(v: Any) -> Any:
        return as_like(xp, v, ang_vel)

    g = c(gravity_vec)
    check_shape(g, (3,), "gravity_vec")
    bg, ba = c(imu_state.gyro_bias), c(imu_state.accel_bias)
    check_shape(bg, (3,), "imu_state.gyro_bias")
    check_shape(ba, (3,), "imu_state.accel_bias")
    batch = common_batch(quat, ang_vel, acc_world, g, bg, ba)
    z = standard_normals(noise, batch, IMU_NOISE_DIM, xp, ang_vel)
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
