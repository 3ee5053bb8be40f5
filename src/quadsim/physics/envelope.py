r"""Static flight envelope of a drone, derived from its :class:`~quadsim.physics.params.Params`.

With ``N`` rotors, thrust curve ``f(Ω)`` [N, Ω in RPM], mass ``m`` and gravity ``g``:

* hover: every rotor at ``Ω_h`` with ``f(Ω_h) = m g / N`` (root on the increasing branch);
* ``T_min = N f(Ω_min)``, ``T_max = N f(Ω_max)``, thrust-to-weight ``T_max / (m g)``;
* ``a_up = (T_max - m g) / m``, ``a_down = (m g - T_min) / m``;
* ``θ_max = arccos(m g / T_max)``: the steepest tilt at which full thrust still holds altitude.

Terminal velocity in level flight at tilt ``θ`` (flying along body x, thrust holding altitude):
the horizontal thrust ``m g tan θ`` balances quadratic drag ``k_d v^2`` plus the linear body drag
projected on the flight direction, ``c(θ) v`` with ``c(θ) = -(D_{xx} cos^2 θ + D_{zz} sin^2 θ)``
(the horizontal velocity seen in the body tilted by ``θ`` is ``(v cos θ, 0, ±v sin θ)``):

.. math::  k_d v^2 + c(θ) v = m g \tan θ .

Approximation: the vertical component of anisotropic linear drag (``(D_{zz} - D_{xx}) v sin θ
cos θ``) and off-diagonal drag terms are neglected; they would slightly change the thrust needed
to hold altitude. Rotational drag plays no role in steady flight.
"""

from __future__ import annotations

import math
import os
from typing import Any, NamedTuple

import numpy as np

from .params import Params, invert_curve, load_params, rpm_to_rad_s

__all__ = ["Envelope", "envelope", "terminal_velocity"]


class Envelope(NamedTuple):
    """Derived static limits of one drone.

    Attributes:
        hover_rpm: Per-rotor hover speed [RPM] (all rotors equal).
        hover_rad_s: Per-rotor hover speed [rad/s].
        thrust_min: Total thrust with every rotor at ``rpm_min`` [N].
        thrust_max: Total thrust with every rotor at ``rpm_max`` [N].
        thrust_to_weight: ``thrust_max / (m g)``.
        accel_up_max: ``(thrust_max - m g) / m`` [m/s^2].
        accel_down_max: ``(m g - thrust_min) / m`` [m/s^2], a positive number.
        tilt_max: ``arccos(m g / thrust_max)`` [rad], 0 if ``thrust_max <= m g``.
    """

    hover_rpm: float
    hover_rad_s: float
    thrust_min: float
    thrust_max: float
    thrust_to_weight: float
    accel_up_max: float
    accel_down_max: float
    tilt_max: float


def _params(p: Params | str | os.PathLike[str]) -> Params:
    return p if isinstance(p, Params) else load_params(p)


def _weight(p: Params) -> float:
    return p.mass * float(-p.gravity_vec[2])


def envelope(params: Params | str | os.PathLike[str]) -> Envelope:
    """Static flight envelope of a drone (a :class:`Params`, preset name or TOML path).

    Raises:
        ValueError: If hover thrust is not reachable within ``[rpm_min, rpm_max]``.
    """
    p = _params(params)
    n = p.rotor_positions.shape[0]
    weight = _weight(p)
    hover = invert_curve(p.rpm2thrust, weight / n)
    if not p.rpm_min <= hover <= p.rpm_max:
        raise ValueError(
            f"{p.name}: hover needs {weight / n:.6g} N per rotor at {hover:.6g} RPM, outside "
            f"[{p.rpm_min:.6g}, {p.rpm_max:.6g}] RPM"
        )
    t_min, t_max = (n * float(np.polyval(p.rpm2thrust[::-1], w)) for w in (p.rpm_min, p.rpm_max))
    return Envelope(
        hover_rpm=hover,
        hover_rad_s=rpm_to_rad_s(hover),
        thrust_min=t_min,
        thrust_max=t_max,
        thrust_to_weight=t_max / weight,
        accel_up_max=(t_max - weight) / p.mass,
        accel_down_max=(weight - t_min) / p.mass,
        tilt_max=math.acos(weight / t_max) if t_max > weight else 0.0,
    )


def terminal_velocity(params: Params | str | os.PathLike[str], tilt: Any) -> Any:
    """Steady level-flight speed [m/s] at tilt angle ``tilt`` [rad] (float or NumPy array).

    Solves ``k_d v^2 + c(θ) v = m g tan θ`` for ``v >= 0`` (see the module docstring); linear when
    ``k_d = 0``, ``inf`` when the drone has no drag at all (and ``θ > 0``).

    Raises:
        ValueError: If any ``tilt`` lies outside ``[0, tilt_max]`` (level flight impossible).
    """
    p = _params(params)
    tilt_max = envelope(p).tilt_max
    th = np.asarray(tilt, dtype=np.float64)
    if not np.all((th >= 0.0) & (th <= tilt_max)):
        raise ValueError(
            f"{p.name}: tilt must lie in [0, tilt_max = {tilt_max:.6g} rad] for level flight; "
            f"got {tilt!r}"
        )
    force = _weight(p) * np.tan(th)
    c = -(p.drag_matrix[0, 0] * np.cos(th) ** 2 + p.drag_matrix[2, 2] * np.sin(th) ** 2)
    denom = c + np.sqrt(c * c + 4.0 * p.drag_coef * force)  # v = 2F / denom, no cancellation
    with np.errstate(divide="ignore", invalid="ignore"):
        v = np.where(force == 0.0, 0.0, np.where(denom > 0.0, 2.0 * force / denom, np.inf))
    return float(v) if v.ndim == 0 else v
