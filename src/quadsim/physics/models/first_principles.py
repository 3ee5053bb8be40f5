r"""First-principles Newton-Euler quadrotor model with quaternions and RPM commands (seed 000).

State ``(pos, quat, vel, ang_vel[, rotor_vel])``: world position [m], attitude quaternion ``xyzw``
(body to world), world velocity [m/s], body angular velocity [rad/s], rotor speeds [RPM].

.. math::

    \dot p = v, \qquad \dot q = \tfrac12\, q ⊗ (ω, 0),

    m \dot v = m g + R\,(0, 0, Σ f_i) + R D R^T v + f_{dist},

    J \dot ω = τ_t + τ_d - ω × h_r + (0, 0, J_p M_2 \dot Ω) + R^T τ_{dist} - ω × J ω,

with ``f_i``, ``τ_i`` quadratic in RPM, ``τ_t = L (M_0 f, M_1 f, 0)``, ``τ_d = (0, 0, M_2 τ_p)``,
rotor momentum ``h_r = -J_p (M_2 Ω) e_z`` and the asymmetric rotor dynamics of
:mod:`quadsim.physics.models._rigid`.

``R = R(q) = I + (2/|q|²)(w [u]× + [u]×²)`` for ``q = (u, w)`` of any nonzero norm, so ``q`` and
``c q`` (``c ≠ 0``, negative included) give the same forces and torques: RK4 evaluates the model
at stage quaternions ``q + h k`` that are not of unit length, and a formula that assumed unit
length would scale and tilt thrust and drag there. ``q̇ = ½ q ⊗ (ω, 0)`` is taken of the given
``q`` (``q̇(c q) = c q̇(q)``); it is orthogonal to ``q``, and the integrators renormalise after
each step. This is the same flow as a model that normalises ``q`` before forming ``R``
(``tests/engines/test_quat_scale.py`` checks a flight against such an independent RK4).

The interface (names, order, units, return tuple) is that of seed 000 (drone-models 0.1.0
``first_principles``) so code written for it runs unchanged.

Deviations from seed 000, where its reference code is physically wrong:

1. ``quat_dot``: the seed's symbolic model multiplies the xyzw quaternion by the scalar-first
   matrix ``[[0, -ωᵀ], [ω, -[ω]×]]``, so the derivative is not that of the attitude it stores.
   Here ``q̇ = ½ q ⊗ (ω, 0)`` in xyzw; ``tests/physics/test_models.py`` checks it against a finite
   difference of the exact exponential-map rotation.
2. Propeller gyroscopic torque: the seed uses ``J_p (-ω_y M_2Ω, -ω_x M_2Ω, ·)``, the same sign on
   x and y, which is not a cross product and does work on the body (``ω · τ ≠ 0``). The physical
   torque is ``-ω × h_r = J_p (M_2 Ω) (ω_y, -ω_x, 0)``; with it the world angular momentum of body
   plus rotors is conserved when no external torque acts (tested).
3. The seed's documentation writes the thrust torque as ``l/√2 · M f``; its code (and the published
   Crazyflie parameters, ``L = 0.03253 = 0.046/√2``) use ``L · M f`` with ``L`` the per-axis lever.
   We follow the code: ``L`` is the per-axis lever arm.
4. The seed's symbolic ``X_dot`` omits the disturbance states it appends to ``X``; here they are
   constant states with zero derivative, so ``X_dot`` and ``X`` have equal length.
"""

from __future__ import annotations

from typing import Any

from .._array import CASADI_OPS, namespace, stack
from ..rotation import kmatrix, kquat_dot
from ._rigid import (
    DRAG_DEFAULTS,
    ROTOR_PARAMS,
    casadi_assemble,
    casadi_state,
    check_state,
    numeric_params,
    rotor_accels,
    symbolic_params,
    takes_params,
    unstack_opt,
)

__all__ = ["dynamics", "symbolic_dynamics"]


def kernel(
    quat: tuple,
    vel: tuple,
    ang_vel: tuple,
    cmd: tuple,
    rotor_vel: tuple | None,
    dist_f: tuple | None,
    dist_t: tuple | None,
    p: Any,
    ops: Any,
    wind: tuple | None = None,
    heat: tuple | None = None,
) -> tuple:
    """Component kernel of :func:`dynamics` (shared with its CasADi twin and the simulator).

    Every state and input is a tuple of components (arrays of one batch shape, or CasADi
    scalars): ``quat`` (4, xyzw), ``vel`` [m/s] (3), ``ang_vel`` [rad/s] (3, body), ``cmd`` and
    ``rotor_vel`` [RPM] (N; ``rotor_vel`` ``None``: the commands act directly), ``dist_f`` [N],
    ``dist_t`` [N m] and ``wind`` [m/s] (3, world, or ``None``); ``p`` the parameters
    (:data:`~quadsim.physics.models._rigid.ROTOR_PARAMS`), ``ops`` the ``where``/``sqrt``
    namespace; ``heat`` the motors' warm-up states ``θ`` [1] (N) or ``None`` (no warm-up).

    Returns:
        ``(quat_dot, vel_dot, ang_vel_dot, rotor_vel_dot)`` as component tuples, and
        ``motor_heat_dot`` after them when ``heat`` is given; ``rotor_vel_dot`` is ``None`` when
        ``rotor_vel`` is.
    """
    vel_dot, ang_vel_dot, rotor_dot, heat_dot = rotor_accels(
        kmatrix(quat), vel, ang_vel, cmd, rotor_vel, dist_f, dist_t, p, ops, wind, heat)
    out = (kquat_dot(quat, ang_vel), vel_dot, ang_vel_dot, rotor_dot)
    return out if heat is None else (*out, heat_dot)


@takes_params(ROTOR_PARAMS, DRAG_DEFAULTS)
def dynamics(
    pos: Any,
    quat: Any,
    vel: Any,
    ang_vel: Any,
    cmd: Any,
    rotor_vel: Any | None = None,
    dist_f: Any | None = None,
    dist_t: Any | None = None,
    motor_heat: Any | None = None,
    **params: Any,
) -> tuple[Any, ...]:
    """First-principles quadrotor dynamics with rotor speeds in RPM.

    All state arrays share a leading batch shape ``...``; parameters may carry the same leading
    shape (one value per drone) or none. Works on any array-API backend and dtype; parameters are
    cast to the dtype and device of ``pos``.

    Args:
        pos: Position of the drone, world frame [m], shape ``(..., 3)``.
        quat: Attitude quaternion xyzw, body to world, shape ``(..., 4)``.
        vel: Velocity, world frame [m/s], shape ``(..., 3)``.
        ang_vel: Angular velocity, body frame [rad/s], shape ``(..., 3)``.
        cmd: Commanded rotor speeds [RPM], shape ``(..., N)``.
        rotor_vel: Actual rotor speeds [RPM], shape ``(..., N)``. If ``None`` the commanded speeds
            act directly and ``rotor_vel_dot`` is ``None``; otherwise the rotor dynamics are
            modelled.
        dist_f: Disturbance force on the CoM, world frame [N], shape ``(..., 3)``.
        dist_t: Disturbance torque, world frame [N m], shape ``(..., 3)``.
        motor_heat: The motors' warm-up states ``θ`` [1], shape ``(..., N)``, or ``None`` (no
            warm-up: the return has no ``motor_heat_dot``).
        **params: The model parameters by keyword, as below (each a keyword-only argument
            of the signature, :func:`~quadsim.physics.models._rigid.takes_params`).
        mass: Mass [kg].
        L: Per-axis lever arm of the rotors used with ``mixing_matrix`` [m].
        prop_inertia: Inertia of one propeller about its axis [kg m²].
        gravity_vec: Gravity, world frame [m/s²], e.g. ``(0, 0, -9.81)``.
        J: Inertia matrix [kg m²], shape ``(3, 3)``.
        J_inv: Inverse inertia matrix [1/(kg m²)], shape ``(3, 3)``.
        rpm2thrust: Thrust polynomial ``[k0, k1, k2]`` [N, N/RPM, N/RPM²].
        rpm2torque: Drag-torque polynomial ``[m0, m1, m2]`` [N m, N m/RPM, N m/RPM²].
        mixing_matrix: Roll, pitch and yaw signs per rotor, shape ``(3, N)``.
        drag_matrix: Linear body-frame drag [N s/m], shape ``(3, 3)``, negative semi-definite.
        drag_coef: Quadratic drag ``k_d`` [N s²/m²], ``f = -k_d |v| v`` (seed 002; default 0).
        rot_drag_coef: Linear rotational drag [N m s/rad], ``τ = -c ω`` (default 0).
        inflow_coef: Axial-inflow thrust loss ``c_i`` [s/m]: each rotor's thrust times
            ``max(1 - c_i v_z, 0)``, ``v_z`` the air-relative climb speed along body z (default 0).
        warmup_coef: Motor warm-up thrust loss ``c_w`` [1]: each rotor's thrust times
            ``max(1 - c_w θ, 0)`` with its state ``θ`` (``motor_heat``; default 0).
        warmup_time: The warm-up's time constant ``τ_w`` [s] (default ``inf``).
        hover_rpm: The hover speed ``Ω_h`` [RPM] the warm-up's drive ``(Ω/Ω_h)³`` is relative
            to (default 1; unused without ``motor_heat``).
        rotor_dyn_coef: Spin-up/down coefficients ``[c0, c1, c2, c3]``
            [1/s, 1/(s RPM), 1/s, 1/(s RPM)].

    Returns:
        ``(pos_dot, quat_dot, vel_dot, ang_vel_dot, rotor_vel_dot)`` with the shapes of the state,
        and ``motor_heat_dot`` after them when ``motor_heat`` is given; ``rotor_vel_dot`` is
        ``None`` when ``rotor_vel`` is ``None``.
    """
    xp = namespace(pos, quat, vel, ang_vel, cmd, rotor_vel, dist_f, dist_t, motor_heat)
    p = numeric_params(xp, pos, ROTOR_PARAMS, **params)
    n = len(p.mixing_matrix[0])
    pos, quat, vel, ang_vel, cmd, rotor_vel, dist_f, dist_t, heat = check_state(
        xp, pos=(pos, 3), quat=(quat, 4), vel=(vel, 3), ang_vel=(ang_vel, 3), cmd=(cmd, n),
        rotor_vel=(rotor_vel, n), dist_f=(dist_f, 3), dist_t=(dist_t, 3),
        motor_heat=(motor_heat, n))  # fmt: skip
    s = unstack_opt(quat, vel, ang_vel, cmd, rotor_vel, dist_f, dist_t)
    h = unstack_opt(heat)[0]
    qd, vd, wd, rd, *hd = kernel(*s, p, xp, None, h)
    hd = hd[0] if hd else None
    out = (vel, stack(xp, qd, pos), stack(xp, vd, pos), stack(xp, wd, pos),
           None if rd is None else stack(xp, rd, pos))  # fmt: skip
    return out if hd is None else (*out, stack(xp, hd, pos))


@takes_params(ROTOR_PARAMS, DRAG_DEFAULTS)
def symbolic_dynamics(
    model_rotor_vel: bool = True,
    model_dist_f: bool = False,
    model_dist_t: bool = False,
    model_motor_heat: bool = False,
    **params: Any,
) -> tuple[Any, Any, Any, Any]:
    """CasADi twin of :func:`dynamics` (same kernel, fresh ``MX`` symbols on every call).

    Args:
        model_rotor_vel: Append the rotor speeds [RPM] to the state and model rotor dynamics.
        model_dist_f: Append a constant world disturbance force [N] to the state.
        model_dist_t: Append a constant world disturbance torque [N m] to the state.
        model_motor_heat: Append the motors' warm-up states ``θ`` [1] (``motor_heat``, after
            the rotor speeds) and model the warm-up.
        **params: The model parameters by keyword, as below (each a keyword-only argument
            of the signature, :func:`~quadsim.physics.models._rigid.takes_params`).
        mass: See :func:`dynamics` for this and the other parameters (one drone, no batch).
        L: Lever arm [m].
        prop_inertia: Propeller inertia [kg m²].
        gravity_vec: Gravity [m/s²].
        J: Inertia [kg m²].
        J_inv: Inverse inertia.
        rpm2thrust: Thrust polynomial.
        rpm2torque: Torque polynomial.
        mixing_matrix: Mixing matrix ``(3, N)``.
        rotor_dyn_coef: Rotor dynamics coefficients.
        drag_matrix: Linear drag matrix.
        drag_coef: Quadratic drag ``k_d`` [N s²/m²], ``f = -k_d |v| v`` (seed 002; default 0).
        rot_drag_coef: Linear rotational drag [N m s/rad], ``τ = -c ω`` (default 0).
        inflow_coef: Axial-inflow thrust loss ``c_i`` [s/m]: each rotor's thrust times
            ``max(1 - c_i v_z, 0)``, ``v_z`` the air-relative climb speed along body z (default 0).
        warmup_coef: The warm-up's ``c_w`` [1], as in :func:`dynamics` (default 0).
        warmup_time: Its time constant ``τ_w`` [s] (default ``inf``).
        hover_rpm: Its reference speed ``Ω_h`` [RPM] (default 1).

    Returns:
        ``(X_dot, X, U, Y)``: ``X = [pos(3), quat(4), vel(3), ang_vel(3)]`` followed by
        ``rotor_vel(N)``, ``dist_f(3)``, ``dist_t(3)`` when modelled; ``X_dot`` has the same length
        (zero derivative for the disturbances); ``U`` the commanded RPMs ``(N,)``;
        ``Y = [pos, quat]``.
    """
    p = symbolic_params(ROTOR_PARAMS, **params)
    n = len(p.mixing_matrix[0])
    parts = {"pos": 3, "quat": 4, "vel": 3, "ang_vel": 3, "rotor_vel": n * model_rotor_vel,
             "motor_heat": n * model_motor_heat, "dist_f": 3 * model_dist_f,
             "dist_t": 3 * model_dist_t}  # fmt: skip
    sym, U, comps = casadi_state(parts, n)
    qd, vd, wd, rd, *hd = kernel(
        comps("quat"), comps("vel"), comps("ang_vel"), comps("cmd"), comps("rotor_vel"),
        comps("dist_f"), comps("dist_t"), p, CASADI_OPS, None, comps("motor_heat"),
    )  # fmt: skip
    derivs = [comps("vel"), qd, vd, wd] + ([rd] if model_rotor_vel else [])
    derivs += hd
    derivs += [None] * (model_dist_f + model_dist_t)
    return casadi_assemble(sym, derivs, U, ("pos", "quat"))
