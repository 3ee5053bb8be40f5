"""quadsim.physics.wind: Dryden statistics (variance, autocorrelation), exact discretisation,
MIL-F-8785C low-altitude parameters, explicit randomness, backends and the CasADi kernel."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.linalg

from quadsim.physics import wind
from quadsim.physics._array import CASADI_OPS

# T = L/V = 20 s (u), 10 s (v), 5 s (w): three distinct correlation times.
PARAMS = wind.DrydenParams(
    L_u=200.0, L_v=100.0, L_w=50.0, sigma_u=2.0, sigma_v=1.5, sigma_w=1.0, airspeed=10.0
)
SIGMA = np.array(PARAMS[3:6])
TAU = np.array([PARAMS.L_u, PARAMS.L_v, PARAMS.L_w]) / PARAMS.airspeed
DT = 0.5
N_PROC, N_STEPS = 8192, 3000
LAG_FRACTIONS = (0.5, 1.0, 2.0)  # lags in units of the correlation time L/V


def rho(c: int, lag_s: np.ndarray) -> np.ndarray:
    """Analytic Dryden autocorrelation R(τ)/σ² of component c (0 = u, 1 = v, 2 = w)."""
    x = np.abs(lag_s) / TAU[c]
    return np.exp(-x) if c == 0 else (1.0 - 0.5 * x) * np.exp(-x)


def estimator_std(c: int, lag: int, n: int, n_proc: int) -> float:
    """Exact std of ĉ(ℓ)/σ² = mean over n_proc·m products x_k x_{k+ℓ} / σ², m = n - ℓ.

    Gaussian process, Isserlis: Var = (1/(n_proc m)) Σ_{|d|<m} (1 - |d|/m) [ρ(d)² + ρ(d+ℓ)ρ(d-ℓ)],
    which accounts for the correlation between the time samples of one process.
    """
    m = n - lag
    d = np.arange(-(m - 1), m)
    r = lambda k: rho(c, k * DT)  # noqa: E731
    terms = (1.0 - np.abs(d) / m) * (r(d) ** 2 + r(d + lag) * r(d - lag))
    return math.sqrt(terms.sum() / (n_proc * m))


@pytest.fixture(scope="module")
def simulated() -> dict:
    """8192 independent stationary processes, 3000 steps; running sums of lagged products."""
    disc = wind.dryden_discretize(PARAMS, DT)
    rng = np.random.default_rng(20240611)
    lags = np.rint(np.outer(TAU, LAG_FRACTIONS) / DT).astype(int)  # (3 components, 3 lags)
    size = int(lags.max()) + 1
    hist = np.empty((size, N_PROC, 3))
    sq = np.zeros(3)
    prod = np.zeros(lags.shape)
    state = wind.dryden_init(disc, wind.normal_noise(rng, (N_PROC, 5)))
    g = wind.dryden_gust(state, disc)
    for k in range(N_STEPS):
        if k:
            state, g = wind.dryden_step(state, wind.normal_noise(rng, (N_PROC, 5)), disc)
        hist[k % size] = g
        sq += np.einsum("ic,ic->c", g, g)
        for c in range(3):
            for j, lag in enumerate(lags[c]):
                if k >= lag:
                    prod[c, j] += g[:, c] @ hist[(k - lag) % size][:, c]
    var = sq / (N_PROC * N_STEPS)
    acf = prod / (N_PROC * (N_STEPS - lags)) / SIGMA[:, None] ** 2
    return {"var": var, "acf": acf, "lags": lags}


def test_stationary_variance(simulated: dict) -> None:
    # Bound: 5 standard deviations of the variance estimator, including time correlation.
    for c in range(3):
        ratio = simulated["var"][c] / SIGMA[c] ** 2
        std = estimator_std(c, 0, N_STEPS, N_PROC)
        assert abs(ratio - 1.0) < 5.0 * std, (c, ratio, std)
        assert std < 2e-3  # the test is sharp: a 1 % variance error would fail


def test_autocorrelation_matches_dryden(simulated: dict) -> None:
    # Bound: 5 standard deviations of the lagged-product estimator (Isserlis, see above).
    for c in range(3):
        for j, lag in enumerate(simulated["lags"][c]):
            expected = float(rho(c, np.array(lag * DT)))
            std = estimator_std(c, int(lag), N_STEPS, N_PROC)
            assert abs(simulated["acf"][c, j] - expected) < 5.0 * std, (c, lag, expected, std)


def test_wrong_time_constant_would_fail(simulated: dict) -> None:
    # The check above distinguishes L/V from a 10 % different correlation time.
    for c in range(3):
        lag = int(simulated["lags"][c][1])
        wrong = float(rho(c, np.array(lag * DT / 1.1)))
        std = estimator_std(c, lag, N_STEPS, N_PROC)
        assert abs(simulated["acf"][c, 1] - wrong) > 5.0 * std


DTS = [1e-7, 1e-3, 0.05, 0.6, 3.0, 40.0, 500.0]  # includes dt >> L/V (5..20 s)


def _van_loan(A: np.ndarray, B: np.ndarray, dt: float) -> tuple[np.ndarray, np.ndarray]:
    """``(A_d, Q_d)`` from Van Loan's block exponential (the oracle of the closed forms)."""
    n = A.shape[0]
    M = np.zeros((2 * n, 2 * n))
    M[:n, :n], M[:n, n:], M[n:, n:] = -A, B @ B.T, A.T
    E = scipy.linalg.expm(M * dt)
    return E[n:, n:].T, E[n:, n:].T @ E[:n, n:]


@pytest.mark.parametrize("h", [1e-9, 1e-5, 1e-3, 0.3, 0.9999, 1.0001, 3.0, 20.0])
def test_closed_forms_match_van_loan_and_lyapunov(h: float) -> None:
    """Each filter's ``A_d`` against SciPy's ``expm(A dt)``, ``Q_d`` against its ``expm`` of the
    Van Loan matrix (``h < 5``) or ``P - A_d P A_dᵀ`` (larger ``h``), entry by entry to 1e-12 of
    its own size (``Q_d`` spans ``h³`` to 1 over these ``h = dt/T``), and ``P`` against SciPy's
    continuous Lyapunov solver."""
    T = 7.0
    rp = np.sqrt(np.pi)
    p = wind.DrydenParams(*(T * 10.0,) * 3, 1.0, 1.0, 1.0, 10.0)  # T = L/V = 7 s for all three
    disc = wind.dryden_discretize(p, h * T)
    filters = [(np.array([[-1.0 / T]]), np.array([[rp / T]]), slice(0, 1))] + [
        (np.array([[0.0, 1.0], [-1.0, -2.0]]) / T, np.array([[0.0], [rp / T]]), slice(j, j + 2))
        for j in (1, 3)]  # fmt: skip
    for A, B, blk in filters:
        # The Van Loan matrix also holds e^{+h} entries, so its blocks are good only to about
        # 1e-16 e^{h} absolute (5e-8 at h = 20, against A_d ~ 4e-8; how much depends on SciPy's
        # expm): A_d from expm(A dt) itself, and for large h Q_d = P - A_d P A_dᵀ (exact for the
        # stationary P, and free of the small-h cancellation where Van Loan is used)
        Ad = scipy.linalg.expm(A * h * T)
        P = scipy.linalg.solve_continuous_lyapunov(A, -B @ B.T)
        Qd = _van_loan(A, B, h * T)[1] if h < 5.0 else P - Ad @ P @ Ad.T
        got_A, got_Q = disc.transition[blk, blk], disc.process_cov[blk, blk]
        np.testing.assert_allclose(got_A, Ad, rtol=1e-12, atol=1e-15)
        diag = np.sqrt(np.outer(np.diag(Qd), np.diag(Qd)))  # each entry's own scale
        np.testing.assert_allclose(got_Q / diag, Qd / diag, rtol=0, atol=1e-11)
        np.testing.assert_allclose(disc.stationary_cov[blk, blk], P, rtol=1e-13, atol=1e-16)


@pytest.mark.parametrize("dt", DTS)
def test_exact_discretisation_composes(dt: float) -> None:
    full, half = wind.dryden_discretize(PARAMS, dt), wind.dryden_discretize(PARAMS, dt / 2)
    Ah, Qh = half.transition, half.process_cov
    np.testing.assert_allclose(full.transition, Ah @ Ah, rtol=0, atol=1e-12)
    two = Ah @ Qh @ Ah.T + Qh
    scale = np.abs(full.process_cov).max()
    np.testing.assert_allclose(full.process_cov / scale, two / scale, rtol=0, atol=1e-12)
    Ld = full.noise_gain
    np.testing.assert_allclose(Ld @ Ld.T, full.process_cov, rtol=0, atol=1e-14 * scale)
    assert np.allclose(Ld, np.tril(Ld))


@pytest.mark.parametrize("dt", DTS)
def test_stationary_variance_and_autocorrelation_exact(dt: float) -> None:
    disc = wind.dryden_discretize(PARAMS, dt)
    C, A, P = disc.output, disc.transition, disc.stationary_cov
    np.testing.assert_allclose(np.diag(C @ P @ C.T), SIGMA**2, rtol=1e-10)
    # P is the stationary covariance of the discrete chain: the discrete Lyapunov residual is
    # at rounding level, and scipy's discrete solver agrees (it loses ~T/dt digits as dt -> 0).
    Q, scale = disc.process_cov, np.abs(P).max()
    np.testing.assert_allclose(A @ P @ A.T + Q, P, rtol=0, atol=1e-13 * scale)
    Pd = scipy.linalg.solve_discrete_lyapunov(A, Q)
    np.testing.assert_allclose(Pd, P, rtol=0, atol=max(1e-12, 1e-16 * TAU.max() / dt) * scale)
    S = disc.stationary_gain
    np.testing.assert_allclose(S @ S.T, P, rtol=0, atol=1e-13 * np.abs(P).max())
    Aj = np.eye(5)
    for j in range(1, 6):  # R(j dt) = C A_d^j P Cᵀ, exactly the continuous autocorrelation
        Aj = Aj @ A
        R = np.diag(C @ Aj @ P @ C.T) / SIGMA**2
        want = [rho(c, np.array(j * dt)) for c in range(3)]
        np.testing.assert_allclose(R, want, rtol=1e-9, atol=1e-12)


def test_low_altitude_spot_values() -> None:
    ft, kt = 0.3048, 1852.0 / 3600.0
    p = wind.dryden_low_altitude(50 * ft, 30 * kt, 12.0)
    L_uv_ft = 50.0 / (0.177 + 0.000823 * 50.0) ** 1.2  # = 50 / 0.21815^1.2 = 310.79 ft
    assert L_uv_ft == pytest.approx(310.79, abs=0.01)
    assert p.L_w == pytest.approx(50 * ft, rel=1e-12)
    assert p.L_u == pytest.approx(L_uv_ft * ft, rel=1e-12) and p.L_v == p.L_u
    assert p.sigma_w == pytest.approx(3.0 * kt, rel=1e-12)
    assert p.sigma_u == pytest.approx(3.0 * kt / 0.21815**0.4, rel=1e-12) and p.sigma_v == p.sigma_u
    assert p.airspeed == 12.0
    top = wind.dryden_low_altitude(1000 * ft, 10.0, 5.0)  # d = 1 at 1000 ft: L_u = h, σ_u = σ_w
    assert top.L_u == pytest.approx(304.8, rel=1e-12) and top.sigma_u == pytest.approx(1.0)
    # Clamped to 10..1000 ft.
    assert wind.dryden_low_altitude(0.5, 10.0, 5.0) == wind.dryden_low_altitude(10 * ft, 10.0, 5.0)
    assert wind.dryden_low_altitude(900.0, 10.0, 5.0) == top
    for name, knots in [("light", 15.0), ("moderate", 30.0), ("severe", 45.0)]:
        assert wind.dryden_preset(name, 20.0, 5.0).sigma_w == pytest.approx(0.1 * knots * kt)


def _gusts(rng_seed: int, steps: int = 50) -> np.ndarray:
    disc = wind.dryden_discretize(PARAMS, 0.1)
    rng = np.random.default_rng(rng_seed)
    state = wind.dryden_init(disc, wind.normal_noise(rng, (4, 5)))
    out = []
    for _ in range(steps):
        state, g = wind.dryden_step(state, wind.normal_noise(rng, (4, 5)), disc)
        out.append(g)
    return np.stack(out)


def test_reproducible_with_seed() -> None:
    a, b, c = _gusts(1), _gusts(1), _gusts(2)
    assert np.array_equal(a, b)
    assert not np.allclose(a, c)
    np.testing.assert_array_equal(
        wind.normal_noise(np.random.default_rng(3), (2, 5)),
        np.random.default_rng(3).standard_normal((2, 5)),
    )


def test_jax_and_torch_generators_reproducible() -> None:
    jax = pytest.importorskip("jax")
    torch = pytest.importorskip("torch")
    jax.config.update("jax_enable_x64", True)
    ka, kb = jax.random.key(5), jax.random.key(6)
    a, b = wind.normal_noise(ka, (3, 5)), wind.normal_noise(ka, (3, 5))
    assert a.shape == (3, 5) and np.array_equal(np.asarray(a), np.asarray(b))
    assert not np.allclose(np.asarray(a), np.asarray(wind.normal_noise(kb, (3, 5))))
    ga, gb = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    ta = wind.normal_noise(ga, (3, 5), dtype=torch.float64)
    assert ta.dtype == torch.float64 and torch.equal(
        ta, wind.normal_noise(gb, (3, 5), dtype=torch.float64)
    )
    with pytest.raises(TypeError, match=r"numpy\.random\.Generator"):
        wind.normal_noise(5, (3, 5))


def test_backends_agree(xp, rng: np.random.Generator) -> None:
    disc = wind.dryden_discretize(PARAMS, 0.2)
    x, n, d = rng.normal(size=(7, 5)), rng.normal(size=(7, 5)), rng.normal(size=(7, 2))
    x1, g1 = wind.dryden_step(x, n, disc)
    x2, g2 = wind.dryden_step(xp.asarray(x), xp.asarray(n), disc)
    np.testing.assert_allclose(xp.numpy(x2), x1, rtol=xp.rtol, atol=xp.rtol)
    np.testing.assert_allclose(xp.numpy(g2), g1, rtol=xp.rtol, atol=xp.rtol)
    s1 = wind.dryden_init(disc, n)
    np.testing.assert_allclose(xp.numpy(wind.dryden_init(disc, xp.asarray(n))), s1, rtol=xp.rtol)
    w1 = wind.gust_to_world(g1, d)
    w2 = wind.gust_to_world(xp.asarray(g1), xp.asarray(d))
    np.testing.assert_allclose(xp.numpy(w2), w1, rtol=xp.rtol, atol=xp.rtol)


def test_jax_jit() -> None:
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    disc = wind.dryden_discretize(PARAMS, 0.2)
    x, n = np.ones((2, 5)), np.full((2, 5), 0.5)
    step = jax.jit(lambda s, e: wind.dryden_step(s, e, disc))
    np.testing.assert_allclose(
        np.asarray(step(x, n)[1]), wind.dryden_step(x, n, disc)[1], rtol=1e-14
    )


def test_casadi_kernel_matches_numpy(rng: np.random.Generator) -> None:
    ca = pytest.importorskip("casadi")
    disc = wind.dryden_discretize(PARAMS, 0.3)
    sx, sn, sd = ca.MX.sym("x", 5), ca.MX.sym("n", 5), ca.MX.sym("d", 2)
    xn, g = wind._kdryden_step(tuple(sx[i] for i in range(5)), tuple(sn[i] for i in range(5)), disc)
    gw = wind._kgust_to_world(CASADI_OPS, g, (sd[0], sd[1]))
    f = ca.Function("f", [sx, sn, sd], [ca.vertcat(*xn), ca.vertcat(*g), ca.vertcat(*gw)])
    x, n, d = rng.normal(size=5), rng.normal(size=5), rng.normal(size=2)
    x1, g1 = wind.dryden_step(x, n, disc)
    out = [np.asarray(o).ravel() for o in f(x, n, d)]
    np.testing.assert_allclose(out[0], x1, rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(out[1], g1, rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(out[2], wind.gust_to_world(g1, d), rtol=1e-14, atol=1e-14)


def test_gust_to_world_and_constant_wind() -> None:
    g = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(wind.gust_to_world(g, np.array([1.0, 0.0])), g)
    # Mean wind toward +y (north): u -> +y, v (left of u) -> -x, w stays +z.
    np.testing.assert_allclose(wind.gust_to_world(g, np.array([0.0, 3.0])), [-2.0, 1.0, 3.0])
    d = np.array([[0.6, -0.8], [-1.0, 1.0]])
    out = wind.gust_to_world(np.broadcast_to(g, (2, 3)), d)
    np.testing.assert_allclose(np.linalg.norm(out, axis=-1), np.linalg.norm(g))
    np.testing.assert_allclose(out[0, :2] @ d[0], 1.0)  # u component along the mean wind
    np.testing.assert_allclose(wind.constant_wind(5.0, 0.0), [5.0, 0.0, 0.0])
    np.testing.assert_allclose(wind.constant_wind(5.0, 90.0), [0.0, 5.0, 0.0], atol=1e-15)
    np.testing.assert_allclose(wind.constant_wind(2.0, 225.0), [-math.sqrt(2), -math.sqrt(2), 0])


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: wind.dryden_discretize(PARAMS._replace(sigma_v=0.0), 0.1), "sigma_v"),
        (lambda: wind.dryden_discretize(PARAMS._replace(L_w=-1.0), 0.1), "L_w"),
        (lambda: wind.dryden_discretize(PARAMS._replace(airspeed=0.0), 0.1), "airspeed"),
        (lambda: wind.dryden_discretize(PARAMS, 0.0), "dt"),
        (lambda: wind.dryden_discretize(PARAMS, float("nan")), "dt"),
        (lambda: wind.dryden_low_altitude(10.0, -3.0, 5.0), "wind20_m_s"),
        (lambda: wind.dryden_low_altitude(10.0, 3.0, 0.0), "airspeed_m_s"),
        (lambda: wind.dryden_low_altitude(-1.0, 3.0, 5.0), "altitude_m"),
        (lambda: wind.dryden_preset("hurricane", 10.0, 5.0), "severity"),
        (lambda: wind.constant_wind(-1.0), "speed_m_s"),
        (
            lambda: wind.dryden_step(np.zeros(4), np.zeros(5), _DISC),
            r"state must have shape \(\.\.\., 5\)",
        ),
        (lambda: wind.dryden_step(np.zeros(5), np.zeros((2, 3)), _DISC), r"noise must have shape"),
        (lambda: wind.dryden_init(_DISC, np.zeros(3)), r"noise must have shape \(\.\.\., 5\)"),
        (lambda: wind.gust_to_world(np.zeros(3), np.zeros(3)), r"mean_wind_dir_xy must have shape"),
    ],
)
def test_bad_input_raises(call, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call()


_DISC = wind.dryden_discretize(PARAMS, 0.1)


def test_dryden_sequence_is_the_step_recursion(rng: np.random.Generator) -> None:
    """One call over a chunk equals ``T`` calls of dryden_step (to summation order, 1e-13)."""
    disc = wind.dryden_discretize(PARAMS, DT)
    x0 = wind.dryden_init(disc, rng.standard_normal((7, 5)))
    noise = rng.standard_normal((40, 7, 5))
    x_end, gusts = wind.dryden_sequence(x0, noise, disc)
    assert x_end.shape == (7, 5) and gusts.shape == (40, 7, 3)
    x = x0
    for i in range(40):
        x, g = wind.dryden_step(x, noise[i], disc)
        np.testing.assert_allclose(gusts[i], g, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(x_end, x, rtol=1e-13, atol=1e-13)
    # a chunk split in two is the same chunk, bit for bit
    xa, ga = wind.dryden_sequence(x0, noise[:15], disc)
    xb, gb = wind.dryden_sequence(xa, noise[15:], disc)
    np.testing.assert_array_equal(np.concatenate([ga, gb]), gusts)
    np.testing.assert_array_equal(xb, x_end)
    x_same, none = wind.dryden_sequence(x0, noise[:0], disc)  # T = 0: nothing happens
    np.testing.assert_array_equal(x_same, x0)
    assert none.shape == (0, 7, 3)
    with pytest.raises(ValueError, match="noise"):
        wind.dryden_sequence(x0, noise[..., :3], disc)


def test_gust_to_world_with_a_unit_direction_is_bitwise_the_same(rng) -> None:
    gust = rng.standard_normal((9, 4, 3))
    d = rng.standard_normal((4, 2))
    unit = d / np.linalg.norm(d, axis=1, keepdims=True)
    np.testing.assert_array_equal(wind.gust_to_world(gust, unit, unit=True),
                                  wind.gust_to_world(gust, d))  # fmt: skip


def test_simulator_wind_is_the_wind_module_bitwise() -> None:
    """The Simulator calls dryden_init / dryden_sequence / gust_to_world on the counter-based
    normals of its seed (quadsim.physics.noise); it adds the mean."""
    from quadsim.engines.sim import Simulator, Wind
    from quadsim.physics.noise import normals

    mean = np.array([[1.0, 2.0, 0.1], [0.0, 0.0, 0.0], [-3.0, 0.5, 0.0]])
    turb = wind.dryden_preset("moderate", 5.0, 2.0)
    sim = Simulator("cf2x_L250", n=3, wind=Wind(mean=mean, turbulence=turb), seed=8)
    got = np.concatenate([sim.wind_sequence(1, 0), sim.wind_sequence(30, 1),
                          sim.wind_sequence(5, 31)])  # fmt: skip
    disc = wind.dryden_discretize(turb, sim.dt)
    drones = np.arange(3)
    x = wind.dryden_init(disc, normals(8, "dryden_init", 0, drones, 5))
    d = mean[:, :2].copy()
    d[1] = (1.0, 0.0)  # calm: the u axis is +x
    want = []
    for k0, T in ((0, 1), (1, 30), (31, 5)):
        z = normals(8, "dryden", k0 + np.arange(T)[:, None], drones, 5)
        x, g = wind.dryden_sequence(x, z, disc)
        want.append(mean + wind.gust_to_world(g, d))
    np.testing.assert_array_equal(got, np.concatenate(want))
