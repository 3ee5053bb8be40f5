"""Stop signals: which they are, and holding them while something must not be cut in half.

A Python signal handler that raises runs between two bytecodes of whatever the main thread is
doing. Inside a C extension's module initialisation (``import jax`` loading ``xla_extension``)
an exception raised there can crash the interpreter (measured: Ctrl-C in the middle of
``import jax`` ends ``quadsim fly`` with a segmentation fault in about 1 of 20 tries), and
inside the writing of a chunk it would leave the log and the file disagreeing.
:func:`interrupt_after` holds the signal until the block is done, then raises it again.
:func:`stop_flag` is for loops that look between two steps of their own (a ROS 2 tick, a
training iteration): the three signals only set a flag, and the loop ends at its next check.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any

__all__ = ["STOP_SIGNALS", "StopFlag", "interrupt_after", "stop_flag"]

STOP_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)
"""The signals that stop a flight and keep what it computed (exit code 128 + signal)."""


@contextlib.contextmanager
def interrupt_after() -> Any:
    """Hold SIGINT, SIGTERM and SIGHUP arriving inside the block until the block is done.

    A held signal is raised again afterwards, to whatever handler was installed before. Off the
    main thread (where Python delivers no signals) the block just runs.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = {s: signal.signal(s, lambda signum, frame: caught.append(signum))
                for s in STOP_SIGNALS}  # fmt: skip
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    if caught:
        signal.raise_signal(caught[0])


class StopFlag:
    """Set by a stop signal inside :func:`stop_flag`: ``signum`` is ``None`` until one came."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def __bool__(self) -> bool:
        return self.signum is not None


@contextlib.contextmanager
def stop_flag() -> Any:
    """Inside the block, SIGINT, SIGTERM and SIGHUP set the yielded :class:`StopFlag` (the first
    one wins) instead of raising; the handlers found are put back afterwards. Off the main thread
    no handler is installed and the flag stays down."""  # noqa: D205, D209
    flag = StopFlag()
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return

    def handler(signum: int, frame: Any) -> None:
        if flag.signum is None:
            flag.signum = signum

    previous = {s: signal.signal(s, handler) for s in STOP_SIGNALS}
    try:
        yield flag
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
