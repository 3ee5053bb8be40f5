r"""The held-out protocol of the flight replay: body-z specific force with motor warm-up and
axial inflow, scored without the scored accelerometer's help (``quadsim replay --preset
cf21_nanobench``; ``--strict`` keeps :func:`quadsim.app.sysid.replay.replay`'s scoring).

**Model.** Per motor the steady speed from PWM and ``vbat`` (the thrust stand's
:func:`~quadsim.app.sysid.replay.fit_motor`), the rotors' first-order lag ``T_m``, the preset's
thrust curve ``T_i(Ω_i)``, times the warm-up factor ``max(1 - c_w θ_i, 0)`` (``θ_i`` driven by
``(Ω_i / Ω_h)³`` with time constant ``τ_w`` from 0 at the log's start, the exact step of
:func:`quadsim.physics.motor_thermal.warmup_step`), summed, times the inflow factor
``max(1 - c_i v_z, 0)`` with ``v_z`` the Vicon velocity on body z (:func:`thrust_series`). The
coefficients ``(T_m, c_w, τ_w, c_i)`` are :class:`ThrustTerms`: a preset's
(:meth:`ThrustTerms.of`), or fitted on other flights (:func:`fit_terms`, least squares with one
scale per training flight).

**Scoring a flight** (:func:`score`), nothing taken from its accelerometer but the score:

* the *thrust level* (one scale, the effective mass ``m``): least squares of the Vicon-derived
  specific force (:func:`~quadsim.app.sysid.replay.vicon_specific_force`) on the predicted
  thrust (``level="vicon"``, the default), or of the IMU's on the first
  :data:`LEVEL_WINDOW_S` s of cruise, which are then not scored (``level="window"``);
* the *stream delays*: PWM to Vicon by correlation with the Vicon-derived specific force, plus
  the IMU-to-Vicon shift of the gyro (:func:`~quadsim.app.validation.nanobench.estimate_imu_shift`);
* *excluded*: a flight with one motor at full PWM on more than :data:`SATURATED_FRACTION` of the
  airborne samples (the logged command is clipped, the thrust it stands for is not); it is
  scored but says why it does not count.

Reported next to ``specific_force_z_r2`` (the score) and its RMSE: ``ceiling_r2`` (the IMU
against the Vicon-derived specific force, shifted: what a perfect model could reach),
``cruise_r2`` (the samples from the first reaching 90 % of the median airborne height to the
last, :func:`cruise`), ``level_deviation_pct`` (the flight's effective mass against the
reference: the preset's or the training flights' mean), ``delays_s``; and for roll and pitch
``ang_acc_trimmed_r2``, the angular acceleration with the trim removed
(:mod:`quadsim.app.sysid.replay_rotation`: its terms fitted on the other flights when held out,
the preset's rotor lag and inertia alone for one flight), next to the replay's ``ang_acc_r2``.
"""  # noqa: D205

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
from scipy.optimize import least_squares
from scipy.signal import lfilter

from ...physics import motor_thermal as mt
from ...physics import rotation
from ...physics.params import load_params
from ..validation import nanobench
from . import replay as rp
from . import replay_rotation as rr
from . import thrust_stand as ts

__all__ = [
    "LEVELS",
    "LEVEL_WINDOW_S",
    "SATURATED_FRACTION",
    "ThrustTerms",
    "cruise",
    "fit_terms",
    "leave_one_out",
    "protocol_replay",
    "saturation",
    "score",
    "thrust_series",
    "uses_terms",
]

SATURATED_FRACTION = 0.5
"""A flight with one motor at 65535 on more than this fraction of its airborne samples is
excluded."""

LEVEL_WINDOW_S = 3.0
"""Length [s] of the cruise window that sets the thrust level with ``level="window"``."""

LEVELS = ("vicon", "window")
"""How :func:`score` sets a flight's thrust level (module docstring)."""

CRUISE_HEIGHT = 0.9
"""Cruise starts when the Vicon height first reaches this fraction of its airborne median."""

_PWM_FULL = 65535.0
_BOUNDS = ((0.005, 0.0, 0.3, 0.0), (0.2, 0.5, 60.0, 0.5))  # T_m, c_w, τ_w, c_i searched


class ThrustTerms(NamedTuple):
    """The coefficients of :func:`thrust_series`.

    Attributes:
        time_constant: The rotors' first-order lag ``T_m`` [s].
        warmup_coef: ``c_w`` [1].
        warmup_time: ``τ_w`` [s].
        inflow_coef: ``c_i`` [s/m].
    """

    time_constant: float
    warmup_coef: float = 0.0
    warmup_time: float = math.inf
    inflow_coef: float = 0.0

    @classmethod
    def of(cls, params: Any) -> ThrustTerms:
        """A preset's terms; ``T_m`` from a symmetric first-order ``rotor_dyn_coef``
        (``[1/T_m, 0, 1/T_m, 0]``, a preset's ``motor_constant``).

        Raises:
            ValueError: The preset's rotor dynamics are not a first-order lag.
        """  # noqa: D205
        c = np.asarray(params.rotor_dyn_coef, dtype=np.float64)
        if not (c[1] == 0.0 and c[3] == 0.0 and c[0] == c[2] and c[0] > 0.0):
            raise ValueError(f"preset {params.name!r}: the protocol needs a first-order rotor lag "
                             f"(motor_constant); got rotor_dyn_coef {c.tolist()}")  # fmt: skip
        return cls(1.0 / float(c[0]), float(params.warmup_coef), float(params.warmup_time),
                   float(params.inflow_coef))  # fmt: skip


def uses_terms(params: Any) -> bool:
    """Whether a preset has the warm-up or the inflow term (then the protocol is the default)."""
    return float(params.warmup_coef) > 0.0 or float(params.inflow_coef) > 0.0


def thrust_series(
    params: Any, motor: ts.RpmFit, flight: dict[str, Any], terms: ThrustTerms, dt: float
) -> np.ndarray:
    """The predicted total thrust [N] ``(T,)`` of the module docstring's model (no delay, no
    low-pass); ``Ω_h`` is the preset's hover speed
    (:func:`~quadsim.physics.motor_thermal.hover_rpm`)."""  # noqa: D205, D209
    speeds = rp.steady_speeds(motor, flight["pwm"], flight["vbat"])
    climb = _climb(flight) if terms.inflow_coef > 0.0 else None
    return _total_thrust(params, speeds, climb, terms, dt)


def _total_thrust(
    params: Any, speeds: np.ndarray, climb: np.ndarray | None, terms: ThrustTerms, dt: float
) -> np.ndarray:
    """:func:`thrust_series` from the rotors' steady speeds ``(T, 4)``
    (:func:`~quadsim.app.sysid.replay.steady_speeds`) and the climb speed ``(T,)`` (needed with
    an inflow term), which do not depend on the terms."""  # noqa: D205, D209
    w = rp.rotor_lag(speeds, terms.time_constant, dt)
    k = np.asarray(params.rpm2thrust)
    thrust = np.where(w > 0.0, k[0] + k[1] * w + k[2] * w * w, 0.0)
    if terms.warmup_coef > 0.0:
        drive = mt.warmup_drive(w, mt.hover_rpm(params))
        a = mt.warmup_step(0.0, 1.0, terms.warmup_time, dt)  # 1 - exp(-dt / τ_w)
        # θ_k = warmup_step(θ_{k-1}, p_{k-1}) = (1 - a) θ_{k-1} + a p_{k-1}, θ_0 = 0 (cold)
        theta = lfilter([0.0, a], [1.0, a - 1.0], drive, axis=0)
        thrust = thrust * mt.warmup_factor(theta, terms.warmup_coef)
    total = thrust.sum(axis=1)
    if terms.inflow_coef > 0.0:
        total = total * mt.inflow_factor(climb, terms.inflow_coef)
    return total


def _climb(flight: dict[str, Any]) -> np.ndarray:
    """The Vicon velocity along body z [m/s] ``(T,)`` (the rotors' axial speed, no wind)."""
    return rotation.rotate_inverse(np.asarray(flight["quat"]), np.asarray(flight["vel"]))[:, 2]


def saturation(flight: dict[str, Any], keep: np.ndarray) -> tuple[float, int]:
    """The largest fraction of the airborne samples ``keep`` on which one motor sits at full PWM
    (65535), and that motor (1-based)."""  # noqa: D205, D209
    full = np.asarray(flight["pwm"])[keep] >= _PWM_FULL
    frac = full.mean(axis=0) if len(full) else np.zeros(4)
    j = int(np.argmax(frac))
    return float(frac[j]), j + 1


def cruise(flight: dict[str, Any], keep: np.ndarray) -> np.ndarray:
    """The airborne samples from the first reaching :data:`CRUISE_HEIGHT` of the median airborne
    Vicon height (above the ground's) to the last (take-off and landing left out)."""  # noqa: D205, D209
    t, z = np.asarray(flight["t"]), np.asarray(flight["pos"])[:, 2]
    z0 = float(np.median(z[t <= t[0] + 0.5]))
    h = z - z0
    up = keep & (h >= CRUISE_HEIGHT * float(np.median(h[keep])))
    idx = np.flatnonzero(up)
    out = np.zeros_like(keep)
    if len(idx):
        out[idx[0] : idx[-1] + 1] = True
    return out & keep


class _Prepared(NamedTuple):
    """A flight's fixed data for the fits, computed once (:func:`_prepare`): time, period,
    airborne samples, IMU and Vicon f_z (the latter on the IMU's clock), the IMU-to-Vicon shift,
    the rotors' steady speeds and the climb speed."""  # noqa: D205, D209

    flight: dict[str, Any]
    t: np.ndarray
    dt: float
    keep: np.ndarray
    fz_imu: np.ndarray
    fz_vicon: np.ndarray
    imu_to_vicon: float
    speeds: np.ndarray
    climb: np.ndarray


def _prepare(flight: dict[str, Any], params: Any, motor: ts.RpmFit) -> _Prepared:
    t = np.asarray(flight["t"], dtype=np.float64)
    dt = float(np.median(np.diff(t)))
    keep = rp.airborne(flight)
    rp.check_fittable(flight, keep, dt)
    d_iv = nanobench.estimate_imu_shift(flight)
    fz_v = rp.shift(t, rp.vicon_specific_force(flight, params.gravity_vec, dt), d_iv)
    fz_i = rp.lowpass(np.asarray(flight["accel"])[:, 2], dt)
    speeds = rp.steady_speeds(motor, flight["pwm"], flight["vbat"])
    return _Prepared(flight, t, dt, keep, fz_i, fz_v, d_iv, speeds, _climb(flight))


def _predicted(x: _Prepared, params: Any, terms: ThrustTerms) -> np.ndarray:
    return rp.lowpass(_total_thrust(params, x.speeds, x.climb, terms, x.dt), x.dt)


def _vicon_delay(x: _Prepared, thrust_lp: np.ndarray) -> float:
    """PWM-to-IMU delay [s]: the thrust against the Vicon-derived f_z (already on the IMU's
    clock), so the accelerometer is not used."""  # noqa: D205, D209
    return rp.best_shift(x.t, thrust_lp, x.fz_vicon, x.keep)[0]


def _scale(pred: np.ndarray, meas: np.ndarray) -> float:
    return float(np.sum(pred * meas) / np.sum(pred * pred))


_START = ThrustTerms(0.05, 0.05, 5.0, 0.05)  # where fit_terms starts by default


def fit_terms(
    flights: Sequence[dict[str, Any]],
    params: Any,
    motor: ts.RpmFit,
    start: ThrustTerms | None = None,
    rounds: int = 2,
) -> tuple[ThrustTerms, list[float]]:
    """``(T_m, c_w, τ_w, c_i)`` fitted on training flights (their accelerometers), and each
    flight's effective mass [kg].

    Least squares of the IMU's ``f_z`` (airborne, 10 Hz) on the predicted thrust, one scale per
    flight projected out, each flight's delay set from Vicon (:func:`score`'s) for the current
    terms; ``rounds`` alternations of delays and terms.
    """  # noqa: D205
    return _fit(params, [_prepare(f, params, motor) for f in flights], start or _START, rounds)


def _fit(
    params: Any,
    xs: Sequence[_Prepared],
    terms: ThrustTerms,
    rounds: int = 2,
    first: Sequence[float] | None = None,
) -> tuple[ThrustTerms, list[float]]:
    """:func:`fit_terms` on prepared flights from ``terms``; ``first``: the flights' delays for
    ``terms`` (those of the first round), when already known."""  # noqa: D205, D209
    delays = [0.0] * len(xs)

    def residuals(q: np.ndarray) -> np.ndarray:
        tr = ThrustTerms(*(float(v) for v in q))
        out = []
        for x, d in zip(xs, delays, strict=True):
            p = rp.shift(x.t, _predicted(x, params, tr), d)[x.keep]
            y = x.fz_imu[x.keep]
            out.append(p * _scale(p, y) - y)
        return np.concatenate(out)

    for r in range(rounds):
        if r == 0 and first is not None:
            delays = list(first)
        else:
            delays = [_vicon_delay(x, _predicted(x, params, terms)) for x in xs]
        q = least_squares(residuals, np.clip(terms, *_BOUNDS), bounds=_BOUNDS, x_scale="jac",
                          diff_step=1e-3).x  # fmt: skip
        terms = ThrustTerms(*(float(v) for v in q))
    masses = []
    for x, d in zip(xs, delays, strict=True):
        p = rp.shift(x.t, _predicted(x, params, terms), d)[x.keep]
        masses.append(1.0 / _scale(p, x.fz_imu[x.keep]))
    return terms, masses


def score(
    flight: dict[str, Any],
    params: Any,
    motor: ts.RpmFit,
    terms: ThrustTerms,
    *,
    mass_ref: float | None = None,
    level: str = "vicon",
) -> dict[str, Any]:
    """One flight scored by the protocol (module docstring).

    Args:
        flight: :func:`~quadsim.app.sysid.replay.load_log`'s dict (needs ``pos``, ``vel``,
            ``quat``).
        params: The preset (thrust curve, hover speed).
        motor: The rotor-speed model.
        terms: The coefficients, fitted on other flights or a preset's.
        mass_ref: The reference of ``level_deviation_pct`` [kg]; default the preset's mass.
        level: ``"vicon"`` or ``"window"`` (:data:`LEVELS`).

    Returns:
        ``specific_force_z_r2``, ``specific_force_z_rmse_m_s2``, ``ceiling_r2``, ``cruise_r2``,
        ``level_deviation_pct``, ``mass_kg`` (the effective mass the level sets), ``delays_s``
        (``pwm_to_imu``, ``pwm_to_vicon``, ``imu_to_vicon``), ``excluded`` (``None`` or why),
        ``saturated_fraction``, ``level``, ``n_samples`` (scored), ``thrust_terms`` and, under
        ``"series"``, ``fz_pred`` and ``scored`` for plots.
    """
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}; got {level!r}")
    return _score(_prepare(flight, params, motor), params, terms, mass_ref, level)


def _score(
    x: _Prepared, params: Any, terms: ThrustTerms, mass_ref: float | None, level: str
) -> dict[str, Any]:
    """:func:`score` of a prepared flight."""
    flight = x.flight
    thrust_lp = _predicted(x, params, terms)
    d = _vicon_delay(x, thrust_lp)
    pred = rp.shift(x.t, thrust_lp, d)
    scored, cr = x.keep.copy(), cruise(flight, x.keep)
    if level == "vicon":
        inv_m = _scale(pred[x.keep], x.fz_vicon[x.keep])
    else:
        win = cr & (x.t < x.t[np.argmax(cr)] + LEVEL_WINDOW_S)
        inv_m = _scale(pred[win], x.fz_imu[win])
        scored, cr = scored & ~win, cr & ~win
    fz = pred * inv_m
    y = x.fz_imu
    frac, motor_no = saturation(flight, x.keep)
    excluded = None
    if frac > SATURATED_FRACTION:
        excluded = (f"motor M{motor_no} at full PWM (65535) on {100 * frac:.0f} % of the "
                    f"airborne samples (more than {100 * SATURATED_FRACTION:.0f} %)")  # fmt: skip
    ref = float(params.mass) if mass_ref is None else float(mass_ref)
    delays = {"pwm_to_imu": d, "pwm_to_vicon": d - x.imu_to_vicon, "imu_to_vicon": x.imu_to_vicon}
    return {
        "name": flight.get("name", ""),
        "n_samples": int(scored.sum()),
        "specific_force_z_r2": rp.r2(fz[scored], y[scored]),
        "specific_force_z_rmse_m_s2": float(np.sqrt(np.mean((fz - y)[scored] ** 2))),
        "ceiling_r2": rp.r2(x.fz_vicon[scored], y[scored]),
        "cruise_r2": rp.r2(fz[cr], y[cr]),
        "level_deviation_pct": 100.0 * (1.0 / inv_m / ref - 1.0),
        "mass_kg": 1.0 / inv_m,
        "level": level,
        "delays_s": delays,
        "excluded": excluded,
        "saturated_fraction": frac,
        "thrust_terms": terms._asdict(),
        "series": {"fz_pred": fz, "scored": scored},
    }


def leave_one_out(
    flights: Sequence[dict[str, Any]],
    params: Any,
    motor: ts.RpmFit,
    *,
    level: str = "vicon",
    start: ThrustTerms | None = None,
    progress: Callable[[], object] | None = None,
) -> list[dict[str, Any]]:
    """Each flight scored with the terms fitted on the others (:func:`fit_terms`); excluded
    flights (saturated) are scored but never trained on. ``level_deviation_pct`` is against the
    training flights' mean effective mass; each row adds ``trained_on`` (names) and the roll
    and pitch with the trim removed, their terms fitted on the same flights
    (:func:`quadsim.app.sysid.replay_rotation.leave_one_out_rotation`: ``ang_acc_trimmed_r2``,
    ``rotation_terms``).

    The folds share the per-flight work: each flight is prepared once (filters, Vicon, rotor
    speeds, its first-round delay, its rotation sums); a fold's own work is its least squares
    on the other flights. ``progress`` is called after each flight's preparation, each
    flight's rotation sums and each fold: ``3 n`` calls.

    Raises:
        LogError: Two flights with the same content
            (:func:`~quadsim.app.sysid.replay_log.check_distinct`), a flight the fits cannot
            use.
        ValueError: A flight with no other flight to train on.
    """  # noqa: D205
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}; got {level!r}")
    rp.check_distinct(flights)
    tick = progress if progress is not None else (lambda: None)
    start = start or _START
    xs, first, keep = [], [], []
    for f in flights:
        x = _prepare(f, params, motor)
        xs.append(x)
        keep.append(saturation(f, x.keep)[0] <= SATURATED_FRACTION)
        first.append(_vicon_delay(x, _predicted(x, params, start)) if keep[-1] else math.nan)
        tick()
    rot = rr.leave_one_out_rotation(flights, params, motor, keep, progress=tick)
    rows = []
    for i in range(len(flights)):
        train = [j for j in range(len(flights)) if j != i and keep[j]]
        if not train:
            raise ValueError("leave one out needs at least one other flight that is not excluded")
        terms, masses = _fit(params, [xs[j] for j in train], start, 2, [first[j] for j in train])
        row = _score(xs[i], params, terms, float(np.mean(masses)), level)
        row["trained_on"] = [flights[j].get("name", "") for j in train]
        row.update(rot[i])
        rows.append(row)
        tick()
    return rows


def protocol_replay(
    flight: dict[str, Any],
    *,
    preset: str,
    motor: ts.RpmFit,
    level: str = "vicon",
    terms: ThrustTerms | None = None,
) -> dict[str, Any]:
    """:func:`~quadsim.app.sysid.replay.replay`'s result (the angular acceleration and the
    horizons as they are) with the body-z specific force scored by :func:`score`: the protocol's
    entries replace ``specific_force_z_r2``, ``specific_force_z_rmse_m_s2``, ``mass_kg`` and
    ``time_constant_s``, ``delays_s`` gains ``pwm_to_vicon``, ``strict`` keeps the replaced
    values (each fitted on the flight itself), and ``ang_acc_trimmed_r2`` (roll, pitch) is the
    angular acceleration with the trim removed and nothing fitted on the gyro
    (:meth:`quadsim.app.sysid.replay_rotation.RotationTerms.nominal` of the terms' rotor lag;
    ``rotation_terms``).

    Args:
        flight: A loaded log.
        preset: The preset (name or TOML path); its terms unless ``terms`` is given.
        motor: The rotor-speed model.
        level: :data:`LEVELS`.
        terms: The coefficients (default the preset's, :meth:`ThrustTerms.of`).
    """  # noqa: D205
    params = load_params(preset)
    terms = terms if terms is not None else ThrustTerms.of(params)
    base = rp.replay(flight, preset=preset, motor=motor, horizons=())
    prot = score(flight, params, motor, terms, level=level)
    strict = {k: base[k] for k in ("specific_force_z_r2", "specific_force_z_rmse_m_s2",
                                   "mass_kg", "time_constant_s", "delays_s")}  # fmt: skip
    out = {**base, **{k: v for k, v in prot.items() if k not in ("series", "delays_s")}}
    out["delays_s"] = {**base["delays_s"], **prot["delays_s"]}
    out["time_constant_s"] = terms.time_constant
    out["protocol"] = True
    out["strict"] = strict
    rot = rr.score_rotation(flight, params, motor, rr.RotationTerms.nominal(terms.time_constant))
    out.update({k: v for k, v in rot.items() if k != "series"})
    series = dict(base["series"])
    series["fz_pred"] = prot["series"]["fz_pred"]
    series["airborne"] = prot["series"]["scored"]
    out["series"] = {**series, **rot["series"]}
    return out
