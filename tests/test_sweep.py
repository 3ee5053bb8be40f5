"""``quadsim sweep`` (issue 14): the runs a sweep file defines, bad input, results that do not
depend on the executor, the workers or interruptions, and a worker killed mid-task."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from quadsim.app.sweep.spec import load_sweep, make_runs
from quadsim.app.sweep.tasks import plan, run_task, task_seed, write_rows

PY = sys.executable

BASE = """
name = "sweep test"
duration = {duration}
seed = 0
[drone]
preset = "cf2x_L250"
[sim]
dt = 0.002
backend = "{backend}"
[controller]
kind = "geometric"
[trajectory]
kind = "lemniscate"
size = 0.5
period = 4.0
center = [0.0, 0.0, 1.0]
[wind]
turbulence = "light"
[sensors]
imu = "bmi088"
[output]
log_every = 5
plots = false
"""


def _files(tmp: Path, axes: str, *, duration=1.0, backend="native", head="") -> Path:
    (tmp / "base.toml").write_text(BASE.format(duration=duration, backend=backend))
    sweep = tmp / "sweep.toml"
    sweep.write_text(f'base = "base.toml"\n{head}\n[axes]\n{axes}\n')
    return sweep


GRID = """
"drone.mass" = [0.029, 0.032, 0.035]
"trajectory.period" = [3.0, 5.0]
"""


def _sweep(args: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", "quadsim.cli", "sweep", *args], capture_output=True,
                          text=True, timeout=kw.pop("timeout", 300), **kw)


def _bytes(path: Path) -> bytes:
    return (path / "results.parquet").read_bytes()


def test_runs_of_a_grid_and_of_samples(tmp_path):
    sw = load_sweep(_files(tmp_path, GRID, head="replicates = 2\nseed = 5"))
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
    lhs = load_sweep(_files(tmp_path, axes, head='method = "lhs"\nsamples = 20\nseed = 1'))
    runs = make_runs(lhs)
    m = np.array([r.values["drone.mass"] for r in runs])
    assert sorted(np.floor((m - 0.03) / 0.004 * 20).astype(int)) == list(range(20))
    w = np.array([r.values["wind.mean"] for r in runs])
    assert np.all((w[:, 0] >= 0) & (w[:, 0] <= 2) & (w[:, 2] == 0))
    assert make_runs(lhs) == runs  # the same seed, the same samples
    rnd = load_sweep(_files(tmp_path, axes, head='method = "random"\nsamples = 5\nseed = 1'))
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
    sweep = _files(tmp_path, axes, head=head)
    r = _sweep([str(sweep), "--out", str(tmp_path / "out"), "--quiet"])
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
    sweep = _files(tmp_path, GRID)
    r = _sweep([str(sweep), "--out", str(tmp_path / "out"), "--ray", "127.0.0.1:1"], timeout=60)
    assert r.returncode == 2 and "cannot reach 127.0.0.1:1" in r.stderr
    assert not (tmp_path / "out").exists()


def test_results_do_not_depend_on_the_workers_and_match_fly(tmp_path):
    """1 and 2 local workers give the same bytes; each run's row is the per-drone summary of
    ``fly`` on the task's scenario (n = its runs, seed = its seed), computed independently."""
    from quadsim.app.io import SummaryAccumulator
    from quadsim.app.scenario import build, load_scenario
    from quadsim.loop.flight import fly

    sweep = _files(tmp_path, '"trajectory.period" = [3.0, 5.0]', head="replicates = 3\nseed = 2")
    for w in ("1", "2"):
        r = _sweep([str(sweep), "--out", str(tmp_path / f"w{w}"), "--workers", w, "--quiet"])
        assert r.returncode == 0, r.stderr
    assert _bytes(tmp_path / "w1") == _bytes(tmp_path / "w2")
    import pyarrow.parquet as pq

    res = pq.read_table(tmp_path / "w1" / "results.parquet").to_pydict()
    assert res["run"] == list(range(6)) and all(e is None for e in res["error"])
    # task 1: period 5.0, runs 3, 4, 5 (its lanes 0, 1, 2)
    text = BASE.format(duration=1.0, backend="native").replace("period = 4.0", "period = 5.0")
    text = text.replace("seed = 0", f"seed = {task_seed(2, 1)}\nn = 3")
    objs = build(load_scenario(text, text=True))
    acc = SummaryAccumulator(objs.meta)
    fly(objs.sim, objs.trajectory, objs.control, objs.gains, duration=objs.duration,
        imu=objs.imu, seed=objs.seed, log_every=5, on_chunk=acc.add, keep_log=False)
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
    r = _sweep([str(sweep), "--out", str(tmp_path / "out"), "--quiet"])
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

    sw = load_sweep(_files(tmp_path, GRID))
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


def _children(pid: int, needle: str) -> list[int]:
    out = subprocess.run(["ps", "-ww", "-eo", "pid,ppid,args"], capture_output=True,
                         text=True).stdout
    rows = [line.split(None, 2) for line in out.splitlines()[1:]]
    return [int(p) for p, pp, args in rows if needle in args and (pid < 0 or int(pp) == pid)]


SLOW = '"trajectory.period" = [3.0, 4.0, 5.0]'


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The slow sweep (NumPy backend, three tasks of about 2.5 s) run straight through."""
    tmp = tmp_path_factory.mktemp("ref")
    sweep = _files(tmp, SLOW, duration=4.0, backend="numpy", head="replicates = 2")
    r = _sweep([str(sweep), "--out", str(tmp / "out"), "--workers", "2", "--quiet"])
    assert r.returncode == 0, r.stderr
    return _bytes(tmp / "out")


def test_sigterm_mid_sweep_then_the_same_command_resumes(tmp_path, reference):
    sweep = _files(tmp_path, SLOW, duration=4.0, backend="numpy", head="replicates = 2")
    args = [str(sweep), "--out", str(tmp_path / "out"), "--workers", "1"]
    proc = subprocess.Popen([PY, "-m", "quadsim.cli", "sweep", *args, "--quiet"],
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
    r = _sweep([*args])
    assert r.returncode == 0, r.stderr
    assert f"resuming: {done} of 3 tasks already done" in r.stderr
    assert _bytes(tmp_path / "out") == reference


def test_a_local_worker_killed_mid_task_is_retried(tmp_path, reference):
    sweep = _files(tmp_path, SLOW, duration=4.0, backend="numpy", head="replicates = 2")
    proc = subprocess.Popen([PY, "-m", "quadsim.cli", "sweep", str(sweep), "--out",
                             str(tmp_path / "out"), "--workers", "2", "--quiet"],
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    end = time.monotonic() + 120
    while not (kids := _children(proc.pid, "spawn_main")):
        assert proc.poll() is None and time.monotonic() < end
        time.sleep(0.05)
    time.sleep(1.5)  # importing, compiling or flying its first task
    os.kill(kids[0], signal.SIGKILL)
    err = proc.communicate(timeout=300)[1]
    assert proc.returncode == 0, err
    assert _bytes(tmp_path / "out") == reference


def test_ray_gives_the_local_results_and_retries_a_killed_worker(tmp_path, reference):
    """A real local Ray (2 CPUs, started by quadsim on 127.0.0.1): the same bytes as the local
    executor, also when a worker is killed while it runs a task. ``--ray`` alone starts its own
    Ray even where another is announced (``RAY_ADDRESS``, here an unreachable one)."""
    _need_ray()
    sweep = _files(tmp_path, SLOW, duration=4.0, backend="numpy", head="replicates = 2")
    env = dict(os.environ, RAY_ADDRESS="127.0.0.1:1")
    proc = subprocess.Popen([PY, "-m", "quadsim.cli", "sweep", str(sweep), "--out",
                             str(tmp_path / "out"), "--workers", "2", "--ray", "--quiet"],
                            stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip
    end = time.monotonic() + 180
    while not (busy := _children(-1, "ray::_run")):
        assert proc.poll() is None and time.monotonic() < end, proc.stderr.read()
        time.sleep(0.05)
    os.kill(busy[0], signal.SIGKILL)
    err = proc.communicate(timeout=300)[1]
    assert proc.returncode == 0, err
    assert _bytes(tmp_path / "out") == reference
    meta = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert meta["runs"] == 6 and meta["tasks"] == 3


def test_trajectories_are_kept_per_task_by_structural_axis(tmp_path):
    import pyarrow.parquet as pq

    sweep = _files(tmp_path, GRID)
    r = _sweep([str(sweep), "--out", str(tmp_path / "out"), "--trajectories", "2", "--quiet"])
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


# --- issue 27: nothing lost, nothing mixed, nothing left behind ---------------------------------


def _alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie (a killed child waiting to be reaped)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


def _start_slow(tmp: Path, *extra: str) -> tuple[subprocess.Popen, Path]:
    sweep = _files(tmp, SLOW, duration=4.0, backend="numpy", head="replicates = 2")
    out = tmp / "out"
    proc = subprocess.Popen([PY, "-m", "quadsim.cli", "sweep", str(sweep), "--out", str(out),
                             "--quiet", *extra], stderr=subprocess.PIPE, text=True)  # fmt: skip
    return proc, out


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc")
def test_a_killed_sweep_takes_its_workers_with_it(tmp_path):
    """SIGKILL on ``quadsim sweep``: its pool workers die with it (PR_SET_PDEATHSIG), not left
    blocked under PID 1; each started with its share of the cores as OpenMP threads."""
    from quadsim.app.sweep.limits import cores

    proc, _ = _start_slow(tmp_path, "--workers", "2")
    end = time.monotonic() + 120
    while len(kids := _children(proc.pid, "spawn_main")) < 2:
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
    r = _sweep([str(tmp_path / "sweep.toml"), "--out", str(out), "--quiet"])
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
    sweep = _files(tmp, '"trajectory.period" = [3.0, 4.0, 5.0, 6.0]')
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
    r = _sweep(args)
    assert r.returncode == 0, r.stderr
    first = _bytes(tmp_path / "out")
    drone = tmp_path / "mydrone.toml"
    text = drone.read_text()
    assert "value = 0.0319" in text
    drone.write_text(text.replace("value = 0.0319", "value = 0.0330", 1))
    for name in ("task-000001", "task-000002"):
        (tmp_path / "out" / "tasks" / f"{name}.parquet").unlink()
    r = _sweep(args)
    assert r.returncode == 2, r.stderr
    assert "mydrone.toml (drone.preset) changed" in r.stderr and "remove" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert len(list((tmp_path / "out" / "tasks").glob("*.parquet"))) == 2  # nothing flew
    drone.write_text(text)
    gains = tmp_path / "mygains.toml"
    gains.write_text(gains.read_text().replace('description = "', 'description = "edited: '))
    r = _sweep(args)
    assert r.returncode == 2 and "mygains.toml (controller.gains) changed" in r.stderr
    gains.write_text(gains.read_text().replace("edited: ", ""))
    r = _sweep(args)
    assert r.returncode == 0, r.stderr
    assert "resuming: 2 of 4 tasks already done" in r.stderr
    assert _bytes(tmp_path / "out") == first


def test_a_huge_or_endless_sweep_is_refused_before_anything_is_made(tmp_path):
    """10^9 runs: refused at once with the count and the estimates; a 1e9-s duration axis:
    refused with the estimate, the axis and its line; nothing written."""
    values = ", ".join(f"{0.03 + i * 1e-6:.6f}" for i in range(1000))
    axes = (f'"drone.mass" = [{values}]\n"trajectory.period" = [{values}]\n'
            f'"trajectory.size" = [{values}]')  # fmt: skip
    t0 = time.monotonic()
    r = _sweep([str(_files(tmp_path, axes)), "--out", str(tmp_path / "out")])
    assert r.returncode == 2, r.stderr
    assert time.monotonic() - t0 < 60
    assert "1,000,000,000 runs (1,000 x 1,000 x 1,000 values x 1 replicate)" in r.stderr
    assert "of memory" in r.stderr and "the limit is 10,000,000 runs" in r.stderr
    assert "out of memory" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = _sweep([str(_files(tmp_path, '"duration" = [1.0, 1e9]')), "--out", str(tmp_path / "out")])
    assert r.returncode == 2, r.stderr
    assert 'axes."duration" (line 4): this sweep would take about' in r.stderr
    assert "years" in r.stderr and "duration = 1000000000.0" in r.stderr
    assert not (tmp_path / "out").exists()


def test_a_long_sweep_is_announced_and_the_limits_can_be_raised(tmp_path, monkeypatch):
    from quadsim.app.sweep.limits import check_size, check_time
    from quadsim.app.sweep.run import _check_tasks

    sw = load_sweep(_files(tmp_path, '"duration" = [1.0, 2000.0]', head="replicates = 3"))
    runs = make_runs(sw)
    tasks = plan(sw, runs, tmp_path / "out")
    facts = _check_tasks(sw, runs, tasks)
    said: list[str] = []
    total = check_time(sw, runs, tasks, facts, 2, said.append)
    assert total > 30 and len(said) == 1
    assert "6 runs in 2 tasks on 2 worker(s): this sweep will take about" in said[0]
    monkeypatch.setenv("QUADSIM_SWEEP_MAX_HOURS", str(total / 2 / 3600))
    with pytest.raises(ValueError, match=r'axes."duration" \(line 4\).*3 runs \(3..5\)'):
        check_time(sw, runs, tasks, facts, 2, said.append)
    monkeypatch.setenv("QUADSIM_SWEEP_MAX_RUNS", "5")
    with pytest.raises(ValueError, match=r"6 runs \(2 values x 3 replicates\)"):
        check_size(sw, 2)
    monkeypatch.setenv("QUADSIM_SWEEP_MAX_RUNS", "lots")
    with pytest.raises(ValueError, match="QUADSIM_SWEEP_MAX_RUNS='lots'"):
        check_size(sw, 2)


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

    sweep = _files(tmp_path, axes, head=head)
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
    sweep = _files(tmp_path, axes)
    args = [str(sweep), "--out", str(tmp_path / "out"), "--quiet"]
    r = _sweep(args)
    assert r.returncode == 0, r.stderr
    first = _bytes(tmp_path / "out")
    r = _sweep([*args, "--trajectories", "2", "--workers", "1000"])
    assert r.returncode == 0, r.stderr
    assert "--trajectories: flying 4 finished task(s) again" in r.stderr
    assert "--workers 1000: using" in r.stderr
    assert _bytes(tmp_path / "out") == first
    files = sorted((tmp_path / "out" / "runs").rglob("*.parquet"))
    assert len(files) == 4
    parts = {f.relative_to(tmp_path / "out" / "runs").parent.as_posix() for f in files}
    from quadsim.app.sweep.spec import value_label

    assert parts == {f"controller.kind={k}/trajectory.waypoints={value_label(w)}"
                     for w in wps for k in ("geometric", "pid")}  # fmt: skip
    assert all(len(p) <= 64 for f in files for p in f.parts)
    assert sorted(set(pq.read_table(files[0]).column("run").to_pylist())) in ([0], [1], [2], [3])
    r = _sweep([*args, "--trajectories", "2"])
    assert r.returncode == 0 and "resuming: 4 of 4" in r.stderr
    r = _sweep([*args, "--trajectories", "3"])
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
    sw = load_sweep(_files(tmp_path, f'"drone.mass" = [{ms}]\n"trajectory.period" = [{ps}]',
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
