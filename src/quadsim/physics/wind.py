"""Wind: a constant mean wind plus Dryden turbulence, sampled with explicit randomness.

Frames and units: the world frame is ENU (z up); wind is a world-frame velocity in m/s and the
simulator forms drag from the air-relative velocity ``v - wind``.

**Dryden spectra** (MIL-F-8785C §3.7; MIL-HDBK-1797 App. A). Under Taylor's frozen-turbulence
hypothesis a vehicle at airspeed ``V`` sees the spatial spectra in time, ``ω = V Ω``. With
``T = L/V`` the forming filters, driven by unit-intensity white noise, are::

    H_u(s) = σ_u √(2 L_u/(π V)) / (1 + T_u s)
    H_v(s) = σ_v √(L_v/(π V)) (1 + √3 T_v s) / (1 + T_v s)²     (same form for w)

MIL-HDBK-1797 writes ``H_v, H_w`` with half length scales (``2 L``, ``2√3 L``); that is the
same model. "Unit intensity" there means a one-sided PSD of 1 per rad/s, i.e. the SDE
``dx = A x dt + B √π dW`` with a standard Wiener process ``W``. Then the stationary variance is
exactly ``σ²`` and the autocorrelations are (``τ`` the lag)::

    R_u(τ) = σ_u² exp(-τ/T_u),    R_v(τ) = σ_v² (1 - τ/(2 T_v)) exp(-τ/T_v)   (same for w)

Realisations: ``u``: ``A = -1/T, B = √π/T, C = σ √(2T/π)``; ``v, w``: ``A = [[0, 1], [-1, -2]]/T,
B = (0, √π/T), C = σ √(T/π) (1, √3)``.

**Exact discretisation** at the sample time ``dt`` (no zero-order hold of white noise, whose
variance would depend on ``dt``): ``x_{k+1} = A_d x_k + L_d n_k``, ``n_k ~ N(0, I)``, with
``A_d = expm(A dt)`` and ``L_d L_dᵀ = Q_d = ∫₀^dt e^{As} B Bᵀ e^{Aᵀs} ds``. Both have closed
forms here (a single pole for ``u``, a double pole ``-1/T`` for ``v, w``: :func:`_second_order`),
written so that they keep full relative precision for ``dt << T`` and do not overflow for
``dt >> T``; the tests check them against Van Loan's block exponential (SciPy). The stationary
covariance ``P`` solves ``A P + P Aᵀ + B Bᵀ = 0`` (``P = π/(2T)`` for ``u``, ``(π/(4T)) I``
for ``v, w``); because the discretisation is exact it also solves the discrete Lyapunov equation
``P = A_d P A_dᵀ + Q_d`` for every ``dt``, where solving the discrete form would lose
precision as ``dt → 0`` (``1 - |eig A_d|² ~ dt/T``). So for every ``dt`` the output variance
is ``σ²`` and ``R(j dt)`` is reproduced exactly at every lag. :func:`dryden_step` advances one
sample (any array backend, or CasADi); :func:`dryden_sequence` runs the same recursion over a
chunk of ``T`` samples in NumPy as one matrix product per step (what the simulator calls).

**Low-altitude parameters** (MIL-F-8785C, ``h`` in ft, valid 10 ft ≤ h ≤ 1000 ft)::

    L_w = h,  L_u = L_v = h / (0.177 + 0.000823 h)^1.2
    σ_w = 0.1 W20,  σ_u/σ_w = σ_v/σ_w = 1 / (0.177 + 0.000823 h)^0.4

``W20`` is the wind speed at 20 ft: 15 / 30 / 45 kt for light / moderate / severe turbulence.
The turbulence axes are ``u`` along the mean wind, ``v`` lateral, ``w`` vertical (up here).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from ._array import check_shape, namespace, stack, unstack

__all__ = [
    "W20_KNOTS",
    "DrydenDiscrete",
    "DrydenParams",
    "constant_wind",
    "dryden_discretize",
    "dryden_gust",
    "dryden_init",
    "dryden_low_altitude",
    "dryden_preset",
    "dryden_sequence",
    "dryden_step",
    "gust_to_world",
    "normal_noise",
]

FT = 0.3048  # m per international foot (exact)
KNOT = 1852.0 / 3600.0  # m/s per knot (exact)
W20_KNOTS = {"light": 15.0, "moderate": 30.0, "severe": 45.0}  # MIL-F-8785C low altitude
Comp = tuple[Any, ...]
Mat = tuple[tuple[float, ...], ...]


class DrydenParams(NamedTuple):
    """Dryden turbulence parameters: length scales [m], intensities [m/s], airspeed [m/s]."""

    L_u: float
    L_v: float
    L_w: float
    sigma_u: float
    sigma_v: float
    sigma_w: float
    airspeed: float


class DrydenDiscrete(NamedTuple):
    """Exact discrete-time Dryden model at sample time ``dt`` (block-diagonal u | v | w).

    Attributes:
        params: The continuous parameters.
        dt: Sample time [s].
        transition: ``A_d = expm(A dt)``, shape ``(5, 5)``.
        process_cov: ``Q_d``, shape ``(5, 5)``.
        noise_gain: Lower-triangular ``L_d`` with ``L_d L_dᵀ = Q_d``, shape ``(5, 5)``.
        output: ``C`` mapping the state to the gust (u, v, w) [m/s], shape ``(3, 5)``.
        stationary_cov: ``P = A_d P A_dᵀ + Q_d`` (= the continuous one), shape ``(5, 5)``.
        stationary_gain: Lower-triangular factor of ``P``, shape ``(5, 5)``.
    """

    params: DrydenParams
    dt: float
    transition: np.ndarray
    process_cov: np.ndarray
    noise_gain: np.ndarray
    output: np.ndarray
    stationary_cov: np.ndarray
    stationary_gain: np.ndarray


def _positive(value: float, name: str) -> float:
    v = float(value)
    if not (math.isfinite(v) and v > 0.0):
        raise ValueError(f"{name} must be a finite positive number; got {value!r}")
    return v


def dryden_low_altitude(altitude_m: float, wind20_m_s: float, airspeed_m_s: float) -> DrydenParams:
    """MIL-F-8785C low-altitude Dryden parameters (equations in the module docstring).

    Args:
        altitude_m: Height above ground [m]; clamped to the model's valid range 10..1000 ft
            (3.048..304.8 m), so lower flight uses the 10 ft scales.
        wind20_m_s: Wind speed at 20 ft (6.1 m) ``W20`` [m/s], > 0.
        airspeed_m_s: Mean airspeed ``V`` [m/s] setting the time scales ``L/V``, > 0. When
            hovering in a mean wind, use the mean wind speed.
    """
    if not (math.isfinite(float(altitude_m)) and altitude_m >= 0.0):
        raise ValueError(f"altitude_m must be finite and >= 0; got {altitude_m!r}")
    sigma_w = 0.1 * _positive(wind20_m_s, "wind20_m_s")
    h = min(max(float(altitude_m) / FT, 10.0), 1000.0)  # ft
    d, V = 0.177 + 0.000823 * h, _positive(airspeed_m_s, "airspeed_m_s")
    L_uv, sigma_uv = h / d**1.2 * FT, sigma_w / d**0.4
    return DrydenParams(L_uv, L_uv, h * FT, sigma_uv, sigma_uv, sigma_w, V)


def dryden_preset(severity: str, altitude_m: float, airspeed_m_s: float) -> DrydenParams:
    """Low-altitude parameters for ``"light"``, ``"moderate"`` or ``"severe"`` turbulence.

    ``W20`` = 15, 30, 45 kt (MIL-F-8785C); other arguments as :func:`dryden_low_altitude`.
    """
    if severity not in W20_KNOTS:
        raise ValueError(f"severity must be one of {sorted(W20_KNOTS)}; got {severity!r}")
    return dryden_low_altitude(altitude_m, W20_KNOTS[severity] * KNOT, airspeed_m_s)


def _psd_cholesky(M: np.ndarray) -> np.ndarray:
    """Lower-triangular ``L`` with ``L Lᵀ = M`` for symmetric PSD ``M`` (rank-deficient ok)."""
    M = 0.5 * (M + M.T)
    try:
        return np.linalg.cholesky(M)
    except np.linalg.LinAlgError:  # nearly singular (tiny dt): M = S Sᵀ, Sᵀ = Q R, L = Rᵀ
        w, V = np.linalg.eigh(M)
        r = np.linalg.qr((V * np.sqrt(np.clip(w, 0.0, None))).T, mode="r")
        return (r * np.where(np.diag(r) < 0, -1.0, 1.0)[:, None]).T


def _tail2(x: float) -> float:
    """``1 - e^{-x} (1 + x + x²/2)`` (x ≥ 0) to full relative precision, small ``x`` included."""
    if x >= 1.0:
        return 1.0 - math.exp(-x) * (1.0 + x + 0.5 * x * x)
    term, total = x**3 / 6.0, 0.0
    for k in range(4, 24):  # e^{-x} Σ_{k≥3} x^k/k!: the terms past k = 23 are below 1e-22
        total += term
        term *= x / k
    return math.exp(-x) * total


def _first_order(T: float, dt: float) -> tuple[np.ndarray, ...]:
    """Exact ``(A_d, Q_d, P)`` of ``A = -1/T``, ``B = √π/T`` at the sample time ``dt``."""
    h = dt / T
    c = math.pi / (2.0 * T)
    return np.array([[math.exp(-h)]]), np.array([[-c * math.expm1(-2.0 * h)]]), np.array([[c]])


def _second_order(T: float, dt: float) -> tuple[np.ndarray, ...]:
    """Exact ``(A_d, Q_d, P)`` of ``A = [[0, 1], [-1, -2]]/T``, ``B = (0, √π/T)`` at ``dt``.

    ``A`` has the double eigenvalue ``-1/T``, so ``e^{At} = e^{-u} [[1+u, u], [-u, 1-u]]`` with
    ``u = t/T`` and ``e^{As} B = (√π/T) e^{-u} (u, 1-u)``; integrating its outer product over
    ``[0, dt]`` (``h = dt/T``, ``c = π/T``): ``Q₁₁ = c t₂(2h)/4``, ``Q₁₂ = c h² e^{-2h}/2``,
    ``Q₂₂ = c (h e^{-2h} + t₂(2h)/4)`` with ``t₂`` of :func:`_tail2`; ``P = (c/4) I``.
    """
    h = dt / T
    c, e, e2, t2 = math.pi / T, math.exp(-h), math.exp(-2.0 * h), _tail2(2.0 * h)
    Ad = e * np.array([[1.0 + h, h], [-h, 1.0 - h]])
    q12 = 0.5 * c * h * h * e2
    Q = np.array([[0.25 * c * t2, q12], [q12, c * (h * e2 + 0.25 * t2)]])
    return Ad, Q, 0.25 * c * np.eye(2)


def dryden_discretize(params: DrydenParams, dt: float) -> DrydenDiscrete:
    """Exact discrete-time equivalent of the Dryden filters at sample time ``dt`` [s].

    Raises:
        ValueError: If any length scale, intensity, the airspeed or ``dt`` is not finite > 0.
    """
    p = DrydenParams(*(_positive(v, n) for v, n in zip(params, DrydenParams._fields, strict=True)))
    dt = _positive(dt, "dt")
    Ad, Qd, P, C = np.zeros((5, 5)), np.zeros((5, 5)), np.zeros((5, 5)), np.zeros((3, 5))
    T = p.L_u / p.airspeed
    Ad[:1, :1], Qd[:1, :1], P[:1, :1] = _first_order(T, dt)
    C[0, 0] = p.sigma_u * math.sqrt(2.0 * T / math.pi)
    for i, (L, s) in enumerate(((p.L_v, p.sigma_v), (p.L_w, p.sigma_w))):
        T, j = L / p.airspeed, 1 + 2 * i
        blk = slice(j, j + 2)
        Ad[blk, blk], Qd[blk, blk], P[blk, blk] = _second_order(T, dt)
        C[i + 1, blk] = s * math.sqrt(T / math.pi) * np.array([1.0, math.sqrt(3.0)])
    arrays = [Ad, Qd, _psd_cholesky(Qd), C, P, _psd_cholesky(P)]
    for a in arrays:
        a.setflags(write=False)
    return DrydenDiscrete(p, dt, *arrays)


def _mat(M: np.ndarray) -> Mat:
    return tuple(tuple(float(v) for v in row) for row in M)


def _kmatvec(M: Mat, x: Comp) -> Comp:
    """``M x`` for a constant matrix of floats, skipping exact zeros (block structure)."""
    out = []
    for row in M:
        terms = [xi * m for m, xi in zip(row, x, strict=True) if m != 0.0]
        acc = terms[0] if terms else 0.0
        for t in terms[1:]:
            acc = acc + t
        out.append(acc)
    return tuple(out)


def _kdryden_step(x: Comp, n: Comp, disc: DrydenDiscrete) -> tuple[Comp, Comp]:
    """Kernel: ``x' = A_d x + L_d n`` and the gust ``C x'`` (5 and 3 components)."""
    ax, ln = _kmatvec(_mat(disc.transition), x), _kmatvec(_mat(disc.noise_gain), n)
    x_next = tuple(a + b for a, b in zip(ax, ln, strict=True))
    return x_next, _kmatvec(_mat(disc.output), x_next)


def _kgust_to_world(ops: Any, g: Comp, d: Comp, unit: bool = False) -> Comp:
    """Kernel: rotate ``(u, v, w)`` to ENU given the mean-wind direction ``d = (dx, dy)``.

    ``unit``: ``d`` is already ``(cos, sin)`` of the direction (not normalised again).
    """
    if unit:
        c, s = d
    else:
        r = ops.sqrt(d[0] * d[0] + d[1] * d[1])
        c, s = d[0] / r, d[1] / r
    return (c * g[0] - s * g[1], s * g[0] + c * g[1], g[2])


def dryden_step(state: Any, noise: Any, disc: DrydenDiscrete) -> tuple[Any, Any]:
    """Advance the turbulence by one sample time ``disc.dt``.

    Args:
        state: Filter state, shape ``(..., 5)`` (1 for u, 2 for v, 2 for w).
        noise: Standard normal samples ``n_k``, shape ``(..., 5)``, from the caller (this
            function never draws); batch shapes broadcast.
        disc: Output of :func:`dryden_discretize`.

    Returns:
        ``(state_next, gust)``: the new state ``(..., 5)`` and the gust at the new time,
        ``(u, v, w)`` in the turbulence axes [m/s], shape ``(..., 3)``.
    """
    check_shape(state, (5,), "state")
    check_shape(noise, (5,), "noise")
    xp = namespace(state, noise)
    x, g = _kdryden_step(unstack(state), unstack(noise), disc)
    return stack(xp, x, state), stack(xp, g, state)


def dryden_sequence(state: Any, noise: Any, disc: DrydenDiscrete) -> tuple[np.ndarray, np.ndarray]:
    """Advance the turbulence over ``T`` sample times in one call (NumPy; a chunk of steps).

    The recursion of :func:`dryden_step`, ``x_{k+1} = A_d x_k + L_d n_k`` with the gust
    ``C x_{k+1}``, written as one matrix product per step over the whole batch (and one for all
    the gusts), so a chunk of ``T`` steps for many drones costs microseconds per step rather than
    a kernel evaluation per step. It equals ``T`` calls of :func:`dryden_step` to rounding: the
    products may sum their (at most five) terms in another order (about 1e-16 relative).

    Args:
        state: Filter state before the chunk, shape ``(..., 5)``.
        noise: Standard normal samples, shape ``(T, ..., 5)``, one ``n_k`` per step (from the
            caller; this function never draws).
        disc: Output of :func:`dryden_discretize`.

    Returns:
        ``(state_T, gusts)``: the state after the last step ``(..., 5)`` (the input state when
        ``T = 0``) and the gust after every step, ``(T, ..., 3)`` (u, v, w) [m/s] in the
        turbulence axes.
    """
    check_shape(state, (5,), "state")
    check_shape(noise, (5,), "noise")
    noise = np.asarray(noise, dtype=np.float64)
    A, Lg, C = disc.transition.T, disc.noise_gain.T, disc.output.T
    g = np.asarray(state, dtype=np.float64)
    states = np.empty(noise.shape)
    for i in range(noise.shape[0]):
        g = g @ A + noise[i] @ Lg
        states[i] = g
    return g, states @ C


def dryden_gust(state: Any, disc: DrydenDiscrete) -> Any:
    """Gust ``C x`` (u, v, w) [m/s], shape ``(..., 3)``, of a state ``(..., 5)``."""
    check_shape(state, (5,), "state")
    return stack(namespace(state), _kmatvec(_mat(disc.output), unstack(state)), state)


def dryden_init(disc: DrydenDiscrete, noise: Any) -> Any:
    """State drawn from the stationary distribution ``N(0, P)``: ``x₀ = chol(P) n``.

    Args:
        disc: Output of :func:`dryden_discretize`.
        noise: Standard normal samples, shape ``(..., 5)``.

    Returns:
        State of shape ``(..., 5)``; starting there the process has no transient.
    """
    check_shape(noise, (5,), "noise")
    return stack(namespace(noise), _kmatvec(_mat(disc.stationary_gain), unstack(noise)), noise)


def gust_to_world(gust: Any, mean_wind_dir_xy: Any, *, unit: bool = False) -> Any:
    """Rotate gusts from turbulence axes to ENU world axes.

    ``u`` points along the mean-wind direction ``d``, ``v`` 90° counter-clockwise from it
    (``z × d``, to the left), ``w`` is +z (up), so ``(u, v, w)`` is right-handed.

    Args:
        gust: ``(u, v, w)`` [m/s], shape ``(..., 3)``.
        mean_wind_dir_xy: Horizontal direction ``(dx, dy)`` the mean wind blows toward, shape
            ``(..., 2)``; normalised here (must be nonzero).
        unit: ``mean_wind_dir_xy`` is already a unit vector ``(cos, sin)`` (e.g. normalised once
            for many calls); it is used as it is.

    Returns:
        World-frame gust velocity [m/s], shape ``(..., 3)``.
    """
    check_shape(gust, (3,), "gust")
    check_shape(mean_wind_dir_xy, (2,), "mean_wind_dir_xy")
    if isinstance(gust, np.ndarray) and isinstance(mean_wind_dir_xy, np.ndarray):
        xp = np  # the same functions, without the namespace look-up (a per-step cost)
    else:
        xp = namespace(gust, mean_wind_dir_xy)
    return stack(xp, _kgust_to_world(xp, unstack(gust), unstack(mean_wind_dir_xy), unit), gust)


def constant_wind(speed_m_s: float, direction_deg: float = 0.0) -> np.ndarray:
    """Constant horizontal world wind, shape ``(3,)`` [m/s].

    Convention: ``direction_deg`` is the direction the wind blows TOWARD, counter-clockwise
    from east (+x): 0° blows toward +x (east), 90° toward +y (north). (Meteorological reports
    give the direction the wind comes FROM, clockwise from north: convert before use.)

    Args:
        speed_m_s: Wind speed [m/s], finite and >= 0.
        direction_deg: Direction the wind blows toward [deg], CCW from +x.
    """
    if not (math.isfinite(float(speed_m_s)) and speed_m_s >= 0.0 and math.isfinite(direction_deg)):
        raise ValueError(
            f"need finite speed_m_s >= 0 and direction_deg; got {speed_m_s!r}, {direction_deg!r}"
        )
    a = math.radians(direction_deg)
    return np.array([speed_m_s * math.cos(a), speed_m_s * math.sin(a), 0.0])


def normal_noise(rng_or_key: Any, shape: tuple[int, ...], xp: Any = None, dtype: Any = None) -> Any:
    """Standard normal samples from an explicit generator (never a global RNG).

    Args:
        rng_or_key: A ``numpy.random.Generator``, a JAX PRNG key or a ``torch.Generator``.
        shape: Output shape, e.g. ``(batch, 5)``.
        xp: Only for a NumPy Generator: namespace to convert the samples to (default NumPy).
        dtype: Floating dtype (default float64 for NumPy, the backend default otherwise).

    Returns:
        Array of ``shape``; the same generator state or key gives bitwise the same numbers.
    """
    shape = tuple(int(s) for s in shape)
    if isinstance(rng_or_key, np.random.Generator):
        out = rng_or_key.standard_normal(shape)
        return out if xp is None and dtype is None else (xp or np).asarray(out, dtype=dtype)
    mod = type(rng_or_key).__module__
    if mod.startswith("torch"):
        import torch

        return torch.randn(shape, generator=rng_or_key, dtype=dtype, device=rng_or_key.device)
    if mod.startswith(("jax", "jaxlib")):
        import jax

        kw = {} if dtype is None else {"dtype": dtype}
        return jax.random.normal(rng_or_key, shape, **kw)
    raise TypeError(
        "rng_or_key must be a numpy.random.Generator, a JAX PRNG key or a torch.Generator; got "
        f"{type(rng_or_key).__name__} (e.g. use numpy.random.default_rng(seed))"
    )
