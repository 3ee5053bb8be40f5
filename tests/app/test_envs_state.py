"""``QuadsimVectorEnv.get_state`` / ``set_state`` (issue 27: a resumed training run continues bit
for bit): environments built alike, one given the other's state mid-run, step on identically."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("gymnasium")

WIND = {"wind": 0.5, "turbulence": "moderate", "latency": (0.0, 0.01),
        "obs_noise": (0.01, 0.02, 0.01, 0.01)}  # fmt: skip
TOF = {"tof": {"kind": "rangefinder"}}


def _make(env_id: str, mode: str, **kw):
    from quadsim.app.rl.evaluate import make_vector_env

    return make_vector_env(env_id, 6, autoreset=mode, max_episode_steps=7, **kw)


@pytest.mark.parametrize(
    ("env_id", "mode", "kw"),
    [
        ("quadsim/Recover-v0", "SameStep", {"disturbances": WIND, "observe_integral": True}),
        ("quadsim/Recover-v0", "SameStep", {"disturbances": WIND, "observe_integral": True,
                                            "backend": "numpy"}),
        ("quadsim/Hover-v0", "NextStep", {"action_level": "thrust_attitude",
                                          "backend": "numpy"}),
        ("quadsim/Hover-v0", "NextStep", {"action_level": "pwm", "backend": "numpy"}),
        ("quadsim/Hover-v0", "NextStep", {"action_level": "pwm"}),
        ("quadsim/Hover-v0", "NextStep", {"sensors": TOF}),
        ("quadsim/Hover-v0", "NextStep", {"sensors": TOF, "backend": "numpy"}),
    ],
    ids=["recover-compiled", "recover-numpy", "thrust-attitude-numpy", "pwm-numpy",
         "pwm-compiled", "sensors-compiled", "sensors-numpy"],
)  # fmt: skip
def test_a_state_put_into_a_new_env_continues_bit_for_bit(env_id, mode, kw):
    """Across autoresets (episodes of 7 steps), randomised parameters (Recover-v0), gusts,
    latency and sensor noise, the inner loops, the batteries and a sensor part's held readings
    and noise."""
    a, b = _make(env_id, mode, **kw), _make(env_id, mode, **kw)
    if kw.get("backend") != "numpy" and a.core.compiled is None:
        pytest.skip(f"no compiled env step here ({a.core.compiled_reason})")
    a.reset(seed=3)
    b.reset(seed=4)  # another history, overwritten
    acts = np.random.default_rng(1).uniform(-1, 1, (30, *a.action_space.shape))
    for k in range(12):
        a.step(acts[k].astype(np.float32))
    b.set_state(a.get_state())
    for k in range(12, 30):
        ra, rb = a.step(acts[k].astype(np.float32)), b.step(acts[k].astype(np.float32))
        for x, y in zip(ra[:4], rb[:4], strict=True):
            assert np.array_equal(x, y), k
        assert np.array_equal(ra[4]["pos_error"], rb[4]["pos_error"])
        for key, v in ra[4].get("sensors", {}).items():
            assert np.array_equal(v, rb[4]["sensors"][key]), (k, key)
    assert np.array_equal(a.core.sim.state.pos, b.core.sim.state.pos)


def test_a_state_of_other_environments_is_refused():
    a = _make("quadsim/Hover-v0", "NextStep", backend="numpy")
    bigger = _make("quadsim/Hover-v0", "NextStep", backend="numpy")
    state = a.get_state()
    state["core._steps"] = np.zeros(7, np.int64)
    with pytest.raises(ValueError, match=r"environment state: _steps has shape \(7,\); the "
                                         r"environments have \(6,\)"):  # fmt: skip
        bigger.set_state(state)
    compiled = _make("quadsim/Hover-v0", "NextStep")
    if compiled.core.compiled is None:
        return
    with pytest.raises(ValueError, match="taken on the reference path; these environments run "
                                         "on the compiled path"):  # fmt: skip
        compiled.set_state(a.get_state())
