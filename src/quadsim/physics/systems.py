"""Systems: a model's state layout and its derivative over a flat tuple of components.

The simulator and the integrators see a state as one flat tuple of components (each an array of
the batch shape, or a CasADi scalar), laid out field by field::

    first_principles, wrench:  pos(3) quat(4) vel(3) ang_vel(3) [rotor_vel(N)]
    euler_zyx:                 pos(3) rpy(3)  vel(3) ang_vel(3) [rotor_vel(N)]

A :class:`System` names that layout, says which fields are kinematic (position and attitude,
driven by the rates) and which are rates (velocity, body rates, rotor speeds), and gives the
derivative ``f(x, u, p, ops, env) -> x_dot`` built from the model's component kernel. ``env``
carries the world-frame wind [m/s] and disturbance force [N] / torque [N m] (each a 3-tuple or
``None``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from ._array import eps_of
from .models import euler_zyx, first_principles, get_model, wrench
from .models._rigid import ROTOR_PARAMS
from .models.wrench import WRENCH_PARAMS

__all__ = ["Env", "System", "make_system"]


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
        """For each component: is it a rate (velocity, body rate, rotor speed)?"""
        return tuple(
            name in ("vel", "ang_vel", "rotor_vel") for name, n in self.fields for _ in range(n)
        )


def make_system(model: str, n_rotors: int = 4, rotor_dynamics: bool = True) -> System:
    """The :class:`System` of a registered model.

    Args:
        model: ``"first_principles"``, ``"euler_zyx"`` or ``"wrench"``.
        n_rotors: Number of rotors (rotor-level models).
        rotor_dynamics: Keep rotor speeds [RPM] as states with their dynamics (rotor-level models);
            otherwise commanded speeds act at once.

    Raises:
        ValueError: Unknown model, or rotor dynamics requested for the wrench model.
    """
    spec = get_model(model)
    if model == "wrench":
        fields = (("pos", 3), ("quat", 4), ("vel", 3), ("ang_vel", 3))
        return System(model, fields, "quat", 4, WRENCH_PARAMS, _wrench_deriv)
    att = ("quat", 4) if spec.attitude == "quat" else ("rpy", 3)
    fields = (("pos", 3), att, ("vel", 3), ("ang_vel", 3))
    if rotor_dynamics:
        fields += (("rotor_vel", n_rotors),)
    deriv = _fp_deriv if model == "first_principles" else _euler_deriv
    return System(model, fields, spec.attitude, n_rotors, ROTOR_PARAMS, deriv)


def _fp_deriv(x: tuple, u: tuple, p: Any, ops: Any, env: Env) -> tuple:
    rotor = x[13:] if len(x) > 13 else None
    qd, vd, wd, rd = first_principles.kernel(
        x[3:7], x[7:10], x[10:13], u, rotor, env.dist_f, env.dist_t, p, ops, env.wind
    )
    return (*x[7:10], *qd, *vd, *wd, *(rd or ()))


def _euler_deriv(x: tuple, u: tuple, p: Any, ops: Any, env: Env) -> tuple:
    rotor = x[12:] if len(x) > 12 else None
    eps = eps_of(ops, x[0])
    ed, vd, wd, rd = euler_zyx.kernel(
        x[3:6], x[6:9], x[9:12], u, rotor, env.dist_f, env.dist_t, p, ops, False, eps, env.wind
    )
    return (*x[6:9], *ed, *vd, *wd, *(rd or ()))


def _wrench_deriv(x: tuple, u: tuple, p: Any, ops: Any, env: Env) -> tuple:
    qd, vd, wd = wrench.kernel(
        x[3:7], x[7:10], x[10:13], u, env.dist_f, env.dist_t, p, ops, env.wind
    )
    return (*x[7:10], *qd, *vd, *wd)
