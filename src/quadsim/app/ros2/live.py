r"""A scenario's closed loop stepped one physics step at a time, with commands per drone.

:class:`LiveLoop` runs the loop of :func:`quadsim.loop.flight.fly` (the per-step function of
:func:`quadsim.loop.brain.make_brain` on NumPy, then ``Simulator.step``) one step per call, so a
caller can change what each drone obeys between steps. Each drone is in one mode:

* ``"auto"``: the scenario's controller follows the scenario's reference (what ``fly`` does;
  with no command ever given the flight equals ``fly``'s per-step loop, sample for sample);
* ``"pose"``: the same controller holds a position and yaw set point (:meth:`set_pose`);
* ``"land"``: the same controller descends at :data:`LAND_SPEED` from where the drone was, to
  the ground, then the motors stop;
* ``"attitude"``: roll, pitch, yaw rate and collective thrust (:meth:`set_attitude`) through the
  PID attitude and rate stages at the physics rate (the ``thrust_attitude`` action level of the
  environments, :class:`quadsim.app.envs.actions.ThrustAttitude`);
* ``"rpm"``: rotor speeds [RPM] given directly (:meth:`set_rpm`), held until the next ones;
* ``"cut"``: every rotor commanded to 0.

The brain runs every step whatever the modes (its sensors, estimator and controller state stay
current, so a drone handed back to ``"auto"`` or ``"pose"`` continues smoothly); only the rotor
command of a drone outside ``auto``/``pose``/``land`` is replaced. A scenario without an IMU gets
an ideal one (no noise, no bias) so that the step always has readings to publish.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...loop.brain import loop_periods
from ...loop.records import numpy_state
from ...loop.step_runner import StepLoop
from ...physics import rotors
from ...physics.rotation import to_euler
from ...physics.sensors import ImuParams

__all__ = ["LAND_SPEED", "MODES", "LiveLoop", "yaw_of"]

MODES = ("auto", "pose", "land", "attitude", "rpm", "cut")
"""The modes a drone can be in (module docstring)."""

LAND_SPEED = 0.5
"""Descent speed of ``"land"`` [m/s]."""

class _Reference:
    """The controller's reference: the scenario's (plus the formation offset), with set points
    per drone (``held``: pose or land)."""  # noqa: D205, D209

    def __init__(self, trajectory: Any, offset: np.ndarray, ground: float) -> None:
        n = offset.shape[0]
        self.trajectory, self.offset, self.ground = trajectory, offset, ground
        self.held = np.zeros(n, dtype=bool)
        self.pos = np.zeros((n, 3))
        self.yaw = np.zeros(n)
        self.land_t0 = np.full(n, np.nan)  # landing start time, NaN: not landing

    def __call__(self, t: float) -> Any:
        ref = self.trajectory(t)
        n = self.held.shape[0]

        def rows(a: Any, shape: tuple) -> np.ndarray:
            return np.array(np.broadcast_to(np.asarray(a, dtype=np.float64), shape))

        pos = rows(ref.pos, (n, 3)) + self.offset
        fields = {
            "pos": pos,
            **{k: rows(getattr(ref, k), (n, 3)) for k in ("vel", "acc", "jerk", "snap")},
            "yaw": rows(ref.yaw, (n,)),
            "yaw_rate": rows(ref.yaw_rate, (n,)),
        }
        if self.held.any():
            h, h1 = self.held[:, None], self.held
            target = self.pos.copy()
            vel_z = np.zeros(n)
            landing = ~np.isnan(self.land_t0)
            if landing.any():
                z = self.pos[:, 2] - LAND_SPEED * (t - np.where(landing, self.land_t0, 0.0))
                target[:, 2] = np.where(landing, np.maximum(z, self.ground), target[:, 2])
                vel_z = np.where(landing & (z > self.ground), -LAND_SPEED, 0.0)
            fields["pos"] = np.where(h, target, pos)
            for k in ("vel", "acc", "jerk", "snap"):
                fields[k] = np.where(h, 0.0, fields[k])
            fields["vel"][:, 2] = np.where(h1, vel_z, fields["vel"][:, 2])
            fields["yaw"] = np.where(h1, self.yaw, fields["yaw"])
            fields["yaw_rate"] = np.where(h1, 0.0, fields["yaw_rate"])
        return ref._replace(**fields)


class LiveLoop:
    """The closed loop of an assembled scenario (:func:`quadsim.app.scenario.build`), stepped live.

    Args:
        objs: The :class:`~quadsim.app.scenario.Assembly` (its simulator is stepped in place).
        jit: Trace the per-step function with JAX (about 0.1 ms a step against about 1 ms
            on NumPy): ``None`` when JAX is installed and the controller traces, ``True`` to
            require it, ``False`` for NumPy.

    Attributes:
        sim: The simulator.
        mode: ``(n,)`` array of mode names (:data:`MODES`).
        out: The brain's outputs of the last step (``cmd_rpm``, ``gyro``, ``accel``,
            ``ref_pos``, ...; arrays with a leading drone axis), ``None`` before the first.
        rpm: The rotor command [RPM] ``(n, N)`` the plant got at the last step.
        imu: The IMU in the loop (the scenario's, or an ideal one at the physics rate).
        backend: ``"JAX"`` or ``"NumPy"``: what runs the per-step function.
    """

    def __init__(self, objs: Any, *, jit: bool | None = None) -> None:
        sim = objs.sim
        if sim.system.n_cmd != sim.drone.mixing_matrix.shape[1]:
            raise ValueError(
                "the live loop needs a rotor-level model (first_principles or euler_zyx)"
            )
        self.sim, self.objs = sim, objs
        n, dt = sim.n, float(sim.dt)
        self.ideal_imu = objs.imu is None
        imu = objs.imu or ImuParams(0.0, 0.0, 0.0, 0.0, rate=1.0 / dt, name="ideal")
        self.imu = imu
        self.sens = objs.sensors._replace(imu=imu)
        self.periods = loop_periods(dt, objs.gains, self.sens)
        self.offset = np.broadcast_to(np.asarray(objs.ref_offset, dtype=np.float64), (n, 3))
        world = getattr(sim, "world", None)
        ground = getattr(getattr(world, "ground", None), "height", 0.0) if world else 0.0
        self.ref = _Reference(objs.trajectory, self.offset, float(ground or 0.0))
        self.state = numpy_state(sim.state)
        # the loop's one step, the reference given each tick (held poses, landing)
        self.step_loop = StepLoop(sim, None, objs.control, objs.gains,
                                  rotors.make_allocator(sim.drone), self.sens,
                                  getattr(objs.control, "command", None), None, self.offset, jit,
                                  objs.seed, self.periods, objs.estimator,
                                  ref0=self.ref(self.time))  # fmt: skip
        # compile now, not at the first step, where it would stall a paced loop
        self.step_loop.warm()
        self.backend = self.step_loop.backend
        self.n_rotors = sim.drone.mixing_matrix.shape[1]
        self.mode = np.array(["auto"] * n, dtype=object)
        self.rpm_cmd = np.zeros((n, self.n_rotors))
        self.att_action = np.zeros((n, 4))
        self._attitude: Any = None
        self.out: dict | None = None
        self.rpm = np.zeros((n, self.n_rotors))
        self.rpm_max = float(np.max(rotors.make_allocator(sim.drone).rpm_max))

    # ------------------------------------------------------------------ commands

    def _rows(self, drones: Any) -> np.ndarray:
        idx = np.atleast_1d(np.asarray(drones, dtype=np.int64))
        if idx.size and (idx.min() < 0 or idx.max() >= self.sim.n):
            raise IndexError(f"drone index out of range 0..{self.sim.n - 1}: {drones!r}")
        return idx

    def set_mode(self, drones: Any, mode: str) -> None:
        """Put drones in ``"auto"``, ``"cut"``, ``"land"`` or ``"pose"`` holding where they are
        (for ``"pose"``: the current position and yaw)."""  # noqa: D205, D209
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}; got {mode!r}")
        idx = self._rows(drones)
        if mode in ("pose", "land"):
            yaw = np.asarray(to_euler(self.state.quat[idx]))[..., 2]
            self._hold(idx, self.state.pos[idx], yaw)
            if mode == "land":
                self.ref.land_t0[idx] = self.sim.time
        else:
            self.ref.held[idx] = False
            self.ref.land_t0[idx] = np.nan
        self.mode[idx] = mode

    def _hold(self, idx: np.ndarray, pos: Any, yaw: Any) -> None:
        self.ref.held[idx] = True
        self.ref.pos[idx] = pos
        self.ref.yaw[idx] = yaw
        self.ref.land_t0[idx] = np.nan

    def set_pose(self, drone: int, pos: Any, yaw: float) -> None:
        """Hold the position ``pos`` [m] (world) and ``yaw`` [rad] with the scenario's
        controller."""  # noqa: D205, D209
        idx = self._rows(drone)
        self._hold(idx, np.asarray(pos, dtype=np.float64), float(yaw))
        self.mode[idx] = "pose"

    def set_rpm(self, drone: int, rpm: Any) -> None:
        """Command the rotor speeds ``rpm`` [RPM] ``(N,)`` (clipped to ``[0, rpm_max]``)."""
        idx = self._rows(drone)
        r = np.asarray(rpm, dtype=np.float64).reshape(self.n_rotors)
        self.rpm_cmd[idx] = np.clip(r, 0.0, self.rpm_max)
        self.ref.held[idx] = False
        self.mode[idx] = "rpm"

    def set_attitude(
        self, drone: int, roll: float, pitch: float, yaw_rate: float, thrust: float
    ) -> None:
        """Roll and pitch [rad], yaw rate [rad/s] and collective thrust as a fraction (0..1) of
        the drone's range, tracked by the PID attitude and rate stages."""  # noqa: D205, D209
        level = self.attitude_level
        idx = self._rows(drone)
        a = np.array(
            [
                2.0 * float(thrust) - 1.0,
                roll / level.tilt_limit,
                pitch / level.tilt_limit,
                yaw_rate / level.yaw_rate_limit,
            ]
        )
        if not (self.mode[idx] == "attitude").all():
            level.reset(np.isin(np.arange(self.sim.n), idx))
        self.att_action[idx] = np.clip(a, -1.0, 1.0)
        self.ref.held[idx] = False
        self.mode[idx] = "attitude"

    @property
    def attitude_level(self) -> Any:
        """The ``thrust_attitude`` inner loop of every drone (built on first use)."""
        if self._attitude is None:
            from ..envs.actions import ThrustAttitude

            self._attitude = ThrustAttitude(self.sim.drone, self.sim.n, float(self.sim.dt))
        return self._attitude

    # ------------------------------------------------------------------ stepping

    def think(self) -> dict:
        """The brain at the current step: sensors, estimator, reference, controller, command."""
        s, sim = self.state, self.sim
        ref = self.ref(self.time)
        out, _ = self.step_loop.think(s, ref)
        out = {k: np.asarray(v) for k, v in out.items()}
        out |= {"ref_pos": ref.pos, "ref_vel": ref.vel, "ref_yaw": ref.yaw}
        rpm = np.array(out["cmd_rpm"], dtype=np.float64)
        mode = self.mode
        if (mode == "rpm").any():
            rpm = np.where((mode == "rpm")[:, None], self.rpm_cmd, rpm)
        if (mode == "attitude").any():
            att = self.attitude_level.command(self.att_action, s)
            rpm = np.where((mode == "attitude")[:, None], att, rpm)
        cut = mode == "cut"
        landing = mode == "land"
        if landing.any():  # down: stop the motors once on the ground
            status = sim.status
            landed = (
                np.asarray(getattr(status, "landed", np.zeros(sim.n)), bool)
                if status is not None
                else np.zeros(sim.n, bool)
            )
            near = s.pos[:, 2] <= self.ref.ground + 0.02
            cut = cut | (
                landing
                & (landed | near)
                & (
                    self.ref.pos[:, 2] - LAND_SPEED * (sim.time - np.nan_to_num(self.ref.land_t0))
                    <= self.ref.ground
                )
            )
        if cut.any():
            rpm = np.where(cut[:, None], 0.0, rpm)
        out["cmd_rpm"] = rpm
        self.out, self.rpm = out, rpm
        return out

    def step(self) -> Any:
        """One step: :meth:`think`, then the plant with the resulting command; the new state."""
        self.think()
        self.state = numpy_state(self.sim.step(self.rpm))
        return self.state

    @property
    def time(self) -> float:
        """Simulated time [s]."""
        return float(self.sim.time)


def yaw_of(q: Any) -> float:
    """Yaw [rad] of a scalar-last quaternion ``(x, y, z, w)`` (ZYX)."""
    x, y, z, w = (float(v) for v in q)
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))
