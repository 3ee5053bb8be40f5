r"""``quadsim sweep``: plan, run (resuming), collect and plot a sweep.

Output directory (``--out``, default ``runs/<sweep file name>``):

* ``sweep.json``: the sweep's digest, what it covers, its runs and tasks (what a resume checks);
* ``tasks/<task>.parquet``: each finished task's rows (written whole or not at all);
* ``results.parquet``: one row per run, in run order: ``run``, ``point``, ``replicate``, each
  axis (one column per axis; a list-valued axis as a list column), ``task``, ``lane``, ``seed``,
  the metrics (:data:`quadsim.app.sweep.tasks.METRICS`) and ``error`` (null when the run flew). It
  is written only when every task has finished, so its presence means the sweep is complete;
* ``<metric>.png``: each metric against the axes (:mod:`.plots`);
* ``runs/<axis>=<label>/.../<task>.parquet`` with ``--trajectories [EVERY]``
  (:func:`quadsim.app.sweep.spec.value_label`).

**One sweep at a time.** Everything that writes the folder runs while holding its lock
(:func:`quadsim.app.io.outdir.claim`, ``DIR/.quadsim.lock``): a second ``quadsim sweep`` into the
same folder exits 2 naming the folder and the process holding it.

**Resume.** Run the same command again: tasks whose file exists are skipped. The digest in
``sweep.json`` covers the sweep file, the base scenario, quadsim's version and the contents of
every file the scenarios read (:func:`inputs`: drone, power, sensor presets and gains given by
path, policy files); a folder whose digest differs is refused, naming what changed, so a
resumed sweep never mixes results of old and new inputs. With ``--trajectories``, a finished
task without its trajectory file is flown again (the same rows). **Signals**: SIGINT, SIGTERM
and SIGHUP stop the sweep after cancelling what is in flight (finished tasks stay), exit
128 + the signal; the workers die with the sweep however it ends.

**Before anything flies**: the runs are counted and a sweep too large refused, every task is
checked, the sweep's time is estimated (printed when long, refused when beyond the limit) and
the workers are capped at the cores (:mod:`.limits`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

from ... import __version__
from ...engines.signals import interrupt_after
from ..io.files import atomic_write
from ..io.outdir import LOCK, claim
from ..scenario import line_of, resolved_files
from ..signals import Interrupted, raising
from .executors import LocalExecutor, RayExecutor
from .limits import (
    MAX_HOURS,
    MAX_RUNS,
    check_size,
    check_time,
    cores,
    task_cost,
    threads_per_worker,
    workers_for,
)
from .plots import plot_metrics
from .spec import Sweep, load_sweep, make_runs
from .tasks import plan, prepare, rows_ipc, task_rows, write_parquet_atomic, write_rows

__all__ = ["collect", "inputs", "run_sweep"]


def _check_tasks(sw: Sweep, runs: list, tasks: list[dict]) -> list[dict]:
    """Check every task's values (before anything flies); returns per task its ``cost`` [s],
    ``steps`` and ``files`` (what :func:`quadsim.app.scenario.resolved_files` lists, resolved)."""  # noqa: D205, D209
    facts = []
    for t in tasks:
        try:
            sc = prepare(t)
        except ValueError as e:
            raise _at_axis(e, sw, runs) from None
        v = sc.values
        steps = max(1.0, v[""]["duration"] / v["sim"]["dt"])
        files = {p: (k, Path(t["base_dir"], p)) for k, p in resolved_files(sc).items()}
        facts.append({"cost": task_cost(len(t["runs"]), steps, v["sim"]["backend"]),
                      "steps": steps, "files": files})  # fmt: skip
    return facts


def _at_axis(e: ValueError, sw: Sweep, runs: list) -> ValueError:
    """A run's bad value (``FILE: run R: KEY ...``) with the line of its axis; for a key that is
    not an axis (a check of several keys), the run's axis values and their lines."""  # noqa: D205, D209
    import re

    msg = str(e)
    m = re.match(re.escape(f"{sw.path}: ") + r"(run (\d+): ([^\s:=]+).*)", msg, re.S)
    if not m:
        return e

    def at(key: str) -> str:
        line = line_of(sw.text, "axes", key)
        return f'axes."{key}"' + (f" (line {line})" if line else "")

    if m.group(3) in sw.axes:
        return ValueError(f"{sw.path}: {at(m.group(3))}: {m.group(1)}")
    values = runs[int(m.group(2))].values
    sets = [f"{k} = {_short(v)} at {at(k)}" for k, v in list(values.items())[:3]]
    return ValueError(f"{msg}; run {m.group(2)} sets " + ", ".join(sets))


def _short(v: Any, most: int = 40) -> str:
    text = repr(v)
    return text if len(text) <= most else text[: most - 3] + "..."


def inputs(facts: list[dict]) -> dict[str, dict]:
    """``{path: {"key", "sha256"}}`` of every file the tasks' scenarios read (path as written,
    relative to the base scenario's folder).

    Raises:
        ValueError: A file that cannot be read now.
    """  # noqa: D205
    out: dict[str, dict] = {}
    for f in facts:
        for path, (key, full) in f["files"].items():
            if path in out:
                continue
            try:
                digest = hashlib.sha256(full.read_bytes()).hexdigest()[:16]
            except OSError as e:
                raise ValueError(f"{full} ({key}): cannot read: {e.strerror or e}") from None
            out[path] = {"key": key, "sha256": digest}
    return out


def _doc(sw: Sweep, files: dict[str, dict], n_runs: int, n_tasks: int) -> dict:
    def sha(text: str) -> str:
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    return {
        "digest": sw.digest({p: f["sha256"] for p, f in files.items()}),
        "sweep": str(sw.path),
        "base": str(sw.base),
        "runs": n_runs,
        "tasks": n_tasks,
        "covers": {
            "sweep": sha(sw.text),
            "base": sha(sw.base_text),
            "quadsim": __version__,
            "files": files,
        },
    }


def _changes(old: dict, new: dict) -> list[str]:
    """What differs between two ``covers`` of :func:`_doc` (``[]``: unknown)."""
    a, b = old.get("covers"), new["covers"]
    if not isinstance(a, dict):
        return []
    said = []
    if a.get("sweep") != b["sweep"]:
        said.append(f"the sweep file {new['sweep']} changed")
    if a.get("base") != b["base"]:
        said.append(f"the base scenario {new['base']} changed")
    if a.get("quadsim") != b["quadsim"]:
        said.append(f"quadsim's version changed ({a.get('quadsim')} -> {b['quadsim']})")
    fa = a.get("files") if isinstance(a.get("files"), dict) else {}
    for path in sorted(set(fa) | set(b["files"])):
        was, now = fa.get(path), b["files"].get(path)
        key = (now or was or {}).get("key", "?")
        if now is None:
            said.append(f"{path} ({key}) is no longer read")
        elif was is None:
            said.append(f"{path} ({key}) is read now")
        elif was.get("sha256") != now["sha256"]:
            said.append(f"{path} ({key}) changed")
    return said


def _check_out(out: Path, sw: Sweep, doc: dict, trajectories: int) -> None:
    """The folder (held) is new, empty, or holds this very sweep; records the sweep.

    Raises:
        ValueError: Another sweep, inputs changed since its tasks flew, a non-empty folder that
            holds no sweep, or trajectories kept at another ``EVERY``.
    """
    meta = out / "sweep.json"
    if meta.exists():
        try:
            old = json.loads(meta.read_text(encoding="utf-8"))
        except (OSError, ValueError):  # not JSON, not text (a pickle is never loaded): not ours
            old = {}
        old = old if isinstance(old, dict) else {}
        if old.get("digest") != doc["digest"]:
            said = _changes(old, doc) if old.get("sweep") == doc["sweep"] else []
            if not said:
                raise ValueError(f"{out} holds another sweep ({old.get('sweep', '?')}); choose "
                                 "another --out or remove it")  # fmt: skip
            raise ValueError(
                f"{out}: since its finished tasks flew, {'; '.join(said)}: resuming would mix "
                f"old and new results. Put back what changed, or remove {out} (or choose "
                "another --out) to fly the sweep again"
            )
        every = old.get("trajectories")
        kept = any((out / "runs").rglob("*.parquet"))
        if trajectories and every and every != trajectories and kept:
            raise ValueError(
                f"{out}/runs holds the trajectories of --trajectories {every}; give "
                f"--trajectories {every}, or remove {out}/runs to keep those of "
                f"--trajectories {trajectories}"
            )
        if not trajectories or every == trajectories:
            return
        doc = {**old, "trajectories": trajectories}
    elif out.exists() and any(p.name != LOCK for p in out.iterdir()):
        raise ValueError(f"{out} is not empty and holds no sweep; choose another --out")
    elif trajectories:
        doc = {**doc, "trajectories": trajectories}
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(meta, lambda tmp: tmp.write_text(json.dumps(doc, indent=2) + "\n"))


def run_sweep(
    path: str | os.PathLike[str],
    out: str | os.PathLike[str] | None = None,
    *,
    workers: int | None = None,
    ray: str | bool | None = None,
    trajectories: int = 0,
    progress: bool = True,
    echo: Any = None,
    max_runs: int = MAX_RUNS,
    max_hours: float = MAX_HOURS,
) -> dict:
    """Run (or resume) a sweep; returns a report (runs, failed, tasks run and skipped, wall).

    Args:
        path: The sweep file.
        out: Output directory (default ``runs/<sweep file name>``).
        workers: Local processes (default: the cores; at most the cores and the tasks); with
            Ray, a local Ray's CPUs.
        ray: ``None``/``False``: the local executor; ``True``: a local Ray; a string: the
            address of a Ray cluster.
        trajectories: Keep every ``k``-th logged sample of every run (0: none).
        progress: A progress bar over runs.
        echo: Called with notices (default: stderr).
        max_runs: Most runs (a larger sweep is refused before any run is made).
        max_hours: Longest estimated time [h] (a longer sweep is refused before it flies).

    Raises:
        ValueError: Bad input (the sweep file, a run's value, the output directory and its
            lock, a sweep too large or too long, Ray).
        Interrupted: SIGINT, SIGTERM or SIGHUP (:class:`quadsim.app.signals.Interrupted`,
            ``signum``); finished tasks stay.
    """
    echo = echo or (lambda s: print(s, file=sys.stderr))
    sw = load_sweep(path)
    if trajectories < 0:
        raise ValueError(f"--trajectories must be >= 0; got {trajectories}")
    if workers is not None and workers < 1:
        raise ValueError(f"--workers must be >= 1; got {workers!r}")
    if not (max_runs >= 1 and math.isfinite(max_hours) and max_hours > 0):
        raise ValueError(f"--max-runs and --max-hours must be positive; got {max_runs!r}, "
                         f"{max_hours!r}")  # fmt: skip
    check_size(sw, min(workers or cores(), cores()), max_runs)  # counted, before any is made
    runs = make_runs(sw)
    out_dir = Path(out) if out is not None else Path("runs") / sw.path.stem
    tasks = plan(sw, runs, out_dir, trajectories)
    facts = _check_tasks(sw, runs, tasks)  # every value checked before anything flies
    doc = _doc(sw, inputs(facts), len(runs), len(tasks))
    left = [i for i, t in enumerate(tasks) if not _done(t, trajectories)]  # a first look
    with contextlib.ExitStack() as stack:
        if ray:  # a cluster's CPUs are its own; a local Ray's are capped as local workers
            n = workers if isinstance(ray, str) else workers_for(workers, len(left), echo)
            ex: Any = RayExecutor(ray if isinstance(ray, str) else None, n)
            stack.enter_context(ex)  # connected (or refused) before anything is written
            n_workers = ex.cpus()
        else:
            n_workers = workers_for(workers, len(left), echo)
            ex = LocalExecutor(n_workers, threads_per_worker(n_workers))
        check_time(sw, runs, [tasks[i] for i in left], [facts[i] for i in left], n_workers,
                   echo, max_hours)  # fmt: skip
        stack.enter_context(claim(out_dir))  # one sweep at a time writes the folder
        _check_out(out_dir, sw, doc, trajectories)
        try:
            return _run(sw, runs, tasks, out_dir, ex, progress, echo, trajectories)
        except OSError as e:  # a full disk: what is kept, and how to go on
            done = sum(Path(t["out"]).exists() for t in tasks)
            e.add_note(f"kept: the {done} of {len(tasks)} tasks finished in {out_dir / 'tasks'}; "
                       "the same command resumes from them (free some space first if the disk "
                       "is full)")  # fmt: skip
            raise


def _done(task: dict, trajectories: int) -> bool:
    """Whether a task need not fly: its rows are on disk, and so is its trajectory file if
    one is asked for (a task that failed has none: its rows say so)."""  # noqa: D205, D209
    if not Path(task["out"]).exists():
        return False
    if not trajectories or not task["traj_out"] or Path(task["traj_out"]).exists():
        return True
    import pyarrow.parquet as pq

    try:
        return pq.read_table(task["out"], columns=["error"]).column("error").null_count == 0
    except (OSError, ValueError):
        return False


def _run(sw: Sweep, runs: list, tasks: list[dict], out_dir: Path, ex: Any, progress: bool,
         echo: Any, trajectories: int) -> dict:  # fmt: skip
    todo = [t for t in tasks if not _done(t, trajectories)]
    again = sum(Path(t["out"]).exists() for t in todo)
    skipped = len(tasks) - len(todo)
    if skipped:
        echo(f"quadsim sweep: resuming: {skipped} of {len(tasks)} tasks already done")
    if again:
        echo(f"quadsim sweep: --trajectories: flying {again} finished task(s) again for their "
             "trajectories (the same rows)")  # fmt: skip
    bar = None
    if progress and todo:
        from tqdm import tqdm

        bar = tqdm(
            total=len(runs),
            initial=len(runs) - sum(len(t["runs"]) for t in todo),
            unit="run",
            desc="sweep",
            leave=False,
            dynamic_ncols=True,
        )

    def done(task: dict, result: dict) -> None:
        with interrupt_after():  # a signal waits until the task's file is whole
            write_rows(result["table"], Path(task["out"]))
        if result.get("error"):
            echo(
                f"quadsim sweep: {task['name']} (runs {task['runs'][0]}..{task['runs'][-1]}) "
                f"failed: {result['error']}"
            )
        if bar is not None:
            bar.update(len(task["runs"]))

    t0 = time.perf_counter()

    try:
        with raising():
            lost = ex.run(todo, done)
    finally:
        if bar is not None:
            bar.close()
    if hasattr(ex, "release"):  # Ray stops while the results are merged and plotted
        ex.release()

    for t in lost:  # their workers kept dying: recorded as failed
        write_rows(rows_ipc(task_rows(t, [], "the worker died (retried)")), Path(t["out"]))
    table = _collect(sw, runs, tasks, out_dir)
    plots = plot_metrics(table, sw, out_dir)
    return {
        "runs": len(runs),
        "failed": table.num_rows - table.column("error").null_count,
        "tasks": len(tasks),
        "skipped": skipped,
        "wall_s": time.perf_counter() - t0,
        "executor": ex.name,
        "out": str(out_dir),
        "plots": [str(p) for p in plots],
    }


def collect(sw: Sweep, runs: list, tasks: list[dict], out: Path) -> dict[str, list]:
    """Merge the task files into ``results.parquet`` (run order); returns its columns."""
    return _collect(sw, runs, tasks, out).to_pydict()


def _collect(sw: Sweep, runs: list, tasks: list[dict], out: Path) -> Any:
    """:func:`collect`, returning the ``pyarrow.Table``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    parts = [pq.read_table(t["out"]) for t in tasks]
    merged = pa.concat_tables(parts).sort_by("run")
    run_col = merged.column("run").to_numpy()
    if merged.num_rows != len(runs) or not (run_col == range(len(runs))).all():
        raise ValueError(f"{out}: the task files do not hold every run once")
    cols: dict[str, Any] = {
        "run": merged.column("run"),
        "point": pa.array([r.point for r in runs], pa.int64()),
        "replicate": pa.array([r.replicate for r in runs], pa.int64()),
    }
    for key in sw.axes:
        cols[key] = pa.array([r.values[key] for r in runs])
    for name in merged.column_names:
        if name != "run":
            cols[name] = merged.column(name)
    table = pa.table(cols)
    write_parquet_atomic(table, out / "results.parquet")
    return table


def main(args: Any) -> int:
    """``quadsim sweep ...`` (parsed by :mod:`quadsim.app.cli`); the exit code."""
    try:
        rep = run_sweep(
            args.sweep,
            args.out,
            workers=args.workers,
            ray=args.ray,
            trajectories=args.trajectories or 0,
            progress=not args.quiet,
            max_runs=args.max_runs,
            max_hours=args.max_hours,
        )
    except Interrupted as e:
        name = e.args[0]
        print(
            f"quadsim: sweep interrupted ({name}); finished tasks are kept: run the same "
            "command to resume",
            file=sys.stderr,
        )
        return 128 + e.signum
    if not args.quiet:
        print(
            f"{rep['runs']} runs in {rep['tasks']} tasks ({rep['skipped']} resumed) on "
            f"{rep['executor']} in {rep['wall_s']:.2f} s; {rep['failed']} failed"
        )
        print(f"wrote {rep['out']}/results.parquet" + "".join(f"\n      {p}" for p in rep["plots"]))
    return 1 if rep["failed"] else 0
