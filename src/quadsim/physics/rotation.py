"""Rotations: xyzw unit quaternions, rotation matrices, Euler ZYX angles, exp/log maps.

Conventions (see ``docs/conventions.md``):

* A quaternion ``q = (x, y, z, w)`` is stored scalar-last, shape ``(..., 4)``, Hamilton product.
  It maps body-frame vectors to the world frame: ``v_w = q ⊗ (v_b, 0) ⊗ q*`` and
  ``R_wb = to_matrix(q)``.
* Angular velocity ``ω`` is expressed in the body frame. The kinematics are

  ``q̇ = ½ q ⊗ (ω, 0)``  and, for constant ``ω`` over ``dt``,  ``q(t+dt) = q(t) ⊗ exp(ω dt)``

  with ``exp(φ) = (sin(|φ|/2) φ/|φ|, cos(|φ|/2))``.
* Euler ZYX angles ``(roll φ, pitch θ, yaw ψ)`` compose as ``R = Rz(ψ) Ry(θ) Rx(φ)``.
* ``q`` and ``c q`` (any real ``c ≠ 0``, negative included) are the same attitude. The rotation
  of vectors and matrices holds for any nonzero norm:

  ``R(q) = I + (2/|q|²) (w [u]× + [u]×²)``,  ``q = (u, w)``,

  i.e. ``R(q) = R(q/|q|)`` exactly; the unit-norm formula (``2`` for ``2/|q|²``) would give
  ``s² R + (1 - s²) I`` for ``|q| = s``, a scaled and sheared matrix. This matters because RK4
  evaluates a model at stage quaternions ``q + h k``, which are not of unit length. The
  derivative ``q̇ = ½ q ⊗ (ω, 0)`` is linear in ``q`` and is taken of the stored ``q`` as it is
  (not of ``q/|q|``): it is orthogonal to ``q``, so it keeps ``|q|`` to first order, and the
  integrators renormalise after each step (:mod:`quadsim.physics.integrators`).

The ``k*`` functions (``kcross``, ``kdot``, ``kqmul``, ``kmatrix``, ``kquat_dot``, ``kexp``,
``kto_euler``, ``kfrom_euler``, ``kfrom_matrix``, ...) are component kernels: they take tuples of
components (arrays of any batch shape, or CasADi scalars) and are shared by every model, the
integrators and the controllers, so the CasADi twins use the same formulas. They use only
arithmetic, comparisons and the ``where sqrt sin cos atan2`` functions of ``ops``. They are the
package's building blocks, not part of :data:`__all__` (the array functions below).

Numerical choices of the public functions:

* ``exp``/``log`` switch branch-free (``where``) to Taylor series near zero rotation, up to
  4th order in the angle, below a threshold where the first omitted term is under the machine
  epsilon ``ε`` of the input dtype: ``θ < (46080 ε)^(1/6)`` for ``exp`` (θ ≈ 0.015 in float64,
  0.42 in float32) and ``tan(θ/2) < (7 ε)^(1/6)`` for ``log`` (≈ 0.0034, 0.097). The unused
  branch gets a safe argument before dividing ("double where"), so ``jax.grad`` is finite at
  exactly zero rotation.
* ``to_euler`` takes pitch as ``2 atan2(√(1+sin θ), √(1-sin θ)) - π/2`` with both roots
  written as sums of squares of quaternion components (no cancellation, no ``asin``); at gimbal
  lock, ``cos θ < √ε``, it returns roll = 0 and yaw = ``atan2(-R01, R11)``.
* ``from_matrix`` is Shepperd's method: four candidates, pick the one for the largest of
  trace and diagonal, normalise, return the ``w ≥ 0`` representative.
"""

from __future__ import annotations

import math
from typing import Any

from array_api_compat import is_array_api_obj

from ._array import as_like, check_shape, namespace, stack, unstack

__all__ = [
    "conjugate",
    "exp",
    "from_euler",
    "from_matrix",
    "identity",
    "integrate",
    "log",
    "multiply",
    "normalize",
    "quat_dot",
    "rotate",
    "rotate_inverse",
    "to_euler",
    "to_matrix",
]

Comp = tuple[Any, ...]


def kcross(a: Comp, b: Comp) -> Comp:
    """Cross product ``a × b`` of 3-component tuples."""
    return (
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    )


def is_const(x: Any, value: float) -> bool:
    """``x`` is a Python number equal to ``value`` (a parameter known when the code is built)."""
    return isinstance(x, int | float) and x == value


def kdot(a: Comp, b: Comp) -> Any:
    """Dot product of two component tuples of equal length.

    Terms with an exact Python ``0`` factor are skipped and ``±1`` factors are not multiplied, so
    constant parameters (mixing signs, zero drag, diagonal inertia) cost nothing.
    """
    out = None
    for x, y in zip(a, b, strict=True):
        if is_const(x, 0) or is_const(y, 0):
            continue
        if is_const(x, 1) or is_const(x, -1):
            t, neg = y, x == -1
        elif is_const(y, 1) or is_const(y, -1):
            t, neg = x, y == -1
        else:
            t, neg = x * y, False
        if out is None:
            out = -t if neg else t
        else:
            out = out - t if neg else out + t
    return 0.0 if out is None else out


def kqmul(a: Comp, b: Comp) -> Comp:
    """Hamilton product ``a ⊗ b`` of xyzw component tuples."""
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return (
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
        aw * bw - ax * bx - ay * by - az * bz,
    )


def krotate(q: Comp, v: Comp) -> Comp:
    """Rotate ``v`` by ``q = (u, w)`` of any nonzero norm (body to world).

    ``R(q) v = v + (2/|q|²) (w (u×v) + u×(u×v))``.
    """
    u = q[:3]
    w = q[3]
    s = 2.0 / kdot(q, q)
    t = tuple(s * c for c in kcross(u, v))
    ut = kcross(u, t)
    return (v[0] + w * t[0] + ut[0], v[1] + w * t[1] + ut[1], v[2] + w * t[2] + ut[2])


def krotate_inv(q: Comp, v: Comp) -> Comp:
    """Rotate ``v`` by the inverse of ``q`` (world to body); ``q`` of any nonzero norm."""
    return krotate((-q[0], -q[1], -q[2], q[3]), v)


def kmatrix(q: Comp) -> tuple[Comp, Comp, Comp]:
    """Rotation matrix ``R_wb`` of ``q`` of any nonzero norm, as three row tuples.

    ``R = I + (2/|q|²)(w [u]× + [u]×²)``: one division, then the unit-quaternion formula with
    ``2`` replaced by ``s = 2/|q|²``.
    """
    x, y, z, w = q
    s = 2.0 / kdot(q, q)
    xs, ys, zs = x * s, y * s, z * s
    wx, wy, wz = w * xs, w * ys, w * zs
    xx, xy, xz = x * xs, x * ys, x * zs
    yy, yz, zz = y * ys, y * zs, z * zs
    return (
        (1 - (yy + zz), xy - wz, xz + wy),
        (xy + wz, 1 - (xx + zz), yz - wx),
        (xz - wy, yz + wx, 1 - (xx + yy)),
    )


def kquat_dot(q: Comp, w: Comp) -> Comp:
    """Quaternion derivative ``½ q ⊗ (ω, 0)`` [1/s] (4 components) for body-frame ``ω`` [rad/s]."""
    d = kqmul(q, (w[0], w[1], w[2], 0.0))
    return tuple(0.5 * c for c in d)


def kexp(ops: Any, r: Comp, thr2: float) -> Comp:
    """Quaternion ``exp(φ)`` (4 components) of a rotation vector ``φ`` [rad] (3 components).

    Taylor series in ``θ² = |φ|²`` where ``θ² < thr2`` [rad²] (:func:`exp` picks ``thr2``).
    """
    t2 = kdot(r, r)
    small = t2 < thr2
    t = ops.sqrt(ops.where(small, t2 + 1.0, t2))  # safe value: no 0/0, finite gradient at 0
    k = ops.where(small, 0.5 - t2 / 48.0 + t2 * t2 / 3840.0, ops.sin(0.5 * t) / t)
    c = ops.where(small, 1.0 - t2 / 8.0 + t2 * t2 / 384.0, ops.cos(0.5 * t))
    return (k * r[0], k * r[1], k * r[2], c)


def klog(ops: Any, q: Comp, thr2: float) -> Comp:
    """Rotation vector ``2 atan2(|u|, w) u/|u|`` of ``q = (u, w)`` (any norm), taken with w ≥ 0.

    Uses the series ``(2/w)(1 - r²/3 + r⁴/5)``, ``r = |u|/w``, where ``r² < thr2``.
    """
    x, y, z, w = (ops.where(q[3] < 0, -c, c) for c in q)
    s2 = x * x + y * y + z * z
    small = s2 < thr2 * (w * w)
    s = ops.sqrt(ops.where(small, s2 + 1.0, s2))
    ws = ops.where(small, w, w + 1.0)
    r2 = s2 / (ws * ws)
    k = ops.where(small, (2.0 - r2 * (2.0 / 3.0) + r2 * r2 * 0.4) / ws, 2.0 * ops.atan2(s, w) / s)
    return (k * x, k * y, k * z)


def kto_euler(ops: Any, q: Comp, tol: float) -> Comp:
    """Euler ZYX ``(roll, pitch, yaw)`` [rad] of ``q`` (any norm); gimbal lock: ``cos θ < tol``."""
    x, y, z, w = q
    a = ops.sqrt((w + y) * (w + y) + (x - z) * (x - z))  # |q| √(1 + sin θ)
    b = ops.sqrt((w - y) * (w - y) + (x + z) * (x + z))  # |q| √(1 - sin θ)
    pitch = 2.0 * ops.atan2(a, b) - 0.5 * math.pi
    lock = 2.0 * a * b < tol * (a * a + b * b)  # cos θ = 2ab / (a² + b²)
    xx, yy, zz, ww = x * x, y * y, z * z, w * w
    roll = ops.atan2(2.0 * (y * z + w * x), ww - xx - yy + zz)  # atan2(R21, R22)
    yaw = ops.atan2(2.0 * (x * y + w * z), ww + xx - yy - zz)  # atan2(R10, R00)
    yaw_lock = ops.atan2(2.0 * (w * z - x * y), ww - xx + yy - zz)  # atan2(-R01, R11)
    return (ops.where(lock, 0.0 * roll, roll), pitch, ops.where(lock, yaw_lock, yaw))


def kfrom_euler(ops: Any, rpy: Comp) -> Comp:
    """Quaternion ``qz(yaw) ⊗ qy(pitch) ⊗ qx(roll)`` of Euler ZYX angles ``rpy`` [rad]."""
    cr, cp, cy = (ops.cos(0.5 * a) for a in rpy)
    sr, sp, sy = (ops.sin(0.5 * a) for a in rpy)
    return (
        sr * cp * cy - cr * sp * sy,
        cr * sp * cy + sr * cp * sy,
        cr * cp * sy - sr * sp * cy,
        cr * cp * cy + sr * sp * sy,
    )


def kfrom_matrix(ops: Any, m: tuple[Comp, Comp, Comp]) -> Comp:
    """Unit quaternion (w ≥ 0) of a rotation matrix given as row tuples (Shepperd's method)."""
    (r00, r01, r02), (r10, r11, r12), (r20, r21, r22) = m
    tr = r00 + r11 + r22
    # Candidate k is 4 q_k q; the one with the largest q_k is chosen, for accuracy.
    c0 = (1.0 + r00 - r11 - r22, r01 + r10, r02 + r20, r21 - r12)
    c1 = (r01 + r10, 1.0 - r00 + r11 - r22, r12 + r21, r02 - r20)
    c2 = (r02 + r20, r12 + r21, 1.0 - r00 - r11 + r22, r10 - r01)
    c3 = (r21 - r12, r02 - r20, r10 - r01, 1.0 + tr)
    d01 = ops.where(r00 >= r11, r00, r11)
    dmax = ops.where(d01 >= r22, d01, r22)
    use3, use0, use1 = tr >= dmax, r00 >= dmax, r11 >= dmax
    q = tuple(
        ops.where(use3, e3, ops.where(use0, e0, ops.where(use1, e1, e2)))
        for e0, e1, e2, e3 in zip(c0, c1, c2, c3, strict=True)
    )
    n = ops.sqrt(kdot(q, q))
    return tuple(ops.where(q[3] < 0, -c, c) / n for c in q)


def multiply(p: Any, q: Any) -> Any:
    """Hamilton product ``p ⊗ q`` of xyzw quaternions ``(..., 4)``; batch shapes broadcast.

    ``to_matrix(p ⊗ q) = to_matrix(p) @ to_matrix(q)``: ``q`` is applied first.
    """
    check_shape(p, (4,), "p")
    check_shape(q, (4,), "q")
    return stack(namespace(p, q), kqmul(unstack(p), unstack(q)), p)


def conjugate(q: Any) -> Any:
    """Conjugate ``q* = (-x, -y, -z, w)``, the inverse of a unit quaternion; shape ``(..., 4)``."""
    check_shape(q, (4,), "q")
    x, y, z, w = unstack(q)
    return stack(namespace(q), (-x, -y, -z, w), q)


def normalize(q: Any) -> Any:
    """Scale quaternions ``q`` of shape ``(..., 4)`` to unit norm."""
    check_shape(q, (4,), "q")
    xp = namespace(q)
    return q / xp.sqrt(xp.sum(q * q, axis=-1, keepdims=True))


def identity(shape: tuple[int, ...] = (), xp: Any = None, dtype: Any = None) -> Any:
    """Identity quaternions ``(0, 0, 0, 1)`` of shape ``(*shape, 4)``.

    Args:
        shape: Batch shape.
        xp: Array namespace (default NumPy).
        dtype: Floating dtype (default: the namespace's default).
    """
    if xp is None:
        import numpy as xp
    z = xp.zeros(tuple(shape), dtype=dtype)
    return stack(namespace(z), (z, z, z, z + 1.0), z)


def rotate(q: Any, v: Any) -> Any:
    """Rotate body-frame vectors ``v`` ``(..., 3)`` to the world frame: ``R_wb(q) v``.

    ``q`` is a quaternion ``(..., 4)`` of any nonzero norm (``R(c q) = R(q)``); batch shapes
    broadcast. Returns shape ``(..., 3)``.
    """
    check_shape(q, (4,), "q")
    check_shape(v, (3,), "v")
    return stack(namespace(q, v), krotate(unstack(q), unstack(v)), v)


def rotate_inverse(q: Any, v: Any) -> Any:
    """Rotate world-frame vectors to the body frame, ``v_b = R_wb(q)ᵀ v_w`` (shapes as rotate)."""
    check_shape(q, (4,), "q")
    check_shape(v, (3,), "v")
    return stack(namespace(q, v), krotate_inv(unstack(q), unstack(v)), v)


def to_matrix(q: Any) -> Any:
    """Rotation matrices ``R_wb`` ``(..., 3, 3)`` of quaternions ``(..., 4)``, any nonzero norm."""
    check_shape(q, (4,), "q")
    xp = namespace(q)
    return xp.stack([stack(xp, row, q) for row in kmatrix(unstack(q))], axis=-2)


def from_matrix(R: Any) -> Any:
    """Unit quaternions ``(..., 4)`` with ``w ≥ 0`` of rotation matrices ``R_wb`` ``(..., 3, 3)``.

    Branch-free Shepperd method: the four candidates are formed, the one for the largest of the
    trace and the diagonal elements is selected with ``where`` and normalised.
    """
    check_shape(R, (3, 3), "R")
    rows = tuple(unstack(R[..., i, :]) for i in range(3))
    return stack(namespace(R), kfrom_matrix(namespace(R), rows), R)


def to_euler(q: Any) -> Any:
    """Euler ZYX angles of quaternions, with ``R = Rz(yaw) Ry(pitch) Rx(roll)``.

    Roll and yaw lie in ``[-π, π]``, pitch in ``[-π/2, π/2]``. At gimbal lock, when
    ``|cos pitch| < √ε`` (``ε`` the machine epsilon of the dtype), only ``yaw - roll`` (pitch
    +90°) or ``yaw + roll`` (pitch -90°) is defined: roll is set to 0 and yaw is recovered as
    ``atan2(-R01, R11)``, which is exact at pitch = ±90° with roll = 0. The rotation, not the
    angles, is then reproduced (to ``O(√ε)``). The choice is branch-free (``where``).

    Args:
        q: Quaternions, shape ``(..., 4)`` (need not be normalised).

    Returns:
        ``(roll, pitch, yaw)`` in rad, shape ``(..., 3)``.
    """
    check_shape(q, (4,), "q")
    xp = namespace(q)
    return stack(xp, kto_euler(xp, unstack(q), math.sqrt(xp.finfo(q.dtype).eps)), q)


def from_euler(rpy: Any) -> Any:
    """Quaternions ``(..., 4)`` of Euler ZYX angles ``(roll, pitch, yaw)`` (rad, ``(..., 3)``)."""
    check_shape(rpy, (3,), "rpy")
    xp = namespace(rpy)
    return stack(xp, kfrom_euler(xp, unstack(rpy)), rpy)


def exp(rotvec: Any) -> Any:
    """Exponential map: unit quaternions ``(sin(θ/2) φ/θ, cos(θ/2))``, shape ``(..., 4)``.

    ``rotvec`` is ``φ = θ n`` (angle in rad times unit axis), shape ``(..., 3)``.
    """
    check_shape(rotvec, (3,), "rotvec")
    xp = namespace(rotvec)
    thr2 = (46080.0 * xp.finfo(rotvec.dtype).eps) ** (1.0 / 3.0)
    return stack(xp, kexp(xp, unstack(rotvec), thr2), rotvec)


def log(q: Any) -> Any:
    """Logarithm map: rotation vectors ``θ n`` (rad) ``(..., 3)`` of quaternions ``(..., 4)``.

    ``q`` need not be normalised; it is flipped to ``w ≥ 0`` first, so ``θ ∈ [0, π]`` and
    ``log(-q) = log(q)``.
    """
    check_shape(q, (4,), "q")
    xp = namespace(q)
    thr2 = (7.0 * xp.finfo(q.dtype).eps) ** (1.0 / 3.0)
    return stack(xp, klog(xp, unstack(q), thr2), q)


def quat_dot(quat: Any, ang_vel: Any) -> Any:
    """Quaternion derivative ``q̇ = ½ q ⊗ (ω, 0)``.

    Args:
        quat: Attitude quaternions (body to world), shape ``(..., 4)``.
        ang_vel: Body-frame angular velocity ``ω`` in rad/s, shape ``(..., 3)``.

    Returns:
        ``q̇`` in 1/s, shape ``(..., 4)``.
    """
    check_shape(quat, (4,), "quat")
    check_shape(ang_vel, (3,), "ang_vel")
    return stack(namespace(quat, ang_vel), kquat_dot(unstack(quat), unstack(ang_vel)), quat)


def integrate(quat: Any, ang_vel: Any, dt: Any) -> Any:
    """Exact attitude update for constant body rate: ``q(t + dt) = q(t) ⊗ exp(ω dt)``.

    Args:
        quat: Attitude quaternions (body to world), shape ``(..., 4)``.
        ang_vel: Body-frame angular velocity ``ω`` in rad/s, shape ``(..., 3)``.
        dt: Time step in s: a Python float or an array broadcastable to the batch shape ``...``.

    Returns:
        Quaternions, shape ``(..., 4)``; unit if ``quat`` is (no renormalisation is applied).
    """
    check_shape(quat, (4,), "quat")
    check_shape(ang_vel, (3,), "ang_vel")
    if is_array_api_obj(dt):
        dt = as_like(namespace(ang_vel), dt, ang_vel)[..., None]
    return multiply(quat, exp(ang_vel * dt))
