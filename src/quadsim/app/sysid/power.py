r"""The Crazyflie's power chain identified on the thrust stand (:mod:`quadsim.physics.power`).

From the two runs in ``data/crazyflie-thrust-stand`` (:mod:`quadsim.app.sysid.thrust_stand`):

* **internal resistance**: the deck voltage against the deck current, ``v = E - R i`` per run
  (least squares; the runs start at different charges, so ``E`` is fitted per run and ``R``
  is their mean);
* **steady rotor speed**: ``ω_ss = c0 + c1 u`` with ``u = duty · v`` (the deck voltage, the
  battery's terminal voltage) and the first-order lag in rows,
  :func:`~quadsim.app.sysid.thrust_stand.fit_pwm_voltage_to_rpm`, on both runs; rows with PWM
  below :data:`~quadsim.app.sysid.thrust_stand.PWM_MIN` left out;
* **electrical power**: ``P = p0 + 4 (p1 ω + p2 ω²)`` against the mean rotor speed (all rows).

Each model is also fitted on one run and tested on the other (:func:`cross_run`). The battery's
capacity and open-circuit curve are not in the stand data; they come from Bitcraze's
specification and the firmware's charge table (the preset's sources).

``python -m quadsim.app.sysid.power [--write PATH]`` prints the fit and the cross-run errors and
writes the preset (``src/quadsim/physics/presets/power/cf21_stock.toml`` is its output).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from . import thrust_stand as ts

__all__ = ["cross_run", "fit_power", "fit_power_curve", "fit_resistance", "main", "preset_text"]

CAPACITY_AH = 0.25
"""Crazyflie 2.1 battery: 250 mAh, one LiPo cell (Bitcraze, Crazyflie 2.1 product page)."""
OCV = (3.00, 3.78, 3.83, 3.87, 3.89, 3.92, 3.96, 4.00, 4.04, 4.10, 4.20)
"""Open-circuit voltage at charge 0, 0.1, ..., 1 [V]: 0-90 % from the Crazyflie firmware's
battery charge table (``bat671723HS25C``, ``src/hal/src/pm_stm32f4.c``), 100 % the full-charge
voltage of a LiPo cell."""
V_CUTOFF = 3.0
"""[V], the firmware table's 0 %."""


def fit_resistance(v: Any, i: Any) -> tuple[float, float, float]:
    """``(E [V], R [Ω], rmse [V])`` of ``v = E - R i`` (least squares)."""
    A = np.c_[np.ones(len(i)), -np.asarray(i, np.float64)]
    c, *_ = np.linalg.lstsq(A, np.asarray(v, np.float64), rcond=None)
    r = v - A @ c
    return float(c[0]), float(c[1]), float(np.sqrt(np.mean(r**2)))


def fit_power_curve(rpm: Any, power: Any) -> np.ndarray:
    """``(p0, p1, p2)`` of ``P = p0 + 4 (p1 ω + p2 ω²)`` [W, W/RPM, W/RPM²] (least squares)."""
    w = np.asarray(rpm, np.float64)
    A = np.c_[np.ones_like(w), 4 * w, 4 * w * w]
    c, *_ = np.linalg.lstsq(A, np.asarray(power, np.float64), rcond=None)
    return c


def _power(c: np.ndarray, w: Any) -> np.ndarray:
    return c[0] + 4 * (c[1] * w + c[2] * w * w)


def fit_power(files: Sequence[str | Path] | None = None) -> dict[str, Any]:
    """All the fits on the stand runs pooled (module docstring): a dict with ``r_internal``,
    ``r_runs``, ``e_runs``, ``rpm`` (:class:`~quadsim.app.sysid.thrust_stand.RpmFit`, on the
    deck voltage), ``power_coef`` and the files."""  # noqa: D205, D209
    runs = [ts.load_stand(f) for f in (files or ts.default_files())]
    er = [fit_resistance(d["v_deck"], d["current"]) for d in runs]
    pwm = np.concatenate([d["pwm"] for d in runs])
    v = np.concatenate([d["v_deck"] for d in runs])
    rpm = np.concatenate([d["rpm"] for d in runs])
    fit = ts.fit_pwm_voltage_to_rpm(pwm, v, rpm, "linear")
    pc = fit_power_curve(rpm, np.concatenate([d["power"] for d in runs]))
    return {"r_internal": float(np.mean([r for _, r, _ in er])), "r_runs": [r for _, r, _ in er],
            "e_runs": [e for e, _, _ in er], "rpm": fit, "power_coef": pc,
            "files": [d["name"] for d in runs]}  # fmt: skip


def cross_run(files: Sequence[str | Path] | None = None) -> list[dict[str, float]]:
    """Each model fitted on one run and tested on the other: per direction the power RMSE [W]
    and as a share of the mean power, the resistance of each run."""  # noqa: D205, D209
    runs = [ts.load_stand(f) for f in (files or ts.default_files())]
    out = []
    for a, b in ((0, 1), (1, 0)):
        c = fit_power_curve(runs[a]["rpm"], runs[a]["power"])
        err = _power(c, runs[b]["rpm"]) - runs[b]["power"]
        rmse = float(np.sqrt(np.mean(err**2)))
        out.append({"fit": runs[a]["name"], "test": runs[b]["name"], "power_rmse_w": rmse,
                    "power_rmse_rel": rmse / float(np.mean(runs[b]["power"]))})  # fmt: skip
    return out


def preset_text(f: dict[str, Any]) -> str:
    """The power preset TOML of a :func:`fit_power` result (every value with unit and source)."""
    data = "IMRCLab crazyflie-system-id thrust stand, data/crazyflie-thrust-stand (MIT)"
    how = "python -m quadsim.app.sysid.power"
    rpm = f["rpm"].coef
    return f'''# Crazyflie 2.1 with stock propellers: battery, PWM-and-voltage motor model, power.
# Fitted on the thrust stand by `{how}` (quadsim.app.sysid.power); see docs/validation.md.
kind = "power"
name = "cf21_stock"
description = "Crazyflie 2.1, stock motors and propellers, 250 mAh LiPo"

capacity = {{ value = {CAPACITY_AH}, unit = "A h", source = "Bitcraze, Crazyflie 2.1: 250 mAh LiPo battery (one cell)" }}
r_internal = {{ value = {f["r_internal"]:.6g}, unit = "ohm", source = "{data}: deck voltage against deck current, v = E - R i per run ({f["r_runs"][0]:.4f} and {f["r_runs"][1]:.4f} ohm), their mean; {how}" }}
ocv = {{ value = {list(OCV)}, unit = "V", source = "Crazyflie firmware battery charge table bat671723HS25C (src/hal/src/pm_stm32f4.c) for 0..90 %; 4.20 V, a LiPo cell's full charge, for 100 %" }}
v_cutoff = {{ value = {V_CUTOFF}, unit = "V", source = "the firmware table's 0 %" }}
rpm_coef = {{ value = [{rpm[0]:.6g}, {rpm[1]:.6g}, {rpm[2]:.6g}], unit = "RPM, RPM/V, RPM/V^2", source = "{data}: mean rotor speed against duty x deck voltage, first-order lag of {f["rpm"].tau:g} rows, both runs, rows with PWM >= 10000 ({f["rpm"].rmse:.0f} RPM RMS); {how}" }}
pwm_start = {{ value = {ts.PWM_MIN:g}, unit = "pwm", source = "{data}: below it the motors start and stop (still up to about 7000 on the way up)" }}
power_coef = {{ value = [{f["power_coef"][0]:.6g}, {f["power_coef"][1]:.6g}, {f["power_coef"][2]:.6g}], unit = "W, W/RPM, W/RPM^2", source = "{data}: deck power against the mean rotor speed, P = p0 + 4 (p1 w + p2 w^2), both runs; {how}" }}
'''  # noqa: E501


def main(argv: Sequence[str] | None = None) -> int:
    """Print the fits and the cross-run errors; ``--write PATH`` writes the preset."""
    ap = argparse.ArgumentParser(prog="python -m quadsim.app.sysid.power",
                                 description=__doc__.splitlines()[0])  # fmt: skip
    ap.add_argument("--files", nargs="*", help="stand CSV files (default: the two in data/)")
    ap.add_argument("--write", metavar="PATH", help="write the preset TOML here")
    a = ap.parse_args(argv)
    if a.files is not None and len(a.files) != 2:
        print("error: --files takes the two runs (each model is tested across them)",
              file=sys.stderr)  # fmt: skip
        return 2
    try:
        f = fit_power(a.files)
        cross = cross_run(a.files)
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"internal resistance: {f['r_internal']:.4f} ohm (runs: "
          f"{', '.join(f'{r:.4f}' for r in f['r_runs'])}; open-circuit "
          f"{', '.join(f'{e:.3f}' for e in f['e_runs'])} V)")  # fmt: skip
    c = f["rpm"].coef
    print(f"rotor speed: {c[0]:.1f} + {c[1]:.1f} u RPM (u = duty x V), lag {f['rpm'].tau:g} rows, "
          f"{f['rpm'].rmse:.0f} RPM RMS")  # fmt: skip
    p = f["power_coef"]
    print(f"power: {p[0]:.3f} W + 4 ({p[1]:.3e} w + {p[2]:.3e} w^2) W")
    for r in cross:
        print(f"  power fitted on {r['fit']}, tested on {r['test']}: {r['power_rmse_w']:.3f} W "
              f"({100 * r['power_rmse_rel']:.1f} % of the mean)")  # fmt: skip
    if a.write:
        Path(a.write).write_text(preset_text(f))
        print(f"wrote {a.write}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
