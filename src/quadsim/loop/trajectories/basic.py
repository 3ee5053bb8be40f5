"""Simple references: hover and (smooth) step.

**Hover**: ``p(t) = p₀``, ``ψ(t) = ψ₀``.

**Step** at ``t_s`` from ``a`` to ``b``: ``p(t) = a + (b - a) σ((t - t_s)/t_r)`` with the C⁴
smoothstep ``σ(τ) = 126τ⁵ - 420τ⁶ + 540τ⁷ - 315τ⁸ + 70τ⁹`` on ``[0, 1]`` (``σ' = 630 τ⁴(1-τ)⁴``;
0 before, 1 after). With ``t_r = 0`` (the default) the step is a true discontinuity and all
derivative fields are zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .reference import (
    Reference,
    as_time,
    finite_number,
    finite_vec3,
    full_like,
    nonneg_number,
    set_frozen,
    smoothstep,
    vec_like,
)


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
        set_frozen(
            self,
            pos=finite_vec3("Hover", "pos", self.pos),
            yaw=finite_number("Hover", "yaw", self.yaw),
        )

    @property
    def duration(self) -> float:
        """Time after which the reference is constant [s]."""
        return 0.0

    def __call__(self, t: Any) -> Reference:
        """Reference at time ``t`` [s], shape (...): fields (..., 3) and (...)."""
        xp, t = as_time(t)
        zero = vec_like(xp, (0.0, 0.0, 0.0), t)
        return Reference(
            vec_like(xp, self.pos, t),
            zero,
            zero,
            zero,
            zero,
            full_like(xp, self.yaw, t),
            full_like(xp, 0.0, t),
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
        yaw = finite_number(o, "yaw", self.yaw)
        set_frozen(
            self,
            start=finite_vec3(o, "start", self.start),
            end=finite_vec3(o, "end", self.end),
            t_step=finite_number(o, "t_step", self.t_step),
            rise_time=nonneg_number(o, "rise_time", self.rise_time),
            yaw=yaw,
            end_yaw=yaw if self.end_yaw is None else finite_number(o, "end_yaw", self.end_yaw),
        )

    @property
    def duration(self) -> float:
        """Time after which the reference is constant [s]: ``t_step + rise_time``."""
        return self.t_step + self.rise_time

    def __call__(self, t: Any) -> Reference:
        """Reference at time ``t`` [s], shape (...): fields (..., 3) and (...)."""
        xp, t = as_time(t)
        if self.rise_time == 0.0:
            sig = [xp.astype(t >= self.t_step, t.dtype), 0.0, 0.0, 0.0, 0.0]
        else:
            tr = self.rise_time
            tau = xp.clip((t - self.t_step) / tr, 0.0, 1.0)
            sig = smoothstep(tau, tr, 4)
        a, b = self.start, self.end
        fields = [vec_like(xp, [a[i] + (b[i] - a[i]) * sig[0] for i in range(3)], t)]
        fields += [vec_like(xp, [(b[i] - a[i]) * sig[k] for i in range(3)], t) for k in range(1, 5)]
        dyaw = self.end_yaw - self.yaw
        return Reference(
            *fields, full_like(xp, self.yaw + dyaw * sig[0], t), full_like(xp, dyaw * sig[1], t)
        )
