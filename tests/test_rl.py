"""``quadsim train`` and ``quadsim eval`` (issue 15): PPO learns to hover from random starts in a
seeded, fixed number of steps; the exported policy file is the trained network; training
resumes; bad input exits 2."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

PY = sys.executable


def _cli(*args: str, timeout: int = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", "quadsim.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


@pytest.fixture(scope="module")
def hover(tmp_path_factory):
    """Hover-v0, rotor-speed actions, 2.4 M steps (about 27 s on 2 idle cores), seed 0, one
    PyTorch thread: the other test worker has the second core (two threads on a busy core took
    122 s instead)."""
    out = tmp_path_factory.mktemp("hover") / "run"
    r = _cli("train", "quadsim/Hover-v0", "--steps", "2400000", "--seed", "0", "--out",
             str(out), "--threads", "1", "--quiet")
    assert r.returncode == 0, r.stderr
    return out


def test_ppo_learns_to_hover_from_random_starts(hover, tmp_path):
    """Measured: 99.8 % success over 1000 episodes of 5 s (seed 0, one PyTorch thread; 100 % with
    seed 1, and with two threads), final error 0.05 m; the issue's CI bar is 80 %."""
    js = tmp_path / "eval.json"
    r = _cli("eval", str(hover / "policy.npz"), "--episodes", "1000", "--json", str(js))
    assert r.returncode == 0, r.stderr
    res = json.loads(js.read_text())
    assert res["episodes"] == 1000 and res["env_id"] == "quadsim/Hover-v0"
    assert res["success_rate"] >= 0.80
    assert res["crash_rate"] <= 0.05
    assert 0.0 < res["mean_recovery_time_s"] < 4.0
    rows = list(csv.DictReader(open(hover / "progress.csv")))
    assert int(rows[-1]["steps"]) >= 2_400_000
    assert float(rows[-1]["success_rate"]) > float(rows[0]["success_rate"])
    assert (hover / "checkpoint.zip").stat().st_size > 10_000


def test_the_policy_file_is_the_trained_network(hover):
    """Independent oracle: Stable-Baselines3's own deterministic prediction from the checkpoint."""
    from stable_baselines3 import PPO

    from quadsim.app.rl.policy import load_policy

    pol = load_policy(hover / "policy.npz")
    model = PPO.load(hover / "checkpoint.zip", device="cpu")
    obs = np.random.default_rng(0).normal(size=(256, pol.obs_dim)).astype(np.float32)
    want, _ = model.predict(obs, deterministic=True)
    assert np.allclose(pol(obs), want, atol=1e-5)
    assert pol.meta["action_level"] == "rotor_speeds" and pol.meta["obs_dim"] == 22


def test_training_resumes(tmp_path):
    out = tmp_path / "run"
    args = ["train", "quadsim/Hover-v0", "--envs", "16", "--seed", "3", "--out", str(out),
            "--quiet"]
    (tmp := tmp_path / "tmp").mkdir()
    r = _cli(*args, "--steps", "2048", env=dict(os.environ, TMPDIR=str(tmp)))
    assert r.returncode == 0, r.stderr
    assert not list(tmp.glob("SB3-*"))  # SB3's logger leaves no folder per iteration there
    state = json.loads((out / "state.json").read_text())
    assert state["steps"] == 2048
    r = _cli(*args, "--steps", "4096")
    assert r.returncode == 0, r.stderr
    assert "resuming at 2048 steps" in r.stderr
    assert json.loads((out / "state.json").read_text())["steps"] == 4096
    assert len(list(csv.DictReader(open(out / "progress.csv")))) == 4
    # another run's directory is refused
    r = _cli("train", "quadsim/Hover-v0", "--envs", "16", "--seed", "4", "--out", str(out),
             "--steps", "4096")
    assert r.returncode == 2 and "holds another training run (seed 3 there, 4 here)" in r.stderr


def test_a_seeded_steps_budget_is_repeatable(tmp_path):
    """The same seed, budget and thread count give the same policy file's weights, exactly (on
    PyTorch's default two threads); another seed gives another policy."""
    from quadsim.app.rl.policy import load_policy
    from quadsim.app.rl.train import train

    runs = {}
    for name, seed in (("a", 5), ("b", 5), ("c", 6)):
        res = train("quadsim/Hover-v0", tmp_path / name, steps=2048, num_envs=16, seed=seed,
                    threads=2, progress=False)  # fmt: skip
        assert res["steps"] == 2048
        runs[name] = load_policy(tmp_path / name / "policy.npz")
    obs = np.random.default_rng(0).normal(size=(64, runs["a"].obs_dim)).astype(np.float32)
    assert np.array_equal(runs["a"](obs), runs["b"](obs))
    assert np.max(np.abs(runs["a"](obs) - runs["c"](obs))) > 1e-3
    with pytest.raises(ValueError, match="--threads must be a positive integer"):
        train("quadsim/Hover-v0", tmp_path / "d", steps=2048, num_envs=16, threads=0,
              progress=False)  # fmt: skip


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_signal_stops_training_after_a_checkpoint_and_the_run_resumes(tmp_path, sig):
    """A real signal mid-training: exit 128 + signal after the iteration's checkpoint, nothing
    lost (state.json, checkpoint.zip and policy.npz agree on the steps), and the run resumes."""
    import signal
    import time

    from quadsim.app.rl.policy import load_policy

    out = tmp_path / "run"
    args = [PY, "-m", "quadsim.cli", "train", "quadsim/Hover-v0", "--envs", "16", "--steps",
            "100000000", "--out", str(out), "--quiet"]  # fmt: skip
    proc = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
    try:
        t0 = time.monotonic()
        while not (out / "state.json").exists():
            assert proc.poll() is None and time.monotonic() - t0 < 120, "no first checkpoint"
            time.sleep(0.05)
        time.sleep(0.3)  # some iterations later
        proc.send_signal(getattr(signal, sig))
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 128 + getattr(signal, sig), err
    assert "training interrupted" in err and "Traceback" not in err
    steps = json.loads((out / "state.json").read_text())["steps"]
    assert steps >= 1024 and steps % 1024 == 0
    rows = list(csv.DictReader(open(out / "progress.csv")))
    assert int(rows[-1]["steps"]) == steps
    from stable_baselines3 import PPO

    assert PPO.load(out / "checkpoint.zip").num_timesteps == steps
    load_policy(out / "policy.npz")
    r = _cli("train", "quadsim/Hover-v0", "--envs", "16", "--steps", str(steps + 1024), "--out",
             str(out), "--quiet")  # fmt: skip
    assert r.returncode == 0 and f"resuming at {steps} steps" in r.stderr, r.stderr
    assert json.loads((out / "state.json").read_text())["steps"] == steps + 1024


def _bad_policy(tmp_path: Path, kind: str) -> Path:
    from quadsim.app.rl.policy import save_policy

    p = tmp_path / f"{kind}.npz"
    rng = np.random.default_rng(0)
    if kind == "corrupt":
        p.write_bytes(b"PK\x03\x04 not really a zip")
    elif kind == "shape":  # Hover's 22 inputs on Track-v0 (34)
        save_policy(p, [(rng.normal(size=(8, 22)), np.zeros(8)), (rng.normal(size=(4, 8)),
                    np.zeros(4))], {"env_id": "quadsim/Track-v0"})
    elif kind == "meta":  # an observation option that is not a boolean
        save_policy(p, [(rng.normal(size=(4, 22)), np.zeros(4))],
                    {"env_id": "quadsim/Hover-v0", "observe_integral": "yes"})  # fmt: skip
    elif kind == "chain":
        np.savez(p, meta=np.array("{}"), W0=np.zeros((8, 22)), b0=np.zeros(8),
                 W1=np.zeros((4, 9)), b1=np.zeros(4))
    return p


@pytest.mark.parametrize(
    ("args", "msg"),
    [
        (["train", "quadsim/Fly-v9", "--steps", "10"], "unknown environment 'quadsim/Fly-v9'"),
        (["train", "quadsim/Hover-v0", "--algo", "dqn", "--steps", "10"],
         "unknown algorithm 'dqn'"),
        (["eval", "missing.npz"], "no such policy file"),
        (["eval", "{corrupt}"], "not a policy file"),
        (["eval", "{shape}"], "the policy maps 22 observations to 4 actions; the environment "
                              "has 34"),
        (["eval", "{chain}"], "layer 1 takes 9 inputs"),
        (["eval", "{meta}"], "meta observe_integral must be true or false; got 'yes'"),
        (["eval", "{shape}", "--gyro", "nope"], "unknown IMU preset 'nope'"),
    ],
)  # fmt: skip
def test_bad_input_exits_2_with_one_line(tmp_path, args, msg):
    args = [str(_bad_policy(tmp_path, a[1:-1])) if a.startswith("{") else a for a in args]
    r = _cli(*args, "--out", str(tmp_path / "o")) if args[0] == "train" else _cli(*args)
    assert r.returncode == 2, r.stderr
    assert msg in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


SCENARIO = """
name = "policy hover"
duration = 5.0
[drone]
preset = "cf2x_L250"
[sim]
dt = 0.002
backend = "native"
[initial]
start_on_reference = false
pos = [0.3, -0.3, 0.7]
rpy_deg = [10.0, -5.0, 30.0]
[controller]
kind = "policy"
path = "{path}"
[trajectory]
kind = "hover"
center = [0.0, 0.0, 1.0]
[output]
plots = false
"""


def test_quadsim_fly_flies_the_policy_in_the_compiled_loop_as_the_env_does(hover, tmp_path):
    """The same policy through ``quadsim fly`` (the compiled closed loop, the MLP traced into C)
    and through the environment from the same start: the same flight (measured: 5.6e-9 m apart
    over 5 s; the env feeds the policy float32 observations), ending at the target."""
    from quadsim.app.envs import HoverEnv
    from quadsim.app.io import read_log
    from quadsim.app.rl.policy import load_policy
    from quadsim.physics.rotation import from_euler

    scen = tmp_path / "policy.toml"
    scen.write_text(SCENARIO.format(path=hover / "policy.npz"))
    r = _cli("fly", str(scen), "--out", str(tmp_path / "out"), "--quiet")
    assert r.returncode == 0, r.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["loop"] == "compiled" and summary["rates_hz"]["control"] == 100.0
    log, _ = read_log(tmp_path / "out" / "trajectory.parquet")
    assert np.linalg.norm(log["pos"][-1, 0] - [0.0, 0.0, 1.0]) < 0.05
    pol = load_policy(hover / "policy.npz")
    env = HoverEnv(target=(0.0, 0.0, 1.0), max_episode_steps=600)
    q = np.asarray(from_euler(np.deg2rad([10.0, -5.0, 30.0])))
    obs, _ = env.reset(seed=0, options={"state": {"pos": [0.3, -0.3, 0.7], "attitude": q,
                                                  "vel": [0, 0, 0], "ang_vel": [0, 0, 0]}})
    pos = []
    for _ in range(500):
        pos.append(np.array(env.unwrapped.core.sim.state.pos)[0])
        obs, *_ = env.step(pol(obs).astype(np.float32))
    assert np.abs(np.array(pos) - log["pos"][:2500:5, 0]).max() < 1e-6


def test_a_bad_policy_in_a_scenario_exits_2_naming_the_key(tmp_path):
    scen = tmp_path / "policy.toml"
    scen.write_text(SCENARIO.format(path=_bad_policy(tmp_path, "chain")))
    r = _cli("fly", str(scen), "--out", str(tmp_path / "out"))
    assert r.returncode == 2
    assert "controller.path" in r.stderr and "layer 1 takes 9 inputs" in r.stderr


def test_recover_trains_with_its_own_episode_length(tmp_path):
    """``quadsim train quadsim/Recover-v0`` trains on 3-s episodes unless told (a throw takes
    about 2.5 s to recover); the policy file it writes flies in ``quadsim eval``."""
    out = tmp_path / "run"
    r = _cli("train", "quadsim/Recover-v0", "--envs", "16", "--steps", "2048", "--out", str(out),
             "--quiet")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads((out / "state.json").read_text())["episode_steps"] == 300
    js = tmp_path / "eval.json"
    r = _cli("eval", str(out / "policy.npz"), "--episodes", "20", "--json", str(js))
    assert r.returncode in (0, 1), r.stderr  # 1: no episode succeeded (2,048 steps of training)
    res = json.loads(js.read_text())
    assert res["env_id"] == "quadsim/Recover-v0" and res["episodes"] == 20


@pytest.mark.parametrize("integral", [False, True])
def test_fly_runs_the_observers_of_the_env(tmp_path, integral):
    """A policy that observes the rotor-speed estimate (``observe_rotors``, as Recover-v0's do),
    and the position-error integral (``observe_integral``) and the body-frame position error and
    velocity (``observe_body``; with the integral), flies the same through ``quadsim fly`` (its
    controller runs the observer on its own commands and integrates the error) as through the
    environment: measured 1e-9 m apart over 0.4 s of random-weight flight in which the rotors
    swing by up to 1,500-4,000 RPM; the extra inputs matter (without them the flight differs by
    centimetres, millimetres for the young integral)."""
    from quadsim.app.envs import HoverEnv
    from quadsim.app.io import read_log
    from quadsim.app.rl.policy import load_policy, save_policy
    from quadsim.physics.envelope import envelope
    from quadsim.physics.params import load_params
    from quadsim.physics.rotation import from_euler

    p = load_params("cf2x_L250")
    hover = 2 * (envelope(p).hover_rpm - p.rpm_min) / (p.rpm_max - p.rpm_min) - 1
    rng = np.random.default_rng(3)
    d = 35 if integral else 26
    w = [(rng.normal(0, 0.15, (16, d)), np.zeros(16)),
         (rng.normal(0, 0.15, (4, 16)), np.full(4, hover))]  # fmt: skip
    meta = {"env_id": "quadsim/Hover-v0", "action_level": "rotor_speeds", "observe_rotors": True,
            "observe_integral": integral, "observe_body": integral,
            "physics_dt": 0.002}  # fmt: skip
    path = save_policy(tmp_path / "pol.npz", w, meta)
    scen = tmp_path / "policy.toml"
    scen.write_text(SCENARIO.format(path=path).replace("duration = 5.0", "duration = 0.4")
                    .replace("pos = [0.3, -0.3, 0.7]", "pos = [0.15, -0.1, 0.8]"))  # fmt: skip
    r = _cli("fly", str(scen), "--out", str(tmp_path / "out"), "--quiet")
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["loop"] == "compiled"
    log, _ = read_log(tmp_path / "out" / "trajectory.parquet")
    q = np.asarray(from_euler(np.deg2rad([10.0, -5.0, 30.0])))
    start = {"pos": [0.15, -0.1, 0.8], "attitude": q, "vel": [0, 0, 0], "ang_vel": [0, 0, 0]}

    def env_flight(pol):
        env = HoverEnv(target=(0.0, 0.0, 1.0), max_episode_steps=600, observe_rotors=True,
                       observe_integral=integral, observe_body=integral)  # fmt: skip
        obs, _ = env.reset(seed=0, options={"state": start})
        pos, rpm = [], []
        for _ in range(40):
            pos.append(np.array(env.unwrapped.core.sim.state.pos)[0])
            rpm.append(np.array(env.unwrapped.core.sim.state.rotor_vel)[0])
            obs, *_ = env.step(pol(obs).astype(np.float32))
        return np.array(pos), np.array(rpm)

    pol = load_policy(path)
    pos, rpm = env_flight(pol)
    assert np.ptp(rpm, axis=0).max() > 1000.0
    assert np.abs(pos - log["pos"][:200:5, 0]).max() < 1e-6
    blind = load_policy(path)
    blind.weights[0][0][:, 22:26] = 0.0  # the rotor inputs
    assert np.abs(env_flight(blind)[0] - pos).max() > 1e-2
    if integral:
        blind = load_policy(path)
        blind.weights[0][0][:, 26:29] = 0.0  # the integral's
        assert np.abs(env_flight(blind)[0] - pos).max() > 1e-3
        blind = load_policy(path)
        blind.weights[0][0][:, 29:] = 0.0  # the body frame's
        assert np.abs(env_flight(blind)[0] - pos).max() > 1e-3


def test_train_in_wind_with_the_integral_and_evaluate_in_wind(tmp_path):
    """``--wind``, ``--turbulence`` and ``--observe-integral`` reach the training environments
    (recorded for resuming and in the policy file), ``quadsim eval`` builds the observation the
    policy was trained on and evaluates in the wind it is told, and another option set in the
    same directory is another run."""
    from quadsim.app.rl.policy import load_policy

    out = tmp_path / "run"
    args = ["train", "quadsim/Recover-v0", "--envs", "16", "--steps", "1024", "--out", str(out),
            "--wind", "0.5", "--turbulence", "moderate", "--observe-integral", "--quiet"]
    r = _cli(*args)
    assert r.returncode == 0, r.stderr
    state = json.loads((out / "state.json").read_text())
    want = {"disturbances": {"wind": 0.5, "turbulence": "moderate"}, "observe_integral": True}
    assert state["env_options"] == want
    meta = load_policy(out / "policy.npz").meta
    assert meta["observe_integral"] and meta["observe_rotors"] and meta["observe_body"]
    assert meta["obs_dim"] == 35
    assert meta["trained_with"] == want
    js = tmp_path / "eval.json"
    r = _cli("eval", str(out / "policy.npz"), "--episodes", "8", "--json", str(js),
             "--turbulence", "light")  # fmt: skip
    assert r.returncode in (0, 1), r.stderr
    res = json.loads(js.read_text())
    assert res["disturbances"] == {"turbulence": "light"} and res["episodes"] == 8
    r = _cli(*args[:-6], "--quiet")  # the same directory without the options
    assert r.returncode == 2 and "holds another training run" in r.stderr


@pytest.mark.parametrize(
    ("args", "msg"),
    [
        (["--latency", "0.5"], "argument --latency: expected a latency in 0..0.01 s"),
        (["--obs-noise", "1,-1,0,0"], "argument --obs-noise: expected 4 standard deviations"),
        (["--obs-noise", "1,2"], "argument --obs-noise: expected 4 standard deviations"),
        (["--threads", "0"], "argument --threads: expected a positive integer"),
    ],
)
def test_bad_disturbance_and_thread_options_exit_2(tmp_path, args, msg):
    """argparse's own errors: the usage, then one line naming the option; no traceback."""
    r = _cli("train", "quadsim/Hover-v0", "--steps", "10", "--out", str(tmp_path / "o"), *args)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert msg in r.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "o").exists()


def test_train_and_eval_with_latency_and_sensor_noise(tmp_path):
    """``--latency``, ``--obs-noise`` and ``--gyro`` become the environments' disturbances
    (``Disturbances.latency = (0, S)``, the four standard deviations, the IMU preset's gyro noise
    as the body rates' σ), recorded for resuming; ``quadsim eval`` flies in them."""
    from quadsim.app.rl.evaluate import make_vector_env
    from quadsim.physics.sensors import load_imu

    out = tmp_path / "run"
    r = _cli("train", "quadsim/Hover-v0", "--envs", "8", "--steps", "512", "--out", str(out),
             "--latency", "0.005", "--obs-noise", "0.01,0.02,0.03,0.04", "--gyro", "bmi088",
             "--quiet")  # fmt: skip
    assert r.returncode == 0, r.stderr
    opts = json.loads((out / "state.json").read_text())["env_options"]
    assert opts == {"disturbances": {"latency": [0.0, 0.005], "obs_noise": [0.01, 0.02, 0.03, 0.04],
                                     "gyro": "bmi088"}}  # fmt: skip
    r = _cli("train", "quadsim/Hover-v0", "--envs", "8", "--steps", "1024", "--out", str(out),
             "--latency", "0.005", "--obs-noise", "0.01,0.02,0.03,0.04", "--gyro", "bmi088",
             "--quiet")  # the same options resume (state.json holds the tuples as lists)
    assert r.returncode == 0 and "resuming at 512 steps" in r.stderr, r.stderr
    env = make_vector_env("quadsim/Hover-v0", 4, **opts)
    d, imu = env.core.disturbances, load_imu("bmi088")
    assert d.latency == (0.0, 0.005) and d.gyro == "bmi088"
    sigma_w = float(np.mean(imu.gyro_noise_density)) * float(imu.rate) ** 0.5
    assert np.allclose(env.core.dist.sigma, [0.01, 0.02, 0.03, sigma_w], rtol=1e-12)
    js = tmp_path / "eval.json"
    r = _cli("eval", str(out / "policy.npz"), "--episodes", "4", "--json", str(js),
             "--latency", "0.01", "--obs-noise", "0.005,0,0,0")  # fmt: skip
    assert r.returncode in (0, 1), r.stderr
    res = json.loads(js.read_text())
    assert res["disturbances"] == {"latency": [0.0, 0.01], "obs_noise": [0.005, 0.0, 0.0, 0.0]}


def test_recover_trains_on_its_own_batch_size_unless_told(tmp_path):
    """``--envs`` left out: Recover-v0 trains on 1024 environments (``train.NUM_ENVS``), Hover on
    256; given, it is used (recorded in ``state.json``, so that a resume keeps it)."""
    from quadsim.app.rl.train import NUM_ENVS, train

    assert NUM_ENVS["quadsim/Recover-v0"] == 1024
    res = train("quadsim/Recover-v0", tmp_path / "r", steps=1, progress=False)
    assert res["num_envs"] == 1024 and res["steps"] == 1024 * 64
    res = train("quadsim/Hover-v0", tmp_path / "h", steps=1, num_envs=8, progress=False)
    assert res["num_envs"] == 8
    # resumed without --envs, a run keeps its own batch size (not today's default)
    res = train("quadsim/Hover-v0", tmp_path / "h", steps=1024, progress=False)
    assert res["num_envs"] == 8 and res["steps"] == 1024
