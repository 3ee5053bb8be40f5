"""Why the replay's roll/pitch angular acceleration is 8-20 times too large (issue 29, item 3).

Every suspect is tested on the NanoBench flights (``data/nanobench/`` and
``../shared/data/nanobench/``, each flight once; B6, one motor at 65535 all along, is shown but
not scored). The predicted angular acceleration is :func:`quadsim.app.sysid.replay.rotor_forces`
(the logged PWM and ``vbat`` through the stand's rotor-speed model and the preset's curves and
geometry) through Euler's equation with the preset's inertia; the measured one is the gyro's
derivative (:func:`quadsim.app.sysid.replay.gyro_derivative`); both low-passed at 10 Hz, airborne
samples only, as ``quadsim replay``. For each variant: ``R²`` of the prediction as it is (plus
the mean residual, as the replay's bias), its correlation with the measurement and the best
gain (least-squares slope of the measurement on the prediction).

Tables: (1) tool checks (motor order, axes, gyro unit, battery compensation, derivative filter);
(2) the suspects per flight; (3) where the prediction's variance lies in frequency; (4) the
ceiling (gyro against Vicon); (5) the best model held out (leave one flight out) against the
target of issue 29 (``R² >= 0.5`` on every non-saturated flight, or within 0.1 of a ceiling).

``python benchmarks/rotational_suspects.py [LOG ...]`` (about a minute). The write-up is
``docs/rotational_dynamics.md``.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np
from scipy.signal import butter, coherence, csd, filtfilt, lfilter, savgol_filter, welch

from quadsim.app.sysid import replay as rp
from quadsim.app.sysid import replay_rotation as rr
from quadsim.app.sysid import thrust_stand as ts
from quadsim.app.sysid.csvlog import read_columns
from quadsim.app.validation import nanobench as nb
from quadsim.physics import rotation
from quadsim.physics.params import load_params

ROOT = Path(__file__).resolve().parents[1]
SATURATED = ("B6_",)  # one motor at 65535 on every airborne sample: not scored
PRESET = "cf2x_L250"
DELAYS = rr.DELAYS  # PWM-to-gyro delays tried [samples of 10 ms]
LAGS_S = rr.LAGS_S  # rotor time constants tried [s]
TRIM_HZ = rr.TRIM_GRID_HZ  # trim-removal cut-offs tried [Hz]
ORDERS = {  # the logged m1..m4 taken as the preset's rotors in this order
    "Bitcraze (M1 FR, M2 BR, M3 BL, M4 FL)": (0, 1, 2, 3),
    "mirrored left-right": (3, 2, 1, 0),
    "mirrored front-back": (1, 0, 3, 2),
    "rotated +90 deg": (1, 2, 3, 0),
    "rotated -90 deg": (3, 0, 1, 2),
}


# --------------------------------------------------------------------------- signals


def _flights(paths: list[Path]) -> list[Path]:
    """Each flight once (the full file name: ``B3_figure8_medium_rep1`` and
    ``B3_figure8_fast_rep2`` are two flights), the shared copy first."""  # noqa: D205, D209
    seen: dict[str, Path] = {}
    for p in paths:
        seen.setdefault(p.name, p)
    return [seen[k] for k in sorted(seen)]


def _band(x: np.ndarray, lo: float | None, hi: float | None, fs: float = 100.0) -> np.ndarray:
    if lo is None:
        b, a = butter(2, hi, fs=fs)
    elif hi is None:
        b, a = butter(2, lo, btype="high", fs=fs)
    else:
        b, a = butter(2, [lo, hi], btype="band", fs=fs)
    return filtfilt(b, a, x, axis=0)


def _lag(x: np.ndarray, tc: float, dt: float) -> np.ndarray:
    """First-order lag of time constant ``tc`` [s] (the rotors), started at ``x[0]``."""
    if tc <= 0.0:
        return x
    a = np.exp(-dt / tc)
    return lfilter([0.0, 1.0 - a], [1.0, -a], x, axis=0, zi=x[:1] * 1.0)[0]


def _delay(x: np.ndarray, n: int) -> np.ndarray:
    return np.concatenate([np.repeat(x[:1], n, axis=0), x[: len(x) - n]]) if n > 0 else x


def _per_motor_pwm(motor: ts.RpmFit, each: list[ts.RpmFit], pwm: np.ndarray, vbat: np.ndarray):
    """The PWM that gives, through the common model ``motor``, each rotor's own stand fit."""
    u = pwm / ts.PWM_FULL * vbat[:, None]
    w = np.stack([m.coef[0] + m.coef[1] * u[:, i] for i, m in enumerate(each)], axis=1)
    return np.where(pwm > 0, (w - motor.coef[0]) / motor.coef[1] / vbat[:, None] * ts.PWM_FULL, 0)


def prepare(path: Path, motor: ts.RpmFit, each: list[ts.RpmFit], params) -> dict:
    """One flight's signals: the replay's result, raw predictions, measurement and regressors."""
    fl = rp.load_log(path)
    t, dt = np.asarray(fl["t"]), float(np.median(np.diff(fl["t"])))
    keep = rp.airborne(fl)
    res = rp.replay(fl, preset=PRESET, motor=motor, horizons=())
    gyro = np.asarray(fl["gyro"])
    _, thrust, tau = rp.rotor_forces(params, motor, fl["pwm"], fl["vbat"])
    tau_lag = rp.rotor_forces(params, motor, fl["pwm"], fl["vbat"], res["time_constant_s"], dt)[2]
    pwm_each = _per_motor_pwm(motor, each, np.asarray(fl["pwm"]), np.asarray(fl["vbat"]))
    tau_each = rp.rotor_forces(params, motor, pwm_each, fl["vbat"])[2]
    extra = read_columns(path, ("pid_controller_cmd_thrust",), min_rows=2).data
    tv, wv = nb.vicon_body_rate(fl)
    wv = np.stack([np.interp(t, tv, wv[:, k]) for k in range(3)], axis=-1)
    # Vicon on the gyro's clock: the gyro stamped t + τ saw what Vicon stamped t
    wv = rp.shift(t, wv, nb.estimate_imu_shift(fl))
    lagged = {tc: rp.rotor_forces(params, motor, fl["pwm"], fl["vbat"], tc, dt)[2] for tc in LAGS_S}
    return {
        "name": fl["name"],
        "flight": fl,
        "motor": motor,
        "scored": not fl["name"].startswith(SATURATED),
        "t": t,
        "dt": dt,
        "keep": keep,
        "res": res,
        "pwm": np.asarray(fl["pwm"]),
        "vbat": np.asarray(fl["vbat"]),
        "cmd": np.asarray(extra["pid_controller_cmd_thrust"]),
        "gyro": gyro,
        "meas": rp.gyro_derivative(gyro, dt),
        "raw": rp.euler_ang_acc(params, tau, gyro),
        "raw_lag": rp.euler_ang_acc(params, tau_lag, gyro),
        "raw_each": rp.euler_ang_acc(params, tau_each, gyro),
        "thrust": thrust,
        "vb": rotation.rotate_inverse(np.asarray(fl["quat"]), np.asarray(fl["vel"])),
        "w_vicon": wv,
        "acc_vicon": rp.gyro_derivative(wv, dt),
        "raw_tc": {tc: rp.euler_ang_acc(params, tq, gyro) for tc, tq in lagged.items()},
    }


# --------------------------------------------------------------------------- metrics


def score(pred: np.ndarray, meas: np.ndarray) -> tuple[float, float, float]:
    """``(R², correlation, best gain)`` of ``pred`` plus its mean residual against ``meas``."""
    p = pred + np.mean(meas - pred)
    x, y = pred - pred.mean(), meas - meas.mean()
    corr = float(np.sum(x * y) / np.sqrt(np.sum(x * x) * np.sum(y * y)))
    return rp.r2(p, meas), corr, float(np.sum(x * y) / np.sum(x * x))


def _fit(cols: list[np.ndarray], y: np.ndarray) -> np.ndarray:
    """Least-squares fit of ``y`` on ``cols`` and a constant: the fitted values."""
    X = np.column_stack([*cols, np.ones(len(y))])
    return X @ np.linalg.lstsq(X, y, rcond=None)[0]


def _best_delay(f: dict, pred: np.ndarray, j: int, hp: float | None = None) -> int:
    """The delay (samples) that maximizes the correlation on axis ``j``."""
    k = f["keep"]
    best = (-2.0, 0)
    for n in DELAYS:
        x = rp.lowpass(_delay(pred[:, j], n), f["dt"])
        x = x - _band(x, None, hp) if hp else x
        best = max(best, (score(x[k], f["meas"][k, j])[1], n))
    return best[1]


def variants(f: dict, params) -> dict[str, list[tuple[float, float, float]]]:
    """Table 2: ``{variant: [(R², corr, gain) roll, (...) pitch]}`` for one flight."""
    k, dt, y = f["keep"], f["dt"], f["meas"]
    lp = lambda x: rp.lowpass(x, dt)  # noqa: E731
    m_ratio = f["res"]["mass_fit_kg"] / float(params.mass)
    out: dict[str, list[tuple[float, float, float]]] = {}
    ser = f["res"]["series"]
    out["0 replay as is (lag fitted on f_z, delay, bias)"] = [
        score(ser["ang_pred"][k, j], ser["ang_meas"][k, j]) for j in range(2)
    ]
    out["0' no lag, no delay"] = [score(lp(f["raw"])[k, j], y[k, j]) for j in range(2)]
    out["a inertia x m_fit/m_preset"] = [
        score(lp(f["raw"])[k, j] / m_ratio, y[k, j]) for j in range(2)
    ]
    out["b per-motor stand curves"] = [score(lp(f["raw_each"])[k, j], y[k, j]) for j in range(2)]
    rows_c, rows_d, rows_dv, rows_e, rows_best = [], [], [], [], []
    for j in range(2):
        n = _best_delay(f, f["raw"], j)
        x = lp(_delay(f["raw"][:, j], n))
        rows_c.append(score(x[k], y[k, j]))
        reg = [lp(f["thrust"])[k]]
        rows_d.append(score(_fit([x[k], *reg], y[k, j]), y[k, j]))
        vel = [lp(f["vb"][:, 0])[k], lp(f["vb"][:, 1])[k]]
        rows_dv.append(score(_fit([x[k], *reg, *vel], y[k, j]), y[k, j]))
        xh = x - _band(x, None, 1.0)
        rows_e.append(score(xh[k], y[k, j]))
        rows_best.append(score(score(xh[k], y[k, j])[2] * xh[k], y[k, j]))
    out["c + best PWM delay (no lag)"] = rows_c
    out["d c + torque prop. to thrust (CoM offset); gain, torque fitted"] = rows_d
    out["d' d + rotor-drag moment prop. to body velocity, fitted"] = rows_dv
    out["e + trim removed (predicted < 1 Hz, no gyro)"] = rows_e
    out["e' trim removed x best gain"] = rows_best
    x = lp(f["raw_lag"][:, :2]) / m_ratio
    x = x - _band(x, None, 2.0)
    out["f lag fitted on f_z, J x m_fit/m_preset, trim < 2 Hz (nothing fitted on the gyro)"] = [
        score(x[k, j], y[k, j]) for j in range(2)
    ]
    return out


def _motor_order(f: dict, params, motor: ts.RpmFit) -> dict[str, tuple[float, float, int]]:
    """Table 1a: peak correlation (roll, pitch) and its delay [ms] per motor order."""
    out = {}
    for name, order in ORDERS.items():
        tau = rp.rotor_forces(params, motor, f["pwm"][:, order], f["vbat"])[2]
        raw = rp.euler_ang_acc(params, tau, f["gyro"])
        c, n = [], []
        for j in range(2):
            d = _best_delay(f, raw, j, hp=1.0)
            x = rp.lowpass(_delay(raw[:, j], d), f["dt"])
            c.append(score((x - _band(x, None, 1.0))[f["keep"]], f["meas"][f["keep"], j])[1])
            n.append(d)
        out[name] = (c[0], c[1], 10 * max(n))
    return out


def _axes(f: dict) -> np.ndarray:
    """Table 1b: 3x3 peak |correlation| of predicted axis i (trim removed) with measured j."""
    k, m = f["keep"], np.zeros((3, 3))
    for i, j in itertools.product(range(3), range(3)):
        x = rp.lowpass(f["raw"][:, i], f["dt"])
        x = x - _band(x, None, 1.0)
        m[i, j] = max(abs(score(_delay(x, n)[k], f["meas"][k, j])[1]) for n in DELAYS)
    return m


def _compensation(f: dict) -> tuple[float, float]:
    """Table 1c: median of the mean logged PWM over ``cmd_thrust`` (1 if logged before the
    battery compensation) and over the firmware's compensated command (1 if after); NaN when a
    motor is saturated on every airborne sample."""  # noqa: D205, D209
    k = f["keep"] & (f["pwm"].max(axis=1) < 65535) & (f["cmd"] > 0)
    if not np.any(k):
        return float("nan"), float("nan")
    th = f["cmd"][k] / 65536.0 * 60.0
    volts = -0.0006239 * th * th + 0.088 * th  # crazyflie-firmware motorsCompensateBatteryVoltage
    mean = f["pwm"][k].mean(axis=1)
    comp = 65535 * volts / f["vbat"][k]
    return float(np.median(mean / f["cmd"][k])), float(np.median(mean / comp))


def _gyro_unit(f: dict) -> list[float]:
    """Table 1d: slope of the gyro on the Vicon body rate (3 Hz low-pass), x and y."""
    k = f["keep"]
    a, b = _band(f["w_vicon"], None, 3.0)[k], _band(f["gyro"], None, 3.0)[k]
    return [score(a[:, j], b[:, j])[2] for j in range(2)]


def _derivative_filter(f: dict) -> list[float]:
    """Table 1e: best gain (roll) with other derivative filters of the gyro, relative to SG 9."""
    k, dt = f["keep"], f["dt"]
    x = rp.lowpass(_delay(f["raw"][:, 0], _best_delay(f, f["raw"], 0)), dt)
    x = (x - _band(x, None, 1.0))[k]
    base = score(x, f["meas"][k, 0])[2]
    alts = [
        rp.lowpass(savgol_filter(f["gyro"][:, 0], 5, 2, deriv=1, delta=dt), dt),
        rp.lowpass(savgol_filter(f["gyro"][:, 0], 15, 3, deriv=1, delta=dt), dt),
        rp.lowpass(np.gradient(f["gyro"][:, 0], dt), dt),
    ]
    return [score(x, a[k])[2] / base for a in alts]


# --------------------------------------------------------------------------- spectrum, ceiling


def spectrum(f: dict) -> list[tuple[float, float, float, float, float]]:
    """Table 3 per axis: share of the predicted and of the measured variance below 1 Hz, mean
    coherence and gain |H| (measured over predicted) over 2-7 Hz, phase of H at 5 Hz [deg]."""  # noqa: D205, D209
    idx = np.flatnonzero(f["keep"])
    s = slice(idx[0], idx[-1] + 1)
    out = []
    for j in range(2):
        x = rp.lowpass(f["raw"][:, j], f["dt"])[s]
        y = f["meas"][s, j]
        x, y = x - x.mean(), y - y.mean()
        low = [np.var(_band(v, None, 1.0)) / np.var(v) for v in (x, y)]
        fr, pxx = welch(x, fs=100.0, nperseg=256)
        _, pxy = csd(x, y, fs=100.0, nperseg=256)
        _, coh = coherence(x, y, fs=100.0, nperseg=256)
        band = (fr >= 2.0) & (fr <= 7.0)
        h = pxy / pxx
        i5 = int(np.argmin(abs(fr - 5.0)))
        out.append((low[0], low[1], float(coh[band].mean()), float(abs(h[band]).mean()),
                    float(np.degrees(np.angle(h[i5])))))  # fmt: skip
    return out


def trimmed(f: dict, tc: float, n: int, fc: float | None) -> np.ndarray:
    """The model's predicted ω̇ (roll, pitch) on the airborne samples: rotor lag ``tc``, delay
    ``n`` samples, 10 Hz low-pass and, with ``fc``, the part below ``fc`` [Hz] removed (the
    protocol's :func:`quadsim.app.sysid.replay_rotation.trimmed_prediction`)."""  # noqa: D205, D209
    if fc:
        return rr.trimmed_prediction(f["flight"], PARAMS, f["motor"], tc, n, fc)[f["keep"]]
    return rp.lowpass(_delay(f["raw_tc"][tc][:, :2], n), f["dt"])[f["keep"]]


def ceiling(f: dict, model: np.ndarray) -> list[tuple[float, float, float]]:
    """Table 4 per axis: R² of the Vicon ω̇ as a predictor of the gyro's (plus its mean), that
    of the gyro's as a predictor of Vicon's, and the three-cornered-hat share of the gyro's
    variance that the Vicon ω̇ and ``model`` (airborne, ``(n, 2)``) both see (an upper bound of
    any model's R² against the gyro if the three errors are independent)."""  # noqa: D205, D209
    k = f["keep"]
    out = []
    for j in range(2):
        g, v, m = f["meas"][k, j], f["acc_vicon"][k, j], model[:, j]
        c = np.cov(np.stack([g, v, m]))
        share = c[0, 1] * c[0, 2] / (c[1, 2] * c[0, 0])
        out.append((score(v, g)[0], score(g, v)[0], float(share)))
    return out


# --------------------------------------------------------------------------- held out


def _design(f: dict, tc: float, n: int, fc: float | None, drag: bool) -> list[np.ndarray]:
    """Per axis, the regressors of the held-out model: the prediction, with ``drag`` the body
    velocity (x, y) of the rotor-drag moment, and a constant."""  # noqa: D205, D209
    x = trimmed(f, tc, n, fc)
    k = f["keep"]
    vel = [rp.lowpass(f["vb"][:, i], f["dt"])[k] for i in range(2)] if drag else []
    return [np.column_stack([x[:, j], *vel, np.ones(len(x))]) for j in range(2)]


def held_out(flights: list[dict], fc_grid, drag: bool) -> dict[str, tuple]:
    """Leave one flight out: rotor lag, delay, trim cut-off (one each) and per-axis gains (and
    drag coefficients) fitted on the other scored flights by least squares, the lag, delay and
    cut-off by the pooled R²; the held-out flight's R² per axis and the parameters used."""  # noqa: D205, D209
    combos = list(itertools.product(LAGS_S, DELAYS, fc_grid))
    X = {f["name"]: {c: _design(f, *c, drag) for c in combos} for f in flights}
    Y = {f["name"]: [f["meas"][f["keep"], j] for j in range(2)] for f in flights}
    scored = [f["name"] for f in flights if f["scored"]]
    out = {}
    for test in [f["name"] for f in flights]:
        train = [nm for nm in scored if nm != test]
        best = None
        for c in combos:
            sse, coefs = 0.0, []
            for j in range(2):
                A = np.vstack([X[nm][c][j] for nm in train])
                b = np.concatenate([Y[nm][j] for nm in train])
                beta = np.linalg.lstsq(A, b, rcond=None)[0]
                sse += float(np.sum((A @ beta - b) ** 2) / np.var(b) / len(b))
                coefs.append(beta)
            if best is None or sse < best[0]:
                best = (sse, c, coefs)
        _, c, coefs = best
        r = [rp.r2(X[test][c][j] @ coefs[j], Y[test][j]) for j in range(2)]
        out[test] = (r, c, [float(b[0]) for b in coefs])
    return out


# --------------------------------------------------------------------------- tables


def _short(name: str) -> str:
    return name.replace("_rep1", "")


def print_tools(flights: list[dict], params, motor: ts.RpmFit) -> None:
    """Table 1: the tool checks."""
    print("## 1. Tool checks\n")
    print("1a. Motor order: peak correlation roll / pitch (trim removed, best delay 0-80 ms)\n")
    orders = {f["name"]: _motor_order(f, params, motor) for f in flights}
    print("| order | " + " | ".join(_short(f["name"]) for f in flights) + " |")
    print("|---" * (len(flights) + 1) + "|")
    for name in ORDERS:
        cells = [f"{orders[f['name']][name][0]:+.2f} / {orders[f['name']][name][1]:+.2f}"
                 for f in flights]  # fmt: skip
        print(f"| {name} | " + " | ".join(cells) + " |")
    print("\n1b-e. Axes, battery compensation, gyro unit, derivative filter\n")
    print(
        "| flight | axes: diag min / off-diag max | mean PWM / cmd_thrust | mean PWM / "
        "compensated cmd | gyro / Vicon rate x, y | gain with SG5, SG15, gradient / SG9 |"
    )
    print("|---|---|---|---|---|---|")
    for f in flights:
        m = _axes(f)
        off = np.max(m - np.diag(np.diag(m)))
        pre, post = _compensation(f)
        gx, gy = _gyro_unit(f)
        d = _derivative_filter(f)
        print(
            f"| {_short(f['name'])} | {np.min(np.diag(m)):.2f} / {off:.2f} | {pre:.3f} | "
            f"{post:.4f} | {gx:.2f}, {gy:.2f} | {d[0]:.2f}, {d[1]:.2f}, {d[2]:.2f} |"
        )
    print(
        f"\nArm: the preset's rotors at ±{1e3 * float(params.L):.2f} mm on each axis "
        f"({1e3 * float(params.L) * 2**0.5:.0f} mm from the centre on the diagonal, "
        f"{1e3 * float(params.L) * 2**1.5:.0f} mm between diagonal rotors).\n"
    )


def print_suspects(flights: list[dict], params) -> None:
    """Table 2: R², correlation and best gain per variant, roll and pitch, per flight."""
    print("## 2. Suspects: R² / correlation / best gain, roll | pitch\n")
    tabs = {f["name"]: variants(f, params) for f in flights}
    names = list(next(iter(tabs.values())))
    print("| variant | " + " | ".join(_short(f["name"]) for f in flights) + " |")
    print("|---" * (len(flights) + 1) + "|")
    for v in names:
        cells = []
        for f in flights:
            (r0, c0, g0), (r1, c1, g1) = tabs[f["name"]][v]
            cells.append(f"{r0:.2f}/{c0:.2f}/{g0:.2f} \\| {r1:.2f}/{c1:.2f}/{g1:.2f}")
        print(f"| {v} | " + " | ".join(cells) + " |")
    print()


def print_spectrum(flights: list[dict]) -> None:
    """Table 3."""
    print("## 3. Where the predicted variance lies (roll | pitch)\n")
    print(
        "| flight | pred. var. < 1 Hz | meas. var. < 1 Hz | coherence 2-7 Hz | "
        "gain 2-7 Hz | phase at 5 Hz |"
    )
    print("|---|---|---|---|---|---|")
    for f in flights:
        a, b = spectrum(f)
        print(
            f"| {_short(f['name'])} | {a[0]:.0%} \\| {b[0]:.0%} | {a[1]:.0%} \\| {b[1]:.0%} | "
            f"{a[2]:.2f} \\| {b[2]:.2f} | {a[3]:.2f} \\| {b[3]:.2f} | "
            f"{a[4]:.0f} \\| {b[4]:.0f} |"
        )
    print()


def print_held_out(flights: list[dict]) -> None:
    """Tables 4 and 5: the ceiling and the held-out models against the target."""
    models = {
        "L1 gain, lag, delay": held_out(flights, (None,), drag=False),
        "L2 L1 + rotor drag": held_out(flights, (None,), drag=True),
        "L3 trim removed": held_out(flights, TRIM_HZ, drag=False),
        "L4 L3 + rotor drag": held_out(flights, TRIM_HZ, drag=True),
    }
    print("## 4-5. Ceiling and held-out R² (leave one flight out; roll | pitch)\n")
    print(
        "| flight | Vicon->gyro | gyro->Vicon | 3-hat share | " + " | ".join(models) + " | target |"
    )
    print("|---" * (5 + len(models)) + "|")
    for f in flights:
        r3, c3, _ = models["L3 trim removed"][f["name"]]
        ceil = ceiling(f, trimmed(f, *c3))
        cells = [f"{ceil[0][i]:.2f} \\| {ceil[1][i]:.2f}" for i in range(3)]
        cells += [f"{m[f['name']][0][0]:.2f} \\| {m[f['name']][0][1]:.2f}" for m in models.values()]
        ok = "not scored" if not f["scored"] else (
            "met" if min(r3) >= 0.5 else "not met")  # fmt: skip
        print(f"| {_short(f['name'])} | " + " | ".join(cells) + f" | {ok} (L3) |")
    print(
        "\nParameters fitted on the other flights (L3): lag [s], delay [ms], trim cut-off [Hz], "
        "gains roll, pitch"
    )
    for name, (_, c, g) in models["L3 trim removed"].items():
        print(
            f"  {_short(name)}: {c[0]:.2f} s, {10 * c[1]} ms, {c[2]} Hz, "
            f"{g[0]:.3f}, {g[1]:.3f}  (J_eff = J_preset / gain: "
            f"{float(PARAMS.J[0][0]) / g[0]:.2e}, {float(PARAMS.J[1][1]) / g[1]:.2e} kg m²)"
        )
    print()


def print_tradeoff(flights: list[dict], fc: float = 2.0) -> None:
    """Table 6: rotor lag against inertia. Per rotor time constant, the delay and per-axis gain
    fitted on all scored flights together (trim below ``fc`` removed): mean and smallest R²."""  # noqa: D205, D209
    scored = [f for f in flights if f["scored"]]
    print(f"## 6. Rotor lag against inertia (all scored flights pooled, trim < {fc:g} Hz)\n")
    print(
        "| rotor time constant [s] | delay [ms] | gain roll, pitch | J_eff / J_preset | "
        "mean R² | smallest R² |"
    )
    print("|---|---|---|---|---|---|")
    for tc in LAGS_S:
        best = None
        for n in DELAYS:
            r2s, gains = [], []
            for j in range(2):
                xs = [trimmed(f, tc, n, fc)[:, j] for f in scored]
                ys = [f["meas"][f["keep"], j] for f in scored]
                x, y = np.concatenate(xs), np.concatenate(ys)
                g = float(np.sum(x * y) / np.sum(x * x))
                r2s += [rp.r2(g * a, b) for a, b in zip(xs, ys, strict=True)]
                gains.append(g)
            if best is None or np.mean(r2s) > best[0]:
                best = (float(np.mean(r2s)), n, gains, float(np.min(r2s)))
        m, n, g, lo = best
        print(
            f"| {tc:.2f} | {10 * n} | {g[0]:.2f}, {g[1]:.2f} | {1 / g[0]:.2f}, {1 / g[1]:.2f} | "
            f"{m:.2f} | {lo:.2f} |"
        )
    print()


PARAMS = load_params(PRESET)


def main(argv: list[str]) -> int:
    """Print the tables for the flights ``argv`` (default: every NanoBench flight, once)."""
    paths = [Path(a) for a in argv] or [
        *sorted((ROOT.parent / "shared" / "data" / "nanobench").glob("*.csv.gz")),
        *sorted((ROOT / "data" / "nanobench").glob("*.csv.gz")),
    ]
    motor = rp.fit_motor()
    runs = [ts.load_stand(p) for p in ts.default_files()]
    cat = {k: np.concatenate([r[k] for r in runs]) for k in ("pwm", "vbat", "rpm_each")}
    each = [ts.fit_pwm_voltage_to_rpm(cat["pwm"], cat["vbat"], cat["rpm_each"][:, i], "linear")
            for i in range(4)]  # fmt: skip
    flights = [prepare(p, motor, each, PARAMS) for p in _flights(paths)]
    print(
        f"# Rotational suspects: {len(flights)} flights, preset {PRESET}, "
        f"per-motor stand speeds at u = 3 V: "
        + ", ".join(f"{m.coef[0] + 3 * m.coef[1]:.0f}" for m in each)
        + " RPM\n"
    )
    print_tools(flights, PARAMS, motor)
    print_suspects(flights, PARAMS)
    print_spectrum(flights)
    print_held_out(flights)
    print_tradeoff(flights)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
