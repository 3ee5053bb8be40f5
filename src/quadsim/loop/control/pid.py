r"""Cascaded PID flight controller (PX4-like), the flight loop of seed 001 (200 Hz).

Stages (each a public pure function; world ENU, body FLU, gravity ``(0, 0, -g)``; ``∘`` is the
per-axis product; gains are normalised by ``m`` and ``J``, see :mod:`quadsim.loop.control.gains`)::

    position ──► velocity ──► thrust vector ──► attitude ──► body rate ──► wrench ──► allocation
      (P)         (PI, AW)     (tilt/thrust       (P, tilt     (PID, D on    (J α + ω×Jω;
                                limits)            first)       measurement)   caller allocates)

1. :func:`position_control`: ``v_{sp} = v_r + k_{p,pos}∘(p_r - p)``, horizontal norm limited to
   ``v_{max,xy}``, vertical to ``[-v_{max,down}, v_{max,up}]``.
2. :func:`velocity_control`: ``e = v_{sp} - v``, ``a = a_r + k_{p,v}∘e + I``, desired force
   ``T = m (a - g_{vec}) - f_{drag}`` (compensated drag, see :mod:`quadsim.loop.control.gains`),
   limited (tilt ``θ_max``, ``[T_min, T_max]``, vertical priority) to ``T'``. Anti-windup:
   horizontally the tracking back-calculation ``e_I = e - 2 (T - T') / (m k_{p,v})`` (PX4),
   vertically no integration while ``T_z`` is clipped in the direction of the error (conditional
   integration); then the clamp ``I = clip(I + k_{i,v}∘e_I dt, ±I_{max})``.
3. :func:`thrust_attitude`: ``R_d = [b_1, b_2, b_3]`` with ``b_3 = T'/|T'|`` and heading
   ``ψ_r`` (``b_2 ∝ b_3 × (\cos ψ, \sin ψ, 0)``); collective thrust
   ``f = clip(T' · R e_3, T_min, T_max)``.
4. :func:`attitude_control` (Brescianini/PX4): the reduced attitude ``q_{red} = q(e_z → e_{z,d})
   ⊗ q`` corrects tilt first; yaw is mixed in with weight ``w_ψ = k_{att,z}/k_{att,x}``:
   ``q_{mix} = q_{red}^{-1} ⊗ q_d``, ``q_d' = q_{red} ⊗ (0, 0, \sin(w_ψ \arcsin q_{mix,z}),
   \cos(w_ψ \arccos q_{mix,w}))``; ``q_e = q^{-1} ⊗ q_d'`` (``w ≥ 0``),
   ``ω_{sp} = k'_{att}∘2 q_{e,xyz} + R^T e_3\, \dot ψ_r``, clipped to ``±ω_{max}``, with
   ``k'_{att} = (k_{att,x}, k_{att,y}, k_{att,z}/w_ψ)`` so that small yaw errors see ``k_{att,z}``.
   ``q`` and ``q_d`` are normalised first: any nonzero multiple ``c q`` (``c < 0`` included) is the
   same attitude, here and in every stage (``R(q)`` holds for any norm,
   :mod:`quadsim.physics.rotation`).
5. :func:`rate_control`: ``e = ω_{sp} - ω``, ``α = k_{p,ω}∘e + I_ω - k_{d,ω}∘(ω - ω_{prev})/dt``,
   ``I_ω = clip(I_ω + k_{i,ω}∘e\,dt, ±I_{ω,max})``; ``τ = J α + ω × J ω``.

:func:`control` runs 1-5 on a :class:`~quadsim.loop.trajectories.Reference` (feed-forward velocity,
acceleration, yaw rate). :func:`attitude_altitude_control` holds a given attitude and an altitude
(vertical channel of 1-2 only, thrust ``f = m a_z' / (R e_3)_z``), e.g. for constant-pitch
forward flight. Optional rotor-lag lead compensation (``motor_tau``) as in
:mod:`quadsim.loop.control.geometric`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ...physics._array import as_like, namespace, unstack
from ...physics.rotation import kfrom_matrix
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
    qconj,
    qmul,
    rot_matrix,
    scalar,
    tostack,
    zero_state,
)
from .gains import PidGains
from .geometric import compensate_rotor_lag, desired_attitude

__all__ = [
    "PidState",
    "attitude_altitude_control",
    "attitude_control",
    "control",
    "init_state",
    "position_control",
    "rate_control",
    "thrust_attitude",
    "velocity_control",
]


class PidState(NamedTuple):
    """Controller state of the PID cascade (batch shape ``...``).

    Attributes:
        vel_int: Velocity integrator (an acceleration), ``(..., 3)`` [m/s²].
        rate_int: Rate integrator (an angular acceleration), ``(..., 3)`` [rad/s²].
        prev_ang_vel: Body rate at the previous step, ``(..., 3)`` [rad/s] (D term).
        wrench_est: Modelled rotor wrench ``(..., 4)`` (lag compensation, see
            :mod:`quadsim.loop.control.geometric`).
        started: 1 after the first step, else 0, ``(...)`` (no derivative kick at start).
    """

    vel_int: Any
    rate_int: Any
    prev_ang_vel: Any
    wrench_est: Any
    started: Any


def init_state(
    gains: PidGains, batch_shape: tuple[int, ...] = (), xp: Any = None, dtype: Any = None
) -> PidState:
    """Zero controller state for a batch (NumPy float64 by default)."""
    return zero_state(PidState, ((3,), (3,), (3,), (4,), ()), batch_shape, xp, dtype)


# -- component kernels --------------------------------------------------------------------------
def _kposition(xp: Any, p: tuple, pr: tuple, vr: tuple, g: PidGains) -> tuple:
    kp = gvec(g.pos_p)
    vs = tuple(vr[i] + kp[i] * (pr[i] - p[i]) for i in range(3))
    vmax = scalar(g.vel_max_xy)
    h2 = vs[0] * vs[0] + vs[1] * vs[1]
    over = h2 > vmax * vmax
    s = xp.where(over, vmax / xp.sqrt(xp.where(over, h2, 1.0 + 0.0 * h2)), 1.0 + 0.0 * h2)
    vz = clip(xp, vs[2], -scalar(g.vel_max_down), scalar(g.vel_max_up))
    return (vs[0] * s, vs[1] * s, vz)


def _kvelocity(
    xp: Any, v: tuple, vs: tuple, ar: tuple, g: PidGains, vint: tuple, R: Any = None
) -> tuple[tuple, tuple]:
    kp, ki, imax = gvec(g.vel_p), gvec(g.vel_i), gvec(g.vel_i_max)
    m, dt = scalar(g.mass), scalar(g.dt)
    tmin, tmax = scalar(g.thrust_min), scalar(g.thrust_max)
    e = tuple(vs[i] - v[i] for i in range(3))
    acc = tuple(ar[i] + kp[i] * e[i] + vint[i] for i in range(3))
    gz = scalar(g.gravity)
    fdrag = drag_force(xp, R, v, g.drag_matrix, g.drag_coef)
    T = (m * acc[0] - fdrag[0], m * acc[1] - fdrag[1], m * (acc[2] + gz) - fdrag[2])
    Tl, _ = limit_thrust(xp, T, tmin, tmax, scalar(g.tilt_max), scalar(g.xy_margin))
    # horizontal: tracking anti-windup (PX4, gain 2/k_p); kp = 0 -> no back-calculation
    ei = tuple(e[i] - _arw(xp, kp[i], m) * (T[i] - Tl[i]) for i in range(2))
    # vertical: no integration while the thrust is clipped in the direction of the error
    stuck = ((T[2] > Tl[2]) & (e[2] >= 0)) | ((T[2] < Tl[2]) & (e[2] <= 0))
    ei = (*ei, xp.where(stuck, 0.0 * e[2], e[2]))
    vint = tuple(clip(xp, vint[i] + ki[i] * ei[i] * dt, -imax[i], imax[i]) for i in range(3))
    return Tl, vint


def _arw(xp: Any, k: Any, m: Any) -> Any:
    """Back-calculation gain ``2 / (m k_p)`` [1/(kg/s)]; 0 where ``k_p = 0``."""
    if isinstance(k, float):
        return 2.0 / (m * k) if k > 0.0 else 0.0
    return xp.where(k > 0.0, 2.0 / (m * xp.where(k > 0.0, k, 1.0)), 0.0 * k)


def _kattitude(xp: Any, q: tuple, qd: tuple, yaw_rate: Any, g: PidGains) -> tuple:
    kp, rmax = gvec(g.att_p), gvec(g.rate_max)
    yaw_w = scalar(g.yaw_weight)
    q, _ = normalized(xp, q)  # the products below need unit quaternions (c q is the same attitude)
    qd, _ = normalized(xp, qd)
    Rq, Rd = rot_matrix(q), rot_matrix(qd)
    ez = (Rq[0][2], Rq[1][2], Rq[2][2])
    ezd = (Rd[0][2], Rd[1][2], Rd[2][2])
    # shortest rotation ez -> ezd: (ez × ezd, 1 + ez·ezd), normalised
    c = 1.0 + dot(ez, ezd)
    axis = cross(ez, ezd)
    opposite = c < 1e-6
    qr, _ = normalized(xp, (*axis, c), 1e-12)
    qred = qmul(qr, q)
    qred = tuple(xp.where(opposite, a, b) for a, b in zip(qd, qred, strict=True))
    qmix = qmul(qconj(qred), qd)
    sgn = xp.where(qmix[3] < 0, -1.0 + 0.0 * qmix[3], 1.0 + 0.0 * qmix[3])
    mw = clip(xp, sgn * qmix[3], -1.0, 1.0)
    mz = clip(xp, sgn * qmix[2], -1.0, 1.0)
    zero = 0.0 * mw
    qyaw = (zero, zero, xp.sin(yaw_w * xp.asin(mz)), xp.cos(yaw_w * xp.acos(mw)))
    qd2 = qmul(qred, qyaw)
    qe = qmul(qconj(q), qd2)
    sgn = xp.where(qe[3] < 0, -1.0 + 0.0 * qe[3], 1.0 + 0.0 * qe[3])
    wz = (Rq[2][0], Rq[2][1], Rq[2][2])  # world z in body = third row of R
    # the yaw error was scaled by w_ψ: divide the yaw gain by it (PX4), so yaw P = att_p[2]
    if isinstance(yaw_w, float):
        kz = kp[2] / yaw_w if yaw_w > 1e-4 else kp[2]
    else:
        kz = xp.where(yaw_w > 1e-4, kp[2] / xp.where(yaw_w > 1e-4, yaw_w, 1.0), kp[2])
    kp = (kp[0], kp[1], kz)
    rate = tuple(kp[i] * 2.0 * sgn * qe[i] + wz[i] * yaw_rate for i in range(3))
    return tuple(clip(xp, rate[i], -rmax[i], rmax[i]) for i in range(3))


def _krate(
    xp: Any, w: tuple, wsp: tuple, g: PidGains, rint: tuple, wprev: tuple, started: Any
) -> tuple[tuple, tuple]:
    kp, ki, kd, imax = gvec(g.rate_p), gvec(g.rate_i), gvec(g.rate_d), gvec(g.rate_i_max)
    dt = scalar(g.dt)
    J = mat(g.J)
    e = tuple(wsp[i] - w[i] for i in range(3))
    alpha = tuple(
        kp[i] * e[i] + rint[i] - kd[i] * started * (w[i] - wprev[i]) / dt for i in range(3)
    )
    rint = tuple(clip(xp, rint[i] + ki[i] * e[i] * dt, -imax[i], imax[i]) for i in range(3))
    tau = tuple(a + b for a, b in zip(matvec(J, alpha), cross(w, matvec(J, w)), strict=True))
    return tau, rint


def _thrust_attitude(xp: Any, T: tuple, yaw: Any, q: tuple, g: PidGains) -> tuple[tuple, Any]:
    b3, _ = normalized(xp, T)
    b1, b2, b3, _, _ = desired_attitude(xp, b3, yaw)
    qd = kfrom_matrix(xp, tuple((b1[i], b2[i], b3[i]) for i in range(3)))
    R = rot_matrix(q)
    f = clip(xp, dot(T, (R[0][2], R[1][2], R[2][2])), scalar(g.thrust_min), scalar(g.thrust_max))
    return qd, f


# -- public stages ------------------------------------------------------------------------------
def _xp_like(*arrays: Any) -> tuple[Any, Any]:
    xp = namespace(*arrays)
    return xp, arrays[0]


def _c(xp: Any, a: Any, like: Any) -> tuple:
    return unstack(as_like(xp, a, like))


def position_control(pos: Any, pos_sp: Any, vel_ff: Any, gains: PidGains) -> Any:
    """Velocity setpoint ``(..., 3)`` [m/s] from position [m] and feed-forward velocity [m/s]."""
    xp, like = _xp_like(pos)
    vs = _kposition(xp, unstack(pos), _c(xp, pos_sp, like), _c(xp, vel_ff, like), gains)
    return tostack(xp, vs, like)


def velocity_control(
    vel: Any, vel_sp: Any, acc_ff: Any, gains: PidGains, cstate: PidState, quat: Any = None
) -> tuple[Any, PidState]:
    """Limited desired world force ``(..., 3)`` [N] from velocity PI (updates ``vel_int``).

    Args:
        vel: World velocity ``(..., 3)`` [m/s].
        vel_sp: Velocity setpoint ``(..., 3)`` [m/s].
        acc_ff: Feed-forward acceleration ``(..., 3)`` [m/s²].
        gains: :class:`~quadsim.loop.control.gains.PidGains`.
        cstate: :class:`PidState`.
        quat: Attitude ``(..., 4)`` for the body-frame drag compensation (``None``: level).
    """
    xp, like = _xp_like(vel)
    R = None if quat is None else rot_matrix(unstack(quat))
    T, vint = _kvelocity(xp, unstack(vel), _c(xp, vel_sp, like), _c(xp, acc_ff, like), gains,
                         unstack(cstate.vel_int), R)  # fmt: skip
    return tostack(xp, T, like), cstate._replace(vel_int=tostack(xp, vint, like))


def thrust_attitude(thrust_vec: Any, yaw: Any, quat: Any, gains: PidGains) -> tuple[Any, Any]:
    """Attitude setpoint ``(..., 4)`` (xyzw) and collective thrust ``(...)`` [N].

    Args:
        thrust_vec: Desired world force ``(..., 3)`` [N] (from :func:`velocity_control`).
        yaw: Yaw setpoint ``(...)`` [rad].
        quat: Current attitude ``(..., 4)`` (the thrust is projected on its body z axis).
        gains: :class:`~quadsim.loop.control.gains.PidGains`.
    """
    xp, like = _xp_like(thrust_vec, quat)
    qd, f = _thrust_attitude(xp, unstack(thrust_vec), as_like(xp, yaw, like), unstack(quat), gains)
    return tostack(xp, qd, like), f + 0.0 * like[..., 0]


def attitude_control(quat: Any, quat_sp: Any, yaw_rate_ff: Any, gains: PidGains) -> Any:
    """Body-rate setpoint ``(..., 3)`` [rad/s] (tilt-prioritised quaternion P, rate-limited).

    Args:
        quat: Attitude ``(..., 4)`` xyzw.
        quat_sp: Attitude setpoint ``(..., 4)`` xyzw.
        yaw_rate_ff: Feed-forward yaw rate about world z ``(...)`` [rad/s].
        gains: :class:`~quadsim.loop.control.gains.PidGains`.
    """
    xp, like = _xp_like(quat)
    rate = _kattitude(xp, unstack(quat), _c(xp, quat_sp, like),
                      as_like(xp, yaw_rate_ff, like), gains)  # fmt: skip
    return tostack(xp, rate, like)


def rate_control(
    ang_vel: Any, rate_sp: Any, thrust: Any, gains: PidGains, cstate: PidState
) -> tuple[Any, PidState]:
    """Wrench ``(..., 4)`` from the body-rate PID (updates ``rate_int``, ``prev_ang_vel``).

    The lag compensation (``motor_tau``) is not applied here but in :func:`control` and
    :func:`attitude_altitude_control`.

    Args:
        ang_vel: Body rate ``(..., 3)`` [rad/s].
        rate_sp: Body-rate setpoint ``(..., 3)`` [rad/s].
        thrust: Collective thrust ``(...)`` [N], passed through as ``wrench[..., 0]``.
        gains: :class:`~quadsim.loop.control.gains.PidGains`.
        cstate: :class:`PidState`.
    """
    xp, like = _xp_like(ang_vel)
    w = unstack(ang_vel)
    tau, rint = _krate(xp, w, _c(xp, rate_sp, like), gains, unstack(cstate.rate_int),
                       unstack(cstate.prev_ang_vel), cstate.started)  # fmt: skip
    wrench = tostack(xp, (as_like(xp, thrust, like), *tau), like)
    one = 1.0 + 0.0 * like[..., 0]
    new = cstate._replace(rate_int=tostack(xp, rint, like), prev_ang_vel=ang_vel, started=one)
    return wrench, new


def _attitude_rate(
    xp: Any, state: Any, qd: tuple, yaw_rate: Any, f: Any, vint: tuple, gains: PidGains,
    cstate: PidState,
) -> tuple[Any, PidState]:  # fmt: skip
    """Attitude and rate stages to a wrench with thrust ``f``; store the loop integrators."""
    like = state.pos
    wsp = _kattitude(xp, unstack(state.quat), qd, yaw_rate, gains)
    tau, rint = _krate(xp, unstack(state.ang_vel), wsp, gains, unstack(cstate.rate_int),
                       unstack(cstate.prev_ang_vel), cstate.started)  # fmt: skip
    wrench = tostack(xp, (f, *tau), like)
    cs = cstate._replace(vel_int=tostack(xp, vint, like), rate_int=tostack(xp, rint, like),
                         prev_ang_vel=state.ang_vel + 0.0)  # fmt: skip
    return _finish(xp, wrench, gains, cs)


def _finish(xp: Any, wrench: Any, gains: PidGains, cs: PidState) -> tuple[Any, PidState]:
    out, est, started = compensate_rotor_lag(xp, wrench, gains, cs)
    return out, cs._replace(wrench_est=est, started=started)


def control(state: Any, ref: Any, gains: PidGains, cstate: PidState) -> tuple[Any, PidState]:
    """One step of the full cascade (pure, batched, jittable).

    Args:
        state: :class:`~quadsim.engines.state.State` (reads ``pos``, ``quat``, ``vel``,
            ``ang_vel``).
        ref: :class:`~quadsim.loop.trajectories.Reference`; uses ``pos``, ``vel`` and ``acc``
            (feed-forward), ``yaw`` and ``yaw_rate`` (jerk and snap are not used).
        gains: :class:`~quadsim.loop.control.gains.PidGains`.
        cstate: :class:`PidState`.

    Returns:
        ``(wrench (..., 4) [N, N m], cstate)``.
    """
    xp = namespace(state.pos, state.quat, state.vel, state.ang_vel)
    like = state.pos
    q = unstack(state.quat)
    vs = _kposition(xp, unstack(state.pos), _c(xp, ref.pos, like), _c(xp, ref.vel, like), gains)
    T, vint = _kvelocity(xp, unstack(state.vel), vs, _c(xp, ref.acc, like), gains,
                         unstack(cstate.vel_int), rot_matrix(q))  # fmt: skip
    qd, f = _thrust_attitude(xp, T, as_like(xp, ref.yaw, like), q, gains)
    return _attitude_rate(xp, state, qd, as_like(xp, ref.yaw_rate, like), f, vint, gains, cstate)


def attitude_altitude_control(
    state: Any, quat_sp: Any, z_sp: Any, gains: PidGains, cstate: PidState,
    vz_ff: Any = 0.0, yaw_rate_ff: Any = 0.0,
) -> tuple[Any, PidState]:  # fmt: skip
    """Hold an attitude and an altitude (e.g. constant-pitch forward flight).

    The vertical channel of the position/velocity loops gives the vertical acceleration
    ``a_z``; the collective thrust is ``f = m (a_z + g) / (R e_3)_z`` (clipped), so the
    thrust's vertical component holds altitude at any tilt. Attitude and rate loops as in
    :func:`control`; the horizontal velocity integrators are left untouched.

    Args:
        state: :class:`~quadsim.engines.state.State`.
        quat_sp: Attitude setpoint ``(..., 4)`` xyzw (e.g. ``rotation.from_euler``).
        z_sp: Altitude setpoint ``(...)`` [m].
        gains: :class:`~quadsim.loop.control.gains.PidGains`.
        cstate: :class:`PidState`.
        vz_ff: Feed-forward climb rate ``(...)`` [m/s].
        yaw_rate_ff: Feed-forward yaw rate ``(...)`` [rad/s].

    Returns:
        ``(wrench (..., 4), cstate)``.
    """
    xp = namespace(state.pos, state.quat, state.vel, state.ang_vel)
    like = state.pos
    zero = 0.0 * like[..., 0]
    z_sp, vz_ff = as_like(xp, z_sp, like) + zero, as_like(xp, vz_ff, like) + zero
    p, v = unstack(state.pos), unstack(state.vel)
    q = unstack(state.quat)
    vs = _kposition(xp, p, (p[0], p[1], z_sp), (zero, zero, vz_ff), gains)
    T, vint = _kvelocity(xp, (zero, zero, v[2]), (zero, zero, vs[2]), (zero, zero, zero), gains,
                         unstack(cstate.vel_int))  # fmt: skip
    old = unstack(cstate.vel_int)
    vint = (old[0], old[1], vint[2])
    R = rot_matrix(q)
    cz = R[2][2]
    cz = xp.where(cz > 0.1, cz, 0.1 + 0.0 * cz)
    f = clip(xp, T[2] / cz, scalar(gains.thrust_min), scalar(gains.thrust_max))
    yaw_rate = as_like(xp, yaw_rate_ff, like) + zero
    return _attitude_rate(xp, state, _c(xp, quat_sp, like), yaw_rate, f, vint, gains, cstate)
