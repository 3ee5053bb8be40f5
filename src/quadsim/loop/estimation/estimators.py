r"""Estimators for the closed loop's estimator slot (:func:`quadsim.brain.make_brain`).

An estimator is an object with

* ``__call__(k, truth, readings, est) -> (state, est)``: the state the controller reads (a
  :class:`~quadsim.sim.State` with ``pos``, ``quat``, ``vel``, ``ang_vel``) from this step's
  sensor ``readings`` (``gyro``, ``accel``, ``imu_fresh``, ``mocap_pos``, ``mocap_quat``,
  ``mocap_fresh`` as present) and its own state ``est``; ``truth`` is used only for the
  logged consistency (NEES), never for the estimate;
* ``init(n, pos, vel, quat, *, seed, k0, xp) -> est``: its state at a flight's start;
* ``outputs``: ``[(name, size)]`` of what it logs, and ``log(est) -> {name: (n, size)}``.

:class:`EkfEstimator` runs the error-state EKF (:mod:`quadsim.estimation.eskf`) with
**delayed fusion** for late measurements: with a motion-capture latency of ``L`` physics steps
the filter itself runs ``L`` steps behind, at the time the measurement arriving now was taken
(its IMU samples wait in a buffer of ``L``), fuses it there, and the estimate the controller
reads is that state carried to now through the buffered samples (:func:`~quadsim.estimation.
eskf.strapdown`, no covariance: the state buffer and re-propagation of the issue). With
``latency_compensation=False`` the measurement is fused as if it were current (the baseline).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from ...physics import rotation
from . import eskf

__all__ = ["COMPLEMENTARY_OUTPUTS", "EKF_OUTPUTS", "ComplementaryEstimator", "EkfEstimator",
           "EkfSlot", "default_init_std"]

EKF_OUTPUTS = [("est_pos", 3), ("est_vel", 3), ("est_quat", 4), ("est_accel_bias", 3),
               ("est_gyro_bias", 3), ("est_cov", 15), ("est_nees", 1)]  # fmt: skip
"""What :class:`EkfEstimator` logs: the estimate the controller reads, the biases, the error
covariance's diagonal (position, velocity, attitude [rad²], biases; at the filter's time) and
the NEES of position, velocity and attitude (9 degrees of freedom, at the filter's time)."""


class EkfSlot(NamedTuple):
    """The EKF estimator's state (leading axis ``n``).

    Attributes:
        filt: :class:`~quadsim.estimation.eskf.EskfState` at the filter's time (``L`` steps
            ago).
        imu_buf: The last ``L`` IMU samples ``(n, L, 7)`` (gyro, accel, fresh), or ``None``.
        truth_buf: The last ``L`` true poses ``(n, L, 10)`` (pos, vel, quat; for the NEES
            only), or ``None``.
        pos: The current estimate ``(n, 3)`` [m].
        vel: ``(n, 3)`` [m/s].
        quat: ``(n, 4)``.
        nees: ``(n,)``.
    """

    filt: Any
    imu_buf: Any
    truth_buf: Any
    pos: Any
    vel: Any
    quat: Any
    nees: Any


def _pick(fresh: Any, new: Any, old: Any, xp: Any) -> Any:
    """``new`` where ``fresh`` (per drone ``(n,)``), else ``old``, over a tree of arrays."""
    from ..brain import _pick as pick

    return pick(fresh, new, old, xp)


def default_init_std(imu: Any, pos: float = 1e-3, vel: float = 1e-2,
                     att: float = math.radians(1.0)) -> np.ndarray:  # fmt: skip
    """The EKF's initial standard deviations (15) for an IMU: ``pos`` [m], ``vel`` [m/s] and
    ``att`` [rad] per axis, then the biases from the IMU's preset: the root sum of squares of
    its constant and turn-on biases, at least 0.02 m/s² and 0.1 deg/s."""  # noqa: D205, D209
    from ...physics.sensors import check_imu_params

    i = check_imu_params(imu)
    gb = np.sqrt(np.asarray(i.gyro_bias_std) ** 2 + np.asarray(i.gyro_bias) ** 2)
    ab = np.sqrt(np.asarray(i.accel_bias_std) ** 2 + np.asarray(i.accel_bias) ** 2)
    return np.concatenate([np.full(3, pos), np.full(3, vel), np.full(3, att),
                           np.maximum(ab, 0.02), np.maximum(gb, math.radians(0.1))])  # fmt: skip


class EkfEstimator:
    """The error-state EKF in the loop (module docstring).

    Args:
        imu: :class:`~quadsim.sensors.ImuParams` (propagation and its process noise).
        mocap: :class:`~quadsim.sensors.MocapParams` (position and attitude updates), or
            ``None``.
        g_vec: Gravity ``(3,)`` [m/s²].
        dt: Physics step [s].
        periods: :class:`~quadsim.brain.Periods` of the loop.
        init_std: Initial standard deviations (15): position [m], velocity [m/s], attitude
            [rad], accelerometer bias [m/s²], gyroscope bias [rad/s] (default
            :func:`default_init_std`); the initial estimate is
            the truth plus an error drawn from them (normals ``(seed, "est_init", k0,
            drone)``) unless ``init_error`` is false.
        mocap_attitude: Fuse the motion-capture attitude as well as its position.
        latency_compensation: Delayed fusion (module docstring); ``False``: fuse late
            measurements as if they were current.
        init_error: Draw the initial estimate's error (see ``init_std``).

    Raises:
        ValueError: No IMU, a standard deviation that is not finite and >= 0.
    """

    kind = "ekf"

    def __init__(self, imu: Any, mocap: Any, g_vec: Any, dt: float, periods: Any, *,
                 init_std: Any = None, mocap_attitude: bool = True,
                 latency_compensation: bool = True, init_error: bool = True) -> None:  # fmt: skip
        from ...physics.sensors import check_imu_params, mocap_delay_steps

        if imu is None:
            raise ValueError("the EKF needs an IMU (it propagates with the IMU's readings)")
        self.imu = check_imu_params(imu)
        self.mocap = mocap
        self.g_vec = np.asarray(g_vec, np.float64)
        self.dt = float(dt)
        self.imu_dt = float(periods.imu_dt or dt)
        self.m_i = int(periods.imu)
        lag = mocap_delay_steps(mocap, dt) if mocap is not None else 0
        self.L = lag if latency_compensation else 0
        self.mocap_attitude = bool(mocap_attitude)
        self.init_error = bool(init_error)
        s = np.asarray(default_init_std(self.imu) if init_std is None else init_std, np.float64)
        if s.shape != (15,) or not np.all(np.isfinite(s)) or np.any(s < 0):
            raise ValueError(f"estimator init_std must be 15 finite values >= 0; got {init_std!r}")
        self.init_std = s
        self.noise = eskf.EskfNoise(self.imu.gyro_noise_density, self.imu.accel_noise_density,
                                 self.imu.gyro_bias_walk, self.imu.accel_bias_walk)  # fmt: skip
        self.outputs = list(EKF_OUTPUTS)

    def init(self, n: int, pos: Any, vel: Any, quat: Any, *, seed: int = 0, k0: int = 0,
             xp: Any = np) -> EkfSlot:  # fmt: skip
        """The state at a flight's start: the truth plus a drawn error, ``P0 = diag(std²)``."""
        from ...physics.noise import normals

        pos, vel, quat = (np.asarray(a, np.float64) for a in (pos, vel, quat))
        e = np.zeros((n, 15))
        if self.init_error:
            e = normals(seed, "est_init", k0, np.arange(n), 15) * self.init_std
        q = rotation.multiply(quat, rotation.exp(-e[:, 6:9]))
        filt = eskf.eskf_init(pos - e[:, :3], vel - e[:, 3:6], q, self.init_std, xp=np)
        filt = filt._replace(accel_bias=-e[:, 9:12], gyro_bias=-e[:, 12:15])
        L = self.L
        imu_buf = truth_buf = None
        if L:
            acc0 = -rotation.rotate_inverse(quat, np.broadcast_to(self.g_vec, (n, 3)))
            one = np.concatenate([np.zeros((n, 3)), acc0, np.zeros((n, 1))], -1)  # not fresh
            imu_buf = np.repeat(one[:, None], L, axis=1)  # the filter waits at the start
            truth_buf = np.repeat(np.concatenate([pos, vel, quat], -1)[:, None], L, axis=1)
        slot = EkfSlot(filt, imu_buf, truth_buf, filt.pos, filt.vel, filt.quat, np.zeros(n))
        return _to(slot, xp)

    def __call__(self, k: Any, truth: Any, readings: dict, est: EkfSlot) -> tuple[Any, EkfSlot]:
        """One step (module docstring)."""
        from ...engines.sim import State
        from ...physics._array import namespace

        xp = namespace(readings["gyro"])
        L, f = self.L, est.filt
        one = 1.0 + 0.0 * readings["gyro"][..., :1]
        fresh_i = readings.get("imu_fresh", True)
        sample = xp.concat([readings["gyro"], readings["accel"], xp.where(fresh_i, one, 0.0 * one)],
                           axis=-1)  # fmt: skip
        now = xp.concat([truth.pos, truth.vel, truth.quat], axis=-1)
        imu_buf = truth_buf = None
        if L:
            seq = xp.concat([est.imu_buf, sample[..., None, :]], axis=-2)
            hist = xp.concat([est.truth_buf, now[..., None, :]], axis=-2)
            at, rest, imu_buf = seq[..., 0, :], seq[..., 1:, :], seq[..., 1:, :]
            then, truth_buf = hist[..., 0, :], hist[..., 1:, :]
        else:
            at, rest, then = sample, None, now
        # the filter's step at its time: propagate, then fuse what was measured then
        pred = eskf.eskf_predict(f, at[..., 0:3], at[..., 3:6], self.g_vec, self.imu_dt, self.noise)
        gate = self.m_i > 1 or L > 0  # held IMU readings, or the start's empty buffer
        f = _pick(at[..., 6] > 0.5, pred, f, xp) if gate else pred
        if self.mocap is not None:
            rows = eskf.position_rows(f, readings["mocap_pos"], self.mocap.pos_std)
            if self.mocap_attitude:
                rows += eskf.attitude_rows(f, readings["mocap_quat"], self.mocap.att_std)
            f = eskf.correct(f, rows, readings.get("mocap_fresh", True))
        nees = eskf.nees(f, then[..., 0:3], then[..., 3:6], then[..., 6:10])
        # carried to now through the buffered samples
        pos, vel, quat = f.pos, f.vel, f.quat
        for i in range(L):
            u = rest[..., i, :]
            p1, v1, q1, _ = eskf.strapdown(pos, vel, quat, u[..., 0:3] - f.gyro_bias,
                                        u[..., 3:6] - f.accel_bias, self.g_vec,
                                        self.imu_dt)  # fmt: skip
            p1, v1, q1 = _pick(u[..., 6] > 0.5, (p1, v1, q1), (pos, vel, quat), xp)
            pos, vel, quat = p1, v1, q1
        state = State(pos, quat, vel, readings["gyro"] - f.gyro_bias, None)
        return state, EkfSlot(f, imu_buf, truth_buf, pos, vel, quat, nees)

    def log(self, est: EkfSlot) -> dict:
        """What :attr:`outputs` names, from the state."""
        f = est.filt
        diag = eskf.unpack(f.cov)[..., np.arange(15), np.arange(15)]
        return {"est_pos": est.pos, "est_vel": est.vel, "est_quat": est.quat,
                "est_accel_bias": f.accel_bias, "est_gyro_bias": f.gyro_bias, "est_cov": diag,
                "est_nees": est.nees}  # fmt: skip


COMPLEMENTARY_OUTPUTS = [("est_pos", 3), ("est_vel", 3), ("est_quat", 4), ("est_gyro_bias", 3)]
"""What :class:`ComplementaryEstimator` logs."""


class ComplementaryEstimator:
    """The complementary (Mahony) filter in the loop: :mod:`quadsim.estimation.complementary`
    propagated with every IMU sample, corrected by the motion capture's position and attitude
    when fresh (their latency is not compensated).

    Args:
        imu: :class:`~quadsim.sensors.ImuParams` (the filter runs at its period).
        mocap: :class:`~quadsim.sensors.MocapParams` or ``None`` (then the accelerometer alone
            levels the attitude, and position and velocity are dead reckoning).
        g_vec: Gravity ``(3,)`` [m/s²].
        dt: Physics step [s].
        periods: :class:`~quadsim.brain.Periods` of the loop.
        gains: :class:`~quadsim.estimation.complementary.ComplementaryGains` (default: its
            defaults, with ``meas_period`` the motion capture's period).

    Raises:
        ValueError: No IMU, or gains that :func:`check_complementary_gains` rejects.
    """  # noqa: D205

    kind = "complementary"

    def __init__(self, imu: Any, mocap: Any, g_vec: Any, dt: float, periods: Any,
                 gains: Any = None) -> None:  # fmt: skip
        from .complementary import ComplementaryGains, check_complementary_gains

        if imu is None:
            raise ValueError("the complementary filter needs an IMU")
        self.imu, self.mocap = imu, mocap
        self.g_vec = np.asarray(g_vec, np.float64)
        self.imu_dt = float(periods.imu_dt or dt)
        self.m_i = int(periods.imu)
        if gains is None:
            gains = ComplementaryGains(meas_period=float(periods.mocap) * float(dt))
        self.gains = check_complementary_gains(gains)
        self.outputs = list(COMPLEMENTARY_OUTPUTS)

    def init(self, n: int, pos: Any, vel: Any, quat: Any, *, seed: int = 0, k0: int = 0,
             xp: Any = np) -> Any:  # fmt: skip
        """The filter at the true start state."""
        from .complementary import complementary_init

        return _to(complementary_init(np.asarray(pos, np.float64), np.asarray(vel, np.float64),
                                      np.asarray(quat, np.float64)), xp)  # fmt: skip

    def __call__(self, k: Any, truth: Any, readings: dict, est: Any) -> tuple[Any, Any]:
        """One step: the IMU sample (when fresh), then the fresh motion-capture pose."""
        from ...engines.sim import State
        from ...physics._array import namespace
        from .complementary import complementary_output, complementary_step

        xp = namespace(readings["gyro"])
        kw = {}
        if self.mocap is not None:
            fresh = readings.get("mocap_fresh", True)
            kw = {"pos_meas": readings["mocap_pos"], "pos_fresh": fresh,
                  "quat_meas": readings["mocap_quat"], "quat_fresh": fresh}  # fmt: skip
        new = complementary_step(est, readings["gyro"], readings["accel"], self.g_vec,
                                 self.imu_dt, self.gains, **kw)  # fmt: skip
        if self.m_i > 1:
            new = _pick(readings["imu_fresh"], new, est, xp)
        pos, vel, quat, w = complementary_output(new, readings["gyro"])
        return State(pos, quat, vel, w, None), new

    def log(self, est: Any) -> dict:
        """What :attr:`outputs` names, from the state."""
        return {"est_pos": est.pos, "est_vel": est.vel, "est_quat": est.quat,
                "est_gyro_bias": est.gyro_bias}  # fmt: skip


def _to(tree: Any, xp: Any) -> Any:
    """A tree of NumPy arrays as arrays of ``xp`` (float64)."""
    if tree is None:
        return None
    if isinstance(tree, tuple):
        items = [_to(v, xp) for v in tree]
        return type(tree)(*items) if hasattr(tree, "_fields") else tuple(items)
    return xp.asarray(np.asarray(tree, np.float64))
