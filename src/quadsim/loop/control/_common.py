r"""Component kernels shared by the controllers (private).

Everything works on tuples of components (arrays of one batch shape), like the model kernels,
so one code path serves NumPy, JAX and PyTorch and stays ``jit``-able: no Python branching on
array values, only ``where``.

Thrust-vector limit (vertical priority with a horizontal margin ``M``, as PX4): a desired
world force ``T`` [N] becomes

.. math::

    T_z' = \mathrm{clip}\bigl(T_z, T_{min}, \sqrt{T_{max}^2 - \min(|T_{xy}|, M)^2}\bigr), \qquad
    |T'_{xy}| \le \min\bigl(T_z' \tan θ_{max},\; \sqrt{T_{max}^2 - T_z'^2}\bigr),

with the horizontal part scaled (direction kept). The tilt of ``T'`` from vertical is then at
most ``θ_max`` and ``|T'| ≤ T_max``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from array_api_compat import is_array_api_obj

from ...physics._array import stack, unstack
from ...physics.models._rigid import matTvec, matvec
from ...physics.rotation import kcross, kdot, kmatrix, kqmul

Comp = tuple[Any, ...]

__all__ = [
    "clip",
    "cross",
    "dot",
    "drag_force",
    "gvec",
    "limit_thrust",
    "mat",
    "matTvec",
    "matvec",
    "normalized",
    "qconj",
    "qmul",
    "rot_matrix",
    "scalar",
    "tostack",
]

cross, dot, qmul, rot_matrix = kcross, kdot, kqmul, kmatrix


def scalar(x: Any) -> Any:
    """A scalar gain: a Python float, or an array (per-drone values, or a traced JAX value)."""
    if isinstance(x, np.ndarray) and x.ndim > 0:
        return x
    if isinstance(x, np.ndarray | np.generic | int | float):
        return float(x)
    return x


def gvec(x: Any, n: int = 3) -> Comp:
    """Components of a per-axis gain.

    A ``(n,)`` NumPy array or sequence (or a number) gives Python floats; an array ``(..., n)``
    (per-drone gains, NumPy with NumPy states, or a traced JAX value) gives its components.
    """
    if isinstance(x, np.ndarray) and x.ndim > 1:
        return unstack(x)
    if isinstance(x, np.ndarray | np.generic | list | tuple | int | float):
        return tuple(float(c) for c in np.broadcast_to(np.asarray(x, dtype=np.float64), (n,)))
    if is_array_api_obj(x) and x.ndim == 0:
        return (x,) * n
    return unstack(x)


def mat(J: Any) -> tuple[Comp, ...]:
    """Rows of a 3x3 matrix (NumPy -> floats; a backend array -> components)."""
    if isinstance(J, np.ndarray | list | tuple):
        a = np.asarray(J, dtype=np.float64)
        return tuple(tuple(float(c) for c in row) for row in a)
    return tuple(unstack(J[..., i, :]) for i in range(3))


def qconj(q: Comp) -> Comp:
    """Conjugate of an xyzw quaternion."""
    return (-q[0], -q[1], -q[2], q[3])


def normalized(xp: Any, v: Comp, floor: float = 1e-300) -> tuple[Comp, Any]:
    """``(v / |v|, |v|)`` with a safe denominator (``|v|`` floored at ``floor``)."""
    n2 = dot(v, v)
    n = xp.sqrt(xp.where(n2 > floor * floor, n2, floor * floor))
    return tuple(c / n for c in v), n


def clip(xp: Any, x: Any, lo: Any, hi: Any) -> Any:
    """``x`` clipped to ``[lo, hi]`` (bounds: numbers or broadcastable arrays), via ``where``."""
    return xp.where(x < lo, lo, xp.where(x > hi, hi, x))


def limit_thrust(
    xp: Any, T: Comp, thrust_min: Any, thrust_max: Any, tilt_max: Any, xy_margin: Any = 0.0
) -> tuple[Comp, Any]:
    """Limit a desired world force [N] (vertical priority); see the module docstring.

    Returns:
        ``(T_limited, limited)``: the limited components and a boolean array (any limit active).
    """
    h2 = T[0] * T[0] + T[1] * T[1]
    m2 = xy_margin * xy_margin
    res2 = xp.where(h2 < m2, h2, m2 + 0.0 * h2)  # horizontal share kept from vertical priority
    tz_top = xp.sqrt(thrust_max * thrust_max - res2)
    tz = clip(xp, T[2], thrust_min, tz_top)
    rest = thrust_max * thrust_max - tz * tz
    rest = xp.sqrt(xp.where(rest > 0.0, rest, 0.0 * rest))
    tan_t = math.tan(tilt_max) if isinstance(tilt_max, int | float) else xp.tan(tilt_max)
    hmax = tz * tan_t
    hmax = xp.where(hmax < rest, hmax, rest)
    over = h2 > hmax * hmax
    h = xp.sqrt(xp.where(over, h2, 1.0 + 0.0 * h2))  # used only where over (h > hmax >= 0)
    s = xp.where(over, hmax / h, 1.0 + 0.0 * h)
    limited = over | (tz != T[2])
    return (T[0] * s, T[1] * s, tz), limited


def drag_force(xp: Any, R: Any, v: tuple, D: Any, kd: Any) -> tuple:
    """Modelled drag force [N] at world velocity ``v``: ``R D Rᵀ v - k_d |v| v`` (R rows/None)."""
    Dm = mat(D)
    vb = v if R is None else matTvec(R, v)
    f = matvec(Dm, vb)
    f = f if R is None else matvec(R, f)
    kd = scalar(kd)
    if isinstance(kd, float) and kd == 0.0:
        return f
    sp = xp.sqrt(dot(v, v))
    return tuple(f[i] - kd * sp * v[i] for i in range(3))


def tostack(xp: Any, comps: Comp, like: Any) -> Any:
    """Stack components to an array ``(..., k)`` like ``like`` (dtype, device)."""
    return stack(xp, comps, like)


def zero_state(record: Any, trailing: tuple[tuple[int, ...], ...], batch_shape: tuple[int, ...],
               xp: Any = None, dtype: Any = None) -> Any:  # fmt: skip
    """A controller state ``record`` of zeros: field ``i`` of shape ``(*batch_shape,
    *trailing[i])`` (NumPy float64 by default)."""  # noqa: D205, D209
    if xp is None:
        xp = np
    shape = tuple(batch_shape)
    return record(*(xp.zeros((*shape, *t), dtype=dtype) for t in trailing))
