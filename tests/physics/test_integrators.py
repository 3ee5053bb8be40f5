"""Integrators: measured convergence order, conservation laws, quaternion norm, Dzhanibekov."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import quadsim
from quadsim.engines.state import EulerState, State
from quadsim.engines.stepping import rollout
from quadsim.physics import integrators, rotation
from quadsim.physics.systems import make_system

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy


def fp_setup(name: str = "cf2x_L250"):
    params = quadsim.load_params(name)
    system = make_system("first_principles", 4, rotor_dynamics=True)
    p = {k: getattr(params, k) for k in system.param_spec}
    hover = quadsim.envelope(params).hover_rpm
    q0 = rotation.from_euler(np.array([0.3, -0.2, 0.1]))
    state = State(np.array([0.0, 0.0, 1.0]), q0, np.array([1.0, -0.5, 0.2]),
                  np.array([4.0, -3.0, 2.0]), np.full(4, hover))  # fmt: skip
    cmd = hover * np.array([1.06, 0.97, 1.04, 0.95])  # spins up every rotor: smooth, tumbling
    return system, p, state, cmd


def final_error(integrator, dt, T, ref):
    system, p, state, cmd = fp_setup()
    n = round(T / dt)
    final, _, _ = rollout(state, np.tile(cmd, (n, 1)), dt, system=system, params=p,
                          integrator=integrator, record=False)  # fmt: skip
    x = np.concatenate([f for f in final if f is not None])
    return np.linalg.norm(x[:13] - ref[:13]) / np.linalg.norm(ref[:13])


@pytest.fixture(scope="module")
def reference():
    system, p, state, cmd = fp_setup()
    T = 0.4
    n = 6400
    final, _, _ = rollout(jax.tree.map(jnp.asarray, state), jnp.tile(jnp.asarray(cmd), (n, 1)),
                          T / n, system=system, params=p, integrator=integrators.rk4,
                          record=False)  # fmt: skip
    return T, np.concatenate([np.asarray(f) for f in final])


def fitted_order(integrator, dts, T, ref):
    errs = [final_error(integrator, dt, T, ref) for dt in dts]
    slope = np.polyfit(np.log(dts), np.log(errs), 1)[0]
    return slope, errs


def test_euler_is_first_order(reference):
    T, ref = reference
    slope, errs = fitted_order(integrators.euler, [T / 50, T / 100, T / 200, T / 400], T, ref)
    assert abs(slope - 1.0) <= 0.15, (slope, errs)


def test_rk4_is_fourth_order(reference):
    T, ref = reference
    slope, errs = fitted_order(integrators.rk4, [T / 25, T / 50, T / 100, T / 200], T, ref)
    assert abs(slope - 4.0) <= 0.15, (slope, errs)
    assert errs[-1] < 1e-8


@pytest.mark.parametrize("name", ["semi_implicit", "geometric"])
def test_first_order_symplectic_variants_converge(reference, name):
    T, ref = reference
    slope, errs = fitted_order(integrators.INTEGRATORS[name], [T / 100, T / 200, T / 400], T, ref)
    assert abs(slope - 1.0) <= 0.2, (slope, errs)


def test_rk45_reference_matches_fine_rk4(reference):
    T, ref = reference
    rk45 = functools.partial(integrators.rk45, rtol=1e-11, atol=1e-12)
    assert final_error(rk45, T / 10, T, ref) < 1e-8


def test_every_integrator_runs_every_model():
    rng = np.random.default_rng(0)
    for model in ("first_principles", "euler_zyx", "wrench"):
        system = make_system(model, 4, rotor_dynamics=model != "wrench")
        params = quadsim.load_params("skydio2_x")
        p = {k: getattr(params, k) for k in system.param_spec}
        att = rotation.from_euler(np.array([0.1, 0.2, 0.3])) if system.attitude == "quat" else (
            np.array([0.1, 0.2, 0.3]))  # fmt: skip
        cmd = np.array([11.0, 0.01, -0.01, 0.001]) if model == "wrench" else np.full(4, 8600.0)
        for name, integ in integrators.INTEGRATORS.items():
            fields = [np.zeros(3), att, rng.normal(size=3), rng.normal(size=3)]
            if model != "wrench":
                fields.append(np.full(4, 8500.0))
            cls = State if system.attitude == "quat" else EulerState
            final, _, _ = rollout(cls(*fields), np.tile(cmd, (20, 1)), 0.005, system=system,
                                  params=p, integrator=integ, record=False)  # fmt: skip
            assert all(np.all(np.isfinite(f)) for f in final if f is not None), (model, name)
            if system.attitude == "quat" and name != "euler":  # euler shows its own drift
                assert abs(np.linalg.norm(final.quat) - 1.0) < 1e-12, (model, name)


def torque_free(J, w0, T, dt):
    """Rigid body with no rotors, no drag, no torque: the wrench model with zero command."""
    system = make_system("wrench")
    p = dict(mass=1.0, gravity_vec=np.zeros(3), J=J, J_inv=np.linalg.inv(J), drag_coef=0.0,
             rot_drag_coef=0.0)  # fmt: skip
    state = State(
        *(jnp.asarray(a) for a in (np.zeros(3), np.array([0.0, 0, 0, 1]), np.zeros(3), w0))
    )
    n = round(T / dt)
    return rollout(state, jnp.zeros((n, 4)), dt, system=system, params=p,
                   integrator=integrators.rk4)  # fmt: skip


def test_torque_free_tumbling_conserves_energy_and_momentum():
    J = np.diag([1.0, 2.0, 3.0])
    w0 = np.array([0.4, 0.1, -0.3])
    _, _, traj = torque_free(J, w0, 100.0, 1e-3)
    w = np.asarray(traj.ang_vel)[::100]
    R = np.asarray(rotation.to_matrix(traj.quat))[::100]
    energy = 0.5 * np.einsum("ti,ij,tj->t", w, J, w)
    H = np.einsum("tij,jk,tk->ti", R, J, w)
    e0, h0 = 0.5 * w0 @ J @ w0, np.linalg.norm(J @ w0)
    assert np.max(np.abs(energy - e0)) / e0 <= 1e-8
    assert np.max(np.abs(np.linalg.norm(H, axis=1) - h0)) / h0 <= 1e-8
    assert np.max(np.linalg.norm(H - H[0], axis=1)) / h0 <= 1e-7  # direction too


def test_quaternion_norm_after_a_million_rk4_steps():
    J = np.diag([1.0, 2.0, 3.0])
    final, _, _ = torque_free(J, np.array([30.0, 0.5, -20.0]), 1000.0, 1e-3)
    assert abs(float(jnp.linalg.norm(final.quat)) - 1.0) <= 1e-12


def test_intermediate_axis_spin_flips_periodically():
    """Dzhanibekov effect: spin about the intermediate axis reverses periodically."""
    J = np.diag([1.0, 2.0, 3.0])
    _, _, traj = torque_free(J, np.array([1e-3, 5.0, 1e-3]), 60.0, 1e-3)
    wy = np.asarray(traj.ang_vel)[:, 1]
    flips = np.flatnonzero(np.diff(np.sign(wy)) != 0)
    assert len(flips) >= 4  # it flips, and flips back, repeatedly
    periods = np.diff(flips)
    assert np.ptp(periods) <= 0.02 * periods.mean()  # regularly spaced
    assert np.abs(wy).max() == pytest.approx(5.0, rel=1e-6)  # each half-cycle spins at full rate
    # spin about the major or minor axis is stable: no flip
    _, _, stable = torque_free(J, np.array([1e-3, 1e-3, 5.0]), 20.0, 1e-3)
    assert np.all(np.asarray(stable.ang_vel)[:, 2] > 4.9)


def test_rk45_refuses_non_numpy_states():
    torch = pytest.importorskip("torch")
    system, p, state, cmd = fp_setup()
    t_state = State(*(torch.asarray(np.asarray(f)) for f in state))
    with pytest.raises(TypeError, match="NumPy reference integrator"):
        rollout(t_state, torch.asarray(np.tile(cmd, (2, 1))), 0.01, system=system, params=p,
                integrator=integrators.rk45, record=False)  # fmt: skip
