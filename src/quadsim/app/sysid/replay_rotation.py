r"""The held-out protocol's roll and pitch: the angular acceleration with the trim removed.

The replay's predicted angular acceleration (the logged PWM and ``vbat`` through the stand's
rotor-speed model, a first-order rotor lag ``T``, the preset's curves and geometry, Euler's
equation with the preset's inertia; :func:`quadsim.app.sysid.replay.rotor_forces`,
:func:`~quadsim.app.sysid.replay.euler_ang_acc`) is mostly *trim*: slowly varying moments the
controller holds against what the model lacks (docs/rotational_dynamics.md, table 3). The
protocol compares, per axis ``j`` (roll, pitch) on the airborne samples,

.. math::

    \hat{\dot ω}_j = g_j \, \mathrm{HP}_{f_c}\big(\mathrm{LP}_{10}(\dot ω^{model}_j(t - d))\big)
    + c_j \quad \text{with} \quad \dot ω_j = \mathrm{LP}_{10}(\mathrm{SG}'(ω^{gyro}_j)),

where ``LP_10`` is the replay's 10 Hz low-pass, ``HP_fc`` removes the part below ``f_c`` (the
same Butterworth, forward and backward; it uses the PWM only, never the gyro), ``d`` a whole
number of log samples and ``g_j`` the inverse of the effective inertia over the preset's.
:class:`RotationTerms` holds ``(T, d, f_c, g, c)``: fitted on other flights by
:func:`fit_rotation` (``T``, ``d``, ``f_c`` on a grid by the pooled normalised error, ``g`` and
``c`` by least squares) or, for one flight alone, the preset's (:meth:`RotationTerms.nominal`:
its rotor lag, no delay, :data:`TRIM_HZ` 2 Hz, gain 1: nothing fitted). :func:`score_rotation` gives
``ang_acc_trimmed_r2``.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
from scipy.signal import butter, filtfilt

from . import replay as rp
from . import thrust_stand as ts

__all__ = [
    "DELAYS",
    "LAGS_S",
    "TRIM_GRID_HZ",
    "TRIM_HZ",
    "RotationTerms",
    "fit_rotation",
    "leave_one_out_rotation",
    "rotation_design",
    "score_rotation",
    "trimmed_prediction",
]

LAGS_S = (0.0, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15)
"""Rotor time constants [s] :func:`fit_rotation` tries."""
DELAYS = tuple(range(9))
"""PWM-to-gyro delays [log samples] :func:`fit_rotation` tries (0-80 ms at 100 Hz)."""
TRIM_GRID_HZ = (0.5, 1.0, 2.0)
"""Trim cut-offs [Hz] :func:`fit_rotation` tries."""
TRIM_HZ = 2.0
"""The trim cut-off [Hz] of :meth:`RotationTerms.nominal` (the one the fits choose)."""


class RotationTerms(NamedTuple):
    """The coefficients of the roll/pitch comparison (module docstring).

    Attributes:
        time_constant: The rotors' first-order lag ``T`` [s].
        delay: PWM-to-gyro delay ``d`` [log samples].
        trim_hz: The trim cut-off ``f_c`` [Hz].
        gain: ``(g_roll, g_pitch)``: preset inertia over the effective one.
        offset: ``(c_roll, c_pitch)`` [rad/s²].
    """

    time_constant: float
    delay: int
    trim_hz: float
    gain: tuple[float, float] = (1.0, 1.0)
    offset: tuple[float, float] = (0.0, 0.0)

    @classmethod
    def nominal(cls, time_constant: float) -> RotationTerms:
        """Nothing fitted on the gyro: the rotor lag ``time_constant`` [s] (a preset's, as
        :meth:`quadsim.app.sysid.replay_protocol.ThrustTerms.of` reads it), no delay,
        :data:`TRIM_HZ`, the preset's inertia (gain 1), no offset."""  # noqa: D205, D209
        return cls(float(time_constant), 0, TRIM_HZ)


def trimmed_prediction(
    flight: dict[str, Any], params: Any, motor: ts.RpmFit, time_constant: float, delay: int,
    trim_hz: float,
) -> np.ndarray:  # fmt: skip
    """The model's roll/pitch angular acceleration [rad/s²] ``(T, 2)`` of ``flight``: rotor lag
    ``time_constant`` [s], delayed ``delay`` samples, 10 Hz low-pass, the part below ``trim_hz``
    [Hz] removed (module docstring)."""  # noqa: D205, D209
    t = np.asarray(flight["t"], dtype=np.float64)
    dt = float(np.median(np.diff(t)))
    gyro = np.asarray(flight["gyro"], dtype=np.float64)
    tau = rp.rotor_forces(params, motor, flight["pwm"], flight["vbat"], time_constant, dt)[2]
    x = rp.euler_ang_acc(params, tau, gyro)[:, :2]
    if delay > 0:
        x = np.concatenate([np.repeat(x[:1], delay, axis=0), x[: len(x) - delay]])
    x = rp.lowpass(x, dt)
    b, a = butter(2, trim_hz, fs=1.0 / dt)
    return x - filtfilt(b, a, x, axis=0)


def rotation_design(
    flight: dict[str, Any], params: Any, motor: ts.RpmFit, combos: Sequence[tuple],
) -> tuple[dict[tuple, np.ndarray], np.ndarray]:  # fmt: skip
    """``({(T, d, f_c): prediction (n, 2)}, measured (n, 2))`` on the airborne samples of
    ``flight`` for each combination, and the gyro's derivative."""  # noqa: D205, D209
    keep = rp.airborne(flight)
    dt = float(np.median(np.diff(np.asarray(flight["t"], dtype=np.float64))))
    meas = rp.gyro_derivative(np.asarray(flight["gyro"], dtype=np.float64), dt)[keep, :2]
    preds = {c: trimmed_prediction(flight, params, motor, *c)[keep] for c in combos}
    return preds, meas


def _fit(designs: Sequence[tuple[dict, np.ndarray]], combos: Sequence[tuple]) -> RotationTerms:
    """:func:`fit_rotation` on the designs (:func:`rotation_design`) of its flights."""
    meas = np.concatenate([m for _, m in designs])
    best: tuple | None = None
    for c in combos:
        pred = np.concatenate([p[c] for p, _ in designs])
        err, coefs = 0.0, []
        for j in range(2):
            A = np.column_stack([pred[:, j], np.ones(len(pred))])
            beta = np.linalg.lstsq(A, meas[:, j], rcond=None)[0]
            err += float(np.mean((A @ beta - meas[:, j]) ** 2) / np.var(meas[:, j]))
            coefs.append(beta)
        if best is None or err < best[0]:
            best = (err, c, coefs)
    _, (tc, d, fc), coefs = best
    return RotationTerms(float(tc), int(d), float(fc), (float(coefs[0][0]), float(coefs[1][0])),
                         (float(coefs[0][1]), float(coefs[1][1])))  # fmt: skip


def fit_rotation(
    flights: Sequence[dict[str, Any]], params: Any, motor: ts.RpmFit,
) -> RotationTerms:  # fmt: skip
    """The terms fitted on ``flights`` (module docstring): per grid point ``(T, d, f_c)`` a gain
    and an offset per axis by least squares over all the flights' airborne samples, the grid
    point with the least sum over axes of the residual variance over the measured one."""  # noqa: D205, D209
    if not flights:
        raise ValueError("fitting the rotation terms needs at least one flight")
    combos = list(itertools.product(LAGS_S, DELAYS, TRIM_GRID_HZ))
    return _fit([rotation_design(f, params, motor, combos) for f in flights], combos)


def leave_one_out_rotation(
    flights: Sequence[dict[str, Any]], params: Any, motor: ts.RpmFit, trainable: Sequence[bool],
) -> list[dict[str, Any]]:  # fmt: skip
    """Each flight's :func:`score_rotation` with the terms fitted on the other flights whose
    ``trainable`` is true (each flight's design computed once)."""  # noqa: D205, D209
    combos = list(itertools.product(LAGS_S, DELAYS, TRIM_GRID_HZ))
    designs = [rotation_design(f, params, motor, combos) for f in flights]
    out = []
    for i, f in enumerate(flights):
        train = [d for j, d in enumerate(designs) if j != i and trainable[j]]
        if not train:
            raise ValueError("leave one out needs at least one other flight that is not excluded")
        out.append(_score(f, designs[i], _fit(train, combos)))
    return out


def _score(flight: dict[str, Any], design: tuple[dict, np.ndarray],
           terms: RotationTerms) -> dict[str, Any]:  # fmt: skip
    preds, meas = design
    pred = preds[(terms.time_constant, terms.delay, terms.trim_hz)] * np.asarray(terms.gain)
    pred = pred + np.asarray(terms.offset)
    dt = float(np.median(np.diff(np.asarray(flight["t"], dtype=np.float64))))
    return {"ang_acc_trimmed_r2": [rp.r2(pred[:, j], meas[:, j]) for j in range(2)],
            "rotation_terms": {**terms._asdict(), "delay_s": terms.delay * dt}}  # fmt: skip


def score_rotation(
    flight: dict[str, Any], params: Any, motor: ts.RpmFit, terms: RotationTerms,
) -> dict[str, Any]:  # fmt: skip
    """``ang_acc_trimmed_r2`` (roll, pitch) of ``flight`` with ``terms``, the terms as a dict
    (``rotation_terms``; ``delay`` in samples, ``delay_s`` in seconds) and, under ``"series"``,
    the prediction and the measurement on every sample (``ang_trim_pred``, ``ang_trim_meas``
    ``(T, 2)`` [rad/s²]) for plots."""  # noqa: D205, D209
    c = (terms.time_constant, terms.delay, terms.trim_hz)
    keep = rp.airborne(flight)
    dt = float(np.median(np.diff(np.asarray(flight["t"], dtype=np.float64))))
    raw = trimmed_prediction(flight, params, motor, *c)  # every sample, once
    meas = rp.gyro_derivative(np.asarray(flight["gyro"], dtype=np.float64), dt)[:, :2]
    out = _score(flight, ({c: raw[keep]}, meas[keep]), terms)
    pred = raw * np.asarray(terms.gain) + np.asarray(terms.offset)
    out["series"] = {"ang_trim_pred": pred, "ang_trim_meas": meas}
    return out
