r"""Errors of a state estimate against the truth: RMSE, NEES, absolute and relative errors.

Everything here is plain NumPy (float64) run once over a logged flight, not array-API code for
the compiled loop. Frames and conventions are quadsim's (``docs/conventions.md``): positions and
velocities in the world frame (ENU, m and m/s), attitudes as xyzw quaternions ``q`` mapping body
vectors to the world, ``R = R_wb = to_matrix(q)``. Quaternion algebra is
:mod:`quadsim.physics.rotation`'s: ``⊗`` is ``multiply``, ``q⁻¹ ∝ q*`` is ``conjugate``, ``exp``
and ``Log`` map rotation vectors to quaternions and back (``Log`` takes ``w ≥ 0``, so ``q`` and
``-q`` and any nonzero multiple ``c q`` give the same result: inputs need not be normalised).

Shapes: ``T`` samples in time, optionally ``n`` drones: vectors ``(T, 3)`` or ``(T, n, 3)``,
quaternions ``(T, 4)`` or ``(T, n, 4)``. The RMSE, NEES and summary functions accept both; the
trajectory errors (ATE, RTE) take one trajectory ``(T, ·)`` (loop over the drones).

Root-mean-square errors (:func:`rmse`, :func:`vector_rmse`, :func:`attitude_rmse_deg`)
======================================================================================

With ``p̂_k`` the estimate and ``p_k`` the truth at sample ``k`` (``K`` samples pooled)::

    pos RMSE [m]     = sqrt( (1/K) Σ_k |p̂_k - p_k|² )
    vel RMSE [m/s]   = sqrt( (1/K) Σ_k |v̂_k - v_k|² )
    att RMSE [deg]   = (180/π) sqrt( (1/K) Σ_k θ_k² ),   θ_k = |Log(q_k⁻¹ ⊗ q̂_k)| ∈ [0, π]

``|·|`` is the Euclidean norm over the 3 components (not a per-axis RMSE: isotropic noise of
standard deviation ``σ`` per axis gives ``√3 σ``). ``θ_k = 2 atan2(|u|, |w|)`` for
``q_k⁻¹ ⊗ q̂_k = (u, w)`` is the angle of the rotation taking the true attitude to the
estimated one, the geodesic distance on SO(3); it is the same for ``q̂`` and ``-q̂``. ``K`` is
``T`` (one drone), ``T n`` pooled over drones, or ``T`` per drone with ``per_drone=True``.

Error state and NEES (:func:`attitude_error_vector`, :func:`pose_error`, :func:`nees`)
======================================================================================

The error is *true minus estimate*, in the convention of an error-state (multiplicative) EKF
whose attitude error is local, i.e. a right perturbation in the body frame::

    δp = p - p̂ [m],   δv = v - v̂ [m/s],   q = q̂ ⊗ exp(δθ)  ⇔  δθ = Log(q̂⁻¹ ⊗ q) [rad]

so ``δθ`` is a rotation vector expressed in the *estimated body* frame (a global, world-frame
error would be ``R̂ δθ``, with ``q = exp(R̂ δθ) ⊗ q̂``). The stacked error is
``e = (δp, δv, δθ)`` of dimension ``d = 9`` (or its first 3 or 6 components).

The normalised estimation error squared of an error ``e`` with the filter's covariance ``P``
(units: those of ``e`` squared, e.g. m², m²/s², rad²) is dimensionless::

    ε = eᵀ P⁻¹ e = |z|²,   P = L Lᵀ (Cholesky),   L z = e

computed by a triangular solve, never forming ``P⁻¹``; for a diagonal ``P = diag(σ²)``,
``ε = Σ_i e_i² / σ_i²``. If the filter is consistent (``e ~ N(0, P)``), ``ε ~ χ²(d)``, mean
``d``.

Consistency band (:func:`nees_band`): Bar-Shalom, Li and Kirubarajan, *Estimation with
Applications to Tracking and Navigation*, Wiley 2001, Sec. 5.4 (the NEES test). The average
``ε̄ = (1/N) Σ_r ε_r`` over ``N`` independent Monte-Carlo runs satisfies ``N ε̄ ~ χ²(N d)``;
the two-sided acceptance region of probability ``1 - α`` is::

    [ χ²⁻¹_{N d}(α/2) / N ,  χ²⁻¹_{N d}(1 - α/2) / N ]

(``χ²⁻¹`` the inverse CDF, :data:`scipy.stats.chi2` ``.ppf``). Bar-Shalom's example: ``N = 50``
runs of a ``d = 2`` state at 95% gives ``[1.5, 2.6]``. The same band applies to the time
average of ``N`` samples of one run if the errors at those samples are independent (they are
correlated in a filter, so that use is only indicative).

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
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
from scipy.stats import chi2

from ...physics import rotation as rot

__all__ = [
    "ATEResult",
    "ErrorStats",
    "RTEResult",
    "align_trajectory",
    "ate",
    "ate_from_moments",
    "attitude_angle",
    "attitude_error_vector",
    "attitude_rmse_deg",
    "error_stats",
    "estimation_summary",
    "nees",
    "nees_band",
    "pose_error",
    "rmse",
    "rte",
    "umeyama",
    "vector_rmse",
]

ALIGNMENTS = ("se3", "sim3", "posyaw", "none")
_GROUPS = (("pos", "pos_rmse_m"), ("vel", "vel_rmse_m_s"), ("quat", "att_rmse_deg"))


# --------------------------------------------------------------------------- input checks


def _array(x: Any, name: str, trailing: Sequence[int] = (), ndims: Sequence[int] = ()) -> Any:
    """``x`` as a finite float64 array of shape ``(..., *trailing)``, else ``ValueError``.

    Args:
        x: Array-like input.
        name: Argument name for the messages.
        trailing: Required trailing dimensions.
        ndims: Allowed numbers of dimensions (any if empty).
    """
    try:
        a = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a numeric array; got {type(x).__name__}") from exc
    n = len(trailing)
    if a.ndim < n or a.shape[a.ndim - n :] != tuple(trailing) or (ndims and a.ndim not in ndims):
        want = (
            " or ".join(
                "(" + ", ".join(["T", "n"][: k - n] + [str(d) for d in trailing]) + ")"
                for k in ndims
            )
            or "(" + ", ".join(["...", *map(str, trailing)]) + ")"
        )
        raise ValueError(f"{name} must have shape {want}; got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be finite; got NaN or infinite values")
    return a


def _quat(x: Any, name: str, ndims: Sequence[int] = (2, 3)) -> Any:
    """Finite quaternions ``(..., 4)`` of nonzero norm, normalised."""
    q = _array(x, name, (4,), ndims)
    norm = np.linalg.norm(q, axis=-1, keepdims=True)
    if np.any(norm <= 1e-12):
        raise ValueError(f"{name} must have nonzero norm; got a zero quaternion")
    return q / norm


def _same_shape(a: Any, b: Any, name_a: str, name_b: str) -> None:
    if a.shape != b.shape:
        raise ValueError(
            f"{name_a} and {name_b} must have the same shape; got {a.shape} and {b.shape}"
        )


def _same_length(a: Any, b: Any, name_a: str, name_b: str) -> None:
    if a.shape[0] != b.shape[0] or a.shape[1:-1] != b.shape[1:-1]:
        raise ValueError(
            f"{name_b} must have the same samples (and drones) as {name_a}; got {b.shape} for "
            f"{a.shape}"
        )


# --------------------------------------------------------------------------- statistics


class ErrorStats(NamedTuple):
    """Statistics of a set of nonnegative errors (units those of the errors).

    ``rmse = sqrt(mean e²)``, ``std`` the population standard deviation; all NaN (and
    ``count = 0``) for an empty set.
    """

    rmse: float
    mean: float
    median: float
    std: float
    min: float
    max: float
    count: int


def error_stats(errors: Any) -> ErrorStats:
    """RMSE, mean, median, standard deviation, min and max of ``errors`` (any shape, flattened)."""
    e = np.asarray(errors, dtype=np.float64).ravel()
    if e.size == 0:
        nan = float("nan")
        return ErrorStats(nan, nan, nan, nan, nan, nan, 0)
    return ErrorStats(
        rmse=float(np.sqrt(np.mean(e * e))),
        mean=float(np.mean(e)),
        median=float(np.median(e)),
        std=float(np.std(e)),
        min=float(np.min(e)),
        max=float(np.max(e)),
        count=int(e.size),
    )


# --------------------------------------------------------------------------- RMSE


def _rms(sq: Any, per_drone: bool) -> float | np.ndarray:
    """``sqrt(mean)`` of squared errors ``(T,)``/``(T, n)``: pooled float or per drone ``(n,)``."""
    if per_drone and sq.ndim > 1:
        return np.sqrt(np.mean(sq, axis=0))
    return float(np.sqrt(np.mean(sq)))


def vector_rmse(
    est: Any, truth: Any, *, per_drone: bool = False, names: tuple[str, str] = ("est", "truth")
) -> float | np.ndarray:
    """RMSE ``sqrt(mean_k |est_k - truth_k|²)`` of 3-vectors (position [m], velocity [m/s]).

    Args:
        est: Estimates, shape ``(T, 3)`` or ``(T, n, 3)``.
        truth: True values, the same shape.
        per_drone: For ``(T, n, 3)``: return one RMSE per drone, shape ``(n,)``, instead of the
            RMSE pooled over all ``T n`` samples.
        names: Argument names used in error messages.

    Returns:
        The RMSE in the units of the inputs: a Python float, or ``(n,)`` with ``per_drone``.
    """
    a = _array(est, names[0], (3,), (2, 3))
    b = _array(truth, names[1], (3,), (2, 3))
    _same_shape(a, b, *names)
    d = a - b
    return _rms(np.sum(d * d, axis=-1), per_drone)


def attitude_angle(q_est: Any, q_true: Any) -> np.ndarray:
    """Rotation angle ``θ = |Log(q_true⁻¹ ⊗ q_est)|`` in rad, in ``[0, π]``.

    The same for ``q`` and ``-q`` and for unnormalised quaternions.

    Args:
        q_est: Estimated attitudes (xyzw, body to world), shape ``(..., 4)``.
        q_true: True attitudes, the same shape.

    Returns:
        Angles [rad], shape ``(...)``.
    """
    a = _quat(q_est, "q_est", ())
    b = _quat(q_true, "q_true", ())
    _same_shape(a, b, "q_est", "q_true")
    return np.linalg.norm(rot.log(rot.multiply(rot.conjugate(b), a)), axis=-1)


def attitude_rmse_deg(q_est: Any, q_true: Any, *, per_drone: bool = False) -> float | np.ndarray:
    """Attitude RMSE ``(180/π) sqrt(mean_k θ_k²)`` [deg], ``θ_k`` the angle of ``q_true⁻¹ ⊗ q_est``.

    Args:
        q_est: Estimated attitudes (xyzw, body to world), shape ``(T, 4)`` or ``(T, n, 4)``;
            need not be normalised, sign free.
        q_true: True attitudes, the same shape.
        per_drone: For ``(T, n, 4)``: one RMSE per drone ``(n,)`` instead of pooled.

    Returns:
        The RMSE [deg]: a Python float, or ``(n,)`` with ``per_drone``.
    """
    a = _quat(q_est, "q_est")
    b = _quat(q_true, "q_true")
    _same_shape(a, b, "q_est", "q_true")
    th = attitude_angle(a, b)
    r = _rms(th * th, per_drone)
    return math.degrees(r) if isinstance(r, float) else np.degrees(r)


def rmse(
    est: Mapping[str, Any], truth: Mapping[str, Any], *, per_drone: bool = False
) -> dict[str, float | np.ndarray]:
    """RMSE per component group of an estimate against the truth.

    Args:
        est: Estimate with any of the keys ``"pos"`` (m), ``"vel"`` (m/s), shape ``(T, 3)`` or
            ``(T, n, 3)``, and ``"quat"`` (xyzw), ``(T, 4)`` or ``(T, n, 4)``.
        truth: The truth, with (at least) the same keys and shapes.
        per_drone: One value per drone ``(n,)`` instead of pooled over drones.

    Returns:
        ``{"pos_rmse_m", "vel_rmse_m_s", "att_rmse_deg"}`` for the groups present in ``est``:
        position RMSE [m], velocity RMSE [m/s], attitude RMSE [deg] (see the module docstring).
    """
    out: dict[str, float | np.ndarray] = {}
    for key, label in _GROUPS:
        if est.get(key) is None:
            continue
        if truth.get(key) is None:
            raise ValueError(f"truth must have {key!r} since est has it")
        names = (f"est[{key!r}]", f"truth[{key!r}]")
        if key == "quat":
            a = _quat(est[key], names[0])
            b = _quat(truth[key], names[1])
            _same_shape(a, b, *names)
            out[label] = attitude_rmse_deg(a, b, per_drone=per_drone)
        else:
            out[label] = vector_rmse(est[key], truth[key], per_drone=per_drone, names=names)
    return out


# --------------------------------------------------------------------------- error state, NEES


def attitude_error_vector(q_est: Any, q_true: Any) -> np.ndarray:
    """Local (body-frame) attitude error ``δθ = Log(q_est⁻¹ ⊗ q_true)`` [rad].

    The error convention of an error-state (multiplicative) EKF whose attitude error is local:
    ``q_true = q_est ⊗ exp(δθ)``, a right perturbation, so ``δθ`` is a rotation vector in the
    *estimated body* frame (its world-frame counterpart is ``R(q_est) δθ``). ``|δθ| ≤ π``; sign
    and norm of the quaternions do not matter.

    Args:
        q_est: Estimated attitudes (xyzw, body to world), shape ``(..., 4)``.
        q_true: True attitudes, the same shape.

    Returns:
        ``δθ`` [rad], shape ``(..., 3)``.
    """
    a = _quat(q_est, "q_est", ())
    b = _quat(q_true, "q_true", ())
    _same_shape(a, b, "q_est", "q_true")
    return rot.log(rot.multiply(rot.conjugate(a), b))


def pose_error(est: Mapping[str, Any], truth: Mapping[str, Any], dof: int = 9) -> np.ndarray:
    """Stacked error state ``e = (δp, δv, δθ)``, true minus estimate, for the NEES.

    ``δp = p - p̂`` [m], ``δv = v - v̂`` [m/s], ``δθ = Log(q̂⁻¹ ⊗ q)`` [rad] (body frame, see
    :func:`attitude_error_vector`); ``dof`` 3 keeps ``δp``, 6 ``(δp, δv)``, 9 all three.

    Args:
        est: Estimate: ``"pos"`` ``(T, 3)``/``(T, n, 3)``, and ``"vel"`` (same shape) for
            ``dof ≥ 6``, ``"quat"`` ``(T, 4)``/``(T, n, 4)`` for ``dof = 9``.
        truth: The truth, same keys and shapes.
        dof: 3, 6 or 9.

    Returns:
        ``e``, shape ``(T, dof)`` or ``(T, n, dof)``.
    """
    if dof not in (3, 6, 9):
        raise ValueError(f"dof must be 3, 6 or 9; got {dof!r}")
    keys = ("pos", "vel", "quat")[: dof // 3]
    parts = []
    ref = None
    for key in keys:
        names = (f"est[{key!r}]", f"truth[{key!r}]")
        if est.get(key) is None or truth.get(key) is None:
            raise ValueError(f"est and truth must have {key!r} for dof={dof}")
        if key == "quat":
            a = _quat(est[key], names[0])
            b = _quat(truth[key], names[1])
        else:
            a = _array(est[key], names[0], (3,), (2, 3))
            b = _array(truth[key], names[1], (3,), (2, 3))
        _same_shape(a, b, *names)
        if ref is None:
            ref = a
        else:
            _same_length(ref, a, "est['pos']", names[0])
        parts.append(attitude_error_vector(a, b) if key == "quat" else b - a)
    return np.concatenate(parts, axis=-1)


def nees(err: Any, cov: Any) -> np.ndarray:
    """Normalised estimation error squared ``ε = eᵀ P⁻¹ e`` per sample (dimensionless).

    Solved through the Cholesky factor ``P = L Lᵀ``: ``ε = |L⁻¹ e|²`` (no inverse is formed).
    A covariance that is not symmetric positive definite raises ``ValueError``.

    Args:
        err: Errors ``e``, shape ``(..., d)`` (e.g. ``(T, d)`` or ``(T, n, d)``).
        cov: Covariances ``P`` in the squared units of ``err``: full, ``(..., d, d)`` with one
            more dimension than ``err``, or diagonal variances, ``(..., d)`` with as many
            dimensions as ``err``. The batch dimensions ``...`` broadcast against ``err``'s
            (e.g. ``P[None]`` for one covariance shared by all samples).

    Returns:
        ``ε``, shape: the broadcast batch shape ``...``.
    """
    e = _array(err, "err")
    if e.ndim < 1:
        raise ValueError(f"err must have shape (..., d); got shape {e.shape}")
    d = e.shape[-1]
    P = _array(cov, "cov")
    if P.ndim == e.ndim + 1:
        if P.shape[-2:] != (d, d):
            raise ValueError(
                f"cov must have shape (..., {d}, {d}) for err (..., {d}); got {P.shape}"
            )
        batch = _broadcast(e.shape[:-1], P.shape[:-2])
        scale = np.max(np.abs(P), axis=(-2, -1), keepdims=True)
        if np.any(np.abs(P - np.swapaxes(P, -1, -2)) > 1e-9 * scale):
            raise ValueError("cov must be symmetric")
        try:
            L = np.linalg.cholesky(P)
        except np.linalg.LinAlgError as exc:
            raise ValueError("cov must be positive definite") from exc
        L = np.broadcast_to(L, (*batch, d, d))
        e = np.broadcast_to(e, (*batch, d))
        z = np.linalg.solve(L, e[..., None])[..., 0]
        return np.sum(z * z, axis=-1)
    if P.ndim == e.ndim:
        if P.shape[-1] != d:
            raise ValueError(f"cov (diagonal) must have shape (..., {d}); got {P.shape}")
        _broadcast(e.shape[:-1], P.shape[:-1])
        if np.any(P <= 0):
            raise ValueError("cov (diagonal variances) must be positive")
        return np.sum(e * e / P, axis=-1)
    raise ValueError(
        f"cov must have shape (..., {d}, {d}) (full) or (..., {d}) (diagonal) with err's batch "
        f"dimensions; got {P.shape} for err {e.shape}"
    )


def _broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    try:
        return np.broadcast_shapes(a, b)
    except ValueError as exc:
        raise ValueError(f"cov's batch shape {b} does not broadcast with err's {a}") from exc


def nees_band(dof: int, n_runs: int, confidence: float = 0.95) -> tuple[float, float]:
    """Two-sided acceptance region of the average NEES over ``n_runs`` Monte-Carlo runs.

    Bar-Shalom, Li, Kirubarajan (2001), Sec. 5.4: for a consistent filter ``n_runs · ε̄`` is
    ``χ²(n_runs · dof)``, so ``ε̄`` lies in
    ``[χ²⁻¹(α/2), χ²⁻¹(1 - α/2)] / n_runs`` (``n_runs · dof`` degrees of freedom,
    ``α = 1 - confidence``) with probability ``confidence``.

    Args:
        dof: Dimension ``d`` of the error vector.
        n_runs: Number ``N`` of independent runs averaged.
        confidence: Probability of the region, in ``(0, 1)``.

    Returns:
        ``(low, high)``, dimensionless, around ``dof``.
    """
    if isinstance(dof, bool) or not isinstance(dof, int | np.integer) or dof < 1:
        raise ValueError(f"dof must be a positive integer; got {dof!r}")
    if isinstance(n_runs, bool) or not isinstance(n_runs, int | np.integer) or n_runs < 1:
        raise ValueError(f"n_runs must be a positive integer; got {n_runs!r}")
    if not 0.0 < float(confidence) < 1.0:
        raise ValueError(f"confidence must be in (0, 1); got {confidence!r}")
    alpha = 1.0 - float(confidence)
    k = int(n_runs) * int(dof)
    lo, hi = chi2.ppf([alpha / 2.0, 1.0 - alpha / 2.0], k)
    return float(lo) / n_runs, float(hi) / n_runs


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
    x = _array(src, "src", (3,), (2,))
    y = _array(dst, "dst", (3,), (2,))
    _same_shape(x, y, "src", "dst")
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
    x = _array(est_pos, "est_pos", (3,), (2,))
    y = _array(true_pos, "true_pos", (3,), (2,))
    _same_shape(x, y, "est_pos", "true_pos")
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
    x = _array(est_pos, "est_pos", (3,), (2,))
    y = _array(true_pos, "true_pos", (3,), (2,))
    _same_shape(x, y, "est_pos", "true_pos")
    if (est_quat is None) != (true_quat is None):
        raise ValueError("est_quat and true_quat must be given together")
    qe = qt = None
    if est_quat is not None:
        qe = _quat(est_quat, "est_quat", (2,))
        qt = _quat(true_quat, "true_quat", (2,))
        _same_shape(qe, qt, "est_quat", "true_quat")
        _same_length(x, qe, "est_pos", "est_quat")
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
    x = _array(est_pos, "est_pos", (3,), (2,))
    y = _array(true_pos, "true_pos", (3,), (2,))
    _same_shape(x, y, "est_pos", "true_pos")
    qe = _quat(est_quat, "est_quat", (2,))
    qt = _quat(true_quat, "true_quat", (2,))
    _same_shape(qe, qt, "est_quat", "true_quat")
    _same_length(x, qe, "est_pos", "est_quat")
    lengths = np.atleast_1d(_array(segment_lengths, "segment_lengths"))
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


# --------------------------------------------------------------------------- summary


def estimation_summary(
    t: Any,
    est: Mapping[str, Any],
    truth: Mapping[str, Any],
    cov_diag: Any = None,
    dof: int = 9,
    t_start: float | None = None,
) -> dict[str, float | int | None]:
    """The estimation block of a run's ``summary.json``: RMSEs and mean NEES as Python numbers.

    All values are pooled over the samples and the drones (``sqrt`` of the mean over all ``T n``
    squared errors; the NEES mean over all ``T n`` values).

    Args:
        t: Sample times [s], shape ``(T,)``, nondecreasing.
        est: Estimate: any of ``"pos"`` [m], ``"vel"`` [m/s] ``(T, 3)``/``(T, n, 3)`` and
            ``"quat"`` (xyzw) ``(T, 4)``/``(T, n, 4)``.
        truth: The truth, with the keys of ``est`` (at least) and the same shapes.
        cov_diag: The filter's diagonal error covariance (variances) for ``(δp, δv, δθ)`` in
            m², (m/s)², rad² (:func:`pose_error`), shape ``(T, dof)`` or ``(T, n, dof)``;
            optional.
        dof: Error components used for the NEES: 3 (position), 6 (and velocity), 9 (and
            attitude).
        t_start: Ignore samples with ``t < t_start`` (e.g. the filter's convergence); all if
            ``None``.

    Returns:
        ``{"pos_rmse_m", "vel_rmse_m_s", "att_rmse_deg", "nees_mean", "nees_dof"}``: floats
        (``nees_dof`` an int), ``None`` for a group missing from ``est`` and for the NEES
        without ``cov_diag``.
    """
    tt = _array(t, "t", (), (1,))
    if np.any(np.diff(tt) < 0):
        raise ValueError("t must be nondecreasing")
    keep = np.ones(len(tt), dtype=bool) if t_start is None else tt >= float(t_start)
    if not np.any(keep):
        raise ValueError(f"t has no sample at or after t_start={t_start!r}")

    def select(d: Mapping[str, Any], name: str) -> dict[str, Any]:
        out = {}
        for key, _ in _GROUPS:
            if d.get(key) is None:
                continue
            a = np.asarray(d[key], dtype=np.float64)
            if a.ndim < 2 or a.shape[0] != len(tt):
                raise ValueError(
                    f"{name}[{key!r}] must have one row per sample of t ({len(tt)}); got shape "
                    f"{a.shape}"
                )
            out[key] = a[keep]
        return out

    e, g = select(est, "est"), select(truth, "truth")
    r = rmse(e, g)
    summary: dict[str, float | int | None] = {
        label: (None if label not in r else float(r[label])) for _, label in _GROUPS
    }
    summary["nees_mean"] = None
    summary["nees_dof"] = None
    if cov_diag is not None:
        P = _array(cov_diag, "cov_diag")
        if P.ndim < 2 or P.shape[0] != len(tt):
            raise ValueError(
                f"cov_diag must have shape (T, {dof}) or (T, n, {dof}) with T = {len(tt)}; got "
                f"{P.shape}"
            )
        err = pose_error(e, g, dof)
        P = P[keep]
        if P.shape != err.shape:
            raise ValueError(f"cov_diag must have shape {err.shape} (dof={dof}); got {P.shape}")
        summary["nees_mean"] = float(np.mean(nees(err, P)))
        summary["nees_dof"] = int(dof)
    return summary
