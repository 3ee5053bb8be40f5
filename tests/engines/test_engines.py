"""The engine interface: every backend runs the same scripted flight to float64 rounding.

The :class:`~quadsim.engines.sim.Simulator` shell has no backend branches; the array engines (NumPy,
JAX, PyTorch) and the native engine sit behind one interface
(:class:`~quadsim.engines.array_engine.Engine`).
These tests drive the same sequence of reset / step / reset_drones / rollout through each and
require equal states (1e-12 relative in float64) and identical flags, including landings,
crashes and faults that happen during the sequence.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from quadsim.engines import native
from quadsim.engines.array_engine import ArrayEngine, make_engine
from quadsim.engines.sim import Simulator, Wind
from quadsim.engines.state import State, initial_status
from quadsim.physics._array import to_numpy
from quadsim.physics.wind import dryden_preset
from quadsim.physics.world import Box, Ground, Limits, World

BACKENDS = ["numpy", "jax", "torch", "native"]
N = 6
WORLD = World(
    ground=Ground(crash_speed=2.0),
    boxes=(Box((1.0, -5.0, -5.0), (2.0, 5.0, 5.0)),),
    limits=Limits(max_speed=3.0),
)


def _available(backend: str) -> bool:
    if backend == "native":
        return native.available()
    try:
        __import__(backend)
    except ImportError:
        return False
    return True


def _initial():
    """Six drones: hover, a soft landing, a box crash, a speed fault, a NaN command, a tumble."""
    pos = [[0, 0, 1.0], [0, 0, 0.05], [0.9, 0, 1.0], [0, 0, 3.0], [0, 1.0, 1.0], [0.3, -0.2, 2.0]]
    vel = [[0, 0, 0], [0, 0, -0.5], [2.0, 0, 0], [0, 0, -2.98], [0, 0, 0], [0.2, 0.1, -0.3]]
    att = np.array([[0, 0, 0, 1.0]] * N)
    att[5] = [0.1, -0.2, 0.05, 1.0]
    att[5] /= np.linalg.norm(att[5])
    rates = np.zeros((N, 3))
    rates[5] = [1.0, -2.0, 0.5]
    return {"pos": pos, "vel": vel, "attitude": att, "ang_vel": rates}


def _cmds(hover: float, T: int) -> np.ndarray:
    cmds = np.full((T, N, 4), hover)
    cmds[:, 1] = 0.0  # falls onto the floor
    cmds[:, 3] = 0.0  # falls past the speed limit
    cmds[:, 5] *= np.array([1.02, 0.98, 1.01, 0.99])
    cmds[3:, 4] = np.nan  # a NaN command from the fourth step of a rollout on
    return cmds


def _script(backend: str, mass_scale: float = 1.0) -> list[tuple[str, object]]:
    """Run the scripted sequence; return ``(label, snapshot)`` checkpoints as NumPy."""
    masses = np.linspace(0.026, 0.030, N) * mass_scale
    sim = Simulator(
        "cf2x_L250", n=N, backend=backend, dtype="float64", seed=11, world=WORLD,
        params={"mass": masses},
        wind=Wind(mean=(0.8, -0.4, 0.0), turbulence=dryden_preset("light", 2.0, 1.0)),
    )  # fmt: skip
    out = []

    def snap(label, traj=None):
        st = {f: to_numpy(v).copy() for f, v in sim.state._asdict().items() if v is not None}
        flags = {f: to_numpy(v).copy() for f, v in sim.status._asdict().items()}
        tr = None if traj is None else {f: to_numpy(v).copy() for f, v in traj._asdict().items()
                                        if v is not None}  # fmt: skip
        out.append((label, {"state": st, "status": flags, "traj": tr, "k": sim.k,
                            "time": sim.time}))  # fmt: skip

    sim.reset(**_initial())
    snap("reset")
    cmds = _cmds(sim.hover_rpm, 60)
    for i in range(20):
        extra = {"dist_f": [0.002, 0.0, -0.001]} if i % 2 else {"wind": [0.0, 0.3, 0.0]}
        sim.step(np.nan_to_num(cmds[i], nan=sim.hover_rpm), **extra)
    snap("steps")
    sim.reset_drones([1], pos=[0, 0, 0.05], vel=[0, 0, -0.4])
    snap("reset_drones idx")
    traj = sim.rollout(cmds[:30])
    snap("rollout recorded", traj)
    held = np.nan_to_num(cmds[0], nan=sim.hover_rpm)
    assert sim.rollout(held, record=False, steps=25) is None
    snap("rollout held")
    sim.reset_drones(np.array([False, False, True, False, True, False]))
    snap("reset_drones mask")
    traj = sim.rollout(held, steps=7)
    snap("rollout held recorded", traj)
    for _ in range(10):
        sim.step(held)
    snap("steps again")
    return out


def _assert_same(got: list, want: list, where: str) -> None:
    assert [g[0] for g in got] == [w[0] for w in want]
    for (label, g), (_, w) in zip(got, want, strict=True):
        at = f"{where}, after {label}"
        assert g["k"] == w["k"] and g["time"] == w["time"], at
        for part in ("state", "traj"):
            if w[part] is None:
                assert g[part] is None, at
                continue
            assert g[part].keys() == w[part].keys(), at
            for f, a in w[part].items():
                b = g[part][f]
                assert b.shape == a.shape, f"{at}: {part}.{f} shape"
                scale = max(1.0, float(np.nanmax(np.abs(a))))
                np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12 * scale,
                                           err_msg=f"{at}: {part}.{f}")  # fmt: skip
        for f, a in w["status"].items():
            b = g["status"][f]
            if f == "crash_time":  # kept in the namespace's default float (float32 on torch)
                rtol = 1e-12 if b.dtype == np.float64 else 4 * float(np.finfo(b.dtype).eps)
                np.testing.assert_allclose(b.astype(float), a.astype(float), rtol=rtol,
                                           err_msg=f"{at}: status.{f}")  # fmt: skip
            else:
                np.testing.assert_array_equal(b, a, err_msg=f"{at}: status.{f}")


@pytest.fixture(scope="module")
def reference() -> list:
    return _script("numpy")


def test_the_script_exercises_every_flag(reference):
    """The scripted sequence lands, crashes and faults drones (so the flags are compared)."""
    flags = dict(reference)["rollout recorded"]["status"]
    assert dict(reference)["rollout held"]["status"]["landed"].tolist() == [
        False, True, False, False, False, False]  # fmt: skip
    assert flags["crashed"].tolist() == [False, False, True, False, False, False]
    assert flags["fault_step"][3] > 0 and flags["fault_code"][3] == 2  # speed
    assert flags["fault_step"][4] > 0 and flags["fault_code"][4] == 1  # non-finite
    cleared = dict(reference)["reset_drones mask"]["status"]
    assert not cleared["crashed"][2] and cleared["fault_step"][4] == -1
    assert cleared["fault_step"][3] == flags["fault_step"][3]  # the others keep theirs


@pytest.mark.parametrize("backend", [b for b in BACKENDS if b != "numpy"])
def test_every_backend_flies_the_script_like_numpy(backend, reference):
    if not _available(backend):
        pytest.skip(f"{backend} not available")
    _assert_same(_script(backend), reference, backend)


@pytest.mark.skipif(not native.available(), reason="no C compiler or casadi")
def test_the_comparison_sees_a_diverging_backend(reference):
    """A backend off by 1e-9 in one parameter fails the comparison (the test can fail)."""
    with pytest.raises(AssertionError):
        _assert_same(_script("native", mass_scale=1.0 + 1e-9), reference, "perturbed")


@pytest.mark.parametrize("backend", BACKENDS)
def test_engine_interface_directly(backend):
    """load / step / rollout / state / status / fault of each engine, against the NumPy one."""
    if not _available(backend):
        pytest.skip(f"{backend} not available")
    sims = {b: Simulator("cf2x_L250", n=N, backend=b, world=WORLD) for b in {"numpy", backend}}
    engines = {b: make_engine(b, s.system, s.model_params, s.dt, s.integrator, WORLD, s.xp,
                              s.dtype) for b, s in sims.items()}  # fmt: skip
    init = _initial()
    rng = np.random.default_rng(2)
    att = np.asarray(init["attitude"])
    state = State(np.asarray(init["pos"]), att, np.asarray(init["vel"]),
                  np.asarray(init["ang_vel"]), np.full((N, 4), 2.0e4))  # fmt: skip
    status = initial_status(np, (N,))
    cmds = _cmds(sims["numpy"].hover_rpm, 12)
    gusts = rng.normal(scale=0.5, size=(12, N, 3))
    res = {}
    for b, eng in engines.items():
        eng.load(state, status, 7)
        s1 = eng.step(np.nan_to_num(cmds[0]), (None, np.full(3, 0.01), None))
        xp, dt = sims[b].xp, sims[b].dtype
        traj = eng.rollout(xp.asarray(cmds, dtype=dt), gusts, True, None)
        eng.rollout(xp.asarray(cmds[0], dtype=dt), None, False, 5)
        res[b] = (s1, traj, eng.state(), eng.status(), [eng.fault(i) for i in range(N)])
    ref = res["numpy"]
    got = res[backend]
    for a, g in zip(ref[:3], got[:3], strict=True):
        for f in State._fields:
            np.testing.assert_allclose(to_numpy(getattr(g, f)), to_numpy(getattr(a, f)),
                                       rtol=1e-12, atol=1e-9, err_msg=f)  # fmt: skip
    for f in ("landed", "crashed", "fault_step", "fault_code"):
        np.testing.assert_array_equal(to_numpy(getattr(got[3], f)), to_numpy(getattr(ref[3], f)))
    assert got[4] == ref[4]
    assert ref[4][4][0] == 7 + 1 + 3 and ref[4][4][1] == 1  # the NaN command, step index kept
    assert ref[4][0] == (-1, 0)


def test_the_shell_has_no_backend_branches_and_reads_no_layout():
    src = inspect.getsource(Simulator)
    body = src[src.index('"""', src.index('"""') + 3) + 3 :]  # past the class docstring
    for banned in ("_X", "native", "backend ==", "_engine is", "NativeEngine", "jax"):
        assert banned not in body, banned


def test_state_and_status_assignment_continue_from_them():
    """Assigning ``sim.state`` / ``sim.status`` loads them into the engine (any backend)."""
    sim = Simulator("cf2x_L250", n=2, world=WORLD)
    sim.reset(pos=[0, 0, 1.0])
    sim.step(np.full((2, 4), sim.hover_rpm))
    st = sim.state._replace(pos=np.array([[0.0, 0.0, 2.0], [0.0, 0.0, 3.0]]))
    sim.state = st
    np.testing.assert_array_equal(sim.state.pos, st.pos)
    sim.step(np.full((2, 4), sim.hover_rpm))
    assert np.all(np.asarray(sim.state.pos)[:, 2] > 1.9) and sim.k == 2
    flags = sim.status._replace(crashed=np.array([True, False]))
    sim.status = flags
    assert sim.status.crashed.tolist() == [True, False]


@pytest.mark.skipif(not native.available(), reason="no C compiler or casadi")
def test_native_engine_evaluates_make_step(monkeypatch, tmp_path):
    """The compiled step is :func:`quadsim.engines.stepping.make_step` on CasADi symbols, traced
    on the first step (a run the compiled closed loop flies never pays for it), and once: a
    second simulator with the same inputs loads it (:mod:`quadsim.engines.native_memo`)."""
    monkeypatch.setenv("QUADSIM_CACHE_DIR", str(tmp_path))
    import quadsim.engines.sim_native as sim_native
    from quadsim.engines import stepping
    from quadsim.physics._array import CASADI_OPS

    calls = []
    original = stepping.make_step
    assert sim_native.make_step is original  # the native engine's step is the one make_step

    def spy(*args, **kw):
        calls.append(kw.get("xp"))
        return original(*args, **kw)

    monkeypatch.setattr(sim_native, "make_step", spy)
    sim = Simulator("cf2x_L250", n=2, backend="native", world=WORLD)
    assert calls == []
    u = np.full((2, 4), sim.hover_rpm * 1.1)
    first = np.asarray(sim.step(u).pos)
    sim.step(u)
    assert calls == [CASADI_OPS]
    again = Simulator("cf2x_L250", n=2, backend="native", world=WORLD)
    np.testing.assert_array_equal(np.asarray(again.step(u).pos), first)
    assert calls == [CASADI_OPS]
    assert isinstance(make_engine("numpy", *_engine_args()), ArrayEngine)


def _engine_args() -> tuple:
    sim = Simulator("cf2x_L250", n=1)
    return sim.system, sim.model_params, sim.dt, sim.integrator, sim.world, sim.xp, sim.dtype


@pytest.mark.parametrize("backend", BACKENDS)
def test_crash_time_is_float64_in_a_float64_run(backend):
    """The crash time has the run's dtype on every engine (torch's default float is float32)."""
    if not _available(backend):
        pytest.skip(f"{backend} not available")
    sim = Simulator("cf2x_L250", n=2, backend=backend, dtype="float64")
    assert to_numpy(sim.status.crash_time).dtype == np.float64
