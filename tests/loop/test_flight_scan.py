"""``fly`` on the JAX scan loop against the per-step Python loop (issue 10, item 2, JAX part).

On the ``jax`` backend ``fly`` runs the closed loop as one ``lax.scan`` per call, with the sensor
noise and the Dryden gusts drawn on the host in the Python loop's order and scanned in. Every
logged key must agree with the per-step loop (``compiled=False``, on JAX and on NumPy) to 1e-9
relative in float64, noise included, chunk by chunk and for any chunking; an interrupted flight
keeps its completed chunks; the simulator, its generator and its gust state end alike.
"""

from __future__ import annotations

import signal

import numpy as np
import pytest
from log_helpers import assert_logs_equal

from quadsim.engines.sim import Simulator, Wind
from quadsim.loop.brain import Sensors
from quadsim.loop.control import control, load_gains
from quadsim.loop.flight import fly
from quadsim.loop.trajectories import Circle, Lemniscate

SEEN: list = []  # SIGINT's state where a signal test raised it (for its failure message)

pytest.importorskip("jax")

DT = 1 / 500
TOL = 1e-9
TRAJS = {
    "circle": Circle(radius=1.0, speed=1.0, center=(0.0, 0.0, 1.0)),
    "lemniscate": Lemniscate(size=1.0, period=8.0, center=(0.0, 0.0, 1.0)),
}
GAINS = {kind: load_gains(f"cf2x_L250_{kind}", dt=DT) for kind in ("geometric", "pid")}


def _features(name, n):
    """``(Simulator kwargs, fly kwargs, sensor seed or None (= sim.seed))`` of a case."""
    from quadsim.physics.sensors import MocapParams, load_imu
    from quadsim.physics.wind import dryden_preset

    r = np.random.default_rng(11)
    masses = 0.0319 * (1.0 + r.uniform(-0.05, 0.05, n))
    turb = dryden_preset("light", 1.0, 1.0)
    gusts = Wind(mean=(1.0, 0.0, 0.0), turbulence=turb)
    imu = load_imu("bmi088")
    mocap = MocapParams(pos_std=1e-3, att_std=1e-2, latency=3 * DT, rate=1 / DT)
    return {
        "plain": ({}, {}, None),
        "mass": ({"params": {"mass": masses}}, {}, None),
        "wind": ({"wind": Wind(mean=np.linspace([-2.0, 0.0, 0.0], [2.0, 1.0, 0.0], n))}, {},
                 None),
        "dryden": ({"wind": gusts}, {}, None),
        "inflow_per_drone": ({"params": {"inflow_coef": np.linspace(0.0, 0.1, n)}}, {}, None),
        "warmup_per_drone": ({"params": {"warmup_coef": np.linspace(0.0, 0.1, n),
                                         "warmup_time": np.linspace(0.05, 0.2, n)}}, {}, None),
        "imu_mocap_dryden_sim_seed": ({"wind": gusts}, {"sensors": Sensors(imu, mocap)}, None),
        "all_own_seed": (
            {"wind": gusts, "params": {"mass": masses}}, {"sensors": Sensors(imu, mocap)}, 7
        ),
    }[name]


def _fly(backend, name, compiled=None, n=4, steps=103, log_every=5, chunk_steps=20,
         traj="lemniscate", gains="geometric", dtype="float64", **kw):  # fmt: skip
    sim_kw, fly_kw, seed = _features(name, n)
    rng = np.random.default_rng(0)
    offset = rng.uniform([-2.0, -2.0, 0.0], [2.0, 2.0, 1.0], (n, 3))
    sim = Simulator("cf2x_L250", n=n, dt=DT, backend=backend, dtype=dtype, **sim_kw)
    r0 = TRAJS[traj](0.0)
    sim.reset(pos=np.asarray(r0.pos) + offset + rng.normal(0.0, 0.05, (n, 3)), vel=r0.vel)
    chunks = []
    user = kw.pop("on_chunk", None)

    def on_chunk(chunk):
        chunks.append(chunk)
        if user is not None:
            user(chunk)

    res = fly(sim, TRAJS[traj], control, GAINS[gains], duration=steps * DT, ref_offset=offset,
              log_every=log_every, chunk_steps=chunk_steps, on_chunk=on_chunk,
              compiled=compiled, seed=seed, **fly_kw, **kw)  # fmt: skip
    return res, chunks, sim, seed


def _assert_sims_alike(a, b, rng_a=None, rng_b=None):
    """Same clock, state, flags, generators and gust state after the flight."""
    assert a.k == b.k
    for f, g in zip(a.state, b.state, strict=True):
        g = np.asarray(g)
        np.testing.assert_allclose(np.asarray(f), g, rtol=0, atol=TOL * max(np.abs(g).max(), 1))
    for f, g in zip(a.status, b.status, strict=True):
        np.testing.assert_array_equal(np.asarray(f), np.asarray(g))
    if b.gust_state is None:
        assert a.gust_state is None
    else:
        g = np.asarray(b.gust_state)
        np.testing.assert_allclose(a.gust_state, g, rtol=0, atol=TOL * np.abs(g).max())


def test_scan_equals_the_jax_per_step_loop_with_every_feature():
    """Per-drone masses, gusts, IMU and delayed motion capture on separate generators."""
    scan, sc, sim_s, rng_s = _fly("jax", "all_own_seed")
    step, pc, sim_p, rng_p = _fly("jax", "all_own_seed", compiled=False)
    assert scan.meta["loop"] == "scan" and scan.meta["loop_reason"] is None
    assert step.meta["loop"] == "python" and step.meta["loop_reason"] == "compiled=False"
    assert scan.steps == step.steps == 103 and len(sc) == len(pc) == 6
    for c, p in zip(sc, pc, strict=True):
        assert_logs_equal(c, p)
    worst = assert_logs_equal(scan.log, step.log)
    print(f"\nscan vs per-step JAX loop, every feature: worst relative difference {worst:.1e}")
    assert {"gyro", "accel", "mocap_pos"} <= set(scan.log)
    _assert_sims_alike(sim_s, sim_p, rng_s, rng_p)


@pytest.mark.parametrize("name", ["plain", "mass", "wind", "dryden", "imu_mocap_dryden_sim_seed",
                                  "inflow_per_drone", "warmup_per_drone"])
def test_scan_equals_the_numpy_reference(name):
    """The reference path: NumPy simulator, per-step NumPy brain (``jit=False``)."""
    scan, sc, sim_s, _ = _fly("jax", name)
    ref, rc, sim_r, _ = _fly("numpy", name, jit=False)
    assert scan.meta["loop"] == "scan"
    for c, r in zip(sc, rc, strict=True):
        assert_logs_equal(c, r)
    worst = assert_logs_equal(scan.log, ref.log)
    print(f"\n{name}: worst relative difference {worst:.1e}")
    _assert_sims_alike(sim_s, sim_r)


def test_pid_on_the_scan():
    scan, *_ = _fly("jax", "all_own_seed", gains="pid", traj="circle", log_every=1)
    ref, *_ = _fly("numpy", "all_own_seed", gains="pid", traj="circle", log_every=1,
                   jit=False)  # fmt: skip
    assert scan.meta["loop"] == "scan"
    assert_logs_equal(scan.log, ref.log)


@pytest.mark.parametrize("chunk_steps", [5, 35, 1000])
def test_chunk_size_does_not_change_the_scan_log(chunk_steps):
    scan, sc, *_ = _fly("jax", "imu_mocap_dryden_sim_seed", steps=150, chunk_steps=chunk_steps)
    ref, *_ = _fly("numpy", "imu_mocap_dryden_sim_seed", steps=150, jit=False)
    assert len(sc) == -(-150 // chunk_steps)
    assert_logs_equal(scan.log, ref.log)


def test_calls_split_under_the_memory_cap(monkeypatch):
    """Per-step inputs past CHUNK_BYTES: several scan calls per chunk, the same log."""
    from quadsim.loop import driver
    from quadsim.loop.closed_loop_jax import ScanLoop

    calls = []
    call = ScanLoop.__call__

    def counting(self, carry, offset, z, wind, steps):
        calls.append(steps)
        return call(self, carry, offset, z, wind, steps)

    # 4 drones, 18 normals + the wind per step and drone: 672 bytes per step of one call
    monkeypatch.setattr(driver, "CHUNK_BYTES", 672 * 10)
    monkeypatch.setattr(ScanLoop, "__call__", counting)
    _, sc, sim_s, _ = _fly("jax", "imu_mocap_dryden_sim_seed", steps=60, chunk_steps=20)
    _, rc, sim_r, _ = _fly("numpy", "imu_mocap_dryden_sim_seed", steps=60, jit=False)
    # chunks of 15 steps (the log's own cap), calls of 2 periods of 5: 10 + 5, then the end
    assert calls == [10, 5] * 4 + [1] and len(sc) == len(rc) == 4
    for c, r in zip(sc, rc, strict=True):
        assert_logs_equal(c, r)
    _assert_sims_alike(sim_s, sim_r)


@pytest.mark.usefixtures("stop_signals_default")
@pytest.mark.parametrize("where", ["on_chunk", "progress"])
def test_sigint_keeps_the_completed_chunks(where):
    calls = []

    def stop(*args):
        calls.append(args)
        if len(calls) == 2:
            SEEN.append(__import__("conftest").sigint_state())
            signal.raise_signal(signal.SIGINT)

    res, _, sim, _ = _fly("jax", "imu_mocap_dryden_sim_seed", steps=100, **{where: stop})
    assert res.meta["loop"] == "scan" and res.interrupted and res.signal == signal.SIGINT, SEEN
    assert res.steps == 40 and res.log["time"].shape == (8,) and sim.k == 40
    ref, *_ = _fly("numpy", "imu_mocap_dryden_sim_seed", steps=100, jit=False)
    assert_logs_equal(res.log, {key: v[:8] for key, v in ref.log.items()})
    np.testing.assert_allclose(np.asarray(sim.state.pos), ref.log["pos"][8], rtol=0, atol=1e-12)


def test_a_second_flight_continues_alike():
    sim_kw, fly_kw, _ = _features("imu_mocap_dryden_sim_seed", 2)
    out = []
    for backend, kw in (("jax", {}), ("numpy", {"jit": False})):
        sim = Simulator("cf2x_L250", n=2, dt=DT, backend=backend, dtype="float64", **sim_kw)
        sim.reset(pos=(0.0, 0.0, 1.0))
        args = (sim, TRAJS["circle"], control, GAINS["geometric"])
        kw = {"duration": 50 * DT, "log_every": 3, "chunk_steps": 30, **fly_kw, **kw}
        out.append((fly(*args, **kw), fly(*args, **kw), sim))
    (s1, s2, sim_s), (p1, p2, sim_p) = out
    assert s2.meta["loop"] == "scan"
    assert_logs_equal(s1.log, p1.log)
    assert_logs_equal(s2.log, p2.log)
    np.testing.assert_allclose(s2.log["time"][0], 50 * DT, rtol=1e-12)
    _assert_sims_alike(sim_s, sim_p)


def test_float32_simulator_scans():
    """A float32 plant (the brain in float64): close to float64, logged as float64."""
    f32, *_, sim = _fly("jax", "dryden", dtype="float32")[:3]
    f64, *_ = _fly("jax", "dryden")
    assert f32.meta["loop"] == "scan" and f32.log["pos"].dtype == np.float64
    np.testing.assert_allclose(f32.log["pos"], f64.log["pos"], atol=1e-4)
    assert np.asarray(sim.state.pos).dtype == np.float32


def test_single_drone_fault_raises_as_the_simulator_does():
    from quadsim.engines.sim import SimulationError
    from quadsim.physics.world import Limits, World

    messages = []
    for backend, kw in (("jax", {}), ("numpy", {"jit": False})):
        sim = Simulator("cf2x_L250", n=1, dt=DT, backend=backend, dtype="float64",
                        world=World(limits=Limits(max_speed=0.2)))  # fmt: skip
        sim.reset(pos=(0.0, 0.0, 1.0))
        with pytest.raises(SimulationError, match="drone diverged: speed at step") as e:
            fly(sim, TRAJS["circle"], control, GAINS["geometric"], duration=0.5, **kw)
        messages.append(str(e.value))
    assert messages[0] == messages[1]
