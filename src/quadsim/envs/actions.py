r"""Action levels: normalised actions ``a ∈ [-1, 1]^k`` to rotor-speed commands [RPM].

Every level maps the policy's action (held for one control step) to rotor speeds; levels with
inner loops are called at every physics substep with the current state (the loops run at the
physics rate, the policy at the control rate). All maps are affine in ``a``:

* ``"rotor_speeds"`` (``k = N`` rotors): ``Ω_i = Ω_min + (a_i + 1)/2 (Ω_max - Ω_min)`` [RPM].
* ``"thrust_rates"`` (``k = 4``): collective thrust ``F = T_min + (a_0 + 1)/2 (T_max - T_min)``
  [N] (:func:`quadsim.envelope`) and body rates ``ω_d = a_{1:4} ω_max`` [rad/s], tracked by the
  PID rate stage (``quadsim.control.pid.rate_control``) and allocated to rotor speeds with
  saturation (``quadsim.rotors.allocate``).
* ``"thrust_attitude"`` (``k = 4``): thrust as above, roll and pitch ``a_{1:3} θ_max`` [rad]
  (ZYX Euler), yaw rate ``a_3 r_max`` [rad/s]; the attitude stage turns the attitude
  ``(roll_d, pitch_d, ψ)`` (``ψ``: the current yaw) and the yaw-rate feed-forward into body-rate
  set points, then the rate stage and allocation as above.

All arrays are NumPy with a leading batch axis ``n`` (one row per environment).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..rotation import from_euler, to_euler

__all__ = [
    "ACTION_LEVELS",
    "ActionLevel",
    "RotorSpeeds",
    "ThrustAttitude",
    "ThrustRates",
    "default_gains",
    "make_action_level",
    "rotor_time_constant",
]


class ActionLevel:
    """Base of the action levels: ``command(action, state) -> rpm``.

    Attributes:
        name: Level name.
        dim: Action size ``k``.
        inner_loop: Whether :meth:`command` must run at every physics substep (else the rotor
            command is held over the control step and stepped in one compiled rollout).
    """

    name = ""
    dim = 4
    inner_loop = True

    def __init__(self, params: Any, n: int, dt: float) -> None:
        self.params, self.n, self.dt = params, n, dt

    def reset(self, which: np.ndarray) -> None:
        """Clear the inner-loop memory (integrators) of the environments selected by ``which``."""

    def command(self, action: np.ndarray, state: Any) -> np.ndarray:
        """Rotor speeds [RPM] ``(n, N)`` for actions ``(n, k)`` in ``[-1, 1]`` and the state."""
        raise NotImplementedError


class RotorSpeeds(ActionLevel):
    """Direct rotor speeds: ``Ω = Ω_min + (a + 1)/2 (Ω_max - Ω_min)`` [RPM] for each rotor."""

    name = "rotor_speeds"
    inner_loop = False

    def __init__(self, params: Any, n: int, dt: float) -> None:
        super().__init__(params, n, dt)
        self.dim = int(params.mixing_matrix.shape[1])
        self.lo, self.hi = float(params.rpm_min), float(params.rpm_max)

    def command(self, action: np.ndarray, state: Any = None) -> np.ndarray:
        """Rotor speeds [RPM] ``(n, N)`` (the state is not used)."""
        return self.lo + 0.5 * (action + 1.0) * (self.hi - self.lo)

    def action_of(self, rpm: Any) -> np.ndarray:
        """The action that commands rotor speeds ``rpm`` [RPM] (inverse map, e.g. hover)."""
        return 2.0 * (np.asarray(rpm, dtype=np.float64) - self.lo) / (self.hi - self.lo) - 1.0


def default_gains(params: Any, dt: float) -> Any:
    """PID gains for ``params`` at period ``dt`` [s]: the packaged ``<drone>_pid`` gains if any,
    else the first packaged PID gains (normalised gains carry over between drones)."""  # noqa: D205, D209
    from ..control.gains import list_gains, load_gains

    names = [g for g in list_gains() if g.endswith("_pid")]
    if not names:
        raise ValueError("no packaged PID gains found (quadsim/presets/gains/*_pid.toml)")
    name = f"{params.name}_pid" if f"{params.name}_pid" in names else names[0]
    return load_gains(name, drone=params, dt=dt)


def rotor_time_constant(params: Any) -> float:
    """Linearised rotor time constant at hover [s]: ``2 / (k_up + k_down)``.

    With the asymmetric rotor model ``Ω̇ = c_0 (Ω^*-Ω) + c_1 (Ω^{*2}-Ω^2)`` (spin-up; ``c_2, c_3``
    spin-down), ``k_up = c_0 + 2 c_1 Ω_h`` and ``k_down = c_2 + 2 c_3 Ω_h`` [1/s] at the hover
    speed ``Ω_h``; 0 when the rotors have no dynamics.
    """
    from ..envelope import envelope

    c = np.asarray(params.rotor_dyn_coef, dtype=np.float64)
    hover = envelope(params).hover_rpm
    k = c[0] + 2.0 * c[1] * hover + c[2] + 2.0 * c[3] * hover
    return 2.0 / k if k > 0.0 else 0.0


class ThrustRates(ActionLevel):
    """Collective thrust and body rates, tracked by the PID rate stage at the physics rate.

    ``F = T_min + (a_0 + 1)/2 (T_max - T_min)`` [N] with the allocator's collective range, and
    ``ω_d = a_{1:4} ∘ rate_limit`` [rad/s]. The rate stage gives ``τ = J α + ω × J ω``; a lead
    ``τ_xy + (τ_m/dt)(τ_xy - τ_xy,prev)`` on roll and pitch inverts the rotor lag (first order,
    time constant ``τ_m``); the wrench ``(F, τ)`` is allocated with saturation (thrust and
    roll/pitch before yaw). The gains' own lag compensation (``motor_tau``) is not used.

    Args:
        params: Drone parameters.
        n: Number of environments.
        dt: Physics step [s] (the period of the inner loops).
        gains: :class:`~quadsim.control.gains.PidGains`, a gains name or path, or ``None`` for
            :func:`default_gains`.
        rate_limit: Body rates at ``|a| = 1`` [rad/s], 3 numbers (roll, pitch, yaw).
        motor_tau: Lead time constant ``τ_m`` [s] (roll and pitch; yaw responds at once
            through the rotors' reaction torque); ``None``: :func:`rotor_time_constant` of the
            drone; 0 disables the lead.
    """

    name = "thrust_rates"

    def __init__(
        self, params: Any, n: int, dt: float, gains: Any = None,
        rate_limit: Any = (5.0, 5.0, 2.5), motor_tau: float | None = None,
    ) -> None:  # fmt: skip
        from ..control import pid
        from ..control.gains import PidGains, load_gains
        from ..rotors import make_allocator

        super().__init__(params, n, dt)
        if gains is None:
            gains = default_gains(params, dt)
        elif not isinstance(gains, PidGains):
            gains = load_gains(gains, drone=params, dt=dt)
        if abs(gains.dt - dt) > 1e-12:
            gains = gains._replace(dt=float(dt))
        self.gains, self.pid = gains, pid
        self.alloc = make_allocator(params)
        self.f_lo, self.f_hi = self.alloc.collective_min, self.alloc.collective_max
        self.rate_limit = np.broadcast_to(np.asarray(rate_limit, dtype=np.float64), (3,))
        if not np.all(self.rate_limit > 0):
            raise ValueError(f"rate_limit must be 3 positive rates [rad/s]; got {rate_limit!r}")
        if motor_tau is None:
            motor_tau = rotor_time_constant(params)
        if not (math.isfinite(motor_tau) and motor_tau >= 0):
            raise ValueError(f"motor_tau must be a time constant >= 0 [s]; got {motor_tau!r}")
        self.motor_tau = float(motor_tau)
        self.lead = self.motor_tau / dt
        self.cstate = pid.init_state(gains, (n,))
        self.prev_tau = np.zeros((n, 2))
        self.started = np.zeros((n, 1))

    def reset(self, which: np.ndarray) -> None:
        """Zero the rate integrators, derivative memory and lead of the selected environments."""
        cs = self.cstate._asdict()
        for k, v in cs.items():
            v = np.array(v)
            v[which] = 0.0
            cs[k] = v
        self.cstate = type(self.cstate)(**cs)
        self.prev_tau[which] = 0.0
        self.started[which] = 0.0

    def thrust(self, a0: np.ndarray) -> np.ndarray:
        """Collective thrust [N] ``(n,)`` of the thrust action ``(n,)``."""
        return self.f_lo + 0.5 * (a0 + 1.0) * (self.f_hi - self.f_lo)

    def thrust_action(self, thrust: Any) -> np.ndarray:
        """The thrust action of a collective thrust [N] (inverse map, e.g. hover ``m g``)."""
        f = np.asarray(thrust, dtype=np.float64)
        return 2.0 * (f - self.f_lo) / (self.f_hi - self.f_lo) - 1.0

    def rates(self, action: np.ndarray, state: Any) -> np.ndarray:
        """Body-rate set points ``(n, 3)`` [rad/s]."""
        return action[:, 1:4] * self.rate_limit

    def command(self, action: np.ndarray, state: Any) -> np.ndarray:
        """Rotor speeds [RPM] ``(n, N)`` from the rate stage and allocation."""
        from ..rotors import allocate

        w = np.asarray(state.ang_vel, dtype=np.float64)
        f = self.thrust(action[:, 0])
        wrench, self.cstate = self.pid.rate_control(w, self.rates(action, state), f, self.gains,
                                                    self.cstate)  # fmt: skip
        wrench = np.asarray(wrench)
        tau = wrench[:, 1:3]  # roll and pitch: yaw responds at once (rotor reaction torque)
        cmd = wrench.copy()
        cmd[:, 1:3] = tau + (self.lead * self.started) * (tau - self.prev_tau)
        self.prev_tau, self.started = tau, np.ones_like(self.started)
        return np.asarray(allocate(cmd, self.alloc).rpm)


class ThrustAttitude(ThrustRates):
    """Collective thrust, roll and pitch, and yaw rate, through the PID attitude and rate stages.

    ``F`` as in :class:`ThrustRates`; ``roll_d, pitch_d = a_{1:3} tilt_limit`` [rad] (ZYX Euler)
    and yaw rate ``r = a_3 yaw_rate_limit`` [rad/s]. A yaw set point ``ψ_d`` (the drone's yaw at
    reset) is integrated at the physics rate, ``ψ_d ← ψ + clip(wrap(ψ_d + r dt - ψ), ±0.5)``
    (kept within 0.5 rad of the yaw ``ψ``, no wind-up); the attitude stage tracks
    ``q_d = q(roll_d, pitch_d, ψ_d)`` with feed-forward ``r`` and feeds the rate stage.

    Args:
        params, n, dt, gains, rate_limit, motor_tau: As in :class:`ThrustRates`
            (``rate_limit`` is unused: the attitude stage clips at the gains' ``rate_max``).
        tilt_limit: Roll and pitch at ``|a| = 1`` [rad] (at most the gains' ``tilt_max``).
        yaw_rate_limit: Yaw rate at ``|a| = 1`` [rad/s].
    """

    name = "thrust_attitude"

    def __init__(
        self, params: Any, n: int, dt: float, gains: Any = None,
        rate_limit: Any = (5.0, 5.0, 2.5), motor_tau: float | None = None,
        tilt_limit: float = math.radians(30.0), yaw_rate_limit: float = 2.0,
    ) -> None:  # fmt: skip
        super().__init__(params, n, dt, gains, rate_limit, motor_tau)
        if not (tilt_limit > 0 and yaw_rate_limit > 0):
            raise ValueError(
                f"tilt_limit and yaw_rate_limit must be > 0; got {tilt_limit!r}, {yaw_rate_limit!r}"
            )
        self.tilt_limit = min(float(tilt_limit), float(self.gains.tilt_max))
        self.yaw_rate_limit = float(yaw_rate_limit)
        self.yaw_sp = np.full(n, np.nan)  # NaN: take the drone's yaw at the next command

    def reset(self, which: np.ndarray) -> None:
        """Also forget the yaw set point of the selected environments."""
        super().reset(which)
        self.yaw_sp[which] = np.nan

    def rates(self, action: np.ndarray, state: Any) -> np.ndarray:
        """Body-rate set points ``(n, 3)`` [rad/s] of the attitude stage."""
        q = np.asarray(state.quat, dtype=np.float64)
        yaw = to_euler(q)[:, 2]
        r = action[:, 3] * self.yaw_rate_limit
        sp = np.where(np.isnan(self.yaw_sp), yaw, self.yaw_sp) + r * self.dt
        err = np.clip((sp - yaw + np.pi) % (2 * np.pi) - np.pi, -0.5, 0.5)
        self.yaw_sp = yaw + err
        rp = action[:, 1:3] * self.tilt_limit
        q_sp = from_euler(np.column_stack([rp, self.yaw_sp]))
        return np.asarray(self.pid.attitude_control(q, q_sp, r, self.gains))


ACTION_LEVELS: dict[str, type[ActionLevel]] = {
    "rotor_speeds": RotorSpeeds,
    "thrust_rates": ThrustRates,
    "thrust_attitude": ThrustAttitude,
}
"""Action levels by name."""


def make_action_level(name: str, params: Any, n: int, dt: float, **options: Any) -> ActionLevel:
    """An action level by name for ``n`` environments at physics step ``dt`` [s].

    Raises:
        ValueError: For an unknown level.
    """
    if name not in ACTION_LEVELS:
        raise ValueError(f"action_level must be one of {sorted(ACTION_LEVELS)}; got {name!r}")
    return ACTION_LEVELS[name](params, n, dt, **options)
