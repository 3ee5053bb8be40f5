"""One driver for every runner: chunks, progress, signals, faults and the hand-over of records.

A flight is flown by a runner: the per-step loop (:mod:`quadsim.loop.step_runner`), the JAX scan
(:mod:`quadsim.loop.closed_loop_jax`) or the compiled C loop
(:mod:`quadsim.loop.compiled_runner`). Each knows how to fly a range of steps and what it
logged; :func:`drive` does the rest, once for all of them:

* chunks of :class:`Chunking` steps (fixed, or sized to :data:`CHUNK_SECONDS` of wall time);
* each completed chunk handed to ``on_chunk`` and the kept log inside
  :func:`~quadsim.engines.signals.interrupt_after` (:func:`hand_over`), so a stop signal finds
  it in both or in neither;
* ``progress(steps_done, steps_total)`` after each chunk;
* a ``KeyboardInterrupt`` (Ctrl-C, or a signal turned into one,
  :class:`quadsim.app.signals.Interrupted`) ends the flight with every completed chunk;
* a single drone that diverged raises :class:`~quadsim.engines.sim.SimulationError` as
  ``Simulator.step`` does (:func:`quadsim.engines.sim.diverged`);
* the Simulator is left at the last completed chunk's state however the flight ends.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from typing import Protocol

from ..engines.signals import interrupt_after
from ..engines.sim import diverged

__all__ = [
    "CHUNK_BYTES",
    "CHUNK_SECONDS",
    "FIRST_CHUNK_RATE",
    "Chunking",
    "Runner",
    "drive",
    "hand_over",
]

CHUNK_BYTES = 32 * 2**20
"""A chunk holds at most about this many bytes of log (so memory stays bounded for many drones)."""
CHUNK_SECONDS = 0.1
"""With ``chunk_steps=None`` a compiled chunk lasts about this long [s] (progress, Ctrl-C)."""
FIRST_CHUNK_RATE = 2e6
"""[drone-steps/s] the rate the first such chunk is sized for (then the measured one)."""


class Runner(Protocol):
    """What :func:`drive` needs of a loop that flies a Simulator: per chunk, :meth:`advance`
    (timed: the chunk's length follows it), then :meth:`fault`, then :meth:`records`."""  # noqa: D205, D209

    def start(self) -> None:
        """Before the first chunk (inside the driver's interrupt handling)."""

    def advance(self, k: int, steps: int, last: bool) -> None:
        """Fly steps ``k .. k + steps - 1`` of the flight (with ``last``, also compute the end
        sample at ``t = duration``); the time this takes sizes the next chunk."""  # noqa: D205, D209

    def records(self) -> dict:
        """The log chunk of the steps just flown: their samples (every ``log_every``-th step,
        and the end sample after the last chunk)."""  # noqa: D205, D209

    def fault(self) -> tuple[int, int] | None:
        """``(step, code)`` of a single drone's fault in the steps flown (step ``-1``: none), or
        ``None`` where the runner's Simulator raises by itself or has no world."""  # noqa: D205, D209

    def settle(self) -> None:
        """Leave the Simulator at the state, flags and clock of the last completed chunk."""


class Chunking:
    """A flight's chunk length [steps]: ``steps``, or timed (:data:`CHUNK_SECONDS` per chunk,
    from :data:`FIRST_CHUNK_RATE` then the rate measured), a multiple of ``log_every`` below
    ``cap``."""  # noqa: D205, D209

    def __init__(self, log_every: int, cap: int, n: int, steps: int, timed: bool) -> None:
        self.log_every, self.cap, self.n, self.timed = log_every, cap, n, timed
        self.steps = self._fit(CHUNK_SECONDS * FIRST_CHUNK_RATE / n) if timed else steps

    def _fit(self, steps: float) -> int:
        L = self.log_every
        return int(min(self.cap, max(L, L * round(steps / L))))

    def took(self, steps: int, seconds: float) -> None:
        """A chunk of ``steps`` took ``seconds``: size the next one."""
        if self.timed and seconds > 0.0:
            self.steps = self._fit(CHUNK_SECONDS * steps / seconds)


def hand_over(chunk: dict, on_chunk: Callable[[dict], None] | None, keep_log: bool,
              chunks: list[dict]) -> None:  # fmt: skip
    """Give a completed, non-empty chunk to ``on_chunk`` and to the kept log ``chunks``."""
    if not chunk:
        return
    if on_chunk is not None:
        on_chunk(chunk)
    if keep_log:
        chunks.append(chunk)


def drive(
    runner: Runner, total: int, chunking: Chunking, dt: float, on_chunk: Callable | None,
    progress: Callable | None, keep_log: bool,
) -> tuple[list[dict], int, bool, int | None]:  # fmt: skip
    """Fly ``total`` steps with ``runner``: ``(chunks kept, steps done, interrupted, signal)``.

    ``signal`` is the number of the signal that stopped the flight (``SIGINT`` for a plain
    ``KeyboardInterrupt``) or ``None``; ``dt`` [s] dates a fault.
    """
    chunks: list[dict] = []
    k = 0
    interrupted, stop_signal = False, None
    try:
        runner.start()
        while k < total:
            n_chunk = min(chunking.steps, total - k)
            t_call = time.perf_counter()
            runner.advance(k, n_chunk, k + n_chunk == total)
            chunking.took(n_chunk, time.perf_counter() - t_call)
            fault = runner.fault()
            if fault is not None and fault[0] >= 0:
                raise diverged(*fault, dt)
            chunk = runner.records()
            with interrupt_after():  # the chunk reaches the writer and the log, or neither
                k += n_chunk
                hand_over(chunk, on_chunk, keep_log, chunks)
            if progress is not None:
                progress(k, total)
    except KeyboardInterrupt as e:
        interrupted, stop_signal = True, getattr(e, "signum", int(signal.SIGINT))
    finally:
        runner.settle()
    return chunks, k, interrupted, stop_signal
