r"""A trained policy as a controller of ``quadsim fly`` (``[controller] kind = "policy"``).

The controller is the policy file's MLP (:mod:`quadsim.app.rl.policy`) fed with the environments'
observation (:func:`quadsim.app.envs.observation.observation`, the one implementation) of the state
and the reference, and its own last action as the observation's action part:

.. math::

    o_k = \mathrm{obs}(x_k, r_k, a_{k-1}, \hat Ω_k), \quad a_k = \mathrm{MLP}(o_k), \quad
    Ω_k = Ω_{min} + \tfrac{a_k + 1}{2} (Ω_{max} - Ω_{min})

(the ``rotor_speeds`` action level), at the controller's rate (default 100 Hz, the
environments' control rate; the command is held in between, as an environment holds its
action). Policies trained with ``observe_rotors`` (Recover-v0) also observe the rotor-speed
estimate ``Ω̂_k``: the environments' observer (:mod:`quadsim.app.envs.observer`, the same
functions) run on the commands ``Ω_{k-1}`` over the controller's period in steps of the
training environment's physics step (``physics_dt`` of the policy file); policies trained with
``observe_integral`` observe the position-error integral, which the controller integrates at
its own period (the same function). It is written over the array API, so the compiled closed
loop traces it (the MLP becomes a few thousand multiply-adds in C). The state the controller
keeps is :class:`PolicyState`.
"""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple

from ...loop.parts import Controller
from ...physics._array import namespace
from ...physics.envelope import envelope
from .policy import load_policy

__all__ = ["Policy", "PolicyGains", "PolicyState", "policy_control", "policy_gains"]


class PolicyGains(NamedTuple):
    """The policy controller's constants.

    Attributes:
        weights: ``((W0, b0), ...)`` NumPy arrays of the MLP.
        rpm_min: Rotor speed at action -1 [RPM].
        rpm_max: Rotor speed at action +1 [RPM].
        dt: The controller's period [s].
        name: The policy file.
        observer: The rotor-speed observer (:class:`quadsim.app.envs.observer.RotorObserver`) at
            its step, or ``None`` (the policy does not observe rotor speeds).
        observer_steps: Observer steps per controller period.
        integral: Whether the policy observes the position-error integral.
        body: Whether the policy observes the body-frame position error and velocity.
    """

    weights: tuple
    rpm_min: float
    rpm_max: float
    dt: float
    name: str = ""
    observer: Any = None
    observer_steps: int = 1
    integral: bool = False
    body: bool = False


class PolicyState(NamedTuple):
    """The policy controller's state (batch shape ``...``).

    Attributes:
        action: The last action ``a_{k-1}`` ``(..., N)`` (zeros before the first call).
        rotor_est: The rotor-speed estimate ``Ω̂`` ``(..., N)`` [RPM] (hover speed at first).
        started: 1 after the first call, else 0 ``(...)``.
        integral: The position-error integral ``(..., 3)`` [m s] (zeros at first).
    """

    action: Any
    rotor_est: Any
    started: Any
    integral: Any


def policy_gains(path: str, drone: Any, dt: float) -> PolicyGains:
    """Load a policy file for a drone at controller period ``dt``.

    Raises:
        ValueError: The file's problems (:func:`~quadsim.app.rl.policy.load_policy`), an action
            level other than ``rotor_speeds``, or sizes that do not fit the drone's hover
            observation (:func:`~quadsim.app.envs.observation.observation_size` inputs, ``rotors``
            outputs).
    """
    from ..envs.observation import observation_size

    pol = load_policy(path)
    level = pol.meta.get("action_level", "rotor_speeds")
    if level != "rotor_speeds":
        raise ValueError(f"{path}: a {level!r} policy; quadsim fly flies rotor_speeds policies")
    n_rot = int(drone.mixing_matrix.shape[1])
    rotors = bool(pol.meta.get("observe_rotors", False))
    integral = bool(pol.meta.get("observe_integral", False))
    body = bool(pol.meta.get("observe_body", False))
    pol.check(observation_size(n_rot, n_rot, rotors, integral, body), n_rot,
              f"{path}: for {getattr(drone, 'name', 'this drone')}")  # fmt: skip
    observer, steps = None, 1
    if rotors:
        from ..envs.observer import make_observer

        steps = max(1, round(float(dt) / float(pol.meta.get("physics_dt", 0.002))))
        observer = make_observer(drone, float(dt) / steps, envelope(drone).hover_rpm)
    return PolicyGains(tuple(pol.weights), float(drone.rpm_min), float(drone.rpm_max), float(dt),
                       str(path), observer, steps, integral, body)


def _rpm(action: Any, gains: PolicyGains) -> Any:
    """The ``rotor_speeds`` action level's map to rotor speeds [RPM]."""
    return gains.rpm_min + 0.5 * (action + 1.0) * (gains.rpm_max - gains.rpm_min)


def policy_control(state: Any, ref: Any, gains: PolicyGains,
                   cstate: PolicyState) -> tuple[Any, PolicyState]:  # fmt: skip
    """``(rotor speeds [RPM] (..., N), new state)`` of the policy (module docstring)."""
    from ..envs.observation import observation

    xp = namespace(state.quat)
    rotors, est = None, cstate.rotor_est
    if gains.observer is not None:
        from ..envs.observer import advance, normalized

        sent = _rpm(cstate.action, gains)
        moved = est
        for _ in range(gains.observer_steps):
            moved = advance(moved, sent, gains.observer)
        est = xp.where(cstate.started[..., None] > 0.5, moved, est)
        rotors = normalized(est, gains.observer)
    integral = None
    if gains.integral:
        from ..envs.observer import integrate_error

        moved = integrate_error(cstate.integral, state.pos - ref.pos, gains.dt)
        integral = xp.where(cstate.started[..., None] > 0.5, moved, cstate.integral)
    obs, _, _, _ = observation(state.pos, state.quat, state.vel, state.ang_vel, cstate.action,
                               ref.pos, ref.vel, None, rotors, integral, gains.body)  # fmt: skip
    h = obs
    last = len(gains.weights) - 1
    for j, (w, b) in enumerate(gains.weights):
        h = h @ xp.asarray(w.T) + xp.asarray(b)
        if j < last:
            h = xp.tanh(h)
    a = xp.clip(h, -1.0, 1.0)
    rpm = _rpm(a, gains)
    keep = cstate.integral if integral is None else integral
    return rpm, PolicyState(a, est, cstate.started * 0.0 + 1.0, keep)


def _init_state(gains: PolicyGains, batch_shape: tuple = (), xp: Any = None,
                dtype: Any = None) -> PolicyState:  # fmt: skip
    import numpy as np

    xp = np if xp is None else xp
    n_act = gains.weights[-1][0].shape[0]
    dtype = dtype or xp.float64
    hover = gains.observer.hover if gains.observer is not None else 0.0
    return PolicyState(xp.zeros((*batch_shape, n_act), dtype=dtype),
                       xp.full((*batch_shape, n_act), hover, dtype=dtype),
                       xp.zeros(batch_shape, dtype=dtype),
                       xp.zeros((*batch_shape, 3), dtype=dtype))  # fmt: skip


policy_control.command = "rpm"  # type: ignore[attr-defined]
policy_control.init_state = _init_state  # type: ignore[attr-defined]


class Policy(Controller):
    """The policy controller as a controller part (``[controller] kind = "policy"``, registered
    as an entry point of ``quadsim.controllers``): its policy file is ``path``, its default rate
    100 Hz (the environments' control rate, which the policy was trained at)."""  # noqa: D205, D209

    command: ClassVar[str | None] = "rpm"
    default_rate: ClassVar[float] = 100.0

    @classmethod
    def from_table(cls, table: dict, drone: Any, dt: float) -> Policy:
        """From ``[controller]``: ``path``, the policy file.

        Raises:
            ValueError: ``"path: why"``.
        """
        unknown = sorted(set(table) - {"path"})
        if unknown:
            raise ValueError(f"{unknown[0]}: not a key of the policy controller")
        if not table.get("path"):
            raise ValueError('path: kind = "policy" needs the policy file')
        try:
            return cls(policy_gains(table["path"], drone, dt))
        except ValueError as e:
            raise ValueError(f"path: {e}") from None

    def __call__(self, state: Any, ref: Any, gains: Any, cstate: Any) -> tuple[Any, Any]:
        """``(rotor speeds (..., N) [RPM], cstate)`` (:func:`policy_control`)."""
        return policy_control(state, ref, gains, cstate)

    def init_state(self, gains: Any, shape: tuple, xp: Any = None, dtype: Any = None) -> Any:
        """The policy's state at the start."""
        return _init_state(gains, shape, xp, dtype)
