r"""The built-in sensors as parts: IMU, motion capture, barometer and GNSS.

Each wraps its physics (:mod:`quadsim.physics.sensors`) and its parameter record (a scenario's
``[imu]``, ``[mocap]``, ``[baro]``, ``[gnss]`` tables, loaded with their presets), and the loop
reads it like any other part (:func:`quadsim.loop.sensing.make_sense`), first and in this order:

* **IMU** (``imu``; readings ``gyro``, ``accel``): ``a = (v_k - v_{last}) / (m dt)``,
  ``(ω_m, a_m, b) = imu(q_k, ω_k, a, b, z)``, its state (bias, ``v_{last}``) moving on only at
  its samples (:attr:`~quadsim.loop.parts.Sensor.held_state`); a rate above the physics rate
  is read once per step, its noise discretised at ``dt``;
* **motion capture** (``mocap``; ``mocap_pos``, ``mocap_stamp`` and the unlogged
  ``mocap_quat``): a delay line that moves every step, a sample every ``m`` steps, which a dropout
  gap may lose; it holds its own readings (:attr:`~quadsim.loop.parts.Sensor.holds`);
* **barometer** (``baro``; ``baro_alt``): a bias that walks every step, a sample every ``m``;
* **GNSS** (``gnss``; ``gnss_pos``, ``gnss_vel``, ``gnss_stamp``): a delay line and a
  correlated error every step, a fix every ``m`` steps.

A time stamp [s] is when the delivered reading was taken, ``k dt`` less the latency. Their
normals are the streams ``imu`` (12), ``mocap`` (6, 7 with dropouts), ``baro`` (2), ``gnss`` (9),
and at the start ``imu_init`` (6), ``baro_init`` (1), ``gnss_init`` (3)
(:func:`quadsim.physics.noise.normals` of ``(seed, stream, k0, drone)``).
"""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple

import numpy as np

from ...physics import sensors
from ...physics.noise import normals
from ..sensing import pick
from . import Context, Output, Ros2, Sensor

__all__ = [
    "STANDARD",
    "Baro",
    "Gnss",
    "Imu",
    "ImuPartState",
    "Mocap",
    "MocapPartState",
    "standard_parts",
]


class ImuPartState(NamedTuple):
    """The IMU part's state.

    Attributes:
        bias: :class:`~quadsim.physics.sensors.ImuState` (in-run biases).
        vel: Velocity at the previous sample ``(n, 3)`` [m/s].
    """

    bias: Any
    vel: Any


class MocapPartState(NamedTuple):
    """The motion-capture part's state.

    Attributes:
        line: :class:`~quadsim.physics.sensors.MocapState` (the delay line).
        gap: Whether it is in a dropout gap ``(n,)`` (0/1), or ``None`` without dropouts.
        held: The held ``(pos (n, 3), stamp (n,))``, or ``None`` when every sample is taken.
    """

    line: Any
    gap: Any
    held: Any


class _Standard(Sensor):
    """A built-in sensor of a parameter record ``params`` (its ``rate`` the part's)."""

    def __init__(self, params: Any) -> None:
        super().__init__(self.kind, float(params.rate))
        self.params_record = params

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.params_record!r})"


class Imu(_Standard):
    """The IMU (module docstring): readings ``gyro`` [rad/s] and ``accel`` [m/s²] ``(n, 3)``."""

    kind: ClassVar[str] = "imu"
    label = "the IMU"
    faster_ok: ClassVar[bool] = True
    held_state: ClassVar[bool] = True
    outputs: ClassVar[tuple[Output, ...]] = (
        Output("gyro", 3, "rad/s", "gyroscope", key="gyro"),
        Output("accel", 3, "m/s^2", "accelerometer (specific force)", key="accel"),
    )  # fmt: skip
    streams = (("imu", 12),)

    def init(self, n: int, truth: Any, ctx: Context) -> ImuPartState:
        """Turn-on biases and the start velocity."""
        z = normals(ctx.seed, "imu_init", ctx.k0, np.arange(n), 6)
        bias = sensors.imu_init(self.params_record, (n,), z, xp=ctx.xp, dtype=ctx.xp.float64)
        return ImuPartState(bias, truth.vel)

    def measure(self, k: Any, truth: Any, state: Any, z: Any, ctx: Context) -> tuple[dict, Any]:
        """One sample from the mean acceleration since the last one."""
        imu_s, v_last = state
        imu_dt = ctx.period * ctx.dt
        acc = (truth.vel - v_last) / imu_dt
        reading, imu_new = sensors.imu_measure(truth.quat, truth.ang_vel, acc, ctx.gravity,
                                               self.params_record, imu_s, imu_dt, z)  # fmt: skip
        return {"gyro": reading.gyro, "accel": reading.accel}, ImuPartState(imu_new, truth.vel)

    def ros2(self, ctx: Context) -> tuple[Ros2, ...]:
        """``sensor_msgs/Imu`` on ``imu``: no orientation (``orientation_covariance[0] = -1``,
        REP 145), the readings' white-noise variances ``N²/T`` per axis at the sample period
        ``T`` on the covariances' diagonals (:func:`quadsim.physics.sensors.imu_discrete_std`)."""  # noqa: D205, D209
        std = sensors.imu_discrete_std(self.params_record, ctx.period * ctx.dt)

        def diagonal(s: Any) -> tuple[float, ...]:
            return tuple(np.diag(np.asarray(s, dtype=np.float64) ** 2).ravel().tolist())

        return (Ros2("sensor_msgs/msg/Imu",
                     (("angular_velocity", "gyro"), ("linear_acceleration", "accel")),
                     (("orientation.w", 0.0), ("orientation_covariance", (-1.0,) + (0.0,) * 8),
                      ("angular_velocity_covariance", diagonal(std["gyro"])),
                      ("linear_acceleration_covariance", diagonal(std["accel"]))),
                     leaf="imu"),)  # fmt: skip


class Mocap(_Standard):
    """Motion capture (module docstring): ``mocap_pos`` [m] ``(n, 3)``, ``mocap_stamp`` [s]
    ``(n,)``, and ``mocap_quat`` ``(n, 4)`` xyzw for the estimators."""  # noqa: D205, D209

    kind: ClassVar[str] = "mocap"
    label = "motion capture"
    faster_ok: ClassVar[bool] = True
    holds: ClassVar[bool] = True
    outputs: ClassVar[tuple[Output, ...]] = (
        Output("pos", 3, "m", "motion-capture position"),
        Output("stamp", 1, "s", "when the delivered position was taken"),
        Output("quat", 4, "1", "motion-capture attitude (xyzw)", logged=False),
    )  # fmt: skip

    def __init__(self, params: Any) -> None:
        super().__init__(params)
        self.dropping = float(getattr(params, "dropout", 0.0)) > 0.0
        self.streams = (("mocap", 7 if self.dropping else 6),)
        if self.dropping:
            self.thresholds = sensors.dropout_thresholds(params)

    def init(self, n: int, truth: Any, ctx: Context) -> MocapPartState:
        """The delay line holds the start pose; readings are held where some samples are not
        taken (a period > 1, dropouts)."""  # noqa: D205, D209
        xp, f64 = ctx.xp, ctx.xp.float64
        line = sensors.mocap_init(truth.pos, truth.quat, self.params_record, ctx.dt)
        gap = xp.zeros((n,), dtype=f64) if self.dropping else None
        held = None
        if ctx.period > 1 or self.dropping:
            held = (xp.zeros((n, 3), dtype=f64), xp.zeros((n,), dtype=f64))
        return MocapPartState(line, gap, held)

    def measure(self, k: Any, truth: Any, state: Any, z: Any, ctx: Context) -> tuple[dict, Any]:
        """The delayed pose, taken where a sample is due and not lost in a gap."""
        xp, m, now = ctx.xp, ctx.period, ctx.due
        line, gap, held = state
        pos = truth.pos
        reading, line = sensors.mocap_measure(pos, truth.quat, self.params_record, line,
                                              z[..., :6])  # fmt: skip
        p_m, stamp = reading.pos, k * ctx.dt - float(self.params_record.latency) + 0.0 * pos[..., 0]
        if gap is not None:  # a sample due may be lost (the dropout model of the mocap)
            c_start, c_stay = self.thresholds
            zd = z[..., 6]
            lost = xp.where(gap > 0.5, zd < c_stay, zd > c_start)
            gap = xp.where(now, xp.where(lost, 1.0, 0.0), gap) if m > 1 else \
                xp.where(lost, 1.0, 0.0)  # fmt: skip
            fresh = gap < 0.5 if m == 1 else xp.logical_and(now, gap < 0.5)
        else:
            fresh = now
        if held is not None:  # (the held attitude is not used)
            p_m, stamp = pick(fresh, p_m, held[0], xp), pick(fresh, stamp, held[1], xp)
            held = (p_m, stamp)
        return ({"pos": p_m, "stamp": stamp, "quat": reading.quat, "fresh": fresh},
                MocapPartState(line, gap, held))  # fmt: skip


class Baro(_Standard):
    """The barometer (module docstring): ``baro_alt`` [m] ``(n,)``."""

    kind: ClassVar[str] = "baro"
    label = "the barometer"
    outputs: ClassVar[tuple[Output, ...]] = (Output("alt", 1, "m", "barometric altitude"),)
    streams = (("baro", 2),)

    def init(self, n: int, truth: Any, ctx: Context) -> Any:
        """The turn-on bias (:class:`~quadsim.physics.sensors.BaroState`)."""
        z = normals(ctx.seed, "baro_init", ctx.k0, np.arange(n), 1)
        return sensors.baro_init(self.params_record, (n,), z, xp=ctx.xp, dtype=ctx.xp.float64)

    def measure(self, k: Any, truth: Any, state: Any, z: Any, ctx: Context) -> tuple[dict, Any]:
        """An altitude reading; the bias walks every step."""
        alt, state = sensors.baro_measure(truth.pos, self.params_record, state, ctx.dt, z)
        return {"alt": alt}, state


class Gnss(_Standard):
    """GNSS (module docstring): ``gnss_pos`` [m], ``gnss_vel`` [m/s] ``(n, 3)``,
    ``gnss_stamp`` [s] ``(n,)``."""  # noqa: D205, D209

    kind: ClassVar[str] = "gnss"
    label = "GNSS"
    outputs: ClassVar[tuple[Output, ...]] = (
        Output("pos", 3, "m", "GNSS position"),
        Output("vel", 3, "m/s", "GNSS velocity"),
        Output("stamp", 1, "s", "when the delivered fix was taken"),
    )  # fmt: skip
    streams = (("gnss", 9),)

    def init(self, n: int, truth: Any, ctx: Context) -> Any:
        """The delay line of the start state and the correlated error's draw."""
        xp = ctx.xp
        z = normals(ctx.seed, "gnss_init", ctx.k0, np.arange(n), 3)
        s = sensors.gnss_init(np.asarray(truth.pos), np.asarray(truth.vel), self.params_record, z,
                              ctx.dt)  # fmt: skip
        return type(s)(*(xp.asarray(np.asarray(a, np.float64)) for a in s))

    def measure(self, k: Any, truth: Any, state: Any, z: Any, ctx: Context) -> tuple[dict, Any]:
        """A fix; the delay line and the error move every step."""
        fix, state = sensors.gnss_measure(truth.pos, truth.vel, self.params_record, state, z,
                                          ctx.dt)  # fmt: skip
        stamp = k * ctx.dt - float(self.params_record.latency) + 0.0 * truth.pos[..., 0]
        return {"pos": fix.pos, "vel": fix.vel, "stamp": stamp}, state


STANDARD = {"imu": Imu, "mocap": Mocap, "baro": Baro, "gnss": Gnss}
"""The built-in sensor parts by their :class:`~quadsim.loop.brain.Sensors` field, in the order
the loop reads them."""


def standard_parts(sens: Any) -> tuple:
    """The built-in sensors of a :class:`~quadsim.loop.brain.Sensors` record that has them, as
    parts, in the order the loop reads them: IMU, motion capture, barometer, GNSS."""  # noqa: D205, D209
    kinds = ((cls, getattr(sens, kind)) for kind, cls in STANDARD.items())
    return tuple(cls(params) for cls, params in kinds if params is not None)
