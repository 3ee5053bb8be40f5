"""quadsim.physics.sensors: IMU statistics at rest, specific force, bias random walk (variance
K² t and Allan slopes ∓1/2), the Allan-deviation helper, mocap latency and noise, presets and
unit conversion, explicit randomness (bitwise reproducible), backends, JAX jit, and errors.

Statistical bounds are 5 standard deviations of the estimator (a false alarm about once in
1.7 million per check); with the fixed seeds the margins are printed in the assertion messages.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from quadsim import load_params
from quadsim.physics import rotation
from quadsim.physics import sensors as S  # noqa: N812

G = np.array([0.0, 0.0, -9.81])
DT = 0.01
TILT = rotation.from_euler(np.array([0.4, -0.7, 2.0]))  # roll, pitch, yaw [rad]
IDENT = np.array([0.0, 0.0, 0.0, 1.0])

# White noise, constant biases and scales; no walk (so the mean is exactly the constant bias).
P_WHITE = S.check_imu_params(
    S.ImuParams(
        gyro_noise_density=[0.01, 0.02, 0.03],
        gyro_bias_walk=0.0,
        accel_noise_density=0.05,
        accel_bias_walk=0.0,
        rate=1.0 / DT,
        gyro_bias=[0.1, -0.2, 0.3],
        accel_bias=[0.05, 0.0, -0.1],
        gyro_scale=[1.01, 0.98, 1.0],
        accel_scale=[0.97, 1.0, 1.03],
    )
)


def zeros_state(batch: tuple[int, ...] = ()) -> S.ImuState:
    return S.imu_init(P_WHITE, batch)


def specific_force(quat: np.ndarray, acc: np.ndarray) -> np.ndarray:
    return rotation.to_matrix(quat).T @ (acc - G)


# ------------------------------------------------------------------------------ IMU model


@pytest.mark.parametrize("quat", [IDENT, TILT], ids=["level", "tilted"])
def test_rest_mean_and_std(quat: np.ndarray) -> None:
    n = 40_000  # iid samples (one sample of n drones)
    rng = np.random.default_rng(1)
    q = np.broadcast_to(quat, (n, 4))
    zero = np.zeros((n, 3))
    r, _ = S.imu_measure(q, zero, zero, G, P_WHITE, zeros_state((n,)), DT, rng)
    sd = S.imu_discrete_std(P_WHITE, DT)
    f_true = P_WHITE.accel_scale * specific_force(quat, np.zeros(3)) + P_WHITE.accel_bias
    for x, mean, std in ((r.gyro, P_WHITE.gyro_bias, sd["gyro"]), (r.accel, f_true, sd["accel"])):
        # Mean: 5 σ_d/√n.  Variance ratio s²/σ²: std √(2/(n-1)) (chi-square, n - 1 dof).
        err = np.abs(x.mean(axis=0) - mean) / (std / math.sqrt(n))
        assert np.all(err < 5.0), err
        ratio = x.var(axis=0, ddof=1) / std**2
        assert np.all(np.abs(ratio - 1.0) < 5.0 * math.sqrt(2.0 / (n - 1))), ratio
    # The discretisation: σ_d = N/√dt.
    np.testing.assert_allclose(sd["gyro"], np.array([0.01, 0.02, 0.03]) / math.sqrt(DT))
    # At rest and level the accelerometer reads +g up (scale 1.03, bias -0.1 on z).
    if quat is IDENT:
        np.testing.assert_allclose(f_true, [0.05, 0.0, 1.03 * 9.81 - 0.1])


def test_noiseless_model_is_exact() -> None:
    """z = 0: gyro = s ω + b0 + b, accel = s Rᵀ(a - g) + b0 + b (specific force)."""
    rng = np.random.default_rng(2)
    q = rotation.normalize(rng.standard_normal((50, 4)))
    w, a = rng.standard_normal((50, 3)), 5.0 * rng.standard_normal((50, 3))
    st = S.ImuState(rng.standard_normal((50, 3)), rng.standard_normal((50, 3)))
    r, st2 = S.imu_measure(q, w, a, G, P_WHITE, st, DT, np.zeros((50, 12)))
    f = np.einsum("nji,nj->ni", rotation.to_matrix(q), a - G)
    np.testing.assert_allclose(r.gyro, P_WHITE.gyro_scale * w + P_WHITE.gyro_bias + st[0])
    np.testing.assert_allclose(r.accel, P_WHITE.accel_scale * f + P_WHITE.accel_bias + st[1])
    assert st2[0] is not st[0] and np.array_equal(st2[0], st[0])  # no walk: bias unchanged

    ideal = S.ImuParams(0.0, 0.0, 0.0, 0.0, 100.0)
    z, s0 = np.zeros(12), S.imu_init(ideal)
    level = S.imu_measure(IDENT, np.zeros(3), np.zeros(3), G, ideal, s0, None, z)[0]
    np.testing.assert_array_equal(level.accel, [0.0, 0.0, 9.81])  # +9.81 up at rest
    climb = S.imu_measure(IDENT, np.zeros(3), np.array([0, 0, 2.0]), G, ideal, s0, None, z)[0]
    np.testing.assert_allclose(climb.accel, [0.0, 0.0, 11.81])  # accelerating up reads more
    fall = S.imu_measure(TILT, np.zeros(3), G, G, ideal, s0, None, z)[0]
    np.testing.assert_allclose(fall.accel, np.zeros(3), atol=1e-15)  # free fall reads 0
    # Rolled +90° about x: body y (left) points up, so the +g reading moves to the y axis.
    roll = rotation.from_euler(np.array([math.pi / 2, 0.0, 0.0]))
    side = S.imu_measure(roll, np.zeros(3), np.zeros(3), G, ideal, s0, None, z)[0]
    np.testing.assert_allclose(side.accel, [0.0, 9.81, 0.0], atol=1e-14)

    # Sample k reads b_k; the returned state is b_{k+1} = b_k + K √dt w_k.
    walk = S.ImuParams(0.0, [0.1, 0.2, 0.3], 0.0, 0.4, rate=1.0 / DT)
    zw = np.concatenate([np.zeros(6), [1.0, -2.0, 0.5, 1.0, 1.0, -1.0]])
    s1 = S.ImuState(np.array([1.0, 2.0, 3.0]), np.zeros(3))
    r1, s2 = S.imu_measure(IDENT, np.zeros(3), np.zeros(3), G, walk, s1, DT, zw)
    np.testing.assert_array_equal(r1.gyro, s1.gyro_bias)
    np.testing.assert_allclose(s2.gyro_bias, s1.gyro_bias + np.array([0.01, -0.04, 0.015]))
    np.testing.assert_allclose(s2.accel_bias, [0.04, 0.04, -0.04], rtol=1e-15)


def test_bias_walk_variance_grows_linearly() -> None:
    """b(t) = K W(t): over 2000 drones × 3 axes var(b(t)) = K² t at every t (√t growth)."""
    K, n, steps = np.array([0.1, 0.2, 0.05]), 2000, 400
    p = S.check_imu_params(S.ImuParams(0.0, K, 0.0, 2.0 * K, rate=1.0 / DT))
    rng = np.random.default_rng(3)
    st = S.imu_init(p, (n,))
    q, zero = np.broadcast_to(IDENT, (n, 4)), np.zeros((n, 3))
    checks = {50: None, 100: None, 200: None, 400: None}
    for k in range(1, steps + 1):
        _, st = S.imu_measure(q, zero, zero, G, p, st, None, rng)
        if k in checks:
            checks[k] = st
    tol = 5.0 * math.sqrt(2.0 / n)  # relative std of a variance estimate from n samples
    for k, st_k in checks.items():
        t = k * DT
        for b, kk in ((st_k.gyro_bias, K), (st_k.accel_bias, 2.0 * K)):
            ratio = np.mean(b**2, axis=0) / (kk**2 * t)  # the mean is 0 (b(0) = 0)
            assert np.all(np.abs(ratio - 1.0) < tol), (t, ratio, tol)
            assert np.all(np.abs(b.mean(axis=0)) < 5.0 * kk * math.sqrt(t / n))


# ------------------------------------------------------------------------------ Allan deviation


def test_allan_helper_matches_brute_force_and_white_noise() -> None:
    rng = np.random.default_rng(4)
    x = rng.standard_normal((101, 2))
    taus, adev = S.allan_deviation(x, 0.5, [0.5, 1.0, 2.4, 25.0])
    np.testing.assert_allclose(taus, [0.5, 1.0, 2.5, 25.0])
    for tau, a in zip(taus, adev, strict=True):
        m = round(tau / 0.5)
        means = np.array([x[j : j + m].mean(axis=0) for j in range(101 - m + 1)])
        d = means[m:] - means[:-m]  # overlapping differences of adjacent m-sample means
        np.testing.assert_allclose(a, np.sqrt(0.5 * np.mean(d**2, axis=0)), rtol=1e-12)

    # White noise of density N sampled at dt: σ(τ) = N/√τ (exact in expectation).
    N, dt, n = 0.02, 0.01, 2**16
    x = N / math.sqrt(dt) * rng.standard_normal((n, 16))
    taus, adev = S.allan_deviation(x, dt, [0.01, 0.1, 1.0, 10.0])
    avar = np.mean(adev**2, axis=1)
    # Relative std of the overlapping estimate ≈ √(2m/(n 16)) per channel-average at m ≤ n/10
    # (generous: the overlapping estimator is better); m = 1000 -> 0.012; bound 6 %.
    np.testing.assert_allclose(np.sqrt(avar), N / np.sqrt(taus), rtol=0.06)


@pytest.fixture(scope="module")
def gyro_record() -> np.ndarray:
    """A gyro at rest: white N = 0.01 rad/s/√Hz and walk K with crossover τ* = √3 N/K = 0.2 s.

    256 drones × 3 axes × 4096 samples at dt = 0.01 s (T = 41 s = 205 τ*).
    """
    N, tau_star = 0.01, 0.2
    p = S.check_imu_params(S.ImuParams(N, math.sqrt(3.0) * N / tau_star, 0.0, 0.0, 1.0 / DT))
    rng = np.random.default_rng(5)
    n = 256
    st = S.imu_init(p, (n,))
    q, zero = np.broadcast_to(IDENT, (n, 4)), np.zeros((n, 3))
    out = np.empty((4096, n, 3))
    for k in range(out.shape[0]):
        r, st = S.imu_measure(q, zero, zero, G, p, st, None, rng)
        out[k] = r.gyro
    return out.reshape(4096, -1)


def test_allan_slopes_of_white_noise_and_bias_walk(gyro_record: np.ndarray) -> None:
    """log-log slope -1/2 for τ << τ* (white noise), +1/2 for τ >> τ* (bias random walk).

    Model: σ²(τ) = N²/τ + K² τ/3, local slope -1/2 + u/(1 + u), u = (τ/τ*)². Short fit
    τ/τ* ∈ [0.05, 0.2]: model slope ≈ -0.487; long fit τ/τ* ∈ [5, 20]: ≈ +0.49. Averaging
    the Allan variance over 768 channels makes the statistical slope error ~0.005 (seeds 0-5:
    fitted slopes within 0.02 of ∓1/2, levels within 1.6 % of the model), so the ±0.1 slope and
    6 % level tolerances are wide margins; a wrong discretisation (N instead of N/√dt, or K dt
    instead of K √dt) moves the levels by a factor 10 and fails the level check.
    """
    N, tau_star = 0.01, 0.2
    K = math.sqrt(3.0) * N / tau_star
    short, long_ = [0.01, 0.02, 0.03, 0.04], [1.0, 1.6, 2.5, 4.0]
    for taus, want in ((short, -0.5), (long_, 0.5)):
        t, adev = S.allan_deviation(gyro_record, DT, taus)
        sigma = np.sqrt(np.mean(adev**2, axis=1))
        slope = np.polyfit(np.log(t), np.log(sigma), 1)[0]
        assert abs(slope - want) < 0.1, (want, slope)
        m = np.rint(t / DT)
        model = np.sqrt(N**2 / t + K**2 * DT * (2 * m**2 + 1) / (6 * m))  # discrete walk
        np.testing.assert_allclose(sigma, model, rtol=0.06)


# ------------------------------------------------------------------------------ init, presets


def test_turn_on_bias_std() -> None:
    p = S.ImuParams(0.0, 0.0, 0.0, 0.0, 100.0, gyro_bias_std=0.01, accel_bias_std=[0.1, 0.2, 0.3])
    n = 20_000
    st = S.imu_init(p, n, np.random.default_rng(6))
    tol = 5.0 * math.sqrt(2.0 / n)
    np.testing.assert_array_less(np.abs(st.gyro_bias.std(axis=0) / 0.01 - 1.0), tol)
    np.testing.assert_array_less(np.abs(st.accel_bias.std(axis=0) / [0.1, 0.2, 0.3] - 1.0), tol)
    with pytest.raises(ValueError, match="noise is required"):
        S.imu_init(p, n)


def test_presets_and_unit_conversion(tmp_path) -> None:
    assert S.list_imu_presets() == ["adis16470", "bmi088"]
    d2r = math.pi / 180.0
    adis = S.load_imu("adis16470")
    np.testing.assert_allclose(adis.gyro_noise_density, 0.008 * d2r)
    np.testing.assert_allclose(adis.accel_noise_density, 23e-6 * 9.80665)
    assert adis.rate == 2000.0 and adis.name == "adis16470"
    # The derived walk reproduces the data sheet bias stability as the Allan minimum.
    for s, B in (("gyro", 8.0 * d2r / 3600.0), ("accel", 13e-6 * 9.80665)):
        Nd, K = getattr(adis, f"{s}_noise_density"), getattr(adis, f"{s}_bias_walk")
        taus = math.sqrt(3.0) * Nd[0] / K[0] * np.array([0.5, 1.0, 2.0])
        model = np.sqrt(Nd[0] ** 2 / taus + K[0] ** 2 * taus / 3.0)
        np.testing.assert_allclose(model[1], B, rtol=1e-12)
        assert model[0] > model[1] < model[2]
    bmi = S.load_imu("bmi088")
    np.testing.assert_allclose(bmi.gyro_noise_density, 0.014 * d2r)
    np.testing.assert_allclose(bmi.accel_noise_density, 175e-6 * 9.80665)
    assert bmi.rate == 1000.0

    # Alternative units (symbols, ARW, RRW) and a bare value in the canonical unit.
    f = tmp_path / "my_imu.toml"
    f.write_text(
        "rate = 400\n"
        'gyro_noise_density = { value = 0.3, unit = "°/√hr" }\n'
        'gyro_bias_walk = { value = 36.0, unit = "deg/hr/sqrt(hr)" }\n'
        'gyro_bias = { value = [0.1, 0.2, 0.3], unit = "°/s" }\n'
        'accel_noise_density = { value = 0.06, unit = "m/s/√hr" }\n'
        "accel_bias_walk = 0.001\n"
        'accel_bias = { value = 2.0, unit = "mg" }\n'
        "accel_scale = [1.0, 1.01, 0.99]\n",
        encoding="utf-8",
    )
    p = S.load_imu(f)
    assert p.name == "my_imu" and p.rate == 400.0
    np.testing.assert_allclose(p.gyro_noise_density, 0.3 / 60.0 * d2r)
    np.testing.assert_allclose(p.gyro_bias_walk, 36.0 * d2r / 3600.0 / 60.0)
    np.testing.assert_allclose(p.gyro_bias, np.array([0.1, 0.2, 0.3]) * d2r)
    np.testing.assert_allclose(p.accel_noise_density, 0.001)
    np.testing.assert_allclose(p.accel_bias_walk, 0.001)
    np.testing.assert_allclose(p.accel_bias, 2e-3 * 9.80665)
    np.testing.assert_array_equal(p.accel_scale, [1.0, 1.01, 0.99])
    assert not p.gyro_bias.flags.writeable


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("gyro_noise_density = 0.01\naccel_noise_density = 0.01\n", "'rate'.*missing"),
        (
            'rate = 100\ngyro_noise_density = { value = 1, unit = "furlong" }\n'
            "accel_noise_density = 0.01\n",
            "'gyro_noise_density'.*unit",
        ),
        (
            "rate = 100\ngyro_noise_density = -0.01\naccel_noise_density = 0.01\n",
            "'gyro_noise_density'.*>= 0",
        ),
        (
            "rate = 100\ngyro_noise_density = 0.01\naccel_noise_density = 0.01\n"
            "gyro_bias_walk = 1e-5\ngyro_bias_instability = 1e-4\n",
            "'gyro_bias_walk'.*at most one",
        ),
        (
            "rate = 100\ngyro_noise_density = 0\naccel_noise_density = 0.01\n"
            "gyro_bias_instability = 1e-4\n",
            "'gyro_bias_instability'.*noise_density",
        ),
        (
            "rate = 100\ngyro_noise_density = [0.01, 0.02]\naccel_noise_density = 0.01\n",
            "'gyro_noise_density'.*shape",
        ),
        (
            "rate = 100\ngyro_noise_density = 0.01\naccel_noise_density = 0.01\nmagnet = 1\n",
            "'magnet'.*unknown key",
        ),
        ("rate = -5\ngyro_noise_density = 0.01\naccel_noise_density = 0.01\n", "'rate'"),
    ],
)
def test_load_imu_errors(tmp_path, text: str, match: str) -> None:
    f = tmp_path / "bad.toml"
    f.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=match):
        S.load_imu(f)


def test_unknown_preset() -> None:
    with pytest.raises(ValueError, match="adis16470"):
        S.load_imu("mpu6000")


# ------------------------------------------------------------------------------ mocap


def test_mocap_latency_is_exact() -> None:
    mp = S.MocapParams(pos_std=0.0, att_std=0.0, latency=0.03, rate=100.0)  # k = 3
    assert S.mocap_delay_steps(mp) == 3
    pose = lambda i: (  # noqa: E731
        np.array([[i, 2.0 * i, -i], [0.0, i, 0.0]]),
        rotation.exp(np.array([[0.1 * i, 0.0, 0.05], [0.0, -0.02 * i, 0.0]])),
    )
    st = S.mocap_init(*pose(0), mp)
    for i in range(10):
        r, st = S.mocap_measure(*pose(i), mp, st, np.zeros((2, 6)))
        want = pose(max(i - 3, 0))  # the initial fill for the first 3 samples
        np.testing.assert_array_equal(r.pos, want[0])
        np.testing.assert_allclose(r.quat, want[1], atol=1e-15)
        np.testing.assert_array_equal(r.valid, np.full(2, i >= 3))
    # Zero latency: the current pose.
    m0 = mp._replace(latency=0.0)
    r, _ = S.mocap_measure(*pose(7), m0, S.mocap_init(*pose(0), m0), np.zeros((2, 6)))
    np.testing.assert_array_equal(r.pos, pose(7)[0])
    assert r.valid.all()


def test_mocap_noise_std() -> None:
    n = 40_000
    mp = S.MocapParams(pos_std=[0.001, 0.002, 0.003], att_std=0.01, latency=0.0, rate=200.0)
    q = np.broadcast_to(TILT, (n, 4))
    p = np.broadcast_to([1.0, 2.0, 3.0], (n, 3))
    r, _ = S.mocap_measure(p, q, mp, S.mocap_init(p, q, mp), np.random.default_rng(7))
    tol = 5.0 * math.sqrt(2.0 / n)
    dp = r.pos - p
    np.testing.assert_array_less(np.abs(dp.std(axis=0) / [0.001, 0.002, 0.003] - 1.0), tol)
    dtheta = rotation.log(rotation.multiply(rotation.conjugate(q), r.quat))  # body frame
    np.testing.assert_array_less(np.abs(dtheta.std(axis=0) / 0.01 - 1.0), tol)
    np.testing.assert_array_less(np.abs(dtheta.mean(axis=0)) / (0.01 / math.sqrt(n)), 5.0)
    # Given z, the body-frame rotation vector is exactly att_std z.
    z = np.random.default_rng(8).standard_normal((5, 6))
    r, _ = S.mocap_measure(p[:5], q[:5], mp, S.mocap_init(p[:5], q[:5], mp), z)
    dtheta = rotation.log(rotation.multiply(rotation.conjugate(q[:5]), r.quat))
    np.testing.assert_allclose(dtheta, 0.01 * z[:, 3:], atol=1e-15)
    np.testing.assert_allclose(r.pos - p[:5], [0.001, 0.002, 0.003] * z[:, :3], atol=1e-15)


# ------------------------------------------------------------------------------ randomness


def _run(noise_factory, steps: int = 30) -> list[np.ndarray]:
    p = S.load_imu("bmi088")
    mp = S.MocapParams(0.001, 0.01, 0.02, 100.0)
    noise = noise_factory()
    st = S.imu_init(p, (4,))
    q, zero = np.broadcast_to(TILT, (4, 4)), np.zeros((4, 3))
    ms = S.mocap_init(zero, q, mp)
    out = []
    for _ in range(steps):
        r, st = S.imu_measure(q, zero, zero, G, p, st, None, noise)
        m, ms = S.mocap_measure(zero, q, mp, ms, noise)
        out += [r.gyro, r.accel, m.pos, m.quat]
    return out


def test_same_seed_bitwise_same() -> None:
    a = _run(lambda: np.random.default_rng(42))
    b = _run(lambda: np.random.default_rng(42))
    c = _run(lambda: np.random.default_rng(43))
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not np.array_equal(a[0], c[0])


def test_float32_preserved() -> None:
    p = S.load_imu("adis16470")
    st = S.imu_init(p, (3,), dtype=np.float32)
    q = np.broadcast_to(TILT, (3, 4)).astype(np.float32)
    zero = np.zeros((3, 3), np.float32)
    r, st2 = S.imu_measure(q, zero, zero, G, p, st, None, np.random.default_rng(0))
    assert r.gyro.dtype == r.accel.dtype == st2.gyro_bias.dtype == np.float32
    mp = S.MocapParams(0.001, 0.01, 0.01, 100.0)
    m, _ = S.mocap_measure(zero, q, mp, S.mocap_init(zero, q, mp), np.random.default_rng(0))
    assert m.pos.dtype == m.quat.dtype == np.float32


def test_backends_agree_with_numpy(xp) -> None:
    """Given the same z, every backend and dtype reproduces the NumPy readings.

    JAX runs under ``jax.jit`` here (one compilation instead of one per eager operation).
    """
    rng = np.random.default_rng(9)
    q = rotation.normalize(rng.standard_normal((6, 4)))
    w, a = rng.standard_normal((6, 3)), rng.standard_normal((6, 3))
    z, zm = rng.standard_normal((6, 12)), rng.standard_normal((6, 6))
    p = S.load_imu("bmi088")._replace(gyro_bias=0.01, accel_scale=1.02)
    mp = S.MocapParams(0.001, 0.02, 0.02, 100.0)

    def imu(q, w, a, st, z):
        return S.imu_measure(q, w, a, G, p, st, None, z)

    def mocap(pos, q, st, z):
        return S.mocap_measure(pos, q, mp, st, z)

    ref, ref_st = imu(q, w, a, S.imu_init(p, (6,)), z)
    if xp.name.startswith("jax"):
        import jax

        imu, mocap = jax.jit(imu), jax.jit(mocap)
    st = S.imu_init(p, (6,), xp=xp.xp, dtype=xp.dtype)
    got, got_st = imu(*map(xp.asarray, (q, w, a)), st, xp.asarray(z))
    for r_, g_ in ((ref.gyro, got.gyro), (ref.accel, got.accel), (ref_st[0], got_st[0])):
        assert g_.dtype == xp.dtype
        np.testing.assert_allclose(xp.numpy(g_), r_, rtol=xp.rtol, atol=10 * xp.rtol)
    ms_ref = S.mocap_init(a, q, mp)
    ms = S.mocap_init(xp.asarray(a), xp.asarray(q), mp)
    for _ in range(3):
        mr, ms_ref = S.mocap_measure(w, q, mp, ms_ref, zm)
        mg, ms = mocap(xp.asarray(w), xp.asarray(q), ms, xp.asarray(zm))
        assert mg.pos.dtype == mg.quat.dtype == xp.dtype
        np.testing.assert_allclose(xp.numpy(mg.pos), mr.pos, rtol=xp.rtol, atol=xp.rtol)
        np.testing.assert_allclose(xp.numpy(mg.quat), mr.quat, rtol=xp.rtol, atol=10 * xp.rtol)
        assert np.array_equal(np.asarray(xp.numpy(mg.valid)), mr.valid)


def test_jax_jit_same_numbers_and_key_statistics() -> None:
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    p = S.load_imu("adis16470")
    rng = np.random.default_rng(10)
    q = rotation.normalize(rng.standard_normal((8, 4)))
    w, a, z = rng.standard_normal((8, 3)), rng.standard_normal((8, 3)), rng.standard_normal((8, 12))
    st = S.ImuState(rng.standard_normal((8, 3)), rng.standard_normal((8, 3)))

    @jax.jit
    def step(q, w, a, bg, ba, noise):
        r, s = S.imu_measure(q, w, a, G, p, S.ImuState(bg, ba), None, noise)
        return r, s

    ref, ref_st = S.imu_measure(q, w, a, G, p, st, None, z)
    got, got_st = step(*map(jnp.asarray, (q, w, a, st[0], st[1], z)))
    np.testing.assert_allclose(np.asarray(got.accel), ref.accel, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(np.asarray(got.gyro), ref.gyro, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(np.asarray(got_st[0]), ref_st[0], rtol=1e-13, atol=1e-13)

    # A JAX key inside jit: same key -> same numbers; statistics as configured.
    n = 20_000
    qn, zero = jnp.broadcast_to(jnp.asarray(IDENT), (n, 4)), jnp.zeros((n, 3))
    s0 = S.imu_init(p, (n,), xp=jnp)
    key = jax.random.key(11)
    r1, _ = step(qn, zero, zero, s0[0], s0[1], key)
    r2, _ = step(qn, zero, zero, s0[0], s0[1], key)
    assert np.array_equal(np.asarray(r1.gyro), np.asarray(r2.gyro))
    sd = S.imu_discrete_std(p)["gyro"]
    ratio = np.asarray(r1.gyro).var(axis=0, ddof=1) / sd**2
    assert np.all(np.abs(ratio - 1.0) < 5.0 * math.sqrt(2.0 / (n - 1))), ratio


def test_with_drone_params_gravity() -> None:
    """gravity_vec comes straight from a drone's Params (read-only float64)."""
    drone = load_params("skydio2_x")  # g = 10 (seed 002)
    ideal = S.ImuParams(0.0, 0.0, 0.0, 0.0, 100.0)
    r, _ = S.imu_measure(
        IDENT,
        np.zeros(3),
        np.zeros(3),
        drone.gravity_vec,
        ideal,
        S.imu_init(ideal),
        None,
        np.zeros(12),
    )
    np.testing.assert_array_equal(r.accel, [0.0, 0.0, 10.0])


# ------------------------------------------------------------------------------ errors


def test_bad_inputs_name_the_argument() -> None:
    p, s0, z = P_WHITE, zeros_state(), np.zeros(12)
    zero = np.zeros(3)
    with pytest.raises(ValueError, match=r"gyro_noise_density.*>= 0"):
        S.imu_measure(IDENT, zero, zero, G, p._replace(gyro_noise_density=-1.0), s0, DT, z)
    with pytest.raises(ValueError, match=r"accel_bias_walk.*>= 0"):
        S.check_imu_params(p._replace(accel_bias_walk=[0.0, -1e-3, 0.0]))
    with pytest.raises(ValueError, match=r"gyro_scale.*shape"):
        S.check_imu_params(p._replace(gyro_scale=[1.0, 1.0]))
    with pytest.raises(ValueError, match="rate"):
        S.check_imu_params(p._replace(rate=0.0))
    with pytest.raises(ValueError, match="quat"):
        S.imu_measure(IDENT[:3], zero, zero, G, p, s0, DT, z)
    with pytest.raises(ValueError, match="ang_vel"):
        S.imu_measure(IDENT, np.zeros(4), zero, G, p, s0, DT, z)
    with pytest.raises(ValueError, match="gravity_vec"):
        S.imu_measure(IDENT, zero, zero, G[:2], p, s0, DT, z)
    with pytest.raises(ValueError, match="noise"):
        S.imu_measure(IDENT, zero, zero, G, p, s0, DT, np.zeros(6))
    with pytest.raises(ValueError, match="noise is required"):
        S.imu_measure(IDENT, zero, zero, G, p, s0, DT, None)
    with pytest.raises(ValueError, match="dt"):
        S.imu_measure(IDENT, zero, zero, G, p, s0, -0.01, z)
    with pytest.raises(ValueError, match=r"imu_state.gyro_bias"):
        S.imu_measure(IDENT, zero, zero, G, p, S.ImuState(np.zeros(2), zero), DT, z)
    with pytest.raises(TypeError, match="Generator"):
        S.imu_measure(IDENT, zero, zero, G, p, s0, DT, 42)

    mp = S.MocapParams(0.001, 0.01, 0.025, 100.0)
    with pytest.raises(ValueError, match=r"latency.*integer multiple"):
        S.mocap_init(zero, IDENT, mp)
    with pytest.raises(ValueError, match="latency"):
        S.mocap_init(zero, IDENT, mp._replace(latency=-0.01))
    with pytest.raises(ValueError, match=r"pos_std.*>= 0"):
        S.mocap_init(zero, IDENT, mp._replace(pos_std=-1.0, latency=0.02))
    mp = mp._replace(latency=0.02)
    st = S.mocap_init(np.zeros((2, 3)), np.broadcast_to(IDENT, (2, 4)), mp)
    with pytest.raises(ValueError, match="mocap_state"):
        S.mocap_measure(zero, IDENT, mp, st, np.zeros(6))
    with pytest.raises(ValueError, match="taus"):
        S.allan_deviation(np.zeros(10), 0.1, [0.01])
    with pytest.raises(ValueError, match="taus"):
        S.allan_deviation(np.zeros(10), 0.1, [0.6])


# ------------------------------------------------------------------------------ docs


def test_docs_example_runs_and_table_matches_presets() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "sensors.md").read_text("utf-8")
    for block in re.findall(r"^```python\n(.*?)^```$", text, flags=re.S | re.M):
        exec(compile(block, "docs/sensors.md", "exec"), {})
    for name in S.list_imu_presets():
        p = S.load_imu(name)
        for v in (p.gyro_noise_density, p.gyro_bias_walk, p.accel_noise_density, p.accel_bias_walk):
            e = math.floor(math.log10(v[0]))
            shown = f"{v[0] / 10**e:.2f}e{e}"  # the table's 3-digit scientific notation
            assert shown in text, (name, shown)
