r"""Geometric tracking controller on SE(3) (Lee, Leok and McClamroch, CDC 2010), ENU/FLU.

Conventions: world ENU, body FLU, thrust ``f`` along ``+b_3 = R e_3``, gravity ``(0, 0, -g)``,
so ``m \dot v = f R e_3 + m g_{vec}``. ``R = R_{wb}`` of the state's quaternion (exact for any
nonzero norm, ``R(c q) = R(q)``, see :mod:`quadsim.physics.rotation`), ``Ω`` the body rate. Gains
are normalised by ``m`` and ``J`` (see :mod:`quadsim.loop.control.gains`); ``∘`` is the per-axis
product.

Translation (``e_p = p - p_r``, ``e_v = v - v_r``; the position integral is clamped and, per
axis, only integrates near steady state, ``I = clip(I + e_p dt [|e_v| < z_I], ±I_{max})``, so a
transient does not wind it up while a steady disturbance, ``e_v ≈ 0``, is still integrated):

.. math::

    F_d = m\,(-k_p∘e_p - k_v∘e_v - k_i∘I + a_r - g_{vec}), \qquad
    f = \mathrm{clip}(F_d' · R e_3,\; T_{min}, T_{max}),

where ``F_d'`` is ``F_d`` minus the compensated drag (``drag_compensation``, see
:mod:`quadsim.loop.control.gains`), limited to tilt ``θ_max`` and ``|F_d'| ≤ T_max`` (vertical
priority,
:func:`quadsim.loop.control._common.limit_thrust`).

Desired attitude ``R_d = [b_1, b_2, b_3]`` from ``b_3 = F_d'/|F_d'|`` and the yaw heading
``x_c = (\cos ψ, \sin ψ, 0)``: ``b_2 = b_3 × x_c / |b_3 × x_c|``, ``b_1 = b_2 × b_3``.

Feed-forward body rate and acceleration of ``R_d`` by differential flatness, with ``\dot F = m j``,
``\ddot F = m s`` (reference jerk and snap), ``f_d = |F_d'|``, ``y_c = e_3 × x_c``:

.. math::

    \dot b_3 = h_Ω = \frac{m}{f_d}\,(j - (b_3·j)\,b_3), \qquad
    Ω_{d,1} = -h_Ω·b_2, \quad Ω_{d,2} = h_Ω·b_1, \quad
    Ω_{d,3} = \frac{(x_c·b_3)\,Ω_{d,1} + \dot ψ\,(b_2·y_c)}{x_c·b_1}

(the last from differentiating the constraint ``b_2 · x_c = 0``), and

.. math::

    \ddot b_3 = \frac{\ddot F - (\dot b_3·\dot F + b_3·\ddot F)\,b_3 - 2 (b_3·\dot F)\,\dot b_3}
    {f_d}, \qquad
    \dot Ω_{d,1} = -\ddot b_3·b_2 + Ω_{d,3} Ω_{d,2}, \quad
    \dot Ω_{d,2} = \ddot b_3·b_1 - Ω_{d,3} Ω_{d,1},

    \dot Ω_{d,3} = \frac{\dot N - Ω_{d,3} \dot D}{D}, \quad
    N = (x_c·b_3) Ω_{d,1} + \dot ψ (b_2·y_c), \quad D = x_c·b_1,

with ``\dot b_1 = -Ω_{d,2} b_3 + Ω_{d,3} b_2``, ``\dot b_2 = Ω_{d,1} b_3 - Ω_{d,3} b_1``,
``\dot x_c = \dot ψ y_c``, ``\dot y_c = -\dot ψ x_c`` and ``\ddot ψ = 0``. When a thrust limit is
active the feed-forward terms are dropped (they belong to the unlimited trajectory).

Attitude (Lee 2010, eqs. 10-11 and 16):

.. math::

    e_R = \tfrac12 (R_d^T R - R^T R_d)^∨, \qquad e_Ω = Ω - R^T R_d Ω_d,

    τ = -J(k_R∘e_R + k_Ω∘e_Ω) + Ω × JΩ - J(\hat Ω R^T R_d Ω_d - R^T R_d \dot Ω_d).

The attitude term is implemented as ``-k_R∘e_R - k_Ω∘e_Ω = k_Ω∘(ω_c - e_Ω)`` with the rate
correction ``ω_c = clip(-(k_R/k_Ω)∘e_R, ±ω_{max})`` (``rate_max``): identical to Lee's law for
small errors, while large attitude errors are corrected at a bounded rate (no overshoot when the
torque saturates).

Optional rotor-lag compensation (``motor_tau`` ``τ_m`` > 0, ``motor_tau_target`` ``τ_f``): the
rotors are modelled as a first-order lag of the commanded wrench, ``\dot{\hat w} = (w_c - \hat w)
/ τ_m``, run inside the controller (exact discretisation; ``\hat w`` starts at the first desired
wrench). The command ``w_c = \hat w + (τ_m/τ_f)(w - \hat w)`` (thrust clipped to
``[T_min, T_max]``, each torque to ``±τ_max``) makes the modelled rotors follow the desired ``w``
with the faster time constant ``τ_f``: ``\dot{\hat w} = (w - \hat w)/τ_f``. The model is driven
by the wrench that :func:`quadsim.physics.rotors.allocate` realises for ``w_c``
(``gains.allocator``), so it does not wind up when the rotors saturate. The attitude loop must stay
stable when the
compensation saturates (then the lag is ``τ_m`` again): for ``J \ddot θ = τ`` behind a lag ``τ_m``
that needs ``k_Ω > τ_m k_R`` (Routh), which the packaged gains satisfy with margin.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from ...physics._array import as_like, namespace, unstack
from ...physics.rotors import allocate
from ._common import (
    clip,
    cross,
    dot,
    drag_force,
    gvec,
    limit_thrust,
    mat,
    matvec,
    normalized,
    rot_matrix,
    scalar,
    tostack,
    zero_state,
)
from .gains import GeometricGains

__all__ = [
    "GeometricState",
    "attitude_error",
    "control",
    "desired_attitude",
    "init_state",
]


class GeometricState(NamedTuple):
    """Controller state of :func:`control` (batch shape ``...``).

    Attributes:
        pos_int: Clamped integral of the position error ``∫e_p dt``, ``(..., 3)`` [m s].
        wrench_est: Internal first-order-lag model of the wrench the rotors produce,
            ``(..., 4)`` [N, N m] (lag compensation; the last command without it).
        started: 1 after the first step, else 0, ``(...)``.
    """

    pos_int: Any
    wrench_est: Any
    started: Any


def init_state(
    gains: GeometricGains, batch_shape: tuple[int, ...] = (), xp: Any = None, dtype: Any = None
) -> GeometricState:
    """Zero controller state for a batch (NumPy float64 by default)."""
    return zero_state(GeometricState, ((3,), (4,), ()), batch_shape, xp, dtype)


def desired_attitude(xp: Any, b3: tuple, yaw: Any) -> tuple[tuple, tuple, tuple, tuple, tuple]:
    """``(b1, b2, b3, x_c, y_c)`` of ``R_d`` from a thrust direction and yaw (components)."""
    c, s = xp.cos(yaw), xp.sin(yaw)
    xc, yc = (c, s, 0.0 * c), (-s, c, 0.0 * c)
    b2, _ = normalized(xp, cross(b3, xc), 1e-9)
    b1 = cross(b2, b3)
    return b1, b2, b3, xc, yc


def flat_rates(
    xp: Any, frame: tuple, fd: Any, mass: float, jerk: tuple, snap: tuple, yaw_rate: Any
) -> tuple[tuple, tuple]:
    """Feed-forward ``(Ω_d, Ω̇_d)`` of ``R_d`` (body frame of ``R_d``); see the module docstring.

    Args:
        xp: Array namespace.
        frame: ``(b1, b2, b3, x_c, y_c)`` from :func:`desired_attitude`.
        fd: Norm of the desired force [N].
        mass: Mass [kg].
        jerk: Reference jerk components [m/s³].
        snap: Reference snap components [m/s⁴].
        yaw_rate: Reference yaw rate [rad/s].
    """
    b1, b2, b3, xc, yc = frame
    dF = tuple(mass * c for c in jerk)
    ddF = tuple(mass * c for c in snap)
    b3j = dot(b3, dF)
    h = tuple((a - b3j * b) / fd for a, b in zip(dF, b3, strict=True))  # ḃ3
    p = -dot(h, b2)
    q = dot(h, b1)
    D = dot(xc, b1)
    D = xp.where(xp.abs(D) > 1e-9, D, 1e-9 + 0.0 * D)
    xb3 = dot(xc, b3)
    N = xb3 * p + yaw_rate * dot(b2, yc)
    r = N / D
    k = dot(h, dF) + dot(b3, ddF)
    hh = tuple((a - k * b - 2.0 * b3j * c) / fd for a, b, c in zip(ddF, b3, h, strict=True))
    pd = -dot(hh, b2) + r * q
    qd = dot(hh, b1) - r * p
    b2dot = tuple(p * a - r * b for a, b in zip(b3, b1, strict=True))
    ycdot = tuple(-yaw_rate * c for c in xc)
    Nd = (yaw_rate * dot(yc, b3) + dot(xc, h)) * p + xb3 * pd
    Nd = Nd + yaw_rate * (dot(b2dot, yc) + dot(b2, ycdot))
    Dd = yaw_rate * dot(yc, b1) - q * xb3
    rd = (Nd - r * Dd) / D
    return (p, q, r), (pd, qd, rd)


def attitude_error(R: tuple, Rd: tuple) -> tuple:
    """``e_R = ½ (R_dᵀR - RᵀR_d)^∨`` of two rotation matrices given as row tuples."""
    M = tuple(tuple(dot(tuple(Rd[k][i] for k in range(3)), tuple(R[k][j] for k in range(3)))
                    for j in range(3)) for i in range(3))  # fmt: skip
    return (0.5 * (M[2][1] - M[1][2]), 0.5 * (M[0][2] - M[2][0]), 0.5 * (M[1][0] - M[0][1]))


def control(
    state: Any, ref: Any, gains: GeometricGains, cstate: GeometricState
) -> tuple[Any, GeometricState]:
    """One step of the geometric tracking controller (pure, batched, jittable).

    Args:
        state: :class:`~quadsim.engines.state.State` (reads ``pos``, ``quat``, ``vel``,
            ``ang_vel``), batch shape ``...``.
        ref: :class:`~quadsim.loop.trajectories.Reference` (``pos vel acc jerk snap`` ``(..., 3)``,
            ``yaw yaw_rate`` ``(...)``); broadcast against the state.
        gains: :class:`~quadsim.loop.control.gains.GeometricGains`.
        cstate: :class:`GeometricState` from :func:`init_state` or the previous call.

    Returns:
        ``(wrench, cstate)``: wrench ``(..., 4)`` = ``[F (N), τx, τy, τz (N m, body)]`` in the
        state's dtype, and the next controller state.
    """
    xp = namespace(state.pos, state.quat, state.vel, state.ang_vel)
    like = state.pos
    m, dt = scalar(gains.mass), scalar(gains.dt)
    g = scalar(gains.gravity)
    J = mat(gains.J)
    kp, kv, ki, imax = (gvec(a) for a in (gains.kp, gains.kv, gains.ki, gains.i_max))
    kR, kW = gvec(gains.kR), gvec(gains.kW)
    p, v, w = unstack(state.pos), unstack(state.vel), unstack(state.ang_vel)
    R = rot_matrix(unstack(state.quat))
    pr, vr, ar = (unstack(_like(xp, a, like)) for a in (ref.pos, ref.vel, ref.acc))
    jr, sr = (unstack(_like(xp, a, like)) for a in (ref.jerk, ref.snap))
    yaw, yaw_rate = _like(xp, ref.yaw, like), _like(xp, ref.yaw_rate, like)

    ep = tuple(a - b for a, b in zip(p, pr, strict=True))
    ev = tuple(a - b for a, b in zip(v, vr, strict=True))
    integ = unstack(cstate.pos_int)
    zone = gvec(gains.i_zone)
    integ = tuple(
        clip(xp, i + xp.where(xp.abs(ev_) < z, e, 0.0 * e) * dt, -lim, lim)
        for i, e, ev_, lim, z in zip(integ, ep, ev, imax, zone, strict=True)
    )
    gv = (0.0, 0.0, -g)
    Fd = tuple(
        m * (-kp[i] * ep[i] - kv[i] * ev[i] - ki[i] * integ[i] + ar[i] - gv[i]) for i in range(3)
    )
    fdrag = drag_force(xp, R, v, gains.drag_matrix, gains.drag_coef)
    Fd = tuple(Fd[i] - fdrag[i] for i in range(3))
    T, limited = limit_thrust(xp, Fd, scalar(gains.thrust_min), scalar(gains.thrust_max),
                              scalar(gains.tilt_max), scalar(gains.xy_margin))  # fmt: skip
    b3, fd = normalized(xp, T)
    body_z = (R[0][2], R[1][2], R[2][2])
    f = clip(xp, dot(T, body_z), scalar(gains.thrust_min), scalar(gains.thrust_max))

    frame = desired_attitude(xp, b3, yaw)
    Wd, dWd = flat_rates(xp, frame, fd, m, jr, sr, yaw_rate)
    Wd = tuple(xp.where(limited, 0.0 * c, c) for c in Wd)
    dWd = tuple(xp.where(limited, 0.0 * c, c) for c in dWd)
    b1, b2, _, _, _ = frame
    Rd = tuple((b1[i], b2[i], b3[i]) for i in range(3))
    eR = attitude_error(R, Rd)
    # RᵀR_d as rows: (RᵀR_d)_ij = Σ_k R_ki Rd_kj
    RtRd = tuple(tuple(dot(tuple(R[k][i] for k in range(3)), tuple(Rd[k][j] for k in range(3)))
                       for j in range(3)) for i in range(3))  # fmt: skip
    Wd_b = matvec(RtRd, Wd)
    dWd_b = matvec(RtRd, dWd)
    eW = tuple(a - b for a, b in zip(w, Wd_b, strict=True))
    # -k_R e_R - k_Ω e_Ω written as k_Ω (ω_c - e_Ω) with the rate correction ω_c limited
    rmax = gvec(gains.rate_max)
    wc = tuple(clip(xp, -(kR[i] / kW[i]) * eR[i], -rmax[i], rmax[i]) for i in range(3))
    alpha = tuple(kW[i] * (wc[i] - eW[i]) + dWd_b[i] for i in range(3))
    alpha = tuple(a - c for a, c in zip(alpha, cross(w, Wd_b), strict=True))
    tau = tuple(a + b for a, b in zip(matvec(J, alpha), cross(w, matvec(J, w)), strict=True))
    wrench = tostack(xp, (f, *tau), like)
    out, est, started = compensate_rotor_lag(xp, wrench, gains, cstate)
    return out, GeometricState(tostack(xp, integ, like), est, started)


def compensate_rotor_lag(xp: Any, wrench: Any, gains: Any, cstate: Any) -> tuple[Any, Any, Any]:
    """Rotor-lag compensation (module docstring); identity when ``motor_tau == 0``.

    Returns:
        ``(command, wrench_est, started)`` for the next controller state.
    """
    tau_m, tau_f = scalar(gains.motor_tau), scalar(gains.motor_tau_target)
    one = 1.0 + 0.0 * wrench[..., 0]
    if isinstance(tau_m, float) and tau_m == 0.0:
        return wrench, wrench, one
    dt = scalar(gains.dt)
    started = cstate.started[..., None]
    est = started * cstate.wrench_est + (1.0 - started) * wrench
    k = _col(tau_m / tau_f)
    cmd = est + k * (wrench - est)
    f = clip(xp, cmd[..., 0], scalar(gains.thrust_min), scalar(gains.thrust_max))
    tmax = gvec(gains.torque_max)
    tau = [clip(xp, cmd[..., i + 1], -tmax[i], tmax[i]) for i in range(3)]
    cmd = tostack(xp, (f, *tau), wrench)
    a = _col(_exp(xp, -dt / tau_m))
    done = allocate(cmd, gains.allocator).wrench  # what the rotors will be asked to produce
    est = done + a * (est - done)  # exact step of the first-order lag model
    return cmd, est, one


def _col(x: Any) -> Any:
    """Per-drone scalar gains ``(...)`` as a column ``(..., 1)`` (numbers unchanged)."""
    return x if isinstance(x, float) or x.ndim == 0 else x[..., None]


def _exp(xp: Any, x: Any) -> Any:
    return math.exp(x) if isinstance(x, float) else xp.exp(x)


def _like(xp: Any, a: Any, like: Any) -> Any:
    """A reference field as an array of the state's namespace and dtype."""
    return as_like(xp, a, like)
