"""cf21_nanobench flies on gains of its own, and gains that cannot hold a drone up say so when
they are loaded (issue 40, item 9: with cf2x_L250's, the 0.85 thrust cap gives 0.41 N against
the drone's 0.441 N weight, and the drone sank in a run that exited 0 without a word)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from quadsim.engines.sim import Simulator
from quadsim.loop.control import control, load_gains
from quadsim.loop.control.gains import hover_problem, thrust_cap
from quadsim.loop.flight import fly
from quadsim.loop.trajectories import Circle, Hover
from quadsim.physics.params import load_params


def test_borrowed_gains_that_cannot_hover_warn_at_load():
    with pytest.warns(UserWarning, match="cannot hover") as rec:
        g = load_gains("cf2x_L250_geometric", drone="cf21_nanobench", dt=0.002)
    drone = load_params("cf21_nanobench")
    weight = drone.mass * 9.81
    # the oracle: 0.85 of the rotors' full thrust, less the warm-up's share
    assert thrust_cap(g, drone) == pytest.approx(0.85 * 0.48 * (1 - drone.warmup_coef), rel=1e-3)
    assert thrust_cap(g, drone) < weight
    assert "0.392 N once the motors are warm" in str(rec[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        own = load_gains("cf21_nanobench_geometric", drone="cf21_nanobench", dt=0.002)
        load_gains("cf2x_L250_geometric", drone="cf2x_L250", dt=0.002)
    assert hover_problem(own, drone) is None and thrust_cap(own, drone) > weight


@pytest.mark.parametrize(("traj", "duration"), [
    (Hover((0.0, 0.0, 1.0)), 12.0),  # through the warm-up (8.5 s time constant)
    (Circle(radius=0.5, speed=0.5, center=(0.0, 0.0, 1.0)), 8.0),
])  # fmt: skip
def test_nanobench_flies_on_its_own_gains(traj, duration):
    r0 = traj(0.0)
    runs = {}
    for name in ("cf21_nanobench_geometric", "cf2x_L250_geometric"):
        sim = Simulator("cf21_nanobench", n=1, dt=0.002, backend="native")
        sim.reset(pos=r0.pos, vel=r0.vel)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            g = load_gains(name, drone=sim.drone, dt=sim.dt)
        log = fly(sim, traj, control, g, duration=duration).log
        e = np.linalg.norm(log["pos"] - log["ref_pos"], axis=-1)[log["time"] > 2.0]
        runs[name] = (np.sqrt((e**2).mean()), log["pos"][-1, 0, 2])
    rms, z_end = runs["cf21_nanobench_geometric"]
    assert rms < 0.01 and abs(z_end - 1.0) < 0.01
    assert runs["cf2x_L250_geometric"][1] < 0.5  # the borrowed gains let it sink
