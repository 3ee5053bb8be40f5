"""Peak memory of long, wide ``quadsim fly`` runs logged at every step (issue 9 §1).

    python benchmarks/long_flight_memory.py            # 256 drones x 20 s, 1024 drones x 60 s
    python benchmarks/long_flight_memory.py --quick    # 256 drones x 20 s only

Each run is a separate ``quadsim fly`` process (native backend, circle, BMI088 IMU, no plots);
its peak resident memory is read from ``getrusage(RUSAGE_CHILDREN)`` of a fresh wrapper process,
its log size from the Parquet file. The log streams to disk chunk by chunk, so the peak should
not grow with the flight's length.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PEAK = """
import resource, subprocess, sys
subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
"""


def run(n: int, duration: float, root: Path) -> dict:
    """Fly ``n`` drones for ``duration`` s; return peak RSS, wall time and log sizes."""
    scen = root / f"n{n}_{duration:g}s.toml"
    scen.write_text(
        f"duration = {duration}\nn = {n}\n[sim]\nbackend = 'native'\n[trajectory]\n"
        "kind = 'circle'\n[sensors]\nimu = 'bmi088'\n[output]\nplots = false\n"
    )
    out = root / scen.stem
    cmd = [sys.executable, "-m", "quadsim.app.cli", "fly", str(scen), "--out", str(out), "--quiet"]
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", PEAK, *cmd], capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(r.stderr)
    import pyarrow.parquet as pq

    meta = pq.read_metadata(out / "trajectory.parquet")
    raw = sum(
        meta.row_group(i).column(j).total_uncompressed_size
        for i in range(meta.num_row_groups)
        for j in range(meta.num_columns)
    )
    return {
        "drones": n,
        "flight_s": duration,
        "rows": meta.num_rows,
        "log_uncompressed_GB": raw / 1e9,
        "parquet_GB": (out / "trajectory.parquet").stat().st_size / 1e9,
        "peak_rss_GB": int(r.stdout.split()[-1]) / 2**30,
        "wall_s": time.perf_counter() - t0,
    }


def main() -> None:
    """Run the flights and print one line each."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="only 256 drones x 20 s")
    args = ap.parse_args()
    cases = [(256, 20.0)] + ([] if args.quick else [(1024, 60.0)])
    with tempfile.TemporaryDirectory() as tmp:
        for n, dur in cases:
            res = run(n, dur, Path(tmp))
            print("  ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}"
                            for k, v in res.items()), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
