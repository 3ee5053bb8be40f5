"""The motor warm-up in the plant (``warmup_coef``, ``warmup_time``; the state ``motor_heat``):
each rotor's thrust falls by ``max(1 - c_w θ, 0)`` as ``θ̇ = ((Ω/Ω_h)³ - θ)/τ_w`` warms it, in
the numeric models, their CasADi twins and every simulator backend; checked against the
closed-form first-order response, its steady state and time constant, the descent it causes,
the clipped limit and the twins."""

from __future__ import annotations

import math

import numpy as np
import pytest

from quadsim.engines import native
from quadsim.engines.sim import Simulator
from quadsim.physics import motor_thermal as mt
from quadsim.physics import rotation
from quadsim.physics.models import MODELS, euler_zyx, first_principles
from quadsim.physics.params import load_params

C_W, TAU = 0.05, 0.8  # 5 % thrust lost once warm in hover, 0.8-s time constant


def _drone(c_w=C_W, tau=TAU, name="cf2x_L250"):
    """``name`` with the warm-up and without drag or inflow (the thrust alone moves it)."""
    return load_params(name)._replace(drag_matrix=np.zeros((3, 3)), inflow_coef=0.0,
                                      warmup_coef=c_w, warmup_time=tau)  # fmt: skip


def _kw(drone):
    return {k: getattr(drone, k) for k in MODELS["first_principles"].params}


def test_hover_speed_is_the_thrust_curves():
    d = load_params("cf2x_L250")
    k0, k1, k2 = d.rpm2thrust
    w = d.hover_rpm
    assert k0 + k1 * w + k2 * w * w == pytest.approx(d.mass * 9.81 / 4, rel=1e-12)
    assert mt.hover_rpm(d) == w


@pytest.mark.parametrize("theta", [0.0, 0.4, 1.0, 1.7])
def test_each_rotors_thrust_and_heat_rate_are_the_terms(theta):
    d = _drone()
    p = _kw(d)
    rpm = np.array([15000.0, 15500.0, 16000.0, 14500.0])
    heat = np.array([theta, 0.5 * theta, 0.0, 1.2])
    z, q0 = np.zeros(3), np.array([0.0, 0.0, 0.0, 1.0])
    out = first_principles.dynamics(z, q0, z, z, rpm, None, None, None, heat, **p)
    k0, k1, k2 = d.rpm2thrust
    f = (k0 + k1 * rpm + k2 * rpm * rpm) * np.maximum(1.0 - C_W * heat, 0.0)
    np.testing.assert_allclose(out[2][2], -9.81 + f.sum() / d.mass, rtol=1e-12)
    roll = d.L * d.mixing_matrix[0] @ f  # the roll torque of the warmed thrusts
    want_w = np.linalg.solve(d.J, [roll, d.L * d.mixing_matrix[1] @ f, 0.0])
    np.testing.assert_allclose(out[3][:2], want_w[:2], rtol=1e-9)
    drive = (rpm / d.hover_rpm) ** 3
    np.testing.assert_allclose(out[5], (drive - heat) / TAU, rtol=1e-12)
    assert len(first_principles.dynamics(z, q0, z, z, rpm, **p)) == 5  # no heat: as before


def test_the_thrust_never_turns_negative():
    """``c_w θ > 1`` (a very hot motor): no thrust at all, a free fall."""
    d = _drone(c_w=0.9)
    z, q0 = np.zeros(3), np.array([0.0, 0.0, 0.0, 1.0])
    out = first_principles.dynamics(z, q0, z, z, np.full(4, 20000.0), None, None, None,
                                    np.full(4, 2.0), **_kw(d))  # fmt: skip
    np.testing.assert_allclose(out[2], [0.0, 0.0, -9.81], atol=1e-12)


@pytest.mark.parametrize("backend", ["numpy", "jax", "torch", "native"])
def test_the_simulator_warms_first_order_and_sinks_as_it_loses_thrust(backend):
    """Held at the hover speed from cold: ``θ(t) = 1 - e^{-t/τ}`` (the steady state 1, the time
    constant τ) and, with the thrust ``m g (1 - c_w θ)``, the vertical speed
    ``v(t) = -g c_w (t - τ (1 - e^{-t/τ}))``."""
    if backend == "native" and not native.available():
        pytest.skip("needs CasADi and a C compiler")
    d = _drone()
    sim = Simulator(d, n=2, dt=1 / 200, backend=backend, dtype="float64", world=None,
                    rotor_dynamics=False)  # fmt: skip
    sim.reset(pos=np.array([0.0, 0.0, 10.0]))
    assert np.all(np.asarray(sim.state.motor_heat) == 0.0)
    g = -float(d.gravity_vec[2])
    for t_end in (0.4, 2.0, 8.0):
        while sim.k < round(t_end * 200):
            state = sim.step(np.full((2, 4), d.hover_rpm))
        decay = math.exp(-t_end / TAU)
        np.testing.assert_allclose(np.asarray(state.motor_heat), 1.0 - decay, rtol=1e-9)
        v = -g * C_W * (t_end - TAU * (1.0 - decay))
        np.testing.assert_allclose(np.asarray(state.vel)[:, 2], v, rtol=1e-6)
    assert 1.0 - float(np.asarray(state.motor_heat)[0, 0]) < 1e-4  # 10 time constants: warm


def test_a_faster_rotor_warms_to_its_power():
    """At 1.1 Ω_h the steady state is the drive (1.1)³ = 1.331, each rotor its own."""
    d = _drone(tau=0.05)
    sim = Simulator(d, n=1, dt=1 / 500, backend="numpy", dtype="float64", world=None,
                    rotor_dynamics=False)  # fmt: skip
    sim.reset(pos=np.array([0.0, 0.0, 10.0]))
    cmd = d.hover_rpm * np.array([[1.1, 1.0, 0.9, 1.0]])
    for _ in range(1000):  # 2 s: 40 time constants
        state = sim.step(cmd)
    np.testing.assert_allclose(np.asarray(state.motor_heat)[0], [1.331, 1.0, 0.729, 1.0],
                               rtol=1e-9)  # fmt: skip


def test_with_rotor_dynamics_the_heat_follows_the_actual_speed():
    """With rotor states the drive is the rotors' own speed (a rotor held below its command
    by the lag warms less at first); the state order is rotor speeds, then heat."""
    d = _drone()
    sim = Simulator(d, n=1, dt=1 / 500, backend="numpy", dtype="float64", world=None)
    assert [n for n, _ in sim.system.fields][-2:] == ["rotor_vel", "motor_heat"]
    sim.reset(pos=np.array([0.0, 0.0, 10.0]), rotor_vel=np.full(4, 0.5 * d.hover_rpm))
    state = sim.step(np.full((1, 4), d.hover_rpm))
    lagged = float(np.asarray(state.motor_heat)[0, 0])
    sim.reset(pos=np.array([0.0, 0.0, 10.0]))
    state = sim.step(np.full((1, 4), d.hover_rpm))
    at_speed = float(np.asarray(state.motor_heat)[0, 0])
    assert 0.0 < lagged < 0.5 * at_speed
    np.testing.assert_allclose(at_speed, 1.0 - math.exp(-(1 / 500) / TAU), rtol=1e-9)


def test_euler_model_warms_as_the_quaternion_model():
    out = []
    for model in ("first_principles", "euler_zyx"):
        sim = Simulator(_drone(), n=1, dt=1 / 200, backend="numpy", dtype="float64", world=None,
                        model=model)  # fmt: skip
        sim.reset(pos=np.array([0.0, 0.0, 10.0]))
        for _ in range(200):
            state = sim.step(np.full((1, 4), 1.05 * sim.hover_rpm))
        out.append((np.asarray(state.motor_heat), np.asarray(state.vel)))
    for a, b in zip(*out, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("model", [first_principles, euler_zyx])
def test_casadi_twin_equals_the_numeric_model(rng, model):
    cs = pytest.importorskip("casadi")
    p = _kw(_drone())
    X_dot, X, U, _ = model.symbolic_dynamics(True, False, False, True, **p)
    f = cs.Function("f", [X, U], [X_dot])
    for _ in range(4):
        rpy = rng.uniform(-0.5, 0.5, 3)
        att = rotation.from_euler(rpy) if model is first_principles else rpy
        vel, w = rng.normal(size=3), rng.normal(size=3)
        rpm, rotor = rng.uniform(12000, 20000, 4), rng.uniform(12000, 20000, 4)
        heat = rng.uniform(0.0, 1.5, 4)
        want = np.concatenate(model.dynamics(np.zeros(3), att, vel, w, rpm, rotor, None, None,
                                             heat, **p))  # fmt: skip
        got = np.asarray(f(np.concatenate([np.zeros(3), att, vel, w, rotor, heat]), rpm)).ravel()
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_per_drone_coefficients_are_simulator_params():
    """``Simulator(params=)`` sets the warm-up per drone (a drone with 0 flies without it)."""
    sim = Simulator(_drone(c_w=0.0), n=3, dt=1 / 100, backend="numpy", dtype="float64",
                    world=None, rotor_dynamics=False,
                    params={"warmup_coef": np.array([0.0, 0.05, 0.1]),
                            "warmup_time": np.full(3, 0.5)})  # fmt: skip
    sim.reset(pos=np.array([0.0, 0.0, 10.0]))
    for _ in range(300):
        state = sim.step(np.full((3, 4), sim.hover_rpm))
    vz = np.asarray(state.vel)[:, 2]
    want = -9.81 * np.array([0.0, 0.05, 0.1]) * (3.0 - 0.5 * (1.0 - math.exp(-6.0)))
    np.testing.assert_allclose(vz, want, rtol=1e-6, atol=1e-9)
    with pytest.raises(ValueError, match="warmup_coef"):
        Simulator("cf2x_L250", n=2, params={"warmup_coef": np.array([0.05, 1.5])})
    with pytest.raises(ValueError, match=r"hover_rpm'\]\[0\]: must be a finite speed > 0"):
        Simulator("cf21_nanobench", n=2, params={"hover_rpm": np.array([-5.0, 20000.0])})
