"""Scenario files: validation names the key path and line; defaults documented in one place."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from quadsim.app.scenario import SCHEMA, build, load_scenario, schema_markdown

ROOT = Path(__file__).resolve().parents[2]


def load(text):
    return load_scenario(text, text=True)


def test_defaults_fill_every_key_and_the_docs_print_the_schema():
    sc = load("")
    for section, keys in SCHEMA.items():
        assert set(sc.values[section]) == set(keys)
    assert sc.get("sim.dt") == 0.002 and sc.get("duration") == 10.0
    assert schema_markdown() in (ROOT / "docs" / "scenarios.md").read_text()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[sim]\nintegratr = 'rk4'\n", r"sim\.integratr \(line 2\): unknown key"),
        ("duration = 'long'\n", r"duration \(line 1\): expected a number; got 'long'"),
        (
            "[trajectory]\nkind = 'circle'\nradius = -1.0\n",
            r"trajectory\.radius \(line 3\): must be positive",
        ),
        ("[sim]\nbackend = 'gpu'\n", r"sim\.backend \(line 2\): expected one of \['numpy'"),
        ("[initial]\npos = [0, 1]\n", r"initial\.pos \(line 2\): expected a list of 3 numbers"),
        ("[trajectory]\nkind = 'min_snap'\n", r"trajectory\.waypoints \(line 1\): required"),
        (
            "[trajectory]\nkind = 'min_snap'\nwaypoints = [[0,0,1],[1,0,1]]\n"
            "segment_times = [1, 2]\n",
            r"trajectory\.segment_times \(line 4\): expected 1 positive durations",
        ),
        ("[sim]\nintegrator = 'rk45'\nbackend = 'jax'\n", r"sim\.integrator \(line 2\): rk45 runs"),
        ("[sensors]\nmocap_latency = 0.003\n", r"sensors\.mocap_latency \(line 2\): must be a"),
        ("[controller]\nrate = 300.0\n", r"controller\.rate \(line 2\): 300 Hz: the controller"),
        ("[sim]\ndt = 0.0025\n[sensors]\nimu = 'bmi088'\n",
         r"sensors\.imu \(line 4\): the IMU \(1000 Hz\) has a period of 0\.001 s"),
        ("[world]\nwalls = [{axis = 'w', at = 3}]\n", r"world\.walls \(line 2\): entry 0"),
        ("[world]\nboxes = [{lo = [1,1,1], hi = [0,2,2]}]\n", r"world\.boxes \(line 2\): entry 0"),
        ("sim = 3\n", r"sim \(line 1\): must be a table"),
        ("duration = 0.001\n", r"duration \(line 1\): shorter than one step"),
        ("[randomize]\nmass_rel = -0.1\n", r"randomize\.mass_rel \(line 2\): must be >= 0"),
        ("seed = -3\n", r"seed \(line 1\): must be >= 0; got -3"),
        ("[world]\ncrash_speed = -1.0\n", r"world\.crash_speed \(line 2\): must be >= 0"),
        ("[randomize]\nmass_rel = 2.0\n", r"randomize\.mass_rel \(line 2\): must be < 1"),
        ("[drone\n", r"malformed TOML"),
    ],
)
def test_bad_scenarios_name_the_key_path_and_line(text, message):
    with pytest.raises(ValueError, match=message):
        load(text)


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match=r"nope\.toml: scenario file not found"):
        load_scenario(tmp_path / "nope.toml")


def test_bad_preset_is_reported_at_load_and_bad_gains_when_building():
    with pytest.raises(ValueError, match=r"drone\.preset \(line 2\): unknown preset 'nope'"):
        load("[drone]\npreset = 'nope'\n")
    with pytest.raises(ValueError, match="gains"):
        build(load("[drone]\npreset = 'cf2x_L250'\n[controller]\ngains = 'nope_gains'\n"))


def test_build_applies_overrides_randomisation_and_formation():
    sc = load(
        "n = 4\nseed = 3\n[drone]\npreset = 'cf2x_L250'\nmass = 0.033\n"
        "[randomize]\nmass_rel = 0.1\nspacing = 2.0\n"
        "[trajectory]\nkind = 'circle'\nradius = 0.5\n"
        "[world]\nwalls = [{axis = 'x', at = 3.0}]\n"
    )
    objs = build(sc)
    sim = objs.sim
    masses = sim.model_params["mass"]
    assert masses.shape == (4,) and np.all(np.abs(masses / 0.033 - 1) <= 0.1)
    assert np.ptp(masses) > 0
    assert objs.drone.mass == 0.033  # the controller gets the nominal mass
    off = objs.ref_offset
    assert np.allclose(np.sort(np.unique(off[:, 0])), [-1.0, 1.0])
    pos = np.asarray(sim.state.pos)
    ref0 = objs.trajectory(0.0)
    assert np.allclose(pos, np.asarray(ref0.pos) + off)  # starts on its reference
    assert len(sim.world.boxes) == 1
    again = build(sc)  # same file, same draws
    assert np.array_equal(again.sim.model_params["mass"], masses)


def test_every_example_scenario_validates():
    files = sorted((ROOT / "examples").glob("*.toml"))
    assert files
    for f in files:
        load_scenario(f)


def test_uniform_ranges_and_a_ball_of_body_rates_set_each_drones_start():
    """``randomize.*_range`` draw uniformly within ± per axis, ``ang_vel_max`` in a ball around
    ``initial.ang_vel`` (the Recover-v0 throw as a scenario)."""
    from quadsim.app.scenario import build, load_scenario
    from quadsim.physics.rotation import to_matrix

    text = """
n = 2000
[initial]
start_on_reference = false
pos = [0.75, 0.0, 2.5]
vel = [1.5, 0.0, 0.0]
ang_vel = [1.0, 0.0, 0.0]
[randomize]
pos_range = [0.25, 0.5, 0.3]
vel_range = [1.5, 1.0, 1.0]
rpy_range_deg = [180.0, 180.0, 180.0]
ang_vel_max = 15.0
[output]
plots = false
"""
    st = build(load_scenario(text, text=True)).sim.state
    pos, vel, w = np.asarray(st.pos), np.asarray(st.vel), np.asarray(st.ang_vel)
    for got, lo, hi in ((pos, [0.5, -0.5, 2.2], [1.0, 0.5, 2.8]), (vel, [0, -1, -1], [3, 1, 1])):
        assert np.all(got >= np.array(lo) - 1e-12) and np.all(got <= np.array(hi) + 1e-12)
        np.testing.assert_allclose(got.min(0), lo, atol=0.02 * (np.array(hi) - lo).max())
        np.testing.assert_allclose(got.max(0), hi, atol=0.02 * (np.array(hi) - lo).max())
    r = np.linalg.norm(w - [1.0, 0.0, 0.0], axis=1)
    assert r.max() <= 15.0 and r.max() > 14.8
    assert np.mean((r / 15.0) ** 3) == pytest.approx(0.5, abs=0.03)
    tilt = np.degrees(np.arccos(np.clip(np.asarray(to_matrix(st.quat))[:, 2, 2], -1, 1)))
    assert tilt.max() > 175.0 and np.mean(tilt > 90.0) == pytest.approx(0.5, abs=0.05)


def test_a_std_and_a_range_of_the_same_quantity_are_refused():
    with pytest.raises(ValueError, match=r"randomize\.vel_range .*give one of randomize\.vel_std"):
        load("[randomize]\nvel_std = 0.1\nvel_range = [0.1, 0.0, 0.0]\n")
    with pytest.raises(ValueError, match=r"randomize\.rpy_range_deg .*must be >= 0"):
        load("[randomize]\nrpy_range_deg = [10.0, -1.0, 0.0]\n")
