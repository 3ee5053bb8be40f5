"""``fly`` on the compiled closed loop against its per-step Python loop (issue 10, items 2 and 6).

Both paths fly the same native float64 simulator; every logged key must agree to 1e-9 relative
(flags exactly), chunk by chunk, and the simulator must end in the same state. ``lost_wrench``
is rounding noise away from saturation, so it is compared relative to the commanded wrench.
"""

from __future__ import annotations

import numpy as np
import pytest

from quadsim import native
from quadsim.control import control, load_gains
from quadsim.flight import compiled_path_reason, fly
from quadsim.sim import Simulator, Wind
from quadsim.trajectories import Circle, Hover, Lemniscate

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


def _assert_logs_equal(a, b):
    """Same keys in the same order, shapes and dtypes; floats to TOL relative; flags equal."""
    assert list(a) == list(b)
    worst = 0.0
    for key in b:
        x, y = a[key], b[key]
        assert x.shape == y.shape and x.dtype == y.dtype, (key, x.shape, y.shape, x.dtype, y.dtype)
        if x.dtype == bool:
            np.testing.assert_array_equal(x, y, err_msg=key)
            continue
        ref = b["cmd_wrench"] if key == "lost_wrench" else y
        scale = max(float(np.abs(ref).max()), np.finfo(float).tiny)
        err = float(np.abs(x - y).max()) / scale
        worst = max(worst, err)
        assert err <= TOL, (key, err)
    return worst


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
        _assert_logs_equal(c, p)
    worst = _assert_logs_equal(comp.log, py.log)
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
    _assert_logs_equal(comp.log, py.log)
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
        _assert_logs_equal(res.log, ref.log)
        np.testing.assert_allclose(sim.state.pos, sim_p.state.pos, rtol=0, atol=1e-12)


def test_compiled_true_names_the_reason():
    from quadsim.sensors import load_imu

    imu = load_imu("bmi088")
    sim, _, _ = _sim(2)
    with pytest.raises(ValueError, match="imu: sensors are not compiled yet"):
        fly(sim, TRAJS["hover"], control, GAINS["geometric"], duration=0.01, imu=imu,
            compiled=True)  # fmt: skip
    res = fly(sim, TRAJS["hover"], control, GAINS["geometric"], duration=0.01, imu=imu)
    assert res.meta["loop"] == "python"
    assert res.meta["loop_reason"] == "imu: sensors are not compiled yet"
    numpy_sim = Simulator("cf2x_L250", n=2, dt=DT, backend="numpy")
    with pytest.raises(ValueError, match="backend 'numpy'"):
        fly(numpy_sim, TRAJS["hover"], control, GAINS["geometric"], duration=0.01,
            compiled=True)  # fmt: skip


def test_reasons():
    from quadsim.wind import dryden_preset

    g = GAINS["geometric"]
    sim, _, _ = _sim(2)
    assert compiled_path_reason(sim, control, g) is None
    assert "jit=False" in compiled_path_reason(sim, control, g, jit=False)
    assert "ctrl_state" in compiled_path_reason(sim, control, g, ctrl_state=object())
    assert "allocator" in compiled_path_reason(sim, control, g, allocator=object())
    assert "mocap" in compiled_path_reason(sim, control, g, mocap=object())
    assert "custom controller" in compiled_path_reason(sim, lambda *a: a, g)
    turb = dryden_preset("light", 1.0, 1.0)
    gusty, _, _ = _sim(2, wind=Wind(mean=(1.0, 0.0, 0.0), turbulence=turb))
    assert "turbulence" in compiled_path_reason(gusty, control, g)
    heavy, _, _ = _sim(2, params={"mass": [0.03, 0.031]})
    assert "per-drone model parameters (mass)" in compiled_path_reason(heavy, control, g)
    euler = Simulator("cf2x_L250", n=2, dt=DT, backend="native", model="euler_zyx")
    assert "quaternion" in compiled_path_reason(euler, control, g)


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
