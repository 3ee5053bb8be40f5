r"""Altitude hold on a downward rangefinder: quadsim's geometric law, the height from the sensor.

The height above the floor is ``h = r cos θ`` from the rangefinder's range ``r`` along the body's
``-z`` axis (``cos θ``, the tilt, from the attitude), held between readings by the loop; where
the sensor has no reading the reference height stands in (no altitude correction). The position
in the plane and the attitude come from the state the loop gives (the truth, or an estimator's).
A quadsim controller part: ``reads`` names the readings it takes, ``from_table`` builds it from
the scenario's ``[controller]`` table, and the call is array-API code, so it is traced into
every runner of ``quadsim fly``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from quadsim.loop.control import control, init_state, load_gains
from quadsim.loop.parts import Controller, Param, check_params


class AltitudeHold(Controller):
    """Geometric control with the height from the rangefinder ``sensor`` (default ``"tof"``)."""

    params: ClassVar[dict[str, Param]] = {
        "floor": Param(0.0, "floor height under the drone [m]", lo=-1e3, hi=1e3),
    }

    def __init__(self, gains: Any, sensor: str = "tof", floor: float = 0.0) -> None:
        super().__init__(gains)
        self.floor = float(floor)
        self.reads = (f"{sensor}_range", f"{sensor}_valid")

    @classmethod
    def from_table(cls, table: dict, drone: Any, dt: float) -> AltitudeHold:
        """From ``[controller]``: ``sensor`` (the rangefinder's table name), ``floor`` [m]."""
        sensor = table.get("sensor", "tof")
        if not isinstance(sensor, str):
            raise ValueError(f"sensor: the name of a rangefinder table; got {sensor!r}")
        values = check_params(cls.params, {k: v for k, v in table.items()
                                           if k not in ("kind", "sensor", "rate")})  # fmt: skip
        gains = load_gains(f"{drone.name}_geometric", drone=drone, dt=dt)
        return cls(gains, sensor, **values)

    def init_state(self, gains: Any, shape: tuple, xp: Any = None, dtype: Any = None) -> Any:
        """The geometric controller's state."""
        return init_state(gains, shape, xp, dtype)

    def __call__(self, state: Any, ref: Any, gains: Any, cstate: Any,
                 readings: dict) -> tuple[Any, Any]:  # fmt: skip
        """The geometric law on ``state`` with ``z`` from the rangefinder."""
        from array_api_compat import array_namespace

        xp = array_namespace(state.pos)
        r, valid = readings[self.reads[0]], readings[self.reads[1]]
        qx, qy = state.quat[..., 0], state.quat[..., 1]
        h = r * (1.0 - 2.0 * (qx * qx + qy * qy))
        z = xp.where(valid > 0.5, self.floor + h, ref.pos[..., 2])
        pos = xp.stack([state.pos[..., 0], state.pos[..., 1], z], axis=-1)
        return control(state._replace(pos=pos), ref, gains, cstate)
