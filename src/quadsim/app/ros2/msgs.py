"""The ROS 2 message types quadsim speaks, as Cyclone DDS IDL types and as ROS 2 ``.msg`` text.

A ROS 2 node on ``rmw_cyclonedds_cpp`` sends a message ``pkg/msg/Type`` as the DDS type
``pkg::msg::dds_::Type_`` in XCDR1 (little-endian CDR with a 4-byte encapsulation header), on the
DDS topic ``rt/<ROS topic>``. The dataclasses below declare the same fields in the same order
with the same IDL types as the ROS 2 interface definitions, so :meth:`serialize` produces the
bytes a ROS 2 node would, and a ROS 2 node reads what quadsim writes;
``tests/app/test_ros2_msgs.py`` checks that against the ``rosbags`` library's own CDR serializer
for every type.

:data:`MSG_TEXT` holds each type's ``.msg`` definition (fields only, constants left out): the
schema an MCAP file carries for each channel (:func:`msgdef`, ``ros2msg`` encoding: the type's
text, then every type it uses after a line of 80 ``=`` and ``MSG: pkg/Type``).

Types: ``builtin_interfaces/Time``, ``std_msgs/Header``, ``geometry_msgs/{Point, Quaternion,
Vector3, Pose, PoseWithCovariance, Twist, TwistWithCovariance, Transform, TransformStamped,
PoseStamped}``, ``nav_msgs/Odometry``, ``sensor_msgs/Imu``, ``tf2_msgs/TFMessage``,
``rosgraph_msgs/Clock``, ``std_msgs/String``, ``sensor_msgs/JointState`` (rotor speeds: one
joint per rotor, ``velocity`` in rad/s, a type every ROS 2 install has) and
``mavros_msgs/AttitudeTarget`` (an attitude with a normalised thrust, as PX4 and ArduPilot users
send it through MAVROS) and ``sensor_msgs/Range`` (a sensor part's range,
:mod:`quadsim.loop.parts`).
"""

from dataclasses import dataclass, field

from cyclonedds.idl import IdlStruct
from cyclonedds.idl import types as t

__all__ = [
    "MSG_TEXT",
    "AttitudeTarget",
    "Clock",
    "Header",
    "Imu",
    "JointState",
    "Odometry",
    "Point",
    "Pose",
    "PoseStamped",
    "PoseWithCovariance",
    "Quaternion",
    "Range",
    "String",
    "TFMessage",
    "Time",
    "Transform",
    "TransformStamped",
    "Twist",
    "TwistWithCovariance",
    "Vector3",
    "message_class",
    "msgdef",
    "ros_name",
]


def _dds(ros: str) -> str:
    pkg, _, name = ros.split("/")
    return f"{pkg}::msg::dds_::{name}_"


@dataclass
class Time(IdlStruct, typename=_dds("builtin_interfaces/msg/Time")):
    """``builtin_interfaces/msg/Time``: ``sec`` [s] and ``nanosec`` [ns]."""

    sec: t.int32 = 0
    nanosec: t.uint32 = 0


@dataclass
class Header(IdlStruct, typename=_dds("std_msgs/msg/Header")):
    """``std_msgs/msg/Header``."""

    stamp: Time = field(default_factory=Time)
    frame_id: str = ""


@dataclass
class Point(IdlStruct, typename=_dds("geometry_msgs/msg/Point")):
    """``geometry_msgs/msg/Point`` [m]."""

    x: t.float64 = 0.0
    y: t.float64 = 0.0
    z: t.float64 = 0.0


@dataclass
class Quaternion(IdlStruct, typename=_dds("geometry_msgs/msg/Quaternion")):
    """``geometry_msgs/msg/Quaternion`` (scalar last)."""

    x: t.float64 = 0.0
    y: t.float64 = 0.0
    z: t.float64 = 0.0
    w: t.float64 = 1.0


@dataclass
class Vector3(IdlStruct, typename=_dds("geometry_msgs/msg/Vector3")):
    """``geometry_msgs/msg/Vector3``."""

    x: t.float64 = 0.0
    y: t.float64 = 0.0
    z: t.float64 = 0.0


@dataclass
class Pose(IdlStruct, typename=_dds("geometry_msgs/msg/Pose")):
    """``geometry_msgs/msg/Pose``."""

    position: Point = field(default_factory=Point)
    orientation: Quaternion = field(default_factory=Quaternion)


def _zeros(n: int) -> list[float]:
    return [0.0] * n


@dataclass
class PoseWithCovariance(IdlStruct, typename=_dds("geometry_msgs/msg/PoseWithCovariance")):
    """``geometry_msgs/msg/PoseWithCovariance`` (6x6 row-major: x, y, z, rotation about x, y,
    z)."""  # noqa: D205, D209

    pose: Pose = field(default_factory=Pose)
    covariance: t.array[t.float64, 36] = field(default_factory=lambda: _zeros(36))


@dataclass
class Twist(IdlStruct, typename=_dds("geometry_msgs/msg/Twist")):
    """``geometry_msgs/msg/Twist``."""

    linear: Vector3 = field(default_factory=Vector3)
    angular: Vector3 = field(default_factory=Vector3)


@dataclass
class TwistWithCovariance(IdlStruct, typename=_dds("geometry_msgs/msg/TwistWithCovariance")):
    """``geometry_msgs/msg/TwistWithCovariance``."""

    twist: Twist = field(default_factory=Twist)
    covariance: t.array[t.float64, 36] = field(default_factory=lambda: _zeros(36))


@dataclass
class Odometry(IdlStruct, typename=_dds("nav_msgs/msg/Odometry")):
    """``nav_msgs/msg/Odometry``: the pose in ``header.frame_id``, the twist in
    ``child_frame_id`` (the body)."""  # noqa: D205, D209

    header: Header = field(default_factory=Header)
    child_frame_id: str = ""
    pose: PoseWithCovariance = field(default_factory=PoseWithCovariance)
    twist: TwistWithCovariance = field(default_factory=TwistWithCovariance)


@dataclass
class Imu(IdlStruct, typename=_dds("sensor_msgs/msg/Imu")):
    """``sensor_msgs/msg/Imu`` (``orientation_covariance[0] = -1``: no orientation)."""

    header: Header = field(default_factory=Header)
    orientation: Quaternion = field(default_factory=Quaternion)
    orientation_covariance: t.array[t.float64, 9] = field(default_factory=lambda: _zeros(9))
    angular_velocity: Vector3 = field(default_factory=Vector3)
    angular_velocity_covariance: t.array[t.float64, 9] = field(default_factory=lambda: _zeros(9))
    linear_acceleration: Vector3 = field(default_factory=Vector3)
    linear_acceleration_covariance: t.array[t.float64, 9] = field(default_factory=lambda: _zeros(9))


@dataclass
class Transform(IdlStruct, typename=_dds("geometry_msgs/msg/Transform")):
    """``geometry_msgs/msg/Transform``."""

    translation: Vector3 = field(default_factory=Vector3)
    rotation: Quaternion = field(default_factory=Quaternion)


@dataclass
class TransformStamped(IdlStruct, typename=_dds("geometry_msgs/msg/TransformStamped")):
    """``geometry_msgs/msg/TransformStamped``."""

    header: Header = field(default_factory=Header)
    child_frame_id: str = ""
    transform: Transform = field(default_factory=Transform)


@dataclass
class TFMessage(IdlStruct, typename=_dds("tf2_msgs/msg/TFMessage")):
    """``tf2_msgs/msg/TFMessage``."""

    transforms: t.sequence[TransformStamped] = field(default_factory=list)


@dataclass
class Clock(IdlStruct, typename=_dds("rosgraph_msgs/msg/Clock")):
    """``rosgraph_msgs/msg/Clock``: the simulated time (``use_sim_time``)."""

    clock: Time = field(default_factory=Time)


@dataclass
class PoseStamped(IdlStruct, typename=_dds("geometry_msgs/msg/PoseStamped")):
    """``geometry_msgs/msg/PoseStamped``."""

    header: Header = field(default_factory=Header)
    pose: Pose = field(default_factory=Pose)


@dataclass
class JointState(IdlStruct, typename=_dds("sensor_msgs/msg/JointState")):
    """``sensor_msgs/msg/JointState``: quadsim's rotor speeds, ``name`` ``rotor_0`` ...,
    ``velocity`` [rad/s]."""  # noqa: D205, D209

    header: Header = field(default_factory=Header)
    name: t.sequence[str] = field(default_factory=list)
    position: t.sequence[t.float64] = field(default_factory=list)
    velocity: t.sequence[t.float64] = field(default_factory=list)
    effort: t.sequence[t.float64] = field(default_factory=list)


@dataclass
class Range(IdlStruct, typename=_dds("sensor_msgs/msg/Range")):
    """``sensor_msgs/msg/Range`` (the Humble and Iron layout; Jazzy adds ``variance``):
    ``radiation_type`` 0 ultrasound, 1 infrared; ``range`` [m], ``+inf`` for nothing
    detected."""  # noqa: D205, D209

    header: Header = field(default_factory=Header)
    radiation_type: t.uint8 = 0
    field_of_view: t.float32 = 0.0
    min_range: t.float32 = 0.0
    max_range: t.float32 = 0.0
    range: t.float32 = 0.0


@dataclass
class String(IdlStruct, typename=_dds("std_msgs/msg/String")):
    """``std_msgs/msg/String``."""

    data: str = ""


@dataclass
class AttitudeTarget(IdlStruct, typename=_dds("mavros_msgs/msg/AttitudeTarget")):
    """``mavros_msgs/msg/AttitudeTarget``: ``orientation`` and ``thrust`` (0..1) are used."""

    header: Header = field(default_factory=Header)
    type_mask: t.uint8 = 0
    orientation: Quaternion = field(default_factory=Quaternion)
    body_rate: Vector3 = field(default_factory=Vector3)
    thrust: t.float32 = 0.0


MSG_TEXT: dict[str, str] = {
    "builtin_interfaces/msg/Time": "int32 sec\nuint32 nanosec\n",
    "std_msgs/msg/Header": "builtin_interfaces/Time stamp\nstring frame_id\n",
    "geometry_msgs/msg/Point": "float64 x\nfloat64 y\nfloat64 z\n",
    "geometry_msgs/msg/Quaternion": "float64 x 0\nfloat64 y 0\nfloat64 z 0\nfloat64 w 1\n",
    "geometry_msgs/msg/Vector3": "float64 x\nfloat64 y\nfloat64 z\n",
    "geometry_msgs/msg/Pose": "Point position\nQuaternion orientation\n",
    "geometry_msgs/msg/PoseWithCovariance": "Pose pose\nfloat64[36] covariance\n",
    "geometry_msgs/msg/Twist": "Vector3 linear\nVector3 angular\n",
    "geometry_msgs/msg/TwistWithCovariance": "Twist twist\nfloat64[36] covariance\n",
    "geometry_msgs/msg/Transform": "Vector3 translation\nQuaternion rotation\n",
    "geometry_msgs/msg/TransformStamped": (
        "std_msgs/Header header\nstring child_frame_id\nTransform transform\n"
    ),
    "geometry_msgs/msg/PoseStamped": "std_msgs/Header header\nPose pose\n",
    "nav_msgs/msg/Odometry": (
        "std_msgs/Header header\nstring child_frame_id\ngeometry_msgs/PoseWithCovariance pose\n"
        "geometry_msgs/TwistWithCovariance twist\n"
    ),
    "sensor_msgs/msg/Imu": (
        "std_msgs/Header header\ngeometry_msgs/Quaternion orientation\n"
        "float64[9] orientation_covariance\ngeometry_msgs/Vector3 angular_velocity\n"
        "float64[9] angular_velocity_covariance\ngeometry_msgs/Vector3 linear_acceleration\n"
        "float64[9] linear_acceleration_covariance\n"
    ),
    "tf2_msgs/msg/TFMessage": "geometry_msgs/TransformStamped[] transforms\n",
    "rosgraph_msgs/msg/Clock": "builtin_interfaces/Time clock\n",
    "std_msgs/msg/String": "string data\n",
    "sensor_msgs/msg/JointState": (
        "std_msgs/Header header\nstring[] name\nfloat64[] position\nfloat64[] velocity\n"
        "float64[] effort\n"
    ),
    "mavros_msgs/msg/AttitudeTarget": (
        "std_msgs/Header header\nuint8 type_mask\ngeometry_msgs/Quaternion orientation\n"
        "geometry_msgs/Vector3 body_rate\nfloat32 thrust\n"
    ),
    "sensor_msgs/msg/Range": (
        "std_msgs/Header header\nuint8 radiation_type\nfloat32 field_of_view\n"
        "float32 min_range\nfloat32 max_range\nfloat32 range\n"
    ),
}
"""``pkg/msg/Type`` -> its ``.msg`` fields (the ROS 2 interface definitions, constants left
out)."""

_PRIMITIVE = {"int32", "uint32", "uint8", "float32", "float64", "string"}

_CLASSES = {
    "builtin_interfaces/msg/Time": Time,
    "std_msgs/msg/Header": Header,
    "geometry_msgs/msg/Point": Point,
    "geometry_msgs/msg/Quaternion": Quaternion,
    "geometry_msgs/msg/Vector3": Vector3,
    "geometry_msgs/msg/Pose": Pose,
    "geometry_msgs/msg/PoseWithCovariance": PoseWithCovariance,
    "geometry_msgs/msg/Twist": Twist,
    "geometry_msgs/msg/TwistWithCovariance": TwistWithCovariance,
    "geometry_msgs/msg/Transform": Transform,
    "geometry_msgs/msg/TransformStamped": TransformStamped,
    "geometry_msgs/msg/PoseStamped": PoseStamped,
    "nav_msgs/msg/Odometry": Odometry,
    "sensor_msgs/msg/Imu": Imu,
    "tf2_msgs/msg/TFMessage": TFMessage,
    "rosgraph_msgs/msg/Clock": Clock,
    "std_msgs/msg/String": String,
    "sensor_msgs/msg/JointState": JointState,
    "mavros_msgs/msg/AttitudeTarget": AttitudeTarget,
    "sensor_msgs/msg/Range": Range,
}


def message_class(name: str) -> type:
    """The class of the ROS 2 type ``pkg/msg/Type``.

    Raises:
        ValueError: A type quadsim does not speak, naming those it does.
    """
    if name not in _CLASSES:
        raise ValueError(f"no ROS 2 message type {name!r} here; known: {sorted(_CLASSES)}")
    return _CLASSES[name]


def ros_name(cls: type) -> str:
    """The ROS 2 name ``pkg/msg/Type`` of one of the classes above."""
    for name, c in _CLASSES.items():
        if c is cls:
            return name
    raise KeyError(f"{cls!r} is not a quadsim ROS 2 message type")


def _deps(name: str) -> list[str]:
    """The types ``name``'s fields use, as full names, in order of first use."""
    pkg = name.split("/")[0]
    out = []
    for line in MSG_TEXT[name].splitlines():
        typ = line.split()[0].split("[")[0]
        if typ in _PRIMITIVE:
            continue
        full = typ.replace("/", "/msg/") if "/" in typ else f"{pkg}/msg/{typ}"
        out.append(full)
    return out


def msgdef(name: str) -> str:
    """The ``ros2msg`` schema text of ``pkg/msg/Type``: its fields, then each type it uses,
    depth first, once (after ``=`` * 80 and ``MSG: pkg/Type``)."""  # noqa: D205, D209
    seen: list[str] = []

    def walk(n: str) -> None:
        for d in _deps(n):
            if d not in seen:
                seen.append(d)
                walk(d)

    walk(name)
    parts = [MSG_TEXT[name]]
    for d in seen:
        pkg, _, typ = d.split("/")
        parts.append("=" * 80 + f"\nMSG: {pkg}/{typ}\n" + MSG_TEXT[d])
    return "".join(parts)
