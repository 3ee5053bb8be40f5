"""Closed loop and vector envs of quadsim against crazyflow 0.4.0: one run, one table.

Usage (from the repository root; crazyflow lives in ``.venv-bench``, which ``bash
benchmarks/setup_peers.sh`` makes)::

    .venv-bench/bin/python benchmarks/closed_loop.py [--envs] [--no-closed-loop]
        [--sizes N ...] [--num-envs N] [--repeats K] [--no-fly] [--no-peers] [--quick]
        [--fly-before SRC] [--json FILE]

quadsim's rows are :func:`quadsim.app.bench_closed_loop.run`, what ``quadsim bench
--closed-loop [--envs]`` measures (its docstring gives the workload and the paths ``compiled``,
``fly-python``, ``fly`` and ``fly-cmd``). crazyflow's are measured on the same workload in child
interpreters (``peers.py`` in this folder):

* closed loop: ``Sim(control=state)`` with its Mellinger cascade at 500 Hz, measured three ways
  (:func:`peers.crazyflow_closed_loop`): the per-step public API (``loop``), one jitted scan with
  the moving reference (``scan``) and one jitted ``step(T)`` with the setpoint held (``held``, no
  moving reference: an upper bound). The ratios are quadsim compiled over crazyflow's best mode
  (``ratio vs best``) and over the better of ``loop`` and ``scan`` (``vs moving ref``), and the
  ``quadsim fly`` command over crazyflow's best (``fly-cmd vs best``). When crazyflow was
  measured (not ``--quick``), quadsim compiled is measured again after it and its rate is the
  median of both passes' runs (the machine's load drifts over minutes).
* ``--envs``: crazyflow's ``DroneReachPos-v0`` (attitude actions) with first-principles dynamics
  and RK4 (the like-for-like configuration), with its default Euler integrator, and with its
  registered default ``so_rpy`` model (:func:`peers.crazyflow_env`).

``--fly-before SRC`` also times the ``quadsim fly`` command of another checkout in the same run
(``SRC``: its ``src`` folder, e.g. of ``git worktree add /tmp/before <commit>``; column
``fly-cmd-before`` and its ratio), so a change's before and after meet the same machine and load.

The table ends with issue 10's targets (closed loop >= 5x crazyflow's best at N = 1 and 64,
>= 10x at N >= 1024; ``thrust_attitude`` and ``thrust_rates`` envs >= 10x crazyflow's
like-for-like env at 1024 envs). Without crazyflow (or with ``--no-peers``), or when its child
interpreter fails, the script says so, in the table and on stderr, and prints quadsim's numbers
alone. Progress goes to stderr, the table to stdout.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import peers

from quadsim.app import bench_closed_loop as bcl

CRAZYFLOW_VERSION = "0.4.0"
"""The crazyflow release this benchmark is written for."""
CRAZYFLOW_MODES = ("loop", "scan", "held")
CRAZYFLOW_ENV_CONFIGS = ("first_principles+rk4", "first_principles", "so_rpy")
LIKE_FOR_LIKE_ENV = "first_principles+rk4"
MODES_NOTE = ("crazyflow loop: sim.state_control + sim.step() per step; scan: moving reference in "
              "one jitted lax.scan; held: step(T) with the setpoint held (no moving reference, an "
              "upper bound)")  # fmt: skip
PASSES_NOTE = ("quadsim compiled: the median of the timed runs of two passes, before and after "
               "crazyflow's")  # fmt: skip


def peer_status(with_peers: bool) -> tuple[bool, str | None]:
    """Whether to measure crazyflow, and the line saying why not (or warning about it).

    Args:
        with_peers: ``False`` for ``--no-peers``.

    Returns:
        ``(measure, note)``; ``note`` is ``None`` when crazyflow 0.4.0 is installed.
    """
    if not with_peers:
        return False, "crazyflow: skipped (--no-peers); quadsim only"
    found = peers.available().get("crazyflow")
    if found is None:
        return False, (
            f"crazyflow: not installed, quadsim only (install crazyflow=={CRAZYFLOW_VERSION} in "
            "its own virtualenv: bash benchmarks/setup_peers.sh, then run "
            ".venv-bench/bin/python benchmarks/closed_loop.py)"
        )
    if found != CRAZYFLOW_VERSION:
        return True, f"crazyflow: {found} installed; this benchmark is for {CRAZYFLOW_VERSION}"
    return True, None


def run(closed_loop: bool = True, envs: bool = False, quick: bool = False, *,
        with_peers: bool = True, echo: Callable[[str], None] = print,
        **options: Any) -> dict:  # fmt: skip
    """Measure quadsim, then crazyflow on the same workload.

    Args:
        closed_loop: Measure the closed loop.
        envs: Measure the vector environments.
        quick: A smoke run (see :func:`quadsim.app.bench_closed_loop.run`).
        with_peers: Measure crazyflow when it is installed.
        echo: Progress lines.
        **options: ``sizes``, ``num_envs``, ``repeats``, ``fly`` of
            :func:`quadsim.app.bench_closed_loop.run`.

    Returns:
        :func:`quadsim.app.bench_closed_loop.run`'s result with crazyflow's records added
        (``system`` ``"crazyflow"``, ``path`` its mode) and ``"peer": {"crazyflow": version or
        None, "note": line or None}``.
    """
    measure, note = peer_status(with_peers)
    if note:
        echo(note)
    before = options.pop("fly_before", None)
    result = bcl.run(closed_loop, envs, quick, echo=echo, **options)
    if before is not None and closed_loop:
        _fly_before(result, before, quick, echo)
    result["versions"] = bcl.versions(("crazyflow",))
    result["peer"] = {"crazyflow": result["versions"]["crazyflow"] if measure else None,
                      "note": note}  # fmt: skip
    if measure and closed_loop:
        _crazyflow_closed_loop(result, quick, echo)
    if measure and envs:
        _crazyflow_envs(result, quick, echo)
    result["load_end"] = bcl.machine()["load_avg"]
    return result


def _fly_before(result: dict, src: str, quick: bool, echo: Callable[[str], None]) -> None:
    """The ``quadsim fly`` command of the package in ``src``, as the fly-cmd rows."""
    result["settings"]["fly_before"] = src
    repeats = result["settings"]["repeats"]
    for n in result["settings"]["sizes"]:
        try:
            rec = bcl.fly_command_rate(n, repeats=min(repeats, 3) if quick else repeats, src=src)
        except (RuntimeError, OSError) as e:
            echo(f"  quadsim   fly-cmd-before: not measured ({e})")
            continue
        result["closed_loop"].append({"system": "quadsim", "path": "fly-cmd-before", "n": n,
                                      **rec})  # fmt: skip
        echo(f"  quadsim   fly-cmd-before N={n:>6d} {rec['drone_steps_per_s']:>15,.0f} "
             f"drone-steps/s ({src}, {rec['loop']} loop)")  # fmt: skip


def _load() -> str:
    load = bcl.machine()["load_avg"]
    return "?" if not load else f"{load[0]:.2f}"


def _crazyflow_closed_loop(result: dict, quick: bool, echo: Callable[[str], None]) -> None:
    s = result["settings"]
    echo(f"  crazyflow: child interpreter, N = {', '.join(map(str, s['sizes']))}, modes "
         f"{', '.join(CRAZYFLOW_MODES)} (building and compiling take ~10 s per N); "
         f"load average {_load()}")  # fmt: skip

    def show(r: dict) -> None:
        echo(f"  crazyflow {r['mode']:13s} N={r['n']:>6d} {r['drone_steps_per_s']:>15,.0f} "
             f"drone-steps/s (T = {r['steps']})")  # fmt: skip

    try:
        got = peers.crazyflow_closed_loop(s["sizes"], s["seconds_per_run"], s["repeats"],
                                          CRAZYFLOW_MODES, on_record=show)  # fmt: skip
    except (RuntimeError, OSError) as e:
        result["peer"]["note"] = f"crazyflow: closed loop not measured: {str(e).splitlines()[0]}"
        echo(result["peer"]["note"])
        return
    result["closed_loop"] += [{"system": "crazyflow", "path": r.pop("mode"), **r} for r in got]
    if got and not quick:  # bracket crazyflow in time: the machine's load drifts
        _second_pass(result, echo)


def _second_pass(result: dict, echo: Callable[[str], None]) -> None:
    """Time quadsim compiled again; its rate becomes the median of both passes' runs."""
    from quadsim.loop.closed_loop_native import compile_closed_loop

    s = result["settings"]
    drone, gains, traj = bcl.workload()
    loop = compile_closed_loop(drone, gains, traj, bcl.DT, np.float32)  # the disk cache's
    echo("  quadsim   compiled, second pass (the rate is the median of both passes' runs)")
    for rec in result["closed_loop"]:
        if (rec["system"], rec["path"]) != ("quadsim", "compiled"):
            continue
        again = bcl.compiled_rate(loop, traj, rec["n"], s["seconds_per_run"], s["repeats"])
        rec["passes"] = [rec["drone_steps_per_s"], again["drone_steps_per_s"]]
        rec["runs"] += again["runs"]
        rec["drone_steps_per_s"] = statistics.median(rec["runs"])
        echo(f"  quadsim   compiled      N={rec['n']:>6d} {again['drone_steps_per_s']:>15,.0f} "
             f"drone-steps/s (pooled {rec['drone_steps_per_s']:,.0f})")  # fmt: skip


def _crazyflow_envs(result: dict, quick: bool, echo: Callable[[str], None]) -> None:
    s = result["settings"]
    configs = (LIKE_FOR_LIKE_ENV,) if quick else CRAZYFLOW_ENV_CONFIGS

    def show(r: dict) -> None:
        echo(f"  crazyflow attitude {r['config']:21s} {r['num_envs']} envs "
             f"{r['env_steps_per_s']:>12,.0f} env-steps/s")  # fmt: skip

    try:
        got = peers.crazyflow_env(s["num_envs"], s["env_steps_per_run"], s["repeats"], configs,
                                  on_record=show)  # fmt: skip
    except (RuntimeError, OSError) as e:
        result["peer"]["note"] = f"crazyflow: env not measured: {str(e).splitlines()[0]}"
        echo(result["peer"]["note"])
        return
    for r in got:
        r["drone_steps_per_s"] = r["env_steps_per_s"] * r["substeps"]
        result["envs"].append({"system": "crazyflow", "action": "attitude", **r})


def _ratio(a: float | None, b: float | None) -> str:
    return "-" if not a or not b else f"{a / b:,.1f}x"


def _closed_loop_lines(result: dict, targets: list[tuple[str, bool]]) -> list[str]:
    """The closed-loop table with crazyflow's columns and the ratios; appends the targets."""
    recs = result["closed_loop"]
    if not recs:
        return []
    rate = {(r["system"], r["path"], r["n"]): r["drone_steps_per_s"] for r in recs}
    cols = [("quadsim", p) for p in (*bcl.PATHS, "fly-cmd-before")]
    cols += [("crazyflow", m) for m in CRAZYFLOW_MODES]
    cols = [c for c in cols if any(k[:2] == c for k in rate)]
    head = ["N", *(f"{system} {p}" for system, p in cols)]
    has_peer = any(system == "crazyflow" for system, _ in cols)
    through = any(k[1] == "fly-cmd" for k in rate)
    before = any(k[1] == "fly-cmd-before" for k in rate)
    if has_peer:
        head += ["ratio vs best", "vs moving ref"] + (["fly-cmd vs best"] if through else [])
        head += ["before vs best"] if before else []
    rows = []
    for n in result["settings"]["sizes"]:
        row = [str(n), *(bcl.format_rate(rate.get((system, p, n))) for system, p in cols)]
        if has_peer:
            peer_rates = [rate.get(("crazyflow", p, n)) for p in CRAZYFLOW_MODES]
            best = max((r for r in peer_rates if r), default=None)
            moving = max((r for r in peer_rates[:2] if r), default=None)
            ours, cmd = rate.get(("quadsim", "compiled", n)), rate.get(("quadsim", "fly-cmd", n))
            row += [_ratio(ours, best), _ratio(ours, moving)]
            row += [_ratio(cmd, best)] if through else []
            row += [_ratio(rate.get(("quadsim", "fly-cmd-before", n)), best)] if before else []
            want = 10.0 if n >= 1024 else 5.0
            if ours and best and (n in (1, 64) or n >= 1024):  # the sizes
                targets.append((f"closed loop N={n}: quadsim / crazyflow best = {ours / best:.1f}x "
                                f"(target >= {want:g}x)", ours / best >= want))  # fmt: skip
            if cmd and best and (n in (1, 64) or n >= 1024):
                targets.append((f"quadsim fly N={n} (its summary's wall_time_s) / crazyflow "
                                f"best = {cmd / best:.1f}x (target >= {want:g}x)",
                                cmd / best >= want))  # fmt: skip
        rows.append(row)
    lines = ["", bcl.CLOSED_LOOP_TITLE, *bcl.grid(head, rows)]
    if has_peer:
        lines.append(MODES_NOTE)
    if through:
        lines.append(bcl.FLY_CMD_NOTE)
    if before:
        lines.append(f"quadsim fly-cmd-before: the same command, run from "
                     f"{result['settings']['fly_before']}")  # fmt: skip
    if any("passes" in r for r in recs):
        lines.append(PASSES_NOTE)
    return lines


def _env_lines(result: dict, targets: list[tuple[str, bool]]) -> list[str]:
    """The vector-env table with crazyflow's rows and the ratios; appends the targets."""
    envs = result["envs"]
    if not envs:
        return []
    cf = {r["config"]: r["env_steps_per_s"] for r in envs if r["system"] == "crazyflow"}
    head = ["system", "action", "configuration", "envs", "env-steps/s", "drone-steps/s"]
    if cf:
        head += [f"vs cf {LIKE_FOR_LIKE_ENV}", "vs cf fastest"]
    fastest, like = max(cf.values(), default=None), cf.get(LIKE_FOR_LIKE_ENV)
    rows = []
    for r in envs:
        row = [r["system"], r["action"], r["config"], str(r["num_envs"]),
               bcl.format_rate(r["env_steps_per_s"]), bcl.format_rate(r["drone_steps_per_s"])]
        if cf:
            ours = r["env_steps_per_s"] if r["system"] == "quadsim" else None
            row += [_ratio(ours, like), _ratio(ours, fastest)]
            if (ours and like and r["action"] in ("thrust_attitude", "thrust_rates")
                    and r["num_envs"] == 1024):  # the size
                targets.append((f"env {r['action']}: quadsim / crazyflow attitude env "
                                f"({LIKE_FOR_LIKE_ENV}) = {ours / like:.1f}x, vs its fastest "
                                f"configuration {ours / fastest:.1f}x (target >= 10x)",
                                ours / like >= 10.0))  # fmt: skip
        rows.append(row)
    return ["", bcl.ENV_TITLE.format(substeps=envs[0]["substeps"]), *bcl.grid(head, rows)]


def table(result: dict) -> str:
    """The comparison as text: header, peer note, both tables with ratios, issue 10's targets.

    Args:
        result: What :func:`run` returns.

    Returns:
        The table (rates in drone-steps/s and env-steps/s, ratios as ``12.3x``).
    """
    lines = bcl.header(result)
    if result["peer"]["note"]:
        lines.append(result["peer"]["note"])
    targets: list[tuple[str, bool]] = []
    lines += _closed_loop_lines(result, targets)
    lines += _env_lines(result, targets)
    if targets:
        quick = " (--quick: indicative only)" if result["settings"]["quick"] else ""
        lines += ["", f"issue 10 targets{quick}:"]
        lines += [f"  {'met    ' if ok else 'NOT MET'}  {text}" for text, ok in targets]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Parse the flags, run, print the table (progress on stderr), optionally write JSON.

    Args:
        argv: The flags (default ``sys.argv[1:]``).

    Returns:
        The exit code: 0, or 2 for bad flags (one line on stderr).
    """
    ap = argparse.ArgumentParser(prog="closed_loop.py", description=__doc__.splitlines()[0])
    ap.add_argument("--envs", action="store_true", help="also the vector envs")
    ap.add_argument("--no-closed-loop", action="store_true", help="only the vector envs")
    ap.add_argument("--sizes", nargs="+", metavar="N",
                    help="drone counts (default 1 64 1024 16384)")
    ap.add_argument("--num-envs", metavar="N", help="environments of --envs (default 1024)")
    ap.add_argument("--repeats", metavar="K", help="timed runs per point (default 5)")
    ap.add_argument("--no-fly", action="store_true", help="skip the fly, fly-python, fly-cmd rows")
    ap.add_argument("--no-peers", action="store_true", help="skip crazyflow even when installed")
    ap.add_argument("--quick", action="store_true", help="a short smoke run (not for quoting)")
    ap.add_argument("--fly-before", metavar="SRC",
                    help="also time the quadsim fly command of the package in SRC (another "
                         "checkout's src folder) in the same run")  # fmt: skip
    ap.add_argument("--json", metavar="FILE", help="also write everything as JSON")
    args = ap.parse_args(argv)
    try:
        opts = bcl.parse_options(not args.no_closed_loop, args.envs, args.sizes, args.num_envs,
                                 args.repeats, args.no_fly, prog="closed_loop.py")  # fmt: skip
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    if not opts:
        print("closed_loop.py: --no-closed-loop needs --envs (nothing to measure)", file=sys.stderr)
        return 2
    if args.fly_before is not None:
        if not (Path(args.fly_before) / "quadsim" / "app" / "cli.py").is_file():
            print(f"closed_loop.py: --fly-before {args.fly_before}: no quadsim/app/cli.py in it "
                  "(give a checkout's src folder)", file=sys.stderr)  # fmt: skip
            return 2
        if args.no_fly or args.no_closed_loop:
            print("closed_loop.py: --fly-before needs the closed loop's fly rows", file=sys.stderr)
            return 2
        opts["fly_before"] = str(Path(args.fly_before).resolve())

    def echo(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    echo(f"benchmarks/closed_loop.py: quadsim and crazyflow{' (--quick)' if args.quick else ''}; "
         "progress on stderr")  # fmt: skip
    result = run(quick=args.quick, with_peers=not args.no_peers, echo=echo, **opts)
    print(table(result), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
