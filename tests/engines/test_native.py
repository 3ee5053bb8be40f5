"""Tests of quadsim.engines.native: generated C rollouts against CasADi's own evaluation."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

import quadsim
from quadsim.engines import native

CI = os.environ.get("CI", "") == "true"
AVAILABLE = native.available()
if not AVAILABLE and not CI:
    pytest.skip(
        "quadsim.engines.native.available() is False: no C compiler ($CC, cc, gcc) building GCC "
        "vector "
        "extensions, or casadi missing",
        allow_module_level=True,
    )

cs = pytest.importorskip("casadi") if not CI else __import__("casadi")

DT = 0.002


def test_available_in_ci():
    assert AVAILABLE, "CI must provide a C compiler and casadi; native rollouts cannot be skipped"


# ---------------------------------------------------------------------------------------------
# Step functions


def fp_step(preset: str):
    """One RK4 step of the first-principles model (rotor dynamics on), one drone, CasADi SX."""
    from quadsim.physics._array import CASADI_OPS
    from quadsim.physics.models import first_principles as fp
    from quadsim.physics.models._rigid import ROTOR_PARAMS, symbolic_params

    P = quadsim.load_params(preset)
    p = symbolic_params(ROTOR_PARAMS, **{k: getattr(P, k) for k in ROTOR_PARAMS})
    nr = len(p.mixing_matrix[0])
    n = 13 + nr
    x, u = cs.SX.sym("x", n), cs.SX.sym("u", nr)

    def f(xs):
        c = [xs[i] for i in range(n)]
        cmd = tuple(u[i] for i in range(nr))
        qd, vd, wd, rd = fp.kernel(tuple(c[3:7]), tuple(c[7:10]), tuple(c[10:13]), cmd,
                                   tuple(c[13:n]), None, None, p, CASADI_OPS)  # fmt: skip
        return cs.vertcat(*c[7:10], *qd, *vd, *wd, *rd)

    k1 = f(x)
    k2 = f(x + DT / 2 * k1)
    k3 = f(x + DT / 2 * k2)
    k4 = f(x + DT * k3)
    y = x + DT / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    y[3:7] = y[3:7] / cs.sqrt(cs.sumsqr(y[3:7]))
    return cs.Function("fp_rk4", [x, u], [y]), P


def hover_rpm(P) -> float:
    k0, k1, k2 = np.asarray(P.rpm2thrust, dtype=float)
    f = P.mass * np.linalg.norm(P.gravity_vec) / P.mixing_matrix.shape[1]
    return float((-k1 + np.sqrt(k1 * k1 - 4 * k2 * (k0 - f))) / (2 * k2))


def random_drones(P, n: int, rng, spread: float):
    """States ``(17, n)`` and commands ``(4, n)`` around hover; ``spread`` scales the deviation."""
    nr = P.mixing_matrix.shape[1]
    w = hover_rpm(P)
    q = rng.normal(size=(4, n)) * spread + np.array([[0], [0], [0], [1.0]])
    x = np.concatenate([rng.normal(size=(3, n)), q / np.linalg.norm(q, axis=0),
                        spread * rng.normal(size=(3, n)), spread * rng.normal(size=(3, n)),
                        w * (1 + 0.2 * spread * rng.normal(size=(nr, n)))])  # fmt: skip
    u = w * (1 + 0.2 * spread * rng.normal(size=(nr, n)))
    return x, u


def casadi_rollout(F, x0, u, steps, p=None):
    """Iterate the CasADi Function drone by drone in Python (the reference)."""
    out = np.empty_like(x0)
    for j in range(x0.shape[1]):
        x = x0[:, j]
        for s in range(steps):
            uj = u[s, :, j] if u.ndim == 3 else u[:, j]
            args = (x, uj) if p is None else (x, uj, p if p.ndim == 1 else p[:, j])
            x = np.asarray(F(*args), dtype=float).ravel()
        out[:, j] = x
    return out


def assert_close(got, want, rtol):
    """``|got - want| <= rtol (|want| + max |want| over the drones)``, per state row."""
    got, want = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
    scale = np.abs(want) + np.abs(want).max(axis=-1, keepdims=True)
    err = np.abs(got - want) / scale
    assert got.shape == want.shape and err.max() <= rtol, f"max scaled error {err.max():.3g}"


def oscillator_step(h: float = 0.01):
    """Euler step of x'' = -p0 x - p1 x' + u with per-drone parameters p = (p0, p1)."""
    x, u, p = cs.SX.sym("x", 2), cs.SX.sym("u", 1), cs.SX.sym("p", 2)
    acc = -p[0] * x[0] - p[1] * x[1] + u[0]
    return cs.Function("osc", [x, u, p], [cs.vertcat(x[0] + h * x[1], x[1] + h * acc)])


def oscillator_numpy(x0, u, p, steps, h=0.01):
    x = np.array(x0, dtype=float)
    p = p[:, None] if p.ndim == 1 else p
    for s in range(steps):
        us = u[s] if u.ndim == 3 else u
        x = np.stack([x[0] + h * x[1], x[1] + h * (-p[0] * x[0] - p[1] * x[1] + us[0])])
    return x


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("native_cache")


@pytest.fixture(scope="module")
def osc(cache):
    F = oscillator_step()
    return F, {
        dt: native.compile_rollout(F, dt, cache_dir=cache) for dt in (np.float32, np.float64)
    }


# ---------------------------------------------------------------------------------------------
# First-principles model


@pytest.mark.parametrize("preset", quadsim.list_presets())
def test_first_principles_float64_matches_casadi(preset, cache):
    F, P = fp_step(preset)
    roll = native.compile_rollout(F, np.float64, cache_dir=cache)
    assert (roll.n_state, roll.n_input, roll.n_param) == (17, 4, 0)
    assert roll.lanes == native._vector_bytes(native._toolchain()[2]) // 8
    x0, u = random_drones(P, 13, np.random.default_rng(0), spread=0.5)
    x0_copy = x0.copy()
    got, rec = roll(x0, u, steps=200)
    want = casadi_rollout(F, x0, u, 200)
    assert rec is None
    np.testing.assert_array_equal(x0, x0_copy)  # caller's array untouched
    assert np.abs(want - x0).max() > 1e-3  # the drones moved
    assert_close(got, want, 1e-10)


def test_first_principles_float32_hover(cache):
    F, P = fp_step("cf2x_L250")
    roll = native.compile_rollout(F, np.float32, cache_dir=cache)
    assert roll.lanes == native._vector_bytes(native._toolchain()[2]) // 4
    assert roll.dtype == np.float32
    x0, u = random_drones(P, 13, np.random.default_rng(1), spread=0.02)
    got, _ = roll(x0, u, steps=200)
    assert got.dtype == np.float32
    assert_close(got, casadi_rollout(F, x0, u, 200), 1e-4)


@pytest.mark.parametrize("vbytes", [32, 64])
def test_vector_width_is_a_layout_choice_not_a_result(vbytes, cache, monkeypatch):
    """32- and 64-byte vectors (AVX-512 or two AVX2 halves) give the CasADi rollout."""
    monkeypatch.setenv("QUADSIM_VECTOR_BYTES", str(vbytes))
    F, P = fp_step("cf2x_L250")
    roll = native.compile_rollout(F, np.float64, cache_dir=cache)
    assert roll.lanes == vbytes // 8 and f"vector_size({vbytes})" in roll.source
    x0, u = random_drones(P, 21, np.random.default_rng(2), spread=0.5)  # not a lane multiple
    got, _ = roll(x0, u, steps=100)
    assert_close(got, casadi_rollout(F, x0, u, 100), 1e-10)


# ---------------------------------------------------------------------------------------------
# Inputs, parameters, records, padding


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n", [1, 7, 9, 17])
def test_per_drone_params_and_padding(osc, dtype, n):
    roll = osc[1][dtype]
    rng = np.random.default_rng(n)
    x0, u = rng.normal(size=(2, n)), rng.normal(size=(1, n))
    p = np.stack([rng.uniform(1, 4, n), rng.uniform(0, 1, n)])
    got, _ = roll(x0, u, p, steps=50)
    assert got.shape == (2, n) and got.dtype == dtype
    tol = 1e-12 if dtype == np.float64 else 1e-5
    assert_close(got, oscillator_numpy(x0, u, p, 50), tol)
    if n == 7:  # also against the CasADi Function itself
        assert_close(got, casadi_rollout(osc[0], x0, u, 50, p), tol)


def test_shared_params_broadcast(osc):
    roll = osc[1][np.float64]
    rng = np.random.default_rng(2)
    x0, u, p = rng.normal(size=(2, 6)), rng.normal(size=(1, 6)), np.array([2.0, 0.3])
    got, _ = roll(x0, u, p, steps=40)
    per_drone, _ = roll(x0, u, np.repeat(p[:, None], 6, axis=1), steps=40)
    np.testing.assert_array_equal(got, per_drone)
    assert_close(got, oscillator_numpy(x0, u, p, 40), 1e-12)


def test_bound_hot_loop_equals_the_checked_call(osc):
    roll = osc[1][np.float64]
    rng = np.random.default_rng(5)
    n_pad = roll.lanes * 2
    X = np.ascontiguousarray(rng.normal(size=(2, n_pad)))
    U = np.ascontiguousarray(rng.normal(size=(1, n_pad)))
    p = np.array([2.0, 0.3])
    want, _ = roll(X, U, p, steps=30)
    advance = roll.bind(X, U, p)
    for _ in range(10):
        advance(3)
    np.testing.assert_array_equal(X, want)
    with pytest.raises(ValueError, match="multiple of"):
        roll.bind(np.zeros((2, n_pad + 1)), np.zeros((1, n_pad + 1)), p)
    with pytest.raises(ValueError, match="C-contiguous float64"):
        roll.bind(np.zeros((2, n_pad), np.float32), U, p)


def test_per_step_commands(osc):
    roll = osc[1][np.float64]
    rng = np.random.default_rng(3)
    x0, u, p = rng.normal(size=(2, 5)), rng.normal(size=(30, 1, 5)), np.array([1.0, 0.1])
    got, _ = roll(x0, u, p, steps=30)
    assert_close(got, oscillator_numpy(x0, u, p, 30), 1e-12)
    assert_close(got, casadi_rollout(osc[0], x0, u, 30, p), 1e-12)
    held, _ = roll(x0, u[0], p, steps=30)
    assert np.abs(held - got).max() > 1e-6  # the per-step commands were used


@pytest.mark.parametrize("steps", [12, 13, 2])
def test_record_every(osc, steps):
    roll = osc[1][np.float64]
    rng = np.random.default_rng(4)
    x0, u, p = rng.normal(size=(2, 9)), rng.normal(size=(steps, 1, 9)), np.array([3.0, 0.2])
    final, rec = roll(x0, u, p, steps=steps, record_every=3)
    assert rec.shape == (steps // 3, 2, 9)
    for i in range(steps // 3):
        want = oscillator_numpy(x0, u[: 3 * (i + 1)], p, 3 * (i + 1))
        assert_close(rec[i], want, 1e-12)
    assert_close(final, oscillator_numpy(x0, u, p, steps), 1e-12)


def test_zero_steps_and_dtype_conversion(osc):
    roll = osc[1][np.float32]
    x0 = np.arange(6.0).reshape(2, 3)
    got, rec = roll(x0, np.zeros((1, 3)), [1.0, 0.0], steps=0, record_every=2)
    np.testing.assert_array_equal(got, x0.astype(np.float32))
    assert got.dtype == np.float32 and rec.shape == (0, 2, 3)
    assert x0.dtype == np.float64


def test_threads_and_mx(osc, cache):
    rng = np.random.default_rng(5)
    x0, u, p = rng.normal(size=(2, 100)), rng.normal(size=(1, 100)), np.array([1.5, 0.1])
    ref, _ = osc[1][np.float64](x0, u, p, steps=20)
    one = native.compile_rollout(osc[0], np.float64, cache_dir=cache, threads=1)
    np.testing.assert_array_equal(one(x0, u, p, steps=20)[0], ref)
    x, uu, pp = cs.MX.sym("x", 2), cs.MX.sym("u", 1), cs.MX.sym("p", 2)
    F_mx = cs.Function("osc_mx", [x, uu, pp], [osc[0](x, uu, pp)])
    mx = native.compile_rollout(F_mx, np.float64, cache_dir=cache)
    np.testing.assert_allclose(mx(x0, u, p, steps=20)[0], ref, rtol=1e-14, atol=1e-14)


def noisy_oscillator_step(h: float = 0.01):
    """The oscillator driven by one standard normal per step (noise group ``("imu", 1)``)."""
    x, u, p, z = cs.SX.sym("x", 2), cs.SX.sym("u", 1), cs.SX.sym("p", 2), cs.SX.sym("z", 1)
    acc = -p[0] * x[0] - p[1] * cs.sin(x[1]) + u[0] + 0.5 * z[0]
    return cs.Function("osc_z", [x, u, p, z], [cs.vertcat(x[0] + h * x[1], x[1] + h * acc)])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_threads_share_blocks_bitwise(cache, dtype):
    """Blocks go to whichever thread claims them (issue 27, item 15): one thread, two or three
    forced to share every call (``threads=-k``: each computes every k-th chunk, whatever the
    machine's load) and the default give bitwise equal states and records, for a batch that is
    neither a multiple of the chunk (4 blocks here) nor of the vector width, with per-drone
    parameters, per-step inputs and noise drawn in C."""
    F = noisy_oscillator_step()
    rolls = {t: native.compile_rollout(F, dtype, cache_dir=cache, threads=t, noise=(("imu", 1),))
             for t in (1, -2, -3, 0)}  # fmt: skip
    assert len({r.path for r in rolls.values()}) == 1  # one library: threads are per call
    lanes = rolls[1].lanes
    n, steps = 37 * lanes + 3, 50  # 38 blocks, the last one padded: chunks of 4 blocks, 2 left
    rng = np.random.default_rng(11)
    x0, u = rng.normal(size=(2, n)), rng.normal(size=(steps, 1, n))
    p = np.stack([rng.uniform(1, 4, n), rng.uniform(0, 1, n)])
    want, want_rec = rolls[1](x0, u, p, steps=steps, record_every=7, seed=3, step0=5)
    assert rolls[1].threads_used == 1 and np.isfinite(want).all()
    for t in (-2, -3, 0, 0, 0):
        got, rec = rolls[t](x0, u, p, steps=steps, record_every=7, seed=3, step0=5)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(rec, want_rec)
        if t < 0:
            assert rolls[t].threads_used == -t  # every thread took its chunks
    X = np.ascontiguousarray(rolls[1]._pad(x0, -(-n // lanes) * lanes, copy=True))
    advance = rolls[-2].bind(X, np.ascontiguousarray(rolls[1]._pad(u[0], X.shape[1])),
                             np.ascontiguousarray(rolls[1]._pad(p, X.shape[1])))  # fmt: skip
    held = x0
    for _ in range(5):
        advance(10)  # the hot loop (seed 0, step0 0 every call, the first input held)
        held, _ = rolls[1](held, u[0], p, steps=10)
    np.testing.assert_array_equal(X[:, :n], held)
    for i in range(3):  # the hot loop's normals: the seed and first step given to each call
        advance(10, 3, 50 + 10 * i)
        held, _ = rolls[1](held, u[0], p, steps=10, seed=3, step0=50 + 10 * i)
    np.testing.assert_array_equal(X[:, :n], held)


# ---------------------------------------------------------------------------------------------
# Operations, NaN, errors, cache


def all_ops_function():
    """Every supported op on well-defined inputs; a, b in (0.1, 0.9), c, d in (-2, 2)."""
    x = cs.SX.sym("x", 48)
    a, b, c, d = x[0], x[1], x[2], x[3]
    exprs = [a + b, a - b, a * b, a / c, -c, c * c, 2 * c, 1 / c, cs.sqrt(a), cs.sin(c),
             cs.cos(c), cs.tan(c), cs.atan2(c, d), cs.exp(c), cs.log(a), a**c, a**2.5,
             cs.fabs(c), c < d, c <= d, c == d, c != d, cs.logic_not(c), cs.logic_and(c, d),
             cs.logic_or(c, d), cs.if_else(c < d, a, b), cs.fmin(c, d), cs.fmax(c, d),
             cs.floor(c), cs.ceil(c), cs.copysign(a, c), cs.sign(c), cs.asin(a), cs.acos(a),
             cs.atan(c), cs.sinh(c), cs.cosh(c), cs.tanh(c), cs.asinh(c), cs.acosh(1 + a),
             cs.atanh(a), cs.expm1(c), cs.log1p(a), cs.erf(c), cs.fmod(c, a),
             cs.remainder(c, a), cs.hypot(c, d), 3.25]  # fmt: skip
    assert len(exprs) == 48
    return cs.Function("all_ops", [x, cs.SX.sym("u", 0)], [cs.vertcat(*exprs)])


REQUIRED_OPS = ["ADD", "SUB", "MUL", "DIV", "NEG", "SQ", "TWICE", "INV", "SQRT", "SIN", "COS",
                "TAN", "ATAN2", "EXP", "LOG", "POW", "FABS", "LT", "LE", "EQ", "NE", "NOT", "AND",
                "OR", "IF_ELSE_ZERO", "FMIN", "FMAX", "FLOOR", "CONST", "INPUT", "OUTPUT",
                "COPYSIGN"]  # fmt: skip


def op_inputs(n: int, rng) -> np.ndarray:
    X = np.zeros((48, n))
    X[:2] = rng.uniform(0.1, 0.9, (2, n))
    X[2:4] = rng.uniform(-2, 2, (2, n))
    X[2:4, :4] = [[0.0, 0.0, 1.5, -1.0], [0.0, 1.0, 1.5, 0.0]]  # zeros and ties for logic ops
    return X


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_every_op_matches_casadi(dtype, cache):
    F = all_ops_function()
    ids = {F.instruction_id(k) for k in range(F.n_instructions())}
    present = {n[3:] for n in dir(cs) if n.startswith("OP_") and getattr(cs, n) in ids}
    assert set(REQUIRED_OPS) <= present
    roll = native.compile_rollout(F, dtype, cache_dir=cache)
    X = op_inputs(40, np.random.default_rng(6)).astype(dtype).astype(float)
    got, _ = roll(X, np.zeros((0, 40)), steps=1)
    want = np.asarray(F.map(40)(X, np.zeros((0, 40))), dtype=float)
    tol = 1e-12 if dtype == np.float64 else 2e-5
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_nan_and_inf_propagate(cache):
    x, u = cs.SX.sym("x", 5), cs.SX.sym("u", 1)
    y = cs.vertcat(x[0] / x[1], x[2] + 1, u[0] / x[1], cs.if_else(x[2] < 1, 5.0, 7.0),
                   cs.logic_not(x[2] < 1))  # fmt: skip
    roll = native.compile_rollout(cs.Function("nan", [x, u], [y]), np.float64, cache_dir=cache)
    x0 = np.array([[0.0], [0.0], [np.nan], [0.0], [0.0]])
    got, _ = roll(x0, np.array([[1.0]]), steps=1)
    assert np.isnan(got[0, 0]) and np.isnan(got[1, 0]) and got[2, 0] == np.inf
    assert got[3, 0] == 7.0 and got[4, 0] == 1.0  # NaN < 1 is false, as in CasADi
    got, _ = roll(x0, np.array([[1.0]]), steps=5)
    assert np.isnan(got[1, 0])


def test_nan_semantics_match_casadi(cache):
    """Comparisons, logic and fmin/fmax on NaN as CasADi (fails under -ffinite-math-only)."""
    x, u = cs.SX.sym("x", 8), cs.SX.sym("u", 1)
    a, b = x[0], x[1]
    y = cs.vertcat(a != b, a == b, cs.fmax(a, b), cs.fmin(a, b), cs.logic_not(a < b),
                   cs.logic_not(a >= b), cs.if_else(a <= b, 1, 2), a < b)  # fmt: skip
    F = cs.Function("nan_ops", [x, u], [y])
    X = np.zeros((8, 4))
    X[:2] = [[np.nan, 0, np.nan, 1], [0, np.nan, np.nan, 1]]
    got, _ = native.compile_rollout(F, np.float64, cache_dir=cache)(X, np.zeros((1, 4)))
    np.testing.assert_array_equal(got, np.asarray(F.map(4)(X, np.zeros((1, 4)))))


def test_vector_math_special_values_match_numpy(cache):
    """The libm functions with vector variants (libmvec, where linked) keep libm's answers at
    the edges: NaN outside the domain, infinities, signed limits."""
    x, u = cs.SX.sym("x", 11), cs.SX.sym("u", 0)
    v = x[0]
    y = cs.vertcat(cs.sin(v), cs.cos(v), cs.asin(v), cs.acos(v), cs.atan(v), cs.exp(v),
                   cs.log(v), cs.tanh(v), cs.atan2(v, 1 - v), v**2.5, cs.erf(v))  # fmt: skip
    F = cs.Function("edges", [x, u], [y])
    X = np.zeros((11, 16))
    X[0] = [0.0, 0.5, -0.5, 1.0, -1.0, 2.0, -2.0, 800.0, -800.0, np.inf, -np.inf, np.nan, 1e-300,
            3.0, -3.0, 0.25]
    with np.errstate(all="ignore"):
        v = X[0]
        want = np.stack([np.sin(v), np.cos(v), np.arcsin(v), np.arccos(v), np.arctan(v),
                         np.exp(v), np.log(v), np.tanh(v), np.arctan2(v, 1 - v), v**2.5,
                         _erf(v)])  # fmt: skip
    got, _ = native.compile_rollout(F, np.float64, cache_dir=cache)(X, np.zeros((0, 16)))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-300)


def _erf(x: np.ndarray) -> np.ndarray:
    import math

    return np.array([math.erf(v) if not np.isnan(v) else np.nan for v in x])


def test_vector_math_is_declared_and_linked_as_probed(cache, monkeypatch):
    """Each libm function the toolchain links with a vector variant (``_simd``) is declared
    ``simd`` in the generated C; ``QUADSIM_NO_MVEC`` builds the scalar form (equal to 1e-13)."""
    names = native._simd(native._vector_bytes(native._toolchain()[2]))
    assert names in (*native._MVEC_TIERS, ())
    if CI and os.uname().sysname == "Linux" and os.uname().machine == "x86_64":
        assert names, "glibc's libmvec is expected on the Linux x86-64 CI machine"
    F = all_ops_function()
    roll = native.compile_rollout(F, np.float64, cache_dir=cache)
    for f in names:
        assert f'double {f}(double' in roll.source and 'simd("notinbranch")' in roll.source
    X = op_inputs(40, np.random.default_rng(7))
    vec, _ = roll(X, np.zeros((0, 40)))
    monkeypatch.setenv("QUADSIM_NO_MVEC", "1")
    native._simd.cache_clear()
    try:
        scalar = native.compile_rollout(F, np.float64, cache_dir=cache)
        assert "simd" not in scalar.source and (scalar.path != roll.path or not names)
        np.testing.assert_allclose(scalar(X, np.zeros((0, 40)))[0], vec, rtol=1e-13, atol=1e-14)
    finally:
        native._simd.cache_clear()


def test_unknown_op_raises(cache):
    x, u = cs.SX.sym("x", 1), cs.SX.sym("u", 1)
    with pytest.raises(NotImplementedError, match="OP_ERFINV"):
        native.compile_rollout(cs.Function("f", [x, u], [cs.erfinv(x)]), cache_dir=cache)


def test_bad_shapes_raise(osc):
    roll = osc[1][np.float64]
    x0, u, p = np.zeros((2, 4)), np.zeros((1, 4)), np.zeros(2)
    with pytest.raises(ValueError, match=r"x0 must have shape \(n_state, N\) = \(2, N\)"):
        roll(np.zeros((3, 4)), u, p)
    with pytest.raises(ValueError, match="u must have shape"):
        roll(x0, np.zeros((1, 5)), p)
    with pytest.raises(ValueError, match="u must have shape"):
        roll(x0, np.zeros((3, 1, 4)), p, steps=4)
    with pytest.raises(ValueError, match=r"params must have shape \(n_param,\) = \(2,\)"):
        roll(x0, u, np.zeros(3))
    with pytest.raises(ValueError, match="params must have shape"):
        roll(x0, u, None)
    with pytest.raises(ValueError, match=">= 0"):
        roll(x0, u, p, steps=-1)
    with pytest.raises(ValueError, match="float32 or float64"):
        native.compile_rollout(osc[0], np.float16)
    x, u = cs.SX.sym("x", 2), cs.SX.sym("u", 1)
    with pytest.raises(ValueError, match="x_next has 1 entries"):
        native.compile_rollout(cs.Function("f", [x, u], [x[0]]))


def test_params_rejected_without_param_input(cache):
    x, u = cs.SX.sym("x", 1), cs.SX.sym("u", 1)
    roll = native.compile_rollout(cs.Function("f", [x, u], [x + 1]), np.float64, cache_dir=cache)
    with pytest.raises(ValueError, match="takes no parameters"):
        roll(np.zeros((1, 2)), np.zeros((1, 2)), np.zeros(1))
    got, _ = roll(np.zeros((1, 2)), np.zeros((1, 2)), steps=3)
    np.testing.assert_array_equal(got, [[3.0, 3.0]])


def test_cache_reuses_library(tmp_path, monkeypatch):
    F = oscillator_step(h=0.0123)
    monkeypatch.setenv("QUADSIM_CACHE_DIR", str(tmp_path / "env_cache"))
    first = native.compile_rollout(F, np.float64)
    assert first.compiled and first.path.parent == tmp_path / "env_cache"
    mtime = first.path.stat().st_mtime_ns
    with monkeypatch.context() as m:  # the compiler must not run again
        m.setattr(native, "_run", lambda *a, **k: pytest.fail("compiler invoked on a cache hit"))
        second = native.compile_rollout(F, np.float64)
    assert not second.compiled and second.path == first.path
    assert second.path.stat().st_mtime_ns == mtime
    assert [p.suffix for p in sorted(first.path.parent.iterdir())] == [".c", ".so"]  # no temps
    other = native.compile_rollout(F, np.float32)
    assert other.compiled and other.path != first.path


def test_compile_error_raises(tmp_path, monkeypatch, fresh_toolchain):
    entry = Path(native._toolchain()[3])
    assert entry.is_file()
    monkeypatch.setattr(native, "generate", lambda *a: "this is not C;\n")
    with pytest.raises(RuntimeError, match="failed"):
        native.compile_rollout(oscillator_step(), np.float64, cache_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []
    assert not entry.exists()  # a failed build drops the cached probe: the next process probes


# ---------------------------------------------------------------------------------------------
# The on-disk cache: the toolchain probe, and libraries keyed by the Function, not its C source


@pytest.fixture
def fresh_toolchain(tmp_path_factory):
    """``_toolchain()`` against an empty cache directory; this process's own is restored after."""
    root = tmp_path_factory.mktemp("toolchain")
    old = os.environ.get("QUADSIM_CACHE_DIR")
    os.environ["QUADSIM_CACHE_DIR"] = str(root)
    native._toolchain.cache_clear()
    try:
        yield root
    finally:
        if old is None:
            os.environ.pop("QUADSIM_CACHE_DIR", None)
        else:
            os.environ["QUADSIM_CACHE_DIR"] = old
        native._toolchain.cache_clear()
        native._toolchain()


def test_toolchain_probe_is_cached_on_disk(fresh_toolchain, monkeypatch):
    first = native._toolchain()
    entry = Path(first[3])
    assert entry.parent == fresh_toolchain and entry.is_file()
    native._toolchain.cache_clear()
    monkeypatch.setattr(native, "_probe", lambda *a: pytest.fail("probe built on a cache hit"))
    assert native._toolchain() == first  # same compiler, flags and identity, no probe build


def test_the_compilers_answers_are_remembered_for_its_file_and_the_cpu(fresh_toolchain,
                                                                        monkeypatch):  # fmt: skip
    """A second process (the in-process cache cleared) on the same compiler file and CPU asks
    the compiler nothing; another CPU (its flags), or an unreadable entry, asks again."""
    if native._cpu() is None:
        pytest.skip("no /proc/cpuinfo here: the compiler is asked every time (by design)")
    first = native._toolchain()
    assert len(list(fresh_toolchain.glob("ask_*.json"))) == 1
    native._toolchain.cache_clear()
    asked, real = [], native._ask
    monkeypatch.setattr(native, "_ask", lambda cc, *q: asked.append(q) or real(cc, *q))
    assert native._toolchain() == first and asked == []
    cpu = native._cpu()
    monkeypatch.setattr(native, "_cpu", lambda: cpu + " another_flag")
    native._toolchain.cache_clear()
    assert native._toolchain() == first and len(asked) == 1
    for entry in fresh_toolchain.glob("ask_*.json"):
        entry.write_text('{"version": 3}')
    native._toolchain.cache_clear()
    assert native._toolchain() == first and len(asked) == 2


def test_toolchain_probe_entry_unreadable_probes_again(fresh_toolchain, monkeypatch):
    first = native._toolchain()
    Path(first[3]).write_text('{"extra": ["-O0"], "ident": 1}')  # not one of the probed sets
    native._toolchain.cache_clear()
    probed, real = [], native._probe
    monkeypatch.setattr(native, "_probe", lambda cc, extra: probed.append(extra) or real(cc, extra))
    assert native._toolchain() == first and probed
    assert json.loads(Path(first[3]).read_text())["extra"] == list(first[1][len(native._FLAGS):])


def test_cache_hit_needs_no_c_source(tmp_path, monkeypatch):
    first = native.compile_rollout(oscillator_step(h=0.0456), np.float64, cache_dir=tmp_path)
    assert first.compiled
    with monkeypatch.context() as m:
        m.setattr(native, "generate", lambda *a: pytest.fail("C generated on a cache hit"))
        second = native.compile_rollout(oscillator_step(h=0.0456), np.float64, cache_dir=tmp_path)
    assert not second.compiled and second.path == first.path  # a Function traced again hits
    assert second.source == first.source == first.path.with_suffix(".c").read_text()
    x0 = np.array([[1.0, 0.5], [0.0, 0.2]])
    u, p = np.zeros((1, 2)), np.array([4.0, 0.1])
    np.testing.assert_array_equal(second(x0, u, p, steps=7)[0], first(x0, u, p, steps=7)[0])


def test_library_key_sees_every_constant_bit(tmp_path):
    h = 0.0456
    a = native.compile_rollout(oscillator_step(h=h), np.float64, cache_dir=tmp_path)
    b = native.compile_rollout(oscillator_step(h=np.nextafter(h, 1.0)), np.float64,
                               cache_dir=tmp_path)  # fmt: skip
    assert b.compiled and b.path != a.path
    assert a.source != b.source
