r"""``quadsim sweep``: plan, run (resuming), collect and plot a sweep.

Output directory (``--out``, default ``runs/<sweep file name>``):

* ``sweep.json``: the sweep's digest, its runs and tasks (what a resume checks);
* ``tasks/<task>.parquet``: each finished task's rows (written whole or not at all);
* ``results.parquet``: one row per run, in run order: ``run``, ``point``, ``replicate``, each
  axis (one column per axis; a list-valued axis as a list column), ``task``, ``lane``, ``seed``,
  the metrics (:data:`quadsim.sweep.tasks.METRICS`) and ``error`` (null when the run flew). It
  is written only when every task has finished, so its presence means the sweep is complete;
* ``<metric>.png``: each metric against the axes (a line per axis value for one axis, a heat map
  for two; points for sampled axes);
* ``runs/<axis>=<value>/.../<task>.parquet`` with ``--trajectories [EVERY]``.

**Resume.** Run the same command again: tasks whose file exists are skipped. A directory that
holds another sweep (its digest differs) is refused. **Signals**: SIGINT and SIGTERM stop the
sweep after cancelling what is in flight (finished tasks stay), exit 130 / 143.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from ...engines.signals import interrupt_after
from ..io.files import atomic_write
from .spec import Sweep, load_sweep, make_runs
from .tasks import METRICS, plan, prepare, write_rows

__all__ = ["collect", "run_sweep"]


def _check_out(out: Path, sw: Sweep, n_runs: int, n_tasks: int) -> None:
    meta = out / "sweep.json"
    doc = {
        "digest": sw.digest(),
        "sweep": str(sw.path),
        "base": str(sw.base),
        "runs": n_runs,
        "tasks": n_tasks,
    }
    if meta.exists():
        try:
            old = json.loads(meta.read_text())
        except (OSError, json.JSONDecodeError):
            old = {}
        if old.get("digest") != doc["digest"]:
            raise ValueError(
                f"{out} holds another sweep ({old.get('sweep', '?')}); choose "
                "another --out or remove it"
            )
        return
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"{out} is not empty and holds no sweep; choose another --out")
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
) -> dict:
    """Run (or resume) a sweep; returns a report (runs, failed, tasks run and skipped, wall).

    Args:
        path: The sweep file.
        out: Output directory (default ``runs/<sweep file name>``).
        workers: Local processes (default: the cores); with Ray, a local Ray's CPUs.
        ray: ``None``/``False``: the local executor; ``True``: a local Ray; a string: the
            address of a Ray cluster.
        trajectories: Keep every ``k``-th logged sample of every run (0: none).
        progress: A progress bar over runs.
        echo: Called with notices (default: stderr).

    Raises:
        ValueError: Bad input (the sweep file, a run's value, the output directory, Ray).
        KeyboardInterrupt: SIGINT or SIGTERM (``signum`` attribute); finished tasks stay.
    """
    from .executors import LocalExecutor, RayExecutor

    echo = echo or (lambda s: print(s, file=sys.stderr))
    sw = load_sweep(path)
    if trajectories < 0:
        raise ValueError(f"--trajectories must be >= 0; got {trajectories}")
    runs = make_runs(sw)
    out_dir = Path(out) if out is not None else Path("runs") / sw.path.stem
    tasks = plan(sw, runs, out_dir, trajectories)
    for t in tasks:  # every value checked before anything flies
        prepare(t)
    ex: Any = (
        LocalExecutor(workers)
        if not ray
        else RayExecutor(ray if isinstance(ray, str) else None, workers)
    )
    with contextlib.ExitStack() as stack:
        if isinstance(ex, RayExecutor):
            stack.enter_context(ex)  # connected (or refused) before anything is written
        _check_out(out_dir, sw, len(runs), len(tasks))
        return _run(sw, runs, tasks, out_dir, ex, progress, echo)


def _run(
    sw: Sweep, runs: list, tasks: list[dict], out_dir: Path, ex: Any, progress: bool, echo: Any
) -> dict:
    todo = [t for t in tasks if not Path(t["out"]).exists()]
    skipped = len(tasks) - len(todo)
    if skipped:
        echo(f"quadsim sweep: resuming: {skipped} of {len(tasks)} tasks already done")
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
    failed_tasks: list[str] = []

    def done(task: dict, result: dict) -> None:
        with interrupt_after():  # a signal waits until the task's file is whole
            write_rows(result["table"], Path(task["out"]))
        if result.get("error"):
            failed_tasks.append(task["name"])
            echo(
                f"quadsim sweep: {task['name']} (runs {task['runs'][0]}..{task['runs'][-1]}) "
                f"failed: {result['error']}"
            )
        if bar is not None:
            bar.update(len(task["runs"]))

    t0 = time.perf_counter()

    def stop(signum: int, frame: Any) -> None:
        raise _Stopped(signum)

    old = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        lost = ex.run(todo, done)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        if bar is not None:
            bar.close()
    if hasattr(ex, "release"):  # Ray stops while the results are merged and plotted
        ex.release()
    from .tasks import _rows, rows_ipc

    for t in lost:  # their workers kept dying: recorded as failed
        write_rows(rows_ipc(_rows(t, [], "the worker died (retried)")), Path(t["out"]))
        failed_tasks.append(t["name"])
    table = collect(sw, runs, tasks, out_dir)
    plots = _plots(table, sw, out_dir)
    n_failed = int(sum(e is not None for e in table["error"]))
    return {
        "runs": len(runs),
        "failed": n_failed,
        "tasks": len(tasks),
        "skipped": skipped,
        "wall_s": time.perf_counter() - t0,
        "executor": ex.name,
        "out": str(out_dir),
        "plots": [str(p) for p in plots],
    }


class _Stopped(KeyboardInterrupt):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def collect(sw: Sweep, runs: list, tasks: list[dict], out: Path) -> dict[str, list]:
    """Merge the task files into ``results.parquet`` (run order); returns its columns."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from .tasks import _atomic_write

    parts = [pq.read_table(t["out"]) for t in tasks]
    merged = pa.concat_tables(parts).sort_by("run")
    if merged.num_rows != len(runs) or merged.column("run").to_pylist() != list(range(len(runs))):
        raise ValueError(f"{out}: the task files do not hold every run once")
    cols: dict[str, Any] = {
        "run": merged.column("run"),
        "point": pa.array([r.point for r in runs], pa.int64()),
        "replicate": pa.array([r.replicate for r in runs], pa.int64()),
    }
    for key in sw.axes:
        vals = [r.values[key] for r in runs]
        cols[key] = pa.array(vals)
    for name in merged.column_names:
        if name != "run":
            cols[name] = merged.column(name)
    table = pa.table(cols)
    _atomic_write(table, out / "results.parquet")
    return table.to_pydict()


def _plots(table: dict[str, list], sw: Sweep, out: Path) -> list[Path]:
    """One figure per metric against the axes (numeric axes only)."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        return []
    axes = [
        k
        for k in sw.axes
        if all(isinstance(v, int | float) and not isinstance(v, bool) for v in table[k])
    ]
    if not axes:
        return []
    files = []
    for metric, kind in METRICS:
        if kind == "bool":
            y = np.array([np.nan if v is None else float(v) for v in table[metric]])
        else:
            y = np.array([np.nan if v is None else v for v in table[metric]], dtype=float)
        if not np.isfinite(y).any():
            continue
        fig = Figure(figsize=(6.4, 4.8))
        FigureCanvasAgg(fig)
        ax = fig.subplots()
        if len(axes) >= 2 and sw.method == "grid":
            a, b = axes[:2]
            xs, ys = sorted(set(table[a])), sorted(set(table[b]))
            grid = np.full((len(ys), len(xs)), np.nan)
            for i, yv in enumerate(ys):
                for j, xv in enumerate(xs):
                    sel = [k for k in range(len(y)) if table[a][k] == xv and table[b][k] == yv]
                    vals = y[sel]
                    grid[i, j] = np.nanmean(vals) if np.isfinite(vals).any() else np.nan
            im = ax.imshow(grid, origin="lower", aspect="auto", cmap="viridis")
            ax.set_xticks(range(len(xs)), [f"{v:.4g}" for v in xs])
            ax.set_yticks(range(len(ys)), [f"{v:.4g}" for v in ys])
            ax.set_xlabel(a)
            ax.set_ylabel(b)
            fig.colorbar(im, ax=ax, label=f"{metric} (mean)")
        elif sw.method == "grid":
            a = axes[0]
            xs = sorted(set(table[a]))
            mean = [np.nanmean(y[[k for k in range(len(y)) if table[a][k] == xv]]) for xv in xs]
            ax.plot(table[a], y, ".", color="0.6", label="runs")
            ax.plot(xs, mean, "o-", label="mean")
            ax.set_xlabel(a)
            ax.set_ylabel(metric)
            ax.legend()
        else:
            a = axes[0]
            sc = ax.scatter(
                table[a], table[axes[1]] if len(axes) > 1 else y, c=y, s=6, cmap="viridis"
            )
            ax.set_xlabel(a)
            ax.set_ylabel(axes[1] if len(axes) > 1 else metric)
            fig.colorbar(sc, ax=ax, label=metric)
        ax.set_title(f"{sw.path.name}: {metric}", fontsize=9)
        fig.tight_layout()
        path = out / f"{metric}.png"
        fig.savefig(path, dpi=100)
        files.append(path)
    return files


def main(args: Any) -> int:
    """``quadsim sweep ...`` (parsed by :mod:`quadsim.cli`); the exit code."""
    try:
        rep = run_sweep(
            args.sweep,
            args.out,
            workers=args.workers,
            ray=args.ray,
            trajectories=args.trajectories or 0,
            progress=not args.quiet,
        )
    except _Stopped as e:
        name = signal.Signals(e.signum).name
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
