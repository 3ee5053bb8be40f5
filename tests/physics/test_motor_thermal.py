"""quadsim.physics.motor_thermal: the motor warm-up state and the axial-inflow thrust factor,
and their coefficients in quadsim.physics.params (validated, off in the existing presets)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from quadsim.physics import motor_thermal as mt
from quadsim.physics._array import CASADI_OPS
from quadsim.physics.params import PhysicalError, check_physical, list_presets, load_params


def _rk4(theta: float, drive: float, tau: float, dt: float, n: int) -> float:
    h = dt / n
    for _ in range(n):
        k1 = mt.warmup_rate(theta, drive, tau)
        k2 = mt.warmup_rate(theta + 0.5 * h * k1, drive, tau)
        k3 = mt.warmup_rate(theta + 0.5 * h * k2, drive, tau)
        k4 = mt.warmup_rate(theta + h * k3, drive, tau)
        theta += h / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
    return theta


def test_steady_state_is_the_drive():
    assert mt.warmup_rate(0.7, 0.7, 5.0) == 0.0
    theta = 0.0
    for _ in range(2000):  # 200 s at 0.1 s, 40 time constants
        theta = mt.warmup_step(theta, 1.3, 5.0, 0.1)
    assert theta == pytest.approx(1.3, rel=1e-12)
    assert mt.warmup_step(1.3, 1.3, 5.0, 0.1) == pytest.approx(1.3, rel=1e-15)


def test_time_constant_63_percent():
    tau = 4.0
    theta = 0.0
    for _ in range(400):  # one time constant in 400 steps
        theta = mt.warmup_step(theta, 1.0, tau, tau / 400)
    assert theta == pytest.approx(1.0 - math.exp(-1.0), rel=1e-12)  # 0.632
    assert 0.63 < theta < 0.64


@pytest.mark.parametrize("dt", [0.01, 0.5, 3.0])
def test_discrete_step_is_exact_against_rk4(dt: float):
    for theta0, drive in ((0.0, 1.0), (1.4, 0.2), (0.3, 2.5)):
        exact = mt.warmup_step(theta0, drive, 2.5, dt)
        assert exact == pytest.approx(_rk4(theta0, drive, 2.5, dt, 2000), rel=1e-12, abs=1e-14)


def test_step_broadcasts_over_rotors():
    theta = np.array([0.0, 0.5, 1.0, 2.0])
    drive = np.array([1.0, 1.0, 0.0, 2.0])
    got = mt.warmup_step(theta, drive, 5.0, 0.01)
    pairs = zip(theta, drive, strict=True)
    want = [mt.warmup_step(float(a), float(b), 5.0, 0.01) for a, b in pairs]
    np.testing.assert_allclose(got, want, rtol=1e-13)
    tau = np.array([1.0, 2.0, 5.0, np.inf])
    got = mt.warmup_step(theta, drive, tau, 0.01)
    assert got[-1] == 2.0  # tau = inf: never moves
    want = [mt.warmup_step(float(a), float(b), float(c), 0.01)
            for a, b, c in zip(theta, drive, tau, strict=True)]  # fmt: skip
    # np.exp against math.exp: a few ulps apart on some CPUs and libms (1e-14 seen here)
    np.testing.assert_allclose(got, want, rtol=1e-13)


def test_never_warms_with_infinite_time_constant():
    assert mt.warmup_step(0.0, 1.0, math.inf, 0.01) == 0.0
    assert mt.warmup_rate(0.0, 1.0, math.inf) == 0.0


def test_coefficient_zero_gives_the_thrust_exactly():
    rng = np.random.default_rng(0)
    thrust = rng.uniform(0.0, 0.15, (50, 4))
    theta, vz = rng.uniform(0.0, 3.0, (50, 4)), rng.uniform(-5.0, 5.0, (50, 1))
    f = mt.thrust_factor(theta, vz, 0.0, 0.0)
    assert np.array_equal(thrust * f, thrust)
    assert mt.thrust_factor(2.0, -3.0, 0.0, 0.0) == 1.0


def test_factors_and_their_clipping():
    assert mt.warmup_factor(1.0, 0.05) == pytest.approx(0.95)
    assert mt.inflow_factor(1.0, 0.05) == pytest.approx(0.95)  # climbing at 1 m/s: -5 %
    assert mt.inflow_factor(-1.0, 0.05) == pytest.approx(1.05)  # descending: more thrust
    assert mt.inflow_factor(30.0, 0.05) == 0.0  # beyond 1 / c_i: clipped, never negative
    assert mt.warmup_factor(40.0, 0.05) == 0.0
    v = np.linspace(-50.0, 50.0, 101)
    f = mt.inflow_factor(v, 0.05)
    assert np.all(f >= 0.0) and f[0] == pytest.approx(3.5) and f[-1] == 0.0
    np.testing.assert_allclose(mt.thrust_factor(1.0, 1.0, 0.05, 0.05), 0.95 * 0.95)


def test_drive_is_power_relative_to_hover():
    p = load_params("cf2x_L250")
    wh = mt.hover_rpm(p)
    k = p.rpm2thrust
    assert 4 * (k[0] + k[1] * wh + k[2] * wh * wh) == pytest.approx(p.mass * 9.81, rel=1e-12)
    assert mt.warmup_drive(wh, wh) == pytest.approx(1.0)
    assert mt.warmup_drive(2.0 * wh, wh) == pytest.approx(8.0)
    with pytest.raises(ValueError, match="rpm_hover"):
        mt.warmup_drive(1.0, 0.0)


def test_momentum_bound_for_a_crazyflie():
    # 46.5 g over four 47-mm propellers: v_h = 5.2 m/s, bound 0.19 s/m
    c = mt.momentum_inflow_coef(0.0465 * 9.81 / 4, 0.0235, 1.2)
    assert c == pytest.approx(0.191, abs=0.002)
    with pytest.raises(ValueError):
        mt.momentum_inflow_coef(0.0, 0.02)


def test_casadi_twin_equals_numeric():
    cs = pytest.importorskip("casadi")
    th, p, v = cs.MX.sym("th"), cs.MX.sym("p"), cs.MX.sym("v")
    tau, cw, ci = cs.MX.sym("tau"), cs.MX.sym("cw"), cs.MX.sym("ci")
    f = cs.Function("f", [th, p, v, tau, cw, ci], [
        mt.warmup_step(th, p, tau, 0.01, ops=CASADI_OPS),
        mt.warmup_rate(th, p, tau),
        mt.thrust_factor(th, v, cw, ci, ops=CASADI_OPS),
        mt.warmup_drive(p, 2.0e4),
    ])  # fmt: skip
    rng = np.random.default_rng(1)
    for _ in range(20):
        a = (rng.uniform(0, 2), rng.uniform(0, 3), rng.uniform(-30, 30), rng.uniform(0.5, 9),
             rng.uniform(0, 0.2), rng.uniform(0, 0.2))  # fmt: skip
        got = [float(x) for x in f(*a)]
        want = [mt.warmup_step(a[0], a[1], a[3], 0.01), mt.warmup_rate(a[0], a[1], a[3]),
                mt.thrust_factor(a[0], a[2], a[4], a[5]), mt.warmup_drive(a[1], 2.0e4)]  # fmt: skip
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)
    # the clipping traces too: beyond 1 / c_i the factor is 0, not negative
    assert float(f(0.0, 0.0, 30.0, 1.0, 0.0, 0.2)[2]) == 0.0


def test_jax_equals_numpy():
    jnp = pytest.importorskip("jax.numpy")
    theta, drive = np.array([0.0, 0.5, 2.0]), np.array([1.0, 0.2, 2.5])
    want = mt.thrust_factor(mt.warmup_step(theta, drive, 3.0, 0.1), drive - 1.0, 0.05, 0.06)
    got = mt.thrust_factor(mt.warmup_step(jnp.asarray(theta), jnp.asarray(drive), 3.0, 0.1),
                           jnp.asarray(drive) - 1.0, 0.05, 0.06)  # fmt: skip
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)


# ----------------------------------------------------------------------------- parameters


@pytest.mark.parametrize("name", [n for n in list_presets() if n != "cf21_nanobench"])
def test_existing_presets_have_the_terms_off(name: str):
    p = load_params(name)
    assert (p.warmup_coef, p.warmup_time, p.inflow_coef) == (0.0, math.inf, 0.0)


def test_check_physical_per_drone():
    check_physical({"warmup_coef": [0.0, 0.05], "warmup_time": [math.inf, 3.0]})
    with pytest.raises(PhysicalError) as info:
        check_physical({"inflow_coef": [0.05, -0.1]})
    assert info.value.key == "inflow_coef" and info.value.index == (1,)
