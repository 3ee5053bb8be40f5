"""The complementary filter (:mod:`quadsim.loop.estimation.complementary`) against a known flight.

The truth is a figure-eight at about 1 m/s, 1 m high (or a hover), flown with the attitude of a
quadrotor: body z along the thrust direction ``a - g``, yaw 0. Its IMU samples at 500 Hz are
made as the closed loop makes them: the rate is the exact mean over the period
(``log(q_{k-1}* ⊗ q_k)/dt``) and the acceleration the mean ``(v_k - v_{k-1})/dt``, fed through
:func:`quadsim.physics.sensors.imu_measure` with the BMI088 preset; motion capture at 100 Hz (1 mm,
0.5°, no latency) through :func:`quadsim.physics.sensors.mocap_measure`. Every noise is a seeded
normal.
"""

from __future__ import annotations

import functools
import math
import re

import numpy as np
import pytest

from quadsim.loop.estimation.complementary import (
    AGE_NEVER,
    ComplementaryGains,
    ComplementaryState,
    check_complementary_gains,
    complementary_init,
    complementary_output,
    complementary_step,
    position_observer_gains,
)
from quadsim.physics import rotation
from quadsim.physics.sensors import (
    MocapParams,
    imu_init,
    imu_measure,
    load_imu,
    mocap_init,
    mocap_measure,
)

DT = 0.002  # IMU period [s] (500 Hz)
EVERY = 5  # IMU samples per motion-capture sample (100 Hz)
G = np.array([0.0, 0.0, -9.81])
GAINS = ComplementaryGains()
MOCAP = MocapParams(pos_std=1e-3, att_std=math.radians(0.5), latency=0.0, rate=100.0)
Z = np.array([0.0, 0.0, 1.0])


# -- the truth and its sensors ------------------------------------------------------------------
def _trajectory(t: np.ndarray, hover: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Position, velocity, acceleration ``(n, 3)``: figure-eight (A = 1 m, Ω = 0.8 rad/s)."""
    t = t[:, None]
    if hover:
        p = np.concatenate([0 * t, 0 * t, 0 * t + 1.0], -1)
        return p, 0 * p, 0 * p
    A, W = 1.0, 0.8
    s1, c1, s2, c2 = np.sin(W * t), np.cos(W * t), np.sin(2 * W * t), np.cos(2 * W * t)
    p = np.concatenate([A * s1, 0.5 * A * s2, 0 * t + 1.0], -1)
    v = np.concatenate([A * W * c1, A * W * c2, 0 * t], -1)
    a = np.concatenate([-A * W * W * s1, -2 * A * W * W * s2, 0 * t], -1)
    return p, v, a


def _attitude(a: np.ndarray) -> np.ndarray:
    """Quadrotor attitude ``(n, 4)``: body z along ``a - g``, yaw 0 (b_2 ∝ b_3 × e_x)."""
    b3 = a - G
    b3 = b3 / np.linalg.norm(b3, axis=-1, keepdims=True)
    b2 = np.cross(b3, [1.0, 0.0, 0.0])
    b2 = b2 / np.linalg.norm(b2, axis=-1, keepdims=True)
    b1 = np.cross(b2, b3)
    return rotation.from_matrix(np.stack([b1, b2, b3], axis=-1))


@functools.cache
def _flight(hover: bool, seconds: float, seeds: tuple[int, ...], bias_deg: tuple = (0, 0, 0)):
    """Truth ``p, v, q`` at ``t_0..t_n`` and the sensor samples at ``t_1..t_n`` of drones with
    the given seeds (batch axis 1)."""
    n, b = round(seconds / DT), len(seeds)
    t = np.arange(n + 1) * DT
    p, v, a = _trajectory(t, hover)
    q = _attitude(a)
    rate = rotation.log(rotation.multiply(rotation.conjugate(q[:-1]), q[1:])) / DT
    acc = (v[1:] - v[:-1]) / DT
    rngs = [np.random.default_rng(s) for s in seeds]
    z_imu = np.stack([r.standard_normal((n, 12)) for r in rngs], axis=1)
    z_mocap = np.stack([r.standard_normal((n, 6)) for r in rngs], axis=1)
    imu = load_imu("bmi088")._replace(gyro_bias=np.radians(bias_deg))
    state = imu_init(imu, (b,))
    gyro, accel = np.empty((n, b, 3)), np.empty((n, b, 3))
    for k in range(n):
        r, state = imu_measure(q[k + 1], rate[k], acc[k], G, imu, state, DT, z_imu[k])
        gyro[k], accel[k] = r.gyro, r.accel
    pb = np.broadcast_to(p[1:, None], (n, b, 3))
    qb = np.broadcast_to(q[1:, None], (n, b, 4))
    m, _ = mocap_measure(pb, qb, MOCAP, mocap_init(pb, qb, MOCAP), z_mocap)
    fresh = np.broadcast_to(((np.arange(1, n + 1) % EVERY) == 0)[:, None], (n, b))
    return dict(p=p, v=v, q=q, gyro=gyro, accel=accel, pos_m=m.pos, quat_m=m.quat, fresh=fresh)


def _run(data, gains=GAINS, q0=None, use_quat=True, use_pos=True):
    """Filter the flight from the true position and velocity (attitude ``q0`` or the truth);
    returns the estimated ``pos (n, b, 3)``, ``quat (n, b, 4)``, ``gyro_bias (n, b, 3)``."""
    n, b = data["gyro"].shape[:2]
    st = complementary_init(data["p"][0], data["v"][0], data["q"][0] if q0 is None else q0)
    st = st._replace(**{f: np.broadcast_to(getattr(st, f), (b, *getattr(st, f).shape[-1:]))
                        for f in ("pos", "vel", "quat", "gyro_bias", "acc_world", "acc_corr")},
                     pos_age=np.broadcast_to(st.pos_age, (b,)))  # fmt: skip
    pos, quat, bias = np.empty((n, b, 3)), np.empty((n, b, 4)), np.empty((n, b, 3))
    for k in range(n):
        f = data["fresh"][k]
        st = complementary_step(
            st, data["gyro"][k], data["accel"][k], G, DT, gains,
            pos_meas=data["pos_m"][k] if use_pos else None, pos_fresh=f if use_pos else None,
            quat_meas=data["quat_m"][k] if use_quat else None, quat_fresh=f if use_quat else None,
        )  # fmt: skip
        pos[k], quat[k], bias[k] = st.pos, st.quat, st.gyro_bias
    return pos, quat, bias


def _att_err_deg(q_true, q_est):
    return np.degrees(np.linalg.norm(rotation.log(rotation.multiply(
        rotation.conjugate(q_true), q_est)), axis=-1))  # fmt: skip


def _tilt_err_deg(q_true, q_est):
    c = np.sum(rotation.rotate(q_true, Z) * rotation.rotate(q_est, Z), axis=-1)
    return np.degrees(np.arccos(np.clip(c, -1.0, 1.0)))


def _rms(x, axis=0):
    return np.sqrt(np.mean(np.square(x), axis=axis))


def _k(t: float) -> int:
    """Index of the estimate at time ``t`` [s] (the estimates start at ``t_1``)."""
    return round(t / DT) - 1


# -- the position observer gains ----------------------------------------------------------------
@pytest.mark.parametrize("zeta", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("period", [0.01, 0.1])
def test_observer_gains_place_the_discrete_poles(zeta, period):
    """The post-fix error map ``[[1-l1, (1-l1)T], [-l2, 1-l2 T]]`` has the eigenvalues
    ``exp(s T)`` of ``s² + 2ζω s + ω²``, and the gains tend to ``(2ζωT, ω²T)`` for small ``ωT``."""
    w = 4.0
    l1, l2 = position_observer_gains(w, zeta, period)
    T = period
    A = np.array([[1 - l1, (1 - l1) * T], [-l2, 1 - l2 * T]])
    s = np.roots([1.0, 2 * zeta * w, w * w]).astype(complex)
    np.testing.assert_allclose(np.sort_complex(np.linalg.eigvals(A).astype(complex)),
                               np.sort_complex(np.exp(s * T)), atol=1e-12)  # fmt: skip
    l1s, l2s = position_observer_gains(w, zeta, 1e-6)
    np.testing.assert_allclose([l1s / 1e-6, l2s / 1e-6], [2 * zeta * w, w * w], rtol=1e-4)


# -- accuracy on the figure-eight ---------------------------------------------------------------
def test_figure_eight_accuracy_with_motion_capture():
    """IMU + 100 Hz motion capture (pose): after 5 s, attitude RMSE < 1° and position RMSE
    < 3 mm for three noise seeds (measured ≈ 0.065° and ≈ 0.6 mm)."""
    data = _flight(False, 20.0, (1, 2, 3))
    pos, quat, _ = _run(data)
    s = slice(_k(5.0), None)
    att = _rms(_att_err_deg(data["q"][1:, None], quat)[s])
    perr = _rms(np.linalg.norm(pos - data["p"][1:, None], axis=-1)[s])
    assert np.all(att < 1.0), att
    assert np.all(perr < 3e-3), perr
    # and the motion-capture attitude noise (0.5°) is filtered, not passed through
    assert np.all(att < 0.3), att


def test_gyro_bias_is_learned_from_attitude_measurements():
    """A constant gyro bias of 0.5°/s per axis is learned to within 10 % in 10 s."""
    bias = (0.5, -0.5, 0.5)
    data = _flight(False, 10.0, (4, 5, 6), bias)
    _, _, est = _run(data)
    true = np.radians(bias)
    rel = np.abs(est[-1] - true) / np.abs(true)
    assert np.all(rel < 0.1), rel
    assert np.all(np.abs(est[_k(1.0)] - true) / np.abs(true) > 0.3)  # it had to learn it


# -- the accelerometer ---------------------------------------------------------------------------
def _tilted(q, roll_deg, pitch_deg):
    return rotation.multiply(q, rotation.from_euler(np.radians([roll_deg, pitch_deg, 0.0])))


def test_accelerometer_levels_a_hover_without_attitude_measurements():
    """Motion-capture position only: roll and pitch converge from a 10° error (tilt 14°)
    through the accelerometer; without its weight they do not move."""
    data = _flight(True, 10.0, (7, 8))
    q0 = _tilted(data["q"][0], 10.0, -10.0)
    _, quat, _ = _run(data, q0=q0, use_quat=False)
    tilt = _tilt_err_deg(data["q"][1:, None], quat)
    assert np.all(tilt[0] > 13.0)
    assert np.all(tilt[_k(10.0)] < 0.5), tilt[_k(10.0)]
    _, quat, _ = _run(data, GAINS._replace(accel_weight=0.0), q0=q0, use_quat=False)
    assert np.all(_tilt_err_deg(data["q"][1:, None], quat)[_k(10.0)] > 13.0)


def test_accelerometer_without_position_fixes_is_the_classic_filter():
    """No position sensor at all: the reference is gravity alone (Mahony's unaccelerated
    assumption), which levels a hover from 10° too."""
    data = _flight(True, 10.0, (7, 8))
    _, quat, _ = _run(data, q0=_tilted(data["q"][0], 10.0, -10.0), use_quat=False,
                      use_pos=False)  # fmt: skip
    assert np.all(_tilt_err_deg(data["q"][1:, None], quat)[_k(10.0)] < 0.5)


def test_acceleration_compensation_matters_in_a_turn():
    """Figure-eight, position fixes but no attitude measurement. The thrust tilts up to ~8°
    while |f| stays within 2.5 % of 1 g (a gain gated on |f| ≈ g could not tell); the classic
    reference (gravity only, ``accel_comp = 0``) leaves degrees of tilt error, the compensated
    one hundredths (measured ≈ 4.1° and ≈ 0.035° RMSE)."""
    data = _flight(False, 15.0, (9,))
    f = np.linalg.norm(data["accel"], axis=-1) / 9.81
    true_tilt = np.degrees(np.arccos(rotation.rotate(data["q"], Z)[:, 2]))
    assert true_tilt.max() > 7.0 and np.all(np.abs(f - 1.0) < 0.025)
    s = slice(_k(5.0), None)
    q_true = data["q"][1:, None]
    _, quat, _ = _run(data, use_quat=False)
    comp = _rms(_tilt_err_deg(q_true, quat)[s])
    _, quat, _ = _run(data, GAINS._replace(accel_comp=0.0), use_quat=False)
    classic = _rms(_tilt_err_deg(q_true, quat)[s])
    assert comp < 0.2, comp
    assert classic > 2.0, classic


# -- large errors ---------------------------------------------------------------------------------
def test_stable_from_a_30_degree_attitude_error():
    """30° about a skew axis with motion capture (the whole attitude converges), and 30° of
    roll with the accelerometer alone in a hover (the tilt converges); the estimates stay
    finite and bounded on the way."""
    data = _flight(False, 10.0, (10, 11))
    axis = np.array([1.0, -2.0, 0.5]) / np.linalg.norm([1.0, -2.0, 0.5])
    q0 = rotation.multiply(data["q"][0], rotation.exp(np.radians(30.0) * axis))
    pos, quat, _ = _run(data, q0=q0)
    att = _att_err_deg(data["q"][1:, None], quat)
    assert np.all(np.isfinite(quat)) and np.all(att[: _k(1.0)] < 31.0)
    assert np.all(att[_k(10.0)] < 1.0), att[_k(10.0)]
    assert np.all(np.linalg.norm(pos - data["p"][1:, None], axis=-1)[_k(10.0)] < 1e-2)

    hover = _flight(True, 15.0, (12,))
    _, quat, _ = _run(hover, q0=_tilted(hover["q"][0], 30.0, 0.0), use_quat=False)
    tilt = _tilt_err_deg(hover["q"][1:, None], quat)
    assert np.all(np.isfinite(quat)) and tilt.max() < 31.0
    assert np.all(tilt[_k(15.0)] < 1.0), tilt[_k(15.0)]


# -- the API ------------------------------------------------------------------------------------
@pytest.mark.parametrize("field", ComplementaryGains._fields)
@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf, "x"])
def test_gain_validation_names_the_field(field, bad):
    with pytest.raises(ValueError, match=re.escape(f"gains.{field}")):
        check_complementary_gains(GAINS._replace(**{field: bad}))


def test_gain_validation_limits():
    with pytest.raises(ValueError, match=r"gains\.meas_period"):
        check_complementary_gains(GAINS._replace(meas_period=0.0))
    with pytest.raises(ValueError, match=r"gains\.accel_comp"):
        check_complementary_gains(GAINS._replace(accel_comp=1.5))
    with pytest.raises(ValueError, match=r"gains\.k_p"):
        check_complementary_gains(GAINS._replace(k_p=200.0))
    with pytest.raises(ValueError, match="ComplementaryGains"):
        check_complementary_gains((1.0, 0.3))
    ok = check_complementary_gains(GAINS._replace(k_p=np.float32(2.0)))
    assert type(ok.k_p) is float and check_complementary_gains(ok) is ok
    st = complementary_init(np.zeros(3), np.zeros(3), np.array([0.0, 0.0, 0.0, 1.0]))
    with pytest.raises(ValueError, match="dt"):
        complementary_step(st, np.zeros(3), -G, G, 0.0, GAINS)
    with pytest.raises(ValueError, match="gyro"):
        complementary_step(st, np.zeros(4), -G, G, DT, GAINS)
    with pytest.raises(ValueError, match="quat_meas"):
        complementary_step(st, np.zeros(3), -G, G, DT, GAINS, quat_meas=np.zeros(3))


def test_init_output_and_fresh_flags():
    """Init broadcasts and normalises; the output subtracts the bias; a drone whose flags are
    False in a batch steps exactly as one without measurements, a fresh one is corrected."""
    st = complementary_init(np.zeros((2, 3)), np.zeros(3), np.array([0.0, 0.0, 0.0, 2.0]))
    assert st.quat.shape == (2, 4) and st.pos_age.shape == (2,) and st.quat.dtype == np.float64
    np.testing.assert_array_equal(st.quat[:, 3], 1.0)
    np.testing.assert_array_equal(st.pos_age, AGE_NEVER)
    st = st._replace(gyro_bias=np.array([[0.01, 0.02, 0.03], [0.0, 0.0, 0.0]]))
    gyro = np.array([0.1, -0.2, 0.3])
    _, _, _, w = complementary_output(st, gyro)
    np.testing.assert_allclose(w, gyro - st.gyro_bias, rtol=0, atol=0)

    fresh = np.array([True, False])
    pm, qm = np.array([0.01, -0.02, 0.03]), rotation.exp(np.array([0.05, 0.0, -0.02]))
    accel = -G + np.array([0.1, 0.0, 0.0])
    both = complementary_step(st, gyro, accel, G, DT, GAINS, pos_meas=pm, pos_fresh=fresh,
                              quat_meas=qm, quat_fresh=fresh)  # fmt: skip
    alone = complementary_step(st, gyro, accel, G, DT, GAINS)
    for name in ComplementaryState._fields:
        np.testing.assert_array_equal(getattr(both, name)[1], getattr(alone, name)[1], name)
    assert both.pos_age[0] == 0.0 and both.pos_age[1] == AGE_NEVER
    assert np.linalg.norm(both.pos[0] - alone.pos[0]) > 1e-4
    assert _att_err_deg(both.quat[0], alone.quat[0]) > 1e-3
    np.testing.assert_allclose(np.linalg.norm(both.quat, axis=-1), 1.0, rtol=1e-15)


def test_other_backends_step_like_numpy(xp):
    """One step with every measurement, on every array backend, equals NumPy's."""
    rng = np.random.default_rng(3)
    args = dict(pos=rng.normal(size=(2, 3)), vel=rng.normal(size=(2, 3)),
                quat=rotation.normalize(rng.normal(size=(2, 4))))  # fmt: skip
    gyro, accel = rng.normal(size=(2, 3)), -G + rng.normal(size=(2, 3))
    pm, qm = rng.normal(size=(2, 3)), rotation.normalize(rng.normal(size=(2, 4)))
    fresh = np.array([True, False])

    def go(conv, fr):
        st = complementary_init(*(conv(a) for a in args.values()))
        st = st._replace(acc_corr=conv(np.full((2, 3), 0.3)), pos_age=conv(np.zeros(2)))
        for _ in range(3):
            st = complementary_step(st, conv(gyro), conv(accel), G, DT, GAINS,
                                    pos_meas=conv(pm), pos_fresh=fr, quat_meas=conv(qm),
                                    quat_fresh=fr)  # fmt: skip
        return st

    want = go(lambda a: a, fresh)
    got = go(xp.asarray, xp.xp.asarray(fresh))
    for name in ComplementaryState._fields:
        np.testing.assert_allclose(xp.numpy(getattr(got, name)), getattr(want, name),
                                   rtol=xp.rtol, atol=xp.rtol * 10, err_msg=name)  # fmt: skip


def test_numpy_and_jax_jit_agree():
    """500 steps (with a 20° initial error, so every correction acts) under ``jax.jit`` and
    ``lax.scan`` in float64 give NumPy's estimates to 1e-9."""
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    data = _flight(False, 20.0, (1, 2, 3))
    n = 500
    q0 = _tilted(data["q"][0], 20.0, 0.0)
    pos, quat, bias = _run({**data, "gyro": data["gyro"][:n]}, q0=q0)
    with jax.enable_x64(True):
        st = complementary_init(jnp.asarray(np.broadcast_to(data["p"][0], (3, 3))),
                                jnp.asarray(data["v"][0]), jnp.asarray(q0))  # fmt: skip

        def body(st, x):
            gyro, accel, pm, qm, fr = x
            st = complementary_step(st, gyro, accel, G, DT, GAINS, pos_meas=pm, pos_fresh=fr,
                                    quat_meas=qm, quat_fresh=fr)  # fmt: skip
            return st, (st.pos, st.quat, st.gyro_bias)

        xs = tuple(jnp.asarray(data[k][:n]) for k in ("gyro", "accel", "pos_m", "quat_m", "fresh"))
        _, (jp, jq, jb) = jax.jit(lambda st, xs: jax.lax.scan(body, st, xs))(st, xs)
        assert jp.dtype == jnp.float64
        np.testing.assert_allclose(np.asarray(jp), pos[:n], rtol=0, atol=1e-9)
        np.testing.assert_allclose(np.asarray(jq), quat[:n], rtol=0, atol=1e-9)
        np.testing.assert_allclose(np.asarray(jb), bias[:n], rtol=0, atol=1e-9)


@pytest.mark.parametrize("fresh", [True, False])
def test_casadi_trace_of_one_step_matches_numpy(fresh):
    """One step of one drone traced with CasADi ``SX``
    (:class:`~quadsim.physics._symbolic.SymArray`), the fresh flags symbolic too, evaluates to
    NumPy's numbers."""
    cs = pytest.importorskip("casadi")
    from quadsim.physics._symbolic import SymArray, symbolic

    rng = np.random.default_rng(11)
    st = ComplementaryState(rng.normal(size=3), rng.normal(size=3),
                            rotation.normalize(rng.normal(size=4)), 0.01 * rng.normal(size=3),
                            rng.normal(size=3), rng.normal(size=3), np.asarray(0.1))  # fmt: skip
    gyro, accel = rng.normal(size=3), -G + rng.normal(size=3)
    pm, qm = rng.normal(size=3), rotation.normalize(rng.normal(size=4))
    want = complementary_step(st, gyro, accel, G, DT, GAINS, pos_meas=pm,
                              pos_fresh=np.asarray(fresh), quat_meas=qm,
                              quat_fresh=np.asarray(fresh))  # fmt: skip

    sizes = [3, 3, 4, 3, 3, 3, 1, 3, 3, 3, 4, 1]
    X = cs.SX.sym("x", sum(sizes))
    parts, at = [], 0
    for size in sizes:
        parts.append(symbolic([X[i] for i in range(at, at + size)]))
        at += size
    age, fr = (SymArray(parts[i].a.reshape(())) for i in (6, 11))
    sst = ComplementaryState(*parts[:6], age)
    out = complementary_step(sst, parts[7], parts[8], G, DT, GAINS, pos_meas=parts[9],
                             pos_fresh=fr, quat_meas=parts[10], quat_fresh=fr)  # fmt: skip
    flat = [e for o in out for e in o.entries()]
    F = cs.Function("complementary_step", [X], [cs.vertcat(*flat)])
    x = np.concatenate([*(np.ravel(a) for a in st), gyro, accel, pm, qm, [float(fresh)]])
    got = np.asarray(F(x)).ravel()
    np.testing.assert_allclose(got, np.concatenate([np.ravel(a) for a in want]), rtol=1e-12,
                               atol=1e-12)  # fmt: skip
