r"""A three-axis magnetometer (LIS3MDL-like): the Earth's magnetic field, seen from the body.

Reads ``m_b = S R(q)ᵀ m_w + b + σ z``: the world field ``m_w`` (``field``, ENU, default about
Zurich's: 21.6 µT north, 43.5 µT down, 3° east declination) turned into the body frame by the
attitude ``q``, through a soft-iron matrix ``S`` (``soft_iron``, default the identity), plus a
hard-iron bias ``b`` (``bias``, body frame) and white noise ``σ`` (``noise``, per axis, 0.3 µT
at 100 Hz). Its parameters are given in µT; its reading ``<name>_field`` is in tesla, the SI
unit of ``sensor_msgs/MagneticField``, the ROS 2 message it declares (covariance ``σ² I``).

A quadsim sensor part written outside quadsim: vector and matrix parameters (``Param(shape=)``)
given in a scenario as lists, the body-from-world rotation of
:func:`quadsim.physics.rotation.rotate_inverse`, array-API code that every runner traces, and a
standard ROS 2 message type, all declared here and nowhere else.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from quadsim.loop.parts import Context, Output, Param, Ros2, Sensor
from quadsim.physics.rotation import rotate_inverse

UT = 1e-6
"""Tesla per microtesla."""


class Magnetometer(Sensor):
    """Three-axis magnetometer: output ``<name>_field`` [T] ``(3,)`` in the body frame."""

    outputs: ClassVar[tuple[Output, ...]] = (
        Output("field", 3, "T", "magnetic field in the body frame (x forward, y left, z up)"),
    )
    params: ClassVar[dict[str, Param]] = {
        "field": Param((1.13, 21.57, -43.5), "Earth's field in the world frame (east, north, "
                       "up) [uT]", lo=-100.0, hi=100.0, shape=(3,)),
        "bias": Param((0.0, 0.0, 0.0), "hard-iron bias in the body frame [uT]", lo=-1000.0,
                      hi=1000.0, shape=(3,)),
        "soft_iron": Param(((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)),
                           "soft-iron matrix applied to the body-frame field [1]", lo=-10.0,
                           hi=10.0, shape=(3, 3)),
        "noise": Param(0.3, "noise std per axis [uT]", lo=0.0, hi=100.0),
    }  # fmt: skip
    default_rate: ClassVar[float | None] = 100.0

    def __init__(self, name: str = "mag", rate: float | None = 100.0, **values: Any) -> None:
        super().__init__(name, rate, **values)  # checks the rate and the parameters' shapes
        self.streams = ((f"part:{self.name}", 3),)  # three normals a step

    def measure(self, k: Any, truth: Any, state: Any, z: Any, ctx: Context) -> tuple[dict, Any]:
        """The field in the body frame at step ``k``; stateless."""
        xp = ctx.xp
        zero = 0.0 * truth.pos  # (n, 3) of the step's array type
        world = zero + xp.asarray(self.field * UT)
        body = rotate_inverse(truth.quat, world)  # world to body, R(q)ᵀ m_w
        s = self.soft_iron.tolist()  # constants: a sum of products traces on every runner
        iron = xp.stack([s[i][0] * body[..., 0] + s[i][1] * body[..., 1]
                         + s[i][2] * body[..., 2] for i in range(3)], axis=-1)  # fmt: skip
        reading = iron + xp.asarray(self.bias * UT) + (self.noise * UT) * z[..., 0:3]
        return {"field": reading}, state

    def ros2(self, ctx: Context) -> tuple[Ros2, ...]:
        """``sensor_msgs/MagneticField`` [T], its covariance ``σ² I`` [T²]."""
        cov = np.eye(3) * (self.noise * UT) ** 2
        return (Ros2("sensor_msgs/msg/MagneticField", (("magnetic_field", "field"),),
                     (("magnetic_field_covariance", tuple(cov.ravel())),)),)  # fmt: skip
