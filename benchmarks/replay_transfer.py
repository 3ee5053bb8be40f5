"""Does any thrust model built from the logged PWM and battery voltage transfer between flights?

Leave one flight out: the parameters of each model are fitted by least squares on the other
flights' airborne samples (one mass, one rotor time constant, one PWM delay for all of them)
and the held-out flight's body-z specific force R² is reported (10 Hz low-pass, as
``quadsim replay``). The models, each a rotor speed ``ω`` per motor from ``d = pwm / 65535``
and ``vbat`` (the thrust-stand fit ``ω = c0 + c1 d vbat`` is the base):

* ``stand``: the stand fit as it is (mass, lag, delay);
* ``v_exponent``: ``ω = c0 + c1 d vbat^α`` (the voltage's weight free);
* ``rest_voltage``: ``ω = c0 + c1 d (vbat + β (v_rest - vbat))``, ``v_rest`` the log's
  voltage before take-off (the battery's open-circuit voltage: its sag under load free);
* ``inflow``: ``T (1 - a v_z + b v_h²)`` with the Vicon body-frame climb rate and horizontal
  speed (induced-velocity and translational-lift terms).

Then the protocol of ``quadsim replay --preset cf21_nanobench``
(:func:`quadsim.app.sysid.replay_protocol.leave_one_out`: lag, warm-up and inflow fitted on the
other flights, thrust level and delays from Vicon, saturated flights excluded), and with
``--fit-preset`` the coefficients fitted on all the flights that are not excluded, as stored in
the ``cf21_nanobench`` preset.

``python benchmarks/replay_transfer.py [--fit-preset] [LOG ...]`` (default: the NanoBench
flights in ``data/nanobench/`` and ``../shared/data/nanobench/`` that are not saturated all
along; a flight is named by its file name without ``.csv.gz``); the tables are in
``docs/validation.md`` ("Flight logs: replay").
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares
from scipy.signal import lfilter

from quadsim.app.sysid import replay as rp
from quadsim.app.sysid import replay_protocol as pr
from quadsim.physics import rotation
from quadsim.physics.params import load_params

ROOT = Path(__file__).resolve().parents[1]
SKIP = ("B6_",)  # one motor at 65535 on every airborne sample


def flight_name(path: Path) -> str:
    """A flight's name: its file name without ``.csv.gz`` / ``.csv`` (``B3_figure8_medium_rep1``
    and ``B3_figure8_fast_rep2`` stay two flights; the text before the first underscore made them
    one, the second silently replacing the first)."""  # noqa: D205, D209
    name = path.name
    for ext in (".csv.gz", ".csv"):
        if name.endswith(ext):
            return name[: -len(ext)]
    return name


def _flights(paths: list[Path]) -> dict[str, dict]:
    motor = rp.fit_motor()
    out = {}
    for p in paths:
        fl = rp.load_log(p)
        t = np.asarray(fl["t"])
        dt = float(np.median(np.diff(t)))
        keep = rp.airborne(fl)
        vb = rotation.rotate_inverse(np.asarray(fl["quat"]), np.asarray(fl["vel"]))
        i0 = int(np.argmax(fl["flying"]))
        out[flight_name(p)] = {
            "t": t,
            "dt": dt,
            "keep": keep,
            "d": np.asarray(fl["pwm"]) / 65535.0,
            "pwm": np.asarray(fl["pwm"]),
            "v": np.asarray(fl["vbat"]),
            "v_rest": float(np.mean(fl["vbat"][: max(i0 - 1, 1)])),
            "vz": vb[:, 2],
            "vh": np.linalg.norm(vb[:, :2], axis=1),
            "fz": rp.lowpass(np.asarray(fl["accel"])[:, 2], dt)[keep],
            "c": motor.coef[:2],
        }
    return out


MODELS = {
    # name: (extra parameter names, initial values, bounds)
    "stand": ((), (), ()),
    "v_exponent": (("alpha",), (1.0,), ((0.0, 3.0),)),
    "rest_voltage": (("beta",), (0.0,), ((-1.0, 1.0),)),
    "inflow": (("a", "b"), (0.0, 0.0), ((-1.0, 1.0), (-1.0, 1.0))),
}


def _predict(model: str, p: np.ndarray, x: dict, k: np.ndarray) -> np.ndarray:
    mass, delay, tau = p[:3]
    c0, c1 = x["c"]
    v = x["v"][:, None]
    if model == "v_exponent":
        w = c0 + c1 * x["d"] * v ** p[3]
    elif model == "rest_voltage":
        w = c0 + c1 * x["d"] * (v + p[3] * (x["v_rest"] - v))
    else:
        w = c0 + c1 * x["d"] * v
    w = np.where(x["pwm"] > 0, np.maximum(w, 0.0), 0.0)
    a = np.exp(-x["dt"] / tau)
    w = lfilter([0.0, 1.0 - a], [1.0, -a], w, axis=0, zi=w[:1])[0]
    thrust = (k[0] + k[1] * w + k[2] * w * w).sum(axis=1)
    if model == "inflow":
        thrust = thrust * (1.0 - p[3] * x["vz"] + p[4] * x["vh"] ** 2)
    thrust = rp.shift(x["t"], thrust, delay)
    return rp.lowpass(thrust, x["dt"])[x["keep"]] / mass


def default_paths() -> list[Path]:
    """The NanoBench flights of the repository and ``../shared``, one per file name, B6 left out."""
    seen: dict[str, Path] = {}
    for folder in (ROOT / "data" / "nanobench", ROOT.parent / "shared" / "data" / "nanobench"):
        for p in sorted(folder.glob("B*.csv.gz")):
            if not p.name.startswith(SKIP):
                seen.setdefault(p.name, p)
    return list(seen.values())


def protocol(paths: list[Path], fit_preset: bool) -> None:
    """Print the protocol's leave-one-out table (and the preset's fit)."""
    params = load_params("cf21_nanobench")
    motor = rp.fit_motor()
    flights = [rp.load_log(p) for p in paths]
    rows = pr.leave_one_out(flights, params, motor)
    print("protocol (quadsim replay --preset cf21_nanobench), leave one out:")
    print(f"{'flight':28s} {'R2':>6s} {'RMSE':>6s} {'ceil':>6s} {'cruise':>6s} {'lvl %':>6s} "
          f"{'d_imu':>6s}  excluded")  # fmt: skip
    for r in rows:
        print(f"{r['name']:28s} {r['specific_force_z_r2']:6.3f} "
              f"{r['specific_force_z_rmse_m_s2']:6.3f} {r['ceiling_r2']:6.3f} "
              f"{r['cruise_r2']:6.3f} "
              f"{r['level_deviation_pct']:+6.1f} {1e3 * r['delays_s']['pwm_to_imu']:6.0f}  "
              f"{r['excluded'] or '-'}")  # fmt: skip
    ok = [r for r in rows if not r["excluded"]]
    print(f"mean R2 {np.mean([r['specific_force_z_r2'] for r in ok]):.3f} over {len(ok)} flights")
    if fit_preset:
        keep = [f for f, r in zip(flights, rows, strict=True) if not r["excluded"]]
        terms, masses = pr.fit_terms(keep, params, motor)
        print(f"fitted on {', '.join(f['name'] for f in keep)}: {terms}, mass "
              f"{np.mean(masses):.5f} kg (per flight {', '.join(f'{m:.5f}' for m in masses)}), "
              f"motor_constant {1.0 / terms.time_constant:.3f} 1/s")  # fmt: skip


def main(argv: list[str]) -> int:
    """Print the leave-one-out table of every model and of the protocol; 0."""
    fit_preset = "--fit-preset" in argv
    argv = [a for a in argv if a != "--fit-preset"]
    if argv:
        paths = [Path(a) for a in argv]
    else:
        paths = default_paths()
    flights = _flights(paths)
    k = np.asarray(load_params("cf2x_L250").rpm2thrust)
    names = list(flights)
    print(f"leave one out over {', '.join(names)}: held-out f_z R² (10 Hz, airborne)")
    w = max(len(n) for n in names)
    cols = " ".join(f"{n:>{w}s}" for n in names)
    print(f"{'model':14s} {cols}   fitted (on all but the last)")
    for model, (extra, init, bounds) in MODELS.items():
        lo = [0.02, -0.05, 0.002, *(b[0] for b in bounds)]
        hi = [0.08, 0.15, 0.2, *(b[1] for b in bounds)]
        p0 = [0.046, 0.01, 0.04, *init]
        scores, fit = [], None
        for test in names:
            train = [n for n in names if n != test]

            def res(p: np.ndarray, train: list[str] = train, model: str = model) -> np.ndarray:
                return np.concatenate(
                    [_predict(model, p, flights[n], k) - flights[n]["fz"] for n in train]
                )

            fit = least_squares(res, p0, bounds=(lo, hi), x_scale="jac").x
            x = flights[test]
            scores.append(rp.r2(_predict(model, fit, x, k), x["fz"]))
        labels = ("m [g]", "delay [ms]", "T_m [ms]", *extra)
        vals = (1e3 * fit[0], 1e3 * fit[1], 1e3 * fit[2], *fit[3:])
        desc = ", ".join(f"{n} {v:.3g}" for n, v in zip(labels, vals, strict=True))
        print(f"{model:14s} " + " ".join(f"{s:{w}.3f}" for s in scores) + f"   {desc}")
    protocol(paths, fit_preset)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
