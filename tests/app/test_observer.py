"""What the environments' flight computer keeps (quadsim.app.envs.observer): the rotor-speed
observer (the exact solution of a first-order lag approached at first order in the step, no
overshoot for any motor constant, the plant's own rotor speeds tracked from the commands alone)
and the position-error integral (the sum of the observed errors, clipped); the compiled step
equal to the reference path with both, and the options' validation."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("gymnasium")

from quadsim.app.envs import HoverVectorEnv, RecoverVectorEnv
from quadsim.app.envs.observer import (
    ERROR_CLIP,
    INTEGRAL_MAX,
    RotorObserver,
    advance,
    integrate_error,
    normalized,
)


def _lag(h: float, k: float) -> RotorObserver:
    """A symmetric first-order lag ``Ω̇ = k (Ω* - Ω)`` at step ``h``."""
    return RotorObserver((k, 0.0, k, 0.0), h, 8000.0, 24000.0, 16000.0)


def test_a_first_order_lag_converges_at_first_order_to_the_exponential():
    """Spin-up from 10,000 to 20,000 RPM and back down with ``k = 10/s``: the error at 0.3 s to
    ``Ω* + (Ω_0 - Ω*) e^{-k t}`` halves with the step (Euler is first order)."""
    errs = []
    for h in (0.004, 0.002, 0.001):
        for w0, cmd in ((10000.0, 20000.0), (20000.0, 10000.0)):
            est = np.array([w0])
            for _ in range(round(0.3 / h)):
                est = advance(est, np.array([cmd]), _lag(h, 10.0))
            errs.append(abs(est[0] - (cmd + (w0 - cmd) * math.exp(-3.0))))
    up, down = errs[0::2], errs[1::2]
    for e in (up, down):
        assert e[0] < 60.0  # of a 9,500 RPM move
        assert e[0] / e[1] == pytest.approx(2.0, rel=0.05)
        assert e[1] / e[2] == pytest.approx(2.0, rel=0.05)


def test_never_overshoots_the_command():
    """With ``k h = 200`` plain Euler would jump 199 times past the command; the observer lands
    on it and stays (both directions, the quadratic terms too)."""
    obs = RotorObserver((1e5, 1.0, 1e5, 1.0), 0.002, 8000.0, 24000.0, 16000.0)
    est = np.array([9000.0, 23000.0])
    cmd = np.array([20000.0, 12000.0])
    for _ in range(3):
        est = advance(est, cmd, obs)
        np.testing.assert_array_equal(est, cmd)
    assert normalized(np.array([8000.0, 16000.0, 24000.0]), obs).tolist() == [-1.0, 0.0, 1.0]


@pytest.mark.parametrize("level", ["rotor_speeds", "thrust_rates"])
def test_the_estimate_follows_the_plants_rotor_speeds_from_the_commands_alone(level):
    """Random commands held for 0.2 s each, for 2 s, no world (nothing crashes and freezes):
    the estimate, which never sees the plant, stays within 60 RPM of the plant's rotor speeds
    (RK4 at the same step; measured 27 RPM rotor_speeds, 25 RPM thrust_rates, over swings of
    7,700-9,100 RPM), and is what the observation holds."""
    env = HoverVectorEnv(16, action_level=level, observe_rotors=True, dtype="float64", world=None,
                         max_episode_steps=None, termination=(None, None))  # fmt: skip
    env.reset(seed=0)
    core = env.core
    rng = np.random.default_rng(0)
    worst, swing = 0.0, np.zeros(4)
    lo, hi = core.params.rpm_min, core.params.rpm_max
    seen = []
    for k in range(200):
        if k % 20 == 0:  # a new command every 0.2 s
            a = rng.uniform(-0.6, 0.9, (16, 4)) if level == "rotor_speeds" else \
                np.clip(0.3 * rng.standard_normal((16, 4)), -1, 1)  # fmt: skip
        obs, *_ = env.step(a.astype(np.float32))
        true = np.asarray(core.sim.state.rotor_vel)
        worst = max(worst, float(np.abs(core.rotor_estimate - true).max()))
        seen.append(true)
        np.testing.assert_allclose(obs[:, 22:26], 2 * (core.rotor_estimate - lo) / (hi - lo) - 1,
                                   atol=1e-6)  # fmt: skip
    swing = np.ptp(np.array(seen), axis=0).max()
    assert swing > 5000.0
    assert worst < 60.0


@pytest.mark.parametrize("level", ["rotor_speeds", "thrust_rates"])
def test_the_compiled_step_equals_the_reference_path_with_the_observer(level):
    """Latency on (the observer is fed the commands as sent), the error integral and the body
    frame observed, autoresets and crashes included: the same observations, estimates and
    integrals on both paths."""
    from quadsim.engines.native import available

    if not available():
        pytest.skip("native backend not available")
    kw = {"action_level": level, "dtype": "float64", "max_episode_steps": 60,
          "disturbances": {"latency": (0.0, 0.008)}, "observe_integral": True,
          "observe_body": True}  # fmt: skip
    fast = RecoverVectorEnv(12, backend="native", **kw)
    ref = RecoverVectorEnv(12, backend="numpy", **kw)
    assert fast.core.compiled is not None and ref.core.compiled is None
    o1, _ = fast.reset(seed=5)
    o2, _ = ref.reset(seed=5)
    np.testing.assert_allclose(o1, o2, atol=1e-6)
    rng = np.random.default_rng(5)
    ends = 0
    for i in range(150):
        a = rng.uniform(-1, 1, (12, 4)).astype(np.float32)
        g, w = fast.step(a), ref.step(a)
        np.testing.assert_allclose(g[0], w[0], rtol=1e-5, atol=1e-5, err_msg=f"step {i}")
        np.testing.assert_allclose(fast.core.rotor_estimate, ref.core.rotor_estimate,
                                   rtol=1e-9, err_msg=f"step {i}")  # fmt: skip
        np.testing.assert_allclose(fast.core.error_integral, ref.core.error_integral,
                                   rtol=1e-9, atol=1e-12, err_msg=f"step {i}")  # fmt: skip
        ends += int(np.sum(w[2] | w[3]))
    assert ends > 0


def test_the_integral_sums_the_errors_near_the_target_and_stops_at_its_limit():
    """Independent oracle: a running sum of the observed position errors (the observation's first
    three entries, each axis only while within ±E) times the control period, clipped to ±I_max;
    the observation holds ``I / I_max``; a new episode starts it at 0."""
    assert integrate_error(np.zeros(3), np.array([0.1, -5.0, -0.2]), 0.5).tolist() == [
        0.05, 0.0, -0.1]  # fmt: skip
    assert integrate_error(np.full(3, 0.45), np.full(3, 0.2), 1.0).tolist() == [INTEGRAL_MAX] * 3
    env = HoverVectorEnv(8, observe_integral=True, dtype="float64", max_episode_steps=None,
                         termination=(None, None), world=None)  # fmt: skip
    obs, _ = env.reset(seed=2)
    assert env.single_observation_space.shape == (25,) and np.all(obs[:, 22:25] == 0.0)
    want, far = np.zeros((8, 3)), np.zeros((8, 3), int)
    rng = np.random.default_rng(2)
    for _ in range(300):
        obs, *_ = env.step(rng.uniform(-0.2, 0.5, (8, 4)).astype(np.float32))
        e = obs[:, :3].astype(np.float64)
        want = np.clip(want + 0.01 * np.where(np.abs(e) < ERROR_CLIP, e, 0.0), -INTEGRAL_MAX,
                       INTEGRAL_MAX)  # fmt: skip
        np.testing.assert_allclose(env.core.error_integral, want, atol=1e-6)
        np.testing.assert_allclose(obs[:, 22:25], want / INTEGRAL_MAX, atol=1e-5)
        far += np.abs(e) >= ERROR_CLIP
    assert far.any() and (far < 300).any()  # both branches taken
    env.reset(options={"reset_mask": np.arange(8) < 3})
    assert np.all(env.core.error_integral[:3] == 0.0) and np.any(env.core.error_integral[3:])


def test_recover_observes_the_rotors_and_the_body_frame_and_the_options_are_checked():
    env = RecoverVectorEnv(2)
    assert env.core.observe_rotors and env.core.observe_body
    assert env.single_observation_space.shape == (32,)
    assert HoverVectorEnv(2).single_observation_space.shape == (22,)
    assert RecoverVectorEnv(2, observe_rotors=False).single_observation_space.shape == (28,)
    assert RecoverVectorEnv(2, observe_body=False).single_observation_space.shape == (26,)
    with pytest.raises(ValueError, match="observe_body must be True or False"):
        HoverVectorEnv(2, observe_body="yes")
    with pytest.raises(ValueError, match="observe_rotors must be True or False"):
        HoverVectorEnv(2, observe_rotors="yes")
    with pytest.raises(ValueError, match="observe_integral must be True or False"):
        HoverVectorEnv(2, observe_integral=1.5)


def test_the_body_frame_part_is_the_state_seen_from_the_drone():
    """Independent oracle (SciPy's rotations): the last six entries with ``observe_body`` are
    ``R^T e_p`` and ``R^T v``; turning the whole flight about the vertical through the target
    leaves them as they were while the world-frame entries turn."""
    from scipy.spatial.transform import Rotation

    from quadsim.app.envs.observation import observation

    rng = np.random.default_rng(4)
    q = Rotation.random(16, random_state=5)
    ref = np.array([1.0, 0.0, 2.5])
    pos, vel = ref + rng.normal(0, 1, (16, 3)), rng.normal(0, 2, (16, 3))
    w, act = rng.normal(0, 3, (16, 3)), rng.uniform(-1, 1, (16, 4))

    def obs(rot, p, v):
        return observation(p, rot.as_quat(), v, w, act, ref, np.zeros(3), body=True)[0]

    o = obs(q, pos, vel)
    assert o.shape == (16, 28)
    np.testing.assert_allclose(o[:, 22:25], q.inv().apply(pos - ref), atol=1e-12)
    np.testing.assert_allclose(o[:, 25:28], q.inv().apply(vel), atol=1e-12)
    yaw = Rotation.from_euler("z", 1.1)
    turned = obs(yaw * q, ref + yaw.apply(pos - ref), yaw.apply(vel))
    np.testing.assert_allclose(turned[:, 22:], o[:, 22:], atol=1e-12)  # the body frame: same
    assert np.abs(turned[:, :6] - o[:, :6]).max() > 0.5  # the world frame: turned
