"""The seed examples (``examples/seed00*.py``) run and reproduce their seeds' outcomes.

Each example's ``main()`` returns its measured numbers; these tests hold them to the physics:
seed 000 (CasADi linearisation and LQR recovery of the Crazyflie), seed 003 (motor lag, envelope
formulas, RK45 loop), seed 004 (Euler vs quaternion model, its equations, gimbal lock).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run_example(name: str) -> dict:
    """Import ``examples/<name>.py`` as a module (no ``__main__`` printing) and run ``main()``."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main()


def test_seed000_casadi_linearization_and_lqr():
    pytest.importorskip("casadi")
    r = run_example("seed000_casadi_lqr")
    assert r["hover_residual"] < 1e-12  # hover is an equilibrium of the numeric model
    assert r["linearization_rel_err"] < 1e-6  # CasADi Jacobians == finite differences
    assert r["max_closed_loop_real"] < 0.0  # A - BK is Hurwitz
    assert r["start_pos_err"] == pytest.approx(0.3)
    assert r["final_pos_err"] < 0.01  # back to hover within 1 cm after 3 s
    assert r["final_att_err"] < 1e-3
    assert r["settle_time_1cm"] < 3.0


def test_seed003_motor_model_rk45():
    r = run_example("seed003_motor_rk45")
    assert r["matrix_err"] < 1e-15  # quadsim's rpm^2 matrix is the seed's table
    assert r["envelope_rel_err"] < 1e-12  # seed's T_max, T_min, T/W, a_up, a_down
    assert r["thrust_to_weight"] == pytest.approx(1.657, abs=1e-3)
    assert r["hover_dz"] < 1e-3
    assert r["thrust_step_rpm_rel_err"] < 1e-4  # exp(-k_m t) step response
    assert r["yaw_step_rpm_rel_err"] < 1e-4
    assert r["thrust_step_z_err"] < 1e-6  # height vs closed form [m]
    assert r["thrust_step_dz"] > 0.1  # it climbs
    assert r["yaw_step_rate_err"] < 1e-6  # yaw rate vs closed form [rad/s]
    assert r["yaw_rate_end"] > 1.0
    assert r["simulator_vs_loop"] < 1e-9  # Simulator(integrator=rk45) is seed 003's loop
    assert r["allocate_vs_quadsim"] < 1e-9
    assert r["clip_up_rpm"] == 20000.0 and r["clip_down_rpm"] == 3000.0
    assert r["clip_accel_rel_err"] < 1e-6  # saturated flight hits the envelope's accelerations


def test_seed004_euler_matches_quaternion_and_equations():
    r = run_example("seed004_euler_vs_quaternion")
    assert r["max_tilt_deg"] > 15.0  # the run leaves the near-hover regime
    assert r["max_pos_diff"] < 1e-6
    assert r["max_att_diff"] < 1e-6
    assert r["max_rpy_diff"] < 1e-6
    for key in ("eq2_err", "eq3_err", "eq6_err", "eq7_err", "eq8_model_err", "eq9_err"):
        assert r[key] < 1e-12, key
    assert r["eq8_quat_err"] < 1e-6
    assert r["eq10_corrected_err"] < 1e-6
    assert r["eq10_printed_err"] > 1e-2  # the seed's printed W_dot has typos
    rows = r["gimbal_lock"]
    assert rows[-1]["max_pitch_deg"] > 89.9
    assert rows[-1]["max_cond_W"] > 1e3
    assert rows[-1]["max_euler_rate"] > 100 * rows[-1]["max_ang_vel"]
    assert all(g["quat_att_err"] < 1e-9 for g in rows)
    assert rows[-1]["euler_att_err"] > 1e3 * rows[0]["euler_att_err"]  # error grows near 90°
    assert rows[-1]["euler_att_err"] > 1e4 * rows[-1]["quat_att_err"]
