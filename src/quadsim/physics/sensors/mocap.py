r"""Motion capture: parameters, delay-line state, readings and the sampling functions.

**Motion capture** delivers the pose ``latency`` seconds old (an integer number ``k`` of sample
periods; a delay line of the last ``k`` true poses) plus noise::

    p_m = p(t - latency) + σ_p ⊙ z_p,    q_m = q̂(t - latency) ⊗ exp(σ_θ ⊙ z_θ),   q̂ = q/|q|

(attitude noise is a body-frame rotation vector applied through the exponential map).

**Dropouts** (applied by the closed loop at each sample, :func:`dropout_thresholds`): a two-state
chain (Gilbert's channel): out of a gap, a sample starts one with probability ``dropout``; in a
gap, the next sample is lost too with probability ``1 - 1/gap``, so gaps last ``gap`` samples on
average (geometrically distributed) and a fraction ``dropout·gap / (1 + dropout·gap)`` of the
samples is lost (the chain's stationary share of gap samples). A lost sample delivers nothing:
the last pose is held and not fresh.

The delivered quaternion is of unit norm; the true one may have any nonzero norm (``c q`` is the
same attitude as ``q``; the sign of ``c`` is kept).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
from array_api_compat import device as _device

from .. import rotation
from .._array import as_like, check_shape, namespace
from ._delay import delay_count, delay_length, delay_lines, delay_push
from ._noise import common_batch, standard_normals
from ._validate import axis_vec3, positive_number, sample_period

MOCAP_NOISE_DIM = 6  # z[..., 0:3] position, 3:6 attitude (body rotation vector)


class MocapParams(NamedTuple):
    """Motion-capture noise and delay.

    Attributes:
        pos_std: Position noise std [m], scalar or ``(3,)`` (world xyz), >= 0.
        att_std: Attitude noise std [rad] of the body rotation vector, scalar or ``(3,)``, >= 0.
        latency: Delay of the delivered pose [s], >= 0, an integer number of sample periods.
        rate: Sample rate [Hz], > 0; ``dt = 1/rate`` unless given to :func:`mocap_init`.
        dropout: Probability that a sample starts a gap (module docstring), in ``[0, 1)``.
        gap: Mean gap length [samples], >= 1.
    """

    pos_std: Any
    att_std: Any
    latency: float
    rate: float
    dropout: float = 0.0
    gap: float = 1.0


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


def mocap_delay_steps(params: MocapParams, dt: float | None = None) -> int:
    """Latency in sample periods, ``k = latency/dt`` (``dt`` default ``1/params.rate``) [s].

    Raises:
        ValueError: If ``latency`` < 0 or not an integer multiple of ``dt`` (1e-9 relative).
    """
    dt = sample_period(dt, positive_number(params.rate, "rate"))
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


def dropout_thresholds(params: MocapParams) -> tuple[float, float]:
    """``(c_start, c_stay)``: a standard normal ``z`` starts a gap when ``z > c_start`` (probability
    ``dropout``) and keeps one going when ``z < c_stay`` (probability ``1 - 1/gap``).

    Raises:
        ValueError: ``dropout`` outside ``[0, 1)`` or ``gap`` < 1, naming the field.
    """  # noqa: D205
    from statistics import NormalDist

    p, g = float(params.dropout), float(params.gap)
    if not (math.isfinite(p) and 0.0 <= p < 1.0):
        raise ValueError(f"dropout must be a probability in [0, 1); got {params.dropout!r}")
    if not (math.isfinite(g) and g >= 1.0):
        raise ValueError(f"gap must be a mean gap length >= 1 sample; got {params.gap!r}")
    nd = NormalDist()
    start = math.inf if p == 0.0 else nd.inv_cdf(1.0 - p)
    stay = -math.inf if g == 1.0 else nd.inv_cdf(1.0 - 1.0 / g)
    return start, stay


def _check_mocap(params: MocapParams) -> tuple[np.ndarray, np.ndarray]:
    if not isinstance(params, MocapParams):
        raise ValueError(f"params must be a MocapParams; got {type(params).__name__}")
    positive_number(params.rate, "rate")
    dropout_thresholds(params)
    pos_std = axis_vec3(params.pos_std, "pos_std", nonneg=True)
    return pos_std, axis_vec3(params.att_std, "att_std", True)


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
    batch = common_batch(pos, quat)
    pbuf, qbuf = delay_lines(xp, (pos, as_like(xp, quat, pos)), k, batch, pos)
    return MocapState(pbuf, qbuf, xp.zeros((), dtype=xp.int32, device=_device(pos)))


def mocap_measure(
    pos: Any, quat: Any, params: MocapParams, mocap_state: MocapState, noise: Any
) -> tuple[MocapReading, MocapState]:
    """Push the current true pose, deliver the one ``k`` samples old plus noise (pure).

    Args:
        pos: True position now [m], ``(..., 3)`` (same batch shape as the state).
        quat: True attitude now (xyzw), ``(..., 4)``, any nonzero norm.
        params: Mocap parameters (the noise stds; the delay ``k`` is the state's buffer length).
        mocap_state: From :func:`mocap_init` or the previous call.
        noise: Generator, JAX key, torch Generator, or standard normals ``(..., 6)``
            (``MOCAP_NOISE_DIM``: position, attitude rotation vector).

    Returns:
        ``(reading, state)``; arrays follow the namespace and dtype of ``pos``; ``reading.quat``
        has unit norm.
    """
    check_shape(pos, (3,), "pos")
    check_shape(quat, (4,), "quat")
    pos_std, att_std = _check_mocap(params)
    xp = namespace(pos, quat)
    pbuf, qbuf = mocap_state.pos_buf, mocap_state.quat_buf
    k = delay_length(pbuf, "mocap_state.pos_buf", "k")
    batch = common_batch(pos, quat)
    if tuple(pbuf.shape[:-2]) != batch or tuple(qbuf.shape) != (*batch, k, 4):
        raise ValueError(
            f"mocap_state buffers must have shapes {(*batch, k, 3)} and {(*batch, k, 4)} for "
            f"pos/quat batch shape {batch}; got {tuple(pbuf.shape)} and {tuple(qbuf.shape)}"
        )
    q = as_like(xp, quat, pos)
    (p_old, q_old), (pbuf, qbuf) = delay_push(xp, (pbuf, qbuf), (pos, q), batch)
    z = standard_normals(noise, batch, MOCAP_NOISE_DIM, xp, pos)
    p_m = p_old + as_like(xp, pos_std, pos) * z[..., 0:3]
    q_m = rotation.multiply(rotation.normalize(q_old),
                            rotation.exp(as_like(xp, att_std, pos) * z[..., 3:6]))
    valid, count = delay_count(xp, mocap_state.count, k, batch)
    return MocapReading(p_m, q_m, valid), MocapState(pbuf, qbuf, count)
