"""The scenario path: validation then a typed assembly, one run-metadata builder, shared
reference and start sampling (:mod:`quadsim.loop.initial`), and the ``auto`` backend."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from quadsim.app import scenario
from quadsim.app.scenario import Assembly, build, default_backend, load_scenario, validate
from quadsim.loop import initial
from quadsim.loop import trajectories as tr


def load(text):
    return load_scenario(text, text=True)


RANDOM = (
    "n = 3\nseed = 4\nduration = 0.05\n[randomize]\nmass_rel = 0.1\ninertia_rel = 0.1\n"
    "pos_std = 0.05\nvel_std = 0.1\nrpy_std_deg = 2.0\nspacing = 1.0\n"
    "[sim]\nbackend = 'numpy'\n[trajectory]\nkind = 'circle'\n"
)


def test_build_returns_a_typed_assembly_and_reuses_the_draws_of_validation(monkeypatch):
    calls = []
    real = validate.draw_initial  # what validation (validate.prepare) draws the start with
    monkeypatch.setattr(validate, "draw_initial", lambda *a: calls.append(1) or real(*a))
    sc = load(RANDOM)
    assert len(calls) == 1  # validation drew the randomisation once
    objs = build(sc)
    assert len(calls) == 1  # ... and assembly reused it, drawing nothing again
    assert isinstance(objs, Assembly) and not isinstance(objs, dict)
    assert objs._fields[:8] == (
        "sim", "trajectory", "control", "gains", "ref_offset", "duration", "output", "seed",
    )  # fmt: skip
    assert objs.sensors.imu is objs.imu and objs.sensors.parts == objs.parts == ()
    # assembling from the values alone (nothing prepared) draws the same, bitwise
    fresh = build(sc._replace(prepared=None))
    assert len(calls) == 2
    for a, b in zip(objs.sim.state, fresh.sim.state, strict=True):
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes()
    assert objs.sim.model_params["mass"].tobytes() == fresh.sim.model_params["mass"].tobytes()
    # a second assembly of one Scenario starts where the first did, even after the first flew
    first_pos = np.array(objs.sim.state.pos)
    objs.sim.step(np.full((3, 4), objs.sim.hover_rpm))
    assert np.array_equal(build(sc).sim.state.pos, first_pos)


def _fly(tmp_path, text, name="scen"):
    from quadsim.app import cli, io

    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    out = tmp_path / name
    assert cli.main(["fly", str(path), "--out", str(out), "--quiet", "--no-plots"]) == 0
    _, meta = io.read_log(out / "trajectory.parquet")
    summary = json.loads((out / "summary.json").read_text())
    return meta, summary


def test_fly_logs_and_summarises_the_model_and_backend_that_ran(tmp_path):
    meta, summary = _fly(
        tmp_path, "duration = 0.02\n[sim]\nmodel = 'euler_zyx'\nbackend = 'numpy'\n", "euler"
    )
    assert meta["model"] == summary["model"] == "euler_zyx"  # was always None
    assert meta["backend"] == summary["backend"] == "numpy"
    assert meta["integrator"] == "rk4" and meta["dtype"] == "float64"
    assert meta["name"] == "euler" and meta["controller"] == "geometric" and meta["seed"] == 0
    assert meta["output"]["plots"] is False  # the command line's --no-plots, not the file's
    # the default backend is resolved at load and said in the log and the summary
    meta, summary = _fly(tmp_path, "duration = 0.02\n", "auto")
    assert meta["backend"] == summary["backend"] == default_backend() != "auto"
    assert meta["model"] == summary["model"] == "first_principles"


def test_plain_fly_metadata_names_the_model():
    from quadsim.engines.sim import Simulator
    from quadsim.loop.control import control, load_gains
    from quadsim.loop.flight import fly

    sim = Simulator("cf2x_L250", n=1, model="euler_zyx", integrator="semi_implicit",
                    dtype="float32")  # fmt: skip
    sim.reset(pos=np.array([0.0, 0.0, 1.0]))
    gains = load_gains("cf2x_L250_geometric", drone=sim.drone, dt=sim.dt)
    meta = fly(sim, tr.Hover(), control, gains, duration=0.004, jit=False).meta
    assert meta["model"] == "euler_zyx" and meta["backend"] == "numpy"
    assert meta["integrator"] == "semi_implicit" and meta["dtype"] == "float32"


def test_auto_backend_is_native_where_it_compiles_else_numpy(monkeypatch):
    import quadsim.engines.native

    assert load("").get("sim.backend") == default_backend()
    assert default_backend() == ("native" if quadsim.engines.native.available() else "numpy")
    assert load("[sim]\nintegrator = 'rk45'\n").get("sim.backend") == "numpy"
    assert load("[sim]\nbackend = 'numpy'\n").get("sim.backend") == "numpy"
    monkeypatch.setattr(quadsim.engines.native, "available", lambda: False)
    assert load("").get("sim.backend") == "numpy"
    monkeypatch.setattr(quadsim.engines.native, "available", lambda: True)
    assert load("duration = 0.01\n").get("sim.backend") == "native"
    assert scenario.SCHEMA["sim"]["backend"].default == "auto"


def test_one_reference_construction_for_scenarios_and_envs():
    from quadsim.app.envs.single import make_trajectory
    from quadsim.app.envs.tasks import HoverTask

    sc = load("[trajectory]\nkind = 'lemniscate'\nsize = 0.5\nperiod = 6.0\n")
    assert sc.prepared.trajectory == tr.Lemniscate(size=0.5, period=6.0, center=(0.0, 0.0, 1.0))
    assert make_trajectory("circle") == initial.make_trajectory("circle")
    assert make_trajectory("lemniscate") == tr.Lemniscate(size=1.0, speed=1.0)
    with pytest.raises(ValueError, match="unknown trajectory kind 'spiral'"):
        initial.make_trajectory("spiral")
    task = HoverTask((1.0, 2.0, 3.0))  # a hover task is the hover reference
    assert task.trajectory == tr.Hover(pos=(1.0, 2.0, 3.0))
    pos, vel = task.reference(np.zeros(4))
    assert pos.shape == (4, 3) and np.all(pos == [1.0, 2.0, 3.0]) and np.all(vel == 0.0)
    assert task.ahead(np.zeros(4)).shape == (4, 0, 3)


def test_start_sampling_draws_in_the_order_given_and_from_the_distribution_named():
    rng = np.random.default_rng(0)
    s = initial.sample_start(
        rng, 4, pos=np.array([0.0, 0.0, 1.0]), offset=np.ones((4, 3)),
        spread={"vel": initial.Spread("normal", 0.5), "pos": initial.Spread("uniform", 0.2)},
    )  # fmt: skip
    ref = np.random.default_rng(0)
    vel = ref.normal(0, 1, (4, 3)) * 0.5
    pos = np.array([0.0, 0.0, 1.0]) + np.ones((4, 3)) + ref.uniform(-0.2, 0.2, (4, 3))
    assert np.array_equal(s.vel, vel) and np.array_equal(s.pos, pos)
    assert s.rpy is None and s.ang_vel is None
    # per-axis half-widths: the same uniform law as one number (same variates, to rounding)
    a = initial.Spread("uniform", 0.3).draw(np.random.default_rng(1), 1000)
    b = initial.Spread("uniform", (0.3, 0.3, 0.3)).draw(np.random.default_rng(1), 1000)
    assert np.allclose(a, b, rtol=0, atol=4 * np.finfo(float).eps) and np.abs(a).max() <= 0.3
    big = initial.Spread("normal", 2.0).draw(np.random.default_rng(2), 20_000)
    assert abs(big.std() - 2.0) < 0.05 and abs(big.mean()) < 0.05
    with pytest.raises(ValueError, match="unknown field 'quat'"):
        initial.sample_start(rng, 1, spread={"quat": initial.Spread("normal", 1.0)})


def test_scenario_start_is_the_reference_plus_formation_plus_seeded_noise():
    sc = load(RANDOM)
    init = sc.prepared.initial
    r = np.random.default_rng([4, 1])
    r.uniform(-1, 1, 3)  # mass
    r.uniform(-1, 1, (3, 3))  # inertia
    ref0 = sc.prepared.trajectory(0.0)
    pos = np.asarray(ref0.pos) + init["offset"] + r.normal(0, 1, (3, 3)) * 0.05
    vel = np.asarray(ref0.vel) + r.normal(0, 1, (3, 3)) * 0.1
    rpy = np.array([0.0, 0.0, float(ref0.yaw)]) + r.normal(0, 1, (3, 3)) * math.radians(2.0)
    assert np.array_equal(init["pos"], pos) and np.array_equal(init["vel"], vel)
    assert np.array_equal(init["rpy"], rpy)


def test_summary_reads_backend_and_model_from_meta():
    from quadsim.app import io

    log = {"time": np.array([0.0, 0.1]), "pos": np.zeros((2, 1, 3)),
           "quat": np.tile([0.0, 0.0, 0.0, 1.0], (2, 1, 1))}  # fmt: skip
    s = io.summarize(log, {"backend": "native", "model": "first_principles"}, 1.0)
    assert s["backend"] == "native" and s["model"] == "first_principles"
    assert io.summarize(log, {}, 1.0)["backend"] is None
