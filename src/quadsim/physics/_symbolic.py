"""Symbolic arrays for tracing stacked-array kernels with CasADi: :class:`SymArray`.

Kernels that work on stacked arrays rather than components (the controllers' outputs, the
allocation :func:`quadsim.physics.rotors.allocate`, the trajectories) trace through CasADi with
:class:`SymArray`: a NumPy *object* array of CasADi ``SX`` scalars (or Python numbers) that
carries a nominal float ``dtype`` and whose ``__array_namespace__`` is the elementwise
:class:`SymbolicNamespace`. Indexing, broadcasting and stacking are NumPy's; every arithmetic,
comparison and elementary function is applied element by element (Python numbers fold as
Python numbers, ``SX`` entries build the graph; ``where`` is ``if_else``, ``minimum(a, b)`` is
``if_else(b < a, b, a)`` and ``maximum`` alike, equal to NumPy's for non-NaN values and NaN when
``a`` is NaN; reductions run left to right). ``finfo`` and
:func:`~quadsim.physics._array.eps_of` follow the nominal dtype, so a float32 trace uses
float32's epsilon like the float32 array path. The numeric backends never see these types, so
their results do not change. Nothing here imports CasADi at import time.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np

__all__ = ["SymArray", "SymbolicNamespace", "symbolic"]


def _cs() -> Any:
    import casadi

    return casadi


def _is_num(x: Any) -> bool:
    return isinstance(x, float | int | bool | np.number | np.bool_)


def _obj(value: Any) -> np.ndarray:
    """``value`` (an object array, an element, or a numeric array) as a NumPy object array."""
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return value
        return np.array(value.tolist(), dtype=object) if value.ndim else _scalar_obj(value.item())
    return _scalar_obj(value)


def _scalar_obj(v: Any) -> np.ndarray:
    out = np.empty((), dtype=object)
    out[()] = float(v) if isinstance(v, np.floating | np.integer) else v
    return out


def _ufunc(fn: Any, nin: int) -> Any:
    return np.frompyfunc(fn, nin, 1)


def _e_where(c: Any, a: Any, b: Any) -> Any:
    if _is_num(c):
        return a if c else b
    return _cs().if_else(c, a, b)


def _e_not(a: Any) -> Any:
    return (not a) if _is_num(a) else _cs().logic_not(a)


def _e_and(a: Any, b: Any) -> Any:
    if _is_num(a) and _is_num(b):
        return bool(a) and bool(b)
    return _cs().logic_and(a, b)


def _e_or(a: Any, b: Any) -> Any:
    if _is_num(a) and _is_num(b):
        return bool(a) or bool(b)
    return _cs().logic_or(a, b)


def _e_min(a: Any, b: Any) -> Any:
    # a select, not fmin: compiled as vector compare-and-blend (NaN in ``a`` propagates)
    if _is_num(a) and _is_num(b):
        return float(np.minimum(a, b))
    return _cs().if_else(b < a, b, a)


def _e_max(a: Any, b: Any) -> Any:
    if _is_num(a) and _is_num(b):
        return float(np.maximum(a, b))
    return _cs().if_else(b > a, b, a)


def _unary(np_fn: Any, cs_name: str) -> Any:
    def f(a: Any) -> Any:
        return float(np_fn(float(a))) if _is_num(a) else getattr(_cs(), cs_name)(a)

    return f


_UFUNCS = {
    "where": _ufunc(_e_where, 3), "not": _ufunc(_e_not, 1), "and": _ufunc(_e_and, 2),
    "or": _ufunc(_e_or, 2), "minimum": _ufunc(_e_min, 2), "maximum": _ufunc(_e_max, 2),
    **{name: _ufunc(_unary(getattr(np, np_name), cs_name), 1) for name, np_name, cs_name in [
        ("sqrt", "sqrt", "sqrt"), ("sin", "sin", "sin"), ("cos", "cos", "cos"),
        ("tan", "tan", "tan"), ("asin", "arcsin", "asin"), ("acos", "arccos", "acos"),
        ("exp", "exp", "exp"), ("log", "log", "log"), ("abs", "abs", "fabs"),
        ("floor", "floor", "floor"), ("ceil", "ceil", "ceil"), ("sign", "sign", "sign"),
        ("tanh", "tanh", "tanh")]},
    "atan2": _ufunc(lambda y, x: float(np.arctan2(y, x)) if _is_num(y) and _is_num(x)
                    else _cs().atan2(y, x), 2),
}  # fmt: skip


def _raw(x: Any) -> Any:
    """The object array of a :class:`SymArray`, or ``x`` itself (numbers, NumPy arrays)."""
    if isinstance(x, SymArray):
        return x.a
    if isinstance(x, np.ndarray) and x.dtype != object:
        return _obj(x)
    return x


def _operators(op: Any) -> tuple[Callable[[Any, Any], Any], Callable[[Any, Any], Any]]:
    """The methods ``(self op o, o op self)`` of :class:`SymArray` for the NumPy ufunc ``op``.

    Both apply ``op`` element by element to the object arrays (:meth:`SymArray._bin`), so one
    pair serves each arithmetic operator and its reflected form.
    """

    def forward(self: SymArray, o: Any) -> SymArray:
        return self._bin(o, op)

    def reflected(self: SymArray, o: Any) -> SymArray:
        return self._bin(o, op, True)

    return forward, reflected


class SymArray:
    """A NumPy object array of CasADi ``SX`` scalars posing as an array-API array.

    Args:
        a: Object array (or an element, or a numeric array) of ``SX`` scalars and Python numbers.
        dtype: Nominal floating dtype (what ``finfo`` and ``eps_of`` see).
    """

    __slots__ = ("a", "dtype")
    __array_priority__ = 1000.0
    device = "cpu"

    def __init__(self, a: Any, dtype: Any = np.float64) -> None:
        self.a = _obj(a)
        self.dtype = np.dtype(dtype)

    def _new(self, a: Any) -> SymArray:
        return SymArray(a, self.dtype)

    def __array_namespace__(self, api_version: str | None = None) -> SymbolicNamespace:
        return SymbolicNamespace.of(self.dtype)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.a.shape

    @property
    def ndim(self) -> int:
        return self.a.ndim

    @property
    def size(self) -> int:
        return self.a.size

    @property
    def T(self) -> SymArray:
        return self._new(self.a.T)

    def __len__(self) -> int:
        return len(self.a)

    def __getitem__(self, idx: Any) -> SymArray:
        return self._new(self.a[idx])

    def __repr__(self) -> str:
        return f"SymArray({self.a!r}, dtype={self.dtype})"

    def _bin(self, other: Any, op: Any, reflected: bool = False) -> SymArray:
        o = _raw(other)
        return self._new(_obj(op(o, self.a) if reflected else op(self.a, o)))

    __add__, __radd__ = _operators(np.add)
    __sub__, __rsub__ = _operators(np.subtract)
    __mul__, __rmul__ = _operators(np.multiply)
    __truediv__, __rtruediv__ = _operators(np.true_divide)
    __pow__, __rpow__ = _operators(np.power)
    __matmul__, __rmatmul__ = _operators(np.matmul)

    def __neg__(self) -> SymArray:
        return self._new(_obj(np.negative(self.a)))

    def __pos__(self) -> SymArray:
        return self

    # comparisons build SX (or Python bools) element by element, never a NumPy bool array
    def __lt__(self, o: Any) -> SymArray:
        return self._bin(o, _ufunc(lambda a, b: a < b, 2))

    def __le__(self, o: Any) -> SymArray:
        return self._bin(o, _ufunc(lambda a, b: a <= b, 2))

    def __gt__(self, o: Any) -> SymArray:
        return self._bin(o, _ufunc(lambda a, b: a > b, 2))

    def __ge__(self, o: Any) -> SymArray:
        return self._bin(o, _ufunc(lambda a, b: a >= b, 2))

    def __eq__(self, o: Any) -> SymArray:  # type: ignore[override]
        return self._bin(o, _ufunc(lambda a, b: a == b, 2))

    def __ne__(self, o: Any) -> SymArray:  # type: ignore[override]
        return self._bin(o, _ufunc(lambda a, b: a != b, 2))

    __hash__ = None  # type: ignore[assignment]

    def __and__(self, o: Any) -> SymArray:
        return self._bin(o, _UFUNCS["and"])

    __rand__ = __and__

    def __or__(self, o: Any) -> SymArray:
        return self._bin(o, _UFUNCS["or"])

    __ror__ = __or__

    def __invert__(self) -> SymArray:
        return self._new(_obj(_UFUNCS["not"](self.a)))

    def __bool__(self) -> bool:
        raise TypeError("a symbolic array has no truth value (use where)")

    def entries(self) -> list[Any]:
        """The elements in C order, each a CasADi ``SX`` (numbers converted)."""
        cs = _cs()
        return [cs.SX(float(e)) if _is_num(e) else e for e in self.a.ravel().tolist()]


class SymbolicNamespace:
    """The subset of the array API the stacked-array kernels use, over :class:`SymArray`.

    One instance per nominal dtype (:meth:`of`), so ``array_namespace`` sees a single namespace.
    """

    __name__ = "quadsim.symbolic"
    _instances: ClassVar[dict[np.dtype, SymbolicNamespace]] = {}
    float32, float64, bool = np.float32, np.float64, np.bool_
    pi, e, inf, nan = math.pi, math.e, math.inf, math.nan

    def __init__(self, dtype: Any) -> None:
        self.dtype = np.dtype(dtype)

    @classmethod
    def of(cls, dtype: Any) -> SymbolicNamespace:
        """The namespace of nominal dtype ``dtype`` (cached)."""
        dtype = np.dtype(dtype)
        if dtype not in cls._instances:
            cls._instances[dtype] = cls(dtype)
        return cls._instances[dtype]

    def _wrap(self, a: Any) -> SymArray:
        return SymArray(a, self.dtype)

    def _ew(self, name: str, *args: Any) -> SymArray:
        return self._wrap(_obj(_UFUNCS[name](*[_raw(a) for a in args])))

    # creation and conversion
    def asarray(self, x: Any, dtype: Any = None, device: Any = None, copy: Any = None) -> SymArray:
        if isinstance(x, SymArray):
            return x
        if isinstance(x, list | tuple) and any(isinstance(e, SymArray) for e in x):
            return self.stack([self.asarray(e) for e in x], axis=0)
        return self._wrap(_obj(np.asarray(x) if not isinstance(x, np.ndarray) else x))

    def astype(self, x: Any, dtype: Any, copy: bool = True) -> SymArray:
        a = _raw(self.asarray(x))
        return self._wrap(_obj(_ufunc(lambda e: float(e) if _is_num(e) else e, 1)(a)))

    def isdtype(self, dtype: Any, kind: Any) -> bool:
        if np.dtype(dtype) == np.dtype(object):
            return kind == "real floating"
        return np.isdtype(np.dtype(dtype), kind)

    def finfo(self, dtype: Any) -> Any:
        return np.finfo(self.dtype if np.dtype(dtype) == np.dtype(object) else dtype)

    def zeros(self, shape: Any, dtype: Any = None, device: Any = None) -> SymArray:
        return self._wrap(_obj(np.zeros(shape)))

    def ones(self, shape: Any, dtype: Any = None, device: Any = None) -> SymArray:
        return self._wrap(_obj(np.ones(shape)))

    def zeros_like(self, x: Any, dtype: Any = None, device: Any = None) -> SymArray:
        return self.zeros(np.shape(_raw(x)))

    def ones_like(self, x: Any, dtype: Any = None, device: Any = None) -> SymArray:
        return self.ones(np.shape(_raw(x)))

    def full(self, shape: Any, value: Any, dtype: Any = None, device: Any = None) -> SymArray:
        return self._wrap(_obj(np.full(shape, value, dtype=object)))

    # shapes
    def stack(self, arrays: Sequence[Any], axis: int = 0) -> SymArray:
        return self._wrap(np.stack([_raw(self.asarray(a)) for a in arrays], axis=axis))

    def concat(self, arrays: Sequence[Any], axis: int = 0) -> SymArray:
        return self._wrap(np.concatenate([_raw(self.asarray(a)) for a in arrays], axis=axis))

    def broadcast_arrays(self, *arrays: Any) -> list[SymArray]:
        return [self._wrap(a) for a in np.broadcast_arrays(*[_raw(self.asarray(a))
                                                               for a in arrays])]  # fmt: skip

    def broadcast_to(self, x: Any, shape: Any) -> SymArray:
        return self._wrap(np.broadcast_to(_raw(self.asarray(x)), shape))

    def reshape(self, x: Any, shape: Any, copy: Any = None) -> SymArray:
        return self._wrap(np.reshape(_raw(self.asarray(x)), shape))

    def matrix_transpose(self, x: Any) -> SymArray:
        return self._wrap(np.swapaxes(_raw(self.asarray(x)), -1, -2))

    def expand_dims(self, x: Any, axis: int = 0) -> SymArray:
        return self._wrap(np.expand_dims(_raw(self.asarray(x)), axis))

    # elementwise
    def where(self, cond: Any, a: Any, b: Any) -> SymArray:
        return self._ew("where", cond, a, b)

    def minimum(self, a: Any, b: Any) -> SymArray:
        return self._ew("minimum", a, b)

    def maximum(self, a: Any, b: Any) -> SymArray:
        return self._ew("maximum", a, b)

    def clip(self, x: Any, min: Any = None, max: Any = None) -> SymArray:
        out = self.asarray(x)
        if min is not None:
            out = self.maximum(out, min)
        if max is not None:
            out = self.minimum(out, max)
        return out

    def logical_and(self, a: Any, b: Any) -> SymArray:
        return self._ew("and", a, b)

    def logical_or(self, a: Any, b: Any) -> SymArray:
        return self._ew("or", a, b)

    def logical_not(self, a: Any) -> SymArray:
        return self._ew("not", a)

    def atan2(self, y: Any, x: Any) -> SymArray:
        return self._ew("atan2", y, x)

    def __getattr__(self, name: str) -> Any:
        if name in _UFUNCS:
            return lambda x: self._ew(name, x)
        raise AttributeError(f"the symbolic namespace has no {name!r}")

    # piecewise lookups (constant tables, symbolic positions)
    def searchsorted(self, x1: Any, x2: Any, side: str = "left") -> SymArray:
        """Insertion index of ``x2`` in the sorted 1-D ``x1``: a count of ``x1`` entries passed."""
        v = self.asarray(x2)
        count = self.zeros_like(v)
        for e in _raw(self.asarray(x1)).tolist():
            count = count + self.where((v >= e) if side == "right" else (v > e), 1.0, 0.0)
        return count

    def take(self, x: Any, indices: Any, axis: int = 0) -> SymArray:
        """``x`` indexed along ``axis`` (0 only) by symbolic integer-valued ``indices``."""
        if axis != 0:
            raise NotImplementedError("symbolic take supports axis=0 only")
        a = _raw(self.asarray(x))
        idx = _raw(self.asarray(indices))
        cond_shape = idx.shape + (1,) * (a.ndim - 1)
        out = None
        for i in range(a.shape[0]):
            row = np.broadcast_to(a[i], idx.shape + a.shape[1:])
            if out is None:
                out = row
            else:
                cond = _obj(_ufunc(lambda e, i=i: e == i, 1)(idx)).reshape(cond_shape)
                out = _obj(_UFUNCS["where"](cond, row, out))
        return self._wrap(out)

    # reductions (left to right along the axis)
    def _reduce(self, x: Any, fn: Any, axis: int, keepdims: bool) -> SymArray:
        a = np.moveaxis(_raw(self.asarray(x)), axis, -1)
        out = a[..., 0]
        for i in range(1, a.shape[-1]):
            out = _obj(fn(out, a[..., i]))
        out = _obj(out)
        return self._wrap(np.expand_dims(out, axis) if keepdims else out)

    def max(self, x: Any, axis: int = -1, keepdims: bool = False) -> SymArray:
        return self._reduce(x, _UFUNCS["maximum"], axis, keepdims)

    def min(self, x: Any, axis: int = -1, keepdims: bool = False) -> SymArray:
        return self._reduce(x, _UFUNCS["minimum"], axis, keepdims)

    def sum(self, x: Any, axis: int = -1, keepdims: bool = False) -> SymArray:
        return self._reduce(x, np.add, axis, keepdims)

    # linear algebra (the array API's matmul, vecdot and linalg extension, as far as used)
    def matmul(self, a: Any, b: Any) -> SymArray:
        return self.asarray(a) @ b

    def vecdot(self, a: Any, b: Any, axis: int = -1) -> SymArray:
        return self.sum(self.asarray(a) * b, axis=axis)

    @property
    def linalg(self) -> Any:
        """``vector_norm`` (2-norm) and ``cross`` (3-vectors) over symbolic arrays."""
        ns = self

        class _Linalg:
            @staticmethod
            def vector_norm(x: Any, axis: int = -1, keepdims: bool = False, ord: Any = 2) -> Any:
                if ord != 2:
                    raise NotImplementedError("symbolic vector_norm supports ord=2 only")
                x = ns.asarray(x)
                return ns.sqrt(ns.sum(x * x, axis=axis, keepdims=keepdims))

            @staticmethod
            def cross(a: Any, b: Any, axis: int = -1) -> Any:
                a, b = ns.asarray(a), ns.asarray(b)
                a, b = ns.broadcast_arrays(a, b)
                if axis != -1 or a.shape[-1] != 3:
                    raise NotImplementedError("symbolic cross supports 3-vectors on axis -1")
                ax, ay, az = (a[..., i] for i in range(3))
                bx, by, bz = (b[..., i] for i in range(3))
                return ns.stack([ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx], -1)

        return _Linalg()


def symbolic(values: Any, dtype: Any = np.float64) -> SymArray:
    """A :class:`SymArray` of CasADi ``SX`` scalars (e.g. ``[X[0], X[1], X[2]]``)."""
    a = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        a[i] = v
    return SymArray(a, dtype)
