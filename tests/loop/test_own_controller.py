"""Your own controller on every flight loop (issue 10, item 6): ``examples/own_controller.py``.

The example's PD controller (a pure array-API function with its own gains and state records)
flies on the compiled C loop (``native``, traced by CasADi), on the scan loop (``jax``, one
``lax.scan`` per chunk) and per step (``compiled=False``, the reference); every logged key must
agree to 1e-9 relative, and the tracking error must be sane. A controller that cannot be traced
falls back to the per-step NumPy loop with a :class:`~quadsim.loop.flight.TraceFallbackWarning` and
the reason in ``meta["loop_reason"]``.
"""

from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path

import numpy as np
import pytest
from log_helpers import assert_logs_equal

from quadsim.engines import native
from quadsim.engines.sim import Simulator
from quadsim.loop.brain import command_allocation, command_kind
from quadsim.loop.flight import TraceFallbackWarning, fly
from quadsim.loop.paths import flight_loop
from quadsim.loop.trajectories import Circle
from quadsim.physics.params import load_params
from quadsim.physics.rotors import allocate, make_allocator

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "own_controller.py"
spec = importlib.util.spec_from_file_location("example_own_controller", EXAMPLE)
oc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(oc)

DT = 1 / 500
TOL = 1e-9
DRONE = load_params("cf2x_L250")
GAINS = oc.pd_gains(DRONE, DT)
TRAJ = Circle(radius=1.0, speed=1.0, center=(0.0, 0.0, 1.0))
needs_native = pytest.mark.skipif(not native.available(), reason="needs CasADi and a C compiler")
jax = pytest.importorskip("jax")


def _fly(backend, control=oc.pd_control, n=4, steps=400, seed=0, sim_kw=None, **kw):
    """A flight on a float64 simulator, the drones near their offset references."""
    rng = np.random.default_rng(seed)
    offset = rng.uniform([-2.0, -2.0, 0.0], [2.0, 2.0, 1.0], (n, 3))  # above the ground
    sim = Simulator(DRONE, n=n, dt=DT, backend=backend, dtype="float64", **(sim_kw or {}))
    r0 = TRAJ(0.0)
    sim.reset(pos=np.asarray(r0.pos) + offset + rng.normal(0.0, 0.05, (n, 3)), vel=r0.vel)
    chunks = []
    res = fly(sim, TRAJ, control, GAINS, duration=steps * DT, ref_offset=offset,
              on_chunk=chunks.append, **kw)  # fmt: skip
    return res, chunks, sim


def _tracking(log, t0=0.7):
    """Largest position error [m] after ``t0`` (the PD settles to about 2 cm on the circle)."""
    late = log["time"] > t0
    return float(np.linalg.norm(log["pos"][late] - log["ref_pos"][late], axis=-1).max())


# -- the example's controller on each path ----------------------------------------------------
@needs_native
def test_native_traces_the_own_controller():
    comp, cc, sim_c = _fly("native", log_every=3, chunk_steps=60)
    ref, rc, sim_r = _fly("native", compiled=False, jit=False, log_every=3, chunk_steps=60)
    assert comp.meta["loop"] == "compiled" and comp.meta["loop_reason"] is None
    assert ref.meta["loop"] == "python" and ref.meta["loop_reason"] == "compiled=False"
    assert len(cc) == len(rc)
    for c, r in zip(cc, rc, strict=True):
        assert_logs_equal(c, r)
    worst = assert_logs_equal(comp.log, ref.log)
    print(f"\nnative own controller: worst relative difference {worst:.1e}")
    np.testing.assert_allclose(sim_c.state.pos, sim_r.state.pos, rtol=0, atol=1e-12)
    assert _tracking(comp.log) < 0.04  # from about 5 cm off and at rest: 4 cm after 0.7 s


def test_jax_scans_the_own_controller():
    scan, sc, sim_s = _fly("jax", log_every=3, chunk_steps=60)
    step, pc, sim_p = _fly("jax", compiled=False, log_every=3, chunk_steps=60)
    assert scan.meta["loop"] == "scan" and scan.meta["loop_reason"] is None
    assert step.meta["loop"] == "python"
    for c, r in zip(sc, pc, strict=True):
        assert_logs_equal(c, r)
    worst = assert_logs_equal(scan.log, step.log)
    print(f"\njax own controller: worst relative difference {worst:.1e}")
    assert sim_s.k == sim_p.k == 400
    np.testing.assert_allclose(np.asarray(sim_s.state.pos), np.asarray(sim_p.state.pos),
                               rtol=0, atol=1e-12)  # fmt: skip
    assert _tracking(scan.log) < 0.04


def test_example_runs():
    results = oc.main(n=2, duration=1.0)
    assert results["jax"].meta["loop"] == "scan"
    if native.available():
        assert results["native"].meta["loop"] == "compiled"
        assert_logs_equal(results["native"].log, results["jax"].log, 1e-9)


# -- rotor-speed commands, initial state, stateless and changing controllers ------------------
ALLOC = make_allocator(DRONE)


def rpm_control(state, ref, gains, cstate):
    """The PD controller with its own allocation: rotor speeds out (a quad: command="rpm")."""
    wrench, cstate = oc.pd_control(state, ref, gains, cstate)
    return 1.05 * allocate(wrench, ALLOC).rpm, cstate  # 5 % over: the top speed clips


rpm_control.init_state = oc.init_state
rpm_control.command = "rpm"


@pytest.mark.parametrize("backend", ["native", "jax"])
def test_rotor_speed_commands(backend):
    if backend == "native" and not native.available():
        pytest.skip("needs CasADi and a C compiler")
    fast, *_ = _fly(backend, rpm_control, steps=200, log_every=2)
    ref, *_ = _fly("numpy", rpm_control, steps=200, log_every=2, jit=False)
    assert fast.meta["loop"] == ("compiled" if backend == "native" else "scan")
    assert_logs_equal(fast.log, ref.log)
    log = fast.log
    assert np.all(log["cmd_rpm"] <= DRONE.rpm_max) and np.all(log["cmd_rpm"] >= DRONE.rpm_min)
    assert np.all(log["lost_wrench"] == 0.0)
    # the logged wrench is the one the commanded speeds produce
    from quadsim.physics.rotors import wrench_from_rpm

    np.testing.assert_allclose(log["cmd_wrench"], wrench_from_rpm(log["cmd_rpm"], ALLOC),
                               rtol=1e-12, atol=1e-15)  # fmt: skip


def test_command_kind_and_allocation():
    assert command_kind(4, 4) == "wrench" and command_kind(4, 4, "rpm") == "rpm"
    assert command_kind(6, 6) == "rpm" and command_kind(4, 6) == "wrench"
    with pytest.raises(ValueError, match=r"last axis 5; expected 4 \(a wrench\) or 6"):
        command_kind(5, 6)
    with pytest.raises(ValueError, match=r"expected 4 \(a wrench\)$"):
        command_kind(6, 6, "wrench")
    with pytest.raises(ValueError, match="command must be one of"):
        command_kind(4, 4, "thrust")
    lo, hi = ALLOC.rpm_min, ALLOC.rpm_max
    out = np.array([[lo - 1.0, hi + 1.0, 0.5 * (lo + hi), hi], [lo, lo, lo, lo]])
    wrench, a = command_allocation(out, ALLOC, "rpm")
    np.testing.assert_array_equal(a.rpm[0], [lo, hi, 0.5 * (lo + hi), hi])
    np.testing.assert_array_equal(a.saturated, [True, False])
    np.testing.assert_array_equal(a.lost, 0.0)
    np.testing.assert_array_equal(wrench, a.wrench)


@pytest.mark.parametrize("backend", ["native", "jax"])
def test_initial_controller_state_per_drone(backend):
    """fly's ctrl_state reaches the compiled state and the scan carry, drone by drone."""
    if backend == "native" and not native.available():
        pytest.skip("needs CasADi and a C compiler")
    start = oc.PDState(np.linspace([-0.1, 0.05, 0.0], [0.1, -0.05, 0.08], 4))
    fast, *_ = _fly(backend, steps=100, ctrl_state=start)
    ref, *_ = _fly("numpy", steps=100, ctrl_state=start, jit=False)
    zero, *_ = _fly("numpy", steps=100, jit=False)
    assert fast.meta["loop"] == ("compiled" if backend == "native" else "scan")
    assert_logs_equal(fast.log, ref.log)
    assert np.abs(ref.log["cmd_wrench"][0] - zero.log["cmd_wrench"][0]).max() > 1e-4


def stateless(state, ref, gains, cstate):
    """A PD controller without state (``ctrl_state`` stays ``None``)."""
    wrench, _ = oc.pd_control(state, ref, gains._replace(ki=0.0 * gains.ki),
                              oc.PDState(0.0 * state.pos))  # fmt: skip
    return wrench, None


@pytest.mark.parametrize("backend", ["native", "jax"])
def test_stateless_controller(backend):
    if backend == "native" and not native.available():
        pytest.skip("needs CasADi and a C compiler")
    fast, *_ = _fly(backend, stateless, steps=100)
    ref, *_ = _fly("numpy", stateless, steps=100, jit=False)
    assert fast.meta["loop"] in ("compiled", "scan")
    assert_logs_equal(fast.log, ref.log)


# -- controllers that cannot be traced fall back, and say so ------------------------------------
def fussy(state, ref, gains, cstate):
    """The PD controller behind a NumPy call and a Python ``if`` on the state."""
    if float(np.asarray(state.pos)[..., 2].min()) < -100.0:  # neither CasADi nor JAX trace this
        raise RuntimeError("underground")
    return oc.pd_control(state, ref, gains, cstate)


fussy.init_state = oc.init_state


@pytest.mark.parametrize("backend", ["native", "jax"])
def test_untraceable_controller_falls_back_with_a_warning(backend):
    if backend == "native" and not native.available():
        pytest.skip("needs CasADi and a C compiler")
    with pytest.warns(TraceFallbackWarning) as caught:
        res, *_ = _fly(backend, fussy, steps=60)
    assert len(caught) == 1
    msg = str(caught[0].message)
    assert "\n" not in msg and "fussy" in msg and "per-step Python loop on NumPy" in msg
    assert ("by CasADi" if backend == "native" else "by JAX into the scan") in msg
    assert "by JAX per step" in msg
    assert res.meta["loop"] == "python"
    reason = res.meta["loop_reason"]
    if backend == "native":
        assert reason.startswith("the closed loop could not be compiled: TypeError")
        assert "; the per-step function could not be traced by JAX: Tracer" in reason
    else:  # the same error twice: said once
        assert reason.startswith("the closed loop could not be traced by JAX: Tracer")
        assert reason.endswith("; nor per step")
    ref, *_ = _fly("numpy", steps=60, jit=False)  # the same law, traced: the same flight
    assert_logs_equal(res.log, ref.log)


def test_fast_loop_required_raises_for_untraceable():
    with pytest.raises(ValueError, match="compiled=True, but the scan loop cannot run: the "
                                         "closed loop could not be traced by JAX"):  # fmt: skip
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TraceFallbackWarning)
            _fly("jax", fussy, steps=10, compiled=True)


def changing(state, ref, gains, cstate):
    """Returns a state of another structure than it was given (fine per step, not traced)."""
    wrench, new = oc.pd_control(state, ref, gains, oc.PDState(cstate[0]))
    return wrench, (new.pos_int, new.pos_int)


changing.init_state = oc.init_state


@needs_native
def test_state_of_another_structure_is_a_reason():
    with pytest.warns(TraceFallbackWarning):
        res, *_ = _fly("native", changing, steps=4)
    assert "another structure" in res.meta["loop_reason"]


def test_flight_loop_says_which_loop():
    jsim = Simulator(DRONE, n=2, dt=DT, backend="jax")
    assert flight_loop(jsim, oc.pd_control, GAINS) == ("scan", None)
    assert flight_loop(jsim, oc.pd_control, GAINS, compiled=False) == ("python", "compiled=False")
    assert flight_loop(jsim, oc.pd_control, GAINS, jit=False)[0] == "python"
    nsim = Simulator(DRONE, n=2, dt=DT, backend="numpy")
    loop, reason = flight_loop(nsim, oc.pd_control, GAINS)
    assert loop == "python" and reason.startswith("backend 'numpy'")
    if native.available():
        csim = Simulator(DRONE, n=2, dt=DT, backend="native")
        assert flight_loop(csim, oc.pd_control, GAINS) == ("compiled", None)


@pytest.mark.parametrize("backend", ["native", "jax"])
def test_hexacopter_rotor_speeds_are_told_by_their_size(backend):
    """Six rotor speeds out: ``command="auto"`` reads them as rotor speeds (no allocation)."""
    if backend == "native" and not native.available():
        pytest.skip("needs CasADi and a C compiler")
    from quadsim.loop.trajectories import Hover
    from quadsim.physics.rotors import layout

    geo = layout("hexa_x", float(DRONE.L))
    hexa = DRONE._replace(name="hexa", mass=1.2 * DRONE.mass, mixing_matrix=geo.mixing_matrix,
                          rotor_positions=geo.rotor_positions, rotor_spin=geo.rotor_spin)
    alloc = make_allocator(hexa)

    def hexa_control(state, ref, gains, cstate):
        wrench, cstate = oc.pd_control(state, ref, gains, cstate)
        return allocate(wrench, alloc).rpm, cstate

    hexa_control.init_state = oc.init_state
    logs = []
    for b, kw in ((backend, {}), ("numpy", {"jit": False})):
        sim = Simulator(hexa, n=2, dt=DT, backend=b, dtype="float64")
        sim.reset(pos=[(0.0, 0.0, 0.9), (0.1, 0.0, 1.0)])
        res = fly(sim, Hover(pos=(0.0, 0.0, 1.0)), hexa_control, oc.pd_gains(hexa, DT),
                  duration=0.5, **kw)  # fmt: skip
        logs.append(res)
    assert logs[0].meta["loop"] == ("compiled" if backend == "native" else "scan")
    assert logs[0].log["cmd_rpm"].shape == (251, 2, 6)
    assert_logs_equal(logs[0].log, logs[1].log)
    assert np.abs(logs[0].log["pos"][-1] - logs[0].log["ref_pos"][-1]).max() < 0.05


def linalg_control(state, ref, gains, cstate):
    """The example's PD with its thrust and torque rewritten through ``@`` and ``xp.linalg``
    (unit vectors and a zero cross product: the same wrench, the operations traced)."""
    from quadsim.physics._array import namespace
    from quadsim.physics.rotation import to_matrix

    xp = namespace(state.pos)
    wrench, cstate = oc.pd_control(state, ref, gains, cstate)
    z_body = to_matrix(state.quat) @ xp.asarray(np.array([0.0, 0.0, 1.0]))  # world body-z
    thrust = wrench[..., 0] * xp.linalg.vector_norm(z_body, axis=-1)
    tau = wrench[..., 1:] + xp.linalg.cross(state.ang_vel, 0.0 * state.ang_vel)
    return xp.concat([thrust[..., None], tau], axis=-1), cstate


linalg_control.init_state = oc.pd_control.init_state


@pytest.mark.parametrize("backend", ["native", "jax"])
def test_matmul_and_linalg_trace(backend):
    if backend == "native" and not native.available():
        pytest.skip("needs CasADi and a C compiler")
    fast, *_ = _fly(backend, linalg_control, steps=100)
    ref, *_ = _fly("numpy", oc.pd_control, steps=100, jit=False)
    assert fast.meta["loop"] in ("compiled", "scan") and fast.meta["loop_reason"] is None
    assert_logs_equal(fast.log, ref.log)
