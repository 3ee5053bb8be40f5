r"""Rotor-speed observer: the rotor speeds a flight computer knows without measuring them.

A Crazyflie does not sense its rotor speeds, but it knows what it commanded, and the rotors
follow the command with a lag of about 0.1 s (seed 000's asymmetric motor model,
:func:`quadsim.physics.rotors.asymmetric_quadratic`). Run on the nominal model, fed with the
commands ``Ω*_j`` sent at every physics step ``h``, the estimate

.. math::

    \hat Ω_{j+1} = \mathrm{between}\big(\hat Ω_j,\; \hat Ω_j + h\, f(\hat Ω_j, Ω^*_j; c),\;
    Ω^*_j\big)

(explicit Euler, never overshooting the command, so it stays stable for any motor constant)
tracks the true speeds up to the model's error (randomised rotor dynamics, action latency).
Policies observe it normalised like the ``rotor_speeds`` action,
``2 (\hat Ω - Ω_{min}) / (Ω_{max} - Ω_{min}) - 1``; without it the rotor state behind the lag is
hidden and the policy has to infer it from the motion (docs/rl.md measures the difference).
New episodes start the estimate at the hover speed, where the plant's rotors start.

**Position-error integral** (``observe_integral``). A policy that sees only the present state
holds a steady push (a wind) with a steady offset, as a proportional controller does; with the
integral of the position error in its observation it can learn integral action, as the PID and
geometric controllers have. Per control step ``Δt`` after the state is observed,

.. math::

    I_{k+1} = \mathrm{clip}\big(I_k + Δt\, e_p \,[\,|e_p| < E\,],\; ±I_{max}\big),
    \qquad E = 0.3\ \mathrm{m}, \; I_{max} = 0.5\ \mathrm{m\,s}

per axis (conditional integration: an axis integrates only within ``E`` of the target, so that
a throw 2 m away does not wind it up while it recovers), starting at 0; observed as
``I / I_max`` in ``[-1, 1]``.

Pure functions over the array API: the environments' NumPy path, the compiled env step and the
policy controller of ``quadsim fly`` (:mod:`quadsim.app.rl.controller`) call the same ones.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ...physics._array import namespace
from ...physics.rotors import asymmetric_quadratic

__all__ = [
    "ERROR_CLIP",
    "INTEGRAL_MAX",
    "RotorObserver",
    "advance",
    "integrate_error",
    "make_observer",
    "normalized",
]

ERROR_CLIP = 0.3
"""``E``: an axis's position error is integrated only while within ``±E`` [m]."""
INTEGRAL_MAX = 0.5
"""``I_max``: the integral is clipped to ``±I_max`` [m s] per axis."""


class RotorObserver(NamedTuple):
    """Constants of the observer (nominal drone).

    Attributes:
        coef: ``rotor_dyn_coef`` ``(c0, c1, c2, c3)`` [1/s, 1/(s RPM), 1/s, 1/(s RPM)].
        h: Integration step [s] (the physics step of the environment).
        rpm_min: Rotor speed observed as -1 [RPM].
        rpm_max: Rotor speed observed as +1 [RPM].
        hover: Start value of the estimate [RPM].
    """

    coef: tuple
    h: float
    rpm_min: float
    rpm_max: float
    hover: float


def make_observer(params: Any, h: float, hover: float) -> RotorObserver:
    """The observer of a drone's nominal parameters at step ``h`` [s] starting at ``hover``."""
    c = tuple(float(x) for x in params.rotor_dyn_coef)
    return RotorObserver(c, float(h), float(params.rpm_min), float(params.rpm_max), float(hover))


def advance(est: Any, cmd: Any, obs: RotorObserver) -> Any:
    """The estimate ``(..., N)`` [RPM] one step ``h`` later, under the commands ``cmd`` [RPM]."""
    xp = namespace(est, cmd)
    nxt = est + obs.h * asymmetric_quadratic(est, cmd, obs.coef)
    up = cmd > est
    return xp.where(up, xp.minimum(nxt, cmd), xp.maximum(nxt, cmd))


def normalized(est: Any, obs: RotorObserver) -> Any:
    """The observed part ``2 (Ω̂ - Ω_min) / (Ω_max - Ω_min) - 1`` ``(..., N)``."""
    return 2.0 * (est - obs.rpm_min) / (obs.rpm_max - obs.rpm_min) - 1.0


def integrate_error(integral: Any, e_p: Any, dt: float) -> Any:
    """``I`` ``(..., 3)`` [m s] one control step ``dt`` [s] later with the error ``e_p`` [m]."""
    xp = namespace(integral, e_p)
    step = xp.where(xp.abs(e_p) < ERROR_CLIP, e_p, 0.0 * e_p) * dt
    return xp.clip(integral + step, -INTEGRAL_MAX, INTEGRAL_MAX)
