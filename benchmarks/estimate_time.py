"""Calibrate the pre-run time estimate of ``quadsim fly`` against the runner it gets.

``quadsim.app.preflight.estimate_time`` says ``steps (a + N b) + samples N c`` seconds: ``a`` per
step, ``b`` per drone-step, ``c`` per logged drone-sample (the log's columns and its Parquet
parts). This flies the real command on each backend (``native``: the compiled loop; ``jax``: the
scan; ``numpy``: the per-step loop) at a few sizes and log rates, reads each flight's
``wall_time_s`` from ``summary.json``, fits ``a``, ``b`` and ``c`` by least squares (relative
errors) and prints them beside the figures ``STEP_COST`` and ``LOG_COST`` hold, with each flight's
estimate against its measurement.

    python benchmarks/estimate_time.py [--backends native jax numpy] [--quick]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

SCENARIO = """
duration = {duration}
n = {n}
[sim]
dt = 0.002
backend = "{backend}"
[randomize]
spacing = 1.0
[trajectory]
kind = "circle"
radius = 0.5
speed = 0.5
center = [0.0, 0.0, 1.0]
[output]
log_every = {log_every}
plots = false
"""

CASES = {  # (n, duration [s], log_every): the per-step loop is slow, its flights short
    "native": [(1, 60.0, 1), (1, 60.0, 10), (64, 20.0, 1), (64, 20.0, 10), (1024, 4.0, 1),
               (1024, 4.0, 10)],
    "jax": [(1, 20.0, 1), (64, 10.0, 1), (64, 10.0, 10), (1024, 2.0, 1), (1024, 2.0, 10)],
    "numpy": [(1, 2.0, 1), (64, 2.0, 1), (64, 2.0, 10), (1024, 0.5, 1)],
}


def fly(backend: str, n: int, duration: float, log_every: int, tmp: Path) -> float:
    """``wall_time_s`` of one ``quadsim fly`` (after a first run that warms the caches)."""
    scen = tmp / f"{backend}_{n}_{log_every}.toml"
    scen.write_text(SCENARIO.format(duration=duration, n=n, backend=backend, log_every=log_every))
    out = tmp / scen.stem
    for _ in range(2):  # the first run traces and compiles (cached after)
        subprocess.run([sys.executable, "-m", "quadsim.app.cli", "fly", str(scen), "--out",
                        str(out), "--quiet", "--no-plots"], check=True)  # fmt: skip
    return float(json.loads((out / "summary.json").read_text())["wall_time_s"])


def main(argv: list[str] | None = None) -> None:
    """Fly the cases of each backend, print each estimate against its flight and the fit."""
    from quadsim.app.preflight import estimate_time

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", nargs="+", default=list(CASES))
    ap.add_argument("--quick", action="store_true", help="the first three cases of each")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        for backend in args.backends:
            rows = []
            for n, dur, every in CASES[backend][: 3 if args.quick else None]:
                steps = round(dur / 0.002)
                wall = fly(backend, n, dur, every, Path(d))
                rows.append((n, steps, every, wall))
                est = estimate_time(n, steps, backend, log_every=every)
                print(f"{backend:>6} N={n:>5} steps={steps:>6} log_every={every:>2}: "
                      f"{wall:8.3f} s flown, {est:8.3f} s estimated ({est / wall:.2f}x)")
            A = np.array([[s, s * n, s / e * n] for n, s, e, _ in rows], float)
            y = np.array([w for *_, w in rows])
            coef, *_ = np.linalg.lstsq(A / y[:, None], np.ones_like(y), rcond=None)
            print(f"{backend}: fitted a = {coef[0]:.3g} s/step, b = {coef[1]:.3g} s/drone-step,"
                  f" c = {coef[2]:.3g} s/drone-sample")


if __name__ == "__main__":
    main()
