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

The fits share their work: a flight's predictions for the whole grid take one torque per rotor
lag and one low-pass per lag and delay, and the least squares need only each flight's sums
(``Σp², Σp, n, Σpy, Σy, Σy²`` per grid point and axis), so that leaving one flight out
(:func:`leave_one_out_rotation`) costs a subtraction per flight, not a refit on the others'
samples.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np

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


def _torque_acc(flight: dict[str, Any], params: Any, motor: ts.RpmFit, time_constant: float,
                dt: float) -> np.ndarray:  # fmt: skip
    """The model's roll/pitch angular acceleration [rad/s²] ``(T, 2)``: rotor lag
    ``time_constant`` [s], Euler's equation with the gyro's rates; unfiltered."""  # noqa: D205, D209
    gyro = np.asarray(flight["gyro"], dtype=np.float64)
    tau = rp.rotor_forces(params, motor, flight["pwm"], flight["vbat"], time_constant, dt)[2]
    return rp.euler_ang_acc(params, tau, gyro)[:, :2]


def _delayed(x: np.ndarray, delay: int, dt: float) -> np.ndarray:
    """``x`` delayed ``delay`` samples (the first held) and low-passed at 10 Hz."""
    if delay > 0:
        x = np.concatenate([np.repeat(x[:1], delay, axis=0), x[: len(x) - delay]])
    return rp.lowpass(x, dt)


def _period(flight: dict[str, Any]) -> float:
    return float(np.median(np.diff(np.asarray(flight["t"], dtype=np.float64))))


def trimmed_prediction(
    flight: dict[str, Any], params: Any, motor: ts.RpmFit, time_constant: float, delay: int,
    trim_hz: float,
) -> np.ndarray:  # fmt: skip
    """The model's roll/pitch angular acceleration [rad/s²] ``(T, 2)`` of ``flight``: rotor lag
    ``time_constant`` [s], delayed ``delay`` samples, 10 Hz low-pass, the part below ``trim_hz``
    [Hz] removed (module docstring)."""  # noqa: D205, D209
    dt = _period(flight)
    x = _delayed(_torque_acc(flight, params, motor, time_constant, dt), delay, dt)
    return x - rp.lowpass(x, dt, trim_hz)


def _predictions(
    flight: dict[str, Any], params: Any, motor: ts.RpmFit, combos: Sequence[tuple],
) -> Iterator[tuple[tuple, np.ndarray]]:  # fmt: skip
    """``(combination, trimmed_prediction (T, 2))`` for each ``(T, d, f_c)`` of ``combos``,
    one torque per rotor lag and one low-pass per lag and delay."""  # noqa: D205, D209
    dt = _period(flight)
    raw: dict[float, np.ndarray] = {}
    low: dict[tuple[float, int], np.ndarray] = {}
    for c in combos:
        tc, d, fc = c
        if tc not in raw:
            raw[tc] = _torque_acc(flight, params, motor, tc, dt)
        if (tc, d) not in low:
            low[tc, d] = _delayed(raw[tc], d, dt)
        yield c, low[tc, d] - rp.lowpass(low[tc, d], dt, fc)


def _measured(flight: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """The airborne samples and the gyro's roll/pitch derivative on them ``(n, 2)``."""
    keep = rp.airborne(flight)
    gyro = np.asarray(flight["gyro"], dtype=np.float64)
    return keep, rp.gyro_derivative(gyro, _period(flight))[keep, :2]


def rotation_design(
    flight: dict[str, Any], params: Any, motor: ts.RpmFit, combos: Sequence[tuple],
) -> tuple[dict[tuple, np.ndarray], np.ndarray]:  # fmt: skip
    """``({(T, d, f_c): prediction (n, 2)}, measured (n, 2))`` on the airborne samples of
    ``flight`` for each combination, and the gyro's derivative."""  # noqa: D205, D209
    keep, meas = _measured(flight)
    return {c: p[keep] for c, p in _predictions(flight, params, motor, combos)}, meas


def _sums(preds: Iterator[tuple[tuple, np.ndarray]], meas: np.ndarray) -> np.ndarray:
    """The least squares' sums ``(C, 2, 6)`` of one flight: per combination and axis
    ``Σp², Σp, n, Σpy, Σy, Σy²`` of the predictions ``p`` (in ``preds``' order) and ``meas``."""  # noqa: D205, D209
    y = meas.T
    fixed = [np.full(2, float(len(meas))), np.einsum("jk,jk->j", y, y), y.sum(axis=1)]
    out = []
    for _, p in preds:
        q = p.T
        out.append([np.einsum("jk,jk->j", q, q), q.sum(axis=1), fixed[0],
                    np.einsum("jk,jk->j", q, y), fixed[2], fixed[1]])  # fmt: skip
    return np.moveaxis(np.asarray(out), 1, 2)


def _fit(sums: np.ndarray, combos: Sequence[tuple]) -> RotationTerms:
    """:func:`fit_rotation` from the sums (:func:`_sums`, added over its flights): per
    combination and axis the gain and offset of least squares and the residual variance over
    the measured one, ``1 - r²``; the combination of the least sum over the axes."""  # noqa: D205, D209
    pp, p, n, py, y, yy = np.moveaxis(sums, -1, 0)  # each (C, 2)
    spp, spy, syy = pp - p * p / n, py - p * y / n, yy - y * y / n  # centred
    with np.errstate(divide="ignore", invalid="ignore"):
        gain = spy / spp
        err = np.sum(1.0 - gain * spy / syy, axis=1)
    k = int(np.nanargmin(err))
    offset = (y[k] - gain[k] * p[k]) / n[k]
    tc, d, fc = combos[k]
    return RotationTerms(float(tc), int(d), float(fc), (float(gain[k, 0]), float(gain[k, 1])),
                         (float(offset[0]), float(offset[1])))  # fmt: skip


def _combos() -> list[tuple]:
    return list(itertools.product(LAGS_S, DELAYS, TRIM_GRID_HZ))


def fit_rotation(
    flights: Sequence[dict[str, Any]], params: Any, motor: ts.RpmFit,
) -> RotationTerms:  # fmt: skip
    """The terms fitted on ``flights`` (module docstring): per grid point ``(T, d, f_c)`` a gain
    and an offset per axis by least squares over all the flights' airborne samples, the grid
    point with the least sum over axes of the residual variance over the measured one."""  # noqa: D205, D209
    if not flights:
        raise ValueError("fitting the rotation terms needs at least one flight")
    combos = _combos()
    total = 0.0
    for f in flights:
        keep, meas = _measured(f)
        total = total + _sums(((c, p[keep]) for c, p in _predictions(f, params, motor, combos)),
                              meas)  # fmt: skip
    return _fit(total, combos)


def leave_one_out_rotation(
    flights: Sequence[dict[str, Any]], params: Any, motor: ts.RpmFit, trainable: Sequence[bool],
    progress: Callable[[], object] | None = None,
) -> list[dict[str, Any]]:  # fmt: skip
    """Each flight's :func:`score_rotation` with the terms fitted on the other flights whose
    ``trainable`` is true: each flight's sums computed once (``progress`` called after each),
    each fold's the trainable flights' total less the flight's own."""  # noqa: D205, D209
    combos = _combos()
    data = []
    for f in flights:
        keep, meas = _measured(f)
        preds = ((c, p[keep]) for c, p in _predictions(f, params, motor, combos))
        data.append((keep, meas, _sums(preds, meas)))
        if progress is not None:
            progress()
    total = sum((s for (_, _, s), ok in zip(data, trainable, strict=True) if ok), np.zeros(1))
    out = []
    for i, f in enumerate(flights):
        if not any(ok for j, ok in enumerate(trainable) if j != i):
            raise ValueError("leave one out needs at least one other flight that is not excluded")
        keep, meas, own = data[i]
        terms = _fit(total - own if trainable[i] else total, combos)
        c = (terms.time_constant, terms.delay, terms.trim_hz)
        out.append(_score(f, ({c: trimmed_prediction(f, params, motor, *c)[keep]}, meas), terms))
    return out


def _score(flight: dict[str, Any], design: tuple[dict, np.ndarray],
           terms: RotationTerms) -> dict[str, Any]:  # fmt: skip
    preds, meas = design
    pred = preds[(terms.time_constant, terms.delay, terms.trim_hz)] * np.asarray(terms.gain)
    pred = pred + np.asarray(terms.offset)
    dt = _period(flight)
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
    dt = _period(flight)
    raw = trimmed_prediction(flight, params, motor, *c)  # every sample, once
    meas = rp.gyro_derivative(np.asarray(flight["gyro"], dtype=np.float64), dt)[:, :2]
    out = _score(flight, ({c: raw[keep]}, meas[keep]), terms)
    pred = raw * np.asarray(terms.gain) + np.asarray(terms.offset)
    out["series"] = {"ang_trim_pred": pred, "ang_trim_meas": meas}
    return out
