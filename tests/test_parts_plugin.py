"""examples/plugins: a package outside src/ with its own sensor and controller, flown by the real
`quadsim fly` command from a scenario on all three runners, with no edit to quadsim."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from quadsim.app.io import read_log
from quadsim.engines import native

ROOT = Path(__file__).resolve().parents[1]
PLUGINS = ROOT / "examples" / "plugins"
SCENARIO = (PLUGINS / "hover_tof.toml").read_text()
RUNNERS = [("numpy", "python"), ("jax", "scan")] + ([("native", "compiled")]
                                                   if native.available() else [])  # fmt: skip


def _fly(tmp_path, text, name):
    scen = tmp_path / f"{name}.toml"
    scen.write_text(text)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(PLUGINS), *filter(None, [os.environ.get("PYTHONPATH")])])}  # fmt: skip
    r = subprocess.run([sys.executable, "-m", "quadsim.app.cli", "fly", str(scen), "--out",
                        str(tmp_path / name), "--quiet"], capture_output=True, text=True,
                       env=env, timeout=600)  # fmt: skip
    return r, tmp_path / name


@pytest.fixture(scope="module")
def flown(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("plugins")
    out = {}
    for backend, _ in RUNNERS:
        text = SCENARIO.replace('backend = "native"', f'backend = "{backend}"')
        r, d = _fly(tmp, text, backend)
        assert r.returncode == 0 and "could not be traced" not in r.stderr, r.stderr
        summary = json.loads((d / "summary.json").read_text())
        out[backend] = (summary, *read_log(d / "trajectory.parquet"))
    return out


@pytest.mark.parametrize(("backend", "loop"), RUNNERS)
def test_the_plugin_flies_on_every_runner(flown, backend, loop):
    summary, log, meta = flown[backend]
    assert summary["loop"] == loop and (loop == "python" or summary["loop_reason"] is None)
    assert summary["rates_hz"]["tof"] == 25.0 and summary["rates_hz"]["sonar"] == 10.0
    assert {"tof_range", "tof_valid", "sonar_height", "sonar_valid"} <= set(log)
    assert [c["key"] for c in meta["columns"]] == ["tof_range", "tof_valid", "sonar_height",
                                                   "sonar_valid"]  # fmt: skip
    z = log["pos"][..., 2]
    assert np.abs(z[-1] - 1.2).max() < 0.03  # held at the step's height on the rangefinder
    assert np.abs(log["sonar_height"][-1] - z[-1]).max() < 0.15
    ref = flown["numpy"][1]
    for key in ("pos", "tof_range", "sonar_height"):
        np.testing.assert_allclose(log[key], ref[key], rtol=0, atol=1e-9)


def test_a_plugin_that_cannot_be_found_is_a_bad_input(tmp_path):
    r, _ = _fly(tmp_path, SCENARIO.replace("quadsim_plugin_demo.sonar:Sonar",
                                           "quadsim_plugin_demo.sonar:Lidar"), "bad")  # fmt: skip
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "sensors.sonar.kind (line" in r.stderr and "has no 'Lidar'" in r.stderr
    r, _ = _fly(tmp_path, SCENARIO.replace('sensor = "tof"', 'sensor = "sonar"'), "reads")
    assert r.returncode == 2 and "reads ['sonar_range'], which no sensor" in r.stderr, r.stderr
    r, _ = _fly(tmp_path, SCENARIO.replace('rate = 10.0', 'rate = 10.0\nnoise = -1.0'), "param")
    assert r.returncode == 2 and "sensors.sonar.noise (line" in r.stderr, r.stderr
