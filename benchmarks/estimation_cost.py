"""What the error-state EKF costs inside the compiled closed loop (issue 11's cost target).

Usage::

    python benchmarks/estimation_cost.py [--n 1024] [--steps 2000] [--repeats 5]
        [--dtype float64] [--latency 0.01]

One compiled closed loop (:func:`quadsim.loop.closed_loop_native.compile_for_simulator`: cf2x, first
principles with rotor dynamics, RK4 at 500 Hz, the geometric controller on a figure eight, the
BMI088 IMU and motion capture at 100 Hz read in the step) with the true state fed back, and one
with :class:`quadsim.loop.estimation.estimators.EkfEstimator` in the estimator slot (without and
with its NEES diagnostic, which needs the truth); each is timed over ``steps`` steps of ``n`` drones
without recording (compilation excluded), the median of ``repeats`` runs, alternating. Prints
drone-steps per second of both and the ratio.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time


def main(argv: list[str] | None = None) -> None:
    """Run the measurement and print one line per loop and the ratio."""
    import numpy as np

    from quadsim.engines.sim import Simulator
    from quadsim.loop.brain import Sensors, loop_periods
    from quadsim.loop.closed_loop_native import compile_for_simulator
    from quadsim.loop.control import control, load_gains
    from quadsim.loop.estimation.estimators import EkfEstimator
    from quadsim.loop.trajectories import Lemniscate
    from quadsim.physics import sensors

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--dtype", choices=("float32", "float64"), default="float64")
    ap.add_argument("--latency", type=float, default=0.01, help="motion-capture latency [s]")
    args = ap.parse_args(argv)
    sim = Simulator("cf2x_L250", n=args.n, dt=1 / 500, backend="native", dtype=args.dtype)
    traj = Lemniscate(size=1.0, period=8.0, center=(0.0, 0.0, 1.0))
    r0 = traj(0.0)
    sim.reset(pos=np.asarray(r0.pos), vel=r0.vel)
    gains = load_gains("cf2x_L250_geometric", drone=sim.drone, dt=sim.dt)
    imu = sensors.load_imu("bmi088")
    mocap = sensors.MocapParams(pos_std=1e-3, att_std=math.radians(0.5), latency=args.latency,
                                rate=100.0)  # fmt: skip
    periods = loop_periods(sim.dt, gains, Sensors(imu, mocap))
    loops = {}
    g = sim.drone.gravity_vec
    for name, est in (("truth", None),
                      ("ekf", EkfEstimator(imu, mocap, g, sim.dt, periods, nees=False)),
                      ("ekf+nees", EkfEstimator(imu, mocap, g, sim.dt, periods, nees=True))):
        loop = compile_for_simulator(sim, control, gains, traj, sens=Sensors(imu, mocap),
                                     periods=periods, estimator=est)  # fmt: skip
        x0 = loop.initial_state(args.n, pos=sim.state.pos, quat=sim.state.quat,
                                vel=sim.state.vel, ang_vel=sim.state.ang_vel)  # fmt: skip
        loop.run(x0, 10, record_every=0)  # warm-up
        loops[name] = (loop, x0, [])
    for _ in range(args.repeats):
        for loop, x0, times in loops.values():
            t0 = time.perf_counter()
            loop.run(x0, args.steps, record_every=0)
            times.append(time.perf_counter() - t0)
    rate = {name: args.n * args.steps / statistics.median(t) for name, (_, _, t) in loops.items()}
    for name, r in rate.items():
        print(f"{name:6s} n={args.n} {args.dtype} latency {args.latency * 1e3:g} ms: "
              f"{r:14,.0f} closed-loop drone-steps/s")  # fmt: skip
    print(f"cost of the EKF: {rate['truth'] / rate['ekf']:.2f}x the loop without it "
          f"(target <= 2x); with its NEES diagnostic against the truth: "
          f"{rate['truth'] / rate['ekf+nees']:.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
