r"""A memo of traced steps: what a compiled rollout was traced from -> its library and layout.

Tracing a closed loop into CasADi takes a tenth of a second or more; loading its library from
the cache (:mod:`quadsim.engines.native`) takes a millisecond. A run whose inputs are those of an
earlier run can skip the trace: :func:`key` digests

* quadsim's own sources (each ``.py`` file's path, size and modification time: any edit is a new
  key), CasADi's modules (the same, so a reinstall or an upgrade is one too), and the versions
  of Python and NumPy;
* the build's identity (:func:`quadsim.engines.native.build_identity`: compiler, flags, target,
  vector width, vector maths);
* a canonical encoding of every input of the trace: numbers, strings, arrays (dtype, shape and
  bytes), tuples, lists and dicts of them, and the functions, classes and objects of quadsim's
  own modules (a function by its module, name and first line, with its defaults and closure; an
  object by its class and its attributes, recursively). Model parameters are given as the trace
  sees them (:func:`quadsim.engines.sim_native.traced_params`): the values the drones share,
  and which entries differ (those are the compiled step's inputs, so a randomised drone's own
  values do not change the key).

Anything else (a function or an object of another package, such as a user's controller part, a
generator, a cycle) has no encoding: :func:`key` returns ``None`` and the caller traces as
before. So a hit can only come from the same quadsim, CasADi and toolchain tracing the same
data. An entry (``trace_<key>.pkl`` beside the libraries) holds the library's file name, the
rollout's sizes, dtype, vector width and noise groups, and the caller's layout (any picklable
value); :func:`load` gives ``None`` when it or its library is missing or unreadable.
``$QUADSIM_NO_TRACE_MEMO`` turns the memo off.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import os
import pickle
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np

from .native import NativeRollout, build_identity, cache_root

__all__ = ["encode", "key", "load", "save"]

_OWN = "quadsim"


class _UnknownError(Exception):
    """An input without a canonical encoding."""


@functools.cache
def _sources() -> str:
    """Digest of quadsim's sources and CasADi's modules (path, size, modification time).

    Python's and NumPy's versions are in it too.
    """
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    files = sorted(os.path.join(d, f) for d, _, names in os.walk(root)
                   for f in names if f.endswith(".py"))  # fmt: skip
    spec = importlib.util.find_spec("casadi")
    if spec is not None and spec.origin:  # its Python module and its extension (not its plugins)
        here = os.path.dirname(os.path.realpath(spec.origin))
        files += [os.path.join(here, f) for f in ("__init__.py", "casadi.py", "_casadi.so")]
    h = hashlib.sha256(f"python {sys.version}\0numpy {np.__version__}\0".encode())
    for p in files:
        with contextlib.suppress(OSError):
            st = os.stat(p)
            h.update(f"{p}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def _ours(obj: Any) -> bool:
    return (getattr(obj, "__module__", None) or "").split(".")[0] == _OWN


def encode(obj: Any) -> bytes:
    """The canonical encoding of ``obj`` (module docstring).

    Raises:
        ValueError: If ``obj`` holds something without one.
    """
    out: list[bytes] = []
    try:
        _encode(obj, out, set())
    except (_UnknownError, RecursionError) as e:
        raise ValueError(f"no canonical encoding: {e}") from None
    return b"".join(out)


def _encode(obj: Any, out: list[bytes], stack: set[int]) -> None:
    if obj is None or isinstance(obj, bool | int | float | complex | str | bytes):
        out.append(f"{type(obj).__name__}:{obj!r};".encode())
        return
    if isinstance(obj, np.ndarray | np.generic):
        a = np.asarray(obj)
        if a.dtype.hasobject:
            raise _UnknownError("an object array")
        out.append(f"nd:{a.dtype.str}:{a.shape}:".encode())
        out.append(np.ascontiguousarray(a).tobytes() + b";")
        return
    if isinstance(obj, np.dtype):
        out.append(f"dtype:{obj.str};".encode())
        return
    if id(obj) in stack:
        raise _UnknownError("a cycle")
    stack.add(id(obj))
    try:
        _encode_container(obj, out, stack)
    finally:
        stack.discard(id(obj))


def _encode_container(obj: Any, out: list[bytes], stack: set[int]) -> None:
    if isinstance(obj, tuple | list):
        name = type(obj).__qualname__
        if type(obj) not in (tuple, list) and not _ours(type(obj)):
            raise _UnknownError(f"a {type(obj).__module__}.{name}")
        out.append(f"seq:{type(obj).__module__}.{name}:{len(obj)}(".encode())
        for item in obj:
            _encode(item, out, stack)
        out.append(b");")
        return
    if isinstance(obj, dict):
        out.append(f"dict:{len(obj)}(".encode())
        for k in sorted(obj, key=repr):
            _encode(k, out, stack)
            _encode(obj[k], out, stack)
        out.append(b");")
        return
    if isinstance(obj, functools.partial):
        out.append(b"partial(")
        for part in (obj.func, obj.args, obj.keywords):
            _encode(part, out, stack)
        out.append(b");")
        return
    if isinstance(obj, types.MethodType):
        out.append(b"method(")
        _encode(obj.__self__, out, stack)
        _encode(obj.__func__, out, stack)
        out.append(b");")
        return
    if isinstance(obj, types.FunctionType):
        if not _ours(obj):
            raise _UnknownError(f"the function {obj.__module__}.{obj.__qualname__}")
        code = obj.__code__
        out.append(f"fn:{obj.__module__}.{obj.__qualname__}:{code.co_firstlineno}(".encode())
        cells = tuple(c.cell_contents for c in obj.__closure__ or ())
        for part in (obj.__defaults__, obj.__kwdefaults__, cells):
            _encode(part, out, stack)
        out.append(b");")
        return
    if isinstance(obj, type):
        if not _ours(obj):
            raise _UnknownError(f"the class {obj.__module__}.{obj.__qualname__}")
        out.append(f"cls:{obj.__module__}.{obj.__qualname__};".encode())
        return
    if isinstance(obj, types.ModuleType):
        if obj.__name__.split(".")[0] not in (_OWN, "numpy", "math"):
            raise _UnknownError(f"the module {obj.__name__}")
        out.append(f"mod:{obj.__name__};".encode())
        return
    _encode_object(obj, out, stack)


def _encode_object(obj: Any, out: list[bytes], stack: set[int]) -> None:
    cls = type(obj)
    if not _ours(cls):
        raise _UnknownError(f"a {cls.__module__}.{cls.__qualname__}")
    fields: dict = dict(getattr(obj, "__dict__", {}))
    for klass in cls.__mro__:
        for slot in getattr(klass, "__slots__", ()):
            if slot not in ("__dict__", "__weakref__") and hasattr(obj, slot):
                fields[slot] = getattr(obj, slot)
    out.append(f"obj:{cls.__module__}.{cls.__qualname__}(".encode())
    _encode(fields, out, stack)
    out.append(b");")


def key(*inputs: Any) -> str | None:
    """The memo key of a trace from ``inputs``, or ``None`` (no memo: an input has no encoding,
    no toolchain, or ``$QUADSIM_NO_TRACE_MEMO`` is set)."""  # noqa: D205, D209
    if os.environ.get("QUADSIM_NO_TRACE_MEMO"):
        return None
    ident = build_identity()
    if ident is None:
        return None
    try:
        data = encode(inputs)
    except ValueError:
        return None
    h = hashlib.sha256(b"quadsim trace memo 1\0" + _sources().encode() + b"\0")
    h.update(ident.encode() + b"\0" + data)
    return h.hexdigest()[:40]


def _entry(k: str) -> Path:
    return cache_root() / f"trace_{k}.pkl"


def load(k: str | None, threads: int | None = None) -> tuple[NativeRollout, Any] | None:
    """``(rollout, layout)`` of the entry ``k`` (``threads`` as :func:`compile_rollout`'s), or
    ``None`` when there is none, or it or its library cannot be read."""  # noqa: D205, D209
    if k is None:
        return None
    try:
        doc = pickle.loads(_entry(k).read_bytes())
        lib = cache_root() / doc["lib"]
        if not lib.is_file():
            return None
        dtype = np.dtype(doc["dtype"])
        source = lambda: lib.with_suffix(".c").read_text()  # noqa: E731
        rollout = NativeRollout(lib, tuple(doc["sizes"]), dtype, int(threads or 0), False,
                                source, int(doc["vbytes"]), tuple(doc["noise"]))  # fmt: skip
        return rollout, doc["layout"]
    except (OSError, KeyError, TypeError, ValueError, EOFError, AttributeError,
            pickle.UnpicklingError, ImportError):  # fmt: skip
        return None


def save(k: str | None, rollout: NativeRollout, layout: Any) -> None:
    """Remember ``rollout`` (its library must be in the cache) and ``layout`` under ``k``;
    a write that fails is ignored (the next run traces again)."""  # noqa: D205, D209
    if k is None or Path(rollout.path).parent != cache_root():
        return
    doc = {"lib": Path(rollout.path).name, "dtype": rollout.dtype.str,
           "sizes": (rollout.n_state, rollout.n_input, rollout.n_param),
           "vbytes": rollout.lanes * rollout.dtype.itemsize, "noise": rollout.noise,
           "layout": layout}  # fmt: skip
    path = _entry(k)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(pickle.dumps(doc, protocol=pickle.HIGHEST_PROTOCOL))
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
