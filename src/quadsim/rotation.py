"""Rotations: xyzw unit quaternions, rotation matrices, Euler ZYX angles, exp/log maps.

Conventions (see ``docs/conventions.md``):

* A quaternion ``q = (x, y, z, w)`` is stored scalar-last, shape ``(..., 4)``, Hamilton product.
  It maps body-frame vectors to the world frame: ``v_w = q ⊗ (v_b, 0) ⊗ q*`` and
  ``R_wb = to_matrix(q)``.
* Angular velocity ``ω`` is expressed in the body frame. The kinematics are

  ``q̇ = ½ q ⊗ (ω, 0)``  and, for constant ``ω`` over ``dt``,  ``q(t+dt) = q(t) ⊗ exp(ω dt)``

  with ``exp(φ) = (sin(|φ|/2) φ/|φ|, cos(|φ|/2))``.
* Euler ZYX angles ``(roll φ, pitch θ, yaw ψ)`` compose as ``R = Rz(ψ) Ry(θ) Rx(φ)``.

The ``_k*`` functions are component kernels: they take tuples of components (arrays of any batch
shape, or CasADi scalars) and are shared by every model so the CasADi twins use the same formulas.
"""

from __future__ import annotations

from typing import Any

Comp = tuple[Any, ...]


def _kcross(a: Comp, b: Comp) -> Comp:
    """Cross product ``a × b`` of 3-component tuples."""
    return (
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    )


def _kdot(a: Comp, b: Comp) -> Any:
    """Dot product of two component tuples of equal length."""
    out = a[0] * b[0]
    for x, y in zip(a[1:], b[1:], strict=True):
        out = out + x * y
    return out


def _kqmul(a: Comp, b: Comp) -> Comp:
    """Hamilton product ``a ⊗ b`` of xyzw component tuples."""
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return (
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
        aw * bw - ax * bx - ay * by - az * bz,
    )


def _krotate(q: Comp, v: Comp) -> Comp:
    """Rotate ``v`` by unit quaternion ``q`` (body to world): ``v + 2w(u×v) + 2u×(u×v)``."""
    u = q[:3]
    w = q[3]
    t = tuple(2 * c for c in _kcross(u, v))
    ut = _kcross(u, t)
    return (v[0] + w * t[0] + ut[0], v[1] + w * t[1] + ut[1], v[2] + w * t[2] + ut[2])


def _krotate_inv(q: Comp, v: Comp) -> Comp:
    """Rotate ``v`` by the inverse of unit quaternion ``q`` (world to body)."""
    return _krotate((-q[0], -q[1], -q[2], q[3]), v)


def _kmatrix(q: Comp) -> tuple[Comp, Comp, Comp]:
    """Rotation matrix ``R_wb`` of a unit quaternion, as three row tuples."""
    x, y, z, w = q
    return (
        (1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)),
        (2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)),
        (2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)),
    )


def _kquat_dot(q: Comp, w: Comp) -> Comp:
    """Quaternion derivative ``½ q ⊗ (ω, 0)`` for body-frame angular velocity ``ω``."""
    d = _kqmul(q, (w[0], w[1], w[2], 0.0))
    return tuple(0.5 * c for c in d)
