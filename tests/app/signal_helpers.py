"""Stop signals as the tests that send them need them, and children started without a fork hook.

A test run started with ``nohup`` ignores SIGHUP, one started as a background job of a shell
without job control ignores SIGINT, and a child process inherits what is ignored; quadsim leaves
an ignored signal ignored (as ``nohup`` asks). A test that sends a stop signal to a child
therefore starts it with :func:`child_command` (the stop signals' default dispositions), and one
that raises it in this process uses the conftest fixture ``stop_signals_default``.

No ``preexec_fn``: it runs Python in the forked child of this process, which is not safe in a
multithreaded process, and a test process may have loaded JAX (its threads): JAX warns "os.fork()
was called. os.fork() is incompatible with multithreaded code, and JAX is multithreaded"
(issue 40, item 16). Without one, :mod:`subprocess` forks and execs in C and runs no Python
before the exec; :func:`child_command` sets the dispositions and limits in the child instead,
in a small Python that then execs the command (the same process id).
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterable, Sequence

STOP = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n))

_LAUNCH = """\
import os, signal, sys
stop, ignore, fsize, *cmd = sys.argv[1:]
for name in ("SIGPIPE", "SIGXFSZ"):  # ignored by this Python at start-up, as by the command's
    signal.signal(getattr(signal, name), signal.SIG_DFL)
for s in filter(None, stop.split(",")):
    signal.signal(int(s), signal.SIG_DFL)
for s in filter(None, ignore.split(",")):
    signal.signal(int(s), signal.SIG_IGN)
if int(fsize) >= 0:
    import resource
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails: EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(fsize), int(fsize)))
os.execvp(cmd[0], cmd)
"""


def child_command(
    cmd: Sequence[str], *, ignore: Iterable[int] = (), fsize: int | None = None
) -> list[str]:
    """The argv that runs ``cmd`` with the stop signals' default dispositions (those of
    ``ignore`` ignored) and, with ``fsize``, a file size limit of ``fsize`` bytes
    (``RLIMIT_FSIZE``; SIGXFSZ ignored, so a write past it fails with EFBIG as a full disk fails
    with ENOSPC): what a ``preexec_fn`` would set, set after the fork and exec instead (module
    docstring). The command keeps the child's process id and is found on ``PATH``.
    """
    stop, ign = (",".join(str(int(s)) for s in sigs) for sigs in (STOP, ignore))
    limit = str(-1 if fsize is None else int(fsize))
    return [sys.executable, "-I", "-S", "-c", _LAUNCH, stop, ign, limit, *cmd]


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
