"""Seed 004: the Euler-angle (ZYX) model against the quaternion model, and its equations.

Reproduces seed 004 ("Quadcopter Model"): the same drone (``f450_plus``) and the same open-loop
rotor-speed commands flown by :mod:`quadsim.physics.models.euler_zyx` (attitude ``η = (φ, θ, ψ)``,
``η̇ = W(η) ν``) and by :mod:`quadsim.physics.models.first_principles` (quaternion), both with rotor
dynamics, RK4 at 2 ms, for 2 s with attitudes up to about 30°. Both are exact descriptions of
the same physics, so positions and attitudes (via ``quadsim.physics.rotation.to_euler``) agree to
the
integration error. Then the seed's equations are checked one by one with random states:

* eq. 2 and 3: the allocation of its clockwise-numbered plus layout (M1 front, M2 right, M3 back,
  M4 left) is ``rotors.rpm_sq_allocation_matrix`` of ``rotors.layout("plus", l,
  clockwise=True)``, and eq. 3 is its inverse;
* eq. 6: ``R_B^W`` is ``rotation.to_matrix(rotation.from_euler(η))``;
* eq. 7 and 8: ``W_W^B W_B^W = I``; the model's ``rpy_dot`` is ``W_B^W ν``, and so is the time
  derivative of ``to_euler(q)`` for ``q̇ = ½ q ⊗ (ν, 0)`` (central differences);
* eq. 9: the model's acceleration with ``f_t = Σ c_T Ω_i²``;
* eq. 10 (``η̈ = Ẇ ν + W ν̇``): against the derivative of the model's ``rpy_dot`` along its flow.
  As printed, the seed's ``Ẇ`` has two typos, entry (1,3) ``-φ̇ S_φ C_θ`` for ``-φ̇ S_φ T_θ`` and
  entry (3,2) ``φ̇ S_φ T_θ / C_θ`` for ``θ̇ S_φ T_θ / C_θ``; the example reports both versions.

Last, near gimbal lock: starting at 80° pitch with body rates ``(ε, 1, ε)`` rad/s the pitch passes
within a fraction of a degree of 90°. ``W``'s condition number and the Euler rates grow like
``1/cos θ``, and with the same step the Euler model's attitude error grows by orders of magnitude
while the quaternion model's does not (both against a quaternion run at half the step).

Run:  python examples/seed004_euler_vs_quaternion.py
"""

from __future__ import annotations

import numpy as np

import quadsim
from quadsim.engines.sim import Simulator
from quadsim.physics import rotation, rotors
from quadsim.physics.models import euler_zyx

DRONE = "f450_plus"
DT = 2e-3  # s
DURATION = 2.0  # s
AMP = np.array([0.01, 0.006, -0.008, 0.005])  # relative rotor-speed excitation
FREQ = np.array([0.7, 1.1, 0.9, 1.3])  # Hz
PHASE = np.array([0.0, 1.0, 2.0, 3.0])  # rad
EPSILONS = (0.05, 0.01, 0.005)  # rad/s, off-axis rates of the gimbal-lock runs


def w_body_to_world(rpy: np.ndarray) -> np.ndarray:
    """Seed 004 eq. 8, ``W_B^W`` (3, 3), typed as printed."""
    sf, cf, tt, ct = np.sin(rpy[0]), np.cos(rpy[0]), np.tan(rpy[1]), np.cos(rpy[1])
    return np.array([[1, sf * tt, cf * tt], [0, cf, -sf], [0, sf / ct, cf / ct]])


def w_world_to_body(rpy: np.ndarray) -> np.ndarray:
    """Seed 004 eq. 7, ``W_W^B`` (3, 3)."""
    sf, cf, st, ct = np.sin(rpy[0]), np.cos(rpy[0]), np.sin(rpy[1]), np.cos(rpy[1])
    return np.array([[1, 0, -st], [0, cf, ct * sf], [0, -sf, ct * cf]])


def w_dot(rpy: np.ndarray, rpy_dot: np.ndarray, as_printed: bool) -> np.ndarray:
    """``Ẇ`` of eq. 10: as printed in seed 004, or corrected (entries (1,3) and (3,2))."""
    sf, cf, tt, ct = np.sin(rpy[0]), np.cos(rpy[0]), np.tan(rpy[1]), np.cos(rpy[1])
    fd, td = rpy_dot[0], rpy_dot[1]
    e13 = -fd * sf * (ct if as_printed else tt) + td * cf / ct**2
    e32 = fd * cf / ct + (fd if as_printed else td) * sf * tt / ct
    return np.array([[0, fd * cf * tt + td * sf / ct**2, e13], [0, -fd * sf, -fd * cf],
                     [0, e32, -fd * sf / ct + td * cf * tt / ct]])  # fmt: skip


def attitude_error(q: np.ndarray, rpy: np.ndarray) -> np.ndarray:
    """Rotation angle [rad] between quaternions ``q`` and Euler angles ``rpy`` (..., 3)."""
    dq = rotation.multiply(rotation.conjugate(q), rotation.from_euler(rpy))
    return np.linalg.norm(rotation.log(dq), axis=-1)


def fly(model: str, cmds, dt: float, attitude_rpy, ang_vel, steps=None):
    """Open-loop run of one drone; returns the trajectory (leading axis time, then drone)."""
    sim = Simulator(DRONE, dt=dt, model=model, integrator="rk4", world=None)
    att = np.asarray(attitude_rpy, dtype=float)
    sim.reset(pos=[0.0, 0.0, 0.0], attitude=att if model == "euler_zyx" else
              rotation.from_euler(att), ang_vel=ang_vel)  # fmt: skip
    return sim.rollout(cmds, steps=steps)


def side_by_side(hover: float) -> dict:
    """Both models, same commands, 2 s; the largest position and attitude differences."""
    t = DT * np.arange(round(DURATION / DT))
    cmds = hover * (1 + AMP * np.sin(2 * np.pi * FREQ * t[:, None] + PHASE))[:, None, :]
    quat = fly("first_principles", cmds, DT, [0, 0, 0], [0, 0, 0])
    eul = fly("euler_zyx", cmds, DT, [0, 0, 0], [0, 0, 0])
    rpy_q = rotation.to_euler(np.asarray(quat.quat)[:, 0])
    rpy_e = np.asarray(eul.rpy)[:, 0]
    d_rpy = np.angle(np.exp(1j * (rpy_q - rpy_e)))  # wrapped to (-π, π]
    return {
        "max_pos_diff": float(np.max(np.abs(np.asarray(quat.pos) - np.asarray(eul.pos)))),
        "max_rpy_diff": float(np.max(np.abs(d_rpy))),
        "max_att_diff": float(np.max(attitude_error(np.asarray(quat.quat)[:, 0], rpy_e))),
        "max_tilt_deg": float(np.degrees(np.max(np.abs(rpy_e[:, :2])))),
        "max_yaw_deg": float(np.degrees(np.max(np.abs(rpy_e[:, 2])))),
        "distance": float(np.linalg.norm(np.asarray(quat.pos)[-1, 0])),
    }


def equations(drone: quadsim.Params, rng: np.random.Generator) -> dict:
    """Seed 004 eq. 2, 3, 6-10 against quadsim, over random states (|pitch| < 70°)."""
    out = {}
    cT, cQ, arm = float(drone.rpm2thrust[2]), float(drone.rpm2torque[2]), 0.17
    geo = rotors.layout("plus", arm, clockwise=True)
    A = rotors.rpm_sq_allocation_matrix(geo.rotor_positions, geo.rotor_spin, cT, cQ)
    lc = arm * cT
    eq2 = np.array([[cT, cT, cT, cT], [0, -lc, 0, lc], [-lc, 0, lc, 0], [-cQ, cQ, -cQ, cQ]])
    a, b, c = 1 / (4 * cT), 1 / (2 * lc), 1 / (4 * cQ)
    eq3 = np.array([[a, 0, -b, -c], [a, -b, 0, c], [a, 0, b, -c], [a, b, 0, c]])
    out["eq2_err"] = float(np.max(np.abs(A - eq2) / np.abs(eq2).max(1, keepdims=True)))
    out["eq3_err"] = float(np.max(np.abs(np.linalg.inv(A) - eq3) / np.abs(eq3).max(0)))

    n = 200
    rpy = rng.uniform([-np.pi, -1.2, -np.pi], [np.pi, 1.2, np.pi], (n, 3))
    nu = rng.normal(size=(n, 3))
    rotor = drone.rpm_max * rng.uniform(0.2, 0.9, (n, 4))
    vel = rng.normal(size=(n, 3))
    f = quadsim.parametrize(euler_zyx.dynamics, drone)
    pos = np.zeros((n, 3))
    _, rpy_dot, vel_dot, nu_dot, rotor_dot = f(pos, rpy, vel, nu, rotor * 1.01, rotor)

    R6 = np.stack([np.array(euler_zyx.rotation_matrix(r, np)) for r in rpy])
    out["eq6_err"] = float(np.max(np.abs(R6 - rotation.to_matrix(rotation.from_euler(rpy)))))
    W8 = np.stack([w_body_to_world(r) for r in rpy])
    W7 = np.stack([w_world_to_body(r) for r in rpy])
    out["eq7_err"] = float(np.max(np.abs(W7 @ W8 - np.eye(3))))
    w_nu = np.einsum("nij,nj->ni", W8, nu)
    out["eq8_model_err"] = float(np.max(np.abs(rpy_dot - w_nu)))
    h = 1e-5  # d/dt to_euler(q(t)) with q(t) = q ⊗ exp(ν t), central difference
    q = rotation.from_euler(rpy)
    fd = (rotation.to_euler(rotation.integrate(q, nu, h))
          - rotation.to_euler(rotation.integrate(q, nu, -h))) / (2 * h)  # fmt: skip
    out["eq8_quat_err"] = float(np.max(np.abs(fd - w_nu) / (1 + np.abs(w_nu))))
    f_t = cT * np.sum(rotor**2, axis=1)
    sf, cf = np.sin(rpy[:, 0]), np.cos(rpy[:, 0])
    st, ct = np.sin(rpy[:, 1]), np.cos(rpy[:, 1])
    sp, cp = np.sin(rpy[:, 2]), np.cos(rpy[:, 2])
    eq9 = drone.gravity_vec + (f_t / drone.mass)[:, None] * np.stack(
        [cp * st * cf + sp * sf, sp * st * cf - cp * sf, ct * cf], axis=1)  # fmt: skip
    out["eq9_err"] = float(np.max(np.abs(vel_dot - eq9)))

    # eq. 10: d/dt rpy_dot along the flow, x ± h x_dot, vs W_dot ν + W ν_dot
    h = 1e-6
    ddot = []
    for s in (1.0, -1.0):
        args = (pos, rpy + s * h * rpy_dot, vel + s * h * vel_dot, nu + s * h * nu_dot,
                rotor * 1.01, rotor + s * h * rotor_dot)  # fmt: skip
        ddot.append(f(*args)[1])
    eta_dd = (ddot[0] - ddot[1]) / (2 * h)
    for key, printed in (("eq10_printed_err", True), ("eq10_corrected_err", False)):
        pred = np.stack(
            [
                w_dot(r, e, printed) @ v + W @ vd
                for r, e, v, W, vd in zip(rpy, rpy_dot, nu, W8, nu_dot, strict=True)
            ]
        )
        out[key] = float(np.max(np.abs(pred - eta_dd) / (1 + np.abs(eta_dd))))
    return out


def gimbal_lock(hover: float) -> list[dict]:
    """From 80° pitch with rates (ε, 1, ε): closeness to 90°, cond(W), Euler rates, errors."""
    rows = []
    cmd = np.full((1, 4), hover)
    steps = round(0.4 / DT)
    for eps in EPSILONS:
        start, w0 = [0.0, np.radians(80.0), 0.0], [eps, 1.0, eps]
        ref = fly("first_principles", cmd, DT / 2, start, w0, steps=2 * steps)
        q_ref = np.asarray(ref.quat)[1::2, 0]
        quat = fly("first_principles", cmd, DT, start, w0, steps=steps)
        eul = fly("euler_zyx", cmd, DT, start, w0, steps=steps)
        rpy = np.asarray(eul.rpy)[:, 0]
        rates = np.einsum("nij,nj->ni", np.stack([w_body_to_world(r) for r in rpy]),
                          np.asarray(eul.ang_vel)[:, 0])  # fmt: skip
        q_err = np.linalg.norm(rotation.log(rotation.multiply(
            rotation.conjugate(q_ref), np.asarray(quat.quat)[:, 0])), axis=-1)  # fmt: skip
        rows.append({
            "eps": eps,
            "max_pitch_deg": float(np.degrees(np.max(rotation.to_euler(q_ref)[:, 1]))),
            "max_cond_W": float(max(np.linalg.cond(w_body_to_world(r)) for r in rpy)),
            "max_euler_rate": float(np.max(np.abs(rates))),
            "max_ang_vel": float(np.max(np.linalg.norm(np.asarray(quat.ang_vel)[:, 0], axis=-1))),
            "euler_att_err": float(np.max(attitude_error(q_ref, rpy))),
            "quat_att_err": float(np.max(q_err)),
        })  # fmt: skip
    return rows


def main() -> dict:
    """Side-by-side flight, equation checks and the gimbal-lock runs; returns the numbers."""
    drone = quadsim.load_params(DRONE)
    hover = quadsim.envelope(drone).hover_rpm
    out = side_by_side(hover)
    out.update(equations(drone, np.random.default_rng(4)))
    out["gimbal_lock"] = gimbal_lock(hover)
    return out


if __name__ == "__main__":
    r = main()
    print(
        f"{DRONE}, same rotor commands, RK4 at {DT * 1e3:.0f} ms, {DURATION:.0f} s (tilt up to "
        f"{r['max_tilt_deg']:.0f} deg, yaw {r['max_yaw_deg']:.0f} deg, {r['distance']:.1f} m "
        f"flown): max position difference {r['max_pos_diff']:.1e} m, attitude "
        f"{r['max_att_diff']:.1e} rad (roll/pitch/yaw {r['max_rpy_diff']:.1e} rad)"
    )
    print(
        f"seed 004 equations: eq.2 {r['eq2_err']:.0e}, eq.3 {r['eq3_err']:.0e}, eq.6 "
        f"{r['eq6_err']:.0e}, eq.7 {r['eq7_err']:.0e}, eq.8 model {r['eq8_model_err']:.0e} / "
        f"quaternion {r['eq8_quat_err']:.0e}, eq.9 {r['eq9_err']:.0e}, eq.10 corrected "
        f"{r['eq10_corrected_err']:.0e} (as printed: {r['eq10_printed_err']:.1e})"
    )
    print("near gimbal lock, from 80 deg pitch with rates (eps, 1, eps) rad/s, 0.4 s:")
    print("   eps   max pitch  cond(W)  max Euler rate  |w| max  Euler att err  quat att err")
    for g in r["gimbal_lock"]:
        print(
            f"{g['eps']:6.3f}  {g['max_pitch_deg']:8.3f}  {g['max_cond_W']:8.1e}  "
            f"{g['max_euler_rate']:11.1f}     {g['max_ang_vel']:6.2f}  "
            f"{g['euler_att_err']:12.1e}  {g['quat_att_err']:12.1e}"
        )
