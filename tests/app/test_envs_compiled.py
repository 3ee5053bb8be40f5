"""The compiled env step (quadsim.app.envs.compiled) equals the NumPy reference path of the envs."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

REQUIRE_ALL = (
    os.environ.get("QUADSIM_REQUIRE_ALL_BACKENDS") == "1" or os.environ.get("CI", "") == "true"
)
try:
    import gymnasium  # noqa: F401
except ImportError:  # pragma: no cover - CI must not skip: see conftest.py
    if REQUIRE_ALL:
        pytest.fail("gymnasium is required in CI (pip install 'quadsim[gym]')", pytrace=False)
    pytest.skip("gymnasium not installed", allow_module_level=True)

from gymnasium.vector import AutoresetMode  # noqa: E402

from quadsim.app.envs import HoverEnv, HoverVectorEnv, Termination, TrackVectorEnv  # noqa: E402
from quadsim.app.envs.actions import InnerConsts, InnerState, init_inner, inner_loop  # noqa: E402
from quadsim.loop.parts import SENSORS as SENSOR_KINDS  # noqa: E402
from quadsim.loop.parts import Output, Sensor  # noqa: E402

LEVELS = ["rotor_speeds", "pwm", "thrust_rates", "thrust_attitude"]
INFO = ("crashed", "fault", "out_of_bounds", "tilted", "pos_error", "time")


@pytest.fixture(scope="module", autouse=True)
def native():
    from quadsim.engines.native import available

    if not available():
        if REQUIRE_ALL:
            pytest.fail("the native backend (CasADi and a C compiler) is required in CI")
        pytest.skip("native backend not available (no C compiler or CasADi)")


def actions(rng, level, n):
    """Random actions near hover; some envs spin, drop or drift (all flags happen)."""
    a = rng.uniform(-1.0, 1.0, (n, 4)).astype(np.float32)
    if level in ("rotor_speeds", "pwm"):
        a = 0.1 * a + 0.25
        a[1::4] = -1.0  # rotors off: falls to the floor (crash)
        a[2::4, :2] += 0.15  # unbalanced: tilts over
        a[3::8] = 0.7  # climbs away (out of bounds)
        return a
    a[:, 0] = 0.2 * a[:, 0] + 0.1  # about hover thrust
    a[:, 1:] *= 0.3
    a[1::4, 0] = -1.0  # no thrust: crash
    a[2::4, 1] = 0.9  # roll rate (thrust_rates: tilts over) or 27 deg roll (drifts away)
    a[3::8, 0] = 0.9  # climbs away (out of bounds)
    return a


def pair(cls, level, n=16, **kw):
    """The compiled env and the reference (numpy backend), float64, same options."""
    kw = {"max_episode_steps": 100, "dtype": "float64",
          "termination": Termination(max_pos_error=1.2), **kw}  # fmt: skip
    fast = cls(num_envs=n, action_level=level, backend="native", **kw)
    ref = cls(num_envs=n, action_level=level, backend="numpy", **kw)
    assert fast.core.compiled is not None and fast.core.compiled_reason == ""
    assert ref.core.compiled is None and "native" in ref.core.compiled_reason
    return fast, ref


def assert_same(got, want, where):
    obs, rew, term, trunc, info = got
    np.testing.assert_allclose(obs, want[0], rtol=1e-5, atol=1e-5, err_msg=where)
    np.testing.assert_allclose(rew, want[1], rtol=1e-9, atol=1e-9, err_msg=where)
    np.testing.assert_array_equal(term, want[2], err_msg=where)
    np.testing.assert_array_equal(trunc, want[3], err_msg=where)
    assert set(info) == set(want[4]), where
    for key in INFO + (("battery_v",) if "battery_v" in want[4] else ()):
        assert info[key].dtype == want[4][key].dtype, (where, key)
        np.testing.assert_allclose(info[key], want[4][key], rtol=1e-9, atol=1e-9,
                                   err_msg=f"{where} {key}")  # fmt: skip
        np.testing.assert_array_equal(info["_" + key], want[4]["_" + key])


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("cls", [HoverVectorEnv, TrackVectorEnv])
def test_compiled_equals_reference(cls, level):
    """Same seed and actions: same observations, rewards, flags and info over 250 steps with
    autoresets (NEXT_STEP), crashes, box exits, tilts and truncations."""
    fast, ref = pair(cls, level)
    o1, _ = fast.reset(seed=7)
    o2, _ = ref.reset(seed=7)
    np.testing.assert_allclose(o1, o2, rtol=1e-6, atol=1e-6)
    rng = np.random.default_rng(1)
    seen = dict.fromkeys(("crashed", "out_of_bounds", "tilted", "truncated"), 0)
    for i in range(250):
        a = actions(rng, level, fast.num_envs)
        got, want = fast.step(a), ref.step(a)
        assert_same(got, want, f"{level} step {i}")
        for key in ("crashed", "out_of_bounds", "tilted"):
            seen[key] += int(want[4][key].sum())
        seen["truncated"] += int(want[3].sum())
    assert seen["crashed"] and seen["out_of_bounds"] and seen["truncated"], seen
    assert seen["tilted"] or level == "thrust_attitude", seen  # its tilt is held within 30 deg
    # the simulator seen through env.sim follows the compiled states
    np.testing.assert_allclose(fast.sim.state.pos, ref.sim.state.pos, rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(fast.sim.status.crashed, ref.sim.status.crashed)
    assert fast.sim.k == ref.sim.k
    np.testing.assert_array_equal(fast.core.steps, ref.core.steps)
    np.testing.assert_allclose(fast.core.last_action, ref.core.last_action)


@pytest.mark.parametrize("level", ["rotor_speeds", "thrust_attitude"])
def test_compiled_same_step_autoreset_and_reset_mask(level):
    """SAME_STEP (final observations) and DISABLED (reset_mask) equal the reference."""
    fast, ref = pair(HoverVectorEnv, level, n=8, autoreset_mode=AutoresetMode.SAME_STEP)
    fast.reset(seed=3)
    ref.reset(seed=3)
    rng = np.random.default_rng(2)
    finals = 0
    for i in range(120):
        a = actions(rng, level, 8)
        got, want = fast.step(a), ref.step(a)
        assert_same(got, want, f"step {i}")
        assert ("final_obs" in got[4]) == ("final_obs" in want[4])
        if "final_obs" in want[4]:
            mask = want[4]["_final_obs"]
            np.testing.assert_array_equal(got[4]["_final_obs"], mask)
            np.testing.assert_allclose(np.stack(got[4]["final_obs"][mask]),
                                       np.stack(want[4]["final_obs"][mask]), atol=1e-5)  # fmt: skip
            finals += int(mask.sum())
    assert finals > 0
    fast, ref = pair(HoverVectorEnv, level, n=8, autoreset_mode=AutoresetMode.DISABLED)
    fast.reset(seed=4)
    ref.reset(seed=4)
    for i in range(120):
        a = actions(rng, level, 8)
        got, want = fast.step(a), ref.step(a)
        assert_same(got, want, f"disabled step {i}")
        done = want[2] | want[3]
        if done.any():
            o1, _ = fast.reset(options={"reset_mask": done})
            o2, _ = ref.reset(options={"reset_mask": done})
            np.testing.assert_allclose(o1, o2, rtol=1e-6, atol=1e-6)


def test_compiled_per_env_parameters():
    """randomize_params: per-env model parameters enter the compiled step as inputs."""
    fast, ref = pair(HoverVectorEnv, "thrust_rates", n=8,
                     randomize_params={"mass": 0.2, "J": 0.2})  # fmt: skip
    for seed in (5, 6):  # a second full reset draws new parameters (same compiled function)
        fast.reset(seed=seed)
        ref.reset(seed=seed)
        np.testing.assert_array_equal(fast.param_values["mass"], ref.param_values["mass"])
        rng = np.random.default_rng(seed)
        for i in range(60):
            a = actions(rng, "thrust_rates", 8)
            assert_same(fast.step(a), ref.step(a), f"seed {seed} step {i}")


@pytest.mark.parametrize("term", [{"inflow_coef": 0.08}, {"warmup_coef": 0.1, "warmup_time": 0.2}],
                         ids=["axial_inflow", "motor_warmup"])  # fmt: skip
def test_compiled_rotor_terms(term):
    """The plant's axial inflow and motor warm-up (a state per rotor, cold at each new episode)
    fly the same compiled and not, and move the envs (against a drone without the term)."""
    from quadsim.physics.params import load_params

    level = "rotor_speeds" if "inflow_coef" in term else "thrust_rates"
    drone = load_params("cf2x_L250")._replace(**term)
    fast, ref = pair(HoverVectorEnv, level, n=8, drone=drone)
    off, _ = pair(HoverVectorEnv, level, n=8)
    for env in (fast, ref, off):
        env.reset(seed=3)
    rng = np.random.default_rng(3)
    moved = 0.0
    for i in range(60):
        a = actions(rng, level, 8)
        got = fast.step(a)
        assert_same(got, ref.step(a), f"step {i}")
        moved = max(moved, float(np.abs(got[0] - off.step(a)[0]).max()))
    assert moved > 1e-3  # the term is on


def test_compiled_single_env_and_overrides():
    """The single env (n = 1) with given starts, a divergence and bad overrides."""
    env = HoverEnv(action_level="thrust_attitude", backend="native", dtype="float64")
    assert env.core.compiled is not None
    ref = HoverEnv(action_level="thrust_attitude", backend="numpy", dtype="float64")
    state = {"pos": [0.1, 0.0, 1.2], "attitude": [0.0, 0.0, 0.0, 1.0], "ang_vel": [0.3, 0, 0]}
    for e in (env, ref):
        e.reset(seed=0, options={"state": state})
    a = np.array([0.2, 0.3, -0.2, 0.5], np.float32)
    for i in range(30):
        got, want = env.step(a), ref.step(a)
        np.testing.assert_allclose(got[0], want[0], atol=1e-5, err_msg=f"step {i}")
        assert got[1] == pytest.approx(want[1], abs=1e-9) and got[2:4] == want[2:4]
    for e in (env, ref):  # a NaN action: a fault, the drone kept where it was
        e.reset(seed=0, options={"state": state})
    a = np.array([0.2, np.nan, -0.2, 0.5], np.float32)
    got, want = env.step(a), ref.step(a)
    np.testing.assert_allclose(got[0], want[0], atol=1e-5)
    assert got[1] == pytest.approx(want[1], abs=1e-9) and got[2:4] == want[2:4]
    assert got[4]["fault"] == want[4]["fault"] and env.sim.k == ref.sim.k
    _, reward, term, _, info = got
    assert term and info["fault"] and not info["crashed"] and -10.0 < reward < -9.0
    with pytest.raises(ValueError, match="reset state: ang_vel: a body rate of 1500"):
        env.reset(seed=0, options={"state": {"ang_vel": [1500.0, 0.0, 0.0]}})
    with pytest.raises(ValueError, match="unit quaternion"):
        env.reset(seed=0, options={"state": {"attitude": [0.0, 0.0, 0.0, 2.0]}})
    with pytest.raises(ValueError, match="finite"):
        env.reset(seed=0, options={"state": {"pos": [0.0, np.nan, 1.0]}})


def test_compiled_option_and_fallback():
    from quadsim.loop.trajectories import Circle

    env = HoverVectorEnv(num_envs=2, backend="native", compiled=False)
    assert env.core.compiled is None and env.core.compiled_reason == "compiled=False"
    with pytest.raises(ValueError, match="compiled=True"):
        HoverVectorEnv(num_envs=2, backend="numpy", compiled=True)
    with pytest.raises(ValueError, match="compiled must be"):
        HoverVectorEnv(num_envs=2, backend="numpy", compiled="yes")
    circle = Circle(radius=1.0, speed=1.0, center=(0.0, 0.0, 1.0))
    numeric_only = lambda t: circle(np.asarray(t, dtype=np.float64))  # noqa: E731
    env = TrackVectorEnv(num_envs=2, trajectory=numeric_only, backend="native")
    assert env.core.compiled is None and "does not trace" in env.core.compiled_reason
    obs, _ = env.reset(seed=0)
    assert env.step(np.zeros((2, 4), np.float32))[0].shape == obs.shape


def test_inner_loop_is_one_function():
    """The action levels call inner_loop; it runs on a batch and on one drone alike."""
    env = HoverVectorEnv(num_envs=3, action_level="thrust_attitude", backend="numpy")
    level = env.core.level
    c = level.consts
    assert isinstance(c, InnerConsts) and c.attitude and c.lead == level.lead
    rng = np.random.default_rng(0)
    q = rng.normal(size=(3, 4))
    w = rng.normal(size=(3, 3))
    a = rng.uniform(-1, 1, (3, 4))
    state = type("S", (), {"quat": q, "ang_vel": w})
    rpm = level.command(a, state)
    assert isinstance(level.inner, InnerState) and np.all(level.inner.started == 1.0)
    rpm2, _ = inner_loop(a, state, init_inner((3,)), c)
    np.testing.assert_array_equal(rpm, rpm2)
    for i in range(3):  # one drone, no batch axis
        one = type("S", (), {"quat": q[i], "ang_vel": w[i]})
        r1, _ = inner_loop(a[i], one, init_inner(()), c)
        np.testing.assert_allclose(r1, rpm[i], rtol=1e-12)


def nan_actions(rng, level, n, t):
    """:func:`actions` with a NaN in one environment's action every third step, and ``±inf`` in
    one's the step after: ``(actions, env, entry, kind)``, ``kind`` ``"nan"``, ``"inf"`` or
    ``""``."""
    a = actions(rng, level, n).astype(np.float64)
    i, j = (5 * t) % n, t % a.shape[1]
    kind = ("", "nan", "inf")[t % 3]
    if kind:
        a[i, j] = np.nan if kind == "nan" else np.inf if t % 2 else -np.inf
    return a, i, j, kind


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("cls", [HoverVectorEnv, TrackVectorEnv])
def test_nan_actions_are_faults_alike_on_both_paths(cls, level):
    """An action that holds a NaN (any entry, every level) is a fault on both paths: the drone is
    kept where it was (velocity, attitude and rates unchanged, as the simulator keeps a diverged
    drone; its status says ``non-finite state``), ``terminated`` with ``info["fault"]`` (not
    crashed), reward ``exp(-cost) - crash_penalty`` with the NaN entries read as 0 (and observed
    as 0), reset by the next step; ``±inf`` is clipped like any action outside, no fault."""
    fast, ref = pair(cls, level, n=8)
    fast.reset(seed=11)
    ref.reset(seed=11)
    rng = np.random.default_rng(4)
    before = {id(fast): fast.core.observe(), id(ref): ref.core.observe()}
    done, faults, inf = np.zeros(8, bool), 0, 0
    for t in range(45):
        a, i, j, kind = nan_actions(rng, level, 8, t)
        got, want = fast.step(a), ref.step(a)
        assert_same(got, want, f"{level} step {t}")
        if kind and not done[i]:  # (an environment reset in this step ignores its action)
            for env, (obs, reward, term, _, info) in ((fast, got), (ref, want)):
                if kind == "inf":
                    assert not info["fault"][i] and obs[i, 18 + j] == np.sign(a[i, j])
                    continue
                assert term[i] and info["fault"][i] and not info["crashed"][i], (t, info)
                assert -10.0 < reward[i] < -9.0, reward[i]
                assert obs[i, 18 + j] == 0.0
                np.testing.assert_array_equal(obs[i, 3:18], before[id(env)][i, 3:18])
                status = env.sim.status
                assert status.fault_code[i] == 1 and status.fault_step[i] == env.sim.k - 5
            faults += kind == "nan"
            inf += kind == "inf"
        done = want[2] | want[3]
        before = {id(fast): got[0], id(ref): want[0]}
    assert faults >= 10 and inf >= 10, (faults, inf)
    np.testing.assert_array_equal(fast.sim.status.fault_step, ref.sim.status.fault_step)


@pytest.mark.parametrize("level", LEVELS)
def test_single_env_nan_action_and_action_shape(level):
    """The single env: a NaN action is the same fault on both paths (the drone frozen for the
    whole control step: the simulator's clock runs on alike), also when stepped on after it; an
    action of another shape than ``(k,)``, e.g. a batch of one ``(1, k)``, is refused."""
    kw = {"action_level": level, "dtype": "float64", "max_episode_steps": 100,
          "termination": Termination(max_pos_error=1.2)}  # fmt: skip
    fast, ref = HoverEnv(backend="native", **kw), HoverEnv(backend="numpy", **kw)
    assert fast.core.compiled is not None and ref.core.compiled is None
    for env in (fast, ref):
        env.reset(seed=2)
        with pytest.raises(ValueError, match=r"action must have shape \(4,\) \(the action "
                                             r"space's\); got \(1, 4\)"):  # fmt: skip
            env.step(np.zeros((1, 4), np.float32))
        with pytest.raises(ValueError, match=r"action must have shape \(4,\)"):
            env.step(np.zeros(5, np.float32))
    a = actions(np.random.default_rng(0), level, 1)[0]
    nan = a.copy()
    nan[3] = np.nan
    for i, act in enumerate((a, nan, a)):  # the last: stepped on after the fault
        got, want = fast.step(act), ref.step(act)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-6, atol=1e-6, err_msg=f"step {i}")
        assert got[1] == pytest.approx(want[1], abs=1e-9) and got[2:4] == want[2:4]
        for key in ("fault", "crashed"):
            assert got[4][key] == want[4][key] == (i > 0 and key == "fault"), (i, key)
        assert fast.sim.k == ref.sim.k == 5 * (i + 1)
        if i:
            assert got[2] and -10.0 < got[1] < -9.0
    np.testing.assert_array_equal(fast.sim.state.pos, ref.sim.state.pos)
    for env in (fast, ref):  # a new episode starts clean
        env.reset(seed=2)
        assert not env.step(a)[4]["fault"]


class NanPart(Sensor):
    """A part without a reading at some heights: NaN above 1 m, ``+inf`` below 0.8 m."""

    outputs = (Output("h", 1, "m", "height; NaN above 1 m"),
               Output("g", 1, "m", "minus the height; +inf below 0.8 m"))  # fmt: skip

    def measure(self, k, truth, state, z, ctx):
        h = truth.pos[..., 2]
        return {"h": ctx.xp.where(h > 1.0, math.nan, h),
                "g": ctx.xp.where(h < 0.8, math.inf, -h)}, state  # fmt: skip


@pytest.mark.parametrize("level", LEVELS)
def test_nan_sensor_readings_alike_on_both_paths(monkeypatch, level):
    """A sensor part's NaN and ``±inf`` readings: ``info["sensors"]`` holds them as read, the
    observation as any non-finite entry (NaN as 0, ``±inf`` as ``±1e6``), on both paths; they
    are no fault."""
    monkeypatch.setitem(SENSOR_KINDS, "nanpart", f"{__name__}:NanPart")
    fast, ref = pair(HoverVectorEnv, level, n=6, sensors={"p": {"kind": "nanpart"}})
    fast.reset(seed=5)
    ref.reset(seed=5)
    rng = np.random.default_rng(5)
    seen = {"nan": 0, "inf": 0}
    for t in range(25):
        a = actions(rng, level, 6)
        got, want = fast.step(a), ref.step(a)
        assert_same(got, want, f"{level} step {t}")
        for obs, info in ((got[0], got[4]), (want[0], want[4])):
            h, g = info["sensors"]["p_h"], info["sensors"]["p_g"]
            assert np.all(np.isfinite(obs)) and not info["fault"].any()
            np.testing.assert_allclose(obs[:, -2], np.where(np.isnan(h), 0.0, h), rtol=1e-6)
            np.testing.assert_allclose(obs[:, -1], np.where(np.isinf(g), 1e6, g), rtol=1e-6)
        np.testing.assert_allclose(got[4]["sensors"]["p_h"], want[4]["sensors"]["p_h"],
                                   rtol=1e-9, atol=1e-9)  # fmt: skip
        np.testing.assert_allclose(got[4]["sensors"]["p_g"], want[4]["sensors"]["p_g"],
                                   rtol=1e-9, atol=1e-9)  # fmt: skip
        seen["nan"] += int(np.isnan(want[4]["sensors"]["p_h"]).sum())
        seen["inf"] += int(np.isinf(want[4]["sensors"]["p_g"]).sum())
    assert seen["nan"] and seen["inf"], seen


def test_nan_action_without_a_world():
    """``world=None``: the simulator flags and freezes nothing, yet a NaN action is the env's
    fault on both paths alike (the drone flies the step with the NaN entries as 0)."""
    fast, ref = pair(HoverVectorEnv, "thrust_rates", n=3, world=None)
    fast.reset(seed=0)
    ref.reset(seed=0)
    a = np.zeros((3, 4))
    a[1, 2] = np.nan
    for t in range(3):  # NaN, then the autoreset, then NaN again
        got, want = fast.step(a), ref.step(a)
        assert_same(got, want, f"step {t}")
        np.testing.assert_array_equal(want[4]["fault"], [False, t != 1, False])
        np.testing.assert_array_equal(want[2], want[4]["fault"])
    assert fast.sim.status is None and ref.sim.status is None
