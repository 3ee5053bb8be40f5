"""``quadsim ros2`` as real processes on a real DDS domain on the loopback (issue 13): a
subscriber process receives odometry and IMU at 200 Hz and their contents equal the log; rotor
speeds from another process drive the plant exactly as ``Simulator.step`` does; bad commands are
counted and dropped; SIGINT and SIGTERM stop the node with the log written; bad options exit 2.

Each test has its own DDS domain and namespace, so tests running side by side do not hear each
other (``tests/app/ros2_helpers.py`` starts the node). The helper processes are
``tests/app/ros2_probe.py`` and ``tests/app/ros2_commander.py``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from ros2_helpers import run_log, start_node

pytest.importorskip("cyclonedds")

ROOT = Path(__file__).resolve().parents[2]
SEED001 = ROOT / "examples" / "seed001_f450_hover.toml"
PY = sys.executable


def test_a_subscriber_process_gets_odometry_and_imu_at_200_hz(tmp_path):
    """Measured: 200.0 Hz on both topics over 5 s (receive times of the subscriber process), the
    stamps 5 ms apart, and every received message equal to the logged state and IMU reading of
    its stamp (bitwise: the same float64)."""
    proc, err = start_node(tmp_path, str(SEED001), "--duration", "9", domain=41, ns="rate")
    out = tmp_path / "probe.json"
    probe = subprocess.run(
        [
            PY,
            str(ROOT / "tests" / "app" / "ros2_probe.py"),
            str(out),
            "5",
            "--ns",
            "rate",
            "--domain-id",
            "41",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert probe.returncode == 0, probe.stderr
    assert proc.wait(timeout=120) == 0, err.read_text()
    got = json.loads(out.read_text())
    log = run_log(tmp_path)
    t_log = log["time"]
    for key in ("rate/odom", "rate/imu"):
        rows = np.array(got[key.replace("rate", "d0")])
        assert len(rows) > 900, key
        recv, stamp = rows[:, 0], rows[:, 1]
        rate = (len(rows) - 1) / (recv[-1] - recv[0])
        assert rate == pytest.approx(200.0, rel=0.02), key
        assert np.allclose(np.diff(stamp), 0.005, atol=1e-9), key
        k = np.searchsorted(t_log, stamp - 1e-9)
        assert np.all(np.abs(t_log[k] - stamp) < 1e-9)
        if key.endswith("odom"):
            assert np.array_equal(rows[:, 2:5], log["pos"][k, 0])
            assert np.array_equal(rows[:, 5:9], log["quat"][k, 0])
            assert np.array_equal(rows[:, 12:15], log["ang_vel"][k, 0])
            from quadsim.physics.rotation import rotate_inverse

            v_body = rotate_inverse(log["quat"][k, 0], log["vel"][k, 0])
            assert np.allclose(rows[:, 9:12], v_body, rtol=0, atol=1e-12)
        else:
            assert np.array_equal(rows[:, 2:5], log["gyro"][k, 0])
            assert np.array_equal(rows[:, 5:8], log["accel"][k, 0])
            # the ADIS16470's white noise per sample at 200 Hz, on the covariance diagonal
            from quadsim.physics.sensors import load_imu

            imu = load_imu("adis16470")
            assert rows[0, 8] == pytest.approx(np.max(imu.gyro_noise_density) ** 2 * 200)
            assert rows[0, 9] == pytest.approx(np.max(imu.accel_noise_density) ** 2 * 200)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["ros2"]["ticks"] == 1800 and summary["n_samples"] == 1800


def test_the_imu_is_published_at_its_rate_as_its_part_declares(tmp_path):
    """An IMU at 100 Hz in a 200-Hz node: ``imu`` is published when a reading is new (its part's
    ROS 2 declaration, every second tick: 100 Hz measured, stamps 10 ms apart) while ``odom``
    keeps 200 Hz; each message is the logged reading of its stamp and its covariance the white
    noise of a 10-ms sample, N²/(0.01 s)."""
    preset = (ROOT / "src" / "quadsim" / "physics" / "presets" / "sensors" / "adis16470.toml")
    text = preset.read_text().replace("rate = { value = 2000.0", "rate = { value = 100.0")
    (tmp_path / "imu100.toml").write_text(text)
    scen = tmp_path / "s.toml"
    scen.write_text(SEED001.read_text().replace('imu = "adis16470"', 'imu = "imu100.toml"'))
    proc, err = start_node(tmp_path, str(scen), "--duration", "6", domain=53, ns="slowimu")
    out = tmp_path / "probe.json"
    probe = subprocess.run([PY, str(ROOT / "tests" / "app" / "ros2_probe.py"), str(out), "3",
                            "--ns", "slowimu", "--domain-id", "53"],
                           capture_output=True, text=True, timeout=120)  # fmt: skip
    assert probe.returncode == 0, probe.stderr
    assert proc.wait(timeout=120) == 0, err.read_text()
    got, log = json.loads(out.read_text()), run_log(tmp_path)
    for key, hz in (("d0/odom", 200.0), ("d0/imu", 100.0)):
        rows = np.array(got[key])
        rate = (len(rows) - 1) / (rows[-1, 0] - rows[0, 0])
        assert rate == pytest.approx(hz, rel=0.03), key
        assert np.allclose(np.diff(rows[:, 1]), 1.0 / hz, atol=1e-9), key
    rows = np.array(got["d0/imu"])
    k = np.searchsorted(log["time"], rows[:, 1] - 1e-9)
    assert np.array_equal(rows[:, 2:5], log["gyro"][k, 0])
    from quadsim.physics.sensors import load_imu

    imu = load_imu(tmp_path / "imu100.toml")
    assert rows[0, 8] == pytest.approx(np.max(imu.gyro_noise_density) ** 2 / 0.01, rel=1e-12)


def test_rotor_speeds_from_another_process_fly_as_simulator_step(tmp_path):
    """Rotor speeds sent by another process reach the plant unchanged (each applied command is
    one that was sent, to the rounding of rad/s and back), and the logged flight equals a fresh
    ``Simulator`` stepped with the logged commands, bitwise. When they stop, the node hovers
    after the timeout."""
    from quadsim.app.scenario import build, load_scenario
    from quadsim.physics.envelope import envelope

    hover = envelope(build(load_scenario(SEED001)).drone).hover_rpm
    # a 1.5 s timeout: a commander process starved on a busy machine must not trip it
    proc, err = start_node(
        tmp_path, str(SEED001), "--duration", "9", "--timeout", "1.5", domain=42, ns="cmd"
    )
    out = tmp_path / "sent.json"
    cmd = subprocess.run(
        [
            PY,
            str(ROOT / "tests" / "app" / "ros2_commander.py"),
            "good",
            str(out),
            "--rpm",
            repr(hover),
            "--seconds",
            "2",
            "--ns",
            "cmd",
            "--domain-id",
            "42",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cmd.returncode == 0, cmd.stderr
    assert proc.wait(timeout=120) == 0, err.read_text()
    sent = np.array(json.loads(out.read_text())["sent"])
    log = run_log(tmp_path)
    cmd_rpm = log["cmd_rpm"][:, 0]
    # the ticks that flew on the sent commands
    match = np.array([np.min(np.max(np.abs(sent - c) / hover, axis=1)) < 1e-12 for c in cmd_rpm])
    assert match.sum() > 300, match.sum()  # about 2 s at 200 Hz
    first, last = np.flatnonzero(match)[[0, -1]]
    # one stretch: nothing else came in between
    assert match[first : last + 1].all(), np.flatnonzero(~match[first : last + 1])
    # the same commands through Simulator.step, from the same start: the same flight
    sim = build(load_scenario(SEED001)).sim
    for k in range(len(cmd_rpm) - 1):
        s = sim.step(cmd_rpm[k])
        assert np.array_equal(np.asarray(s.pos)[0], log["pos"][k + 1, 0]), k
        assert np.array_equal(np.asarray(s.quat)[0], log["quat"][k + 1, 0]), k
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    c = summary["ros2"]["commands"]
    assert c["timeouts"] == 1 and c["dropped"] == 0
    assert c["received"] >= 0.95 * len(sent)
    assert "no command for 1.5 s" in err.read_text()
    # after the fallback the scenario's controller holds the drone where it was
    t_end = log["time"][last] + 1.5
    after = log["time"] > t_end + 1.0
    assert after.sum() > 50
    assert np.all(np.linalg.norm(log["vel"][after, 0], axis=-1) < 0.2)


def test_bad_commands_are_counted_dropped_and_logged(tmp_path):
    proc, err = start_node(tmp_path, str(SEED001), "--duration", "5", domain=43, ns="bad")
    out = tmp_path / "bad.json"
    cmd = subprocess.run(
        [
            PY,
            str(ROOT / "tests" / "app" / "ros2_commander.py"),
            "bad",
            str(out),
            "--ns",
            "bad",
            "--domain-id",
            "43",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cmd.returncode == 0, cmd.stderr
    assert proc.wait(timeout=120) == 0, err.read_text()
    n_bad = json.loads(out.read_text())["sent"]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    c = summary["ros2"]["commands"]
    assert c["dropped"] == n_bad == c["received"]
    text = err.read_text()
    for why in (
        "3 velocities, expected 4",
        "non-finite rotor speed",
        "outside [0,",
        "oversized",
        "joint names",
        "non-finite position",
        "frame 'map'",
        "thrust 2 outside",
        "non-finite orientation",
        "unknown mode",
    ):
        assert why in text, why
    assert text.count("dropped a command on /bad/d0/") == n_bad
    # the drone flew on with the scenario's controller
    log = run_log(tmp_path)
    assert np.abs(log["pos"][-1, 0] - [0.0, 0.0, 1.0]).max() < 0.05


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_sigint_sigterm_and_sighup_stop_the_node_with_the_log_written(tmp_path, sig):
    # SIGHUP: what a dropped SSH session sends
    domain = {signal.SIGINT: 44, signal.SIGTERM: 45, signal.SIGHUP: 47}[sig]
    proc, err = start_node(tmp_path, str(SEED001), domain=domain, ns="sig")
    end = time.monotonic() + 120  # until a chunk of the log is on disk, however loaded we are
    while not list((tmp_path / "run" / "trajectory.parts").glob("part-*.parquet")):
        assert proc.poll() is None and time.monotonic() < end, err.read_text()
        time.sleep(0.05)
    proc.send_signal(sig)  # the chunk on disk and the ticks after it are in the log
    assert proc.wait(timeout=60) == 0, err.read_text()
    assert "Traceback" not in err.read_text()
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["signal"] == signal.Signals(sig).name
    log = run_log(tmp_path)
    assert len(log["time"]) == summary["ros2"]["ticks"] > 0
    assert not (tmp_path / "run" / "trajectory.parts").exists()


@pytest.mark.parametrize(
    ("args", "msg"),
    [
        (["--domain-id", "999"], "--domain-id"),
        (["--namespace", "1bad"], "not a valid ROS 2 namespace"),
        (["--network", "no such iface!"], "not a network interface name"),
        (["--network", "nonexistent0"], "no network interface 'nonexistent0' on this machine"),
        (["--namespace", "a-b"], "not a valid ROS 2 namespace"),
        (["--namespace", "ab\n"], "not a valid ROS 2 namespace"),
        (["--timeout", "-1"], "--timeout"),
        (["--rate", "fast"], "--rate"),
    ],
)
def test_bad_options_exit_2_with_one_line(tmp_path, args, msg):
    earlier = {"summary.json": b"{}", "trajectory.parquet": b"an earlier run's log"}
    (tmp_path / "run").mkdir()
    for name, data in earlier.items():
        (tmp_path / "run" / name).write_bytes(data)
    r = subprocess.run(
        [
            PY,
            "-m",
            "quadsim.app.cli",
            "ros2",
            str(SEED001),
            "--duration",
            "0.1",
            "--out",
            str(tmp_path / "run"),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2, r.stderr
    assert msg in r.stderr and "Traceback" not in r.stderr
    said = [ln for ln in r.stderr.splitlines() if not ln.startswith(("usage:", " "))]
    assert len(said) == 1 and said[0].startswith("quadsim: "), r.stderr  # Cyclone DDS is quiet
    assert {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir()} == earlier


def test_a_bad_scenario_exits_2_naming_the_key(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(SEED001.read_text().replace("dt = 0.005", "dt = -0.005"))
    r = subprocess.run(
        [PY, "-m", "quadsim.app.cli", "ros2", str(bad), "--duration", "0.1"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert r.returncode == 2
    assert "dt" in r.stderr and "Traceback" not in r.stderr


def test_fly_rosbag_reads_back_with_rosbags(tmp_path):
    """``quadsim fly --rosbag``: the MCAP file, read by the ``rosbags`` library (its own CDR
    deserializer and message definitions), holds one message per logged sample on each topic,
    equal to the Parquet log."""
    from rosbags.highlevel import AnyReader

    from quadsim.app.ros2.encode import RPM_TO_RAD_S

    out = tmp_path / "fly"
    r = subprocess.run(
        [
            PY,
            "-m",
            "quadsim.app.cli",
            "fly",
            str(SEED001),
            "--out",
            str(out),
            "--no-plots",
            "--quiet",
            "--rosbag",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    from quadsim.app.io import read_log

    log, _ = read_log(out / "trajectory.parquet")
    n = len(log["time"])
    got: dict[str, list] = {}
    with AnyReader([out / "trajectory.mcap"]) as reader:
        types = {c.topic: c.msgtype for c in reader.connections}
        for conn, stamp, raw in reader.messages():
            got.setdefault(conn.topic, []).append((stamp, reader.deserialize(raw, conn.msgtype)))
    assert types == {
        "/quadsim/d0/odom": "nav_msgs/msg/Odometry",
        "/quadsim/d0/imu": "sensor_msgs/msg/Imu",
        "/quadsim/d0/rotor_speeds": "sensor_msgs/msg/JointState",
        "/quadsim/d0/reference": "geometry_msgs/msg/PoseStamped",
        "/tf": "tf2_msgs/msg/TFMessage",
    }
    assert all(len(v) == n for v in got.values())
    t = np.array([s for s, _ in got["/quadsim/d0/odom"]]) * 1e-9
    assert np.allclose(t, log["time"], atol=1e-9)
    odom = [m for _, m in got["/quadsim/d0/odom"]]
    pos = np.array(
        [[m.pose.pose.position.x, m.pose.pose.position.y, m.pose.pose.position.z] for m in odom]
    )
    assert np.array_equal(pos, log["pos"][:, 0])
    assert all(m.header.frame_id == "world" and m.child_frame_id == "d0/base_link" for m in odom)
    imu = [m for _, m in got["/quadsim/d0/imu"]]
    gyro = np.array(
        [[m.angular_velocity.x, m.angular_velocity.y, m.angular_velocity.z] for m in imu]
    )
    assert np.array_equal(gyro, log["gyro"][:, 0])
    rot = np.array([m.velocity for _, m in got["/quadsim/d0/rotor_speeds"]])
    assert np.allclose(rot, log["rotor_rpm"][:, 0] * RPM_TO_RAD_S, rtol=1e-15, atol=0)
    ref = np.array(
        [
            [m.pose.position.x, m.pose.position.y, m.pose.position.z]
            for _, m in got["/quadsim/d0/reference"]
        ]
    )
    assert np.array_equal(ref, log["ref_pos"][:, 0])
    tf = [m.transforms[0] for _, m in got["/tf"]]
    assert np.array_equal([[x.transform.translation.z] for x in tf], log["pos"][:, 0, 2:3])
    summary = json.loads((out / "summary.json").read_text())
    assert str(out / "trajectory.mcap") in summary["files"]


def test_the_node_module_does_not_load_with_quadsim():
    r = subprocess.run(
        [
            PY,
            "-c",
            "import sys, quadsim, quadsim.app.cli; "
            "print(any(m.startswith(('cyclonedds', 'mcap')) for m in sys.modules))",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ,
    )
    assert r.stdout.strip() == "False", r.stderr


def test_clock_tf_pose_and_mode_commands_in_process():
    """``--rate max`` publishes ``/clock``; ``/tf`` carries every drone; a pose command moves the
    drone there and ``cmd_mode land`` brings it down with the motors off (the node and the
    commanding participant in one process, on their own domain)."""
    from cyclonedds.pub import DataWriter
    from cyclonedds.sub import DataReader
    from cyclonedds.topic import Topic

    from quadsim.app.ros2 import dds
    from quadsim.app.ros2 import msgs as m
    from quadsim.app.ros2.node import Ros2Node
    from quadsim.app.scenario import build, load_scenario

    lines: list[str] = []
    node = Ros2Node(
        build(load_scenario(SEED001)),
        domain_id=50,
        namespace="inproc",
        rate="max",
        log=lines.append,
        jit=False,
    )
    dp = dds.open_participant(50)

    def topic(name, typ):
        return Topic(dp, dds.dds_topic(name), typ)

    clock = DataReader(dp, topic("/clock", m.Clock), qos=dds.clock_qos())
    tf = DataReader(dp, topic("/tf", m.TFMessage), qos=dds.tf_qos())
    pose = DataWriter(dp, topic("/inproc/d0/cmd_pose", m.PoseStamped), qos=dds.command_qos())
    mode = DataWriter(dp, topic("/inproc/d0/cmd_mode", m.String), qos=dds.command_qos())
    end = time.monotonic() + 20
    while not (
        pose.get_matched_subscriptions()
        and mode.get_matched_subscriptions()
        and node.clock_writer.get_matched_subscriptions()
    ):
        assert time.monotonic() < end, "no match"
        time.sleep(0.01)
    pose.write(
        m.PoseStamped(
            header=m.Header(frame_id="world"), pose=m.Pose(position=m.Point(x=1.0, y=0.5, z=1.5))
        )
    )
    time.sleep(0.2)
    node.run(6.0)
    assert np.abs(node.loop.state.pos[0] - [1.0, 0.5, 1.5]).max() < 0.02
    assert node.loop.mode[0] == "pose"
    last = clock.take(N=10)[-1].clock
    assert last.sec + last.nanosec * 1e-9 == pytest.approx(6.0 - 0.005, abs=1e-9)
    msgs = tf.take(N=200)
    assert len(msgs) == 100  # keep last 100
    tr = msgs[-1].transforms[0]
    assert tr.header.frame_id == "world" and tr.child_frame_id == "d0/base_link"
    mode.write(m.String(data="land"))
    time.sleep(0.2)
    node.run(6.0)
    assert node.loop.state.pos[0, 2] < 0.03 and np.all(node.loop.rpm == 0.0)
    assert node.counts == {"received": 2, "dropped": 0, "timeouts": 0}
