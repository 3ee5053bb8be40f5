"""Holding the stop signals while something must not be cut in half.

A Python signal handler that raises runs between two bytecodes of whatever the main thread is
doing. Inside a C extension's module initialisation (``import jax`` loading ``xla_extension``)
an exception raised there can crash the interpreter (measured: Ctrl-C in the middle of
``import jax`` ends ``quadsim fly`` with a segmentation fault in about 1 of 20 tries), and
inside the writing of a chunk it would leave the log and the file disagreeing.
:func:`interrupt_after` holds the signal until the block is done, then raises it again.

A signal the process was started with ignored (``SIG_IGN``: ``nohup`` ignores SIGHUP, a shell
without job control starts a background job with SIGINT ignored) stays ignored: every handler
quadsim installs is for :func:`catchable` signals only (what turns a signal into a stop lives in
:mod:`quadsim.app.signals`).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any

__all__ = ["STOP_SIGNALS", "catchable", "handling", "interrupt_after"]

STOP_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)
"""The signals that stop a flight and keep what it computed (exit code 128 + signal)."""


def catchable() -> tuple[int, ...]:
    """The :data:`STOP_SIGNALS` not ignored now (``SIG_IGN`` is left alone: what ``nohup`` or a
    background job asked for). Main thread only, as ``signal.signal``."""  # noqa: D205, D209
    return tuple(s for s in STOP_SIGNALS if signal.getsignal(s) is not signal.SIG_IGN)


@contextlib.contextmanager
def handling(handler: Any) -> Any:
    """``handler`` for the :func:`catchable` stop signals inside the block, the handlers found
    put back afterwards; off the main thread (where Python delivers no signals) nothing."""  # noqa: D205, D209
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, handler) for s in catchable()}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


@contextlib.contextmanager
def interrupt_after() -> Any:
    """Hold SIGINT, SIGTERM and SIGHUP arriving inside the block until the block is done.

    A held signal is raised again afterwards, to whatever handler was installed before. Off the
    main thread (where Python delivers no signals) the block just runs; an ignored signal stays
    ignored.
    """
    caught: list[int] = []
    with handling(lambda signum, frame: caught.append(signum)):
        yield
    if caught:
        signal.raise_signal(caught[0])
