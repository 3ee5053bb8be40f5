r"""How big and how long a sweep may be, and how many workers and threads it gets.

**Size** (:func:`check_size`). The runs are counted from the axes' lengths (or ``samples``) times
the replicates before any is materialised (:func:`quadsim.app.sweep.spec.count_runs`). The driver
holds every run in memory (its axis values, its task, its row of results), about
:data:`BYTES_PER_RUN` each: a sweep of more than :data:`MAX_RUNS` runs, or one whose plan would
not fit in the memory available, is refused with the count and the estimates (memory, time).

**Time** (:func:`check_time`). Once every task is checked, and before anything flies, each task's
cost is estimated as ``T_TASK + steps (a + n b)`` (``n`` runs of ``steps`` steps;
:data:`STEP_COST`: ``a`` per step, ``b`` per drone-step) and the sweep's as :data:`T_START` plus
the tasks' sum over the workers. An estimate above :data:`quadsim.app.preflight.SAY_TIME_ABOVE` is
printed; one above :data:`MAX_HOURS` is refused, naming the longest task and the axis that makes
it long (its line in the sweep file). ``quadsim sweep --max-runs N --max-hours H`` raises the
limits for one sweep.

**Workers and threads** (:func:`workers_for`, :func:`threads_per_worker`). Local workers are
capped at the cores this process may use (``os.sched_getaffinity``) and at the tasks to run, with
a one-line note when ``--workers`` asked for more: more processes than cores only share them
(measured: ``--workers 1000`` on 2 cores took 13.1 s against 3.9 s with 2). Each local worker
starts with ``OMP_NUM_THREADS = max(1, cores // workers)`` unless the variable is set: the
compiled engine splits each step over OpenMP threads, one per core by default, in every worker.
Ray gives each task (``num_cpus=1``) ``OMP_NUM_THREADS=1`` unless it is set.
"""

from __future__ import annotations

import math
import os
from typing import Any

from ..preflight import SAY_TIME_ABOVE, available_memory, format_bytes, format_duration
from ..preflight import STEP_COST as FLY
from ..scenario import SCHEMA, line_of
from .spec import Sweep, count_runs

__all__ = ["BYTES_PER_RUN", "MAX_HOURS", "MAX_RUNS", "STEP_COST", "check_size", "check_time",
           "cores", "estimate", "task_cost", "threads_per_worker", "workers_for"]  # fmt: skip

MAX_RUNS = 10_000_000
"""Most runs a sweep may have (``--max-runs`` raises it)."""

BYTES_PER_RUN = 1000
"""Driver memory per run [bytes]: the run and its values (about 320 B measured for 2·10⁵ runs
of three axes), its part of the tasks (50 B), its row of results while merged and plotted, with a
margin."""

MAX_HOURS = 24.0
"""Longest estimated sweep that runs [h] (``--max-hours`` raises it)."""

STEP_COST = {"native": (1.0e-4, 2.0e-7)}
"""Per step [s] and per drone-step [s] of a task on the compiled closed loop (a 2-core machine:
about 10 M drone-steps/s when idle, docs/scaling.md, with a margin); other backends use
:data:`quadsim.app.preflight.STEP_COST`."""

T_TASK = 0.3
"""Per task [s]: checking and building its scenario, loading the compiled loop."""

T_START = 2.0
"""Per sweep [s]: the workers' start (spawn, imports) and the driver's merge."""

TIME_AXES = ("duration", "sim.dt", "controller.rate", "sim.integrator", "sim.backend")
"""Axes that change how long a run takes (named when a sweep is refused as too long)."""


def cores() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def workers_for(requested: int | None, tasks: int, echo: Any) -> int:
    """Local workers for ``tasks`` tasks: ``requested`` (default: the cores), at most the cores
    and the tasks; ``echo`` gets one line when a requested number is cut."""  # noqa: D205, D209
    n = cores()
    want = n if requested is None else int(requested)
    if want < 1:
        raise ValueError(f"--workers must be >= 1; got {requested!r}")
    use = max(1, min(want, n, tasks))
    if requested is not None and use < want:
        why = f"the cores here ({n})" if want > n and use == n else f"the tasks to run ({tasks})"
        echo(f"quadsim sweep: --workers {want}: using {use}, {why}")
    return use


def threads_per_worker(workers: int) -> int:
    """OpenMP threads of each of ``workers`` local workers: their share of the cores."""
    return max(1, cores() // max(1, workers))


def task_cost(n: int, steps: float, backend: str) -> float:
    """Seconds of one task: ``n`` runs of ``steps`` steps on ``backend`` (rough)."""
    a, b = STEP_COST.get(backend) or FLY.get(backend, FLY["numpy"])
    return T_TASK + steps * (a + n * b)


def estimate(costs: list[float], workers: int) -> float:
    """Seconds of a sweep whose tasks cost ``costs`` on ``workers`` workers."""
    w = max(1, min(workers, len(costs)))
    return T_START + max(sum(costs) / w, max(costs, default=0.0))


def _about(s: float) -> str:
    """``about 3 min``, ``about 1.6 years``; ``without end`` past what a float counts."""
    if not math.isfinite(s):
        return "without end"
    years = f"{s / (365.25 * 86400):.3g} years"
    return "about " + (format_duration(s) if s < 365 * 86400 else years)


def _count(x: float) -> str:
    if not math.isfinite(x):
        return "more than 1e308"
    return f"{x:,.0f}" if x < 1e15 else f"{x:.3g}"


def _base_steps(sw: Sweep) -> tuple[int, str] | None:
    """Steps of a run as the base scenario sets them, and its backend (``None``: unreadable)."""
    doc = sw.base_doc
    sim = doc.get("sim") if isinstance(doc.get("sim"), dict) else {}
    duration = doc.get("duration", SCHEMA[""]["duration"].default)
    dt = sim.get("dt", SCHEMA["sim"]["dt"].default)
    backend = sim.get("backend", "native")
    try:
        steps = max(1, round(float(duration) / float(dt)))
    except (TypeError, ValueError, OverflowError, ZeroDivisionError):
        return None
    return steps, backend if backend in ("numpy", "jax", "torch") else "native"


def check_size(sw: Sweep, workers: int, limit: int = MAX_RUNS) -> int:
    """The number of runs; refuses (before any is made) more than :data:`MAX_RUNS` or more
    than the memory available holds.

    Raises:
        ValueError: The count, how it arises, the estimates and the limit.
    """  # noqa: D205
    n = count_runs(sw)
    need, avail = n * BYTES_PER_RUN, available_memory()
    if n <= limit and (avail is None or need <= avail):
        return n
    if sw.method == "grid":
        how = " x ".join(f"{len(spec):,}" for _, spec in sw.axes.values())
        how += " values" if n // sw.replicates != 1 else " value"
    else:
        how = f"{sw.samples:,} samples"
    how += f" x {sw.replicates:,} replicate{'s' * (sw.replicates != 1)}"
    base = _base_steps(sw)
    when = ""
    if base:
        tasks = math.ceil(n / sw.batch)
        per = [task_cost(sw.batch, base[0], base[1])] * min(tasks, 10**6)
        total = estimate(per, workers) * (tasks / len(per))
        when = f" and flying them {_about(total)} on {workers} worker(s)"
    room = f" ({format_bytes(avail)} available)" if avail is not None else ""
    raise ValueError(
        f"{sw.path}: {n:,} runs ({how}): the plan alone needs about {format_bytes(need)} of "
        f"memory{room}"
        f"{when}; the limit is {limit:,} runs (--max-runs); use fewer axis values, "
        "samples or replicates, or split the sweep"
    )


def check_time(sw: Sweep, runs: list, tasks: list[dict], facts: list[dict], workers: int,
               echo: Any, hours: float = MAX_HOURS) -> float:  # fmt: skip
    """The sweep's estimated seconds for the tasks still to run (``facts``: each task's
    ``cost``, ``steps``, a float); printed when long, refused above :data:`MAX_HOURS`.

    Raises:
        ValueError: The estimate, the longest task and the axis responsible (file and line).
    """  # noqa: D205
    if not facts:
        return 0.0
    total = estimate([f["cost"] for f in facts], workers)
    n = sum(len(t["runs"]) for t in tasks)
    if total <= hours * 3600:
        if total > SAY_TIME_ABOVE:
            echo(f"quadsim sweep: {n:,} runs in {len(tasks):,} tasks on {workers} worker(s): "
                 f"this sweep will take {_about(total)}")  # fmt: skip
        return total
    k = max(range(len(facts)), key=lambda i: facts[i]["cost"])
    t, f = tasks[k], facts[k]
    values = runs[t["runs"][0]].values
    a, b = t["runs"][0], t["runs"][-1]
    which = f"run {a}" if a == b else f"{len(t['runs']):,} runs ({a}..{b})"
    axis = next((a for a in TIME_AXES if a in values), None)
    at, why = f"{sw.path}", ""
    if axis is not None:
        line = line_of(sw.text, "axes", axis)
        at += f': axes."{axis}"' + (f" (line {line})" if line else "")
        why = f" ({axis} = {values[axis]!r})"
    raise ValueError(
        f"{at}: this sweep would take {_about(total)} on {workers} worker(s); the "
        f"limit is {hours:g} h (--max-hours). Its longest task flies {which} for "
        f"{_count(f['steps'])} steps{why}: shorten the runs or use fewer of them"
    )
