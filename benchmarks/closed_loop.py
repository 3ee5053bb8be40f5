"""Closed-loop drone-steps/s of quadsim and crazyflow: ``quadsim bench --closed-loop``.

The measurement lives in :mod:`quadsim.app.bench_closed_loop` (compiled closed loop, ``fly`` with
the Python loop and with its default path, crazyflow's Mellinger state controller); this script
only forwards its arguments, e.g.::

    python benchmarks/closed_loop.py --sizes 1 64 1024 16384 [--no-fly] [--no-peers] [--quick]
"""

from __future__ import annotations

import sys

from quadsim.app.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", "--closed-loop", *sys.argv[1:]]))
