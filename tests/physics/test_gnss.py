"""quadsim.physics.sensors.gnss: white-noise stds per axis, the Gauss-Markov position error
(stationary std, lag-1 correlation exp(-dt/τ), exactness for any dt), latency (the fix equals the
true state `latency` seconds earlier, exactly), explicit randomness, shapes, validation, the
u-blox preset and TOML loading, every backend, JAX jit and a CasADi trace.

Statistical bounds are 5 standard deviations of the estimator; the seeds are fixed.
"""

from __future__ import annotations

import math
import tomllib
from importlib import resources

import numpy as np
import pytest

from quadsim.physics import sensors as S  # noqa: N812

WHITE = S.GnssParams(pos_std_h=0.4, pos_std_v=0.9, vel_std_h=0.05, vel_std_v=0.12, rate=10.0)
GM = S.GnssParams(0.0, 0.0, 0.0, 0.0, rate=5.0, gm_std_h=1.5, gm_std_v=2.5, gm_tau=2.0)


def _tol_std(n: int) -> float:
    return 5.0 / math.sqrt(2.0 * (n - 1))


# ------------------------------------------------------------------------------ noise


def test_white_noise_stds_per_axis() -> None:
    n = 20_000
    rng = np.random.default_rng(1)
    pos, vel = rng.standard_normal((n, 3)), rng.standard_normal((n, 3))
    st = S.gnss_init(pos, vel, WHITE)
    r, st = S.gnss_measure(pos, vel, WHITE, st, rng)
    assert r.pos.shape == r.vel.shape == (n, 3) and r.valid.shape == (n,) and r.valid.all()
    ratio_p = (r.pos - pos).std(axis=0, ddof=1) / [0.4, 0.4, 0.9]
    ratio_v = (r.vel - vel).std(axis=0, ddof=1) / [0.05, 0.05, 0.12]
    np.testing.assert_array_less(np.abs(ratio_p - 1.0), _tol_std(n))
    np.testing.assert_array_less(np.abs(ratio_v - 1.0), _tol_std(n))
    np.testing.assert_array_less(np.abs((r.pos - pos).mean(axis=0)), 5.0 * 0.9 / math.sqrt(n))
    np.testing.assert_array_equal(st.gm_error, 0.0)  # no Gauss-Markov term


def test_gauss_markov_stationary_std_and_lag1_correlation() -> None:
    n, steps = 20_000, 4
    dt = 1.0 / GM.rate
    a = math.exp(-dt / GM.gm_tau)
    assert S.gnss_gm_coefficient(GM) == pytest.approx(a)
    rng = np.random.default_rng(2)
    zero = np.zeros((n, 3))
    st = S.gnss_init(zero, zero, GM, rng)
    errs = []
    for _ in range(steps):
        r, st = S.gnss_measure(zero, zero, GM, st, rng)
        errs.append(r.pos)  # no white noise: the fix error is e_k exactly
        np.testing.assert_array_equal(r.vel, 0.0)
    e = np.stack(errs)  # (steps, n, 3)
    sig = np.array([1.5, 1.5, 2.5])
    for k in (0, steps - 1):  # stationary from the first fix on
        np.testing.assert_array_less(np.abs(e[k].std(axis=0, ddof=1) / sig - 1.0), _tol_std(n))
    for ax in range(3):
        rho = np.corrcoef(e[1, :, ax], e[2, :, ax])[0, 1]
        assert abs(rho - a) < 5.0 * (1.0 - a * a) / math.sqrt(n), (ax, rho, a)
        rho2 = np.corrcoef(e[0, :, ax], e[2, :, ax])[0, 1]  # lag 2: a²
        assert abs(rho2 - a * a) < 5.0 * (1.0 - a**4) / math.sqrt(n), (ax, rho2)


def test_gauss_markov_is_exact_for_any_dt() -> None:
    """Two steps at dt equal one step at 2 dt in law: a(dt)² = a(2 dt) and the variances add."""
    z0 = np.array([0.3, -1.2, 0.8])
    e0 = np.array([0.5, -0.2, 1.0])
    st = S.GnssState(np.zeros((0, 3)), np.zeros((0, 3)), e0, np.zeros((), np.int32))
    zero = np.zeros(3)
    z = np.zeros(9)
    z[6:9] = z0
    _, s1 = S.gnss_measure(zero, zero, GM, st, z, dt=0.1)
    a = math.exp(-0.1 / GM.gm_tau)
    sig = np.array([1.5, 1.5, 2.5])
    np.testing.assert_allclose(s1.gm_error, a * e0 + sig * math.sqrt(1 - a * a) * z0, rtol=1e-14)
    # Mean and variance of e after two steps of dt equal those of one step of 2 dt.
    a2 = math.exp(-0.2 / GM.gm_tau)
    var_two = sig**2 * ((1 - a * a) * a * a + (1 - a * a))
    np.testing.assert_allclose(var_two, sig**2 * (1 - a2 * a2), rtol=1e-14)


def test_tau_zero_gives_white_gauss_markov_and_default_is_white_only() -> None:
    p = GM._replace(gm_tau=0.0)
    assert S.gnss_gm_coefficient(p) == 0.0
    n = 20_000
    rng = np.random.default_rng(3)
    zero = np.zeros((n, 3))
    st = S.gnss_init(zero, zero, p, rng)
    r1, st = S.gnss_measure(zero, zero, p, st, rng)
    r2, st = S.gnss_measure(zero, zero, p, st, rng)
    for ax, s in enumerate((1.5, 1.5, 2.5)):
        assert abs(r2.pos[:, ax].std(ddof=1) / s - 1.0) < _tol_std(n)
        assert abs(np.corrcoef(r1.pos[:, ax], r2.pos[:, ax])[0, 1]) < 5.0 / math.sqrt(n)
    # Defaults: no Gauss-Markov term, no noise needed at init.
    st = S.gnss_init(np.zeros(3), np.zeros(3), WHITE)
    np.testing.assert_array_equal(st.gm_error, 0.0)
    with pytest.raises(ValueError, match="noise is required"):
        S.gnss_init(np.zeros(3), np.zeros(3), GM)


# ------------------------------------------------------------------------------ latency


@pytest.mark.parametrize(("rate", "latency"), [(10.0, 0.3), (5.0, 0.2), (8.0, 0.0)])
def test_latency_delivers_the_true_state_exactly(rate: float, latency: float) -> None:
    p = S.GnssParams(0.0, 0.0, 0.0, 0.0, rate=rate, latency=latency)
    m = S.gnss_delay_steps(p)
    assert m == round(latency * rate)
    dt = 1.0 / rate
    t = np.arange(40) * dt
    # Two drones on different trajectories; velocity is the exact derivative.
    pos = np.stack([np.stack([np.sin(t + i), np.cos(2 * t) * i, t**2], -1) for i in (1, 2)], 1)
    vel = np.stack(
        [np.stack([np.cos(t + i), -2 * i * np.sin(2 * t), 2 * t], -1) for i in (1, 2)], 1
    )
    st = S.gnss_init(pos[0], vel[0], p)
    assert st.pos_buf.shape == (2, m, 3)
    for k in range(len(t)):
        r, st = S.gnss_measure(pos[k], vel[k], p, st, np.zeros((2, 9)))
        j = max(k - m, 0)  # the fix at t_k is the state at t_k - latency (initial fill before)
        np.testing.assert_array_equal(r.pos, pos[j])
        np.testing.assert_array_equal(r.vel, vel[j])
        np.testing.assert_array_equal(r.valid, np.full(2, k >= m))
    assert int(st.count) == m  # saturates


def test_latency_must_be_a_whole_number_of_periods() -> None:
    p = WHITE._replace(latency=0.25)  # 2.5 periods at 10 Hz
    with pytest.raises(ValueError, match="latency must be an integer multiple"):
        S.gnss_init(np.zeros(3), np.zeros(3), p)
    with pytest.raises(ValueError, match="latency"):
        S.gnss_delay_steps(p)
    assert S.gnss_delay_steps(p, dt=0.05) == 5  # fine at 20 Hz
    with pytest.raises(ValueError, match="latency"):
        S.check_gnss_params(WHITE._replace(latency=-0.1))


# ------------------------------------------------------------------------------ API


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("pos_std_h", -0.1),
        ("pos_std_v", float("nan")),
        ("vel_std_h", -1.0),
        ("vel_std_v", float("inf")),
        ("gm_std_h", -0.5),
        ("gm_std_v", -0.5),
        ("gm_tau", -1.0),
        ("latency", float("nan")),
        ("rate", 0.0),
        ("rate", -2.0),
        ("pos_std_h", "x"),
    ],
)
def test_validation_names_the_field(field: str, value: object) -> None:
    p = WHITE._replace(**{field: value})
    with pytest.raises(ValueError, match=field):
        S.check_gnss_params(p)
    with pytest.raises(ValueError, match=field):
        S.gnss_init(np.zeros(3), np.zeros(3), p)
    with pytest.raises(ValueError, match="GnssParams"):
        S.check_gnss_params(tuple(WHITE))  # type: ignore[arg-type]


def test_same_z_same_readings_shapes_and_batching() -> None:
    p = S.load_gnss("ublox_m9n")
    rng = np.random.default_rng(4)
    pos, vel = rng.standard_normal((2, 3, 3)), rng.standard_normal((2, 3, 3))
    z0 = rng.standard_normal((2, 3, 3))
    st = S.gnss_init(pos, vel, p, z0)
    assert st.pos_buf.shape == st.vel_buf.shape == (2, 3, 1, 3) and st.gm_error.shape == (2, 3, 3)
    np.testing.assert_allclose(st.gm_error, z0 * [1.67, 1.67, 2.51], rtol=1e-15)
    z = rng.standard_normal((2, 3, 9))
    a, sa = S.gnss_measure(pos, vel, p, st, z)
    b, sb = S.gnss_measure(pos, vel, p, st, z.copy())
    assert a.pos.shape == a.vel.shape == (2, 3, 3) and a.valid.shape == (2, 3)
    for x, y in zip((*a, *sa), (*b, *sb), strict=True):
        assert np.array_equal(x, y)
    c, _ = S.gnss_measure(pos, vel, p, st, np.random.default_rng(5))
    d, _ = S.gnss_measure(pos, vel, p, st, np.random.default_rng(5))
    assert np.array_equal(c.pos, d.pos) and not np.array_equal(a.pos, c.pos)
    # One drone, no batch.
    s1 = S.gnss_init(np.zeros(3), np.zeros(3), p, np.zeros(3))
    r1, _ = S.gnss_measure(np.zeros(3), np.zeros(3), p, s1, np.zeros(9))
    assert r1.pos.shape == (3,) and r1.valid.shape == ()
    with pytest.raises(ValueError, match="noise"):
        S.gnss_measure(pos, vel, p, st, np.zeros((2, 3, 6)))
    with pytest.raises(ValueError, match="gnss_state buffers"):
        S.gnss_measure(pos[0], vel[0], p, st, z[0])
    with pytest.raises(ValueError, match="vel"):
        S.gnss_measure(pos, vel[..., :2], p, st, z)


def test_ublox_preset_values_and_sources() -> None:
    assert S.list_gnss_presets() == ["ublox_m9n"]
    assert S.list_imu_presets() == ["adis16470", "bmi088"]
    p = S.load_gnss("ublox_m9n")
    assert p.rate == 5.0 and p.latency == pytest.approx(0.2) and S.gnss_delay_steps(p) == 1
    # White and Gauss-Markov parts together reproduce the data sheet's 2.0 m CEP.
    sigma_h = math.hypot(p.pos_std_h, p.gm_std_h)
    assert S.CEP_PER_SIGMA == pytest.approx(1.1774, abs=1e-4)
    assert sigma_h * S.CEP_PER_SIGMA == pytest.approx(2.0, rel=2e-3)
    assert math.hypot(p.pos_std_v, p.gm_std_v) == pytest.approx(1.5 * 2.0 / 1.1774, rel=3e-3)
    assert p.vel_std_h == 0.05 and p.gm_tau == 300.0
    raw = (
        resources.files("quadsim.physics") / "presets" / "sensors" / "ublox_m9n.toml"
    ).read_text()
    doc = tomllib.loads(raw)
    assert doc["kind"] == "gnss"
    for key, entry in doc.items():
        if key in ("kind", "name", "description"):
            continue
        assert isinstance(entry, dict) and entry.get("source") and entry.get("unit"), key
    with pytest.raises(ValueError, match="unknown GNSS preset"):
        S.load_gnss("bmp388")


def test_toml_units_and_errors(tmp_path) -> None:
    f = tmp_path / "rx.toml"
    f.write_text(
        'kind = "gnss"\nrate = 10\nlatency = { value = 300, unit = "ms" }\n'
        'pos_std_h = { value = 50, unit = "cm" }\npos_std_v = 1.0\n'
        'vel_std_h = { value = 5, unit = "cm/s" }\nvel_std_v = 0.1\n'
        'gm_tau = { value = 2, unit = "min" }\ngm_std_h = 1\n'
    )
    p = S.load_gnss(f)
    assert p == S.GnssParams(0.5, 1.0, 0.05, 0.1, 10.0, latency=0.3, gm_std_h=1.0,
                             gm_tau=120.0, name="rx")  # fmt: skip
    cases = {
        "rate = 10\npos_std_h = 1\npos_std_v = 1\nvel_std_h = 1\n": "'vel_std_v'.*required",
        "rate = 10\npos_std_h = 1\npos_std_v = 1\nvel_std_h = 1\nvel_std_v = -1\n": "'vel_std_v'",
        'rate = 10\npos_std_h = { value = 1, unit = "ft" }\n': "'pos_std_h'.*unit",
        "rate = 10\npos_std_h = 1\npos_std_v = 1\nvel_std_h = 1\nvel_std_v = 1\nlatency = 0.15\n": (
            "'latency'.*integer multiple"
        ),
        'kind = "baro"\nrate = 10\n': "'kind'",
        "rate = 10\nfoo = 1\n": "'foo'.*unknown key",
    }
    for i, (text, msg) in enumerate(cases.items()):
        g = tmp_path / f"bad{i}.toml"
        g.write_text(text)
        with pytest.raises(ValueError, match=msg):
            S.load_gnss(g)


# ------------------------------------------------------------------------------ backends


def test_backends_match_numpy(xp) -> None:
    p = S.GnssParams(0.3, 0.5, 0.05, 0.1, 10.0, latency=0.2, gm_std_h=1.0, gm_std_v=2.0,
                     gm_tau=5.0)  # fmt: skip
    rng = np.random.default_rng(6)
    pos, vel = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    z0, zs = rng.standard_normal((4, 3)), rng.standard_normal((3, 4, 9))
    ref_st = S.gnss_init(pos, vel, p, z0)
    st = S.gnss_init(xp.asarray(pos), xp.asarray(vel), p, xp.asarray(z0))
    for k in range(3):
        ref, ref_st = S.gnss_measure(pos + k, vel - k, p, ref_st, zs[k])
        got, st = S.gnss_measure(xp.asarray(pos + k), xp.asarray(vel - k), p, st, xp.asarray(zs[k]))
        assert got.pos.dtype == got.vel.dtype == st.gm_error.dtype == xp.dtype
        for g, r in ((got.pos, ref.pos), (got.vel, ref.vel), (st.gm_error, ref_st.gm_error)):
            np.testing.assert_allclose(xp.numpy(g), r, rtol=xp.rtol, atol=10 * xp.rtol)
        assert np.array_equal(np.asarray(xp.numpy(got.valid)), ref.valid)


def test_jax_jit_same_numbers_and_key() -> None:
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    p = S.load_gnss("ublox_m9n")
    rng = np.random.default_rng(7)
    pos, vel = rng.standard_normal((8, 3)), rng.standard_normal((8, 3))
    z0, z = rng.standard_normal((8, 3)), rng.standard_normal((8, 9))

    @jax.jit
    def step(pos, vel, st, noise):
        return S.gnss_measure(pos, vel, p, st, noise)

    ref_st = S.gnss_init(pos, vel, p, z0)
    ref, ref_st2 = S.gnss_measure(pos + 1, vel, p, ref_st, z)
    st = S.gnss_init(jnp.asarray(pos), jnp.asarray(vel), p, jnp.asarray(z0))
    got, st2 = step(jnp.asarray(pos + 1), jnp.asarray(vel), st, jnp.asarray(z))
    for g, r in ((got.pos, ref.pos), (got.vel, ref.vel), (st2.gm_error, ref_st2.gm_error),
                 (st2.pos_buf, ref_st2.pos_buf)):  # fmt: skip
        np.testing.assert_allclose(np.asarray(g), r, rtol=1e-13, atol=1e-13)
    assert np.array_equal(np.asarray(got.valid), ref.valid) and int(st2.count) == 1
    key = jax.random.key(8)
    r1, _ = step(jnp.asarray(pos), jnp.asarray(vel), st, key)
    r2, _ = step(jnp.asarray(pos), jnp.asarray(vel), st, key)
    assert np.array_equal(np.asarray(r1.pos), np.asarray(r2.pos))


def test_casadi_trace_matches_numpy() -> None:
    cs = pytest.importorskip("casadi")
    from quadsim.physics._symbolic import symbolic

    p = S.GnssParams(0.3, 0.5, 0.05, 0.1, 10.0, latency=0.2, gm_std_h=1.0, gm_std_v=2.0,
                     gm_tau=5.0)  # fmt: skip
    P, V, E, Z = cs.SX.sym("p", 3), cs.SX.sym("v", 3), cs.SX.sym("e", 3), cs.SX.sym("z", 9)

    def sym(x, n):
        return symbolic([x[i] for i in range(n)])

    st = S.gnss_init(sym(P, 3), sym(V, 3), p, sym(E, 3))
    out = []
    for k in range(3):  # three fixes; the third delivers the first pushed state (m = 2)
        r, st = S.gnss_measure(sym(P, 3) + k, sym(V, 3) * (k + 1), p, st, sym(Z, 9))
        out += [*r.pos.entries(), *r.vel.entries()]
    out += st.gm_error.entries()
    f = cs.Function("gnss", [P, V, E, Z], [cs.vertcat(*out)])
    rng = np.random.default_rng(9)
    pos, vel, e0, z = (rng.standard_normal(n) for n in (3, 3, 3, 9))
    ref_st = S.gnss_init(pos, vel, p, e0)
    ref = []
    for k in range(3):
        r, ref_st = S.gnss_measure(pos + k, vel * (k + 1), p, ref_st, z)
        ref += [*r.pos, *r.vel]
    ref += list(ref_st.gm_error)
    np.testing.assert_allclose(np.asarray(f(pos, vel, e0, z)).ravel(), ref, rtol=1e-13, atol=1e-14)
