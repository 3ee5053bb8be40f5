"""quadsim.physics.sensors.baro: white-noise std per sample, bias random-walk variance K² t,
turn-on bias, constant offset, explicit randomness, shapes, validation, the BMP388 preset and TOML
loading, every backend, JAX jit and a CasADi trace.

Statistical bounds are 5 standard deviations of the estimator (a false alarm about once in
1.7 million per check); the seeds are fixed, so the tests are deterministic.
"""

from __future__ import annotations

import math
import tomllib
from importlib import resources

import numpy as np
import pytest

from quadsim.physics import sensors as S  # noqa: N812

P_WHITE = S.BaroParams(noise_std=0.08, bias_walk=0.0, rate=50.0, bias=0.3)


def _pos(n: int, z: float = 1.5) -> np.ndarray:
    p = np.zeros((n, 3))
    p[:, 2] = z
    return p


# ------------------------------------------------------------------------------ model


def test_white_noise_std_and_offset() -> None:
    n = 20_000  # one reading of n drones: iid samples
    rng = np.random.default_rng(1)
    h, st = S.baro_measure(_pos(n), P_WHITE, S.baro_init(P_WHITE, (n,)), None, rng)
    assert h.shape == (n,) and st.bias.shape == (n,)
    err = h - 1.5
    ratio = err.std(ddof=1) / 0.08
    assert abs(ratio - 1.0) < 5.0 / math.sqrt(2.0 * (n - 1)), ratio  # about 2.5 % here
    assert abs(err.mean() - 0.3) < 5.0 * 0.08 / math.sqrt(n), err.mean()
    np.testing.assert_array_equal(st.bias, 0.0)  # no walk: the bias stays put


def test_bias_walk_variance_grows_as_k2_t() -> None:
    K, dt, n, steps = 0.02, 0.02, 4_000, 400  # 4000 drones, 8 s
    p = S.BaroParams(noise_std=0.0, bias_walk=K, rate=1.0 / dt)
    rng = np.random.default_rng(2)
    st = S.baro_init(p, (n,))
    pos = _pos(n, 0.0)
    tol = 5.0 * math.sqrt(2.0 / (n - 1))
    for k in range(1, steps + 1):
        prev = st.bias
        h, st = S.baro_measure(pos, p, st, dt, rng)
        np.testing.assert_array_equal(h, prev)  # no white noise: sample k reads b_k exactly
        if k in (1, 25, 100, 400):
            var = st.bias.var(ddof=1)  # b_k after k steps: variance K² k dt
            assert abs(var / (K * K * k * dt) - 1.0) < tol, (k, var)
    # Increments are independent: the lag-1 correlation of increments is ~ 0.
    st0 = S.baro_init(p, (n,))
    _, st1 = S.baro_measure(pos, p, st0, dt, np.random.default_rng(3))
    _, st2 = S.baro_measure(pos, p, st1, dt, np.random.default_rng(4))
    d1, d2 = st1.bias - st0.bias, st2.bias - st1.bias
    assert abs(np.corrcoef(d1, d2)[0, 1]) < 5.0 / math.sqrt(n)


def test_walk_step_scales_with_sqrt_dt_and_white_noise_does_not() -> None:
    p = S.BaroParams(noise_std=0.1, bias_walk=0.5, rate=10.0, bias=-1.0)
    z = np.array([1.0, 1.0])
    for dt in (0.1, 0.01, 0.5):
        h, st = S.baro_measure(np.array([0.0, 0.0, 2.0]), p, S.BaroState(0.25), dt, z)
        assert h == pytest.approx(2.0 - 1.0 + 0.25 + 0.1)
        assert st.bias == pytest.approx(0.25 + 0.5 * math.sqrt(dt))
    h_def, _ = S.baro_measure(np.zeros(3), p, S.BaroState(0.0), None, np.zeros(2))
    assert h_def == pytest.approx(-1.0)


def test_turn_on_bias_std() -> None:
    p = P_WHITE._replace(bias_std=0.6)
    n = 20_000
    st = S.baro_init(p, n, np.random.default_rng(5))
    assert st.bias.shape == (n,)
    assert abs(st.bias.std(ddof=1) / 0.6 - 1.0) < 5.0 / math.sqrt(2.0 * (n - 1))
    with pytest.raises(ValueError, match="noise is required"):
        S.baro_init(p, n)
    z = np.array([[0.5], [-2.0]])
    np.testing.assert_array_equal(S.baro_init(p, noise=z).bias, [0.3, -1.2])


def test_same_z_same_readings_and_generator_reproducible() -> None:
    p = S.load_baro("bmp388")
    rng = np.random.default_rng(6)
    pos, z = rng.standard_normal((7, 3)), rng.standard_normal((7, 2))
    st = S.baro_init(p, 7, np.random.default_rng(7))
    a, sa = S.baro_measure(pos, p, st, None, z)
    b, sb = S.baro_measure(pos, p, st, None, z.copy())
    assert np.array_equal(a, b) and np.array_equal(sa.bias, sb.bias)
    c, _ = S.baro_measure(pos, p, st, None, np.random.default_rng(8))
    d, _ = S.baro_measure(pos, p, st, None, np.random.default_rng(8))
    assert np.array_equal(c, d) and not np.array_equal(a, c)


def test_shapes_and_batching() -> None:
    p = P_WHITE._replace(bias_walk=0.01)
    pos = np.zeros((2, 5, 3))
    st = S.baro_init(p, (2, 5))
    h, st2 = S.baro_measure(pos, p, st, None, np.zeros((2, 5, 2)))
    assert h.shape == (2, 5) and st2.bias.shape == (2, 5)
    h1, s1 = S.baro_measure(np.zeros(3), p, S.baro_init(p), None, np.zeros(2))
    assert h1.shape == () and s1.bias.shape == ()
    # A scalar state broadcasts against a batch of positions; noise broadcasts too.
    h2, s2 = S.baro_measure(pos, p, S.BaroState(0.0), None, np.zeros(2))
    assert h2.shape == (2, 5) and s2.bias.shape == (2, 5)
    # The generator draws the broadcast batch shape of pos and state.
    h3, _ = S.baro_measure(np.zeros((4, 3)), p, S.baro_init(p, 4), None, np.random.default_rng(0))
    assert h3.shape == (4,)
    for bad in (np.zeros((4, 2)), np.zeros(3)):
        with pytest.raises(ValueError, match="noise"):
            S.baro_measure(np.zeros((4, 3)), p, S.baro_init(p, 4), None, bad[..., :1])
    with pytest.raises(ValueError, match="pos"):
        S.baro_measure(np.zeros((4, 2)), p, S.baro_init(p, 4), None, np.zeros((4, 2)))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("noise_std", -0.1),
        ("noise_std", float("nan")),
        ("bias_walk", -1e-3),
        ("bias_walk", float("inf")),
        ("bias_std", -1.0),
        ("bias", float("nan")),
        ("rate", 0.0),
        ("rate", -5.0),
        ("rate", float("inf")),
        ("noise_std", "abc"),
    ],
)
def test_validation_names_the_field(field: str, value: object) -> None:
    p = P_WHITE._replace(**{field: value})
    with pytest.raises(ValueError, match=field):
        S.check_baro_params(p)
    with pytest.raises(ValueError, match=field):
        S.baro_measure(np.zeros(3), p, S.BaroState(0.0), None, np.zeros(2))


def test_dt_and_params_type_errors() -> None:
    with pytest.raises(ValueError, match="dt"):
        S.baro_measure(np.zeros(3), P_WHITE, S.BaroState(0.0), 0.0, np.zeros(2))
    with pytest.raises(ValueError, match="BaroParams"):
        S.check_baro_params((0.1, 0.0, 50.0))  # type: ignore[arg-type]


# ------------------------------------------------------------------------------ presets, TOML


def test_bmp388_preset_values_and_sources() -> None:
    assert S.list_baro_presets() == ["bmp388"]
    assert S.list_imu_presets() == ["adis16470", "bmi088"]  # the baro file is not an IMU
    p = S.load_baro("bmp388")
    m_per_pa = 1.0 / (1.225 * 9.80665)
    assert S.M_PER_PA == pytest.approx(m_per_pa) and 8.2 < 100 * m_per_pa < 8.4
    assert p.rate == 50.0 and p.name == "bmp388"
    assert p.noise_std == pytest.approx(0.9 * m_per_pa)  # 0.9 Pa -> 7.5 cm
    assert p.bias_std == pytest.approx(8.0 * m_per_pa)  # +-0.08 hPa -> 0.67 m
    assert p.bias_walk == pytest.approx(0.075 * m_per_pa)
    assert p.bias == 0.0
    raw = (resources.files("quadsim.physics") / "presets" / "sensors" / "bmp388.toml").read_text()
    doc = tomllib.loads(raw)
    assert doc["kind"] == "baro"
    for key, entry in doc.items():
        if key in ("kind", "name", "description"):
            continue
        assert isinstance(entry, dict) and entry.get("source") and entry.get("unit"), key
    with pytest.raises(ValueError, match="unknown barometer preset"):
        S.load_baro("bmi088")
    with pytest.raises(ValueError, match="unknown IMU preset"):
        S.load_imu("bmp388")


def test_toml_units_and_errors(tmp_path) -> None:
    f = tmp_path / "my_baro.toml"
    f.write_text(
        'kind = "baro"\nrate = 25\nnoise_std = { value = 0.02, unit = "hPa" }\n'
        'bias = { value = 10.0, unit = "Pa" }\nbias_std = { value = 30, unit = "cm" }\n'
        'bias_walk = { value = 0.6, unit = "m/sqrt(hr)" }\n'
    )
    p = S.load_baro(f)
    assert p.name == "my_baro" and p.rate == 25.0
    assert p.noise_std == pytest.approx(2.0 * S.M_PER_PA)
    assert p.bias == pytest.approx(-10.0 * S.M_PER_PA)  # higher pressure reads lower
    assert p.bias_std == pytest.approx(0.3)
    assert p.bias_walk == pytest.approx(0.01)
    bare = tmp_path / "bare.toml"
    bare.write_text("rate = 10\nnoise_std = 0.05\n")  # no kind: accepted for a user file
    assert S.load_baro(bare) == S.BaroParams(0.05, 0.0, 10.0, name="bare")
    cases = {
        'rate = 10\nnoise_std = { value = 1, unit = "furlong" }\n': "'noise_std'.*unit",
        "rate = 10\nnoise_std = 0.1\nbogus = 1\n": "'bogus'.*unknown key",
        "noise_std = 0.1\n": "'rate'.*required",
        "rate = 10\nnoise_std = -0.1\n": "'noise_std'.*>= 0",
        "rate = 0\nnoise_std = 0.1\n": "'rate'",
        "rate = 10\nnoise_std = [0.1, 0.2]\n": "'noise_std'.*single number",
        'kind = "gnss"\nrate = 10\nnoise_std = 0.1\n': "'kind'",
        "rate = 10\nnoise_std = nan\n": "'noise_std'.*finite",
        "rate = [": "malformed",
    }
    for i, (text, msg) in enumerate(cases.items()):
        g = tmp_path / f"bad{i}.toml"
        g.write_text(text)
        with pytest.raises(ValueError, match=msg):
            S.load_baro(g)
    with pytest.raises(FileNotFoundError):
        S.load_baro(tmp_path / "missing.toml")


# ------------------------------------------------------------------------------ backends


def test_backends_match_numpy(xp) -> None:
    p = S.BaroParams(0.05, 0.02, 50.0, bias=0.1)
    rng = np.random.default_rng(9)
    pos, b, z = rng.standard_normal((6, 3)), rng.standard_normal(6), rng.standard_normal((6, 2))
    ref, ref_st = S.baro_measure(pos, p, S.BaroState(b), None, z)
    got, got_st = S.baro_measure(xp.asarray(pos), p, S.BaroState(b), None, xp.asarray(z))
    assert got.dtype == got_st.bias.dtype == xp.dtype
    np.testing.assert_allclose(xp.numpy(got), ref, rtol=xp.rtol, atol=10 * xp.rtol)
    np.testing.assert_allclose(xp.numpy(got_st.bias), ref_st.bias, rtol=xp.rtol, atol=10 * xp.rtol)
    st = S.baro_init(p, (6,), xp=xp.xp, dtype=xp.dtype)
    assert st.bias.dtype == xp.dtype and tuple(st.bias.shape) == (6,)


def test_jax_jit_same_numbers_and_key() -> None:
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    p = S.load_baro("bmp388")
    rng = np.random.default_rng(10)
    pos, b, z = rng.standard_normal((8, 3)), rng.standard_normal(8), rng.standard_normal((8, 2))

    @jax.jit
    def step(pos, b, noise):
        return S.baro_measure(pos, p, S.BaroState(b), None, noise)

    ref, ref_st = S.baro_measure(pos, p, S.BaroState(b), None, z)
    got, got_st = step(jnp.asarray(pos), jnp.asarray(b), jnp.asarray(z))
    np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(np.asarray(got_st.bias), ref_st.bias, rtol=1e-13, atol=1e-13)
    n = 20_000
    key = jax.random.key(11)
    zero = jnp.zeros((n, 3))
    h1, _ = step(zero, jnp.zeros(n), key)
    h2, _ = step(zero, jnp.zeros(n), key)
    assert np.array_equal(np.asarray(h1), np.asarray(h2))
    ratio = float(np.std(np.asarray(h1), ddof=1)) / p.noise_std
    assert abs(ratio - 1.0) < 5.0 / math.sqrt(2.0 * (n - 1))


def test_casadi_trace_matches_numpy() -> None:
    cs = pytest.importorskip("casadi")
    from quadsim.physics._symbolic import symbolic

    p = S.BaroParams(0.05, 0.02, 50.0, bias=0.1)
    P, B, Z = cs.SX.sym("p", 3), cs.SX.sym("b"), cs.SX.sym("z", 2)
    h, st = S.baro_measure(symbolic([P[i] for i in range(3)]), p,
                           S.BaroState(symbolic([B])[0]), None, symbolic([Z[0], Z[1]]))  # fmt: skip
    f = cs.Function("baro", [P, B, Z], [cs.vertcat(*h.entries(), *st.bias.entries())])
    rng = np.random.default_rng(12)
    for _ in range(3):
        pos, b, z = rng.standard_normal(3), float(rng.standard_normal()), rng.standard_normal(2)
        ref, ref_st = S.baro_measure(pos, p, S.BaroState(np.asarray(b)), None, z)
        got = np.asarray(f(pos, b, z)).ravel()
        np.testing.assert_allclose(got, [ref, ref_st.bias], rtol=1e-14, atol=1e-15)
