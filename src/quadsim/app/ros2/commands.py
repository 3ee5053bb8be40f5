"""The ROS 2 node's command checks: a command that is not a valid one is dropped, with the reason.

Each check takes a received message (``sensor_msgs/JointState`` rotor speeds,
``geometry_msgs/PoseStamped``, ``mavros_msgs/AttitudeTarget``) and returns the reason it is not
valid, or ``None``: finite numbers, unit quaternions, the world frame, the sizes and ranges a
drone can obey (rotor speeds in ``[0, rpm_max]`` as rad/s, thrust in 0..1, positions within
10 km).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["IGNORE_ATTITUDE", "IGNORE_THRUST", "IGNORE_YAW_RATE", "MAX_ELEMENTS",
           "check_attitude", "check_pose", "check_rotor_speeds"]

MAX_ELEMENTS = 64
"""A command array longer than this is oversized (a quadrotor has 4 rotors)."""
IGNORE_YAW_RATE, IGNORE_THRUST, IGNORE_ATTITUDE = 4, 64, 128  # mavros AttitudeTarget type_mask


def _finite(*xs: float) -> bool:
    return all(math.isfinite(float(x)) for x in xs)


def check_rotor_speeds(msg: Any, n_rotors: int, rpm_max: float) -> tuple[Any, str | None]:
    """``(rpm, None)`` of a valid ``cmd_rotor_speeds``, or ``(None, why)``."""
    from .encode import RPM_TO_RAD_S, rotor_names

    vel = list(msg.velocity)
    if len(vel) > MAX_ELEMENTS or len(msg.name) > MAX_ELEMENTS:
        return None, f"oversized ({len(vel)} velocities, {len(msg.name)} names)"
    if len(vel) != n_rotors:
        return None, f"{len(vel)} velocities, expected {n_rotors} (one per rotor, rad/s)"
    names = list(msg.name)
    if names:
        want = rotor_names(n_rotors)
        if sorted(names) != sorted(want):
            return None, f"joint names {names[:8]!r}, expected {want!r} or none"
        vel = [vel[names.index(w)] for w in want]
    if not _finite(*vel):
        return None, "non-finite rotor speed"
    top = rpm_max * RPM_TO_RAD_S
    if min(vel) < 0.0 or max(vel) > top * (1.0 + 1e-9):
        return None, f"rotor speed outside [0, {top:.1f}] rad/s: {[round(v, 1) for v in vel]}"
    return np.asarray(vel) / RPM_TO_RAD_S, None


def check_pose(msg: Any) -> str | None:
    """Why a ``cmd_pose`` (``PoseStamped``) is not valid, or ``None``."""
    p, q = msg.pose.position, msg.pose.orientation
    if msg.header.frame_id not in ("", "world"):
        return f"frame {msg.header.frame_id[:40]!r}, expected 'world'"
    if not _finite(p.x, p.y, p.z, q.x, q.y, q.z, q.w):
        return "non-finite position or orientation"
    if abs(math.sqrt(q.x**2 + q.y**2 + q.z**2 + q.w**2) - 1.0) > 1e-3:
        return "orientation is not a unit quaternion"
    if max(abs(p.x), abs(p.y), abs(p.z)) > 1e4:
        return "position beyond 10 km"
    return None


def check_attitude(msg: Any) -> str | None:
    """Why a ``cmd_attitude`` (``AttitudeTarget``) is not valid, or ``None``."""
    q, w = msg.orientation, msg.body_rate
    if msg.type_mask & (IGNORE_ATTITUDE | IGNORE_THRUST):
        return "type_mask ignores the attitude or the thrust (both are needed)"
    if not _finite(q.x, q.y, q.z, q.w, w.x, w.y, w.z, msg.thrust):
        return "non-finite orientation, body rate or thrust"
    if abs(math.sqrt(q.x**2 + q.y**2 + q.z**2 + q.w**2) - 1.0) > 1e-3:
        return "orientation is not a unit quaternion"
    if not 0.0 <= float(msg.thrust) <= 1.0:
        return f"thrust {float(msg.thrust):.3g} outside 0..1"
    return None
