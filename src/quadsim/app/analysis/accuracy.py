r"""Root-mean-square errors of a state estimate against the truth, and error statistics.

Conventions (frames, quaternions, shapes) are those of :mod:`quadsim.app.analysis`.

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
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from ...physics import rotation as rot
from .inputs import as_array, as_quat, same_shape

__all__ = [
    "GROUPS",
    "ErrorStats",
    "attitude_angle",
    "attitude_rmse_deg",
    "error_stats",
    "rmse",
    "vector_rmse",
]

GROUPS = (("pos", "pos_rmse_m"), ("vel", "vel_rmse_m_s"), ("quat", "att_rmse_deg"))
"""The component groups ``(key, RMSE label)`` of :func:`rmse` and of a summary's estimation block:
position [m], velocity [m/s], attitude [deg]."""


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
    a = as_array(est, names[0], (3,), (2, 3))
    b = as_array(truth, names[1], (3,), (2, 3))
    same_shape(a, b, *names)
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
    a = as_quat(q_est, "q_est", ())
    b = as_quat(q_true, "q_true", ())
    same_shape(a, b, "q_est", "q_true")
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
    a = as_quat(q_est, "q_est")
    b = as_quat(q_true, "q_true")
    same_shape(a, b, "q_est", "q_true")
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
    for key, label in GROUPS:
        if est.get(key) is None:
            continue
        if truth.get(key) is None:
            raise ValueError(f"truth must have {key!r} since est has it")
        names = (f"est[{key!r}]", f"truth[{key!r}]")
        if key == "quat":
            a = as_quat(est[key], names[0])
            b = as_quat(truth[key], names[1])
            same_shape(a, b, *names)
            out[label] = attitude_rmse_deg(a, b, per_drone=per_drone)
        else:
            out[label] = vector_rmse(est[key], truth[key], per_drone=per_drone, names=names)
    return out
