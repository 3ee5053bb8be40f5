r"""Motor warm-up and axial inflow: two optional corrections of a rotor's thrust per command.

Both were found in real Crazyflie flights (NanoBench, ``docs/validation.md``, "Flight logs:
replay") and are off by default (coefficients 0): a preset without them flies as before.

**Warm-up.** Thrust per command falls over the first seconds after the motors start (the
windings and magnets warm, the resistance rises, the speed per volt drops). A dimensionless state
``θ`` per motor follows the rotor's normalised power ``p`` to first order,

.. math::

    \dot θ = \frac{p - θ}{τ_w}, \qquad p = \left(\frac{Ω}{Ω_h}\right)^3,

with ``τ_w`` [s] the warm-up time constant, ``Ω`` the rotor speed and ``Ω_h`` the hover speed
[RPM] (a propeller's shaft power grows with ``Ω³``, so ``p = 1`` in hover). ``θ = 0`` is a cold
motor (at start-up), ``θ = 1`` one warmed up in hover. For ``p`` held over a step ``dt`` the exact
discrete step is

.. math::

    θ_{k+1} = p_k + (θ_k - p_k)\, e^{-dt/τ_w}

(:func:`warmup_step`; ``τ_w = ∞`` never warms). The thrust per command is multiplied by
``max(1 - c_w θ, 0)`` (:func:`warmup_factor`), ``c_w`` [1] the fraction lost once warm in hover.

**Axial inflow.** A rotor moving along its axis into the air (climb) sees a larger inflow and
its blades a smaller angle of attack, so at the same speed it gives less thrust. To first order
in the axial speed ``v_z`` [m/s] of the rotor relative to the air along body ``+z`` (climb
positive; without wind the body-z component of the drone's velocity),

.. math::

    T = T_0 \max(1 - c_i v_z, 0) \qquad [c_i] = \mathrm{s/m}

(:func:`inflow_factor`; clipped so the thrust never turns negative, the linear form's limit of
validity being ``|v_z| ≪ v_h``). Momentum theory bounds ``c_i``: with the hover induced velocity
``v_h = \sqrt{T_h / (2 ρ A)}`` a rotor whose thrust comes all from the inflow angle has
``T ≈ T_h (1 - v_z / v_h)``, i.e. ``c_i = 1 / v_h`` (:func:`momentum_inflow_coef`: 0.19 s/m for a
46-g Crazyflie, ``v_h`` = 5.2 m/s with 47-mm propellers); the blade element's pitch term makes it
weaker, ``c_i = (g/2) / (1 + g v_h / 2)`` with ``g = -∂\ln T/∂v`` at constant speed (linearised
blade-element momentum theory). The Crazyflie flights fit about 0.05 s/m, 3-4 times below
``1 / v_h``.

Pure array-API functions: NumPy, JAX, PyTorch arrays or, with ``ops=CASADI_OPS``
(:data:`quadsim.physics._array.CASADI_OPS`), CasADi symbols; the same arithmetic on every
backend. The rotor-level models multiply each rotor's thrust by :func:`inflow_factor` (their
``inflow_coef``, :mod:`quadsim.physics.models._rigid`); ``quadsim replay`` also integrates ``θ``
(:func:`warmup_step`, exact for a held drive) and applies :func:`thrust_factor`. A plant whose
drone has a warm-up (``warmup_coef > 0``) carries ``θ`` per rotor as the state ``motor_heat``
(from 0, cold, at a reset) and multiplies each rotor's thrust by :func:`warmup_factor` too
(:func:`quadsim.physics.models._rigid.rotor_accels`; ``Ω`` the rotor's actual speed, ``Ω_h`` the
nominal drone's hover speed).
"""

from __future__ import annotations

import math
from typing import Any

from array_api_compat import is_array_api_obj

from ._array import namespace, numpy_namespace

__all__ = [
    "hover_rpm",
    "inflow_factor",
    "momentum_inflow_coef",
    "thrust_factor",
    "warmup_drive",
    "warmup_factor",
    "warmup_rate",
    "warmup_step",
]


def _ops(ops: Any, *xs: Any) -> Any:
    """``ops``, or the array namespace of the arrays among ``xs`` (NumPy for plain numbers)."""
    if ops is not None:
        return ops
    arrays = [x for x in xs if is_array_api_obj(x)]
    return namespace(*arrays) if arrays else numpy_namespace()


def _clip0(ops: Any, x: Any) -> Any:
    """``max(x, 0)`` element by element (a ``where``, so CasADi traces it)."""
    if isinstance(x, int | float):
        return max(float(x), 0.0)
    return ops.where(x > 0.0, x, 0.0 * x)


def hover_rpm(params: Any) -> float:
    """The hover speed ``Ω_h`` [RPM] of a :class:`~quadsim.physics.params.Params`: each rotor's
    thrust curve at ``m g / N`` (N the rotor count; :attr:`Params.hover_rpm
    <quadsim.physics.params.Params.hover_rpm>`)."""  # noqa: D205, D209
    return params.hover_rpm


def warmup_drive(rpm: Any, rpm_hover: float) -> Any:
    """The warm-up's drive ``p = (Ω / Ω_h)³`` [1]: the rotor's power relative to hover.

    Args:
        rpm: Rotor speeds ``Ω`` [RPM], any shape.
        rpm_hover: The hover speed ``Ω_h`` [RPM] (:func:`hover_rpm`), > 0 (checked when a
            number; a traced or per-drone parameter is the model's, checked where it is made).
    """
    if isinstance(rpm_hover, int | float) and not rpm_hover > 0.0:
        raise ValueError(f"rpm_hover must be > 0; got {rpm_hover}")
    r = rpm / rpm_hover
    return r * r * r


def warmup_rate(theta: Any, drive: Any, time_constant: Any) -> Any:
    """``θ̇ = (p - θ) / τ_w`` [1/s] (module docstring).

    Args:
        theta: Warm-up state ``θ`` [1].
        drive: Normalised power ``p`` [1] (:func:`warmup_drive`).
        time_constant: ``τ_w`` [s] > 0 (``inf``: the state never moves).
    """
    return (drive - theta) / time_constant


def warmup_step(theta: Any, drive: Any, time_constant: Any, dt: Any, ops: Any = None) -> Any:
    """``θ`` after ``dt`` [s] with the drive ``p`` held: ``p + (θ - p) exp(-dt / τ_w)``, the exact
    solution of :func:`warmup_rate` (``τ_w = inf``: ``θ`` unchanged)."""  # noqa: D205, D209
    ratio = dt / time_constant
    if isinstance(ratio, int | float):
        a = math.exp(-float(ratio))
    else:
        a = _ops(ops, theta, drive, ratio).exp(-ratio)
    return drive + (theta - drive) * a


def warmup_factor(theta: Any, coef: Any, ops: Any = None) -> Any:
    """Thrust per command of a warm motor relative to a cold one: ``max(1 - c_w θ, 0)`` [1]."""
    return _clip0(_ops(ops, theta, coef), 1.0 - coef * theta)


def inflow_factor(v_axial: Any, coef: Any, ops: Any = None) -> Any:
    """Thrust in axial flow relative to hover at the same speed: ``max(1 - c_i v_z, 0)`` [1].

    Args:
        v_axial: ``v_z`` [m/s], the rotor's speed relative to the air along body ``+z`` (climb
            positive).
        coef: ``c_i`` [s/m] >= 0 (0: no correction, the factor is exactly 1).
        ops: The namespace (``CASADI_OPS`` for CasADi); default that of the arrays.
    """
    return _clip0(_ops(ops, v_axial, coef), 1.0 - coef * v_axial)


def thrust_factor(
    theta: Any, v_axial: Any, warmup_coef: Any, inflow_coef: Any, ops: Any = None
) -> Any:
    """The product :func:`warmup_factor` × :func:`inflow_factor` [1] that multiplies each rotor's
    thrust curve (1 exactly with both coefficients 0)."""  # noqa: D205, D209
    return warmup_factor(theta, warmup_coef, ops) * inflow_factor(v_axial, inflow_coef, ops)


def momentum_inflow_coef(thrust: float, radius: float, rho: float = 1.225) -> float:
    """Momentum theory's bound on the inflow coefficient, ``1 / v_h`` [s/m], with the hover
    induced velocity ``v_h = sqrt(T / (2 ρ A))``, ``A = π r²``.

    Args:
        thrust: One rotor's hover thrust [N] > 0.
        radius: Propeller radius [m] > 0.
        rho: Air density [kg/m³] > 0.
    """  # noqa: D205
    if not (thrust > 0.0 and radius > 0.0 and rho > 0.0):
        raise ValueError(f"thrust, radius and rho must be > 0; got {thrust}, {radius}, {rho}")
    return 1.0 / math.sqrt(thrust / (2.0 * rho * math.pi * radius * radius))
