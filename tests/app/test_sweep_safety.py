"""``quadsim sweep`` loses nothing, mixes nothing, leaves nothing behind (issue 27): workers die
with the sweep, one sweep per folder, a resume refuses changed input files, huge sweeps are
refused before anything is made, every malformed file exits 2 with its key and line, trajectory
partitions are short and stable, plots of many rows are quick."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from signal_helpers import child_command
from sweep_helpers import PY, SLOW, children, cli_sweep, results_bytes, sweep_files

from quadsim.app.sweep.spec import load_sweep, make_runs
from quadsim.app.sweep.tasks import plan


def _alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie (a killed child waiting to be reaped)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


def _start_slow(tmp: Path, *extra: str) -> tuple[subprocess.Popen, Path]:
    sweep = sweep_files(tmp, SLOW, duration=4.0, backend="numpy", head="replicates = 2")
    out = tmp / "out"
    proc = subprocess.Popen(child_command([PY, "-m", "quadsim.app.cli", "sweep", str(sweep),
                                           "--out", str(out), "--quiet", *extra]),
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    return proc, out


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc")
def test_a_killed_sweep_takes_its_workers_with_it(tmp_path):
    """SIGKILL on ``quadsim sweep``: its pool workers die with it (PR_SET_PDEATHSIG), not left
    blocked under PID 1; each started with its share of the cores as OpenMP threads."""
    from quadsim.app.sweep.limits import cores

    proc, _ = _start_slow(tmp_path, "--workers", "2")
    end = time.monotonic() + 120
    while len(kids := children(proc.pid, "spawn_main")) < 2:
        assert proc.poll() is None and time.monotonic() < end, proc.stderr.read()
        time.sleep(0.05)
    for k in kids:
        env = Path(f"/proc/{k}/environ").read_bytes().split(b"\0")
        assert f"OMP_NUM_THREADS={max(1, cores() // 2)}".encode() in env
    time.sleep(1.0)  # importing, or flying a task
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    end = time.monotonic() + 5
    while any(_alive(k) for k in kids) and time.monotonic() < end:
        time.sleep(0.05)
    left = [k for k in kids if _alive(k)]
    for k in left:  # not left behind by a failing test either
        os.kill(k, signal.SIGKILL)
    assert not left


def test_an_orphaned_worker_ends_itself_without_prctl(tmp_path):
    """The fallback of the workers' initializer: a thread that sees the parent change."""
    child = ("import os, sys, time; sys.platform = 'elsewhere'\n"
             "from quadsim.app.sweep.executors import _die_with_parent\n"
             "_die_with_parent(os.getppid()); print('ready', flush=True); time.sleep(60)\n")
    parent = ("import subprocess, sys, time\n"
              f"p = subprocess.Popen([sys.executable, '-c', {child!r}])\n"
              "print(p.pid, flush=True); time.sleep(60)\n")  # fmt: skip
    proc = subprocess.Popen([PY, "-c", parent], stdout=subprocess.PIPE, text=True)
    pid = int(proc.stdout.readline())
    assert proc.stdout.readline().strip() == "ready"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    end = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < end:
        time.sleep(0.05)
    assert not _alive(pid)


def test_a_second_sweep_into_a_held_folder_exits_2_and_sighup_stops_the_first(tmp_path):
    """Two identical sweeps into one folder: the second exits 2 naming the folder and the
    first's PID, and runs nothing; SIGHUP stops the first like SIGTERM (exit 129)."""
    from quadsim.app.io.outdir import LOCK, holder

    proc, out = _start_slow(tmp_path, "--workers", "1")
    end = time.monotonic() + 120
    while not (out / "sweep.json").exists():
        assert proc.poll() is None and time.monotonic() < end, proc.stderr.read()
        time.sleep(0.05)
    assert holder(out)["pid"] == proc.pid
    r = cli_sweep([str(tmp_path / "sweep.toml"), "--out", str(out), "--quiet"])
    assert r.returncode == 2, r.stderr
    assert f"{out}: in use by process {proc.pid}" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    tasks = out / "tasks"
    while not (tasks.exists() and list(tasks.glob("*.parquet"))):
        assert proc.poll() is None and time.monotonic() < end
        time.sleep(0.05)
    proc.send_signal(signal.SIGHUP)
    err = proc.communicate(timeout=60)[1]
    assert proc.returncode == 128 + signal.SIGHUP, err
    assert "interrupted (SIGHUP)" in err and "Traceback" not in err
    assert holder(out) is None and not (out / LOCK).exists()
    assert not (out / "results.parquet").exists()


def _drone_files(tmp: Path) -> Path:
    """A base scenario whose drone and gains are files beside it (copies of the packaged)."""
    from importlib import resources

    presets = resources.files("quadsim.physics") / "presets"
    (tmp / "mydrone.toml").write_text((presets / "cf2x_L250.toml").read_text())
    (tmp / "mygains.toml").write_text((presets / "gains" / "cf2x_L250_geometric.toml").read_text())
    sweep = sweep_files(tmp, '"trajectory.period" = [3.0, 4.0, 5.0, 6.0]')
    base = (tmp / "base.toml").read_text()
    base = base.replace('preset = "cf2x_L250"', 'preset = "mydrone.toml"')
    base = base.replace('kind = "geometric"', 'kind = "geometric"\ngains = "mygains.toml"')
    (tmp / "base.toml").write_text(base.replace('turbulence = "light"', 'turbulence = "none"'))
    return sweep


def test_a_resume_refuses_when_a_file_the_base_scenario_reads_changed(tmp_path):
    """Change the mass in the drone file the base scenario names, delete two task files, rerun:
    exit 2 naming the file and what to do, nothing mixed; put back, it resumes. The same for a
    gains file."""
    sweep = _drone_files(tmp_path)
    args = [str(sweep), "--out", str(tmp_path / "out"), "--quiet"]
    r = cli_sweep(args)
    assert r.returncode == 0, r.stderr
    first = results_bytes(tmp_path / "out")
    drone = tmp_path / "mydrone.toml"
    text = drone.read_text()
    assert "value = 0.0319" in text
    drone.write_text(text.replace("value = 0.0319", "value = 0.0330", 1))
    for name in ("task-000001", "task-000002"):
        (tmp_path / "out" / "tasks" / f"{name}.parquet").unlink()
    r = cli_sweep(args)
    assert r.returncode == 2, r.stderr
    assert "mydrone.toml (drone.preset) changed" in r.stderr and "remove" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert len(list((tmp_path / "out" / "tasks").glob("*.parquet"))) == 2  # nothing flew
    drone.write_text(text)
    gains = tmp_path / "mygains.toml"
    gains.write_text(gains.read_text().replace('description = "', 'description = "edited: '))
    r = cli_sweep(args)
    assert r.returncode == 2 and "mygains.toml (controller.gains) changed" in r.stderr
    gains.write_text(gains.read_text().replace("edited: ", ""))
    r = cli_sweep(args)
    assert r.returncode == 0, r.stderr
    assert "resuming: 2 of 4 tasks already done" in r.stderr
    assert results_bytes(tmp_path / "out") == first


def _sweep_with_file_limit(tmp_path, fsize):
    """A two-run sweep flown once (compiled, cached), then into ``out`` with no file larger
    than ``fsize`` bytes: ``(sweep file, out, the process)``."""
    sweep = sweep_files(tmp_path, '"drone.mass" = [0.029, 0.032]', duration=0.2)
    r = cli_sweep([str(sweep), "--out", str(tmp_path / "warm"), "--quiet"])
    assert r.returncode == 0, r.stderr
    out = tmp_path / "out"
    r = subprocess.run(child_command([PY, "-m", "quadsim.app.cli", "sweep", str(sweep), "--out",
                                      str(out), "--quiet", "--workers", "1"], fsize=fsize),
                       capture_output=True, text=True, timeout=300)  # fmt: skip
    return sweep, out, r


def test_a_full_disk_names_the_file_and_says_the_finished_tasks_are_kept(tmp_path):
    """Writes past RLIMIT_FSIZE fail with EFBIG as a full disk fails with ENOSPC: same path."""
    sweep, out, r = _sweep_with_file_limit(tmp_path, 2_000)
    assert r.returncode == 2, r.stderr
    first, *notes = r.stderr.strip().splitlines()
    assert first.startswith(f"quadsim: {out}/") and "File too large" in first, r.stderr
    assert notes and notes[-1].startswith("kept: the 0 of 1 tasks finished in ")
    assert "the same command resumes" in notes[-1] and "Traceback" not in r.stderr
    assert not list(out.rglob("*.partial")) and not (out / ".quadsim.lock").exists()
    r = cli_sweep([str(sweep), "--out", str(out), "--quiet"])  # room again: it goes on
    assert r.returncode == 0, r.stderr


def test_a_full_disk_while_plotting_names_the_figure(tmp_path):
    """Issue 40, item 11: the figures are written whole and a full disk names the file (it said
    "No space left on device" alone); the tasks and results (small) fit under the limit."""
    _, out, r = _sweep_with_file_limit(tmp_path, 15_000)
    assert r.returncode == 2, r.stderr
    first = r.stderr.strip().splitlines()[0]
    assert first.startswith(f"quadsim: {out}/") and ".png: File too large" in first, r.stderr
    assert not list(out.rglob("*.partial")) and (out / "results.parquet").exists()


def test_a_huge_or_endless_sweep_is_refused_before_anything_is_made(tmp_path):
    """10^9 runs: refused at once with the count and the estimates; a 1e9-s duration axis:
    refused with the estimate, the axis and its line; nothing written."""
    values = ", ".join(f"{0.03 + i * 1e-6:.6f}" for i in range(1000))
    axes = (f'"drone.mass" = [{values}]\n"trajectory.period" = [{values}]\n'
            f'"trajectory.size" = [{values}]')  # fmt: skip
    t0 = time.monotonic()
    r = cli_sweep([str(sweep_files(tmp_path, axes)), "--out", str(tmp_path / "out")])
    assert r.returncode == 2, r.stderr
    assert time.monotonic() - t0 < 60
    assert "1,000,000,000 runs (1,000 x 1,000 x 1,000 values x 1 replicate)" in r.stderr
    assert "of memory" in r.stderr and "the limit is 10,000,000 runs" in r.stderr
    assert "out of memory" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    endless = sweep_files(tmp_path, '"duration" = [1.0, 1e9]')
    r = cli_sweep([str(endless), "--out", str(tmp_path / "out")])
    assert r.returncode == 2, r.stderr
    assert 'axes."duration" (line 4): this sweep would take about' in r.stderr
    assert "years" in r.stderr and "duration = 1000000000.0" in r.stderr
    assert not (tmp_path / "out").exists()


def test_a_long_sweep_is_announced_and_the_limits_can_be_raised(tmp_path):
    from quadsim.app.sweep.limits import check_size, check_time
    from quadsim.app.sweep.run import _check_tasks

    sw = load_sweep(sweep_files(tmp_path, '"duration" = [1.0, 2000.0]', head="replicates = 3"))
    runs = make_runs(sw)
    tasks = plan(sw, runs, tmp_path / "out")
    facts = _check_tasks(sw, runs, tasks)
    said: list[str] = []
    total = check_time(sw, runs, tasks, facts, 2, said.append)
    assert total > 30 and len(said) == 1
    assert "6 runs in 2 tasks on 2 worker(s): this sweep will take about" in said[0]
    with pytest.raises(ValueError, match=r'axes."duration" \(line 4\).*3 runs \(3..5\)'):
        check_time(sw, runs, tasks, facts, 2, said.append, total / 2 / 3600)
    with pytest.raises(ValueError, match=r"6 runs \(2 values x 3 replicates\).*--max-runs"):
        check_size(sw, 2, 5)
    assert check_size(sw, 2, 6) == 6
    endless = sweep_files(tmp_path, '"duration" = [1.0, 1e9]')
    for opts, msg in [(["--max-runs", "0"], "--max-runs: expected a positive integer"),
                      (["--max-hours", "nan"], "--max-hours: expected a positive number of "
                       "hours")]:  # fmt: skip
        r = cli_sweep([str(endless), "--out", str(tmp_path / "o"), *opts])
        assert r.returncode == 2 and msg in r.stderr, r.stderr



def test_workers_are_capped_at_the_cores_and_the_tasks():
    from quadsim.app.sweep.limits import cores, threads_per_worker, workers_for

    said: list[str] = []
    n = cores()
    assert workers_for(1000, 50, said.append) == min(n, 50)
    assert said == [f"quadsim sweep: --workers 1000: using {min(n, 50)}, the cores here ({n})"]
    assert workers_for(None, 1, said.append) == 1 and len(said) == 1  # the default: no note
    assert workers_for(n, 1, said.append) == 1
    assert "the tasks to run (1)" in said[-1] or n == 1
    assert threads_per_worker(1) == n and threads_per_worker(10 * n) == 1


RANDOM = 'method = "random"\nsamples = 3'


FUZZ = [
    ('"sim.dt" = {a = 1}', "", 'axes."sim.dt" (line 4)', "expected a list of values"),
    ('"sim.dt" = {low = {a = 1}, high = 1}', RANDOM,
     'axes."sim.dt" (line 5)', "low and high must be a number"),
    ('"drone.mass" = {low = "a", high = 1}', RANDOM, 'axes."drone.mass" (line 5)',
     "low and high must be a number"),
    ('"wind.mean" = {low = [1, "x", 2], high = [1, 2, 3]}', RANDOM, 'axes."wind.mean"',
     "must be a list of 3 numbers"),
    ('"wind.mean" = {low = [], high = []}', RANDOM, 'axes."wind.mean"', "a list of 3 numbers"),
    ('"trajectory.size" = {low = 1, high = 1e999}', RANDOM, 'axes."trajectory.size"',
     "finite"),
    ('"output.log_every" = {low = 1, high = 2.5}', RANDOM, 'axes."output.log_every"',
     "an integer"),
    ('"drone.mass" = {low = true, high = false}', RANDOM, 'axes."drone.mass"', "a number"),
    ('"drone.mass" = {values = [0.03], low = 1}', RANDOM, 'axes."drone.mass"', "expected a list"),
    ('"sim.dt" = {values = "x"}', "", 'axes."sim.dt" (line 4)', "at least one value"),
    ('"sim.dt" = "fast"', "", 'axes."sim.dt" (line 4)', "expected a list of values"),
    ('"sim.dt" = true', "", 'axes."sim.dt" (line 4)', "expected a list of values"),
    ('"sim.dt" = [nan]', "", 'axes."sim.dt" (line 4)', "not finite"),
    ('"sim.dt" = [1e999]', "", 'axes."sim.dt" (line 4)', "not finite"),
    ('"trajectory.size" = [100000000000000000000000000000]', "", 'axes."trajectory.size"',
     "an integer beyond 64 bits"),
    ('"wind.mean" = {low = [0, 0, 0], high = [0, 0, 100000000000000000000]}', RANDOM,
     'axes."wind.mean" (line 5)', "integers of 64 bits"),
    ('"drone.mass" = [[0.03]]', "", 'axes."drone.mass" (line 4)', "is not a number"),
    ('"wind.mean" = [[1.0, [2.0], 3.0]]', "", 'axes."wind.mean"', "a list of 3 numbers"),
    ('"drone.mass" = []', "", 'axes."drone.mass" (line 4)', "at least one value"),
    ('"sim.dt" = [0.002]', 'method = "latin"', "method (line 2)", "expected one of"),
    ('"sim.dt" = [0.002]', "method = 3", "method (line 2)", "expected one of"),
    ('"sim.dt" = [0.002]', "replicates = 1.5", "replicates (line 2)", "an integer"),
    ('"sim.dt" = [0.002]', "batch = {a = 1}", "batch (line 2)", "an integer"),
    ('"sim.dt" = [0.002]', "seed = -1", "seed (line 2)", "an integer >= 0"),
    ("drone.mass = [0.03]", "", 'axes."drone" (line 3)', 'quote a dotted key: "drone.mass"'),
    ('"sim.dt" = [0.002, -1.0]', "", 'axes."sim.dt" (line 4)', "run 1: sim.dt: must be positive"),
    ('"drone.mass" = [0.03, 1e999]', "", 'axes."drone.mass" (line 4)', "not finite"),
    ('"sim.dt" = [10.0]', "", "run 0: duration",
     'run 0 sets sim.dt = 10.0 at axes."sim.dt" (line 4)'),
]  # fmt: skip


@pytest.mark.parametrize(("axes", "head", "where", "msg"), FUZZ)
def test_every_malformed_sweep_file_exits_2_with_its_key_and_line(tmp_path, capsys, axes, head,
                                                                  where, msg):  # fmt: skip
    """Odd types, ranges as tables, NaN, huge numbers, empty lists, wrong methods: exit 2 with one
    line naming the file, the key and its line (never 70, never a bare conversion error)."""
    from quadsim.app.cli import main

    sweep = sweep_files(tmp_path, axes, head=head)
    rc = main(["sweep", str(sweep), "--out", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert err.startswith(f"quadsim: {sweep}: {where}") and msg in err, err
    assert len(err.splitlines()) == 1 and "could not convert" not in err
    assert not (tmp_path / "out").exists()


def test_partition_labels_are_short_safe_and_stable():
    from quadsim.app.sweep.spec import LABEL_MAX, value_label

    assert value_label("pid") == "pid" and value_label(3.0) == "3.0" and value_label(True) == "true"
    assert value_label([0.0, 0.0, 1.0]) == "[0.0,0.0,1.0]"
    assert value_label("a/b=c %d") == "a%2Fb%3Dc%20%25d" and value_label("") == "%00"
    long = [[float(i), 0.0, 1.0] for i in range(30)]
    assert value_label(long) == value_label([list(w) for w in long])
    assert value_label(long).startswith("~") and len(value_label(long)) == 17
    assert value_label("x" * (LABEL_MAX + 1)).startswith("~")
    assert value_label(long) != value_label(long[:-1])


def test_trajectories_of_long_and_string_values_and_of_a_finished_sweep(tmp_path):
    """A 30-point waypoints axis flies and keeps its trajectories under a short hashed folder;
    a string value is written bare; ``--trajectories`` added to a finished sweep flies its tasks
    again for them (the same rows); another EVERY is refused, saying what to do."""
    import pyarrow.parquet as pq

    wps = [[[0.1 * i + j, 0.0, 1.0] for i in range(30)] for j in range(2)]
    axes = f'"trajectory.waypoints" = {json.dumps(wps)}\n"controller.kind" = ["geometric", "pid"]'
    sweep = sweep_files(tmp_path, axes)
    args = [str(sweep), "--out", str(tmp_path / "out"), "--quiet"]
    r = cli_sweep(args)
    assert r.returncode == 0, r.stderr
    first = results_bytes(tmp_path / "out")
    r = cli_sweep([*args, "--trajectories", "2", "--workers", "1000"])
    assert r.returncode == 0, r.stderr
    assert "--trajectories: flying 4 finished task(s) again" in r.stderr
    assert "--workers 1000: using" in r.stderr
    assert results_bytes(tmp_path / "out") == first
    files = sorted((tmp_path / "out" / "runs").rglob("*.parquet"))
    assert len(files) == 4
    parts = {f.relative_to(tmp_path / "out" / "runs").parent.as_posix() for f in files}
    from quadsim.app.sweep.spec import value_label

    assert parts == {f"controller.kind={k}/trajectory.waypoints={value_label(w)}"
                     for w in wps for k in ("geometric", "pid")}  # fmt: skip
    assert all(len(p) <= 64 for f in files for p in f.parts)
    assert sorted(set(pq.read_table(files[0]).column("run").to_pylist())) in ([0], [1], [2], [3])
    r = cli_sweep([*args, "--trajectories", "2"])
    assert r.returncode == 0 and "resuming: 4 of 4" in r.stderr
    r = cli_sweep([*args, "--trajectories", "3"])
    assert r.returncode == 2
    assert "holds the trajectories of --trajectories 2; give --trajectories 2" in r.stderr


def test_plotting_many_rows_is_vectorised(tmp_path):
    """10^5 rows on a 100 x 10 grid: the figures take seconds (they took minutes), and the
    means per cell are those of a plain loop."""
    import pyarrow as pa

    from quadsim.app.sweep.plots import group_mean, plot_metrics

    rng = np.random.default_rng(0)
    idx, y = rng.integers(0, 50, 1000), rng.normal(size=1000)
    y[::7] = np.nan
    want = [np.nanmean(y[idx == g]) if np.isfinite(y[idx == g]).any() else np.nan
            for g in range(52)]  # fmt: skip
    assert np.allclose(group_mean(idx, y, 52), want, equal_nan=True)
    ms = ", ".join(f"{0.028 + i * 1e-4:.4f}" for i in range(100))
    ps = ", ".join(f"{3.0 + i * 0.5}" for i in range(10))
    sw = load_sweep(sweep_files(tmp_path, f'"drone.mass" = [{ms}]\n"trajectory.period" = [{ps}]',
                           head="replicates = 100"))  # fmt: skip
    n = 100_000
    mass = np.repeat(np.arange(100), 1000) * 1e-4 + 0.028
    period = np.tile(np.repeat(np.arange(10) * 0.5 + 3.0, 100), 100)
    cols = {"drone.mass": mass, "trajectory.period": period,
            "crashed": pa.array(rng.random(n) < 0.1)}  # fmt: skip
    for k in ("tracking_rms_m", "tracking_max_m", "max_tilt_deg", "saturation_time_s",
              "crash_time_s"):  # fmt: skip
        cols[k] = pa.array(rng.random(n), mask=rng.random(n) < 0.05)
    t0 = time.perf_counter()
    files = plot_metrics(pa.table(cols), sw, tmp_path)
    assert time.perf_counter() - t0 < 60
    assert len(files) == 6 and all(f.stat().st_size > 5000 for f in files)


def test_a_crafted_sweep_json_runs_no_code(tmp_path, crafted):
    """Issue 40: a resume reads ``sweep.json`` as JSON: a pickle there (one that creates a file
    when unpickled) is not this sweep's record, exit 2 with one line, and runs nothing."""
    import pickle

    payload, marker = crafted
    sweep = sweep_files(tmp_path, '"drone.mass" = [0.03]', duration=0.1, backend="numpy")
    (out := tmp_path / "out").mkdir()
    (out / "sweep.json").write_bytes(pickle.dumps(payload))
    r = cli_sweep([str(sweep), "--out", str(out), "--quiet"])
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert f"{out} holds another sweep (?)" in r.stderr
    assert not marker.exists() and not (out / "tasks").exists()


def test_quadsim_fly_refuses_a_sweeps_folder(tmp_path):
    """Issue 40, item 11: ``quadsim fly`` into a finished sweep's folder mixed both."""
    sweep = sweep_files(tmp_path, '"drone.mass" = [0.029, 0.032]', duration=0.2)
    out = tmp_path / "s"
    assert cli_sweep([str(sweep), "--out", str(out), "--quiet"]).returncode == 0
    before = sorted(p.name for p in out.iterdir())
    r = subprocess.run([PY, "-m", "quadsim.app.cli", "fly", str(tmp_path / "base.toml"), "--out",
                        str(out), "--quiet"], capture_output=True, text=True,
                       timeout=300)  # fmt: skip
    assert r.returncode == 2 and r.stderr.strip() == (
        f"quadsim: --out {out}: holds a sweep (sweep.json); a run there would mix its files "
        "with the sweep's: choose another --out"), r.stderr
    assert sorted(p.name for p in out.iterdir()) == before
