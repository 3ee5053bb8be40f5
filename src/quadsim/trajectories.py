"""Reference trajectories: hover, step, circle, lemniscate and minimum-snap polynomials.

A trajectory is an immutable callable ``traj(t) -> Reference`` giving the flat outputs of a
quadrotor (position and its first four derivatives, yaw and yaw rate) at time ``t`` [s], a
Python number or an array of shape ``(...)``; vector fields have shape ``(..., 3)`` [m, m/s,
m/s², m/s³, m/s⁴] in the world frame (ENU), yaw fields shape ``(...)`` [rad, rad/s]. Every
derivative field is the exact analytic derivative of the field above it. ``traj.duration`` [s]
is the time after which the reference stays constant (``math.inf`` for periodic ones).
:class:`Hover`, :class:`Step`, :class:`Circle`, :class:`Lemniscate` and :class:`MinSnap` accept
NumPy, JAX, PyTorch or any array-API ``t`` (one code path), so they can be jitted.

**Hover**: ``p(t) = p₀``, ``ψ(t) = ψ₀``.

**Step** at ``t_s`` from ``a`` to ``b``: ``p(t) = a + (b - a) σ((t - t_s)/t_r)`` with the C⁴
smoothstep ``σ(τ) = 126τ⁵ - 420τ⁶ + 540τ⁷ - 315τ⁸ + 70τ⁹`` on ``[0, 1]`` (``σ' = 630 τ⁴(1-τ)⁴``;
0 before, 1 after). With ``t_r = 0`` (the default) the step is a true discontinuity and all
derivative fields are zero.

**Phase ramp** (circle, lemniscate): the motion runs on a warped time ``φ(t)`` with
``φ = t`` for ``ramp_time = 0`` (the default, constant speed from ``t = 0``) or, for
``T_r > 0``, ``φ' = σ(t/T_r)`` clipped to [0, 1], i.e. ``φ = T_r Σ(t/T_r)`` on ``[0, T_r]``
with ``Σ(τ) = ∫₀^τ σ = 21τ⁶ - 60τ⁷ + 67.5τ⁸ - 35τ⁹ + 7τ¹⁰``, ``φ = 0`` for ``t < 0`` and
``φ = t - T_r/2`` after the ramp. The vehicle starts from rest (all derivatives zero), the
speed ramps up with continuous snap, and from ``T_r`` on it is the nominal one.

**Circle** in the horizontal plane: ``θ = θ₀ + ω φ(t)``, ``ω = v/R``,
``p = c + R (cos θ, sin θ, 0)``; ``|v| = |ω| R φ'``, ``|a| = ω² R`` at constant speed. The
sign of ``v`` sets the direction (positive: counter-clockwise seen from above). Derivatives use
``dᵏ/dtᵏ e^{iθ} = (a_k + i b_k) e^{iθ}`` with ``a₁ + i b₁ = i θ'``,
``a₂ + i b₂ = -θ'² + i θ''``, ``a₃ + i b₃ = -3θ'θ'' + i(θ''' - θ'³)``,
``a₄ + i b₄ = θ'⁴ - 4θ'θ''' - 3θ''² + i(θ'''' - 6θ'²θ'')``.

**Lemniscate** of Gerono (figure eight, not Bernoulli's): ``θ = 2π φ(t)/P``,
``p = c + s (sin θ, sin θ cos θ, 0) = c + s (sin θ, ½ sin 2θ, 0)``; it spans ``2s × s``, passes
through ``c`` at ``θ = 0`` and ``π`` and has period ``P``. Given a mean speed ``v̄`` instead,
``P = ℓ/v̄`` with the perimeter ``ℓ = s ∫₀^{2π} √(cos²θ + cos²2θ) dθ ≈ 6.0972 s``.

**Tangent yaw** (``yaw_mode="tangent"``): ``ψ = atan2(y_θ, x_θ) + ψ_offset`` along the
geometric tangent ``(x_θ, y_θ) = dp/dθ`` (which never vanishes, so yaw is defined at rest),
``ψ' = θ' (x_θ y_θθ - y_θ x_θθ)/(x_θ² + y_θ²)``; for the circle ``ψ = θ ± π/2`` (the sign of
``v``). Tangent yaw is wrapped to ``[-π, π)``; ``yaw_rate`` is the derivative of the
unwrapped angle.

**Minimum snap** through waypoints ``w₀ … w_{K-1}`` at knot times ``t₀ = 0 < t₁ < … < t_{K-1}
= T`` (``T_i = t_{i+1} - t_i``): each coordinate ``x`` (and yaw) minimises
``J = ∫₀^T (x⁽⁴⁾)² dt`` subject to ``x(t_i) = w_i`` and rest at both ends,
``x' = x'' = x''' = 0`` at ``0`` and ``T``. The Euler-Lagrange equation ``x⁽⁸⁾ = 0`` makes each
segment a 7th-order polynomial; the natural conditions at the (free-derivative) interior knots
make ``x', …, x⁽⁶⁾`` continuous there (``x⁽⁷⁾`` jumps). That is ``2M + 6 + 6(M-1) = 8M``
linear equations for the ``8M`` coefficients of ``M = K - 1`` segments: the closed-form
optimum, one sparse solve (SciPy SuperLU) for all coordinates at once. Segment ``i`` is stored
in normalised time ``s = (t - t_i)/T_i`` as ``Σ_j c_ij s^j``. Outside ``[0, T]`` the reference
holds the end point at rest.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from array_api_compat import is_array_api_obj

from ._array import as_like, namespace

__all__ = [
    "Circle",
    "Hover",
    "Lemniscate",
    "MinSnap",
    "Reference",
    "Step",
    "allocate_times",
    "gerono_perimeter",
]


class Reference(NamedTuple):
    """Flat-output reference at time ``t`` (ENU world frame).

    Attributes:
        pos: Position, shape (..., 3) [m].
        vel: Velocity, shape (..., 3) [m/s].
        acc: Acceleration, shape (..., 3) [m/s^2].
        jerk: Jerk, shape (..., 3) [m/s^3].
        snap: Snap, shape (..., 3) [m/s^4].
        yaw: Yaw angle, shape (...) [rad].
        yaw_rate: Yaw rate, shape (...) [rad/s].
    """

    pos: Any
    vel: Any
    acc: Any
    jerk: Any
    snap: Any
    yaw: Any
    yaw_rate: Any


# C⁴ smoothstep σ (zero 1st-4th derivatives at 0 and 1) and its integral Σ, ascending powers.
_SMOOTH = (0.0, 0.0, 0.0, 0.0, 0.0, 126.0, -420.0, 540.0, -315.0, 70.0)
_SMOOTH_INT = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 21.0, -60.0, 67.5, -35.0, 7.0)
_YAW_MODES = ("fixed", "tangent")


# --------------------------------------------------------------------------- validation


def _number(owner: str, name: str, value: Any, *, positive: bool = False) -> float:
    """``value`` as a finite float (``> 0`` if ``positive``), else a ValueError naming it."""
    want = "a finite number > 0" if positive else "a finite number"
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{owner}: {name} must be {want}; got {value!r}") from None
    if not math.isfinite(x) or (positive and x <= 0.0):
        raise ValueError(f"{owner}: {name} must be {want}; got {value!r}")
    return x


def _nonneg(owner: str, name: str, value: Any) -> float:
    x = _number(owner, name, value)
    if x < 0.0:
        raise ValueError(f"{owner}: {name} must be a finite number >= 0; got {value!r}")
    return x


def _array(
    owner: str, name: str, value: Any, shape: tuple[int | None, ...], hint: str = ""
) -> np.ndarray:
    """``value`` as a finite, read-only float64 array of ``shape`` (``None``: any length)."""
    want = "(" + ", ".join("K" if d is None else str(d) for d in shape)
    want += (",)" if len(shape) == 1 else ")") + hint
    try:
        a = np.array(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(
            f"{owner}: {name} must be numbers of shape {want}; got {value!r}"
        ) from None
    if a.ndim != len(shape) or any(
        d is not None and d != n for d, n in zip(shape, a.shape, strict=True)
    ):
        raise ValueError(f"{owner}: {name} must have shape {want}; got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{owner}: {name} must be finite; got {value!r}")
    a.setflags(write=False)
    return a


def _vec3(owner: str, name: str, value: Any) -> tuple[float, float, float]:
    a = _array(owner, name, value, (3,))
    return (float(a[0]), float(a[1]), float(a[2]))


def _yaw_mode(owner: str, value: Any) -> str:
    if value not in _YAW_MODES:
        raise ValueError(f"{owner}: yaw_mode must be one of {_YAW_MODES}; got {value!r}")
    return value


def _set(obj: Any, **values: Any) -> None:
    for k, v in values.items():
        object.__setattr__(obj, k, v)


# --------------------------------------------------------------------------- array helpers


def _as_time(t: Any) -> tuple[Any, Any]:
    """Namespace and floating array for ``t`` (Python numbers and lists become float64 NumPy)."""
    if isinstance(t, np.generic) or not is_array_api_obj(t):
        t = np.asarray(t, dtype=np.float64)
    xp = namespace(t)
    if not xp.isdtype(t.dtype, "real floating"):
        t = xp.astype(t, xp.float64)
    return xp, t


def _full(xp: Any, value: Any, t: Any) -> Any:
    """``value`` (array or Python number) broadcast to the shape, dtype and device of ``t``."""
    return value + xp.zeros_like(t)


def _vec(xp: Any, comps: Sequence[Any], t: Any) -> Any:
    return xp.stack([_full(xp, c, t) for c in comps], axis=-1)


def _poly_derivs(coefs: Sequence[float], x: Any, n: int) -> list[Any]:
    """Values of a polynomial (ascending ``coefs``) and its first ``n`` derivatives at ``x``."""
    out = []
    c = list(coefs)
    for _ in range(n + 1):
        acc: Any = 0.0
        for a in reversed(c):
            acc = acc * x + a
        out.append(acc)
        c = [j * c[j] for j in range(1, len(c))]
    return out


def _warped_time(xp: Any, t: Any, ramp: float) -> list[Any]:
    """Warped time ``φ`` and its first four derivatives (see the module docstring)."""
    if ramp == 0.0:
        return [t, 1.0, 0.0, 0.0, 0.0]
    tau = xp.clip(t / ramp, 0.0, 1.0)
    s = _poly_derivs(_SMOOTH, tau, 3)
    phi = ramp * _poly_derivs(_SMOOTH_INT, tau, 0)[0] + xp.clip(t - ramp, min=0.0)
    return [phi, s[0], s[1] / ramp, s[2] / ramp**2, s[3] / ramp**3]


def _expi_derivs(xp: Any, th: Sequence[Any]) -> tuple[list[Any], list[Any]]:
    """Derivatives 0-4 of ``cos θ`` and ``sin θ`` for ``θ(t)`` with derivatives ``th[0..4]``."""
    t0, t1, t2, t3, t4 = th
    c, s = xp.cos(t0), xp.sin(t0)
    ab = [
        (1.0, 0.0),
        (0.0, t1),
        (-t1 * t1, t2),
        (-3.0 * t1 * t2, t3 - t1**3),
        (t1**4 - 4.0 * t1 * t3 - 3.0 * t2 * t2, t4 - 6.0 * t1 * t1 * t2),
    ]
    return [a * c - b * s for a, b in ab], [a * s + b * c for a, b in ab]


def _wrap(xp: Any, angle: Any) -> Any:
    """Angle wrapped to [-π, π)."""
    return angle - (2.0 * math.pi) * xp.floor((angle + math.pi) / (2.0 * math.pi))


def _planar(xp: Any, t: Any, center: Sequence[float], x: list[Any], y: list[Any]) -> list[Any]:
    """Five (..., 3) fields from derivative lists of the x and y offsets (z constant)."""
    out = [_vec(xp, (center[0] + x[0], center[1] + y[0], center[2]), t)]
    out += [_vec(xp, (x[k], y[k], 0.0), t) for k in range(1, 5)]
    return out


# --------------------------------------------------------------------------- trajectories


@dataclass(frozen=True)
class Hover:
    """Hold a position and heading.

    Attributes:
        pos: Position, 3 numbers [m].
        yaw: Heading [rad].
        duration: 0.0 (the reference is constant from the start).
    """

    pos: tuple[float, float, float] = (0.0, 0.0, 1.0)
    yaw: float = 0.0

    def __post_init__(self) -> None:
        _set(self, pos=_vec3("Hover", "pos", self.pos), yaw=_number("Hover", "yaw", self.yaw))

    @property
    def duration(self) -> float:
        """Time after which the reference is constant [s]."""
        return 0.0

    def __call__(self, t: Any) -> Reference:
        """Reference at time ``t`` [s], shape (...): fields (..., 3) and (...)."""
        xp, t = _as_time(t)
        zero = _vec(xp, (0.0, 0.0, 0.0), t)
        return Reference(
            _vec(xp, self.pos, t), zero, zero, zero, zero, _full(xp, self.yaw, t), _full(xp, 0.0, t)
        )


@dataclass(frozen=True)
class Step:
    """Position (and optionally yaw) step from ``start`` to ``end`` at ``t_step``.

    With ``rise_time = 0`` the step is discontinuous: ``pos`` jumps at ``t_step`` (``end`` for
    ``t >= t_step``) and vel, acc, jerk, snap and yaw_rate are zero everywhere (not the Dirac
    derivatives). With ``rise_time > 0`` the transition follows the C⁴ smoothstep over
    ``[t_step, t_step + rise_time]`` (rest to rest, continuous snap).

    Attributes:
        start: Initial position, 3 numbers [m].
        end: Final position, 3 numbers [m].
        t_step: Step time [s].
        rise_time: Duration of the smooth transition [s], 0 for a discontinuous step.
        yaw: Initial heading [rad].
        end_yaw: Final heading [rad]; ``None`` keeps ``yaw``.
    """

    start: tuple[float, float, float] = (0.0, 0.0, 1.0)
    end: tuple[float, float, float] = (1.0, 0.0, 1.0)
    t_step: float = 1.0
    rise_time: float = 0.0
    yaw: float = 0.0
    end_yaw: float | None = None

    def __post_init__(self) -> None:
        o = "Step"
        yaw = _number(o, "yaw", self.yaw)
        _set(
            self,
            start=_vec3(o, "start", self.start),
            end=_vec3(o, "end", self.end),
            t_step=_number(o, "t_step", self.t_step),
            rise_time=_nonneg(o, "rise_time", self.rise_time),
            yaw=yaw,
            end_yaw=yaw if self.end_yaw is None else _number(o, "end_yaw", self.end_yaw),
        )

    @property
    def duration(self) -> float:
        """Time after which the reference is constant [s]: ``t_step + rise_time``."""
        return self.t_step + self.rise_time

    def __call__(self, t: Any) -> Reference:
        """Reference at time ``t`` [s], shape (...): fields (..., 3) and (...)."""
        xp, t = _as_time(t)
        if self.rise_time == 0.0:
            sig = [xp.astype(t >= self.t_step, t.dtype), 0.0, 0.0, 0.0, 0.0]
        else:
            tr = self.rise_time
            tau = xp.clip((t - self.t_step) / tr, 0.0, 1.0)
            sig = [d / tr**k for k, d in enumerate(_poly_derivs(_SMOOTH, tau, 4))]
        a, b = self.start, self.end
        fields = [_vec(xp, [a[i] + (b[i] - a[i]) * sig[0] for i in range(3)], t)]
        fields += [_vec(xp, [(b[i] - a[i]) * sig[k] for i in range(3)], t) for k in range(1, 5)]
        dyaw = self.end_yaw - self.yaw
        return Reference(
            *fields, _full(xp, self.yaw + dyaw * sig[0], t), _full(xp, dyaw * sig[1], t)
        )


@dataclass(frozen=True)
class Circle:
    """Horizontal circle at constant speed (optionally after a smooth speed ramp).

    Attributes:
        radius: Radius R [m], > 0.
        speed: Tangential speed v [m/s]; its sign is the direction (+: counter-clockwise).
        center: Centre, 3 numbers [m]; the circle lies in the plane z = center[2].
        yaw_mode: ``"fixed"`` (heading ``yaw``) or ``"tangent"`` (face the velocity, plus
            ``yaw`` as an offset).
        yaw: Fixed heading or offset [rad].
        start_angle: Phase θ₀ at t = 0 [rad] (0: start at center + (R, 0, 0)).
        ramp_time: Duration of the smooth speed ramp from rest [s]; 0 (default): constant
            speed from t = 0.
    """

    radius: float = 1.0
    speed: float = 1.0
    center: tuple[float, float, float] = (0.0, 0.0, 1.0)
    yaw_mode: str = "fixed"
    yaw: float = 0.0
    start_angle: float = 0.0
    ramp_time: float = 0.0

    def __post_init__(self) -> None:
        o = "Circle"
        _set(
            self,
            radius=_number(o, "radius", self.radius, positive=True),
            speed=_number(o, "speed", self.speed),
            center=_vec3(o, "center", self.center),
            yaw_mode=_yaw_mode(o, self.yaw_mode),
            yaw=_number(o, "yaw", self.yaw),
            start_angle=_number(o, "start_angle", self.start_angle),
            ramp_time=_nonneg(o, "ramp_time", self.ramp_time),
        )

    @property
    def duration(self) -> float:
        """``math.inf`` (periodic)."""
        return math.inf

    @property
    def omega(self) -> float:
        """Angular rate ω = v/R at full speed [rad/s]."""
        return self.speed / self.radius

    @property
    def period(self) -> float:
        """Period 2πR/|v| at full speed [s] (``math.inf`` for v = 0)."""
        return math.inf if self.speed == 0.0 else 2.0 * math.pi * self.radius / abs(self.speed)

    def __call__(self, t: Any) -> Reference:
        """Reference at time ``t`` [s], shape (...): fields (..., 3) and (...)."""
        xp, t = _as_time(t)
        phi = _warped_time(xp, t, self.ramp_time)
        w = self.omega
        th = [self.start_angle + w * phi[0]] + [w * p for p in phi[1:]]
        cos_d, sin_d = _expi_derivs(xp, th)
        r = self.radius
        fields = _planar(xp, t, self.center, [r * c for c in cos_d], [r * s for s in sin_d])
        if self.yaw_mode == "fixed":
            yaw, rate = _full(xp, self.yaw, t), _full(xp, 0.0, t)
        else:
            side = math.pi / 2 if self.speed >= 0.0 else -math.pi / 2
            yaw, rate = _wrap(xp, th[0] + (side + self.yaw)), _full(xp, th[1], t)
        return Reference(*fields, yaw, rate)


def gerono_perimeter(size: float = 1.0) -> float:
    """Arc length of one period of the Gerono lemniscate ``(s sin θ, ½ s sin 2θ)`` [m].

    The integrand is smooth, positive and periodic, so the trapezoidal rule is spectrally
    accurate.
    """
    th = np.linspace(0.0, 2.0 * np.pi, 2048, endpoint=False)
    ds = np.sqrt(np.cos(th) ** 2 + np.cos(2.0 * th) ** 2)
    return float(size * 2.0 * np.pi * ds.mean())


@dataclass(frozen=True)
class Lemniscate:
    """Horizontal figure eight: the lemniscate of Gerono (see the module docstring).

    ``p = center + size (sin θ, sin θ cos θ, 0)``, ``θ = 2π φ(t)/period``: the curve spans
    ``2 size`` along x and ``size`` along y, starts at ``center`` heading along
    (1, 1, 0)/√2, and the speed varies along it. Give exactly one of ``period`` and ``speed``;
    the other is filled in (``speed`` is the mean speed, perimeter/period).

    Attributes:
        size: Half-width s [m], > 0.
        period: Period P at full speed [s], > 0.
        speed: Mean speed over a period [m/s], > 0.
        center: Centre (the crossing point), 3 numbers [m].
        yaw_mode: ``"fixed"`` (heading ``yaw``) or ``"tangent"`` (face along the path, plus
            ``yaw`` as an offset).
        yaw: Fixed heading or offset [rad].
        ramp_time: Duration of the smooth ramp from rest [s]; 0 (default): full speed at t = 0.
    """

    size: float = 1.0
    period: float | None = None
    speed: float | None = None
    center: tuple[float, float, float] = (0.0, 0.0, 1.0)
    yaw_mode: str = "fixed"
    yaw: float = 0.0
    ramp_time: float = 0.0

    def __post_init__(self) -> None:
        o = "Lemniscate"
        size = _number(o, "size", self.size, positive=True)
        if (self.period is None) == (self.speed is None):
            raise ValueError(
                f"{o}: give exactly one of period and speed; got period={self.period!r}, "
                f"speed={self.speed!r}"
            )
        perimeter = gerono_perimeter(size)
        if self.period is not None:
            period = _number(o, "period", self.period, positive=True)
            speed = perimeter / period
        else:
            speed = _number(o, "speed", self.speed, positive=True)
            period = perimeter / speed
        _set(
            self,
            size=size,
            period=period,
            speed=speed,
            center=_vec3(o, "center", self.center),
            yaw_mode=_yaw_mode(o, self.yaw_mode),
            yaw=_number(o, "yaw", self.yaw),
            ramp_time=_nonneg(o, "ramp_time", self.ramp_time),
        )

    @property
    def duration(self) -> float:
        """``math.inf`` (periodic)."""
        return math.inf

    def __call__(self, t: Any) -> Reference:
        """Reference at time ``t`` [s], shape (...): fields (..., 3) and (...)."""
        xp, t = _as_time(t)
        phi = _warped_time(xp, t, self.ramp_time)
        w = 2.0 * math.pi / self.period
        th = [w * p for p in phi]
        cos1, sin1 = _expi_derivs(xp, th)
        _, sin2 = _expi_derivs(xp, [2.0 * p for p in th])
        s = self.size
        fields = _planar(xp, t, self.center, [s * v for v in sin1], [0.5 * s * v for v in sin2])
        if self.yaw_mode == "fixed":
            yaw, rate = _full(xp, self.yaw, t), _full(xp, 0.0, t)
        else:
            c1, s1, c2 = cos1[0], sin1[0], xp.cos(2.0 * th[0])
            s2 = 2.0 * s1 * c1
            # (x_θ, y_θ) = s (cos θ, cos 2θ), (x_θθ, y_θθ) = s (-sin θ, -2 sin 2θ)
            curl = (s1 * c2 - 2.0 * c1 * s2) / (c1 * c1 + c2 * c2)
            yaw = _wrap(xp, xp.atan2(c2, c1) + self.yaw)
            rate = _full(xp, th[1] * curl, t)
        return Reference(*fields, yaw, rate)


# --------------------------------------------------------------------------- minimum snap


def allocate_times(
    waypoints: Any, *, speed: float | None = None, total_time: float | None = None
) -> np.ndarray:
    """Segment durations proportional to the segment lengths.

    Args:
        waypoints: Waypoints, shape (K, 3) [m], K >= 2, consecutive ones distinct.
        speed: Nominal mean speed [m/s]: ``T_i = |w_{i+1} - w_i| / speed``.
        total_time: Total time [s]: ``T_i = total_time |w_{i+1} - w_i| / Σ|Δw|``.
            Give exactly one of ``speed`` and ``total_time``.

    Returns:
        Durations, shape (K-1,) [s]. (Min-snap starts and ends at rest, so its peak speed is
        above the mean speed.)
    """
    o = "allocate_times"
    w = _array(o, "waypoints", waypoints, (None, 3))
    if w.shape[0] < 2:
        raise ValueError(f"{o}: waypoints must have shape (K, 3) with K >= 2; got {w.shape}")
    if (speed is None) == (total_time is None):
        raise ValueError(
            f"{o}: give exactly one of speed and total_time; got speed={speed!r}, "
            f"total_time={total_time!r}"
        )
    lengths = np.linalg.norm(np.diff(w, axis=0), axis=1)
    if np.any(lengths == 0.0):
        i = int(np.argmin(lengths))
        raise ValueError(
            f"{o}: waypoints {i} and {i + 1} coincide, so length-based allocation gives a zero "
            "duration; pass durations explicitly"
        )
    if speed is not None:
        return lengths / _number(o, "speed", speed, positive=True)
    return lengths * (_number(o, "total_time", total_time, positive=True) / lengths.sum())


def _min_snap_coeffs(durations: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Normalised-time coefficients (M, 8, m) of the min-snap spline through ``values`` (K, m)."""
    M = durations.shape[0]
    fact = [math.factorial(j) for j in range(8)]
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    rhs = np.zeros((8 * M, values.shape[1]))
    r = 0

    def put(seg: int, k: int, at_end: bool, scale: float) -> None:
        # k-th derivative w.r.t. s at s = 1 (sum over j >= k) or s = 0 (only j = k).
        for j in range(k, 8) if at_end else (k,):
            rows.append(r)
            cols.append(8 * seg + j)
            vals.append(scale * fact[j] / fact[j - k])

    for i in range(M):
        put(i, 0, False, 1.0)
        rhs[r] = values[i]
        r += 1
        put(i, 0, True, 1.0)
        rhs[r] = values[i + 1]
        r += 1
    for k in (1, 2, 3):  # rest at both ends (rows scaled by T^k)
        put(0, k, False, 1.0)
        r += 1
        put(M - 1, k, True, 1.0)
        r += 1
    for i in range(M - 1):  # continuity of derivatives 1-6 at interior knots
        h = math.sqrt(durations[i] * durations[i + 1])
        for k in range(1, 7):
            put(i, k, True, (h / durations[i]) ** k)
            put(i + 1, k, False, -((h / durations[i + 1]) ** k))
            r += 1
    A = sp.csc_matrix((vals, (rows, cols)), shape=(8 * M, 8 * M))
    sol = spla.splu(A).solve(rhs)
    if not np.all(np.isfinite(sol)):
        raise ValueError("MinSnap: the linear system is singular (check the durations)")
    return sol.reshape(M, 8, values.shape[1])


@dataclass(frozen=True, eq=False)
class MinSnap:
    """Minimum-snap piecewise 7th-order polynomial through waypoints, rest to rest.

    Solves the unconstrained closed-form problem of the module docstring (one sparse solve,
    no QP). Durations are given, or allocated proportionally to the segment lengths from a
    nominal ``speed`` or a ``total_time`` (:func:`allocate_times`). Yaw is interpolated by the
    same min-snap spline through ``yaw`` waypoints taken as given (no wrapping: unwrap them,
    e.g. with ``numpy.unwrap``, for shortest turns). Before 0 the reference holds the first
    waypoint and after ``duration`` the last, at rest.

    Attributes:
        waypoints: Waypoints, shape (K, 3) [m], K >= 2.
        durations: Segment durations, shape (K-1,) [s], > 0 (filled in when allocated).
        speed: Nominal mean speed for the allocation [m/s] (keyword only).
        total_time: Total time for the allocation [s] (keyword only).
        yaw: Heading waypoints, shape (K,) [rad], or one number for a constant heading.
        knots: Waypoint times, shape (K,) [s], from 0 to ``duration``.
        duration: Total time T [s].
        coeffs: Coefficients, shape (K-1, 8, 4): segment, power of ``s = (t - t_i)/T_i``,
            column (x, y, z, yaw).
    """

    waypoints: Any
    durations: Any = None
    speed: float | None = field(default=None, kw_only=True)
    total_time: float | None = field(default=None, kw_only=True)
    yaw: Any = field(default=0.0, kw_only=True)
    knots: np.ndarray = field(init=False, repr=False)
    duration: float = field(init=False)
    coeffs: np.ndarray = field(init=False, repr=False)
    _table: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        o = "MinSnap"
        w = _array(o, "waypoints", self.waypoints, (None, 3))
        K = w.shape[0]
        if K < 2:
            raise ValueError(f"{o}: waypoints must have shape (K, 3) with K >= 2; got {w.shape}")
        if self.durations is None:
            if self.speed is None and self.total_time is None:
                raise ValueError(f"{o}: give durations, speed or total_time; got none of them")
            d = allocate_times(w, speed=self.speed, total_time=self.total_time)
        else:
            if self.speed is not None or self.total_time is not None:
                raise ValueError(
                    f"{o}: give durations or (speed or total_time), not both; got "
                    f"speed={self.speed!r}, total_time={self.total_time!r} with durations"
                )
            d = np.array(
                _array(o, "durations", self.durations, (K - 1,), f" (K-1 for K={K} waypoints)")
            )
            if np.any(d <= 0.0):
                raise ValueError(f"{o}: durations must be > 0; got {d.tolist()}")
        d.setflags(write=False)
        if np.ndim(self.yaw) == 0:
            yaw = np.full(K, _number(o, "yaw", self.yaw))
            yaw.setflags(write=False)
        else:
            yaw = _array(o, "yaw", self.yaw, (K,), " (one per waypoint)")
        coeffs = _min_snap_coeffs(d, np.concatenate([w, yaw[:, None]], axis=1))
        # table[i, k, p, :] = d^k/dt^k coefficient of s^p: c_{p+k} (p+k)!/p! / T_i^k
        table = np.zeros((K - 1, 8, 8, 4))
        for k in range(8):
            for p in range(8 - k):
                scale = math.factorial(p + k) / math.factorial(p) / d[:, None] ** k
                table[:, k, p, :] = coeffs[:, p + k, :] * scale
        knots = np.concatenate([[0.0], np.cumsum(d)])
        for a in (coeffs, table, knots):
            a.setflags(write=False)
        _set(
            self,
            waypoints=w,
            durations=d,
            yaw=yaw,
            knots=knots,
            duration=float(knots[-1]),
            coeffs=coeffs,
            _table=table,
        )

    def derivative(self, t: Any, order: int) -> Any:
        """``order``-th time derivative (0-7) of (x, y, z, yaw) at ``t`` [s], shape (..., 4).

        Units m/sᵏ and rad/sᵏ. Zero outside [0, T] for ``order >= 1``. At an interior knot the
        segment that starts there is used (only ``order = 7`` differs between the two sides).
        """
        if order not in range(8):
            raise ValueError(f"MinSnap.derivative: order must be an integer in 0..7; got {order!r}")
        return self._evaluate(t, (order,))[0]

    def snap_cost(self) -> float:
        """Exact cost ``∫₀^T ‖p⁽⁴⁾‖² dt`` of the position (x, y, z) [m² s⁻⁷]."""
        p = np.arange(8)
        hilbert = 1.0 / (p[:, None] + p[None, :] + 1.0)
        a = self._table[:, 4, :, :3]  # (M, 8, 3)
        per_seg = np.einsum("ipa,pq,iqa->i", a, hilbert, a)
        return float(np.sum(per_seg * self.durations))

    def _evaluate(self, t: Any, orders: Sequence[int]) -> list[Any]:
        xp, t = _as_time(t)
        shape = tuple(t.shape)
        flat = xp.reshape(t, (-1,))
        M = self.durations.shape[0]
        tc = xp.clip(flat, 0.0, self.duration)
        ends = as_like(xp, self.knots[1:], flat)
        idx = xp.clip(xp.searchsorted(ends, tc, side="right"), 0, M - 1)
        t0 = xp.take(as_like(xp, self.knots[:-1], flat), idx, axis=0)
        dt = xp.take(as_like(xp, self.durations, flat), idx, axis=0)
        s = (tc - t0) / dt
        powers = xp.stack([s**p for p in range(8)], axis=-1)  # (n, 8)
        table = np.ascontiguousarray(self._table[:, list(orders)]).reshape(M, -1)
        rows = xp.take(as_like(xp, table, flat), idx, axis=0)
        rows = xp.reshape(rows, (-1, len(orders), 8, 4))
        vals = xp.sum(rows * powers[:, None, :, None], axis=2)  # (n, orders, 4)
        inside = xp.astype(xp.logical_and(flat >= 0.0, flat <= self.duration), flat.dtype)
        out = []
        for i, k in enumerate(orders):
            v = vals[:, i, :] if k == 0 else vals[:, i, :] * inside[:, None]
            out.append(xp.reshape(v, (*shape, 4)))
        return out

    def __call__(self, t: Any) -> Reference:
        """Reference at time ``t`` [s], shape (...): fields (..., 3) and (...)."""
        d = self._evaluate(t, range(5))
        return Reference(*[v[..., :3] for v in d], d[0][..., 3], d[1][..., 3])
