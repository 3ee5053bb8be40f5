"""Closed-loop acceptance: controllers fly the simulator (issue 4, section 5).

Each test flies a batch of 64 drones and a single drone. The measured numbers are printed
(`pytest -s tests/loop/test_flight.py`) and quoted in the closing note.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from quadsim import envelope
from quadsim.engines.sim import Simulator, Wind
from quadsim.loop.control import control, load_gains
from quadsim.loop.flight import fly
from quadsim.loop.trajectories import Circle, Hover, Lemniscate, Step
from quadsim.physics import rotors
from quadsim.physics.rotation import from_euler
from quadsim.physics.wind import dryden_preset
from quadsim.physics.world import Ground, World

N_BATCH = 64


def rms_after(log, t0):
    m = log["time"] > t0
    err = np.linalg.norm(log["pos"][m] - log["ref_pos"][m], axis=-1)
    return np.sqrt((err**2).mean(axis=0)), err.max(axis=0)


def grid_offsets(n, spacing=3.0):
    side = math.ceil(math.sqrt(n))
    ij = np.stack([np.arange(n) % side, np.arange(n) // side], axis=1).astype(float)
    off = np.zeros((n, 3))
    off[:, :2] = ij * spacing
    return off


def start_on(sim, traj, offset):
    r0 = traj(0.0)
    sim.reset(pos=np.asarray(r0.pos) + offset, vel=r0.vel)


@pytest.mark.parametrize("n", [1, N_BATCH])
def test_geometric_tracks_a_circle_within_2_cm(n):
    """cf2x_L250, rotor dynamics, RK4 at 500 Hz, no noise: 1 m circle at 1 m/s, RMS <= 2 cm."""
    sim = Simulator("cf2x_L250", n=n, dt=1 / 500, backend="native")
    assert sim.system.n_cmd == 4 and "rotor_vel" in dict(sim.system.fields)
    traj = Circle(radius=1.0, speed=1.0, center=(0.0, 0.0, 1.0))
    offset = grid_offsets(n)
    start_on(sim, traj, offset)
    gains = load_gains("cf2x_L250_geometric", drone=sim.drone, dt=sim.dt)
    res = fly(sim, traj, control, gains, duration=2.0 + 2 * math.pi, ref_offset=offset)
    rms, worst = rms_after(res.log, 2.0)
    print(f"\ncircle n={n}: RMS {rms.max() * 100:.2f} cm, max {worst.max() * 100:.2f} cm")
    assert rms.max() <= 0.02
    assert not res.log["crashed"].any()
    # identical drones with shifted references fly identical paths (batching is exact)
    rel = res.log["pos"] - offset
    assert np.abs(rel - rel[:, :1]).max() < 1e-9


@pytest.mark.parametrize("n", [1, N_BATCH])
def test_geometric_tracks_a_figure_eight_in_moderate_turbulence(n):
    """Lemniscate (Gerono, 2 m x 1 m, 8 s) in moderate Dryden turbulence: no crash, RMS <= 10 cm."""
    turb = dryden_preset("moderate", 1.0, 1.0)  # sigma_u = 3.0 m/s, sigma_w = 1.5 m/s at 10 ft
    sim = Simulator("cf2x_L250", n=n, dt=1 / 500, backend="native", seed=7,
                    wind=Wind(mean=(0.0, 0.0, 0.0), turbulence=turb))  # fmt: skip
    traj = Lemniscate(size=1.0, period=8.0, center=(0.0, 0.0, 1.0))
    offset = grid_offsets(n)
    start_on(sim, traj, offset)
    gains = load_gains("cf2x_L250_geometric", drone=sim.drone, dt=sim.dt)
    res = fly(sim, traj, control, gains, duration=10.0, ref_offset=offset)
    rms, worst = rms_after(res.log, 2.0)
    print(f"\nfigure eight + moderate turbulence n={n}: RMS worst {rms.max() * 100:.2f} cm, "
          f"median {np.median(rms) * 100:.2f} cm, max {worst.max() * 100:.2f} cm")  # fmt: skip
    assert not res.log["crashed"].any() and not res.log["landed"].any()
    assert rms.max() <= 0.10
    if n > 1:  # each drone meets its own gusts
        assert np.ptp(rms) > 1e-3


@pytest.mark.parametrize("n", [1, N_BATCH])
def test_pid_recovers_the_f450_from_a_tilted_sideways_start_within_3_s(n):
    """f450_plus, PID at seed 001's 200 Hz: from 30 deg roll and 1 m/s sideways at 1 m height,
    back within 5 cm of the hover point in <= 3 s, without touching the ground."""
    sim = Simulator("f450_plus", n=n, dt=1 / 200, backend="native",
                    world=World(ground=Ground(crash_speed=0.5)))  # fmt: skip
    side = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)  # roll +-30 deg
    heading = np.linspace(0.0, 2 * np.pi, n, endpoint=False) if n > 1 else np.array([np.pi / 2])
    att = from_euler(np.stack([side * math.radians(30.0), 0 * side, 0 * side], axis=-1))
    vel = np.stack([np.cos(heading), np.sin(heading), 0 * heading], axis=-1)  # 1 m/s sideways
    sim.reset(pos=[0.0, 0.0, 1.0], attitude=att, vel=vel)
    gains = load_gains("f450_plus_pid", drone=sim.drone, dt=sim.dt)
    res = fly(sim, Hover(pos=(0.0, 0.0, 1.0)), control, gains, duration=4.0)
    log = res.log
    err = np.linalg.norm(log["pos"] - [0.0, 0.0, 1.0], axis=-1)
    outside = err >= 0.05
    last_out = np.array([log["time"][np.nonzero(o)[0].max()] for o in outside.T])
    recovery = last_out + sim.dt  # from then on within 5 cm
    print(f"\nf450 PID recovery n={n}: worst {recovery.max():.3f} s, median "
          f"{np.median(recovery):.3f} s, lowest z {log['pos'][..., 2].min():.3f} m")  # fmt: skip
    assert recovery.max() <= 3.0
    assert err.max() > 0.05  # it really left the 5 cm ball
    assert not log["landed"].any() and not log["crashed"].any()
    assert log["pos"][..., 2].min() > 0.5


@pytest.mark.parametrize(("n", "model"), [(1, "wrench"), (N_BATCH, "wrench"),
                                          (N_BATCH, "first_principles")])  # fmt: skip
def test_skydio_at_10_deg_pitch_settles_at_the_envelope_terminal_velocity(n, model):
    """skydio2_x, quadratic drag: pitch held at 10 deg, altitude held -> envelope's v_term.

    On seed 002's wrench model the wrench acts directly; on the first-principles model it goes
    through allocation and the rotor dynamics (``Simulator.step_wrench``)."""
    import jax

    from quadsim.engines.state import State
    from quadsim.loop.control import init_state, pid
    from quadsim.physics.envelope import terminal_velocity

    sim = Simulator("skydio2_x", n=n, dt=1 / 500, model=model, backend="native", world=None)
    v0 = np.linspace(0.0, 9.0, n)  # from rest and from faster than terminal
    sim.reset(pos=[0.0, 0.0, 10.0], vel=np.stack([v0, 0 * v0, 0 * v0], axis=-1))
    gains = load_gains("skydio2_x_pid", drone=sim.drone, dt=sim.dt)
    q_sp = from_euler(np.array([0.0, math.radians(10.0), 0.0]))
    with jax.enable_x64(True):
        step = jax.jit(lambda st, c: pid.attitude_altitude_control(st, q_sp, 10.0, gains, c))
        c = init_state(gains, (n,), jax.numpy, jax.numpy.float64)
        st = sim.state
        for _ in range(round(25.0 / sim.dt)):
            w, c = step(State(*st[:4], None), c)
            st = sim.step_wrench(np.asarray(w))
    v = np.asarray(st.vel)
    v_term = terminal_velocity(sim.drone, math.radians(10.0))
    print(f"\nskydio 10 deg {model} n={n}: v = {v[:, 0].min():.4f}..{v[:, 0].max():.4f} m/s, "
          f"envelope {v_term:.4f} m/s")  # fmt: skip
    assert abs(v_term - 6.44) < 0.005
    assert np.all(np.abs(v[:, 0] / v_term - 1) < 0.02)
    assert np.abs(np.asarray(st.pos)[:, 2] - 10.0).max() < 0.01


@pytest.mark.parametrize("n", [1, N_BATCH])
def test_a_request_beyond_the_rotor_limits_saturates_and_stays_finite(n):
    """A 50 m step: the controller saturates; rotor commands stay in range and finite."""
    sim = Simulator("cf2x_L250", n=n, dt=1 / 500, backend="native")
    traj = Step(start=(0.0, 0.0, 1.0), end=(50.0, -50.0, 30.0), t_step=0.1)
    sim.reset(pos=[0.0, 0.0, 1.0])
    gains = load_gains("cf2x_L250_geometric", drone=sim.drone, dt=sim.dt)
    res = fly(sim, traj, control, gains, duration=1.0)
    log, d = res.log, sim.drone
    for key in ("cmd_rpm", "cmd_wrench", "lost_wrench", "rotor_rpm", "pos", "quat"):
        assert np.isfinite(log[key]).all(), key
    assert log["cmd_rpm"].min() >= d.rpm_min and log["cmd_rpm"].max() <= d.rpm_max
    after = log["time"] > 0.15
    assert np.allclose(log["cmd_wrench"][after][..., 0], gains.thrust_max)  # thrust at its limit
    assert log["saturated"][after].any()
    # what the rotors deliver is what allocation reported: requested - lost
    alloc = rotors.allocate(log["cmd_wrench"], rotors.make_allocator(d))
    assert np.allclose(alloc.rpm, log["cmd_rpm"]) and np.allclose(alloc.lost, log["lost_wrench"])


def test_allocation_beyond_the_limits_keeps_thrust_and_roll_pitch_before_yaw(rng):
    """Requests far outside the rotor envelope, 64 drones: clipped, finite, priorities kept."""
    d = load_gains("cf2x_L250_geometric").allocator
    n = N_BATCH
    env = envelope("cf2x_L250")
    F = rng.uniform(0.3, 0.9, n) * env.thrust_max
    tau_xy = rng.normal(0.0, 1e-4, (n, 2))  # feasible roll/pitch
    tau_z = rng.choice([-1.0, 1.0], n) * 1.0  # 1 N m of yaw: hundreds of times too much
    alloc = rotors.allocate(np.column_stack([F, tau_xy, tau_z]), d)
    assert np.isfinite(alloc.rpm).all() and alloc.saturated.all()
    assert alloc.rpm.min() >= d.rpm_min and alloc.rpm.max() <= d.rpm_max
    assert np.abs(alloc.lost[:, :3]).max() < 1e-9  # thrust and roll/pitch kept exactly
    assert np.all(np.sign(alloc.wrench[:, 3]) == np.sign(tau_z))  # yaw reduced, not reversed
    huge = rotors.allocate(np.array([[1e9, -1e9, 1e9, -1e9], [-1e9, 0.0, 0.0, 0.0]]), d)
    assert np.isfinite(huge.rpm).all() and huge.saturated.all()
    assert np.allclose(huge.rpm[1], d.rpm_min)  # negative thrust: every rotor at its minimum


def test_hover_holds_with_zero_error():
    sim = Simulator("cf2x_L250", n=4, dt=1 / 500, backend="native")
    sim.reset(pos=[0.0, 0.0, 1.0])
    gains = load_gains("cf2x_L250_geometric", drone=sim.drone, dt=sim.dt)
    res = fly(sim, Hover(pos=(0.0, 0.0, 1.0)), control, gains, duration=1.0)
    assert np.abs(res.log["pos"] - [0.0, 0.0, 1.0]).max() < 1e-6


def test_the_euler_angle_model_flies_the_same_loop_as_the_quaternion_model():
    """fly() hands the controllers quaternions from Euler angles: both models fly the same path."""
    traj = Circle(radius=1.0, speed=1.0, center=(0.0, 0.0, 1.0))
    paths = []
    for model in ("first_principles", "euler_zyx"):
        sim = Simulator("cf2x_L250", n=2, dt=1 / 500, model=model, backend="native")
        start_on(sim, traj, np.zeros((2, 3)))
        gains = load_gains("cf2x_L250_geometric", drone=sim.drone, dt=sim.dt)
        paths.append(fly(sim, traj, control, gains, duration=1.0).log["pos"])
    assert np.abs(paths[0] - paths[1]).max() < 1e-6
