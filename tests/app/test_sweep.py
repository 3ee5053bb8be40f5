"""``quadsim sweep`` (issue 14): the runs a sweep file defines, bad input, results that do not
depend on the executor, the workers or interruptions, and a worker killed mid-task."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from sweep_helpers import BASE, GRID, PY, SLOW, children, cli_sweep, results_bytes, sweep_files

from quadsim.app.sweep.spec import load_sweep, make_runs
from quadsim.app.sweep.tasks import plan, run_task, task_seed, write_rows


def test_runs_of_a_grid_and_of_samples(tmp_path):
    sw = load_sweep(sweep_files(tmp_path, GRID, head="replicates = 2\nseed = 5"))
    runs = make_runs(sw)
    assert len(runs) == 3 * 2 * 2
    # the last axis fastest, replicates innermost; run = point * replicates + replicate
    assert [r.values["trajectory.period"] for r in runs[:4]] == [3.0, 3.0, 5.0, 5.0]
    assert [r.values["drone.mass"] for r in runs[::4]] == [0.029, 0.032, 0.035]
    assert all(r.run == r.point * 2 + r.replicate for r in runs)
    # two structures (the period), mass varies per drone: 2 tasks of 6 runs
    tasks = plan(sw, runs, tmp_path / "out")
    assert [len(t["runs"]) for t in tasks] == [6, 6]
    assert tasks[0]["runs"] == [0, 1, 4, 5, 8, 9]
    assert tasks[0]["seed"] == task_seed(5, 0) != tasks[1]["seed"]
    # Latin hypercube: each of the n strata of each axis holds exactly one sample
    axes = '"drone.mass" = { low = 0.03, high = 0.034 }\n"wind.mean" = { low = [0.0, 0.0, 0.0], ' \
        'high = [2.0, 1.0, 0.0] }'
    lhs = load_sweep(sweep_files(tmp_path, axes, head='method = "lhs"\nsamples = 20\nseed = 1'))
    runs = make_runs(lhs)
    m = np.array([r.values["drone.mass"] for r in runs])
    assert sorted(np.floor((m - 0.03) / 0.004 * 20).astype(int)) == list(range(20))
    w = np.array([r.values["wind.mean"] for r in runs])
    assert np.all((w[:, 0] >= 0) & (w[:, 0] <= 2) & (w[:, 2] == 0))
    assert make_runs(lhs) == runs  # the same seed, the same samples
    rnd = load_sweep(sweep_files(tmp_path, axes, head='method = "random"\nsamples = 5\nseed = 1'))
    assert [r.values for r in make_runs(rnd)] != [r.values for r in runs[:5]]


@pytest.mark.parametrize(
    ("axes", "head", "msg"),
    [
        ('"drone.weight" = [1.0]', "", "unknown scenario key 'drone.weight'"),
        ('"drone.mass" = []', "", "at least one value"),
        ('"drone.mass" = { low = 0.03, high = 0.04 }', "", "a grid needs values"),
        ('"drone.mass" = [0.03, -0.01]', "", "run 1: drone.mass = -0.01: must be positive"),
        ('"trajectory.period" = [4.0, -2.0]', "replicates = 2",
         "run 2: trajectory.period"),
        ('"drone.inertia" = [[1.68e-05, 1.68e-05, 2.98e-05], [1e-5, 1e-5, 9e-5]]', "",
         "run 1: drone.inertia"),
        ('"sim.dt" = ["fast"]', "", "is not a number"),
        ('"drone.mass" = [0.03]', 'method = "lhs"', "needs samples"),
    ],
)  # fmt: skip
def test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path, axes, head, msg):
    sweep = sweep_files(tmp_path, axes, head=head)
    r = cli_sweep([str(sweep), "--out", str(tmp_path / "out"), "--quiet"])
    assert r.returncode == 2, r.stderr
    assert msg in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def _need_ray() -> None:
    """Skip without Ray, without importing it here (its import sets environment variables)."""
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        pytest.skip("needs Ray: pip install 'quadsim[ray]'")


def test_an_unreachable_ray_address_exits_2(tmp_path):
    _need_ray()
    sweep = sweep_files(tmp_path, GRID)
    r = cli_sweep([str(sweep), "--out", str(tmp_path / "out"), "--ray", "127.0.0.1:1"], timeout=60)
    assert r.returncode == 2 and "cannot reach 127.0.0.1:1" in r.stderr
    assert not (tmp_path / "out").exists()


def test_results_do_not_depend_on_the_workers_and_match_fly(tmp_path):
    """1 and 2 local workers give the same bytes; each run's row is the per-drone summary of
    ``fly`` on the task's scenario (n = its runs, seed = its seed), computed independently."""
    from quadsim.app.io import SummaryAccumulator
    from quadsim.app.scenario import build, load_scenario
    from quadsim.loop.flight import fly

    sweep = sweep_files(tmp_path, '"trajectory.period" = [3.0, 5.0]',
                        head="replicates = 3\nseed = 2")  # fmt: skip
    for w in ("1", "2"):
        r = cli_sweep([str(sweep), "--out", str(tmp_path / f"w{w}"), "--workers", w, "--quiet"])
        assert r.returncode == 0, r.stderr
    assert results_bytes(tmp_path / "w1") == results_bytes(tmp_path / "w2")
    import pyarrow.parquet as pq

    res = pq.read_table(tmp_path / "w1" / "results.parquet").to_pydict()
    assert res["run"] == list(range(6)) and all(e is None for e in res["error"])
    # task 1: period 5.0, runs 3, 4, 5 (its lanes 0, 1, 2)
    text = BASE.format(duration=1.0, backend="native").replace("period = 4.0", "period = 5.0")
    text = text.replace("seed = 0", f"seed = {task_seed(2, 1)}\nn = 3")
    objs = build(load_scenario(text, text=True))
    acc = SummaryAccumulator(objs.meta)
    fly(objs.sim, objs.trajectory, objs.control, objs.gains, duration=objs.duration,
        sensors=objs.sensors, seed=objs.seed, log_every=5, on_chunk=acc.add, keep_log=False)
    per = acc.result(0.0)["per_drone"]
    for lane, run in enumerate((3, 4, 5)):
        assert res["tracking_rms_m"][run] == per[lane]["tracking_rms_m"]
        assert res["max_tilt_deg"][run] == per[lane]["max_tilt_deg"]
    # the replicates differ (their own IMU noise and gusts)
    assert len({res["tracking_rms_m"][k] for k in (3, 4, 5)}) == 3


def test_body_rates_vary_per_drone_in_one_simulation_as_fly_flies_them(tmp_path):
    """``initial.ang_vel`` is a per-drone axis (one batched simulation): each lane flies as
    ``fly`` flies the scenario with that start (still air, no sensors: nothing random)."""
    import pyarrow.parquet as pq

    from quadsim.app.io import SummaryAccumulator
    from quadsim.app.scenario import build, load_scenario
    from quadsim.loop.flight import fly

    base = BASE.format(duration=1.0, backend="native")
    base = base.split("[wind]")[0] + "[output]\nlog_every = 5\nplots = false\n"
    (tmp_path / "base.toml").write_text(base)
    sweep = tmp_path / "sweep.toml"
    sweep.write_text('base = "base.toml"\n[axes]\n'
                     '"initial.ang_vel" = [[0.0, 0.0, 0.0], [8.0, 0.0, 0.0]]\n')
    r = cli_sweep([str(sweep), "--out", str(tmp_path / "out"), "--quiet"])
    assert r.returncode == 0, r.stderr
    res = pq.read_table(tmp_path / "out" / "results.parquet").to_pydict()
    assert res["task"] == [0, 0] and res["lane"] == [0, 1]
    text = base.replace("[sim]", "[initial]\nang_vel = [8.0, 0.0, 0.0]\n[sim]")
    objs = build(load_scenario(text, text=True))
    acc = SummaryAccumulator(objs.meta)
    fly(objs.sim, objs.trajectory, objs.control, objs.gains, duration=objs.duration,
        seed=objs.seed, log_every=5, on_chunk=acc.add, keep_log=False)
    one = acc.result(0.0)["per_drone"][0]
    assert res["max_tilt_deg"][1] == pytest.approx(one["max_tilt_deg"], rel=1e-9)
    assert res["max_tilt_deg"][1] > res["max_tilt_deg"][0] + 5.0  # the thrown one tilts


def test_a_failed_task_is_recorded_and_the_rest_goes_on(tmp_path):
    from quadsim.app.sweep.run import collect

    sw = load_sweep(sweep_files(tmp_path, GRID))
    runs = make_runs(sw)
    tasks = plan(sw, runs, tmp_path / "out")
    tasks[1]["doc"]["trajectory"]["kind"] = "zigzag"  # fails in the worker
    results = [run_task(t) for t in tasks]
    assert results[0]["error"] is None and "zigzag" in results[1]["error"]
    for t, res in zip(tasks, results, strict=True):
        write_rows(res["table"], Path(t["out"]))
    table = collect(sw, runs, tasks, tmp_path / "out")
    bad = set(tasks[1]["runs"])
    for k in range(len(runs)):
        assert (table["error"][k] is not None) == (k in bad)
        assert (table["tracking_rms_m"][k] is None) == (k in bad)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The slow sweep (NumPy backend, three tasks of about 2.5 s) run straight through."""
    tmp = tmp_path_factory.mktemp("ref")
    sweep = sweep_files(tmp, SLOW, duration=4.0, backend="numpy", head="replicates = 2")
    r = cli_sweep([str(sweep), "--out", str(tmp / "out"), "--workers", "2", "--quiet"])
    assert r.returncode == 0, r.stderr
    return results_bytes(tmp / "out")


def test_sigterm_mid_sweep_then_the_same_command_resumes(tmp_path, reference):
    sweep = sweep_files(tmp_path, SLOW, duration=4.0, backend="numpy", head="replicates = 2")
    args = [str(sweep), "--out", str(tmp_path / "out"), "--workers", "1"]
    proc = subprocess.Popen([PY, "-m", "quadsim.app.cli", "sweep", *args, "--quiet"],
                            stderr=subprocess.PIPE, text=True)
    tasks = tmp_path / "out" / "tasks"
    end = time.monotonic() + 120
    while not (tasks.exists() and list(tasks.glob("*.parquet"))):
        assert proc.poll() is None and time.monotonic() < end
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    err = proc.communicate(timeout=60)[1]
    assert proc.returncode == 143, err
    assert "interrupted (SIGTERM)" in err and "Traceback" not in err
    assert not (tmp_path / "out" / "results.parquet").exists()
    assert not list(tasks.glob("*.partial*"))
    done = len(list(tasks.glob("*.parquet")))
    assert 1 <= done < 3
    r = cli_sweep([*args])
    assert r.returncode == 0, r.stderr
    assert f"resuming: {done} of 3 tasks already done" in r.stderr
    assert results_bytes(tmp_path / "out") == reference


def test_a_local_worker_killed_mid_task_is_retried(tmp_path, reference):
    sweep = sweep_files(tmp_path, SLOW, duration=4.0, backend="numpy", head="replicates = 2")
    proc = subprocess.Popen([PY, "-m", "quadsim.app.cli", "sweep", str(sweep), "--out",
                             str(tmp_path / "out"), "--workers", "2", "--quiet"],
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    end = time.monotonic() + 120
    while not (kids := children(proc.pid, "spawn_main")):
        assert proc.poll() is None and time.monotonic() < end
        time.sleep(0.05)
    time.sleep(1.5)  # importing, compiling or flying its first task
    os.kill(kids[0], signal.SIGKILL)
    err = proc.communicate(timeout=300)[1]
    assert proc.returncode == 0, err
    assert results_bytes(tmp_path / "out") == reference


def test_ray_gives_the_local_results_and_retries_a_killed_worker(tmp_path, reference):
    """A real local Ray (2 CPUs, started by quadsim on 127.0.0.1): the same bytes as the local
    executor, also when a worker is killed while it runs a task. ``--ray`` alone starts its own
    Ray even where another is announced (``RAY_ADDRESS``, here an unreachable one)."""
    _need_ray()
    sweep = sweep_files(tmp_path, SLOW, duration=4.0, backend="numpy", head="replicates = 2")
    env = dict(os.environ, RAY_ADDRESS="127.0.0.1:1")
    proc = subprocess.Popen([PY, "-m", "quadsim.app.cli", "sweep", str(sweep), "--out",
                             str(tmp_path / "out"), "--workers", "2", "--ray", "--quiet"],
                            stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip
    end = time.monotonic() + 180
    while not (busy := children(-1, "ray::_run")):
        assert proc.poll() is None and time.monotonic() < end, proc.stderr.read()
        time.sleep(0.05)
    os.kill(busy[0], signal.SIGKILL)
    err = proc.communicate(timeout=300)[1]
    assert proc.returncode == 0, err
    assert results_bytes(tmp_path / "out") == reference
    meta = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert meta["runs"] == 6 and meta["tasks"] == 3


def test_trajectories_are_kept_per_task_by_structural_axis(tmp_path):
    import pyarrow.parquet as pq

    sweep = sweep_files(tmp_path, GRID)
    r = cli_sweep([str(sweep), "--out", str(tmp_path / "out"), "--trajectories", "2", "--quiet"])
    assert r.returncode == 0, r.stderr
    files = sorted((tmp_path / "out" / "runs").rglob("*.parquet"))
    assert [f.parent.name for f in files] == ["trajectory.period=3.0", "trajectory.period=5.0"]
    t = pq.read_table(files[0]).to_pydict()
    assert sorted(set(t["run"])) == [0, 2, 4]  # the runs of period 3.0
    times = sorted(set(t["time"]))
    # 1 s at 500 Hz logged every 5th step (100 Hz), every 2nd sample kept: 50 Hz
    assert np.allclose(np.diff(times), 0.02) and len(times) >= 50
    assert {"x", "y", "z", "qw", "vx", "ref_x"} <= set(t)
    # the plots: a heat map of the two grid axes per metric
    assert (tmp_path / "out" / "tracking_rms_m.png").stat().st_size > 5000
