"""Backend plumbing shared by every pure function in quadsim: array-API helpers, :data:`CASADI_OPS`.

The physics is written once, over *components*: a vector ``v`` of shape ``(..., 3)`` is handled
as the tuple ``(v[..., 0], v[..., 1], v[..., 2])`` and every formula uses only ``+ - * /``, powers
and a few elementary functions taken from an ``ops`` namespace. The same kernel therefore runs on

* any array-API namespace (NumPy, array-api-strict, JAX, PyTorch): ``ops`` is the namespace and
  the components are arrays with the batch shape ``...``;
* CasADi: ``ops`` is :data:`CASADI_OPS` and the components are ``MX`` scalars.

Kernels that work on stacked arrays rather than components trace through CasADi with the
symbolic arrays of :mod:`quadsim.physics._symbolic` (:class:`~quadsim.physics._symbolic.SymArray`).
Here: the namespace of arrays (:func:`namespace`), argument checks (shape, real, finite), the
machine epsilon of a dtype, conversion (:func:`as_like`, :func:`to_numpy`) and components
(:func:`unstack`, :func:`stack`).

This keeps one code path for every backend and makes the CasADi twin of a model the *same*
arithmetic, not a hand-kept copy. Nothing here imports an optional backend at import time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from array_api_compat import array_namespace, is_array_api_obj, is_torch_namespace
from array_api_compat import device as _device

__all__ = [
    "CASADI_OPS",
    "as_like",
    "check_finite",
    "check_shape",
    "eps_of",
    "namespace",
    "numpy_namespace",
    "stack",
    "unstack",
]


NUMPY_IS_ARRAY_API = np.lib.NumpyVersion(np.__version__) >= "2.1.0"
"""NumPy's own namespace follows the array API (2023.12) from 2.1 on: no wrapper is needed."""


def numpy_namespace() -> Any:
    """The array-API namespace of NumPy arrays: ``numpy`` itself (>= 2.1) or its wrapper."""
    if NUMPY_IS_ARRAY_API:
        return np
    import array_api_compat.numpy as xnp  # NumPy < 2.1 only

    return xnp


def namespace(*arrays: Any) -> Any:
    """Array-API namespace of the given arrays, ignoring ``None`` entries.

    NumPy arrays get ``numpy`` itself where it follows the array API (NumPy >= 2.1), the same
    functions ``array_api_compat.numpy`` calls, without the wrapper's import (which loads most
    of NumPy's lazy submodules, a tenth of a second at start-up); other arrays, and NumPy < 2.1,
    get ``array_api_compat``'s namespace.
    """
    present = [a for a in arrays if a is not None]
    if NUMPY_IS_ARRAY_API and present and all(
            isinstance(a, np.ndarray | np.generic) for a in present):  # fmt: skip
        return np
    return array_namespace(*present)


def check_shape(x: Any, trailing: Sequence[int], name: str) -> None:
    """Raise ``ValueError`` unless ``x`` has shape ``(..., *trailing)``.

    Args:
        x: Array to check.
        trailing: Expected trailing dimensions, e.g. ``(4,)`` for quaternions.
        name: Argument name used in the message.
    """
    shape = tuple(getattr(x, "shape", ()))
    n = len(trailing)
    if len(shape) < n or shape[len(shape) - n :] != tuple(trailing):
        want = ", ".join(["..."] + [str(d) for d in trailing])
        raise ValueError(f"{name} must have shape ({want}); got shape {shape}")


def check_real(x: Any, name: str) -> None:
    """Raise ``ValueError`` unless ``x`` holds real numbers (not complex, text or objects).

    NumPy and JAX dtypes are checked by kind, PyTorch tensors with ``is_complex``; a backend's
    own dtype object (CasADi symbols) passes.
    """
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        return
    if hasattr(x, "is_complex"):  # torch
        ok = not x.is_complex()
    else:
        try:
            ok = np.dtype(dtype).kind in "fiub"
        except TypeError:
            ok = True
    if not ok:
        raise ValueError(f"{name} must hold real numbers; got dtype {dtype}")


def check_finite(xp: Any, x: Any, name: str) -> None:
    """Raise ``ValueError`` if ``x`` holds NaN or infinity (eager backends only)."""
    if not bool(xp.all(xp.isfinite(x))):
        raise ValueError(f"{name} must be finite; got non-finite values")


def eps_of(ops: Any, x: Any) -> float:
    """Machine epsilon of ``x``'s dtype (float64's for CasADi symbols and Python numbers)."""
    dtype = getattr(x, "dtype", None)
    if dtype is None or ops is CASADI_OPS:
        return 2.220446049250313e-16
    return float(ops.finfo(dtype).eps)


def as_like(xp: Any, value: Any, like: Any) -> Any:
    """Convert ``value`` to an array of ``xp`` with the dtype and device of ``like``."""
    if isinstance(value, np.ndarray) and not value.flags.writeable and is_torch_namespace(xp):
        value = value.copy()  # torch warns on read-only buffers (our Params arrays are read-only)
    return xp.asarray(value, dtype=like.dtype, device=_device(like))


def unstack(x: Any) -> tuple[Any, ...]:
    """Split the last axis of ``x`` into a tuple of components of shape ``x.shape[:-1]``."""
    return tuple(x[..., i] for i in range(x.shape[-1]))


def to_numpy(a: Any) -> np.ndarray:
    """A NumPy array of a NumPy, JAX or PyTorch array (a copy unless ``a`` is NumPy already)."""
    if hasattr(a, "detach"):  # torch
        return a.detach().cpu().numpy()
    return np.asarray(a)


def stack(xp: Any, comps: Sequence[Any], like: Any) -> Any:
    """Stack components along a new last axis, broadcasting them to a common batch shape.

    Components that are Python numbers (for example an exact ``0.0``) become arrays with the
    dtype and device of ``like``.
    """
    arrs = [c if is_array_api_obj(c) else as_like(xp, c, like) for c in comps]
    arrs = xp.broadcast_arrays(*arrs)
    return xp.stack(arrs, axis=-1)


class _CasadiOps:
    """The subset of the array API the kernels use, implemented with CasADi (imported lazily)."""

    pi = 3.141592653589793

    @staticmethod
    def _cs() -> Any:
        import casadi

        return casadi

    def where(self, cond: Any, a: Any, b: Any) -> Any:
        return self._cs().if_else(cond, a, b)

    def sqrt(self, x: Any) -> Any:
        return self._cs().sqrt(x)

    def exp(self, x: Any) -> Any:
        return self._cs().exp(x)

    def sin(self, x: Any) -> Any:
        return self._cs().sin(x)

    def cos(self, x: Any) -> Any:
        return self._cs().cos(x)

    def tan(self, x: Any) -> Any:
        return self._cs().tan(x)

    def atan2(self, y: Any, x: Any) -> Any:
        return self._cs().atan2(y, x)

    def abs(self, x: Any) -> Any:
        return self._cs().fabs(x)

    def logical_and(self, a: Any, b: Any) -> Any:
        return self._cs().logic_and(a, b)

    def logical_or(self, a: Any, b: Any) -> Any:
        return self._cs().logic_or(a, b)

    def logical_not(self, a: Any) -> Any:
        return self._cs().logic_not(a)


CASADI_OPS = _CasadiOps()
