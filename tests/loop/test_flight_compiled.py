"""``fly`` on the compiled closed loop against its per-step Python loop (issue 10, items 2 and 6).

Both paths fly the same native float64 simulator; every logged key must agree to 1e-9 relative
(flags exactly), chunk by chunk, and the simulator must end in the same state. ``lost_wrench``
is rounding noise away from saturation, so it is compared relative to the commanded wrench.
"""

from __future__ import annotations

import numpy as np
import pytest
from log_helpers import assert_logs_equal

from quadsim.engines import native
from quadsim.engines.sim import Simulator, Wind
from quadsim.loop.brain import Sensors
from quadsim.loop.control import control, load_gains
from quadsim.loop.flight import fly
from quadsim.loop.parts.standard import Mocap
from quadsim.loop.paths import compiled_path_reason
from quadsim.loop.trajectories import Circle, Hover, Lemniscate
from quadsim.physics.rotors import make_allocator

SEEN: list = []  # SIGINT's state where a signal test raised it (for its failure message)

pytestmark = pytest.mark.skipif(not native.available(), reason="needs CasADi and a C compiler")

DT = 1 / 500
TOL = 1e-9
TRAJS = {
    "hover": Hover(pos=(0.0, 0.0, 1.0)),
    "circle": Circle(radius=1.0, speed=1.0, center=(0.0, 0.0, 1.0)),
    "lemniscate": Lemniscate(size=1.0, period=8.0, center=(0.0, 0.0, 1.0)),
}
GAINS = {kind: load_gains(f"cf2x_L250_{kind}", dt=DT) for kind in ("geometric", "pid")}


def _sim(n, seed=0, **kw):
    """A native float64 simulator, its drones near their (offset) references at t = 0."""
    rng = np.random.default_rng(seed)
    offset = rng.uniform(-2.0, 2.0, (n, 3))
    kw = {"dtype": "float64", **kw}
    sim = Simulator("cf2x_L250", n=n, dt=DT, backend="native", **kw)
    return sim, offset, rng.normal(0.0, 0.05, (n, 3))


def _fly(compiled, traj, gains, n, steps, wind=None, **kw):
    sim, offset, jitter = _sim(n, wind=wind)
    r0 = TRAJS[traj](0.0)
    sim.reset(pos=np.asarray(r0.pos) + offset + jitter, vel=r0.vel)
    chunks = []
    result = fly(sim, TRAJS[traj], control, GAINS[gains], duration=steps * DT, ref_offset=offset,
                 compiled=compiled, on_chunk=chunks.append, **kw)  # fmt: skip
    return result, chunks, sim


CASES = [  # (n, log_every, chunk_steps, steps): chunk ends fall between samples or on them
    (1, 1, 7, 150),
    (8, 3, 10, 100),  # chunks of 9 steps, a last chunk of 1
    (8, 3, 12, 150),  # a last chunk of 6 steps ending on a sample
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "n{}-every{}-chunk{}-steps{}".format(*c))
@pytest.mark.parametrize("gains", ["geometric", "pid"])
@pytest.mark.parametrize("traj", ["hover", "circle", "lemniscate"])
def test_compiled_fly_equals_python_fly(traj, gains, case):
    n, every, chunk, steps = case
    kw = {"log_every": every, "chunk_steps": chunk}
    comp, comp_chunks, sim_c = _fly(None, traj, gains, n, steps, **kw)
    py, py_chunks, sim_p = _fly(False, traj, gains, n, steps, jit=False, **kw)
    assert comp.meta["loop"] == "compiled" and comp.meta["loop_reason"] is None
    assert py.meta["loop"] == "python" and py.meta["loop_reason"] == "compiled=False"
    assert comp.steps == py.steps == steps and not comp.interrupted
    assert len(comp_chunks) == len(py_chunks)
    for c, p in zip(comp_chunks, py_chunks, strict=True):
        assert_logs_equal(c, p)
    worst = assert_logs_equal(comp.log, py.log)
    print(f"\n{traj} {gains} {case}: worst relative difference {worst:.1e}")
    # samples at t_k, k = 0, every, 2 every, ..., and the end sample at t = duration
    k = np.r_[np.arange(0, steps, every), steps]
    np.testing.assert_array_equal(comp.log["time"], k * DT)
    # the simulator ends where the Python loop leaves it
    assert sim_c.k == sim_p.k == steps and sim_c.time == sim_p.time
    for f, g in zip(sim_c.state, sim_p.state, strict=True):
        np.testing.assert_allclose(f, g, rtol=0, atol=TOL * max(np.abs(g).max(), 1.0))
    for f, g in zip(sim_c.status, sim_p.status, strict=True):
        np.testing.assert_array_equal(f, g)
        assert np.asarray(f).dtype == np.asarray(g).dtype


def test_constant_wind_and_jax_python_loop_agree():
    """A mean wind per drone is compiled; the JAX-compiled Python loop agrees too."""
    wind = Wind(mean=np.linspace([-2.0, 0.0, 0.0], [2.0, 1.0, 0.0], 4))
    comp, _, _ = _fly(None, "circle", "geometric", 4, 200, wind=wind, log_every=2)
    py, _, _ = _fly(False, "circle", "geometric", 4, 200, wind=wind, log_every=2)  # on JAX
    assert comp.meta["loop"] == "compiled" and py.meta["loop"] == "python"
    assert_logs_equal(comp.log, py.log)
    calm, _, _ = _fly(None, "circle", "geometric", 4, 200, log_every=2)
    assert np.abs(calm.log["pos"] - comp.log["pos"]).max() > 1e-4  # the wind did something


@pytest.mark.parametrize("compiled", [None, False])
def test_interrupted_flight_keeps_the_same_chunks(compiled):
    """KeyboardInterrupt from the writer on the 2nd chunk: one chunk kept, on either path."""
    calls = []

    def on_chunk(chunk):
        calls.append(chunk)
        if len(calls) == 2:
            raise KeyboardInterrupt

    sim, offset, _ = _sim(2)
    sim.reset(pos=np.asarray((0.0, 0.0, 1.0)) + offset)
    res = fly(sim, TRAJS["circle"], control, GAINS["geometric"], duration=0.2, ref_offset=offset,
              log_every=3, chunk_steps=20, on_chunk=on_chunk, compiled=compiled)  # fmt: skip
    assert res.meta["loop"] == ("compiled" if compiled is None else "python")
    assert res.interrupted and res.signal == 2 and res.steps == 36
    assert res.log["time"].shape == (6,)
    np.testing.assert_array_equal(res.log["time"], np.arange(0, 18, 3) * DT)
    assert sim.k == 36
    if compiled is None:  # the Python loop's log and final state, to TOL
        sim_p, _, _ = _sim(2)
        sim_p.reset(pos=np.asarray((0.0, 0.0, 1.0)) + offset)
        calls.clear()
        ref = fly(sim_p, TRAJS["circle"], control, GAINS["geometric"], duration=0.2,
                  ref_offset=offset, log_every=3, chunk_steps=20, on_chunk=on_chunk,
                  compiled=False, jit=False)  # fmt: skip
        assert_logs_equal(res.log, ref.log)
        np.testing.assert_allclose(sim.state.pos, sim_p.state.pos, rtol=0, atol=1e-12)


def test_compiled_true_names_the_reason():
    sim, _, _ = _sim(2)
    with pytest.raises(ValueError, match="a custom allocator"):
        fly(sim, TRAJS["hover"], control, GAINS["geometric"], duration=0.01,
            allocator=make_allocator(sim.drone), compiled=True)  # fmt: skip
    res = fly(sim, TRAJS["hover"], control, GAINS["geometric"], duration=0.01,
              allocator=make_allocator(sim.drone))  # fmt: skip
    assert res.meta["loop"] == "python"
    assert res.meta["loop_reason"].startswith("a custom allocator")
    numpy_sim = Simulator("cf2x_L250", n=2, dt=DT, backend="numpy")
    with pytest.raises(ValueError, match="backend 'numpy'"):
        fly(numpy_sim, TRAJS["hover"], control, GAINS["geometric"], duration=0.01,
            compiled=True)  # fmt: skip


def test_reasons():
    from quadsim.loop.paths import MOCAP_DELAY_MAX
    from quadsim.physics.sensors import MocapParams, load_imu
    from quadsim.physics.wind import dryden_preset

    g = GAINS["geometric"]
    sim, _, _ = _sim(2)
    assert compiled_path_reason(sim, control, g) is None
    assert "jit=False" in compiled_path_reason(sim, control, g, jit=False)
    assert "ctrl_state" in compiled_path_reason(sim, control, g, ctrl_state=object())
    assert "allocator" in compiled_path_reason(sim, control, g, allocator=object())
    # your own controller is traced (issue 10, item 6): only tracing tells whether it compiles
    assert compiled_path_reason(sim, lambda *a: a, g) is None
    assert "ctrl_state: ctrl_0 has shape (3, 2)" in compiled_path_reason(
        sim, control, g, ctrl_state=(np.zeros((3, 2)),))
    assert compiled_path_reason(sim, control, g, ctrl_state=(np.zeros((2, 2)), None)) is None
    euler = Simulator("cf2x_L250", n=2, dt=DT, backend="native", model="euler_zyx")
    assert "quaternion" in compiled_path_reason(euler, control, g)
    # compiled since issue 10's follow-up: turbulence, per-drone parameters, IMU, mocap
    turb = dryden_preset("light", 1.0, 1.0)
    gusty, _, _ = _sim(2, wind=Wind(mean=(1.0, 0.0, 0.0), turbulence=turb))
    assert compiled_path_reason(gusty, control, g) is None
    heavy, _, _ = _sim(2, params={"mass": [0.03, 0.031]})
    assert compiled_path_reason(heavy, control, g) is None
    imu = load_imu("bmi088")
    assert compiled_path_reason(sim, control, g, sensors=Sensors(imu)) is None
    mocap = MocapParams(pos_std=1e-3, att_std=1e-2, latency=3 * DT, rate=1 / DT)
    assert compiled_path_reason(sim, control, g, sensors=[Mocap(mocap)]) is None
    late = mocap._replace(latency=(MOCAP_DELAY_MAX + 1) * DT)
    assert "at most" in compiled_path_reason(sim, control, g, sensors=Sensors(mocap=late))
    odd = mocap._replace(latency=1.5 * DT)
    why = compiled_path_reason(sim, control, g, sensors=Sensors(mocap=odd))
    assert why.startswith("mocap: latency")


def test_float32_simulator_flies_compiled():
    """A float32 simulator runs the loop in float32: close to float64, logged as float64."""
    sim, offset, _ = _sim(4, dtype="float32")
    sim.reset(pos=np.asarray((1.0, 0.0, 1.0)) + offset)
    res = fly(sim, TRAJS["circle"], control, GAINS["geometric"], duration=0.5, ref_offset=offset)
    sim64, _, _ = _sim(4)
    sim64.reset(pos=np.asarray((1.0, 0.0, 1.0)) + offset)
    ref = fly(sim64, TRAJS["circle"], control, GAINS["geometric"], duration=0.5,
              ref_offset=offset)  # fmt: skip
    assert res.meta["loop"] == "compiled" and res.log["pos"].dtype == np.float64
    np.testing.assert_allclose(res.log["pos"], ref.log["pos"], atol=1e-4)
    assert sim.state.pos.dtype == np.float32


# -- per-drone parameters, Dryden turbulence, IMU and motion capture on the compiled loop --------
def _features(name, n):
    """``(Simulator kwargs, fly kwargs, sensor seed or None (= sim.seed))`` of a case."""
    from quadsim.physics.sensors import MocapParams, load_imu
    from quadsim.physics.wind import dryden_preset

    r = np.random.default_rng(11)
    masses = 0.0319 * (1.0 + r.uniform(-0.05, 0.05, n))
    J = np.diag([1.4e-5, 1.4e-5, 2.2e-5]) * (1.0 + r.uniform(-0.05, 0.05, (n, 3, 1)))
    turb = dryden_preset("light", 1.0, 1.0)
    means = np.linspace([0.0, 0.0, 0.0], [-1.0, 2.0, 0.5], n)
    gusts = Wind(mean=(1.0, 0.0, 0.0), turbulence=turb)
    imu = load_imu("bmi088")
    mocap = MocapParams(pos_std=1e-3, att_std=1e-2, latency=3 * DT, rate=1 / DT)
    return {
        "mass": ({"params": {"mass": masses}}, {}, None),
        "mass_inertia": ({"params": {"mass": masses, "J": J}}, {}, None),
        "dryden": ({"wind": gusts}, {}, None),
        # axial inflow, one coefficient for all (a constant of the C step) and one per drone
        "inflow": ({"params": {"inflow_coef": np.full(n, 0.05)}}, {}, None),
        "inflow_per_drone_dryden": (
            {"params": {"inflow_coef": np.linspace(0.0, 0.1, n)}, "wind": gusts}, {}, None),
        # motor warm-up (a state per rotor), one coefficient for all and one per drone
        "warmup": ({"params": {"warmup_coef": np.full(n, 0.05), "warmup_time": np.full(n, 0.1)}},
                   {}, None),
        "warmup_per_drone_imu": (
            {"params": {"warmup_coef": np.linspace(0.0, 0.1, n),
                        "warmup_time": np.linspace(0.05, 0.2, n)}}, {"sensors": Sensors(imu)}, 7),
        # per-drone means (a calm one: the turbulence's u axis is then +x)
        "dryden_per_drone_mean": ({"wind": Wind(mean=means, turbulence=turb)}, {}, None),
        "imu": ({}, {"sensors": Sensors(imu)}, 7),
        "imu_sim_seed": ({}, {"sensors": Sensors(imu)}, None),
        "mocap_delayed": ({}, {"sensors": Sensors(mocap=mocap)}, 7),
        "mocap_now": ({}, {"sensors": Sensors(mocap=mocap._replace(latency=0.0))}, 7),
        "imu_mocap_dryden_sim_seed": ({"wind": gusts}, {"sensors": Sensors(imu, mocap)}, None),
        "all_own_seed": (
            {"wind": gusts, "params": {"mass": masses}}, {"sensors": Sensors(imu, mocap)}, 7
        ),
    }[name]


def _fly_pair(name, n=4, steps=103, log_every=5, chunk_steps=20, traj="lemniscate",
              gains="geometric"):  # fmt: skip
    """The same flight on the compiled loop and on the NumPy Python loop."""
    sim_kw, fly_kw, seed = _features(name, n)
    out = []
    for compiled in (None, False):
        sim, offset, jitter = _sim(n, **sim_kw)
        r0 = TRAJS[traj](0.0)
        sim.reset(pos=np.asarray(r0.pos) + offset + jitter, vel=r0.vel)
        chunks = []
        res = fly(sim, TRAJS[traj], control, GAINS[gains], duration=steps * DT,
                  ref_offset=offset, log_every=log_every, chunk_steps=chunk_steps,
                  on_chunk=chunks.append, compiled=compiled, seed=seed,
                  jit=False if compiled is False else None, **fly_kw)  # fmt: skip
        out.append((res, chunks, sim, seed))
    return out


def _assert_sims_alike(sim_c, sim_p, *_):
    """Same clock, state, flags and gust state after the flight."""
    assert sim_c.k == sim_p.k
    for f, g in zip(sim_c.state, sim_p.state, strict=True):
        np.testing.assert_allclose(f, g, rtol=0, atol=TOL * max(np.abs(g).max(), 1.0))
    for f, g in zip(sim_c.status, sim_p.status, strict=True):
        np.testing.assert_array_equal(f, g)
    if sim_p.gust_state is None:
        assert sim_c.gust_state is None
    else:
        g = np.asarray(sim_p.gust_state)
        np.testing.assert_allclose(sim_c.gust_state, g, rtol=0, atol=TOL * np.abs(g).max())


FEATURES = ["mass", "mass_inertia", "dryden", "dryden_per_drone_mean", "imu", "imu_sim_seed",
            "mocap_delayed", "mocap_now", "imu_mocap_dryden_sim_seed", "all_own_seed", "inflow",
            "inflow_per_drone_dryden", "warmup", "warmup_per_drone_imu"]


@pytest.mark.parametrize("name", FEATURES)
def test_each_feature_compiled_equals_python(name):
    """Every logged key, sensor noise included, chunk by chunk: <= 1e-9 relative in float64."""
    (comp, cc, sim_c, rng_c), (py, pc, sim_p, rng_p) = _fly_pair(name)
    assert comp.meta["loop"] == "compiled" and comp.meta["loop_reason"] is None
    assert py.meta["loop"] == "python"
    assert comp.steps == py.steps == 103 and len(cc) == len(pc) == 6
    for c, p in zip(cc, pc, strict=True):
        assert_logs_equal(c, p)
    worst = assert_logs_equal(comp.log, py.log)
    print(f"\n{name}: worst relative difference {worst:.1e}")
    _assert_sims_alike(sim_c, sim_p, rng_c, rng_p)
    sensors = {"gyro", "accel", "mocap_pos"} & set(py.log)
    sens = _features(name, 4)[1].get("sensors", Sensors())
    assert sensors == ({"gyro", "accel"} if sens.imu is not None else set()) | (
        {"mocap_pos"} if sens.mocap is not None else set())  # fmt: skip


def test_features_change_the_flight():
    """The comparisons can fail: each feature moves the log (or the readings) it should."""
    (base, *_), _ = _fly_pair("mass")
    sim, offset, jitter = _sim(4)
    r0 = TRAJS["lemniscate"](0.0)
    sim.reset(pos=np.asarray(r0.pos) + offset + jitter, vel=r0.vel)
    nominal = fly(sim, TRAJS["lemniscate"], control, GAINS["geometric"], duration=103 * DT,
                  ref_offset=offset, log_every=5, chunk_steps=20)  # fmt: skip
    assert np.abs(base.log["pos"] - nominal.log["pos"]).max() > 1e-6  # the masses act
    (warm, *_), _ = _fly_pair("warmup")
    assert np.abs(warm.log["pos"] - nominal.log["pos"]).max() > 1e-6  # the warm-up acts
    heat = warm.log["motor_heat"]  # (T, N, 4): cold at the start, warming over 0.2 s (τ 0.1 s)
    assert heat.shape[1:] == (4, 4) and np.all(heat[0] == 0.0) and np.all(heat[-1] > 0.2)
    assert "motor_heat" not in nominal.log
    (gusty, *_), _ = _fly_pair("dryden")
    (calm, *_), _ = _fly_pair("mass", 4)
    assert np.abs(gusty.log["vel"] - calm.log["vel"]).max() > 1e-4
    (a, *_), _ = _fly_pair("imu")
    (b, *_), _ = _fly_pair("imu_sim_seed")
    assert np.abs(a.log["gyro"] - b.log["gyro"]).max() > 1e-4  # another seed, other noise
    np.testing.assert_allclose(a.log["pos"], b.log["pos"], rtol=0, atol=1e-12)  # no feedback
    (delayed, *_), _ = _fly_pair("mocap_delayed")
    (now, *_), _ = _fly_pair("mocap_now")
    # same noise, three steps apart: the delay line delivers p(t - 3 dt)
    noise = now.log["mocap_pos"] - now.log["pos"]
    pos3 = delayed.log["mocap_pos"] - noise
    assert np.abs(pos3 - delayed.log["pos"]).max() > 1e-5


def test_pid_with_per_drone_mass_and_imu():
    (comp, _, sim_c, _), (py, _, sim_p, _) = _fly_pair("all_own_seed", gains="pid",
                                                       traj="circle")  # fmt: skip
    assert comp.meta["loop"] == "compiled"
    assert_logs_equal(comp.log, py.log)
    _assert_sims_alike(sim_c, sim_p)


@pytest.mark.parametrize("chunk_steps", [5, 35, 100, 1000])
def test_chunk_size_does_not_change_the_compiled_log(chunk_steps):
    """Gusts and sensor noise are counter-based: any chunk size gives the Python loop's log."""
    (comp, cc, *_), (py, *_) = _fly_pair("imu_mocap_dryden_sim_seed", steps=150,
                                         chunk_steps=chunk_steps)  # fmt: skip
    assert len(cc) == -(-150 // chunk_steps)
    assert_logs_equal(comp.log, py.log)


def test_turbulence_and_sensors_run_in_the_step_one_call_per_chunk(monkeypatch):
    """Dryden gusts and sensor noise are drawn in C: a gusty flight hands the rollout only the
    held mean wind, one call per chunk (plus the priming step), whatever the memory cap."""
    from quadsim.loop import driver
    from quadsim.loop.closed_loop_native import ClosedLoop

    calls = []
    run = ClosedLoop.run

    def counting(self, x0, steps, *a, **kw):
        calls.append((steps, np.shape(kw.get("wind"))))
        return run(self, x0, steps, *a, **kw)

    monkeypatch.setattr(driver, "CHUNK_BYTES", 1792 * 2)  # chunks of 20 steps of 4 drones
    monkeypatch.setattr(ClosedLoop, "run", counting)
    (_, cc, sim_c, _), (_, pc, sim_p, _) = _fly_pair("imu_mocap_dryden_sim_seed", steps=60,
                                                     chunk_steps=20, log_every=10)  # fmt: skip
    assert [c[0] for c in calls] == [1, 20, 20, 20] and {c[1] for c in calls} == {(4, 3)}
    assert len(cc) == len(pc) == 3
    for c, p in zip(cc, pc, strict=True):
        assert_logs_equal(c, p)
    _assert_sims_alike(sim_c, sim_p)


@pytest.mark.parametrize("where", ["on_chunk", "progress"])
@pytest.mark.usefixtures("stop_signals_default")
def test_sigint_keeps_the_completed_chunks_with_sensors_and_gusts(where):
    """A real SIGINT mid-run: the chunks completed are kept, equal to the Python loop's."""
    import signal

    calls = []

    def stop(*args):
        calls.append(args)
        if len(calls) == 2:
            SEEN.append(__import__("conftest").sigint_state())
            signal.raise_signal(signal.SIGINT)

    sim_kw, fly_kw, _ = _features("imu_mocap_dryden_sim_seed", 4)
    sim, offset, _ = _sim(4, **sim_kw)
    sim.reset(pos=np.asarray((0.0, 0.0, 1.0)) + offset)
    kw = {"ref_offset": offset, "log_every": 5, "chunk_steps": 20, **fly_kw}
    res = fly(sim, TRAJS["circle"], control, GAINS["geometric"], duration=0.2,
              **{where: stop}, **kw)  # fmt: skip
    assert res.meta["loop"] == "compiled" and res.interrupted and res.signal == signal.SIGINT, SEEN
    # the chunk being handed over when the signal came is kept (signals wait for the hand-over)
    assert res.steps == 40 and res.log["time"].shape == (8,) and sim.k == 40
    sim_p, _, _ = _sim(4, **sim_kw)
    sim_p.reset(pos=np.asarray((0.0, 0.0, 1.0)) + offset)
    ref = fly(sim_p, TRAJS["circle"], control, GAINS["geometric"], duration=0.2, compiled=False,
              jit=False, **kw)  # fmt: skip
    assert_logs_equal(res.log, {key: v[:8] for key, v in ref.log.items()})


def test_a_second_flight_continues_alike():
    """After a completed flight both loops leave the gusts alike: fly again."""
    sim_kw, fly_kw, _ = _features("imu_mocap_dryden_sim_seed", 2)
    logs = []
    for compiled in (None, False):
        sim, offset, _ = _sim(2, **sim_kw)
        sim.reset(pos=np.asarray((0.0, 0.0, 1.0)) + offset)
        kw = {"ref_offset": offset, "log_every": 3, "chunk_steps": 30, "compiled": compiled,
              "jit": False if compiled is False else None, **fly_kw}  # fmt: skip
        first = fly(sim, TRAJS["circle"], control, GAINS["geometric"], duration=50 * DT, **kw)
        second = fly(sim, TRAJS["circle"], control, GAINS["geometric"], duration=50 * DT, **kw)
        logs.append((first, second, sim))
    (c1, c2, sim_c), (p1, p2, sim_p) = logs
    assert c2.meta["loop"] == "compiled" and p2.meta["loop"] == "python"
    assert_logs_equal(c1.log, p1.log)
    assert_logs_equal(c2.log, p2.log)
    np.testing.assert_allclose(c2.log["time"][0], 50 * DT, rtol=1e-12)
    _assert_sims_alike(sim_c, sim_p)


# -- the showcase (examples/figure8_wind.toml): mass spread, Dryden "light", BMI088 ---------------
def _showcase(compiled, duration=None, chunk_steps=None):
    from pathlib import Path

    from quadsim.app.scenario import build, load_scenario

    path = Path(__file__).resolve().parents[2] / "examples" / "figure8_wind.toml"
    a = build(load_scenario(path))
    res = fly(a.sim, a.trajectory, a.control, a.gains, duration=duration or a.duration,
              ref_offset=a.ref_offset, sensors=a.sensors, seed=a.seed,
              log_every=a.output["log_every"],
              chunk_steps=chunk_steps or a.output["chunk_steps"] or None,
              compiled=compiled, jit=False if compiled is False else None)  # fmt: skip
    return res, a


@pytest.mark.parametrize("chunk_steps", [None, 35])
def test_showcase_compiled_equals_python(chunk_steps):
    comp, a = _showcase(None, 1.0, chunk_steps)
    assert a.sim.model_params["mass"].shape == (4,) and a.sim.wind.turbulence is not None
    assert a.imu is not None and comp.meta["loop"] == "compiled"
    py, _ = _showcase(False, 1.0, chunk_steps)
    assert py.meta["loop"] == "python"
    worst = assert_logs_equal(comp.log, py.log)
    print(f"\nshowcase, 1 s, chunk_steps {chunk_steps}: worst relative difference {worst:.1e}")


def test_showcase_keeps_its_published_tracking():
    """The README's 0.008567 m over the 12 s, on the compiled loop (the Python loop: ...3403).

    Counter-based noise (issue 10) drew new gusts: 0.009172 m before, the same figure eight.
    """
    from quadsim.app.io import summarize

    comp, a = _showcase(None)
    assert comp.meta["loop"] == "compiled"
    s = summarize(comp.log, comp.meta, comp.wall_time, t_from=a.output["settle"])
    print(f"\nshowcase tracking RMS {s['tracking_rms_m']!r} m, max {s['tracking_max_m']!r} m")
    assert f"{s['tracking_rms_m']:.4g}" == "0.008567" and s["crash_count"] == 0
    np.testing.assert_allclose(s["tracking_rms_m"], 0.00856733973451339, rtol=1e-9)
    np.testing.assert_allclose(s["tracking_max_m"], 0.020349474287815823, rtol=1e-9)


@pytest.mark.parametrize("compiled", [None, False])
def test_a_drones_noise_does_not_depend_on_the_batch_or_the_chunks(compiled):
    """Identical drones: drone 1's IMU, motion capture and gusts are the same among 3 or 9 drones
    in chunks of 1000 or 7 steps, on the compiled and the Python loop (counter-based noise)."""
    from quadsim.physics.sensors import MocapParams, load_imu
    from quadsim.physics.wind import dryden_preset

    imu = load_imu("bmi088")
    mocap = MocapParams(pos_std=1e-3, att_std=1e-2, latency=2 * DT, rate=1 / DT)
    wind = Wind(mean=(1.0, 0.0, 0.0), turbulence=dryden_preset("light", 1.0, 1.0))
    logs = []
    for n, chunk in ((3, 1000), (9, 7)):
        sim = Simulator("cf2x_L250", n=n, dt=DT, backend="native", dtype="float64", wind=wind,
                        seed=5)  # fmt: skip
        sim.reset(pos=(0.0, 0.0, 1.0))
        res = fly(sim, TRAJS["hover"], control, GAINS["geometric"], duration=60 * DT,
                  sensors=Sensors(imu, mocap), chunk_steps=chunk, compiled=compiled,
                  jit=False if compiled is False else None)  # fmt: skip
        assert res.meta["loop"] == ("compiled" if compiled is None else "python")
        logs.append(res.log)
    a, b = logs
    for key in ("gyro", "accel", "mocap_pos", "vel", "pos"):
        np.testing.assert_allclose(a[key][:, 1], b[key][:, 1], rtol=0, atol=1e-12, err_msg=key)
    assert np.abs(b["gyro"][:, 1] - b["gyro"][:, 7]).min() > 0  # each drone its own noise
    assert np.abs(b["vel"][:, 1] - b["vel"][:, 7]).max() > 1e-4  # and its own gusts
