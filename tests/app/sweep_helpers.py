"""Shared by the sweep tests: a base scenario, sweep files, running ``quadsim sweep``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PY = sys.executable


BASE = """
name = "sweep test"
duration = {duration}
seed = 0
[drone]
preset = "cf2x_L250"
[sim]
dt = 0.002
backend = "{backend}"
[controller]
kind = "geometric"
[trajectory]
kind = "lemniscate"
size = 0.5
period = 4.0
center = [0.0, 0.0, 1.0]
[wind]
turbulence = "light"
[sensors]
imu = "bmi088"
[output]
log_every = 5
plots = false
"""


def sweep_files(tmp: Path, axes: str, *, duration=1.0, backend="native", head="") -> Path:
    (tmp / "base.toml").write_text(BASE.format(duration=duration, backend=backend))
    sweep = tmp / "sweep.toml"
    sweep.write_text(f'base = "base.toml"\n{head}\n[axes]\n{axes}\n')
    return sweep


GRID = """
"drone.mass" = [0.029, 0.032, 0.035]
"trajectory.period" = [3.0, 5.0]
"""


def cli_sweep(args: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", "quadsim.app.cli", "sweep", *args], capture_output=True,
                          text=True, timeout=kw.pop("timeout", 300), **kw)


def results_bytes(path: Path) -> bytes:
    return (path / "results.parquet").read_bytes()


def children(pid: int, needle: str) -> list[int]:
    out = subprocess.run(["ps", "-ww", "-eo", "pid,ppid,args"], capture_output=True,
                         text=True).stdout
    rows = [line.split(None, 2) for line in out.splitlines()[1:]]
    return [int(p) for p, pp, args in rows if needle in args and (pid < 0 or int(pp) == pid)]


SLOW = '"trajectory.period" = [3.0, 4.0, 5.0]'
