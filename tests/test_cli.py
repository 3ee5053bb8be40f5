"""The ``quadsim`` command and the benchmark plumbing (the timed run itself is not a test)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import quadsim
from quadsim import bench, cli


def test_version_and_presets(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["--version"])
    assert e.value.code == 0 and quadsim.__version__ in capsys.readouterr().out
    assert cli.main(["presets"]) == 0
    assert capsys.readouterr().out.split() == quadsim.list_presets()


def test_bad_usage_exits_2():
    out = subprocess.run([sys.executable, "-m", "quadsim.cli", "nonsense"], capture_output=True,
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
            dict(system="crazyflow", backend="jax", dtype="float32", n=4096,
                 drone_steps_per_s=3e6),
        ],
        "latency": {"native": 6e4, "rotorpy": 300.0},
        "memory": {"native": (400.0, 150.0)},
    }  # fmt: skip
    monkeypatch.setattr(bench, "run", lambda quick, echo: fake)
    path = tmp_path / "bench.json"
    assert cli.main(["bench", "--quick", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert "quadsim / crazyflow at N=4096 float32: 30.0x" in out
    assert "quadsim / rotorpy single-drone step: 200x" in out
    assert "45% of the" in out
    records = json.loads(path.read_text())
    assert records == fake["records"]
    assert set(records[0]) == {"system", "backend", "dtype", "n", "drone_steps_per_s"}
