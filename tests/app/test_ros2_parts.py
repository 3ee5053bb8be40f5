"""A sensor part's ROS 2 messages: the rangefinder as ``sensor_msgs/Range``, in the bag and live;
its readings in the log of ``quadsim ros2`` as in ``quadsim fly``'s (issue 40).

Checked against independent readers: the ``rosbags`` library's own CDR serializer and MCAP
reader, and a Cyclone DDS subscriber of the live node.
"""

from __future__ import annotations

import json
import math
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from ros2_helpers import start_node

pytest.importorskip("cyclonedds")
rosbags_typesys = pytest.importorskip("rosbags.typesys")

from quadsim.app.ros2 import encode  # noqa: E402
from quadsim.loop.parts.rangefinder import Rangefinder  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SEED001 = ROOT / "examples" / "seed001_f450_hover.toml"
TOF = '\n[sensors.tof]\nkind = "rangefinder"\nrate = {rate}\nmax_range = 3.0\n'


def _scenario(tmp: Path, rate: float) -> Path:
    path = tmp / "tof.toml"
    path.write_text(SEED001.read_text() + TOF.format(rate=rate))
    return path


def test_the_range_message_is_the_ros2_type_with_inf_without_a_reading():
    part = Rangefinder("tof", max_range=3.0)
    (topic,) = encode.part_topics([part], 0.002, [20])
    store = rosbags_typesys.get_typestore(rosbags_typesys.Stores.ROS2_HUMBLE)
    name = "sensor_msgs/msg/Range"
    for rng, valid in ((0.987654321, 1.0), (0.0, 0.0)):
        readings = {"tof_range": np.array([5.0, rng]), "tof_valid": np.array([1.0, valid])}
        msg = encode.part_message(topic, 1.25, readings, 1, frame="d1/base_link")
        back = store.deserialize_cdr(bytes(msg.serialize()), name)
        assert back.header.frame_id == "d1/base_link"
        assert (back.header.stamp.sec, back.header.stamp.nanosec) == (1, 250_000_000)
        assert back.radiation_type == 1  # infrared
        assert back.field_of_view == pytest.approx(math.radians(27.0), abs=1e-3)
        assert (back.min_range, back.max_range) == (np.float32(0.04), np.float32(3.0))
        assert back.range == (np.float32(rng) if valid else np.inf)
        theirs = store.serialize_cdr(back, name)
        assert bytes(theirs) == bytes(msg.serialize())
    with pytest.raises(ValueError, match="second ROS 2 message"):
        encode.part_topics([part, part], 0.002, [20, 20])


def test_fly_rosbag_holds_the_rangefinder(tmp_path):
    """``quadsim fly --rosbag``: ``/quadsim/d0/tof`` is ``sensor_msgs/Range``, one message per
    logged sample, the logged range (float32) where it is a reading."""
    from rosbags.highlevel import AnyReader

    from quadsim.app.io import read_log

    out = tmp_path / "fly"
    r = subprocess.run([sys.executable, "-m", "quadsim.app.cli", "fly",
                        str(_scenario(tmp_path, 25.0)), "--out", str(out), "--no-plots", "--quiet",
                        "--rosbag"], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr
    log, _ = read_log(out / "trajectory.parquet")
    with AnyReader([out / "trajectory.mcap"]) as reader:
        (conn,) = [c for c in reader.connections if c.topic == "/quadsim/d0/tof"]
        assert conn.msgtype == "sensor_msgs/msg/Range"
        got = [reader.deserialize(raw, conn.msgtype) for _, _, raw in reader.messages([conn])]
    assert len(got) == len(log["time"])
    rng = np.array([m.range for m in got])
    valid = log["tof_valid"][:, 0] > 0.5
    assert valid.mean() > 0.9  # it hovers at 1 m, in range
    assert np.array_equal(rng[valid], log["tof_range"][valid, 0].astype(np.float32))
    assert np.all(np.isinf(rng[~valid]))
    assert np.all(np.abs(rng[valid] - log["pos"][valid, 0, 2]) < 0.2)  # ~ height, tilted


def test_the_node_publishes_each_new_reading(tmp_path):
    """The live node (in process, ``--rate max``) publishes ``/<ns>/d0/tof`` at the part's 10 Hz,
    stamped at its samples, ``Range`` near the hover height."""
    from cyclonedds.sub import DataReader
    from cyclonedds.topic import Topic

    from quadsim.app.ros2 import dds
    from quadsim.app.ros2 import msgs as m
    from quadsim.app.ros2.node import Ros2Node
    from quadsim.app.scenario import build, load_scenario

    node = Ros2Node(build(load_scenario(_scenario(tmp_path, 10.0))), domain_id=52,
                    namespace="parts", rate="max", log=lambda s: None, jit=False)  # fmt: skip
    assert node.topics["d0/tof"] == "/parts/d0/tof"
    dp = dds.open_participant(52)
    reader = DataReader(dp, Topic(dp, dds.dds_topic("/parts/d0/tof"), m.Range),
                        qos=dds.sensor_qos())  # fmt: skip
    end = time.monotonic() + 20
    while not node.pub[0]["tof"].get_matched_subscriptions():
        assert time.monotonic() < end, "no match"
        time.sleep(0.01)
    got = []
    for _ in range(10):  # 0.2 s of flight: 2 readings each, within the reader's depth of 5
        node.run(0.2)
        got += reader.take(N=10)
    stamps = np.array([g.header.stamp.sec + g.header.stamp.nanosec * 1e-9 for g in got])
    assert len(got) == 20
    assert np.allclose(stamps, 0.1 * np.arange(20), atol=1e-9)
    assert all(g.header.frame_id == "d0/base_link" and g.radiation_type == 1 for g in got)
    assert np.all(np.abs(np.array([g.range for g in got]) - 1.0) < 0.25)


def _tof_columns(log: dict, meta_columns: list) -> None:
    """The rangefinder's columns are in the log, declared as ``quadsim fly`` declares them, with
    readings of the hover height."""
    assert [c["key"] for c in meta_columns] == ["tof_range", "tof_valid"]
    assert log["tof_range"].shape == log["tof_valid"].shape == (len(log["time"]), 1)
    valid = log["tof_valid"][:, 0] > 0.5
    assert valid.mean() > 0.9  # it hovers at 1 m, in range
    assert np.all(np.abs(log["tof_range"][valid, 0] - log["pos"][valid, 0, 2]) < 0.2)


def test_the_node_logs_the_part_columns_and_exits_0(tmp_path):
    """``quadsim ros2`` of a scenario with a rangefinder, to the end of ``--duration``: exit 0,
    the log has ``tof_range`` and ``tof_valid`` (the part's declared outputs, as ``quadsim fly``
    logs them), every tick logged, and no parts folder left."""
    from quadsim.app.io import read_log

    proc, err = start_node(tmp_path, str(_scenario(tmp_path, 25.0)), "--duration", "1",
                           domain=56, ns="tofend")  # fmt: skip
    assert proc.wait(timeout=120) == 0, err.read_text()
    log, meta = read_log(tmp_path / "run" / "trajectory.parquet")
    _tof_columns(log, meta["columns"])
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["ros2"]["ticks"] == len(log["time"]) == 200
    assert summary["rates_hz"]["tof"] == 25.0
    assert not (tmp_path / "run" / "trajectory.parts").exists()


def test_sigterm_mid_run_keeps_a_recoverable_log_with_the_part_columns(tmp_path):
    """SIGTERM while the node runs (a log part per half second): every part written so far holds
    the rangefinder's columns, so ``quadsim recover`` of a copy of them (what a hard kill leaves)
    rebuilds a log that has them; the node itself exits 0 with them in its log."""
    scen = _scenario(tmp_path, 25.0)
    more = "settle = 3.0\nchunk_steps = 100\npart_seconds = 0"  # a part per half second
    scen.write_text(scen.read_text().replace("settle = 3.0", more))
    proc, err = start_node(tmp_path, str(scen), domain=57, ns="tofsig")
    parts = tmp_path / "run" / "trajectory.parts"
    end = time.monotonic() + 60
    while not list(parts.glob("part-*.parquet")):
        assert proc.poll() is None and time.monotonic() < end, err.read_text()
        time.sleep(0.05)
    killed = tmp_path / "killed"  # what a SIGKILL now would leave
    shutil.copytree(parts, killed / "trajectory.parts",
                    ignore=shutil.ignore_patterns("*.partial"))  # fmt: skip
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0, err.read_text()
    from quadsim.app.io import read_log
    from quadsim.app.run import recover

    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["signal"] == "SIGTERM"
    log, meta = read_log(tmp_path / "run" / "trajectory.parquet")
    assert len(log["time"]) == summary["ros2"]["ticks"] > 0
    _tof_columns(log, meta["columns"])
    assert recover(killed, plots=False)["recovered"]
    got, meta = read_log(killed / "trajectory.parquet")
    assert len(got["time"]) >= 100
    _tof_columns(got, meta["columns"])
