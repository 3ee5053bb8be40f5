"""Periodic references: circle and lemniscate of Gerono, with an optional speed ramp.

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
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .reference import (
    SMOOTH_INT,
    Reference,
    as_time,
    check_yaw_mode,
    finite_number,
    finite_vec3,
    full_like,
    nonneg_number,
    poly_derivs,
    set_frozen,
    smoothstep,
    vec_like,
)


def _warped_time(xp: Any, t: Any, ramp: float) -> list[Any]:
    """Warped time ``φ`` and its first four derivatives (see the module docstring)."""
    if ramp == 0.0:
        return [t, 1.0, 0.0, 0.0, 0.0]
    tau = xp.clip(t / ramp, 0.0, 1.0)
    phi = ramp * poly_derivs(SMOOTH_INT, tau, 0)[0] + xp.clip(t - ramp, min=0.0)
    return [phi, *smoothstep(tau, ramp, 3)]


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
    out = [vec_like(xp, (center[0] + x[0], center[1] + y[0], center[2]), t)]
    out += [vec_like(xp, (x[k], y[k], 0.0), t) for k in range(1, 5)]
    return out


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
        set_frozen(
            self,
            radius=finite_number(o, "radius", self.radius, positive=True),
            speed=finite_number(o, "speed", self.speed),
            center=finite_vec3(o, "center", self.center),
            yaw_mode=check_yaw_mode(o, self.yaw_mode),
            yaw=finite_number(o, "yaw", self.yaw),
            start_angle=finite_number(o, "start_angle", self.start_angle),
            ramp_time=nonneg_number(o, "ramp_time", self.ramp_time),
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
        xp, t = as_time(t)
        phi = _warped_time(xp, t, self.ramp_time)
        w = self.omega
        th = [self.start_angle + w * phi[0]] + [w * p for p in phi[1:]]
        cos_d, sin_d = _expi_derivs(xp, th)
        r = self.radius
        fields = _planar(xp, t, self.center, [r * c for c in cos_d], [r * s for s in sin_d])
        if self.yaw_mode == "fixed":
            yaw, rate = full_like(xp, self.yaw, t), full_like(xp, 0.0, t)
        else:
            side = math.pi / 2 if self.speed >= 0.0 else -math.pi / 2
            yaw, rate = _wrap(xp, th[0] + (side + self.yaw)), full_like(xp, th[1], t)
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
        size = finite_number(o, "size", self.size, positive=True)
        if (self.period is None) == (self.speed is None):
            raise ValueError(
                f"{o}: give exactly one of period and speed; got period={self.period!r}, "
                f"speed={self.speed!r}"
            )
        perimeter = gerono_perimeter(size)
        if self.period is not None:
            period = finite_number(o, "period", self.period, positive=True)
            speed = perimeter / period
        else:
            speed = finite_number(o, "speed", self.speed, positive=True)
            period = perimeter / speed
        set_frozen(
            self,
            size=size,
            period=period,
            speed=speed,
            center=finite_vec3(o, "center", self.center),
            yaw_mode=check_yaw_mode(o, self.yaw_mode),
            yaw=finite_number(o, "yaw", self.yaw),
            ramp_time=nonneg_number(o, "ramp_time", self.ramp_time),
        )

    @property
    def duration(self) -> float:
        """``math.inf`` (periodic)."""
        return math.inf

    def __call__(self, t: Any) -> Reference:
        """Reference at time ``t`` [s], shape (...): fields (..., 3) and (...)."""
        xp, t = as_time(t)
        phi = _warped_time(xp, t, self.ramp_time)
        w = 2.0 * math.pi / self.period
        th = [w * p for p in phi]
        cos1, sin1 = _expi_derivs(xp, th)
        _, sin2 = _expi_derivs(xp, [2.0 * p for p in th])
        s = self.size
        fields = _planar(xp, t, self.center, [s * v for v in sin1], [0.5 * s * v for v in sin2])
        if self.yaw_mode == "fixed":
            yaw, rate = full_like(xp, self.yaw, t), full_like(xp, 0.0, t)
        else:
            c1, s1, c2 = cos1[0], sin1[0], xp.cos(2.0 * th[0])
            s2 = 2.0 * s1 * c1
            # (x_θ, y_θ) = s (cos θ, cos 2θ), (x_θθ, y_θθ) = s (-sin θ, -2 sin 2θ)
            curl = (s1 * c2 - 2.0 * c1 * s2) / (c1 * c1 + c2 * c2)
            yaw = _wrap(xp, xp.atan2(c2, c1) + self.yaw)
            rate = full_like(xp, th[1] * curl, t)
        return Reference(*fields, yaw, rate)
