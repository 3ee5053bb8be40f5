"""``examples/seed002_skydio.py`` reproduces seed 002's hover, forward float, 10° pitch and curve.

The example flies seed 002's ``Drone`` (skydio2_x with g = 9.81) with the wrench model; these
tests hold its numbers to the seed's printout and to closed forms.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "seed002_skydio.py"


@pytest.fixture(scope="module")
def r() -> dict:
    spec = importlib.util.spec_from_file_location("example_seed002_skydio", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main()


def test_drone_is_the_seeds(r):
    assert r["params_vs_seed"] < 1e-15  # mass, k_d, I_xy, I_z, 0.1 k_d


def test_hover_stays_put(r):
    assert r["hover_max_dev"] < 1e-12
    assert r["hover_geometric_vs_seed"] < 1e-12


def test_floating_forward_reproduces_seed_printout(r):
    v = r["float_geometric_vel"]
    assert round(v, 2) == 0.69  # seed: "final velocity: [0.69 0. 0.]"
    assert abs(v - 0.69) < 5e-3
    assert r["float_geometric_vy_vz"] == 0.0
    assert r["float_geometric_vs_seed"] < 1e-12  # geometric == the seed's update
    assert r["float_semi_implicit_x"] == pytest.approx(r["float_seed_x"], abs=1e-12)
    assert r["float_euler_vel"] == pytest.approx(v, abs=1e-12)  # same velocity update,
    assert r["float_euler_x"] - r["float_seed_x"] > 0.2  # but explicit Euler's position differs
    # exact solution v0 / (1 + k_d v0 t / m) = 1 / 1.425; dt = 1 s Euler is 1 % low
    assert r["float_exact_vel"] == pytest.approx(1 / 1.425, rel=1e-12)
    assert r["float_rk4_err"] < 1e-9
    assert 0.005 < r["float_exact_vel"] - v < 0.01


def test_pitch_reaches_terminal_velocity(r):
    v_t = math.sqrt(9.81 * math.tan(math.radians(10)) / 0.0425)
    assert r["terminal_velocity"] == pytest.approx(v_t, rel=1e-12)
    assert round(v_t, 2) == 6.38
    assert r["pitch_terminal_rel_err"] < 0.01
    assert r["pitch_tanh_err"] < 1e-6  # v_t tanh(k_d v_t t / m)
    assert r["pitch_speed_10s"] < 0.995 * v_t  # still accelerating at 10 s
    assert r["pitch_max_dz"] < 1e-9  # vertical balance exact while the pitch is held
    assert r["pitch_max_vy_vz"] < 1e-9
    assert r["pitch_att_err_deg"] < 1e-9  # no torque: attitude stays at 10°
    assert r["pitch_geometric_vs_seed"] < 1e-12


def test_roll_moment_curves_left(r):
    assert r["curve_geometric_vs_seed"] < 1e-12
    assert r["curve_semi_implicit_vs_seed"] > 1e-6  # linearised attitude update differs
    assert 10.0 < r["curve_y_10s"] < 25.0  # left (+y), tens of metres after 10 s
    assert 10.0 < r["curve_seed_y_10s"] < 30.0
    assert r["curve_right_seed_y_10s"] == pytest.approx(-r["curve_seed_y_10s"], rel=1e-12)
    assert 20.0 < r["curve_heading_deg_10s"] < 60.0  # course turns counter-clockwise
    assert r["curve_min_heading_step"] > 0.0  # and keeps turning
    assert -15.0 < r["curve_roll_deg_10s"] < -8.0  # banked left
    assert abs(r["curve_yaw_deg_10s"]) < 1e-9  # without yawing


def test_extended_curve_loses_altitude(r):
    assert r["curve_roll_deg_30s"] < 3 * r["curve_roll_deg_10s"] < 0  # roll keeps increasing
    assert r["curve_z_30s"] < -10.0 and r["curve_z_30s"] < 10 * r["curve_z_10s"]
    assert r["curve_heading_deg_30s"] > r["curve_heading_deg_10s"]
