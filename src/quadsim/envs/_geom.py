"""NumPy fast paths for batches of rotations (``(n, k)`` arrays, xyzw quaternions, ZYX Euler).

Same conventions as :mod:`quadsim.rotation` (which is array-API generic and slower on small
NumPy batches): ``R_wb`` maps body to world, ``yaw = atan2(R_10, R_00)``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["quat_from_euler", "rot_matrix", "yaw_of"]


def rot_matrix(q: np.ndarray) -> np.ndarray:
    """``R_wb`` ``(n, 3, 3)`` of xyzw unit quaternions ``(n, 4)`` (NumPy fast path)."""
    x, y, z, w = q[:, 0], q[:, 1], q[:, 2], q[:, 3]
    R = np.empty((q.shape[0], 3, 3))
    R[:, 0, 0] = 1 - 2 * (y * y + z * z)
    R[:, 0, 1] = 2 * (x * y - w * z)
    R[:, 0, 2] = 2 * (x * z + w * y)
    R[:, 1, 0] = 2 * (x * y + w * z)
    R[:, 1, 1] = 1 - 2 * (x * x + z * z)
    R[:, 1, 2] = 2 * (y * z - w * x)
    R[:, 2, 0] = 2 * (x * z - w * y)
    R[:, 2, 1] = 2 * (y * z + w * x)
    R[:, 2, 2] = 1 - 2 * (x * x + y * y)
    return R


def quat_from_euler(roll: np.ndarray, pitch: np.ndarray, yaw: np.ndarray) -> np.ndarray:
    """Quaternions (xyzw) ``(n, 4)`` of ZYX Euler angles [rad]."""
    cr, sr = np.cos(roll / 2), np.sin(roll / 2)
    cp, sp = np.cos(pitch / 2), np.sin(pitch / 2)
    cy, sy = np.cos(yaw / 2), np.sin(yaw / 2)
    x = sr * cp * cy - cr * sp * sy
    y = cr * sp * cy + sr * cp * sy
    z = cr * cp * sy - sr * sp * cy
    w = cr * cp * cy + sr * sp * sy
    return np.stack([x, y, z, w], axis=-1)


def yaw_of(q: np.ndarray) -> np.ndarray:
    """ZYX yaw [rad] ``(n,)`` of xyzw quaternions ``(n, 4)``."""
    x, y, z, w = q[:, 0], q[:, 1], q[:, 2], q[:, 3]
    return np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
