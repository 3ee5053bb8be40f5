"""The ROS 2 message types quadsim speaks, as Cyclone DDS IDL types built from their definitions.

A ROS 2 node on ``rmw_cyclonedds_cpp`` sends a message ``pkg/msg/Type`` as the DDS type
``pkg::msg::dds_::Type_`` in XCDR1 (little-endian CDR with a 4-byte encapsulation header), on the
DDS topic ``rt/<ROS topic>``. :func:`message_class` builds, for any type of
:mod:`quadsim.app.ros2.interfaces` (the standard ROS 2 Humble packages: ``std_msgs``,
``geometry_msgs``, ``sensor_msgs``, ``nav_msgs``, ...), a dataclass with the same fields in the
same order and the same IDL types as the ROS 2 definition, so :meth:`serialize` produces the
bytes a ROS 2 node would, and a ROS 2 node reads what quadsim writes;
``tests/app/test_ros2_msgs.py`` checks that against the ``rosbags`` library's own CDR serializer
for every type. Classes are built once, on first use; a field's default is its type's zero (the
definition's default where it has one: ``Quaternion.w = 1``), an array's is that many zeros, a
sequence's is empty.

The types the node itself uses are named here: ``builtin_interfaces/Time``, ``std_msgs/Header``,
``geometry_msgs/{Point, Quaternion, Vector3, Pose, PoseWithCovariance, Twist,
TwistWithCovariance, Transform, TransformStamped, PoseStamped}``, ``nav_msgs/Odometry``,
``sensor_msgs/Imu``, ``tf2_msgs/TFMessage``, ``rosgraph_msgs/Clock``, ``std_msgs/String``,
``sensor_msgs/JointState`` (rotor speeds: one joint per rotor, ``velocity`` in rad/s),
``mavros_msgs/AttitudeTarget`` (an attitude with a normalised thrust, as PX4 and ArduPilot users
send it through MAVROS) and ``sensor_msgs/Range`` (the rangefinder part's).

:data:`MSG_TEXT` holds each type's ``.msg`` definition: :func:`msgdef` puts it in the schema an
MCAP file carries for each channel (``ros2msg`` encoding: the type's text, then every type it
uses after a line of 80 ``=`` and ``MSG: pkg/Type``).
"""

import dataclasses
from collections.abc import Mapping
from typing import Any

from cyclonedds.idl import IdlStruct
from cyclonedds.idl import types as t

from . import interfaces

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

_IDL = {"bool": bool, "byte": t.byte, "char": t.uint8, "int8": t.int8, "uint8": t.uint8,
        "int16": t.int16, "uint16": t.uint16, "int32": t.int32, "uint32": t.uint32,
        "int64": t.int64, "uint64": t.uint64, "float32": t.float32, "float64": t.float64,
        "string": str, "wstring": str}  # fmt: skip
"""ROS 2 base types as Cyclone DDS IDL types (``char`` is ``uint8`` on the wire, as in rosidl)."""

_ZERO = {"bool": False, "string": "", "wstring": "", "float32": 0.0, "float64": 0.0}

_CLASSES: dict[str, type] = {}


def _dds(ros: str) -> str:
    pkg, _, name = ros.split("/")
    return f"{pkg}::msg::dds_::{name}_"


def _element(f: interfaces.Field) -> tuple[Any, Any]:
    """The IDL type of one value of ``f`` and a function making its default."""
    if f.type not in _IDL:
        cls = message_class(f.type)
        return cls, cls
    typ = t.bounded_str[f.bound] if f.bound and f.type in ("string", "wstring") else _IDL[f.type]
    zero = _ZERO.get(f.type, 0)
    if f.default:
        zero = type(zero)(float(f.default) if isinstance(zero, float) else f.default)
    return typ, lambda: zero


def _field(f: interfaces.Field) -> tuple[Any, Any]:
    """``(IDL annotation, dataclass field)`` of a definition's field."""
    typ, make = _element(f)
    if f.kind == "array":
        n = f.size
        if f.type in _IDL:  # immutable values: one list of n of them
            zero = make()
            return t.array[typ, n], dataclasses.field(default_factory=lambda: [zero] * n)
        return t.array[typ, n], dataclasses.field(
            default_factory=lambda: [make() for _ in range(n)])
    if f.kind == "sequence":
        seq = t.sequence[typ, f.size] if f.size else t.sequence[typ]
        return seq, dataclasses.field(default_factory=list)
    if f.type not in _IDL:
        return typ, dataclasses.field(default_factory=make)
    return typ, dataclasses.field(default=make())


def _build(msg: interfaces.Message) -> type:
    """The Cyclone DDS dataclass of a definition (``typename`` the ROS 2 DDS name)."""
    meta = type(IdlStruct)
    short = msg.name.split("/")[-1]
    ns = meta.__prepare__(short, (IdlStruct,), typename=_dds(msg.name))
    for f in msg.fields:
        ns["__annotations__"][f.name], ns[f.name] = _field(f)
    ns["__module__"] = __name__
    ns["__qualname__"] = short
    ns["__doc__"] = f"``{msg.name}`` (its definition: :mod:`quadsim.app.ros2.interfaces`)."
    return dataclasses.dataclass(meta(short, (IdlStruct,), ns, typename=_dds(msg.name)))


def message_class(name: str) -> type:
    """The class of the ROS 2 type ``pkg/msg/Type`` (built on first use).

    Raises:
        ValueError: A type quadsim does not know (:func:`quadsim.app.ros2.interfaces.definition`).
    """
    cls = _CLASSES.get(name)
    if cls is None:
        cls = _CLASSES[name] = _build(interfaces.definition(name))
    return cls


def ros_name(cls: type) -> str:
    """The ROS 2 name ``pkg/msg/Type`` of a class of :func:`message_class`."""
    for name, c in _CLASSES.items():
        if c is cls:
            return name
    raise KeyError(f"{cls!r} is not a quadsim ROS 2 message type")


class _Texts(Mapping):
    """``pkg/msg/Type`` -> its ``.msg`` text, for every known type."""

    def __getitem__(self, name: str) -> str:
        try:
            return interfaces.definition(name).text
        except ValueError:
            raise KeyError(name) from None

    def __iter__(self) -> Any:
        return iter(interfaces.names())

    def __len__(self) -> int:
        return len(interfaces.names())


MSG_TEXT: Mapping[str, str] = _Texts()
"""``pkg/msg/Type`` -> its ``.msg`` definition (fields and constants)."""

msgdef = interfaces.msgdef

Time = message_class("builtin_interfaces/msg/Time")
Header = message_class("std_msgs/msg/Header")
Point = message_class("geometry_msgs/msg/Point")
Quaternion = message_class("geometry_msgs/msg/Quaternion")
Vector3 = message_class("geometry_msgs/msg/Vector3")
Pose = message_class("geometry_msgs/msg/Pose")
PoseWithCovariance = message_class("geometry_msgs/msg/PoseWithCovariance")
Twist = message_class("geometry_msgs/msg/Twist")
TwistWithCovariance = message_class("geometry_msgs/msg/TwistWithCovariance")
Odometry = message_class("nav_msgs/msg/Odometry")
Imu = message_class("sensor_msgs/msg/Imu")
Transform = message_class("geometry_msgs/msg/Transform")
TransformStamped = message_class("geometry_msgs/msg/TransformStamped")
TFMessage = message_class("tf2_msgs/msg/TFMessage")
Clock = message_class("rosgraph_msgs/msg/Clock")
PoseStamped = message_class("geometry_msgs/msg/PoseStamped")
JointState = message_class("sensor_msgs/msg/JointState")
Range = message_class("sensor_msgs/msg/Range")
String = message_class("std_msgs/msg/String")
AttitudeTarget = message_class("mavros_msgs/msg/AttitudeTarget")
