"""Gymnasium environments: API conformance, physics of the action levels, episodes, vector env."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

REQUIRE_ALL = (
    os.environ.get("QUADSIM_REQUIRE_ALL_BACKENDS") == "1" or os.environ.get("CI", "") == "true"
)
try:
    import gymnasium as gym
except ImportError:  # pragma: no cover - CI must not skip: see conftest.py
    if REQUIRE_ALL:
        pytest.fail("gymnasium is required in CI (pip install 'quadsim[gym]')", pytrace=False)
    pytest.skip("gymnasium not installed", allow_module_level=True)

from gymnasium.utils.env_checker import check_env  # noqa: E402
from gymnasium.vector import AutoresetMode  # noqa: E402

import quadsim  # noqa: E402
from quadsim.app.envs import (  # noqa: E402
    HoverEnv,
    HoverVectorEnv,
    InitRanges,
    TrackEnv,
    TrackVectorEnv,
    register_envs,
)

LEVELS = ["rotor_speeds", "thrust_rates", "thrust_attitude"]
TARGET = np.array([0.0, 0.0, 1.0])
AT_REST = {"pos": TARGET, "attitude": [0.0, 0.0, 0.0, 1.0], "vel": [0.0] * 3, "ang_vel": [0.0] * 3}
INF_BOUNDS = "ignore:.*Box observation space (minimum|maximum) value is:UserWarning"


def native_backend() -> str:
    from quadsim.engines.native import available

    if available():
        return "native"
    if REQUIRE_ALL:
        pytest.fail("the native backend (CasADi and a C compiler) is required in CI")
    pytest.skip("native backend not available (no C compiler or CasADi)")


def hover_action(env) -> np.ndarray:
    """The action that holds hover at the nominal parameters, per level."""
    level = env.core.level
    if level.name == "rotor_speeds":
        return level.action_of(np.full(level.dim, env.sim.hover_rpm)).astype(np.float32)
    p = env.core.params
    a = np.zeros(4, np.float32)
    a[0] = level.thrust_action(p.mass * -p.gravity_vec[2])
    return a


# -- single environments ---------------------------------------------------------------------------
@pytest.mark.filterwarnings(INF_BOUNDS)
@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("cls", [HoverEnv, TrackEnv])
def test_check_env(cls, level):
    env = cls(action_level=level, max_episode_steps=50)
    check_env(env, skip_render_check=True)
    obs, _ = env.reset(seed=0)
    assert obs.dtype == np.float32 and env.observation_space.contains(obs)
    assert env.action_space.shape == (4,)
    assert obs.shape == ((22,) if cls is HoverEnv else (22 + 3 + 9,))


def test_make_by_id_without_import_side_effects():
    code = (
        "import sys, quadsim\n"
        "assert 'gymnasium' not in sys.modules  # import quadsim does not load gymnasium\n"
        "import gymnasium\n"
        "assert 'quadsim.app.envs' not in sys.modules  # nor does import gymnasium load quadsim\n"
        "assert 'quadsim/Hover-v0' not in gymnasium.registry\n"
        "env = gymnasium.make('quadsim.app.envs:quadsim/Hover-v0')\n"
        "assert env.spec.max_episode_steps == 500\n"
        "env = gymnasium.make('quadsim/Track-v0', action_level='rotor_speeds')\n"
        "print(type(env.unwrapped).__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "TrackEnv"


def test_register_envs_explicit_and_idempotent():
    register_envs()
    register_envs()
    env = gym.make("quadsim/Hover-v0", action_level="rotor_speeds")
    assert isinstance(env.unwrapped, HoverEnv)
    assert env.spec.max_episode_steps == 500
    assert gym.spec("quadsim/Track-v0").vector_entry_point.endswith(":TrackVectorEnv")


@pytest.mark.parametrize("level", LEVELS)
def test_hover_action_holds_position(level):
    """Hover thrust with zero rates/level attitude keeps the drone at the target for 1 s."""
    env = HoverEnv(action_level=level)
    env.reset(seed=0, options={"state": AT_REST})
    a = hover_action(env)
    for _ in range(100):
        obs, reward, term, trunc, info = env.step(a)
        assert not (term or trunc)
    assert info["time"] == pytest.approx(1.0)
    assert np.linalg.norm(obs[:3]) < 0.02  # position error [m]
    assert np.linalg.norm(obs[3:6]) < 0.05  # velocity [m/s]
    assert reward > 0.95
    # the map matters: 10 % less thrust (rotor speeds: 10 % less RPM, ≈ 19 % less thrust)
    env.reset(seed=0, options={"state": AT_REST})
    low = a.copy()
    if level == "rotor_speeds":
        low = env.core.level.action_of(0.9 * env.sim.hover_rpm * np.ones(4)).astype(np.float32)
    else:
        p = env.core.params
        low[0] = env.core.level.thrust_action(0.9 * p.mass * -p.gravity_vec[2])
    for _ in range(50):
        obs, *_ = env.step(low)
    assert obs[2] < -0.05  # sank: 0.5 s at ≈ 1 m/s^2 net is 0.125 m, less the rotor lag


@pytest.mark.parametrize("drone", quadsim.list_presets())
def test_inner_loops_damp_a_perturbation_on_every_preset(drone):
    """Hover thrust, zero rates / level attitude: an initial spin dies out within 1 s."""
    p = quadsim.load_params(drone)
    for level in ("thrust_rates", "thrust_attitude"):
        env = HoverEnv(drone=drone, action_level=level)
        env.reset(seed=0, options={"state": dict(AT_REST, ang_vel=[0.5, -0.3, 0.3])})
        a = np.zeros(4, np.float32)
        a[0] = env.core.level.thrust_action(p.mass * -p.gravity_vec[2])
        rates = []
        for _ in range(100):
            obs, _, term, *_ = env.step(a)
            assert not term
            rates.append(obs[15:18])
        assert np.abs(rates[-20:]).max() < 0.05, (level, np.abs(rates[-20:]).max(axis=0))
        if level == "thrust_attitude":  # level again: R_zz = cos(tilt)
            assert obs[14] > np.cos(0.01)


# Fixed inner-loop gains for the step-response tests (independent of the packaged tuning).
GAINS = """
controller = "pid"
dt = 0.002
pos_p = 2.0
vel_max_xy = 3.0
vel_max_up = 2.0
vel_max_down = 1.5
vel_p = 6.0
att_p = [8.0, 8.0, 4.0]
rate_max = [4.0, 4.0, 2.0]
rate_p = [30.0, 30.0, 15.0]
rate_i = [20.0, 20.0, 10.0]
rate_i_max = [10.0, 10.0, 5.0]
tilt_max = 0.7
"""


@pytest.fixture
def gains(tmp_path):
    path = tmp_path / "env_pid.toml"
    path.write_text(GAINS)
    return str(path)


def test_body_rate_action_rotates_the_drone(gains):
    """thrust_rates: a roll-rate command produces that roll rate (rate loop at physics rate)."""
    opts = {"gains": gains, "rate_limit": (2.0, 2.0, 1.0)}
    env = HoverEnv(action_level="thrust_rates", action_options=opts)
    assert env.core.level.motor_tau == pytest.approx(0.1203, abs=1e-4)  # cf2x rotor lag
    env.reset(seed=0, options={"state": AT_REST})
    a = hover_action(env)
    a[1] = 0.5  # 1 rad/s roll
    for _ in range(50):
        obs, *_ = env.step(a)
    assert obs[15] == pytest.approx(1.0, abs=0.1)  # body roll rate [rad/s]
    assert abs(obs[16]) < 0.05 and abs(obs[17]) < 0.05


def test_attitude_action_tilts_the_drone(gains):
    """thrust_attitude: a pitch command tilts body z towards +x and accelerates along +x."""
    opts = {"gains": gains, "tilt_limit": 0.4}
    env = HoverEnv(action_level="thrust_attitude", action_options=opts)
    env.reset(seed=0, options={"state": AT_REST})
    a = hover_action(env)
    a[2] = 0.5  # pitch 0.2 rad
    for _ in range(60):
        obs, *_ = env.step(a)
    R = obs[6:15].reshape(3, 3)
    assert np.arcsin(R[0, 2]) == pytest.approx(0.2, abs=0.02)  # R_02 = sin(pitch) at yaw 0
    assert abs(R[1, 2]) < 0.01  # no roll
    assert obs[3] > 0.5  # accelerating along +x (g tan 0.2 ≈ 2 m/s^2, after the tilt-up)


def test_pwm_reset_refills_only_the_selected_batteries():
    """A partial reset refills the selected batteries (idle voltage at the start charge); the
    others keep their charge and their voltage under load."""
    from quadsim.app.envs.actions import make_action_level
    from quadsim.physics import power as pw
    from quadsim.physics.params import load_params

    lvl = make_action_level("pwm", load_params("cf2x_L250"), 3, 0.01, battery_charge=0.9)
    full = lvl.voltage.copy()
    for _ in range(200):  # 2 s at 20 000 RPM on every rotor
        lvl.advance(np.full((3, 4), 20000.0), 0.01)
    charge, loaded = lvl.charge.copy(), lvl.voltage.copy()
    assert np.all(charge < 0.9) and np.all(loaded < full)
    idle = pw.battery_state(charge, np.zeros(3), lvl.power)[0]
    assert np.all(loaded < idle - 1e-3)  # under load the voltage sags below the idle one
    lvl.reset(np.array([False, True, False]))
    assert lvl.charge[1] == 0.9 and lvl.voltage[1] == pytest.approx(full[1], abs=1e-12)
    np.testing.assert_array_equal(lvl.charge[[0, 2]], charge[[0, 2]])
    np.testing.assert_array_equal(lvl.voltage[[0, 2]], loaded[[0, 2]])


def test_crash_terminates_with_penalty():
    """Rotors at minimum from 0.3 m: the drone hits the floor, a crash (terminated)."""
    env = HoverEnv(target=(0.0, 0.0, 0.3))
    state = dict(AT_REST, pos=[0.0, 0.0, 0.3])
    env.reset(seed=0, options={"state": state})
    for _ in range(100):
        _, reward, term, trunc, info = env.step(-np.ones(4, np.float32))
        if term:
            break
    assert term and not trunc and info["crashed"] and not info["fault"]
    assert 0.2 < info["time"] < 0.6  # free fall of 0.3 m takes ≈ 0.25 s (plus rotor spin-down)
    assert reward < -9.0  # crash penalty 10 on top of a reward in (0, 1]
    assert env.sim.status.crashed[0]


@pytest.mark.parametrize("backend", ["numpy", "native"])
def test_divergence_terminates(backend):
    """A speed above the world's fault limit (here 1 m/s: a fall from 0.99 m/s):
    SimulationError -> terminated, the drone kept at its last good state."""
    from quadsim.physics.world import Ground, Limits, World

    if backend == "native":
        native_backend()
    world = World(ground=Ground(height=0.0, crash_speed=0.0), limits=Limits(max_speed=1.0))
    env = HoverEnv(backend=backend, world=world)
    with pytest.raises(ValueError, match=r"reset state: vel: a speed of 1\.5 m/s is above the "
                                         r"world's fault limit max_speed = 1 m/s"):  # fmt: skip
        env.reset(seed=0, options={"state": {"vel": [0.0, 0.0, -1.5]}})
    obs, _ = env.reset(seed=0, options={"state": {"pos": [0.0, 0.0, 1.0],
                                                  "vel": [0.0, 0.0, -0.99]}})  # fmt: skip
    for _ in range(20):  # the rotors spin down: it falls faster
        obs, reward, term, _, info = env.step(-np.ones(4, np.float32))
        if term:
            break
    assert term and info["fault"] and not info["crashed"] and -10.0 < reward < -9.0
    assert np.all(np.isfinite(obs)) and np.linalg.norm(obs[3:6]) <= 1.0
    assert env.sim.status.fault_code[0] == 2  # speed
    obs, _ = env.reset(seed=0)  # a new episode starts clean
    assert not env.step(np.zeros(4, np.float32))[2]


def test_out_of_bounds_and_tilt_terminate():
    env = HoverEnv()
    env.reset(seed=0, options={"state": dict(AT_REST, vel=[5.0, 0.0, 0.0])})
    a = hover_action(env)
    for _ in range(60):
        *_, term, _, info = env.step(a)
        if term:
            break
    assert term and info["out_of_bounds"] and info["pos_error"] > 2.0
    p = env.core.params
    k = -p.drag_matrix[0, 0] / p.mass  # linear drag: x(t) = v0 (1 - exp(-k t)) / k
    t_out = -np.log(1.0 - 2.0 * k / 5.0) / k  # ≈ 0.44 s (0.40 s without drag)
    assert t_out <= info["time"] < t_out + 0.01 + 1e-9
    env.reset(seed=0, options={"state": dict(AT_REST, ang_vel=[20.0, 0.0, 0.0])})
    for _ in range(20):
        *_, term, _, info = env.step(a)
        if term:
            break
    assert term and info["tilted"]  # past 90 degrees of roll after ≈ 0.08 s


def test_truncation_at_max_steps():
    env = HoverEnv(max_episode_steps=7)
    env.reset(seed=0, options={"state": AT_REST})
    a = hover_action(env)
    flags = [env.step(a)[3] for _ in range(7)]
    assert flags == [False] * 6 + [True]
    env = gym.make("quadsim/Hover-v0", max_episode_steps=3)
    env.reset(seed=0, options={"state": AT_REST})
    assert [env.step(a)[3] for _ in range(3)] == [False, False, True]


def test_reset_randomisation_is_seeded():
    env = HoverEnv()
    o1, _ = env.reset(seed=5)
    o2, _ = env.reset(seed=5)
    o3, _ = env.reset(seed=6)
    np.testing.assert_array_equal(o1, o2)
    assert not np.allclose(o1, o3)
    r = InitRanges()
    assert np.all(np.abs(o1[:3]) <= r.pos + 1e-6) and np.all(np.abs(o1[3:6]) <= r.vel + 1e-6)
    assert o1[14] >= np.cos(r.tilt) ** 2 - 1e-6  # R_zz = cos(roll) cos(pitch)


def test_track_observation_holds_the_reference():
    from quadsim.loop.trajectories import Circle

    circle = Circle(radius=1.0, speed=1.0, center=(0.0, 0.0, 1.0))
    env = TrackEnv(trajectory=circle, future=(0.1, 0.5))
    ref = circle(0.0)
    state = dict(AT_REST, pos=ref.pos, vel=ref.vel)
    obs, _ = env.reset(seed=0, options={"state": state})
    assert obs.shape == (22 + 3 + 6,)
    np.testing.assert_allclose(obs[:3], 0.0, atol=1e-6)
    np.testing.assert_allclose(obs[22:25], ref.vel, atol=1e-6)
    ahead = circle(np.array([0.1, 0.5])).pos
    np.testing.assert_allclose(obs[25:].reshape(2, 3), ref.pos - ahead, atol=1e-6)
    obs, *_ = env.step(hover_action(env))
    np.testing.assert_allclose(obs[22:25], circle(0.01).vel, atol=1e-6)


# -- vector environment ----------------------------------------------------------------------------
def test_vector_env_shapes_and_make_vec():
    backend = native_backend()
    env = gym.make_vec("quadsim/Hover-v0", num_envs=8, backend=backend)
    assert isinstance(env, HoverVectorEnv) and env.sim.backend == backend
    assert env.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    assert env.core.max_episode_steps == 500  # from the registered spec
    obs, _ = env.reset(seed=0)
    assert obs.shape == (8, 22) and obs.dtype == np.float32
    assert env.observation_space.contains(obs)
    obs, rew, term, trunc, info = env.step(env.action_space.sample())
    assert obs.shape == (8, 22) and rew.shape == term.shape == trunc.shape == (8,)
    assert info["pos_error"].shape == (8,) and info["_crashed"].all()
    env = TrackVectorEnv(num_envs=3, action_level="thrust_rates", backend=backend)
    assert env.reset(seed=0)[0].shape == (3, 34) and env.action_space.shape == (3, 4)
    sync = gym.make_vec("quadsim/Track-v0", num_envs=2, vectorization_mode="sync")
    assert sync.reset(seed=0)[0].shape == (2, 34)
    assert sync.step(sync.action_space.sample())[0].shape == (2, 34)


def _vec_hover(n=4, **kw):
    env = HoverVectorEnv(num_envs=n, backend=native_backend(), **kw)
    pos = np.tile(TARGET, (n, 1))
    pos[0, 2] = 0.3  # env 0 starts low and will crash
    env.reset(seed=0, options={"state": dict(AT_REST, pos=pos)})
    act = np.tile(hover_action(env), (n, 1))
    act[0] = -1.0
    return env, act


def test_vector_autoreset_next_step_resets_only_finished():
    env, act = _vec_hover()
    for _ in range(100):
        obs, rew, term, trunc, info = env.step(act)
        if term.any():
            break
    assert term.tolist() == [True, False, False, False] and info["crashed"][0]
    before = obs.copy()
    t_before = info["time"].copy()
    obs, rew, term, trunc, info = env.step(act)
    assert rew[0] == 0.0 and not term[0] and not trunc[0]
    assert info["time"][0] == 0.0 and np.all(info["time"][1:] == t_before[1:] + 0.01)
    assert np.all(obs[0, 18:] == 0.0)  # fresh episode: no last action
    assert np.linalg.norm(obs[0, :3]) <= np.sqrt(3) * 0.5 + 1e-6  # new start near the target
    np.testing.assert_allclose(obs[1:, :3], before[1:, :3], atol=1e-3)  # others undisturbed
    assert not env.sim.status.crashed[0]


def test_vector_autoreset_same_step_and_disabled():
    env, act = _vec_hover(autoreset_mode="SameStep")
    for _ in range(100):
        obs, _, term, _, info = env.step(act)
        if term.any():
            break
    assert term[0] and info["_final_obs"].tolist() == [True, False, False, False]
    assert info["final_obs"][0][2] > -1.0 and info["final_info"]["crashed"][0]
    assert obs[0, 18:].tolist() == [0.0] * 4  # already the new episode
    env, act = _vec_hover(autoreset_mode=AutoresetMode.DISABLED)
    for _ in range(100):
        *_, term, _, _ = env.step(act)
        if term.any():
            break
    with pytest.raises(RuntimeError, match="reset_mask"):
        env.step(act)
    obs, _ = env.reset(options={"reset_mask": term})
    env.step(act)


def test_vector_seeding_is_reproducible():
    backend = native_backend()
    a = HoverVectorEnv(num_envs=16, backend=backend, randomize_params={"mass": 0.2})
    b = HoverVectorEnv(num_envs=16, backend=backend, randomize_params={"mass": 0.2})
    oa, _ = a.reset(seed=11)
    ob, _ = b.reset(seed=11)
    np.testing.assert_array_equal(oa, ob)
    rng = np.random.default_rng(0)
    for _ in range(30):  # with autoresets: both draw the same new initial states
        act = rng.uniform(-1, 1, (16, 4)).astype(np.float32)
        ra, rb = a.step(act), b.step(act)
        np.testing.assert_array_equal(ra[0], rb[0])
        np.testing.assert_array_equal(ra[1], rb[1])
    oc, _ = b.reset(seed=12)
    assert not np.allclose(oa, oc)


def test_vector_randomisation_differs_across_envs():
    """Initial states and masses differ per env; heavier drones sink faster at equal RPM."""
    env = HoverVectorEnv(num_envs=32, backend=native_backend(), randomize_params={"mass": 0.2})
    obs, _ = env.reset(seed=3)
    assert len({tuple(o) for o in obs[:, :6]}) == 32
    mass = env.param_values["mass"]
    nominal = quadsim.load_params("cf2x_L250").mass
    assert mass.shape == (32,) and np.all(np.abs(mass / nominal - 1) <= 0.2)
    assert np.std(mass / nominal) > 0.05
    np.testing.assert_allclose(env.sim.model_params["mass"], mass)
    obs, _ = env.reset(seed=3, options={"state": AT_REST})
    np.testing.assert_array_equal(obs, np.broadcast_to(obs[0], obs.shape))
    act = np.tile(hover_action(env), (32, 1))
    for _ in range(20):
        obs, *_ = env.step(act)
    vz = obs[:, 5]
    # hover RPM of the nominal drone: a_z = g (m0/m - 1) - k v_z with linear drag k = -D_zz/m
    k = -env.core.params.drag_matrix[2, 2] / mass
    expected = 9.81 * (nominal / mass - 1.0) * (1.0 - np.exp(-k * 0.2)) / k
    np.testing.assert_allclose(vz, expected, rtol=1e-3, atol=1e-4)
    assert np.corrcoef(vz, mass)[0, 1] < -0.99


def test_native_and_numpy_backends_agree():
    native_backend()
    envs = [HoverVectorEnv(num_envs=3, backend=b, action_level="thrust_rates")
            for b in ("native", "numpy")]  # fmt: skip
    obs = [e.reset(seed=1)[0] for e in envs]
    np.testing.assert_allclose(obs[0], obs[1], atol=1e-6)
    rng = np.random.default_rng(1)
    for _ in range(5):
        act = rng.uniform(-0.3, 0.3, (3, 4)).astype(np.float32)
        obs = [e.step(act)[0] for e in envs]
    np.testing.assert_allclose(obs[0], obs[1], atol=1e-5)


def test_invalid_arguments():
    with pytest.raises(ValueError, match="action_level"):
        HoverEnv(action_level="forces")
    with pytest.raises(ValueError, match="randomize_params"):
        HoverVectorEnv(num_envs=2, backend="numpy", randomize_params={"colour": 0.1})
    with pytest.raises(ValueError, match="num_envs"):
        HoverVectorEnv(num_envs=0)
    with pytest.raises(ValueError, match="trajectory"):
        TrackEnv(trajectory="spiral")
    env = HoverVectorEnv(num_envs=2, backend="numpy")
    env.reset(seed=0)
    with pytest.raises(ValueError, match="actions must have shape"):
        env.step(np.zeros((3, 4)))


@pytest.mark.parametrize("vector", [False, True], ids=["single", "vector"])
def test_reset_options_are_checked(vector):
    """``options`` is a dict (or ``None``) of known keys; a given ``state`` is a dict of finite
    values of the right size, a unit quaternion, a speed and a body rate within the world's
    fault limits: else ``TypeError``/``ValueError`` naming it, before anything is drawn."""
    make = (lambda **kw: HoverVectorEnv(2, backend="numpy", **kw)) if vector else \
        (lambda **kw: HoverEnv(backend="numpy", **kw))  # fmt: skip
    env = make()
    env.reset(seed=1)
    drawn = env.np_random.bit_generator.state
    with pytest.raises(TypeError, match="reset: options must be a dict or None; got str"):
        env.reset(seed=2, options="notadict")
    with pytest.raises(ValueError, match=r"reset: options: unknown keys \['stat'\]; use "):
        env.reset(seed=2, options={"stat": AT_REST})
    with pytest.raises(TypeError, match=r"reset state \(options\['state'\]\) must be a dict"):
        env.reset(seed=2, options={"state": [0.0, 0.0, 1.0]})
    bad = [
        ({"vel": [1e308] * 3}, r"reset state: vel: a speed of inf m/s is above the world's fault "
                               r"limit max_speed = 1000 m/s"),
        ({"ang_vel": [0.0, 0.0, 1001.0]}, "reset state: ang_vel: a body rate of 1001 rad/s is "
                                          "above the world's fault limit max_rate = 1000 rad/s"),
        ({"pos": [0.0, np.nan, 1.0]}, r"reset state: pos must be finite \(float64\)"),
        ({"vel": [0.0, np.inf, 0.0]}, r"reset state: vel must be finite"),
        ({"attitude": [0.0, 0.0, 0.0, 2.0]}, "reset state: attitude must be a unit quaternion"),
        ({"pos": [[0.0, 0.0, 1.0]] * 3}, r"reset state: pos must be 3 numbers, or \("),
        ({"ang_vel": "fast"}, "reset state: ang_vel must be 3 numbers"),
        ({"pos": [0.0, 0.0, 1.0], "spin": 1.0}, r"reset state: unknown keys \['spin'\]"),
    ]  # fmt: skip
    for state, message in bad:
        with pytest.raises(ValueError, match=message):
            env.reset(seed=2, options={"state": state})
    assert env.np_random.bit_generator.state == drawn  # nothing drawn
    env.reset(seed=2, options={"state": {"vel": [1000.0, 0.0, 0.0]}})  # at the limit
    f32 = make(dtype="float32")
    with pytest.raises(ValueError, match=r"reset state: pos must be finite \(float32\)"):
        f32.reset(seed=0, options={"state": {"pos": [0.0, 0.0, 1e39]}})
    make(world=None).reset(seed=0, options={"state": {"vel": [5000.0, 0.0, 0.0]}})  # no limits
