"""quadsim's ROS 2 message types against an independent implementation: the ``rosbags``
library's CDR serializer and its ROS 2 message definitions. The bytes quadsim's Cyclone DDS
types write are the bytes a ROS 2 node writes, field for field."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("cyclonedds")
rosbags_typesys = pytest.importorskip("rosbags.typesys")

from quadsim.app.ros2 import encode  # noqa: E402
from quadsim.app.ros2 import msgs as m  # noqa: E402
from quadsim.loop.parts.standard import Imu  # noqa: E402
from quadsim.physics.sensors import load_imu  # noqa: E402


def _imu_message(t, gyro, accel, frame, period=1, dt=0.005):
    """The IMU part's ``sensor_msgs/Imu`` (its declaration, :func:`encode.part_message`)."""
    (topic,) = encode.part_topics([Imu(load_imu("bmi088"))], dt, [period])
    readings = {"gyro": np.asarray([gyro], float), "accel": np.asarray([accel], float)}
    return encode.part_message(topic, t, readings, 0, frame=frame)

# mavros_msgs/msg/AttitudeTarget as published by the mavros project (constants included)
ATTITUDE_TARGET_MSG = """\
std_msgs/Header header
uint8 type_mask
uint8 IGNORE_ROLL_RATE = 1
uint8 IGNORE_PITCH_RATE = 2
uint8 IGNORE_YAW_RATE = 4
uint8 IGNORE_THRUST = 64
uint8 IGNORE_ATTITUDE = 128
geometry_msgs/Quaternion orientation
geometry_msgs/Vector3 body_rate
float32 thrust
"""


@pytest.fixture(scope="module")
def store():
    ts = rosbags_typesys.get_typestore(rosbags_typesys.Stores.ROS2_HUMBLE)
    ts.register(
        rosbags_typesys.get_types_from_msg(ATTITUDE_TARGET_MSG, "mavros_msgs/msg/AttitudeTarget")
    )
    return ts


def _samples() -> list:
    q = (0.1, -0.2, 0.3, math.sqrt(1 - 0.14))
    return [
        encode.odometry(
            12.345678901,
            [1.5, -2.25, 3.0],
            q,
            [0.1, 0.2, -0.3],
            [1.0, -2.0, 3.0],
            child="d3/base_link",
        ),
        _imu_message(0.005, [0.01, -0.02, 0.03], [0.1, 0.2, 9.81], "d0/base_link"),
        encode.rotors(1.0, [1000.0, 2000.0, 3000.0, 4000.5], frame="d0/base_link"),
        encode.reference(2.5, [0.0, 1.0, 2.0], 0.7),
        m.TFMessage(
            transforms=[
                encode.transform(3.0, [1, 2, 3], q, child=f"d{i}/base_link") for i in range(3)
            ]
        ),
        m.Clock(clock=encode.stamp(1234.000000001)),
        m.String(data="hover"),
        m.AttitudeTarget(
            header=m.Header(frame_id="base_link"),
            type_mask=4,
            orientation=m.Quaternion(x=0.0, y=0.1, z=0.0, w=math.sqrt(0.99)),
            body_rate=m.Vector3(x=0.0, y=0.0, z=0.5),
            thrust=0.625,
        ),
        m.JointState(name=["rotor_0", "rotor_1"], position=[], velocity=[1.0, 2.0], effort=[3.0]),
    ]


def _as_rosbags(ts, msg):
    """The same message built from rosbags' own classes (recursively)."""
    from dataclasses import fields, is_dataclass

    name = m.ros_name(type(msg))
    cls = ts.types[name]
    kwargs = {}
    for f in fields(msg):
        v = getattr(msg, f.name)
        if is_dataclass(v):
            v = _as_rosbags(ts, v)
        elif isinstance(v, list) and v and is_dataclass(v[0]):
            v = [_as_rosbags(ts, x) for x in v]
        elif isinstance(v, list) and (not v or isinstance(v[0], float)):
            v = np.asarray(v, dtype=np.float64)
        kwargs[f.name] = v
    return cls(**kwargs)


@pytest.mark.parametrize("i", range(9))
def test_bytes_equal_the_rosbags_serializer(store, i):
    msg = _samples()[i]
    name = m.ros_name(type(msg))
    ours = bytes(msg.serialize())
    theirs = bytes(store.serialize_cdr(_as_rosbags(store, msg), name))
    assert ours == theirs, name
    back = store.deserialize_cdr(ours, name)
    assert bytes(store.serialize_cdr(back, name)) == ours


def test_every_type_is_a_ros2_type_with_the_same_fields(store):
    """Each class's field names, in order, are the ROS 2 definition's (rosbags' store), and the
    ``.msg`` text quadsim puts in MCAP schemas parses to those fields."""
    from dataclasses import fields

    for name, cls in m._CLASSES.items():
        ours = [f.name for f in fields(cls)]
        theirs = [f[0] for f in store.fielddefs[name][1]]
        assert ours == theirs, name
        parsed = rosbags_typesys.get_types_from_msg(m.MSG_TEXT[name], name)
        assert [f[0] for f in parsed[name][1]] == theirs, name


def test_msgdef_lists_every_dependency_once():
    text = m.msgdef("nav_msgs/msg/Odometry")
    deps = [line[5:] for line in text.splitlines() if line.startswith("MSG: ")]
    assert deps == [
        "std_msgs/Header",
        "builtin_interfaces/Time",
        "geometry_msgs/PoseWithCovariance",
        "geometry_msgs/Pose",
        "geometry_msgs/Point",
        "geometry_msgs/Quaternion",
        "geometry_msgs/TwistWithCovariance",
        "geometry_msgs/Twist",
        "geometry_msgs/Vector3",
    ]


def test_odometry_twist_is_in_the_body_frame():
    """REP 105: the twist is in ``child_frame_id``. Yawed by 90 deg, a world +x velocity is a
    body -y velocity."""
    q = (0.0, 0.0, math.sin(math.pi / 4), math.cos(math.pi / 4))
    o = encode.odometry(0.0, [0, 0, 0], q, [1.0, 0.0, 0.0], [0.0, 0.0, 0.5], child="d0/base_link")
    v = o.twist.twist.linear
    assert (v.x, v.y, v.z) == pytest.approx((0.0, -1.0, 0.0), abs=1e-15)
    assert o.twist.twist.angular.z == 0.5 and o.header.frame_id == "world"


def test_stamps_and_rotor_units():
    s = encode.stamp(1.999999999999)
    assert (s.sec, s.nanosec) == (2, 0)
    s = encode.stamp(12.3456789)
    assert (s.sec, s.nanosec) == (12, 345678900)
    j = encode.rotors(0.0, [60.0, 120.0, 0.0, 6000.0], frame="x")
    assert j.velocity == pytest.approx([2 * math.pi, 4 * math.pi, 0.0, 200 * math.pi])
    assert j.name == ["rotor_0", "rotor_1", "rotor_2", "rotor_3"]


@pytest.mark.parametrize("period", [1, 4])
def test_the_imu_message_comes_from_the_imu_parts_declaration(period):
    """``sensor_msgs/Imu`` as the IMU part declares it: the readings in ``angular_velocity`` and
    ``linear_acceleration``, no orientation (REP 145: ``orientation_covariance[0] = -1``), the
    covariances diagonal with the white-noise variance ``N²/T`` of a sample ``T`` apart (the
    BMI088 data sheet's densities: 0.014 deg/s/√Hz and 175 µg/√Hz on every axis)."""
    n_g = np.full(3, math.radians(0.014))
    n_a = np.full(3, 175e-6 * 9.80665)
    dt = 0.002
    msg = _imu_message(1.5, [0.1, -0.2, 0.3], [0.4, 0.5, 9.6], "d2/base_link", period, dt)
    assert msg.header.frame_id == "d2/base_link" and msg.header.stamp.sec == 1
    w, a = msg.angular_velocity, msg.linear_acceleration
    assert (w.x, w.y, w.z, a.x, a.y, a.z) == (0.1, -0.2, 0.3, 0.4, 0.5, 9.6)
    q = msg.orientation
    assert (q.x, q.y, q.z, q.w) == (0.0, 0.0, 0.0, 0.0)
    assert msg.orientation_covariance == [-1.0] + [0.0] * 8
    cov_g = np.asarray(msg.angular_velocity_covariance).reshape(3, 3)
    cov_a = np.asarray(msg.linear_acceleration_covariance).reshape(3, 3)
    np.testing.assert_allclose(cov_g, np.diag(n_g**2 / (period * dt)), rtol=1e-12, atol=0)
    np.testing.assert_allclose(cov_a, np.diag(n_a**2 / (period * dt)), rtol=1e-12, atol=0)
    assert cov_g[0, 0] > 0 and cov_a[0, 0] > 0


def test_a_part_message_field_must_fit_its_output():
    """A declaration whose field does not exist, or holds another count of numbers than its
    output gives, is refused when the topics are made (not at the first message)."""
    from quadsim.loop.parts import Ros2

    class Bad(Imu):
        def __init__(self, decl):
            super().__init__(load_imu("bmi088"))
            self.decl = decl

        def ros2(self, ctx):
            return (self.decl,)

    with pytest.raises(ValueError, match="no field 'angular_speed'"):
        encode.part_topics([Bad(Ros2("sensor_msgs/msg/Imu", (("angular_speed", "gyro"),)))],
                           0.002, [1])  # fmt: skip
    with pytest.raises(ValueError, match="holds 3 numbers, given 9"):
        decl = Ros2("sensor_msgs/msg/Imu", (("angular_velocity", "gyro"),),
                    (("linear_acceleration", (0.0,) * 9),))
        encode.part_topics([Bad(decl)], 0.002, [1])


def test_the_node_fast_path_sends_the_serializers_bytes():
    """``cdr.Template`` (the node's publishing path) renders, for random states, exactly the
    bytes Cyclone DDS serializes for the messages ``encode`` builds."""
    from quadsim.app.ros2.cdr import Template
    from quadsim.physics.rotation import rotate_inverse

    rng = np.random.default_rng(7)
    z3, q0 = np.zeros(3), np.array([0.0, 0.0, 0.0, 1.0])
    odom_t = Template(encode.odometry(0.0, z3, q0, z3, z3, child="d12/base_link"))
    imu_t = Template(_imu_message(0.0, z3, z3, "d12/base_link"))
    rot_t = Template(encode.rotors(0.0, np.zeros(4), frame="d12/base_link"))
    ref_t = Template(encode.reference(0.0, z3, 0.0))
    io = odom_t.index(
        "pose.pose.position", "pose.pose.orientation", "twist.twist.linear", "twist.twist.angular"
    )
    for _ in range(50):
        t = float(rng.uniform(0, 1e5))
        st = encode.stamp(t)
        p, v, w = rng.normal(size=3), rng.normal(size=3), rng.normal(size=3)
        q = rng.normal(size=4)
        q /= np.linalg.norm(q)
        want = bytes(encode.odometry(t, p, q, v, w, child="d12/base_link").serialize())
        vals = np.concatenate([p, q, rotate_inverse(q, v), w])
        assert odom_t.render(st.sec, st.nanosec, io, vals) == want.ljust(len(odom_t.base), b"\0")
        g, a = rng.normal(size=3), rng.normal(size=3)
        want = bytes(_imu_message(t, g, a, "d12/base_link").serialize())
        got = imu_t.render(
            st.sec,
            st.nanosec,
            imu_t.index("angular_velocity", "linear_acceleration"),
            np.concatenate([g, a]),
        )
        assert got == want.ljust(len(imu_t.base), b"\0")
        rpm = rng.uniform(0, 30000, size=4)
        want = bytes(encode.rotors(t, rpm, frame="d12/base_link").serialize())
        got = rot_t.render(st.sec, st.nanosec, rot_t.index("velocity"), rpm * encode.RPM_TO_RAD_S)
        assert got == want.ljust(len(rot_t.base), b"\0")
        yaw = float(rng.uniform(-3, 3))
        want = bytes(encode.reference(t, p, yaw).serialize())
        got = ref_t.render(
            st.sec,
            st.nanosec,
            ref_t.index("pose.position", "pose.orientation"),
            np.concatenate([p, encode.yaw_quat(yaw)]),
        )
        assert got == want.ljust(len(ref_t.base), b"\0")


def test_a_template_refuses_what_it_cannot_place():
    from quadsim.app.ros2.cdr import Template

    t = Template(m.Clock())
    assert t.paths == [] and t.stamps == ["clock"]
    with pytest.raises(KeyError, match="no float field"):
        Template(m.String(data="x")).index("data")
