r"""A sweep's tasks: runs of one structure batched into one simulator, and running one.

**Plan** (:func:`plan`). Runs whose structural axes (every axis not in
:data:`~quadsim.app.sweep.spec.PER_DRONE`) have the same values share a structure; in run order,
each structure's runs are cut into tasks of at most ``batch`` runs. A task is one scenario with
``n`` = its runs, flown as one batched simulation (the compiled closed loop), its per-drone axes
(mass, inertia, start) set drone by drone; a formation of the base scenario
(``randomize.spacing``) is dropped, each run being a flight of its own. Task ``t`` has the seed
``SeedSequence([sweep seed, t])`` and run ``i`` of it is its drone (lane) ``i``: every random
number of a run (sensor noise, gusts, the base scenario's randomisation) is keyed by the sweep
seed and the run index alone, whatever executes the tasks and however many workers there are.

**Run** (:func:`run_task`, in a worker). The task's scenario is validated and built
(:func:`quadsim.app.scenario.validate_doc`, :func:`~quadsim.app.scenario.build`), flown by
:func:`quadsim.loop.flight.fly` without keeping the log, and each chunk is folded into
:class:`quadsim.app.io.SummaryAccumulator`, whose per-drone metrics are the runs' rows. The rows go
back to the driver as Arrow IPC bytes, which writes them to ``tasks/<task>.parquet`` (temporary
name, then renamed: on disk whole or not at all),
and with ``--trajectories`` the decimated log to ``runs/<axis>=<label>/.../<task>.parquet``
(:func:`~quadsim.app.sweep.spec.value_label`; every path checked by :func:`plan` before anything
flies; written by the worker: on a cluster, ``DIR`` must then be on storage the workers share). A
task that fails records its error on each of its runs.
"""

from __future__ import annotations

import json
import os
import traceback
from pathlib import Path
from typing import Any

import numpy as np

from ...physics.params import PhysicalError, check_physical
from ..io import SummaryAccumulator
from ..io.files import atomic_write
from ..scenario import build, fly_assembly, validate_doc
from ..scenario.initial import check_start
from ..scenario.locations import failer
from ..scenario.schema import SCHEMA, type_ok
from .spec import PER_DRONE, Run, Sweep, set_key, value_label

__all__ = ["METRICS", "plan", "prepare", "run_task", "task_seed"]

METRICS = (
    ("tracking_rms_m", "float64"),
    ("tracking_max_m", "float64"),
    ("max_tilt_deg", "float64"),
    ("saturation_time_s", "float64"),
    ("crashed", "bool"),
    ("crash_time_s", "float64"),
)
"""The per-run metrics of ``results.parquet`` (from :class:`quadsim.app.io.SummaryAccumulator`)."""


def task_seed(sweep_seed: int, task: int) -> int:
    """The scenario seed of task ``task``: ``SeedSequence([sweep_seed, task])``, 31 bits."""
    return int(np.random.SeedSequence([sweep_seed, task]).generate_state(1)[0] & 0x7FFFFFFF)


def plan(sw: Sweep, runs: list[Run], out: Path, trajectories: int = 0) -> list[dict]:
    """The tasks (module docstring), each a plain dict a worker can take (picklable)."""
    groups: dict[str, list[Run]] = {}
    for r in runs:
        struct = {k: v for k, v in r.values.items() if k not in PER_DRONE}
        groups.setdefault(json.dumps(struct, sort_keys=True), []).append(r)
    blocks = [
        (key, rs[i : i + sw.batch])
        for key, rs in groups.items()
        for i in range(0, len(rs), sw.batch)
    ]
    blocks.sort(key=lambda b: b[1][0].run)
    tasks = []
    for t, (key, rs) in enumerate(blocks):
        struct = json.loads(key)
        doc = sw.base_doc
        for k, v in struct.items():
            doc = set_key(doc, k, v)
        if doc.get("randomize", {}).get("spacing"):  # each run is its own flight
            doc = set_key(doc, "randomize.spacing", 0.0)
        doc = set_key(doc, "n", len(rs))
        doc = set_key(doc, "seed", task_seed(sw.seed, t))
        name = f"task-{t:06d}"
        part = None
        if trajectories:
            part = "/".join(f"{k}={value_label(v)}" for k, v in struct.items()) or "all"
            _check_path(out / "runs" / part / f"{name}.parquet", sw, rs[0].run)
        tasks.append(
            {
                "index": t,
                "name": name,
                "doc": doc,
                "where": f"{sw.path}: run {rs[0].run}",
                "base_dir": str(sw.base.parent),
                "runs": [r.run for r in rs],
                "per_drone": {k: [r.values[k] for r in rs] for k in PER_DRONE if k in rs[0].values},
                "seed": task_seed(sw.seed, t),
                "out": str(out / "tasks" / f"{name}.parquet"),
                "trajectories": int(trajectories),
                "traj_out": str(out / "runs" / part / f"{name}.parquet") if part else None,
            }
        )
    return tasks


NAME_MAX = 255
"""Longest file or folder name [bytes] (Linux file systems)."""

PATH_MAX = 4000
"""Longest path [bytes] (Linux allows 4096 with the terminating NUL; a margin for ``.tmp``)."""


def _check_path(path: Path, sw: Sweep, run: int) -> None:
    """A trajectory file's path must be one the file system takes (checked before flying)."""
    name = next((p for p in path.parts if len(p.encode()) > NAME_MAX), None)
    size = len(str(path.absolute()).encode())
    if name is not None or size > PATH_MAX:
        what = (
            f"the name {name[:40]!r}... is {len(name.encode())} bytes (at most {NAME_MAX})"
            if name
            else f"the path is {size} bytes (at most {PATH_MAX})"
        )
        shown = str(path) if len(str(path)) <= 120 else f"{str(path)[:117]}..."
        raise ValueError(f"{sw.path}: --trajectories: the file of run {run}, {shown}: {what}; "
                         "use a shorter --out or fewer structural axes")  # fmt: skip


def _check_per_drone(task: dict) -> None:
    """Type and range of the per-drone values, as the scenario checks them (run and value)."""
    for key, vals in task["per_drone"].items():
        section, _, k = key.rpartition(".")
        spec = SCHEMA[section][k]
        for run, v in zip(task["runs"], vals, strict=True):
            bad = None
            if not type_ok(spec.type, v):
                bad = "wrong type"
            elif not np.all(np.isfinite(np.asarray(v, dtype=float))):
                bad = "not finite"
            elif spec.positive and not np.all(np.asarray(v, dtype=float) > 0):
                bad = "must be positive"
            if bad:
                raise ValueError(
                    f"{task['where'].rsplit(': run', 1)[0]}: run {run}: {key} = {v!r}: {bad}"
                )


def prepare(task: dict) -> Any:
    """The task's validated scenario with its per-drone axes set (before building).

    Raises:
        ValueError: A value the scenario rejects, naming the sweep file, the run and the value.
    """
    cwd = os.getcwd()
    os.chdir(task["base_dir"])  # the base scenario's relative paths
    try:
        sc = validate_doc(task["doc"], task["where"])
    finally:
        os.chdir(cwd)
    _check_per_drone(task)
    v, prep = sc.values, sc.prepared
    init = dict(prep.initial)
    pd = task["per_drone"]
    per = dict(init["per_drone"])
    if "drone.mass" in pd:
        per["mass"] = np.asarray(pd["drone.mass"], dtype=np.float64)
    if "drone.inertia" in pd:
        per["J"] = np.stack([np.diag(np.asarray(j, dtype=np.float64)) for j in pd["drone.inertia"]])
    n = len(task["runs"])
    where = task["where"].rsplit(": run", 1)[0]
    try:
        check_physical(per)
    except PhysicalError as e:
        i = e.index[0] if e.index else 0
        key = {"J": "drone.inertia", "mass": "drone.mass"}.get(e.key, e.key)
        raise ValueError(
            f"{where}: run {task['runs'][i]}: {key} = {pd.get(key, ['?'] * n)[i]!r}: {e.reason}"
        ) from None
    ini = v["initial"]
    if "initial.pos" in pd:
        init["pos"] = (
            np.asarray(init["pos"])
            - np.asarray(init["base"])
            + np.asarray(pd["initial.pos"], dtype=np.float64)
        )
    if "initial.vel" in pd:
        init["vel"] = (
            np.asarray(init["vel"])
            - np.asarray(ini["vel"])
            + np.asarray(pd["initial.vel"], dtype=np.float64)
        )
    if "initial.rpy_deg" in pd:
        init["rpy"] = np.asarray(init["rpy"]) + np.deg2rad(
            np.asarray(pd["initial.rpy_deg"], dtype=np.float64) - np.asarray(ini["rpy_deg"])
        )
    if "initial.ang_vel" in pd:
        init["ang_vel"] = np.asarray(pd["initial.ang_vel"], dtype=np.float64)
    init["per_drone"] = per
    try:
        check_start(v, prep.world, init, failer(where, ""))
    except ValueError as e:
        raise ValueError(f"{e} (runs {task['runs'][0]}..{task['runs'][-1]})") from None
    return sc._replace(prepared=prep._replace(initial=init))


def run_task(task: dict) -> dict:
    """Fly one task and write its rows (module docstring); returns ``{"name", "rows", "error"}``.

    Never raises for a failing simulation: the error is recorded on the task's runs.
    """
    error = None
    per: list[dict] = []
    traj: list[dict] = []
    try:
        sc = prepare(task)
        cwd = os.getcwd()
        os.chdir(task["base_dir"])
        try:
            objs = build(sc)
        finally:
            os.chdir(cwd)
        o = objs.output
        acc = SummaryAccumulator(objs.meta, t_from=float(o["settle"]))
        every = int(task["trajectories"])
        keep = ("time", "pos", "quat", "vel", "ref_pos")

        def on_chunk(chunk: dict) -> None:
            acc.add(chunk)
            if every:
                traj.append({k: np.asarray(chunk[k])[::every] for k in keep if k in chunk})

        res = fly_assembly(objs, log_every=o["log_every"], chunk_steps=o["chunk_steps"] or None,
                           on_chunk=on_chunk, keep_log=False, meta=objs.meta)
        if res.interrupted:
            raise KeyboardInterrupt
        per = acc.result(0.0)["per_drone"]
    except KeyboardInterrupt:
        raise
    except Exception as e:
        error = f"{type(e).__name__}: {e}".splitlines()[0][:500]
        if os.environ.get("QUADSIM_SWEEP_DEBUG"):
            traceback.print_exc()
    if traj and task["traj_out"]:
        _write_traj(task, traj, Path(task["traj_out"]))
    return {
        "name": task["name"],
        "rows": len(task["runs"]),
        "error": error,
        "table": rows_ipc(task_rows(task, per, error)),
    }


def task_rows(task: dict, per: list[dict], error: str | None) -> dict[str, list]:
    """The result rows of a task's runs, by column.

    Run, task, lane and seed, the metrics of :data:`METRICS` (all ``None`` when the task failed
    with ``error``) and the error.
    """
    n = len(task["runs"])
    rows: dict[str, list] = {
        "run": list(task["runs"]),
        "task": [task["index"]] * n,
        "lane": list(range(n)),
        "seed": [task["seed"]] * n,
    }
    for key, _ in METRICS:
        if error is not None:
            rows[key] = [None] * n
        elif key == "crashed":
            rows[key] = [p["crash_time_s"] is not None for p in per]
        else:
            rows[key] = [
                None if p.get(key) is None or not np.isfinite(p[key]) else float(p[key])
                for p in per
            ]
    rows["error"] = [error] * n
    return rows


def write_parquet_atomic(table: Any, path: Path) -> None:
    """Write a pyarrow ``table`` to the Parquet file ``path`` atomically and durably."""
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda tmp: pq.write_table(table, tmp), durable=True)


def _table(rows: dict[str, list]) -> Any:
    import pyarrow as pa

    types = {
        "run": pa.int64(),
        "task": pa.int64(),
        "lane": pa.int64(),
        "seed": pa.int64(),
        "error": pa.string(),
        **{k: pa.bool_() if t == "bool" else pa.float64() for k, t in METRICS},
    }
    return pa.table({k: pa.array(v, type=types[k]) for k, v in rows.items()})


def rows_ipc(rows: dict[str, list]) -> bytes:
    """A task's rows as Arrow IPC bytes (what a worker sends back: a few hundred bytes a run)."""
    import pyarrow as pa

    table = _table(rows)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def write_rows(ipc: bytes, path: Path) -> None:
    """Write a task's rows (:func:`rows_ipc`) to ``tasks/<task>.parquet``, whole or not at all."""
    import pyarrow as pa

    write_parquet_atomic(pa.ipc.open_stream(ipc).read_all(), path)


def _write_traj(task: dict, chunks: list[dict], path: Path) -> None:
    """The decimated log of the task's runs: one row per sample and run."""
    import pyarrow as pa

    cat = {k: np.concatenate([c[k] for c in chunks]) for k in chunks[0]}
    t = cat.pop("time")
    n_t, n = t.shape[0], len(task["runs"])
    cols: dict[str, Any] = {"time": np.repeat(t, n), "run": np.tile(task["runs"], n_t)}
    names = {
        "pos": "xyz",
        "vel": ("vx", "vy", "vz"),
        "quat": ("qx", "qy", "qz", "qw"),
        "ref_pos": ("ref_x", "ref_y", "ref_z"),
    }
    for key, arr in cat.items():
        for j, c in enumerate(names[key]):
            cols[c] = arr[:, :, j].reshape(-1)
    write_parquet_atomic(pa.table(cols), path)
