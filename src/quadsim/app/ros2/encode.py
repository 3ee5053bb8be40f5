r"""One drone's sample as ROS 2 messages: the one home of the conversion (node and bag use it).

Frames (REP 103, REP 105): ``world`` is quadsim's ENU world frame, ``<drone>/base_link`` the
FLU body. With the attitude ``q`` (body to world), world velocity ``v`` and body rates ``ω``:

* ``nav_msgs/Odometry``: pose ``(p, q)`` in ``world``; twist in the body, ``R(q)ᵀ v`` and ``ω``
  (the ROS convention: the twist is in ``child_frame_id``); covariances zero (the truth);
* ``geometry_msgs/TransformStamped``: ``world`` -> ``<drone>/base_link``;
* ``sensor_msgs/JointState``: rotor ``i`` is the joint ``rotor_i``, its speed in rad/s
  (``RPM · 2π/60``), positions and efforts empty;
* ``geometry_msgs/PoseStamped``: the reference position and yaw (``world``);
* every sensor part's messages (:meth:`quadsim.loop.parts.Sensor.ros2`: the IMU's
  ``sensor_msgs/Imu``, the rangefinder's ``sensor_msgs/Range``) on ``/<ns>/<drone>/<leaf>``,
  frame ``<drone>/base_link``: its constants, and its readings in the fields it names (an
  output of size ``k`` fills a field of ``k`` floats in order; ``+inf`` where its ``valid``
  output is 0).

Stamps: the simulated time ``t`` [s] as ``builtin_interfaces/Time`` (``sec``, ``nanosec``;
rounded to the nanosecond).
"""

from __future__ import annotations

import math
from dataclasses import fields as dataclass_fields
from dataclasses import is_dataclass
from typing import Any, NamedTuple

import numpy as np

from ...loop.parts import Context, output_key
from ...physics.rotation import rotate_inverse
from . import msgs as m

__all__ = [
    "RPM_TO_RAD_S",
    "PartTopic",
    "odometry",
    "part_message",
    "part_topics",
    "part_values",
    "reference",
    "rotor_names",
    "rotors",
    "stamp",
    "transform",
    "yaw_quat",
]

RPM_TO_RAD_S = 2.0 * math.pi / 60.0
"""Rotor speed conversion: ``rad/s = RPM · RPM_TO_RAD_S``."""


def stamp(t: float) -> m.Time:
    """``builtin_interfaces/Time`` of ``t`` [s] (>= 0)."""
    ns = round(float(t) * 1e9)
    return m.Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def _header(t: float, frame: str) -> m.Header:
    return m.Header(stamp=stamp(t), frame_id=frame)


def _quat(q: Any) -> m.Quaternion:
    x, y, z, w = (float(v) for v in q)
    return m.Quaternion(x=x, y=y, z=z, w=w)


def _vec(v: Any, cls: type = m.Vector3) -> Any:
    x, y, z = (float(a) for a in v)
    return cls(x=x, y=y, z=z)


def odometry(
    t: float, pos: Any, quat: Any, vel: Any, ang_vel: Any, *, frame: str = "world", child: str
) -> m.Odometry:
    """``nav_msgs/Odometry`` of the true state (module docstring)."""
    pose = m.Pose(position=_vec(pos, m.Point), orientation=_quat(quat))
    twist = m.Twist(
        linear=_vec(
            rotate_inverse(np.asarray(quat, dtype=np.float64), np.asarray(vel, dtype=np.float64))
        ),
        angular=_vec(ang_vel),
    )
    return m.Odometry(
        header=_header(t, frame),
        child_frame_id=child,
        pose=m.PoseWithCovariance(pose=pose),
        twist=m.TwistWithCovariance(twist=twist),
    )


def rotor_names(n_rotors: int) -> list[str]:
    """The joint names of the rotors: ``rotor_0`` ... ``rotor_{N-1}``."""
    return [f"rotor_{i}" for i in range(n_rotors)]


def rotors(t: float, rpm: Any, *, frame: str) -> m.JointState:
    """``sensor_msgs/JointState`` of the rotor speeds ``rpm`` [RPM] (sent in rad/s)."""
    r = [float(v) * RPM_TO_RAD_S for v in np.ravel(rpm)]
    return m.JointState(header=_header(t, frame), name=rotor_names(len(r)), velocity=r)


def transform(
    t: float, pos: Any, quat: Any, *, frame: str = "world", child: str
) -> m.TransformStamped:
    """``geometry_msgs/TransformStamped`` ``frame`` -> ``child`` of the pose."""
    return m.TransformStamped(
        header=_header(t, frame),
        child_frame_id=child,
        transform=m.Transform(translation=_vec(pos), rotation=_quat(quat)),
    )


def yaw_quat(yaw: float) -> tuple[float, float, float, float]:
    """The scalar-last quaternion of a rotation ``yaw`` [rad] about world z."""
    return (0.0, 0.0, math.sin(0.5 * yaw), math.cos(0.5 * yaw))


def reference(t: float, ref_pos: Any, ref_yaw: float, *, frame: str = "world") -> m.PoseStamped:
    """``geometry_msgs/PoseStamped`` of the reference position [m] and yaw [rad]."""
    return m.PoseStamped(
        header=_header(t, frame),
        pose=m.Pose(position=_vec(ref_pos, m.Point), orientation=_quat(yaw_quat(float(ref_yaw)))),
    )


class PartTopic(NamedTuple):
    """One ROS 2 message of a sensor part: the part, its declaration
    (:class:`quadsim.loop.parts.Ros2`, made at the part's sample period), the topic's last name
    and the part's period [physics steps] (a reading is new every ``period`` steps)."""  # noqa: D205, D209

    part: Any
    decl: Any
    leaf: str
    period: int = 1


def part_topics(parts: Any, dt: float, periods: Any) -> list[PartTopic]:
    """Every ROS 2 message the sensor ``parts`` declare, in order.

    Args:
        parts: The sensor parts (:func:`quadsim.loop.brain.sensor_parts`: the IMU's included).
        dt: The physics step [s].
        periods: Each part's period in physics steps (:func:`quadsim.loop.brain.part_periods`).

    Raises:
        ValueError: A type quadsim does not speak, a field its outputs cannot fill, or two
            messages on one leaf.
    """
    out: list[PartTopic] = []
    for part, period in zip(parts, periods, strict=True):
        for decl in part.ros2(Context(dt=float(dt), xp=np, period=int(period))):
            leaf = decl.leaf or part.name
            if any(t.leaf == leaf for t in out):
                raise ValueError(f"sensor {part.name}: a second ROS 2 message on {leaf!r}")
            topic = PartTopic(part, decl, leaf, int(period))
            part_message(topic, 0.0, {}, 0, frame="")  # every field takes what it is given
            out.append(topic)
    return out


def part_values(topic: PartTopic, readings: dict, i: int | None = None) -> np.ndarray:
    """The readings in ``topic``'s fields, in order, float64 ``(n, k)`` (every drone) or ``(k,)``
    (drone ``i``): ``+inf`` where the declaration's ``valid`` output is 0 (``readings``: the log
    keys ``<part>_<output>``, arrays with a leading drone axis)."""  # noqa: D205, D209
    outputs = {o.name: o for o in topic.part.outputs}

    def reading(out: str) -> np.ndarray:
        a = np.asarray(readings[output_key(topic.part, outputs[out])], dtype=np.float64)
        return a.reshape(len(a), -1)

    values = np.concatenate([reading(out) for _, out in topic.decl.fields], axis=1)
    if topic.decl.valid:
        values = np.where(reading(topic.decl.valid)[:, :1] == 0.0, math.inf, values)
    return values if i is None else values[i]


def _floats(obj: Any, path: str) -> tuple[Any, list]:
    """The container of the field ``path`` of ``obj`` and the keys of its floats, in order: a
    number (``[name]`` of its parent), a list (its indices) or a message (its fields)."""  # noqa: D205, D209
    *up, last = path.split(".")
    for step in up:
        obj = getattr(obj, step)
    value = getattr(obj, last)
    if isinstance(value, list):
        return value, list(range(len(value)))
    if is_dataclass(value):
        return value, [f.name for f in dataclass_fields(value)]
    return obj, [last]


def part_message(topic: PartTopic, t: float, readings: dict, i: int, *, frame: str) -> Any:
    """The message of ``topic`` at ``t`` [s]: its constants, and drone ``i``'s readings
    (``readings``: the log keys ``<part>_<output>``, arrays with a leading drone axis; zeros when
    empty)."""  # noqa: D205, D209
    decl = topic.decl
    msg = m.message_class(decl.type)(header=_header(t, frame))
    sizes = [next(o.size for o in topic.part.outputs if o.name == out) for _, out in decl.fields]
    values = part_values(topic, readings, i) if readings else np.zeros(sum(sizes))
    ends = np.cumsum([0, *sizes])
    assign = [(path, np.ravel(np.asarray(v, dtype=np.float64))) for path, v in decl.constants]
    spans = zip(decl.fields, ends[:-1], ends[1:], strict=True)
    assign += [(path, values[a:b]) for (path, _), a, b in spans]
    for path, new in assign:
        try:
            obj, keys = _floats(msg, path)
        except AttributeError:
            raise ValueError(f"sensor {topic.part.name}: {decl.type} has no field {path!r}") \
                from None  # fmt: skip
        if len(new) != len(keys):
            raise ValueError(f"sensor {topic.part.name}: {decl.type}.{path} holds {len(keys)} "
                             f"numbers, given {len(new)}")  # fmt: skip
        for key, v in zip(keys, new.tolist(), strict=True):
            if isinstance(obj, list):
                obj[key] = type(obj[key])(v)
            else:
                setattr(obj, key, type(getattr(obj, key))(v))
    return msg
