"""Reference trajectories: hover, step, circle, lemniscate and minimum-snap polynomials.

A trajectory is an immutable callable ``traj(t) -> Reference`` giving the flat outputs of a
quadrotor (position and its first four derivatives, yaw and yaw rate) at time ``t`` [s], a
Python number or an array of shape ``(...)``; vector fields have shape ``(..., 3)`` [m, m/s,
m/s², m/s³, m/s⁴] in the world frame (ENU), yaw fields shape ``(...)`` [rad, rad/s]. Every
derivative field is the exact analytic derivative of the field above it. ``traj.duration`` [s]
is the time after which the reference stays constant (``math.inf`` for periodic ones).
:class:`Hover`, :class:`Step`, :class:`Circle`, :class:`Lemniscate` and :class:`MinSnap` accept
NumPy, JAX, PyTorch or any array-API ``t`` (one code path), so they can be jitted.

Submodules (each states its equations):

- :mod:`.reference`: the :class:`Reference` tuple, the C⁴ smoothstep and shared validation and
  array helpers.
- :mod:`.basic`: :class:`Hover` and :class:`Step`.
- :mod:`.periodic`: :class:`Circle` and :class:`Lemniscate` (Gerono), the phase ramp, tangent
  yaw and :func:`gerono_perimeter`.
- :mod:`.min_snap`: :class:`MinSnap` (closed-form minimum-snap spline) and
  :func:`allocate_times`.
"""

from __future__ import annotations

from .basic import Hover, Step
from .min_snap import MinSnap, allocate_times
from .periodic import Circle, Lemniscate, gerono_perimeter
from .reference import Reference

__all__ = [
    "Circle",
    "Hover",
    "Lemniscate",
    "MinSnap",
    "Reference",
    "Step",
    "allocate_times",
    "gerono_perimeter",
]
