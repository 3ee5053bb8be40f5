"""Can a richer warm-up lift B3 to the protocol's 0.80? Two warm-up time constants, measured.

The protocol's thrust model (:mod:`quadsim.app.sysid.replay_protocol`) has one warm-up state per
motor. B3 misses the held-out target (0.747 against 0.80, docs/validation.md) and "wants a
slower, larger warm-up than the other flights". This script gives the model a second warm-up
state with its own time constant, the thrust per motor times ``max(1 - c_1 θ_1 - c_2 θ_2, 0)``
(``θ_j`` each the first-order response of ``(Ω/Ω_h)³`` with ``τ_j``, from 0 at the log's start),
and fits ``(T_m, c_1, τ_1, c_2, τ_2, c_i)`` as the protocol does (least squares of the IMU's
airborne, 10 Hz body-z specific force on the predicted thrust, one scale per flight, the delays
from Vicon), then scores each flight as the protocol does (thrust level from the Vicon
acceleration): pooled over all five unsaturated flights (B3 in the training set: an upper bound
on any held-out score) and leave one flight out.

``python benchmarks/replay_two_warmups.py`` (about a minute; the NanoBench flights of
``../shared/data/nanobench/``, B6 left out: saturated). Measured: B3 0.785 pooled, 0.749 held
out (one warm-up: 0.783 pooled, the ``cf21_nanobench`` preset's terms, and 0.747 held out); the
fits leave the second state unused (its coefficient goes to 0, its time constant to the bound,
or the two time constants coincide). So the B3 target is not a matter of
the warm-up's form: with B3 among the training flights the model family still scores it below
0.80.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares
from scipy.signal import lfilter

from quadsim.app.sysid import replay as rp
from quadsim.app.validation import nanobench as nb
from quadsim.physics import motor_thermal as mt
from quadsim.physics import rotation
from quadsim.physics.params import load_params

ROOT = Path(__file__).resolve().parents[1]
PARAMS = load_params("cf21_nanobench")
LOWER = (0.005, 0.0, 0.3, 0.0, 5.0, 0.0)  # T_m, c_1, τ_1, c_2, τ_2, c_i
UPPER = (0.2, 0.5, 10.0, 0.5, 200.0, 0.5)
START = (0.06, 0.03, 3.0, 0.03, 30.0, 0.03)


def prepare(path: Path) -> dict:
    """A flight's fixed data: airborne samples, the IMU and the Vicon-derived ``f_z``."""
    fl = rp.load_log(path)
    t = np.asarray(fl["t"], dtype=np.float64)
    dt = float(np.median(np.diff(t)))
    fz_v = rp.shift(t, rp.vicon_specific_force(fl, PARAMS.gravity_vec, dt),
                    nb.estimate_imu_shift(fl))  # fmt: skip
    climb = rotation.rotate_inverse(np.asarray(fl["quat"]), np.asarray(fl["vel"]))[:, 2]
    return {"name": fl["name"], "flight": fl, "t": t, "dt": dt, "keep": rp.airborne(fl),
            "fz_imu": rp.lowpass(np.asarray(fl["accel"])[:, 2], dt), "fz_vicon": fz_v,
            "climb": climb}  # fmt: skip


def predicted(x: dict, q: np.ndarray, motor) -> np.ndarray:
    """The model's total thrust [N], 10 Hz low-pass (module docstring)."""
    tm, c1, t1, c2, t2, ci = q
    w = rp.rotor_forces(PARAMS, motor, x["flight"]["pwm"], x["flight"]["vbat"], tm, x["dt"])[0]
    k = np.asarray(PARAMS.rpm2thrust)
    thrust = np.where(w > 0.0, k[0] + k[1] * w + k[2] * w * w, 0.0)
    drive = mt.warmup_drive(w, PARAMS.hover_rpm)
    heat = []
    for tau in (t1, t2):  # θ_k = (1 - a) θ_{k-1} + a p_{k-1}, θ_0 = 0: warmup_step's recurrence
        a = mt.warmup_step(0.0, 1.0, tau, x["dt"])
        heat.append(lfilter([0.0, a], [1.0, a - 1.0], drive, axis=0))
    thrust = thrust * np.maximum(1.0 - c1 * heat[0] - c2 * heat[1], 0.0)
    return rp.lowpass(thrust.sum(axis=1) * mt.inflow_factor(x["climb"], ci), x["dt"])


def delay(x: dict, pred: np.ndarray) -> float:
    """PWM-to-IMU delay [s] from the Vicon-derived ``f_z`` (the protocol's)."""
    return rp.best_shift(x["t"], pred, x["fz_vicon"], x["keep"])[0]


def scale(p: np.ndarray, y: np.ndarray) -> float:
    """The least-squares scale of ``p`` onto ``y`` (through the origin)."""
    return float(np.sum(p * y) / np.sum(p * p))


def fit(xs: list[dict], motor) -> np.ndarray:
    """The six coefficients on the flights ``xs`` (two rounds of delays and least squares)."""
    q = np.asarray(START)
    for _ in range(2):
        delays = [delay(x, predicted(x, q, motor)) for x in xs]

        def residuals(q: np.ndarray, delays: list = delays) -> np.ndarray:
            out = []
            for x, d in zip(xs, delays, strict=True):
                p = rp.shift(x["t"], predicted(x, q, motor), d)[x["keep"]]
                y = x["fz_imu"][x["keep"]]
                out.append(p * scale(p, y) - y)
            return np.concatenate(out)

        q = least_squares(residuals, q, bounds=(LOWER, UPPER), x_scale="jac",
                          diff_step=1e-3).x  # fmt: skip
    return q


def score(x: dict, q: np.ndarray, motor) -> tuple[float, float]:
    """``(R², RMSE)`` of ``f_z``, the thrust level from Vicon (the protocol's score)."""
    p = predicted(x, q, motor)
    p = rp.shift(x["t"], p, delay(x, p))
    k, y = x["keep"], x["fz_imu"]
    fz = p * scale(p[k], x["fz_vicon"][k])
    return rp.r2(fz[k], y[k]), float(np.sqrt(np.mean((fz - y)[k] ** 2)))


def main(argv: list[str]) -> int:
    """The table: pooled and held-out R² and RMSE of every flight."""
    folder = Path(argv[0]) if argv else ROOT.parent / "shared" / "data" / "nanobench"
    xs = [prepare(p) for p in sorted(folder.glob("B*.csv.gz")) if not p.name.startswith("B6_")]
    motor = rp.fit_motor()
    q = fit(xs, motor)
    print("pooled coefficients T_m, c_1, tau_1, c_2, tau_2, c_i:", np.round(q, 4))
    print(f"{'flight':28s} {'pooled R2':>9s} {'RMSE':>6s} {'held-out R2':>11s} {'RMSE':>6s}")
    for i, x in enumerate(xs):
        held = fit([y for j, y in enumerate(xs) if j != i], motor)
        (r_in, e_in), (r_out, e_out) = score(x, q, motor), score(x, held, motor)
        print(f"{x['name']:28s} {r_in:9.3f} {e_in:6.3f} {r_out:11.3f} {e_out:6.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
