r"""Overlapping Allan deviation of a rate record, to check the IMU noise model.

The IMU model (white noise density ``N``, bias random walk ``K``) has the Allan variance
``σ²(τ) = N²/τ + K² τ/3`` (slope -1/2, then +1/2 on a log-log plot of ``σ``). The estimator,
with ``θ_j = dt Σ_{i<j} x_i`` (``j = 0..n``) and ``τ = m dt``::

    σ²(τ) = Σ_{j=0}^{n-2m} (θ_{j+2m} - 2 θ_{j+m} + θ_j)² / (2 τ² (n - 2m + 1))
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._validate import positive_number


def allan_deviation(x: Any, dt: float, taus: Any) -> tuple[np.ndarray, np.ndarray]:
    """Overlapping Allan deviation of a rate record (NumPy, float64).

    With ``θ_j = dt Σ_{i<j} x_i`` (``j = 0..n``) and ``τ = m dt``::

        σ²(τ) = Σ_{j=0}^{n-2m} (θ_{j+2m} - 2 θ_{j+m} + θ_j)² / (2 τ² (n - 2m + 1))

    White noise of density ``N`` (``σ_d = N/√dt``) gives ``σ(τ) = N/√τ`` exactly; a bias random
    walk ``K`` gives ``K √(τ/3)`` for ``m >> 1``.

    Args:
        x: Samples, shape ``(n, ...)``: time along axis 0, any trailing channels.
        dt: Sample period [s], > 0.
        taus: Averaging times [s], each rounded to ``m = round(τ/dt)`` with ``1 <= m <= n/2``.

    Returns:
        ``(taus_used, adev)``: ``m dt`` ``(T,)`` and the deviations ``(T, ...)`` [unit of x].
    """
    x = np.asarray(x, dtype=np.float64)
    dt = positive_number(dt, "dt")
    if x.ndim < 1 or x.shape[0] < 2:
        raise ValueError(f"x must have shape (n, ...) with n >= 2; got shape {x.shape}")
    taus = np.atleast_1d(np.asarray(taus, dtype=np.float64))
    n = x.shape[0]
    m = np.rint(taus / dt).astype(np.int64)
    if taus.ndim != 1 or np.any(m < 1) or np.any(2 * m > n):
        raise ValueError(
            f"taus must be a 1-D list of times in [dt, n dt/2] = [{dt}, {n * dt / 2}] s; "
            f"got {taus.tolist()}"
        )
    theta = np.concatenate([np.zeros((1, *x.shape[1:])), np.cumsum(x, axis=0) * dt])
    out = np.empty((m.size, *x.shape[1:]))
    for i, mi in enumerate(m):
        d = theta[2 * mi :] - 2.0 * theta[mi : n + 1 - mi] + theta[: n + 1 - 2 * mi]
        out[i] = np.sqrt(np.mean(d * d, axis=0) / 2.0) / (mi * dt)
    return m * dt, out
