"""The command line of the flight-log replay: ``quadsim replay`` and
``python -m quadsim.app.sysid.replay_cli`` (:func:`main`).

Every log is read and checked (:func:`quadsim.app.sysid.replay_log.load_log`) before anything
is fitted; a log that cannot be replayed, the same flight given twice (by content, under two
names: :func:`~quadsim.app.sysid.replay_log.check_distinct`), an ``--out`` folder that another
run holds or a file that cannot be written exits 2 with one line ``quadsim: FILE: ...`` on
stderr, and nothing is written. While the flights are fitted a progress bar runs on stderr
when stderr is a terminal (not with ``--quiet``). ``--json FILE`` is strict JSON (no ``NaN``: a
value that is not a number is ``null``), written whole or not at all
(:func:`quadsim.app.io.files.atomic_write`); ``--out DIR`` is held for the run
(:func:`quadsim.app.io.outdir.claim`) and gets one PNG per flight, each written whole.
"""  # noqa: D205

from __future__ import annotations

import argparse
import contextlib
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...physics.params import load_params
from ..io import outdir
from ..io.files import atomic_write, report_bad_input
from ..io.strict_json import strict_dumps
from . import replay as rp
from . import replay_protocol as pr
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
    trim = "ang_trim_pred" in s  # the protocol's roll and pitch: the trim removed
    for j, a in enumerate("xyz"):
        if trim and j < 2:
            hz = res["rotation_terms"]["trim_hz"]
            pairs.append((f"ω̇_{a} > {hz:g} Hz [rad/s²]", s["ang_trim_pred"][:, j],
                          s["ang_trim_meas"][:, j], res["ang_acc_trimmed_r2"][j]))  # fmt: skip
            continue
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


def _fmt(v: Any, spec: str, scale: float = 1.0) -> str:
    """``v`` formatted (times ``scale``), or ``-`` for a missing value or NaN."""
    if v is None or not math.isfinite(v):
        return "-"
    return format(scale * v, spec)


def _protocol_row(name: str, r: dict[str, Any]) -> str:
    d = r.get("delays_s", {})
    w = r.get("ang_acc_trimmed_r2", (math.nan, math.nan))
    return (
        f"{name:40s} {r.get('n_samples', 0):5d} {_fmt(r['specific_force_z_r2'], '.3f'):>6s} "
        f"{_fmt(r['specific_force_z_rmse_m_s2'], '.3f'):>6s} {_fmt(r['ceiling_r2'], '.3f'):>6s} "
        f"{_fmt(r['cruise_r2'], '.3f'):>6s} {_fmt(r['level_deviation_pct'], '+.1f'):>6s} "
        f"{_fmt(d.get('pwm_to_imu'), '.0f', 1e3):>6s} {_fmt(d.get('imu_to_vicon'), '.0f', 1e3):>6s}"
        f" {_fmt(w[0], '.2f'):>5s} {_fmt(w[1], '.2f'):>5s}"
        f"  {'EXCLUDED: ' + r['excluded'] if r.get('excluded') else ''}"
    )


def _print_protocol(preset: str, results: list[dict], held: list[dict]) -> None:
    t = results[0]["thrust_terms"]
    print(f"replay protocol through {preset}: T_m {1e3 * t['time_constant']:.0f} ms, warm-up "
          f"{100 * t['warmup_coef']:.1f} % over {t['warmup_time']:.1f} s, inflow "
          f"{100 * t['inflow_coef']:.1f} %/(m/s); thrust level and delays from Vicon "
          f"(level: {results[0]['level']}); 10 Hz, airborne; wx, wy: roll and pitch angular "
          f"acceleration with the trim (< 2 Hz) removed")  # fmt: skip
    head = (f"{'n':>5s} {'fz R2':>6s} {'RMSE':>6s} {'ceil':>6s} {'cruise':>6s} {'lvl %':>6s} "
            f"{'d_imu':>6s} {'i2v':>6s} {'wx R2':>5s} {'wy R2':>5s}")  # fmt: skip
    print(f"{'flight (the preset terms)':40s} {head}")
    for r in results:
        print(_protocol_row(r["name"], r))
    if held:
        print(f"{'held out (terms fitted on the others)':40s} {head}")
        for r in held:
            print(_protocol_row(r["name"], r))
        ok = [r for r in held if not r.get("excluded")]
        if ok:
            r2s = [r["specific_force_z_r2"] for r in ok]
            print(f"held out, {len(ok)} flights not excluded: R2 mean {np.mean(r2s):.3f}, min "
                  f"{min(r2s):.3f}; RMSE max "
                  f"{max(r['specific_force_z_rmse_m_s2'] for r in ok):.3f} m/s2")  # fmt: skip


def _progress(total: int, enabled: bool) -> tuple[Any, Callable[[], object]]:
    """A progress bar of ``total`` steps on stderr (a context manager) and its one-step update;
    none unless ``enabled`` and stderr is a terminal (the errors stay one line in a log)."""  # noqa: D205, D209
    if not (enabled and sys.stderr.isatty()):
        return contextlib.nullcontext(), lambda: None
    from tqdm import tqdm

    bar = tqdm(total=total, unit="step", desc="replay", leave=False, dynamic_ncols=True)
    return bar, lambda: bar.update(1)


def _run_protocol(
    args: argparse.Namespace, flights: list[dict], motor: ts.RpmFit, tick: Callable[[], object]
) -> tuple[list[dict], list[dict]]:
    """The protocol's per-flight results and, with several logs, its leave-one-out rows."""

    def one(f: dict) -> dict:
        r = pr.protocol_replay(f, preset=args.preset, motor=motor, level=args.level)
        tick()
        return r

    results = [_fitted(f["path"], lambda f=f: one(f)) for f in flights]
    held: list[dict] = []
    if len(flights) > 1:
        params = load_params(args.preset)
        held = _fitted("held out", lambda: pr.leave_one_out(
            flights, params, motor, level=args.level, progress=tick))  # fmt: skip
        for h, r in zip(held, results, strict=True):
            h["ang_acc_r2"] = r["ang_acc_r2"]
            h.pop("series", None)
    return results, held


def _run_strict(
    args: argparse.Namespace, flights: list[dict], motor: ts.RpmFit, tick: Callable[[], object]
) -> tuple[list[dict], list[dict]]:
    """Each flight's own fit and, with several logs, every ordered pair held out."""

    def one(f: dict) -> dict:
        r = rp.replay(f, preset=args.preset, motor=motor)
        tick()
        return r

    results = [_fitted(f["path"], lambda f=f: one(f)) for f in flights]
    cross: list[dict] = []
    if len(flights) > 1:
        cross = _fitted("held out", lambda: rp.cross_flights(
            flights, preset=args.preset, motor=motor, own=results))  # fmt: skip
    return results, cross


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
    params = load_params(args.preset)  # an unknown preset is refused before the logs are read
    protocol = not args.strict and pr.uses_terms(params)
    if protocol:
        pr.ThrustTerms.of(params)  # a preset the protocol cannot use, before the logs are read
    elif args.level != "vicon":
        raise ValueError(f"--level {args.level}: only with the protocol (a preset with warm-up "
                         "or inflow terms, without --strict)")  # fmt: skip
    flights = [rp.load_log(p, args.format) for p in args.logs]
    rp.check_distinct(flights)  # a copy would be held out against itself
    motor = rp.fit_motor()
    n = len(flights)
    bar, tick = _progress(n + (3 * n if protocol and n > 1 else 0), not args.quiet)
    with bar:  # closed (its line cleared) before the table is printed
        results, held = (_run_protocol if protocol else _run_strict)(args, flights, motor, tick)
    if protocol:
        _print_protocol(args.preset, results, held)
    else:
        _print(args.preset, motor, results, held)
    doc: Any = results[0] if n == 1 else {"flights": results, "held_out": held}
    if args.json is not None:
        text = strict_dumps(_without_series(doc), indent=2) + "\n"
        atomic_write(args.json, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    if args.out is not None:
        for r in results:
            fig = _figure(r)
            atomic_write(args.out / f"replay_{r['name']}.png",
                         lambda tmp, fig=fig: fig.savefig(tmp, format="png", dpi=110))  # fmt: skip
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``LOG [LOG ...] [--format nanobench] [--preset NAME] [--strict] [--level L]
    [--json FILE] [--out DIR] [--quiet]``.

    Returns:
        0 on success; 2, with one line ``quadsim: ...`` on stderr naming the file (and the row
        and column where there is one), for a log that cannot be replayed, the same flight
        given twice (naming both files), an unknown preset, an ``--out`` folder held by another
        run or a file that cannot be written.
    """  # noqa: D205
    ap = argparse.ArgumentParser(
        prog="python -m quadsim.app.sysid.replay_cli",
        description="Replay a flight's PWM and battery voltage through the rotor model: "
        "predicted against measured body-z specific force and angular acceleration.",
    )
    ap.add_argument("logs", nargs="+", type=Path, metavar="LOG", help="flight log(s)")
    ap.add_argument("--format", default="nanobench", choices=["nanobench"])
    ap.add_argument("--preset", default="cf2x_L250")
    ap.add_argument("--strict", action="store_true",
                    help="score as before the protocol: mass, lag and delays fitted on each "
                    "flight, no warm-up or inflow term (the default for presets without them)")
    ap.add_argument("--level", default="vicon", choices=list(pr.LEVELS),
                    help="the protocol's per-flight thrust level: from the Vicon acceleration "
                    "(vicon) or from the IMU over the first 3 s of cruise, then not scored "
                    "(window)")
    ap.add_argument("--json", type=Path, default=None, help="write the metrics as JSON")
    ap.add_argument("--out", type=Path, default=None, help="folder for the PNG plots")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    args = ap.parse_args(argv)
    try:
        _check_json(args.json)
        held = outdir.claim(args.out) if args.out is not None else contextlib.nullcontext()
        with held:
            return _run(args)
    except (ValueError, OSError) as e:  # bad input, a file named
        return report_bad_input(e)


if __name__ == "__main__":
    raise SystemExit(main())
