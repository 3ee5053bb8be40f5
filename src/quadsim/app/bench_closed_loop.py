"""``quadsim bench --closed-loop``: the closed loop of quadsim against crazyflow 0.4.0, one run.

Workload (issue 10): Crazyflie ``cf2x_L250``, first-principles model with rotor dynamics, RK4 at
500 Hz, a position controller at 500 Hz on a moving reference (a 1 m circle at 1 m/s, 1 m up),
float32, no sensors, no wind, no recording. Rates are closed-loop drone-steps per second
(``N * steps / seconds``), the median of ``repeats`` timed runs after untimed warm-ups that
include all compilation.

* quadsim, ``compiled``: :func:`quadsim.loop.closed_loop.compile_closed_loop` with the geometric
  controller (reference, controller, allocation and plant in one C step), one
  :meth:`~quadsim.loop.closed_loop.ClosedLoop.run` call per timed run, ``record_every=0``.
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
* crazyflow: ``Sim(control=state)`` with its Mellinger cascade at 500 Hz, measured three ways
  (:func:`quadsim.app.bench_peers.crazyflow_closed_loop`): the per-step public API (``loop``), one
  jitted scan with the moving reference (``scan``) and one jitted ``step(T)`` with the setpoint
  held (``held``, no moving reference: an upper bound). The ratio uses crazyflow's best.

``--envs``: the Gymnasium vector environments, 1024 envs, a 100 Hz agent over 500 Hz physics (5
physics steps per env step), random actions, autoreset: quadsim's ``HoverVectorEnv`` (native,
float32) at the action levels ``thrust_attitude``, ``thrust_rates`` and ``rotor_speeds``, and
crazyflow's ``DroneReachPos-v0`` (attitude actions) with first-principles dynamics and RK4 (the
like-for-like configuration), with its default Euler integrator, and with its registered default
``so_rpy`` model (:func:`quadsim.app.bench_peers.crazyflow_env`).

crazyflow runs in child interpreters of the same virtualenv (``benchmarks/setup_peers.sh``); when
it is not installed the command says so and measures quadsim alone. The machine is often shared:
the load average is recorded at the start and the end; compare ratios from one run.
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

__all__ = [
    "compiled_rate",
    "env_rate",
    "fly_command_rate",
    "fly_rate",
    "machine",
    "main",
    "parse_options",
    "run",
    "table",
    "workload",
]

DRONE, DT = "cf2x_L250", 1 / 500
SIZES, QUICK_SIZES = (1, 64, 1024, 16384), (1, 64)
LEVELS = ("thrust_attitude", "thrust_rates", "rotor_speeds")
CRAZYFLOW_ENV_CONFIGS = ("first_principles+rk4", "first_principles", "so_rpy")
LIKE_FOR_LIKE_ENV = "first_principles+rk4"
CRAZYFLOW_MODES = ("loop", "scan", "held")
CRAZYFLOW_VERSION = "0.4.0"
FLY_MAX_N = 1024
"""Largest N of the ``fly`` rows (the Python loop takes seconds per point beyond)."""


def workload() -> tuple[Any, Any, Any]:
    """``(drone params, geometric gains, circle trajectory)`` of the benchmark."""
    from ..loop.control import load_gains
    from ..loop.trajectories import Circle
    from ..physics.params import load_params

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
    from ..engines.sim import Simulator
    from ..loop.control import control
    from ..loop.flight import fly

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


def fly_command_rate(n: int, repeats: int = 5, duration: float | None = None) -> dict:
    """Drone-steps/s of the ``quadsim fly`` command: a process per run, timed by its summary.

    Args:
        n: Drones.
        repeats: Timed runs (after one warm-up run).
        duration: Seconds of flight (default 4 s for ``n <= 64``, else 2 s).

    Returns:
        ``{"drone_steps_per_s", "runs", "steps", "loop", "process_s"}``: ``process_s`` holds each
        timed run's whole process time [s] (start to exit), for what the summary does not see.
    """
    import tempfile
    from pathlib import Path

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
                               text=True)  # fmt: skip
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


def versions() -> dict:
    """Versions of Python and the packages in the measurement (``None``: not installed)."""
    out = {"python": platform.python_version()}
    for name in ("quadsim", "numpy", "casadi", "jax", "gymnasium", "crazyflow"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def _positive_ints(flag: str, values: Any) -> list[int]:
    out = []
    for v in values if isinstance(values, list | tuple) else [values]:
        try:
            i = int(v)
        except (TypeError, ValueError):
            raise ValueError(f"bench: {flag} takes positive integers; got {v!r}") from None
        if i < 1:
            raise ValueError(f"bench: {flag} takes positive integers; got {v!r}")
        out.append(i)
    return out


def parse_options(closed_loop: bool, envs: bool, sizes: Any = None, num_envs: Any = None,
                  repeats: Any = None, no_peers: bool = False,
                  no_fly: bool = False) -> dict:  # fmt: skip
    """Check the ``bench`` flags of this benchmark; raises ``ValueError`` (one line) when bad.

    Returns:
        Keyword arguments of :func:`run` (``sizes``, ``num_envs``, ``repeats`` may be ``None``).
    """
    if not (closed_loop or envs):
        used = [f for f, v in (("--sizes", sizes), ("--num-envs", num_envs),
                               ("--repeats", repeats), ("--no-peers", no_peers),
                               ("--no-fly", no_fly)) if v]  # fmt: skip
        if used:
            raise ValueError(f"bench: {used[0]} needs --closed-loop or --envs")
        return {}
    if sizes and not closed_loop:
        raise ValueError("bench: --sizes needs --closed-loop")
    if num_envs is not None and not envs:
        raise ValueError("bench: --num-envs needs --envs")
    return {
        "closed_loop": closed_loop,
        "envs": envs,
        "sizes": _positive_ints("--sizes", sizes) if sizes else None,
        "num_envs": _positive_ints("--num-envs", num_envs)[0] if num_envs is not None else None,
        "repeats": _positive_ints("--repeats", repeats)[0] if repeats is not None else None,
        "peers": not no_peers,
        "fly": not no_fly,
    }


def _peer_status(peers: bool) -> tuple[bool, str | None]:
    """Whether to measure crazyflow, and the line saying why not (or warning about it)."""
    if not peers:
        return False, "crazyflow: skipped (--no-peers); quadsim only"
    from .bench_peers import available

    found = available().get("crazyflow")
    if found is None:
        return False, (
            f"crazyflow: not installed, quadsim only (install crazyflow=={CRAZYFLOW_VERSION} in "
            "its own virtualenv: bash benchmarks/setup_peers.sh, then run .venv-bench/bin/quadsim)"
        )
    if found != CRAZYFLOW_VERSION:
        return True, f"crazyflow: {found} installed; this benchmark is for {CRAZYFLOW_VERSION}"
    return True, None


def run(closed_loop: bool = True, envs: bool = False, quick: bool = False, *,
        sizes: list[int] | None = None, num_envs: int | None = None, repeats: int | None = None,
        peers: bool = True, fly: bool = True,
        echo: Callable[[str], None] = print) -> dict:  # fmt: skip
    """Measure; returns the result dict that :func:`table` prints and ``--json`` writes.

    Args:
        closed_loop: Measure the closed loop at ``sizes``.
        envs: Measure the vector environments at ``num_envs``.
        quick: A smoke run: N = 1, 64, 64 envs, short timed runs, no ``fly`` rows beyond N = 1.
        sizes: Drone counts (default :data:`SIZES`, quick :data:`QUICK_SIZES`).
        num_envs: Environments (default 1024, quick 64).
        repeats: Timed runs per point (default 5, quick 3).
        peers: Measure crazyflow when it is installed.
        fly: Also time :func:`quadsim.loop.flight.fly` (N <= :data:`FLY_MAX_N`).
        echo: Progress lines (``main`` sends them to stderr).

    Returns:
        ``{"machine", "versions", "workload", "settings", "peer", "closed_loop", "envs",
        "load_end"}``: ``closed_loop`` and ``envs`` are lists of records.
    """
    sizes = list(sizes or (QUICK_SIZES if quick else SIZES))
    num_envs = num_envs or (64 if quick else 1024)
    repeats = repeats or (3 if quick else 5)
    seconds = 0.05 if quick else 0.4
    env_steps = 20 if quick else 200
    measure_peer, peer_note = _peer_status(peers)
    if peer_note:
        echo(peer_note)
    result: dict = {
        "machine": machine(), "versions": versions(),
        "workload": {"drone": DRONE, "model": "first_principles + rotor dynamics",
                     "integrator": "rk4", "dt": DT, "controller_hz": 1 / DT,
                     "reference": "circle r=1 m, 1 m/s, z=1 m", "dtype": "float32"},
        "settings": {"quick": quick, "sizes": sizes if closed_loop else [],
                     "num_envs": num_envs if envs else None, "repeats": repeats,
                     "seconds_per_run": seconds, "env_steps_per_run": env_steps},
        "peer": {"crazyflow": versions()["crazyflow"] if measure_peer else None,
                 "note": peer_note},
        "closed_loop": [], "envs": [],
    }  # fmt: skip
    if closed_loop:
        result["closed_loop"] = _closed_loop(sizes, seconds, repeats, quick, fly, measure_peer,
                                             result["peer"], echo)  # fmt: skip
    if envs:
        result["envs"] = _envs(num_envs, env_steps, repeats, quick, measure_peer, result["peer"],
                               echo)  # fmt: skip
    result["load_end"] = machine()["load_avg"]
    return result


def _closed_loop(
    sizes: list[int], seconds: float, repeats: int, quick: bool, fly: bool, measure_peer: bool,
    peer: dict, echo: Callable[[str], None],
) -> list[dict]:  # fmt: skip
    from ..loop.closed_loop import compile_closed_loop

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
    if measure_peer:
        from .bench_peers import crazyflow_closed_loop

        echo(f"  crazyflow: child interpreter, N = {', '.join(map(str, sizes))}, modes "
             f"{', '.join(CRAZYFLOW_MODES)} (building and compiling take ~10 s per N); "
             f"load average {_load()}")  # fmt: skip

        def show(r: dict) -> None:
            echo(f"  crazyflow {r['mode']:13s} N={r['n']:>6d} {r['drone_steps_per_s']:>15,.0f} "
                 f"drone-steps/s (T = {r['steps']})")  # fmt: skip

        try:
            got = crazyflow_closed_loop(sizes, seconds, repeats, CRAZYFLOW_MODES, on_record=show)
        except (RuntimeError, OSError) as e:
            peer["note"] = f"crazyflow: closed loop not measured: {str(e).splitlines()[0]}"
            echo(peer["note"])
            got = []
        records += [{"system": "crazyflow", "path": r.pop("mode"), **r} for r in got]
        if got and not quick:  # bracket crazyflow in time: the machine's load drifts
            echo("  quadsim   compiled, second pass (the rate is the median of both passes' runs)")
            for rec in [r for r in records if r["path"] == "compiled"]:
                again = compiled_rate(loop, traj, rec["n"], seconds, repeats)
                rec["passes"] = [rec["drone_steps_per_s"], again["drone_steps_per_s"]]
                rec["runs"] += again["runs"]
                rec["drone_steps_per_s"] = statistics.median(rec["runs"])
                echo(f"  quadsim   compiled      N={rec['n']:>6d} "
                     f"{again['drone_steps_per_s']:>15,.0f} drone-steps/s (pooled "
                     f"{rec['drone_steps_per_s']:,.0f})")  # fmt: skip
    return records


def _envs(num_envs: int, steps: int, repeats: int, quick: bool, measure_peer: bool, peer: dict,
          echo: Callable[[str], None]) -> list[dict]:  # fmt: skip
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
    if measure_peer:
        from .bench_peers import crazyflow_env

        configs = (LIKE_FOR_LIKE_ENV,) if quick else CRAZYFLOW_ENV_CONFIGS

        def show(r: dict) -> None:
            echo(f"  crazyflow attitude {r['config']:21s} {r['num_envs']} envs "
                 f"{r['env_steps_per_s']:>12,.0f} env-steps/s")  # fmt: skip

        try:
            got = crazyflow_env(num_envs, steps, repeats, configs, on_record=show)
        except (RuntimeError, OSError) as e:
            peer["note"] = f"crazyflow: env not measured: {str(e).splitlines()[0]}"
            echo(peer["note"])
            got = []
        for r in got:
            r["drone_steps_per_s"] = r["env_steps_per_s"] * r["substeps"]
            records.append({"system": "crazyflow", "action": "attitude", **r})
    return records


def _load() -> str:
    load = machine()["load_avg"]
    return "?" if not load else f"{load[0]:.2f}"


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:,.0f}"


def _ratio(a: float | None, b: float | None) -> str:
    return "-" if not a or not b else f"{a / b:,.1f}x"


def table(result: dict) -> str:
    """The result as text: header (machine, versions), the two tables, ratios and the targets."""
    m, v, s = result["machine"], result["versions"], result["settings"]
    load0 = "?" if not m["load_avg"] else f"{m['load_avg'][0]:.2f}"
    load1 = "?" if not result.get("load_end") else f"{result['load_end'][0]:.2f}"
    lines = [
        f"machine: {m['cpu']}, {m['cores']} cores ({m['usable_cores']} usable), {m['platform']}"
        f"; load average {load0} at the start, {load1} at the end"
        + (f"; OMP_NUM_THREADS={m['omp_num_threads']}" if m["omp_num_threads"] else ""),
        "versions: " + ", ".join(f"{k} {val or 'not installed'}" for k, val in v.items()),
        f"medians of {s['repeats']} timed runs after warm-up (compilation excluded)"
        + (" [--quick: short runs, not for quoting]" if s["quick"] else ""),
    ]
    if result["peer"]["note"]:
        lines.append(result["peer"]["note"])
    targets = []
    recs = result["closed_loop"]
    if recs:
        rate = {(r["system"], r["path"], r["n"]): r["drone_steps_per_s"] for r in recs}
        cols = [("quadsim", "compiled"), ("quadsim", "fly-python"), ("quadsim", "fly"),
                ("quadsim", "fly-cmd"), ("crazyflow", "loop"), ("crazyflow", "scan"),
                ("crazyflow", "held")]  # fmt: skip
        cols = [c for c in cols if any(k[:2] == c for k in rate)]
        head = ["N", *(f"{sys_} {p}" for sys_, p in cols)]
        has_peer = any(sys_ == "crazyflow" for sys_, _ in cols)
        through = any(k[1] == "fly-cmd" for k in rate)
        if has_peer:
            head += ["ratio vs best", "vs moving ref"] + (["fly-cmd vs best"] if through else [])
        rows = []
        for n in s["sizes"]:
            row = [str(n), *(_fmt(rate.get((sys_, p, n))) for sys_, p in cols)]
            ours = rate.get(("quadsim", "compiled", n))
            if has_peer:
                peer_rates = [rate.get(("crazyflow", p, n)) for p in CRAZYFLOW_MODES]
                best = max((r for r in peer_rates if r), default=None)
                moving = max((r for r in peer_rates[:2] if r), default=None)
                cmd = rate.get(("quadsim", "fly-cmd", n))
                row += [_ratio(ours, best), _ratio(ours, moving)]
                row += [_ratio(cmd, best)] if through else []
                if ours and best and (n in (1, 64) or n >= 1024):  # the sizes
                    want = 10.0 if n >= 1024 else 5.0
                    targets.append((f"closed loop N={n}: quadsim / crazyflow best = "
                                    f"{ours / best:.1f}x (target >= {want:g}x)",
                                    ours / best >= want))  # fmt: skip
                    if cmd:
                        targets.append((f"quadsim fly N={n} (its summary's wall_time_s) / "
                                        f"crazyflow best = {cmd / best:.1f}x (target >= "
                                        f"{want:g}x)", cmd / best >= want))  # fmt: skip
            rows.append(row)
        lines += ["", "closed loop (cf2x_L250, first principles + rotor dynamics, RK4 500 Hz, "
                  "position controller 500 Hz, circle reference, float32): drone-steps/s"]
        lines += _grid(head, rows)
        if has_peer:
            lines.append("crazyflow loop: sim.state_control + sim.step() per step; scan: moving "
                         "reference in one jitted lax.scan; held: step(T) with the setpoint held "
                         "(no moving reference, an upper bound)")  # fmt: skip
        if through:
            lines.append("quadsim fly-cmd: the quadsim fly command, a process per run, rate from "
                         "the wall_time_s of its summary.json (durable log included; log_every "
                         "50; 4 s of flight for N <= 64, 2 s above)")  # fmt: skip
        if any("passes" in r for r in recs):
            lines.append("quadsim compiled: the median of the timed runs of two passes, before "
                         "and after crazyflow's")  # fmt: skip
    envs = result["envs"]
    if envs:
        cf = {r["config"]: r["env_steps_per_s"] for r in envs if r["system"] == "crazyflow"}
        head = ["system", "action", "configuration", "envs", "env-steps/s", "drone-steps/s"]
        if cf:
            head += [f"vs cf {LIKE_FOR_LIKE_ENV}", "vs cf fastest"]
        rows = []
        fastest = max(cf.values(), default=None)
        for r in envs:
            row = [r["system"], r["action"], r["config"], str(r["num_envs"]),
                   _fmt(r["env_steps_per_s"]), _fmt(r["drone_steps_per_s"])]  # fmt: skip
            if cf:
                ours = r["env_steps_per_s"] if r["system"] == "quadsim" else None
                row += [_ratio(ours, cf.get(LIKE_FOR_LIKE_ENV)), _ratio(ours, fastest)]
                like = cf.get(LIKE_FOR_LIKE_ENV)
                if (ours and like and r["action"] in ("thrust_attitude", "thrust_rates")
                        and r["num_envs"] == 1024):  # the size
                    targets.append((f"env {r['action']}: quadsim / crazyflow attitude env "
                                    f"({LIKE_FOR_LIKE_ENV}) = {ours / like:.1f}x, vs its fastest "
                                    f"configuration {ours / fastest:.1f}x (target >= 10x)",
                                    ours / like >= 10.0))  # fmt: skip
            rows.append(row)
        lines += ["", f"vector env: 100 Hz agent, {envs[0]['substeps']} physics steps of 2 ms, "
                      "random actions, autoreset"]  # fmt: skip
        lines += _grid(head, rows)
    if targets:
        quick = " (--quick: indicative only)" if s["quick"] else ""
        lines += ["", f"issue 10 targets{quick}:"]
        lines += [f"  {'met    ' if ok else 'NOT MET'}  {text}" for text, ok in targets]
    return "\n".join(lines)


def _grid(head: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    left = {"system", "action", "configuration"}

    def fmt(row: list[str]) -> str:
        return "  ".join(c.ljust(w) if h in left else c.rjust(w)
                         for c, w, h in zip(row, widths, head, strict=True))  # fmt: skip

    return [fmt(head), *(fmt(r) for r in rows)]


def main(closed_loop: bool = True, envs: bool = False, quick: bool = False,
         json_path: str | None = None, **options: Any) -> int:  # fmt: skip
    """Run, print the table on stdout (progress on stderr), optionally write JSON; exit code."""

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
    return 0
