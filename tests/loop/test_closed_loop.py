"""The compiled closed loop (issue 10, item 2) against the reference path, ``fly`` on NumPy.

The reference is :func:`quadsim.loop.flight.fly` with ``jit=False`` on a NumPy ``Simulator`` without
world or sensors: the same trajectory, controller and allocation code evaluated per step in
float64. The compiled loop must match it to 1e-9 relative over 1 s, and must not match a loop
with a gain changed by 1e-4 (so the comparison can fail).
"""

from __future__ import annotations

import numpy as np
import pytest

from quadsim.engines import native
from quadsim.engines.sim import Simulator
from quadsim.loop.brain import Sensors
from quadsim.loop.control import control, load_gains
from quadsim.loop.flight import fly
from quadsim.loop.trajectories import Circle, Hover, Lemniscate, MinSnap, Step
from quadsim.physics.params import load_params
from quadsim.physics.sensors import MocapParams, load_imu

pytestmark = pytest.mark.skipif(not native.available(), reason="needs CasADi and a C compiler")

DT = 1 / 500
STEPS = 500  # 1 s
TOL = 1e-9
FIELDS = ("pos", "quat", "vel", "ang_vel", "rotor_vel", "cmd_rpm")
TRAJS = {
    "hover": Hover(pos=(0.0, 0.0, 1.0)),
    "circle": Circle(radius=1.0, speed=1.0, center=(0.0, 0.0, 1.0)),
    "lemniscate": Lemniscate(size=1.0, period=8.0, center=(0.0, 0.0, 1.0)),
    "step": Step(start=(0.0, 0.0, 1.0), end=(0.5, 0.2, 1.2), t_step=0.3, rise_time=0.4),
    "min_snap": MinSnap(waypoints=[(0, 0, 1), (1, 0, 1.2), (1, 1, 1), (0, 1, 1)],
                        durations=[0.3, 0.3, 0.3]),
}  # fmt: skip


@pytest.fixture(scope="module")
def drone():
    return load_params("cf2x_L250")


@pytest.fixture(scope="module")
def gains(drone):
    return load_gains("cf2x_L250_geometric", drone=drone, dt=DT)


def _start(traj, n, seed=0):
    """Per-drone reference offsets and start positions near the reference (not on it)."""
    rng = np.random.default_rng(seed)
    offset = rng.uniform(-2.0, 2.0, (n, 3))
    r0 = traj(0.0)
    return offset, np.asarray(r0.pos) + offset + rng.normal(0.0, 0.05, (n, 3)), r0.vel


def _compiled(drone, gains, traj, n, dtype=np.float64, steps=STEPS):
    from quadsim.loop.closed_loop_native import compile_closed_loop

    offset, pos, vel = _start(traj, n)
    loop = compile_closed_loop(drone, gains, traj, DT, dtype)
    out = loop.run(loop.initial_state(n, pos=pos, vel=vel), steps, record_every=1, offset=offset)
    return out, loop


def _reference(gains, traj, n, steps=STEPS):
    offset, pos, vel = _start(traj, n)
    sim = Simulator("cf2x_L250", n=n, dt=DT, backend="numpy", world=None)
    sim.reset(pos=pos, vel=vel)
    log = fly(sim, traj, control, gains, duration=steps * DT, ref_offset=offset, jit=False).log
    # log sample k is x_k with the command computed from it; the compiled record j holds x_{j+1}
    # and the command of step j
    ref = {f: log["rotor_rpm" if f == "rotor_vel" else f][1:] for f in FIELDS[:-1]}
    ref["cmd_rpm"] = log["cmd_rpm"][:-1]
    return ref


def _rel_errors(ref, fields):
    return {f: float(np.abs(fields[f] - ref[f]).max() / np.abs(ref[f]).max()) for f in FIELDS}


@pytest.mark.parametrize("n", [1, 64])
@pytest.mark.parametrize("name", ["hover", "circle", "lemniscate"])
def test_compiled_closed_loop_equals_fly_on_numpy(drone, gains, name, n):
    """cf2x_L250, geometric, rotor dynamics, RK4 at 500 Hz, 1 s, float64: <= 1e-9 relative."""
    traj = TRAJS[name]
    out, _ = _compiled(drone, gains, traj, n)
    ref = _reference(gains, traj, n)
    assert out.fields["pos"].shape == (STEPS, n, 3)
    np.testing.assert_allclose(out.time, DT * np.arange(1, STEPS + 1), rtol=1e-12)
    err = _rel_errors(ref, out.fields)
    print(f"\n{name} n={n}: " + ", ".join(f"{k} {v:.1e}" for k, v in err.items()))
    assert max(err.values()) <= TOL, err
    # the drones really fly: they follow their own (offset) references
    assert np.ptp(out.fields["pos"][:, 0, 0]) > (0.0 if name == "hover" else 0.3)


@pytest.mark.parametrize("name", ["step", "min_snap"])
def test_piecewise_references_compile_and_match(drone, gains, name):
    """Step (smoothstep rise) and min-snap (piecewise polynomials, if_else selects) also match."""
    traj = TRAJS[name]
    out, _ = _compiled(drone, gains, traj, 4)
    err = _rel_errors(_reference(gains, traj, 4), out.fields)
    assert max(err.values()) <= TOL, err


def test_pid_controller_compiles_and_matches(drone):
    """The cascade PID traces through the same array-API path."""
    gains = load_gains("cf2x_L250_pid", drone=drone, dt=DT)
    traj = TRAJS["circle"]
    out, _ = _compiled(drone, gains, traj, 4)
    err = _rel_errors(_reference(gains, traj, 4), out.fields)
    assert max(err.values()) <= TOL, err


def test_comparison_can_fail(drone, gains):
    """A position gain changed by 1e-4 relative moves the result far beyond the tolerance."""
    traj = TRAJS["circle"]
    ref = _reference(gains, traj, 1)
    other = gains._replace(kp=np.asarray(gains.kp) * (1.0 + 1e-4))
    out, _ = _compiled(drone, other, traj, 1)
    err = _rel_errors(ref, out.fields)
    assert err["pos"] > 100 * TOL, err


def test_chunks_and_float32(drone, gains):
    """Two calls of 250 steps equal one of 500 exactly; float32 stays within 1e-4 of float64."""
    traj = TRAJS["lemniscate"]
    out64, loop = _compiled(drone, gains, traj, 8)
    offset, pos, vel = _start(traj, 8)
    x = loop.initial_state(8, pos=pos, vel=vel)
    half = loop.run(x, STEPS // 2, record_every=0, offset=offset)
    assert half.fields == {} and half.time.size == 0
    rest = loop.run(half.x, STEPS // 2, record_every=50, offset=offset)
    np.testing.assert_array_equal(rest.x, out64.x)
    np.testing.assert_allclose(rest.time, DT * np.arange(300, 501, 50), rtol=1e-12)
    out32, _ = _compiled(drone, gains, traj, 8, np.float32)
    assert out32.x.dtype == np.float32
    np.testing.assert_allclose(out32.fields["pos"], out64.fields["pos"], atol=1e-4)


def test_threads_do_not_change_a_bit(drone, gains):
    """One thread, two or three forced to share every call (``threads=-k``: each computes its
    share of the blocks whatever the machine's load) and the default give the same bits, for
    37 drones (the last block of 4 padded) and its records (issue 27, item 15)."""
    traj = TRAJS["lemniscate"]
    out, loop = _compiled(drone, gains, traj, 37, steps=120)
    offset, pos, vel = _start(traj, 37)
    x0 = loop.initial_state(37, pos=pos, vel=vel)
    try:
        for threads in (1, -2, -3, 0):
            loop.rollout.threads = threads
            got = loop.run(x0, 120, record_every=1, offset=offset)
            np.testing.assert_array_equal(got.x, out.x)
            for name in out.fields:
                np.testing.assert_array_equal(got.fields[name], out.fields[name])
            if threads < 0:
                assert loop.rollout.threads_used == -threads
    finally:
        loop.rollout.threads = 0


def test_wind_input_moves_the_drones(drone, gains):
    """A constant wind (per-step input) pushes the drones off; zero wind is the default."""
    from quadsim.loop.closed_loop_native import compile_closed_loop

    loop = compile_closed_loop(drone, gains, TRAJS["hover"], DT, np.float64)
    x = loop.initial_state(2, pos=(0.0, 0.0, 1.0))
    calm = loop.run(x, 100, record_every=0)
    windy = loop.run(x, 100, record_every=0, wind=[[3.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    rows = loop.rows["pos"]
    assert windy.x[rows][0, 0] > calm.x[rows][0, 0] + 1e-4
    np.testing.assert_array_equal(windy.x[:, 1], calm.x[:, 1])


def test_dt_must_match_the_gains(drone, gains):
    from quadsim.loop.closed_loop_native import compile_closed_loop

    with pytest.raises(ValueError, match="control period"):
        compile_closed_loop(drone, gains, TRAJS["hover"], 1 / 400, np.float64)


def test_symbolic_allocation_matches_numpy_including_saturation(drone):
    """``allocate`` traced on SymArray equals NumPy, inside and outside the rotor limits."""
    import casadi as cs

    from quadsim.physics._symbolic import symbolic
    from quadsim.physics.rotors import allocate, make_allocator

    a = make_allocator(drone)
    W = cs.SX.sym("w", 4)
    al = allocate(symbolic([W[i] for i in range(4)]), a)
    f = cs.Function("f", [W], [cs.vertcat(*al.rpm.entries(), *al.wrench.entries(),
                                          *al.saturated.entries())])  # fmt: skip
    for w in ([0.3, 1e-3, -2e-3, 5e-4], [0.7, 0.01, -0.02, 0.005], [0.0, 0.0, 0.0, 0.0],
              [0.4, 0.0, 0.0, 0.01], [1e9, -1e9, 1e9, -1e9]):  # fmt: skip
        w = np.asarray(w, dtype=np.float64)
        got = np.asarray(f(w)).ravel()
        ref = allocate(w, a)
        np.testing.assert_allclose(got[:4], ref.rpm, rtol=1e-12)
        np.testing.assert_allclose(got[4:8], ref.wrench, rtol=1e-12, atol=1e-15)
        assert bool(got[8]) == bool(ref.saturated)


@pytest.mark.parametrize("case", ["takeoff", "touchdown"])
def test_world_contact_matches(drone, gains, case):
    """Default World: take off from z = 0 to 1 m, or be sent 0.5 m below the floor from 0.3 m."""
    from quadsim.loop.closed_loop_native import compile_closed_loop
    from quadsim.physics.world import World

    n, world = 8, World()
    pos = np.zeros((n, 3))
    pos[:, 0] = np.arange(n)
    if case == "takeoff":
        traj = TRAJS["hover"]
    else:
        traj = Step(start=(0.0, 0.0, 0.3), end=(0.0, 0.0, -0.5), t_step=0.1)
        pos[:, 2] = 0.3
    loop = compile_closed_loop(drone, gains, traj, DT, np.float64, world=world)
    out = loop.run(loop.initial_state(n, pos=pos), STEPS, record_every=1, offset=pos)
    sim = Simulator("cf2x_L250", n=n, dt=DT, backend="numpy", world=world)
    sim.reset(pos=pos)
    log = fly(sim, traj, control, gains, duration=STEPS * DT, ref_offset=pos, jit=False).log
    for f in ("pos", "quat", "vel", "ang_vel"):  # a straight climb: ang_vel is 0 in NumPy
        scale = max(np.abs(log[f]).max(), 1.0)
        np.testing.assert_allclose(out.fields[f], log[f][1:], rtol=0, atol=TOL * scale)
    np.testing.assert_array_equal(out.fields["landed"], log["landed"][1:])
    np.testing.assert_array_equal(out.fields["crashed"], log["crashed"][1:])
    if case == "takeoff":
        assert out.fields["pos"][-1, :, 2].min() > 0.5
    else:
        assert out.fields["landed"][-1].all() and out.fields["pos"][-1, :, 2].max() < 1e-6


def test_float32_circle_keeps_the_published_tracking(drone, gains):
    """The docs' circle figure (RMS 0.30 cm, max 0.61 cm after 2 s) holds in compiled float32."""
    import math

    from quadsim.loop.closed_loop_native import compile_closed_loop

    traj = TRAJS["circle"]
    loop = compile_closed_loop(drone, gains, traj, DT, np.float32)
    r0 = traj(0.0)
    out = loop.run(loop.initial_state(16, pos=r0.pos, vel=r0.vel), round((2 + 2 * math.pi) / DT))
    m = out.time > 2.0
    err = np.linalg.norm(out.fields["pos"][m] - np.asarray(traj(out.time[m]).pos)[:, None], axis=-1)
    rms = np.sqrt((err**2).mean(axis=0))
    print(f"\nfloat32 circle: RMS {rms.max() * 100:.3f} cm, max {err.max() * 100:.3f} cm")
    assert rms.max() <= 0.0031 and err.max() <= 0.0062


def test_per_drone_parameters_are_inputs_and_shared_ones_constants(drone, gains):
    """A per-drone mass becomes one row of p (after the offset); uniform entries fold."""
    from quadsim.loop.closed_loop import per_drone_params
    from quadsim.loop.closed_loop_native import compile_for_simulator

    masses = np.array([0.030, 0.031, 0.032])
    J = np.broadcast_to(np.asarray(drone.J), (3, 3, 3))  # per drone, but the same for all
    sim = Simulator("cf2x_L250", n=3, dt=DT, backend="native", params={"mass": masses, "J": J})
    varying, values = per_drone_params(sim.system, sim.model_params)
    assert [(name, idx) for name, idx, _ in varying] == [("mass", ())]
    np.testing.assert_array_equal(values, masses[None])
    loop = compile_for_simulator(sim, control, gains, TRAJS["hover"])
    assert loop.rollout.n_param == 4 and loop.params.shape == (1, 3)
    x = loop.initial_state(3, pos=(0.0, 0.0, 1.0))
    out = loop.run(x, 50, record_every=0)
    z = out.x[loop.rows["pos"]][2]
    assert z[0] > z[1] > z[2]  # nominal gains: the heavier drone sags more
    with pytest.raises(ValueError, match="per-drone model parameters for 3 drones; got 2"):
        loop.run(x[:, :2], 1)


def test_sensor_rows_need_the_sample(drone, gains):
    from quadsim.loop.closed_loop import closed_loop_step
    from quadsim.physics.integrators import rk4
    from quadsim.physics.rotors import make_allocator
    from quadsim.physics.systems import make_system

    system = make_system("first_principles", 4, True)
    params = {k: getattr(drone, k) for k in system.param_spec}
    args = (system, params, control, gains, TRAJS["hover"], make_allocator(drone), DT, rk4)
    imu = load_imu("bmi088")
    mocap = MocapParams(0.001, 0.01, 2 * DT, 1 / DT)  # two steps late
    with pytest.raises(ValueError, match="need sample=True"):
        closed_loop_step(*args, sens=Sensors(imu))
    with pytest.raises(ValueError, match="need sample=True"):
        closed_loop_step(*args, sens=Sensors(mocap=mocap))
    F, rows, _ = closed_loop_step(*args, sample=True, sens=Sensors(imu, mocap))
    # the brain's state (quadsim.loop.brain.BrainState) sits before the step counter, then outputs
    # (the sensor parts' states last, each named by its part: quadsim.loop.brain.state_leaves)
    assert rows["mocap_line_pos_buf"].stop - rows["mocap_line_pos_buf"].start == 6  # 2 positions
    assert rows["mocap_line_quat_buf"].stop - rows["mocap_line_quat_buf"].start == 8
    assert rows["mocap_line_count"].stop == rows["step"].start
    assert rows["imu_bias_gyro_bias"].stop == rows["imu_bias_accel_bias"].start
    assert {"gyro", "accel", "mocap_pos", "j", "imu_vel"} <= set(rows)
    assert "held_cmd_rpm" not in rows  # every period is one step: nothing held
    assert F.n_in() == 4 and F.numel_in(3) == 18  # the normals: IMU 12, motion capture 6


def _step_args(drone):
    from quadsim.physics.integrators import rk4
    from quadsim.physics.systems import make_system

    system = make_system("first_principles", 4, True)
    return system, {k: getattr(drone, k) for k in system.param_spec}, rk4


def test_open_loop_step_is_the_simulators_step_on_the_given_command(drone):
    """control=None: no brain; the rotor command is the input after the wind, as Simulator.step
    takes it (in a wind, to 1e-12), and the step counter runs on."""
    from quadsim.loop.closed_loop import closed_loop_step

    system, params, rk4 = _step_args(drone)
    F, rows, template = closed_loop_step(system, params, None, None, None, None, DT, rk4)
    assert template is None and list(rows)[-2:] == ["step", "cmd_rpm"]
    sim = Simulator("cf2x_L250", dt=DT, backend="numpy", world=None)
    sim.reset(pos=(0.0, 0.0, 1.0), vel=(0.3, -0.2, 0.1), ang_vel=(0.5, -0.4, 0.2))
    x = np.zeros(F.nnz_in(0))
    for name, _ in system.fields:
        x[rows[name]] = np.ravel(getattr(sim.state, name))
    rpm, wind = np.array([15000.0, 16000.0, 14500.0, 15500.0]), np.array([1.0, -0.5, 0.2])
    for _ in range(3):
        x = np.asarray(F(x, np.concatenate([wind, rpm]), np.zeros(3))).ravel()
        sim.step(rpm, wind=wind)
    for name, _ in system.fields:
        np.testing.assert_allclose(x[rows[name]], np.ravel(getattr(sim.state, name)), rtol=0,
                                   atol=1e-12, err_msg=name)  # fmt: skip
    assert x[rows["step"]][0] == 3.0
    np.testing.assert_array_equal(x[rows["cmd_rpm"]], rpm)
    with pytest.raises(ValueError, match="no sample"):
        closed_loop_step(system, params, None, None, None, None, DT, rk4, sample=True)


def test_a_set_point_input_is_the_controllers_reference(drone, gains):
    """trajectory=None: the controller's reference is the input after the wind; the same step as
    with a trajectory that gives that reference (the geometric controller on a hover point)."""
    from quadsim.loop.closed_loop import closed_loop_step
    from quadsim.physics.rotors import make_allocator

    system, params, rk4 = _step_args(drone)
    alloc = make_allocator(drone)
    target = Hover(pos=(0.3, -0.2, 1.1))

    def set_point_control(state, ref, g, c):  # the set point (3) as the hover's position
        return control(state, target(0.0)._replace(pos=ref), g, c)

    Fs, rows_s, _ = closed_loop_step(system, params, set_point_control, gains, None, alloc, DT,
                                     rk4, ref_inputs=3)  # fmt: skip
    Ft, rows_t, _ = closed_loop_step(system, params, control, gains, target, alloc, DT, rk4)
    assert rows_s == rows_t and Fs.nnz_in(1) == 6 and Ft.nnz_in(1) == 3
    x = np.zeros(Fs.nnz_in(0))
    x[rows_s["pos"]], x[rows_s["quat"]] = (0.0, 0.0, 1.0), (0.0, 0.0, 0.0, 1.0)
    x[rows_s["rotor_vel"]] = 15000.0
    xs = xt = x
    for _ in range(20):
        xs = np.asarray(Fs(xs, [0.0, 0.0, 0.0, 0.3, -0.2, 1.1], np.zeros(3))).ravel()
        xt = np.asarray(Ft(xt, np.zeros(3), np.zeros(3))).ravel()
    np.testing.assert_allclose(xs, xt, rtol=1e-12, atol=1e-9)
    assert np.linalg.norm(xs[rows_s["vel"]]) > 1e-3  # it flew towards the set point
    with pytest.raises(ValueError, match="ref_inputs must be >= 1; got 0"):
        closed_loop_step(system, params, set_point_control, gains, None, alloc, DT, rk4)
