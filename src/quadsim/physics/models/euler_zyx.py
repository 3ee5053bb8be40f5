r"""Euler-angle (ZYX) quadrotor model of seeds 003 and 004, with RPM rotor states.

State ``(pos, rpy, vel, ang_vel[, rotor_vel])``: world position [m], Euler angles
``η = (φ, θ, ψ)`` (roll, pitch, yaw) [rad] with ``R = Rz(ψ) Ry(θ) Rx(φ)``, world velocity [m/s],
body angular velocity ``ν = (p, q, r)`` [rad/s], rotor speeds [RPM]. Forces and torques are those
of :mod:`quadsim.physics.models.first_principles` (same parameters); only the attitude kinematics
differ:

.. math::

    \dot η = W(η)\, ν, \qquad
    W = \begin{bmatrix} 1 & s_φ t_θ & c_φ t_θ \\ 0 & c_φ & -s_φ \\ 0 & s_φ / c_θ & c_φ / c_θ
    \end{bmatrix}  \quad \text{(seed 004, eq. 8)},

    J \dot ν = τ - ν × J ν \quad \text{(the gyroscopic term is kept)}.

``small_angle=True`` uses seed 003's near-hover simplification ``η̇ = ν`` instead.

Seed 004 writes its state with Euler-angle *rates* and its eq. 10-11 for their derivatives; we keep
body rates as states (the same dynamics, without the long expression) and form ``η̇ = W ν``
exactly. Seed 004's eq. 10 has two misprints, which ``examples/seed004_euler_vs_quaternion.py``
shows numerically: entry (1, 3) must read ``-φ̇ s_φ t_θ`` (printed ``-φ̇ s_φ c_θ``) and entry
(3, 2) ``θ̇ s_φ t_θ / c_θ`` (printed ``φ̇ s_φ t_θ / c_θ``). Seed 003's 16-element layout
``[pos, vel, rpy, ang_vel, rpm]`` with first-order motor lag
(``rotor_dyn_coef = [k_m, 0, k_m, 0]``) is :func:`dynamics_flat`.

Gimbal lock: ``W`` is singular at ``|θ| = 90°``; the rates grow like ``1/cos θ`` near it. Where
``cos² θ`` is below the dtype's machine epsilon, ``rpy_dot`` is NaN (documented, not an
exception, so the function stays usable under ``jax.jit``); use the quaternion model for flight
through vertical attitudes.
"""

from __future__ import annotations

from typing import Any

from .._array import CASADI_OPS, check_shape, namespace, stack
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

__all__ = ["dynamics", "dynamics_flat", "rotation_matrix", "symbolic_dynamics"]

_F64_EPS = 2.220446049250313e-16


def rotation_matrix(rpy: tuple, ops: Any) -> tuple:
    """``R_wb = Rz(ψ) Ry(θ) Rx(φ)`` as row tuples (seed 004, eq. 6)."""
    sf, cf = ops.sin(rpy[0]), ops.cos(rpy[0])
    st, ct = ops.sin(rpy[1]), ops.cos(rpy[1])
    sp, cp = ops.sin(rpy[2]), ops.cos(rpy[2])
    return (
        (cp * ct, cp * st * sf - sp * cf, cp * st * cf + sp * sf),
        (sp * ct, sp * st * sf + cp * cf, sp * st * cf - cp * sf),
        (-st, ct * sf, ct * cf),
    )


def _euler_rates(rpy: tuple, nu: tuple, ops: Any, eps: float) -> tuple:
    sf, cf = ops.sin(rpy[0]), ops.cos(rpy[0])
    ct = ops.cos(rpy[1])
    singular = ct * ct < eps
    inv_ct = 1.0 / ops.where(singular, 1.0 + 0.0 * ct, ct)  # safe divisor, masked below
    tt = ops.sin(rpy[1]) * inv_ct
    rates = (
        nu[0] + sf * tt * nu[1] + cf * tt * nu[2],
        cf * nu[1] - sf * nu[2],
        (sf * nu[1] + cf * nu[2]) * inv_ct,
    )
    nan = float("nan")
    return tuple(ops.where(singular, nan + 0.0 * r, r) for r in rates)


def kernel(rpy, vel, ang_vel, cmd, rotor_vel, dist_f, dist_t, p, ops, small_angle, eps, wind=None,
           heat=None):  # fmt: skip
    """Component kernel of :func:`dynamics` (shared with its CasADi twin and the simulator).

    As :func:`quadsim.physics.models.first_principles.kernel`, with ``rpy`` [rad] (3) for the
    attitude; ``small_angle`` uses ``rpy_dot = ang_vel``, ``eps`` is the gimbal-lock threshold
    on ``cos² pitch``.

    Returns:
        ``(rpy_dot, vel_dot, ang_vel_dot, rotor_vel_dot)`` as component tuples, and
        ``motor_heat_dot`` after them when ``heat`` is given.
    """
    R = rotation_matrix(rpy, ops)
    vel_dot, ang_vel_dot, rotor_dot, heat_dot = rotor_accels(R, vel, ang_vel, cmd, rotor_vel,
                                                             dist_f, dist_t, p, ops, wind, heat)
    rpy_dot = tuple(ang_vel) if small_angle else _euler_rates(rpy, ang_vel, ops, eps)
    out = (rpy_dot, vel_dot, ang_vel_dot, rotor_dot)
    return out if heat is None else (*out, heat_dot)


@takes_params(ROTOR_PARAMS, DRAG_DEFAULTS)
def dynamics(
    pos: Any,
    rpy: Any,
    vel: Any,
    ang_vel: Any,
    cmd: Any,
    rotor_vel: Any | None = None,
    dist_f: Any | None = None,
    dist_t: Any | None = None,
    motor_heat: Any | None = None,
    *,
    small_angle: bool = False,
    **params: Any,
) -> tuple[Any, ...]:
    """Euler-angle quadrotor dynamics with rotor speeds in RPM.

    Args:
        pos: Position, world frame [m], shape ``(..., 3)``.
        rpy: Roll, pitch, yaw [rad], shape ``(..., 3)``.
        vel: Velocity, world frame [m/s], shape ``(..., 3)``.
        ang_vel: Body angular velocity [rad/s], shape ``(..., 3)``.
        cmd: Commanded rotor speeds [RPM], shape ``(..., N)``.
        rotor_vel: Actual rotor speeds [RPM] or ``None`` (commands act directly).
        dist_f: World disturbance force [N], shape ``(..., 3)``.
        dist_t: World disturbance torque [N m], shape ``(..., 3)``.
        motor_heat: The motors' warm-up states ``θ`` [1] ``(..., N)`` or ``None`` (no warm-up).
        **params: The model parameters by keyword, as below (each a keyword-only argument
            of the signature, :func:`~quadsim.physics.models._rigid.takes_params`).
        mass: Parameters as in :func:`quadsim.physics.models.first_principles.dynamics`.
        L: Lever arm [m].
        prop_inertia: Propeller inertia [kg m²].
        gravity_vec: Gravity [m/s²].
        J: Inertia [kg m²].
        J_inv: Inverse inertia.
        rpm2thrust: Thrust polynomial [N, N/RPM, N/RPM²].
        rpm2torque: Torque polynomial [N m, N m/RPM, N m/RPM²].
        mixing_matrix: Mixing matrix ``(3, N)``.
        drag_matrix: Linear body drag [N s/m].
        drag_coef: Quadratic drag ``k_d`` [N s²/m²], ``f = -k_d |v| v`` (seed 002; default 0).
        rot_drag_coef: Linear rotational drag [N m s/rad], ``τ = -c ω`` (default 0).
        inflow_coef: Axial-inflow thrust loss ``c_i`` [s/m]: each rotor's thrust times
            ``max(1 - c_i v_z, 0)``, ``v_z`` the air-relative climb speed along body z (default 0).
        warmup_coef: Motor warm-up thrust loss ``c_w`` [1]: each rotor's thrust times
            ``max(1 - c_w θ, 0)`` with its state ``θ`` (``motor_heat``; default 0).
        warmup_time: The warm-up's time constant ``τ_w`` [s] (default ``inf``).
        hover_rpm: The hover speed ``Ω_h`` [RPM] the warm-up's drive ``(Ω/Ω_h)³`` is relative
            to (default 1; unused without ``motor_heat``).
        rotor_dyn_coef: Rotor dynamics coefficients.
        small_angle: Use ``rpy_dot = ang_vel`` (seed 003) instead of ``W(rpy) ang_vel``.

    Returns:
        ``(pos_dot, rpy_dot, vel_dot, ang_vel_dot, rotor_vel_dot)``, and ``motor_heat_dot``
        after them when ``motor_heat`` is given; ``rpy_dot`` is NaN where ``cos² pitch`` is
        below machine epsilon (gimbal lock) unless ``small_angle``.
    """
    xp = namespace(pos, rpy, vel, ang_vel, cmd, rotor_vel, dist_f, dist_t, motor_heat)
    p = numeric_params(xp, pos, ROTOR_PARAMS, **params)
    n = len(p.mixing_matrix[0])
    pos, rpy, vel, ang_vel, cmd, rotor_vel, dist_f, dist_t, heat = check_state(
        xp, pos=(pos, 3), rpy=(rpy, 3), vel=(vel, 3), ang_vel=(ang_vel, 3), cmd=(cmd, n),
        rotor_vel=(rotor_vel, n), dist_f=(dist_f, 3), dist_t=(dist_t, 3),
        motor_heat=(motor_heat, n))  # fmt: skip
    eps = float(xp.finfo(pos.dtype).eps)
    s = unstack_opt(rpy, vel, ang_vel, cmd, rotor_vel, dist_f, dist_t)
    ed, vd, wd, rd, *hd = kernel(*s, p, xp, small_angle, eps, None, unstack_opt(heat)[0])
    hd = hd[0] if hd else None
    out = (vel, stack(xp, ed, pos), stack(xp, vd, pos), stack(xp, wd, pos),
           None if rd is None else stack(xp, rd, pos))  # fmt: skip
    return out if hd is None else (*out, stack(xp, hd, pos))


def dynamics_flat(state: Any, cmd: Any, *, small_angle: bool = False, **params: Any) -> Any:
    """Seed 003's 16-element state derivative ``[pos, vel, rpy, ang_vel, rpm]`` (4 rotors).

    Args:
        state: ``(..., 12 + N)`` array: position [m], velocity [m/s], roll/pitch/yaw [rad], body
            rates [rad/s], rotor speeds [RPM].
        cmd: Desired rotor speeds [RPM], ``(..., N)``. Seed 003's motor lag is
            ``rotor_dyn_coef = [k_m, 0, k_m, 0]``.
        small_angle: Seed 003's simplification ``rpy_dot = ang_vel``.
        **params: Model parameters as for :func:`dynamics`.

    Returns:
        ``state_dot`` with the layout of ``state``.
    """
    xp = namespace(state, cmd)
    n = cmd.shape[-1]
    check_shape(state, (12 + n,), "state")
    pos, vel, rpy, w, rotor = (
        state[..., i:j] for i, j in ((0, 3), (3, 6), (6, 9), (9, 12), (12, 12 + n))
    )
    pd, ed, vd, wd, rd = dynamics(pos, rpy, vel, w, cmd, rotor, small_angle=small_angle, **params)
    return xp.concat([pd, vd, ed, wd, rd], axis=-1)


@takes_params(ROTOR_PARAMS, DRAG_DEFAULTS)
def symbolic_dynamics(
    model_rotor_vel: bool = True,
    model_dist_f: bool = False,
    model_dist_t: bool = False,
    model_motor_heat: bool = False,
    *,
    small_angle: bool = False,
    **params: Any,
) -> tuple[Any, Any, Any, Any]:
    """CasADi twin of :func:`dynamics` (same kernel, fresh ``MX`` symbols on every call).

    Returns ``(X_dot, X, U, Y)`` with ``X = [pos, rpy, vel, ang_vel]`` followed by ``rotor_vel``,
    ``dist_f``, ``dist_t`` when modelled, and ``Y = [pos, rpy]``.

    Args:
        model_rotor_vel: Append rotor speeds [RPM] to the state.
        model_dist_f: Append a constant world disturbance force [N].
        model_dist_t: Append a constant world disturbance torque [N m].
        model_motor_heat: Append the motors' warm-up states ``θ`` [1] after the rotor speeds.
        **params: The model parameters by keyword, as below (each a keyword-only argument
            of the signature, :func:`~quadsim.physics.models._rigid.takes_params`).
        mass: Parameters as in :func:`dynamics` (one drone, no batch dimensions).
        L: Lever arm [m].
        prop_inertia: Propeller inertia [kg m²].
        gravity_vec: Gravity [m/s²].
        J: Inertia [kg m²].
        J_inv: Inverse inertia.
        rpm2thrust: Thrust polynomial.
        rpm2torque: Torque polynomial.
        mixing_matrix: Mixing matrix ``(3, N)``.
        drag_matrix: Linear body drag.
        drag_coef: Quadratic drag ``k_d`` [N s²/m²], ``f = -k_d |v| v`` (seed 002; default 0).
        rot_drag_coef: Linear rotational drag [N m s/rad], ``τ = -c ω`` (default 0).
        inflow_coef: Axial-inflow thrust loss ``c_i`` [s/m]: each rotor's thrust times
            ``max(1 - c_i v_z, 0)``, ``v_z`` the air-relative climb speed along body z (default 0).
        warmup_coef: The warm-up's ``c_w`` [1], as in :func:`dynamics` (default 0).
        warmup_time: Its time constant ``τ_w`` [s] (default ``inf``).
        hover_rpm: Its reference speed ``Ω_h`` [RPM] (default 1).
        rotor_dyn_coef: Rotor dynamics coefficients.
        small_angle: As in :func:`dynamics`.
    """
    p = symbolic_params(ROTOR_PARAMS, **params)
    n = len(p.mixing_matrix[0])
    parts = {"pos": 3, "rpy": 3, "vel": 3, "ang_vel": 3, "rotor_vel": n * model_rotor_vel,
             "motor_heat": n * model_motor_heat, "dist_f": 3 * model_dist_f,
             "dist_t": 3 * model_dist_t}  # fmt: skip
    sym, U, comps = casadi_state(parts, n)
    ed, vd, wd, rd, *hd = kernel(
        comps("rpy"), comps("vel"), comps("ang_vel"), comps("cmd"), comps("rotor_vel"),
        comps("dist_f"), comps("dist_t"), p, CASADI_OPS, small_angle, _F64_EPS, None,
        comps("motor_heat"),
    )  # fmt: skip
    derivs = [comps("vel"), ed, vd, wd] + ([rd] if model_rotor_vel else [])
    derivs += hd
    derivs += [None] * (model_dist_f + model_dist_t)
    return casadi_assemble(sym, derivs, U, ("pos", "rpy"))
