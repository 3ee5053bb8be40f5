"""What Ray costs over the local executor on one machine (issue 14's <= 20 % target).

Runs ``quadsim sweep benchmarks/sweep_10k.toml`` (10,000 runs, 20 M closed-loop drone-steps;
``--runs 40000`` for four times as many) as whole commands, timed from outside, interleaved so
machine noise falls on every executor alike:

* ``local``: the local process pool (the cores);
* ``ray-start``: ``--ray``, a local Ray that quadsim starts and stops itself;
* ``ray-running``: ``--ray 127.0.0.1:PORT`` against a Ray head this script starts once before
  (``ray start --head``, loopback, no dashboard, ``RAY_AUTH_MODE=disabled``) and stops after.

Every ``results.parquet`` is compared byte for byte with the first local one. Prints each wall
time, the medians and each executor's median over local's. ``python benchmarks/sweep_overhead.py
[--reps 5] [--runs 10000]`` (about a minute per 10,000-run repetition); results in
benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SWEEP = ROOT / "benchmarks" / "sweep_10k.toml"
PORT = 6391


def _sweep_file(tmp: Path, runs: int) -> Path:
    if runs == 10000:
        return SWEEP
    text = SWEEP.read_text().replace("samples = 10000", f"samples = {runs}")
    text = text.replace('base = "sweep/', f'base = "{SWEEP.parent}/sweep/')
    path = tmp / f"sweep_{runs}.toml"
    path.write_text(text)
    return path


def _quadsim() -> str:
    exe = Path(sys.executable).with_name("quadsim")
    return str(exe) if exe.exists() else "quadsim"


def _timed(cmd: list[str], env: dict) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> int:
    """Run the comparison; returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5, help="repetitions of each executor")
    ap.add_argument("--runs", type=int, default=10000, help="runs in the sweep")
    args = ap.parse_args()
    env = dict(os.environ, RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0")
    ray = str(Path(sys.executable).with_name("ray"))
    qs = _quadsim()
    times: dict[str, list[float]] = {"local": [], "ray-start": [], "ray-running": []}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        sweep = _sweep_file(tmp, args.runs)
        head = [ray, "start", "--head", f"--port={PORT}", "--num-cpus", str(os.cpu_count()),
                "--include-dashboard=false", "--node-ip-address=127.0.0.1"]  # fmt: skip
        subprocess.run(head, check=True, env=env, stdout=subprocess.DEVNULL)
        try:
            ref = None
            for rep in range(args.reps):
                for name, extra in (
                    ("local", []),
                    ("ray-start", ["--ray"]),
                    ("ray-running", ["--ray", f"127.0.0.1:{PORT}"]),
                ):
                    out = tmp / f"{name}_{rep}"
                    cmd = [qs, "sweep", str(sweep), "--out", str(out), "--quiet", *extra]
                    wall = _timed(cmd, env)
                    data = (out / "results.parquet").read_bytes()
                    ref = data if ref is None else ref
                    same = "identical" if data == ref else "DIFFERENT"
                    print(f"rep {rep} {name:12s} {wall:6.2f} s  results {same}", flush=True)
                    times[name].append(wall)
                    shutil.rmtree(out)
        finally:
            subprocess.run([ray, "stop", "--force"], env=env, stdout=subprocess.DEVNULL)
    base = float(np.median(times["local"]))
    print(f"\n{args.runs} runs, {os.cpu_count()} cores, median wall (over local):")
    for name, ts in times.items():
        med = float(np.median(ts))
        print(f"  {name:12s} {med:6.2f} s  ({(med / base - 1) * 100:+.0f} %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
