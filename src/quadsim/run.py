"""``quadsim fly``: a scenario file in, a directory of results out.

Writes ``trajectory.parquet`` (streamed chunk by chunk; a Ctrl-C keeps every completed chunk),
optionally ``trajectory.csv``, ``summary.json``, the PNG figures and, on request, an animation.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["fly_scenario"]


def _progress_bar(total: int, enabled: bool) -> Any:
    if not enabled:
        return None, lambda done, total: None
    from tqdm import tqdm

    bar = tqdm(total=total, unit="step", desc="flying", leave=False, dynamic_ncols=True)

    def update(done: int, total: int) -> None:
        bar.update(done - bar.n)

    return bar, update


def fly_scenario(
    scenario: str | os.PathLike[str],
    out_dir: str | os.PathLike[str] | None = None,
    *,
    csv: bool | None = None,
    plots: bool | None = None,
    animate: str | None = None,
    progress: bool = True,
) -> dict:
    """Run a scenario file and write its outputs.

    Args:
        scenario: Path of the scenario TOML file.
        out_dir: Output directory (default ``runs/<scenario stem>``); created if needed.
        csv: Also write ``trajectory.csv`` (default: the scenario's ``output.csv``).
        plots: Write the PNG figures (default: the scenario's ``output.plots``).
        animate: ``None``, or ``"gif"`` / ``"mp4"`` for an animation of drone 0.
        progress: Show a progress bar.

    Returns:
        The summary (also written to ``summary.json``), with ``"files"`` listing what was written.
    """
    from . import io
    from .flight import fly
    from .scenario import build, load_scenario

    sc = load_scenario(scenario)
    out = Path(out_dir) if out_dir is not None else Path("runs") / Path(scenario).stem
    out.mkdir(parents=True, exist_ok=True)
    objs = build(sc)
    o = objs["output"]
    csv = o["csv"] if csv is None else csv
    plots = o["plots"] if plots is None else plots
    sim = objs["sim"]
    total = max(1, round(objs["duration"] / sim.dt))
    meta = {
        "scenario": str(scenario),
        "name": sc.values[""]["name"] or Path(scenario).stem,
        "controller": sc.values["controller"]["kind"],
        "trajectory": sc.values["trajectory"]["kind"],
        "seed": sc.values[""]["seed"],
    }
    parquet = out / "trajectory.parquet"
    files = [parquet]
    bar, update = _progress_bar(total, progress)
    run_meta = {
        **meta,
        "dt": sim.dt,
        "n": sim.n,
        "drone": sim.drone.name,
        "n_rotors": int(sim.drone.mixing_matrix.shape[1]),
        "rotor_positions": sim.drone.rotor_positions.tolist(),
        "rpm_min": float(sim.drone.rpm_min),
        "rpm_max": float(sim.drone.rpm_max),
        "duration": total * sim.dt,
    }
    with io.LogWriter(parquet, run_meta, csv_path=out / "trajectory.csv" if csv else None) as w:
        try:
            result = fly(
                sim,
                objs["trajectory"],
                objs["control"],
                objs["gains"],
                duration=objs["duration"],
                ref_offset=objs["ref_offset"],
                imu=objs["imu"],
                mocap=objs["mocap"],
                rng=objs["rng"],
                log_every=o["log_every"],
                chunk_steps=o["chunk_steps"],
                on_chunk=w.write,
                progress=update,
                meta=run_meta,
            )
        finally:
            if bar is not None:
                bar.close()
    if csv:
        files.append(out / "trajectory.csv")
    log = result.log
    summary = (
        io.summarize(
            log, result.meta, result.wall_time, interrupted=result.interrupted, t_from=o["settle"]
        )
        if log
        else {"interrupted": True, "samples": 0}
    )
    summary_path = out / "summary.json"
    files.append(summary_path)
    summary["files"] = [str(f) for f in files]
    io.write_summary(summary_path, summary)  # first, so a Ctrl-C while plotting keeps it
    if plots and log:
        from . import plotting

        drones = range(min(sim.n, o["plot_drones"]))
        files += plotting.plot_all(log, result.meta, out, drones=drones)
    if animate and log:
        from . import plotting

        files.append(plotting.animate(log, result.meta, out / f"flight.{animate}"))
    summary["files"] = [str(f) for f in files]
    io.write_summary(summary_path, summary)
    return summary
