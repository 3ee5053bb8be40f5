"""The sliding IMU preintegration (quadsim.loop.estimation.preintegration): the window applied to a
state equals the strapdown through its samples, the EKF's carry equals the re-propagation, and
the float32 drift that makes the estimator rebuild its window is measured."""

from __future__ import annotations

import math

import numpy as np

from quadsim.loop.estimation import eskf
from quadsim.loop.estimation import preintegration as pre
from quadsim.physics import rotation

G = np.array([0.0, 0.0, -9.81])


def _samples(rng, n, m):
    gyro = rng.normal(0, 2.0, (n, m, 3))
    accel = rng.normal(0, 4.0, (n, m, 3)) + np.array([0.0, 0.0, 9.81])
    fresh = (rng.random((n, m, 1)) > 0.2).astype(float)
    return gyro, accel, fresh


def test_window_equals_the_strapdown_through_its_samples():
    rng = np.random.default_rng(1)
    n, L, dt = 6, 15, 0.002
    gyro, accel, fresh = _samples(rng, n, L)
    p0, v0 = rng.normal(0, 1, (n, 3)), rng.normal(0, 1, (n, 3))
    q0 = rotation.normalize(rng.normal(0, 1, (n, 4)))
    win = pre.empty(p0)
    p, v, q = p0, v0, q0
    for i in range(L):
        win = pre.push(win, pre.sample(gyro[:, i], accel[:, i], fresh[:, i] * dt))
        p1, v1, q1, _ = eskf.strapdown(p, v, q, gyro[:, i], accel[:, i], G, dt)
        keep = fresh[:, i] > 0.5
        p, v, q = (np.where(keep, a, b) for a, b in ((p1, p), (v1, v), (q1, q)))
    pw, vw, qw = pre.apply(p0, v0, q0, win, G)
    np.testing.assert_allclose(pw, p, atol=1e-12)
    np.testing.assert_allclose(vw, v, atol=1e-12)
    np.testing.assert_allclose(np.abs(np.sum(qw * q, -1)), 1.0, atol=1e-12)


def test_a_pop_undoes_the_oldest_push():
    rng = np.random.default_rng(3)
    n, dt = 5, 0.002
    gyro, accel, fresh = _samples(rng, n, 8)
    ss = [pre.sample(gyro[:, i], accel[:, i], fresh[:, i] * dt) for i in range(8)]
    win = pre.empty(gyro[:, 0])
    for s in ss:
        win = pre.push(win, s)
    ref = pre.empty(gyro[:, 0])
    for s in ss[1:]:
        ref = pre.push(ref, s)
    np.testing.assert_allclose(pre.pop(win, ss[0]), ref, atol=1e-13)


def _slide(steps, n=16, L=15, dt=0.002, seed=2):
    """Slide a float32 window of ``L`` over ``steps`` samples; its error against the window
    built afresh in float64 from its last ``L`` samples: (dv, dp) maxima."""
    rng = np.random.default_rng(seed)
    f32 = np.float32
    buf, win = [], pre.empty(np.zeros((n, 3), f32))
    for _ in range(steps):
        g = rng.normal(0, 2.0, (n, 3))
        a = rng.normal(0, 4.0, (n, 3)) + np.array([0.0, 0.0, 9.81])
        new = pre.sample(f32(g), f32(a), np.full((n, 1), f32(dt)))
        if len(buf) == L:
            win = pre.pop(win, buf.pop(0))
        win = pre.push(win, new)
        buf.append(new)
    assert win.dtype == np.float32
    ref = pre.empty(np.zeros((n, 3)))
    for s in buf:
        ref = pre.push(ref, s.astype(np.float64))
    err = np.abs(win.astype(np.float64) - ref)
    dq = win[:, 0:4].astype(np.float64)
    norm = np.linalg.norm(dq, axis=-1)  # not renormalised by a slide (every use divides by it)
    assert np.max(np.abs(norm - 1)) < 1e-4
    assert np.min(np.abs(np.sum(dq / norm[:, None] * ref[:, 0:4], -1))) > 1 - 1e-6
    return err[:, 4:7].max(), err[:, 7:10].max()


def test_sliding_window_in_float32_drifts_which_is_why_it_is_rebuilt():
    """Over 120 slides (the estimator's rebuild period at L = 15) float32 rounding stays at
    the 1e-6 level; over thousands the dp error grows faster than the slides (an error in dv is
    integrated), the reason for the rebuild."""
    dv, dp = _slide(120)
    assert dv < 2e-6 and dp < 1e-7
    _, dp_long = _slide(4000)
    assert dp_long > 10 * dp


def test_estimator_carry_equals_the_repropagation():
    """The EKF's estimate carried to now equals the strapdown through its buffered samples to
    rounding after many steps (slides and rebuilds), the bias estimates being unchanged (with
    fusion the window holds each sample's bias of its own time: the module docstring)."""
    from quadsim.engines.state import State
    from quadsim.loop.brain import Sensors, loop_periods
    from quadsim.loop.estimation.estimators import EkfEstimator
    from quadsim.physics import sensors

    imu = sensors.load_imu("bmi088")
    mocap = sensors.MocapParams(pos_std=1e-3, att_std=math.radians(0.5), latency=0.03, rate=100)
    dt = 0.002
    est = EkfEstimator(imu, mocap, G, dt, loop_periods(dt, None, Sensors(imu, mocap)), nees=False,
                       init_error=False)  # fmt: skip
    n = 4
    rng = np.random.default_rng(5)
    q = rotation.normalize(rng.normal(0, 1, (n, 4)))
    slot = est.init(n, np.zeros((n, 3)), np.zeros((n, 3)), q)
    truth = State(np.zeros((n, 3)), q, np.zeros((n, 3)), np.zeros((n, 3)), None)
    for k in range(300):  # past two rebuilds (every 8 L = 120 steps)
        r = {"gyro": rng.normal(0, 1, (n, 3)),
             "accel": rng.normal(0, 3, (n, 3)) + np.array([0.0, 0.0, 9.8]),
             "imu_fresh": np.ones(n, bool), "mocap_pos": np.zeros((n, 3)), "mocap_quat": q,
             "mocap_fresh": np.zeros(n, bool)}  # no fusion: the bias estimates stay  # fmt: skip
        out, slot = est(k, truth, r, slot)
    f = slot.filt
    p, v, qq = f.pos, f.vel, f.quat
    for i in range(est.L):
        u = slot.imu_buf[:, i]
        p, v, qq, _ = eskf.strapdown(p, v, qq, u[:, 0:3] - f.gyro_bias, u[:, 3:6] - f.accel_bias,
                                     G, dt)  # fmt: skip
    np.testing.assert_allclose(out.pos, p, atol=1e-10)
    np.testing.assert_allclose(out.vel, v, atol=1e-10)
    np.testing.assert_allclose(np.abs(np.sum(out.quat * qq, -1)), 1.0, atol=1e-12)
