"""The axial inflow in the plant (quadsim.physics.models._rigid, ``inflow_coef``): a climb loses
thrust by ``max(1 - c_i v_z, 0)`` with ``v_z`` the air-relative speed along body z, in the numeric
models, their CasADi twins and the simulator; checked against hand-computed forces, an
equilibrium (the terminal climb speed) and the twins."""

from __future__ import annotations

import math

import numpy as np
import pytest

import quadsim
from quadsim.engines import native
from quadsim.engines.sim import Simulator, Wind
from quadsim.physics import rotation
from quadsim.physics.models import MODELS, euler_zyx, first_principles
from quadsim.physics.params import load_params

C_I = 0.05  # s/m: -5 % of thrust per m/s of climb


def _params(c_i=C_I, name="cf2x_L250"):
    """The model keywords of ``name`` without linear drag (so the thrust alone moves the drone)."""
    p = load_params(name)._replace(drag_matrix=np.zeros((3, 3)), inflow_coef=c_i)
    return {k: getattr(p, k) for k in MODELS["first_principles"].params}


def _thrusts(p, rpm):
    k0, k1, k2 = p["rpm2thrust"]
    return k0 + k1 * rpm + k2 * rpm * rpm


def _quat_roll(phi):
    return np.array([math.sin(phi / 2), 0.0, 0.0, math.cos(phi / 2)])


@pytest.mark.parametrize("v", [-2.0, 0.0, 1.0, 3.0])
@pytest.mark.parametrize("phi", [0.0, 0.6])
def test_climb_thrust_falls_by_the_factor_along_body_z(v, phi):
    p = _params()
    rpm = np.array([15000.0, 15500.0, 16000.0, 14500.0])
    vel = np.array([0.0, 0.0, v])  # world z; along body z that is v cos(phi)
    zero = np.zeros(3)
    acc = first_principles.dynamics(zero, _quat_roll(phi), vel, zero, rpm, **p)[2]
    factor = max(1.0 - C_I * v * math.cos(phi), 0.0)
    body_z = np.array([0.0, -math.sin(phi), math.cos(phi)])  # R e_z of a roll by phi
    want = np.asarray(p["gravity_vec"]) + body_z * _thrusts(p, rpm).sum() * factor / p["mass"]
    np.testing.assert_allclose(acc, want, rtol=1e-12, atol=1e-12)
    if v:  # the term is on: without it the thrust would be the hover curve's
        off = first_principles.dynamics(zero, _quat_roll(phi), vel, zero, rpm, **_params(0.0))[2]
        assert abs(off[2] - acc[2]) > 1e-3


def test_the_thrust_never_turns_negative_and_the_drag_torque_stays():
    p, p0 = _params(), _params(0.0)
    rpm = np.array([15000.0, 17000.0, 16000.0, 14000.0])
    q0, zero = np.array([0.0, 0.0, 0.0, 1.0]), np.zeros(3)
    fast = np.array([0.0, 0.0, 30.0])  # beyond 1 / c_i = 20 m/s: no thrust at all
    _, _, acc, w_dot, _ = first_principles.dynamics(zero, q0, fast, zero, rpm, **p)
    np.testing.assert_array_equal(acc, np.asarray(p["gravity_vec"], dtype=np.float64))
    tau = np.asarray(p["J"]) @ w_dot  # at ω = 0: J ω̇ = τ
    tau0 = np.asarray(p0["J"]) @ first_principles.dynamics(zero, q0, fast, zero, rpm, **p0)[3]
    np.testing.assert_allclose(tau[:2], 0.0, atol=1e-15)  # roll and pitch come from thrust
    assert abs(tau0[0]) > 1e-5 and abs(tau0[1]) > 1e-5
    np.testing.assert_allclose(tau[2], tau0[2], rtol=1e-12)  # the drag torque is not scaled
    # at 1 m/s of climb the roll and pitch torques scale with the thrust, by 0.95
    one = np.array([0.0, 0.0, 1.0])
    tau1 = np.asarray(p["J"]) @ first_principles.dynamics(zero, q0, one, zero, rpm, **p)[3]
    np.testing.assert_allclose(tau1[:2], 0.95 * tau0[:2], rtol=1e-12)
    np.testing.assert_allclose(tau1[2], tau0[2], rtol=1e-12)


def test_euler_model_agrees_with_the_quaternion_model(rng):
    p = _params()
    for _ in range(5):
        rpy = rng.uniform(-1.0, 1.0, 3)
        quat = rotation.from_euler(rpy)
        vel, w = rng.normal(size=3) * 3, rng.normal(size=3)
        rpm, rotor = rng.uniform(12000, 20000, 4), rng.uniform(12000, 20000, 4)
        a = first_principles.dynamics(np.zeros(3), quat, vel, w, rpm, rotor, **p)
        b = euler_zyx.dynamics(np.zeros(3), rpy, vel, w, rpm, rotor, **p)
        for i in (2, 3, 4):
            np.testing.assert_allclose(a[i], b[i], rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("model", [first_principles, euler_zyx])
def test_casadi_twin_equals_the_numeric_model(rng, model):
    cs = pytest.importorskip("casadi")
    p = _params()
    X_dot, X, U, _ = model.symbolic_dynamics(True, **p)
    f = cs.Function("f", [X, U], [X_dot])
    for v_up in (-3.0, 0.5, 4.0, 25.0):  # 25 m/s: clipped to no thrust
        rpy = rng.uniform(-0.5, 0.5, 3)
        att = rotation.from_euler(rpy) if model is first_principles else rpy
        vel = np.r_[rng.normal(size=2), v_up]
        w = rng.normal(size=3)
        rpm, rotor = rng.uniform(12000, 20000, 4), rng.uniform(12000, 20000, 4)
        want = np.concatenate(model.dynamics(np.zeros(3), att, vel, w, rpm, rotor, **p))
        got = np.asarray(f(np.concatenate([np.zeros(3), att, vel, w, rotor]), rpm)).ravel()
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def _terminal_climb(backend, c_i):
    drone = load_params("cf2x_L250")._replace(drag_matrix=np.zeros((3, 3)), inflow_coef=c_i)
    # RK4 at 100 Hz: far below its step limit for a climb with a 1.7-s time constant
    sim = Simulator(drone, n=2, dt=1 / 100, backend=backend, dtype="float64",
                    rotor_dynamics=False)  # fmt: skip
    sim.reset(pos=np.array([0.0, 0.0, 1.0]))
    weight = drone.mass * -drone.gravity_vec[2]
    thrust = 1.2 * weight  # 20 % above hover: climbs until c_i v T = 0.2 m g
    k0, k1, k2 = drone.rpm2thrust
    rpm = (-k1 + math.sqrt(k1 * k1 - 4 * k2 * (k0 - thrust / 4))) / (2 * k2)
    for _ in range(25 * 100):
        state = sim.step(np.full((2, 4), rpm))
    return np.asarray(state.vel), (1.0 - weight / thrust) / c_i


@pytest.mark.parametrize("backend", ["numpy", "native"])
def test_the_simulator_climbs_to_the_terminal_speed_inflow_allows(backend):
    if backend == "native" and not native.available():
        pytest.skip("needs CasADi and a C compiler")
    vel, v_t = _terminal_climb(backend, C_I)  # 3.33 m/s; time constant 1 / (1.2 g c_i) = 1.7 s
    np.testing.assert_allclose(vel[:, 2], v_t, rtol=1e-5)  # 25 s: 14.7 time constants
    np.testing.assert_allclose(vel[:, :2], 0.0, atol=1e-9)


def test_the_inflow_sees_the_air_not_the_ground():
    """Climbing at 1 m/s in an updraft of 1 m/s is hovering in the air: the same thrust."""
    drone = load_params("cf2x_L250")._replace(inflow_coef=C_I)
    out = []
    for w, v in ((1.0, 1.0), (0.0, 0.0)):
        sim = Simulator(drone, dt=1 / 500, backend="numpy", dtype="float64",
                        wind=Wind(mean=(0.0, 0.0, w)), rotor_dynamics=False)  # fmt: skip
        sim.reset(pos=np.array([0.0, 0.0, 1.0]), vel=np.array([0.0, 0.0, v]))
        out.append(np.asarray(sim.step(np.full((1, 4), 1.1 * sim.hover_rpm)).vel)[0, 2] - v)
    np.testing.assert_allclose(out[0], out[1], rtol=1e-12, atol=1e-15)
    assert out[1] > 3e-3  # 21 % above its weight: 0.0042 m/s a step, not a drone at rest


def test_per_drone_coefficients_are_simulator_params():
    sim = Simulator("cf2x_L250", n=3, dt=1 / 500, backend="numpy", dtype="float64",
                    params={"inflow_coef": np.array([0.0, 0.05, 0.1])})  # fmt: skip
    sim.reset(pos=np.array([0.0, 0.0, 1.0]), vel=np.array([0.0, 0.0, 2.0]))
    dv = np.asarray(sim.step(np.full((3, 4), sim.hover_rpm)).vel)[:, 2] - 2.0
    g_dt = 9.81 / 500
    lost = (dv[0] - dv[1:]) / g_dt  # the thrust lost, in weights: about c_i v
    np.testing.assert_allclose(lost, [0.1, 0.2], rtol=0.05)
    assert quadsim.load_params("cf21_nanobench").inflow_coef > 0
