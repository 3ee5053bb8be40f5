"""Env-steps per second of the vectorised quadsim environments (random actions, autoreset).

Usage::

    python benchmarks/envs_rate.py [--num-envs 1024] [--steps 200] [--repeats 3]
        [--backend auto] [--task hover] [--levels rotor_speeds thrust_rates thrust_attitude]

For each action level: one :class:`quadsim.envs.QuadsimVectorEnv` of ``num_envs`` drones (one
batched simulator, 500 Hz physics, 100 Hz control: 5 physics steps per env step), ``steps``
env steps with uniformly random actions (drawn beforehand), timed ``repeats`` times; prints the
median env-steps per second (``num_envs * steps / seconds``) and physics drone-steps per second.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import numpy as np


def measure(task: str, level: str, num_envs: int, steps: int, repeats: int, backend: str,
            options: dict) -> tuple[float, object]:  # fmt: skip
    """Median env-steps per second over ``repeats`` timed runs, and the environment."""
    from quadsim.envs import HoverVectorEnv, TrackVectorEnv

    cls = HoverVectorEnv if task == "hover" else TrackVectorEnv
    env = cls(num_envs=num_envs, action_level=level, backend=backend, action_options=options)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    actions = rng.uniform(-1.0, 1.0, (steps, *env.action_space.shape)).astype(np.float32)
    for a in actions[:10]:  # warm-up (buffers, caches)
        env.step(a)
    rates = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for a in actions:
            env.step(a)
        rates.append(num_envs * steps / (time.perf_counter() - t0))
    return statistics.median(rates), env


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark and print one line per action level."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--num-envs", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--task", choices=("hover", "track"), default="hover")
    ap.add_argument("--gains", default=None, help="PID gains name or path (thrust levels)")
    ap.add_argument("--levels", nargs="+",
                    default=["rotor_speeds", "thrust_rates", "thrust_attitude"])  # fmt: skip
    args = ap.parse_args(argv)
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"num_envs={args.num_envs}, steps={args.steps}, median of {args.repeats}")  # fmt: skip
    for level in args.levels:
        opts = {"gains": args.gains} if args.gains and level != "rotor_speeds" else {}
        rate, env = measure(args.task, level, args.num_envs, args.steps, args.repeats,
                            args.backend, opts)  # fmt: skip
        physics = rate * env.core.substeps
        print(f"{args.task:5s} {level:16s} backend={env.sim.backend:6s} "
              f"{rate:12,.0f} env-steps/s  {physics:14,.0f} drone-steps/s")  # fmt: skip


if __name__ == "__main__":
    main()
