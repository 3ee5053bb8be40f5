"""A quaternion and any nonzero multiple of it are the same attitude, everywhere (issue 9 §6).

RK4 evaluates the model at its intermediate stage quaternions, which are not of unit length. The
old rotation kernels assumed unit length: for ``|q|² = s²`` they gave ``s² R + (1 - s²) I``, which
scaled and tilted thrust and drag (f450_plus at hover, 90° roll: ``vel_dot = (0, -10.007,
-10.007)`` for the attitude times 1.01 instead of ``(0, -9.81, -9.81)``). Here every model, the
CasADi twins, the compiled native step, the IMU, the mocap and both controllers are evaluated at
``c q`` for ``c ∈ {0.5, 1.01, -1, 3}`` on every backend and compared with ``q``; and a float64
flight is compared with an independent RK4 written below in plain NumPy (SciPy's rotation, which
normalises; our own Newton-Euler equations from the docstring of
:mod:`quadsim.physics.models.first_principles`).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import quadsim
from quadsim.engines import native
from quadsim.engines.sim import Simulator
from quadsim.engines.state import State
from quadsim.engines.stepping import step as pure_step
from quadsim.loop.control import geometric, load_gains, pid
from quadsim.loop.trajectories import Reference
from quadsim.physics import integrators, rotation
from quadsim.physics import sensors as S  # noqa: N812
from quadsim.physics.models import MODELS
from quadsim.physics.systems import make_system

SCALES = (0.5, 1.01, -1.0, 3.0)
RPM_TO_RAD_S = 2.0 * math.pi / 60.0
DRAG = np.array([[-0.08, 0.01, 0.0], [0.01, -0.06, 0.0], [0.0, 0.0, -0.12]])  # N s/m


def tol(xp) -> float:
    return 1e-12 if xp.bits == 64 else 2e-5


def assert_same(got, want, rtol: float, what: str = "") -> None:
    """``max |got - want| <= rtol * max(max |want|, 1e-300)`` (relative to the array's size)."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    scale = max(float(np.max(np.abs(want))), 1e-300)
    err = float(np.max(np.abs(got - want))) / scale
    assert err <= rtol, f"{what}: relative error {err:.3e} > {rtol:.1e}"


def drag_params(name: str = "f450_plus") -> quadsim.Params:
    """A preset with every drag term switched on, so every use of ``R`` is exercised."""
    return quadsim.load_params(name)._replace(drag_matrix=DRAG, drag_coef=0.02,
                                              rot_drag_coef=3e-4)  # fmt: skip


def model_kwargs(spec, params) -> dict:
    return {k: getattr(params, k) for k in spec.params}


def random_quats(rng, n: int) -> np.ndarray:
    q = rng.normal(size=(n, 4))
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


# --------------------------------------------------------------------------- the issue's numbers


@pytest.mark.parametrize("c", [1.0, *SCALES])
def test_issue_reproduction_hover_at_90_deg_roll(c):
    """f450_plus, hover rotor speeds, 90° roll: thrust is exactly m g along -y for every scale."""
    drone = quadsim.load_params("f450_plus")
    spec = MODELS["first_principles"]
    hover = quadsim.envelope(drone).hover_rpm
    s = math.sqrt(0.5)
    q = c * np.array([s, 0.0, 0.0, s])  # xyzw: 90° about body x
    out = spec.dynamics(np.zeros(3), q, np.zeros(3), np.zeros(3), np.full(4, hover),
                        **model_kwargs(spec, drone))  # fmt: skip
    np.testing.assert_allclose(out[2], [0.0, -9.81, -9.81], rtol=0, atol=1e-12 * 9.81)


# ------------------------------------------------------------------------ rotation kernels


def test_rotation_of_vectors_and_matrices_holds_for_any_norm(xp):
    """``to_matrix``, ``rotate``, ``rotate_inverse`` at ``c q`` equal SciPy's (normalising) ones."""
    rng = np.random.default_rng(0)
    q, v = random_quats(rng, 16), rng.normal(size=(16, 3))
    R = Rotation.from_quat(q).as_matrix()
    for c in (1.0, *SCALES):
        qc = xp.asarray(c * q)
        assert_same(xp.numpy(rotation.to_matrix(qc)), R, tol(xp), f"to_matrix at c = {c}")
        got = xp.numpy(rotation.rotate(qc, xp.asarray(v)))
        assert_same(got, np.einsum("nij,nj->ni", R, v), tol(xp), f"rotate at c = {c}")
        got = xp.numpy(rotation.rotate_inverse(qc, xp.asarray(v)))
        assert_same(got, np.einsum("nji,nj->ni", R, v), tol(xp), f"rotate_inverse at c = {c}")


# --------------------------------------------------------------------- models, every backend


def _model_inputs(spec, rng, n: int = 6) -> dict:
    s = dict(
        pos=rng.normal(size=(n, 3)),
        quat=random_quats(rng, n),
        vel=rng.normal(size=(n, 3)) * 4.0,
        ang_vel=rng.uniform(-6.0, 6.0, size=(n, 3)),
        dist_f=rng.normal(size=(n, 3)) * 0.3,
        dist_t=rng.normal(size=(n, 3)) * 1e-3,
    )
    if spec.command == "rotor_rpm":
        s["cmd"] = rng.uniform(1500.0, 2600.0, size=(n, 4))
        s["rotor_vel"] = rng.uniform(1500.0, 2600.0, size=(n, 4))
    else:
        s["cmd"] = np.concatenate([rng.uniform(2.0, 40.0, (n, 1)), rng.normal(size=(n, 3))], -1)
    return s


def _call(spec, s: dict, kw: dict) -> tuple:
    head = (s["pos"], s["quat"], s["vel"], s["ang_vel"], s["cmd"])
    rotor = (s["rotor_vel"],) if spec.rotor_states else ()
    return spec.dynamics(*head, *rotor, s["dist_f"], s["dist_t"], **kw)


QUAT_MODELS = sorted(k for k, m in MODELS.items() if m.attitude == "quat")


def test_every_quaternion_model_is_covered():
    """The Euler model has no quaternion; every other registered model is tested here."""
    assert {k for k, m in MODELS.items() if m.attitude != "quat"} == {"euler_zyx"}
    assert QUAT_MODELS == ["first_principles", "wrench"]


@pytest.mark.parametrize("model", QUAT_MODELS)
def test_models_are_invariant_to_quaternion_scale(xp, model):
    """``f(c q) = f(q)`` except ``q̇(c q) = c q̇(q)`` (the kinematics are linear in ``q``)."""
    spec = MODELS[model]
    kw = model_kwargs(spec, drag_params("f450_plus" if spec.rotor_states else "skydio2_x"))
    s = _model_inputs(spec, np.random.default_rng(1))
    arr = {k: xp.asarray(v) for k, v in s.items()}
    ref = [None if o is None else xp.numpy(o) for o in _call(spec, arr, kw)]
    for c in SCALES:
        got = _call(spec, dict(arr, quat=xp.asarray(c * s["quat"])), kw)
        for i, (g, r) in enumerate(zip(got, ref, strict=True)):
            if r is None:
                assert g is None
                continue
            want = c * r if i == 1 else r
            assert_same(xp.numpy(g), want, tol(xp), f"{model} output {i} at c = {c}")


@pytest.mark.parametrize("model", QUAT_MODELS)
def test_casadi_twins_are_invariant_to_quaternion_scale(model):
    cs = pytest.importorskip("casadi")
    spec = MODELS[model]
    kw = model_kwargs(spec, drag_params("f450_plus" if spec.rotor_states else "skydio2_x"))
    flags = (True, True, True) if spec.rotor_states else (True, True)
    X_dot, X, U, _ = spec.symbolic_dynamics(*flags, **kw)
    f = cs.Function("f", [X, U], [X_dot])
    s = _model_inputs(spec, np.random.default_rng(2), n=1)
    parts = ["pos", "quat", "vel", "ang_vel"] + (["rotor_vel"] if spec.rotor_states else [])
    x = np.concatenate([s[k][0] for k in [*parts, "dist_f", "dist_t"]])
    ref = np.asarray(f(x, s["cmd"][0])).ravel()
    for c in SCALES:
        xc = x.copy()
        xc[3:7] *= c
        got = np.asarray(f(xc, s["cmd"][0])).ravel()
        want = ref.copy()
        want[3:7] *= c
        assert_same(got, want, 1e-12, f"{model} CasADi twin at c = {c}")


# ------------------------------------------------------------------ whole steps and native


def _step_state(rng, n: int = 5) -> tuple[State, np.ndarray]:
    hover = quadsim.envelope(quadsim.load_params("f450_plus")).hover_rpm
    st = State(rng.normal(size=(n, 3)), random_quats(rng, n), rng.normal(size=(n, 3)),
               rng.uniform(-5.0, 5.0, (n, 3)), hover * rng.uniform(0.8, 1.2, (n, 4)))  # fmt: skip
    return st, hover * rng.uniform(0.7, 1.3, (n, 4))


# the quaternion after one step from ``c q``: integrators that renormalise return sign(c) q'
STEP_FACTOR = {"euler": lambda c: c, "geometric": lambda c: c}


@pytest.mark.parametrize("name", sorted(integrators.INTEGRATORS))
def test_one_step_of_every_integrator_from_a_scaled_quaternion(name):
    """NumPy float64: a step from ``c q`` is the step from ``q`` (quaternion times c or sign c)."""
    system = make_system("first_principles")
    params = model_kwargs(MODELS["first_principles"], drag_params())
    st, cmd = _step_state(np.random.default_rng(3))
    integ = integrators.INTEGRATORS[name]
    dt = 1 / 500

    def run(state):
        return pure_step(state, cmd, dt, system=system, params=params, integrator=integ,
                         dist_f=np.full(3, 0.2), dist_t=np.full(3, 1e-3),
                         wind=np.array([1.0, -2.0, 0.5]))[0]  # fmt: skip

    ref = run(st)
    for c in SCALES:
        got = run(st._replace(quat=c * st.quat))
        k = STEP_FACTOR[name](c) if name in STEP_FACTOR else math.copysign(1.0, c)
        for f, g, r in zip(State._fields, got, ref, strict=True):
            assert_same(g, k * r if f == "quat" else r, 1e-12, f"{name} {f} at c = {c}")


def test_rk4_step_on_every_backend_from_a_scaled_quaternion(xp):
    system = make_system("first_principles")
    params = model_kwargs(MODELS["first_principles"], drag_params())
    st, cmd = _step_state(np.random.default_rng(4))

    def run(state):
        out = pure_step(State(*map(xp.asarray, state)), xp.asarray(cmd), 1 / 500, system=system,
                        params=params, dist_f=xp.asarray(np.full(3, 0.2)))[0]  # fmt: skip
        return [xp.numpy(a) for a in out]

    ref = run(st)
    for c in SCALES:
        got = run(st._replace(quat=c * st.quat))
        for f, g, r in zip(State._fields, got, ref, strict=True):
            want = math.copysign(1.0, c) * r if f == "quat" else r
            assert_same(g, want, 10 * tol(xp), f"{xp.name} {f} at c = {c}")


needs_native = pytest.mark.skipif(not native.available(), reason="no C compiler or casadi")


@needs_native
def test_native_step_from_a_scaled_quaternion():
    """The compiled step (generated from the CasADi twin) is scale invariant too."""
    from quadsim.engines.sim_native import NativeEngine

    system = make_system("first_principles")
    params = model_kwargs(MODELS["first_principles"], drag_params())
    eng = NativeEngine(system, params, (), 1 / 500, integrators.rk4, None, np.float64)
    st, cmd = _step_state(np.random.default_rng(5))
    U = eng.inputs(cmd, None, np.full(3, 0.2), np.full(3, 1e-3))
    ref, _ = eng.run(eng.pack(st, None, 0), U, 3, False)
    for c in SCALES:
        got, _ = eng.run(eng.pack(st._replace(quat=c * st.quat), None, 0), U, 3, False)
        want = ref.copy()
        want[3:7] *= math.copysign(1.0, c)
        assert_same(got[:17], want[:17], 1e-12, f"native at c = {c}")


# -------------------------------------------------------------------------------- sensors


def test_imu_is_invariant_to_quaternion_scale(xp):
    rng = np.random.default_rng(6)
    q = random_quats(rng, 7)
    w, a = rng.normal(size=(7, 3)), rng.normal(size=(7, 3)) * 5.0
    z = rng.normal(size=(7, 12))
    p = S.load_imu("bmi088")._replace(accel_scale=[1.02, 0.99, 1.01], accel_bias=0.03)
    g = np.array([0.0, 0.0, -9.81])

    def read(quat):
        st = S.imu_init(p, (7,), xp=xp.xp, dtype=xp.dtype)
        r, _ = S.imu_measure(xp.asarray(quat), xp.asarray(w), xp.asarray(a), g, p, st, None,
                             xp.asarray(z))  # fmt: skip
        return xp.numpy(r.gyro), xp.numpy(r.accel)

    ref = read(q)
    for c in SCALES:
        for got, want in zip(read(c * q), ref, strict=True):
            assert_same(got, want, tol(xp), f"imu at c = {c}")


@pytest.mark.parametrize("latency", [0.0, 0.02])
def test_mocap_delivers_the_same_unit_attitude(xp, latency):
    """The delivered quaternion is unit and the same attitude (sign of ``c`` kept)."""
    rng = np.random.default_rng(7)
    qs = [random_quats(rng, 4) for _ in range(5)]
    ps = [rng.normal(size=(4, 3)) for _ in range(5)]
    zs = [rng.normal(size=(4, 6)) for _ in range(5)]
    mp = S.MocapParams(0.001, 0.02, latency, 100.0)

    def run(c):
        st = S.mocap_init(xp.asarray(ps[0]), xp.asarray(c * qs[0]), mp)
        out = []
        for p_, q_, z_ in zip(ps, qs, zs, strict=True):
            r, st = S.mocap_measure(xp.asarray(p_), xp.asarray(c * q_), mp, st, xp.asarray(z_))
            out.append((xp.numpy(r.pos), xp.numpy(r.quat)))
        return out

    ref = run(1.0)
    for _, q in ref:
        np.testing.assert_allclose(np.linalg.norm(q, axis=-1), 1.0, rtol=0, atol=tol(xp))
    for c in SCALES:
        for (p_got, q_got), (p_ref, q_ref) in zip(run(c), ref, strict=True):
            assert_same(p_got, p_ref, tol(xp), f"mocap pos at c = {c}")
            assert_same(q_got, math.copysign(1.0, c) * q_ref, tol(xp), f"mocap quat at c = {c}")


# ---------------------------------------------------------------------------- controllers


def _ctrl_inputs(rng, n: int = 6):
    st = State(rng.normal(size=(n, 3)) * 0.5 + [0, 0, 1], random_quats(rng, n),
               rng.normal(size=(n, 3)), rng.normal(size=(n, 3)) * 2.0)  # fmt: skip
    rows = np.array([[0.2, -0.1, 1.2], [0.3, 0.0, 0.1], [0.5, 0.2, 0.0], [0.1, 0.0, 0.3],
                     [0.0, 0.2, 0.0]])  # pos, vel, acc, jerk, snap
    ref = Reference(*(np.zeros((5, n, 3)) + rows[:, None, :]), np.full(n, 0.4),
                    np.full(n, 0.2))  # fmt: skip
    return st, ref


def _as(xp, tree):
    return type(tree)(*(None if a is None else xp.asarray(a) for a in tree))


def _flat(xp, out) -> list[np.ndarray]:
    """Arrays of a nested output (tuples of arrays / NamedTuples) as NumPy, in order."""
    if isinstance(out, tuple):
        return [a for o in out for a in _flat(xp, o)]
    return [xp.numpy(out)]


@pytest.mark.parametrize("gains_name", ["f450_plus_geometric", "f450_plus_pid"])
def test_controllers_are_invariant_to_quaternion_scale(xp, gains_name):
    drone = drag_params()
    gains = load_gains(gains_name, drone=drone, dt=1 / 200)
    mod = geometric if gains_name.endswith("geometric") else pid
    st, ref = _ctrl_inputs(np.random.default_rng(8))
    cstate = mod.init_state(gains, (6,), xp=xp.xp, dtype=xp.dtype)

    def run(c):
        s = _as(xp, st._replace(quat=c * st.quat))
        out, cs1 = mod.control(s, _as(xp, ref), gains, cstate)
        out2, _ = mod.control(s, _as(xp, ref), gains, cs1)  # a second step: the state is used
        return _flat(xp, (out, cs1, out2))

    want = run(1.0)
    for c in SCALES:
        for i, (g, w) in enumerate(zip(run(c), want, strict=True)):
            assert_same(g, w, 10 * tol(xp), f"{gains_name} output {i} at c = {c}")


def test_pid_stages_are_invariant_to_quaternion_scale(xp):
    gains = load_gains("f450_plus_pid", drone=drag_params(), dt=1 / 200)
    rng = np.random.default_rng(9)
    st, ref = _ctrl_inputs(rng)
    q_sp = random_quats(rng, 6)
    cstate = pid.init_state(gains, (6,), xp=xp.xp, dtype=xp.dtype)
    T = xp.asarray(rng.normal(size=(6, 3)) + np.array([0.0, 0.0, 5.0]))

    def run(c, c_sp):
        q, qs = xp.asarray(c * st.quat), xp.asarray(c_sp * q_sp)
        s = _as(xp, st._replace(quat=c * st.quat))
        return _flat(xp, (
            pid.attitude_control(q, qs, xp.asarray(np.full(6, 0.3)), gains),
            pid.thrust_attitude(T, xp.asarray(np.full(6, 0.4)), q, gains),
            pid.velocity_control(xp.asarray(st.vel), xp.asarray(ref.vel), xp.asarray(ref.acc),
                                 gains, cstate, q),
            pid.attitude_altitude_control(s, qs, xp.asarray(np.full(6, 1.1)), gains, cstate),
        ))  # fmt: skip

    want = run(1.0, 1.0)
    for c, c_sp in zip(SCALES, (-2.0, 0.7, 1.01, -1.0), strict=True):
        for i, (g, w) in enumerate(zip(run(c, c_sp), want, strict=True)):
            assert_same(g, w, 10 * tol(xp), f"pid stage output {i} at c = {c}, c_sp = {c_sp}")


# ---------------------------------------------------------- an independent RK4 (the oracle)


def _oracle_deriv(y: np.ndarray, u: np.ndarray, P: quadsim.Params, rot) -> np.ndarray:
    """Newton-Euler of the first-principles model, written from its module docstring."""
    q, v, w, om = y[3:7], y[7:10], y[10:13], y[13:]
    R = rot(q)
    k, m = np.asarray(P.rpm2thrust), np.asarray(P.rpm2torque)
    f = k[0] + k[1] * om + k[2] * om**2  # rotor thrusts [N]
    tp = m[0] + m[1] * om + m[2] * om**2  # rotor drag torques [N m]
    c = np.asarray(P.rotor_dyn_coef)
    up = u > om
    om_dot = np.where(up, c[0] * (u - om) + c[1] * (u**2 - om**2),
                      c[2] * (u - om) + c[3] * (u**2 - om**2))  # fmt: skip
    M, Jp = np.asarray(P.mixing_matrix), float(P.prop_inertia)
    h_r = np.array([0.0, 0.0, -Jp * RPM_TO_RAD_S * (M[2] @ om)])  # rotor momentum, body
    tau = np.array([P.L * (M[0] @ f), P.L * (M[1] @ f), M[2] @ tp])
    tau = tau - np.cross(w, h_r) + np.array([0.0, 0.0, Jp * RPM_TO_RAD_S * (M[2] @ om_dot)])
    tau = tau - P.rot_drag_coef * w
    D = np.asarray(P.drag_matrix)
    force = R @ np.array([0.0, 0.0, f.sum()]) + R @ D @ R.T @ v
    force = force - P.drag_coef * np.linalg.norm(v) * v
    v_dot = np.asarray(P.gravity_vec) + force / P.mass
    J = np.asarray(P.J)
    w_dot = np.linalg.solve(J, tau - np.cross(w, J @ w))
    qv, qw = q[:3], q[3]
    q_dot = 0.5 * np.concatenate([qw * w + np.cross(qv, w), [-(qv @ w)]])  # ½ q ⊗ (ω, 0)
    return np.concatenate([v, q_dot, v_dot, w_dot, om_dot])


def _scipy_rot(q: np.ndarray) -> np.ndarray:
    return Rotation.from_quat(q).as_matrix()  # normalises q


def _unit_assuming_rot(q: np.ndarray) -> np.ndarray:
    """The old kernel's formula, ``s² R + (1 - s²) I`` for ``|q| = s``: the defect."""
    x, y, z, w = q
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])  # fmt: skip


def oracle_flight(P, y0, u, dt, steps, rot=_scipy_rot) -> np.ndarray:
    """Classical RK4, quaternion normalised after each step; returns states after each step."""
    y, out = np.array(y0, dtype=np.float64), []
    for _ in range(steps):
        k1 = _oracle_deriv(y, u, P, rot)
        k2 = _oracle_deriv(y + 0.5 * dt * k1, u, P, rot)
        k3 = _oracle_deriv(y + 0.5 * dt * k2, u, P, rot)
        k4 = _oracle_deriv(y + dt * k3, u, P, rot)
        y = y + dt / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
        y[3:7] /= np.linalg.norm(y[3:7])
        out.append(y.copy())
    return np.array(out)


FLIGHT_DT, FLIGHT_STEPS = 1 / 500, 500
FLIGHT_DRONES = {"f450_plus": lambda: quadsim.load_params("f450_plus"),
                 "f450_plus+drag": drag_params}


def _flight_setup(name: str):
    P = FLIGHT_DRONES[name]()
    hover = quadsim.envelope(P).hover_rpm
    q0 = rotation.from_euler(np.array([0.6, -0.4, 1.0]))
    y0 = np.concatenate([[0.1, -0.2, 1.0], q0, [1.0, -0.5, 0.3], [20.0, -15.0, 10.0],
                         np.full(4, hover)])  # fmt: skip
    u = hover * np.array([1.06, 0.96, 1.03, 0.95])  # non-hover: torques on every axis
    return P, y0, u


def _fields(traj: np.ndarray) -> dict[str, np.ndarray]:
    sl = {"pos": (0, 3), "quat": (3, 7), "vel": (7, 10), "ang_vel": (10, 13), "rotor_vel": (13, 17)}
    return {k: traj[:, i:j] for k, (i, j) in sl.items()}


def _sim_flight(name: str, backend: str) -> tuple[np.ndarray, np.ndarray]:
    P, y0, u = _flight_setup(name)
    sim = Simulator(P, n=1, dt=FLIGHT_DT, integrator="rk4", backend=backend, dtype="float64",
                    world=None)  # fmt: skip
    sim.reset(pos=y0[:3], attitude=y0[3:7], vel=y0[7:10], ang_vel=y0[10:13], rotor_vel=y0[13:])
    traj = sim.rollout(u[None, :], steps=FLIGHT_STEPS)
    got = np.concatenate([np.asarray(a, dtype=np.float64)[:, 0] for a in traj], axis=-1)
    return got, oracle_flight(P, y0, u, FLIGHT_DT, FLIGHT_STEPS)


@pytest.mark.parametrize("backend", ["numpy", pytest.param("native", marks=needs_native)])
@pytest.mark.parametrize("name", sorted(FLIGHT_DRONES))
def test_flight_equals_an_independent_rk4(backend, name):
    """1 s of a tumbling flight, float64, dt = 1/500: the simulator is the oracle to 1e-12."""
    got, want = _sim_flight(name, backend)
    assert np.ptp(want[:, 3:7], axis=0).min() > 0.5, "the attitude must tumble"
    for f, g in _fields(got).items():
        assert_same(g, _fields(want)[f], 1e-12, f"{backend} {name} {f}")


def test_the_oracle_comparison_can_fail():
    """The old unit-assuming kernel moves the same flight by far more than the tolerance."""
    P, y0, u = _flight_setup("f450_plus")
    good = oracle_flight(P, y0, u, FLIGHT_DT, FLIGHT_STEPS)
    bad = oracle_flight(P, y0, u, FLIGHT_DT, FLIGHT_STEPS, rot=_unit_assuming_rot)
    err = np.abs(bad[:, :3] - good[:, :3]).max() / np.abs(good[:, :3]).max()
    assert err > 1e-9, err  # at least 1000x the 1e-12 the simulator must meet


# ------------------------------------------------------------------------- the simulator's door


@pytest.mark.parametrize("backend", ["numpy", pytest.param("native", marks=needs_native)])
def test_reset_rejects_a_non_unit_quaternion(backend):
    sim = Simulator("f450_plus", n=4, backend=backend, world=None)
    q = np.tile([0.0, 0.0, 0.0, 1.0], (4, 1))
    q[2] *= 1.01
    with pytest.raises(ValueError, match=r"reset: attitude must be a unit quaternion \(xyzw\); "
                                         r"drone 2 has norm 1\.01$"):  # fmt: skip
        sim.reset(attitude=q)
    with pytest.raises(ValueError, match=r"reset_drones: .* drone 3 has norm 0\.5$"):
        sim.reset_drones([1, 3], attitude=[[0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.5]])
    with pytest.raises(ValueError, match="drone 0 has norm 2"):
        sim.reset(attitude=[0.0, 0.0, 0.0, 2.0])  # broadcast to every drone
    unit = rotation.from_euler(np.array([0.3, -0.2, 0.1]))
    sim.reset(attitude=unit * (1 + 5e-7))  # within 1e-6: accepted as it is
    sim.reset_drones([0], attitude=unit)
    np.testing.assert_array_equal(np.asarray(sim.state.quat)[0], unit)
