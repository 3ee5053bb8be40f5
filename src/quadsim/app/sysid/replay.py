r"""Replay of a real Crazyflie flight's PWM and battery voltage through quadsim's rotor model.

For every sample of a logged flight (NanoBench, ``data/nanobench/``), the four PWM commands and
the battery voltage ``vbat`` give each rotor's speed through the thrust-stand-fitted model
``ω = c0 + c1 u``, ``u = (pwm / 65535) vbat`` (:mod:`quadsim.app.sysid.thrust_stand`, fitted on
the stand's ``vbat``, the only voltage a flight logs), and the preset's curves give each rotor's
thrust ``T_i`` and reaction torque ``Q_i``. From these:

* the collective specific force along body z, ``f_z = Σ T_i / m``, against the accelerometer's
  ``imu_acc_z`` (the IMU measures specific force);
* the body angular acceleration by Euler's equation ``ω̇ = J⁻¹(τ - ω × J ω)`` with
  ``τ = Σ r_i × (0, 0, T_i) - Σ s_i Q_i e_z`` (``s_i`` the rotor's spin, +1 counter-clockwise
  seen from above) and ``ω`` the gyro, against the gyro differentiated by a Savitzky-Golay
  filter.

Fitted on a flight (:func:`replay`): the **mass** (least squares of the measured ``f_z`` on the
predicted ``Σ T``, through the origin; the Vicon acceleration plus gravity projected on body z
gives a second estimate) and the **time shifts** between the streams (cross-correlation): the
PWM against the accelerometer (``pwm_to_imu``, which includes the rotors' response), the PWM
against the gyro's derivative (``pwm_to_gyro``) and the IMU against Vicon
(:func:`quadsim.app.validation.nanobench.estimate_imu_shift`).

Metrics (both signals low-passed at 10 Hz, Butterworth order 2 forward and backward; samples in
flight only): ``R²`` and RMSE of ``f_z`` and ``R²`` of the angular acceleration per axis, one
step (the PWM at sample ``k`` predicts the IMU at ``k`` plus the delay). Short horizons
(:func:`horizon_errors`): the predicted specific force and angular acceleration integrated over
0.1 s and 0.5 s from the logged state (Vicon velocity and attitude, gyro) against the logged
velocity and gyro change.

Reading and checking a log: :mod:`quadsim.app.sysid.replay_log` (:func:`load_log`, re-exported
here); the filters, delays and ``R²``: :mod:`quadsim.app.sysid.replay_signals` (re-exported
here); the command line ``quadsim replay LOG [LOG ...]`` (or ``python -m
quadsim.app.sysid.replay_cli``), which prints the table: :mod:`quadsim.app.sysid.replay_cli`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from scipy.signal import lfilter, savgol_filter

from ...physics import rotation
from ...physics.params import load_params
from ..validation import nanobench
from . import thrust_stand as ts
from .csvlog import LogError
from .replay_log import REQUIRED_COLUMNS, check_distinct, check_fittable, load_log
from .replay_signals import (
    CUTOFF_HZ,
    best_shift,
    gyro_derivative,
    lowpass,
    lowpass_coefficients,
    r2,
    shift,
)

__all__ = [
    "AIRBORNE_CLEARANCE_M",
    "CUTOFF_HZ",
    "HORIZONS_S",
    "REQUIRED_COLUMNS",
    "TIME_CONSTANTS_S",
    "LogError",
    "airborne",
    "best_shift",
    "check_distinct",
    "check_fittable",
    "cross_flights",
    "euler_ang_acc",
    "fit_motor",
    "gyro_derivative",
    "horizon_errors",
    "load_log",
    "lowpass",
    "lowpass_coefficients",
    "r2",
    "replay",
    "rotor_forces",
    "rotor_lag",
    "shift",
    "steady_speeds",
    "vicon_specific_force",
]

HORIZONS_S = (0.1, 0.5)
"""Short horizons of :func:`horizon_errors` [s]."""

AIRBORNE_CLEARANCE_M = 0.05
"""Height above the ground [m] from which a sample counts as airborne (:func:`airborne`)."""

TIME_CONSTANTS_S = tuple(round(0.005 * i, 3) for i in range(21))
"""The rotors' time constants [s] tried when :func:`replay` fits one (0 to 100 ms)."""


# --------------------------------------------------------------------------- models


def fit_motor(stand_files: Sequence[str | Path] | None = None) -> ts.RpmFit:
    """The linear rotor-speed model ``ω = c0 + c1 (pwm / 65535) vbat`` fitted on the stand runs.

    The runs (default: :func:`~quadsim.app.sysid.thrust_stand.default_files`) are concatenated;
    :func:`~quadsim.app.sysid.thrust_stand.fit_pwm_voltage_to_rpm` fits the coefficients with
    its first-order lag (rows ``pwm >= 10000``), with the drone's ``vbat`` as the voltage. Only
    the steady part (:meth:`RpmFit.steady`) is used in flight: the stand's lag is in rows of
    unknown duration, and the delay fitted on the flight takes the rotors' response instead.
    On the stand this model has a cross-run thrust error of 8-10 % of the mean thrust
    (``docs/validation.md``, "Thrust stand"), from ``vbat``'s sag under load.
    """
    files = list(stand_files) if stand_files is not None else ts.default_files()
    if not files:
        raise ValueError(
            "no thrust-stand runs given and none found in data/crazyflie-thrust-stand/"
        )
    runs = [ts.load_stand(f) for f in files]
    cat = {k: np.concatenate([r[k] for r in runs]) for k in ("pwm", "vbat", "rpm")}
    return ts.fit_pwm_voltage_to_rpm(cat["pwm"], cat["vbat"], cat["rpm"], "linear")


def rotor_forces(
    params: Any,
    motor: ts.RpmFit,
    pwm: np.ndarray,
    vbat: np.ndarray,
    time_constant: float = 0.0,
    dt: float | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rotor speeds, total thrust and body torque from the PWM and battery voltage.

    With ``time_constant > 0`` each rotor's speed follows the steady speed ``ω_ss`` through the
    first-order lag ``ω̇ = (ω_ss - ω) / time_constant``, discretized exactly for a command held
    over each sample (``ω_k = a ω_{k-1} + (1 - a) ω_ss,k-1`` with ``a = exp(-dt /
    time_constant)``, started at the first sample's steady speed).

    Args:
        params: A :class:`quadsim.physics.params.Params` (``rpm2thrust``, ``rpm2torque``,
            ``rotor_positions``, ``rotor_spin``).
        motor: The rotor-speed model (:func:`fit_motor`); its steady part is used.
        pwm: ``(T, 4)`` PWM per motor (0..65535), the preset's rotor order.
        vbat: ``(T,)`` battery voltage [V].
        time_constant: The rotors' time constant [s] (0: the steady speed).
        dt: The sample period [s], needed with a time constant (a log's median step).

    Returns:
        ``(rpm (T, 4), thrust_total (T,) [N], torque (T, 3) [N m] in the body frame)``. A motor
        with PWM 0 or a negative model speed gives 0 RPM.
    """
    w = rotor_lag(steady_speeds(motor, pwm, vbat), time_constant, dt)
    k, q = np.asarray(params.rpm2thrust), np.asarray(params.rpm2torque)
    thrust = np.where(w > 0.0, k[0] + k[1] * w + k[2] * w * w, 0.0)
    drag = np.where(w > 0.0, q[0] + q[1] * w + q[2] * w * w, 0.0)
    r = np.asarray(params.rotor_positions)
    spin = np.asarray(params.rotor_spin)
    tau = np.stack([thrust @ r[:, 1], -(thrust @ r[:, 0]), -(drag @ spin)], axis=-1)
    return w, thrust.sum(axis=1), tau


def steady_speeds(motor: ts.RpmFit, pwm: np.ndarray, vbat: np.ndarray) -> np.ndarray:
    """Each rotor's steady speed [RPM] ``(T, 4)`` (the model's steady part) from the PWM
    ``(T, 4)`` and the battery voltage ``(T,)`` [V]; 0 where the PWM is 0 or the model's speed is
    negative."""  # noqa: D205, D209
    pwm = np.asarray(pwm, dtype=np.float64)
    v = np.asarray(vbat, dtype=np.float64)[:, None]
    return np.where(pwm > 0.0, np.maximum(motor.steady(pwm, v), 0.0), 0.0)


def rotor_lag(w: np.ndarray, time_constant: float, dt: float | None) -> np.ndarray:
    """Steady speeds ``w`` ``(T, n)`` through the rotors' first-order lag of
    :func:`rotor_forces` (``w`` itself for a time constant of 0).

    Raises:
        ValueError: A negative or infinite time constant, or one without ``dt > 0``.
    """  # noqa: D205
    if time_constant < 0.0 or not math.isfinite(time_constant):
        raise ValueError(f"time_constant must be finite and >= 0, got {time_constant}")
    if time_constant > 0.0:
        if dt is None or not dt > 0.0:
            raise ValueError(f"a time constant needs the sample period dt > 0, got {dt}")
        a = math.exp(-dt / time_constant)
        # y_k = a y_{k-1} + (1 - a) x_{k-1}, y_0 = x_0 (the filter's state starts at x_0)
        w = lfilter([0.0, 1.0 - a], [1.0, -a], w, axis=0, zi=w[:1])[0]
    return w


# --------------------------------------------------------------------------- helpers


def euler_ang_acc(params: Any, tau: np.ndarray, omega: np.ndarray) -> np.ndarray:
    """Euler's equation ``ω̇ = J⁻¹(τ - ω × J ω)`` [rad/s²] with the preset's inertia, for body
    torques ``tau`` [N m] and rates ``omega`` [rad/s] ``(T, 3)``."""  # noqa: D205, D209
    J = np.asarray(params.J)
    return (tau - np.cross(omega, omega @ J.T)) @ np.asarray(params.J_inv).T


# --------------------------------------------------------------------------- replay


def _fit_lag(
    params: Any,
    motor: ts.RpmFit,
    fl: dict[str, Any],
    fz_meas: np.ndarray,
    keep: np.ndarray,
    dt: float,
) -> tuple[float, float, float]:
    """This flight's own rotor time constant and PWM-to-IMU delay, jointly by correlation:
    ``(time constant, delay, correlation)``."""  # noqa: D205, D209
    t = np.asarray(fl["t"], dtype=np.float64)
    best: tuple[float, float, float] | None = None
    for tc in TIME_CONSTANTS_S:
        _, thr, _ = rotor_forces(params, motor, fl["pwm"], fl["vbat"], tc, dt)
        d, c = best_shift(t, lowpass(thr, dt), fz_meas, keep)
        if best is None or c > best[2]:
            best = (tc, d, c)
    assert best is not None
    return best


def _mass(thrust: np.ndarray, fz: np.ndarray, path: str | None) -> float:
    """The mass [kg]: least squares through the origin of the specific force ``fz`` [m/s²] on
    the thrust [N].

    Raises:
        LogError: The fitted mass is not positive (the accelerometer's z does not follow the
            thrust: a flipped axis, another column).
    """  # noqa: D205
    m = float(np.sum(thrust * thrust) / np.sum(thrust * fz))
    if not (math.isfinite(m) and m > 0.0):
        raise LogError(path, f"the accelerometer's z does not follow the predicted thrust "
                       f"(fitted mass {m:.3g} kg): the mass cannot be fitted",
                       column="imu_acc_z")  # fmt: skip
    return m


def vicon_specific_force(flight: dict[str, Any], gravity_vec: Any, dt: float) -> np.ndarray:
    """The body-z specific force [m/s²] ``(T,)`` from Vicon: the velocity differentiated
    (Savitzky-Golay, 9 samples, quadratic) less gravity, rotated into the body and
    :func:`lowpass`-ed, on the Vicon clock (needs ``vel`` and ``quat``)."""  # noqa: D205, D209
    acc_w = savgol_filter(np.asarray(flight["vel"]), 9, 2, deriv=1, delta=dt, axis=0)
    acc_w = acc_w - np.asarray(gravity_vec)
    return lowpass(rotation.rotate_inverse(np.asarray(flight["quat"]), acc_w)[:, 2], dt)


def _vicon_mass(
    params: Any, fl: dict[str, Any], x: np.ndarray, keep: np.ndarray, dt: float
) -> float:
    """The mass from Vicon: ``(dv/dt - g)`` on body z against the predicted total thrust ``x``
    (on the samples ``keep``); NaN without ``vel`` and ``quat``."""  # noqa: D205, D209
    if "vel" not in fl or "quat" not in fl:
        return math.nan
    fz_vic = vicon_specific_force(fl, params.gravity_vec, dt)
    return float(np.sum(x * x) / np.sum(x * fz_vic[keep]))


def replay(
    flight: str | Path | dict[str, Any],
    *,
    preset: str = "cf2x_L250",
    stand_files: Sequence[str | Path] | None = None,
    motor: ts.RpmFit | None = None,
    mass: float | None = None,
    delays: dict[str, float] | None = None,
    ang_bias: Sequence[float] | None = None,
    time_constant: float | None = None,
    horizons: Sequence[float] = HORIZONS_S,
) -> dict[str, Any]:
    """Predicted against measured body-z specific force and angular acceleration of a flight.

    Args:
        flight: A log path (:func:`load_log`) or its dict (needs ``t``, ``pwm``, ``vbat``,
            ``accel``, ``gyro``, ``flying``; ``quat`` and ``vel`` for the Vicon mass and the
            horizons).
        preset: The preset (name or TOML path) of the thrust and torque curves, geometry and
            inertia.
        stand_files: Thrust-stand runs of the rotor-speed model (:func:`fit_motor`).
        motor: The rotor-speed model itself (then ``stand_files`` is not used).
        mass: [kg]; ``None``: fitted on this flight. Give another flight's to test held out.
        delays: ``{"pwm_to_imu": s, "pwm_to_gyro": s}``; missing entries are fitted on this
            flight.
        ang_bias: Constant angular acceleration [rad/s²] ``(3,)`` added to the prediction (the
            torque of the centre-of-mass offset and rotor spread, see the module docstring);
            ``None``: fitted on this flight (the mean residual).
        time_constant: The rotors' first-order time constant [s] (:func:`rotor_forces`);
            ``None``: fitted on this flight, the value of :data:`TIME_CONSTANTS_S` whose
            predicted thrust, at its best delay, correlates best with the measured ``f_z``.
        horizons: Short horizons [s] of :func:`horizon_errors` (empty: none).

    Raises:
        LogError: (a ``ValueError``) data the fits cannot use (:func:`check_fittable`).

    Returns:
        dict: ``name``, ``preset``, ``n_samples`` (in flight), ``mass_kg`` (used), ``mass_fit_kg``
        (fitted on this flight from the IMU), ``mass_vicon_kg`` (from the Vicon acceleration),
        ``time_constant_s`` (used) and ``time_constant_fitted_s`` (this flight's own),
        ``delays_s`` (``pwm_to_imu``, ``pwm_to_gyro``, ``imu_to_vicon``), ``delays_fitted_s``
        (this flight's own), ``specific_force_z_r2``, ``specific_force_z_rmse_m_s2``,
        ``specific_force_z_r2_zero_delay``, ``ang_acc_r2`` ``[x, y, z]``,
        ``ang_acc_r2_no_bias`` (the bias left out), ``ang_acc_rmse_rad_s2``,
        ``ang_acc_std_rad_s2`` (of the measured signal), ``motor`` (the model's ``c0``, ``c1``),
        ``horizons`` and, under ``"series"``, the arrays for plots (``t``, ``fz_pred``,
        ``fz_meas``, ``ang_pred``, ``ang_meas``, ``flying``; not JSON).
    """
    fl = load_log(flight) if isinstance(flight, (str, Path)) else flight
    params = load_params(preset)
    motor = motor if motor is not None else fit_motor(stand_files)
    ms = _measure(fl)
    t, flying, keep, dt, fz_meas, gyro = ms.t, ms.flying, ms.keep, ms.dt, ms.fz_meas, ms.gyro
    delays = dict(delays or {})
    tc_fit, d_fit, _ = _fit_lag(params, motor, fl, fz_meas, keep, dt)
    tc_use = tc_fit if time_constant is None else float(time_constant)
    _, thrust, tau = rotor_forces(params, motor, fl["pwm"], fl["vbat"], tc_use, dt)
    thrust_lp = lowpass(thrust, dt)
    fitted: dict[str, float] = {"pwm_to_imu": d_fit}
    own_d = d_fit if tc_use == tc_fit else best_shift(t, thrust_lp, fz_meas, keep)[0]
    d_imu = float(delays.get("pwm_to_imu", own_d))
    thrust_d = shift(t, thrust_lp, d_imu)
    x, y = thrust_d[keep], fz_meas[keep]
    m_fit = _mass(x, y, fl.get("path"))
    m_use = m_fit if mass is None else float(mass)
    fz_pred = thrust_d / m_use
    m_vicon = _vicon_mass(params, fl, x, keep, dt)
    ang_meas = ms.ang_meas
    ang_raw = euler_ang_acc(params, lowpass(tau, dt), gyro)
    fitted["pwm_to_gyro"] = best_shift(t, ang_raw, ang_meas, keep)[0]
    d_gyro = float(delays.get("pwm_to_gyro", fitted["pwm_to_gyro"]))
    ang_pred = lowpass(euler_ang_acc(params, shift(t, tau, d_gyro), gyro), dt)
    bias_fit = np.mean(ang_meas[keep] - ang_pred[keep], axis=0)
    bias = bias_fit if ang_bias is None else np.asarray(ang_bias, dtype=np.float64)
    ang_pred = ang_pred + bias
    if "quat" in fl and "vel" in fl:
        fitted["imu_to_vicon"] = nanobench.estimate_imu_shift(fl)
    used = {"pwm_to_imu": d_imu, "pwm_to_gyro": d_gyro}
    used.update({k: v for k, v in fitted.items() if k == "imu_to_vicon"})
    out: dict[str, Any] = {
        "name": fl.get("name", ""),
        "preset": preset,
        "n_samples": int(keep.sum()),
        "mass_kg": m_use,
        "mass_fit_kg": m_fit,
        "mass_vicon_kg": m_vicon,
        "time_constant_s": tc_use,
        "time_constant_fitted_s": tc_fit,
        "delays_s": used,
        "delays_fitted_s": fitted,
        "specific_force_z_r2": r2(fz_pred[keep], fz_meas[keep]),
        "specific_force_z_rmse_m_s2": float(np.sqrt(np.mean((fz_pred - fz_meas)[keep] ** 2))),
        "specific_force_z_r2_zero_delay": r2(thrust_lp[keep] / m_use, fz_meas[keep]),
        "specific_force_z_r2_flying_mask": r2(fz_pred[flying], fz_meas[flying]),
        "n_samples_flying_mask": int(flying.sum()),
        **_angular_metrics(ang_pred[keep], ang_meas[keep], bias, bias_fit),
        "motor": {"c0_rpm": float(motor.coef[0]), "c1_rpm_per_v": float(motor.coef[1])},
        "horizons": {},
        "series": {
            "t": t,
            "airborne": keep,
            "fz_pred": fz_pred,
            "fz_meas": fz_meas,
            "ang_pred": ang_pred,
            "ang_meas": ang_meas,
            "flying": flying,
        },
    }
    if horizons and "vel" in fl and "quat" in fl:
        fz_raw = shift(t, thrust, d_imu) / m_use
        ang_h = euler_ang_acc(params, shift(t, tau, d_gyro), gyro) + bias
        out["horizons"] = horizon_errors(fl, fz_raw, ang_h, params.gravity_vec, horizons)
    return out


class _Measured(NamedTuple):
    """A flight's measured signals, whatever is fitted: time, period, airborne samples, the
    in-flight mask, the IMU's ``f_z`` (low-passed), the gyro and its derivative."""  # noqa: D205, D209

    t: np.ndarray
    dt: float
    keep: np.ndarray
    flying: np.ndarray
    fz_meas: np.ndarray
    gyro: np.ndarray
    ang_meas: np.ndarray


def _measure(fl: dict[str, Any]) -> _Measured:
    """:class:`_Measured` of a flight, refused by :func:`check_fittable` if the fits cannot be
    made."""  # noqa: D205, D209
    t = np.asarray(fl["t"], dtype=np.float64)
    keep = airborne(fl)
    dt = float(np.median(np.diff(t)))
    check_fittable(fl, keep, dt)
    gyro = np.asarray(fl["gyro"], dtype=np.float64)
    return _Measured(t, dt, keep, np.asarray(fl["flying"], dtype=bool),
                     lowpass(np.asarray(fl["accel"])[:, 2], dt), gyro,
                     gyro_derivative(gyro, dt))  # fmt: skip


def _angular_metrics(
    pred: np.ndarray, meas: np.ndarray, bias: np.ndarray, bias_fit: np.ndarray
) -> dict[str, Any]:
    """The ``ang_acc_*`` entries of :func:`replay` from the predicted and measured angular
    accelerations ``(n, 3)`` on the airborne samples (the prediction with ``bias``)."""  # noqa: D205, D209
    return {
        "ang_acc_r2": [r2(pred[:, j], meas[:, j]) for j in range(3)],
        "ang_acc_r2_no_bias": [r2(pred[:, j] - bias[j], meas[:, j]) for j in range(3)],
        "ang_acc_bias_rad_s2": bias.tolist(),
        "ang_acc_bias_fit_rad_s2": bias_fit.tolist(),
        "ang_acc_rmse_rad_s2": np.sqrt(np.mean((pred - meas) ** 2, axis=0)).tolist(),
        "ang_acc_std_rad_s2": np.std(meas, axis=0).tolist(),
    }


def airborne(flight: dict[str, Any], clearance: float = AIRBORNE_CLEARANCE_M) -> np.ndarray:
    """Samples in flight and off the ground: ``flying`` (motor 1's PWM > 1000) and the Vicon
    height more than ``clearance`` [m] above its median over the first 0.5 s (on the ground).

    Without ``pos`` (a synthetic flight), ``flying`` alone. On the ground with the motors
    running (take-off and landing) the ground carries part of the weight and the accelerometer
    reads about 1 g whatever the thrust, so those samples are left out.
    """  # noqa: D205
    fly = np.asarray(flight["flying"], dtype=bool)
    if "pos" not in flight:
        return fly
    t, z = np.asarray(flight["t"]), np.asarray(flight["pos"])[:, 2]
    z0 = float(np.median(z[t <= t[0] + 0.5]))
    return fly & (z > z0 + clearance)


def horizon_errors(
    flight: dict[str, Any],
    fz_pred: np.ndarray,
    ang_pred: np.ndarray,
    gravity_vec: Any,
    horizons: Sequence[float] = HORIZONS_S,
) -> dict[str, dict[str, Any]]:
    """Errors of the predictions integrated over short horizons from the logged state.

    From every sample ``k`` with the samples up to ``k + n`` in flight (``n = round(h / dt)``):
    the velocity change ``Σ_j (R(q_j) e_z f_z,j + g) Δt_j`` over ``j = k .. k+n-1`` with the logged
    (Vicon) attitude ``q_j`` against the Vicon ``v_{k+n} - v_k``, and the body-rate change
    ``Σ_j ω̇_j Δt_j`` against the gyro's ``ω_{k+n} - ω_k``. Unfiltered.

    Returns:
        ``{"0.1": {"dv_rmse_m_s": [x, y, z], "dv_z_r2", "dw_rmse_rad_s": [x, y, z],
        "dw_r2": [x, y, z], "n"}, ...}`` keyed by the horizon in seconds.
    """
    t = np.asarray(flight["t"], dtype=np.float64)
    keep = airborne(flight)
    dt = np.diff(t, append=t[-1])
    dt[-1] = dt[-2] if len(dt) > 1 else 0.0
    step = float(np.median(np.diff(t)))
    ez = rotation.rotate(np.asarray(flight["quat"]), np.array([0.0, 0.0, 1.0]))
    acc = ez * np.asarray(fz_pred)[:, None] + np.asarray(gravity_vec)
    cv = np.vstack([np.zeros((1, 3)), np.cumsum(acc * dt[:, None], axis=0)])
    cw = np.vstack([np.zeros((1, 3)), np.cumsum(np.asarray(ang_pred) * dt[:, None], axis=0)])
    cfly = np.concatenate([[0], np.cumsum(keep)])
    vel, gyro = np.asarray(flight["vel"]), np.asarray(flight["gyro"])
    out: dict[str, dict[str, Any]] = {}
    for h in horizons:
        n = max(1, round(h / step))
        k = np.arange(len(t) - n)
        k = k[cfly[k + n + 1] - cfly[k] == n + 1]
        if len(k) < 10:
            continue
        dv_p, dv_m = cv[k + n] - cv[k], vel[k + n] - vel[k]
        dw_p, dw_m = cw[k + n] - cw[k], gyro[k + n] - gyro[k]
        out[f"{h:g}"] = {
            "n": len(k),
            "dv_rmse_m_s": np.sqrt(np.mean((dv_p - dv_m) ** 2, axis=0)).tolist(),
            "dv_z_r2": r2(dv_p[:, 2], dv_m[:, 2]),
            "dw_rmse_rad_s": np.sqrt(np.mean((dw_p - dw_m) ** 2, axis=0)).tolist(),
            "dw_r2": [r2(dw_p[:, j], dw_m[:, j]) for j in range(3)],
        }
    return out


def cross_flights(
    flights: Sequence[dict[str, Any]],
    *,
    preset: str = "cf2x_L250",
    motor: ts.RpmFit | None = None,
    own: Sequence[dict[str, Any]] | None = None,
    progress: Callable[[], object] | None = None,
) -> list[dict[str, Any]]:
    """Held-out evaluation: each flight's fit (mass, lag, delays, bias) tested on each other.

    The mass, rotor time constant, PWM delays and angular bias are fitted on each flight and
    used on every other one. Each flight is fitted (:func:`replay`) and its measured signals
    computed once; a row only runs the training flight's values through the test flight's rotor
    model (the cost is one fit per flight, not one per pair).

    Args:
        flights: Loaded logs, no two alike (:func:`check_distinct`).
        preset: The preset (:func:`replay`).
        motor: The rotor-speed model (default :func:`fit_motor`).
        own: The flights' own :func:`replay` results with this preset and motor, when already
            made (then nothing is refitted).
        progress: Called after each flight's own fit.

    Raises:
        LogError: Two flights with the same content; a flight the fits cannot use.

    Returns:
        One dict per ordered pair ``(train, test)``: ``train``, ``test``, ``mass_kg``,
        ``delays_s`` (the training flight's, used on the test flight) and the test flight's
        :func:`replay` metrics (``specific_force_z_r2``, ``specific_force_z_rmse_m_s2``,
        ``ang_acc_r2``).
    """
    check_distinct(flights)
    motor = motor if motor is not None else fit_motor()
    params = load_params(preset)
    fits = list(own) if own is not None else []
    for f in flights if own is None else ():
        fits.append(replay(f, preset=preset, motor=motor, horizons=()))
        if progress is not None:
            progress()
    measured = [_measure(f) for f in flights]
    rows = []
    for i, (a, ra) in enumerate(zip(flights, fits, strict=True)):
        d = {k: ra["delays_s"][k] for k in ("pwm_to_imu", "pwm_to_gyro")}
        for j, b in enumerate(flights):
            if j == i:
                continue
            rb = _held_out(params, motor, b, measured[j], ra, d)
            rows.append({"train": a.get("name", ""), "test": b.get("name", ""),
                         "mass_kg": ra["mass_kg"], "time_constant_s": ra["time_constant_s"],
                         "delays_s": d, **rb, "ang_acc_bias_rad_s2": ra["ang_acc_bias_rad_s2"],
                         "n_samples": int(measured[j].keep.sum())})  # fmt: skip
    return rows


def _held_out(
    params: Any, motor: ts.RpmFit, fl: dict[str, Any], ms: _Measured, train: dict[str, Any],
    delays: dict[str, float],
) -> dict[str, Any]:  # fmt: skip
    """The metrics of :func:`cross_flights`' rows: :func:`replay` of the test flight ``fl``
    (measured ``ms``) given the training flight's mass, time constant, ``delays`` and angular
    bias (``train``, its :func:`replay`), without the test flight's own fits."""  # noqa: D205, D209
    t, keep, dt = ms.t, ms.keep, ms.dt
    _, thrust, tau = rotor_forces(params, motor, fl["pwm"], fl["vbat"],
                                  float(train["time_constant_s"]), dt)  # fmt: skip
    fz_pred = shift(t, lowpass(thrust, dt), float(delays["pwm_to_imu"])) / float(train["mass_kg"])
    shifted = shift(t, tau, float(delays["pwm_to_gyro"]))
    ang_pred = lowpass(euler_ang_acc(params, shifted, ms.gyro), dt)
    ang_pred = (ang_pred + np.asarray(train["ang_acc_bias_rad_s2"], dtype=np.float64))[keep]
    return {
        "specific_force_z_r2": r2(fz_pred[keep], ms.fz_meas[keep]),
        "specific_force_z_rmse_m_s2": float(np.sqrt(np.mean((fz_pred - ms.fz_meas)[keep] ** 2))),
        "ang_acc_r2": [r2(ang_pred[:, j], ms.ang_meas[keep][:, j]) for j in range(3)],
    }


if __name__ == "__main__":  # the command line is replay_cli's (replay_cli imports this module)
    raise SystemExit("quadsim: the replay's command line is `quadsim replay` or "
                     "`python -m quadsim.app.sysid.replay_cli`")  # fmt: skip
