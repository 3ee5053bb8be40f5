"""The optimal-control check of throws (quadsim.app.rl.oracle): the CasADi twin's optimal
recovery, replayed in the simulator, reaches the same lowest point (the twin and the plant are
one model), and the altitude an upside-down Crazyflie needs to turn over is what its
thrust-to-weight ratio of 1.53 allows."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("casadi")

from quadsim.app.rl.oracle import KNOTS, make_solver, replay
from quadsim.physics.envelope import envelope
from quadsim.physics.params import load_params
from quadsim.physics.rotation import from_euler


@pytest.fixture(scope="module")
def drone():
    return load_params("cf2x_L250")


def _start(drone, z0: float, vz: float) -> np.ndarray:
    """Nearly upside down (roll 171 deg), at ``z0`` [m], falling at ``-vz``, rotors at hover."""
    q = np.asarray(from_euler(np.array([0.95 * np.pi, 0.0, 0.0])))
    hover = envelope(drone).hover_rpm
    return np.concatenate([[1.0, 0.0, z0], q, [0.0, 0.0, vz], [0.0, 0.0, 0.0], [hover] * 4])


def _solve(drone, x0):
    hover = envelope(drone).hover_rpm
    guess = np.tile(x0[:, None], (1, KNOTS + 1))  # stay where it is
    return make_solver(drone)(x0, guess, np.full((4, KNOTS), hover))


def test_the_twins_optimal_recovery_replays_the_same_in_the_simulator(drone):
    """Upside down at rest 2.5 m up: the best recovery bottoms out about 1.47 m lower (measured
    1.029 m); the simulator flying its commands at 500 Hz bottoms out within 1 mm of the twin's
    RK4 over 20 ms."""
    x0 = _start(drone, 2.5, 0.0)
    status, low, cmds = _solve(drone, x0)
    assert status == "solved"
    assert 0.9 < low < 1.2
    assert cmds.shape == (4, KNOTS)
    assert np.all((cmds >= drone.rpm_min - 1.0) & (cmds <= drone.rpm_max + 1.0))
    assert abs(replay(drone, x0, cmds) - low) < 1e-3


def test_a_throw_too_low_to_turn_over_is_not_saved(drone):
    """The same throw 1 m up and falling at 1 m/s would need about 2.25 m (measured lowest point
    -1.25 m): the optimum flies through the floor, and so does its replay."""
    status, low, cmds = _solve(drone, _start(drone, 1.0, -1.0))
    assert status == "solved" and low < -1.0
    assert replay(drone, _start(drone, 1.0, -1.0), cmds) < 0.0
