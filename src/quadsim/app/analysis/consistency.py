r"""Consistency of a filter: its error state against the truth, the NEES and its band.

Conventions (frames, quaternions, shapes) are those of :mod:`quadsim.app.analysis`.

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

The estimation block of a run's summary (:func:`estimation_summary`) pools the RMSEs of
:mod:`quadsim.app.analysis.accuracy` and the mean NEES.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ...physics import rotation as rot
from .accuracy import GROUPS, rmse
from .inputs import as_array, as_quat, same_samples, same_shape

__all__ = ["attitude_error_vector", "estimation_summary", "nees", "nees_band", "pose_error"]


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
    a = as_quat(q_est, "q_est", ())
    b = as_quat(q_true, "q_true", ())
    same_shape(a, b, "q_est", "q_true")
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
            a = as_quat(est[key], names[0])
            b = as_quat(truth[key], names[1])
        else:
            a = as_array(est[key], names[0], (3,), (2, 3))
            b = as_array(truth[key], names[1], (3,), (2, 3))
        same_shape(a, b, *names)
        if ref is None:
            ref = a
        else:
            same_samples(ref, a, "est['pos']", names[0])
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
    e = as_array(err, "err")
    if e.ndim < 1:
        raise ValueError(f"err must have shape (..., d); got shape {e.shape}")
    d = e.shape[-1]
    P = as_array(cov, "cov")
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
    from scipy.stats import chi2  # SciPy loads on use (about 0.1 s): not for every flight

    lo, hi = chi2.ppf([alpha / 2.0, 1.0 - alpha / 2.0], k)
    return float(lo) / n_runs, float(hi) / n_runs


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
    tt = as_array(t, "t", (), (1,))
    if np.any(np.diff(tt) < 0):
        raise ValueError("t must be nondecreasing")
    keep = np.ones(len(tt), dtype=bool) if t_start is None else tt >= float(t_start)
    if not np.any(keep):
        raise ValueError(f"t has no sample at or after t_start={t_start!r}")

    def select(d: Mapping[str, Any], name: str) -> dict[str, Any]:
        out = {}
        for key, _ in GROUPS:
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
        label: (None if label not in r else float(r[label])) for _, label in GROUPS
    }
    summary["nees_mean"] = None
    summary["nees_dof"] = None
    if cov_diag is not None:
        P = as_array(cov_diag, "cov_diag")
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
