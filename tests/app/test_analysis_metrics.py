"""Tests for quadsim.app.analysis (RMSE, NEES, ATE, RTE) against independent oracles.

Oracles: transforms applied by hand (with scipy's Rotation for the quaternions), scipy's Kabsch
solver (``Rotation.align_vectors``), sampling statistics of seeded noise, explicit matrix inverses,
``scipy.stats.chi2`` and Bar-Shalom's published NEES band, and brute-force pair search.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.spatial.transform import Rotation
from scipy.stats import chi2

from quadsim.app import analysis as m


def trajectory(rng: np.random.Generator, T: int = 400) -> np.ndarray:
    """A smooth, non-planar 3-D path [m], shape (T, 3)."""
    s = np.linspace(0.0, 4.0 * np.pi, T)
    base = np.stack([3.0 * np.cos(s), 2.0 * np.sin(1.3 * s), 0.5 * s + np.sin(2.1 * s)], axis=-1)
    return base + 0.01 * rng.normal(size=(T, 3))


def random_quats(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    q = rng.normal(size=(*shape, 4))
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def rz(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def rx(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


def apply(R: np.ndarray, t: np.ndarray, s: float, p: np.ndarray) -> np.ndarray:
    return s * p @ R.T + t


# --------------------------------------------------------------------------- ATE / alignment


def test_ate_se3_recovers_applied_rigid_transform():
    rng = np.random.default_rng(1)
    est = trajectory(rng)
    R = Rotation.from_rotvec([0.4, -1.1, 0.7]).as_matrix()
    t = np.array([1.5, -2.0, 0.3])
    truth = apply(R, t, 1.0, est)
    q_est = random_quats(rng, (len(est),))
    q_true = (Rotation.from_matrix(R) * Rotation.from_quat(q_est)).as_quat()

    res = m.ate(est, truth, "se3", est_quat=q_est, true_quat=-q_true)  # sign free
    assert res.rmse < 1e-9 and res.max < 1e-9 and res.mean < 1e-9 and res.median < 1e-9
    np.testing.assert_allclose(res.R, R, atol=1e-10)
    np.testing.assert_allclose(res.t, t, atol=1e-9)
    assert res.s == 1.0
    assert res.errors.shape == (len(est),)
    assert res.rot is not None and res.rot.max < 1e-6
    assert res.rot_errors.shape == (len(est),)
    # Without alignment the error is the applied displacement.
    raw = m.ate(est, truth, "none")
    np.testing.assert_allclose(raw.errors, np.linalg.norm(truth - est, axis=-1), rtol=1e-12)
    np.testing.assert_array_equal(raw.R, np.eye(3))


def test_ate_sim3_recovers_scale():
    rng = np.random.default_rng(2)
    est = trajectory(rng)
    R = Rotation.from_rotvec([-0.3, 0.2, 2.5]).as_matrix()
    t = np.array([-4.0, 0.5, 1.0])
    truth = apply(R, t, 1.3, est)

    res = m.ate(est, truth, "sim3")
    assert res.rmse < 1e-9
    np.testing.assert_allclose(res.R, R, atol=1e-10)
    np.testing.assert_allclose(res.t, t, atol=1e-9)
    assert res.s == pytest.approx(1.3, rel=1e-12)
    # se3 cannot absorb the scale.
    assert m.ate(est, truth, "se3").rmse > 0.1


def test_posyaw_recovers_yaw_but_not_roll():
    rng = np.random.default_rng(3)
    est = trajectory(rng)
    t = np.array([0.2, 0.3, -0.4])
    truth_yaw = apply(rz(2.2), t, 1.0, est)
    res = m.ate(est, truth_yaw, "posyaw")
    assert res.rmse < 1e-9
    np.testing.assert_allclose(res.R, rz(2.2), atol=1e-12)
    np.testing.assert_allclose(res.t, t, atol=1e-9)

    truth_roll = apply(rx(0.3), t, 1.0, est)
    res_roll = m.ate(est, truth_roll, "posyaw")
    assert res_roll.rmse > 0.1
    np.testing.assert_allclose(res_roll.R[2], [0.0, 0.0, 1.0], atol=1e-15)  # a rotation about z
    assert m.ate(est, truth_roll, "se3").rmse < 1e-9


def test_posyaw_is_the_best_yaw():
    """The closed-form yaw minimises the squared error: a fine grid search finds nothing better."""
    rng = np.random.default_rng(4)
    est = trajectory(rng)
    truth = apply(Rotation.from_rotvec([0.1, -0.05, 0.9]).as_matrix(), [1.0, 2.0, 3.0], 1.0, est)
    truth += 0.05 * rng.normal(size=truth.shape)
    res = m.ate(est, truth, "posyaw")

    def cost(psi: float) -> float:
        a = est @ rz(psi).T
        d = truth - a - (truth - a).mean(axis=0)
        return float(np.mean(np.sum(d * d, axis=-1)))

    grid = np.linspace(-np.pi, np.pi, 20001)
    best = min(cost(p) for p in grid)
    assert res.rmse**2 <= best + 1e-12


def test_se3_matches_kabsch_on_noisy_data_and_fixes_reflection():
    rng = np.random.default_rng(5)
    est = trajectory(rng)
    R = Rotation.from_rotvec([1.0, 0.5, -0.2]).as_matrix()
    truth = apply(R, np.array([0.0, 1.0, 2.0]), 1.0, est) + 0.1 * rng.normal(size=est.shape)
    res = m.ate(est, truth, "se3")
    # Kabsch (scipy) on the centred points: argmin Σ |y_c - R x_c|².
    kabsch, _ = Rotation.align_vectors(truth - truth.mean(0), est - est.mean(0))
    np.testing.assert_allclose(res.R, kabsch.as_matrix(), atol=1e-9)
    np.testing.assert_allclose(res.t, truth.mean(0) - res.R @ est.mean(0), atol=1e-9)

    mirrored = est * np.array([1.0, -1.0, 1.0])  # a reflection, not reachable by a rotation
    R_m, _, _ = m.umeyama(est, mirrored)
    assert np.linalg.det(R_m) == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(R_m @ R_m.T, np.eye(3), atol=1e-12)
    assert m.ate(est, mirrored, "se3").rmse > 0.1


def test_ate_n_align_uses_the_first_samples():
    rng = np.random.default_rng(6)
    est = trajectory(rng)
    R = Rotation.from_rotvec([0.0, 0.3, 0.3]).as_matrix()
    truth = apply(R, np.array([1.0, 0.0, 0.0]), 1.0, est)
    truth[200:] += np.array([0.0, 0.0, 1.0])  # the second half is off by 1 m
    res = m.ate(est, truth, "se3", n_align=200)
    np.testing.assert_allclose(res.R, R, atol=1e-10)
    np.testing.assert_allclose(res.errors[:200], 0.0, atol=1e-9)
    np.testing.assert_allclose(res.errors[200:], 1.0, atol=1e-9)


def test_collinear_alignment_is_rejected():
    line = np.outer(np.linspace(0.0, 1.0, 50), [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="collinear"):
        m.ate(line, line + 1.0, "se3")
    vertical = np.outer(np.linspace(0.0, 1.0, 50), [0.0, 0.0, 1.0])
    with pytest.raises(ValueError, match="posyaw"):
        m.ate(vertical, vertical, "posyaw")


# --------------------------------------------------------------------------- RMSE, attitude


def test_rmse_of_known_noise_matches_sigma():
    rng = np.random.default_rng(7)
    T, sigma_p, sigma_v, sigma_a = 20000, 0.05, 0.2, 0.01
    truth = {
        "pos": trajectory(rng, T),
        "vel": rng.normal(size=(T, 3)),
        "quat": random_quats(rng, (T,)),
    }
    dtheta = sigma_a * rng.normal(size=(T, 3))
    est = {
        "pos": truth["pos"] + sigma_p * rng.normal(size=(T, 3)),
        "vel": truth["vel"] + sigma_v * rng.normal(size=(T, 3)),
        "quat": (Rotation.from_quat(truth["quat"]) * Rotation.from_rotvec(dtheta)).as_quat(),
    }
    r = m.rmse(est, truth)
    # sqrt(mean |e|²) of 3 axes of N(0, σ²): √3 σ, relative sd 1/sqrt(6 T); allow 5 sd.
    tol = 5.0 / math.sqrt(6 * T)
    assert r["pos_rmse_m"] == pytest.approx(math.sqrt(3) * sigma_p, rel=tol)
    assert r["vel_rmse_m_s"] == pytest.approx(math.sqrt(3) * sigma_v, rel=tol)
    assert r["att_rmse_deg"] == pytest.approx(math.degrees(math.sqrt(3) * sigma_a), rel=tol)
    # Exact oracle for the attitude: the angle of the applied perturbation.
    exact = math.degrees(math.sqrt(np.mean(np.sum(dtheta**2, axis=-1))))
    assert r["att_rmse_deg"] == pytest.approx(exact, rel=1e-9)
    assert all(isinstance(v, float) for v in r.values())


def test_rmse_per_drone_and_pooled():
    rng = np.random.default_rng(8)
    T, n = 500, 4
    sig = np.array([0.01, 0.1, 0.5, 1.0])
    truth = rng.normal(size=(T, n, 3))
    est = truth + sig[None, :, None] * rng.normal(size=(T, n, 3))
    per = m.vector_rmse(est, truth, per_drone=True)
    assert per.shape == (n,)
    for k in range(n):
        d = est[:, k] - truth[:, k]
        assert per[k] == pytest.approx(math.sqrt(np.mean(np.sum(d * d, axis=-1))), rel=1e-12)
    pooled = m.vector_rmse(est, truth)
    assert isinstance(pooled, float)
    assert pooled == pytest.approx(math.sqrt(np.mean(per**2)), rel=1e-12)

    q = random_quats(rng, (T, n))
    per_q = m.attitude_rmse_deg(q, q * 2.5, per_drone=True)
    assert per_q.shape == (n,)
    np.testing.assert_allclose(per_q, 0.0, atol=1e-5)


def test_attitude_error_of_a_known_small_rotation():
    rng = np.random.default_rng(9)
    q_est = random_quats(rng, (50,))
    phi = np.array([0.01, -0.02, 0.005])
    q_true = (Rotation.from_quat(q_est) * Rotation.from_rotvec(phi)).as_quat()
    dtheta = m.attitude_error_vector(q_est, q_true)
    np.testing.assert_allclose(dtheta, np.broadcast_to(phi, (50, 3)), atol=1e-12)
    np.testing.assert_allclose(
        m.attitude_angle(q_est, q_true), np.linalg.norm(phi), rtol=1e-9, atol=0
    )
    assert m.attitude_rmse_deg(q_est, q_true) == pytest.approx(
        math.degrees(np.linalg.norm(phi)), rel=1e-9
    )
    # Unnormalised, sign-flipped inputs change nothing.
    np.testing.assert_allclose(
        m.attitude_error_vector(-3.0 * q_est, 0.2 * q_true), dtheta, atol=1e-12
    )


def test_attitude_error_is_local_body_frame():
    q_est = Rotation.from_euler("z", 90, degrees=True).as_quat()
    phi = np.array([0.01, 0.0, 0.0])  # about the body x axis = the world y axis here
    q_true = (Rotation.from_quat(q_est) * Rotation.from_rotvec(phi)).as_quat()
    np.testing.assert_allclose(m.attitude_error_vector(q_est, q_true), phi, atol=1e-14)
    q_true_world = (Rotation.from_rotvec(phi) * Rotation.from_quat(q_est)).as_quat()
    np.testing.assert_allclose(
        m.attitude_error_vector(q_est, q_true_world), [0.0, -0.01, 0.0], atol=1e-14
    )


def test_q_and_minus_q_give_zero_error_and_large_angles_wrap():
    rng = np.random.default_rng(10)
    q = random_quats(rng, (100,))
    np.testing.assert_allclose(m.attitude_angle(q, -q), 0.0, atol=1e-7)
    np.testing.assert_allclose(m.attitude_error_vector(-q, q), 0.0, atol=1e-7)
    assert m.attitude_rmse_deg(q, -q) < 1e-5
    # 179° and 181° about an axis are 179° apart from the identity either way.
    ident = np.tile([0.0, 0.0, 0.0, 1.0], (2, 1))
    q179 = Rotation.from_rotvec(np.radians([[0, 0, 179.0], [0, 0, 181.0]])).as_quat()
    np.testing.assert_allclose(np.degrees(m.attitude_angle(q179, ident)), 179.0, rtol=1e-12)


# --------------------------------------------------------------------------- NEES


def random_spd(rng: np.random.Generator, d: int) -> np.ndarray:
    A = rng.normal(size=(d, d))
    scales = np.diag(10.0 ** rng.uniform(-2, 1, size=d))  # mixed units, like m², rad²
    return scales @ (A @ A.T + 0.5 * np.eye(d)) @ scales


def test_nees_matches_inverse_oracle_and_averages_to_d():
    rng = np.random.default_rng(11)
    d, N = 9, 4000
    P = random_spd(rng, d)
    e = rng.multivariate_normal(np.zeros(d), P, size=N)
    eps = m.nees(e, P[None])
    assert eps.shape == (N,)
    oracle = np.einsum("ki,ij,kj->k", e, np.linalg.inv(P), e)
    np.testing.assert_allclose(eps, oracle, rtol=1e-8)
    # mean of N χ²(d): sd sqrt(2 d / N); allow 4 sd.
    assert abs(eps.mean() - d) < 4.0 * math.sqrt(2.0 * d / N)
    lo, hi = m.nees_band(d, N)
    assert lo < eps.mean() < hi
    # A covariance 10x too small (overconfident filter) fails the test.
    too_small = m.nees(e, P[None] / 10.0)
    assert too_small.mean() > hi
    # Per-sample covariances (T, d, d) and broadcasting give the same numbers.
    np.testing.assert_allclose(m.nees(e, np.broadcast_to(P, (N, d, d))), eps, rtol=1e-12)


def test_nees_diagonal_equals_full_diagonal():
    rng = np.random.default_rng(12)
    var = rng.uniform(0.01, 4.0, size=(30, 5, 6))
    e = rng.normal(size=(30, 5, 6))
    full = np.zeros((30, 5, 6, 6))
    idx = np.arange(6)
    full[..., idx, idx] = var
    np.testing.assert_allclose(m.nees(e, var), m.nees(e, full), rtol=1e-12)
    np.testing.assert_allclose(m.nees(e, var), np.sum(e**2 / var, axis=-1), rtol=1e-14)


def test_nees_band_per_time_step_coverage():
    """Averages over 64 runs of a consistent filter fall in the 95% band ~95% of the time."""
    rng = np.random.default_rng(13)
    d, runs, steps = 3, 64, 2000
    P = random_spd(rng, d)
    L = np.linalg.cholesky(P)
    e = rng.normal(size=(steps, runs, d)) @ L.T
    avg = m.nees(e, P[None, None]).mean(axis=1)
    lo, hi = m.nees_band(d, runs)
    inside = np.mean((avg >= lo) & (avg <= hi))
    assert abs(inside - 0.95) < 4.0 * math.sqrt(0.95 * 0.05 / steps)


def test_nees_band_numbers():
    lo, hi = m.nees_band(3, 64)
    assert lo == pytest.approx(chi2.ppf(0.025, 192) / 64, rel=1e-12)
    assert hi == pytest.approx(chi2.ppf(0.975, 192) / 64, rel=1e-12)
    # Independent check: the Wilson-Hilferty approximation χ²_k(p) ≈ k (1 - 2/9k + z_p √(2/9k))³.
    k, z = 192, 1.959963984540054
    wh = [k * (1 - 2 / (9 * k) + sgn * z * math.sqrt(2 / (9 * k))) ** 3 / 64 for sgn in (-1, 1)]
    assert (lo, hi) == pytest.approx(tuple(wh), rel=1e-3)
    # Bar-Shalom, Li, Kirubarajan (2001), Sec. 5.4: N = 50 runs, d = 2, 95% -> [1.5, 2.6].
    lo, hi = m.nees_band(2, 50)
    assert lo == pytest.approx(1.5, abs=0.05) and hi == pytest.approx(2.6, abs=0.05)
    lo99, hi99 = m.nees_band(2, 50, confidence=0.99)
    assert lo99 < lo and hi99 > hi


def test_nees_rejects_bad_covariances():
    e = np.ones((4, 3))
    with pytest.raises(ValueError, match="positive definite"):
        m.nees(e, np.broadcast_to(np.diag([1.0, -1.0, 1.0]), (4, 3, 3)))
    asym = np.eye(3)
    asym[0, 1] = 0.5
    with pytest.raises(ValueError, match="symmetric"):
        m.nees(e, asym[None])
    with pytest.raises(ValueError, match="positive"):
        m.nees(e, np.zeros((4, 3)))
    with pytest.raises(ValueError, match="cov"):
        m.nees(e, np.eye(4)[None])
    with pytest.raises(ValueError, match="cov"):
        m.nees(e, np.ones((5, 3)))
    with pytest.raises(ValueError, match="dof"):
        m.nees_band(0, 10)
    with pytest.raises(ValueError, match="n_runs"):
        m.nees_band(3, 0)
    with pytest.raises(ValueError, match="confidence"):
        m.nees_band(3, 10, confidence=1.5)


def test_pose_error_stacks_true_minus_estimate():
    rng = np.random.default_rng(14)
    T, n = 20, 3
    truth = {
        "pos": rng.normal(size=(T, n, 3)),
        "vel": rng.normal(size=(T, n, 3)),
        "quat": random_quats(rng, (T, n)),
    }
    phi = 0.1 * rng.normal(size=(T, n, 3))
    q_est = (
        (
            Rotation.from_quat(truth["quat"].reshape(-1, 4))
            * Rotation.from_rotvec(-phi.reshape(-1, 3))
        )
        .as_quat()
        .reshape(T, n, 4)
    )
    est = {"pos": truth["pos"] - 1.0, "vel": truth["vel"] + 2.0, "quat": q_est}
    e = m.pose_error(est, truth)
    assert e.shape == (T, n, 9)
    np.testing.assert_allclose(e[..., :3], 1.0, atol=1e-12)
    np.testing.assert_allclose(e[..., 3:6], -2.0, atol=1e-12)
    np.testing.assert_allclose(e[..., 6:], phi, atol=1e-12)
    assert m.pose_error(est, truth, dof=6).shape == (T, n, 6)
    with pytest.raises(ValueError, match="dof"):
        m.pose_error(est, truth, dof=5)


# --------------------------------------------------------------------------- RTE


def circle(step_rad: float = 0.005, turns: float = 1.5, radius: float = 2.0):
    """Level circle with the nose along the velocity: positions (T, 3), quaternions (T, 4)."""
    a = np.arange(0.0, turns * 2 * np.pi, step_rad)
    p = np.stack([radius * np.cos(a), radius * np.sin(a), np.full_like(a, 1.0)], axis=-1)
    q = Rotation.from_euler("z", (a + np.pi / 2)[:, None]).as_quat()
    s = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(p, axis=0), axis=-1))])
    return p, q, s


def test_rte_constant_drift_per_metre():
    p, q, s = circle()
    k = 0.02  # 2 cm of drift per metre travelled, along a fixed world direction
    direction = np.array([0.6, -0.8, 0.0])
    est = p + k * s[:, None] * direction
    step = float(np.max(np.diff(s)))
    res = m.rte(est, p, q, q, segment_lengths=(1.0, 5.0))
    assert list(res) == [1.0, 5.0]
    for delta, r in res.items():
        assert r.length == delta and r.trans.count == len(r.pairs) > 0
        np.testing.assert_allclose(r.trans_errors, k * r.dist, rtol=1e-9, atol=1e-12)
        assert np.all((r.dist >= delta) & (r.dist < delta + step + 1e-12))
        assert r.trans.mean == pytest.approx(k * delta, abs=k * step + 1e-12)
        assert r.trans.max <= k * (delta + step) + 1e-12
        np.testing.assert_allclose(r.rot_errors, 0.0, atol=1e-6)
    # A rigid transform of the whole estimate changes nothing.
    Rw = Rotation.from_rotvec([0.3, -0.2, 1.0])
    moved = apply(Rw.as_matrix(), np.array([5.0, 6.0, 7.0]), 1.0, est)
    q_moved = (Rw * Rotation.from_quat(q)).as_quat()
    res2 = m.rte(moved, p, q_moved, q, segment_lengths=(1.0, 5.0))
    for delta in res:
        np.testing.assert_allclose(res2[delta].trans_errors, res[delta].trans_errors, atol=1e-9)
        np.testing.assert_allclose(res2[delta].rot_errors, 0.0, atol=1e-6)


def test_rte_heading_drift_per_metre():
    p, q, s = circle()
    c = math.radians(0.5)  # 0.5° of yaw drift per metre
    q_est = (Rotation.from_quat(q) * Rotation.from_rotvec(np.outer(c * s, [0, 0, 1]))).as_quat()
    r = m.rte(p, p, q_est, q, segment_lengths=(2.0,))[2.0]
    np.testing.assert_allclose(r.rot_errors, math.degrees(c) * r.dist, rtol=1e-8)
    assert r.rot.mean == pytest.approx(1.0, abs=0.01)
    # The heading error at the start rotates the estimated displacement: the oracle is the
    # chord |Δp| times 2 sin(θ_i / 2), θ_i = c s_i.
    i, j = r.pairs.T
    expect = np.linalg.norm(p[j] - p[i], axis=-1) * 2 * np.abs(np.sin(c * s[i] / 2))
    np.testing.assert_allclose(r.trans_errors, expect, atol=1e-9)


def test_rte_pairs_are_first_index_reaching_the_length():
    rng = np.random.default_rng(15)
    steps = rng.uniform(0.0, 0.3, size=(80, 1)) * rng.normal(size=(80, 3))
    steps[10:20] = 0.0  # hovering
    p = np.cumsum(steps, axis=0)
    q = random_quats(rng, (80,))
    s = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(p, axis=0), axis=-1))])
    r = m.rte(p, p, q, q, segment_lengths=(1.0,))[1.0]
    expected = []
    for i in range(len(p)):
        for j in range(i + 1, len(p)):
            if s[j] >= s[i] + 1.0:
                expected.append((i, j))
                break
    np.testing.assert_array_equal(r.pairs, np.array(expected))
    np.testing.assert_allclose(r.trans_errors, 0.0, atol=1e-12)
    empty = m.rte(p, p, q, q, segment_lengths=(1e6,))[1e6]
    assert empty.trans.count == 0 and math.isnan(empty.trans.rmse)


# --------------------------------------------------------------------------- summary


def test_estimation_summary_is_json_and_consistent():
    rng = np.random.default_rng(16)
    T, n = 3000, 2
    t = np.arange(T) * 0.01
    sig = np.array([0.05, 0.05, 0.1, 0.2, 0.2, 0.2, 0.01, 0.01, 0.03])
    truth = {
        "pos": rng.normal(size=(T, n, 3)),
        "vel": rng.normal(size=(T, n, 3)),
        "quat": random_quats(rng, (T, n)),
        "ang_vel": rng.normal(size=(T, n, 3)),  # ignored
    }
    e = sig * rng.normal(size=(T, n, 9))  # true minus estimate
    q_est = (
        (
            Rotation.from_quat(truth["quat"].reshape(-1, 4))
            * Rotation.from_rotvec(-e[..., 6:].reshape(-1, 3))
        )
        .as_quat()
        .reshape(T, n, 4)
    )
    est = {"pos": truth["pos"] - e[..., :3], "vel": truth["vel"] - e[..., 3:6], "quat": q_est}
    cov = np.broadcast_to(sig**2, (T, n, 9))

    out = m.estimation_summary(t, est, truth, cov_diag=cov)
    assert set(out) == {"pos_rmse_m", "vel_rmse_m_s", "att_rmse_deg", "nees_mean", "nees_dof"}
    json.dumps(out, allow_nan=False)
    assert all(type(v) is float for k, v in out.items() if k != "nees_dof")
    assert out["nees_dof"] == 9
    assert abs(out["nees_mean"] - 9.0) < 4.0 * math.sqrt(18.0 / (T * n))
    assert out["pos_rmse_m"] == pytest.approx(
        math.sqrt(np.mean(np.sum(e[..., :3] ** 2, axis=-1))), rel=1e-12
    )
    att = math.degrees(math.sqrt(np.mean(np.sum(e[..., 6:] ** 2, axis=-1))))
    assert out["att_rmse_deg"] == pytest.approx(att, rel=1e-9)

    six = m.estimation_summary(t, est, truth, cov_diag=cov[..., :6], dof=6)
    assert six["nees_dof"] == 6 and abs(six["nees_mean"] - 6.0) < 0.3
    late = m.estimation_summary(t, est, truth, t_start=t[T // 2])
    assert late["nees_mean"] is None and late["nees_dof"] is None
    half = {k: v[T // 2 :] for k, v in est.items()}
    assert late["pos_rmse_m"] == pytest.approx(
        m.vector_rmse(half["pos"], truth["pos"][T // 2 :]), rel=1e-12
    )
    pos_only = m.estimation_summary(t, {"pos": est["pos"]}, truth)
    assert pos_only["vel_rmse_m_s"] is None and pos_only["att_rmse_deg"] is None
    json.dumps(pos_only, allow_nan=False)


# --------------------------------------------------------------------------- bad input


def test_bad_input_raises_naming_the_argument():
    rng = np.random.default_rng(17)
    p = trajectory(rng, 50)
    q = random_quats(rng, (50,))
    with pytest.raises(ValueError, match="est_pos and true_pos"):
        m.ate(p, p[:-1])
    bad = p.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="true_pos must be finite"):
        m.ate(p, bad)
    with pytest.raises(ValueError, match="est_pos must be finite"):
        m.rte(bad, p, q, q)
    with pytest.raises(ValueError, match="est_pos must have shape"):
        m.ate(p[:, :2], p[:, :2])
    with pytest.raises(ValueError, match="align"):
        m.ate(p, p, "se2")
    with pytest.raises(ValueError, match="true_quat"):
        m.ate(p, p, est_quat=q)
    with pytest.raises(ValueError, match="est_quat"):
        m.rte(p, p, q[:-1], q[:-1])
    with pytest.raises(ValueError, match="segment_lengths"):
        m.rte(p, p, q, q, segment_lengths=(-1.0,))
    qbad = q.copy()
    qbad[0] = np.nan
    with pytest.raises(ValueError, match="q_true must be finite"):
        m.attitude_angle(q, qbad)
    with pytest.raises(ValueError, match="q_est must have nonzero norm"):
        m.attitude_error_vector(np.zeros_like(q), q)
    with pytest.raises(ValueError, match=r"est\['vel'\] and truth\['vel'\]"):
        m.rmse({"vel": p}, {"vel": p[:-1]})
    with pytest.raises(ValueError, match=r"est\['pos'\] must be finite"):
        m.rmse({"pos": bad}, {"pos": p})
    with pytest.raises(ValueError, match="truth must have 'quat'"):
        m.rmse({"quat": q}, {"pos": p})
    with pytest.raises(ValueError, match="err must be finite"):
        m.nees(bad, np.ones_like(p))
    with pytest.raises(ValueError, match="cov must be finite"):
        m.nees(p, bad)
    t = np.arange(50) * 0.1
    with pytest.raises(ValueError, match=r"est\['pos'\] must have one row per sample of t"):
        m.estimation_summary(t[:-1], {"pos": p}, {"pos": p})
    with pytest.raises(ValueError, match="cov_diag must have shape"):
        m.estimation_summary(t, {"pos": p}, {"pos": p}, cov_diag=np.ones((50, 4)), dof=3)
    with pytest.raises(ValueError, match="t must be nondecreasing"):
        m.estimation_summary(t[::-1], {"pos": p}, {"pos": p})
    with pytest.raises(ValueError, match="t must be finite"):
        m.estimation_summary(np.full(50, np.nan), {"pos": p}, {"pos": p})


def test_ate_from_streamed_moments_equals_ate_of_the_whole_trajectory():
    """The summary's ATE (sums accumulated chunk by chunk, shifted by a reference point) is
    :func:`ate` with SE(3) alignment of the whole trajectory."""
    rng = np.random.default_rng(11)
    t = np.linspace(0.0, 10.0, 700)
    y = np.stack([np.cos(t), np.sin(2 * t), 1.0 + 0.1 * t], -1) + np.array([30.0, -20.0, 5.0])
    R = Rotation.from_rotvec([0.1, -0.2, 0.3]).as_matrix()
    x = y @ R.T + [0.3, -0.1, 0.2] + 0.01 * rng.normal(size=y.shape)
    ref = y[0]
    sums = [0.0, np.zeros(3), np.zeros(3), np.zeros((3, 3)), 0.0, 0.0]
    for chunk in np.array_split(np.arange(len(t)), 7):
        xs, ys = x[chunk] - ref, y[chunk] - ref
        for i, v in enumerate((len(chunk), xs.sum(0), ys.sum(0), ys.T @ xs, (xs**2).sum(),
                               (ys**2).sum())):  # fmt: skip
            sums[i] = sums[i] + v
    got = float(m.ate_from_moments(*sums))
    assert got == pytest.approx(m.ate(x, y, align="se3").rmse, rel=1e-9)
    assert np.isnan(m.ate_from_moments(2, *[np.asarray(s) * 0 for s in sums[1:]]))


def test_the_analysis_has_one_name():
    """It lives in the application layer only: the loop layer's old path does not import."""
    import importlib

    import quadsim.loop.estimation as estimation

    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("quadsim.loop.estimation.metrics")
    assert not hasattr(estimation, "metrics")
    assert m.__name__ == "quadsim.app.analysis" and set(m.__all__) >= {"ate", "rte", "nees"}
