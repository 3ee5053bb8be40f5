"""Stop signals as the tests that send them need them.

A test run started with ``nohup`` ignores SIGHUP, one started as a background job of a shell
without job control ignores SIGINT, and a child process inherits what is ignored; quadsim leaves
an ignored signal ignored (as ``nohup`` asks). A test that sends a stop signal to a child
therefore starts it with :func:`default_signals`, and one that raises it in this process uses
the conftest fixture ``stop_signals_default``.
"""

from __future__ import annotations

import signal

STOP = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n))


def default_signals() -> None:
    """``preexec_fn`` of a child that will be sent stop signals: their default dispositions."""
    for s in STOP:
        signal.signal(s, signal.SIG_DFL)


LONG_FLIGHT = """
name = "long"
duration = 600.0
n = 2
[drone]
preset = "cf2x_L250"
[sim]
backend = "native"
[trajectory]
kind = "circle"
radius = 0.5
speed = 0.5
[output]
chunk_steps = 50
log_every = 2
part_seconds = 0  # a part per hand-over (the default closes one a second)
"""
"""A ten-minute flight that writes a log part every 50 steps: what a signal test stops."""
