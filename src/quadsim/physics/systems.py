"""Systems: a model's state layout and its derivative over a flat tuple of components.

The simulator and the integrators see a state as one flat tuple of components (each an array of
the batch shape, or a CasADi scalar), laid out field by field::

    first_principles, wrench:  pos(3) quat(4) vel(3) ang_vel(3) [rotor_vel(N)] [motor_heat(N)]
    euler_zyx:                 pos(3) rpy(3)  vel(3) ang_vel(3) [rotor_vel(N)] [motor_heat(N)]

(``motor_heat``: the motors' warm-up states ``θ`` [1] of a drone with a warm-up term,
:mod:`quadsim.physics.motor_thermal`; rotor-level models only).

A :class:`System` names that layout, says which fields are kinematic (position and attitude,
driven by the rates) and which are rates (velocity, body rates, rotor speeds), and gives the
derivative ``f(x, u, p, ops, env) -> x_dot`` built from the model's component kernel. ``env``
carries the world-frame wind [m/s] and disturbance force [N] / torque [N m] (each a 3-tuple or
``None``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ._array import eps_of
from .models import euler_zyx, first_principles, get_model, wrench
from .models._rigid import ROTOR_PARAMS
from .models.wrench import WRENCH_PARAMS

__all__ = ["Env", "System", "has_warmup", "make_system"]


class Env(NamedTuple):
    """External inputs of a step, each a 3-tuple of components or ``None``."""

    wind: Any = None
    dist_f: Any = None
    dist_t: Any = None


class System(NamedTuple):
    """A model bound to a flat state layout.

    Attributes:
        model: Registry name of the model.
        fields: ``(name, size)`` pairs in state order.
        attitude: ``"quat"`` or ``"rpy"``.
        n_cmd: Length of the command vector.
        param_spec: Parameter names and trailing shapes (see ``quadsim.physics.models._rigid``).
        deriv: ``deriv(x, u, p, ops, env) -> x_dot`` over flat component tuples.
    """

    model: str
    fields: tuple[tuple[str, int], ...]
    attitude: str
    n_cmd: int
    param_spec: dict
    deriv: Callable

    @property
    def size(self) -> int:
        """Number of state components."""
        return sum(n for _, n in self.fields)

    def slices(self) -> dict[str, slice]:
        """Position of each field in the flat state."""
        out, i = {}, 0
        for name, n in self.fields:
            out[name] = slice(i, i + n)
            i += n
        return out

    def rate_mask(self) -> tuple[bool, ...]:
        """For each component: is it a rate (velocity, body rate, rotor speed, warm-up)?"""
        return tuple(
            name in ("vel", "ang_vel", "rotor_vel", "motor_heat")
            for name, n in self.fields for _ in range(n)
        )


def make_system(model: str, n_rotors: int = 4, rotor_dynamics: bool = True,
                warmup: bool = False) -> System:  # fmt: skip
    """The :class:`System` of a registered model.

    Args:
        model: ``"first_principles"``, ``"euler_zyx"`` or ``"wrench"``.
        n_rotors: Number of rotors (rotor-level models).
        rotor_dynamics: Keep rotor speeds [RPM] as states with their dynamics (rotor-level models);
            otherwise commanded speeds act at once.
        warmup: Keep the motors' warm-up states ``θ`` [1] (``motor_heat``, after the rotor speeds)
            and scale each rotor's thrust by them (rotor-level models).

    Raises:
        ValueError: Unknown model, or rotor dynamics or a warm-up requested for the wrench model.
    """
    spec = get_model(model)
    if model == "wrench":
        if warmup:
            raise ValueError("the wrench model has no rotors to warm up")
        fields = (("pos", 3), ("quat", 4), ("vel", 3), ("ang_vel", 3))
        return System(model, fields, "quat", 4, WRENCH_PARAMS, _wrench_deriv)
    att = ("quat", 4) if spec.attitude == "quat" else ("rpy", 3)
    fields = (("pos", 3), att, ("vel", 3), ("ang_vel", 3))
    if rotor_dynamics:
        fields += (("rotor_vel", n_rotors),)
    if warmup:
        fields += (("motor_heat", n_rotors),)
    derivs = {"first_principles": (_fp_deriv, _fp_deriv_warm),
              "euler_zyx": (_euler_deriv, _euler_deriv_warm)}  # fmt: skip
    return System(model, fields, spec.attitude, n_rotors, ROTOR_PARAMS, derivs[model][warmup])


def has_warmup(drone: Any, params: dict | None = None) -> bool:
    """Whether a drone (a :class:`~quadsim.physics.params.Params`) flies a motor warm-up:
    ``warmup_coef > 0``, its own or, per drone, that of ``params``."""  # noqa: D205, D209
    coef = (params or {}).get("warmup_coef", getattr(drone, "warmup_coef", 0.0))
    return bool(np.any(np.asarray(coef, dtype=np.float64) > 0.0))


def _fp_deriv(x: tuple, u: tuple, p: Any, ops: Any, env: Env) -> tuple:
    rotor = x[13:] if len(x) > 13 else None
    qd, vd, wd, rd = first_principles.kernel(
        x[3:7], x[7:10], x[10:13], u, rotor, env.dist_f, env.dist_t, p, ops, env.wind
    )
    return (*x[7:10], *qd, *vd, *wd, *(rd or ()))


def _fp_deriv_warm(x: tuple, u: tuple, p: Any, ops: Any, env: Env) -> tuple:
    """As :func:`_fp_deriv` with the warm-up states last (``len(u)`` of them)."""
    n = len(u)
    rotor, heat = (x[13:13 + n] if len(x) > 13 + n else None), x[len(x) - n:]
    qd, vd, wd, rd, hd = first_principles.kernel(
        x[3:7], x[7:10], x[10:13], u, rotor, env.dist_f, env.dist_t, p, ops, env.wind, heat
    )
    return (*x[7:10], *qd, *vd, *wd, *(rd or ()), *hd)


def _euler_deriv(x: tuple, u: tuple, p: Any, ops: Any, env: Env) -> tuple:
    rotor = x[12:] if len(x) > 12 else None
    eps = eps_of(ops, x[0])
    ed, vd, wd, rd = euler_zyx.kernel(
        x[3:6], x[6:9], x[9:12], u, rotor, env.dist_f, env.dist_t, p, ops, False, eps, env.wind
    )
    return (*x[6:9], *ed, *vd, *wd, *(rd or ()))


def _euler_deriv_warm(x: tuple, u: tuple, p: Any, ops: Any, env: Env) -> tuple:
    """As :func:`_euler_deriv` with the warm-up states last (``len(u)`` of them)."""
    n = len(u)
    rotor, heat = (x[12:12 + n] if len(x) > 12 + n else None), x[len(x) - n:]
    ed, vd, wd, rd, hd = euler_zyx.kernel(
        x[3:6], x[6:9], x[9:12], u, rotor, env.dist_f, env.dist_t, p, ops, False,
        eps_of(ops, x[0]), env.wind, heat,
    )  # fmt: skip
    return (*x[6:9], *ed, *vd, *wd, *(rd or ()), *hd)


def _wrench_deriv(x: tuple, u: tuple, p: Any, ops: Any, env: Env) -> tuple:
    qd, vd, wd = wrench.kernel(
        x[3:7], x[7:10], x[10:13], u, env.dist_f, env.dist_t, p, ops, env.wind
    )
    return (*x[7:10], *qd, *vd, *wd)
