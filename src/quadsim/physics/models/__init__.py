"""Quadrotor models: pure functions over arrays, each with a CasADi twin, and their registry.

=====================  =========  ==============================  ==================================
name                   attitude   command                         source
=====================  =========  ==============================  ==================================
``first_principles``   quat xyzw  rotor speeds [RPM]              seed 000 (corrected), seed 001
``euler_zyx``          roll/p/y   rotor speeds [RPM]              seeds 003 and 004
``wrench``             quat xyzw  thrust [N], body torques [N m]  seed 002
=====================  =========  ==============================  ==================================

Bind a preset's parameters with :func:`quadsim.parametrize`; look models up by name with
:func:`get_model` (the only place a model name becomes a function).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from . import euler_zyx, first_principles, wrench
from ._rigid import ROTOR_PARAMS
from .wrench import WRENCH_PARAMS

__all__ = ["MODELS", "ModelSpec", "euler_zyx", "first_principles", "get_model", "wrench"]


class ModelSpec(NamedTuple):
    """A registered model.

    Attributes:
        name: Registry name.
        dynamics: The numeric model (array API, any batch shape).
        symbolic_dynamics: Its CasADi twin, returning ``(X_dot, X, U, Y)``.
        attitude: ``"quat"`` (xyzw quaternion) or ``"rpy"`` (Euler ZYX angles).
        command: ``"rotor_rpm"`` (rotor speeds, RPM) or ``"wrench"`` (thrust N, torques N m).
        rotor_states: Whether rotor speeds can be modelled as states.
        params: Names of the keyword-only parameters.
    """

    name: str
    dynamics: Callable
    symbolic_dynamics: Callable
    attitude: str
    command: str
    rotor_states: bool
    params: tuple[str, ...]


MODELS: dict[str, ModelSpec] = {
    "first_principles": ModelSpec(
        "first_principles", first_principles.dynamics, first_principles.symbolic_dynamics,
        "quat", "rotor_rpm", True, tuple(ROTOR_PARAMS),
    ),
    "euler_zyx": ModelSpec(
        "euler_zyx", euler_zyx.dynamics, euler_zyx.symbolic_dynamics,
        "rpy", "rotor_rpm", True, tuple(ROTOR_PARAMS),
    ),
    "wrench": ModelSpec(
        "wrench", wrench.dynamics, wrench.symbolic_dynamics,
        "quat", "wrench", False, tuple(WRENCH_PARAMS),
    ),
}  # fmt: skip


def get_model(name: str) -> ModelSpec:
    """The registered model called ``name``; ``ValueError`` listing the names otherwise."""
    try:
        return MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; available: {', '.join(MODELS)}") from None
