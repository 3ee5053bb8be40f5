r"""Action levels: normalised actions ``a ∈ [-1, 1]^k`` to rotor-speed commands [RPM].

Every level maps the policy's action (held for one control step) to rotor speeds; levels with
inner loops are called at every physics substep with the current state (the loops run at the
physics rate, the policy at the control rate). All maps are affine in ``a``:

* ``"rotor_speeds"`` (``k = N`` rotors): ``Ω_i = Ω_min + (a_i + 1)/2 (Ω_max - Ω_min)`` [RPM].
* ``"pwm"`` (``k = N``): the firmware's motor command ``pwm_i = (a_i + 1)/2 · 65535``, turned into
  the rotor speed ``ω_ss(pwm, V)`` at the battery's voltage ``V`` (:mod:`quadsim.physics.power`; one
  battery per environment, drained by the power of the rotor speeds after each control step,
  refilled to its start charge on reset; held over the control step). Options ``power`` (preset
  or :class:`~quadsim.physics.power.PowerParams`, default ``"cf21_stock"``) and ``battery_charge``
  (0..1, default 1). On the compiled path the batteries are rows of the compiled state, drained
  by the same functions (:meth:`Pwm.rotor_command`, :meth:`Pwm.drained`).
* ``"thrust_rates"`` (``k = 4``): collective thrust ``F = T_min + (a_0 + 1)/2 (T_max - T_min)``
  [N] (:func:`quadsim.envelope`) and body rates ``ω_d = a_{1:4} ω_max`` [rad/s], tracked by the
  PID rate stage (``quadsim.loop.control.pid.rate_control``) and allocated to rotor speeds with
  saturation (``quadsim.physics.rotors.allocate``).
* ``"thrust_attitude"`` (``k = 4``): thrust as above, roll and pitch ``a_{1:3} θ_max`` [rad]
  (ZYX Euler), yaw rate ``a_3 r_max`` [rad/s]; the attitude stage turns the attitude
  ``(roll_d, pitch_d, ψ)`` (``ψ``: the current yaw) and the yaw-rate feed-forward into body-rate
  set points, then the rate stage and allocation as above.

The classes hold NumPy arrays with a leading batch axis ``n`` (one row per environment); the
inner loop itself is the closed loop's per-step function of ``fly``
(:func:`quadsim.loop.brain.make_brain`) with the inner stages (:func:`inner_control`) as its
controller and the action as its reference: :func:`inner_loop`, which the classes call, and in
the compiled env step (:mod:`quadsim.app.envs.compiled`) the loop's whole traced step
(:func:`quadsim.loop.closed_loop.closed_loop_step`) with that controller and set point.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from ...loop.brain import BrainState, make_brain
from ...loop.control import pid
from ...loop.control.gains import PidGains, list_gains, load_gains
from ...physics import power as pw
from ...physics._array import as_like, namespace, unstack
from ...physics.envelope import envelope
from ...physics.rotation import from_euler, multiply
from ...physics.rotors import make_allocator
from ...physics.world import FAULT_NAMES

__all__ = [
    "ACTION_LEVELS",
    "NAN_FAULT",
    "ActionLevel",
    "InnerConsts",
    "InnerState",
    "Pwm",
    "RotorSpeeds",
    "ThrustAttitude",
    "ThrustRates",
    "clean_action",
    "default_gains",
    "init_inner",
    "inner_control",
    "inner_loop",
    "make_action_level",
    "rotor_time_constant",
]


NAN_FAULT = FAULT_NAMES.index("non-finite state")
"""The fault code (:data:`quadsim.physics.world.FAULT_NAMES`) of an action that holds a NaN: the
state such a command makes (the drone is flagged at the control step's first physics step)."""


def clean_action(action: Any, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The actions ``(n, k)`` clipped to ``[-1, 1]`` with NaN entries as 0, and which
    environments' actions hold a NaN ``(n,)`` (a fault; ``±inf`` is clipped as any action
    outside). The compiled env step traces the same rule (:mod:`quadsim.app.envs.compiled`)."""  # noqa: D205, D209
    a = np.asarray(action, dtype=np.float64).reshape(n, k)
    nan = np.isnan(a)
    return np.where(nan, 0.0, np.clip(a, -1.0, 1.0)), nan.any(axis=1)


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


class Pwm(ActionLevel):
    """Motor PWM through a battery (module docstring); ``voltage`` and ``charge`` ``(n,)``."""

    name = "pwm"
    inner_loop = False

    def __init__(self, params: Any, n: int, dt: float, power: Any = "cf21_stock",
                 battery_charge: float = 1.0) -> None:  # fmt: skip
        super().__init__(params, n, dt)
        self.dim = int(params.mixing_matrix.shape[1])
        self.power = pw.load_power(power) if isinstance(power, str) else \
            pw.check_power_params(power)  # fmt: skip
        q = float(battery_charge)
        if not (0.0 <= q <= 1.0):
            raise ValueError(f"battery_charge must be in 0..1; got {battery_charge!r}")
        self.q0 = q
        self.charge = np.full(n, q)
        self.voltage = np.asarray(pw.ocv(self.charge, self.power), np.float64)

    def reset(self, which: np.ndarray) -> None:
        """The selected environments' batteries back to the start charge, idle (the others keep
        their voltage under load)."""  # noqa: D205, D209
        which = np.asarray(which, bool)
        self.charge[which] = self.q0
        self.voltage = np.where(which, self.start_voltage(), self.voltage)

    def command(self, action: np.ndarray, state: Any = None) -> np.ndarray:
        """Rotor speeds [RPM] ``(n, N)`` of PWM ``(a + 1)/2 · 65535`` at the present voltage."""
        return self.rotor_command(np.asarray(action, np.float64), self.voltage[:, None])

    def rotor_command(self, action: Any, voltage: Any) -> Any:
        """Rotor speeds [RPM] ``(..., N)`` of the actions ``(..., N)`` at the battery voltage
        ``voltage`` [V] (broadcasting; array API: the compiled env step traces it)."""  # noqa: D205, D209
        return pw.rpm_from_pwm(0.5 * (action + 1.0) * pw.PWM_FULL, voltage, self.power)

    def start_voltage(self) -> float:
        """The battery voltage [V] at the start charge, idle (what :meth:`reset` sets)."""
        return float(pw.battery_state(np.full(1, self.q0), np.zeros(1), self.power)[0][0])

    def drained(self, charge: Any, rotor_rpm: Any, dt: float) -> tuple[Any, Any]:
        """``(charge, voltage [V])`` after ``dt`` [s] at the power of rotor speeds ``(..., N)``
        [RPM] from ``charge`` ``(...)`` (array API: the compiled env step traces it)."""  # noqa: D205, D209
        p = pw.electrical_power(rotor_rpm, self.power)
        charge = pw.discharge(charge, p, dt, self.power)
        return charge, pw.battery_state(charge, p, self.power)[0]

    def advance(self, rotor_rpm: Any, dt: float) -> None:
        """Drain the batteries over ``dt`` [s] at the power of rotor speeds ``(n, N)`` [RPM]."""
        charge, v = self.drained(self.charge, np.asarray(rotor_rpm, np.float64), dt)
        self.charge, self.voltage = charge, np.asarray(v, np.float64)


def default_gains(params: Any, dt: float) -> Any:
    """PID gains for ``params`` at period ``dt`` [s]: the packaged ``<drone>_pid`` gains if any,
    else the first packaged PID gains (normalised gains carry over between drones)."""  # noqa: D205, D209
    names = [g for g in list_gains() if g.endswith("_pid")]
    if not names:
        raise ValueError("no packaged PID gains found (quadsim/physics/presets/gains/*_pid.toml)")
    name = f"{params.name}_pid" if f"{params.name}_pid" in names else names[0]
    return load_gains(name, drone=params, dt=dt)


def rotor_time_constant(params: Any) -> float:
    """Linearised rotor time constant at hover [s]: ``2 / (k_up + k_down)``.

    With the asymmetric rotor model ``Ω̇ = c_0 (Ω^*-Ω) + c_1 (Ω^{*2}-Ω^2)`` (spin-up; ``c_2, c_3``
    spin-down), ``k_up = c_0 + 2 c_1 Ω_h`` and ``k_down = c_2 + 2 c_3 Ω_h`` [1/s] at the hover
    speed ``Ω_h``; 0 when the rotors have no dynamics.
    """
    c = np.asarray(params.rotor_dyn_coef, dtype=np.float64)
    hover = envelope(params).hover_rpm
    k = c[0] + 2.0 * c[1] * hover + c[2] + 2.0 * c[3] * hover
    return 2.0 / k if k > 0.0 else 0.0


class InnerState(NamedTuple):
    """Memory of the inner loops, batch shape ``...`` (zeros: a fresh episode).

    Attributes:
        rate_int: Rate integrator ``(..., 3)`` [rad/s²].
        prev_ang_vel: Body rates at the previous substep ``(..., 3)`` [rad/s] (D term).
        prev_tau: Roll and pitch torque of the rate stage at the previous substep ``(..., 2)``
            [N m] (the lead).
        yaw_sp: Yaw set point as ``(cos ψ_d, sin ψ_d)`` ``(..., 2)`` (``thrust_attitude``).
        started: 1 after the first substep of an episode, else 0 ``(...)``: no derivative or lead
            kick, and the yaw set point starts at the drone's yaw.
    """

    rate_int: Any
    prev_ang_vel: Any
    prev_tau: Any
    yaw_sp: Any
    started: Any


class InnerConsts(NamedTuple):
    """Constants of the inner loops of one action level (:func:`inner_loop`).

    Attributes:
        attitude: ``thrust_attitude`` (attitude and rate stages) rather than ``thrust_rates``.
        gains: :class:`~quadsim.loop.control.gains.PidGains` at the physics step.
        alloc: :class:`~quadsim.physics.rotors.Allocator` of the drone.
        f_lo: Collective thrust at ``a_0 = -1`` [N].
        f_hi: Collective thrust at ``a_0 = 1`` [N].
        rate_limit: Body rates at ``|a| = 1`` [rad/s] (``thrust_rates``), ``(3,)``.
        lead: ``τ_m / dt``, the gain of the rotor-lag lead.
        dt: Physics step [s].
        tilt_limit: Roll and pitch at ``|a| = 1`` [rad] (``thrust_attitude``).
        yaw_rate_limit: Yaw rate at ``|a| = 1`` [rad/s] (``thrust_attitude``).
    """

    attitude: bool
    gains: Any
    alloc: Any
    f_lo: float
    f_hi: float
    rate_limit: Any
    lead: float
    dt: float
    tilt_limit: float
    yaw_rate_limit: float


def init_inner(batch_shape: tuple[int, ...] = (), xp: Any = None, dtype: Any = None) -> InnerState:
    """The zero :class:`InnerState` (a fresh episode) for a batch (NumPy float64 by default)."""
    if xp is None:
        xp = np
    shape = tuple(batch_shape)
    z = lambda k: xp.zeros((*shape, k) if k else shape, dtype=dtype)  # noqa: E731
    return InnerState(z(3), z(3), z(2), z(2), z(0))


def inner_loop(
    action: Any, state: Any, inner: InnerState, c: InnerConsts
) -> tuple[Any, InnerState]:
    """One physics substep of the inner loops: actions to rotor speeds (pure, array API).

    The closed loop's per-step function (:func:`quadsim.loop.brain.make_brain`, the one ``fly``
    runs) with :func:`inner_control` as its controller and the action as its reference: the
    controller, then the allocation with its saturation priority. The NumPy classes below call
    it on arrays with a batch axis; the compiled env step (:mod:`quadsim.app.envs.compiled`)
    traces the same brain inside the loop's step
    (:func:`quadsim.loop.closed_loop.closed_loop_step` with :func:`inner_control`).

    Args:
        action: Actions ``(..., 4)`` in ``[-1, 1]`` (already clipped).
        state: Anything with ``quat`` ``(..., 4)`` and ``ang_vel`` ``(..., 3)`` [rad/s].
        inner: :class:`InnerState`.
        c: :class:`InnerConsts`.

    Returns:
        ``(rpm (..., N), inner)``.
    """
    brain = make_brain(None, inner_control, c, c.alloc, None, None, c.dt, "wrench")
    out, bs = brain(0.0, None, state.quat, None, state.ang_vel, None,
                    BrainState(0.0, inner, None), None, ref=action)  # fmt: skip
    return out["cmd_rpm"], bs.ctrl


def inner_control(state: Any, action: Any, c: InnerConsts, inner: InnerState) -> tuple[Any, Any]:
    r"""The inner loops of ``thrust_rates`` and ``thrust_attitude`` as a controller.

    ``(state, reference, gains, controller state) -> (wrench, controller state)`` like
    :mod:`quadsim.loop.control`'s, with the action as the reference and :class:`InnerConsts` as the
    gains; :func:`inner_loop` runs it through the closed loop's per-step function.

    1. thrust ``F = f_lo + (a_0 + 1)/2 (f_hi - f_lo)``;
    2. body-rate set points: ``thrust_rates`` ``ω_d = a_{1:4} ∘ rate_limit``; ``thrust_attitude``
       integrates the yaw set point ``ψ_d ← ψ + clip(wrap(ψ_d + r dt - ψ), ±0.5)`` (``ψ_d = ψ``
       at the first substep, ``r = a_3 yaw_rate_limit``; kept as ``(cos ψ_d, sin ψ_d)``, which
       needs no ``atan2``) and runs :func:`quadsim.loop.control.pid.attitude_control` on
       ``q(a_1 θ_max, a_2 θ_max, ψ_d)`` with feed-forward ``r``;
    3. :func:`quadsim.loop.control.pid.rate_control` gives ``(F, τ)``; the lead
       ``τ_xy + lead (τ_xy - τ_xy,prev)`` (after the first substep) on roll and pitch: the
       wrench command (allocated by the loop with saturation,
       :func:`quadsim.physics.rotors.allocate`).

    Args:
        state: Anything with ``quat`` ``(..., 4)`` and ``ang_vel`` ``(..., 3)`` [rad/s].
        action: Actions ``(..., 4)`` in ``[-1, 1]`` (already clipped).
        c: :class:`InnerConsts`.
        inner: :class:`InnerState`.

    Returns:
        ``(wrench (..., 4), inner)``.
    """
    xp = namespace(action, state.quat, state.ang_vel)
    started = inner.started
    f = c.f_lo + 0.5 * (action[..., 0] + 1.0) * (c.f_hi - c.f_lo)
    yaw_sp = inner.yaw_sp
    if c.attitude:
        q = state.quat
        yaw_sp = _yaw_setpoint(xp, q, yaw_sp, started, action[..., 3] * (c.yaw_rate_limit * c.dt))
        roll_pitch = action[..., 1:3] * c.tilt_limit
        q_rp = from_euler(xp.concat([roll_pitch, 0.0 * roll_pitch[..., :1]], axis=-1))
        rates = pid.attitude_control(q, multiply(_half_yaw(xp, yaw_sp), q_rp),
                                     action[..., 3] * c.yaw_rate_limit, c.gains)  # fmt: skip
    else:
        rates = action[..., 1:4] * as_like(xp, np.asarray(c.rate_limit, np.float64), action)
    cstate = pid.PidState(None, inner.rate_int, inner.prev_ang_vel, None, started)
    wrench, cs1 = pid.rate_control(state.ang_vel, rates, f, c.gains, cstate)
    tau = wrench[..., 1:3]  # roll and pitch: yaw responds at once (rotor reaction torque)
    lead = (c.lead * started)[..., None] * (tau - inner.prev_tau)
    cmd = xp.concat([wrench[..., 0:1], tau + lead, wrench[..., 3:4]], axis=-1)
    return cmd, InnerState(cs1.rate_int, cs1.prev_ang_vel, tau, yaw_sp, xp.ones_like(started))


_COS_MAX, _SIN_MAX = math.cos(0.5), math.sin(0.5)  # the yaw set point stays within 0.5 rad


def _heading(xp: Any, q: Any) -> tuple[Any, Any]:
    """``(cos ψ, sin ψ)`` of the ZYX yaw ``ψ`` of ``q`` (any norm), as
    :func:`quadsim.physics.rotation.to_euler` defines it (also at gimbal lock), no ``atan2``."""  # noqa: D205, D209
    x, y, z, w = unstack(q)
    tol = math.sqrt(float(xp.finfo(q.dtype).eps))
    a2 = (w + y) * (w + y) + (x - z) * (x - z)
    b2 = (w - y) * (w - y) + (x + z) * (x + z)
    lock = 2.0 * xp.sqrt(a2) * xp.sqrt(b2) < tol * (a2 + b2)  # cos θ < tol
    xx, yy, zz, ww = x * x, y * y, z * z, w * w
    c = xp.where(lock, ww - xx + yy - zz, ww + xx - yy - zz)  # R11 (lock), else R00
    s = xp.where(lock, 2.0 * (w * z - x * y), 2.0 * (x * y + w * z))  # -R01 (lock), else R10
    r2 = c * c + s * s
    ok = r2 > 0.0
    inv = 1.0 / xp.sqrt(xp.where(ok, r2, 1.0))
    return xp.where(ok, c * inv, 1.0), s * inv


def _yaw_setpoint(xp: Any, q: Any, sp: Any, started: Any, step: Any) -> Any:
    r"""The new yaw set point ``(cos ψ_d, sin ψ_d)`` ``(..., 2)``.

    ``ψ_d ← ψ + clip(wrap(ψ_d + step - ψ), ±0.5)`` (``ψ_d = ψ`` before the first substep), on
    unit complex numbers ``e^{iψ}``: the error ``e^{iψ_d} e^{i step} e^{-iψ}`` is kept where its
    angle is within ``±0.5`` (real part ``≥ cos 0.5``), else replaced by ``e^{±0.5 i}``. Equal to
    the angle form up to rounding, with two ``sin``/``cos`` of the held ``step`` instead of
    ``atan2`` and ``sin``/``cos`` at every substep.
    """
    hc, hs = _heading(xp, q)
    going = started > 0.5
    zc = xp.where(going, sp[..., 0], hc)
    zs = xp.where(going, sp[..., 1], hs)
    rc, rs = xp.cos(step), xp.sin(step)
    pc, ps = zc * rc - zs * rs, zc * rs + zs * rc  # e^{i(ψ_d + step)}
    ec, es = pc * hc + ps * hs, ps * hc - pc * hs  # times e^{-iψ}
    n = xp.sqrt(ec * ec + es * es)
    inside = ec >= _COS_MAX * n
    inv = 1.0 / xp.where(n > 0.0, n, 1.0)
    ec = xp.where(inside, ec * inv, _COS_MAX)
    es = xp.where(inside, es * inv, xp.where(es > 0.0, _SIN_MAX, -_SIN_MAX))
    return xp.stack([hc * ec - hs * es, hc * es + hs * ec], axis=-1)


def _half_yaw(xp: Any, z: Any) -> Any:
    """The quaternion ``(0, 0, sin(ψ/2), cos(ψ/2))`` (up to sign) of ``z = (cos ψ, sin ψ)``."""
    c, s = z[..., 0], z[..., 1]
    pos = c >= 0.0
    hc = xp.where(pos, 1.0 + c, s)  # 2 cos(ψ/2) (cos(ψ/2), sin(ψ/2)) or 2 sin(ψ/2) (...)
    hs = xp.where(pos, s, 1.0 - c)
    inv = 1.0 / xp.sqrt(hc * hc + hs * hs)
    zero = 0.0 * c
    return xp.stack([zero, zero, hs * inv, hc * inv], axis=-1)


class ThrustRates(ActionLevel):
    """Collective thrust and body rates, tracked by the PID rate stage at the physics rate.

    ``F = T_min + (a_0 + 1)/2 (T_max - T_min)`` [N] with the allocator's collective range, and
    ``ω_d = a_{1:4} ∘ rate_limit`` [rad/s]. The rate stage gives ``τ = J α + ω × J ω``; a lead
    ``τ_xy + (τ_m/dt)(τ_xy - τ_xy,prev)`` on roll and pitch inverts the rotor lag (first order,
    time constant ``τ_m``); the wrench ``(F, τ)`` is allocated with saturation (thrust and
    roll/pitch before yaw). The gains' own lag compensation (``motor_tau``) is not used.
    The loop itself is :func:`inner_loop` (its memory: :attr:`inner`, its constants:
    :attr:`consts`).

    Args:
        params: Drone parameters.
        n: Number of environments.
        dt: Physics step [s] (the period of the inner loops).
        gains: :class:`~quadsim.loop.control.gains.PidGains`, a gains name or path, or ``None`` for
            :func:`default_gains`.
        rate_limit: Body rates at ``|a| = 1`` [rad/s], 3 numbers (roll, pitch, yaw).
        motor_tau: Lead time constant ``τ_m`` [s] (roll and pitch; yaw responds at once
            through the rotors' reaction torque); ``None``: :func:`rotor_time_constant` of the
            drone; 0 disables the lead.
    """

    name = "thrust_rates"
    attitude = False

    def __init__(
        self, params: Any, n: int, dt: float, gains: Any = None,
        rate_limit: Any = (5.0, 5.0, 2.5), motor_tau: float | None = None,
    ) -> None:  # fmt: skip
        super().__init__(params, n, dt)
        if gains is None:
            gains = default_gains(params, dt)
        elif not isinstance(gains, PidGains):
            gains = load_gains(gains, drone=params, dt=dt)
        if abs(gains.dt - dt) > 1e-12:
            gains = gains._replace(dt=float(dt))
        self.gains = gains
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
        self.tilt_limit, self.yaw_rate_limit = 0.0, 0.0
        self.inner = init_inner((n,))

    @property
    def consts(self) -> InnerConsts:
        """The constants of :func:`inner_loop` for this level."""
        return InnerConsts(self.attitude, self.gains, self.alloc, self.f_lo, self.f_hi,
                           tuple(self.rate_limit.tolist()), self.lead, float(self.dt),
                           self.tilt_limit, self.yaw_rate_limit)  # fmt: skip

    def reset(self, which: np.ndarray) -> None:
        """Forget the inner-loop memory (integrators, derivative, lead, yaw set point)."""
        which = np.asarray(which, bool)
        self.inner = InnerState(*[np.where(which.reshape(-1, *[1] * (v.ndim - 1)), 0.0, v)
                                  for v in self.inner])  # fmt: skip

    def thrust(self, a0: np.ndarray) -> np.ndarray:
        """Collective thrust [N] ``(n,)`` of the thrust action ``(n,)``."""
        return self.f_lo + 0.5 * (a0 + 1.0) * (self.f_hi - self.f_lo)

    def thrust_action(self, thrust: Any) -> np.ndarray:
        """The thrust action of a collective thrust [N] (inverse map, e.g. hover ``m g``)."""
        f = np.asarray(thrust, dtype=np.float64)
        return 2.0 * (f - self.f_lo) / (self.f_hi - self.f_lo) - 1.0

    def command(self, action: np.ndarray, state: Any) -> np.ndarray:
        """Rotor speeds [RPM] ``(n, N)``: one substep of :func:`inner_loop` (updates ``inner``)."""
        st = Attitude(np.asarray(state.quat, dtype=np.float64),
                       np.asarray(state.ang_vel, dtype=np.float64))  # fmt: skip
        rpm, self.inner = inner_loop(np.asarray(action, dtype=np.float64), st, self.inner,
                                     self.consts)  # fmt: skip
        return np.asarray(rpm)


class Attitude(NamedTuple):
    """What :func:`inner_loop` reads of the state.

    ``quat`` (xyzw, body to world) ``(..., 4)`` and body ``ang_vel`` [rad/s] ``(..., 3)``:
    NumPy arrays, or symbols in the compiled env (:mod:`quadsim.app.envs.compiled`).
    """

    quat: Any
    ang_vel: Any


class ThrustAttitude(ThrustRates):
    """Collective thrust, roll and pitch, and yaw rate, through the PID attitude and rate stages.

    ``F`` as in :class:`ThrustRates`; ``roll_d, pitch_d = a_{1:3} tilt_limit`` [rad] (ZYX Euler)
    and yaw rate ``r = a_3 yaw_rate_limit`` [rad/s]. A yaw set point ``ψ_d`` (the drone's yaw at
    reset) is integrated at the physics rate, ``ψ_d ← ψ + clip(wrap(ψ_d + r dt - ψ), ±0.5)``
    (kept within 0.5 rad of the yaw ``ψ``, no wind-up); the attitude stage tracks
    ``q_d = q(roll_d, pitch_d, ψ_d)`` with feed-forward ``r`` and feeds the rate stage
    (:func:`inner_loop`).

    Args:
        params, n, dt, gains, rate_limit, motor_tau: As in :class:`ThrustRates`
            (``rate_limit`` is unused: the attitude stage clips at the gains' ``rate_max``).
        tilt_limit: Roll and pitch at ``|a| = 1`` [rad] (at most the gains' ``tilt_max``).
        yaw_rate_limit: Yaw rate at ``|a| = 1`` [rad/s].
    """

    name = "thrust_attitude"
    attitude = True

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


ACTION_LEVELS: dict[str, type[ActionLevel]] = {
    "rotor_speeds": RotorSpeeds,
    "pwm": Pwm,
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
