"""Flat-output reference type and helpers shared by the trajectories.

What a trajectory is (an immutable callable ``traj(t) -> Reference``: the fields, their shapes
and units, ``traj.duration``, the array backends of ``t``) is stated once, in the package
docstring of :mod:`quadsim.loop.trajectories`.

**Smoothstep** (shared by the step and the phase ramp): the C⁴ smoothstep on ``[0, 1]``,
``σ(τ) = 126τ⁵ - 420τ⁶ + 540τ⁷ - 315τ⁸ + 70τ⁹`` (``σ' = 630 τ⁴(1-τ)⁴``; zero 1st-4th
derivatives at 0 and 1), and its integral
``Σ(τ) = ∫₀^τ σ = 21τ⁶ - 60τ⁷ + 67.5τ⁸ - 35τ⁹ + 7τ¹⁰``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
from array_api_compat import is_array_api_obj

from ...physics._array import namespace


class Reference(NamedTuple):
    """Flat-output reference at time ``t`` (ENU world frame).

    Attributes:
        pos: Position, shape (..., 3) [m].
        vel: Velocity, shape (..., 3) [m/s].
        acc: Acceleration, shape (..., 3) [m/s^2].
        jerk: Jerk, shape (..., 3) [m/s^3].
        snap: Snap, shape (..., 3) [m/s^4].
        yaw: Yaw angle, shape (...) [rad].
        yaw_rate: Yaw rate, shape (...) [rad/s].
    """

    pos: Any
    vel: Any
    acc: Any
    jerk: Any
    snap: Any
    yaw: Any
    yaw_rate: Any


SMOOTH = (0.0, 0.0, 0.0, 0.0, 0.0, 126.0, -420.0, 540.0, -315.0, 70.0)
"""The C⁴ smoothstep σ on ``[0, 1]`` (zero 1st-4th derivatives at 0 and 1), ascending powers."""
SMOOTH_INT = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 21.0, -60.0, 67.5, -35.0, 7.0)
"""Its integral ``Σ(τ) = ∫₀^τ σ``, ascending powers."""
_YAW_MODES = ("fixed", "tangent")


# --------------------------------------------------------------------------- validation


def finite_number(owner: str, name: str, value: Any, *, positive: bool = False) -> float:
    """``value`` as a finite float (``> 0`` if ``positive``), else a ValueError naming it."""
    want = "a finite number > 0" if positive else "a finite number"
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{owner}: {name} must be {want}; got {value!r}") from None
    if not math.isfinite(x) or (positive and x <= 0.0):
        raise ValueError(f"{owner}: {name} must be {want}; got {value!r}")
    return x


def nonneg_number(owner: str, name: str, value: Any) -> float:
    """``value`` as a finite float ``>= 0``, else a ValueError naming ``owner`` and ``name``."""
    x = finite_number(owner, name, value)
    if x < 0.0:
        raise ValueError(f"{owner}: {name} must be a finite number >= 0; got {value!r}")
    return x


def finite_array(
    owner: str, name: str, value: Any, shape: tuple[int | None, ...], hint: str = ""
) -> np.ndarray:
    """``value`` as a finite, read-only float64 array of ``shape`` (``None``: any length)."""
    want = "(" + ", ".join("K" if d is None else str(d) for d in shape)
    want += (",)" if len(shape) == 1 else ")") + hint
    try:
        a = np.array(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(
            f"{owner}: {name} must be numbers of shape {want}; got {value!r}"
        ) from None
    if a.ndim != len(shape) or any(
        d is not None and d != n for d, n in zip(shape, a.shape, strict=True)
    ):
        raise ValueError(f"{owner}: {name} must have shape {want}; got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{owner}: {name} must be finite; got {value!r}")
    a.setflags(write=False)
    return a


def finite_vec3(owner: str, name: str, value: Any) -> tuple[float, float, float]:
    """``value`` (3 finite numbers, e.g. a position [m]) as a tuple of 3 floats."""
    a = finite_array(owner, name, value, (3,))
    return (float(a[0]), float(a[1]), float(a[2]))


def check_yaw_mode(owner: str, value: Any) -> str:
    """``value`` if it is a yaw mode (``"fixed"`` or ``"tangent"``), else a ValueError."""
    if value not in _YAW_MODES:
        raise ValueError(f"{owner}: yaw_mode must be one of {_YAW_MODES}; got {value!r}")
    return value


def set_frozen(obj: Any, **values: Any) -> None:
    """Set attributes of an immutable trajectory (in its ``__init__``), past ``__setattr__``."""
    for k, v in values.items():
        object.__setattr__(obj, k, v)


# --------------------------------------------------------------------------- array helpers


def as_time(t: Any) -> tuple[Any, Any]:
    """Namespace and floating array for ``t`` (Python numbers and lists become float64 NumPy)."""
    if isinstance(t, np.generic) or not is_array_api_obj(t):
        t = np.asarray(t, dtype=np.float64)
    xp = namespace(t)
    if not xp.isdtype(t.dtype, "real floating"):
        t = xp.astype(t, xp.float64)
    return xp, t


def full_like(xp: Any, value: Any, t: Any) -> Any:
    """``value`` (array or Python number) broadcast to the shape, dtype and device of ``t``."""
    return value + xp.zeros_like(t)


def vec_like(xp: Any, comps: Sequence[Any], t: Any) -> Any:
    """Components (arrays or numbers) stacked to ``(*t.shape, len(comps))`` like ``t``."""
    return xp.stack([full_like(xp, c, t) for c in comps], axis=-1)


def poly_derivs(coefs: Sequence[float], x: Any, n: int) -> list[Any]:
    """Values of a polynomial (ascending ``coefs``) and its first ``n`` derivatives at ``x``."""
    out = []
    c = list(coefs)
    for _ in range(n + 1):
        acc: Any = 0.0
        for a in reversed(c):
            acc = acc * x + a
        out.append(acc)
        c = [j * c[j] for j in range(1, len(c))]
    return out


def smoothstep(tau: Any, width: float, n: int) -> list[Any]:
    """The smoothstep over a transition of ``width`` [s] and its first ``n`` time derivatives.

    ``tau`` is the transition's clipped normalised time ``clip((t - t₀)/width, 0, 1)``, shape
    ``(...)``; returns ``[σ(τ), σ'(τ)/width, ..., σ⁽ⁿ⁾(τ)/widthⁿ]`` [1, 1/s, ..., 1/sⁿ], the
    derivatives of ``σ((t - t₀)/width)`` in ``t`` (the step and the phase ramp both use it).
    """
    s = poly_derivs(SMOOTH, tau, n)
    return [s[0], *(d / width**k for k, d in enumerate(s[1:], 1))]
