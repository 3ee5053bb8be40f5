r"""Wrench-level quadrotor model of seed 002: collective thrust and body torques in.

State ``(pos, quat, vel, ang_vel)`` as in :mod:`quadsim.physics.models.first_principles`; the
command is ``cmd = (F, τ_x, τ_y, τ_z)``: total thrust along body z [N] and body torques [N m].

.. math::

    \dot p = v, \qquad \dot q = \tfrac12\, q ⊗ (ω, 0),

    m \dot v = m g + R\,(0, 0, F) - k_d \lVert v \rVert v + f_{dist},

    J \dot ω = τ - c_ω ω + R^T τ_{dist} - ω × J ω,

with ``R = R(q)`` exact for ``q`` of any nonzero norm (``R(c q) = R(q)``, and
``q̇(c q) = c q̇(q)``; see :mod:`quadsim.physics.models.first_principles`), quadratic translational
drag ``k_d`` [N s²/m²] (seed 002, eq. 7.28; ``k_d = 0.0425`` for the Skydio 2) and linear rotational
drag ``c_ω`` [N m s/rad] (seed 002's simulator uses ``c_ω = 0.1 k_d``).

Deviation from seed 002: its summary equation (7.53) writes ``I ω̇ = τ + ω × I ω``; the correct
Euler equation, which the seed states itself in (7.49), is ``I ω̇ = τ - ω × I ω``. We use (7.49)
and keep the gyroscopic term that the seed's simulator drops. The public ``dynamics`` applies drag
to the ground velocity; the simulator passes the wind ``w`` to the kernel, which then uses the
air-relative velocity ``v - w``.
"""

from __future__ import annotations

from typing import Any

from .._array import CASADI_OPS, namespace, stack
from ..rotation import kmatrix, kquat_dot
from ._rigid import (
    angular_accel,
    casadi_assemble,
    casadi_state,
    check_state,
    norm_safe,
    numeric_params,
    rotational_drag,
    symbolic_params,
    takes_params,
    unstack_opt,
)

__all__ = ["WRENCH_PARAMS", "dynamics", "symbolic_dynamics"]

WRENCH_PARAMS: dict[str, tuple[int, ...]] = {
    "mass": (),
    "gravity_vec": (3,),
    "J": (3, 3),
    "J_inv": (3, 3),
    "drag_coef": (),
    "rot_drag_coef": (),
}
"""Keyword parameters of the wrench model and their trailing shapes."""


def kernel(quat, vel, ang_vel, cmd, dist_f, dist_t, p, ops, wind=None):
    """Component kernel of :func:`dynamics` (shared with its CasADi twin and the simulator).

    Component tuples: ``quat`` (4, xyzw), ``vel`` [m/s] (3), ``ang_vel`` [rad/s] (3, body),
    ``cmd`` ``(F [N], τ [N m] x3)``, ``dist_f`` [N], ``dist_t`` [N m], ``wind`` [m/s] (3, world,
    or ``None``); ``p`` the parameters (:data:`WRENCH_PARAMS`), ``ops`` the ``where``/``sqrt``
    namespace.

    Returns:
        ``(quat_dot, vel_dot, ang_vel_dot)`` as component tuples.
    """
    R = kmatrix(quat)
    air = vel if wind is None else tuple(vel[i] - wind[i] for i in range(3))
    speed = norm_safe(air, ops)
    force = [R[i][2] * cmd[0] - p.drag_coef * speed * air[i] for i in range(3)]
    if dist_f is not None:
        force = [force[i] + dist_f[i] for i in range(3)]
    vel_dot = tuple(p.gravity_vec[i] + force[i] / p.mass for i in range(3))
    torque = rotational_drag(tuple(cmd[1:4]), ang_vel, p)
    ang_vel_dot = angular_accel(R, ang_vel, torque, p, dist_t)
    return kquat_dot(quat, ang_vel), vel_dot, ang_vel_dot


@takes_params(WRENCH_PARAMS)
def dynamics(
    pos: Any,
    quat: Any,
    vel: Any,
    ang_vel: Any,
    cmd: Any,
    dist_f: Any | None = None,
    dist_t: Any | None = None,
    **params: Any,
) -> tuple[Any, Any, Any, Any]:
    """Rigid-body dynamics driven by collective thrust and body torques.

    Args:
        pos: Position, world frame [m], shape ``(..., 3)``.
        quat: Attitude quaternion xyzw, body to world, shape ``(..., 4)``.
        vel: Velocity, world frame [m/s], shape ``(..., 3)``.
        ang_vel: Body angular velocity [rad/s], shape ``(..., 3)``.
        cmd: ``(F, τ_x, τ_y, τ_z)``: thrust [N] and body torques [N m], shape ``(..., 4)``.
        dist_f: World disturbance force [N], shape ``(..., 3)``.
        dist_t: World disturbance torque [N m], shape ``(..., 3)``.
        **params: The model parameters by keyword, as below (each a keyword-only argument
            of the signature, :func:`~quadsim.physics.models._rigid.takes_params`).
        mass: Mass [kg].
        gravity_vec: Gravity [m/s²], shape ``(3,)``.
        J: Inertia [kg m²], shape ``(3, 3)``.
        J_inv: Inverse inertia, shape ``(3, 3)``.
        drag_coef: Quadratic translational drag ``k_d`` [N s²/m²].
        rot_drag_coef: Linear rotational drag ``c_ω`` [N m s/rad].

    Returns:
        ``(pos_dot, quat_dot, vel_dot, ang_vel_dot)``.
    """
    xp = namespace(pos, quat, vel, ang_vel, cmd, dist_f, dist_t)
    p = numeric_params(xp, pos, WRENCH_PARAMS, **params)
    pos, quat, vel, ang_vel, cmd, dist_f, dist_t = check_state(
        xp, pos=(pos, 3), quat=(quat, 4), vel=(vel, 3), ang_vel=(ang_vel, 3), cmd=(cmd, 4),
        dist_f=(dist_f, 3), dist_t=(dist_t, 3))  # fmt: skip
    qd, vd, wd = kernel(*unstack_opt(quat, vel, ang_vel, cmd, dist_f, dist_t), p, xp)
    return vel, stack(xp, qd, pos), stack(xp, vd, pos), stack(xp, wd, pos)


@takes_params(WRENCH_PARAMS)
def symbolic_dynamics(
    model_dist_f: bool = False,
    model_dist_t: bool = False,
    **params: Any,
) -> tuple[Any, Any, Any, Any]:
    """CasADi twin of :func:`dynamics` (same kernel, fresh ``MX`` symbols on every call).

    Args:
        model_dist_f: Append a constant world disturbance force [N] to the state.
        model_dist_t: Append a constant world disturbance torque [N m] to the state.
        **params: The model parameters by keyword, as below (each a keyword-only argument
            of the signature, :func:`~quadsim.physics.models._rigid.takes_params`).
        mass: Parameters as in :func:`dynamics` (one drone, no batch dimensions).
        gravity_vec: Gravity [m/s²].
        J: Inertia [kg m²].
        J_inv: Inverse inertia.
        drag_coef: Quadratic drag [N s²/m²].
        rot_drag_coef: Rotational drag [N m s/rad].

    Returns:
        ``(X_dot, X, U, Y)`` with ``X = [pos, quat, vel, ang_vel]`` (+ disturbances),
        ``U = [F, τ_x, τ_y, τ_z]`` and ``Y = [pos, quat]``.
    """
    p = symbolic_params(WRENCH_PARAMS, **params)
    parts = {"pos": 3, "quat": 4, "vel": 3, "ang_vel": 3,
             "dist_f": 3 * model_dist_f, "dist_t": 3 * model_dist_t}  # fmt: skip
    sym, U, comps = casadi_state(parts, 4)
    qd, vd, wd = kernel(
        comps("quat"), comps("vel"), comps("ang_vel"), comps("cmd"), comps("dist_f"),
        comps("dist_t"), p, CASADI_OPS,
    )  # fmt: skip
    derivs = [comps("vel"), qd, vd, wd] + [None] * (model_dist_f + model_dist_t)
    return casadi_assemble(sym, derivs, U, ("pos", "quat"))
