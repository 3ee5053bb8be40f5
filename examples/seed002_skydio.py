r"""Seed 002: the Skydio-2-like drone's hover, forward float, 10° pitch and left curve.

Reproduces the four simulations of seed 002's ``Drone`` class with quadsim's wrench model
(:mod:`quadsim.physics.models.wrench`, command ``(F, τ_x, τ_y, τ_z)``):

.. math::

    m \dot v = m g + R (0, 0, F) - k_d \lVert v \rVert v, \qquad
    J \dot ω = τ - 0.1 k_d ω - ω × J ω .

The seed's ``Drone`` uses ``g = 9.81`` (mass 1 kg, ``k_d = 0.0425``, ``I_xy = 4 · 0.15 · m ·
0.1² = 0.006``, ``I_z = 2 I_xy``, rotational drag ``0.1 k_d``); the ``skydio2_x`` preset takes
``g = 10`` from the seed's earlier static analysis (60° maximum tilt). All four runs here use the
preset with ``g = 9.81`` (:func:`seed002_drone`); the other fields already equal the seed's. The
gyroscopic term that the seed's simulator drops is zero in every run (``ω`` stays along body x
and ``I_xx = I_yy``).

The seed steps with ``dt = 1 s``: velocity and body rates first from the old state, then
``r += v dt`` with the *new* velocity and ``R ← R Exp(ω dt)`` with the *new* rate. That is
quadsim's :func:`quadsim.physics.integrators.geometric` (semi-implicit Euler with an exponential-map
attitude), checked here against a NumPy transcription of the seed's loop (:class:`SeedDrone`).
Reference runs use ``rk4`` at 10 ms.

1. Hover, ``F = m g``, no torque: the state stays exactly at rest.
2. Floating forward from ``v = (1, 0, 0)``: the seed's 10 steps print ``[0.69 0. 0.]``; the exact
   solution of ``m v̇ = -k_d v²`` is ``v(t) = v_0 / (1 + k_d v_0 t / m)`` = 0.702 at 10 s.
3. Pitch 10°, ``F = m g / cos θ``: the vertical balance is exact and, with no torque, the attitude
   stays put; the speed follows ``v_t tanh(k_d v_t t / m)`` towards the terminal velocity
   ``v_t = sqrt(m g tan θ / k_d)`` = 6.38 m/s (:func:`quadsim.physics.envelope.terminal_velocity`).
4. The same with ``τ = (-1e-4, 0, 0)`` N m: the drone banks left and the path curves left
   (towards +y, counter-clockwise seen from above). Held longer, the roll keeps growing and the
   drone sinks.

Run:  python examples/seed002_skydio.py
"""

from __future__ import annotations

import math

import numpy as np

import quadsim
from quadsim.engines.sim import Simulator
from quadsim.physics import integrators, rotation
from quadsim.physics.envelope import terminal_velocity

G = 9.81  # m/s^2, seed 002's Drone.g
PITCH = math.radians(10.0)  # rad
TAU_ROLL = -1e-4  # N m, seed 002's curving moment
DT_SEED = 1.0  # s, the seed's step
DT_REF = 0.01  # s, rk4 reference step


def seed002_drone() -> quadsim.Params:
    """``skydio2_x`` with seed 002's ``Drone.g = 9.81`` (the preset uses the seed's g = 10)."""
    return quadsim.load_params("skydio2_x")._replace(
        name="skydio2_x_g981", gravity_vec=np.array([0.0, 0.0, -G])
    )


def _hat(w: np.ndarray) -> np.ndarray:
    return np.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])


def expmap(w: np.ndarray) -> np.ndarray:
    """Rodrigues' formula, seed 002 eq. 7.44 (``gtsam.Rot3.Expmap``)."""
    th = float(np.linalg.norm(w))
    if th < 1e-12:
        return np.eye(3) + _hat(w)
    K = _hat(w / th)
    return np.eye(3) + math.sin(th) * K + (1.0 - math.cos(th)) * K @ K


class SeedDrone:
    """Seed 002's ``Drone.integrate`` transcribed to NumPy (gtsam's Rot3 as a 3 x 3 matrix)."""

    mass, k_d = 1.0, 0.0425
    I_xy = 4 * 0.15 * mass * 0.1**2
    I_z = 4 * 0.15 * mass * 2 * 0.1**2

    def __init__(self, vn=(0.0, 0.0, 0.0), nRb=None):
        self.rn, self.vn, self.wb = np.zeros(3), np.array(vn, dtype=float), np.zeros(3)
        self.nRb = np.eye(3) if nRb is None else nRb

    def integrate(self, f: float, tau: np.ndarray, dt: float = 1.0) -> None:
        """One step: thrust ``f`` [N], body torque ``tau`` [N m], step ``dt`` [s]."""
        drag = -self.k_d * self.vn * np.linalg.norm(self.vn)
        net_force = self.nRb @ np.array([0.0, 0.0, f]) + np.array([0.0, 0.0, -G]) + drag
        self.vn = self.vn + net_force * dt / self.mass
        net_tau = tau - 0.1 * self.k_d * self.wb
        self.wb = self.wb + net_tau * dt / np.array([self.I_xy, self.I_xy, self.I_z])
        self.rn = self.rn + self.vn * dt  # DroneKinematics.integrate: new velocity,
        self.nRb = self.nRb @ expmap(self.wb * dt)  # new body rate


def seed_run(vn, nRb, f, tau, steps: int) -> SeedDrone:
    """Seed 002's loop: ``steps`` steps of 1 s from the origin, initial ``vn`` and ``nRb``."""
    d = SeedDrone(vn, nRb)
    for _ in range(steps):
        d.integrate(f, np.asarray(tau, dtype=float), DT_SEED)
    return d


def fly(drone, integrator, dt, duration, cmd, attitude=None, vel=None) -> dict:
    """``Simulator(model="wrench", world=None)``, one drone per row of ``cmd`` ``(n, 4)``, held.

    ``attitude`` ``(n, 4)`` and ``vel`` ``(n, 3)`` broadcast; arrays ``(T + 1, n, k)`` from t = 0.
    """
    cmd = np.atleast_2d(np.asarray(cmd, dtype=float))
    sim = Simulator(drone, n=len(cmd), dt=dt, model="wrench", integrator=integrator, world=None)
    s0 = sim.reset(attitude=attitude, vel=vel)
    traj = sim.rollout(cmd, steps=round(duration / dt))
    out = {
        k: np.concatenate([np.asarray(getattr(s0, k))[None], np.asarray(getattr(traj, k))])
        for k in ("pos", "quat", "vel", "ang_vel")
    }
    out["t"] = dt * np.arange(len(out["pos"]))
    return out


def _row(run: dict, i: int) -> dict:
    """Drone ``i`` of a batched run."""
    return {k: v if k == "t" else v[:, i] for k, v in run.items()}


def _vs_seed(run: dict, d: SeedDrone) -> float:
    """Max difference between a Simulator run's final state and the seed loop's."""
    R = rotation.to_matrix(run["quat"][-1])
    return float(
        max(
            np.max(np.abs(run["pos"][-1] - d.rn)),
            np.max(np.abs(run["vel"][-1] - d.vn)),
            np.max(np.abs(run["ang_vel"][-1] - d.wb)),
            np.max(np.abs(R - d.nRb)),
        )
    )


def main() -> dict:
    """Run seed 002's four simulations; returns the measured numbers."""
    drone = seed002_drone()
    m, kd = drone.mass, drone.drag_coef
    out: dict = {}
    seed = SeedDrone()
    out["params_vs_seed"] = float(
        max(
            np.max(np.abs(drone.J - np.diag([seed.I_xy, seed.I_xy, seed.I_z]))),
            abs(m - seed.mass),
            abs(kd - seed.k_d),
            abs(drone.rot_drag_coef - 0.1 * seed.k_d),
        )
    )

    v0 = 1.0  # m/s, floating forward
    R_pitch = expmap(np.array([0.0, PITCH, 0.0]))  # gtsam.Rot3.Pitch(10°)
    q_pitch = rotation.from_euler(np.array([0.0, PITCH, 0.0]))
    f_pitch = m * G / math.cos(PITCH)
    # the four scenarios: (command (F, τ), initial attitude, initial velocity)
    cmds = np.array(
        [[m * G, 0, 0, 0], [m * G, 0, 0, 0], [f_pitch, 0, 0, 0], [f_pitch, TAU_ROLL, 0, 0]]
    )
    quats = np.array([[0.0, 0, 0, 1], [0.0, 0, 0, 1], q_pitch, q_pitch])
    vels = np.array([[0.0, 0, 0], [v0, 0, 0], [0.0, 0, 0], [0.0, 0, 0]])
    seed_R0 = [np.eye(3), np.eye(3), R_pitch, R_pitch]

    def seed_style(i: int, integrator=integrators.geometric) -> tuple[dict, SeedDrone]:
        """Scenario ``i``, 10 steps of 1 s: quadsim's ``integrator`` and the seed's loop."""
        run = fly(drone, integrator, DT_SEED, 10.0, cmds[i], quats[i], vels[i])
        return _row(run, 0), seed_run(vels[i], seed_R0[i], cmds[i, 0], cmds[i, 1:], 10)

    # reference: all four with rk4 at 10 ms for 30 s, one batch
    ref = fly(drone, integrators.rk4, DT_REF, 30.0, cmds, quats, vels)
    i10 = round(10.0 / DT_REF)

    # 1. hover: F = m g, zero torque
    hov, seed_h = seed_style(0)
    out["hover_max_dev"] = float(
        max(
            np.max(np.abs(run[k])) for run in (hov, _row(ref, 0)) for k in ("pos", "vel", "ang_vel")
        )
    )
    out["hover_geometric_vs_seed"] = _vs_seed(hov, seed_h)

    # 2. floating forward from v = (1, 0, 0), level, F = m g
    fwd, seed_f = seed_style(1)
    out["float_seed_vel"] = float(seed_f.vn[0])
    out["float_seed_x"] = float(seed_f.rn[0])
    out["float_geometric_vs_seed"] = _vs_seed(fwd, seed_f)
    for name in ("euler", "semi_implicit", "geometric"):
        run = _row(
            fly(drone, getattr(integrators, name), DT_SEED, 10.0, cmds[1], quats[1], vels[1]), 0
        )
        out[f"float_{name}_vel"] = float(run["vel"][-1, 0])
        out[f"float_{name}_vy_vz"] = float(np.max(np.abs(run["vel"][-1, 1:])))
        out[f"float_{name}_x"] = float(run["pos"][-1, 0])
    out["float_exact_vel"] = v0 / (1 + kd * v0 * 10.0 / m)
    out["float_exact_x"] = m / kd * math.log1p(kd * v0 * 10.0 / m)
    f = _row(ref, 1)
    out["float_rk4_vel"] = float(f["vel"][i10, 0])
    out["float_rk4_err"] = float(np.max(np.abs(f["vel"][:, 0] - v0 / (1 + kd * v0 * f["t"] / m))))

    # 3. accelerating through 10° pitch with F = m g / cos θ
    v_t = terminal_velocity(drone, PITCH)
    out["terminal_velocity"] = float(v_t)
    out["terminal_formula"] = math.sqrt(m * G * math.tan(PITCH) / kd)
    geo, seed_p = seed_style(2)
    out["pitch_geometric_vs_seed"] = _vs_seed(geo, seed_p)
    out["pitch_seed_speed_10s"] = float(seed_p.vn[0])
    p = _row(ref, 2)
    out["pitch_speed_10s"] = float(p["vel"][i10, 0])
    out["pitch_speed_30s"] = float(p["vel"][-1, 0])
    out["pitch_tanh_err"] = float(
        np.max(np.abs(p["vel"][:, 0] - v_t * np.tanh(kd * v_t * p["t"] / m)))
    )
    out["pitch_terminal_rel_err"] = abs(out["pitch_speed_30s"] / v_t - 1)
    out["pitch_max_dz"] = float(np.max(np.abs(p["pos"][:, 2])))
    out["pitch_max_vy_vz"] = float(np.max(np.abs(p["vel"][:, 1:])))
    rpy = rotation.to_euler(p["quat"])
    out["pitch_att_err_deg"] = float(np.degrees(np.max(np.abs(rpy - [0.0, PITCH, 0.0]))))

    # 4. curving left: τ = (-1e-4, 0, 0) N m from the 10° pitch at rest.
    # Sign: τ_x < 0 spins the body negatively about its forward axis, i.e. the left side (body +y)
    # goes down ("positive roll is to the right"). The thrust axis R e_z = Ry(θ) (0, -sin φ,
    # cos φ) tilts towards +y for φ < 0: towards the left of an eastward flight (north in ENU),
    # so the path curves left, counter-clockwise seen from above. The seed's answer: yes, a
    # negative roll moment is the right sign for "curving left" (a positive one curves right).
    cur_geo, seed_c = seed_style(3)
    cur_semi, _ = seed_style(3, integrators.semi_implicit)
    out["curve_geometric_vs_seed"] = _vs_seed(cur_geo, seed_c)
    out["curve_semi_implicit_vs_seed"] = _vs_seed(cur_semi, seed_c)
    out["curve_seed_y_10s"] = float(seed_c.rn[1])
    seed_r = seed_run([0, 0, 0], R_pitch, f_pitch, [-TAU_ROLL, 0, 0], 10)
    out["curve_right_seed_y_10s"] = float(seed_r.rn[1])  # the exercise: other side, mirrored
    out["curve_seed_heading_deg_10s"] = math.degrees(math.atan2(seed_c.vn[1], seed_c.vn[0]))
    c = _row(ref, 3)
    rpy = rotation.to_euler(c["quat"])
    course = np.arctan2(c["vel"][1:, 1], c["vel"][1:, 0])  # direction of flight, from t = dt
    for tag, i in (("10s", i10), ("30s", -1)):
        out[f"curve_x_{tag}"] = float(c["pos"][i, 0])
        out[f"curve_y_{tag}"] = float(c["pos"][i, 1])
        out[f"curve_z_{tag}"] = float(c["pos"][i, 2])
        out[f"curve_heading_deg_{tag}"] = float(np.degrees(course[i - 1 if i > 0 else i]))
        out[f"curve_roll_deg_{tag}"] = float(np.degrees(rpy[i, 0]))
        out[f"curve_yaw_deg_{tag}"] = float(np.degrees(rpy[i, 2]))
    out["curve_min_heading_step"] = float(np.min(np.diff(course)))
    out["curve_roll_rate_steady"] = TAU_ROLL / drone.rot_drag_coef
    return out


if __name__ == "__main__":
    r = main()
    print(
        f"drone: skydio2_x with g = {G} (seed 002's Drone); other parameters vs the seed's: "
        f"{r['params_vs_seed']:.0e}"
    )
    print(
        f"1. hover F = m g: max |pos|, |vel|, |ang_vel| = {r['hover_max_dev']:.1e} (dt = 1 s for "
        f"10 s and rk4 for 30 s; geometric vs seed loop {r['hover_geometric_vs_seed']:.0e})"
    )
    print(
        f"2. floating forward from 1 m/s, dt = 1 s, 10 steps: final velocity "
        f"[{r['float_geometric_vel']:.2f} 0. 0.] (unrounded {r['float_geometric_vel']:.6f}; "
        f"seed loop {r['float_seed_vel']:.6f}, geometric vs seed loop "
        f"{r['float_geometric_vs_seed']:.0e})"
    )
    print(
        f"   x(10 s): geometric {r['float_geometric_x']:.4f} = semi_implicit "
        f"{r['float_semi_implicit_x']:.4f} = seed {r['float_seed_x']:.4f} m; explicit euler "
        f"{r['float_euler_x']:.4f} m (same velocity {r['float_euler_vel']:.6f})"
    )
    print(
        f"   exact v0/(1 + k_d v0 t/m): v(10 s) = {r['float_exact_vel']:.6f} m/s, x = "
        f"{r['float_exact_x']:.4f} m; rk4 10 ms {r['float_rk4_vel']:.6f} (max err "
        f"{r['float_rk4_err']:.0e})"
    )
    print(
        f"3. pitch 10°, F = m g/cos θ: terminal velocity {r['terminal_velocity']:.4f} m/s "
        f"(sqrt(m g tan θ/k_d) = {r['terminal_formula']:.4f}); seed dt = 1 s: "
        f"{r['pitch_seed_speed_10s']:.3f} m/s at 10 s (geometric vs seed loop "
        f"{r['pitch_geometric_vs_seed']:.0e})"
    )
    print(
        f"   rk4 10 ms: {r['pitch_speed_10s']:.4f} m/s at 10 s, {r['pitch_speed_30s']:.4f} at "
        f"30 s ({r['pitch_terminal_rel_err']:.0e} from v_t; vs v_t tanh(k_d v_t t/m) "
        f"{r['pitch_tanh_err']:.0e}); max |z| {r['pitch_max_dz']:.0e} m, |v_y|,|v_z| "
        f"{r['pitch_max_vy_vz']:.0e}, attitude error {r['pitch_att_err_deg']:.0e}°"
    )
    print(
        f"4. curve, τ = ({TAU_ROLL:g}, 0, 0) N m: seed dt = 1 s: y(10 s) = "
        f"{r['curve_seed_y_10s']:.3f} m, course {r['curve_seed_heading_deg_10s']:+.2f}° "
        f"(geometric vs seed loop {r['curve_geometric_vs_seed']:.0e}, semi_implicit "
        f"{r['curve_semi_implicit_vs_seed']:.0e})"
    )
    print(
        f"   rk4 10 ms, 10 s: x {r['curve_x_10s']:.2f} m, y {r['curve_y_10s']:+.3f} m (left), "
        f"course {r['curve_heading_deg_10s']:+.2f}° (counter-clockwise), roll "
        f"{r['curve_roll_deg_10s']:+.2f}°, z {r['curve_z_10s']:+.3f} m; yaw "
        f"{r['curve_yaw_deg_10s']:+.0e}°: the nose stays east, the drone slides left"
    )
    print(
        "   negative roll moment -> left side down -> thrust tilts to +y (left): curving "
        "left is the right sign; "
        f"+1e-4 curves right (seed dt = 1 s: y(10 s) = {r['curve_right_seed_y_10s']:+.3f} m)"
    )
    print(
        f"   extended to 30 s: roll {r['curve_roll_deg_30s']:+.1f}° (rate -> τ/(0.1 k_d) = "
        f"{math.degrees(r['curve_roll_rate_steady']):+.2f}°/s, no restoring moment), course "
        f"{r['curve_heading_deg_30s']:+.1f}°, y {r['curve_y_30s']:+.1f} m, z "
        f"{r['curve_z_30s']:+.1f} m: the vertical thrust m g cos φ no longer holds the "
        f"weight, so the drone sinks"
    )
