"""The ``quadsim`` command.

``quadsim fly SCENARIO [--out DIR] [--csv] [--no-plots] [--animate {gif,mp4}] [--quiet]
[--rosbag]`` flies a scenario file and writes the results (``--rosbag``: also as a ROS 2 bag in
MCAP); ``quadsim ros2 SCENARIO [--rate real|max] [--domain-id N] [--namespace NS] [--network
IFACE] [--timeout S] [--on-timeout hover|land|cut] [--duration S] [--out DIR]`` runs it as a
ROS 2 node over DDS (docs/ros2.md); ``quadsim recover DIR`` rebuilds the results of a killed
run; ``quadsim info PRESET [--plot FILE]`` prints the flight envelope; ``quadsim presets`` lists
the drones; ``quadsim bench`` measures quadsim's speed (the scripts in ``benchmarks/`` compare
the peers); ``quadsim replay LOG [...] [--format nanobench] [--preset NAME] [--strict] [--level
L] [--json FILE] [--out DIR] [--quiet]`` replays a real flight's motor commands through the model
(docs/validation.md).

Exit codes: 0 success, 1 simulation failure (a drone diverged or crashed), 2 bad input (one line
``quadsim: FILE: KEY (line N): what is wrong``, or ``quadsim: what is wrong``), 128 + the signal
number when SIGINT (130), SIGTERM (143) or SIGHUP (129) stopped the run (what was computed is
kept), 70 an internal error (a bug: please report it).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from typing import Any

from .. import __version__
from ..physics import presets
from ..physics.envelope import envelope, terminal_velocity
from ..physics.params import list_presets, load_params
from .signals import Interrupted, raising

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
    f.add_argument(
        "--out",
        metavar="DIR",
        help="output directory (default runs/<scenario file name without .toml>)",
    )
    f.add_argument("--csv", action="store_true", default=None, help="also write trajectory.csv")
    f.add_argument(
        "--no-plots", dest="plots", action="store_false", default=None, help="skip the PNG figures"
    )
    f.add_argument(
        "--animate",
        nargs="?",
        const="gif",
        choices=("gif", "mp4"),
        help="also write an animation of the drones kept for the figures (default gif)",
    )
    f.add_argument(
        "--quiet", action="store_true", help="print nothing but errors (no progress, no summary)"
    )
    f.add_argument("--rosbag", action="store_true",
                   help="also write the log as a ROS 2 bag, trajectory.mcap (odometry, IMU, tf, "
                        "rotor speeds, reference; needs quadsim[ros2])")  # fmt: skip
    r = sub.add_parser(
        "recover", help="rebuild trajectory.parquet and summary.json of a run that was killed"
    )
    r.add_argument("dir", metavar="DIR", help="the killed run's output directory")
    r.add_argument("--no-plots", dest="plots", action="store_false", help="skip the figures")
    i = sub.add_parser("info", help="flight envelope of a preset")
    i.add_argument("preset", help="preset name or drone TOML file")
    i.add_argument(
        "--plot",
        metavar="FILE",
        nargs="?",
        const="",
        help="also draw terminal velocity against tilt (default runs/<preset>/envelope.png)",
    )
    sub.add_parser("presets", help="list the drone presets")
    rp = sub.add_parser("replay", help="replay a real flight log's PWM and battery voltage "
                        "through the motor and rotor model, against its IMU")  # fmt: skip
    rp.add_argument("logs", nargs="+", metavar="LOG", help="flight log(s), e.g. a NanoBench CSV")
    rp.add_argument("--format", default="nanobench", choices=["nanobench"], help="log format")
    rp.add_argument("--preset", default="cf2x_L250", help="drone preset (default cf2x_L250)")
    rp.add_argument("--strict", action="store_true", help="score without the held-out protocol "
                    "(mass, lag, delays fitted on each flight; default for presets without "
                    "warm-up or inflow terms)")
    rp.add_argument("--level", default="vicon", choices=["vicon", "window"],
                    help="protocol: per-flight thrust level from the Vicon acceleration or the "
                    "first 3 s of cruise (then not scored)")
    rp.add_argument("--json", metavar="FILE", help="also write the metrics as JSON")
    rp.add_argument("--out", metavar="DIR", help="folder for the predicted-against-measured plots")
    rp.add_argument("--quiet", action="store_true", help="no progress bar")
    _ros2_args(sub)
    sw = sub.add_parser("sweep", help="fly a sweep or Monte-Carlo campaign of a scenario "
                        "(docs/sweeps.md)")
    sw.add_argument("sweep", help="sweep TOML file")
    sw.add_argument("--out", metavar="DIR", help="output directory (default runs/<sweep name>)")
    sw.add_argument("--workers", type=_workers, default=None, metavar="N",
                    help="worker processes (default: the cores)")
    sw.add_argument("--ray", nargs="?", const=True, default=None, metavar="ADDRESS",
                    help="run the tasks on Ray: a cluster's address, or a local Ray without one")
    sw.add_argument("--trajectories", nargs="?", const=1, type=_workers, default=0,
                    metavar="EVERY", help="also keep every EVERY-th logged sample of each run "
                    "under DIR/runs/ (default 1 when given)")
    sw.add_argument("--max-runs", type=_workers, default=10_000_000, metavar="N",
                    help="refuse a sweep of more runs (default 10,000,000)")
    sw.add_argument("--max-hours", type=_hours, default=24.0, metavar="H",
                    help="refuse a sweep estimated to take longer (default 24)")
    sw.add_argument("--quiet", action="store_true", help="no progress bar, no report")
    tr = sub.add_parser("train", help="train a policy on a quadsim environment (docs/rl.md)")
    tr.add_argument("env_id", metavar="ENV_ID", help="environment id, e.g. quadsim/Hover-v0")
    tr.add_argument("--algo", default="ppo", help="algorithm (ppo)")
    budget = tr.add_mutually_exclusive_group(required=True)
    budget.add_argument("--seconds", type=_positive, metavar="S", help="training wall time")
    budget.add_argument("--steps", type=_workers, metavar="N", help="environment steps")
    tr.add_argument("--seed", type=int, default=0, metavar="K", help="seed (default 0)")
    tr.add_argument("--out", metavar="DIR", help="output directory (default runs/train_<env>)")
    tr.add_argument("--envs", type=_workers, default=None, metavar="M",
                    help="environments in the batch (default: the env's, Hover 256, Recover 1024)")
    tr.add_argument("--action-level", default="rotor_speeds", metavar="LEVEL",
                    help="rotor_speeds (default), thrust_rates, thrust_attitude, pwm")
    tr.add_argument("--episode-steps", type=_workers, default=None, metavar="K",
                    help="control steps per training episode (default: the env's, Hover 200 = "
                    "2 s, Recover 300 = 3 s)")
    tr.add_argument("--threads", type=_workers, default=None, metavar="N",
                    help="PyTorch threads (default 2, at most the cores)")
    _wind_args(tr, "train in")
    tr.add_argument("--observe-integral", action="store_true",
                    help="the observation holds the position-error integral (docs/envs.md)")
    tr.add_argument("--quiet", action="store_true", help="no progress bar, no report")
    ev = sub.add_parser("eval", help="evaluate a policy file (docs/rl.md)")
    ev.add_argument("policy", metavar="POLICY", help="policy file (policy.npz)")
    ev.add_argument("--env", metavar="ENV_ID", help="environment (default: the policy's)")
    ev.add_argument("--episodes", type=_workers, default=1000, metavar="N",
                    help="episodes (default 1000)")
    ev.add_argument("--seed", type=int, default=0, metavar="K", help="seed (default 0)")
    ev.add_argument("--json", metavar="FILE", help="also write the metrics as JSON")
    _wind_args(ev, "evaluate in")
    _bench_args(sub)
    return p


def _ros2_args(sub: Any) -> None:
    """The ``quadsim ros2`` subcommand and its flags (``sub``: the subparsers)."""
    ros = sub.add_parser("ros2", help="run a scenario's drones as a ROS 2 node over DDS "
                         "(docs/ros2.md)")  # fmt: skip
    ros.add_argument("scenario", help="scenario TOML file (see docs/scenarios.md)")
    ros.add_argument("--rate", choices=("real", "max"), default="real",
                     help="real: paced at the scenario's dt; max: as fast as possible, with "
                          "/clock (default real)")  # fmt: skip
    ros.add_argument("--domain-id", type=_domain_id, default=0, metavar="N",
                     help="DDS domain (ROS_DOMAIN_ID), 0..232 (default 0)")
    ros.add_argument("--namespace", default="quadsim", metavar="NS",
                     help="ROS 2 namespace of the topics (default quadsim)")
    ros.add_argument("--network", metavar="IFACE", default=None,
                     help="put DDS on this network interface (default: loopback only; anyone "
                          "on the domain can command the drones)")  # fmt: skip
    ros.add_argument("--timeout", type=_positive, default=0.5, metavar="S",
                     help="seconds without rotor-speed or attitude commands before the "
                          "fallback (default 0.5)")  # fmt: skip
    ros.add_argument("--on-timeout", choices=("hover", "land", "cut"), default="hover",
                     help="what a drone does on a command timeout (default hover)")
    ros.add_argument("--duration", type=_positive, default=None, metavar="S",
                     help="stop after S seconds of simulated time (default: run until Ctrl-C "
                          "or SIGTERM)")  # fmt: skip
    ros.add_argument("--out", metavar="DIR",
                     help="log directory (default runs/<scenario name>_ros2)")


def _bench_args(sub: Any) -> None:
    """The ``quadsim bench`` subcommand and its flags (quadsim alone; peers: benchmarks/)."""
    b = sub.add_parser("bench", help="measure quadsim's drone-steps per second (the peers: "
                                     "python benchmarks/closed_loop.py, a source checkout)")
    b.add_argument("--quick", action="store_true", help="a short smoke run")
    b.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    b.add_argument("--closed-loop", action="store_true",
                   help="the closed loop (controller + plant; compiled, fly, the quadsim fly "
                        "command), not the plant alone")
    b.add_argument("--envs", action="store_true",
                   help="the Gymnasium vector envs (with or without --closed-loop)")
    b.add_argument("--sizes", nargs="+", metavar="N",
                   help="drone counts of --closed-loop (default 1 64 1024 16384)")
    b.add_argument("--num-envs", metavar="N", help="environments of --envs (default 1024)")
    b.add_argument("--repeats", metavar="K", help="timed runs per point (default 5)")
    b.add_argument("--no-fly", action="store_true",
                   help="skip the fly, fly-python and fly-cmd rows")


def _number_arg(cast: Any, ok: Any, expected: str, expected_in: str | None = None) -> Any:
    """An argparse type: ``cast(text)`` where ``ok(value)``, else the error "expected ...".

    ``expected`` says what a text that ``cast`` refuses should have been, ``expected_in`` (default
    the same) what a value out of range should have been.
    """

    def convert(text: str) -> Any:
        try:
            v = cast(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
        if not ok(v):
            raise argparse.ArgumentTypeError(f"expected {expected_in or expected}, got {text!r}")
        return v

    return convert


def _positive_in(unit: str) -> Any:
    """An argparse type: a positive, finite number of ``unit``."""
    return _number_arg(float, lambda v: math.isfinite(v) and v > 0, f"a number of {unit}",
                       f"a positive number of {unit}")  # fmt: skip


_positive = _positive_in("seconds")
_hours = _positive_in("hours")
_wind_speed = _number_arg(float, lambda v: math.isfinite(v) and 0 <= v <= 30,
                          "a wind speed in m/s", "a wind speed in 0..30 m/s")  # fmt: skip
_latency = _number_arg(float, lambda v: math.isfinite(v) and 0 <= v <= 0.01, "a latency in s",
                       "a latency in 0..0.01 s (at most the environments' control "
                       "period)")  # fmt: skip
_workers = _number_arg(int, lambda v: v >= 1, "a positive integer")
_domain_id = _number_arg(int, lambda v: 0 <= v <= 232, "an integer 0..232")


def _obs_noise(text: str) -> tuple[float, ...]:
    try:
        v = tuple(float(x) for x in text.split(","))
    except ValueError:
        v = ()
    if len(v) != 4 or not all(math.isfinite(x) and x >= 0 for x in v):
        raise argparse.ArgumentTypeError("expected 4 standard deviations >= 0, SIGMA_P [m],"
                                         "SIGMA_V [m/s],SIGMA_R [rad],SIGMA_W [rad/s]; got "
                                         f"{text!r}")  # fmt: skip
    return v


def _wind_args(parser: argparse.ArgumentParser, verb: str) -> None:
    """``--wind W``, ``--turbulence T``, ``--latency S``, ``--obs-noise P,V,R,W``, ``--gyro IMU``:
    the environments' disturbances (docs/envs.md)."""  # noqa: D205, D209
    parser.add_argument("--wind", type=_wind_speed, default=0.0, metavar="W",
                        help=f"{verb} a mean wind drawn in 0..W m/s per episode (default 0)")
    parser.add_argument("--turbulence", choices=("none", "light", "moderate", "severe"),
                        default="none", help=f"{verb} Dryden gusts of this severity "
                        "(default none)")
    parser.add_argument("--latency", type=_latency, default=0.0, metavar="S",
                        help=f"{verb} an action latency drawn in 0..S s per episode (default 0)")
    parser.add_argument("--obs-noise", type=_obs_noise, default=None, metavar="P,V,R,W",
                        help=f"{verb} white noise on the observed position [m], velocity [m/s], "
                        "attitude [rad] and body rates [rad/s] (standard deviations)")
    parser.add_argument("--gyro", default=None, metavar="IMU",
                        help="the body rates' noise from an IMU preset's gyro (e.g. bmi088; "
                        "replaces --obs-noise's fourth)")


def _info(preset: str, plot: str | None) -> int:
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
    for deg in (10.0, 20.0, 30.0):
        if math.radians(deg) > env.tilt_max:
            continue
        v = terminal_velocity(drone, math.radians(deg))
        beyond = v > drone.drag_speed_max
        note = " (drag model extrapolated)" if beyond else ""
        rows.append((f"terminal velocity at {deg:.0f} deg", f"{v:.2f} m/s{note}"))
    if math.isfinite(drone.drag_speed_max):
        rows.append(("drag model holds up to", f"{drone.drag_speed_max:g} m/s"))
    width = max(len(k) for k, _ in rows)
    print(f"{drone.name}")
    for k, val in rows:
        print(f"  {k:<{width}}  {val}")
    if plot is not None:
        from pathlib import Path

        from .plotting import plot_envelope

        path = Path(plot) if plot else Path("runs") / Path(drone.name).stem / "envelope.png"
        if plot and (path.is_dir() or plot.endswith(("/", os.sep))):  # a folder: the file in it
            path = path / "envelope.png"
        print(f"wrote {plot_envelope(drone, path)}")
    return 0


def _presets() -> int:
    import tomllib

    rows = []
    for name in list_presets():
        doc = tomllib.loads((presets.folder() / f"{name}.toml").read_text())
        drone = load_params(name)
        rows.append(
            (
                name,
                f"{drone.mass * 1e3:.4g} g",
                f"{doc.get('layout', '?')}, {drone.mixing_matrix.shape[1]} rotors",
                f"T/W {envelope(drone).thrust_to_weight:.2f}",
                doc.get("description", ""),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[4])
    return 0


def _fly(args: argparse.Namespace) -> int:
    from .io import format_summary_table
    from .run import damaged_warning, exit_code, failure_lines, fly_scenario

    summary = fly_scenario(
        args.scenario,
        args.out,
        csv=args.csv,
        plots=args.plots,
        animate=args.animate,
        progress=not args.quiet,
        echo=(lambda line: None) if args.quiet else None,
        rosbag=args.rosbag,
    )
    code = exit_code(summary)
    if damaged_warning(summary):
        print(damaged_warning(summary), file=sys.stderr)
    if not args.quiet:
        print(format_summary_table(summary))
        print("wrote:")
        for f in summary["files"]:
            print(f"  {f}")
    if summary.get("interrupted"):
        print(
            f"quadsim: interrupted ({summary.get('signal', 'SIGINT')}): the files hold every "
            "completed chunk",
            file=sys.stderr,
        )
    elif code == 1:
        for line in failure_lines(summary):
            print(line, file=sys.stderr)
    return code


def _recover(args: argparse.Namespace) -> int:
    from .io import format_summary_table
    from .run import damaged_warning, recover

    summary = recover(args.dir, plots=args.plots)
    if summary is None:
        print(f"quadsim: {args.dir}: nothing to recover (the run finished: its summary.json and "
              "every file it lists are there)")  # fmt: skip
        return 0
    if damaged_warning(summary):
        print(damaged_warning(summary), file=sys.stderr)
    print(format_summary_table(summary))
    print("recovered:")
    for f in summary["files"]:
        print(f"  {f}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``quadsim`` command (see the module docstring for exit codes)."""
    try:
        with raising():  # SIGTERM and SIGHUP stop a run as Ctrl-C does; put back on return
            args = _parser().parse_args(argv)
            return _dispatch(args)
    except KeyboardInterrupt as e:  # start-up, compilation, or writing the results
        signum = e.signum if isinstance(e, Interrupted) else 2
        print(f"quadsim: interrupted ({_signal_name(signum)})", file=sys.stderr)
        return 128 + signum


def _signal_name(signum: int) -> str:
    import signal

    return signal.Signals(signum).name


def _dispatch(args: argparse.Namespace) -> int:
    try:
        if args.command == "fly":
            return _fly(args)
        if args.command == "recover":
            return _recover(args)
        if args.command == "info":
            return _info(args.preset, args.plot)
        if args.command == "presets":
            return _presets()
        if args.command == "replay":
            from .sysid.replay_cli import main as replay_main

            argv = [*args.logs, "--format", args.format, "--preset", args.preset]
            argv += ["--level", args.level] + (["--strict"] if args.strict else [])
            argv += ["--quiet"] if args.quiet else []
            argv += ["--json", args.json] if args.json else []
            argv += ["--out", args.out] if args.out else []
            return replay_main(argv)
        if args.command == "ros2":
            try:
                from .ros2.run import main as ros2_main
            except ImportError as e:
                print(f"quadsim: {e} (install the extra: pip install 'quadsim[ros2]')",
                      file=sys.stderr)  # fmt: skip
                return 2
            return ros2_main(args)
        if args.command == "sweep":
            from .sweep.run import main as sweep_main

            return sweep_main(args)
        if args.command in ("train", "eval"):
            import importlib.util

            need = "stable_baselines3" if args.command == "train" else "gymnasium"
            if importlib.util.find_spec(need) is None:  # looked up, not imported: bad options
                print(f"quadsim: {args.command} needs {need} (install the extra: pip install "
                      "'quadsim[rl]')", file=sys.stderr)  # fmt: skip  (are refused in a moment)
                return 2
            if args.command == "train":
                from .rl.train import main as rl_main
            else:
                from .rl.evaluate import main as rl_main
            return rl_main(args)
        if args.command == "bench":
            from .bench_closed_loop import main as closed_loop_main
            from .bench_closed_loop import parse_options

            opts = parse_options(args.closed_loop, args.envs, args.sizes, args.num_envs,
                                 args.repeats, args.no_fly)  # fmt: skip
            if opts:
                return closed_loop_main(quick=args.quick, json_path=args.json, **opts)
            from .bench import main as bench_main

            return bench_main(quick=args.quick, json_path=args.json)
    except (ValueError, OSError) as e:  # bad input; a file the user named, a full disk
        from .io.files import report_bad_input

        return report_bad_input(e)
    except ImportError as e:
        print(f"quadsim: {e} (install the extra: pip install 'quadsim[cli]')", file=sys.stderr)
        return 2
    except MemoryError:  # what a command can estimate it refuses before it starts
        print("quadsim: out of memory: this machine has less free memory than the run needs; "
              "make it smaller (fewer drones, runs or environments)", file=sys.stderr)  # fmt: skip
        return 2
    except RuntimeError as e:  # SimulationError and friends; a compiler that fails is set-up
        from ..engines.native import CompileError

        print(f"quadsim: {e}", file=sys.stderr)
        return 2 if isinstance(e, CompileError) else 1
    except Exception as e:  # a bug: one line, not a traceback; exit 70 (EX_SOFTWARE)
        print(f"quadsim: internal error, please report it: {type(e).__name__}: {e}",
              file=sys.stderr)  # fmt: skip
        return 70
    return 2


def run() -> None:
    """The console script: :func:`main`, then exit with its code.

    The process ends with ``os._exit`` once the output is flushed: every file is closed by then,
    so the interpreter's teardown (0.1-0.3 s of collecting figures and modules) is skipped, and
    after a signal an XLA compilation cut short can no longer crash it (a segmentation fault
    instead of exit 130).
    """
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
