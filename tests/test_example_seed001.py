"""Seed 001's example scenario: F450 hover with the PID stack at 200 Hz, ADIS16470, wall at 3 m."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from quadsim.app import io
from quadsim.app.run import fly_scenario
from quadsim.app.scenario import load_scenario
from quadsim.physics.sensors import load_imu

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "examples" / "seed001_f450_hover.toml"


def test_seed001_hover_with_pid_imu_and_wall(tmp_path):
    sc = load_scenario(SCENARIO)
    assert sc.get("sim.dt") == 0.005 and sc.get("controller.kind") == "pid"
    summary = fly_scenario(SCENARIO, tmp_path, plots=False, progress=False)
    assert summary["crash_count"] == 0 and not summary["interrupted"]
    assert summary["tracking_rms_m"] < 0.01  # hovering within 1 cm after 3 s
    log, _ = io.read_log(tmp_path / "trajectory.parquet")
    assert log["pos"][..., 0].max() < 3.0  # the wall at x = 3 m was never reached
    assert log["pos"][..., 2].min() > 0.5 and not log["landed"].any()
    # the IMU reads +g up at rest and its gyro noise is the datasheet density at 200 Hz
    rest = log["time"] > 3.0
    imu = load_imu("adis16470")
    accel = log["accel"][rest, 0]
    assert abs(accel[:, 2].mean() - 9.81) < 0.02
    gyro_std = log["gyro"][rest, 0].std(axis=0)
    expected = np.asarray(imu.gyro_noise_density) / np.sqrt(0.005)
    assert np.all(np.abs(gyro_std / expected - 1) < 0.2)  # 400 samples: 5-sigma ~ 0.18
