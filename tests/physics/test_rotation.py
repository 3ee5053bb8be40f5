"""Tests for quadsim.physics.rotation: physics (finite differences, scipy, hand-written matrices),
round trips near identity / pi / gimbal lock, batching, JAX transforms and shape errors."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.transform import Rotation

from quadsim.physics import rotation as rot
from quadsim.physics._array import CASADI_OPS

B = (5, 7)  # one batch shape throughout: eager JAX compiles each primitive per new shape


def unit_quats(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    q = rng.normal(size=(*shape, 4))
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def Rx(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


def Ry(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


def Rz(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def sign_free_dist(p: np.ndarray, q: np.ndarray) -> float:
    """Distance between quaternions up to the sign ambiguity q ~ -q."""
    return float(min(np.abs(p - q).max(), np.abs(p + q).max()))


def wrap(a: np.ndarray) -> np.ndarray:
    return (a + np.pi) % (2 * np.pi) - np.pi


# --------------------------------------------------------------------------- basic algebra


def test_identity_conjugate_normalize(xp, rng):
    q_np = unit_quats(rng, B)
    q, v = xp.asarray(q_np), xp.asarray(rng.normal(size=(*B, 3)))
    e = rot.identity((2, 3), xp=xp.xp, dtype=xp.dtype)
    assert e.shape == (2, 3, 4) and e.dtype == xp.dtype
    np.testing.assert_array_equal(xp.numpy(e), np.broadcast_to([0.0, 0.0, 0.0, 1.0], (2, 3, 4)))
    np.testing.assert_allclose(
        xp.numpy(rot.rotate(rot.identity(xp=xp.xp, dtype=xp.dtype), v)), xp.numpy(v), rtol=0, atol=0
    )
    qq = xp.numpy(rot.multiply(q, rot.conjugate(q)))
    np.testing.assert_allclose(qq, np.broadcast_to([0.0, 0.0, 0.0, 1.0], qq.shape), atol=xp.rtol)
    n = rot.normalize(xp.asarray(3.5 * q_np))
    np.testing.assert_allclose(xp.numpy(n), q_np, rtol=xp.rtol, atol=xp.rtol)


def test_to_matrix_orthonormal_det_one(xp, rng):
    R = xp.numpy(rot.to_matrix(xp.asarray(unit_quats(rng, B))))
    eye = np.broadcast_to(np.eye(3), R.shape)
    np.testing.assert_allclose(R @ np.swapaxes(R, -1, -2), eye, atol=10 * xp.rtol)
    np.testing.assert_allclose(np.linalg.det(R), 1.0, atol=10 * xp.rtol)


def test_rotate_matches_matrix_and_inverse(xp, rng):
    q, v = xp.asarray(unit_quats(rng, B)), xp.asarray(rng.normal(size=(*B, 3)))
    R, vn = xp.numpy(rot.to_matrix(q)), xp.numpy(v)
    tol = dict(rtol=10 * xp.rtol, atol=10 * xp.rtol)
    np.testing.assert_allclose(
        xp.numpy(rot.rotate(q, v)), np.einsum("...ij,...j->...i", R, vn), **tol
    )
    np.testing.assert_allclose(
        xp.numpy(rot.rotate_inverse(q, v)), np.einsum("...ji,...j->...i", R, vn), **tol
    )
    np.testing.assert_allclose(xp.numpy(rot.rotate_inverse(q, rot.rotate(q, v))), vn, **tol)


def test_multiply_associative_and_composes_matrices(xp, rng):
    p, q, r = (xp.asarray(unit_quats(rng, B)) for _ in range(3))
    tol = dict(rtol=10 * xp.rtol, atol=10 * xp.rtol)
    lhs = rot.multiply(rot.multiply(p, q), r)
    np.testing.assert_allclose(xp.numpy(lhs), xp.numpy(rot.multiply(p, rot.multiply(q, r))), **tol)
    Rp, Rq = xp.numpy(rot.to_matrix(p)), xp.numpy(rot.to_matrix(q))
    np.testing.assert_allclose(xp.numpy(rot.to_matrix(rot.multiply(p, q))), Rp @ Rq, **tol)


def test_elementary_rotations_by_hand(xp):
    tol = dict(rtol=xp.rtol, atol=xp.rtol)
    for a in (0.3, -1.2, 2.9):
        for rpy, R in (((a, 0, 0), Rx(a)), ((0, a, 0), Ry(a)), ((0, 0, a), Rz(a))):
            Rq = xp.numpy(rot.to_matrix(rot.from_euler(xp.asarray(rpy))))
            np.testing.assert_allclose(Rq, R, **tol)
    rpy = (0.4, -0.7, 2.2)
    R = Rz(rpy[2]) @ Ry(rpy[1]) @ Rx(rpy[0])
    np.testing.assert_allclose(xp.numpy(rot.to_matrix(rot.from_euler(xp.asarray(rpy)))), R, **tol)
    np.testing.assert_allclose(xp.numpy(rot.to_euler(rot.from_matrix(xp.asarray(R)))), rpy, **tol)
    # exp of a rotation vector along z is Rz; rotate maps body x to world (cos a, sin a, 0).
    q = rot.exp(xp.asarray([0.0, 0.0, 0.5]))
    np.testing.assert_allclose(xp.numpy(rot.to_matrix(q)), Rz(0.5), **tol)
    np.testing.assert_allclose(
        xp.numpy(rot.rotate(q, xp.asarray([1.0, 0.0, 0.0]))),
        [math.cos(0.5), math.sin(0.5), 0],
        **tol,
    )


def test_against_scipy(rng):
    q, p = unit_quats(rng, (30,)), unit_quats(rng, (30,))
    v, rv = rng.normal(size=(30, 3)), rng.normal(size=(30, 3))
    S, P = Rotation.from_quat(q), Rotation.from_quat(p)
    kw = dict(rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(rot.to_matrix(q), S.as_matrix(), **kw)
    np.testing.assert_allclose(rot.rotate(q, v), S.apply(v), **kw)
    np.testing.assert_allclose(rot.rotate_inverse(q, v), S.inv().apply(v), **kw)
    np.testing.assert_allclose(rot.multiply(p, q), (P * S).as_quat(), **kw)
    np.testing.assert_allclose(rot.to_euler(q), S.as_euler("ZYX")[:, ::-1], **kw)
    qe = rot.from_euler(S.as_euler("ZYX")[:, ::-1])
    np.testing.assert_allclose(qe * np.sign(qe[:, 3:]), q * np.sign(q[:, 3:]), **kw)
    np.testing.assert_allclose(rot.exp(rv), Rotation.from_rotvec(rv).as_quat(), **kw)
    np.testing.assert_allclose(rot.log(q), S.as_rotvec(), **kw)
    np.testing.assert_allclose(rot.from_matrix(S.as_matrix()), S.as_quat(canonical=True), **kw)


def test_from_matrix_all_branches_exact(xp):
    s = math.sqrt(0.5)
    cases = [  # trace branch, the three diagonal branches (half turns), and w < 0 inputs
        (np.eye(3), [0, 0, 0, 1]),
        (np.diag([1.0, -1.0, -1.0]), [1, 0, 0, 0]),
        (np.diag([-1.0, 1.0, -1.0]), [0, 1, 0, 0]),
        (np.diag([-1.0, -1.0, 1.0]), [0, 0, 1, 0]),
        (Rx(math.pi / 2), [s, 0, 0, s]),
        (Ry(-math.pi / 2), [0, -s, 0, s]),
        (Rz(3.0), [0, 0, math.sin(1.5), math.cos(1.5)]),
        (Rx(3.0) @ Ry(0.1), Rotation.from_matrix(Rx(3.0) @ Ry(0.1)).as_quat(canonical=True)),
    ]
    for R, q in cases:
        out = xp.numpy(rot.from_matrix(xp.asarray(R)))
        np.testing.assert_allclose(out, q, atol=xp.rtol)
        assert out[3] >= 0


def test_log_flips_to_positive_w_and_angle_range(xp, rng):
    q_np = unit_quats(rng, B)
    q = xp.asarray(q_np)
    a, b = xp.numpy(rot.log(q)), xp.numpy(rot.log(-q))
    np.testing.assert_allclose(a, b, rtol=xp.rtol, atol=xp.rtol)
    assert np.all(np.linalg.norm(a, axis=-1) <= np.pi * (1 + xp.rtol))
    np.testing.assert_allclose(
        np.linalg.norm(a, axis=-1),
        2 * np.arccos(np.abs(q_np[..., 3])),
        rtol=10 * xp.rtol,
        atol=1e-3 if xp.bits == 32 else 1e-9,
    )


# --------------------------------------------------------------------------- kinematics


def test_quat_dot_matches_central_difference_float64(rng):
    q, w = unit_quats(rng, (200,)), rng.normal(scale=3.0, size=(200, 3))
    h = 1e-5
    fd = (rot.integrate(q, w, h) - rot.integrate(q, w, -h)) / (2 * h)
    qd = rot.quat_dot(q, w)
    rel = np.linalg.norm(fd - qd, axis=-1) / np.linalg.norm(qd, axis=-1)
    assert rel.max() <= 1e-8


def test_quat_dot_matches_central_difference_all_backends(xp, rng):
    q, w = xp.asarray(unit_quats(rng, B)), xp.asarray(rng.normal(scale=3.0, size=(*B, 3)))
    h = float(np.finfo(np.float32 if xp.bits == 32 else np.float64).eps) ** (1 / 3)
    fd = (xp.numpy(rot.integrate(q, w, h)) - xp.numpy(rot.integrate(q, w, -h))) / (2 * h)
    qd = xp.numpy(rot.quat_dot(q, w))
    rel = np.linalg.norm(fd - qd, axis=-1) / np.linalg.norm(qd, axis=-1)
    assert rel.max() <= (1e-8 if xp.bits == 64 else 2e-3)


def test_integrate_is_exact_rotation(xp, rng):
    q_np, w_np = unit_quats(rng, B), rng.normal(size=(*B, 3))
    dt_np = rng.uniform(0.0, 0.5, size=B)
    q, w = xp.asarray(q_np), xp.asarray(w_np)
    S = Rotation.from_quat(q_np.reshape(-1, 4))
    want = (S * Rotation.from_rotvec((w_np * dt_np[..., None]).reshape(-1, 3))).as_matrix()
    got = xp.numpy(rot.to_matrix(rot.integrate(q, w, xp.asarray(dt_np))))
    np.testing.assert_allclose(got.reshape(-1, 3, 3), want, atol=10 * xp.rtol)
    # constant rate: two half steps equal one full step
    one = xp.numpy(rot.integrate(q, w, 0.2))
    two = xp.numpy(rot.integrate(rot.integrate(q, w, 0.1), w, 0.1))
    np.testing.assert_allclose(two, one, atol=10 * xp.rtol)


# --------------------------------------------------------------------------- round trips

_small = st.floats(1e-9, 1e-4)
angles = st.one_of(
    st.just(0.0), _small, st.floats(math.pi - 1e-9, math.pi), st.floats(0.0, math.pi)
)
axes = (
    st.tuples(*[st.floats(-1.0, 1.0)] * 3)
    .map(np.array)
    .filter(lambda a: np.linalg.norm(a) > 0.1)
    .map(lambda a: a / np.linalg.norm(a))
)


def axis_angle_quat(axis: np.ndarray, angle: float) -> np.ndarray:
    return np.append(math.sin(angle / 2) * axis, math.cos(angle / 2))


@settings(max_examples=300, deadline=None)
@given(axes, angles, st.sampled_from([1.0, -1.0]))
def test_matrix_quat_roundtrip(axis, angle, sign):
    q = sign * axis_angle_quat(axis, angle)
    q2 = rot.from_matrix(rot.to_matrix(q))
    assert q2[3] >= 0
    assert sign_free_dist(q2, q) <= 1e-13


@settings(max_examples=300, deadline=None)
@given(axes, angles, st.sampled_from([1.0, -1.0]))
def test_exp_log_roundtrip(axis, angle, sign):
    phi = angle * axis
    back = rot.log(rot.exp(phi))
    err = np.abs(back - phi).max()
    if angle > math.pi - 1e-12:  # a half turn about n is also one about -n
        err = min(err, np.abs(back + phi).max())
    assert err <= 1e-13 * angle + 1e-300  # (+ 1e-300: denormal angles underflow)
    q = sign * axis_angle_quat(axis, angle)
    q2 = rot.exp(rot.log(q))
    assert np.abs(q2 - math.copysign(1.0, q[3]) * q).max() <= 1e-15 + 1e-13 * angle


_euler = st.one_of(st.floats(-math.pi, math.pi), _small, _small.map(lambda a: -a))


@settings(max_examples=300, deadline=None)
@given(_euler, st.one_of(st.floats(-1.57, 1.57), _small, _small.map(lambda a: -a)), _euler)
def test_euler_quat_roundtrip(roll, pitch, yaw):
    rpy = np.array([roll, pitch, yaw])
    back = rot.to_euler(rot.from_euler(rpy))
    assert np.abs(wrap(back - rpy)).max() <= 1e-12


@settings(max_examples=300, deadline=None)
@given(_euler, _euler, st.one_of(st.just(0.0), st.floats(-1e-6, 1e-6)), st.sampled_from([1, -1]))
def test_euler_gimbal_lock_reproduces_rotation(roll, yaw, delta, sign):
    q = rot.from_euler(np.array([roll, sign * math.pi / 2 + delta, yaw]))
    rpy = rot.to_euler(q)
    assert abs(rpy[1]) <= math.pi / 2
    np.testing.assert_allclose(rot.to_matrix(rot.from_euler(rpy)), rot.to_matrix(q), atol=1e-7)
    if delta == 0.0:
        assert rpy[0] == 0.0


def test_gimbal_lock_exact_values(xp):
    tol = dict(rtol=0, atol=10 * xp.rtol)
    up = xp.numpy(rot.to_euler(rot.from_euler(xp.asarray([0.3, math.pi / 2, 0.5]))))
    np.testing.assert_allclose(up, [0.0, math.pi / 2, 0.2], **tol)  # yaw - roll survives
    down = xp.numpy(rot.to_euler(rot.from_euler(xp.asarray([0.3, -math.pi / 2, 0.5]))))
    np.testing.assert_allclose(down, [0.0, -math.pi / 2, 0.8], **tol)  # yaw + roll survives


# --------------------------------------------------------------------------- batching, dtypes


def _inputs(rng: np.random.Generator, shape: tuple[int, ...]) -> dict[str, np.ndarray]:
    rv = rng.normal(size=(*shape, 3))
    rv.reshape(-1, 3)[:5] *= 1e-5  # exercise the small-angle series branch
    rv.reshape(-1, 3)[5] = 0.0
    return dict(
        q=unit_quats(rng, shape),
        p=unit_quats(rng, shape),
        v=rng.normal(size=(*shape, 3)),
        R=Rotation.random(int(np.prod(shape)), rng=rng).as_matrix().reshape(*shape, 3, 3),
        rv=rv,
    )


CALLS = {
    "multiply": (rot.multiply, ("p", "q")),
    "conjugate": (rot.conjugate, ("q",)),
    "normalize": (rot.normalize, ("q",)),
    "rotate": (rot.rotate, ("q", "v")),
    "rotate_inverse": (rot.rotate_inverse, ("q", "v")),
    "to_matrix": (rot.to_matrix, ("q",)),
    "from_matrix": (rot.from_matrix, ("R",)),
    "to_euler": (rot.to_euler, ("q",)),
    "from_euler": (rot.from_euler, ("v",)),
    "exp": (rot.exp, ("rv",)),
    "log": (rot.log, ("q",)),
    "quat_dot": (rot.quat_dot, ("q", "v")),
    "integrate": (lambda q, w: rot.integrate(q, w, 0.05), ("q", "rv")),
}


def test_batch_equals_loop_and_keeps_dtype(xp, rng):
    raw = _inputs(rng, B)
    data = {k: xp.asarray(a) for k, a in raw.items()}
    for name, (f, keys) in CALLS.items():
        out = f(*(data[k] for k in keys))
        assert out.dtype == xp.dtype, name
        assert tuple(out.shape[:2]) == (5, 7), name
        got = xp.numpy(out)
        # The element loop runs on numpy, array_api_strict and torch64 (eager JAX would spend
        # seconds compiling per-element ops); JAX and float32 match the NumPy batch instead.
        if xp.bits == 32 or xp.name == "jax64":
            ref = f(*(raw[k] for k in keys))
            np.testing.assert_allclose(got, ref, rtol=10 * xp.rtol, atol=10 * xp.rtol, err_msg=name)
            continue
        for i in range(5):
            for j in range(7):
                one = xp.numpy(f(*(xp.asarray(raw[k][i, j]) for k in keys)))
                np.testing.assert_allclose(got[i, j], one, rtol=xp.rtol, atol=xp.rtol, err_msg=name)


def test_broadcasting(xp, rng):
    q, p = xp.asarray(unit_quats(rng, (5, 1))), xp.asarray(unit_quats(rng, (7,)))
    v = xp.asarray(rng.normal(size=(7, 3)))
    assert tuple(rot.multiply(q, p).shape) == (5, 7, 4)
    assert tuple(rot.rotate(q, v).shape) == (5, 7, 3)
    assert tuple(rot.integrate(q, v, xp.asarray(np.full((5, 7), 0.1))).shape) == (5, 7, 4)
    assert tuple(rot.quat_dot(p, xp.asarray(rng.normal(size=(3,)))).shape) == (7, 4)


# --------------------------------------------------------------------------- JAX


@pytest.mark.parametrize("xp", ["jax64"], indirect=True)
def test_jax_jit_matches_eager(xp, rng):
    import jax

    d = {k: xp.asarray(a) for k, a in _inputs(rng, B).items()}

    def chain(q, rv, R):
        q1 = rot.integrate(q, rv, 0.1)
        return rot.to_euler(q1), rot.log(rot.from_matrix(R)), rot.exp(rv)

    for a, b in zip(
        jax.jit(chain)(d["q"], d["rv"], d["R"]), chain(d["q"], d["rv"], d["R"]), strict=True
    ):
        np.testing.assert_allclose(xp.numpy(a), xp.numpy(b), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("xp", ["jax64"], indirect=True)
def test_jax_grad_exp_log_finite_and_correct(xp):
    import jax

    jnp = xp.xp
    c3, c4 = np.array([0.3, -1.1, 0.7]), np.array([0.3, -1.1, 0.7, 0.9])

    def f_exp(r):
        return (rot.exp(r) * c4).sum()

    def f_log(q):
        return (rot.log(q) * c3).sum()

    grads = {f_exp: jax.jit(jax.grad(f_exp)), f_log: jax.jit(jax.grad(f_log))}
    g = np.asarray(grads[f_exp](jnp.zeros(3)))
    np.testing.assert_allclose(g, 0.5 * c4[:3], rtol=1e-14)  # d exp / d phi at 0 = [I/2; 0]
    g = np.asarray(grads[f_log](jnp.asarray([0.0, 0.0, 0.0, 1.0])))
    np.testing.assert_allclose(g, np.append(2 * c3, 0.0), rtol=1e-14)  # d log / d q at 1
    for r in ([0.4, -1.3, 2.0], [1e-3, 2e-3, -1e-3], [2.5, 1.0, -1.2]):
        r = np.array(r)
        q = np.asarray(rot.exp(r)) * np.array([1, 1, 1, 1.3])  # log takes any norm
        for f, x in ((f_exp, r), (f_log, q)):
            g = np.asarray(grads[f](jnp.asarray(x)))
            assert np.all(np.isfinite(g))
            h, eye = 1e-6, np.eye(x.size)  # central differences of the same code on NumPy
            fd = [(f(x + h * e) - f(x - h * e)) / (2 * h) for e in eye]
            np.testing.assert_allclose(g, fd, rtol=1e-7, atol=1e-8)


# --------------------------------------------------------------------------- CasADi kernels


def test_new_kernels_run_on_casadi(rng):
    ca = pytest.importorskip("casadi")
    q, rv = unit_quats(rng, ()), rng.normal(size=3)
    R = rot.to_matrix(q)
    sq, sr = ca.MX.sym("q", 4), ca.MX.sym("r", 3)
    Q, V = tuple(sq[i] for i in range(4)), tuple(sr[i] for i in range(3))
    exprs = [
        (rot.kexp(CASADI_OPS, V, 1e-4), rv, rot.exp(rv)),
        (rot.klog(CASADI_OPS, Q, 1e-5), q, rot.log(q)),
        (rot.kto_euler(CASADI_OPS, Q, 1e-8), q, rot.to_euler(q)),
        (rot.kfrom_euler(CASADI_OPS, V), rv, rot.from_euler(rv)),
    ]
    for comps, x, want in exprs:
        sym = sr if x.size == 3 else sq
        f = ca.Function("f", [sym], [ca.vertcat(*comps)])
        np.testing.assert_allclose(np.asarray(f(x)).ravel(), want, rtol=1e-12, atol=1e-14)
    sm = ca.MX.sym("R", 3, 3)
    rows = tuple(tuple(sm[i, j] for j in range(3)) for i in range(3))
    f = ca.Function("f", [sm], [ca.vertcat(*rot.kfrom_matrix(CASADI_OPS, rows))])
    np.testing.assert_allclose(np.asarray(f(R)).ravel(), rot.from_matrix(R), atol=1e-14)


# --------------------------------------------------------------------------- bad input

Z3, Z4 = np.zeros(3), np.zeros(4)
BAD = [
    (rot.multiply, (Z3, Z4), "p must have shape (..., 4); got shape (3,)"),
    (rot.multiply, (Z4, np.zeros((2, 3))), "q must have shape (..., 4); got shape (2, 3)"),
    (rot.conjugate, (Z3,), "q must have shape (..., 4)"),
    (rot.normalize, (np.zeros((2, 5)),), "q must have shape (..., 4)"),
    (rot.rotate, (Z3, Z3), "q must have shape (..., 4)"),
    (rot.rotate, (Z4, Z4), "v must have shape (..., 3)"),
    (rot.rotate_inverse, (Z4, np.zeros(2)), "v must have shape (..., 3)"),
    (rot.rotate_inverse, (Z3, Z3), "q must have shape (..., 4)"),
    (rot.to_matrix, (np.zeros((3, 3)),), "q must have shape (..., 4)"),
    (rot.from_matrix, (np.zeros((3, 4)),), "R must have shape (..., 3, 3); got shape (3, 4)"),
    (rot.from_matrix, (np.zeros(9),), "R must have shape (..., 3, 3)"),
    (rot.to_euler, (Z3,), "q must have shape (..., 4)"),
    (rot.from_euler, (Z4,), "rpy must have shape (..., 3)"),
    (rot.exp, (Z4,), "rotvec must have shape (..., 3)"),
    (rot.log, (Z3,), "q must have shape (..., 4)"),
    (rot.quat_dot, (Z3, Z3), "quat must have shape (..., 4)"),
    (rot.quat_dot, (Z4, Z4), "ang_vel must have shape (..., 3)"),
    (rot.integrate, (Z3, Z3, 0.1), "quat must have shape (..., 4)"),
    (rot.integrate, (Z4, Z4, 0.1), "ang_vel must have shape (..., 3)"),
]


@pytest.mark.parametrize(
    ("f", "args", "msg"), BAD, ids=[f"{b[0].__name__}-{i}" for i, b in enumerate(BAD)]
)
def test_wrong_shape_raises(f, args, msg):
    with pytest.raises(ValueError, match=re.escape(msg)):
        f(*args)
