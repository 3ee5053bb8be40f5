r"""An ultrasonic altimeter (MaxBotix MB1040-like): the height above the floor.

Its wide cone (about 30°) hears the nearest echo, which over a flat floor is the height ``h =
p_z - z_floor`` whatever the tilt (up to half the cone). Reading ``h + σ z`` with ``σ = 2.5 cm``
(its 1-inch resolution), 10 Hz, from 0.15 m to 6 m; ``valid = 0`` outside, or tilted beyond the
cone. A quadsim sensor part: class attributes declare its outputs and parameters,
:meth:`Sonar.measure` is array-API code, so every runner of ``quadsim fly`` can run it.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

from quadsim.loop.parts import Context, Output, Param, Sensor


class Sonar(Sensor):
    """Ultrasonic altimeter: outputs ``<name>_height`` [m] and ``<name>_valid``."""

    outputs: ClassVar[tuple[Output, ...]] = (
        Output("height", 1, "m", "height above the floor (0 without a reading)"),
        Output("valid", 1, "1", "1 where the height is a reading"),
    )
    params: ClassVar[dict[str, Param]] = {
        "noise": Param(0.025, "noise std [m]", lo=0.0, hi=1.0),
        "max_height": Param(6.0, "largest height read [m]", positive=True),
        "min_height": Param(0.15, "smallest height read [m]", lo=0.0),
        "half_cone_deg": Param(15.0, "largest tilt with an echo [deg]", lo=0.0, hi=90.0),
    }

    default_rate: ClassVar[float | None] = 10.0

    def __init__(self, name: str = "sonar", rate: float | None = 10.0, **values: float):
        super().__init__(name, rate, **values)
        self.streams = ((f"part:{self.name}", 1),)

    def measure(self, k: Any, truth: Any, state: Any, z: Any, ctx: Context) -> tuple[dict, Any]:
        """Height and validity at step ``k``; stateless."""
        xp = ctx.xp
        floor = 0.0 if ctx.world is None or ctx.world.ground is None else ctx.world.ground.height
        h = truth.pos[..., 2] - floor
        qx, qy = truth.quat[..., 0], truth.quat[..., 1]
        cos_tilt = 1.0 - 2.0 * (qx * qx + qy * qy)  # body z against world z
        valid = xp.logical_and(xp.logical_and(h >= self.min_height, h <= self.max_height),
                               cos_tilt >= math.cos(math.radians(self.half_cone_deg)))
        one = 1.0 + 0.0 * h
        return {"height": xp.where(valid, h + self.noise * z[..., 0], 0.0 * h),
                "valid": xp.where(valid, one, 0.0 * one)}, state
