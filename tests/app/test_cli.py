"""The ``quadsim`` command and the benchmark plumbing (the timed run itself is not a test)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from signal_helpers import child_command

import quadsim
from quadsim.app import bench, cli


def test_version_and_presets(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["--version"])
    assert e.value.code == 0 and quadsim.__version__ in capsys.readouterr().out
    assert cli.main(["presets"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [ln.split()[0] for ln in lines] == quadsim.list_presets()
    cf = next(ln for ln in lines if ln.startswith("cf2x_L250 "))
    assert "31.9 g" in cf and "x, 4 rotors" in cf and "T/W 1.53" in cf and "Crazyflie 2.x" in cf
    f450 = next(ln for ln in lines if ln.startswith("f450_plus "))
    assert "plus, 4 rotors" in f450 and "seed 001" in f450


def test_bad_usage_exits_2():
    out = subprocess.run([sys.executable, "-m", "quadsim.app.cli", "nonsense"], capture_output=True,
                         text=True)  # fmt: skip
    assert out.returncode == 2 and "invalid choice" in out.stderr


def test_bench_rates_are_measured_not_made_up():
    r = bench.rollout_rate("numpy", "float64", 8, seconds=0.02, repeats=1)
    assert 1e3 < r < 1e9
    assert bench.step_rate("numpy", steps=20, repeats=1) > 10


def test_bench_table_and_json(tmp_path, monkeypatch, capsys):
    fake = {
        "records": [
            dict(system="quadsim", backend="native", dtype="float32", n=4096,
                 drone_steps_per_s=9e7),
            dict(system="quadsim", backend="jax", dtype="float32", n=4096,
                 drone_steps_per_s=1e7),
        ],
        "latency": {"native": 6e4},
        "memory": {"native": (400.0, 150.0)},
    }  # fmt: skip
    monkeypatch.setattr(bench, "run", lambda quick, echo: fake)
    path = tmp_path / "bench.json"
    assert cli.main(["bench", "--quick", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert "best float32: 90,000,000 drone-steps/s" in out
    assert "single-drone step, native: 60,000 steps/s" in out
    assert "10^6 drones float32 on native: peak RSS 400 MB (150 MB beyond the imports)" in out
    assert "quadsim / " not in out  # no ratios: the peers are compared in benchmarks/
    assert out.splitlines()[-1] == bench.PEERS_NOTE
    assert "benchmarks/closed_loop.py" in bench.PEERS_NOTE
    assert "benchmarks/plant.py" in bench.PEERS_NOTE
    records = json.loads(path.read_text())
    assert records == fake["records"]
    assert set(records[0]) == {"system", "backend", "dtype", "n", "drone_steps_per_s"}
    assert bench.best_rates(records) == {("float32", 4096): 9e7}


SHORT = """
name = "short"
duration = 0.6
n = 2
seed = 5
[drone]
preset = "cf2x_L250"
[sim]
backend = "native"
[controller]
kind = "geometric"
[trajectory]
kind = "circle"
radius = 0.5
speed = 0.5
[sensors]
imu = "bmi088"
mocap_pos_std = 0.001
mocap_latency = 0.004
[output]
chunk_steps = 100
log_every = 2
"""


def _png_ok(path):
    from PIL import Image

    with Image.open(path) as im:
        im.load()
        a = np.asarray(im)
    return path.stat().st_size > 10_000 and a.std() > 0


def test_fly_end_to_end_writes_what_it_says(tmp_path, capsys):
    import pyarrow.parquet as pq

    from quadsim.app import io

    scen = tmp_path / "short.toml"
    scen.write_text(SHORT)
    out = tmp_path / "out"
    rc = cli.main(["fly", str(scen), "--out", str(out), "--csv", "--animate", "--quiet"])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert text == ""  # --quiet: nothing but errors
    names = {p.name for p in out.iterdir()}
    assert {"trajectory.parquet", "trajectory.csv", "summary.json", "path_3d.png", "states.png",
            "rotors.png", "tracking_error.png", "flight.gif"} <= names  # fmt: skip
    for png in out.glob("*.png"):
        assert _png_ok(png), png
    # the Parquet reads back with the documented schema: one row per drone and sample, units
    table = pq.read_table(out / "trajectory.parquet")
    units = {c: u for c, u in io.column_units(4).items()
             if not c.startswith(("est_", "baro_", "gnss_", "battery_", "heat_"))}  # fmt: skip
    # every column but those of absent sensors and of the warm-up (a drone without one)
    assert set(table.column_names) == set(units)
    for field in table.schema:
        assert field.metadata[b"unit"].decode() == units[field.name]
    steps = round(0.6 / 0.002)
    assert table.num_rows == 2 * (steps // 2 + 1)  # every 2nd step and the end sample
    log, meta = io.read_log(out / "trajectory.parquet")
    assert log["pos"].shape == (steps // 2 + 1, 2, 3) and meta["drone"] == "cf2x_L250"
    assert log["time"][-1] == pytest.approx(0.6, abs=1e-12)
    assert np.allclose(np.linalg.norm(log["accel"].mean(axis=(0, 1))), 9.81, atol=0.5)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] is False and summary["crash_count"] == 0
    assert summary["tracking_rms_m"] < 0.05 and summary["sim_time_s"] == pytest.approx(0.6, 0.02)
    assert sum(1 for _ in open(out / "trajectory.csv")) == table.num_rows + 1


def test_fly_interrupted_keeps_completed_chunks(tmp_path, monkeypatch):
    from quadsim.app import io
    from quadsim.app.run import fly_scenario
    from quadsim.loop import flight

    scen = tmp_path / "short.toml"
    scen.write_text(SHORT)
    fly = flight.fly

    def interrupted_fly(*a, on_chunk, **k):  # either loop: Ctrl-C in the third chunk
        calls = []

        def stop(chunk):
            calls.append(chunk)
            if len(calls) == 3:
                raise KeyboardInterrupt
            on_chunk(chunk)

        return fly(*a, on_chunk=stop, **k)

    monkeypatch.setattr(flight, "fly", interrupted_fly)
    summary = fly_scenario(scen, tmp_path / "out", progress=False)
    assert summary["interrupted"] is True
    log, _ = io.read_log(tmp_path / "out" / "trajectory.parquet")
    assert log["time"].shape == (100,)  # two chunks of 100 steps, logged every 2nd step
    saved = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert saved["interrupted"] is True


def test_fly_exit_codes(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text("[trajectory]\nkind = 'circle'\nradius = -1\n")
    assert cli.main(["fly", str(bad), "--quiet"]) == 2
    assert "trajectory.radius (line 3): must be positive" in capsys.readouterr().err
    crash = tmp_path / "crash.toml"  # a wall in the way of the step: the drone crashes
    crash.write_text(SHORT.replace("kind = \"circle\"", "kind = \"step\"\ntarget = [4.0, 0.0, 1.0]")
                     + "[world]\nwalls = [{axis = 'x', at = 1.0}]\n")  # fmt: skip
    crash.write_text(crash.read_text().replace("duration = 0.6", "duration = 3.0"))
    assert cli.main(["fly", str(crash), "--out", str(tmp_path / "c"), "--quiet",
                     "--no-plots"]) == 1  # fmt: skip
    assert "drones crashed (first: drone" in capsys.readouterr().err


def test_info_prints_the_envelope_and_plots(tmp_path, capsys):
    assert cli.main(["info", "skydio2_x", "--plot", str(tmp_path / "env.png")]) == 0
    out = capsys.readouterr().out
    assert "60.00 deg" in out and "6.44 m/s" in out
    assert _png_ok(tmp_path / "env.png")
    assert cli.main(["info", "nope"]) == 2


def test_ctrl_c_on_a_running_flight_keeps_a_valid_log(tmp_path):
    """A real SIGINT to `quadsim fly`: exit 130, valid Parquet of whole chunks, summary says so."""
    import signal
    import time

    from quadsim.app import io

    scen = tmp_path / "long.toml"
    long = SHORT.replace("duration = 0.6", "duration = 600.0")
    scen.write_text(long.replace("chunk_steps = 100", "chunk_steps = 50\npart_seconds = 0"))
    out = tmp_path / "out"
    proc = subprocess.Popen(
        child_command([sys.executable, "-m", "quadsim.app.cli", "fly", str(scen), "--out",
                       str(out), "--quiet"]),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while (len(list((out / "trajectory.parts").glob("part-*.parquet"))) < 3
           and time.monotonic() < deadline):  # fmt: skip
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr
    log, _ = io.read_log(out / "trajectory.parquet")
    samples = log["time"].shape[0]
    assert samples > 0 and samples % 25 == 0  # whole chunks of 50 steps, logged every 2nd
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["n_samples"] == samples
    assert stdout == "" and "interrupted (SIGINT)" in stderr  # --quiet: errors only
