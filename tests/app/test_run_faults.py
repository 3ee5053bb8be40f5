"""``quadsim fly`` of a batch with diverged drones exits 1, names each on stderr and in
``summary.json`` (issue 40, item 2: before, exit 0 with ``tracking_rms_m`` 0.0); a motor warm-up
too fast for the step is warned about like any stiff parameter."""

from __future__ import annotations

import json
import subprocess
import sys

from quadsim.app.scenario import check_run, load_scenario
from quadsim.physics.presets import folder

SPIN = """
duration = 0.3
n = 3
[drone]
preset = "cf2x_L250"
[sim]
dt = 0.002
backend = "native"
[controller]
kind = "geometric"
[trajectory]
kind = "hover"
[initial]
ang_vel = [2000.0, 0.0, 0.0]
[output]
plots = false
"""


def test_a_batch_whose_drones_diverge_exits_1_and_says_so(tmp_path):
    scen = tmp_path / "spin.toml"
    scen.write_text(SPIN)
    out = subprocess.run([sys.executable, "-m", "quadsim.app.cli", "fly", str(scen), "--out",
                          str(tmp_path / "run"), "--quiet"], capture_output=True, text=True,
                         timeout=300)  # fmt: skip
    assert out.returncode == 1, out.stderr
    lines = [ln for ln in out.stderr.splitlines() if "diverged" in ln]
    assert lines == [f"quadsim: drone {i} diverged: body rate at step 0 (t = 0.002 s); frozen "
                     "there and left out of the metrics" for i in range(3)]  # fmt: skip
    assert "Traceback" not in out.stderr
    s = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert s["fault_count"] == 3
    assert [f["drone"] for f in s["faults"]] == [0, 1, 2]
    assert s["faults"][0] == {"drone": 0, "step": 0, "time_s": 0.002, "quantity": "body rate"}
    assert s["per_drone"][2]["fault"]["quantity"] == "body rate"
    # every drone is left out: no metric over the drones (was 0.0, a perfect flight)
    assert s["tracking_rms_m"] is None and s["max_tilt_deg"] is None


def test_a_warmup_faster_than_the_step_is_warned_about(tmp_path):
    preset = (folder() / "cf21_nanobench.toml").read_text()
    assert 'warmup_time = { value = 8.46' in preset
    (tmp_path / "fast_warm.toml").write_text(
        preset.replace('warmup_time = { value = 8.46', 'warmup_time = { value = 1e-6'))
    scen = tmp_path / "s.toml"
    scen.write_text(f'duration = 1.0\n[drone]\npreset = "{tmp_path / "fast_warm.toml"}"\n'
                    '[sim]\ndt = 0.002\n[controller]\n'
                    'gains = "cf21_nanobench_geometric"\n')  # fmt: skip
    notes = check_run(load_scenario(scen))
    assert any("sim.dt" in n and "motor warm-up (warmup_time)" in n and "1e-06" not in n
               for n in notes), notes  # fmt: skip


def test_a_reference_beyond_the_thrust_cap_is_warned_about(tmp_path):
    def notes(speed):
        scen = tmp_path / f"s{speed}.toml"
        scen.write_text(f'duration = 6.0\n[drone]\npreset = "cf21_nanobench"\n[trajectory]\n'
                        f'kind = "circle"\nradius = 1.0\nspeed = {speed}\n')  # fmt: skip
        return [n for n in check_run(load_scenario(scen)) if "thrust" in n]

    # 2.5 m/s on 1 m: m |a - g| = 0.04493 sqrt(6.25² + 9.81²) = 0.523 N > 0.48 (1 - 0.0392)
    (fast,) = notes(2.5)
    assert "trajectory.kind (line 5)" in fast and "needs up to 0.523 N" in fast, fast
    assert notes(0.5) == []


def test_the_ros2_node_reports_the_diverged_drones_and_exits_1(tmp_path):
    from ros2_helpers import start_node

    scen = tmp_path / "spin.toml"
    scen.write_text(SPIN.replace('backend = "native"', 'backend = "numpy"'))
    proc, err = start_node(tmp_path, str(scen), "--duration", "0.2", "--rate", "max",
                           domain=58, ns="faults")  # fmt: skip
    assert proc.wait(timeout=120) == 1, err.read_text()
    assert err.read_text().count("diverged: body rate at step 0") == 3, err.read_text()
    s = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert s["fault_count"] == 3 and s["tracking_rms_m"] is None


def test_an_initial_position_the_reference_overrides_is_warned_about(tmp_path):
    """Issue 40, item 11: ``initial.pos`` had no effect, silently, with start_on_reference."""
    scen = tmp_path / "s.toml"
    scen.write_text('duration = 1.0\n[initial]\npos = [0.0, 0.0, 0.5]\n')
    (note,) = [n for n in check_run(load_scenario(scen)) if "initial" in n]
    assert "initial.pos (line 3): has no effect: initial.start_on_reference" in note
    scen.write_text('duration = 1.0\n[initial]\npos = [0.0, 0.0, 0.5]\n'
                    'start_on_reference = false\n')  # fmt: skip
    assert not [n for n in check_run(load_scenario(scen)) if "initial" in n]
