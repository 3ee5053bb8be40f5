"""Tests for quadsim.loop.control: equilibria, Lee's attitude error, flatness feed-forward (finite
differences), limits and anti-windup, batching, backends, gains files, short closed loops."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from quadsim.engines.sim import Simulator
from quadsim.engines.state import State
from quadsim.loop.control import (
    GeometricGains,
    PidGains,
    control,
    geometric,
    init_state,
    list_gains,
    load_gains,
    pid,
)
from quadsim.loop.control._common import limit_thrust
from quadsim.loop.trajectories import Circle, Lemniscate, Reference
from quadsim.physics import rotation as rot
from quadsim.physics.params import load_params
from quadsim.physics.rotors import allocate, make_allocator

PACKAGED = {
    "cf2x_L250_geometric": "cf2x_L250",
    "cf2x_L250_pid": "cf2x_L250",
    "f450_plus_pid": "f450_plus",
    "f450_plus_geometric": "f450_plus",
    "skydio2_x_pid": "skydio2_x",
    "skydio2_x_geometric": "skydio2_x",
    "generic_x_geometric": "generic_x",
}
NAMES = sorted(PACKAGED)


def hover_ref(shape=(), pos=(0.0, 0.0, 1.0), yaw=0.0):
    z = np.zeros((*shape, 3))
    return Reference(z + pos, z, z, z, z, np.full(shape, yaw), np.zeros(shape))


def random_state(rng, n, tilt=0.4):
    q = rot.from_euler(rng.uniform(-tilt, tilt, size=(n, 3)))
    return State(rng.normal(size=(n, 3)) * 0.3 + [0, 0, 1], q, rng.normal(size=(n, 3)) * 0.5,
                 rng.normal(size=(n, 3)))  # fmt: skip


def Rx(a):
    c, s = math.cos(a), math.sin(a)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


def expm_so3(w):
    return rot.to_matrix(rot.exp(np.asarray(w, dtype=float)))


def vee(S):
    return np.array([S[2, 1], S[0, 2], S[1, 0]])


def rows(R):
    return tuple(tuple(R[..., i, j] for j in range(3)) for i in range(3))


def desired_frame(ref, m, g):
    """R_d (..., 3, 3), Ω_d, Ω̇_d of the feed-forward force m (a - g_vec) and the yaw."""
    F = m * (ref.acc + np.array([0.0, 0.0, g]))
    fd = np.linalg.norm(F, axis=-1)
    b3 = tuple((F / fd[..., None])[..., i] for i in range(3))
    frame = geometric.desired_attitude(np, b3, ref.yaw)
    jerk, snap = (tuple(a[..., i] for i in range(3)) for a in (ref.jerk, ref.snap))
    W, dW = geometric.flat_rates(np, frame, fd, m, jerk, snap, ref.yaw_rate)
    Rd = np.stack([np.stack(frame[k], axis=-1) for k in range(3)], axis=-1)  # columns b1 b2 b3
    return Rd, np.stack(W, axis=-1), np.stack(dW, axis=-1)


# --------------------------------------------------------------------------- equilibria


@pytest.mark.parametrize("name", NAMES)
def test_hover_equilibrium_is_exactly_weight_and_zero_torque(name):
    g = load_gains(name)
    n = 3
    state = State(np.tile([0.5, -1.0, 2.0], (n, 1)), rot.from_euler(np.array([[0, 0, 0.3]] * n)),
                  np.zeros((n, 3)), np.zeros((n, 3)))  # fmt: skip
    ref = hover_ref((n,), pos=(0.5, -1.0, 2.0), yaw=0.3)
    c = init_state(g, (n,))
    for _ in range(3):  # and it stays there: integrators and memories remain at rest
        w, c = control(state, ref, g, c)
        np.testing.assert_allclose(w[:, 0], g.mass * g.gravity, rtol=1e-15)
        np.testing.assert_allclose(w[:, 1:], 0.0, atol=1e-15)


# --------------------------------------------------------------------------- geometric


def test_attitude_error_known_values_and_gradient(rng):
    # rotation by θ about a unit axis n from R_d: e_R = sin θ n (R_d = I), and in general
    # e_R is the gradient of Ψ = ½ tr(I - R_dᵀ R) along R exp(ε ξ^)
    for _ in range(5):
        n = rng.normal(size=3)
        n /= np.linalg.norm(n)
        th = rng.uniform(0.1, 3.0)
        R = expm_so3(th * n)
        eR = np.array(geometric.attitude_error(rows(R), rows(np.eye(3))))
        np.testing.assert_allclose(eR, math.sin(th) * n, atol=1e-14)
    np.testing.assert_allclose(geometric.attitude_error(rows(Rx(0.3)), rows(Rx(0.3))), 0, atol=0)
    Rd = expm_so3(rng.normal(size=3))
    R = expm_so3(rng.normal(size=3))
    eR = np.array(geometric.attitude_error(rows(R), rows(Rd)))
    np.testing.assert_allclose(eR, 0.5 * vee(Rd.T @ R - R.T @ Rd), rtol=1e-13)

    def psi(R_):
        return 0.5 * np.trace(np.eye(3) - Rd.T @ R_)

    h = 1e-6
    for xi in np.eye(3):
        d = (psi(R @ expm_so3(h * xi)) - psi(R @ expm_so3(-h * xi))) / (2 * h)
        assert d == pytest.approx(eR @ xi, abs=1e-9)


@pytest.mark.parametrize("which", ["lemniscate_yaw_ramp", "circle_tangent"])
def test_flatness_rates_match_finite_differences_of_the_desired_attitude(which):
    """Ω_d from jerk and Ω̇_d from snap equal the finite differences of R_d(t) and Ω_d(t)."""
    m, g = 0.5, 9.81
    if which == "circle_tangent":
        traj = Circle(radius=1.5, speed=2.5, center=(0, 0, 1), yaw_mode="tangent")
    else:
        base = Lemniscate(size=2.0, period=3.0, center=(0, 0, 1))

        def traj(t):  # yaw ramp ψ = 0.3 + 0.8 t: nonzero yaw rate, zero yaw acceleration
            r = base(t)
            t = np.asarray(t, dtype=float)
            return r._replace(yaw=0.3 + 0.8 * t, yaw_rate=np.full(t.shape, 0.8))

    t = np.linspace(0.1, 2.9, 15)
    h = 1e-4
    Rd, W, dW = desired_frame(traj(t), m, g)
    Rp, Wp, _ = desired_frame(traj(t + h), m, g)
    Rm, Wm, _ = desired_frame(traj(t - h), m, g)
    Rdot = (Rp - Rm) / (2 * h)
    W_fd = np.stack([vee(Rd[k].T @ Rdot[k]) for k in range(len(t))])
    assert np.abs(W).max() > 0.5  # a non-trivial test
    assert which == "circle_tangent" or np.abs(dW).max() > 0.5
    np.testing.assert_allclose(W, W_fd, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(dW, (Wp - Wm) / (2 * h), rtol=1e-5, atol=1e-5)


def test_perfect_tracking_on_a_circle_gives_the_feed_forward_wrench():
    """State on the reference with R = R_d and Ω = Ω_d: F = m |a_ref - g_vec|, τ = J Ω̇_d + Ω×JΩ."""
    g = load_gains("cf2x_L250_geometric")
    g = g._replace(drag_matrix=np.zeros((3, 3)), drag_coef=0.0)
    traj = Circle(radius=1.0, speed=1.5, center=(0, 0, 1), yaw_mode="tangent")
    t = np.linspace(0.0, 4.0, 9)
    ref = traj(t)
    Rd, W, dW = desired_frame(ref, g.mass, g.gravity)
    state = State(ref.pos, rot.from_matrix(Rd), ref.vel, W)
    w, _ = control(state, ref, g, init_state(g, t.shape))
    F = g.mass * np.linalg.norm(ref.acc + np.array([0, 0, g.gravity]), axis=-1)
    np.testing.assert_allclose(w[:, 0], F, rtol=1e-12)
    tau = dW @ g.J.T + np.cross(W, W @ g.J.T)
    np.testing.assert_allclose(w[:, 1:], tau, atol=1e-12)
    assert np.abs(tau).max() > 1e-7


def test_integrator_and_tilt_limits_under_an_impossible_request():
    g = load_gains("cf2x_L250_geometric")
    n = 4
    state = State(np.zeros((n, 3)), rot.identity((n,)), np.zeros((n, 3)), np.zeros((n, 3)))
    ref = hover_ref((n,), pos=(100.0, -50.0, 80.0))
    c = init_state(g, (n,))
    for _ in range(500):
        w, c = control(state, ref, g, c)
        assert np.all((w[:, 0] >= g.thrust_min) & (w[:, 0] <= g.thrust_max))
        assert np.all(np.abs(w[:, 1:]) <= g.torque_max + 1e-15)
        assert np.all(np.abs(c.pos_int) <= g.i_max + 1e-15)
    np.testing.assert_allclose(np.abs(c.pos_int), np.broadcast_to(g.i_max, (n, 3)))  # at the clamp
    # conditional integration: no integration while the velocity error is large
    moving = state._replace(vel=np.full((n, 3), 1.0))
    w, c2 = control(moving, ref, g, init_state(g, (n,)))
    np.testing.assert_array_equal(c2.pos_int, 0.0)


def test_thrust_vector_limit(rng):
    T = tuple(rng.normal(size=500) * s for s in (3.0, 3.0, 2.0))
    tmin, tmax, tilt, marg = 0.2, 2.0, math.radians(35.0), 0.5
    (x, y, z), lim = limit_thrust(np, T, tmin, tmax, tilt, marg)
    h = np.hypot(x, y)
    assert np.all(z >= tmin - 1e-15) and np.all(np.sqrt(h**2 + z**2) <= tmax * (1 + 1e-12))
    assert np.all(np.arctan2(h, z) <= tilt + 1e-12)
    ok = ~lim  # unlimited requests pass unchanged; limited ones keep their horizontal direction
    np.testing.assert_array_equal(np.stack([x, y, z])[:, ok], np.stack(T)[:, ok])
    dirn = np.arctan2(T[1], T[0]) - np.arctan2(y, x)
    assert np.abs(np.sin(dirn[h > 1e-12])).max() < 1e-12
    # the horizontal margin survives a saturated vertical demand
    (x, y, z), _ = limit_thrust(np, (np.array(5.0), np.array(0.0), np.array(50.0)), tmin, tmax,
                                tilt, marg)  # fmt: skip
    assert x == pytest.approx(marg) and z == pytest.approx(math.sqrt(tmax**2 - marg**2))


# --------------------------------------------------------------------------- PID stages


def test_pid_velocity_stage_anti_windup_and_tilt():
    g = load_gains("f450_plus_pid")
    n = 2
    vel = np.zeros((n, 3))
    c = init_state(g, (n,))
    vel_sp = np.array([[50.0, 0.0, 40.0], [0.0, -50.0, -40.0]])  # impossible in every axis
    for _ in range(2000):
        T, c = pid.velocity_control(vel, vel_sp, np.zeros((n, 3)), g, c)
        assert np.all(np.abs(c.vel_int) <= g.vel_i_max + 1e-12)
        tilt = np.arctan2(np.hypot(T[:, 0], T[:, 1]), T[:, 2])
        assert np.all(tilt <= g.tilt_max + 1e-12)
        assert np.all(np.linalg.norm(T, axis=-1) <= g.thrust_max * (1 + 1e-12))
        assert np.all(T[:, 2] >= g.thrust_min - 1e-12)
    # vertical integration stops while the vertical thrust is saturated in the error's direction
    assert c.vel_int[0, 2] == 0.0 and c.vel_int[1, 2] == 0.0
    # horizontal: the back-calculation (PX4) drives the integrator against the saturated error
    assert c.vel_int[0, 0] < 0.0 and c.vel_int[1, 1] > 0.0


def test_pid_rate_integrator_is_clamped_and_derivative_on_measurement():
    g = load_gains("f450_plus_pid")._replace(rate_d=np.array([0.5, 0.5, 0.5]))
    c = init_state(g, (1,))
    for _ in range(3000):
        _, c = pid.rate_control(np.zeros((1, 3)), np.array([[2.0, -2.0, 1.0]]), 4.9, g, c)
    np.testing.assert_allclose(c.rate_int, [[10.0, -10.0, 5.0]])  # ±rate_i_max
    # D on measurement: a set-point step gives no derivative kick, a rate step does
    c0 = c._replace(rate_int=np.zeros((1, 3)))
    w1, _ = pid.rate_control(np.zeros((1, 3)), np.array([[1.0, 0, 0]]), 4.9, g, c0)
    assert w1[0, 1] == pytest.approx(g.J[0, 0] * g.rate_p[0] * 1.0)
    w2, _ = pid.rate_control(np.array([[0.1, 0, 0]]), np.array([[0.1, 0, 0]]), 4.9, g, c0)
    assert w2[0, 1] == pytest.approx(-g.J[0, 0] * g.rate_d[0] * 0.1 / g.dt)


def test_pid_attitude_stage_gains_priorities_and_limits():
    g = load_gains("f450_plus_pid")
    q = rot.identity((1,))
    small = 0.01
    for axis in range(3):
        rpy = np.zeros((1, 3))
        rpy[0, axis] = small
        rate = pid.attitude_control(q, rot.from_euler(rpy), 0.0, g)
        assert rate[0, axis] == pytest.approx(g.att_p[axis] * small, rel=1e-3)
    # yaw feed-forward about world z, expressed in the (tilted) body frame
    qt = rot.from_euler(np.array([[0.3, 0.0, 0.0]]))
    rate = pid.attitude_control(qt, qt, 0.5, g)
    np.testing.assert_allclose(rate[0], 0.5 * rot.rotate_inverse(qt, np.array([0, 0, 1.0]))[0])
    # large errors are rate-limited
    rate = pid.attitude_control(q, rot.from_euler(np.array([[2.0, -2.0, 3.0]])), 0.0, g)
    assert np.all(np.abs(rate) <= g.rate_max + 1e-12)


def test_attitude_altitude_hold_reaches_the_terminal_velocity():
    """Skydio (seed 002 wrench model): 10° pitch and constant altitude -> terminal speed."""
    from quadsim.physics.envelope import terminal_velocity

    g = load_gains("skydio2_x_pid")
    sim = Simulator("skydio2_x", n=1, dt=g.dt, model="wrench")
    sim.reset(pos=(0.0, 0.0, 10.0))
    q_sp = rot.from_euler(np.array([[0.0, math.radians(10.0), 0.0]]))
    c = init_state(g, (1,))
    for _ in range(int(12.0 / g.dt)):
        w, c = pid.attitude_altitude_control(State(*sim.state[:4]), q_sp, 10.0, g, c)
        st = sim.step(w)
    v_term = terminal_velocity("skydio2_x", math.radians(10.0))
    assert abs(st.pos[0, 2] - 10.0) < 1e-3
    np.testing.assert_allclose(rot.to_euler(st.quat)[0], [0.0, math.radians(10.0), 0.0],
                               atol=1e-6)  # fmt: skip
    assert 0.95 * v_term < st.vel[0, 0] < v_term  # 12 s ≈ 4 time constants


# --------------------------------------------------------------------------- batching, backends


@pytest.mark.parametrize("name", ["cf2x_L250_geometric", "cf2x_L250_pid"])
def test_batch_equals_loop(name, rng):
    g = load_gains(name)
    n = 64
    state = random_state(rng, n)
    ref = Lemniscate(size=1.0, period=5.0)(rng.uniform(0, 5, size=n))
    c = init_state(g, (n,))
    wb1, cb = control(state, ref, g, c)
    wb2, _ = control(state, ref, g, cb)
    for i in range(0, n, 7):
        s_i = State(*(a[i] for a in state[:4]))
        r_i = Reference(*(a[i] for a in ref))
        c_i = init_state(g)
        w1, c_i = control(s_i, r_i, g, c_i)
        w2, _ = control(s_i, r_i, g, c_i)
        np.testing.assert_allclose(w1, wb1[i], rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(w2, wb2[i], rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("name", ["cf2x_L250_geometric", "f450_plus_pid"])
def test_backends_agree_with_numpy_and_keep_dtype(name, xp, rng):
    g = load_gains(name)
    n = 6
    s_np = random_state(rng, n)
    r_np = Circle(yaw_mode="tangent")(np.linspace(0.0, 3.0, n))
    ref_w, c = [], init_state(g, (n,))
    for _ in range(2):
        w, c = control(s_np, r_np, g, c)
        ref_w.append(w)
    s = State(*(xp.asarray(a) for a in s_np[:4]))
    r = Reference(*(xp.asarray(a) for a in r_np))
    step = lambda s_, r_, c_: control(s_, r_, g, c_)  # noqa: E731
    if xp.name.startswith("jax"):
        import jax

        step = jax.jit(step)
    c = init_state(g, (n,), xp=xp.xp, dtype=xp.dtype)
    tol = dict(rtol=1e-9, atol=1e-12) if xp.bits == 64 else dict(rtol=2e-3, atol=2e-5)
    for k in range(2):
        w, c = step(s, r, c)
        assert w.dtype == xp.dtype and w.shape == (n, 4)
        scale = np.abs(ref_w[k]).max(axis=0)
        np.testing.assert_allclose(xp.numpy(w) / scale, ref_w[k] / scale, **tol)


# --------------------------------------------------------------------------- gains files


def test_packaged_gains_load_for_their_drones():
    assert set(NAMES) <= set(list_gains())
    for name, drone in PACKAGED.items():
        g = load_gains(name)
        assert isinstance(g, GeometricGains if name.endswith("geometric") else PidGains)
        p = load_params(drone)
        assert g.mass == p.mass and np.array_equal(g.J, p.J) and g.dt > 0
        assert 0 < g.thrust_min < g.mass * g.gravity < g.thrust_max
        assert 0 < g.tilt_max < math.pi / 2
    g = load_gains("f450_plus_pid", drone=load_params("generic_x"), dt=0.01)
    assert g.mass == load_params("generic_x").mass and g.dt == 0.01


BASE = """controller = "geometric"
kp = [16.0, 16.0, 16.0]
kv = 8.0
kR = { value = [300.0, 300.0, 100.0], unit = "1/s^2" }
kW = 40.0
rate_max = { value = [200.0, 200.0, 100.0], unit = "deg/s" }
"""


@pytest.mark.parametrize(
    "extra, key",
    [
        ("bogus = 1.0\n", "bogus"),
        ('ki = "fast"\n', "ki"),
        ("ki = [1.0, 2.0]\n", "ki"),
        ("ki = -1.0\n", "ki"),
        ('ki = { value = 1.0, unit = "1/s^2" }\n', "ki"),
        ("ki = { value = 1.0, why = 1 }\n", "ki"),
        ("tilt_max = nan\n", "tilt_max"),
        ("kW = 0.0\n", "kW"),
        ("motor_tau = 0.01\nmotor_tau_target = 0.02\n", "motor_tau_target"),
    ],
)
def test_gains_file_errors_name_file_and_key(tmp_path: Path, extra, key):
    text = BASE + extra
    if extra.startswith("kW"):
        text = text.replace("kW = 40.0\n", "")
    path = tmp_path / "mine.toml"
    path.write_text(text)
    with pytest.raises(ValueError, match=rf"mine\.toml.*'{key}'"):
        load_gains(path, drone="cf2x_L250", dt=0.002)


def test_gains_file_other_errors(tmp_path: Path):
    path = tmp_path / "ok.toml"
    path.write_text(BASE)
    g = load_gains(path, drone="cf2x_L250", dt=0.002)
    np.testing.assert_allclose(g.rate_max, np.radians([200.0, 200.0, 100.0]))
    np.testing.assert_array_equal(g.kv, [8.0, 8.0, 8.0])
    with pytest.raises(ValueError, match="'drone'"):
        load_gains(path, dt=0.002)
    with pytest.raises(ValueError, match="'dt'"):
        load_gains(path, drone="cf2x_L250")
    path.write_text(BASE.replace('"geometric"', '"lqr"'))
    with pytest.raises(ValueError, match="'controller'"):
        load_gains(path, drone="cf2x_L250", dt=0.002)
    path.write_text(BASE.replace("kv = 8.0\n", ""))
    with pytest.raises(ValueError, match=r"'kv'.*missing"):
        load_gains(path, drone="cf2x_L250", dt=0.002)
    with pytest.raises(ValueError, match="unknown gains"):
        load_gains("no_such_gains")
    with pytest.raises(ValueError, match="gains must be"):
        init_state(object())


# --------------------------------------------------------------------------- short closed loops


def closed_loop(drone, gains, ref_fn, start, seconds):
    sim = Simulator(drone, n=1, dt=gains.dt)
    sim.reset(**start)
    alloc = make_allocator(sim.drone)
    c = init_state(gains, (1,))
    errs = []
    for k in range(round(seconds / gains.dt)):
        r = ref_fn(k * gains.dt)
        w, c = control(State(*sim.state[:4]), r, gains, c)
        st = sim.step(allocate(w, alloc).rpm)
        errs.append(np.linalg.norm(st.pos[0] - ref_fn((k + 1) * gains.dt).pos))
    return np.array(errs), sim


def test_geometric_closes_on_a_circle():
    """cf2x_L250, rotor lag, 500 Hz: starting 11 cm off a 1 m/s circle, < 2 cm after 2 s."""
    g = load_gains("cf2x_L250_geometric")
    traj = Circle(radius=1.0, speed=1.0, center=(0.0, 0.0, 1.0))
    r0 = traj(0.0)
    start = dict(pos=r0.pos + np.array([0.1, 0.0, -0.05]), vel=r0.vel)
    err, _ = closed_loop("cf2x_L250", g, traj, start, 2.0)
    assert err[0] > 0.1 and err[-1] < 0.02 and err[-250:].max() < 0.025


def test_pid_recovers_from_a_tilted_sideways_start():
    """f450_plus, 200 Hz: from 30° roll and 1 m/s sideways at (0, 0, 1), back within 5 cm."""
    g = load_gains("f450_plus_pid")
    hover = hover_ref((1,))
    start = dict(pos=(0.0, 0.0, 1.0), attitude=rot.from_euler(np.array([0.5236, 0.0, 0.0])),
                 vel=(0.0, -1.0, 0.0))  # fmt: skip
    err, sim = closed_loop("f450_plus", g, lambda t: hover, start, 2.0)
    assert err.max() > 0.2 and err[-int(0.8 / g.dt) :].max() < 0.05
    assert not sim.status.landed[0] and not sim.status.crashed[0]
