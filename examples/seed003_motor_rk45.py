"""Seed 003: motor model (allocation, clipping, first-order lag) and the 16-state Euler model, RK45.

Reproduces seed 003's physics layer: the 4 x 4 matrix from squared rotor speeds to
``[F, Mx, My, Mz]`` (its rows put the rotors on the body axes, i.e. ``layout("plus", d)``), the
allocation ``rpm = clip(sqrt(max(P^-1 w, 0)), rpm_min, rpm_max)``, the motor lag
``rpm_dot = k_m (rpm_des - rpm)`` with ``rpm_min = 3000``, ``rpm_max = 20000``, ``k_m = 36.5 1/s``,
and its loop: each 10 ms step the desired wrench is allocated and held while
``scipy.integrate.solve_ivp(method="RK45")`` integrates the 16-element state
``[pos, vel, rpy, ang_vel, rpm]`` (:func:`quadsim.physics.models.euler_zyx.dynamics_flat` with seed
003's ``small_angle=True``); the last column is the new state.

The seed gives no drone: we use the Crazyflie 2.1 preset ``cf21B_500`` (mass 43.4 g, its inertia
and the quadratic coefficients of its curves, ``cT = 4.41e-10 N/RPM^2``, ``cQ = 2.47e-12
N m/RPM^2``) with the rotors on the body axes at ``d = 0.05 m`` and seed 003's limits and lag;
no drag, no propeller inertia (seed 003 has neither). Deviation: seed 003 holds the *achieved*
wrench and ``rpm_dot`` of the step start over the step; here the held quantity is the desired
speed and the rotor speeds follow the lag within the step, so the step response is the exact
``exp(-k_m t)`` that the example checks.

Scenarios, each from hover at 1 m: hover (2 s), thrust step to 1.3 m g, yaw-torque step, and
requests beyond the limits (clipped to ``rpm_max`` / ``rpm_min``), 0.5 s each. The positions, yaw
rates and rotor speeds are compared with closed forms, the envelope formulas with
:func:`quadsim.envelope`, and the loop with the library's own ``Simulator(model="euler_zyx",
integrator=rk45)``.

Run:  python examples/seed003_motor_rk45.py
"""

from __future__ import annotations

import functools

import numpy as np
from scipy.integrate import solve_ivp

import quadsim
from quadsim.engines.sim import Simulator
from quadsim.physics import integrators, rotors
from quadsim.physics.models import euler_zyx

RPM_MIN, RPM_MAX, K_M = 3000.0, 20000.0, 36.5  # seed 003 [RPM, RPM, 1/s]
ARM = 0.05  # m
DT = 0.01  # s, control step
RTOL, ATOL = 1e-10, 1e-10


def seed003_drone() -> quadsim.Params:
    """``cf21B_500`` with seed 003's plus geometry, pure quadratic curves, limits and lag."""
    base = quadsim.load_params("cf21B_500")
    geo = rotors.layout("plus", ARM)  # M1 front, M2 left, M3 back, M4 right; spins +,-,+,-
    return base._replace(
        name="seed003_cf21B", rotor_positions=geo.rotor_positions, rotor_spin=geo.rotor_spin,
        L=geo.L, mixing_matrix=geo.mixing_matrix, prop_inertia=0.0,
        rpm2thrust=np.array([0.0, 0.0, base.rpm2thrust[2]]),
        rpm2torque=np.array([0.0, 0.0, base.rpm2torque[2]]),
        rotor_dyn_coef=np.array([K_M, 0.0, K_M, 0.0]), rpm_min=RPM_MIN, rpm_max=RPM_MAX,
        drag_matrix=np.zeros((3, 3)),
    )  # fmt: skip


def seed_matrix(cT: float, cQ: float, d: float) -> np.ndarray:
    """Seed 003's table, typed as printed (motor columns 1-4)."""
    return np.array([[cT, cT, cT, cT], [0.0, d * cT, 0.0, -d * cT], [-d * cT, 0.0, d * cT, 0.0],
                     [-cQ, cQ, -cQ, cQ]])  # fmt: skip


def seed_allocate(wrench: np.ndarray, prop_matrix: np.ndarray) -> np.ndarray:
    """Seed 003: solve for squared speeds, clamp negatives, square root, clip to the limits."""
    rpm_sq = np.linalg.solve(prop_matrix, wrench)
    return np.clip(np.sqrt(np.maximum(rpm_sq, 0.0)), RPM_MIN, RPM_MAX)


def fly(f, state0: np.ndarray, wrench: np.ndarray, prop_matrix: np.ndarray, duration: float):
    """Seed 003's loop: allocate, hold, RK45 over each step; returns times and states."""
    s, out = state0.copy(), [state0.copy()]
    for _ in range(round(duration / DT)):
        rpm_des = seed_allocate(wrench, prop_matrix)
        sol = solve_ivp(lambda t, x, u=rpm_des: f(x, u), (0.0, DT), s, method="RK45", rtol=RTOL,
                        atol=ATOL)  # fmt: skip
        s = sol.y[:, -1]
        out.append(s)
    return DT * np.arange(len(out)), np.array(out)


def lag_closed_forms(t, rpm0, rpm_des, k):
    """``Ω_i(t) = a_i + b_i e^{-kt}`` and the integrals of ``Ω_i^2`` (once, twice) over [0, t]."""
    a, b = rpm_des, rpm0 - rpm_des
    t = np.asarray(t)[:, None]
    e1, e2 = np.exp(-k * t), np.exp(-2 * k * t)
    omega = a + b * e1
    int1 = a * a * t + 2 * a * b * (1 - e1) / k + b * b * (1 - e2) / (2 * k)

    def twice(kk):
        return t / kk - (1 - np.exp(-kk * t)) / kk**2

    int2 = a * a * t * t / 2 + 2 * a * b * twice(k) + b * b * twice(2 * k)
    return omega, int1, int2


def main() -> dict:
    """Run the seed 003 scenarios; returns the measured numbers."""
    drone = seed003_drone()
    env = quadsim.envelope(drone)
    m, g = drone.mass, float(-drone.gravity_vec[2])
    cT, cQ = float(drone.rpm2thrust[2]), float(drone.rpm2torque[2])
    Jz = float(drone.J[2, 2])
    out: dict = {"mass": m, "hover_rpm": env.hover_rpm}

    # the matrix: seed table == quadsim's rpm^2 matrix == allocation_matrix (per thrust) * cT
    P = rotors.rpm_sq_allocation_matrix(drone.rotor_positions, drone.rotor_spin, cT, cQ)
    out["matrix_err"] = float(max(np.max(np.abs(P - seed_matrix(cT, cQ, ARM)) / np.abs(P).max(1,
        keepdims=True)), np.max(np.abs(rotors.allocation_matrix(drone) * cT - P)
        / np.abs(P).max(1, keepdims=True))))  # fmt: skip

    # seed 003's envelope formulas vs quadsim.physics.envelope
    t_max, t_min = 4 * cT * RPM_MAX**2, 4 * cT * RPM_MIN**2
    seed_env = {
        "thrust_max": t_max,
        "thrust_min": t_min,
        "thrust_to_weight": t_max / (m * g),
        "accel_up_max": (t_max - m * g) / m,
        "accel_down_max": (m * g - t_min) / m,
    }
    out.update(seed_env)
    out["envelope_rel_err"] = max(abs(v / getattr(env, k) - 1) for k, v in seed_env.items())

    # dynamics_flat takes **params, which parametrize cannot inspect: bind those of dynamics
    params = quadsim.parametrize(euler_zyx.dynamics, drone).keywords
    f = functools.partial(euler_zyx.dynamics_flat, small_angle=True, **params)
    hover = np.full(4, env.hover_rpm)
    s0 = np.concatenate([[0, 0, 1.0], np.zeros(9), hover])
    weight = np.array([m * g, 0, 0, 0])

    # hover: 2 s
    t, s = fly(f, s0, weight, P, 2.0)
    out["hover_dz"] = float(np.max(np.abs(s[:, 2] - 1.0)))

    # thrust step to 1.3 m g: rotor speeds vs exp(-k_m t), height vs the closed form
    w_up = np.array([1.3 * m * g, 0, 0, 0])
    rpm_des = seed_allocate(w_up, P)
    t, s = fly(f, s0, w_up, P, 0.5)
    omega, _, int2 = lag_closed_forms(t, hover, rpm_des, K_M)
    checks = np.searchsorted(t, [0.01, 0.05, 0.1, 0.3, 0.5])
    out["thrust_step_rpm_rel_err"] = float(np.max(np.abs(s[checks, 12:] / omega[checks] - 1)))
    z_exact = 1.0 - g * t**2 / 2 + cT * int2.sum(1) / m
    out["thrust_step_z_err"] = float(np.max(np.abs(s[:, 2] - z_exact)))
    out["thrust_step_dz"] = float(s[-1, 2] - 1.0)

    # the same step through quadsim's Simulator with its rk45 integrator (exact W, same here)
    sim = Simulator(
        drone,
        dt=DT,
        model="euler_zyx",
        world=None,
        integrator=functools.partial(integrators.rk45, rtol=RTOL, atol=ATOL),
    )
    sim.reset(pos=[0, 0, 1.0], rotor_vel=hover)
    sim.rollout(rpm_des[None], record=False, steps=len(t) - 1)
    st = sim.state
    lib = np.concatenate([np.asarray(a)[0] for a in (st.pos, st.vel, st.rpy, st.ang_vel)])
    out["simulator_vs_loop"] = float(np.max(np.abs(lib - s[-1, :12])))

    # yaw-torque step: rotor speeds and the yaw rate vs closed forms; allocation vs quadsim's
    w_yaw = np.array([m * g, 0, 0, 2e-4])
    rpm_des = seed_allocate(w_yaw, P)
    out["allocate_vs_quadsim"] = float(np.max(np.abs(rotors.allocate(w_yaw, drone).rpm / rpm_des
                                                     - 1)))  # fmt: skip
    t, s = fly(f, s0, w_yaw, P, 0.5)
    omega, int1, _ = lag_closed_forms(t, hover, rpm_des, K_M)
    out["yaw_step_rpm_rel_err"] = float(np.max(np.abs(s[checks, 12:] / omega[checks] - 1)))
    r_exact = cQ * (int1 @ -drone.rotor_spin) / Jz
    out["yaw_step_rate_err"] = float(np.max(np.abs(s[:, 11] - r_exact)))
    out["yaw_rate_end"] = float(s[-1, 11])

    # beyond the limits: every rotor clipped; after 0.5 s (18 time constants) the vertical
    # acceleration is the envelope's
    for key, w in (("clip_up", [10.0, 0, 0, 0]), ("clip_down", [0.0, 0, 0, 0])):
        w = np.array(w)
        out[f"{key}_rpm"] = float(seed_allocate(w, P)[0])
        t, s = fly(f, s0, w, P, 0.5)
        out[f"{key}_accel"] = float(f(s[-1], seed_allocate(w, P))[5])
    out["clip_accel_rel_err"] = max(
        abs(out["clip_up_accel"] / env.accel_up_max - 1),
        abs(-out["clip_down_accel"] / env.accel_down_max - 1),
    )
    return out


if __name__ == "__main__":
    r = main()
    print(
        f"drone: cf21B_500 mass {r['mass'] * 1e3:.1f} g on seed 003's plus frame, "
        f"hover {r['hover_rpm']:.0f} RPM; matrix vs seed table: rel. error {r['matrix_err']:.0e}"
    )
    print(
        f"seed formulas: T_max {r['thrust_max']:.4f} N, T_min {r['thrust_min']:.4f} N, "
        f"T/W {r['thrust_to_weight']:.3f}, a_up {r['accel_up_max']:.3f} m/s^2, a_down "
        f"{r['accel_down_max']:.3f} m/s^2 (vs quadsim.envelope: {r['envelope_rel_err']:.0e})"
    )
    print(f"hover 2 s: |dz| <= {r['hover_dz']:.1e} m")
    print(
        f"thrust step 1.3 mg: rpm vs exp(-k_m t) {r['thrust_step_rpm_rel_err']:.1e} rel., "
        f"z vs closed form {r['thrust_step_z_err']:.1e} m (climb {r['thrust_step_dz']:.3f} m "
        f"in 0.5 s); Simulator(rk45) vs loop {r['simulator_vs_loop']:.1e}"
    )
    print(
        f"yaw step 2e-4 N m: rpm vs exp(-k_m t) {r['yaw_step_rpm_rel_err']:.1e} rel., yaw rate "
        f"vs closed form {r['yaw_step_rate_err']:.1e} rad/s (r = {r['yaw_rate_end']:.3f} rad/s "
        f"at 0.5 s); seed allocation vs quadsim.physics.rotors.allocate "
        f"{r['allocate_vs_quadsim']:.0e}"
    )
    print(
        f"clipped requests: {r['clip_up_rpm']:.0f} RPM -> {r['clip_up_accel']:.3f} m/s^2, "
        f"{r['clip_down_rpm']:.0f} RPM -> {r['clip_down_accel']:.3f} m/s^2 (vs a_up, -a_down: "
        f"{r['clip_accel_rel_err']:.0e} rel.)"
    )
