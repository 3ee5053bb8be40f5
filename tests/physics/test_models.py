"""Physics tests of the models: equilibria, conservation laws, finite differences, twins."""

from __future__ import annotations

import numpy as np
import pytest

import quadsim
from quadsim.physics import rotation
from quadsim.physics.models import MODELS, euler_zyx, first_principles, get_model, wrench
from quadsim.physics.models._rigid import RPM_TO_RAD_S

PRESETS = quadsim.list_presets()


def fp_params(name: str = "cf2x_L250", **over) -> dict:
    p = quadsim.load_params(name)._replace(**over)
    return {k: getattr(p, k) for k in MODELS["first_principles"].params}


def wrench_params(name: str = "skydio2_x") -> dict:
    p = quadsim.load_params(name)
    return {k: getattr(p, k) for k in MODELS["wrench"].params}


def random_state(rng, batch=(), n=4, rpm=(12000.0, 20000.0), max_rate=6.0):
    q = rng.normal(size=(*batch, 4))
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    return dict(
        pos=rng.normal(size=(*batch, 3)),
        quat=q,
        vel=rng.normal(size=(*batch, 3)) * 3,
        ang_vel=rng.uniform(-max_rate, max_rate, size=(*batch, 3)),
        cmd=rng.uniform(*rpm, size=(*batch, n)),
        rotor_vel=rng.uniform(*rpm, size=(*batch, n)),
        dist_f=rng.normal(size=(*batch, 3)) * 0.01,
        dist_t=rng.normal(size=(*batch, 3)) * 1e-4,
    )


def fp_call(s: dict, p: dict, **drop):
    args = [s["pos"], s["quat"], s["vel"], s["ang_vel"], s["cmd"]]
    args += [None if drop.get(k) else s[k] for k in ("rotor_vel", "dist_f", "dist_t")]
    return first_principles.dynamics(*args, **p)


# --- attitude kinematics -------------------------------------------------------------------------


def test_quat_dot_matches_exact_rotation_finite_difference(rng):
    p = fp_params()
    for _ in range(20):
        s = random_state(rng)
        qd = fp_call(s, p)[1]
        h = 1e-6
        fwd = rotation.integrate(s["quat"], s["ang_vel"], h)
        bwd = rotation.integrate(s["quat"], s["ang_vel"], -h)
        fd = (fwd - bwd) / (2 * h)
        assert np.linalg.norm(qd - fd) <= 1e-8 * np.linalg.norm(fd)


def test_quat_dot_is_not_the_seed_scalar_first_formula(rng):
    """Seed 000's symbolic quat_dot (scalar-first matrix on xyzw) disagrees with the truth."""
    s = random_state(rng)
    w, q = s["ang_vel"], s["quat"]
    xi = np.block([[np.zeros((1, 1)), -w[None, :]], [w[:, None], -_skew(w)]])
    seed = 0.5 * xi @ q
    ours = fp_call(s, fp_params())[1]
    assert np.linalg.norm(seed - ours) > 0.1 * np.linalg.norm(ours)


def _skew(w):
    return np.array([[0, -w[2], w[1]], [w[2], 0, -w[0]], [-w[1], w[0], 0]])


# --- gyroscopic torque and angular momentum ------------------------------------------------------


def test_gyroscopic_torque_does_no_work(rng):
    """With aerodynamic curves zeroed, J ω̇ = -ω × h_r - ω × Jω, so ω · J ω̇ = 0."""
    p = fp_params(rpm2thrust=np.zeros(3), rpm2torque=np.zeros(3), prop_inertia=5e-6)
    for _ in range(50):
        s = random_state(rng)
        w_dot = fp_call(s, p, rotor_vel=True, dist_f=True, dist_t=True)[3]
        power = s["ang_vel"] @ (p["J"] @ w_dot)
        scale = np.linalg.norm(s["ang_vel"]) * np.linalg.norm(p["J"] @ w_dot) + 1e-300
        h = p["prop_inertia"] * RPM_TO_RAD_S * np.abs(s["cmd"]).sum()
        assert np.linalg.norm(w_dot) > 0 and h > 0
        assert abs(power) <= 1e-12 * scale


def test_world_angular_momentum_of_body_and_rotors_is_conserved(rng):
    """dH/dt = 0 for H = R (J ω + h_r) when no external torque acts (rotors spinning up/down)."""
    p = fp_params(rpm2thrust=np.zeros(3), rpm2torque=np.zeros(3), prop_inertia=2e-6)
    m_yaw = p["mixing_matrix"][2]
    J = p["J"]
    for _ in range(50):
        s = random_state(rng)
        _, _, _, w_dot, rotor_dot = fp_call(s, p, dist_f=True, dist_t=True)
        R = rotation.to_matrix(s["quat"])
        w = s["ang_vel"]
        h = np.array([0, 0, -p["prop_inertia"] * RPM_TO_RAD_S * m_yaw @ s["rotor_vel"]])
        h_dot = np.array([0, 0, -p["prop_inertia"] * RPM_TO_RAD_S * m_yaw @ rotor_dot])
        H_dot = R @ _skew(w) @ (J @ w + h) + R @ (J @ w_dot + h_dot)
        scale = np.linalg.norm(R @ _skew(w) @ (J @ w + h)) + np.linalg.norm(J @ w_dot)
        assert np.abs(rotor_dot).max() > 1.0  # the rotors really accelerate
        assert np.linalg.norm(H_dot) <= 1e-12 * scale


def test_seed_gyroscopic_sign_would_violate_conservation(rng):
    """The check above is sharp: seed 000's same-sign torque changes the angular momentum."""
    p = fp_params(rpm2thrust=np.zeros(3), rpm2torque=np.zeros(3), prop_inertia=2e-6)
    s = random_state(rng)
    w = s["ang_vel"]
    hz = -p["prop_inertia"] * RPM_TO_RAD_S * p["mixing_matrix"][2] @ s["cmd"]
    seed_tau = np.array([w[1] * hz, w[0] * hz, 0.0])  # J_p (-ω_y M2Ω, -ω_x M2Ω) with M2Ω = -hz/J_p
    true_tau = -np.cross(w, [0, 0, hz])
    assert abs(w @ seed_tau) > 1e-6 * np.linalg.norm(w) * np.linalg.norm(seed_tau)
    assert abs(w @ true_tau) <= 1e-15 * np.linalg.norm(w) * np.linalg.norm(true_tau)


# --- equilibria ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", PRESETS)
def test_hover_is_an_equilibrium(name):
    params = quadsim.load_params(name)
    env = quadsim.envelope(params)
    n = params.mixing_matrix.shape[1]
    p = {k: getattr(params, k) for k in MODELS["first_principles"].params}
    cmd = np.full(n, env.hover_rpm)
    zero, quat = np.zeros(3), np.array([0.0, 0, 0, 1])
    out = first_principles.dynamics(zero, quat, zero, zero, cmd, cmd, **p)
    g = np.linalg.norm(params.gravity_vec)
    assert np.abs(out[2]).max() <= 1e-12 * g
    assert np.abs(out[3]).max() <= 1e-9
    assert np.abs(out[4]).max() <= 1e-9 * env.hover_rpm
    assert np.abs(out[1]).max() == 0.0
    e = euler_zyx.dynamics(zero, zero, zero, zero, cmd, cmd, **p)
    for a, b in zip(e[2:], out[2:], strict=True):
        np.testing.assert_allclose(a, b, atol=1e-12)
    w = wrench.dynamics(
        zero,
        quat,
        zero,
        zero,
        np.array([params.mass * g, 0, 0, 0]),
        **{k: getattr(params, k) for k in MODELS["wrench"].params},
    )
    assert np.abs(w[2]).max() <= 1e-12 * g and np.abs(w[3]).max() == 0.0


def test_wrench_terminal_velocity_is_an_equilibrium():
    """Level flight at tilt θ with v = v_terminal(θ): thrust, gravity and drag balance."""
    params = quadsim.load_params("skydio2_x")
    p = wrench_params()
    g = np.linalg.norm(params.gravity_vec)
    for deg in (5.0, 10.0, 30.0):
        th = np.radians(deg)
        v = quadsim.terminal_velocity(params, th)
        quat = rotation.from_euler(np.array([0.0, th, 0.0]))  # pitch forward: thrust toward +x
        cmd = np.array([params.mass * g / np.cos(th), 0, 0, 0])
        out = wrench.dynamics(np.zeros(3), quat, np.array([v, 0, 0]), np.zeros(3), cmd, **p)
        np.testing.assert_allclose(out[2], 0.0, atol=1e-12)


# --- sign conventions of the mixing matrix -------------------------------------------------------


@pytest.mark.parametrize("name", PRESETS)
def test_rotor_geometry_gives_the_physical_torque(name):
    """Speeding up one rotor at (x, y) tilts the body about r × e_z = (y, -x, 0)."""
    params = quadsim.load_params(name)
    p = {k: getattr(params, k) for k in MODELS["first_principles"].params}
    env = quadsim.envelope(params)
    n = params.mixing_matrix.shape[1]
    zero, quat = np.zeros(3), np.array([0.0, 0, 0, 1])
    for i in range(n):
        cmd = np.full(n, env.hover_rpm)
        cmd[i] *= 1.05
        w_dot = first_principles.dynamics(zero, quat, zero, zero, cmd, **p)[3]
        tau = params.J @ w_dot
        x, y = params.rotor_positions[i]
        assert np.sign(tau[0]) == np.sign(y) or abs(y) < 1e-12
        assert np.sign(tau[1]) == -np.sign(x) or abs(x) < 1e-12
        # the body yaws against the rotor's spin
        assert np.sign(tau[2]) == -params.rotor_spin[i]


def test_matches_seed_001_reference_derivative(rng):
    """f450_plus against an independent transcription of seed 001's qd_derivative."""
    params = quadsim.load_params("f450_plus")
    p = fp_params("f450_plus", prop_inertia=0.0)
    KT, KQ, Lr, m, g = 3.13e-5, 7.5e-7, 0.17, 0.5, 9.81
    Ixx, Iyy, Izz = 2.3e-3, 2.3e-3, 4.5e-3
    for _ in range(10):
        s = random_state(rng)
        om = rng.uniform(150, 250, 4)  # rad/s
        w2 = om**2
        T = KT * w2.sum()
        tx, ty = KT * Lr * (w2[1] - w2[3]), KT * Lr * (w2[2] - w2[0])
        tz = KQ * (-w2[0] + w2[1] - w2[2] + w2[3])
        qx, qy, qz, qw = s["quat"]
        wx, wy, wz = s["ang_vel"]
        f = rotation.to_matrix(s["quat"]) @ [0, 0, T]
        acc = [f[0] / m, f[1] / m, f[2] / m - g]
        dq = 0.5 * np.array(
            [
                qw * wx + qy * wz - qz * wy,
                qw * wy - qx * wz + qz * wx,
                qw * wz + qx * wy - qy * wx,
                -qx * wx - qy * wy - qz * wz,
            ]
        )
        Iw = np.array([Ixx * wx, Iyy * wy, Izz * wz])
        dw = [
            (tx - (wy * Iw[2] - wz * Iw[1])) / Ixx,
            (ty - (wz * Iw[0] - wx * Iw[2])) / Iyy,
            (tz - (wx * Iw[1] - wy * Iw[0])) / Izz,
        ]
        out = first_principles.dynamics(
            s["pos"], s["quat"], s["vel"], s["ang_vel"], om / RPM_TO_RAD_S, **p
        )
        np.testing.assert_allclose(out[1], dq, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(out[2], acc, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(out[3], dw, rtol=1e-10, atol=1e-10)
    assert params.mass == m


# --- Euler model ---------------------------------------------------------------------------------


def test_euler_and_quaternion_models_agree(rng):
    p = fp_params("cf21B_500")
    for _ in range(30):
        s = random_state(rng)
        rpy = np.array([rng.uniform(-3, 3), rng.uniform(-1.3, 1.3), rng.uniform(-3, 3)])
        quat = rotation.from_euler(rpy)
        rest = [s[k] for k in ("vel", "ang_vel", "cmd", "rotor_vel", "dist_f", "dist_t")]
        a = first_principles.dynamics(s["pos"], quat, *rest, **p)
        b = euler_zyx.dynamics(s["pos"], rpy, *rest, **p)
        for x, y in zip(a[2:], b[2:], strict=True):
            np.testing.assert_allclose(x, y, rtol=1e-10, atol=1e-10)
        # Euler rates against a finite difference of the exact rotation
        h = 1e-6
        e_f = rotation.to_euler(rotation.integrate(quat, s["ang_vel"], h))
        e_b = rotation.to_euler(rotation.integrate(quat, s["ang_vel"], -h))
        fd = np.angle(np.exp(1j * (e_f - e_b))) / (2 * h)
        np.testing.assert_allclose(b[1], fd, rtol=1e-6, atol=1e-6)


def test_euler_small_angle_and_gimbal_lock(rng):
    p = fp_params()
    s = random_state(rng)
    args = (s["pos"], np.array([0.1, 0.2, 0.3]), s["vel"], s["ang_vel"], s["cmd"])
    small = euler_zyx.dynamics(*args, small_angle=True, **p)[1]
    np.testing.assert_array_equal(small, s["ang_vel"])
    exact = euler_zyx.dynamics(*args, **p)[1]
    assert not np.allclose(exact, small)
    lock = euler_zyx.dynamics(s["pos"], np.array([0.1, np.pi / 2, 0.3]), *args[2:], **p)
    assert np.all(np.isnan(lock[1]))
    assert np.all(np.isfinite(lock[3]))  # everything but the singular kinematics stays finite
    near = euler_zyx.dynamics(s["pos"], np.array([0.1, np.radians(89.0), 0.3]), *args[2:], **p)
    assert np.all(np.isfinite(near[1]))


def test_dynamics_flat_uses_seed_003_layout(rng):
    p = fp_params("generic_x")
    s = random_state(rng, batch=(3,), rpm=(3000.0, 20000.0))
    rpy = rng.uniform(-0.5, 0.5, (3, 3))
    x = np.concatenate([s["pos"], s["vel"], rpy, s["ang_vel"], s["rotor_vel"]], axis=-1)
    xd = euler_zyx.dynamics_flat(x, s["cmd"], **p)
    pd, ed, vd, wd, rd = euler_zyx.dynamics(
        s["pos"], rpy, s["vel"], s["ang_vel"], s["cmd"], s["rotor_vel"], **p
    )
    np.testing.assert_array_equal(xd, np.concatenate([pd, vd, ed, wd, rd], axis=-1))
    k_m = 36.5  # seed 003's first-order lag
    np.testing.assert_allclose(rd, k_m * (s["cmd"] - s["rotor_vel"]), rtol=1e-12)
    with pytest.raises(ValueError, match=r"state must have shape \(\.\.\., 16\)"):
        euler_zyx.dynamics_flat(x[..., :15], s["cmd"], **p)


# --- CasADi twins --------------------------------------------------------------------------------


@pytest.mark.parametrize("model", [first_principles, euler_zyx])
def test_rotor_models_apply_quadratic_and_rotational_drag(model):
    """skydio2_x's k_d and c_w act in the rotor-level models as in the wrench model (seed 002):
    level flight at v_terminal(theta) is an equilibrium, and rotational drag is -c_w w."""
    params = quadsim.load_params("skydio2_x")
    f = quadsim.parametrize(model.dynamics, params)
    th = np.radians(10.0)
    v = quadsim.terminal_velocity(params, th)
    att = rotation.from_euler(np.array([0.0, th, 0.0])) if model is first_principles else (
        np.array([0.0, th, 0.0]))  # fmt: skip
    thrust = params.mass * 10.0 / np.cos(th) / 4
    rpm = quadsim.physics.params.invert_curve(params.rpm2thrust, thrust)
    cmd = np.full(4, rpm)
    w = np.array([0.3, -0.2, 0.1])
    out = f(np.zeros(3), att, np.array([v, 0.0, 0.0]), np.zeros(3), cmd, cmd)
    np.testing.assert_allclose(out[2], 0.0, atol=1e-12)
    spun = f(np.zeros(3), att, np.zeros(3), w, cmd, cmd)[3]
    level = f(np.zeros(3), att, np.zeros(3), np.zeros(3), cmd, cmd)[3]
    # J w_dot = tau - c w - w x (J w) - w x h_r: the drag part is linear in w
    J = params.J
    h_r = -params.prop_inertia * (params.mixing_matrix[2] @ (cmd * 2 * np.pi / 60)) * np.eye(3)[2]
    rhs = J @ (spun - level) + np.cross(w, J @ w) + np.cross(w, h_r)
    np.testing.assert_allclose(rhs, -params.rot_drag_coef * w, rtol=1e-9, atol=1e-15)


def _fp_x(s, quat_or_rpy, flags):
    parts = [s["pos"], quat_or_rpy, s["vel"], s["ang_vel"]]
    parts += [s[k] for k, on in zip(("rotor_vel", "dist_f", "dist_t"), flags, strict=True) if on]
    return np.concatenate(parts)


@pytest.mark.parametrize("flags", [(True, False, False), (False, False, False), (True, True, True)])
@pytest.mark.parametrize("name", ["cf2x_L250", "cf21B_500", "f450_plus", "generic_x", "skydio2_x"])
def test_casadi_twins_equal_numeric(rng, name, flags):
    cs = pytest.importorskip("casadi")
    p = fp_params(name)
    for model, att in ((first_principles, "quat"), (euler_zyx, "rpy")):
        X_dot, X, U, Y = quadsim.parametrize(model.symbolic_dynamics, name)(*flags)
        f = cs.Function("f", [X, U], [X_dot, Y])
        for _ in range(5):
            s = random_state(rng)
            a = s["quat"] if att == "quat" else rng.uniform(-1.2, 1.2, 3)
            out = model.dynamics(
                s["pos"],
                a,
                s["vel"],
                s["ang_vel"],
                s["cmd"],
                *(
                    s[k] if on else None
                    for k, on in zip(("rotor_vel", "dist_f", "dist_t"), flags, strict=True)
                ),
                **p,
            )
            want = np.concatenate(
                [o for o in out if o is not None] + [np.zeros(3)] * sum(flags[1:])
            )
            x = _fp_x(s, a, flags)
            got, y = (np.asarray(v).ravel() for v in f(x, s["cmd"]))
            assert X.shape[0] == X_dot.shape[0] == x.size
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
            np.testing.assert_array_equal(y, np.concatenate([s["pos"], a]))


def test_casadi_wrench_twin_equals_numeric(rng):
    cs = pytest.importorskip("casadi")
    p = wrench_params()
    X_dot, X, U, _ = wrench.symbolic_dynamics(True, True, **p)
    f = cs.Function("f", [X, U], [X_dot])
    for _ in range(5):
        s = random_state(rng)
        u = np.array([12.0, 0.1, -0.2, 0.05])
        out = wrench.dynamics(
            s["pos"], s["quat"], s["vel"], s["ang_vel"], u, s["dist_f"], s["dist_t"], **p
        )
        x = np.concatenate([s["pos"], s["quat"], s["vel"], s["ang_vel"], s["dist_f"], s["dist_t"]])
        np.testing.assert_allclose(
            np.asarray(f(x, u)).ravel(), np.concatenate([*out, np.zeros(6)]), rtol=1e-12, atol=1e-12
        )


def test_symbolic_models_are_reentrant():
    """Fresh symbols per call: building one twin never changes another (drone-models bug)."""
    cs = pytest.importorskip("casadi")
    sym = quadsim.parametrize(first_principles.symbolic_dynamics, "cf2x_L250")
    a = sym(model_rotor_vel=False)
    b = sym(model_rotor_vel=True)
    assert a[1].shape[0] == 13 and b[1].shape[0] == 17
    f = cs.Function("f", [a[1], a[2]], [a[0]])
    assert f.n_in() == 2 and a[0].shape[0] == 13


# --- batching and backends -----------------------------------------------------------------------


def model_args(model: str, rng, batch: tuple[int, ...]) -> tuple[list, dict]:
    """Random positional arguments of a registered model and its parameters."""
    s = random_state(rng, batch=batch)
    if model == "wrench":
        cmd = rng.normal(size=(*batch, 4))
        return [s["pos"], s["quat"], s["vel"], s["ang_vel"], cmd, s["dist_f"], s["dist_t"]], (
            wrench_params()
        )
    att = s["quat"] if model == "first_principles" else rng.uniform(-1, 1, (*batch, 3))
    keys = ("vel", "ang_vel", "cmd", "rotor_vel", "dist_f", "dist_t")
    return [s["pos"], att, *(s[k] for k in keys)], fp_params()


@pytest.mark.parametrize("model", ["first_principles", "euler_zyx", "wrench"])
def test_batched_equals_looped(rng, model):
    spec = get_model(model)
    args, p = model_args(model, rng, (2, 3))
    batched = spec.dynamics(*args, **p)
    for i in range(2):
        for j in range(3):
            single = spec.dynamics(*[a[i, j] for a in args], **p)
            for b, o in zip(batched, single, strict=True):
                np.testing.assert_allclose(b[i, j], o, rtol=1e-14, atol=1e-14)


def test_per_drone_parameters_broadcast(rng):
    """Each drone of a batch may carry its own mass and inertia (domain randomisation)."""
    base = fp_params()
    s = random_state(rng, batch=(4,))
    mass = base["mass"] * rng.uniform(0.8, 1.2, 4)
    J = base["J"] * rng.uniform(0.8, 1.2, (4, 1, 1))
    p = dict(base, mass=mass, J=J, J_inv=np.linalg.inv(J))
    out = fp_call(s, p)
    for i in range(4):
        one = fp_call(
            {k: v[i] for k, v in s.items()},
            dict(p, mass=mass[i], J=J[i], J_inv=np.linalg.inv(J[i])),
        )
        for b, o in zip(out, one, strict=True):
            np.testing.assert_allclose(b[i], o, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("model", ["first_principles", "euler_zyx", "wrench"])
def test_every_backend_and_dtype_matches_numpy(xp, rng, model):
    spec = get_model(model)
    args, p = model_args(model, rng, (5,))
    want = spec.dynamics(*args, **p)
    got = spec.dynamics(*[xp.asarray(a) for a in args], **p)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == xp.dtype
        scale = np.abs(w).max()
        np.testing.assert_allclose(xp.numpy(g), w, rtol=xp.rtol * 10, atol=xp.rtol * 10 * scale)


def test_jax_jit_and_grad_are_finite(rng):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    f = quadsim.parametrize(first_principles.dynamics, "cf2x_L250", xp=jnp)
    s = {k: jnp.asarray(v) for k, v in random_state(rng, batch=(8,)).items()}

    def loss(ang_vel, rotor_vel):
        out = f(s["pos"], s["quat"], s["vel"], ang_vel, s["cmd"], rotor_vel)
        return sum(jnp.sum(o**2) for o in out)

    value = jax.jit(loss)(s["ang_vel"], s["rotor_vel"])
    grads = jax.jit(jax.grad(loss, argnums=(0, 1)))(jnp.zeros((8, 3)), s["cmd"])
    assert np.isfinite(float(value))
    assert all(bool(jnp.all(jnp.isfinite(g))) for g in grads)
    gw = jax.grad(
        lambda v: jnp.sum(
            wrench.dynamics(
                s["pos"], s["quat"], v, s["ang_vel"], jnp.ones((8, 4)), **wrench_params()
            )[2]
        )
    )
    assert bool(jnp.all(jnp.isfinite(gw(jnp.zeros((8, 3))))))  # |v| v at v = 0


def test_torch_float64_works():
    """drone-models fails on torch float64; here it runs and matches NumPy."""
    torch = pytest.importorskip("torch")
    f = quadsim.parametrize(first_principles.dynamics, "cf2x_L250", xp=torch)
    rng = np.random.default_rng(1)
    s = random_state(rng, batch=(3,))
    t = {k: torch.asarray(v, dtype=torch.float64) for k, v in s.items()}
    out = f(t["pos"], t["quat"], t["vel"], t["ang_vel"], t["cmd"], t["rotor_vel"])
    ref = fp_call(s, fp_params(), dist_f=True, dist_t=True)
    for o, r in zip(out, ref, strict=True):
        assert o.dtype == torch.float64
        np.testing.assert_allclose(o.numpy(), r, rtol=1e-12)


# --- bad input -----------------------------------------------------------------------------------


def test_wrong_shapes_raise_with_what_was_expected(rng):
    p = fp_params()
    s = random_state(rng)
    with pytest.raises(ValueError, match=r"quat must have shape \(\.\.\., 4\); got shape \(3,\)"):
        first_principles.dynamics(s["pos"], s["quat"][:3], s["vel"], s["ang_vel"], s["cmd"], **p)
    with pytest.raises(ValueError, match=r"cmd must have shape \(\.\.\., 4\)"):
        first_principles.dynamics(s["pos"], s["quat"], s["vel"], s["ang_vel"], s["cmd"][:3], **p)
    with pytest.raises(ValueError, match=r"parameter J must have shape \(\.\.\., 3, 3\)"):
        first_principles.dynamics(
            *[s[k] for k in ("pos", "quat", "vel", "ang_vel", "cmd")], **dict(p, J=np.eye(2))
        )
    with pytest.raises(ValueError, match=r"rpy must have shape"):
        euler_zyx.dynamics(s["pos"], s["quat"], s["vel"], s["ang_vel"], s["cmd"], **p)
    with pytest.raises(ValueError, match=r"cmd must have shape \(\.\.\., 4\)"):
        wrench.dynamics(
            s["pos"], s["quat"], s["vel"], s["ang_vel"], s["cmd"][:2], **wrench_params()
        )


def test_batches_that_differ_broadcast_or_are_refused_naming_them(rng):
    """Issue 27: a velocity batch of 5 against 8 gave outputs of different shapes."""
    p = fp_params()
    s = random_state(rng, (8,))
    names = ("pos", "quat", "vel", "ang_vel", "cmd", "rotor_vel")
    with pytest.raises(ValueError, match=r"batch shapes do not broadcast together: .*vel \(5,\)"):
        first_principles.dynamics(*[s[k] if k != "vel" else s[k][:5] for k in names], **p)
    vel = rng.normal(size=(5, 1, 3))  # broadcasts: (5, 8) drones
    out = first_principles.dynamics(*[s[k] if k != "vel" else vel for k in names], **p)
    assert [o.shape for o in out] == [(5, 8, 3), (5, 8, 4), (5, 8, 3), (5, 8, 3), (5, 8, 4)]
    full = {k: np.broadcast_to(s[k], (5, 8, s[k].shape[-1])) for k in names} | {
        "vel": np.broadcast_to(vel, (5, 8, 3))}  # fmt: skip
    for o, r in zip(out, first_principles.dynamics(*[full[k] for k in names], **p), strict=True):
        np.testing.assert_array_equal(o, r)


@pytest.mark.parametrize("bad", [1e4 + 1j, "12000", None])
def test_rotor_speeds_must_be_real_numbers(rng, bad):
    p = fp_params()
    s = random_state(rng, (2,))
    cmd = np.full((2, 4), bad, dtype=object if bad is None else None)
    with pytest.raises(ValueError, match=rf"cmd must hold real numbers; got dtype {cmd.dtype}"):
        first_principles.dynamics(s["pos"], s["quat"], s["vel"], s["ang_vel"], cmd, **p)
    from quadsim.engines.sim import Simulator

    sim = Simulator("cf2x_L250", n=2)
    with pytest.raises(ValueError, match="cmd must hold real numbers"):
        sim.step(cmd)
    with pytest.raises(ValueError, match="cmd must hold real numbers"):
        sim.step(cmd.tolist())


def test_registry_and_parametrize_errors():
    assert set(MODELS) == {"first_principles", "euler_zyx", "wrench"}
    with pytest.raises(ValueError, match="unknown model 'nope'; available: first_principles"):
        get_model("nope")
    with pytest.raises(ValueError, match="cf2x_L250"):
        quadsim.parametrize(first_principles.dynamics, "no_such_drone")
    with pytest.raises(ValueError, match="takes no drone parameters"):
        quadsim.parametrize(lambda x: x, "cf2x_L250")
    with pytest.raises(ValueError, match="needs parameter 'rotor_count'"):

        def needs(*, mass, rotor_count):
            return mass

        quadsim.parametrize(needs, "cf2x_L250")


def test_per_drone_entries_equal_for_every_drone_are_folded(rng):
    """Per-drone diagonal inertias carry only their diagonal; uniform entries become constants."""
    from quadsim.physics.models._rigid import ROTOR_PARAMS, numeric_params

    base = fp_params()
    J = base["J"] * rng.uniform(0.8, 1.2, (5, 1, 1))  # zero off-diagonals for every drone
    mass = np.full(5, base["mass"])  # "per drone" but all equal
    like = np.zeros(())
    p = numeric_params(np, like, ROTOR_PARAMS, **dict(base, J=J, J_inv=np.linalg.inv(J), mass=mass))
    assert p.J[0][1] == 0.0 and isinstance(p.J[0][1], float)
    assert isinstance(p.J[1][1], np.ndarray) and p.J[1][1].shape == (5,)
    assert isinstance(p.mass, float)


def test_the_model_parameters_are_keyword_arguments_of_every_model_function():
    """The parameter list is written once (``takes_params``) yet each model function takes its
    parameters by keyword as before: the signature lists them (what ``parametrize`` reads), a
    missing one or an unknown keyword is a TypeError, the drag terms default to none on the
    rotor models and are required on the wrench model."""
    import inspect

    from quadsim.physics.bind import parametrize
    from quadsim.physics.models._rigid import ROTOR_PARAMS
    from quadsim.physics.params import load_params

    params = load_params("cf2x_L250")
    for fn in (first_principles.dynamics, first_principles.symbolic_dynamics,
               euler_zyx.dynamics, euler_zyx.symbolic_dynamics):  # fmt: skip
        sig = inspect.signature(fn).parameters
        assert set(ROTOR_PARAMS) <= set(sig) and "params" not in sig
        assert sig["drag_coef"].default == 0.0 and sig["mass"].default is inspect.Parameter.empty
        assert all(sig[k].kind is inspect.Parameter.KEYWORD_ONLY for k in ROTOR_PARAMS)
    assert inspect.signature(wrench.dynamics).parameters["drag_coef"].default is (
        inspect.Parameter.empty)
    state = (np.zeros(3), np.array([0.0, 0.0, 0.0, 1.0]), np.zeros(3), np.zeros(3))
    rpm = np.full(4, 15000.0)
    kw = {k: getattr(params, k) for k in ROTOR_PARAMS}
    np.testing.assert_array_equal(parametrize(first_principles.dynamics, params)(*state, rpm)[2],
                                  first_principles.dynamics(*state, rpm, **kw)[2])  # fmt: skip
    del kw["mass"]
    with pytest.raises(TypeError, match="missing required keyword-only argument: 'mass'"):
        first_principles.dynamics(*state, rpm, **kw)
    with pytest.raises(TypeError, match="unexpected keyword argument 'masss'"):
        first_principles.dynamics(*state, rpm, masss=1.0, mass=params.mass, **kw)
    wkw = {k: getattr(params, k) for k in ("mass", "gravity_vec", "J", "J_inv")}
    with pytest.raises(TypeError, match="'drag_coef'"):
        wrench.dynamics(*state, np.zeros(4), **wkw)
