"""The node's loop (``quadsim.app.ros2.live.LiveLoop``) in process: without commands it is
``fly``'s loop sample for sample; each mode does what it says, measured on seed 001's F450."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from quadsim.app.ros2.live import LAND_SPEED, LiveLoop
from quadsim.app.scenario import build, load_scenario
from quadsim.loop.flight import fly
from quadsim.physics.rotation import to_euler

SEED001 = Path(__file__).resolve().parents[2] / "examples" / "seed001_f450_hover.toml"


def _loop(jit=False) -> LiveLoop:
    return LiveLoop(build(load_scenario(SEED001)), jit=jit)


def _run(lp: LiveLoop, seconds: float) -> list:
    states = []
    for _ in range(round(seconds / lp.sim.dt)):
        states.append(lp.step())
    return states


@pytest.mark.parametrize("jit", [False, None])
def test_without_commands_it_is_flys_loop(jit):
    """NumPy: bitwise equal to ``fly``'s per-step NumPy loop (1 s, IMU noise, the wall world);
    JAX: equal to rounding."""
    a = build(load_scenario(SEED001))
    res = fly(
        a.sim,
        a.trajectory,
        a.control,
        a.gains,
        duration=1.0,
        ref_offset=a.ref_offset,
        sensors=a.sensors,
        seed=a.seed,
        compiled=False,
        jit=False,
    )
    lp = _loop(jit)
    pos, gyro, rpm = [], [], []
    for _ in range(200):
        pos.append(lp.state.pos.copy())
        lp.step()
        gyro.append(lp.out["gyro"])
        rpm.append(lp.rpm)
    tol = 0.0 if jit is False else 1e-9
    assert np.abs(np.array(pos) - res.log["pos"][:200]).max() <= tol
    assert np.abs(np.array(gyro) - res.log["gyro"][:200]).max() <= tol * 10
    assert np.abs(np.array(rpm) - res.log["cmd_rpm"][:200]).max() <= tol * 1e4
    assert lp.backend == ("NumPy" if jit is False else "JAX")


def test_a_pose_set_point_is_held_and_auto_returns():
    lp = _loop()
    _run(lp, 1.0)
    lp.set_pose(0, [0.5, -0.3, 1.4], 0.6)
    s = _run(lp, 5.0)[-1]
    assert np.abs(s.pos[0] - [0.5, -0.3, 1.4]).max() < 0.02
    assert float(to_euler(s.quat[0])[2]) == pytest.approx(0.6, abs=0.02)
    assert lp.out["ref_pos"][0] == pytest.approx([0.5, -0.3, 1.4])
    lp.set_mode(0, "auto")
    s = _run(lp, 5.0)[-1]
    assert np.abs(s.pos[0] - [0.0, 0.0, 1.0]).max() < 0.02


def test_land_descends_at_its_speed_then_stops_the_motors():
    lp = _loop()
    _run(lp, 2.0)
    z0 = float(lp.state.pos[0, 2])
    lp.set_mode(0, "land")
    zs = np.array([s.pos[0, 2] for s in _run(lp, 1.0)])
    # the reference descends at LAND_SPEED; the drone follows it with a lag
    assert (z0 - zs[-1]) == pytest.approx(LAND_SPEED * 1.0, rel=0.35)
    _run(lp, z0 / LAND_SPEED + 2.0)
    assert lp.state.pos[0, 2] < 0.03
    assert np.all(lp.rpm == 0.0)
    assert np.abs(lp.state.vel[0]).max() < 0.05


def test_attitude_set_points_tilt_the_drone():
    lp = _loop()
    _run(lp, 1.0)
    lvl = lp.attitude_level
    m_g = float(lp.sim.drone.mass) * 9.81
    thrust = (m_g / math.cos(0.1) - lvl.f_lo) / (lvl.f_hi - lvl.f_lo)
    lp.set_attitude(0, 0.1, 0.0, 0.0, thrust)
    states = _run(lp, 1.0)
    roll = np.array([float(to_euler(s.quat[0])[0]) for s in states[100:]])
    assert np.abs(roll - 0.1).max() < 0.01
    # tilted right by roll, it accelerates along -y (FLU: roll about x tips body y down)
    assert states[-1].vel[0, 1] < -0.3
    assert abs(states[-1].vel[0, 2]) < 0.1


def test_rotor_speeds_cut_and_checks():
    lp = _loop()
    lp.set_rpm(0, [1e9, -5.0, 100.0, 200.0])  # clipped to the rotors' range
    lp.step()
    assert lp.rpm[0, 0] == lp.rpm_max and lp.rpm[0, 1] == 0.0
    assert lp.mode[0] == "rpm"
    lp.set_mode(0, "cut")
    lp.step()
    assert np.all(lp.rpm == 0.0)
    with pytest.raises(ValueError, match="mode must be one of"):
        lp.set_mode(0, "dance")
    with pytest.raises(IndexError, match="out of range"):
        lp.set_rpm(3, [0, 0, 0, 0])
