"""``quadsim bench``: drone-steps per second of quadsim's plant on every backend, one run.

Workload: the first-principles model with rotor dynamics (``cf2x_L250``), RK4 at
``dt = 1/500`` s, ``N`` drones holding a constant command, no world checks, no recording;
throughput is ``N * steps / seconds``, the median of ``repeats`` timed runs after a warm-up run
(compilation excluded). The single-drone latency is ``Simulator.step`` called from a Python loop.
Machines here are shared and noisy: compare medians and ratios from one run, not numbers across
runs.

Only quadsim is measured here. The peers (crazyflow, RotorPy) run the same workload in
``benchmarks/plant.py`` of a source checkout (after ``bash benchmarks/setup_peers.sh``), which
calls :func:`run` and adds their rows and the ratios.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ..engines.native import available
from ..engines.sim import Simulator

__all__ = [
    "PEERS_NOTE",
    "QUICK_SIZES",
    "SIZES",
    "best_rates",
    "main",
    "memory_1e6",
    "rollout_rate",
    "run",
    "step_rate",
    "table",
]

DRONE, DT = "cf2x_L250", 1 / 500
SIZES = (1, 64, 4096, 65536, 1_000_000)
"""Drone counts of a full run."""
QUICK_SIZES = (1, 4096, 65536)
"""Drone counts of a ``--quick`` run."""
PEERS_NOTE = (
    "peers: quadsim alone here; crazyflow and RotorPy are compared by python benchmarks/plant.py "
    "(this plant) and python benchmarks/closed_loop.py [--envs] (the closed loop, the vector "
    "envs) (a source checkout, after bash benchmarks/setup_peers.sh; run them with "
    ".venv-bench/bin/python)"
)
"""The line ``quadsim bench`` ends with: where the comparisons with the peers are."""


def _median_time(fn: Callable[[], Any], repeats: int) -> float:
    fn()  # warm-up: compilation, caches
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _sync(a: Any) -> None:
    np.asarray(a[..., :1])  # waits for asynchronous backends (JAX) to finish


def rollout_rate(backend: str, dtype: str, n: int, seconds: float = 0.3, repeats: int = 3) -> float:
    """Drone-steps/s of a held-command RK4 rollout of ``n`` drones on one backend.

    The number of steps is chosen from a short probe so one timed run lasts about ``seconds``.
    """
    sim = Simulator(DRONE, n=n, dt=DT, backend=backend, dtype=dtype, world=None)
    cmd = np.full((n, 4), sim.hover_rpm * 1.001)

    def go(steps: int) -> None:
        sim.reset(pos=[0.0, 0.0, 1.0])
        sim.rollout(cmd, record=False, steps=steps)
        _sync(sim.state.pos)

    least = 200 if n >= 65536 else 20  # enough steps that per-call O(N) packing stays minor
    probe = max(least, min(1000, 20_000 // n))
    t = _median_time(lambda: go(probe), 1)
    steps = int(np.clip(seconds / max(t, 1e-9) * probe, least, 1_000_000))
    if backend == "jax" and steps != probe:  # a new length recompiles: warm it up in the timing
        steps = probe * max(1, round(steps / probe))
    return n * steps / _median_time(lambda: go(steps), repeats)


def step_rate(backend: str, steps: int = 2000, repeats: int = 3) -> float:
    """``Simulator.step`` calls per second for one drone from a Python loop (float64)."""
    sim = Simulator(DRONE, n=1, dt=DT, backend=backend, dtype="float64", world=None)
    cmd = np.full((1, 4), sim.hover_rpm)
    sim.reset(pos=[0.0, 0.0, 1.0])

    def go() -> None:
        for _ in range(steps):
            sim.step(cmd)
        _sync(sim.state.pos)

    return steps / _median_time(go, repeats)


_MEMORY_SCRIPT = """
import resource, numpy as np

def peak_kb():  # VmHWM resets at exec; ru_maxrss can carry the parent's peak over on Linux
    try:
        with open("/proc/self/status") as f:
            return float(next(ln.split()[1] for ln in f if ln.startswith("VmHWM")))
    except OSError:
        return float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)

from quadsim.engines.sim import Simulator
base = peak_kb()
sim = Simulator("cf2x_L250", n=1_000_000, dt=1/500, backend="{backend}", dtype="float32",
                world=None)
cmd = np.full((1_000_000, 4), sim.hover_rpm, dtype=np.float32)
sim.rollout(cmd, record=False, steps=20)
np.asarray(sim.state.pos[:1])
print(base, peak_kb())
"""


def memory_1e6(backend: str) -> tuple[float, float]:
    """Peak resident memory [MB] of a process rolling out 10^6 float32 drones for 20 steps.

    Returns:
        ``(peak, peak - after_imports)`` in MB, measured in a fresh subprocess.
    """
    out = subprocess.run([sys.executable, "-c", _MEMORY_SCRIPT.format(backend=backend)],
                         capture_output=True, text=True, check=True, timeout=600)  # fmt: skip
    base_kb, peak_kb = (float(v) for v in out.stdout.split()[-2:])
    return peak_kb / 1024, (peak_kb - base_kb) / 1024


def _backends() -> list[str]:
    import importlib.util

    out = ["native"] if available() else []
    out += [b for b in ("jax", "numpy", "torch") if b == "numpy" or importlib.util.find_spec(b)]
    return out


def run(quick: bool = False, echo: Callable[[str], None] = print) -> dict:
    """Measure quadsim on every available backend.

    Args:
        quick: A smoke run: :data:`QUICK_SIZES`, shorter timed runs, no memory measurement.
        echo: Progress lines, one per point as it is measured.

    Returns:
        ``{"records": [...], "latency": {...}, "memory": {...}}``: records
        ``{"system", "backend", "dtype", "n", "drone_steps_per_s"}``, the single-drone
        ``Simulator.step`` rate per backend [steps/s], and per backend the ``(peak,
        beyond imports)`` resident memory [MB] of 10^6 drones.
    """
    sizes = list(QUICK_SIZES if quick else SIZES)
    seconds, repeats = (0.15, 3) if quick else (0.4, 3)
    records, latency, memory = [], {}, {}
    for backend in _backends():
        for dtype in ("float32", "float64"):
            for n in sizes:
                if backend in ("numpy", "torch") and n > (4096 if quick else 65536):
                    continue  # minutes per point; their scaling is clear from smaller N
                if quick and backend == "torch" and n > 1:
                    continue
                rate = rollout_rate(backend, dtype, n, seconds, repeats)
                records.append(dict(system="quadsim", backend=backend, dtype=dtype, n=n,
                                    drone_steps_per_s=rate))  # fmt: skip
                echo(f"  quadsim  {backend:7s} {dtype}  N={n:>8d}  {rate:14,.0f} drone-steps/s")
        latency[backend] = step_rate(backend, steps=500 if quick else 3000)
        echo(f"  quadsim  {backend:7s} Simulator.step, 1 drone: {latency[backend]:12,.0f} steps/s")
    if not quick:
        for backend in [b for b in ("native", "jax") if b in _backends()]:
            memory[backend] = memory_1e6(backend)
            echo(f"  memory   {backend:7s} 10^6 drones float32: peak {memory[backend][0]:.0f} MB")
    return {"records": records, "latency": latency, "memory": memory}


def best_rates(records: list[dict]) -> dict[tuple[str, int], float]:
    """The best rate of quadsim over its backends per ``(dtype, n)`` [drone-steps/s].

    Args:
        records: Records of :func:`run` (other systems' records are ignored).

    Returns:
        ``{(dtype, n): drone-steps/s}``.
    """
    best: dict[tuple[str, int], float] = {}
    for r in records:
        if r["system"] == "quadsim":
            key = (r["dtype"], r["n"])
            best[key] = max(best.get(key, 0.0), r["drone_steps_per_s"])
    return best


def table(result: dict) -> str:
    """The results as text: every record, the best float32 rate, latencies and memory.

    Args:
        result: What :func:`run` returns (other systems' records, if added, are listed too).

    Returns:
        The table, one line per record, then the summary lines.
    """
    recs = result["records"]
    lines = [f"{'system':10s} {'backend':8s} {'dtype':8s} {'N':>9s} {'drone-steps/s':>16s}"]
    lines += [f"{r['system']:10s} {r['backend']:8s} {r['dtype']:8s} {r['n']:>9d} "
              f"{r['drone_steps_per_s']:>16,.0f}" for r in recs]  # fmt: skip
    best = best_rates(recs)
    f32 = [v for (d, _), v in best.items() if d == "float32"]
    if f32:
        top = max(f32)
        lines.append(f"best float32: {top:,.0f} drone-steps/s (the state stays in registers "
                     "over a rollout: compute bound)")  # fmt: skip
    lat = result["latency"]
    for k, v in lat.items():
        lines.append(f"single-drone step, {k}: {v:,.0f} steps/s")
    for k, (peak, extra) in result["memory"].items():
        lines.append(f"10^6 drones float32 on {k}: peak RSS {peak:,.0f} MB ({extra:,.0f} MB "
                     f"beyond the imports)")  # fmt: skip
    return "\n".join(lines)


def main(quick: bool = False, json_path: str | None = None) -> int:
    """Run the benchmark, print the table, optionally write JSON records; returns an exit code.

    Args:
        quick: See :func:`run`.
        json_path: Also write the records to this JSON file.

    Returns:
        0.
    """
    print(f"quadsim bench{' --quick' if quick else ''}: {DRONE}, first-principles + rotor "
          f"dynamics, RK4, dt = {DT:g} s, held command")  # fmt: skip
    result = run(quick=quick, echo=lambda s: print(s, flush=True))
    print()
    print(table(result))
    if json_path:
        with open(json_path, "w") as f:
            json.dump(result["records"], f, indent=1)
        print(f"wrote {len(result['records'])} records to {json_path}")
    print(f"\n{PEERS_NOTE}")
    return 0
