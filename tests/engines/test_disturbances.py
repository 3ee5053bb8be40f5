"""The environments' disturbances (quadsim.app.envs.disturbances): action latency against a
hand-stepped simulator, mean wind against the simulator's own wind, the Dryden gusts'
stationary statistics, observation noise of the given size on the true state, the compiled step
equal to the reference path, and bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("gymnasium")

from quadsim.app.envs import HoverVectorEnv
from quadsim.app.envs.disturbances import DisturbanceState, check_disturbances
from quadsim.app.envs.starts import InitRanges

CALM = InitRanges(0.0, 0.0, 0.0, 0.0, 0.0)
"""Every environment starts exactly at the target, level, at rest."""


def _hover_action(env) -> float:
    p = env.core.params
    return 2 * (float(np.mean(env.core.sim.hover_rpm)) - p.rpm_min) / (p.rpm_max - p.rpm_min) - 1


@pytest.mark.parametrize("backend", ["native", "numpy"])
def test_latency_holds_the_previous_action_for_its_physics_steps(backend):
    """6 ms of latency at 500 Hz physics, 100 Hz control: the first 3 of each control step's 5
    physics steps still fly the previous action (zeros after the reset), as a simulator stepped
    by hand with those commands does."""
    from quadsim.engines.sim import Simulator

    env = HoverVectorEnv(1, init=CALM, backend=backend, disturbances={"latency": (0.006, 0.006)},
                         dtype="float64")  # fmt: skip
    env.reset(seed=0)
    assert env.core.dist.delay.tolist() == [3.0]
    acts = [np.full((1, 4), v) for v in (0.5, -0.25, 0.125)]
    for a in acts:
        env.step(a.astype(np.float32))
    level, p = env.core.level, env.core.params
    sim = Simulator(p, n=1, dt=env.core.dt, backend=backend, world=env.core.world)
    s0 = env.core.sim  # the start the env drew (at the target, level)
    sim.reset(pos=[[0.0, 0.0, 1.0]], attitude=[[0.0, 0.0, 0.0, 1.0]], vel=[[0.0, 0.0, 0.0]],
              ang_vel=[[0.0, 0.0, 0.0]])  # fmt: skip
    prev = np.zeros((1, 4))
    for a in acts:
        for j in range(5):
            sim.step(level.command(prev if j < 3 else a, None))
        prev = a
    np.testing.assert_allclose(s0.state.pos, sim.state.pos, rtol=0, atol=1e-12)
    np.testing.assert_allclose(s0.state.rotor_vel, sim.state.rotor_vel, rtol=1e-12)
    # without latency the same actions end elsewhere (the latency did something)
    env2 = HoverVectorEnv(1, init=CALM, backend=backend, dtype="float64")
    env2.reset(seed=0)
    for a in acts:
        env2.step(a.astype(np.float32))
    assert np.abs(env2.core.sim.state.rotor_vel - sim.state.rotor_vel).max() > 10.0


def test_mean_wind_blows_as_the_simulators_wind():
    """A hovering drone in a drawn mean wind drifts as a simulator given that wind does (its
    drag), pushed first along the drawn direction."""
    from quadsim.engines.sim import Simulator, Wind

    env = HoverVectorEnv(4, init=CALM, disturbances={"wind": 5.0}, dtype="float64")
    env.reset(seed=2)
    mean = env.core.dist.mean.copy()
    assert np.all(np.linalg.norm(mean, axis=1) <= 5.0) and np.all(mean[:, 2] == 0.0)
    a = np.full((4, 4), _hover_action(env), np.float32)
    first, *_ = env.step(a)
    for _ in range(49):
        env.step(a)
    sim = Simulator(env.core.params, n=4, dt=env.core.dt, world=env.core.world,
                    wind=Wind(mean=mean))  # fmt: skip
    sim.reset(pos=np.tile([0.0, 0.0, 1.0], (4, 1)))
    for _ in range(250):
        sim.step(env.core.level.command(a.astype(np.float64), None))
    np.testing.assert_allclose(env.core.sim.state.vel, sim.state.vel, rtol=1e-9, atol=1e-12)
    v = first[:, 3:5]  # the first push is downwind (then the drag torques tilt the drone)
    m = mean[:, :2]
    cos = np.sum(v * m, 1) / np.linalg.norm(v, axis=1) / np.linalg.norm(m, axis=1)
    assert np.all(cos > 0.99)  # downwind


def test_gusts_have_drydens_stationary_statistics():
    """Moderate Dryden at 100 Hz for 2,000 environments: the gust components' standard
    deviations are the model's sigma_u, sigma_v, sigma_w (stationary from the first draw)."""
    from quadsim.physics.wind import dryden_preset

    d = check_disturbances({"turbulence": "moderate"}, 0.01)
    st = DisturbanceState(d, 2000, 0.002, 5)
    st.seed(np.random.default_rng(0))
    st.draw(np.arange(2000), np.random.default_rng(1))
    w = np.stack([st.advance() for _ in range(50)])  # (50, 2000, 3), gusts along +x (calm)
    p = dryden_preset("moderate", 10.0, 1.0)
    want = np.array([p.sigma_u, p.sigma_v, p.sigma_w])
    got = w.reshape(-1, 3).std(axis=0)
    np.testing.assert_allclose(got, want, rtol=0.08)
    assert np.abs(w.reshape(-1, 3).mean(axis=0)).max() < 0.1 * want.max()


def test_observation_noise_is_of_its_size_and_the_state_stays_true():
    """Same seed with and without noise: the same flight (rewards equal), observations apart by
    noise of the given standard deviations, attitude still a rotation."""
    sig = (0.01, 0.02, 0.03, 0.04)
    quiet = HoverVectorEnv(256, dtype="float64")
    noisy = HoverVectorEnv(256, dtype="float64", disturbances={"obs_noise": sig})
    o1, _ = quiet.reset(seed=5)
    o2, _ = noisy.reset(seed=5)
    a = np.full((256, 4), _hover_action(quiet), np.float32)
    diffs = [o2 - o1]
    for _ in range(20):
        o1, r1, *_ = quiet.step(a)
        o2, r2, *_ = noisy.step(a)
        np.testing.assert_array_equal(r1, r2)
        diffs.append(o2 - o1)
        R = o2[:, 6:15].reshape(-1, 3, 3).astype(np.float64)
        np.testing.assert_allclose(R @ R.transpose(0, 2, 1), np.broadcast_to(np.eye(3), R.shape),
                                   atol=1e-5)  # fmt: skip
    d = np.concatenate(diffs)
    np.testing.assert_allclose(d[:, 0:3].std(), sig[0], rtol=0.05)
    np.testing.assert_allclose(d[:, 3:6].std(), sig[1], rtol=0.05)
    np.testing.assert_allclose(d[:, 15:18].std(), sig[3], rtol=0.05)
    # a small rotation by delta ~ N(0, s^2 I) moves each matrix entry by about s
    assert 0.5 * sig[2] < d[:, 6:15].std() < 1.5 * sig[2]
    np.testing.assert_array_equal(d[:, 18:], 0.0)  # the last action is known exactly


def test_gyro_noise_from_the_imu_preset():
    from quadsim.physics.sensors import load_imu

    d = check_disturbances({"gyro": "bmi088"}, 0.01)
    st = DisturbanceState(d, 4, 0.002, 5)
    imu = load_imu("bmi088")
    want = float(np.mean(imu.gyro_noise_density)) * math.sqrt(imu.rate)
    assert st.sigma[3] == pytest.approx(want)
    assert st.sigma[:3].tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("level", ["rotor_speeds", "thrust_rates"])
def test_the_compiled_step_equals_the_reference_path_with_every_disturbance(level):
    from quadsim.engines.native import available

    if not available():
        pytest.skip("native backend not available")
    d = {"latency": (0.0, 0.01), "wind": 2.0, "turbulence": "moderate",
         "obs_noise": (0.005, 0.02, 0.01, 0.0), "gyro": "bmi088"}  # fmt: skip
    kw = {"max_episode_steps": 40, "dtype": "float64", "action_level": level, "disturbances": d}
    fast = HoverVectorEnv(8, backend="native", **kw)
    ref = HoverVectorEnv(8, backend="numpy", **kw)
    assert fast.core.compiled is not None and ref.core.compiled is None
    o1, _ = fast.reset(seed=3)
    o2, _ = ref.reset(seed=3)
    np.testing.assert_allclose(o1, o2, rtol=1e-6, atol=1e-6)
    rng = np.random.default_rng(1)
    for i in range(120):  # with autoresets (40-step episodes, crashes)
        a = rng.uniform(-0.3, 0.6, (8, 4)).astype(np.float32)
        g, w = fast.step(a), ref.step(a)
        np.testing.assert_allclose(g[0], w[0], rtol=1e-5, atol=1e-5, err_msg=f"step {i}")
        np.testing.assert_allclose(g[1], w[1], rtol=1e-9, atol=1e-9, err_msg=f"step {i}")
        np.testing.assert_array_equal(g[2], w[2])
    assert len(set(fast.core.dist.delay.tolist())) > 1  # latencies differ per environment


def test_ball_spread_fills_the_ball():
    from quadsim.loop.initial import Spread

    d = Spread("ball", 15.0).draw(np.random.default_rng(0), 20000)
    r = np.linalg.norm(d, axis=1)
    assert r.max() <= 15.0 and r.max() > 14.9
    assert np.mean((r / 15.0) ** 3) == pytest.approx(0.5, abs=0.01)  # uniform in volume
    assert np.abs(d.mean(axis=0)).max() < 0.15  # isotropic


@pytest.mark.parametrize(
    ("d", "msg"),
    [
        ({"latency": (0.0, 0.02)}, "latency must be 0 <= lo <= hi <= the control period"),
        ({"latency": (0.005, 0.001)}, "latency must be 0 <= lo <= hi"),
        ({"latency": 3}, "latency must be (lo, hi)"),
        ({"wind": -1.0}, "wind must be a speed >= 0"),
        ({"wind": math.nan}, "wind must be a speed >= 0"),
        ({"turbulence": "stormy"}, "turbulence must be one of"),
        ({"obs_noise": (0.1, 0.1)}, "obs_noise must be 4 standard deviations"),
        ({"obs_noise": (0.1, -0.1, 0.0, 0.0)}, "obs_noise must be 4 standard deviations"),
        ({"gyro": "nope"}, "nope"),
        ({"delay": 1}, "unknown fields ['delay']"),
    ],
)
def test_bad_disturbances_are_refused(d, msg):
    with pytest.raises(ValueError, match=None) as e:
        HoverVectorEnv(2, disturbances=d)
    assert msg in str(e.value)
