"""The error-state EKF (quadsim.loop.estimation.eskf) on a simulated flight, against the truth.

The truth is a closed-loop flight of the cf2x (geometric controller, figure eight at about
1 m/s, RK4 at 500 Hz); the IMU (BMI088 preset) and motion capture (1 mm, 0.5 deg at 100 Hz) are
sampled from it offline with :mod:`quadsim.physics.sensors`, and the filter runs on those readings.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from quadsim.engines.sim import Simulator
from quadsim.loop.control import control, load_gains
from quadsim.loop.estimation import eskf as E  # noqa: N812
from quadsim.loop.flight import fly
from quadsim.loop.trajectories import Lemniscate
from quadsim.physics import rotation, sensors

DT = 1 / 500
STD0 = np.array([1e-3] * 3 + [1e-2] * 3 + [math.radians(1.0)] * 3 + [0.05] * 3
                + [math.radians(0.5)] * 3)  # fmt: skip
MOCAP = sensors.MocapParams(pos_std=1e-3, att_std=math.radians(0.5), latency=0.0, rate=100.0)


@pytest.fixture(scope="module")
def flight():
    """64 drones flying the same figure eight (8 s period, 2 m x 1 m: up to ~1.1 m/s), 12 s."""
    n = 64
    from quadsim.engines import native

    backend = "native" if native.available() else "numpy"
    sim = Simulator("cf2x_L250", n=n, dt=DT, backend=backend)
    traj = Lemniscate(size=1.0, period=8.0, center=(0.0, 0.0, 1.0))
    r0 = traj(0.0)
    sim.reset(pos=np.asarray(r0.pos), vel=r0.vel)
    gains = load_gains("cf2x_L250_geometric", drone=sim.drone, dt=sim.dt)
    log = fly(sim, traj, control, gains, duration=12.0).log
    return {k: log[k] for k in ("pos", "vel", "quat", "ang_vel")} | {
        "g": np.asarray(sim.drone.gravity_vec, np.float64)
    }


def run_filter(flight, *, seed=0, n=64, mocap_scale=1.0, gyro_bias=None, bias_at=0,
               gyro_bias_noise=None):  # fmt: skip
    """Run the filter over the flight; returns errors (T, n, 9), NEES (T, n) and the states."""
    imu = sensors.load_imu("bmi088")
    pos, vel, quat, w = (flight[k][:, :n] for k in ("pos", "vel", "quat", "ang_vel"))
    g, T = flight["g"], flight["pos"].shape[0]
    rng = np.random.default_rng(seed)
    walk = imu.gyro_bias_walk if gyro_bias_noise is None else gyro_bias_noise
    noise = E.EskfNoise(imu.gyro_noise_density, imu.accel_noise_density, walk,
                        imu.accel_bias_walk)  # fmt: skip
    e0 = rng.normal(size=(n, 15)) * STD0  # the initial error is drawn from P0
    st = E.eskf_init(pos[0] - e0[:, :3], vel[0] - e0[:, 3:6],
                     rotation.multiply(quat[0], rotation.exp(-e0[:, 6:9])), STD0)  # fmt: skip
    st = st._replace(accel_bias=-e0[:, 9:12], gyro_bias=-e0[:, 12:15])
    ims = sensors.imu_init(imu, (n,))
    ms = sensors.mocap_init(pos[0], quat[0], MOCAP, DT)
    errs, nees, bias = [], [], []
    for k in range(1, T):
        p = imu if gyro_bias is None or k < bias_at else imu._replace(gyro_bias=gyro_bias)
        acc = (vel[k] - vel[k - 1]) / DT
        rd, ims = sensors.imu_measure(quat[k], w[k], acc, g, p, ims, DT, rng.normal(size=(n, 12)))
        st = E.eskf_predict(st, rd.gyro, rd.accel, g, DT, noise)
        if k % 5 == 0:
            mr, ms = sensors.mocap_measure(pos[k], quat[k], MOCAP, ms, rng.normal(size=(n, 6)))
            rows = (E.position_rows(st, mr.pos, mocap_scale * MOCAP.pos_std)
                    + E.attitude_rows(st, mr.quat, mocap_scale * MOCAP.att_std))  # fmt: skip
            st = E.correct(st, rows, np.ones(n, bool))
        nees.append(E.nees(st, pos[k], vel[k], quat[k]))
        att = rotation.log(rotation.multiply(rotation.conjugate(st.quat), quat[k]))
        errs.append(np.concatenate([pos[k] - st.pos, vel[k] - st.vel, att], -1))
        bias.append(st.gyro_bias)
    return np.array(errs), np.array(nees), np.array(bias)


def test_errors_are_small_and_the_filter_is_consistent(flight):
    """Position RMSE well under 2 mm, attitude under 0.5 deg; over 64 Monte-Carlo drones the
    mean NEES (9 degrees of freedom) lies in the two-sided 95 % chi-square band."""
    from scipy.stats import chi2

    errs, nees, _ = run_filter(flight)
    late = slice(errs.shape[0] // 4, None)
    pos_rmse = np.sqrt((errs[late, :, :3] ** 2).sum(-1).mean())
    att_rmse = math.degrees(np.sqrt((errs[late, :, 6:9] ** 2).sum(-1).mean()))
    print(f"\nESKF: position RMSE {pos_rmse * 1e3:.3f} mm, attitude {att_rmse:.4f} deg, "
          f"mean NEES {nees[late].mean():.2f}")  # fmt: skip
    assert pos_rmse < 2e-3 and att_rmse < 0.5
    n, dof = nees.shape[1], 9
    lo, hi = chi2.ppf([0.025, 0.975], n * dof) / n
    per_step = nees.mean(axis=1)  # the 64-drone mean at each step
    assert lo <= per_step[late].mean() <= hi
    inside = np.mean((per_step >= lo) & (per_step <= hi))
    assert inside > 0.8, f"the mean NEES is inside its band at {inside:.0%} of the steps"


def test_a_filter_trusting_its_measurements_ten_times_too_much_is_inconsistent(flight):
    from scipy.stats import chi2

    _, nees, _ = run_filter(flight, mocap_scale=0.1, n=64)
    hi = chi2.ppf(0.975, 64 * 9) / 64
    assert nees[nees.shape[0] // 4 :].mean(axis=1).mean() > hi


def test_a_gyro_bias_step_is_learned_within_10_percent_in_10_s(flight):
    """A 0.5 deg/s gyroscope bias appears on every axis 2 s into the flight (the filter has
    converged on a zero bias). With the filter's gyro-bias process noise raised to 2.5e-4
    rad/s²/√Hz (30 times the BMI088 preset's walk; a step is 300 sigma of that walk over 10 s,
    and flight filters tune this noise up, as PX4's EKF2_GYR_B_NOISE does), the estimate is
    within 10 % on every axis of every drone 10 s later; with the preset's own walk it gets to
    about 88 %."""
    b = math.radians(0.5)
    step = 1000  # 2 s at 500 Hz
    _, _, bias = run_filter(flight, gyro_bias=np.full(3, b), bias_at=step, n=16,
                               gyro_bias_noise=2.5e-4)  # fmt: skip
    assert np.all(np.abs(bias[step - 2]) < 0.2 * b)  # before the step: about zero
    after = bias[step - 1 + 5000]  # the estimate 10 s after the step
    print(f"\nbias step: worst error 10 s later {np.abs(after - b).max() / b:.1%} (tuned)")
    assert np.all(np.abs(after - b) < 0.1 * b), np.degrees(after)
    _, _, slow = run_filter(flight, gyro_bias=np.full(3, b), bias_at=step, n=16)
    worst = np.abs(slow[step - 1 + 5000] - b).max() / b
    print(f"bias step: worst error 10 s later {worst:.1%} (the preset's walk)")
    assert worst < 0.2


def _fd_transition(dt):
    """(F of eskf_predict, F by central differences of the strapdown step) at step ``dt``."""
    rng = np.random.default_rng(3)
    g = np.array([0.0, 0.0, -9.81])
    p, v = rng.normal(size=3), rng.normal(size=3)
    q = rotation.normalize(rng.normal(size=4))
    gyro, accel = rng.normal(size=3), rng.normal(size=3) + np.array([0.0, 0.0, 9.81])
    ba, bg = 0.1 * rng.normal(size=3), 0.05 * rng.normal(size=3)

    def step(dx):
        qq = rotation.multiply(q, rotation.exp(dx[6:9]))
        P, V, Q, _ = E.strapdown(p + dx[:3], v + dx[3:6], qq, gyro - (bg + dx[12:15]),
                                 accel - (ba + dx[9:12]), g, dt)  # fmt: skip
        return P, V, Q

    _, _, Q0 = step(np.zeros(15))
    J = np.zeros((9, 15))
    h = 1e-6
    for i in range(15):
        d = np.zeros(15)
        d[i] = h
        (Pp, Vp, Qp), (Pm, Vm, Qm) = step(d), step(-d)
        J[:3, i] = (Pp - Pm) / (2 * h)
        J[3:6, i] = (Vp - Vm) / (2 * h)
        J[6:9, i] = (rotation.log(rotation.multiply(rotation.conjugate(Q0), Qp))
                     - rotation.log(rotation.multiply(rotation.conjugate(Q0), Qm))) / (2 * h)
    F_fd = np.vstack([J, np.hstack([np.zeros((6, 9)), np.eye(6)])])
    # P = I and Q = 0: the propagated covariance is F Fᵀ; F is upper block triangular with an
    # orthogonal attitude block, so compare F Fᵀ (what the filter computes) on both sides
    st = E.eskf_init(p, v, q, np.ones(15))._replace(accel_bias=ba, gyro_bias=bg)
    got = E.unpack(E.eskf_predict(st, gyro, accel, g, dt, E.EskfNoise(0.0, 0.0, 0.0, 0.0)).cov)
    return got, F_fd @ F_fd.T


def test_propagation_jacobian_matches_finite_differences():
    """The filter's first-order transition (through F Fᵀ) against central differences of the
    strapdown step in the error coordinates: equal up to terms of order dt², which shrink
    four times when dt halves."""
    errs = []
    for dt in (4e-3, 2e-3, 1e-3):
        got, want = _fd_transition(dt)
        errs.append(np.abs(got - want).max())
        assert errs[-1] < 5 * dt * dt, (dt, errs[-1])
    assert 3.0 < errs[0] / errs[1] < 5.0 and 3.0 < errs[1] / errs[2] < 5.0, errs


def test_updates_match_the_batch_kalman_update():
    """Sequential scalar fusion equals the textbook batch update K = P Hᵀ (H P Hᵀ + R)⁻¹ for a
    position and attitude measurement; a measurement that is not fresh changes nothing."""
    rng = np.random.default_rng(4)
    A = rng.normal(size=(15, 15))
    P = A @ A.T * 1e-3 + np.eye(15) * 1e-4
    st = E.eskf_init(rng.normal(size=3), rng.normal(size=3), rotation.normalize(rng.normal(size=4)),
                     np.ones(15))._replace(cov=E.pack(P))  # fmt: skip
    z_pos = st.pos + 0.01 * rng.normal(size=3)
    z_q = rotation.multiply(st.quat, rotation.exp(0.01 * rng.normal(size=3)))
    sd = np.array([2e-3, 3e-3, 4e-3])
    rows = E.position_rows(st, z_pos, sd) + E.attitude_rows(st, z_q, sd)
    new = E.correct(st, rows, True)
    H = np.zeros((6, 15))
    H[:3, :3] = np.eye(3)
    H[3:, 6:9] = np.eye(3)
    R = np.diag(np.concatenate([sd, sd]) ** 2)
    K = P @ H.T @ np.linalg.inv(H @ P @ H.T + R)
    r = np.concatenate([z_pos - st.pos, rotation.log(rotation.multiply(rotation.conjugate(st.quat),
                                                                        z_q))])  # fmt: skip
    dx = K @ r
    np.testing.assert_allclose(E.unpack(new.cov), (np.eye(15) - K @ H) @ P, rtol=1e-9,
                               atol=1e-15)  # fmt: skip
    np.testing.assert_allclose(new.pos, st.pos + dx[:3], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(new.gyro_bias, dx[12:15], rtol=1e-9, atol=1e-15)
    same = E.correct(st, rows, False)
    np.testing.assert_array_equal(same.cov, st.cov)
    np.testing.assert_array_equal(same.pos, st.pos)


def test_numpy_jax_and_the_casadi_trace_agree():
    """One predict and one pose update: NumPy float64, JAX (jit, x64) and the CasADi SX trace
    of one drone give the same numbers."""
    import casadi as cs

    from quadsim.physics._symbolic import SymArray, symbolic

    rng = np.random.default_rng(5)
    g = np.array([0.0, 0.0, -9.81])
    noise = E.EskfNoise(2e-4, 2e-3, 1e-5, 5e-4)
    p, v = rng.normal(size=3), rng.normal(size=3)
    q = rotation.normalize(rng.normal(size=4))
    gyro, accel = rng.normal(size=3), rng.normal(size=3)
    zp, zq = rng.normal(size=3), rotation.normalize(rng.normal(size=4))

    def go(p, v, q, gyro, accel, zp, zq, xp=np):
        st = E.eskf_init(p, v, q, STD0, xp=xp)
        st = E.eskf_predict(st, gyro, accel, g, DT, noise)
        rows = E.position_rows(st, zp, 1e-3) + E.attitude_rows(st, zq, 0.01)
        st = E.correct(st, rows, True)
        return st.pos, st.quat, st.cov, E.nees(st, zp, v, zq)

    want = go(p, v, q, gyro, accel, zp, zq)
    X = cs.SX.sym("x", 23)
    args = [symbolic([X[i] for i in range(a, b)]) for a, b in
            ((0, 3), (3, 6), (6, 10), (10, 13), (13, 16), (16, 19), (19, 23))]  # fmt: skip
    outs = go(*args, xp=args[0].__array_namespace__())
    flat = [e for o in outs for e in (o.entries() if isinstance(o, SymArray) else [o])]
    F = cs.Function("eskf", [X], [cs.vertcat(*flat)])
    got = np.asarray(F(np.concatenate([p, v, q, gyro, accel, zp, zq]))).ravel()
    want_flat = np.concatenate([np.ravel(w) for w in want])
    np.testing.assert_allclose(got, want_flat, rtol=1e-9, atol=1e-12)
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    with jax.enable_x64(True):
        jgot = jax.jit(lambda *a: go(*a, xp=jnp))(*[jnp.asarray(a) for a in
                                                   (p, v, q, gyro, accel, zp, zq)])  # fmt: skip
        for a, b in zip(jgot, want, strict=True):
            np.testing.assert_allclose(np.asarray(a), b, rtol=1e-9, atol=1e-12)


def test_covariance_over_an_interval_approaches_the_per_sample_prediction():
    """``propagate_cov`` over 5 samples at once (their summed rate and specific force, the EKF's
    ``cov_interval``) against 5 per-sample predictions: equal to first order in the interval;
    an empty interval leaves the covariance as it is."""
    rng = np.random.default_rng(4)
    noise = E.EskfNoise(2e-3, 2e-2, 1e-4, 1e-3)
    std = np.array([1e-3] * 3 + [1e-2] * 3 + [1e-2] * 3 + [0.05] * 3 + [2e-3] * 3)
    s0 = E.eskf_init(np.zeros((1, 3)), np.zeros((1, 3)), np.array([[0.0, 0.0, 0.0, 1.0]]), std)
    dt, m = 0.002, 5
    gyro = rng.normal(0, 0.5, (m, 1, 3))
    acc = rng.normal(0, 1.0, (m, 1, 3)) + np.array([0.0, 0.0, 9.81])
    s = s0
    for i in range(m):
        s = E.eskf_predict(s, gyro[i], acc[i], (0, 0, -9.81), dt, noise)
    R = rotation.to_matrix(s0.quat)
    once = E.propagate_cov(s0, R, gyro.sum(0) * dt, acc.sum(0) * dt, np.full((1, 1), m * dt), noise)
    P1, P2 = E.unpack(s.cov)[0], E.unpack(once)[0]
    rel = np.abs(P2 - P1).max() / np.abs(P1).max()
    assert 0 < rel < 0.02, rel
    np.testing.assert_allclose(np.diag(P2), np.diag(P1), rtol=0.02, atol=1e-12)
    same = E.propagate_cov(s0, R, 0 * gyro[0], 0 * acc[0], np.zeros((1, 1)), noise)
    np.testing.assert_array_equal(same, s0.cov)


def test_ekf_rejects_a_negative_covariance_interval():
    from quadsim.loop.brain import Sensors, loop_periods
    from quadsim.loop.estimation.estimators import EkfEstimator

    imu = sensors.load_imu("bmi088")
    mocap = sensors.MocapParams(pos_std=1e-3, att_std=0.01, latency=0.0, rate=100.0)
    per = loop_periods(0.002, None, Sensors(imu, mocap))
    with pytest.raises(ValueError, match="cov_interval"):
        EkfEstimator(imu, mocap, (0, 0, -9.81), 0.002, per, cov_interval=-0.01)
    with pytest.raises(ValueError, match="cov_interval"):
        EkfEstimator(imu, mocap, (0, 0, -9.81), 0.002, per, cov_interval=float("nan"))
