"""``quadsim bench``: drone-steps per second of quadsim and its peers, measured in one run.

Workload (the same for every system): the first-principles model with rotor dynamics
(``cf2x_L250``), RK4 at ``dt = 1/500`` s, ``N`` drones holding a constant command, no world
checks, no recording; throughput is ``N * steps / seconds``, the median of ``repeats`` timed runs
after a warm-up run (compilation excluded). The single-drone latency is ``Simulator.step`` called
from a Python loop. Peers (crazyflow, RotorPy) are measured in the same process when importable
(``benchmarks/setup_peers.sh``). Machines here are shared and noisy: compare medians and ratios
from one run, not numbers across runs.
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

__all__ = ["main", "memory_1e6", "rollout_rate", "run", "step_rate"]

DRONE, DT = "cf2x_L250", 1 / 500


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
    from ..engines.sim import Simulator

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
    from ..engines.sim import Simulator

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

    from ..engines.native import available

    out = ["native"] if available() else []
    out += [b for b in ("jax", "numpy", "torch") if b == "numpy" or importlib.util.find_spec(b)]
    return out


def run(quick: bool = False, echo: Callable[[str], None] = print) -> dict:
    """Measure everything; returns ``{"records": [...], "latency": {...}, "memory": {...}}``."""
    sizes = [1, 4096, 65536] if quick else [1, 64, 4096, 65536, 1_000_000]
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
    records += _peers(sizes, quick, latency, echo)
    if not quick:
        for backend in [b for b in ("native", "jax") if b in _backends()]:
            memory[backend] = memory_1e6(backend)
            echo(f"  memory   {backend:7s} 10^6 drones float32: peak {memory[backend][0]:.0f} MB")
    return {"records": records, "latency": latency, "memory": memory}


def _peers(sizes: list[int], quick: bool, latency: dict, echo: Callable[[str], None]) -> list:
    try:
        from . import bench_peers
    except ImportError:
        return []
    found = bench_peers.available()
    records = []
    if found.get("crazyflow"):
        for n in sizes if not quick else [n for n in sizes if n <= 4096]:
            rate = bench_peers.crazyflow_rollout(n, steps=max(10, min(2000, 2_000_000 // n)))
            records.append(dict(system="crazyflow", backend="jax", dtype="float32", n=n,
                                drone_steps_per_s=rate))  # fmt: skip
            echo(f"  crazyflow jax    float32  N={n:>8d}  {rate:14,.0f} drone-steps/s")
    if found.get("rotorpy"):
        latency["rotorpy"] = bench_peers.rotorpy_single_step(steps=200 if quick else 1000)
        echo(f"  rotorpy  Multirotor.step, 1 drone, one RK45 step: {latency['rotorpy']:12,.0f} /s")
        latency["rotorpy-adaptive"] = bench_peers.rotorpy_single_step(
            steps=100 if quick else 300, adaptive=True)  # fmt: skip
        echo(f"  rotorpy  Multirotor.step, default adaptive RK45: "
             f"{latency['rotorpy-adaptive']:12,.0f} /s")  # fmt: skip
        for n in [n for n in sizes if 1 < n <= 4096]:
            rate = bench_peers.rotorpy_batched(n, steps=max(5, min(500, 200_000 // n)))
            if rate:
                records.append(dict(system="rotorpy", backend="torch", dtype="float64", n=n,
                                    drone_steps_per_s=rate))  # fmt: skip
                echo(f"  rotorpy  torch   float64  N={n:>8d}  {rate:14,.0f} drone-steps/s")
    return records


def table(result: dict) -> str:
    """The results as a text table with ratios to the peers and the bandwidth bound."""
    recs = result["records"]
    lines = [f"{'system':10s} {'backend':8s} {'dtype':8s} {'N':>9s} {'drone-steps/s':>16s}"]
    lines += [f"{r['system']:10s} {r['backend']:8s} {r['dtype']:8s} {r['n']:>9d} "
              f"{r['drone_steps_per_s']:>16,.0f}" for r in recs]  # fmt: skip
    best = {}
    for r in recs:
        if r["system"] == "quadsim":
            key = (r["dtype"], r["n"])
            best[key] = max(best.get(key, 0.0), r["drone_steps_per_s"])
    for r in recs:
        if r["system"] != "quadsim" and (r["dtype"], r["n"]) in best:
            ratio = best[(r["dtype"], r["n"])] / r["drone_steps_per_s"]
            lines.append(f"quadsim / {r['system']} at N={r['n']} {r['dtype']}: {ratio:,.1f}x")
    f32 = [v for (d, _), v in best.items() if d == "float32"]
    if f32:
        top = max(f32)
        lines.append(f"best float32: {top:,.0f} drone-steps/s (the state stays in registers "
                     "over a rollout: compute bound)")  # fmt: skip
    lat = result["latency"]
    for k, v in lat.items():
        lines.append(f"single-drone step, {k}: {v:,.0f} steps/s")
    ours = max((v for k, v in lat.items() if not k.startswith("rotorpy")), default=0.0)
    for k in ("rotorpy", "rotorpy-adaptive"):
        if k in lat:
            lines.append(f"quadsim / {k} single-drone step: {ours / lat[k]:,.0f}x")
    for k, (peak, extra) in result["memory"].items():
        lines.append(f"10^6 drones float32 on {k}: peak RSS {peak:,.0f} MB ({extra:,.0f} MB "
                     f"beyond the imports)")  # fmt: skip
    return "\n".join(lines)


def main(quick: bool = False, json_path: str | None = None) -> int:
    """Run the benchmark, print the table, optionally write JSON records; returns an exit code."""
    print(f"quadsim bench{' --quick' if quick else ''}: {DRONE}, first-principles + rotor "
          f"dynamics, RK4, dt = {DT:g} s, held command")  # fmt: skip
    result = run(quick=quick, echo=lambda s: print(s, flush=True))
    print()
    print(table(result))
    if json_path:
        with open(json_path, "w") as f:
            json.dump(result["records"], f, indent=1)
        print(f"wrote {len(result['records'])} records to {json_path}")
    return 0
