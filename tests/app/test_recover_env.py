"""``quadsim/Recover-v0`` (issue 15): seed 001's throw at the wall, checked on the draws and the
world, and through Gymnasium's checker."""

from __future__ import annotations

import math

import numpy as np
import pytest

gym = pytest.importorskip("gymnasium")

import quadsim.app.envs  # noqa: E402,F401
from quadsim.app.envs.recover import RANDOMIZE, TARGET  # noqa: E402
from quadsim.physics.rotation import to_euler  # noqa: E402


def test_the_throw_covers_upside_down_fast_rates_and_speed_toward_the_wall():
    env = gym.make_vec("quadsim/Recover-v0", num_envs=4096)
    env.reset(seed=0)
    s = env.unwrapped.sim.state if hasattr(env, "unwrapped") else env.sim.state
    pos, quat = np.asarray(s.pos), np.asarray(s.quat)
    vel, w = np.asarray(s.vel), np.asarray(s.ang_vel)
    # 2 to 2.5 m from the wall at x = 3 m, around the target's height
    assert pos[:, 0].min() >= 0.5 - 1e-9 and pos[:, 0].max() <= 1.0 + 1e-9
    assert np.all(np.abs(pos[:, 2] - TARGET[2]) <= 0.3 + 1e-9)
    # toward the wall: 0..3 m/s along +x
    assert vel[:, 0].min() >= -1e-9 and vel[:, 0].max() <= 3.0 + 1e-9 and vel[:, 0].max() > 2.9
    # body z points down (upside down) in a good share of throws; rates up to 15 rad/s
    z_up = 1.0 - 2.0 * (quat[:, 0] ** 2 + quat[:, 1] ** 2)
    assert (z_up < 0).mean() > 0.3 and z_up.min() < -0.99
    assert np.abs(w).max() <= 15.0 + 1e-9 and np.abs(w).max() > 14.5
    rpy = np.asarray(to_euler(quat))
    assert np.abs(rpy[:, 0]).max() > 3.0
    # domain randomisation: each env its own mass, inertia, thrust curve, motor lag
    vals = env.unwrapped.param_values if hasattr(env, "unwrapped") else env.param_values
    assert set(RANDOMIZE) <= set(vals)
    m = np.asarray(vals["mass"])
    assert m.std() > 0 and np.all(np.abs(m / m.mean() - 1) <= 0.11)


def test_the_wall_and_the_floor_end_an_episode_and_tilt_does_not():
    env = gym.make("quadsim/Recover-v0")
    env.reset(seed=1, options={"state": {"pos": [2.9, 0.0, 2.5], "vel": [3.0, 0.0, 0.0],
                                         "attitude": [1.0, 0.0, 0.0, 0.0]}})  # upside down
    hit = None
    for _ in range(100):
        _, r, term, _, info = env.step(np.zeros(4, dtype=np.float32))
        if term:
            hit = info
            break
    assert hit is not None and hit["crashed"] and not hit["tilted"]
    assert r < -5  # the crash penalty


def test_gymnasium_checks_the_single_env():
    from gymnasium.utils.env_checker import check_env

    check_env(gym.make("quadsim/Recover-v0").unwrapped, skip_render_check=True)
    assert math.isclose(TARGET[0], 1.0)


def test_the_reward_weighs_the_tilt():
    """Upside down at the target earns ``e^-w_R`` of upright (the attitude weight, REWARD), the
    same place, speed and rates; Hover's default weight 0 leaves its reward as it was."""
    from quadsim.app.envs.recover import REWARD
    from quadsim.app.envs.reward import RewardWeights, Termination, outcome

    def reward(attitude_xyzw):
        env = gym.make("quadsim/Recover-v0")
        env.reset(seed=2, options={"state": {"pos": list(TARGET), "vel": [0.0] * 3,
                                             "ang_vel": [0.0] * 3,
                                             "attitude": attitude_xyzw}})  # fmt: skip
        hover = env.unwrapped.core.level.action_of(np.full(4, env.unwrapped.sim.hover_rpm))
        _, r, term, _, _ = env.step(hover.astype(np.float32))
        assert not term
        return r

    up, down = reward([0.0, 0.0, 0.0, 1.0]), reward([1.0, 0.0, 0.0, 0.0])
    assert REWARD.attitude > 0
    # one 10-ms step upside down with hover thrust: 2 g down, 0.2 m/s (w_v 0.1: 2 % of reward)
    assert down / up == pytest.approx(math.exp(-REWARD.attitude), rel=0.05)
    z = np.zeros(3)
    args = (z, z, z, np.zeros(4), np.zeros(4), False, False)
    plain = RewardWeights()
    for r_zz in (1.0, 0.0, -1.0):
        r0 = outcome(*args, r_zz, plain, Termination(None, None))[0]
        r1 = outcome(*args, r_zz, plain._replace(attitude=2.0), Termination(None, None))[0]
        assert r0 == pytest.approx(1.0)  # weight 0: the tilt does not count
        assert r1 == pytest.approx(math.exp(-2.0 * (1.0 - r_zz) / 2))


@pytest.mark.parametrize("bad", [{"attitude": -1.0}, {"pos": math.nan}, {"crash_penalty": "10"},
                                 {"vel": math.inf}])  # fmt: skip
def test_reward_weights_are_checked(bad):
    from quadsim.app.envs.reward import RewardWeights

    name = next(iter(bad))
    with pytest.raises(ValueError, match=f"reward.{name} must be a finite number >= 0"):
        gym.make("quadsim/Recover-v0", reward=RewardWeights(**bad))
