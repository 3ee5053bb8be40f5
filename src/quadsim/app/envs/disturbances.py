r"""What the environments' drones meet besides their own parameters (domain randomisation).

Action latency, wind and sensor noise (issue 15).

Per environment and episode (drawn at its reset from the reset generator):

* **action latency** ``d`` physics steps, ``d = round(U(lo, hi) / Δt)``, at most one control
  period: during the first ``d`` physics steps of a control step the previous action is still
  applied, ``a_j = a_{t-1}`` for ``j < d``, else ``a_t``;
* **mean wind** ``w̄ = s (cos φ, sin φ, 0)``, ``s ~ U(0, wind)`` [m/s], ``φ ~ U(0, 2π)``;
* the **Dryden** turbulence state (``turbulence``: ``"light"``, ``"moderate"``, ``"severe"``,
  MIL-F-8785C low altitude, :func:`quadsim.physics.wind.dryden_preset` at the scenario defaults: 10
  m scales, 1 m/s airspeed), drawn from its stationary distribution.

Per control step (from the core's disturbance generator, seeded at a full reset): the gusts
advance one control period, ``x_{k+1} = A_d x_k + L_d n_k``
(:func:`quadsim.physics.wind.dryden_sequence`), and the world wind ``w̄ + R_φ C x_{k+1}`` (gusts
along the mean wind, or +x when calm) is held over the control step's physics steps; the returned
observation gets white noise: position ``σ_p`` [m], velocity ``σ_v`` [m/s], attitude a body rotation
``R ← R Exp(δ)``, ``δ ~ N(0, σ_R² I)`` [rad], body rates ``σ_ω`` [rad/s] (``gyro``: the IMU preset's
per-sample ``N √f``, one sample at its rate ``f``). The reward, the terminations and ``info`` use
the true state.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from ...physics.rotation import exp, to_matrix
from ...physics.sensors import load_imu
from ...physics.wind import (
    W20_KNOTS,
    dryden_discretize,
    dryden_init,
    dryden_preset,
    dryden_sequence,
    gust_to_world,
)

__all__ = ["DisturbanceState", "Disturbances", "check_disturbances"]


class Disturbances(NamedTuple):
    """Latency, wind and observation noise of the environments (module docstring).

    Attributes:
        latency: Action latency range ``(lo, hi)`` [s], ``0 <= lo <= hi <= `` the control period.
        wind: Largest horizontal mean wind speed [m/s] (>= 0).
        turbulence: Dryden severity, or ``None`` for none.
        obs_noise: Standard deviations ``(σ_p [m], σ_v [m/s], σ_R [rad], σ_ω [rad/s])`` of the
            observed position, velocity, attitude and body rates (each >= 0).
        gyro: An IMU preset (``"bmi088"``, ...) whose gyro noise sets ``σ_ω`` (replacing the
            fourth entry of ``obs_noise``), or ``None``.
    """

    latency: tuple = (0.0, 0.0)
    wind: float = 0.0
    turbulence: str | None = None
    obs_noise: tuple = (0.0, 0.0, 0.0, 0.0)
    gyro: str | None = None

    @property
    def active(self) -> bool:
        """Whether anything is disturbed at all."""
        return bool(self.latency[1] > 0 or self.wind > 0 or self.turbulence
                    or any(self.obs_noise) or self.gyro)  # fmt: skip


def check_disturbances(d: Any, control_dt: float) -> Disturbances:
    """A validated :class:`Disturbances` from one (or a mapping of its fields).

    Raises:
        ValueError: Naming the field and the value.
    """
    if d is None:
        return Disturbances()
    if isinstance(d, dict):
        unknown = set(d) - set(Disturbances._fields)
        if unknown:
            raise ValueError(f"disturbances: unknown fields {sorted(unknown)}; known: "
                             f"{list(Disturbances._fields)}")  # fmt: skip
        d = Disturbances(**d)
    if not isinstance(d, Disturbances):
        raise ValueError(f"disturbances must be a Disturbances or a dict; got {type(d).__name__}")
    try:
        lo, hi = (float(v) for v in d.latency)
    except (TypeError, ValueError):
        raise ValueError(f"disturbances.latency must be (lo, hi) [s]; got {d.latency!r}") from None
    if not (0.0 <= lo <= hi <= control_dt + 1e-12):
        raise ValueError(f"disturbances.latency must be 0 <= lo <= hi <= the control period "
                         f"{control_dt:g} s; got {d.latency!r}")  # fmt: skip
    wind = float(d.wind)
    if not (math.isfinite(wind) and wind >= 0.0):
        raise ValueError(f"disturbances.wind must be a speed >= 0 [m/s]; got {d.wind!r}")

    if d.turbulence is not None and d.turbulence not in W20_KNOTS:
        raise ValueError(f"disturbances.turbulence must be one of {sorted(W20_KNOTS)} or None; "
                         f"got {d.turbulence!r}")  # fmt: skip
    sig = np.asarray(d.obs_noise, dtype=np.float64)
    if sig.shape != (4,) or not np.all(np.isfinite(sig) & (sig >= 0)):
        raise ValueError("disturbances.obs_noise must be 4 standard deviations >= 0 (position, "
                         f"velocity, attitude, body rates); got {d.obs_noise!r}")  # fmt: skip
    if d.gyro is not None:
        load_imu(d.gyro)  # raises for an unknown preset
    return Disturbances((lo, hi), wind, d.turbulence, tuple(sig.tolist()), d.gyro)


class DisturbanceState:
    """The disturbances of ``n`` environments: per-episode draws, gusts, observation noise.

    Args:
        d: Validated :class:`Disturbances`.
        n: Environments.
        dt: Physics step [s].
        substeps: Physics steps per control step.
    """

    def __init__(self, d: Disturbances, n: int, dt: float, substeps: int) -> None:
        self.d, self.n, self.dt, self.substeps = d, n, float(dt), int(substeps)
        self.delay = np.zeros(n)  # physics steps of latency
        self.mean = np.zeros((n, 3))
        self.dir = np.tile([1.0, 0.0], (n, 1))
        self.wind = np.zeros((n, 3))  # the world wind of the current control step
        self.rng = np.random.default_rng(0)
        self._disc = None
        if d.turbulence is not None:
            self._disc = dryden_discretize(dryden_preset(d.turbulence, 10.0, 1.0),
                                           dt * substeps)  # fmt: skip
        self.gust = np.zeros((n, 5))
        sig = np.array(d.obs_noise, dtype=np.float64)
        if d.gyro is not None:
            imu = load_imu(d.gyro)
            sig[3] = float(np.mean(imu.gyro_noise_density)) * math.sqrt(float(imu.rate))
        self.sigma = sig

    def seed(self, rng: np.random.Generator) -> None:
        """Seed the per-step generator (gusts, noise) from a full reset's generator."""
        self.rng = np.random.default_rng(int(rng.integers(2**63)))

    def draw(self, idx: np.ndarray, rng: np.random.Generator) -> None:
        """New episodes for the environments ``idx``: latency, mean wind, turbulence state."""
        m, d = idx.size, self.d
        if m == 0:
            return
        lo, hi = d.latency
        if hi > 0:
            steps = np.rint(rng.uniform(lo, hi, m) / self.dt)
            self.delay[idx] = np.clip(steps, 0, self.substeps)
        if d.wind > 0:
            speed, phi = rng.uniform(0.0, d.wind, m), rng.uniform(0.0, 2 * math.pi, m)
            self.mean[idx] = np.stack([speed * np.cos(phi), speed * np.sin(phi), np.zeros(m)], 1)
            self.dir[idx] = np.stack([np.cos(phi), np.sin(phi)], 1)
        if self._disc is not None:
            self.gust[idx] = dryden_init(self._disc, rng.standard_normal((m, 5)))

    def advance(self) -> np.ndarray:
        """The world wind ``(n, 3)`` [m/s] of the next control step (gusts advanced)."""
        w = self.mean.copy()
        if self._disc is not None:
            self.gust, g = dryden_sequence(self.gust, self.rng.standard_normal((1, self.n, 5)),
                                           self._disc)  # fmt: skip
            w += gust_to_world(g[0], self.dir)
        self.wind = w
        return w

    def noisy(self, obs: np.ndarray) -> np.ndarray:
        """The observations ``(n, d)`` with the sensor noise (a new array; float32)."""
        sp, sv, sr, sw = self.sigma
        if not (sp or sv or sr or sw):
            return obs

        out = np.array(obs, dtype=np.float64)
        n = out.shape[0]
        e = self.rng.standard_normal((n, 12))
        out[:, 0:3] += sp * e[:, 0:3]
        out[:, 3:6] += sv * e[:, 3:6]
        R = out[:, 6:15].reshape(n, 3, 3) @ np.asarray(to_matrix(exp(sr * e[:, 6:9])))
        out[:, 6:15] = R.reshape(n, 9)
        out[:, 15:18] += sw * e[:, 9:12]
        return out.astype(np.float32)
