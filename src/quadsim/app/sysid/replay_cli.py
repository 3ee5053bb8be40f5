"""The command line of the flight-log replay: ``quadsim replay`` and
``python -m quadsim.app.sysid.replay`` (:func:`main`).

Every log is read and checked (:func:`quadsim.app.sysid.replay_log.load_log`) before anything
is fitted; a log that cannot be replayed, an ``--out`` folder that another run holds or a file
that cannot be written exits 2 with one line ``quadsim: FILE: ...`` on stderr, and nothing is
written. ``--json FILE`` is strict JSON (no ``NaN``: a value that is not a number is ``null``),
written whole or not at all (:func:`quadsim.app.io.files.atomic_write`); ``--out DIR`` is held
for the run (:func:`quadsim.app.io.outdir.claim`) and gets one PNG per flight, each written
whole.
"""  # noqa: D205

from __future__ import annotations

import argparse
import contextlib
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...physics.params import load_params
from ..io import outdir
from ..io.files import atomic_write, report_bad_input
from ..io.strict_json import strict_dumps
from . import replay as rp
from . import thrust_stand as ts

__all__ = ["main"]


def _without_series(x: Any) -> Any:
    """``x`` without the ``"series"`` entries (arrays for plots, not JSON)."""
    if isinstance(x, dict):
        return {str(k): _without_series(v) for k, v in x.items() if k != "series"}
    if isinstance(x, (list, tuple)):
        return [_without_series(v) for v in x]
    return x


def _figure(res: dict[str, Any]) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    s = res["series"]
    t, keep = s["t"], s["airborne"]
    fig = Figure(figsize=(10, 9))
    FigureCanvasAgg(fig)
    axs = fig.subplots(4, 1, sharex=True)
    pairs = [("f_z [m/s²]", s["fz_pred"], s["fz_meas"], res["specific_force_z_r2"])]
    for j, a in enumerate("xyz"):
        pairs.append(
            (f"ω̇_{a} [rad/s²]", s["ang_pred"][:, j], s["ang_meas"][:, j], res["ang_acc_r2"][j])
        )
    for ax, (label, p, m, score) in zip(axs, pairs, strict=True):
        ax.plot(t, np.where(keep, m, np.nan), "k", lw=0.8, label="measured (IMU)")
        ax.plot(t, np.where(keep, p, np.nan), "C1", lw=0.8, label="predicted (PWM, vbat)")
        ax.set_ylabel(label)
        ax.set_title(f"R² = {score:.3f}", fontsize=9, loc="right")
    axs[0].legend(loc="lower left", fontsize=8)
    axs[-1].set_xlabel("t [s]")
    fig.suptitle(
        f"{res['name']}: replay through {res['preset']}, m = {1e3 * res['mass_kg']:.1f} g, "
        f"10 Hz low-pass"
    )
    fig.tight_layout()
    return fig


def _row(name: str, r: dict[str, Any]) -> str:
    a = r["ang_acc_r2"]
    d = r.get("delays_s", {})
    return (
        f"{name:44s} {r.get('n_samples', 0):5d} {r['specific_force_z_r2']:6.3f} "
        f"{r['specific_force_z_rmse_m_s2']:6.3f} {a[0]:6.2f} {a[1]:6.2f} {a[2]:6.2f} "
        f"{1e3 * r['mass_kg']:6.1f} {1e3 * r.get('time_constant_s', math.nan):5.0f} "
        f"{1e3 * d.get('pwm_to_imu', math.nan):6.0f} "
        f"{1e3 * d.get('pwm_to_gyro', math.nan):6.0f} {1e3 * d.get('imu_to_vicon', math.nan):6.0f}"
    )


def _print(preset: str, motor: ts.RpmFit, results: list[dict], cross: list[dict]) -> None:
    print(
        f"replay through {preset}: w = {motor.coef[0]:.0f} + {motor.coef[1]:.0f} u RPM, "
        f"u = pwm/65535 x vbat (thrust stand); 10 Hz low-pass, one step, samples in flight"
    )
    print(
        f"{'flight (mass, lag, delays fitted on it)':44s} {'n':>5s} {'fz R2':>6s} {'RMSE':>6s} "
        f"{'wdot x':>6s} {'y':>6s} {'z':>6s} {'m [g]':>6s} {'T_m':>5s} {'d_imu':>6s} {'d_gyr':>6s} "
        f"{'d_vic':>6s}"
    )
    for r in results:
        print(_row(r["name"], r))
    for r in results:
        for h, e in r["horizons"].items():
            print(
                f"  {r['name']} {h} s horizon: dv RMSE "
                f"{', '.join(f'{v:.3f}' for v in e['dv_rmse_m_s'])} m/s (dv_z R2 "
                f"{e['dv_z_r2']:.2f}); dw RMSE {', '.join(f'{v:.2f}' for v in e['dw_rmse_rad_s'])}"
                f" rad/s (R2 {', '.join(f'{v:.2f}' for v in e['dw_r2'])})"
            )
    if cross:
        print("held out (mass, lag, delays and angular bias of the training flight):")
        for c in cross:
            print(_row(f"{c['train'][:19]} -> {c['test'][:19]}", c))


def _fitted(what: str, fit: Any) -> Any:
    """``fit()``, a fit that fails (a singular system, a signal that never changes) re-raised
    as a ``ValueError`` starting with ``what`` (the file)."""  # noqa: D205, D209
    try:
        return fit()
    except (ValueError, ArithmeticError) as e:
        msg = str(e)
        if msg.startswith(what):
            raise
        raise ValueError(f"{what}: the replay cannot be fitted: {msg}") from None


def _check_json(path: Path | None) -> None:
    if path is None:
        return
    if path.is_dir():
        raise ValueError(f"--json {path}: is a directory")
    if not path.parent.is_dir():
        raise ValueError(f"--json {path}: the folder {path.parent} does not exist")


def _run(args: argparse.Namespace) -> int:
    load_params(args.preset)  # an unknown preset is refused before the logs are read
    flights = [rp.load_log(p, args.format) for p in args.logs]
    motor = rp.fit_motor()
    results = [
        _fitted(f["path"], lambda f=f: rp.replay(f, preset=args.preset, motor=motor))
        for f in flights
    ]
    cross = []
    if len(flights) > 1:
        cross = _fitted("held out", lambda: rp.cross_flights(flights, preset=args.preset,
                                                             motor=motor))  # fmt: skip
    _print(args.preset, motor, results, cross)
    if args.json is not None:
        doc: Any = results[0] if len(results) == 1 else {"flights": results, "held_out": cross}
        text = strict_dumps(_without_series(doc), indent=2) + "\n"
        atomic_write(args.json, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    if args.out is not None:
        for r in results:
            fig = _figure(r)
            atomic_write(args.out / f"replay_{r['name']}.png",
                         lambda tmp, fig=fig: fig.savefig(tmp, format="png", dpi=110))  # fmt: skip
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``LOG [LOG ...] [--format nanobench] [--preset NAME] [--json FILE]
    [--out DIR]``.

    Returns:
        0 on success; 2, with one line ``quadsim: ...`` on stderr naming the file (and the row
        and column where there is one), for a log that cannot be replayed, an unknown preset,
        an ``--out`` folder held by another run or a file that cannot be written.
    """  # noqa: D205
    ap = argparse.ArgumentParser(
        prog="python -m quadsim.app.sysid.replay",
        description="Replay a flight's PWM and battery voltage through the rotor model: "
        "predicted against measured body-z specific force and angular acceleration.",
    )
    ap.add_argument("logs", nargs="+", type=Path, metavar="LOG", help="flight log(s)")
    ap.add_argument("--format", default="nanobench", choices=["nanobench"])
    ap.add_argument("--preset", default="cf2x_L250")
    ap.add_argument("--json", type=Path, default=None, help="write the metrics as JSON")
    ap.add_argument("--out", type=Path, default=None, help="folder for the PNG plots")
    args = ap.parse_args(argv)
    try:
        _check_json(args.json)
        held = outdir.claim(args.out) if args.out is not None else contextlib.nullcontext()
        with held:
            return _run(args)
    except (ValueError, OSError) as e:  # bad input, a file named
        return report_bad_input(e)
