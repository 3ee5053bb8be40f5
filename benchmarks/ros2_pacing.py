"""Real-time pacing of ``quadsim ros2`` (issue 13's targets), with a subscriber process.

For each case the node runs seed 001's scenario (``examples/seed001_f450_hover.toml``) paced in
real time for ``--seconds`` (default 20) on its own DDS domain on the loopback, while
``tests/app/ros2_probe.py`` subscribes to every drone's odometry and IMU for the middle of the run;
the table gives the tick lateness (start of a tick after its due time) and the time a tick's
work takes (commands, the loop's step, publishing), both from the node's ``summary.json``, and
the rate at which the subscriber received odometry (the slowest drone):

* 1 drone at 200 Hz (the seed's rate);
* 16 drones at 200 Hz (a 4 x 4 formation, 1 m apart);
* 1 drone at 1 kHz (``sim.dt = 0.001``; the PID controller still at its 200 Hz).

Target: p99 lateness <= 1 ms in every case. ``python benchmarks/ros2_pacing.py [--seconds S]``
(about 1.5 minutes); results in benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SEED001 = ROOT / "examples" / "seed001_f450_hover.toml"

CASES = (
    ("1 drone, 200 Hz", 1, None),
    ("16 drones, 200 Hz", 16, None),
    ("1 drone, 1 kHz", 1, 0.001),
)


def _scenario(tmp: Path, n: int, dt: float | None) -> Path:
    text = SEED001.read_text()
    if dt is not None:
        text = text.replace("dt = 0.005 ", f"dt = {dt} ")
    if n > 1:
        text = text.replace("seed = 1\n", f"seed = 1\nn = {n}\n")
        text += "\n[randomize]\nspacing = 1.0\n"
    path = tmp / f"pacing_{n}_{dt}.toml"
    path.write_text(text)
    return path


def run_case(tmp: Path, n: int, dt: float | None, seconds: float, domain: int) -> dict:
    """One case: the node's ``ros2`` summary and the subscriber's slowest odometry rate."""
    scen = _scenario(tmp, n, dt)
    out = tmp / f"run_{domain}"
    err = tmp / f"node_{domain}.err"
    with open(err, "w") as fh:
        node = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "quadsim.app.cli",
                "ros2",
                str(scen),
                "--duration",
                str(seconds),
                "--domain-id",
                str(domain),
                "--out",
                str(out),
            ],
            stderr=fh,
            stdout=subprocess.DEVNULL,
        )
        while "Ctrl-C stops" not in err.read_text():
            if node.poll() is not None:
                raise SystemExit(err.read_text())
            time.sleep(0.05)
        probe_out = tmp / f"probe_{domain}.json"
        listen = max(2.0, seconds - 8.0)
        probe = subprocess.run(
            [
                sys.executable,
                str(ROOT / "tests" / "ros2_probe.py"),
                str(probe_out),
                str(listen),
                "--drones",
                str(n),
                "--domain-id",
                str(domain),
            ],
            capture_output=True,
            text=True,
        )
        node.wait()
    if probe.returncode != 0 or node.returncode != 0:
        raise SystemExit(probe.stderr + err.read_text())
    rep = json.loads((out / "summary.json").read_text())["ros2"]
    got = json.loads(probe_out.read_text())
    rates = []
    for key, rows in got.items():
        if key.endswith("odom"):
            a = np.asarray(rows)
            rates.append((len(a) - 1) / (a[-1, 0] - a[0, 0]) if len(a) > 1 else 0.0)
    rep["received_odom_hz_min"] = float(min(rates))
    return rep


def main() -> int:
    """Run the cases and print the table; 0."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0, help="simulated = wall seconds per case")
    ap.add_argument("--json", type=Path, default=None, help="also write the results as JSON")
    a = ap.parse_args()
    print(
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}; {a.seconds:g} s per case"
    )
    print(
        f"{'case':20s} {'ticks':>6s} {'Hz':>7s} {'late p50':>9s} {'late p99':>9s} "
        f"{'late max':>9s} {'work p50':>9s} {'work p99':>9s} {'recv Hz':>8s}"
    )
    results = {}
    with tempfile.TemporaryDirectory() as d:
        for j, (name, n, dt) in enumerate(CASES):
            r = run_case(Path(d), n, dt, a.seconds, 60 + j)
            lat, work = r["lateness_ms"], r["tick_work_ms"]
            print(
                f"{name:20s} {r['ticks']:6d} {r['achieved_hz']:7.1f} {lat['median']:9.3f} "
                f"{lat['p99']:9.3f} {lat['max']:9.3f} {work['median']:9.3f} "
                f"{work['p99']:9.3f} {r['received_odom_hz_min']:8.1f}"
            )
            results[name] = r
    print("lateness and work in ms; recv Hz: the subscriber's slowest drone")
    if a.json:
        a.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
