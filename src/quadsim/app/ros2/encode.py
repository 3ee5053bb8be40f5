r"""One drone's sample as ROS 2 messages: the one home of the conversion (node and bag use it).

Frames (REP 103, REP 105): ``world`` is quadsim's ENU world frame, ``<drone>/base_link`` the
FLU body. With the attitude ``q`` (body to world), world velocity ``v`` and body rates ``ω``:

* ``nav_msgs/Odometry``: pose ``(p, q)`` in ``world``; twist in the body, ``R(q)ᵀ v`` and ``ω``
  (the ROS convention: the twist is in ``child_frame_id``); covariances zero (the truth);
* ``geometry_msgs/TransformStamped``: ``world`` -> ``<drone>/base_link``;
* ``sensor_msgs/JointState``: rotor ``i`` is the joint ``rotor_i``, its speed in rad/s
  (``RPM · 2π/60``), positions and efforts empty;
* ``geometry_msgs/PoseStamped``: the reference position and yaw (``world``);
* every sensor part's messages (:meth:`quadsim.loop.parts.Sensor.ros2`, any standard ROS 2
  type held to its definition, :mod:`quadsim.app.ros2.interfaces`: the IMU's
  ``sensor_msgs/Imu``, the rangefinder's ``sensor_msgs/Range``, a plugin's
  ``sensor_msgs/MagneticField``) on ``/<ns>/<drone>/<leaf>``, its ``header`` (where the type
  has one) stamped in the frame ``<drone>/base_link``: its constants, and its readings in the
  fields it names (an output of size ``k`` fills ``k`` floats in order; ``+inf`` where its
  ``valid`` output is 0); :func:`part_template` makes the node's and the bag's fast path.

Stamps: the simulated time ``t`` [s] as ``builtin_interfaces/Time`` (``sec``, ``nanosec``;
rounded to the nanosecond).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from ...loop.parts import Context, output_key
from ...physics.rotation import rotate_inverse
from . import cdr, interfaces
from . import msgs as m

__all__ = [
    "RPM_TO_RAD_S",
    "PartTopic",
    "odometry",
    "part_message",
    "part_template",
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
    """Every ROS 2 message the sensor ``parts`` declare, in order, each held to its type's
    definition (:func:`quadsim.app.ros2.interfaces.check_parts`).

    Args:
        parts: The sensor parts (:func:`quadsim.loop.brain.sensor_parts`: the IMU's included).
        dt: The physics step [s].
        periods: Each part's period in physics steps (:func:`quadsim.loop.brain.part_periods`).

    Raises:
        quadsim.app.ros2.interfaces.PartMessageError: A type quadsim does not know, a field its
            outputs or constants cannot fill, or two messages on one leaf (naming the part).
    """  # noqa: D205
    interfaces.check_parts(parts, dt, periods)
    out: list[PartTopic] = []
    for part, period in zip(parts, periods, strict=True):
        for decl in part.ros2(Context(dt=float(dt), xp=np, period=int(period))):
            topic = PartTopic(part, decl, decl.leaf or part.name, int(period))
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

    if not topic.decl.fields:  # constants only
        n = len(np.asarray(next(iter(readings.values())))) if readings else 1
        return np.zeros((n, 0)) if i is None else np.zeros(0)
    values = np.concatenate([reading(out) for _, out in topic.decl.fields], axis=1)
    if topic.decl.valid:
        values = np.where(reading(topic.decl.valid)[:, :1] == 0.0, math.inf, values)
    return values if i is None else values[i]


def _cast(typ: str, value: Any) -> Any:
    """``value`` as the Python value of a field of base type ``typ``."""
    if typ in interfaces.FLOATS:
        return float(value)
    if typ == "bool":
        return bool(value)
    return int(value) if typ in interfaces.INTEGERS else str(value)


def _put(msg: Any, leaves: list[tuple[str, str]], values: list, seq: str = "") -> None:
    """Set the ``leaves`` (``(path, type)``, :func:`quadsim.app.ros2.interfaces.leaves`) of
    ``msg`` to ``values``; ``seq``: the path of a sequence field they fill (made that long)."""  # noqa: D205, D209
    if seq:
        *up, last = seq.split(".")
        obj = msg
        for step in up:
            obj = getattr(obj, step)
        if isinstance(getattr(obj, last), list):
            setattr(obj, last, [None] * len(values))
    for (leaf, typ), value in zip(leaves, values, strict=True):
        obj = msg
        steps = leaf.replace("[", ".[").split(".")
        for step in steps[:-1]:
            obj = obj[int(step[1:-1])] if step.startswith("[") else getattr(obj, step)
        if steps[-1].startswith("["):
            obj[int(steps[-1][1:-1])] = _cast(typ, value)
        else:
            setattr(obj, steps[-1], _cast(typ, value))


def part_message(topic: PartTopic, t: float, readings: dict, i: int, *, frame: str) -> Any:
    """The message of ``topic`` at ``t`` [s]: its constants, and drone ``i``'s readings
    (``readings``: the log keys ``<part>_<output>``, arrays with a leading drone axis; zeros when
    empty); ``header`` (where the type has one) stamped ``t`` in ``frame``."""  # noqa: D205, D209
    decl = topic.decl
    cls = m.message_class(decl.type)
    msg = cls(header=_header(t, frame)) if interfaces.has_header(decl.type) else cls()
    sizes = [next(o.size for o in topic.part.outputs if o.name == out) for _, out in decl.fields]
    values = part_values(topic, readings, i) if readings else np.zeros(sum(sizes))
    for path, value in decl.constants:
        flat = [value] if isinstance(value, str) else np.ravel(np.asarray(value, dtype=object))
        _put(msg, interfaces.leaves(decl.type, path, len(flat)), list(flat), path)
    ends = np.cumsum([0, *sizes])
    for (path, _), a, b in zip(decl.fields, ends[:-1], ends[1:], strict=True):
        _put(msg, interfaces.leaves(decl.type, path, int(b - a)), values[a:b].tolist(), path)
    return msg


def part_template(topic: PartTopic, frame: str) -> tuple | None:
    """``(template, places)`` of ``topic``'s message for a drone's ``frame``: a
    :class:`~quadsim.app.ros2.cdr.Template` of :func:`part_message` and the places of its readings
    (``template.render(sec, nanosec, places, part_values(topic, readings, i))``), or ``None``
    where one cannot be made (the message is then built and serialized whole)."""  # noqa: D205, D209
    try:
        tpl = cdr.Template(part_message(topic, 0.0, {}, 0, frame=frame), ("header.stamp",))
        return tpl, tpl.index(*(path for path, _ in topic.decl.fields))
    except (KeyError, ValueError):
        return None
