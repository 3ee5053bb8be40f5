r"""A trained policy as a controller of ``quadsim fly`` (``[controller] kind = "policy"``).

The controller is the policy file's MLP (:mod:`quadsim.rl.policy`) fed with the environments'
observation (:func:`quadsim.envs.core.observation`, the one implementation) of the state and the
reference, and its own last action as the observation's action part:

.. math::

    o_k = \mathrm{obs}(x_k, r_k, a_{k-1}), \quad a_k = \mathrm{MLP}(o_k), \quad
    Ω_k = Ω_{min} + \tfrac{a_k + 1}{2} (Ω_{max} - Ω_{min})

(the ``rotor_speeds`` action level), at the controller's rate (default 100 Hz, the
environments' control rate; the command is held in between, as an environment holds its
action). It is written over the array API, so the compiled closed loop traces it (the MLP
becomes a few thousand multiply-adds in C). The state the controller keeps is ``a_{k-1}``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["PolicyGains", "policy_control", "policy_gains"]


class PolicyGains(NamedTuple):
    """The policy controller's constants.

    Attributes:
        weights: ``((W0, b0), ...)`` NumPy arrays of the MLP.
        rpm_min: Rotor speed at action -1 [RPM].
        rpm_max: Rotor speed at action +1 [RPM].
        dt: The controller's period [s].
        name: The policy file.
    """

    weights: tuple
    rpm_min: float
    rpm_max: float
    dt: float
    name: str = ""


def policy_gains(path: str, drone: Any, dt: float) -> PolicyGains:
    """Load a policy file for a drone at controller period ``dt``.

    Raises:
        ValueError: The file's problems (:func:`~quadsim.rl.policy.load_policy`), an action
            level other than ``rotor_speeds``, or sizes that do not fit the drone's hover
            observation (``18 + rotors`` inputs, ``rotors`` outputs).
    """
    from .policy import load_policy

    pol = load_policy(path)
    level = pol.meta.get("action_level", "rotor_speeds")
    if level != "rotor_speeds":
        raise ValueError(f"{path}: a {level!r} policy; quadsim fly flies rotor_speeds policies")
    n_rot = int(drone.mixing_matrix.shape[1])
    pol.check(18 + n_rot, n_rot, f"{path}: for {getattr(drone, 'name', 'this drone')}")
    return PolicyGains(tuple(pol.weights), float(drone.rpm_min), float(drone.rpm_max), float(dt),
                       str(path))


def policy_control(state: Any, ref: Any, gains: PolicyGains, cstate: Any) -> tuple[Any, Any]:
    """``(rotor speeds [RPM] (..., N), action (..., N))`` of the policy (module docstring)."""
    from ...physics._array import namespace
    from ..envs.core import observation

    xp = namespace(state.quat)
    obs, _, _, _ = observation(state.pos, state.quat, state.vel, state.ang_vel, cstate,
                               ref.pos, ref.vel)  # fmt: skip
    h = obs
    last = len(gains.weights) - 1
    for j, (w, b) in enumerate(gains.weights):
        h = h @ xp.asarray(w.T) + xp.asarray(b)
        if j < last:
            h = xp.tanh(h)
    a = xp.clip(h, -1.0, 1.0)
    rpm = gains.rpm_min + 0.5 * (a + 1.0) * (gains.rpm_max - gains.rpm_min)
    return rpm, a


def _init_state(gains: PolicyGains, batch_shape: tuple = (), xp: Any = None,
                dtype: Any = None) -> Any:  # fmt: skip
    import numpy as np

    xp = np if xp is None else xp
    n_act = gains.weights[-1][0].shape[0]
    return xp.zeros((*batch_shape, n_act), dtype=dtype or xp.float64)


policy_control.command = "rpm"  # type: ignore[attr-defined]
policy_control.init_state = _init_state  # type: ignore[attr-defined]
