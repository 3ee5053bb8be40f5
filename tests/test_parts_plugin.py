"""examples/plugins: a package outside src/ with its own sensors (one with its own ROS 2 message
type and vector parameters) and controller, flown by the real `quadsim fly` command from a
scenario on all three runners, in an environment and on `quadsim ros2`, with no edit to quadsim
(issue 40, items 6 and 7)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from quadsim.app.io import read_log
from quadsim.engines import native
from quadsim.physics.rotation import rotate_inverse

ROOT = Path(__file__).resolve().parents[1]
PLUGINS = ROOT / "examples" / "plugins"
SCENARIO = (PLUGINS / "hover_tof.toml").read_text()
RUNNERS = [("numpy", "python"), ("jax", "scan")] + ([("native", "compiled")]
                                                   if native.available() else [])  # fmt: skip
ROS2 = all(importlib.util.find_spec(m) for m in ("cyclonedds", "mcap", "rosbags"))
"""The ``ros2`` extra and the tests' independent reader (rosbags) are installed."""
FIELD_UT = np.array([1.13, 21.57, -43.5])  # the scenario's [sensors.mag]
BIAS_UT = np.array([2.0, -1.0, 0.5])
MAG = "sensor_msgs/msg/MagneticField"


def _env(*paths):
    """The environment of a process that imports the plugins (and ``paths``)."""
    extra = [str(PLUGINS), *map(str, paths), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(extra)}


def _fly(tmp_path, text, name, *flags, paths=()):
    scen = tmp_path / f"{name}.toml"
    scen.write_text(text)
    r = subprocess.run([sys.executable, "-m", "quadsim.app.cli", "fly", str(scen), "--out",
                        str(tmp_path / name), "--quiet", *flags], capture_output=True, text=True,
                       env=_env(*paths), timeout=600)  # fmt: skip
    return r, tmp_path / name


@pytest.fixture(scope="module")
def flown(tmp_path_factory):
    """The example on every runner; the last one (native where there is a compiler) also
    writes its ROS 2 bag (``--rosbag``) where the ``ros2`` extra is installed."""
    tmp = tmp_path_factory.mktemp("plugins")
    out = {}
    for backend, _ in RUNNERS:
        text = SCENARIO.replace('backend = "native"', f'backend = "{backend}"')
        bag = ("--rosbag",) if ROS2 and backend == RUNNERS[-1][0] else ()
        r, d = _fly(tmp, text, backend, *bag)
        assert r.returncode == 0 and "could not be traced" not in r.stderr, r.stderr
        summary = json.loads((d / "summary.json").read_text())
        out[backend] = (summary, *read_log(d / "trajectory.parquet"))
        if bag:
            out["bag"] = d / "trajectory.mcap"
    return out


@pytest.mark.parametrize(("backend", "loop"), RUNNERS)
def test_the_plugin_flies_on_every_runner(flown, backend, loop):
    summary, log, meta = flown[backend]
    assert summary["loop"] == loop and (loop == "python" or summary["loop_reason"] is None)
    assert summary["rates_hz"]["tof"] == 25.0 and summary["rates_hz"]["sonar"] == 10.0
    assert {"tof_range", "tof_valid", "sonar_height", "sonar_valid"} <= set(log)
    assert [c["key"] for c in meta["columns"]] == ["tof_range", "tof_valid", "sonar_height",
                                                   "sonar_valid", "mag_field"]  # fmt: skip
    z = log["pos"][..., 2]
    assert np.abs(z[-1] - 1.2).max() < 0.03  # held at the step's height on the rangefinder
    assert np.abs(log["sonar_height"][-1] - z[-1]).max() < 0.15
    ref = flown["numpy"][1]
    for key in ("pos", "tof_range", "sonar_height", "mag_field"):
        np.testing.assert_allclose(log[key], ref[key], rtol=0, atol=1e-9)


def _mag_expected(log):
    """The magnetometer's noise-free reading [T] of the logged attitudes (body from world)."""
    world = np.broadcast_to(FIELD_UT * 1e-6, (*log["quat"].shape[:-1], 3))
    return rotate_inverse(log["quat"], world) + BIAS_UT * 1e-6


@pytest.mark.parametrize(("backend", "loop"), RUNNERS)
def test_the_magnetometer_reads_the_field_in_the_body_on_every_runner(flown, backend, loop):
    """The plugin's magnetometer (vector parameters ``field`` and ``bias`` from the scenario's
    lists): the Earth's field turned into the body by the attitude, plus the bias, within its
    0.3 µT noise, logged as ``mag_field`` [T] ``(T, N, 3)``; its parameters in the run metadata
    with their units and shapes."""
    summary, log, meta = flown[backend]
    assert summary["rates_hz"]["mag"] == 100.0
    assert log["mag_field"].shape == (len(log["time"]), 2, 3)
    (col,) = [c for c in meta["columns"] if c["key"] == "mag_field"]
    assert col["columns"] == ["mag_field_0", "mag_field_1", "mag_field_2"]
    assert col["units"] == ["T"] * 3
    err = (log["mag_field"] - _mag_expected(log)) / 0.3e-6  # in noise standard deviations
    assert np.abs(err).max() < 5.5 and abs(err.std() - 1.0) < 0.1 and abs(err.mean()) < 0.1
    yawed = np.abs(log["mag_field"][:, :, 0] - log["mag_field"][:1, :, 0]).max()
    assert yawed > 1e-6  # it turns with the drone (the step tilts it)
    params = meta["part_params"]["mag"]
    assert params["kind"] == "quadsim_plugin_demo.magnetometer:Magnetometer"
    assert params["rate_hz"] == 100.0
    assert params["params"]["field"] == {"value": FIELD_UT.tolist(), "unit": "uT", "shape": [3]}
    assert params["params"]["bias"] == {"value": BIAS_UT.tolist(), "unit": "uT", "shape": [3]}
    assert params["params"]["soft_iron"] == {"value": np.eye(3).tolist(), "unit": "1",
                                             "shape": [3, 3]}  # fmt: skip
    assert params["params"]["noise"] == {"value": 0.3, "unit": "uT", "shape": []}
    assert meta["part_params"]["sonar"]["params"]["noise"]["unit"] == "m"


@pytest.mark.skipif(not ROS2, reason="needs the ros2 extra (cyclonedds, mcap) and rosbags")
def test_the_bag_holds_the_plugins_own_message_type(flown):
    """``quadsim fly --rosbag``: ``/quadsim/d<i>/mag`` is ``sensor_msgs/MagneticField`` (the
    plugin's declaration, no type of quadsim's own), one per logged sample, read back by rosbags:
    the logged field, stamped, in the drone's frame, with the covariance ``σ² I``."""
    from rosbags.highlevel import AnyReader

    log = flown[RUNNERS[-1][0]][1]
    with AnyReader([flown["bag"]]) as reader:
        for i in range(2):
            (conn,) = [c for c in reader.connections if c.topic == f"/quadsim/d{i}/mag"]
            assert conn.msgtype == MAG
            got = [reader.deserialize(raw, conn.msgtype) for _, _, raw in reader.messages([conn])]
            assert len(got) == len(log["time"])
            field = np.array([[g.magnetic_field.x, g.magnetic_field.y, g.magnetic_field.z]
                              for g in got])  # fmt: skip
            assert np.array_equal(field, log["mag_field"][:, i])
            stamps = np.array([g.header.stamp.sec + 1e-9 * g.header.stamp.nanosec for g in got])
            np.testing.assert_allclose(stamps, log["time"], rtol=0, atol=1e-9)
            assert {g.header.frame_id for g in got} == {f"d{i}/base_link"}
            np.testing.assert_allclose(got[-1].magnetic_field_covariance.reshape(3, 3),
                                       np.eye(3) * (0.3e-6) ** 2, rtol=1e-12, atol=0)  # fmt: skip


def test_the_magnetometer_reads_in_an_environment(tmp_path):
    """``HoverEnv(sensors={"mag": ...})`` with the plugin's table (its vector parameters as
    lists), in a process of its own: the reading ends the observation and is in
    ``info["sensors"]`` every control step (100 Hz), of the Earth's field's magnitude after the
    bias; the compiled step (where there is a compiler) gives the reference path's readings."""
    code = f"""
import json, numpy as np
from quadsim.app.envs import HoverEnv
table = {{"kind": "quadsim_plugin_demo.magnetometer:Magnetometer", "field": {FIELD_UT.tolist()},
         "bias": {BIAS_UT.tolist()}, "rate": 100.0}}
out = {{}}
for compiled in ({"(False, True)" if native.available() else "(False,)"}):
    env = HoverEnv(sensors={{"mag": table}}, backend="native" if compiled else "numpy",
                   compiled=compiled)
    obs, info = env.reset(seed=4)
    rows = []
    for _ in range(30):
        obs, r, term, trunc, info = env.step(np.zeros(env.action_space.shape))
        f = info["sensors"]["mag_field"]
        rows.append(f.tolist() + obs[-3:].tolist() + [float(info["sensors"]["mag_fresh"])])
    out[str(compiled)] = rows
print(json.dumps(out))
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=_env(), timeout=600)  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    got = {k: np.array(v) for k, v in json.loads(r.stdout.splitlines()[-1]).items()}
    ref = got["False"]
    np.testing.assert_allclose(ref[:, 3:6], ref[:, :3], rtol=1e-6, atol=0)  # the observation
    assert np.all(ref[:, 6] == 1.0)  # fresh at every control step
    norm = np.linalg.norm(ref[:, :3] * 1e6 - BIAS_UT, axis=1)  # rotation keeps the magnitude
    assert np.all(np.abs(norm - np.linalg.norm(FIELD_UT)) < 2.0)
    if "True" in got:
        np.testing.assert_allclose(got["True"][:, :3], ref[:, :3], rtol=0, atol=1e-15)


def test_a_plugin_that_cannot_be_found_is_a_bad_input(tmp_path):
    r, _ = _fly(tmp_path, SCENARIO.replace("quadsim_plugin_demo.sonar:Sonar",
                                           "quadsim_plugin_demo.sonar:Lidar"), "bad")  # fmt: skip
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "sensors.sonar.kind (line" in r.stderr and "has no 'Lidar'" in r.stderr
    r, _ = _fly(tmp_path, SCENARIO.replace('sensor = "tof"', 'sensor = "sonar"'), "reads")
    assert r.returncode == 2 and "reads ['sonar_range'], which no sensor" in r.stderr, r.stderr
    r, _ = _fly(tmp_path, SCENARIO.replace('rate = 10.0', 'rate = 10.0\nnoise = -1.0'), "param")
    assert r.returncode == 2 and "sensors.sonar.noise (line" in r.stderr, r.stderr


@pytest.mark.skipif(not ROS2, reason="needs the ros2 extra (cyclonedds, mcap) and rosbags")
def test_quadsim_ros2_publishes_the_magnetometer_and_logs_it(tmp_path):
    """``quadsim ros2`` of the example (a real process, 3 s): ``/plug/d0/mag`` is the plugin's
    ``sensor_msgs/MagneticField`` at its 100 Hz, each message (read back by rosbags' CDR
    deserializer) the logged reading of its stamp; the log holds ``mag_field`` and the
    magnetometer's parameters."""
    from cyclonedds.sub import DataReader
    from cyclonedds.topic import Topic
    from rosbags.typesys import Stores, get_typestore

    from quadsim.app.ros2 import dds
    from quadsim.app.ros2 import msgs as m

    scen = tmp_path / "mag.toml"
    scen.write_text(SCENARIO)
    err = tmp_path / "node.err"
    proc = subprocess.Popen([sys.executable, "-m", "quadsim.app.cli", "ros2", str(scen),
                             "--duration", "3", "--domain-id", "61", "--namespace", "plug",
                             "--out", str(tmp_path / "run")], stdout=subprocess.DEVNULL,
                            stderr=open(err, "w"), cwd=tmp_path, env=_env())  # fmt: skip
    try:
        dp = dds.open_participant(61)
        reader = DataReader(dp, Topic(dp, dds.dds_topic("/plug/d0/mag"), m.message_class(MAG)),
                            qos=dds.sensor_qos())  # fmt: skip
        got, end = [], time.monotonic() + 180
        while proc.poll() is None and time.monotonic() < end:
            got += reader.take(N=64)
            time.sleep(0.002)
        got += reader.take(N=64)
        assert proc.wait(timeout=60) == 0, err.read_text()
    finally:
        proc.kill()
    assert "/plug/d0/{odom,imu,tof,mag,rotor_speeds,reference}" in err.read_text()
    log, meta = read_log(tmp_path / "run" / "trajectory.parquet")
    assert log["mag_field"].shape == (len(log["time"]), 2, 3) and len(log["time"]) == 300
    assert meta["part_params"]["mag"]["params"]["field"]["value"] == FIELD_UT.tolist()
    err_sd = (log["mag_field"] - _mag_expected(log)) / 0.3e-6
    assert np.abs(err_sd).max() < 5.5
    store = get_typestore(Stores.ROS2_HUMBLE)
    assert sum(isinstance(x, m.message_class(MAG)) for x in got) > 100  # of 300 published
    by_stamp = {round(float(t), 6): k for k, t in enumerate(log["time"])}
    for msg in [x for x in got if isinstance(x, m.message_class(MAG))]:  # not lifecycle notices
        back = store.deserialize_cdr(bytes(msg.serialize()), MAG)
        t = back.header.stamp.sec + 1e-9 * back.header.stamp.nanosec
        k = by_stamp[round(t, 6)]  # at its 100 Hz: a stamp of the log (every 5th of 500 Hz)
        f = back.magnetic_field
        assert [f.x, f.y, f.z] == log["mag_field"][k, 0].tolist()
        assert back.header.frame_id == "d0/base_link"
        assert back.magnetic_field_covariance[0] == pytest.approx(0.09e-12, rel=1e-12)


BAD_MAG = """
from quadsim.loop.parts import Ros2
from quadsim_plugin_demo.magnetometer import Magnetometer


class BadMag(Magnetometer):
    def ros2(self, ctx):
        return (Ros2({typ!r}, (({path!r}, "field"),)),)
"""


def _bad(tmp_path, typ, path):
    """The example with a magnetometer whose ROS 2 declaration is ``(typ, path <- field)``."""
    (tmp_path / "badmag.py").write_text(BAD_MAG.format(typ=typ, path=path))
    text = SCENARIO.replace("quadsim_plugin_demo.magnetometer:Magnetometer", "badmag:BadMag")
    line = text.splitlines().index("[sensors.mag]") + 1
    return text.replace('backend = "native"', 'backend = "numpy"'), line


@pytest.mark.skipif(not ROS2, reason="needs the ros2 extra (cyclonedds, mcap)")
@pytest.mark.parametrize(("typ", "path", "why"), [
    ("sensor_msgs/msg/Magnetometer", "magnetic_field", "no ROS 2 message type "
     "'sensor_msgs/msg/Magnetometer' here (did you mean 'sensor_msgs/msg/MagneticField'?)"),
    (MAG, "magnetic", f"{MAG} has no field 'magnetic' ({MAG} has header, magnetic_field, "
     "magnetic_field_covariance)"),
    (MAG, "magnetic_field_covariance", f"{MAG}.magnetic_field_covariance holds 9 numbers; the "
     "output 'field' gives 3"),
    ("sensor_msgs/msg/NavSatFix", "status", "sensor_msgs/msg/NavSatFix.status holds int8/uint16 "
     "values; an output fills only float32 and float64 fields"),
])  # fmt: skip
def test_a_bad_message_declaration_is_refused_before_flying(tmp_path, typ, path, why):
    """``quadsim fly --rosbag`` of a plugin whose message type is unknown, or whose field does
    not exist or does not fit its output: exit 2 with the file, the sensor's table and its line,
    before anything flies (no output folder; it was exit 2 after the whole flight)."""
    text, line = _bad(tmp_path, typ, path)
    r, out = _fly(tmp_path, text, "bad", "--rosbag", paths=[tmp_path])
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert f"bad.toml: sensors.mag (line {line}): its ROS 2 message: {why}" in r.stderr, r.stderr
    assert not out.exists()


@pytest.mark.skipif(not ROS2, reason="needs the ros2 extra (cyclonedds, mcap)")
def test_quadsim_ros2_refuses_a_bad_message_declaration_before_starting(tmp_path):
    text, line = _bad(tmp_path, MAG, "magnetic_field.w")
    scen = tmp_path / "bad.toml"
    scen.write_text(text)
    r = subprocess.run([sys.executable, "-m", "quadsim.app.cli", "ros2", str(scen), "--duration",
                        "1", "--domain-id", "62", "--out", str(tmp_path / "run")],
                       capture_output=True, text=True, env=_env(tmp_path), timeout=300)  # fmt: skip
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert (f"bad.toml: sensors.mag (line {line}): its ROS 2 message: {MAG} has no field "
            f"'magnetic_field.w'") in r.stderr, r.stderr
    assert not (tmp_path / "run").exists()
