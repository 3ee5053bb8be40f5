"""``quadsim fly`` and ``quadsim recover``: a scenario file in, a directory of results out.

Before anything is built, :mod:`quadsim.app.preflight` checks the output directory and what each
requested output needs, refuses a run that would not fit in memory, and says when a run will be
long or its step unsuited to the drone. During the flight the log's chunks become durable part
files (:mod:`quadsim.app.io.parts`: one a second, or every 64 MB); at the end, or on SIGINT,
SIGTERM or SIGHUP, the parts are merged into ``trajectory.parquet`` (and ``trajectory.csv``)
while the summary is computed, ``summary.json`` is written, then the figures and the animation.
After a hard kill the parts stay on disk and :func:`recover` does the same merge.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
import warnings
from pathlib import Path
from typing import Any

from ..loop.brain import Sensors, loop_periods, part_periods, rates_hz, sensor_parts
from ..loop.parts import log_columns, part_params
from ..loop.paths import flight_loop
from . import io, preflight
from .io import outdir
from .io.parts import (
    DAMAGED,
    PARTS,
    PartWriter,
    merge_parts,
    part_files,
    read_part_meta,
    remove_parts,
)
from .ros2 import interfaces
from .scenario import build, check_run, fly_assembly, load_scenario
from .scenario.locations import failer

__all__ = ["OUTPUTS", "check_part_messages", "chunk_writer", "fly_scenario", "kept_on_failure",
           "loop_meta", "recover"]

OUTPUTS = (
    "trajectory.parquet",
    "trajectory.csv",
    "summary.json",
    "path_3d.png",
    "states.png",
    "rotors.png",
    "tracking_error.png",
    "flight.gif",
    "flight.mp4",
    "trajectory.mcap",
    "trajectory.damaged",  # io.parts.DAMAGED
)
"""What a run writes into its folder under fixed names: an earlier run's are set aside once a
new run has started (:mod:`quadsim.app.io.outdir`)."""


def _progress_bar(total: int, enabled: bool) -> Any:
    if not enabled:
        return None, lambda done, total: None
    from tqdm import tqdm

    bar = tqdm(total=total, unit="step", desc="flying", leave=False, dynamic_ncols=True)

    def update(done: int, total: int) -> None:
        bar.update(done - bar.n)

    return bar, update


def _beside(bar: Any, echo: Any) -> Any:
    """``echo`` on a line of its own while the progress ``bar`` (or ``None``) is shown."""
    if bar is None:
        return echo

    def say(line: str) -> None:
        bar.clear()
        echo(line)
        bar.refresh()

    return say


def default_out(scenario: str | os.PathLike[str]) -> Path:
    """``runs/<scenario file name without its suffix>``."""
    return Path("runs") / Path(scenario).stem


def fly_scenario(
    scenario: str | os.PathLike[str],
    out_dir: str | os.PathLike[str] | None = None,
    *,
    csv: bool | None = None,
    plots: bool | None = None,
    animate: str | None = None,
    progress: bool = True,
    echo: Any = None,
    rosbag: bool = False,
) -> dict:
    """Run a scenario file and write its outputs.

    Args:
        scenario: Path of the scenario TOML file.
        out_dir: Output directory (default :func:`default_out`); created if needed.
        csv: Also write ``trajectory.csv`` (default: the scenario's ``output.csv``).
        plots: Write the PNG figures (default: the scenario's ``output.plots``).
        animate: ``None``, or ``"gif"`` / ``"mp4"`` for an animation of the drones kept for the
            figures (``output.plot_drones``).
        progress: Show a progress bar.
        echo: Called with each notice before the run (estimates, advice); default: print to
            stderr. ``lambda s: None`` silences them.
        rosbag: Also write the log as a ROS 2 bag, ``trajectory.mcap``
            (:func:`quadsim.app.ros2.bag.write_bag`; needs the ``ros2`` extra).

    Returns:
        The summary (also written to ``summary.json``), with ``"files"`` listing what was
        written; ``"signal"`` names the signal that stopped an interrupted run.

    Raises:
        ValueError: Bad input: the scenario, the output directory, a missing prerequisite of a
            requested output, or a run that would not fit in memory.
    """
    echo = echo or (lambda s: print(s, file=sys.stderr))
    with echo_warnings(echo):
        sc = load_scenario(scenario)
    o = sc.values["output"]
    csv = o["csv"] if csv is None else csv
    plots = o["plots"] if plots is None else plots
    out = Path(out_dir) if out_dir is not None else default_out(scenario)
    preflight.check_outputs(plots=plots, animate=animate, csv=csv, rosbag=rosbag)
    if rosbag:
        check_part_messages(sc)
    for notice in check_run(sc):
        echo(notice)
    preflight.check_out_dir(out)
    with outdir.claim(out):
        preflight.check_no_killed_run(out)
        with echo_warnings(echo):
            objs = build(sc)
        sim = objs.sim
        total = max(1, round(objs.duration / sim.dt))
        opts = {"csv": bool(csv), "plots": bool(plots), "animate": animate}
        # the loop fly will run, in every part for `quadsim recover` (fly's meta corrects it at
        # the end if tracing fell back to the per-step loop)
        sens = objs.sensors
        name, reason = flight_loop(sim, objs.control, objs.gains, sensors=sens)
        periods = loop_periods(sim.dt, objs.gains, sens)
        loop = loop_meta(sim.dt, periods, sens, name, reason)
        run_meta = objs.meta | {"output": objs.meta["output"] | opts} | loop
        parts = PartWriter(out / PARTS, run_meta, flush_bytes=max(1, round(o["part_mb"] * 2**20)),
                           flush_seconds=o["part_seconds"],
                           before_first_part=lambda: outdir.set_aside(out, OUTPUTS))  # fmt: skip
        bar, update = _progress_bar(total, progress)
        on_chunk = chunk_writer(out, parts)
        with kept_on_failure(out):
            try:
                with echo_warnings(_beside(bar, echo), "default"):  # a fallback says so
                    result = fly_assembly(objs, log_every=o["log_every"], on_chunk=on_chunk,
                                          chunk_steps=o["chunk_steps"] or None, progress=update,
                                          keep_log=False, meta=run_meta)  # fmt: skip
            finally:
                if bar is not None:
                    bar.close()
                parts.flush()  # what the loop handed over is on disk before anything else
            summary = finish_run(out, result.meta, result.wall_time, result.interrupted,
                                 result.signal, parts.written)  # fmt: skip
            if rosbag and (out / "trajectory.parquet").exists():
                summary = _write_rosbag(out, summary, objs, periods, progress)
    return summary


def check_part_messages(sc: Any) -> None:
    """The ROS 2 messages a scenario's sensor parts declare, held to their types' definitions
    (:func:`quadsim.app.ros2.interfaces.check_parts`) before anything flies: ``quadsim fly
    --rosbag`` and ``quadsim ros2`` refuse a type quadsim does not know or a field an output
    cannot fill here, not when the bag is written after the flight.

    Raises:
        ValueError: ``FILE: sensors.<name> (line N): why``.
    """  # noqa: D205
    parts = sc.prepared.parts if sc.prepared is not None else ()
    if not parts:
        return
    dt = float(sc.values["sim"]["dt"])
    try:
        interfaces.check_parts(parts, dt, loop_periods(dt, None, Sensors(parts=parts)).parts)
    except interfaces.PartMessageError as e:
        raise failer(sc.source, sc.text)("sensors", e.part, e.why) from None


def loop_meta(dt: float, periods: Any, sens: Any, name: str, reason: str | None) -> dict:
    """The run metadata of the loop that flies a run (``quadsim fly``'s and ``quadsim ros2``'s).

    ``loop``, ``loop_reason``, ``rates_hz`` and, with sensor parts, ``columns``: their outputs'
    log columns (:func:`quadsim.loop.parts.log_columns`), which the log writer takes from the
    metadata of every part (:func:`quadsim.app.io.columns.declared_fields`), and
    ``part_params``: each part's kind, rate and parameters with their units and shapes
    (:func:`quadsim.loop.parts.part_params`; a vector's value as a list).

    Args:
        dt: The physics step [s].
        periods: The loop's periods (:func:`quadsim.loop.brain.loop_periods`).
        sens: The loop's :class:`~quadsim.loop.brain.Sensors`.
        name: The loop that runs (``"compiled"``, ``"ros2"``, ...).
        reason: Why it is that one, or ``None``.
    """
    meta = {"loop": name, "loop_reason": reason, "rates_hz": rates_hz(dt, periods, sens)}
    if sens.parts:
        meta["columns"] = log_columns(sens.parts)
        meta["part_params"] = part_params(sens.parts)
    return meta


def chunk_writer(out: Path, parts: Any) -> Any:
    """``write(chunk)`` for a run's log chunks into ``parts`` (a
    :class:`~quadsim.app.io.parts.PartWriter` that sets the earlier results of ``out`` aside
    before its first part), each stamped with the wall time since this call."""  # noqa: D205, D209
    t0 = time.perf_counter()

    def write(chunk: dict) -> None:
        parts.write(chunk, time.perf_counter() - t0)

    return write


@contextlib.contextmanager
def kept_on_failure(out: Path) -> Any:
    """A run that fails after it has started (a full disk, a bug) puts the earlier results back
    where it wrote none of its own, and an ``OSError`` says what of the run is kept and how to
    recover it."""  # noqa: D205, D209
    try:
        yield
    except BaseException as e:
        # its summary written and the earlier results gone: only what comes after failed
        finished = (out / "summary.json").exists() and not (out / outdir.PREVIOUS).exists()
        outdir.restore(out)
        if isinstance(e, OSError):
            n = len(part_files(out / PARTS))
            if n:
                e.add_note(f"kept: the {n} complete log part{'s' * (n != 1)} of this run in "
                           f"{out / PARTS}; `quadsim recover {out}` merges them (free some "
                           "space first if the disk is full)")  # fmt: skip
            elif finished:
                e.add_note(f"kept: this run's trajectory.parquet and summary.json in {out} are "
                           "complete; what failed was written after them")  # fmt: skip
            else:
                e.add_note(f"nothing of this run was logged; {out} holds what it held before")
        raise


def _write_rosbag(out: Path, summary: dict, objs: Any, periods: Any, progress: bool) -> dict:
    """``trajectory.mcap`` from ``trajectory.parquet``; the summary lists it."""
    from .ros2.bag import write_bag

    bar, update = _progress_bar(1, progress)
    if bar is not None:
        bar.set_description("writing the ROS 2 bag")

    def step(done: int, total: int) -> None:
        if bar is not None:
            bar.total = total
        update(done, total)

    try:
        write_bag(out / "trajectory.parquet", out / "trajectory.mcap",
                  parts=sensor_parts(objs.sensors), dt=float(objs.sim.dt),
                  periods=part_periods(periods, objs.sensors), progress=step)  # fmt: skip
    finally:
        if bar is not None:
            bar.close()
    summary["files"] = [*summary["files"], str(out / "trajectory.mcap")]
    io.write_summary(out / "summary.json", summary)
    return summary


@contextlib.contextmanager
def echo_warnings(echo: Any, action: str = "always") -> Any:
    """Warnings raised inside the block are shown through ``echo`` as they come, one line each
    (``quadsim: warning: ...``; no file, line or source: ``--quiet`` silences them with the rest);
    ``action`` is the filter (``"default"``: each place once)."""  # noqa: D205, D209

    def show(message: Any, *args: Any, **kw: Any) -> None:
        echo(f"quadsim: warning: {message}")

    with warnings.catch_warnings():
        warnings.simplefilter(action)  # type: ignore[arg-type]
        warnings.showwarning = show
        yield


def finish_run(
    out: Path, meta: dict, wall_time: float, interrupted: bool, signum: int | None,
    written: dict | None = None,
) -> dict:
    """Merge the parts, write the summary, then the figures (shared by fly, ros2 and recover).

    The earlier run's files are set aside first and deleted at the end
    (:mod:`quadsim.app.io.outdir`); the parts folder is removed once the summary is written, so a
    kill at any point leaves something ``quadsim recover`` finishes. Parts that cannot be read are
    skipped, kept in ``trajectory.damaged/`` and listed in the summary's ``damaged_parts`` with the
    gap each leaves in the log. ``written``: the tables this process wrote to the parts
    (:attr:`~quadsim.app.io.parts.PartWriter.written`), merged without reading them back.
    """
    outdir.set_aside(out, OUTPUTS)
    opts = meta.get("output", {})
    parquet = out / "trajectory.parquet"
    csv = out / "trajectory.csv" if opts.get("csv") else None
    want_head = opts.get("plots") or opts.get("animate")
    estimating = meta.get("estimator", "truth") not in ("truth", None)
    keep = int(opts.get("plot_drones", 4)) if want_head else (1 if estimating else 0)
    files: list[Path] = []
    head: dict = {}
    damaged: tuple = ()
    if part_files(out / PARTS):
        merged = merge_parts(out / PARTS, parquet, csv, t_from=float(opts.get("settle", 0.0)),
                             keep_drones=keep, written=written)  # fmt: skip
        summary = merged.summary.result(wall_time, interrupted, meta.get("faults"))
        head, damaged = merged.head, merged.damaged
        files += [parquet] + ([csv] if csv else [])
    else:  # stopped before the first chunk was complete
        summary = io.SummaryAccumulator(meta).result(wall_time, interrupted, meta.get("faults"))
    if summary.get("estimation") is not None and head:
        summary["estimation"] |= _relative_error(head, float(opts.get("settle", 0.0)))
    for key in ("loop", "loop_reason", "rates_hz"):  # what ran (the parts: what was expected)
        if key in meta:
            summary[key] = meta[key]
    if signum is not None:
        summary["signal"] = signal.Signals(signum).name
    if damaged:  # listed where remove_parts keeps them
        summary["damaged_parts"] = [
            {"file": str(out / DAMAGED / d.path.name), "reason": d.reason,
             "gap_after_s": d.after_s, "gap_before_s": d.before_s} for d in damaged]  # fmt: skip
    summary_path = out / "summary.json"
    files.append(summary_path)
    summary["files"] = [str(f) for f in files]
    io.write_summary(summary_path, summary)  # first, so a signal while plotting keeps it
    remove_parts(out / PARTS, damaged)
    if head and summary["n_samples"]:
        from . import plotting

        if opts.get("plots"):
            files += plotting.plot_all(
                head, meta, out, drones=range(head["pos"].shape[1]),
                t_from=float(opts.get("settle", 0.0)),
            )
        if opts.get("animate"):
            files.append(plotting.animate(head, meta, out / f"flight.{opts['animate']}"))
        summary["files"] = [str(f) for f in files]
        io.write_summary(summary_path, summary)
    outdir.discard(out)
    return summary


def damaged_warning(summary: dict) -> str | None:
    """The warning line for the parts a merge skipped (``None`` when none was)."""
    bad = summary.get("damaged_parts") or []
    if not bad:
        return None

    def gap(d: dict) -> str:
        a, b = d["gap_after_s"], d["gap_before_s"]
        return (f"from {'the start' if a is None else f'{a:.6g} s'} to "
                f"{'the end' if b is None else f'{b:.6g} s'}")  # fmt: skip

    items = "; ".join(f"{d['file']} ({d['reason']}; the log has a gap {gap(d)})" for d in bad)
    return (f"quadsim: warning: {len(bad)} damaged log part{'s' * (len(bad) != 1)} skipped, "
            f"every other part merged: {items}")  # fmt: skip


def _relative_error(head: dict, t_from: float) -> dict:
    """``rte_1m_m``: the mean translation error [m] over 1 m of travel (Zhang and Scaramuzza's
    relative error, :func:`quadsim.app.analysis.rte`) of the drones in ``head`` from
    ``t_from`` on, and ``rte_drones``; ``None`` when no drone travelled 1 m."""  # noqa: D205, D209
    import numpy as np

    from .analysis import rte

    if "est_quat" not in head:
        return {"rte_1m_m": None, "rte_drones": 0}
    m = np.asarray(head["time"]) >= t_from
    errs = []
    for d in range(head["pos"].shape[1]):
        args = [np.asarray(head[k], np.float64)[m, d] for k in ("est_pos", "pos", "est_quat",
                                                                 "quat")]  # fmt: skip
        if not all(np.all(np.isfinite(a)) for a in args) or len(args[0]) < 2:
            continue
        try:
            res = rte(*args, segment_lengths=(1.0,))[1.0]
        except ValueError:
            continue
        if res.trans.count:
            errs.append(res.trans_errors)
    if not errs:
        return {"rte_1m_m": None, "rte_drones": 0}
    return {"rte_1m_m": float(np.mean(np.concatenate(errs))), "rte_drones": len(errs)}


def recover(out_dir: str | os.PathLike[str], plots: bool = True) -> dict | None:
    """Rebuild ``trajectory.parquet`` and ``summary.json`` of a run that was killed.

    Merges the complete part files a killed ``quadsim fly`` or ``quadsim ros2`` left in
    ``out_dir`` (the chunk in flight when it died is lost; a damaged part is skipped, kept in
    ``trajectory.damaged/`` and named in the summary's ``damaged_parts``) and writes the summary
    marked interrupted and recovered, and the figures (``plots``) the run asked for.

    Returns:
        The summary, or ``None`` when the run had finished (nothing to recover).

    Raises:
        ValueError: If ``out_dir`` holds no quadsim run, is being written by a run that is
            still going (:class:`~quadsim.app.io.outdir.FolderBusyError`), or no part can be read.
    """
    out = Path(out_dir)
    if not out.is_dir():
        raise ValueError(f"{out}: not a directory")
    with outdir.claim(out, f"quadsim recover {out}"):
        if not part_files(out / PARTS):
            if (out / "summary.json").is_file():
                missing = _missing_outputs(out)
                if missing:
                    raise ValueError(f"{out}: nothing to recover: the run finished, but "
                                     f"{', '.join(missing)} listed in its summary.json "
                                     f"{'is' if len(missing) == 1 else 'are'} missing")  # fmt: skip
                return None
            raise ValueError(f"{out}: no quadsim run here (no {PARTS}/ and no summary.json)")
        meta, record = read_part_meta(out / PARTS)
        if not plots:
            meta["output"] = {**meta.get("output", {}), "plots": False, "animate": None}
        with kept_on_failure(out):
            summary = finish_run(out, meta, float(record["wall_time_s"]), True, None)
            summary["recovered"] = True
            io.write_summary(out / "summary.json", summary)
    return summary


def _missing_outputs(out: Path) -> list[str]:
    """The files a finished run's ``summary.json`` lists that are not there (by name)."""
    import json

    try:
        listed = json.loads((out / "summary.json").read_text()).get("files") or []
    except (OSError, ValueError, AttributeError):
        return []
    return [Path(f).name for f in listed
            if isinstance(f, str) and not (out / Path(f).name).exists()]  # fmt: skip


def exit_code(summary: dict) -> int:
    """0 completed, 1 a crash or a diverged drone, 128 + signal number when a signal stopped the
    run."""  # noqa: D205, D209
    name = summary.get("signal")
    if name:
        return 128 + int(signal.Signals[name])
    if summary.get("interrupted"):
        return 128 + int(signal.SIGINT)
    return 1 if summary.get("crash_count", 0) or summary.get("fault_count", 0) else 0


def failure_lines(summary: dict, most: int = 10) -> list[str]:
    """The stderr lines of a run that exits 1: each diverged drone (the first ``most``), then
    the crashes."""  # noqa: D205, D209
    n, faults = summary.get("n_drones"), summary.get("faults") or []
    lines = [f"quadsim: drone {f['drone']} diverged: {f['quantity']} at step {f['step']} "
             f"(t = {f['time_s']:.6g} s); frozen there and left out of the metrics"
             for f in faults[:most]]  # fmt: skip
    if len(faults) > most:
        lines.append(f"quadsim: ... {len(faults) - most} more of {n} drones diverged; "
                     "summary.json lists them all (faults)")  # fmt: skip
    if summary.get("crash_count"):
        first = summary["crashes"][0]
        lines.append(f"quadsim: {summary['crash_count']} of {n} drones crashed (first: drone "
                     f"{first['drone']} at {first['time_s']:.4g} s); see the summary")  # fmt: skip
    return lines
