r"""Rotors: layout geometry, thrust allocation with saturation, and motor models.

**Geometry.** Rotor ``i`` sits at the end of an arm of length ``l_i`` at angle ``θ_i`` from body
``+x`` towards ``+y`` (counter-clockwise seen from above), ``r_i = l_i (cos θ_i, sin θ_i)`` (FLU),
with spin ``s_i = ±1`` (+1 = counter-clockwise seen from above). As in
:mod:`quadsim.physics.params`, ``L = max_i max(|x_i|, |y_i|)`` and ``M = [y/L; -x/L; -s]`` (3 x N).
Direction cosines within 1e-12 of ``0, 1/2, √2/2, √3/2, 1`` are snapped to those values, so standard
layouts are exact.

**Allocation.** Per-rotor thrust ``f`` [N] maps to the wrench ``w = [F, τ_x, τ_y, τ_z]`` by

.. math::  w = A f, \qquad A = [\mathbf 1^T;\; L M_0;\; L M_1;\; κ M_2], \quad
    κ = \frac{dτ_p}{df}\Big|_{Ω_h} = \frac{m_1 + 2 m_2 Ω_h}{k_1 + 2 k_2 Ω_h},

the drag torque per unit thrust linearised at the hover speed ``Ω_h``. ``κ = m_2/k_2`` exactly for
pure quadratic curves (``f = k_2 Ω^2``, ``τ_p = m_2 Ω^2``, seeds 001-004). With linear terms (the
Crazyflie presets have ``k_1, m_1 ≠ 0``) the yaw row is exact to first order about hover when the
yaw signs sum to zero (``Σ M_{2i} = 0``, every balanced layout), since the constant part of
``τ_p(f) ≈ τ_p(f_h) + κ (f - f_h)`` then cancels: ``F, τ_x, τ_y`` are still met exactly (the thrust
curve is inverted exactly), the achieved ``τ_z = M_2 τ_p(Ω)`` differs at second order in the
thrust differences, and :func:`allocate` reports that difference in ``lost``. Seed 003/004's
matrix in rotor-speed-squared units (thrust ``c_T Ω^2``, drag torque ``c_Q Ω^2``) is
:func:`rpm_sq_allocation_matrix`.

:func:`allocate` splits ``f = P w`` (``P = A^{-1}`` for N = 4, else the minimum-norm
pseudo-inverse) into ``P_0 F + s_{rp} P_{12} τ_{xy} + s_z P_3 τ_z``, with per-rotor bounds
``f(Ω_{min}) <= f_i <= f(Ω_{max})`` and priorities, all closed form per drone:

1. ``F`` is clipped to the range in which ``P_0 F`` is feasible;
2. if some yaw fraction ``s_z ∈ [0, 1]`` makes the full roll/pitch request feasible, ``s_rp = 1``
   and ``s_z`` is the largest such fraction;
3. otherwise ``s_rp`` is the largest feasible fraction with no yaw, then ``s_z`` the largest
   feasible fraction on top of it (no null-space redistribution for N > 4).

Then ``Ω_i = f^{-1}(f_i)`` (root on the increasing branch), clipped to ``[Ω_min, Ω_max]``.
Requests are clipped to ``±sqrt(finfo.max)`` first, so ``±inf``/``±1e9`` give finite speeds; a NaN
in a drone's request makes that drone's ``rpm``, ``wrench`` and ``lost`` NaN and sets its
``saturated`` flag (other drones are unaffected).

**Motor models** (speeds in RPM). First-order lag (seed 003) ``Ω̇ = k_m (Ω^* - Ω)``; asymmetric
quadratic (seed 000) ``Ω̇ = c_0 (Ω^*-Ω) + c_1 (Ω^{*2}-Ω^2)`` if ``Ω^* > Ω``, else with ``c_2, c_3``;
curves ``f = k_0 + k_1 Ω + k_2 Ω^2``, ``τ_p = m_0 + m_1 Ω + m_2 Ω^2``. :func:`wrench_from_rpm` is
the rotor wrench of :mod:`quadsim.physics.models.first_principles` without gyroscopic/spin-up terms.

**Deviations from the seeds.** Seed 003 calls its matrix "X-frame", but its rows put the rotors on
the body axes: it is ``layout("plus", d)`` (M1 front, M2 left). Seed 002's X torque equation
``τ_y = l(f_1 + f_2 - f_3 - f_4)`` (M1 front-left, numbered clockwise) has the wrong sign for FLU:
``r × f`` gives ``τ_y = l(-f_1 - f_2 + f_3 + f_4)``, which we use; its roll and yaw rows agree.
Seed 003 clips each rotor independently, which distorts the whole wrench; we keep ``F`` and
roll/pitch before yaw as above.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from ._array import as_like, check_shape, eps_of, namespace, stack
from .models._rigid import poly2, rotor_speed_dot
from .params import invert_curve

__all__ = [
    "Allocation",
    "Allocator",
    "Geometry",
    "allocate",
    "allocation_matrix",
    "asymmetric_quadratic",
    "drag_torque",
    "first_order_lag",
    "layout",
    "make_allocator",
    "mixing_from_geometry",
    "rpm_sq_allocation_matrix",
    "thrust",
    "wrench_from_rpm",
]

_KINDS = {"plus": (4, False), "x": (4, True), "hexa_plus": (6, False), "hexa_x": (6, True),
          "octo_plus": (8, False), "octo_x": (8, True)}  # fmt: skip
_CANON = np.array([0.0, 0.5, math.sqrt(0.5), math.sqrt(3.0) / 2.0, 1.0])


class Geometry(NamedTuple):
    """A planar rotor layout in the :class:`~quadsim.physics.params.Params` convention.

    Attributes:
        rotor_positions: Shape (N, 2) [m], body FLU (x, y).
        rotor_spin: Shape (N,), +1 = counter-clockwise seen from above.
        L: ``max_i max(|x_i|, |y_i|)`` [m].
        mixing_matrix: Shape (3, N): ``[y/L; -x/L; -spin]``.
    """

    rotor_positions: np.ndarray
    rotor_spin: np.ndarray
    L: float
    mixing_matrix: np.ndarray


class Allocator(NamedTuple):
    """Per-drone allocation data, precomputed in NumPy by :func:`make_allocator`.

    Attributes:
        A: Shape (4, N): per-rotor thrust [N] -> ``[F, τx, τy, τz]`` (:func:`allocation_matrix`).
        P: Shape (N, 4): ``A^{-1}`` (N = 4) or its minimum-norm pseudo-inverse.
        L: Lever arm [m].
        mixing_matrix: Shape (3, N).
        rpm2thrust: Thrust curve (3,) [N, N/RPM, N/RPM^2].
        rpm2torque: Drag-torque curve (3,) [N m, N m/RPM, N m/RPM^2].
        rpm_min: Lowest rotor speed [RPM].
        rpm_max: Highest rotor speed [RPM].
        kappa: Yaw torque per unit thrust used in ``A`` [m].
        thrust_min: Per-rotor thrust at ``rpm_min`` [N].
        thrust_max: Per-rotor thrust at ``rpm_max`` [N].
        collective_min: Lowest collective thrust with zero torque [N].
        collective_max: Highest collective thrust with zero torque [N].
    """

    A: np.ndarray
    P: np.ndarray
    L: float
    mixing_matrix: np.ndarray
    rpm2thrust: np.ndarray
    rpm2torque: np.ndarray
    rpm_min: float
    rpm_max: float
    kappa: float
    thrust_min: float
    thrust_max: float
    collective_min: float
    collective_max: float


class Allocation(NamedTuple):
    """Result of :func:`allocate` (leading batch shape ``...`` of the request).

    Attributes:
        rpm: Rotor speed commands [RPM], shape (..., N), within ``[rpm_min, rpm_max]``.
        wrench: Wrench achieved by ``rpm`` through the curves, shape (..., 4) [N, N m].
        lost: Requested minus achieved wrench, shape (..., 4).
        saturated: Shape (...), True where thrust, roll/pitch or yaw had to be cut.
    """

    rpm: Any
    wrench: Any
    lost: Any
    saturated: Any


def _readonly(a: Any) -> np.ndarray:
    a = np.array(a, dtype=np.float64) + 0.0  # + 0.0 turns -0.0 into 0.0
    a.flags.writeable = False
    return a


def _snap(u: np.ndarray) -> np.ndarray:
    a = np.abs(u)
    k = np.argmin(np.abs(a[..., None] - _CANON), axis=-1)
    return np.where(np.abs(a - _CANON[k]) <= 1e-12, np.copysign(_CANON[k], u), u)


def mixing_from_geometry(arm_angles_rad: Any, arm_lengths: Any, spins: Any) -> Geometry:
    """Rotor positions, ``L`` and mixing matrix of a planar layout.

    Args:
        arm_angles_rad: Shape (N,) [rad], arm angle from body +x towards +y.
        arm_lengths: Scalar or shape (N,) [m], > 0.
        spins: Shape (N,), +1 (counter-clockwise seen from above) or -1.

    Returns:
        :class:`Geometry`.
    """
    ang = np.asarray(arm_angles_rad, dtype=np.float64)
    if ang.ndim != 1 or ang.size == 0 or not np.all(np.isfinite(ang)):
        raise ValueError(f"arm_angles_rad must be a finite 1-D array (N,); got {ang.tolist()}")
    n = ang.size
    length = np.asarray(arm_lengths, dtype=np.float64)
    if length.shape not in ((), (n,)) or not np.all(np.isfinite(length) & (length > 0)):
        raise ValueError(f"arm_lengths must be > 0, scalar or shape ({n},); got {length.tolist()}")
    spin = np.asarray(spins, dtype=np.float64)
    if spin.shape != (n,) or not np.all(np.abs(spin) == 1.0):
        raise ValueError(f"spins must be {n} entries of +1 or -1; got {spin.tolist()}")
    pos = np.stack([length * _snap(np.cos(ang)), length * _snap(np.sin(ang))], axis=-1)
    L = float(np.max(np.abs(pos)))
    M = np.stack([pos[:, 1] / L, -pos[:, 0] / L, -spin])
    return Geometry(_readonly(pos), _readonly(spin), L, _readonly(M))


def layout(
    kind: str,
    arm_length: float,
    first_spin: int = 1,
    *,
    clockwise: bool = False,
    first_angle_rad: float | None = None,
) -> Geometry:
    """A regular layout with equal arms and alternating spins.

    Rotor ``i`` (0-based) sits at ``θ_i = θ_0 ± 2π i / N`` (``-`` when numbered ``clockwise``
    seen from above), ``θ_0`` = 0 for ``*plus`` kinds (rotor 1 in front) and ``-π/N`` for ``*x``
    kinds (rotor 1 front-right), spins ``first_spin, -first_spin, ...``. Examples: f450_plus and
    seed 003 are ``layout("plus", l)``; generic_x is ``layout("x", l)``; seed 004 is
    ``layout("plus", l, clockwise=True)``; the Crazyflie is ``layout("x", l, clockwise=True)``.

    Args:
        kind: One of "plus", "x", "hexa_plus", "hexa_x", "octo_plus", "octo_x".
        arm_length: Distance from the centre to each rotor [m].
        first_spin: Spin of rotor 1, +1 (counter-clockwise seen from above) or -1.
        clockwise: Number the rotors clockwise seen from above.
        first_angle_rad: Override ``θ_0`` [rad].

    Returns:
        :class:`Geometry`.
    """
    if kind not in _KINDS:
        raise ValueError(f"kind must be one of {list(_KINDS)}; got {kind!r}")
    if first_spin not in (1, -1):
        raise ValueError(f"first_spin must be +1 or -1; got {first_spin!r}")
    n, is_x = _KINDS[kind]
    first = (-math.pi / n if is_x else 0.0) if first_angle_rad is None else float(first_angle_rad)
    i = np.arange(n)
    ang = first + (-1.0 if clockwise else 1.0) * 2.0 * math.pi * i / n
    return mixing_from_geometry(ang, arm_length, first_spin * (-1.0) ** i)


def rpm_sq_allocation_matrix(positions: Any, spins: Any, cT: float, cQ: float) -> np.ndarray:
    """Seed 003/004 allocation matrix from squared rotor speeds to ``[F, τx, τy, τz]``.

    Args:
        positions: Shape (N, 2) [m], body FLU rotor positions.
        spins: Shape (N,), +1 = counter-clockwise seen from above.
        cT: Thrust coefficient, ``f = cT Ω^2`` [N per speed unit squared].
        cQ: Drag-torque coefficient, ``τ_p = cQ Ω^2`` [N m per speed unit squared].

    Returns:
        Shape (4, N): rows ``cT``, ``y cT``, ``-x cT``, ``-spin cQ``.
    """
    pos = np.asarray(positions, dtype=np.float64)
    spin = np.asarray(spins, dtype=np.float64)
    if pos.ndim != 2 or pos.shape[1] != 2 or spin.shape != (pos.shape[0],):
        raise ValueError(f"positions must be (N, 2) and spins (N,); got {pos.shape}, {spin.shape}")
    return np.stack([np.full(spin.shape, cT), pos[:, 1] * cT, -pos[:, 0] * cT, -spin * cQ]) + 0.0


def _kappa(params: Any) -> float:
    """Drag torque per unit thrust [m], ``dτ_p/df`` at the hover speed (module docstring)."""
    k, m = params.rpm2thrust, params.rpm2torque
    if k[0] == 0.0 and k[1] == 0.0 and m[0] == 0.0 and m[1] == 0.0:
        return float(m[2] / k[2])  # pure quadratic: exact at every speed
    g = float(np.linalg.norm(params.gravity_vec))
    w = invert_curve(k, params.mass * g / params.mixing_matrix.shape[1])
    if not np.isfinite(w):  # hover out of reach: linearise at the top speed
        w = float(params.rpm_max)
    return float((m[1] + 2.0 * m[2] * w) / (k[1] + 2.0 * k[2] * w))


def allocation_matrix(params: Any) -> np.ndarray:
    """Matrix ``A`` (4, N) from per-rotor thrust [N] to ``[F, τx, τy, τz]`` [N, N m].

    Args:
        params: A :class:`~quadsim.physics.params.Params` (or anything with its rotor fields).

    Returns:
        ``[1; L M_0; L M_1; κ M_2]`` with ``κ`` from the curves (see the module docstring).
    """
    M = np.asarray(params.mixing_matrix, dtype=np.float64)
    A = np.concatenate([np.ones((1, M.shape[1])), params.L * M[:2], _kappa(params) * M[2:]])
    return _readonly(A)


def make_allocator(params: Any) -> Allocator:
    """Precompute the allocation of one drone (NumPy), for repeated :func:`allocate` calls.

    Raises:
        ValueError: If the layout cannot produce all four wrench components, or pure thrust.
    """
    A = allocation_matrix(params)
    if np.linalg.matrix_rank(A) < 4:
        raise ValueError(f"{params.name}: rotor layout cannot produce every wrench axis (rank < 4)")
    P = np.linalg.inv(A) if A.shape[1] == 4 else np.linalg.pinv(A)
    if np.any(P[:, 0] <= 0.0):
        raise ValueError(f"{params.name}: pure thrust needs a rotor to push down: {P[:, 0]}")
    k = np.asarray(params.rpm2thrust, dtype=np.float64)
    f_lo, f_hi = (float(np.polyval(k[::-1], w)) for w in (params.rpm_min, params.rpm_max))
    return Allocator(
        A=A, P=_readonly(P), L=float(params.L), mixing_matrix=_readonly(params.mixing_matrix),
        rpm2thrust=_readonly(k), rpm2torque=_readonly(params.rpm2torque),
        rpm_min=float(params.rpm_min), rpm_max=float(params.rpm_max), kappa=_kappa(params),
        thrust_min=f_lo, thrust_max=f_hi, collective_min=float(np.max(f_lo / P[:, 0])),
        collective_max=float(np.min(f_hi / P[:, 0])),
    )  # fmt: skip


def _interval(xp: Any, base: Any, d: Any, lo: float, hi: float) -> tuple[Any, Any]:
    """``[s_lo, s_hi] ⊂ [0, 1]``: ``lo <= base + s d <= hi`` on the last axis; empty if lo > hi."""
    zero = d == 0
    one = xp.ones_like(d)
    ds = xp.where(zero, one, d)
    t1, t2 = (lo - base) / ds, (hi - base) / ds
    inside = (base >= lo) & (base <= hi)
    low = xp.where(zero, xp.where(inside, -one, 2.0 * one), xp.minimum(t1, t2))
    up = xp.where(zero, xp.where(inside, 2.0 * one, -one), xp.maximum(t1, t2))
    s_lo = xp.clip(xp.max(low, axis=-1, keepdims=True), 0.0, None)
    return s_lo, xp.clip(xp.min(up, axis=-1, keepdims=True), None, 1.0)


def _invert_thrust(xp: Any, f: Any, k: np.ndarray) -> Any:
    """``Ω`` with ``k0 + k1 Ω + k2 Ω² = f`` on the increasing branch (cancellation-free form)."""
    k0, k1, k2 = (float(c) for c in k)
    sq = xp.sqrt(xp.clip(k1 * k1 + 4.0 * k2 * (f - k0), 0.0, None))
    return 2.0 * (k0 - f) / (-k1 - sq) if k1 > 0.0 else (sq - k1) / (2.0 * k2)


def allocate(wrench: Any, drone: Any) -> Allocation:
    """Rotor speeds that realise a wrench, with saturation priorities (module docstring).

    Use ``a = make_allocator(params)`` once and ``allocate(w, a)`` in loops; passing a ``Params``
    rebuilds the allocator on each call. Under ``jax.jit`` close over the allocator (its NumPy
    values select code paths at trace time) rather than passing it as a traced argument.

    Args:
        wrench: Requested ``[F, τx, τy, τz]`` [N, N m], body FLU, shape (..., 4); any array-API
            backend, dtype preserved.
        drone: An :class:`Allocator` or a :class:`~quadsim.physics.params.Params`.

    Returns:
        :class:`Allocation`.
    """
    a = drone if isinstance(drone, Allocator) else make_allocator(drone)
    xp = namespace(wrench)
    check_shape(wrench, (4,), "wrench")
    big = float(xp.finfo(wrench.dtype).max) ** 0.5
    w = xp.clip(wrench, -big, big)
    Pt = as_like(xp, a.P.T, wrench)
    F = w[..., 0:1]
    Fc = xp.clip(F, a.collective_min, a.collective_max)
    base = Fc * Pt[0, :]
    rp = w[..., 1:2] * Pt[1, :] + w[..., 2:3] * Pt[2, :]
    yaw = w[..., 3:4] * Pt[3, :]
    lo, hi = a.thrust_min, a.thrust_max
    tol = 16.0 * eps_of(xp, wrench) * max(abs(lo), abs(hi))
    lo_t, hi_t = lo - tol, hi + tol
    z_lo, z_hi = _interval(xp, base + rp, yaw, lo_t, hi_t)  # full roll/pitch, some yaw
    full = z_lo <= z_hi
    s_rp = _interval(xp, base, rp, lo_t, hi_t)[1]
    s_z = _interval(xp, base + s_rp * rp, yaw, lo_t, hi_t)[1]
    s_rp = xp.where(full, xp.ones_like(s_rp), s_rp)
    s_z = xp.where(full, z_hi, s_z)
    f = xp.clip(base + s_rp * rp + s_z * yaw, lo, hi)
    rpm = xp.clip(_invert_thrust(xp, f, a.rpm2thrust), a.rpm_min, a.rpm_max)
    achieved = wrench_from_rpm(rpm, a)
    ok = (F >= a.collective_min) & (F <= a.collective_max) & (s_rp >= 1.0) & (s_z >= 1.0)
    return Allocation(rpm, achieved, wrench - achieved, ~ok[..., 0])


def _coefs(xp: Any, coef: Any, like: Any, k: int, name: str) -> tuple[Any, ...]:
    """Coefficients as Python floats (one set) or ``(..., 1)`` arrays (batched ``(..., k)``)."""
    if isinstance(coef, list | tuple | np.ndarray) and np.ndim(coef) == 1:
        if len(coef) != k:
            raise ValueError(f"{name} must have shape (..., {k}); got length {len(coef)}")
        return tuple(float(c) for c in coef)
    c = as_like(xp, coef, like)
    check_shape(c, (k,), name)
    return tuple(c[..., i : i + 1] for i in range(k))


def _curve(rpm: Any, curve: Any, name: str) -> Any:
    xp = namespace(rpm)
    out = poly2(_coefs(xp, curve, rpm, 3, name), rpm)
    return out if hasattr(out, "shape") and out.shape == rpm.shape else out + xp.zeros_like(rpm)


def thrust(rpm: Any, curve: Any) -> Any:
    """Rotor thrust ``k0 + k1 Ω + k2 Ω²`` [N] at speeds ``rpm`` [RPM], shape (..., N).

    Args:
        rpm: Rotor speeds [RPM], shape (..., N).
        curve: ``rpm2thrust`` (3,) [N, N/RPM, N/RPM^2], or a backend array (..., 3).
    """
    return _curve(rpm, curve, "curve")


def drag_torque(rpm: Any, curve: Any) -> Any:
    """Rotor drag torque ``m0 + m1 Ω + m2 Ω²`` [N m] (magnitude, about the spin axis).

    Args:
        rpm: Rotor speeds [RPM], shape (..., N).
        curve: ``rpm2torque`` (3,) [N m, N m/RPM, N m/RPM^2], or a backend array (..., 3).
    """
    return _curve(rpm, curve, "curve")


def first_order_lag(rpm: Any, rpm_des: Any, k_m: Any) -> Any:
    """Seed 003 motor lag ``Ω̇ = k_m (Ω^* - Ω)`` [RPM/s].

    Args:
        rpm: Actual speeds [RPM], shape (..., N).
        rpm_des: Commanded speeds [RPM], shape (..., N).
        k_m: Motor constant [1/s] (float, or an array broadcasting against ``rpm``).
    """
    xp = namespace(rpm, rpm_des)
    scalar = isinstance(k_m, int | float | np.floating) or (
        isinstance(k_m, np.ndarray) and k_m.ndim == 0
    )
    k = float(k_m) if scalar else as_like(xp, k_m, rpm)
    return k * (rpm_des - rpm)


def asymmetric_quadratic(rpm: Any, rpm_des: Any, coef: Any) -> Any:
    """Seed 000 asymmetric rotor dynamics [RPM/s] (same kernel as the models).

    Args:
        rpm: Actual speeds [RPM], shape (..., N).
        rpm_des: Commanded speeds [RPM], shape (..., N).
        coef: ``rotor_dyn_coef`` ``[c0, c1, c2, c3]`` [1/s, 1/(s RPM), 1/s, 1/(s RPM)], or a
            backend array (..., 4); ``c0, c1`` spin up (``Ω^* > Ω``), ``c2, c3`` spin down.
    """
    xp = namespace(rpm, rpm_des)
    return rotor_speed_dot((rpm_des,), (rpm,), _coefs(xp, coef, rpm, 4, "coef"), xp)[0]


def wrench_from_rpm(rpm: Any, drone: Any) -> Any:
    """Rotor wrench ``[Σ f_i, L M_0 f, L M_1 f, M_2 τ_p]`` [N, N m] from actual speeds.

    Equals the thrust and torque of :mod:`quadsim.physics.models.first_principles` without the
    gyroscopic (``-ω × h_r``) and spin-up (``J_p M_2 Ω̇``) terms.

    Args:
        rpm: Rotor speeds [RPM], shape (..., N).
        drone: A :class:`~quadsim.physics.params.Params` or :class:`Allocator`.

    Returns:
        Shape (..., 4), dtype of ``rpm``.
    """
    xp = namespace(rpm)
    check_shape(rpm, (drone.mixing_matrix.shape[1],), "rpm")
    f = thrust(rpm, drone.rpm2thrust)
    tp = drag_torque(rpm, drone.rpm2torque)
    M = as_like(xp, drone.mixing_matrix, rpm)
    L = float(drone.L)
    comps = (xp.sum(f, axis=-1), L * xp.sum(M[0, :] * f, axis=-1),
             L * xp.sum(M[1, :] * f, axis=-1), xp.sum(M[2, :] * tp, axis=-1))  # fmt: skip
    return stack(xp, comps, rpm)
