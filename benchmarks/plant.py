"""quadsim's plant against crazyflow's and RotorPy's on the ``quadsim bench`` workload, one run.

Usage (from the repository root; the peers live in ``.venv-bench``, which ``bash
benchmarks/setup_peers.sh`` makes)::

    .venv-bench/bin/python benchmarks/plant.py [--quick] [--json FILE]

quadsim's rows are :func:`quadsim.app.bench.run`, what ``quadsim bench`` measures (its docstring
gives the workload: first principles with rotor dynamics, RK4 at 500 Hz, a held hover command,
``N`` drones). The peers run the same workload (``peers.py`` in this folder, whose docstrings
give each configuration):

* crazyflow's batched rollout ``Sim.step(T)``, float32, in a child interpreter
  (:func:`peers.crazyflow_rollout`; N <= 4096 with ``--quick``);
* RotorPy's single drone ``Multirotor.step``, one RK45 step per call and its default adaptive
  RK45 (:func:`peers.rotorpy_single_step`), and its PyTorch ``BatchedMultirotor``, float64
  (:func:`peers.rotorpy_batched`, 1 < N <= 4096).

The output is ``quadsim bench``'s table with the peers' rows, then the ratios: quadsim's best
backend over each peer at the same N and dtype, and quadsim's fastest single-drone step over
RotorPy's. A peer that is not installed, or whose measurement fails, is named and left out.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable

import peers

from quadsim.app import bench

SETUP = "bash benchmarks/setup_peers.sh, then .venv-bench/bin/python benchmarks/plant.py"
"""How to get the peers measured (the line a missing peer's note ends with)."""


def _crazyflow(sizes: list[int], quick: bool, echo: Callable[[str], None]) -> list[dict]:
    records = []
    for n in sizes if not quick else [n for n in sizes if n <= 4096]:
        rate = peers.crazyflow_rollout(n, steps=max(10, min(2000, 2_000_000 // n)))
        records.append(dict(system="crazyflow", backend="jax", dtype="float32", n=n,
                            drone_steps_per_s=rate))  # fmt: skip
        echo(f"  crazyflow jax    float32  N={n:>8d}  {rate:14,.0f} drone-steps/s")
    return records


def _rotorpy(sizes: list[int], quick: bool, latency: dict,
             echo: Callable[[str], None]) -> list[dict]:  # fmt: skip
    latency["rotorpy"] = peers.rotorpy_single_step(steps=200 if quick else 1000)
    echo(f"  rotorpy  Multirotor.step, 1 drone, one RK45 step: {latency['rotorpy']:12,.0f} /s")
    latency["rotorpy-adaptive"] = peers.rotorpy_single_step(steps=100 if quick else 300,
                                                            adaptive=True)  # fmt: skip
    echo(f"  rotorpy  Multirotor.step, default adaptive RK45: "
         f"{latency['rotorpy-adaptive']:12,.0f} /s")  # fmt: skip
    records = []
    for n in [n for n in sizes if 1 < n <= 4096]:
        rate = peers.rotorpy_batched(n, steps=max(5, min(500, 200_000 // n)))
        if rate:
            records.append(dict(system="rotorpy", backend="torch", dtype="float64", n=n,
                                drone_steps_per_s=rate))  # fmt: skip
            echo(f"  rotorpy  torch   float64  N={n:>8d}  {rate:14,.0f} drone-steps/s")
    return records


def measure_peers(result: dict, quick: bool, echo: Callable[[str], None]) -> list[str]:
    """Add the peers' records and single-drone rates to ``result`` (of :func:`bench.run`).

    Args:
        result: quadsim's result; its ``records`` and ``latency`` are extended in place.
        quick: The sizes and run lengths of a ``--quick`` run.
        echo: Progress lines.

    Returns:
        One line per peer not measured (not installed, or its measurement failed).
    """
    sizes = list(bench.QUICK_SIZES if quick else bench.SIZES)
    found, notes = peers.available(), []
    for name in ("crazyflow", "rotorpy"):
        if found.get(name) is None:
            notes.append(f"{name}: not installed, not measured ({SETUP})")
            continue
        try:
            if name == "crazyflow":
                result["records"] += _crazyflow(sizes, quick, echo)
            else:
                result["records"] += _rotorpy(sizes, quick, result["latency"], echo)
        except (ImportError, RuntimeError, OSError) as e:  # a measurement: say it and go on
            notes.append(f"{name}: not measured ({type(e).__name__}: {str(e).splitlines()[0]})")
    for line in notes:
        echo(f"  {line}")
    return notes


def ratios(result: dict) -> list[str]:
    """Ratios of quadsim to each peer: best backend at the same N and dtype; single-drone step.

    Args:
        result: :func:`bench.run`'s result with the peers' records and latencies added.

    Returns:
        Lines ``quadsim / crazyflow at N=4096 float32: 30.0x``, ...
    """
    best, lines = bench.best_rates(result["records"]), []
    for r in result["records"]:
        if r["system"] != "quadsim" and (r["dtype"], r["n"]) in best:
            ratio = best[(r["dtype"], r["n"])] / r["drone_steps_per_s"]
            lines.append(f"quadsim / {r['system']} at N={r['n']} {r['dtype']}: {ratio:,.1f}x")
    lat = result["latency"]
    ours = max((v for k, v in lat.items() if not k.startswith("rotorpy")), default=0.0)
    for k in ("rotorpy", "rotorpy-adaptive"):
        if k in lat:
            lines.append(f"quadsim / {k} single-drone step: {ours / lat[k]:,.0f}x")
    return lines


def main(argv: list[str] | None = None) -> int:
    """Measure quadsim and the peers, print the table and the ratios, optionally write JSON.

    Args:
        argv: The flags (default ``sys.argv[1:]``).

    Returns:
        The exit code, 0.
    """
    ap = argparse.ArgumentParser(prog="plant.py", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a short smoke run (not for quoting)")
    ap.add_argument("--json", metavar="FILE", help="also write the records as JSON")
    args = ap.parse_args(argv)
    print(f"benchmarks/plant.py{' --quick' if args.quick else ''}: {bench.DRONE}, first-principles "
          f"+ rotor dynamics, RK4, dt = {bench.DT:g} s, held command; quadsim, crazyflow, RotorPy")
    echo = lambda s: print(s, flush=True)  # noqa: E731
    result = bench.run(quick=args.quick, echo=echo)
    notes = measure_peers(result, args.quick, echo)
    print()
    print("\n".join([*notes, bench.table(result), *ratios(result)]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result["records"], f, indent=1)
        print(f"wrote {len(result['records'])} records to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
