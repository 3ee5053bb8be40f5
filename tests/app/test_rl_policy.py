"""``quadsim eval`` and the policy files (issue 15, issue 27): a damaged policy file or a bad
option exits 2 naming the file and key; eval says when no episode succeeded, writes strict JSON
and flies a policy only on the observation it was trained on; Recover-v0 trains with its own
episode length and batch, in wind and with sensor noise."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

from rl_helpers import SCENARIO, bad_policy

PY = sys.executable


def _cli(*args: str, timeout: int = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", "quadsim.app.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


@pytest.mark.parametrize(
    ("kind", "msg"),
    [
        ("corrupt", "not a policy file (a damaged .npz archive)"),
        ("text", "not a policy file (not an .npz archive)"),
        ("empty", "not a policy file (not an .npz archive)"),
        ("zip", "not a policy file: no 'meta' entry"),
        ("zipmember", "meta: not a NumPy array (a 3-byte file)"),
        ("strbias", "b1: must hold real numbers; got dtype <U3"),
        ("object", "b0: not a NumPy array (it holds Python objects, not numbers)"),
        ("complex", "W1: must hold real numbers; got dtype complex128"),
        ("nan", "layer 0 has non-finite weights"),
        ("gap", "unexpected arrays ['W2', 'b2'] (layers W0, b0, ... must be numbered from 0"),
        ("metaint", "meta obs_dim must be a positive integer; got 'x'"),
        ("metajson", "meta: not JSON (Expecting property name enclosed in double quotes"),
        ("metalist", "meta: must be a JSON object; got list"),
        ("metaarray", "meta: must be a JSON text; got a float64 array of shape (3,)"),
        ("nometa", "not a policy file: no 'meta' entry"),
        ("chain", "layer 1 takes 9 inputs, layer 0 gives 8"),
    ],
)
def test_the_policy_loader_refuses_damaged_files_naming_the_file_and_key(tmp_path, kind, msg):
    """Fuzzed policy files: each a ``ValueError`` ``FILE: ...`` naming the array or meta key
    (exit 2 on the command line), never another exception, never advice to unpickle."""
    import zipfile

    from quadsim.app.rl.policy import load_policy

    if kind in ("empty", "zip", "zipmember"):
        p = tmp_path / f"{kind}.npz"
        if kind == "empty":
            p.write_bytes(b"")
        else:
            with zipfile.ZipFile(p, "w") as z:
                z.writestr("notes.txt" if kind == "zip" else "meta", "abc")
    else:
        p = bad_policy(tmp_path, kind)
    with pytest.raises(ValueError) as e:
        load_policy(p)
    assert str(e.value).startswith(f"{p}: ") and msg in str(e.value)
    assert "allow_pickle" not in str(e.value)


def test_a_policy_file_with_a_pickle_is_refused_and_runs_no_code(tmp_path, crafted):
    """Issue 40: a policy file is read without pickles: an array of Python objects (a pickle
    that creates a file when loaded, as ``allow_pickle=True`` would) is refused naming the
    file and key, and runs nothing."""
    from quadsim.app.rl.policy import load_policy

    payload, marker = crafted
    p = tmp_path / "policy.npz"
    meta = {"env_id": "quadsim/Hover-v0", "action_level": "rotor_speeds", "obs_dim": 22}
    np.savez(p, meta=np.array(json.dumps(meta)), W0=np.zeros((8, 22)),
             b0=np.array([payload] * 8, dtype=object), W1=np.zeros((4, 8)), b1=np.zeros(4))
    with pytest.raises(ValueError) as e:
        load_policy(p)
    assert str(e.value) == f"{p}: b0: not a NumPy array (it holds Python objects, not numbers)"
    assert not marker.exists()
    with np.load(p, allow_pickle=True) as z:
        z["b0"]  # the payload is live: unpickled, it runs
    assert marker.exists()


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
        (["eval", "{strbias}"], "b1: must hold real numbers"),
        (["eval", "{text}"], "text.npz: not a policy file (not an .npz archive)"),
        (["eval", "{metaint}"], "meta obs_dim must be a positive integer; got 'x'"),
        (["eval", "{shape}", "--seed", "-1"], "--seed must be a non-negative integer; got -1"),
        (["train", "quadsim/Hover-v0", "--steps", "10", "--seed", "-1"],
         "--seed must be an integer in 0..2^32-1; got -1"),
    ],
)  # fmt: skip
def test_bad_input_exits_2_with_one_line(tmp_path, args, msg):
    args = [str(bad_policy(tmp_path, a[1:-1])) if a.startswith("{") else a for a in args]
    r = _cli(*args, "--out", str(tmp_path / "o")) if args[0] == "train" else _cli(*args)
    assert r.returncode == 2, r.stderr
    assert msg in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


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


def _falling_policy(tmp_path: Path, name: str = "fall", inputs: int = 22, **meta) -> Path:
    """A policy that holds every rotor at its lowest speed (every episode falls), for Hover-v0's
    observation unless told."""
    from quadsim.app.rl.policy import save_policy

    w = [(np.zeros((8, inputs)), np.zeros(8)), (np.zeros((4, 8)), np.full(4, -1.0))]
    return save_policy(tmp_path / f"{name}.npz", w, {"env_id": "quadsim/Hover-v0",
                                                     "action_level": "rotor_speeds", **meta})


def test_eval_without_a_success_says_so_and_writes_strict_json(tmp_path):
    """No episode succeeds: exit 1 with a line saying so; the JSON is strict (no NaN: the
    recovery times are null), written whole."""
    js = tmp_path / "eval.json"
    r = _cli("eval", str(_falling_policy(tmp_path)), "--episodes", "4", "--json", str(js))
    assert r.returncode == 1, r.stderr
    assert r.stderr == "quadsim: no episode succeeded (0 of 4); exit status 1\n"
    assert "success 0.0 %" in r.stdout and "no recovery time" in r.stdout

    def no_constants(c):
        raise AssertionError(f"not JSON: {c}")

    res = json.loads(js.read_text(), parse_constant=no_constants)
    assert res["success_rate"] == 0.0 and res["mean_recovery_time_s"] is None
    assert res["median_recovery_time_s"] is None and not list(tmp_path.glob("*.partial"))


def test_a_policy_is_evaluated_only_on_the_observation_it_was_trained_on(tmp_path):
    """A Hover policy has as many inputs as Recover-v0 flown without its rotor-speed estimate and
    body frame, but another observation: refused, naming what differs. A Hover policy trained
    with those options (the same quantities in the same order as Recover-v0's) flies there."""
    from quadsim.app.rl.evaluate import evaluate
    from quadsim.app.rl.policy import load_policy

    p = _falling_policy(tmp_path)
    r = _cli("eval", str(p), "--env", "quadsim/Recover-v0", "--episodes", "2")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert (f"quadsim: {p}: a policy for quadsim/Hover-v0, which observes with none of the "
            "options; quadsim/Recover-v0 observes with observe_rotors, observe_body (they "
            "differ in observe_rotors, observe_body)") in r.stderr  # fmt: skip
    both = _falling_policy(tmp_path, "both", 32, observe_rotors=True, observe_body=True)
    res = evaluate(load_policy(both), "quadsim/Recover-v0", episodes=2)
    assert res["env_id"] == "quadsim/Recover-v0" and res["success_rate"] == 0.0
    with pytest.raises(ValueError, match="a 'rotor_speeds' policy; it cannot act at the "
                                         "'thrust_rates' level"):  # fmt: skip
        evaluate(load_policy(p), "quadsim/Hover-v0", episodes=2, action_level="thrust_rates")


@pytest.mark.parametrize(("kind", "msg"), [("chain", "layer 1 takes 9 inputs"),
                                           ("strbias", "b1: must hold real numbers")])
def test_a_bad_policy_in_a_scenario_exits_2_naming_the_key(tmp_path, kind, msg):
    scen = tmp_path / "policy.toml"
    scen.write_text(SCENARIO.format(path=bad_policy(tmp_path, kind)))
    r = _cli("fly", str(scen), "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "controller.path" in r.stderr and msg in r.stderr
