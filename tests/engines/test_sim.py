"""Simulator: backends agree, reproducibility, per-drone parameters, world, faults, wind."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import quadsim
from quadsim.engines.sim import SimulationError, Simulator, Wind
from quadsim.physics import rotation
from quadsim.physics.wind import dryden_preset
from quadsim.physics.world import Box, Ground, Limits, World, wall

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)


def hover_cmds(sim, T, scale=1.0):
    return np.full((T, sim.n, sim.system.n_cmd), sim.hover_rpm * scale)


def tumbling_cmds(sim, T, rng):
    base = sim.hover_rpm * (1.0 + 0.05 * rng.standard_normal((sim.n, 4)))
    return np.broadcast_to(base, (T, sim.n, 4)).copy()


def pos_of(traj):
    return np.asarray(traj.pos)


@pytest.mark.parametrize("backend", ["jax", "torch", "native"])
def test_compiled_and_numpy_paths_agree(backend, rng):
    sims = [Simulator("cf2x_L250", n=8, backend=b, world=None) for b in ("numpy", backend)]
    cmds = tumbling_cmds(sims[0], 200, rng)
    trajs = []
    for sim in sims:
        sim.reset(pos=[0.0, 0.0, 1.0], ang_vel=[1.0, -2.0, 0.5])
        trajs.append(sim.rollout(cmds))
    for a, b in zip(trajs[0], trajs[1], strict=True):
        a, b = np.asarray(a), np.asarray(b)
        np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-10 * np.abs(a).max())


def test_step_and_rollout_are_the_same(rng):
    a = Simulator("cf2x_L250", n=3, world=None)
    b = Simulator("cf2x_L250", n=3, world=None)
    cmds = tumbling_cmds(a, 30, rng)
    traj = a.rollout(cmds)
    for c in cmds:
        b.step(c)
    for x, y in zip(a.state, b.state, strict=True):
        np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(pos_of(traj)[-1], b.state.pos)


@pytest.mark.parametrize("backend", ["numpy", "jax", "native"])
def test_same_seed_same_inputs_is_bitwise_identical(backend, rng):
    turb = Wind(mean=(2.0, 1.0, 0.0), turbulence=dryden_preset("moderate", 10.0, 5.0))
    runs = []
    sim = Simulator("cf2x_L250", n=4, backend=backend, seed=7, wind=turb)
    for seed in (7, 7, 8):
        sim.reset(pos=[0.0, 0.0, 1.0], seed=seed)
        runs.append(pos_of(sim.rollout(hover_cmds(sim, 100))))
    fresh = Simulator("cf2x_L250", n=4, backend=backend, seed=7, wind=turb)
    fresh.reset(pos=[0.0, 0.0, 1.0])
    runs.append(pos_of(fresh.rollout(hover_cmds(fresh, 100))))
    assert np.array_equal(runs[0], runs[3])
    assert np.array_equal(runs[0], runs[1])
    assert not np.array_equal(runs[0], runs[2])


@pytest.mark.parametrize("backend", ["numpy", "native"])
def test_per_drone_parameters_match_separate_simulators(rng, backend):
    masses = np.array([0.028, 0.0319, 0.036])
    batch = Simulator("cf2x_L250", n=3, world=None, params={"mass": masses}, backend=backend)
    batch.reset(pos=[0, 0, 1.0])
    rpm0 = batch.hover_rpm
    cmds = hover_cmds(batch, 50)
    traj = pos_of(batch.rollout(cmds))
    for i, m in enumerate(masses):
        drone = quadsim.load_params("cf2x_L250")._replace(mass=m)
        one = Simulator(drone, n=1, world=None)
        one.reset(pos=[0, 0, 1.0], rotor_vel=rpm0)
        np.testing.assert_allclose(pos_of(one.rollout(cmds[:, i : i + 1]))[:, 0], traj[:, i],
                                   rtol=1e-13)  # fmt: skip
    assert traj[-1, 0, 2] > 1.0 > traj[-1, 2, 2]  # lighter climbs, heavier sinks


def test_per_drone_inertia_updates_the_inverse():
    J = np.stack([np.diag([16e-6, 16e-6, 30e-6]), np.diag([20e-6, 20e-6, 35e-6])])
    sim = Simulator("cf2x_L250", n=2, params={"J": J})
    np.testing.assert_allclose(sim.model_params["J_inv"], np.linalg.inv(J))


@pytest.mark.parametrize("backend", ["numpy", "native"])
def test_sticky_ground_lands_a_falling_drone(backend):
    sim = Simulator("cf2x_L250", n=1, backend=backend)
    sim.reset(pos=[0.0, 0.0, 0.5], vel=[0.3, 0.0, 0.0])
    sim.rollout(np.zeros((400, 1, 4)))  # motors off for 0.8 s
    assert np.asarray(sim.state.pos)[0, 2] == 0.0
    assert np.all(np.asarray(sim.state.vel) == 0.0)
    assert bool(sim.status.landed[0]) and not bool(sim.status.crashed[0])
    sim.rollout(hover_cmds(sim, 200, 1.3))  # and takes off again
    assert np.asarray(sim.state.pos)[0, 2] > 0.05 and not bool(sim.status.landed[0])


def test_hard_landing_is_a_crash_at_the_impact_time():
    """Free fall (f450_plus: no drag; rotors stopped) from 1 m hits at 4.4 m/s > 2 m/s."""
    sim = Simulator("f450_plus", n=1, world=World(ground=Ground(crash_speed=2.0)))
    sim.reset(pos=[0.0, 0.0, 1.0], rotor_vel=0.0)
    sim.rollout(np.zeros((500, 1, 4)))
    t_impact = np.sqrt(2 * 1.0 / 9.81)
    assert bool(sim.status.crashed[0])
    assert float(sim.status.crash_time[0]) == pytest.approx(t_impact, abs=2 * sim.dt)


def test_bouncing_ground_with_restitution_and_friction():
    e, mu = 0.5, 0.1
    world = World(ground=Ground(restitution=e, friction=mu))
    sim = Simulator("f450_plus", n=1, dt=1e-3, world=world, backend="jax")
    sim.reset(pos=[0.0, 0.0, 1.0], vel=[1.0, 0.0, 0.0], rotor_vel=0.0)
    traj = sim.rollout(np.zeros((1200, 1, 4)))
    z, v = pos_of(traj)[:, 0, 2], np.asarray(traj.vel)[:, 0]
    first = int(np.argmax(v[:, 2] > 0))  # the step of the first bounce
    v_in = np.sqrt(2 * 9.81 * 1.0)
    assert v[first, 2] == pytest.approx(e * v_in, rel=0.01)  # v' = -e v
    assert v[first, 0] == pytest.approx(1.0 - mu * (1 + e) * v_in, rel=0.01)  # Coulomb impulse
    assert z.min() >= 0.0 and z[first + 200] > 0.1  # back in the air


@pytest.mark.parametrize("backend", ["numpy", "native"])
def test_wall_crash_freezes_the_drone_where_it_crashed(backend):
    world = World(boxes=(wall("x", 3.0),))  # seed 001's wall at x = 3 m
    sim = Simulator("f450_plus", n=2, world=world, backend=backend)
    sim.reset(pos=[[2.5, 0.0, 1.0], [0.0, 0.0, 1.0]], vel=[[2.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    traj = pos_of(sim.rollout(hover_cmds(sim, 300)))
    assert bool(sim.status.crashed[0]) and not bool(sim.status.crashed[1])
    assert float(sim.status.crash_time[0]) == pytest.approx(0.25, abs=0.01)
    assert traj[-1, 0, 0] < 3.0 and traj[-1, 0, 0] > 2.95
    np.testing.assert_array_equal(traj[-1, 0], traj[200, 0])  # frozen after the crash
    assert np.all(np.asarray(sim.state.vel)[0] == 0.0)


def test_boxes_and_bounds_crash():
    world = World(ground=None, boxes=(Box((1.0, -1.0, 0.0), (2.0, 1.0, 2.0)),),
                  bounds=Box((-5.0, -5.0, -5.0), (5.0, 5.0, 5.0)))  # fmt: skip
    sim = Simulator("cf2x_L250", n=3, world=world)
    sim.reset(pos=[[0.5, 0, 1], [0, 0, 1], [0, 0, 1]],
              vel=[[2.0, 0, 0], [0, 0, 3.0], [0, 0, 0]])  # fmt: skip
    sim.rollout(hover_cmds(sim, 1000))
    assert sim.status.crashed.tolist() == [True, True, False]


@pytest.mark.parametrize("backend", ["numpy", "native"])
def test_fault_flags_one_drone_and_keeps_the_rest(backend):
    sim = Simulator("cf2x_L250", n=3, world=World(ground=None), backend=backend)
    sim.reset(pos=[0, 0, 1.0])
    cmds = hover_cmds(sim, 100)
    cmds[40:, 1] = np.nan  # drone 1 gets a NaN command at step 40
    reference = Simulator("cf2x_L250", n=3, world=World(ground=None))
    reference.reset(pos=[0, 0, 1.0])
    sim.rollout(cmds)
    reference.rollout(hover_cmds(reference, 100))
    assert sim.status.fault_step.tolist() == [-1, 40, -1]
    assert int(sim.status.fault_code[1]) == 1  # non-finite state
    assert np.all(np.isfinite(np.asarray(sim.state.pos)))  # last good state kept
    for i in (0, 2):
        np.testing.assert_array_equal(np.asarray(sim.state.pos)[i], reference.state.pos[i])


@pytest.mark.parametrize("backend", ["numpy", "native"])
def test_restore_continues_from_a_state_and_flags_as_assigning_them(backend):
    world = World(boxes=(wall("x", 3.0),))
    crashed = Simulator("cf2x_L250", n=2, world=world, backend=backend)
    crashed.reset(pos=[[2.9, 0.0, 1.0], [0.0, 0.0, 1.0]], vel=[[2.0, 0.0, 0.0], [0.0] * 3])
    crashed.rollout(hover_cmds(crashed, 100))
    state, status = crashed.state, crashed.status
    assert status.crashed.tolist() == [True, False]

    def fresh():
        sim = Simulator("cf2x_L250", n=2, world=world, backend=backend)
        sim.reset(pos=[0.0, 0.0, 1.0])
        sim.k = 7
        return sim

    assigned, restored, kept = fresh(), fresh(), fresh()
    assigned.state = state
    assigned.status = status
    restored.restore(state, status)
    kept.restore(state)  # the flags kept: all clear
    for a, b in zip(assigned.state, restored.state, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    for a, b in zip(assigned.status, restored.status, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert restored.status.crashed.tolist() == [True, False] and restored.k == 7
    assert kept.status.crashed.tolist() == [False, False]
    np.testing.assert_array_equal(np.asarray(kept.state.pos), np.asarray(state.pos))
    cmds = hover_cmds(restored, 50)
    np.testing.assert_array_equal(pos_of(assigned.rollout(cmds)), pos_of(restored.rollout(cmds)))


def test_speed_limit_fault():
    sim = Simulator("cf2x_L250", n=2, world=World(ground=None, limits=Limits(max_speed=1.0)))
    sim.reset(pos=[0, 0, 1.0], vel=[[0.0, 0, 0], [0.99, 0, 0]])
    sim.rollout(hover_cmds(sim, 10), record=False)
    assert sim.status.fault_step.tolist() == [-1, -1]
    sim.step(hover_cmds(sim, 1)[0], dist_f=[[0, 0, 0], [0.5, 0, 0]])  # pushes drone 1 over
    assert sim.status.fault_step.tolist() == [-1, 10] and int(sim.status.fault_code[1]) == 2


@pytest.mark.parametrize("backend", ["numpy", "native"])
def test_single_drone_divergence_raises_with_quantity_and_time(backend):
    world = World(ground=None, limits=Limits(max_rate=50.0))
    sim = Simulator("cf2x_L250", n=1, world=world, backend=backend)
    sim.reset(pos=[0, 0, 1.0])
    cmd = np.array([[sim.hover_rpm * 1.5, sim.hover_rpm * 0.5, sim.hover_rpm * 1.5,
                     sim.hover_rpm * 0.5]])  # fmt: skip
    with pytest.raises(SimulationError, match=r"body rate at step \d+ \(t = [0-9.]+ s\)"):
        for _ in range(2000):
            sim.step(cmd)


def test_constant_wind_drifts_the_drone_downwind():
    sim = Simulator("skydio2_x", n=1, model="wrench", wind=Wind(mean=(5.0, 0.0, 0.0)),
                    world=None)  # fmt: skip
    g = 10.0
    sim.reset(pos=[0, 0, 10.0])
    traj = sim.rollout(np.tile([1.0 * g, 0, 0, 0], (2000, 1, 1)))
    v = np.asarray(traj.vel)[:, 0]
    t = sim.dt * np.arange(1, 2001)
    k_d, w = 0.0425, 5.0  # m dv/dt = k_d (w - v)^2  =>  v = w - 1 / (1/w + k_d t / m)
    np.testing.assert_allclose(v[:, 0], w - 1.0 / (1.0 / w + k_d * t), rtol=1e-6)
    assert np.all(np.abs(v[:, 1:]) < 1e-12)


def test_turbulence_moves_a_hovering_drone_and_mean_wind_is_respected():
    turb = dryden_preset("moderate", 10.0, 5.0)
    sim = Simulator("skydio2_x", n=64, model="wrench", world=None, seed=3,
                    wind=Wind(mean=(0.0, 0.0, 0.0), turbulence=turb))  # fmt: skip
    sim.reset(pos=[0, 0, 10.0])
    traj = sim.rollout(np.tile([10.0, 0, 0, 0], (500, 64, 1)))
    spread = np.asarray(traj.pos)[-1, :, :2].std(axis=0)
    assert np.all(spread > 1e-3)


def test_euler_model_simulates_like_the_quaternion_model(rng):
    att = np.array([0.2, -0.1, 0.3])
    sims = {m: Simulator("cf21B_500", n=1, model=m, world=None)
            for m in ("first_principles", "euler_zyx")}  # fmt: skip
    sims["first_principles"].reset(pos=[0, 0, 1.0], attitude=rotation.from_euler(att))
    sims["euler_zyx"].reset(pos=[0, 0, 1.0], attitude=att)
    cmds = tumbling_cmds(sims["euler_zyx"], 100, rng)
    a = sims["first_principles"].rollout(cmds)
    b = sims["euler_zyx"].rollout(cmds)
    np.testing.assert_allclose(np.asarray(b.pos), np.asarray(a.pos), atol=1e-9)
    q_euler, q_quat = np.asarray(rotation.from_euler(b.rpy)), np.asarray(a.quat)
    sign = np.sign(q_euler[..., 3:] * q_quat[..., 3:])  # q and -q are the same attitude
    np.testing.assert_allclose(q_euler * sign, q_quat, atol=1e-9)


def test_bad_arguments_are_clear():
    with pytest.raises(ValueError, match="backend must be"):
        Simulator(backend="cuda")
    with pytest.raises(ValueError, match="unknown integrator 'rk9'"):
        Simulator(integrator="rk9")
    with pytest.raises(ValueError, match="unknown model"):
        Simulator(model="nope")
    with pytest.raises(ValueError, match="n must be a positive integer"):
        Simulator(n=0)
    with pytest.raises(ValueError, match="leading size n = 2"):
        Simulator(n=2, params={"mass": [0.03]})
    with pytest.raises(ValueError, match="not a parameter of model"):
        Simulator(params={"wingspan": [1.0]})
    sim = Simulator(n=2)
    with pytest.raises(ValueError, match=r"cmd must .*shape \(2, 4\)"):
        sim.step(np.zeros((3, 4)))
    with pytest.raises(ValueError, match="reset: pos must be finite"):
        sim.reset(pos=[np.nan, 0, 0])


@pytest.mark.parametrize("backend", ["numpy", "torch", "native"])
def test_reset_drones_resets_only_the_selected_ones(backend):
    world = World(ground=Ground(crash_speed=0.5))
    sim = Simulator("cf2x_L250", n=4, backend=backend, world=world)
    sim.reset(pos=[[0, 0, 1], [0, 0, 1], [0, 0, 0.05], [0, 0, 1]])
    sim.rollout(hover_cmds(sim, 100, 0.0))  # free fall: drone 2 hits the floor first and crashes
    crashed = np.asarray(sim.status.crashed).copy()
    assert crashed[2]
    before = np.array(np.asarray(sim.state.pos))
    sim.reset_drones(np.array([False, False, True, False]), pos=[0.0, 0.0, 2.0])
    after = np.asarray(sim.state.pos)
    assert np.array_equal(after[[0, 1, 3]], before[[0, 1, 3]])
    assert np.array_equal(after[2], [0.0, 0.0, 2.0])
    status = sim.status
    assert not np.asarray(status.crashed)[2] and np.isnan(np.asarray(status.crash_time)[2])
    assert np.array_equal(np.asarray(status.crashed)[[0, 1, 3]], crashed[[0, 1, 3]])
    sim.rollout(hover_cmds(sim, 10))  # the reset drone flies again (hover from 2 m)
    assert abs(np.asarray(sim.state.pos)[2, 2] - 2.0) < 1e-3
    with pytest.raises(ValueError, match="pos must be finite"):
        sim.reset_drones([1], pos=[np.nan, 0, 0])


@pytest.mark.parametrize("model", ["first_principles", "euler_zyx", "wrench"])
def test_step_wrench_allocates_and_the_rotors_follow(model):
    sim = Simulator("cf2x_L250", n=3, model=model, backend="numpy", world=None)
    sim.reset(pos=[0.0, 0.0, 1.0])
    weight = sim.drone.mass * 9.81
    hover = np.array([weight, 0.0, 0.0, 0.0])
    for _ in range(50):
        state = sim.step_wrench(hover)
    assert np.abs(np.asarray(state.vel)).max() < 1e-9  # allocation of m g is hover
    if model != "wrench":
        assert np.allclose(sim.last_allocation.rpm, sim.hover_rpm, rtol=1e-9)
        too_much = np.array([weight, 0.0, 0.0, 1.0])  # 1 N m of yaw: far beyond the rotors
        sim.step_wrench(too_much)
        lost = sim.last_allocation.lost
        assert sim.last_allocation.saturated.all() and np.abs(lost[:, :3]).max() < 1e-9
    with pytest.raises(ValueError, match=r"wrench must have shape \(n, 4\)"):
        sim.step_wrench(np.zeros(3))


def test_simulator_gusts_are_the_wind_module_recursion():
    """The Simulator's fast NumPy gust recursion equals wind.dryden_step, step by step."""
    from quadsim.physics.noise import normals
    from quadsim.physics.wind import dryden_discretize, dryden_init, dryden_step, gust_to_world

    turb = dryden_preset("moderate", 5.0, 2.0)
    sim = Simulator("cf2x_L250", n=3, wind=Wind(mean=(1.0, 1.0, 0.0), turbulence=turb), seed=4)
    got = sim.wind_sequence(50)
    disc = dryden_discretize(turb, sim.dt)
    g = dryden_init(disc, normals(4, "dryden_init", 0, np.arange(3), 5))
    noise = normals(4, "dryden", np.arange(50)[:, None], np.arange(3), 5)
    d = np.full((3, 2), np.sqrt(0.5))
    for i in range(50):
        g, gust = dryden_step(g, noise[i], disc)
        want = np.array([1.0, 1.0, 0.0]) + gust_to_world(gust, d)
        np.testing.assert_allclose(got[i], want, rtol=1e-12, atol=1e-12)


def test_a_drone_with_a_warmup_flies_it_and_the_wrench_model_says_it_cannot():
    """cf21_nanobench's warm-up is in the plant: its simulator carries the motors' warm-up states
    (cold at a reset) and says nothing; a drone without the term has no such state; the wrench
    model, which has no rotors, says it flies without it."""
    from quadsim.engines.state import State, WarmState

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warm = Simulator("cf21_nanobench", n=3)
        plain = Simulator("cf2x_L250", n=3)
    assert isinstance(warm.state, WarmState) and isinstance(plain.state, State)
    np.testing.assert_array_equal(warm.state.motor_heat, np.zeros((3, 4)))
    assert dict(warm.system.fields)["motor_heat"] == 4 and "motor_heat" not in dict(
        plain.system.fields)
    with pytest.warns(UserWarning, match=r"warmup_coef \(motor warm-up\) is not flown by the "
                                         r"wrench model"):  # fmt: skip
        Simulator("cf21_nanobench", model="wrench")
