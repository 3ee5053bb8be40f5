"""Draw several figures at once, each in a forked child, on a machine with more than one core.

Matplotlib draws on one core, and the figures of a run are independent: :func:`draw_all` shares
them out between the usable cores by their cost (each to the least loaded, the costliest first),
draws one share itself and forks a child for each other share (after it has imported
matplotlib, so no child imports it again). A child draws its figures into PNGs in memory and
sends the bytes back through a pipe; the parent writes every file. So only the parent writes
into the run's folder, and the files are those it would have drawn alone, byte for byte. One
child per core, not per figure: a forked Python process copies every page its reference counts
touch, which costs more than a small figure.

No child outlives its parent: on Linux each asks the kernel for SIGKILL when the parent dies;
an exception in the parent (a signal's ``KeyboardInterrupt``, an error) kills and reaps every
child before it propagates; and a child whose parent is gone fails at its first write into the
pipe, having written nothing anywhere. A child that fails for any reason leaves its figure to
the parent, which draws it in-process, so its error is raised as it would be without children.

Figures are drawn in-process, one after another, where forking is not safe or not useful: a
platform other than Linux, one usable core, a single figure, or a process that has loaded JAX
PyTorch, CycloneDDS or Ray (their threads do not survive a fork).

While the figures are drawn, every object that existed before is frozen out of the garbage
collector (:func:`gc.freeze`, as Python's documentation advises before a fork): a figure makes
tens of thousands of objects, and each collection it triggers would otherwise walk the whole
program's (the simulator, NumPy, PyArrow) too. The four flight figures take about a quarter less
time so; the collector still frees the figures' own cycles.
"""

from __future__ import annotations

import ctypes
import gc
import io
import os
import selectors
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

__all__ = ["Job", "cores", "draw_all", "shares"]



class Job(NamedTuple):
    """One figure to draw: ``fn(*args, target, **kwargs)`` writes it as a PNG to ``target``
    (``path``, or a binary file).

    Attributes:
        fn: The plot function.
        args: Its positional arguments before the target.
        kwargs: Its keyword arguments.
        path: The ``.png`` file to write.
        cost: Its drawing time relative to the others (what shares them out).
    """  # noqa: D205

    fn: Callable[..., Any]
    args: tuple
    kwargs: dict
    path: Path
    cost: float = 1.0

    def draw(self, target: Path | BinaryIO) -> Any:
        """Draw the figure into ``target``; returns what the plot function returns."""
        return self.fn(*self.args, target, **self.kwargs)

_THREADED = ("jax", "torch", "cyclonedds", "ray")
"""Modules whose threads (thread pools, network or DDS threads) make a fork unsafe."""


def cores(n_jobs: int) -> int:
    """How many processes :func:`draw_all` draws ``n_jobs`` figures with (1: no fork; the
    module docstring's rules)."""  # noqa: D205, D209
    if n_jobs < 2 or not sys.platform.startswith("linux"):
        return 1
    if any(name in sys.modules for name in _THREADED):
        return 1
    return min(n_jobs, len(os.sched_getaffinity(0)))


def shares(jobs: Sequence[Job], k: int) -> list[list[int]]:
    """The indices of ``jobs`` cut into ``k`` shares of about equal cost: the costliest job
    first, each to the share with the least cost so far (ties: the first)."""  # noqa: D205, D209
    out: list[list[int]] = [[] for _ in range(k)]
    load = [0.0] * k
    for i in sorted(range(len(jobs)), key=lambda i: -jobs[i].cost):
        s = load.index(min(load))
        out[s].append(i)
        load[s] += jobs[i].cost
    return out


def _die_with_parent(parent: int) -> None:
    """Ask Linux for SIGKILL when the parent exits (``prctl(PR_SET_PDEATHSIG)``); exit now if
    the parent is already gone."""  # noqa: D205, D209
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        pass  # the broken pipe ends the child instead
    if os.getppid() != parent:
        os._exit(1)


def _child(jobs: list[Job], wfd: int, parent: int) -> None:
    """Draw ``jobs`` into memory and write their PNGs to ``wfd``, each after its length (8
    bytes, little-endian); never returns."""  # noqa: D205, D209
    code = 1
    try:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        _die_with_parent(parent)
        pngs = []
        for job in jobs:  # all drawn first: the parent reads only once its own share is drawn,
            buf = io.BytesIO()  # and a pipe holds 64 KiB
            job.draw(buf)
            pngs.append(buf.getvalue())
        with os.fdopen(wfd, "wb") as w:
            for png in pngs:
                w.write(len(png).to_bytes(8, "little"))
                w.write(png)
        code = 0
    except BaseException:  # the parent draws this figure again, and raises its error
        code = 1
    finally:
        os._exit(code)  # no atexit handler or buffer of the parent's runs twice


def _kill(children: dict) -> None:
    """SIGKILL and reap the children ``{pid: (index, read end)}`` still running; close their
    pipes."""  # noqa: D205, D209
    for pid, (_, rfd) in children.items():
        try:
            os.close(rfd)
        except OSError:
            pass
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for pid in children:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass


def _collect(children: dict) -> dict:
    """Read every child's pipe to its end and reap it: ``{job index: png bytes}`` of the
    figures the children drew whole (a failed child's later figures are missing)."""  # noqa: D205, D209
    sel = selectors.DefaultSelector()
    data: dict = {}
    for pid, (_, rfd) in children.items():
        sel.register(rfd, selectors.EVENT_READ, pid)
        data[pid] = []
    while sel.get_map():
        for key, _ in sel.select():
            chunk = os.read(key.fd, 1 << 20)
            if chunk:
                data[key.data].append(chunk)
                continue
            sel.unregister(key.fd)
            os.close(key.fd)
    sel.close()
    out = {}
    for pid, (share, _) in children.items():
        os.waitpid(pid, 0)
        blob, at = b"".join(data[pid]), 0
        for i in share:
            size = int.from_bytes(blob[at:at + 8], "little")
            if len(blob) < at + 8 or len(blob) < at + 8 + size:
                break
            out[i] = blob[at + 8:at + 8 + size]
            at += 8 + size
    return out


def draw_all(jobs: Sequence[Job]) -> list[Path]:
    """Draw every job's figure and write it to its path; returns the paths written, in order.

    With :func:`cores` above 1 the figures are shared out between this process and forked
    children (module docstring); else they are drawn here, one after another.
    """
    gc.freeze()  # what exists now is left out of every collection while the figures are drawn
    try:
        return _draw_shared(jobs, cores(len(jobs)))
    finally:
        gc.unfreeze()


def _draw_shared(jobs: Sequence[Job], k: int) -> list[Path]:
    """:func:`draw_all` in ``k`` processes (this one and ``k - 1`` forked children)."""
    if k == 1:
        return [job.draw(job.path) for job in jobs]
    import matplotlib.figure  # noqa: F401 - once here, not again in every child

    mine, *others = shares(jobs, k)
    parent, children, paths = os.getpid(), {}, {}
    try:
        for share in others:
            rfd, wfd = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(rfd)
                _child([jobs[i] for i in share], wfd, parent)
            os.close(wfd)
            children[pid] = (share, rfd)
        for i in mine:
            paths[i] = jobs[i].draw(jobs[i].path)
        pngs = _collect(children)
        children = {}
    finally:
        _kill(children)
    for i, job in enumerate(jobs):
        if i in paths:
            continue
        if i not in pngs:  # its child failed: draw it here, so its error shows as it would
            paths[i] = job.draw(job.path)
            continue
        job.path.parent.mkdir(parents=True, exist_ok=True)
        job.path.write_bytes(pngs[i])
        paths[i] = job.path
    return [paths[i] for i in range(len(jobs))]
