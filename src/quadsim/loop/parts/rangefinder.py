r"""A downward time-of-flight rangefinder (VL53L1x-like): range along the body's ``-z`` axis.

The ray leaves the centre of mass along ``d = -R e_z`` (world frame, ``R`` body to world) and
stops at the first surface of the world: the floor (``z = h``) and every wall and box
(:class:`~quadsim.physics.world.World`), by the slab test per axis-aligned box,

.. math::

    t_{in} = \max_i \min(t^{lo}_i, t^{hi}_i), \quad t_{out} = \min_i \max(t^{lo}_i, t^{hi}_i),
    \quad t^{lo|hi}_i = (b^{lo|hi}_i - p_i) / d_i,

a hit where ``0 <= t_in <= t_out``; the range ``r`` is the nearest hit. The reading is
``r + σ(r) z`` with the noise of the Crazyflie firmware's model of this sensor,
``σ(r) = a (1 + exp(c (r - r_0)))`` (``a = 2.5 mm``, ``c = 2.92135 /m``, ``r_0 = 2.5 m``:
millimetres near the floor, 0.2 m at 4 m), and ``valid = 1`` where ``r_min <= r <= r_max``; beyond
them (or with nothing in front: the ray up, no floor) there is no reading: ``range = 0``,
``valid = 0``. Defaults: ``r_max = 4 m`` and 25 Hz (the VL53L1x's long-distance mode, which needs
a timing budget of at least 33 ms; 25 Hz is a whole number of steps at the usual 100-1000 Hz
physics rates), ``r_min = 0.04 m``. Its field of view (27°) is not modelled: one ray.
"""

from __future__ import annotations

from typing import Any, ClassVar

from . import Context, Output, Param, Ros2, Sensor

_BIG = 1e6
"""[m] a range that stands for "no surface" (finite, so float32 and generated C keep it)."""
_FOV = 0.4712
"""[rad] the VL53L1x's field of view (27°), for its ROS 2 message (the reading is one ray)."""
_TINY = 1e-9
"""Direction components smaller than this are treated as this (a ray along a face)."""


def _down(quat: Any, xp: Any) -> tuple[Any, Any, Any]:
    """World direction of the body's -z axis, ``(d_x, d_y, d_z)``, each ``(n,)``."""
    x, y, z, w = (quat[..., i] for i in range(4))
    return (-2.0 * (x * z + w * y), -2.0 * (y * z - w * x), -(1.0 - 2.0 * (x * x + y * y)))


def _slabs(world: Any) -> list[tuple[tuple[float, ...], tuple[float, ...]]]:
    """``(lo, hi)`` of every surface the ray can meet: the floor's half-space, then the boxes."""
    inf = float("inf")
    out = []
    if world is not None and world.ground is not None:
        out.append(((-inf, -inf, -inf), (inf, inf, float(world.ground.height))))
    for box in () if world is None else world.boxes:
        out.append((tuple(map(float, box.lo)), tuple(map(float, box.hi))))
    return out


def ray_range(pos: Any, d: tuple[Any, Any, Any], world: Any, xp: Any) -> Any:
    """Distance [m] ``(n,)`` along ``d`` from ``pos`` ``(n, 3)`` to the first surface of ``world``
    (``1e6`` when there is none)."""  # noqa: D205, D209
    best = None
    for lo, hi in _slabs(world):
        t_in, t_out = None, None
        for i in range(3):
            if lo[i] == -float("inf") and hi[i] == float("inf"):
                continue  # no bound on this axis
            di = d[i]
            ds = xp.where(xp.abs(di) < _TINY, _TINY + 0.0 * di, di)
            p = pos[..., i]
            a = (lo[i] - p) / ds if lo[i] != -float("inf") else -_BIG + 0.0 * p
            b = (hi[i] - p) / ds if hi[i] != float("inf") else _BIG + 0.0 * p
            if hi[i] == float("inf"):  # moving down the axis meets lo's face last
                b = xp.where(ds > 0, b, -_BIG + 0.0 * p)
            if lo[i] == -float("inf"):
                a = xp.where(ds > 0, a, _BIG + 0.0 * p)
            near, far = xp.minimum(a, b), xp.maximum(a, b)
            t_in = near if t_in is None else xp.maximum(t_in, near)
            t_out = far if t_out is None else xp.minimum(t_out, far)
        if t_in is None:
            continue
        hit = xp.logical_and(t_in <= t_out, t_in >= 0.0)
        t = xp.where(hit, t_in, _BIG + 0.0 * t_in)
        best = t if best is None else xp.minimum(best, t)
    return _BIG + 0.0 * pos[..., 0] if best is None else best


class Rangefinder(Sensor):
    """The downward time-of-flight rangefinder (module docstring).

    Outputs ``<name>_range`` [m] (``0`` without a reading) and ``<name>_valid`` (1 or 0).
    """

    kind: ClassVar[str] = "rangefinder"
    outputs: ClassVar[tuple[Output, ...]] = (
        Output("range", 1, "m", "range along the body -z axis to the floor or an obstacle "
               "(0 without a reading)"),
        Output("valid", 1, "1", "1 where the range is a reading, 0 beyond the sensor's limits"),
    )  # fmt: skip
    params: ClassVar[dict[str, Param]] = {
        "max_range": Param(4.0, "largest range read [m]", positive=True, hi=100.0),
        "min_range": Param(0.04, "smallest range read [m]", lo=0.0, hi=100.0),
        "noise_a": Param(0.0025, "noise std near the floor, a [m]", lo=0.0, hi=1.0),
        "noise_c": Param(2.92135, "growth of the noise with range, c [1/m]", lo=0.0, hi=10.0),
        "noise_r0": Param(2.5, "range where the noise std is 2 a, r_0 [m]", lo=0.0, hi=100.0),
    }

    default_rate: ClassVar[float | None] = 25.0

    def __init__(self, name: str = "rangefinder", rate: float | None = 25.0, **values: float):
        super().__init__(name, rate, **values)
        if not self.min_range < self.max_range:
            raise ValueError(f"min_range: must be below max_range ({self.max_range} m); got "
                             f"{self.min_range}")  # fmt: skip
        self.streams = ((f"part:{self.name}", 1),)

    def measure(self, k: Any, truth: Any, state: Any, z: Any, ctx: Context) -> tuple[dict, Any]:
        """Range and validity at step ``k``; stateless."""
        xp = ctx.xp
        r = ray_range(truth.pos, _down(truth.quat, xp), ctx.world, xp)
        valid = xp.logical_and(r <= self.max_range, r >= self.min_range)
        rc = xp.minimum(r, self.max_range)
        std = self.noise_a * (1.0 + xp.exp(self.noise_c * (rc - self.noise_r0)))
        reading = xp.where(valid, rc + std * z[..., 0], 0.0 * rc)
        return {"range": reading, "valid": xp.where(valid, 1.0 + 0.0 * rc, 0.0 * rc)}, state

    def ros2(self, ctx: Context) -> tuple[Ros2, ...]:
        """``sensor_msgs/Range`` (infrared), ``+inf`` without a reading."""
        return (Ros2("sensor_msgs/msg/Range", (("range", "range"),),
                     (("radiation_type", 1), ("field_of_view", _FOV),
                      ("min_range", self.min_range), ("max_range", self.max_range)),
                     valid="valid"),)  # fmt: skip
