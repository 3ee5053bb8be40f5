r"""GNSS receiver (position and velocity fix): parameters, state, readings and sampling.

**Model** (world ENU, per axis; ``k`` the sample index, ``dt = 1/rate`` the fix period)::

    p_m,k = p(t_k - L) + e_k + σ_p ⊙ n_p,k          n ~ N(0, I)
    v_m,k = v(t_k - L)       + σ_v ⊙ n_v,k
    e_{k+1} = a e_k + σ_gm ⊙ √(1 - a²) w_k,  a = exp(-dt/τ),   w ~ N(0, I)

* ``L`` is the latency, an integer number ``m = L/dt`` of fix periods: a delay line of the last
  ``m`` true ``(p, v)`` (as in :mod:`quadsim.physics.sensors.mocap`); ``valid`` is False while the
  delivered value is still the initial fill of the line.
* ``σ_p = (σ_h, σ_h, σ_v)`` and ``σ_v`` are white-noise stds per fix [m, m/s] (horizontal,
  horizontal, vertical).
* ``e`` is a first-order Gauss-Markov position error (satellite geometry, atmosphere, multipath
  change over minutes), stationary std ``σ_gm = (σ_gm,h, σ_gm,h, σ_gm,v)`` and correlation
  time ``τ`` [s]: ``E[e_k e_{k+j}] = σ_gm² a^|j|``. The recursion is the **exact**
  discretisation of ``de/dt = -e/τ + σ_gm √(2/τ) w(t)`` for any ``dt``; :func:`gnss_init`
  draws ``e_0`` from the stationary law ``N(0, σ_gm²)``, so the error is stationary from the
  first fix. ``τ = 0`` gives ``a = 0``: the Gauss-Markov term is then white with std ``σ_gm``
  (its limit); ``σ_gm = 0`` (the default) means white noise only.

The total stationary position error per axis has variance ``σ_p² + σ_gm²``. Data sheets give
the horizontal accuracy as a CEP (circular error probable, the radius holding 50 % of fixes); for
a circular Gaussian with per-axis std ``σ``, ``CEP = σ √(2 ln 2) ≈ 1.1774 σ``.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
from array_api_compat import device as _device

from .._array import as_like, check_shape, namespace
from ._delay import delay_count, delay_length, delay_lines, delay_push
from ._noise import common_batch, standard_normals
from ._validate import checked_record, finite_number, sample_period
from .mocap import mocap_delay_steps

GNSS_NOISE_DIM = 9  # z[..., 0:3] position white, 3:6 velocity white, 6:9 Gauss-Markov drive
GNSS_INIT_NOISE_DIM = 3  # z[..., 0:3] initial Gauss-Markov error e_0
CEP_PER_SIGMA = math.sqrt(2.0 * math.log(2.0))  # CEP / per-axis sigma, circular Gaussian


class GnssParams(NamedTuple):
    """GNSS noise, error correlation and delay, in SI units. All fields are scalars.

    Attributes:
        pos_std_h: White position noise std per horizontal axis (east, north) [m], >= 0.
        pos_std_v: White position noise std, vertical (up) [m], >= 0.
        vel_std_h: White velocity noise std per horizontal axis [m/s], >= 0.
        vel_std_v: White velocity noise std, vertical [m/s], >= 0.
        rate: Fix rate [Hz], > 0; ``dt = 1/rate`` unless given.
        latency: Age of the delivered fix [s], >= 0, an integer number of fix periods.
        gm_std_h: Stationary std of the Gauss-Markov position error, horizontal [m], >= 0.
        gm_std_v: Stationary std of the Gauss-Markov position error, vertical [m], >= 0.
        gm_tau: Correlation time ``τ`` of the Gauss-Markov error [s], >= 0.
        name: Preset or file name.
    """

    pos_std_h: float
    pos_std_v: float
    vel_std_h: float
    vel_std_v: float
    rate: float
    latency: float = 0.0
    gm_std_h: float = 0.0
    gm_std_v: float = 0.0
    gm_tau: float = 0.0
    name: str = "custom"


class GnssState(NamedTuple):
    """Delay line of true positions and velocities (oldest first) and the Gauss-Markov error.

    Attributes:
        pos_buf: Positions [m], shape ``(..., m, 3)``.
        vel_buf: Velocities [m/s], shape ``(..., m, 3)``.
        gm_error: Gauss-Markov position error ``e_k`` [m], shape ``(..., 3)``.
        count: Integer array, shape ``()``: fixes taken so far, saturating at ``m``.
    """

    pos_buf: Any
    vel_buf: Any
    gm_error: Any
    count: Any


class GnssReading(NamedTuple):
    """One fix: ``pos`` [m] and ``vel`` [m/s] ``(..., 3)`` (world ENU), ``valid`` ``(...)``.

    ``valid`` is False for the first ``m`` fixes (the delivered value is the initial fill of the
    delay line), True once it is a state passed to :func:`gnss_measure`.
    """

    pos: Any
    vel: Any
    valid: Any


_NONNEG = ("pos_std_h", "pos_std_v", "vel_std_h", "vel_std_v", "gm_std_h", "gm_std_v", "gm_tau")


def check_gnss_params(params: GnssParams) -> GnssParams:
    """Validate ``params``; return a copy with every number a Python float.

    Raises:
        ValueError: Naming the field: a std or ``gm_tau`` < 0, a non-finite value, ``rate`` not
            > 0, or ``latency`` < 0.
    """
    return checked_record(params, GnssParams, lambda v, name: finite_number(
        v, name, nonneg=name in _NONNEG or name == "latency"))


def gnss_delay_steps(params: GnssParams, dt: float | None = None) -> int:
    """Latency in fix periods, ``m = latency/dt`` (``dt`` default ``1/params.rate``) [s].

    Raises:
        ValueError: If ``latency`` < 0 or not an integer multiple of ``dt`` (1e-9 relative).
    """
    return mocap_delay_steps(check_gnss_params(params), dt)  # type: ignore[arg-type]


def gnss_gm_coefficient(params: GnssParams, dt: float | None = None) -> float:
    """The Gauss-Markov factor ``a = exp(-dt/τ)`` (0 for ``τ = 0``) at period ``dt`` [s]."""
    p = check_gnss_params(params)
    dt = sample_period(dt, p.rate)
    return math.exp(-dt / p.gm_tau) if p.gm_tau > 0.0 else 0.0


def _vec(h: float, v: float) -> np.ndarray:
    return np.array([h, h, v], dtype=np.float64)


def gnss_init(
    pos: Any, vel: Any, params: GnssParams, noise: Any = None, dt: float | None = None
) -> GnssState:
    """Delay line filled with the initial state; Gauss-Markov error from its stationary law.

    Args:
        pos: Initial position [m], ``(..., 3)`` (the body rested or moved steadily before).
        vel: Initial velocity [m/s], ``(..., 3)``.
        params: GNSS parameters.
        noise: Generator, JAX key, torch Generator, or standard normals ``(..., 3)``
            (``GNSS_INIT_NOISE_DIM``): ``e_0 = σ_gm ⊙ z``. May be None when both ``gm_std``
            are zero (then ``e_0 = 0``).
        dt: Fix period [s], default ``1/params.rate``; ``latency/dt`` must be an integer.

    Returns:
        :class:`GnssState` with buffers ``(..., m, 3)``, ``gm_error`` ``(..., 3)`` and
        ``count = 0``; arrays follow the namespace and dtype of ``pos``.
    """
    check_shape(pos, (3,), "pos")
    check_shape(vel, (3,), "vel")
    p = check_gnss_params(params)
    m = gnss_delay_steps(p, dt)
    xp = namespace(pos, vel)
    batch = common_batch(pos, vel)
    pbuf, vbuf = delay_lines(xp, (pos, as_like(xp, vel, pos)), m, batch, pos)
    gm_std = _vec(p.gm_std_h, p.gm_std_v)
    if noise is None:
        if np.any(gm_std > 0.0):
            raise ValueError("noise is required when gm_std_h or gm_std_v is > 0")
        err = xp.zeros((*batch, 3), dtype=pos.dtype, device=_device(pos))
    else:
        z = standard_normals(noise, batch, GNSS_INIT_NOISE_DIM, xp, pos)
        err = xp.broadcast_to(as_like(xp, gm_std, pos) * z, (*batch, 3))
    # The CasADi SymbolicNamespace has no int32: its count is a plain (folded) zero.
    count = xp.zeros((), dtype=getattr(xp, "int32", None), device=_device(pos))
    return GnssState(pbuf, vbuf, err, count)


def gnss_measure(
    pos: Any,
    vel: Any,
    params: GnssParams,
    gnss_state: GnssState,
    noise: Any,
    dt: float | None = None,
) -> tuple[GnssReading, GnssState]:
    """Push the current true state, deliver the one ``m`` fixes old plus errors (pure).

    Args:
        pos: True position now [m], ``(..., 3)`` (same batch shape as the state).
        vel: True velocity now [m/s], ``(..., 3)``.
        params: GNSS parameters (the stds and ``τ``; the delay ``m`` is the state's buffer
            length).
        gnss_state: From :func:`gnss_init` or the previous call.
        noise: Generator, JAX key, torch Generator, or standard normals ``(..., 9)``
            (``GNSS_NOISE_DIM``: position white, velocity white, Gauss-Markov drive).
        dt: Fix period [s] (a Python float) for ``a = exp(-dt/τ)``, default ``1/params.rate``.

    Returns:
        ``(reading, state)``: :class:`GnssReading` and the state with ``e_{k+1}``; arrays follow
        the namespace and dtype of ``pos``.

    Raises:
        ValueError: Bad shapes (naming the argument), ``dt`` not > 0, or invalid ``params``.
    """
    check_shape(pos, (3,), "pos")
    check_shape(vel, (3,), "vel")
    p = check_gnss_params(params)
    a = gnss_gm_coefficient(p, dt)
    xp = namespace(pos, vel)
    pbuf, vbuf = gnss_state.pos_buf, gnss_state.vel_buf
    m = delay_length(pbuf, "gnss_state.pos_buf", "m")
    batch = common_batch(pos, vel)
    if tuple(pbuf.shape) != (*batch, m, 3) or tuple(vbuf.shape) != (*batch, m, 3):
        raise ValueError(
            f"gnss_state buffers must have shape {(*batch, m, 3)} for pos/vel batch shape "
            f"{batch}; got {tuple(pbuf.shape)} and {tuple(vbuf.shape)}"
        )
    err = as_like(xp, gnss_state.gm_error, pos)
    check_shape(err, (3,), "gnss_state.gm_error")
    v = as_like(xp, vel, pos)
    (p_old, v_old), (pbuf, vbuf) = delay_push(xp, (pbuf, vbuf), (pos, v), batch)
    z = standard_normals(noise, batch, GNSS_NOISE_DIM, xp, pos)
    gm_std = _vec(p.gm_std_h, p.gm_std_v)
    k = as_like(xp, np.stack((_vec(p.pos_std_h, p.pos_std_v), _vec(p.vel_std_h, p.vel_std_v),
                              gm_std * math.sqrt(1.0 - a * a))), pos)  # fmt: skip
    sp, sv, sw = k[0, :], k[1, :], k[2, :]
    p_m = p_old + err + sp * z[..., 0:3]
    v_m = v_old + sv * z[..., 3:6]
    err_next = a * err + sw * z[..., 6:9]
    valid, count = delay_count(xp, gnss_state.count, m, batch)
    return GnssReading(p_m, v_m, valid), GnssState(pbuf, vbuf, err_next, count)
