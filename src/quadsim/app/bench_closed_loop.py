"""``quadsim bench --closed-loop`` and ``--envs``: quadsim's closed loop and vector envs, one run.

Workload (issue 10): Crazyflie ``cf2x_L250``, first-principles model with rotor dynamics, RK4 at
500 Hz, a position controller at 500 Hz on a moving reference (a 1 m circle at 1 m/s, 1 m up),
float32, no sensors, no wind, no recording. Rates are closed-loop drone-steps per second
(``N * steps / seconds``), the median of ``repeats`` timed runs after untimed warm-ups that
include all compilation.

* quadsim, ``compiled``: :func:`quadsim.loop.closed_loop_native.compile_closed_loop` with the
  geometric controller (reference, controller, allocation and plant in one C step), one
  :meth:`~quadsim.loop.closed_loop_native.ClosedLoop.run` call per timed run, ``record_every=0``.
* quadsim, ``fly``: :func:`quadsim.loop.flight.fly` around ``Simulator(backend="native",
  dtype="float32")``, ``keep_log=False``; ``fly-python`` forces the per-step Python loop
  (``compiled=False``: JAX-compiled float64 brain, native plant), ``fly`` is the default path
  (the compiled loop when eligible, logging every step). Chunks are timed through ``progress``;
  the first (compilation) is dropped.
* quadsim, ``fly-cmd``: the ``quadsim fly`` command itself, a process per run on a scenario of
  the same workload (:func:`fly_command_rate`: native float32, ``log_every = 50``, 4 s of flight
  for N <= 64 and 2 s above), with its durable log as users get it; the rate is ``N * steps``
  over the ``wall_time_s`` of its own ``summary.json`` (the flight, its log's parts included),
  the median of ``repeats`` runs after one warm-up run (which fills the compiled-loop cache).

``--envs``: the Gymnasium vector environments, 1024 envs, a 100 Hz agent over 500 Hz physics (5
physics steps per env step), random actions, autoreset: quadsim's ``HoverVectorEnv`` (native,
float32) at the action levels ``thrust_attitude``, ``thrust_rates`` and ``rotor_speeds``.

Only quadsim is measured here. ``benchmarks/closed_loop.py`` of a source checkout (after ``bash
benchmarks/setup_peers.sh``) runs :func:`run`, measures crazyflow 0.4.0 on the same workload
(its Mellinger state controller, its ``DroneReachPos-v0`` env) and prints the comparison with the
ratios and targets; it builds its table from :func:`header`, :func:`grid` and the titles here.
The machine is often shared: the load average is recorded at the start and the end.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from importlib import metadata
from typing import Any

import numpy as np

from ..engines.sim import Simulator
from ..loop.closed_loop_native import compile_closed_loop
from ..loop.control import control, load_gains
from ..loop.flight import fly
from ..loop.trajectories import Circle
from ..physics.params import load_params

__all__ = [
    "CLOSED_LOOP_TITLE",
    "ENV_TITLE",
    "FLY_CMD_NOTE",
    "PATHS",
    "PEERS_NOTE",
    "compiled_rate",
    "env_rate",
    "fly_command_rate",
    "fly_rate",
    "format_rate",
    "grid",
    "header",
    "machine",
    "main",
    "parse_options",
    "run",
    "table",
    "versions",
    "workload",
]

DRONE, DT = "cf2x_L250", 1 / 500
SIZES, QUICK_SIZES = (1, 64, 1024, 16384), (1, 64)
LEVELS = ("thrust_attitude", "thrust_rates", "rotor_speeds")
PATHS = ("compiled", "fly-python", "fly", "fly-cmd")
"""quadsim's closed-loop rows, in the table's column order."""
FLY_MAX_N = 1024
"""Largest N of the ``fly`` rows (the Python loop takes seconds per point beyond)."""
CLOSED_LOOP_TITLE = ("closed loop (cf2x_L250, first principles + rotor dynamics, RK4 500 Hz, "
                     "position controller 500 Hz, circle reference, float32): drone-steps/s")
ENV_TITLE = ("vector env: 100 Hz agent, {substeps} physics steps of 2 ms, random actions, "
             "autoreset")
"""Title of the env table (``.format(substeps=...)``)."""
FLY_CMD_NOTE = ("quadsim fly-cmd: the quadsim fly command, a process per run, rate from the "
                "wall_time_s of its summary.json (durable log included; log_every 50; 4 s of "
                "flight for N <= 64, 2 s above)")  # fmt: skip
PEERS_NOTE = ("peers: quadsim alone here; crazyflow is compared by python "
              "benchmarks/closed_loop.py [--envs] (a source checkout, after bash "
              "benchmarks/setup_peers.sh; run it with .venv-bench/bin/python)")
"""The line ``quadsim bench --closed-loop`` / ``--envs`` ends with."""


def workload() -> tuple[Any, Any, Any]:
    """``(drone params, geometric gains, circle trajectory)`` of the benchmark."""
    drone = load_params(DRONE)
    gains = load_gains("cf2x_L250_geometric", drone=drone, dt=DT)
    return drone, gains, Circle(radius=1.0, speed=1.0, center=(0.0, 0.0, 1.0))


def _median_runs(run: Callable[[], None], work: int, repeats: int) -> tuple[float, list[float]]:
    rates = []
    for _ in range(max(1, repeats)):
        t = time.perf_counter()
        run()
        rates.append(work / (time.perf_counter() - t))
    return statistics.median(rates), rates


def compiled_rate(loop: Any, traj: Any, n: int, seconds: float = 0.4,
                  repeats: int = 5) -> dict:  # fmt: skip
    """Drone-steps/s of the compiled closed loop of ``n`` drones starting on the reference.

    The step count comes from a 50-step warm-up so one timed run lasts about ``seconds``.

    Returns:
        ``{"drone_steps_per_s", "runs", "steps"}``.
    """
    r0 = traj(0.0)
    x = loop.initial_state(n, pos=r0.pos, vel=r0.vel)
    t = time.perf_counter()
    loop.run(x, 50, record_every=0)
    per_step = max((time.perf_counter() - t) / 50, 1e-9)
    steps = int(float(f"{max(50, min(2_000_000, seconds / per_step)):.2g}"))
    loop.run(x, steps, record_every=0)  # warm-up at the timed length
    rate, runs = _median_runs(lambda: loop.run(x, steps, record_every=0), n * steps, repeats)
    return {"drone_steps_per_s": rate, "runs": runs, "steps": steps}


def fly_rate(gains: Any, traj: Any, n: int, *, python: bool, chunk: int,
             chunks: int = 4) -> dict:  # fmt: skip
    """Drone-steps/s of :func:`quadsim.loop.flight.fly` (native float32 plant) over timed chunks.

    Args:
        gains: Geometric gains.
        traj: Reference trajectory.
        n: Drones.
        python: ``compiled=False`` (the per-step Python loop), else ``fly``'s default path.
        chunk: Steps per chunk.
        chunks: Timed chunks (one more, holding the compilation, is run and dropped).

    Returns:
        ``{"drone_steps_per_s", "runs", "steps", "loop"}`` (``loop``: the path ``fly`` reports).
    """
    sim = Simulator(DRONE, n=n, dt=DT, backend="native", dtype="float32")
    r0 = traj(0.0)
    sim.reset(pos=r0.pos, vel=r0.vel)
    stamps = [time.perf_counter()]
    kwargs = {"compiled": False} if python else {}
    res = fly(sim, traj, control, gains, duration=(chunks + 1) * chunk * DT, chunk_steps=chunk,
              keep_log=False, progress=lambda k, total: stamps.append(time.perf_counter()),
              **kwargs)  # fmt: skip
    runs = [n * chunk / d for d in np.diff(stamps)[1:]]
    return {"drone_steps_per_s": statistics.median(runs), "runs": runs, "steps": chunk,
            "loop": res.meta.get("loop", "?")}  # fmt: skip


FLY_SCENARIO = """name = "bench fly N={n}"
duration = {duration}
n = {n}
[drone]
preset = "{drone}"
[sim]
dt = {dt}
integrator = "rk4"
backend = "native"
dtype = "float32"
[controller]
kind = "geometric"
[trajectory]
kind = "circle"
radius = 1.0
speed = 1.0
center = [0.0, 0.0, 1.0]
[output]
log_every = 50
plots = false
"""
"""The scenario :func:`fly_command_rate` flies: the benchmark's workload as a user writes it."""


def fly_command_rate(n: int, repeats: int = 5, duration: float | None = None,
                     src: str | None = None) -> dict:  # fmt: skip
    """Drone-steps/s of the ``quadsim fly`` command: a process per run, timed by its summary.

    Args:
        n: Drones.
        repeats: Timed runs (after one warm-up run).
        duration: Seconds of flight (default 4 s for ``n <= 64``, else 2 s).
        src: Run the command of the package in this folder instead (put first on
            ``PYTHONPATH``; e.g. the ``src`` of a worktree of an earlier commit).

    Returns:
        ``{"drone_steps_per_s", "runs", "steps", "loop", "process_s"}``: ``process_s`` holds each
        timed run's whole process time [s] (start to exit), for what the summary does not see.
    """
    import os
    import tempfile
    from pathlib import Path

    env = None if src is None else dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(src), *filter(None, [os.environ.get("PYTHONPATH")])]))  # fmt: skip
    duration = (4.0 if n <= 64 else 2.0) if duration is None else float(duration)
    steps = round(duration / DT)
    runs, process, loop = [], [], "?"
    with tempfile.TemporaryDirectory(prefix="quadsim-bench-") as tmp:
        scen = Path(tmp) / "fly.toml"
        scen.write_text(FLY_SCENARIO.format(n=n, duration=duration, drone=DRONE, dt=DT))
        for i in range(max(1, repeats) + 1):
            out = Path(tmp) / f"run{i}"
            t = time.perf_counter()
            r = subprocess.run([sys.executable, "-m", "quadsim.app.cli", "fly", str(scen),
                                "--out", str(out), "--quiet"], capture_output=True,
                               text=True, env=env)  # fmt: skip
            wall = time.perf_counter() - t
            if r.returncode != 0:
                raise RuntimeError(f"quadsim fly exited {r.returncode}: "
                                   f"{r.stderr.strip()[-300:]}")  # fmt: skip
            summary = json.loads((out / "summary.json").read_text())
            loop = summary.get("loop", loop)
            if i:  # the first run is the warm-up
                runs.append(n * steps / summary["wall_time_s"])
                process.append(wall)
    return {"drone_steps_per_s": statistics.median(runs), "runs": runs, "steps": steps,
            "loop": loop, "process_s": process}  # fmt: skip


def env_rate(level: str, num_envs: int = 1024, steps: int = 200, repeats: int = 5, *,
             dtype: str = "float32", task: str = "hover", backend: str = "auto",
             options: dict | None = None) -> dict:  # fmt: skip
    """Env-steps/s of quadsim's vector environment with uniformly random actions (autoreset).

    One :class:`~quadsim.app.envs.HoverVectorEnv` (or ``TrackVectorEnv``) of ``num_envs`` drones,
    100 Hz agent over 500 Hz physics (5 physics steps per env step); ``steps`` env steps per
    timed run after 10 warm-up steps, the median of ``repeats`` runs.

    Returns:
        ``{"env_steps_per_s", "drone_steps_per_s", "runs", "steps", "substeps", "backend"}``.
    """
    from .envs import HoverVectorEnv, TrackVectorEnv

    cls = HoverVectorEnv if task == "hover" else TrackVectorEnv
    env = cls(num_envs=num_envs, action_level=level, backend=backend, dtype=dtype,
              action_options=options or {})  # fmt: skip
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    actions = rng.uniform(-1.0, 1.0, (steps, *env.action_space.shape)).astype(np.float32)
    for a in actions[:10]:
        env.step(a)

    def go() -> None:
        for a in actions:
            env.step(a)

    rate, runs = _median_runs(go, num_envs * steps, repeats)
    sub = env.core.substeps
    return {"env_steps_per_s": rate, "drone_steps_per_s": rate * sub, "runs": runs,
            "steps": steps, "substeps": sub, "backend": env.sim.backend}  # fmt: skip


def machine() -> dict:
    """CPU model, core counts, platform and the load average now."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            model = next(ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    return {"cpu": model, "cores": os.cpu_count(), "usable_cores": usable,
            "platform": f"{platform.system()} {platform.machine()}",
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS"), "load_avg": load}  # fmt: skip


def versions(extra: tuple[str, ...] = ()) -> dict:
    """Versions of Python and the packages in the measurement (``None``: not installed).

    Args:
        extra: More distributions to report (e.g. a peer simulator's).

    Returns:
        ``{"python": version, name: version or None, ...}``.
    """
    out = {"python": platform.python_version()}
    for name in ("quadsim", "numpy", "casadi", "jax", "gymnasium", *extra):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def _positive_ints(flag: str, values: Any, prog: str) -> list[int]:
    out = []
    for v in values if isinstance(values, list | tuple) else [values]:
        try:
            i = int(v)
        except (TypeError, ValueError):
            raise ValueError(f"{prog}: {flag} takes positive integers; got {v!r}") from None
        if i < 1:
            raise ValueError(f"{prog}: {flag} takes positive integers; got {v!r}")
        out.append(i)
    return out


def parse_options(closed_loop: bool, envs: bool, sizes: Any = None, num_envs: Any = None,
                  repeats: Any = None, no_fly: bool = False, *,
                  prog: str = "bench") -> dict:  # fmt: skip
    """Check the flags of this benchmark; raises ``ValueError`` (one line) when bad.

    Args:
        closed_loop: ``--closed-loop`` given.
        envs: ``--envs`` given.
        sizes: ``--sizes`` values (strings or integers), or ``None``.
        num_envs: ``--num-envs`` value, or ``None``.
        repeats: ``--repeats`` value, or ``None``.
        no_fly: ``--no-fly`` given.
        prog: The command named at the start of a message (``bench: --sizes ...``).

    Returns:
        Keyword arguments of :func:`run` (``sizes``, ``num_envs``, ``repeats`` may be ``None``);
        empty when neither ``closed_loop`` nor ``envs`` is set.
    """
    if not (closed_loop or envs):
        used = [f for f, v in (("--sizes", sizes), ("--num-envs", num_envs),
                               ("--repeats", repeats), ("--no-fly", no_fly)) if v]  # fmt: skip
        if used:
            raise ValueError(f"{prog}: {used[0]} needs --closed-loop or --envs")
        return {}
    if sizes and not closed_loop:
        raise ValueError(f"{prog}: --sizes needs --closed-loop")
    if num_envs is not None and not envs:
        raise ValueError(f"{prog}: --num-envs needs --envs")
    one = None if num_envs is None else _positive_ints("--num-envs", num_envs, prog)[0]
    return {
        "closed_loop": closed_loop,
        "envs": envs,
        "sizes": _positive_ints("--sizes", sizes, prog) if sizes else None,
        "num_envs": one,
        "repeats": _positive_ints("--repeats", repeats, prog)[0] if repeats is not None else None,
        "fly": not no_fly,
    }


def run(closed_loop: bool = True, envs: bool = False, quick: bool = False, *,
        sizes: list[int] | None = None, num_envs: int | None = None, repeats: int | None = None,
        fly: bool = True, echo: Callable[[str], None] = print) -> dict:  # fmt: skip
    """Measure quadsim; returns the result dict that :func:`table` prints and ``--json`` writes.

    Args:
        closed_loop: Measure the closed loop at ``sizes``.
        envs: Measure the vector environments at ``num_envs``.
        quick: A smoke run: N = 1, 64, 64 envs, short timed runs, no ``fly`` rows beyond N = 1.
        sizes: Drone counts (default :data:`SIZES`, quick :data:`QUICK_SIZES`).
        num_envs: Environments (default 1024, quick 64).
        repeats: Timed runs per point (default 5, quick 3).
        fly: Also time :func:`quadsim.loop.flight.fly` (N <= :data:`FLY_MAX_N`).
        echo: Progress lines (``main`` sends them to stderr).

    Returns:
        ``{"machine", "versions", "workload", "settings", "closed_loop", "envs", "load_end"}``:
        ``closed_loop`` and ``envs`` are lists of records (``closed_loop``: ``{"system", "path",
        "n", "drone_steps_per_s", "runs", "steps", ...}``; ``envs``: ``{"system", "action",
        "config", "num_envs", "env_steps_per_s", "drone_steps_per_s", "substeps", ...}``);
        ``settings`` holds the sizes, repeats and run lengths used.
    """
    sizes = list(sizes or (QUICK_SIZES if quick else SIZES))
    num_envs = num_envs or (64 if quick else 1024)
    repeats = repeats or (3 if quick else 5)
    seconds = 0.05 if quick else 0.4
    env_steps = 20 if quick else 200
    result: dict = {
        "machine": machine(), "versions": versions(),
        "workload": {"drone": DRONE, "model": "first_principles + rotor dynamics",
                     "integrator": "rk4", "dt": DT, "controller_hz": 1 / DT,
                     "reference": "circle r=1 m, 1 m/s, z=1 m", "dtype": "float32"},
        "settings": {"quick": quick, "sizes": sizes if closed_loop else [],
                     "num_envs": num_envs if envs else None, "repeats": repeats,
                     "seconds_per_run": seconds, "env_steps_per_run": env_steps},
        "closed_loop": [], "envs": [],
    }  # fmt: skip
    if closed_loop:
        result["closed_loop"] = _closed_loop(sizes, seconds, repeats, quick, fly, echo)
    if envs:
        result["envs"] = _envs(num_envs, env_steps, repeats, echo)
    result["load_end"] = machine()["load_avg"]
    return result


def _closed_loop(sizes: list[int], seconds: float, repeats: int, quick: bool, fly: bool,
                 echo: Callable[[str], None]) -> list[dict]:  # fmt: skip
    drone, gains, traj = workload()
    t = time.perf_counter()
    loop = compile_closed_loop(drone, gains, traj, DT, np.float32)
    echo(f"closed loop: compiled {loop.n_x} states/drone in {time.perf_counter() - t:.2f} s "
         f"({'compiled' if loop.rollout.compiled else 'from the disk cache'})")  # fmt: skip
    records = []
    echo(f"  load average {_load()}")
    for n in sizes:
        rec = {"system": "quadsim", "path": "compiled", "n": n,
               **compiled_rate(loop, traj, n, seconds, repeats)}  # fmt: skip
        records.append(rec)
        echo(f"  quadsim   compiled      N={n:>6d} {rec['drone_steps_per_s']:>15,.0f} "
             "drone-steps/s")
    if fly:
        for python in (True, False):
            for n in [n for n in sizes if n <= (1 if quick else FLY_MAX_N)]:
                chunk = max(10, min(200 if quick else 500, 50_000 // n))
                path = "fly-python" if python else "fly"
                try:
                    rec = {"system": "quadsim", "path": path, "n": n,
                           **fly_rate(gains, traj, n, python=python, chunk=chunk,
                                      chunks=3 if quick else 4)}  # fmt: skip
                except Exception as e:  # a measurement, not a test: say it and go on
                    echo(f"  quadsim   {path}: not measured ({type(e).__name__}: {e})")
                    continue
                records.append(rec)
                echo(f"  quadsim   {path:13s} N={n:>6d} {rec['drone_steps_per_s']:>15,.0f} "
                     f"drone-steps/s ({rec['loop']} loop)")  # fmt: skip
        for n in sizes:
            try:
                rec = {"system": "quadsim", "path": "fly-cmd", "n": n,
                       **fly_command_rate(n, repeats=min(repeats, 3) if quick else repeats)}
            except (RuntimeError, OSError) as e:
                echo(f"  quadsim   fly-cmd: not measured ({e})")
                continue
            records.append(rec)
            echo(f"  quadsim   fly-cmd       N={n:>6d} {rec['drone_steps_per_s']:>15,.0f} "
                 f"drone-steps/s (quadsim fly, {rec['loop']} loop, process "
                 f"{statistics.median(rec['process_s']):.2f} s)")  # fmt: skip
    return records


def _envs(num_envs: int, steps: int, repeats: int, echo: Callable[[str], None]) -> list[dict]:
    records = []
    echo(f"  vector envs: load average {_load()}")
    for level in LEVELS:
        try:
            rec = {"system": "quadsim", "action": level, "num_envs": num_envs,
                   **env_rate(level, num_envs, steps, repeats)}  # fmt: skip
        except Exception as e:  # a measurement, not a test: say it and go on
            echo(f"  quadsim   {level}: not measured ({type(e).__name__}: {e})")
            continue
        rec["config"] = f"{rec['backend']} float32"
        records.append(rec)
        echo(f"  quadsim   {level:20s} {num_envs} envs {rec['env_steps_per_s']:>12,.0f} "
             f"env-steps/s")  # fmt: skip
    return records


def _load() -> str:
    load = machine()["load_avg"]
    return "?" if not load else f"{load[0]:.2f}"


def format_rate(v: float | None) -> str:
    """A rate as the tables print it: ``12,345,678``, or ``-`` when not measured."""
    return "-" if v is None else f"{v:,.0f}"


def header(result: dict) -> list[str]:
    """The table's first lines: the machine and its load, the versions, how rates were taken.

    Args:
        result: What :func:`run` returns.

    Returns:
        Three lines of text.
    """
    m, v, s = result["machine"], result["versions"], result["settings"]
    load0 = "?" if not m["load_avg"] else f"{m['load_avg'][0]:.2f}"
    load1 = "?" if not result.get("load_end") else f"{result['load_end'][0]:.2f}"
    return [
        f"machine: {m['cpu']}, {m['cores']} cores ({m['usable_cores']} usable), {m['platform']}"
        f"; load average {load0} at the start, {load1} at the end"
        + (f"; OMP_NUM_THREADS={m['omp_num_threads']}" if m["omp_num_threads"] else ""),
        "versions: " + ", ".join(f"{k} {val or 'not installed'}" for k, val in v.items()),
        f"medians of {s['repeats']} timed runs after warm-up (compilation excluded)"
        + (" [--quick: short runs, not for quoting]" if s["quick"] else ""),
    ]


def table(result: dict) -> str:
    """The result as text: :func:`header`, the closed-loop table and the vector-env table.

    Args:
        result: What :func:`run` returns.

    Returns:
        The table (rates in drone-steps/s and env-steps/s).
    """
    lines = header(result)
    recs = [r for r in result["closed_loop"] if r["system"] == "quadsim"]
    if recs:
        rate = {(r["path"], r["n"]): r["drone_steps_per_s"] for r in recs}
        cols = [p for p in PATHS if any(k[0] == p for k in rate)]
        rows = [[str(n), *(format_rate(rate.get((p, n))) for p in cols)]
                for n in result["settings"]["sizes"]]  # fmt: skip
        lines += ["", CLOSED_LOOP_TITLE, *grid(["N", *(f"quadsim {p}" for p in cols)], rows)]
        if "fly-cmd" in cols:
            lines.append(FLY_CMD_NOTE)
    envs = [r for r in result["envs"] if r["system"] == "quadsim"]
    if envs:
        head = ["system", "action", "configuration", "envs", "env-steps/s", "drone-steps/s"]
        rows = [[r["system"], r["action"], r["config"], str(r["num_envs"]),
                 format_rate(r["env_steps_per_s"]), format_rate(r["drone_steps_per_s"])]
                for r in envs]  # fmt: skip
        lines += ["", ENV_TITLE.format(substeps=envs[0]["substeps"]), *grid(head, rows)]
    return "\n".join(lines)


def grid(head: list[str], rows: list[list[str]]) -> list[str]:
    """Columns aligned: ``system``, ``action`` and ``configuration`` left, the others right.

    Args:
        head: Column titles.
        rows: Cells, one list per row, as many as ``head``.

    Returns:
        The title line and one line per row.
    """
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    left = {"system", "action", "configuration"}

    def fmt(row: list[str]) -> str:
        return "  ".join(c.ljust(w) if h in left else c.rjust(w)
                         for c, w, h in zip(row, widths, head, strict=True))  # fmt: skip

    return [fmt(head), *(fmt(r) for r in rows)]


def main(closed_loop: bool = True, envs: bool = False, quick: bool = False,
         json_path: str | None = None, **options: Any) -> int:  # fmt: skip
    """Run, print the table on stdout (progress on stderr), optionally write JSON; exit code.

    Args:
        closed_loop: Measure the closed loop.
        envs: Measure the vector envs.
        quick: A smoke run (see :func:`run`).
        json_path: Also write the whole result to this JSON file.
        **options: More keyword arguments of :func:`run` (``sizes``, ``num_envs``, ...).

    Returns:
        0.
    """

    def echo(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    parts = " and ".join(p for p, on in (("closed loop", closed_loop), ("vector envs", envs)) if on)
    echo(f"quadsim bench: {parts}{' (--quick)' if quick else ''}; progress on stderr")
    result = run(closed_loop, envs, quick, echo=echo, **options)
    print(table(result), flush=True)
    if json_path:
        with open(json_path, "w") as f:
            json.dump(result, f, indent=1)
        print(f"wrote {json_path}")
    print(f"\n{PEERS_NOTE}")
    return 0
