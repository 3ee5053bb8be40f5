"""What a stop signal does to a run: SIGINT, SIGTERM and SIGHUP end it and keep what it computed.

Two ways, for two kinds of loop:

* :func:`raising`: the signals raise :class:`Interrupted` (a ``KeyboardInterrupt`` with the
  signal's number), so everything that keeps a run's results on Ctrl-C does the same for a
  ``kill`` or a dropped SSH session. ``quadsim``'s ``main`` holds it for every command, the sweep
  for its tasks; the command exits ``128 + signum``.
* :func:`stop_flag`: the signals only set a flag, and a loop that looks between two steps of its
  own (a ROS 2 tick, a training iteration) ends at its next check.

Both leave an ignored signal ignored (:func:`quadsim.engines.signals.handling`: ``nohup
quadsim ...`` keeps flying when the terminal goes) and put the handlers found back afterwards.
Off the main thread, where Python delivers no signals, they install nothing.
"""

from __future__ import annotations

import contextlib
import signal
from typing import Any

from ..engines.signals import handling

__all__ = ["Interrupted", "StopFlag", "raising", "stop_flag"]


class Interrupted(KeyboardInterrupt):
    """A stop requested by a signal (SIGINT, SIGTERM, SIGHUP); ``signum`` says which."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = int(signum)


@contextlib.contextmanager
def raising() -> Any:
    """Inside the block, SIGINT, SIGTERM and SIGHUP raise :class:`Interrupted`."""

    def handler(signum: int, frame: Any) -> None:
        raise Interrupted(signum)

    with handling(handler):
        yield


class StopFlag:
    """Set by a stop signal inside :func:`stop_flag`: ``signum`` is ``None`` until one came."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def __bool__(self) -> bool:
        return self.signum is not None


@contextlib.contextmanager
def stop_flag() -> Any:
    """Inside the block, SIGINT, SIGTERM and SIGHUP set the yielded :class:`StopFlag` (the first
    one wins) instead of raising."""  # noqa: D205, D209
    flag = StopFlag()

    def handler(signum: int, frame: Any) -> None:
        if flag.signum is None:
            flag.signum = signum

    with handling(handler):
        yield flag
