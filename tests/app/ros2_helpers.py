"""``quadsim ros2`` as a real process, for the tests that run it (each on a DDS domain and a
namespace of its own, on the loopback, so tests running side by side do not hear each other)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from signal_helpers import child_command


def start_node(tmp: Path, *args: str, domain: int, ns: str) -> tuple[subprocess.Popen, Path]:
    """Start ``quadsim ros2 *args`` logging into ``tmp/run`` and wait for its start-up line (its
    DDS endpoints exist); returns the process and the file of its stderr. Stop signals have
    their default dispositions in it (:func:`signal_helpers.child_command`)."""
    err = tmp / "node.err"
    proc = subprocess.Popen(
        child_command([sys.executable, "-m", "quadsim.app.cli", "ros2", *args, "--domain-id",
                       str(domain), "--namespace", ns, "--out", str(tmp / "run")]),
        stdout=subprocess.DEVNULL,
        stderr=open(err, "w"),
        cwd=tmp,
    )  # fmt: skip
    end = time.monotonic() + 120
    while "Ctrl-C stops" not in err.read_text():
        if proc.poll() is not None or time.monotonic() > end:
            proc.kill()
            raise AssertionError(f"the node did not start: {err.read_text()}")
        time.sleep(0.05)
    return proc, err


def run_log(tmp: Path) -> dict:
    """The log of the node started by :func:`start_node` in ``tmp`` (``tmp/run``)."""
    from quadsim.app.io import read_log

    return read_log(tmp / "run" / "trajectory.parquet")[0]
