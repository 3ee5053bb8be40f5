"""Seed 000: the Crazyflie first-principles model with rotor dynamics, linearised with CasADi.

Reproduces seed 000 (drone-models ``first_principles``): the Crazyflie ``cf2x_L250`` with its
asymmetric quadratic rotor dynamics, and the model's CasADi twin
(``quadsim.parametrize(first_principles.symbolic_dynamics, drone)()`` -> ``(X_dot, X, U, Y)``,
17 states ``[pos, quat xyzw, vel, ang_vel, rotor RPM]``, 4 RPM commands). The example

1. linearises the twin at hover with ``casadi.jacobian`` and checks ``A``, ``B`` against finite
   differences of the NumPy model (one-sided, Richardson-extrapolated: the rotor model switches
   branch at ``Ω = Ω_cmd``, and CasADi's ``if_else`` takes the spin-down branch there, so the
   differences step into that branch: rotor speeds up, commands down);
2. designs a continuous LQR on 16 coordinates: the quaternion is replaced by its vector part
   (``δq_w = 0`` to first order at hover), rotor speeds are states;
3. flies the nonlinear model (``quadsim.engines.sim.Simulator``, NumPy, RK4 at 500 Hz) from 0.3 m
   off the hover point with 10° roll back to hover with ``u = u_hover - K (x - x_hover)``, rotor
   commands clipped to ``[rpm_min, rpm_max]``.

Run:  python examples/seed000_casadi_lqr.py
"""

from __future__ import annotations

import casadi as cs
import numpy as np
from scipy.linalg import solve_continuous_are

import quadsim
from quadsim.engines.sim import Simulator
from quadsim.physics import rotation
from quadsim.physics.models import first_principles

DRONE = "cf2x_L250"
HOVER_POS = np.array([0.0, 0.0, 1.0])
START_OFFSET = np.array([0.3, 0.0, 0.0])  # m
START_ROLL = np.radians(10.0)
DURATION = 3.0  # s
DT = 1 / 500  # s

# 16 LQR coordinates: pos(3) q_vec(3) vel(3) ang_vel(3) rotor(4); full state has q_w at index 6
KEEP = np.r_[0:6, 7:17]


def linearize(drone: quadsim.Params, x0: np.ndarray, u0: np.ndarray) -> tuple:
    """``A = ∂f/∂x``, ``B = ∂f/∂u`` (17 x 17, 17 x 4) of the CasADi twin at ``(x0, u0)``."""
    X_dot, X, U, _ = quadsim.parametrize(first_principles.symbolic_dynamics, drone)()
    jac = cs.Function("linearization", [X, U], [cs.jacobian(X_dot, X), cs.jacobian(X_dot, U)])
    A, B = jac(x0, u0)
    return np.array(A), np.array(B)


def numeric_rhs(drone: quadsim.Params):
    """The NumPy model as ``f(x (17,), u (4,)) -> x_dot (17,)``."""
    f = quadsim.parametrize(first_principles.dynamics, drone)

    def rhs(x: np.ndarray, u: np.ndarray) -> np.ndarray:
        pos, quat, vel, w, rotor = np.split(x, [3, 7, 10, 13])
        return np.concatenate(f(pos, quat, vel, w, u, rotor))

    return rhs


def finite_difference(rhs, x0, u0, scale_x, scale_u, rel_step=1e-3) -> tuple:
    """One-sided differences with Richardson extrapolation, ``2 D(h/2) - D(h)``.

    States step up (rotor speeds above the command: spin-down branch), commands step down (same
    branch). The model is a polynomial of degree <= 2 in each single variable, so the result is
    exact up to rounding.
    """

    def column(g, v0, i, h):
        e = np.zeros_like(v0)
        e[i] = h
        d = lambda s: (g(v0 + s * e) - g(v0)) / (s * h)  # noqa: E731
        return 2.0 * d(0.5) - d(1.0)

    A = np.stack([column(lambda x: rhs(x, u0), x0, i, rel_step * scale_x[i])
                  for i in range(x0.size)], axis=1)  # fmt: skip
    B = np.stack([column(lambda u: rhs(x0, u), u0, i, -rel_step * scale_u)
                  for i in range(u0.size)], axis=1)  # fmt: skip
    return A, B


def lqr(A: np.ndarray, B: np.ndarray, Q: np.ndarray, R: np.ndarray) -> np.ndarray:
    """Continuous-time LQR gain ``K = R^{-1} B^T P``."""
    P = solve_continuous_are(A, B, Q, R)
    return np.linalg.solve(R, B.T @ P)


def reduced_state(state, hover_rpm: float) -> np.ndarray:
    """16 LQR coordinates of a simulator state (one drone), quaternion taken with ``w >= 0``."""
    q = np.asarray(state.quat)[0]
    q = q if q[3] >= 0.0 else -q
    return np.concatenate([np.asarray(state.pos)[0] - HOVER_POS, q[:3], np.asarray(state.vel)[0],
                           np.asarray(state.ang_vel)[0],
                           np.asarray(state.rotor_vel)[0] - hover_rpm])  # fmt: skip


def main() -> dict:
    """Linearise, check, design the LQR and fly; returns the measured numbers."""
    drone = quadsim.load_params(DRONE)
    hover = quadsim.envelope(drone).hover_rpm
    u0 = np.full(4, hover)
    x0 = np.concatenate([HOVER_POS, [0, 0, 0, 1.0], np.zeros(6), u0])

    # 1. CasADi linearisation vs finite differences of the numeric model
    rhs = numeric_rhs(drone)
    A, B = linearize(drone, x0, u0)
    scale_x = np.r_[np.ones(13), np.full(4, hover)]  # 1 m, 1, 1 m/s, 1 rad/s, hover RPM
    A_fd, B_fd = finite_difference(rhs, x0, u0, scale_x, hover)
    S = np.diag(1.0 / scale_x)
    As, Afs = S @ A @ np.diag(scale_x), S @ A_fd @ np.diag(scale_x)
    Bs, Bfs = S @ B * hover, S @ B_fd * hover
    lin_err = max(np.max(np.abs(As - Afs)) / np.max(np.abs(As)),
                  np.max(np.abs(Bs - Bfs)) / np.max(np.abs(Bs)))  # fmt: skip
    f0_norm = float(np.max(np.abs(rhs(x0, u0))))  # hover is an equilibrium

    # 2. LQR on 16 coordinates (quaternion vector part; q_w frozen to first order)
    Ar, Br = A[np.ix_(KEEP, KEEP)], B[KEEP]
    Q = np.diag(np.r_[np.full(3, 1 / 0.05**2), np.full(3, 1 / 0.05**2), np.full(3, 1 / 0.2**2),
                      np.full(3, 1.0), np.full(4, 1e-8)])  # fmt: skip
    R = np.eye(4) / 2000.0**2
    K = lqr(Ar, Br, Q, R)
    eig = np.linalg.eigvals(Ar - Br @ K)

    # 3. Fly the nonlinear model back to hover
    sim = Simulator(drone, n=1, dt=DT, integrator="rk4", world=None)
    start_q = rotation.from_euler(np.array([START_ROLL, 0.0, 0.0]))
    state = sim.reset(pos=HOVER_POS + START_OFFSET, attitude=start_q)
    steps = round(DURATION / DT)
    n_clipped, errors = 0, np.empty(steps)
    for k in range(steps):
        u = u0 - K @ reduced_state(state, hover)
        n_clipped += int(np.any((u < drone.rpm_min) | (u > drone.rpm_max)))
        state = sim.step(np.clip(u, drone.rpm_min, drone.rpm_max)[None])
        errors[k] = np.linalg.norm(np.asarray(state.pos)[0] - HOVER_POS)
    outside = np.flatnonzero(errors >= 0.01)
    settle = 0.0 if outside.size == 0 else (outside[-1] + 1) * DT
    pos_err = float(np.linalg.norm(np.asarray(state.pos)[0] - HOVER_POS))
    att_err = float(np.linalg.norm(rotation.log(np.asarray(state.quat)[0])))
    return {
        "linearization_rel_err": float(lin_err),
        "hover_residual": f0_norm,
        "max_closed_loop_real": float(np.max(eig.real)),
        "lqr_gain_shape": K.shape,
        "start_pos_err": float(np.linalg.norm(START_OFFSET)),
        "final_pos_err": pos_err,
        "final_att_err": att_err,
        "settle_time_1cm": float(settle),
        "clipped_steps": n_clipped,
        "steps": steps,
    }


if __name__ == "__main__":
    r = main()
    print(
        f"{DRONE}: CasADi Jacobians vs finite differences: rel. error "
        f"{r['linearization_rel_err']:.1e} (hover residual {r['hover_residual']:.1e})"
    )
    print(f"LQR on 16 coordinates: max Re(eig(A - BK)) = {r['max_closed_loop_real']:.3f} 1/s")
    print(
        f"flight: {r['start_pos_err']:.2f} m and {np.degrees(START_ROLL):.0f} deg roll off "
        f"-> within 1 cm after {r['settle_time_1cm']:.2f} s; after {DURATION:.0f} s position "
        f"error {r['final_pos_err'] * 1e6:.1f} um, attitude error "
        f"{np.degrees(r['final_att_err']):.1e} deg "
        f"({r['clipped_steps']}/{r['steps']} steps with clipped commands)"
    )
