r"""Barometric altimeter: parameters, in-run bias state, readings and the sampling function.

**Model** (one altitude per drone, world ENU, z up; all quantities in metres)::

    h_m(t_k) = z(t_k) + b_0 + b_k + σ n_k,          n_k ~ N(0, 1)
    b_{k+1}  = b_k + K √dt w_k,                     w_k ~ N(0, 1)
    b_0 ~ const,   b(0) = σ_b0 z_0                 (turn-on bias, drawn by baro_init)

``z`` is the true height of the sensor (``pos[..., 2]``), ``b_0`` a constant offset (e.g. the
difference between the pressure reference and the world origin), ``b_k`` the in-run bias, a
Wiener process of density ``K`` [m/s/√Hz = m/√s] whose increments over the sample period ``dt``
are exactly ``N(0, K² dt)`` (so the bias variance grows as ``Var b(t) = σ_b0² + K² t``), and
``σ`` the white noise **per sample** [m].

*Why a per-sample std and not a density.* A barometer's noise is set by its oversampling and
IIR filter, not by the rate at which the host reads it: data sheets quote an RMS noise per
reading for a configuration (e.g. the BMP388 at ×8 oversampling and IIR coefficient 3). ``σ``
is therefore kept when ``dt`` changes; only the walk step ``K √dt`` depends on ``dt``. The
sensor's IIR filter correlates consecutive readings; this model treats them as independent
(white), which is conservative for an estimator that averages readings.

*Pressure to altitude.* Near sea level the hydrostatic equation ``dp/dh = -ρ g`` gives
``dh/dp = -1/(ρ_0 g_0) = -0.0832 m/Pa ≈ -8.3 m/hPa`` (ISA ``ρ_0 = 1.225 kg/m³``,
``g_0 = 9.80665 m/s²``, :data:`M_PER_PA`); the loader uses it to convert pressure-unit
values of a preset (noise, bias, drift) to metres. It grows with altitude (≈ -9.6 m/hPa at
1500 m); presets quote sea-level values.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from .._array import as_like, check_shape, namespace
from ..wind import normal_noise
from ._noise import common_batch, is_float_array, standard_normals
from ._validate import checked_record, finite_number, sample_period

BARO_NOISE_DIM = 2  # z[..., 0] white noise, z[..., 1] bias walk
BARO_INIT_NOISE_DIM = 1  # z[..., 0] turn-on bias

RHO0 = 1.225  # ISA sea-level air density [kg/m^3]
G0 = 9.80665  # standard gravity [m/s^2]
M_PER_PA = 1.0 / (RHO0 * G0)  # |dh/dp| near sea level [m/Pa] (≈ 8.3 m/hPa)


class BaroParams(NamedTuple):
    """Barometer noise parameters in SI units (metres of altitude). All fields are scalars.

    Attributes:
        noise_std: White noise std per sample ``σ`` [m], >= 0.
        bias_walk: Bias random walk density ``K`` [m/s/√Hz] (= m/√s), >= 0.
        rate: Sample rate [Hz], > 0; ``dt = 1/rate`` unless given to :func:`baro_measure`.
        bias: Constant offset ``b_0`` [m] (any sign).
        bias_std: Std of the turn-on in-run bias ``b(0)`` drawn by :func:`baro_init` [m], >= 0.
        name: Preset or file name.
    """

    noise_std: float
    bias_walk: float
    rate: float
    bias: float = 0.0
    bias_std: float = 0.0
    name: str = "custom"


class BaroState(NamedTuple):
    """In-run bias ``b_k`` [m], shape ``(...)`` (one per drone)."""

    bias: Any


def check_baro_params(params: BaroParams) -> BaroParams:
    """Validate ``params``; return a copy with every number a Python float.

    Raises:
        ValueError: Naming the field: ``noise_std``, ``bias_walk`` or ``bias_std`` < 0, a
            non-finite value, or ``rate`` not > 0.
    """
    return checked_record(params, BaroParams,
                          lambda v, name: finite_number(v, name, nonneg=name != "bias"))


def baro_init(
    params: BaroParams,
    batch_shape: int | tuple[int, ...] = (),
    noise: Any = None,
    *,
    xp: Any = None,
    dtype: Any = None,
) -> BaroState:
    """Initial in-run bias: the turn-on bias ``b(0) = σ_b0 z`` (zero if ``bias_std`` is 0).

    Args:
        params: Barometer parameters.
        batch_shape: Batch shape ``...`` (ignored when ``noise`` is an array: its shape rules).
        noise: Generator, JAX key, torch Generator, or standard normals ``(..., 1)``
            (``BARO_INIT_NOISE_DIM``). May be None when ``bias_std`` is zero.
        xp: Namespace for the zero state or a NumPy Generator's samples (default NumPy).
        dtype: Floating dtype (default float64 for NumPy, the backend default otherwise).

    Returns:
        :class:`BaroState` with ``bias`` of shape ``(...)`` [m].
    """
    p = check_baro_params(params)
    batch = (int(batch_shape),) if isinstance(batch_shape, int) else tuple(batch_shape)
    if noise is None:
        if p.bias_std > 0.0:
            raise ValueError("noise is required when bias_std is > 0")
        xp = np if xp is None else xp
        return BaroState(xp.zeros(batch, dtype=dtype))
    if is_float_array(noise):
        z = noise
        check_shape(z, (BARO_INIT_NOISE_DIM,), "noise")
    else:
        z = normal_noise(noise, (*batch, BARO_INIT_NOISE_DIM), xp=xp, dtype=dtype)
    return BaroState(p.bias_std * z[..., 0])


def baro_measure(
    pos: Any, params: BaroParams, baro_state: BaroState, dt: float | None, noise: Any
) -> tuple[Any, BaroState]:
    """One altitude reading and the advanced bias (pure; equations in the module docstring).

    Args:
        pos: True position of the sensor in the world frame (ENU) [m], shape ``(..., 3)``.
        params: Barometer parameters.
        baro_state: In-run bias ``b_k`` (from :func:`baro_init` or the previous call), ``(...)``;
            may be a NumPy array for any backend (it is converted).
        dt: Sample period [s] (a Python float), or None for ``1/params.rate``.
        noise: Generator, JAX key, torch Generator, or standard normals ``(..., 2)``
            (``BARO_NOISE_DIM``: white noise, bias walk).

    Returns:
        ``(reading, state)``: the altitude ``h_m`` [m], shape ``(...)``, at sample ``k`` and the
        bias ``b_{k+1}``. Arrays follow the namespace and dtype of ``pos``; batch shapes
        broadcast.

    Raises:
        ValueError: Bad shapes, ``dt`` not > 0, or invalid ``params`` (naming the argument).
    """
    check_shape(pos, (3,), "pos")
    p = check_baro_params(params)
    r = math.sqrt(sample_period(dt, p.rate))
    xp = namespace(pos)
    b = as_like(xp, baro_state.bias, pos)
    batch = tuple(np.broadcast_shapes(common_batch(pos), tuple(b.shape)))
    b = xp.broadcast_to(b, batch)  # the state takes the batch shape of the readings
    z = standard_normals(noise, batch, BARO_NOISE_DIM, xp, pos)
    reading = pos[..., 2] + p.bias + b + p.noise_std * z[..., 0]
    return reading, BaroState(b + (p.bias_walk * r) * z[..., 1])
