r"""Estimators for the closed loop's estimator slot (:func:`quadsim.loop.brain.make_brain`).

An estimator is an object with

* ``__call__(k, truth, readings, est) -> (state, est)``: the state the controller reads (a
  :class:`~quadsim.engines.state.State` with ``pos``, ``quat``, ``vel``, ``ang_vel``) from this
  step's sensor ``readings`` (``gyro``, ``accel``, ``imu_fresh``, ``mocap_pos``, ``mocap_quat``,
  ``mocap_fresh`` as present) and its own state ``est``; ``truth`` is used only for the
  logged consistency (NEES), never for the estimate;
* ``init(n, pos, vel, quat, *, seed, k0, xp) -> est``: its state at a flight's start;
* ``outputs``: ``[(name, size)]`` of what it logs, and ``log(est) -> {name: (n, size)}``.

:class:`EkfEstimator` runs the error-state EKF (:mod:`quadsim.loop.estimation.eskf`) with
**delayed fusion** for late measurements: with a motion-capture latency of ``L`` physics steps
the filter itself runs ``L`` steps behind, at the time the measurement arriving now was taken
(its IMU samples wait in a buffer of ``L``), fuses it there, and the estimate the controller
reads is that state carried to now through the buffered samples (no covariance: the state
buffer and re-propagation of the issue), in O(1) per step through their preintegration over the
sliding window (:mod:`quadsim.loop.estimation.preintegration`: the strapdown through them; a sample
is pushed and popped with the bias estimates of those two times, and the window is rebuilt with
the present ones every ``8 L`` steps). With
``latency_compensation=False`` the measurement is fused as if it were current (the baseline).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from ...engines.state import State
from ...physics import rotation
from ...physics._array import namespace
from ...physics.noise import normals
from ...physics.sensors import (
    check_baro_params,
    check_gnss_params,
    check_imu_params,
    gnss_delay_steps,
    mocap_delay_steps,
)
from .. import sensing
from . import eskf, preintegration
from .complementary import (
    ComplementaryGains,
    check_complementary_gains,
    complementary_init,
    complementary_output,
    complementary_step,
)

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
        filt: :class:`~quadsim.loop.estimation.eskf.EskfState` at the filter's time (``L`` steps
            ago).
        imu_buf: The last ``L`` IMU samples ``(n, L, 7)`` (gyro, accel, fresh), or ``None``.
        truth_buf: The last ``L`` true poses ``(n, L, 10)`` (pos, vel, quat; for the NEES
            only), or ``None`` (no lag, or no NEES).
        pos: The current estimate ``(n, 3)`` [m].
        vel: ``(n, 3)`` [m/s].
        quat: ``(n, 4)``.
        nees: ``(n,)``, or ``None`` (``nees=False``).
        late: Delay lines ``(n, d, size + 1)`` (reading, fresh) of the motion capture, GNSS and
            barometer readings that arrive ``d`` steps earlier than the filter's time needs
            (``None`` for each sensor that needs none).
        win: The buffered samples preintegrated ``(n, 11)``
            (:mod:`~quadsim.loop.estimation.preintegration`), or ``None`` (no lag).
        acc: The IMU samples since the covariance was last predicted ``(n, 7)``: ``Σ ω Δt``
            [rad], ``Σ a Δt`` [m/s], ``Σ Δt`` [s] (bias-corrected).
    """

    filt: Any
    imu_buf: Any
    truth_buf: Any
    pos: Any
    vel: Any
    quat: Any
    nees: Any
    late: Any = None
    win: Any = None
    acc: Any = None


def default_init_std(imu: Any, pos: float = 1e-3, vel: float = 1e-2,
                     att: float = math.radians(1.0)) -> np.ndarray:  # fmt: skip
    """The EKF's initial standard deviations (15) for an IMU: ``pos`` [m], ``vel`` [m/s] and
    ``att`` [rad] per axis, then the biases from the IMU's preset: the root sum of squares of
    its constant and turn-on biases, at least 0.02 m/s² and 0.1 deg/s."""  # noqa: D205, D209
    i = check_imu_params(imu)
    gb = np.sqrt(np.asarray(i.gyro_bias_std) ** 2 + np.asarray(i.gyro_bias) ** 2)
    ab = np.sqrt(np.asarray(i.accel_bias_std) ** 2 + np.asarray(i.accel_bias) ** 2)
    return np.concatenate([np.full(3, pos), np.full(3, vel), np.full(3, att),
                           np.maximum(ab, 0.02), np.maximum(gb, math.radians(0.1))])  # fmt: skip


class EkfEstimator:
    """The error-state EKF in the loop (module docstring).

    Args:
        imu: :class:`~quadsim.physics.sensors.ImuParams` (propagation and its process noise).
        mocap: :class:`~quadsim.physics.sensors.MocapParams` (position and attitude updates), or
            ``None``.
        g_vec: Gravity ``(3,)`` [m/s²].
        dt: Physics step [s].
        periods: :class:`~quadsim.loop.brain.Periods` of the loop.
        init_std: Initial standard deviations (15): position [m], velocity [m/s], attitude
            [rad], accelerometer bias [m/s²], gyroscope bias [rad/s] (default
            :func:`default_init_std`); the initial estimate is
            the truth plus an error drawn from them (normals ``(seed, "est_init", k0,
            drone)``) unless ``init_error`` is false.
        mocap_attitude: Fuse the motion-capture attitude as well as its position.
        latency_compensation: Delayed fusion (module docstring); ``False``: fuse late
            measurements as if they were current.
        init_error: Draw the initial estimate's error (see ``init_std``).
        gnss: :class:`~quadsim.physics.sensors.GnssParams` (position and velocity updates; the
            position noise is its white and correlated errors together, ``σ² = σ_p² +
            σ_gm²``), or ``None``.
        baro: :class:`~quadsim.physics.sensors.BaroParams` (altitude updates; the filter then also
            estimates the barometer's bias, a random walk of the preset's ``bias_walk``), or
            ``None``.
        gyro_bias_noise: The filter's gyroscope-bias process noise [rad/s²/√Hz] (default: the
            IMU preset's bias walk ``K_g``, the consistent choice; larger values track bias
            changes faster, as flight filters are tuned).
        accel_bias_noise: The accelerometer's likewise [m/s³/√Hz] (default ``K_a``).
        nees: Compute and log the NEES against the truth (a simulator's diagnostic: it keeps
            the last ``L`` true states and solves a 9x9 system each step; ``False`` leaves it
            out, and ``est_nees`` with it).
        cov_interval: The longest interval [s] over which the covariance is predicted in one
            step (:func:`~quadsim.loop.estimation.eskf.propagate_cov`, with the mean rate and
            specific force of the IMU samples in it); it is predicted as well at every sample
            where a measurement is fused. ``0``: at every IMU sample. The nominal state is
            propagated at every sample whatever this is. Logged covariances are those of the
            last prediction.

    The filter's time lags by the largest latency of the sensors it fuses (in physics steps);
    readings of a sensor with less latency wait in a delay line until the filter reaches their
    time. The carry to now costs the same whatever the lag (a sliding preintegration).

    Raises:
        ValueError: No IMU or no position sensor, a standard deviation that is not finite and
            >= 0.
    """

    kind = "ekf"

    def __init__(self, imu: Any, mocap: Any, g_vec: Any, dt: float, periods: Any, *,
                 init_std: Any = None, mocap_attitude: bool = True,
                 latency_compensation: bool = True, init_error: bool = True, gnss: Any = None,
                 baro: Any = None, gyro_bias_noise: float | None = None,
                 accel_bias_noise: float | None = None, nees: bool = True,
                 cov_interval: float = 0.01) -> None:  # fmt: skip

        if imu is None:
            raise ValueError("the EKF needs an IMU (it propagates with the IMU's readings)")
        if mocap is None and gnss is None:
            raise ValueError("the EKF needs a position sensor (motion capture or GNSS)")
        self.imu = check_imu_params(imu)
        self.mocap = mocap
        self.gnss = None if gnss is None else check_gnss_params(gnss)
        self.baro = None if baro is None else check_baro_params(baro)
        self.g_vec = np.asarray(g_vec, np.float64)
        self.dt = float(dt)
        self.imu_dt = float(periods.imu_dt or dt)
        self.m_i = int(periods.imu)
        lags = (mocap_delay_steps(mocap, dt) if mocap is not None else 0,
                gnss_delay_steps(self.gnss, dt) if gnss is not None else 0, 0)  # fmt: skip
        self.L = max(lags) if latency_compensation else 0
        present = (mocap is not None, gnss is not None, baro is not None)
        self.waits = tuple(self.L - lag if (on and latency_compensation) else 0
                           for lag, on in zip(lags, present, strict=True))  # fmt: skip
        self.mocap_attitude = bool(mocap_attitude)
        self.init_error = bool(init_error)
        s = np.asarray(default_init_std(self.imu) if init_std is None else init_std, np.float64)
        if s.shape != (15,) or not np.all(np.isfinite(s)) or np.any(s < 0):
            raise ValueError(f"estimator init_std must be 15 finite values >= 0; got {init_std!r}")
        self.init_std = s
        walk = 0.0 if self.baro is None else float(self.baro.bias_walk)
        gw, aw = self.imu.gyro_bias_walk, self.imu.accel_bias_walk
        for name, v in (("gyro_bias_noise", gyro_bias_noise),
                        ("accel_bias_noise", accel_bias_noise)):  # fmt: skip
            if v is not None and not (math.isfinite(v) and v >= 0):
                raise ValueError(f"estimator {name} must be a density >= 0; got {v!r}")
        self.noise = eskf.EskfNoise(self.imu.gyro_noise_density, self.imu.accel_noise_density,
                                    gw if gyro_bias_noise is None else float(gyro_bias_noise),
                                    aw if accel_bias_noise is None else float(accel_bias_noise),
                                    walk)  # fmt: skip
        if self.gnss is not None:
            g = self.gnss
            self.gnss_pos_std = np.sqrt(np.array([g.pos_std_h, g.pos_std_h, g.pos_std_v]) ** 2
                                        + np.array([g.gm_std_h, g.gm_std_h, g.gm_std_v]) ** 2)
            self.gnss_vel_std = np.array([g.vel_std_h, g.vel_std_h, g.vel_std_v])
        if not (math.isfinite(cov_interval) and cov_interval >= 0):
            raise ValueError(f"estimator cov_interval must be a time >= 0 [s]; "
                             f"got {cov_interval!r}")  # fmt: skip
        self.cov_every = max(1, round(float(cov_interval) / self.imu_dt))
        self.with_nees = bool(nees)
        self.outputs = [o for o in EKF_OUTPUTS if self.with_nees or o[0] != "est_nees"]

    def init(self, n: int, pos: Any, vel: Any, quat: Any, *, seed: int = 0, k0: int = 0,
             xp: Any = np) -> EkfSlot:  # fmt: skip
        """The state at a flight's start: the truth plus a drawn error, ``P0 = diag(std²)``."""
        pos, vel, quat = (np.asarray(a, np.float64) for a in (pos, vel, quat))
        e = np.zeros((n, 15))
        if self.init_error:
            e = normals(seed, "est_init", k0, np.arange(n), 15) * self.init_std
        q = rotation.multiply(quat, rotation.exp(-e[:, 6:9]))
        std = self.init_std
        if self.baro is not None:  # the bias starts at zero, with the preset's spread
            b = self.baro
            std = np.append(std, max(math.hypot(float(b.bias_std), float(b.bias)), 1e-3))
        filt = eskf.eskf_init(pos - e[:, :3], vel - e[:, 3:6], q, std, baro=self.baro is not None,
                              xp=np)  # fmt: skip
        filt = filt._replace(accel_bias=-e[:, 9:12], gyro_bias=-e[:, 12:15])
        L = self.L
        imu_buf = truth_buf = win = None
        if L:
            acc0 = -rotation.rotate_inverse(quat, np.broadcast_to(self.g_vec, (n, 3)))
            one = np.concatenate([np.zeros((n, 3)), acc0, np.zeros((n, 1))], -1)  # not fresh
            imu_buf = np.repeat(one[:, None], L, axis=1)  # the filter waits at the start
            win = preintegration.empty(acc0)
            if self.with_nees:
                truth_buf = np.repeat(np.concatenate([pos, vel, quat], -1)[:, None], L, axis=1)
        sizes = (3 + 4, 3 + 3, 1)  # mocap pose, GNSS fix, barometer altitude
        late = tuple(np.zeros((n, d, size + 1)) if d else None
                     for d, size in zip(self.waits, sizes, strict=True))  # fmt: skip
        slot = EkfSlot(filt, imu_buf, truth_buf, filt.pos, filt.vel, filt.quat,
                       np.zeros(n) if self.with_nees else None,
                       late if any(b is not None for b in late) else None, win,
                       np.zeros((n, 7)))  # fmt: skip
        return _to(slot, xp)

    def __call__(self, k: Any, truth: Any, readings: dict, est: EkfSlot) -> tuple[Any, EkfSlot]:
        """One step (module docstring)."""
        xp = namespace(readings["gyro"])
        L, f = self.L, est.filt
        sample = xp.concat([readings["gyro"], readings["accel"],
                            _flag(xp, readings.get("imu_fresh", True), readings["gyro"])],
                           axis=-1)  # fmt: skip
        now = xp.concat([truth.pos, truth.vel, truth.quat], axis=-1)
        imu_buf = truth_buf = None
        if L:
            at = est.imu_buf[..., 0, :]
            then = None
            if self.with_nees:
                hist = xp.concat([est.truth_buf, now[..., None, :]], axis=-2)
                then, truth_buf = hist[..., 0, :], hist[..., 1:, :]
        else:
            at, then = sample, now
        # the filter's step at its time: what arrives for it, the nominal state propagated, the
        # covariance predicted where something is fused (or the interval is full), the fusion
        late = list(est.late) if est.late is not None else [None, None, None]
        ticks = []
        if self.mocap is not None:
            (p_m, q_m), fresh_m, late[0] = _wait(xp, late[0], (readings["mocap_pos"],
                                                               readings["mocap_quat"]),
                                                 readings.get("mocap_fresh", True))  # fmt: skip
            ticks.append(fresh_m)
        if self.gnss is not None:
            (p_g, v_g), fresh_g, late[1] = _wait(xp, late[1], (readings["gnss_pos"],
                                                               readings["gnss_vel"]),
                                                 readings.get("gnss_fresh", True))  # fmt: skip
            ticks.append(fresh_g)
        if self.baro is not None:
            (alt,), fresh_b, late[2] = _wait(xp, late[2], (readings["baro_alt"][..., None],),
                                             readings.get("baro_fresh", True))  # fmt: skip
            ticks.append(fresh_b)
        old_cov = f.cov
        f, acc, tick = self._predict(f, at, est.acc, ticks, xp)
        if self.mocap is not None:
            rows = eskf.position_rows(f, p_m, self.mocap.pos_std)
            if self.mocap_attitude:
                rows += eskf.attitude_rows(f, q_m, self.mocap.att_std)
            f = eskf.correct(f, rows, fresh_m)
        if self.gnss is not None:
            rows = (eskf.position_rows(f, p_g, self.gnss_pos_std)
                    + eskf.velocity_rows(f, v_g, self.gnss_vel_std))  # fmt: skip
            f = eskf.correct(f, rows, fresh_g)
        if self.baro is not None:
            f = eskf.correct(f, eskf.altitude_rows(f, alt[..., 0], self.baro.noise_std), fresh_b)
        if tick is not True:  # the covariance changes where predicted (and so where fused)
            f = f._replace(cov=xp.where(tick[..., None], f.cov, old_cov))
        nees = None
        if self.with_nees:
            nees = eskf.nees(f, then[..., 0:3], then[..., 3:6], then[..., 6:10])
        # carried to now through the buffered samples: the window slides by this step's sample
        pos, vel, quat, win = f.pos, f.vel, f.quat, None
        if L:
            win = preintegration.push(preintegration.pop(est.win, self._sample(at, f)),
                                      self._sample(sample, f))  # fmt: skip
            imu_buf = xp.concat([est.imu_buf[..., 1:, :], sample[..., None, :]], axis=-2)
            win = self._rebuilt(k, win, imu_buf, f, xp)
            pos, vel, quat = preintegration.apply(pos, vel, quat, win, self.g_vec)
        state = State(pos, quat, vel, readings["gyro"] - f.gyro_bias, None)
        late = tuple(late) if est.late is not None else None
        return state, EkfSlot(f, imu_buf, truth_buf, pos, vel, quat, nees, late, win, acc)

    def _sample(self, reading: Any, f: Any) -> Any:
        """A buffered IMU reading (gyro, accel, fresh) as a window sample, corrected with the
        filter's present bias estimates (:func:`~quadsim.loop.estimation.preintegration.sample`)."""  # noqa: D205, D209
        return preintegration.sample(reading[..., 0:3] - f.gyro_bias,
                                     reading[..., 3:6] - f.accel_bias,
                                     reading[..., 6:7] * self.imu_dt)  # fmt: skip

    def _rebuilt(self, k: Any, win: Any, imu_buf: Any, f: Any, xp: Any) -> Any:
        """The window rebuilt from the buffered readings every ``8 L`` steps (``L`` pushes; the
        compiled loop evaluates them only then, :mod:`~quadsim.loop.estimation.preintegration`)."""  # noqa: D205, D209
        fresh = preintegration.empty(win)
        for i in range(self.L):
            fresh = preintegration.push(fresh, self._sample(imu_buf[..., i, :], f))
        due = sensing.due(k + 0.0 * win[..., 0], 8 * self.L, xp)
        return xp.where(due[..., None], fresh, win)

    def _predict(self, f: Any, at: Any, acc: Any, ticks: list, xp: Any) -> tuple[Any, Any, Any]:
        """The filter propagated with the IMU sample ``at`` (gyro, accel, fresh): the nominal
        state by one strapdown step, the covariance over the samples accumulated in ``acc``
        (``Σ ω Δt``, ``Σ a Δt``, ``Σ Δt``) where a measurement is fused now (``ticks``) or the
        interval reaches ``cov_interval`` (:func:`~quadsim.loop.estimation.eskf.propagate_cov`);
        returns ``(filter, acc, tick)``: the filter with the predicted covariance, to be kept
        only where ``tick`` (the caller selects after fusing, which happens only there)."""  # noqa: D205, D209
        w, a, fresh = at[..., 0:3] - f.gyro_bias, at[..., 3:6] - f.accel_bias, at[..., 6:7]
        pos, vel, quat, R = eskf.strapdown(f.pos, f.vel, f.quat, w, a, self.g_vec, self.imu_dt)
        if self.m_i > 1 or self.L > 0:  # held IMU readings, or the start's empty buffer
            pos, vel, quat = sensing.pick(fresh[..., 0] > 0.5, (pos, vel, quat),
                                          (f.pos, f.vel, f.quat), xp)  # fmt: skip
        dt = fresh * self.imu_dt
        acc = acc + xp.concat([w * dt, a * dt, dt], axis=-1)
        cov = eskf.propagate_cov(f, R, acc[..., 0:3], acc[..., 3:6], acc[..., 6:7], self.noise)
        tick = acc[..., 6] > (self.cov_every - 0.5) * self.imu_dt
        for t in ticks:
            if t is True:
                tick = True
                break
            tick = xp.logical_or(tick, t)
        f = f._replace(pos=pos, vel=vel, quat=quat, cov=cov)
        if tick is True:
            return f, 0.0 * acc, True
        return f, xp.where(tick[..., None], 0.0 * acc, acc), tick

    def log(self, est: EkfSlot) -> dict:
        """What :attr:`outputs` names, from the state."""
        f = est.filt
        diag = eskf.unpack(f.cov)[..., np.arange(15), np.arange(15)]  # (not the baro bias)
        return {"est_pos": est.pos, "est_vel": est.vel, "est_quat": est.quat,
                "est_accel_bias": f.accel_bias, "est_gyro_bias": f.gyro_bias, "est_cov": diag,
                **({"est_nees": est.nees} if self.with_nees else {})}  # fmt: skip


COMPLEMENTARY_OUTPUTS = [("est_pos", 3), ("est_vel", 3), ("est_quat", 4), ("est_gyro_bias", 3)]
"""What :class:`ComplementaryEstimator` logs."""


class ComplementaryEstimator:
    """The complementary (Mahony) filter in the loop: :mod:`quadsim.loop.estimation.complementary`
    propagated with every IMU sample, corrected by the motion capture's position and attitude
    when fresh (their latency is not compensated).

    Args:
        imu: :class:`~quadsim.physics.sensors.ImuParams` (the filter runs at its period).
        mocap: :class:`~quadsim.physics.sensors.MocapParams` or ``None`` (then the accelerometer
            alone levels the attitude, and position and velocity are dead reckoning).
        g_vec: Gravity ``(3,)`` [m/s²].
        dt: Physics step [s].
        periods: :class:`~quadsim.loop.brain.Periods` of the loop.
        gains: :class:`~quadsim.loop.estimation.complementary.ComplementaryGains` (default: its
            defaults, with ``meas_period`` the position sensor's period).
        gnss: :class:`~quadsim.physics.sensors.GnssParams`: its position fixes correct the filter
            when there is no motion capture (latency not compensated), or ``None``.

    Raises:
        ValueError: No IMU, or gains that :func:`check_complementary_gains` rejects.
    """  # noqa: D205

    kind = "complementary"

    def __init__(self, imu: Any, mocap: Any, g_vec: Any, dt: float, periods: Any,
                 gains: Any = None, gnss: Any = None) -> None:  # fmt: skip

        if imu is None:
            raise ValueError("the complementary filter needs an IMU")
        self.imu, self.mocap, self.gnss = imu, mocap, gnss
        self.g_vec = np.asarray(g_vec, np.float64)
        self.imu_dt = float(periods.imu_dt or dt)
        self.m_i = int(periods.imu)
        if gains is None:
            fix = periods.mocap if mocap is not None or gnss is None else periods.gnss
            gains = ComplementaryGains(meas_period=float(fix) * float(dt))
        self.gains = check_complementary_gains(gains)
        self.outputs = list(COMPLEMENTARY_OUTPUTS)

    def init(self, n: int, pos: Any, vel: Any, quat: Any, *, seed: int = 0, k0: int = 0,
             xp: Any = np) -> Any:  # fmt: skip
        """The filter at the true start state."""
        return _to(complementary_init(np.asarray(pos, np.float64), np.asarray(vel, np.float64),
                                      np.asarray(quat, np.float64)), xp)  # fmt: skip

    def __call__(self, k: Any, truth: Any, readings: dict, est: Any) -> tuple[Any, Any]:
        """One step: the IMU sample (when fresh), then the fresh motion-capture pose."""
        xp = namespace(readings["gyro"])
        kw = {}
        if self.mocap is not None:
            fresh = readings.get("mocap_fresh", True)
            kw = {"pos_meas": readings["mocap_pos"], "pos_fresh": fresh,
                  "quat_meas": readings["mocap_quat"], "quat_fresh": fresh}  # fmt: skip
        elif self.gnss is not None:  # position fixes only (no attitude)
            kw = {"pos_meas": readings["gnss_pos"],
                  "pos_fresh": readings.get("gnss_fresh", True)}  # fmt: skip
        new = complementary_step(est, readings["gyro"], readings["accel"], self.g_vec,
                                 self.imu_dt, self.gains, **kw)  # fmt: skip
        if self.m_i > 1:
            new = sensing.pick(readings["imu_fresh"], new, est, xp)
        pos, vel, quat, w = complementary_output(new, readings["gyro"])
        return State(pos, quat, vel, w, None), new

    def log(self, est: Any) -> dict:
        """What :attr:`outputs` names, from the state."""
        return {"est_pos": est.pos, "est_vel": est.vel, "est_quat": est.quat,
                "est_gyro_bias": est.gyro_bias}  # fmt: skip


def _wait(xp: Any, buf: Any, values: tuple, fresh: Any) -> tuple[tuple, Any, Any]:
    """Readings ``values`` (each ``(..., size)``) and their ``fresh`` flag as they were ``d``
    steps ago, through the delay line ``buf`` ``(..., d, sum(size) + 1)`` (``None``: no wait);
    returns ``(values then, fresh then, the advanced line)``."""  # noqa: D205, D209
    if buf is None:
        return values, fresh, None
    now = xp.concat([*values, _flag(xp, fresh, values[0])], axis=-1)
    seq = xp.concat([buf, now[..., None, :]], axis=-2)
    old, at = seq[..., 0, :], 0
    out = []
    for v in values:
        k = v.shape[-1]
        out.append(old[..., at:at + k])
        at += k
    return tuple(out), old[..., at] > 0.5, seq[..., 1:, :]


def _flag(xp: Any, fresh: Any, like: Any) -> Any:
    """``fresh`` (a bool, or per drone ``(...)``) as 0/1 floats ``(..., 1)`` like ``like``."""
    return (xp.where(fresh, 1.0, 0.0) + 0.0 * like[..., 0])[..., None]


def _to(tree: Any, xp: Any) -> Any:
    """A tree of NumPy arrays as arrays of ``xp`` (float64)."""
    return sensing.tree_map(lambda a: xp.asarray(np.asarray(a, np.float64)), tree)
