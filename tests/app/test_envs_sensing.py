"""Sensor parts in the environments (quadsim.app.envs.sensing): the built-in rangefinder and a
user's part named by its dotted path, read at their rates, in the observation and the info."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from quadsim.app.envs.single import HoverEnv
from quadsim.app.envs.vector import HoverVectorEnv
from quadsim.engines import native
from quadsim.loop.parts import SENSORS as SENSOR_KINDS
from quadsim.loop.parts import Output, Sensor
from quadsim.physics.noise import normals

PLUGINS = Path(__file__).resolve().parents[2] / "examples" / "plugins"
SENSORS = {"tof": {"kind": "rangefinder"},
           "sonar": {"kind": "quadsim_plugin_demo.sonar:Sonar", "rate": 20.0}}  # fmt: skip


@pytest.fixture
def plugins(monkeypatch):
    monkeypatch.syspath_prepend(str(PLUGINS))


def _tilt_cos(quat: np.ndarray) -> np.ndarray:
    return 1.0 - 2.0 * (quat[..., 0] ** 2 + quat[..., 1] ** 2)


def test_a_rangefinder_and_a_users_sonar_in_the_env(plugins):
    """Each reads at its rate (25 Hz and 20 Hz at 100 Hz control: every 4th and 5th control
    step, and at the reset), holds its reading in between, and reads the true height: the
    rangefinder ``h / cos θ`` within 5 of its noise std, the sonar ``h`` within 5 of 2.5 cm."""
    env = HoverEnv(target=(0.0, 0.0, 1.0), sensors=SENSORS, backend="numpy")
    base = HoverEnv(target=(0.0, 0.0, 1.0), backend="numpy").observation_space.shape[0]
    assert env.observation_space.shape == (base + 4,)
    assert env.core.sensing.names() == ["tof_range", "tof_valid", "sonar_height", "sonar_valid"]
    obs, _ = env.reset(seed=3)
    fresh = {"tof": [], "sonar": []}
    checked = 0
    for c in range(1, 41):
        st = env.sim.state
        h, cos = float(np.asarray(st.pos)[0, 2]), float(_tilt_cos(np.asarray(st.quat))[0])
        obs, _, term, trunc, info = env.step(np.zeros(4))
        s = info["sensors"]
        np.testing.assert_allclose(obs[-4:], [s["tof_range"], s["tof_valid"],
                                              s["sonar_height"], s["sonar_valid"]], rtol=1e-6)
        for name in fresh:
            if s[f"{name}_fresh"]:
                fresh[name].append(c)
        st = env.sim.state
        h, cos = float(np.asarray(st.pos)[0, 2]), float(_tilt_cos(np.asarray(st.quat))[0])
        if s["tof_fresh"] and s["tof_valid"]:
            std = 0.0025 * (1.0 + np.exp(2.92135 * (h / cos - 2.5)))
            assert abs(s["tof_range"] - h / cos) < 5 * std
            checked += 1
        if s["sonar_fresh"] and s["sonar_valid"]:
            assert abs(s["sonar_height"] - h) < 5 * 0.025
            checked += 1
        assert not (term or trunc)
    assert fresh == {"tof": list(range(4, 41, 4)), "sonar": list(range(5, 41, 5))}
    assert checked >= 10


def test_every_env_of_a_vector_draws_its_own_noise_and_restarts_its_sensors(plugins):
    """Four environments: four different readings (their own normals), in ``info["sensors"]``
    with Gymnasium's masks; an environment that resets reads at once (its episode's start)."""
    env = HoverVectorEnv(4, target=(0.0, 0.0, 1.0), sensors=SENSORS, backend="numpy")
    env.reset(seed=5)
    for _ in range(4):
        obs, _, _, _, info = env.step(np.zeros((4, 4)))
    s = info["sensors"]
    assert s["tof_fresh"].all() and s["_tof_range"].all() and info["_sensors"].all()
    r = np.asarray(env.core.sim.state.pos)[:, 2] / _tilt_cos(np.asarray(env.core.sim.state.quat))
    z = (s["tof_range"] - r) / (0.0025 * (1.0 + np.exp(2.92135 * (r - 2.5))))  # the normals
    assert np.abs(z).max() < 5 and np.diff(np.sort(z)).min() > 1e-3
    env.core.reset(np.array([False, True, False, False]), np.random.default_rng(0))
    obs = env.core.observe()
    st = env.core.sim.state
    h = np.asarray(st.pos)[1, 2] / _tilt_cos(np.asarray(st.quat))[1]
    assert abs(obs[1, -4] - h) < 0.02 and obs[1, -3] == 1.0
    np.testing.assert_array_equal(obs[[0, 2, 3], -4], s["tof_range"][[0, 2, 3]].astype(np.float32))


@pytest.mark.parametrize(("sensors", "message"), [
    ({"tof": {"kind": "rangefinder", "rate": 125.0}}, "sensors.tof.rate: an env reads"),
    ({"tof": {"kind": "rangefinder", "max_range": -1.0}}, "sensors.tof.max_range"),
    ({"tof": {"kind": "nosuch"}}, "sensors.tof.kind: unknown sensor kind 'nosuch'"),
    ({"Tof": {"kind": "rangefinder"}}, "lower-case letters"),
    ({"tof": "rangefinder"}, "sensors must be a dict of tables"),
])  # fmt: skip
def test_a_bad_sensor_table_is_refused_with_its_key(sensors, message):
    with pytest.raises(ValueError, match=message):
        HoverEnv(sensors=sensors, backend="numpy")


class Counter(Sensor):
    """A stateful part: how many readings it has taken since its drone's episode began."""

    outputs = (Output("count", 1, "1", "readings since the episode began"),)

    def init(self, n, truth, ctx):
        return ctx.xp.zeros((n,))

    def measure(self, k, truth, state, z, ctx):
        return {"count": state + 1.0}, state + 1.0


NATIVE = pytest.mark.skipif(not native.available(), reason="needs CasADi and a C compiler")
PATHS = [pytest.param(False, id="reference"), pytest.param(True, id="compiled", marks=NATIVE)]


@pytest.mark.parametrize("compiled", PATHS)
def test_a_stateful_part_restarts_with_its_environment_only(monkeypatch, compiled):
    monkeypatch.setitem(SENSOR_KINDS, "counter", f"{__name__}:Counter")
    env = HoverVectorEnv(3, target=(0.0, 0.0, 1.0), sensors={"c": {"kind": "counter"}},
                         backend="native" if compiled else "numpy", compiled=compiled or None)
    assert (env.core.compiled is not None) == compiled
    env.reset(seed=1)
    for _ in range(5):
        obs, *_ = env.step(np.zeros((3, 4)))
    np.testing.assert_array_equal(obs[:, -1], [6.0, 6.0, 6.0])  # the reset's reading, then 5
    env.core.reset(np.array([False, True, False]), np.random.default_rng(0))
    np.testing.assert_array_equal(env.core.observe()[:, -1], [6.0, 1.0, 6.0])
    obs, *_ = env.step(np.zeros((3, 4)))
    np.testing.assert_array_equal(obs[:, -1], [7.0, 2.0, 7.0])


def _compare(a: tuple, b: tuple, obs_tol: float, tol: float) -> None:
    """Two steps' results agree: observations within ``obs_tol``, the rest within ``tol``."""
    np.testing.assert_allclose(a[0], b[0], rtol=0, atol=obs_tol)
    np.testing.assert_allclose(a[1], b[1], rtol=0, atol=tol)
    for x, y in zip(a[2:4], b[2:4], strict=True):
        np.testing.assert_array_equal(x, y)
    sa, sb = a[4]["sensors"], b[4]["sensors"]
    assert sa.keys() == sb.keys()
    for key in sa:
        if key.endswith("_fresh") or key.startswith("_"):
            np.testing.assert_array_equal(sa[key], sb[key], err_msg=key)
        else:  # ranges of about 1 m; 0 without a reading
            np.testing.assert_allclose(sa[key], sb[key], rtol=0, atol=tol, err_msg=key)


@NATIVE
@pytest.mark.parametrize(("dtype", "obs_tol", "tol"), [("float64", 1e-6, 1e-9),
                                                      ("float32", 1e-4, 1e-4)])  # fmt: skip
def test_the_compiled_step_reads_the_sensors_as_the_reference_path(plugins, dtype, obs_tol, tol):
    """Three parts at three rates (every control step, every 4th, every 5th), 80 steps of 6
    environments with ``NEXT_STEP`` autoresets (episodes of 30 steps) and a partial reset: the
    compiled step (its normals drawn in C) gives the reference path's observations, rewards,
    flags and ``info["sensors"]`` (float64: to the normals' last places, under 1e-9; float32: its
    rounding, 1e-4 on values of about 1), fresh flags alike."""
    sensors = {**SENSORS, "fast": {"kind": "rangefinder", "rate": 100.0}}
    kw = {"target": (0.0, 0.0, 1.0), "sensors": sensors, "backend": "native", "dtype": dtype,
          "max_episode_steps": 30, "action_level": "thrust_rates"}  # fmt: skip
    env, ref = HoverVectorEnv(6, **kw), HoverVectorEnv(6, compiled=False, **kw)
    assert env.core.compiled is not None and env.core.compiled_reason == ""
    assert ref.core.compiled is None
    np.testing.assert_allclose(env.reset(seed=4)[0], ref.reset(seed=4)[0], rtol=0, atol=obs_tol)
    rng = np.random.default_rng(0)
    fresh = 0
    for t in range(80):
        action = np.column_stack([np.full(6, 0.05), rng.uniform(-0.3, 0.3, (6, 3))])
        a, b = env.step(action), ref.step(action)
        _compare(a, b, obs_tol, tol)
        fresh += int(a[4]["sensors"]["tof_fresh"].sum())
        if t == 40:
            mask = np.array([0, 1, 0, 0, 1, 0], bool)
            np.testing.assert_allclose(env.reset(options={"reset_mask": mask})[0],
                                       ref.reset(options={"reset_mask": mask})[0], rtol=0,
                                       atol=obs_tol)  # fmt: skip
    assert 6 * 20 <= fresh < 6 * 40  # every 4th step, and at the resets


class AsArray(Sensor):
    """A part that cannot be traced: NumPy on its input."""

    outputs = (Output("h", 1, "m", "height"),)

    def measure(self, k, truth, state, z, ctx):
        return {"h": np.asarray(truth.pos)[..., 2]}, state


class PythonIf(Sensor):
    """A part that cannot be traced: a Python ``if`` on an array."""

    outputs = (Output("h", 1, "m", "height"),)

    def measure(self, k, truth, state, z, ctx):
        h = truth.pos[..., 2]
        return {"h": h if h > 0.5 else 0.0 * h}, state


class SeededInit(Sensor):
    """A part whose init draws from the seed: it cannot be traced for every reset."""

    outputs = (Output("b", 1, "m", "a turn-on bias"),)

    def init(self, n, truth, ctx):
        return ctx.xp.asarray(normals(ctx.seed, "part:b", ctx.k0, np.arange(n), 1)[:, 0])

    def measure(self, k, truth, state, z, ctx):
        return {"b": state + 0.0 * truth.pos[..., 2]}, state


@NATIVE
@pytest.mark.parametrize(("cls", "why"), [
    (AsArray, "sensor part 'p': its measure does not trace"),
    (PythonIf, "sensor part 'p': its measure does not trace (TypeError: a symbolic array has "
               "no truth value"),
    (SeededInit, "sensor part 'p': its init depends on the seed or the step"),
])  # fmt: skip
def test_a_part_that_does_not_trace_keeps_the_reference_path(monkeypatch, cls, why):
    monkeypatch.setitem(SENSOR_KINDS, "p", f"{__name__}:{cls.__name__}")
    env = HoverEnv(sensors={"p": {"kind": "p"}}, backend="native")
    assert env.core.compiled is None
    assert env.core.compiled_reason.startswith(why)
    env.reset(seed=0)
    obs, *_ = env.step(np.zeros(4))  # the reference path runs it (one drone: the if too)
    assert np.all(np.isfinite(obs))
    with pytest.raises(ValueError, match="compiled=True: the compiled env step is not possible"):
        HoverEnv(sensors={"p": {"kind": "p"}}, backend="native", compiled=True)
