"""Closed-loop drone-steps/s: the compiled loop against today's ``fly`` loop, in one run.

Workload (issue 10): cf2x_L250, first-principles model with rotor dynamics, RK4 at 500 Hz, the
geometric controller at 500 Hz on a 1 m circle at 1 m/s, float32, no sensors, no wind.

* compiled: :func:`quadsim.closed_loop.compile_closed_loop`, one ``run`` call per measurement
  (no recording), median of 3 (compilation reported separately, first build or disk cache);
* fly: :func:`quadsim.flight.fly` (``keep_log=False``, no ``on_chunk``, default ``jit``: the
  JAX-compiled float64 brain when JAX is installed) around ``Simulator(backend="native",
  dtype="float32")``; chunks are timed through ``progress``, the first (JIT compilation) is
  dropped and the median of the next 3 is reported.

Run: ``python benchmarks/closed_loop.py [--sizes 1 64 1024 16384] [--seconds 0.5]``.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np


def _compiled_rate(loop, traj, n: int, seconds: float) -> float:
    r0 = traj(0.0)
    x = loop.initial_state(n, pos=r0.pos, vel=r0.vel)
    t0 = time.perf_counter()
    loop.run(x, 50, record_every=0)  # warm-up, and a first timing to size the measurement
    per_step = max((time.perf_counter() - t0) / 50, 1e-9)
    steps = max(50, int(seconds / per_step))
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        loop.run(x, steps, record_every=0)
        times.append(time.perf_counter() - t0)
    return n * steps / float(np.median(times))


def _fly_rate(gains, traj, n: int, chunk: int) -> float:
    from quadsim.control import control
    from quadsim.flight import fly
    from quadsim.sim import Simulator

    sim = Simulator("cf2x_L250", n=n, dt=1 / 500, backend="native", dtype="float32")
    r0 = traj(0.0)
    sim.reset(pos=r0.pos, vel=r0.vel)
    stamps = [time.perf_counter()]
    fly(sim, traj, control, gains, duration=4 * chunk / 500, chunk_steps=chunk, keep_log=False,
        progress=lambda k, total: stamps.append(time.perf_counter()))  # fmt: skip
    chunks = np.diff(stamps)[1:]  # the first chunk holds the JIT compilation
    return n * chunk / float(np.median(chunks))


def main() -> None:
    """Print the table (markdown)."""
    from quadsim.closed_loop import compile_closed_loop
    from quadsim.control import load_gains
    from quadsim.params import load_params
    from quadsim.trajectories import Circle

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1, 64, 1024, 16384])
    ap.add_argument("--seconds", type=float, default=0.5, help="target time of one measurement")
    ap.add_argument("--no-fly", action="store_true", help="skip today's fly loop")
    args = ap.parse_args()

    drone = load_params("cf2x_L250")
    gains = load_gains("cf2x_L250_geometric", drone=drone, dt=1 / 500)
    traj = Circle(radius=1.0, speed=1.0, center=(0.0, 0.0, 1.0))
    t0 = time.perf_counter()
    loop = compile_closed_loop(drone, gains, traj, 1 / 500, np.float32)
    build = time.perf_counter() - t0
    print(f"compiled loop: {loop.n_x} states/drone, built in {build:.2f} s "
          f"({'compiled' if loop.rollout.compiled else 'from cache'})")  # fmt: skip
    print("\n| drones | compiled closed loop | fly (native plant) | speed-up |")
    print("| ---: | ---: | ---: | ---: |")
    for n in args.sizes:
        rate = _compiled_rate(loop, traj, n, args.seconds)
        fly_rate = math.nan
        if not args.no_fly:
            chunk = max(5, min(100, int(20000 / n)))
            fly_rate = _fly_rate(gains, traj, n, chunk)
        print(f"| {n} | {rate:,.0f} | {fly_rate:,.0f} | {rate / fly_rate:,.0f}x |", flush=True)


if __name__ == "__main__":
    main()
