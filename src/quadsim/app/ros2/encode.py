r"""One drone's sample as ROS 2 messages: the one home of the conversion (node and bag use it).

Frames (REP 103, REP 105): ``world`` is quadsim's ENU world frame, ``<drone>/base_link`` the
FLU body. With the attitude ``q`` (body to world), world velocity ``v`` and body rates ``ω``:

* ``nav_msgs/Odometry``: pose ``(p, q)`` in ``world``; twist in the body, ``R(q)ᵀ v`` and ``ω``
  (the ROS convention: the twist is in ``child_frame_id``); covariances zero (the truth);
* ``sensor_msgs/Imu``: the simulated gyro and accelerometer (specific force), frame
  ``<drone>/base_link``, no orientation (``orientation_covariance[0] = -1``), the covariances
  diagonal with the per-sample white-noise variances of the sensor preset;
* ``geometry_msgs/TransformStamped``: ``world`` -> ``<drone>/base_link``;
* ``sensor_msgs/JointState``: rotor ``i`` is the joint ``rotor_i``, its speed in rad/s
  (``RPM · 2π/60``), positions and efforts empty;
* ``geometry_msgs/PoseStamped``: the reference position and yaw (``world``);
* a sensor part's messages (:meth:`quadsim.loop.parts.Sensor.ros2`, e.g. the rangefinder's
  ``sensor_msgs/Range``) on ``/<ns>/<drone>/<leaf>``, frame ``<drone>/base_link``: its constants,
  and its readings in the fields it names (``+inf`` where its ``valid`` output is 0).

Stamps: the simulated time ``t`` [s] as ``builtin_interfaces/Time`` (``sec``, ``nanosec``;
rounded to the nanosecond).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from ...loop.parts import output_key
from ...physics.rotation import rotate_inverse
from . import msgs as m

__all__ = [
    "RPM_TO_RAD_S",
    "PartTopic",
    "imu",
    "imu_variances",
    "odometry",
    "part_message",
    "part_topics",
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


def imu(
    t: float, gyro: Any, accel: Any, *, frame: str, gyro_var: float = 0.0, accel_var: float = 0.0
) -> m.Imu:
    """``sensor_msgs/Imu`` of one reading: gyro [rad/s], specific force [m/s²], body frame."""
    cov_o = [-1.0] + [0.0] * 8
    cov_g = [gyro_var, 0.0, 0.0, 0.0, gyro_var, 0.0, 0.0, 0.0, gyro_var]
    cov_a = [accel_var, 0.0, 0.0, 0.0, accel_var, 0.0, 0.0, 0.0, accel_var]
    return m.Imu(
        header=_header(t, frame),
        orientation=m.Quaternion(x=0.0, y=0.0, z=0.0, w=0.0),
        orientation_covariance=cov_o,
        angular_velocity=_vec(gyro),
        angular_velocity_covariance=cov_g,
        linear_acceleration=_vec(accel),
        linear_acceleration_covariance=cov_a,
    )


def imu_variances(imu: Any, dt: float) -> tuple[float, float]:
    """Per-sample white-noise variances of the gyro [(rad/s)²] and the accelerometer
    [(m/s²)²] of an :class:`~quadsim.physics.sensors.ImuParams` sampled every ``dt`` [s]: ``N² /
    dt``
    with the noise densities ``N`` (the largest axis); ``(0, 0)`` without an IMU."""  # noqa: D205, D209
    if imu is None:
        return 0.0, 0.0
    g = float(np.max(np.asarray(imu.gyro_noise_density, dtype=np.float64)))
    a = float(np.max(np.asarray(imu.accel_noise_density, dtype=np.float64)))
    return g * g / dt, a * a / dt


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
    (:class:`quadsim.loop.parts.Ros2`) and the topic's last name."""  # noqa: D205, D209

    part: Any
    decl: Any
    leaf: str


def part_topics(parts: Any) -> list[PartTopic]:
    """Every ROS 2 message the sensor ``parts`` declare, in order.

    Raises:
        ValueError: A type quadsim does not speak, or two messages on one leaf.
    """
    out: list[PartTopic] = []
    for part in parts:
        for decl in part.ros2():
            m.message_class(decl.type)
            leaf = decl.leaf or part.name
            if any(t.leaf == leaf for t in out):
                raise ValueError(f"sensor {part.name}: a second ROS 2 message on {leaf!r}")
            out.append(PartTopic(part, decl, leaf))
    return out


def part_message(topic: PartTopic, t: float, readings: dict, i: int, *, frame: str) -> Any:
    """The message of ``topic`` at ``t`` [s] from drone ``i``'s readings (``readings``: the log
    keys ``<part>_<output>``, arrays with a leading drone axis)."""  # noqa: D205, D209
    outputs = {o.name: o for o in topic.part.outputs}

    def reading(out: str) -> float:
        return float(np.asarray(readings[output_key(topic.part, outputs[out])])[i])

    msg = m.message_class(topic.decl.type)(header=_header(t, frame))
    ok = not topic.decl.valid or reading(topic.decl.valid) != 0.0
    values = [(path, value) for path, value in topic.decl.constants]
    values += [(path, reading(out) if ok else math.inf) for path, out in topic.decl.fields]
    for path, value in values:
        *up, last = path.split(".")
        obj = msg
        for step in up:
            obj = getattr(obj, step)
        setattr(obj, last, type(getattr(obj, last))(value))
    return msg
