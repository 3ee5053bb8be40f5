"""A batch's diverged drones are reported by every runner and left out of the summary's metrics
(issue 40, item 2): before, a drone of a batch whose state ran away was frozen silently and its
frozen hover counted as perfect tracking (``tests/app/test_run_faults.py``: the command)."""

from __future__ import annotations

import numpy as np
import pytest

from quadsim.app.io import summarize
from quadsim.engines.sim import Simulator, fault_report
from quadsim.loop.control import control, load_gains
from quadsim.loop.flight import fly
from quadsim.loop.trajectories import Hover
from quadsim.physics.world import Limits, World

RUNNERS = [("numpy", "python"), ("native", "compiled"), ("jax", "scan")]


def flight(backend):
    """Three drones hovering at 1 m; drone 1 starts spinning past the body-rate limit."""
    sim = Simulator("cf2x_L250", n=3, dt=1 / 500, backend=backend, dtype="float64")
    w = np.zeros((3, 3))
    w[1, 0] = 2.0 * sim.world.limits.max_rate
    sim.reset(pos=[0.0, 0.0, 1.0], ang_vel=w)
    gains = load_gains("cf2x_L250_geometric", drone=sim.drone, dt=sim.dt)
    return sim, fly(sim, Hover((0.3, 0.0, 1.0)), control, gains, duration=0.5, log_every=5)


@pytest.mark.parametrize(("backend", "loop"), RUNNERS)
def test_every_runner_reports_the_diverged_drone_of_a_batch(backend, loop):
    _, res = flight(backend)
    assert res.meta["loop"] == loop
    assert res.meta["faults"] == [
        {"drone": 1, "step": 0, "time_s": pytest.approx(0.002), "quantity": "body rate"}
    ]


def test_the_summary_leaves_the_diverged_drone_out_of_the_metrics():
    _, res = flight("native")
    log = res.log
    # the oracle: the two good drones' errors from the log itself
    good = [0, 2]
    e = np.linalg.norm(log["pos"] - log["ref_pos"], axis=-1)[:, good]
    s = summarize(log, res.meta, 1.0, faults=res.meta["faults"])
    assert s["fault_count"] == 1 and s["faults"][0]["drone"] == 1
    assert s["tracking_rms_m"] == pytest.approx(np.sqrt((e**2).mean()), rel=1e-12)
    assert s["tracking_max_m"] == pytest.approx(e.max(), rel=1e-12)
    assert s["tracking_rms_m"] > 0.05  # the good drones fly 0.3 m to the set point
    assert s["per_drone"][1]["fault"] == {"step": 0, "time_s": pytest.approx(0.002),
                                          "quantity": "body rate"}  # fmt: skip
    assert s["per_drone"][0]["fault"] is None
    # without the faults the frozen drone (0.3 m off, never moving) would count
    s_all = summarize(log, res.meta, 1.0)
    assert s_all["fault_count"] == 0 and s_all["tracking_rms_m"] != s["tracking_rms_m"]


def test_fault_report_names_each_quantity():
    world = World(limits=Limits(max_speed=5.0, max_rotor=30000.0))
    sim = Simulator("cf2x_L250", n=4, dt=0.01, backend="numpy", world=world)
    vel = np.zeros((4, 3))
    vel[2] = [6.0, 0.0, 0.0]
    rotor = np.full((4, 4), sim.hover_rpm)
    rotor[3, 0] = 40000.0  # past max_rotor (RPM)
    sim.reset(pos=[0.0, 0.0, 1.0], vel=vel, rotor_vel=rotor)
    sim.step(np.full((4, 4), sim.hover_rpm))
    got = fault_report(sim.status, sim.dt)
    assert [(f["drone"], f["quantity"]) for f in got] == [(2, "speed"), (3, "rotor speed")]
    assert all(f["step"] == 0 and f["time_s"] == pytest.approx(0.01) for f in got)
    assert fault_report(None, 0.01) == []
