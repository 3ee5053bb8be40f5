r"""Trajectory errors: alignment (Umeyama), absolute (ATE) and relative (RTE) errors.

Conventions (frames, quaternions, shapes) are those of :mod:`quadsim.app.analysis`.

Absolute trajectory error (:func:`ate`, :func:`umeyama`, :func:`align_trajectory`)
==================================================================================

As defined by Zhang and Scaramuzza, "A Tutorial on Quantitative Trajectory Evaluation for
Visual(-Inertial) Odometry", IROS 2018 (tool ``rpg_trajectory_evaluation``), and by ``evo``
(Grupp, 2017): first align the estimate to the truth with the transform ``(R, t, s)`` that
minimises ``Σ_k |p_k - (s R p̂_k + t)|²`` over the chosen group, then::

    p̂'_k = s R p̂_k + t,   e_k = |p̂'_k - p_k| [m],   ATE = sqrt( (1/T) Σ_k e_k² )

and, when quaternions are given, the rotation error of the aligned attitude
``q̂'_k = q(R) ⊗ q̂_k``: ``θ_k = |Log(q_k⁻¹ ⊗ q̂'_k)|`` [deg]. Alignments:

* ``"se3"``: rotation and translation (6 DoF); ``"sim3"``: and a scale ``s`` (7 DoF);
* ``"posyaw"``: translation and a rotation about the world z axis only (4 DoF, the
  unobservable directions of visual-inertial odometry); ``"none"``: ``R = I, t = 0, s = 1``.

Umeyama's closed form (S. Umeyama, "Least-squares estimation of transformation parameters
between two point patterns", IEEE TPAMI 13(4), 1991, eqs. 40-42), with ``x = p̂``, ``y = p``::

    μ_x = (1/T) Σ x_k,   μ_y = (1/T) Σ y_k,   σ_x² = (1/T) Σ |x_k - μ_x|²
    Σ_xy = (1/T) Σ (y_k - μ_y)(x_k - μ_x)ᵀ = U D Vᵀ (SVD, D = diag(d_1 ≥ d_2 ≥ d_3 ≥ 0))
    S = diag(1, 1, sign(det U det V))      (reflection fix: R is a rotation, det R = +1)
    R = U S Vᵀ,   s = tr(D S) / σ_x²  (sim3; 1 otherwise),   t = μ_y - s R μ_x

The solution is unique when ``rank Σ_xy ≥ 2``; a collinear (or constant) trajectory leaves the
rotation about the line free and is rejected with ``ValueError``. For ``"posyaw"`` the
minimiser over ``R = Rz(ψ)`` maximises ``tr(Rz(ψ)ᵀ Σ_xy) = cos ψ (Σ₀₀ + Σ₁₁) + sin ψ (Σ₁₀ - Σ₀₁)
+ Σ₂₂``, so ``ψ = atan2(Σ₁₀ - Σ₀₁, Σ₀₀ + Σ₁₁)``, ``t = μ_y - Rz(ψ) μ_x``. The alignment may be
computed from the first ``n_align`` samples only (``rpg_trajectory_evaluation``'s
``n_aligned``) and is then applied to all of them.

Relative trajectory error (:func:`rte`)
=======================================

Also after Zhang and Scaramuzza (2018), the "relative error" over sub-trajectories of
travelled length ``Δ`` [m]. With the true travelled distance ``s_k = Σ_{m ≤ k} |p_m - p_{m-1}|``
(``s_0 = 0``), each start index ``i`` is paired with the first index ``j`` with
``s_j ≥ s_i + Δ`` (starts with no such ``j`` are dropped). The estimate is aligned at the start
of each sub-trajectory, its pose at ``i`` moved onto the true pose at ``i``
(``T̂'_k = T_i T̂_i⁻¹ T̂_k``), and its end pose compared with the truth's::

    p̂'_j = p_i + R_i R̂_iᵀ (p̂_j - p̂_i),
    e_t = |p̂'_j - p_j| = |R̂_iᵀ (p̂_j - p̂_i) - R_iᵀ (p_j - p_i)|    [m]
    q̂'_j = q_i ⊗ q̂_i⁻¹ ⊗ q̂_j,
    e_R = (180/π) |Log(q_j⁻¹ ⊗ q̂'_j)|                            [deg]

i.e. the difference of the relative poses ``T_i⁻¹ T_j`` of the truth and of the estimate; this
equals the norm of the translation and the angle of ``(T_i⁻¹ T_j)⁻¹ (T̂_i⁻¹ T̂_j)``, the error
the tutorial defines. Both are invariant under any rigid transform of the whole estimate, so no
global alignment is needed (a scale error is *not* removed). Statistics (RMSE, mean, median,
std, min, max) are over all pairs of one length. A drift of ``k`` metres per travelled metre
gives ``e_t ≈ k Δ``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from ...physics import rotation as rot
from .accuracy import ErrorStats, attitude_angle, error_stats
from .inputs import as_array, as_quat, same_samples, same_shape

__all__ = [
    "ALIGNMENTS",
    "ATEResult",
    "RTEResult",
    "align_trajectory",
    "ate",
    "ate_from_moments",
    "rte",
    "umeyama",
]

ALIGNMENTS = ("se3", "sim3", "posyaw", "none")
"""The alignments of :func:`align_trajectory` and :func:`ate`."""


# --------------------------------------------------------------------------- alignment, ATE


def umeyama(src: Any, dst: Any, with_scale: bool = False) -> tuple[np.ndarray, np.ndarray, float]:
    """Least-squares similarity ``(R, t, s)`` minimising ``Σ_k |dst_k - (s R src_k + t)|²``.

    Umeyama (1991), eqs. 40-42, with the reflection fix ``S = diag(1, 1, sign(det U det V))``
    (see the module docstring).

    Args:
        src: Points ``x_k``, shape ``(T, 3)``.
        dst: Points ``y_k``, shape ``(T, 3)``.
        with_scale: Estimate ``s`` (sim3); otherwise ``s = 1`` (se3).

    Returns:
        ``R`` ``(3, 3)`` (a rotation, ``det R = 1``), ``t`` ``(3,)`` in the units of the points,
        ``s`` a Python float.

    Raises:
        ValueError: Collinear or constant points (the rotation is not unique).
    """
    x = as_array(src, "src", (3,), (2,))
    y = as_array(dst, "dst", (3,), (2,))
    same_shape(x, y, "src", "dst")
    mx, my = x.mean(axis=0), y.mean(axis=0)
    xc, yc = x - mx, y - my
    sigma_xy = yc.T @ xc / len(x)
    U, D, Vt = np.linalg.svd(sigma_xy)
    if not D[0] > 0 or D[1] <= 1e-10 * D[0]:
        raise ValueError(
            "src and dst must not be collinear for an se3/sim3 alignment (rank of their "
            "cross-covariance < 2: the rotation is not unique)"
        )
    S = np.ones(3)
    if np.linalg.det(U) * np.linalg.det(Vt) < 0:
        S[2] = -1.0
    R = (U * S) @ Vt
    s = 1.0
    if with_scale:
        var_x = float(np.mean(np.sum(xc * xc, axis=1)))
        s = float(np.sum(D * S)) / var_x
    t = my - s * R @ mx
    return R, t, s


def ate_from_moments(n: Any, sum_x: Any, sum_y: Any, sum_yx: Any, sum_xx: Any,
                     sum_yy: Any) -> np.ndarray:  # fmt: skip
    """The SE(3)-aligned ATE ``(...)`` [m] of point sets given by their sums (a stream's).

    With ``x`` the estimate and ``y`` the truth, Umeyama's alignment leaves the residual
    ``min_{R,t} (1/n) Σ |y - (R x + t)|² = σ_x² + σ_y² - 2 Σ_i s_i d_i``, where ``d_i`` are the
    singular values of the cross-covariance ``Σ_yx = (1/n) Σ (y - ȳ)(x - x̄)ᵀ`` and ``s_i`` the
    reflection fix (``+1``, the last ``sign(det U det V)``): the same number :func:`ate` gives
    with ``align="se3"``, from sums that can be accumulated chunk by chunk (shift the points by a
    fixed reference first, for rounding: the residual does not change).

    Args:
        n: Number of points ``(...)``.
        sum_x: ``Σ x`` ``(..., 3)``.
        sum_y: ``Σ y`` ``(..., 3)``.
        sum_yx: ``Σ y xᵀ`` ``(..., 3, 3)``.
        sum_xx: ``Σ |x|²`` ``(...)``.
        sum_yy: ``Σ |y|²`` ``(...)``.

    Returns:
        The RMSE after alignment; NaN where ``n < 3``.
    """
    n = np.asarray(n, np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        mx = np.asarray(sum_x, np.float64) / n[..., None]
        my = np.asarray(sum_y, np.float64) / n[..., None]
        sigma = (np.asarray(sum_yx, np.float64) / n[..., None, None]
                 - my[..., :, None] * mx[..., None, :])  # fmt: skip
        var_x = np.asarray(sum_xx, np.float64) / n - np.sum(mx * mx, axis=-1)
        var_y = np.asarray(sum_yy, np.float64) / n - np.sum(my * my, axis=-1)
    sigma = np.where(np.isfinite(sigma), sigma, 0.0)
    U, D, Vt = np.linalg.svd(sigma)
    S = np.ones_like(D)
    S[..., 2] = np.sign(np.linalg.det(U) * np.linalg.det(Vt))
    e2 = np.maximum(var_x + var_y - 2.0 * np.sum(S * D, axis=-1), 0.0)
    return np.where(n >= 3, np.sqrt(e2), np.nan)


def _yaw_alignment(x: Any, y: Any) -> tuple[np.ndarray, np.ndarray, float]:
    """4-DoF ``(Rz(ψ), t)`` minimising ``Σ |y_k - (Rz(ψ) x_k + t)|²``."""
    mx, my = x.mean(axis=0), y.mean(axis=0)
    C = (y - my).T @ (x - mx) / len(x)
    a, b = C[0, 0] + C[1, 1], C[1, 0] - C[0, 1]
    if math.hypot(a, b) <= 1e-12 * max(float(np.max(np.abs(C))), 1e-300):
        raise ValueError(
            "est_pos and true_pos must move horizontally for a posyaw alignment (the yaw is "
            "not determined)"
        )
    psi = math.atan2(b, a)
    c, s = math.cos(psi), math.sin(psi)
    R = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    return R, my - R @ mx, 1.0


def align_trajectory(
    est_pos: Any, true_pos: Any, align: str = "se3", n_align: int | None = None
) -> tuple[np.ndarray, np.ndarray, float]:
    """Transform ``(R, t, s)`` aligning the estimate to the truth: ``p ≈ s R p̂ + t``.

    Args:
        est_pos: Estimated positions [m], shape ``(T, 3)``.
        true_pos: True positions [m], shape ``(T, 3)``.
        align: ``"se3"``, ``"sim3"``, ``"posyaw"`` (rotation about z only) or ``"none"``.
        n_align: Use only the first ``n_align`` samples to compute the alignment (all if
            ``None``).

    Returns:
        ``R`` ``(3, 3)``, ``t`` ``(3,)`` [m], ``s`` (float).
    """
    x = as_array(est_pos, "est_pos", (3,), (2,))
    y = as_array(true_pos, "true_pos", (3,), (2,))
    same_shape(x, y, "est_pos", "true_pos")
    if align not in ALIGNMENTS:
        raise ValueError(f"align must be one of {ALIGNMENTS}; got {align!r}")
    if n_align is not None:
        if isinstance(n_align, bool) or not isinstance(n_align, int | np.integer) or n_align < 1:
            raise ValueError(f"n_align must be a positive integer or None; got {n_align!r}")
        x, y = x[:n_align], y[:n_align]
    if len(x) == 0:
        raise ValueError("est_pos must have at least one sample")
    if align == "none":
        return np.eye(3), np.zeros(3), 1.0
    if align == "posyaw":
        return _yaw_alignment(x, y)
    try:
        return umeyama(x, y, with_scale=align == "sim3")
    except ValueError as exc:
        raise ValueError(f"est_pos and true_pos: {exc}") from None


class ATEResult(NamedTuple):
    """Absolute trajectory error after alignment (see the module docstring).

    Attributes:
        rmse: RMSE of the aligned position errors [m].
        mean: Mean position error [m].
        median: Median position error [m].
        max: Largest position error [m].
        R: Alignment rotation ``(3, 3)``.
        t: Alignment translation ``(3,)`` [m].
        s: Alignment scale (1 unless ``"sim3"``).
        errors: Position errors ``|s R p̂_k + t - p_k|`` [m], shape ``(T,)``.
        rot: Statistics of the rotation errors [deg] when quaternions were given, else None.
        rot_errors: Rotation errors [deg], shape ``(T,)``, or None.
    """

    rmse: float
    mean: float
    median: float
    max: float
    R: np.ndarray
    t: np.ndarray
    s: float
    errors: np.ndarray
    rot: ErrorStats | None = None
    rot_errors: np.ndarray | None = None


def ate(
    est_pos: Any,
    true_pos: Any,
    align: str = "se3",
    est_quat: Any = None,
    true_quat: Any = None,
    n_align: int | None = None,
) -> ATEResult:
    """Absolute trajectory error (Zhang & Scaramuzza 2018; ``rpg_trajectory_evaluation``, ``evo``).

    Aligns the estimate to the truth (:func:`align_trajectory`), then takes the statistics of
    ``e_k = |s R p̂_k + t - p_k|``; with quaternions, also of the rotation errors
    ``|Log(q_k⁻¹ ⊗ q(R) ⊗ q̂_k)|`` [deg].

    Args:
        est_pos: Estimated positions [m], shape ``(T, 3)`` (one trajectory).
        true_pos: True positions [m], shape ``(T, 3)``.
        align: ``"se3"``, ``"sim3"``, ``"posyaw"`` or ``"none"``.
        est_quat: Estimated attitudes (xyzw), shape ``(T, 4)``, optional.
        true_quat: True attitudes, shape ``(T, 4)``; needed with ``est_quat``.
        n_align: Align on the first ``n_align`` samples only (all if ``None``).

    Returns:
        :class:`ATEResult`.
    """
    x = as_array(est_pos, "est_pos", (3,), (2,))
    y = as_array(true_pos, "true_pos", (3,), (2,))
    same_shape(x, y, "est_pos", "true_pos")
    if (est_quat is None) != (true_quat is None):
        raise ValueError("est_quat and true_quat must be given together")
    qe = qt = None
    if est_quat is not None:
        qe = as_quat(est_quat, "est_quat", (2,))
        qt = as_quat(true_quat, "true_quat", (2,))
        same_shape(qe, qt, "est_quat", "true_quat")
        same_samples(x, qe, "est_pos", "est_quat")
    R, t, s = align_trajectory(x, y, align, n_align)
    errors = np.linalg.norm(x @ (s * R).T + t - y, axis=-1)
    st = error_stats(errors)
    rot_stats = rot_errors = None
    if qe is not None:
        q_aligned = rot.multiply(rot.from_matrix(R), qe)
        rot_errors = np.degrees(attitude_angle(q_aligned, qt))
        rot_stats = error_stats(rot_errors)
    return ATEResult(st.rmse, st.mean, st.median, st.max, R, t, s, errors, rot_stats, rot_errors)


# --------------------------------------------------------------------------- RTE


class RTEResult(NamedTuple):
    """Relative trajectory error for one sub-trajectory length (see the module docstring).

    Attributes:
        length: Sub-trajectory length ``Δ`` [m].
        trans: Statistics of the translation errors [m].
        rot: Statistics of the rotation errors [deg].
        pairs: Start and end indices ``(i, j)``, shape ``(K, 2)``.
        dist: True travelled distance ``s_j - s_i ≥ Δ`` of each pair [m], shape ``(K,)``.
        trans_errors: Translation errors [m], shape ``(K,)``.
        rot_errors: Rotation errors [deg], shape ``(K,)``.
    """

    length: float
    trans: ErrorStats
    rot: ErrorStats
    pairs: np.ndarray
    dist: np.ndarray
    trans_errors: np.ndarray
    rot_errors: np.ndarray


def rte(
    est_pos: Any,
    true_pos: Any,
    est_quat: Any,
    true_quat: Any,
    segment_lengths: Sequence[float] = (1.0,),
) -> dict[float, RTEResult]:
    """Relative trajectory error per sub-trajectory length (Zhang & Scaramuzza 2018).

    For each start ``i``, ``j`` is the first index whose true travelled distance reaches
    ``s_i + Δ``; the estimate's pose at ``i`` is moved onto the true pose at ``i`` and its pose
    at ``j`` is compared with the truth's: translation error
    ``|R̂_iᵀ(p̂_j - p̂_i) - R_iᵀ(p_j - p_i)|`` [m] and rotation error
    ``|Log((q_i⁻¹ ⊗ q_j)⁻¹ ⊗ (q̂_i⁻¹ ⊗ q̂_j))|`` [deg]. Invariant under a rigid transform of the
    whole estimate. A length that no pair reaches gives ``K = 0`` and NaN statistics.

    Args:
        est_pos: Estimated positions [m], shape ``(T, 3)`` (one trajectory).
        true_pos: True positions [m], shape ``(T, 3)``.
        est_quat: Estimated attitudes (xyzw, body to world), shape ``(T, 4)``.
        true_quat: True attitudes, shape ``(T, 4)``.
        segment_lengths: Sub-trajectory lengths ``Δ`` [m], positive.

    Returns:
        ``{Δ: RTEResult}`` in the order of ``segment_lengths``.
    """
    x = as_array(est_pos, "est_pos", (3,), (2,))
    y = as_array(true_pos, "true_pos", (3,), (2,))
    same_shape(x, y, "est_pos", "true_pos")
    qe = as_quat(est_quat, "est_quat", (2,))
    qt = as_quat(true_quat, "true_quat", (2,))
    same_shape(qe, qt, "est_quat", "true_quat")
    same_samples(x, qe, "est_pos", "est_quat")
    lengths = np.atleast_1d(as_array(segment_lengths, "segment_lengths"))
    if lengths.ndim != 1 or np.any(lengths <= 0):
        raise ValueError(f"segment_lengths must be positive lengths; got {segment_lengths!r}")
    s = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(y, axis=0), axis=-1))])
    out: dict[float, RTEResult] = {}
    for delta in lengths:
        start = np.arange(len(s))
        end = np.searchsorted(s, s + delta, side="left")
        ok = end < len(s)
        i, j = start[ok], end[ok]
        dp_true = rot.rotate_inverse(qt[i], y[j] - y[i])
        dp_est = rot.rotate_inverse(qe[i], x[j] - x[i])
        e_t = np.linalg.norm(dp_est - dp_true, axis=-1)
        rel_true = rot.multiply(rot.conjugate(qt[i]), qt[j])
        rel_est = rot.multiply(rot.conjugate(qe[i]), qe[j])
        e_r = np.degrees(attitude_angle(rel_est, rel_true)) if len(i) else np.zeros(0)
        out[float(delta)] = RTEResult(
            length=float(delta),
            trans=error_stats(e_t),
            rot=error_stats(e_r),
            pairs=np.stack([i, j], axis=-1),
            dist=s[j] - s[i],
            trans_errors=e_t,
            rot_errors=e_r,
        )
    return out
