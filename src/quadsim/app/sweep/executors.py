"""Who runs a sweep's tasks: a local process pool (default) or a Ray cluster (``--ray``).

Both take the same task dicts and call the same :func:`quadsim.app.sweep.tasks.run_task`, which
writes the task's rows itself; the executor only schedules, retries and reports. So the results
cannot depend on the executor or on the number of workers.

* :class:`LocalExecutor`: ``concurrent.futures.ProcessPoolExecutor`` (``spawn``: workers start
  clean, whatever the parent imported), one worker per core unless told
  (:func:`quadsim.app.sweep.limits.workers_for` caps them). A worker that dies (a kill, the OOM
  killer) breaks the pool; the pool is rebuilt and the tasks it held are run again (at most
  :data:`MAX_RETRIES` times each, then they are recorded as failed). Workers die with the
  parent however it ends (:func:`_die_with_parent`: ``PR_SET_PDEATHSIG`` on Linux, and a thread
  that watches the parent's PID everywhere), and start with ``OMP_NUM_THREADS`` set to their
  share of the cores (:func:`quadsim.app.sweep.limits.threads_per_worker`) unless it is set.
* :class:`RayExecutor`: ``ray.init(address=...)`` joins a cluster; without an address it starts
  a new local Ray (``address="local"``: not one that already runs or that ``RAY_ADDRESS`` names)
  that listens on 127.0.0.1 only, with no dashboard. Tasks are Ray remote functions
  with ``max_retries`` = :data:`MAX_RETRIES` (Ray reruns a task whose worker died). Ray gives a
  task of ``num_cpus=1`` ``OMP_NUM_THREADS=1`` unless it is set, and ties the processes of a
  Ray it starts to the driver's life (``PR_SET_PDEATHSIG``, its "fate sharing").
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from .tasks import run_task

__all__ = ["MAX_RETRIES", "LocalExecutor", "RayExecutor"]

MAX_RETRIES = 2
"""Times a task is run again after its worker died."""


PARENT_POLL_S = 0.5
"""How often a local worker checks that its parent is still there [s] (where prctl is not)."""


def _run(task: dict) -> dict:
    return run_task(task)


def _die_with_parent(parent: int) -> None:
    """Pool initializer: end this worker as soon as ``parent`` (the sweep) is gone.

    On Linux ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` has the kernel kill it when the parent dies
    (even by SIGKILL); everywhere a daemon thread also polls ``os.getppid()`` every
    :data:`PARENT_POLL_S` seconds and exits the process when the parent has changed (a worker
    orphaned before the prctl took effect, or a system without it).
    """
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="quadsim-parent-watch", daemon=True).start()


@contextlib.contextmanager
def _worker_env(threads: int | None) -> Iterator[None]:
    """``OMP_NUM_THREADS = threads`` in this process's environment while workers are spawned
    (they inherit it from their first instruction, before NumPy or the compiled engine loads
    OpenMP); a value the user set is kept."""  # noqa: D205, D209
    if not threads or "OMP_NUM_THREADS" in os.environ:
        yield
        return
    os.environ["OMP_NUM_THREADS"] = str(threads)
    try:
        yield
    finally:
        os.environ.pop("OMP_NUM_THREADS", None)


class LocalExecutor:
    """A process pool of ``workers`` processes (default: the cores), ``threads`` OpenMP threads
    each (``None``: OpenMP's default)."""  # noqa: D205, D209

    name = "local"

    def __init__(self, workers: int | None = None, threads: int | None = None) -> None:
        self.workers = int(workers or os.cpu_count() or 1)
        if self.workers < 1:
            raise ValueError(f"--workers must be >= 1; got {workers!r}")
        self.threads = threads

    def run(self, tasks: Iterable[dict], done: Callable[[dict, dict], None]) -> list[dict]:
        """Run the tasks; ``done(task, result)`` as each finishes. Returns tasks that failed for
        good because their worker kept dying (``[]`` normally)."""  # noqa: D205, D209
        import multiprocessing as mp
        from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
        from concurrent.futures.process import BrokenProcessPool

        pending = list(tasks)
        tries = {t["name"]: 0 for t in pending}
        lost: list[dict] = []
        ctx = mp.get_context("spawn")
        while pending:
            with _worker_env(self.threads):  # the workers are spawned by submit
                pool = ProcessPoolExecutor(max_workers=min(self.workers, len(pending)),
                                           mp_context=ctx, initializer=_die_with_parent,
                                           initargs=(os.getpid(),))  # fmt: skip
                futures = {pool.submit(_run, t): t for t in pending}
            pending = []
            broken = False
            try:
                while futures:
                    finished, _ = wait(futures, return_when=FIRST_COMPLETED)
                    for f in finished:
                        t = futures.pop(f)
                        try:
                            done(t, f.result())
                        except BrokenProcessPool:
                            broken = True
                            tries[t["name"]] += 1
                            (pending if tries[t["name"]] <= MAX_RETRIES else lost).append(t)
                    if broken:  # every task still held by the pool is lost with it
                        for f, t in futures.items():
                            if f.done() and f.exception() is None:
                                done(t, f.result())
                            else:
                                pending.append(t)
                        futures = {}
            except KeyboardInterrupt:  # stop now: the tasks in flight are lost, not waited for
                _terminate(pool)
                raise
            finally:
                pool.shutdown(wait=not broken, cancel_futures=True)
        return lost


def _terminate(pool: Any) -> None:
    """Kill a process pool's workers (the standard library has no public way to)."""
    for proc in list(getattr(pool, "_processes", {}).values()):
        if proc.is_alive():
            proc.kill()
    pool.shutdown(wait=False, cancel_futures=True)


def _check_reachable(address: str, timeout: float = 3.0) -> None:
    """A ``host:port`` address must accept a TCP connection (Ray would retry for a minute,
    printing to stderr); other forms (``auto``, ``ray://...``) are left to Ray."""  # noqa: D205, D209
    import socket

    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "://" in address:
        return
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout):
            pass
    except OSError as e:
        raise ValueError(f"--ray: cannot reach {address}: {e.strerror or e}") from None


class RayExecutor:
    """Ray: ``address`` of a cluster, or ``None`` for a local Ray on 127.0.0.1 (``workers``
    CPUs, no dashboard)."""  # noqa: D205, D209

    name = "ray"

    def __init__(self, address: str | None = None, workers: int | None = None) -> None:
        try:
            import ray
        except ImportError:
            raise ValueError("--ray needs Ray: pip install 'quadsim[ray]'") from None
        self.ray = ray
        self.address = address
        self.workers = workers
        self._started = False
        self._stopping: Any = None

    def __enter__(self) -> RayExecutor:
        ray = self.ray
        env_vars = {k: v for k, v in os.environ.items() if k.startswith("QUADSIM_")}
        # a cluster's workers get quadsim's settings (cache directory, ...) passed on; a local
        # Ray's inherit this process's environment, and a runtime_env would only slow its start
        env = {"runtime_env": {"env_vars": env_vars}} if env_vars else {}
        if self.address:
            _check_reachable(self.address)
        try:
            if self.address:
                ray.init(
                    address=self.address,
                    **env,
                    log_to_driver=False,
                    logging_level="ERROR",
                )
            else:
                ray.init(
                    address="local",  # a new one, even if a Ray already runs on this machine
                    num_cpus=self.workers or os.cpu_count(),
                    include_dashboard=False,
                    _node_ip_address="127.0.0.1",
                    log_to_driver=False,
                    logging_level="ERROR",
                )
        except Exception as e:
            where = self.address or "a local Ray"
            raise ValueError(
                f"--ray: cannot connect to {where}: "
                f"{str(e).splitlines()[0] if str(e) else type(e).__name__}"
            ) from None
        self._started = True
        return self

    def cpus(self) -> int:
        """The CPUs the tasks can use (one task each): the local Ray's, or the cluster's."""
        try:
            return max(1, int(self.ray.cluster_resources().get("CPU", 1)))
        except Exception:  # an estimate only
            return max(1, int(self.workers or os.cpu_count() or 1))

    def release(self) -> None:
        """Start disconnecting in a thread (stopping a local Ray waits ~1.3 s on its processes),
        so the caller can merge results meanwhile; :meth:`__exit__` waits for it."""  # noqa: D205, D209
        import threading

        if self._started and self._stopping is None:
            self._stopping = threading.Thread(target=self.ray.shutdown, name="ray-shutdown")
            self._stopping.start()

    def __exit__(self, *exc: Any) -> None:
        if not self._started:
            return
        if self._stopping is None:
            self.ray.shutdown()
        else:
            self._stopping.join()

    def run(self, tasks: Iterable[dict], done: Callable[[dict, dict], None]) -> list[dict]:
        """Run the tasks as Ray remote functions; ``done(task, result)`` as each finishes."""
        ray = self.ray
        remote = ray.remote(num_cpus=1, max_retries=MAX_RETRIES)(_run)
        refs = {remote.remote(t): t for t in tasks}
        lost = []
        try:
            while refs:
                ready, _ = ray.wait(list(refs), num_returns=1, timeout=0.5)
                for r in ready:
                    t = refs.pop(r)
                    try:
                        done(t, ray.get(r))
                    except ray.exceptions.WorkerCrashedError:
                        lost.append(t)
        except KeyboardInterrupt:
            for r in refs:
                ray.cancel(r, force=True)
            raise
        return lost
