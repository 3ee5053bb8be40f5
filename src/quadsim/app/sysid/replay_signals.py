"""The signal helpers of the flight replay (:mod:`quadsim.app.sysid.replay`, which re-exports
them): the low-pass every compared signal goes through, the gyro's derivative, delays, the delay
search by correlation and ``R²``.

The filters' coefficients are computed once per cut-off and sample period
(:func:`lowpass_coefficients`): the held-out fits low-pass the same flights thousands of times.
"""  # noqa: D205

from __future__ import annotations

import functools
import math

import numpy as np
from scipy.signal import butter, filtfilt, savgol_filter

__all__ = [
    "CUTOFF_HZ",
    "SHIFTS_PWM_S",
    "best_shift",
    "gyro_derivative",
    "lowpass",
    "lowpass_coefficients",
    "r2",
    "shift",
]

CUTOFF_HZ = 10.0
"""Low-pass cut-off of the compared signals [Hz]."""

SHIFTS_PWM_S = (-0.1, 0.3)
"""Search range [s] of the PWM delays (:func:`best_shift`)."""

_SAVGOL = (9, 3)  # window [samples], polynomial order of the gyro's derivative


def r2(pred: np.ndarray, meas: np.ndarray) -> float:
    """Coefficient of determination ``1 - Σ(meas - pred)² / Σ(meas - mean(meas))²``."""
    pred, meas = np.asarray(pred, dtype=np.float64), np.asarray(meas, dtype=np.float64)
    ss = float(np.sum((meas - meas.mean()) ** 2))
    return 1.0 - float(np.sum((meas - pred) ** 2)) / ss if ss > 0 else math.nan


@functools.lru_cache(maxsize=64)
def lowpass_coefficients(dt: float, cutoff: float = CUTOFF_HZ) -> tuple[np.ndarray, np.ndarray]:
    """``(b, a)`` of the Butterworth filter of order 2 at ``cutoff`` [Hz] for the sample period
    ``dt`` [s], computed once per pair (read-only arrays, shared by every caller)."""  # noqa: D205, D209
    b, a = butter(2, cutoff, fs=1.0 / dt)
    b.flags.writeable = a.flags.writeable = False
    return b, a


def lowpass(x: np.ndarray, dt: float, cutoff: float = CUTOFF_HZ) -> np.ndarray:
    """``x`` (along axis 0, sample period ``dt`` [s]) low-passed at ``cutoff`` [Hz]: the
    Butterworth filter of order 2 run forward and backward (no phase shift) that every compared
    signal of :func:`quadsim.app.sysid.replay.replay` goes through."""  # noqa: D205, D209
    b, a = lowpass_coefficients(float(dt), float(cutoff))
    return filtfilt(b, a, x, axis=0)


def gyro_derivative(gyro: np.ndarray, dt: float) -> np.ndarray:
    """The measured angular acceleration [rad/s²] ``(T, 3)`` of the replay: the gyro
    differentiated by a Savitzky-Golay filter (9 samples, cubic) and :func:`lowpass`."""  # noqa: D205, D209
    return lowpass(savgol_filter(gyro, *_SAVGOL, deriv=1, delta=dt, axis=0), dt)


def shift(t: np.ndarray, x: np.ndarray, tau: float) -> np.ndarray:
    """``x`` delayed by ``tau`` [s]: ``y(t) = x(t - tau)`` (linear interpolation, held at the
    ends)."""  # noqa: D205, D209
    if x.ndim == 1:
        return np.interp(t - tau, t, x)
    return np.stack([np.interp(t - tau, t, x[:, j]) for j in range(x.shape[1])], axis=-1)


def _corr(pred: np.ndarray, y: np.ndarray) -> float:
    x = pred.reshape(len(y), -1)
    x = x - x.mean(axis=0)
    return float(np.sum(x * y) / math.sqrt(float(np.sum(x * x) * np.sum(y * y))))


def _corrs(t: np.ndarray, pred: np.ndarray, y: np.ndarray, keep: np.ndarray,
           taus: np.ndarray, chunk: int = 64) -> np.ndarray:  # fmt: skip
    """:func:`_corr` of ``pred`` delayed by each of ``taus`` (on the rows ``keep``) with the
    centred ``y``: the delays taken ``chunk`` at a time, interpolating only the kept rows."""  # noqa: D205, D209
    x = pred.reshape(len(t), -1)
    tk = t[keep]
    yy = float(np.sum(y * y))
    out = np.empty(len(taus))
    for s in range(0, len(taus), chunk):
        q = tk[None, :] - taus[s : s + chunk, None]
        xs = np.stack([np.interp(q, t, x[:, j]) for j in range(x.shape[1])], axis=-1)
        xs = xs - xs.mean(axis=1, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            out[s : s + chunk] = np.sum(xs * y, axis=(1, 2)) / np.sqrt(
                np.sum(xs * xs, axis=(1, 2)) * yy)  # fmt: skip
    return out


def best_shift(
    t: np.ndarray,
    pred: np.ndarray,
    meas: np.ndarray,
    keep: np.ndarray,
    step: float = 0.001,
    fixed: float | None = None,
) -> tuple[float, float]:
    """The delay ``tau`` in :data:`SHIFTS_PWM_S` (grid ``step``) maximizing the correlation of
    ``pred(t - tau)`` with ``meas(t)`` on the rows ``keep`` (columns pooled), and that
    correlation; with ``fixed``, that delay's correlation.

    Raises:
        ValueError: No delay gives a finite correlation (a signal that never changes).
    """  # noqa: D205
    y = meas[keep].reshape(len(t[keep]), -1)
    y = y - y.mean(axis=0)
    if fixed is not None:
        return float(fixed), _corr(shift(t, pred, fixed)[keep], y)
    taus = np.arange(SHIFTS_PWM_S[0], SHIFTS_PWM_S[1] + step / 2, step)
    corr = _corrs(t, pred, y, keep, taus)
    if not np.any(np.isfinite(corr)):
        raise ValueError(
            "the prediction or the measurement never changes over the airborne "
            "samples: the delay cannot be fitted"
        )
    j = int(np.nanargmax(corr))
    return float(round(taus[j], 6)), float(corr[j])
