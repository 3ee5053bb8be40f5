"""Tests of quadsim.physics.rotors: geometry vs presets and seeds, allocation, motor models."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.integrate import solve_ivp

import quadsim
from quadsim.physics import rotors
from quadsim.physics.models import MODELS, first_principles

SQ2 = math.sqrt(2.0)


def with_layout(geo: rotors.Geometry, base: str = "generic_x", **over) -> quadsim.Params:
    """A preset with its rotor layout replaced (and optionally other fields)."""
    p = quadsim.load_params(base)
    return p._replace(rotor_positions=geo.rotor_positions, rotor_spin=geo.rotor_spin, L=geo.L,
                      mixing_matrix=geo.mixing_matrix, **over)  # fmt: skip


LAYOUTS = {
    "plus": rotors.layout("plus", 0.11),
    "x": rotors.layout("x", 0.11),
    "hexa_x": rotors.layout("hexa_x", 0.15),
    "octo_plus": rotors.layout("octo_plus", 0.2, first_spin=-1),
}


# --- geometry: presets ---------------------------------------------------------------------------


def test_plus_layout_reproduces_f450_plus_exactly():
    p = quadsim.load_params("f450_plus")
    g = rotors.layout("plus", 0.17)
    np.testing.assert_array_equal(g.rotor_positions, p.rotor_positions)
    np.testing.assert_array_equal(g.rotor_spin, p.rotor_spin)
    np.testing.assert_array_equal(g.mixing_matrix, p.mixing_matrix)
    assert g.L == p.L


def test_x_layout_reproduces_generic_x_and_crazyflie_mixing():
    p = quadsim.load_params("generic_x")
    g = rotors.layout("x", 0.11)
    np.testing.assert_array_equal(g.mixing_matrix, p.mixing_matrix)
    np.testing.assert_allclose(g.rotor_positions, p.rotor_positions, rtol=1e-3)  # 0.0778 rounded
    cf = quadsim.load_params("cf2x_L250")
    g = rotors.layout("x", cf.L * SQ2, clockwise=True)
    np.testing.assert_array_equal(g.mixing_matrix, cf.mixing_matrix)
    np.testing.assert_allclose(g.rotor_positions, cf.rotor_positions, rtol=1e-15)


def test_mixing_from_geometry_general_and_errors():
    g = rotors.mixing_from_geometry([0.3, 2.0, 4.0], [0.1, 0.2, 0.15], [1, 1, -1])
    x, y = g.rotor_positions.T
    assert g.L == pytest.approx(np.max(np.abs(g.rotor_positions)))
    np.testing.assert_allclose(np.hypot(x, y), [0.1, 0.2, 0.15], rtol=1e-15)
    np.testing.assert_allclose(g.mixing_matrix, [y / g.L, -x / g.L, [-1, -1, 1]], rtol=1e-15)
    with pytest.raises(ValueError, match="spins"):
        rotors.mixing_from_geometry([0, 1], 0.1, [1, 2])
    with pytest.raises(ValueError, match="arm_lengths"):
        rotors.mixing_from_geometry([0, 1], [0.1, -0.1], [1, -1])
    with pytest.raises(ValueError, match="kind"):
        rotors.layout("tri", 0.1)


# --- geometry: seed matrices ---------------------------------------------------------------------

cT, cQ, d = 1.6e-8, 2.0e-10, 0.11  # symbols of seeds 003/004, as numbers


def test_seed003_allocation_matrix_exact():
    g = rotors.layout("plus", d)  # M1 front, M2 left, M3 back, M4 right; spins +,-,+,-
    A = rotors.rpm_sq_allocation_matrix(g.rotor_positions, g.rotor_spin, cT, cQ)
    seed = np.array([
        [cT, cT, cT, cT],
        [0.0, d * cT, 0.0, -d * cT],
        [-d * cT, 0.0, d * cT, 0.0],
        [-cQ, cQ, -cQ, cQ],
    ])  # fmt: skip
    np.testing.assert_array_equal(A, seed)
    # seed 003: T_max = 4 cT rpm_max^2 for the generic_x preset (rpm_max 20000)
    p = quadsim.load_params("generic_x")
    assert quadsim.envelope(p).thrust_max == pytest.approx(4 * 1.6e-8 * 20000.0**2, rel=1e-15)


def test_seed004_equations_2_and_3():
    g = rotors.layout("plus", d, clockwise=True)  # M1 front, M2 right, M3 back, M4 left
    np.testing.assert_array_equal(g.rotor_positions, [[d, 0], [0, -d], [-d, 0], [0, d]])
    A = rotors.rpm_sq_allocation_matrix(g.rotor_positions, g.rotor_spin, cT, cQ)
    l = d  # noqa: E741 (the seed's symbol)
    eq2 = np.array([
        [cT, cT, cT, cT],
        [0.0, -l * cT, 0.0, l * cT],
        [-l * cT, 0.0, l * cT, 0.0],
        [-cQ, cQ, -cQ, cQ],
    ])  # fmt: skip
    np.testing.assert_array_equal(A, eq2)
    a, b, c = 1 / (4 * cT), 1 / (2 * l * cT), 1 / (4 * cQ)
    eq3 = np.array([[a, 0, -b, -c], [a, -b, 0, c], [a, 0, b, -c], [a, b, 0, c]])
    # Column j of inv(A) solves A x = e_j, so LAPACK's rounding residue in it is relative to that
    # column's size (|b| = 2.8e8, |c| = 1.25e9): the seed's zeros come out as ~eps * 2.8e8 ~ 1e-8
    # on some BLAS builds. Compare each column scaled by its largest entry, rtol and atol 1e-13.
    col = np.abs(eq3).max(axis=0)
    np.testing.assert_allclose(np.linalg.inv(A) / col, eq3 / col, rtol=1e-13, atol=1e-13)
    # allocate() on a drone with this geometry and pure quadratic curves solves equation 3
    p = with_layout(g, rpm2thrust=np.array([0, 0, cT]), rpm2torque=np.array([0, 0, cQ]))
    u = np.array([6.0, 0.05, -0.08, 0.01])
    out = rotors.allocate(u, p)
    assert not out.saturated
    np.testing.assert_allclose(out.rpm**2, eq3 @ u, rtol=1e-12)


def test_seed002_x_torque_rows_and_pitch_sign_deviation():
    p = quadsim.load_params("skydio2_x")
    g = rotors.layout("x", 0.1 * SQ2, first_spin=-1, clockwise=True, first_angle_rad=math.pi / 4)
    np.testing.assert_allclose(g.rotor_positions, p.rotor_positions, rtol=1e-15)
    np.testing.assert_array_equal(g.mixing_matrix, p.mixing_matrix)  # M1 FL, clockwise
    A = rotors.allocation_matrix(p)
    l, kappa = 0.1, 4.375e-10 / 3.5e-8  # noqa: E741
    np.testing.assert_allclose(A[1], l * np.array([1, -1, -1, 1]), rtol=1e-15)  # seed roll
    np.testing.assert_allclose(A[3], kappa * np.array([1, -1, 1, -1]), rtol=1e-15)  # seed yaw
    seed_pitch = l * np.array([1, 1, -1, -1])
    np.testing.assert_allclose(A[2], -seed_pitch, rtol=1e-15)  # deviation: FLU sign
    for i, (x, y) in enumerate(p.rotor_positions):  # physical: tau = r x f
        tau = np.cross([x, y, 0.0], [0.0, 0.0, 1.0])
        np.testing.assert_allclose(A[1:3, i], tau[:2], rtol=1e-15)
    assert A[2, 0] < 0  # front-left rotor pushing harder pitches the nose up: tau_y < 0


@pytest.mark.parametrize("kind", ["hexa_plus", "hexa_x", "octo_plus", "octo_x", "plus", "x"])
def test_multirotor_mixing_physics(kind):
    g = rotors.layout(kind, 0.2)
    n = g.rotor_spin.size
    p = with_layout(g)
    A = rotors.allocation_matrix(p)
    assert np.linalg.matrix_rank(A) == 4
    np.testing.assert_allclose(A @ np.ones(n), [n, 0, 0, 0], atol=1e-14)  # equal speeds: no torque
    np.testing.assert_allclose(np.abs(g.rotor_positions).max(), g.L, rtol=0)
    np.testing.assert_allclose(np.hypot(*g.rotor_positions.T), 0.2, rtol=1e-15)
    for i in range(n):  # one rotor alone: tau_xy = r x f, tau_z opposes its spin
        rpm = np.zeros(n)
        rpm[i] = 15000.0
        w = rotors.wrench_from_rpm(rpm, p)
        f = rotors.thrust(rpm, p.rpm2thrust)[i]
        tau = np.cross([*g.rotor_positions[i], 0.0], [0.0, 0.0, f])
        np.testing.assert_allclose(w[:3], [f, tau[0], tau[1]], atol=1e-15)
        tp = rotors.drag_torque(rpm, p.rpm2torque)[i]
        assert w[3] == pytest.approx(-g.rotor_spin[i] * tp, rel=1e-15)


# --- allocation ----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(LAYOUTS))
def test_allocate_round_trip(kind, rng):
    p = with_layout(LAYOUTS[kind])
    a = rotors.make_allocator(p)
    n = p.rotor_spin.size
    hover = quadsim.envelope(p).hover_rpm
    scale = 0.8 if n == 4 else 0.1  # N > 4: the minimum-norm solution must stay in range
    rpm0 = hover * (1 + scale * rng.uniform(-1, 1, size=(200, n)))
    if n == 4:
        rpm0 = rng.uniform(p.rpm_min, p.rpm_max, size=(200, n))
    w = rotors.wrench_from_rpm(rpm0, p)
    out = rotors.allocate(w, a)
    assert not out.saturated.any()
    np.testing.assert_allclose(out.wrench, w, rtol=1e-10, atol=1e-10 * np.abs(w).max())
    assert np.abs(out.lost).max() <= 1e-10 * np.abs(w).max()
    if n == 4:
        np.testing.assert_allclose(out.rpm, rpm0, rtol=1e-10)


@pytest.mark.parametrize("name", quadsim.list_presets())
def test_hover_wrench_gives_hover_rpm(name):
    p = quadsim.load_params(name)
    w = np.array([p.mass * -p.gravity_vec[2], 0.0, 0.0, 0.0])
    out = rotors.allocate(w, p)
    np.testing.assert_allclose(out.rpm, quadsim.envelope(p).hover_rpm, rtol=1e-12)
    assert not out.saturated
    np.testing.assert_allclose(out.lost, 0.0, atol=1e-12)


def test_nonquadratic_curves_exact_thrust_approximate_yaw():
    p = quadsim.load_params("cf2x_L250")  # k1, m1 != 0: kappa linearised at hover
    a = rotors.make_allocator(p)
    w = np.array([0.3, 1e-3, -2e-3, 5e-5])
    out = rotors.allocate(w, a)
    assert not out.saturated
    np.testing.assert_allclose(out.wrench[:3], w[:3], rtol=1e-12)
    assert out.wrench[3] == pytest.approx(w[3], rel=0.05)  # far from hover: second order
    np.testing.assert_allclose(out.lost, w - out.wrench, rtol=0, atol=0)
    # near hover the linearised yaw row is exact to first order (m2/k2 would be 8 % off)
    weight = p.mass * -p.gravity_vec[2]
    near = rotors.allocate(np.array([weight, 2e-4, -1e-4, 1e-4]), a)
    assert near.wrench[3] == pytest.approx(1e-4, rel=1e-3)
    assert a.kappa == pytest.approx(
        (p.rpm2torque[1] + 2 * p.rpm2torque[2] * quadsim.envelope(p).hover_rpm)
        / (p.rpm2thrust[1] + 2 * p.rpm2thrust[2] * quadsim.envelope(p).hover_rpm),
        rel=1e-12,
    )


@pytest.mark.parametrize("kind", list(LAYOUTS))
def test_infeasible_yaw_keeps_thrust_and_roll_pitch(kind):
    p = with_layout(LAYOUTS[kind])
    n = p.rotor_spin.size
    w = np.array([p.mass * 9.81, 0.05, -0.03, 5.0])
    out = rotors.allocate(w, p)
    assert out.saturated
    np.testing.assert_allclose(out.wrench[:3], w[:3], rtol=1e-9, atol=1e-12)
    assert 0 < out.wrench[3] < w[3]
    np.testing.assert_allclose(out.lost[:3], 0.0, atol=1e-9)
    np.testing.assert_array_equal(out.lost, w - out.wrench)
    assert out.rpm.min() == p.rpm_min or out.rpm.max() == p.rpm_max  # yaw limited by a bound
    np.testing.assert_allclose(rotors.wrench_from_rpm(out.rpm, p), out.wrench, rtol=1e-15)
    assert out.rpm.shape == (n,)


def test_infeasible_roll_keeps_thrust():
    p = quadsim.load_params("generic_x")
    w = np.array([8.0, 3.0, 0.0, 0.02])
    out = rotors.allocate(w, p)
    assert out.saturated
    assert out.wrench[0] == pytest.approx(8.0, rel=1e-12)
    assert 0 < out.wrench[1] < 3.0
    assert abs(out.wrench[2]) < 1e-12


def test_yaw_that_makes_roll_feasible_is_used():
    p = quadsim.load_params("generic_x")
    # f = base 3.45 + roll/pitch (0, 3, 0, -3) + yaw 0.25 (1, -1, 1, -1) [N]: base + roll/pitch
    # alone leaves [f(3000), f(20000)] = [0.144, 6.4] (6.45 N), the yaw brings it back in
    f0 = np.array([3.7, 6.2, 3.7, 0.2])
    rpm0 = np.sqrt(f0 / p.rpm2thrust[2])
    w = rotors.wrench_from_rpm(rpm0, p)
    a = rotors.make_allocator(p)
    base_rp = a.P[:, :3] @ w[:3]
    assert base_rp.max() > a.thrust_max
    out = rotors.allocate(w, a)
    assert not out.saturated
    np.testing.assert_allclose(out.rpm, rpm0, rtol=1e-10)


def test_thrust_beyond_range():
    p = quadsim.load_params("generic_x")
    out = rotors.allocate(np.array([[100.0, 0.01, 0.0, 0.0], [-5.0, 0.0, 0.1, 0.0]]), p)
    np.testing.assert_allclose(out.rpm[0], p.rpm_max, rtol=1e-14)
    np.testing.assert_allclose(out.rpm[1], p.rpm_min, rtol=1e-12)
    assert out.saturated.all()
    assert out.wrench[0, 0] == pytest.approx(quadsim.envelope(p).thrust_max, rel=1e-14)
    pure = rotors.allocate(np.array([100.0, 0.0, 0.0, 0.0]), p)
    assert pure.saturated and pure.lost[0] == pytest.approx(100.0 - 25.6, rel=1e-14)
    assert rotors.allocate(np.array([-5.0, 0.0, 0.0, 0.0]), p).saturated


def test_huge_and_nan_requests():
    p = quadsim.load_params("generic_x")
    signs = np.array(np.meshgrid(*[[-1.0, 0.0, 1.0]] * 4)).reshape(4, -1).T
    for big in (1e9, np.inf):
        w = np.zeros_like(signs)
        w[signs > 0], w[signs < 0] = big, -big
        out = rotors.allocate(w, p)
        assert np.all(np.isfinite(out.rpm)) and np.all(np.isfinite(out.wrench))
        assert np.all((out.rpm >= p.rpm_min) & (out.rpm <= p.rpm_max))
    w = np.array([[np.nan, 0, 0, 0], [6.0, 0, 0, np.nan], [6.0, 0, 0, 0]])
    out = rotors.allocate(w, p)
    assert np.all(np.isnan(out.rpm[:2])) and np.all(np.isnan(out.lost[:2]))
    np.testing.assert_array_equal(out.saturated, [True, True, False])
    assert np.all(np.isfinite(out.rpm[2]))


def test_batch_equals_loop(rng):
    p = quadsim.load_params("generic_x")
    a = rotors.make_allocator(p)
    w = np.column_stack([rng.uniform(-2, 30, 64), rng.normal(0, 0.3, (64, 2)),
                         rng.normal(0, 0.05, 64)]).reshape(8, 8, 4)  # fmt: skip
    out = rotors.allocate(w, a)
    assert out.rpm.shape == (8, 8, 4) and out.saturated.shape == (8, 8)
    for idx in np.ndindex(8, 8):
        one = rotors.allocate(w[idx], a)
        for got, want in zip(out, one, strict=True):
            np.testing.assert_allclose(got[idx], want, rtol=1e-13, atol=1e-13)


def test_backends_agree(xp, rng):
    p = with_layout(LAYOUTS["hexa_x"])
    a = rotors.make_allocator(p)
    w = np.column_stack([rng.uniform(0, 40, 32), rng.normal(0, 0.5, (32, 2)),
                         rng.normal(0, 0.1, 32)])  # fmt: skip
    ref = rotors.allocate(w, a)
    out = rotors.allocate(xp.asarray(w), a)
    assert out.rpm.dtype == xp.dtype and out.wrench.dtype == xp.dtype
    tol = xp.rtol if xp.bits == 64 else 1e-4
    np.testing.assert_allclose(xp.numpy(out.rpm), ref.rpm, rtol=tol)
    np.testing.assert_allclose(xp.numpy(out.wrench), ref.wrench, rtol=tol, atol=tol * 40)
    np.testing.assert_array_equal(xp.numpy(out.saturated), ref.saturated)
    rpm = xp.asarray(rng.uniform(p.rpm_min, p.rpm_max, (5, 6)))
    got = rotors.wrench_from_rpm(rpm, p)
    np.testing.assert_allclose(xp.numpy(got), rotors.wrench_from_rpm(xp.numpy(rpm), p), rtol=tol,
                               atol=tol * 1e-3)  # fmt: skip
    dyn = rotors.asymmetric_quadratic(rpm, rpm * 0.9 + 500.0, p.rotor_dyn_coef)
    assert dyn.dtype == xp.dtype


def test_jax_jit_matches_numpy(rng):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    a = rotors.make_allocator(quadsim.load_params("generic_x"))
    w = np.column_stack([rng.uniform(0, 40, 16), rng.normal(0, 1, (16, 3))])
    out = jax.jit(lambda w: rotors.allocate(w, a))(jax.numpy.asarray(w))
    ref = rotors.allocate(w, a)
    for got, want in zip(out, ref, strict=True):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12, atol=1e-12)


# --- motor models --------------------------------------------------------------------------------


def test_first_order_lag_step_response_seed003():
    k_m, w0, w1 = 36.5, 3000.0, 15000.0  # seed 003: k_m = 36.5 1/s
    t = np.linspace(0.0, 0.2, 41)
    sol = solve_ivp(lambda _, y: rotors.first_order_lag(y, np.full(2, w1), k_m), (0, 0.2),
                    [w0, w0], t_eval=t, rtol=1e-11, atol=1e-8)  # fmt: skip
    exact = w1 + (w0 - w1) * np.exp(-k_m * t)
    np.testing.assert_allclose(sol.y[0], exact, rtol=1e-8)


def test_asymmetric_quadratic_matches_model_and_is_asymmetric(rng):
    p = quadsim.load_params("cf2x_P250")
    rpm, cmd = rng.uniform(12000, 24000, (2, 10, 4))
    got = rotors.asymmetric_quadratic(rpm, cmd, p.rotor_dyn_coef)
    c0, c1, c2, c3 = p.rotor_dyn_coef
    want = np.where(cmd > rpm, c0 * (cmd - rpm) + c1 * (cmd**2 - rpm**2),
                    c2 * (cmd - rpm) + c3 * (cmd**2 - rpm**2))  # fmt: skip
    np.testing.assert_allclose(got, want, rtol=1e-13)
    kw = {k: getattr(p, k) for k in MODELS["first_principles"].params}
    z = np.zeros((10, 3))
    q = np.tile([0.0, 0.0, 0.0, 1.0], (10, 1))
    model = first_principles.dynamics(z, q, z, z, cmd, rpm, **kw)[4]
    np.testing.assert_allclose(got, model, rtol=1e-13)
    coef = [20.0, 0.0, 5.0, 0.0]  # spin-up 4x faster than spin-down
    up = rotors.asymmetric_quadratic(np.array([10000.0]), np.array([12000.0]), coef)
    down = rotors.asymmetric_quadratic(np.array([12000.0]), np.array([10000.0]), coef)
    assert up[0] == pytest.approx(4 * -down[0]) and up[0] == 40000.0
    batched = rotors.asymmetric_quadratic(rpm, cmd, np.tile(p.rotor_dyn_coef, (10, 1)))
    np.testing.assert_allclose(batched, got, rtol=1e-15)


@pytest.mark.parametrize("name", ["cf2x_L250", "f450_plus", "skydio2_x"])
def test_wrench_from_rpm_matches_first_principles(name, rng):
    p = quadsim.load_params(name)
    kw = {k: getattr(p, k) for k in MODELS["first_principles"].params}
    kw["drag_matrix"] = np.zeros((3, 3))
    rpm = rng.uniform(p.rpm_min, p.rpm_max, (20, 4))
    z = np.zeros((20, 3))
    q = np.tile([0.0, 0.0, 0.0, 1.0], (20, 1))
    _, _, vel_dot, ang_dot, _ = first_principles.dynamics(z, q, z, z, rpm, **kw)
    w = rotors.wrench_from_rpm(rpm, p)
    force = p.mass * (vel_dot - p.gravity_vec)
    np.testing.assert_allclose(force[:, :2], 0.0, atol=1e-15)
    np.testing.assert_allclose(force[:, 2], w[:, 0], rtol=1e-12)
    np.testing.assert_allclose(ang_dot @ p.J.T, w[:, 1:], rtol=1e-9, atol=1e-12 * np.abs(w).max())
    np.testing.assert_allclose(rotors.thrust(rpm, p.rpm2thrust).sum(-1), w[:, 0], rtol=1e-14)
