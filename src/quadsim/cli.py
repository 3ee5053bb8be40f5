"""The ``quadsim`` command. Exit codes: 0 success, 2 bad input, 1 simulation failure.

``quadsim fly SCENARIO [--out DIR] [--csv] [--no-plots] [--animate {gif,mp4}]`` flies a scenario
file and writes the results; ``quadsim info PRESET [--plot FILE]`` prints the flight envelope;
``quadsim presets`` lists the drones; ``quadsim bench`` measures speed.
"""

from __future__ import annotations

import argparse
import math
import sys

from . import __version__

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # usage errors are bad input: exit code 2
        self.print_usage(sys.stderr)
        self.exit(2, f"quadsim: {message}\n")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="quadsim", description="Physics-based quadrotor simulation.")
    p.add_argument("--version", action="version", version=f"quadsim {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    f = sub.add_parser("fly", help="fly a scenario file and write the log, summary and plots")
    f.add_argument("scenario", help="scenario TOML file (see docs/scenarios.md)")
    f.add_argument("--out", metavar="DIR", help="output directory (default runs/<scenario name>)")
    f.add_argument("--csv", action="store_true", default=None, help="also write trajectory.csv")
    f.add_argument(
        "--no-plots", dest="plots", action="store_false", default=None, help="skip the PNG figures"
    )
    f.add_argument(
        "--animate",
        nargs="?",
        const="gif",
        choices=("gif", "mp4"),
        help="also write an animation of drone 0 (default gif)",
    )
    f.add_argument("--quiet", action="store_true", help="no progress bar")
    i = sub.add_parser("info", help="flight envelope of a preset")
    i.add_argument("preset", help="preset name or drone TOML file")
    i.add_argument(
        "--plot",
        metavar="FILE",
        nargs="?",
        const="envelope.png",
        help="also draw terminal velocity against tilt (default envelope.png)",
    )
    sub.add_parser("presets", help="list the drone presets")
    b = sub.add_parser("bench", help="measure drone-steps per second (and the peers, if installed)")
    b.add_argument("--quick", action="store_true", help="a run of about a minute")
    b.add_argument("--json", metavar="FILE", help="also write the table as JSON records")
    return p


def _info(preset: str, plot: str | None) -> int:
    from .envelope import envelope
    from .params import load_params

    drone = load_params(preset)
    env = envelope(drone)
    rows = [
        ("mass", f"{drone.mass * 1e3:.1f} g"),
        ("rotors", f"{drone.mixing_matrix.shape[1]}"),
        ("hover speed", f"{env.hover_rpm:.0f} RPM ({env.hover_rad_s:.2f} rad/s)"),
        ("rotor speed range", f"{drone.rpm_min:.0f} .. {drone.rpm_max:.0f} RPM"),
        ("thrust range", f"{env.thrust_min:.4g} .. {env.thrust_max:.4g} N"),
        ("thrust-to-weight", f"{env.thrust_to_weight:.3f}"),
        ("max climb acceleration", f"{env.accel_up_max:.2f} m/s^2"),
        ("max sink acceleration", f"{env.accel_down_max:.2f} m/s^2"),
        ("max tilt (level flight)", f"{math.degrees(env.tilt_max):.2f} deg"),
    ]
    from .envelope import terminal_velocity

    for deg in (10.0, 20.0, 30.0):
        if math.radians(deg) > env.tilt_max:
            continue
        v = terminal_velocity(drone, math.radians(deg))
        rows.append((f"terminal velocity at {deg:.0f} deg", f"{v:.2f} m/s"))
    width = max(len(k) for k, _ in rows)
    print(f"{drone.name}")
    for k, val in rows:
        print(f"  {k:<{width}}  {val}")
    if plot:
        from .plotting import plot_envelope

        print(f"wrote {plot_envelope(drone, plot)}")
    return 0


def _fly(args: argparse.Namespace) -> int:
    from .io import format_summary_table
    from .run import fly_scenario

    summary = fly_scenario(
        args.scenario,
        args.out,
        csv=args.csv,
        plots=args.plots,
        animate=args.animate,
        progress=not args.quiet,
    )
    print(format_summary_table(summary))
    print("wrote:")
    for f in summary["files"]:
        print(f"  {f}")
    if summary.get("interrupted"):
        print("interrupted: the files hold every completed chunk", file=sys.stderr)
        return 130
    return 1 if summary.get("crashes", 0) else 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``quadsim`` command."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "fly":
            return _fly(args)
        if args.command == "info":
            return _info(args.preset, args.plot)
        if args.command == "presets":
            from .params import list_presets

            print("\n".join(list_presets()))
            return 0
        if args.command == "bench":
            from .bench import main as bench_main

            return bench_main(quick=args.quick, json_path=args.json)
    except ValueError as e:
        print(f"quadsim: {e}", file=sys.stderr)
        return 2
    except ImportError as e:
        print(f"quadsim: {e} (install the extra: pip install 'quadsim[cli]')", file=sys.stderr)
        return 2
    except RuntimeError as e:  # SimulationError and friends
        print(f"quadsim: {e}", file=sys.stderr)
        return 1
    return 2


if __name__ == "__main__":
    sys.exit(main())
