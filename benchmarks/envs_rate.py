"""Env-steps per second of the vectorised quadsim environments (random actions, autoreset).

Usage::

    python benchmarks/envs_rate.py [--num-envs 1024] [--steps 200] [--repeats 3]
        [--backend auto] [--dtype float64] [--task hover]
        [--levels rotor_speeds thrust_rates thrust_attitude]

For each action level: one :class:`quadsim.app.envs.QuadsimVectorEnv` of ``num_envs`` drones (one
batched simulator, 500 Hz physics, 100 Hz control: 5 physics steps per env step), ``steps``
env steps with uniformly random actions (drawn beforehand), timed ``repeats`` times; prints the
median env-steps per second (``num_envs * steps / seconds``) and physics drone-steps per second.
The measurement is :func:`quadsim.app.bench_closed_loop.env_rate`; ``quadsim bench --envs`` runs it
in float32, and ``python benchmarks/closed_loop.py --envs`` next to crazyflow's
``DroneReachPos-v0``.
"""

from __future__ import annotations

import argparse
import os
import platform


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark and print one line per action level."""
    from quadsim.app.bench_closed_loop import env_rate

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--num-envs", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--dtype", choices=("float32", "float64"), default="float64")
    ap.add_argument("--task", choices=("hover", "track"), default="hover")
    ap.add_argument("--gains", default=None, help="PID gains name or path (thrust levels)")
    ap.add_argument("--levels", nargs="+",
                    default=["rotor_speeds", "thrust_rates", "thrust_attitude"])  # fmt: skip
    args = ap.parse_args(argv)
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"num_envs={args.num_envs}, steps={args.steps}, median of {args.repeats}, "
          f"{args.dtype}")  # fmt: skip
    for level in args.levels:
        opts = {"gains": args.gains} if args.gains and level != "rotor_speeds" else {}
        r = env_rate(level, args.num_envs, args.steps, args.repeats, dtype=args.dtype,
                     task=args.task, backend=args.backend, options=opts)  # fmt: skip
        print(f"{args.task:5s} {level:16s} backend={r['backend']:6s} "
              f"{r['env_steps_per_s']:12,.0f} env-steps/s  "
              f"{r['drone_steps_per_s']:14,.0f} drone-steps/s")  # fmt: skip


if __name__ == "__main__":
    main()
