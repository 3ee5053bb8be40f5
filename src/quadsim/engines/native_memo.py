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
data. An entry (``trace_<key>.memo`` beside the libraries: :func:`write_entry`'s JSON line and
raw arrays, no zip and no pickle) holds the library's file name, the
rollout's sizes, dtype, vector width and noise groups, and the caller's layout, in a JSON text
and NumPy arrays: nothing in it is unpickled, so a crafted entry cannot run code (issue 40; the
library itself is only ever a ``quadsim_<digest>.so`` of the same folder). A layout is
``None``, booleans, numbers, strings, NumPy arrays and scalars (no object arrays), slices, and
tuples, lists and dicts of them, and quadsim's own NamedTuples (a brain state template, a
closed loop's rows by field, :mod:`quadsim.loop.closed_loop_native`); :func:`save` remembers
nothing for another layout. :func:`load` gives ``None`` (the caller traces again) when the entry
or its library is missing, unreadable or does not fit that form in every detail (entries of an
older quadsim, ``trace_<key>.pkl``, are never read). ``$QUADSIM_NO_TRACE_MEMO`` turns the memo
off.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import json
import os
import re
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np

from .native import NativeRollout, build_identity, cache_root

__all__ = ["MAGIC", "encode", "key", "load", "read_entry", "save", "write_entry"]

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
    h = hashlib.sha256(b"quadsim trace memo 2\0" + _sources().encode() + b"\0")
    h.update(ident.encode() + b"\0" + data)
    return h.hexdigest()[:40]


def _entry(k: str) -> Path:
    return cache_root() / f"trace_{k}.memo"


MAGIC = b"quadsim trace memo 1\n"
"""The first line of an entry (:func:`write_entry`)."""


def write_entry(path: Path, doc: dict, arrays: list) -> None:
    """An entry's bytes at ``path``, written whole: :data:`MAGIC`, a JSON line (``doc`` and each
    array's dtype and shape), then the arrays' raw bytes in order (no zip, no pickle). A write
    that fails leaves no file and raises ``OSError``."""  # noqa: D205, D209
    arrays = [np.asarray(a) for a in arrays]  # tobytes: C order, 0-d arrays kept 0-d
    head = {"doc": doc, "arrays": [{"dtype": a.dtype.str, "shape": list(a.shape)} for a in arrays]}
    data = b"".join([MAGIC, json.dumps(head, allow_nan=False).encode(), b"\n",
                     *(a.tobytes() for a in arrays)])  # fmt: skip
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise


def read_entry(path: Path) -> tuple[dict, list[np.ndarray]]:
    """``(doc, arrays)`` of an entry :func:`write_entry` wrote.

    Raises:
        OSError: It cannot be read.
        ValueError: It is not such an entry, or an array's dtype holds objects or its bytes
            do not match its shape.
    """
    raw = path.read_bytes()
    if not raw.startswith(MAGIC):
        raise ValueError("not a trace memo entry")
    line, sep, rest = raw[len(MAGIC):].partition(b"\n")
    head = json.loads(line, parse_constant=lambda c: None)
    if not sep or not isinstance(head, dict) or not isinstance(head.get("arrays"), list):
        raise ValueError("not a trace memo entry")
    arrays, at = [], 0
    for spec in head["arrays"]:
        dt = np.dtype(str(spec["dtype"]))
        shape = tuple(int(x) for x in spec["shape"])
        if dt.hasobject or any(x < 0 for x in shape):
            raise ValueError("an array of objects")
        size = dt.itemsize * int(np.prod(shape, dtype=np.int64))
        if at + size > len(rest):
            raise ValueError("an entry cut short")
        arrays.append(np.frombuffer(rest, dt, int(np.prod(shape)), at).reshape(shape).copy())
        at += size
    if at != len(rest):
        raise ValueError("bytes past the arrays")
    return head["doc"], arrays


_LIB = re.compile(r"quadsim_[0-9a-f]{32}\.so")
"""The file name of a cached library (:func:`quadsim.engines.native.compile_rollout`)."""

_DTYPES = ("<f4", "<f8")


def _pack(obj: Any, arrays: list[np.ndarray]) -> Any:
    """``obj`` as a JSON value, its arrays appended to ``arrays`` (module docstring).

    Raises:
        _UnknownError: Something else.
    """
    if obj is None or isinstance(obj, bool | str):
        return obj
    if isinstance(obj, int | float) and type(obj) in (int, float):
        return {"t": "float", "v": repr(obj)} if isinstance(obj, float) else obj
    if isinstance(obj, np.ndarray | np.generic):
        a = np.asarray(obj)
        if a.dtype.hasobject or a.dtype.kind not in "biuf":
            raise _UnknownError(f"an array of {a.dtype}")
        arrays.append(a.copy())
        return {"t": "nd" if isinstance(obj, np.ndarray) else "np", "i": len(arrays) - 1}
    if isinstance(obj, slice):
        return {"t": "slice", "v": [_pack(v, arrays) for v in (obj.start, obj.stop, obj.step)]}
    if type(obj) is list:
        return [_pack(v, arrays) for v in obj]
    if type(obj) is tuple:
        return {"t": "tuple", "v": [_pack(v, arrays) for v in obj]}
    if type(obj) is dict:
        return {"t": "dict", "v": [[_pack(k, arrays), _pack(v, arrays)] for k, v in obj.items()]}
    cls = type(obj)
    if (isinstance(obj, tuple) and hasattr(cls, "_fields") and _ours(cls)
            and "<" not in cls.__qualname__ and _named(f"{cls.__module__}:{cls.__qualname__}")
            is cls):  # fmt: skip
        return {"t": "named", "cls": f"{cls.__module__}:{cls.__qualname__}",
                "v": [_pack(v, arrays) for v in obj]}  # fmt: skip
    raise _UnknownError(f"a {cls.__module__}.{cls.__qualname__}")


def _named(name: Any) -> type | None:
    """The NamedTuple of quadsim ``module:qualname`` from a module already imported, else ``None``
    (nothing is imported for an entry)."""  # noqa: D205, D209
    if not isinstance(name, str) or name.count(":") != 1:
        return None
    module, qualname = name.split(":")
    if module.split(".")[0] != _OWN or module not in sys.modules:
        return None
    obj: Any = sys.modules[module]
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    if isinstance(obj, type) and issubclass(obj, tuple) and hasattr(obj, "_fields"):
        return obj
    return None


def _unpack(node: Any, arrays: dict[str, np.ndarray]) -> Any:
    """The value :func:`_pack` gave ``node`` for.

    Raises:
        ValueError: A node of another form.
    """
    if node is None or isinstance(node, bool | str) or type(node) is int:
        return node
    if type(node) is list:
        return [_unpack(v, arrays) for v in node]
    if type(node) is not dict or not isinstance(node.get("t"), str):
        raise ValueError(f"not a layout node: {str(node)[:40]}")
    t, v = node["t"], node.get("v")
    if t == "float" and isinstance(v, str) and set(node) == {"t", "v"}:
        return float(v)
    if t in ("nd", "np") and set(node) == {"t", "i"} and type(node["i"]) is int:
        a = arrays[f"a{node['i']}"]
        return a if t == "nd" else a[()]
    if type(v) is not list:
        raise ValueError(f"a {t!r} node without its items")
    items = [_unpack(x, arrays) for x in v]
    if t == "slice" and len(items) == 3 and set(node) == {"t", "v"}:
        return slice(*items)
    if t == "tuple" and set(node) == {"t", "v"}:
        return tuple(items)
    if t == "dict" and set(node) == {"t", "v"}:
        return {k: x for k, x in map(tuple, items)}
    cls = _named(node.get("cls")) if t == "named" and set(node) == {"t", "cls", "v"} else None
    if cls is None or len(items) != len(cls._fields):
        raise ValueError(f"not a layout node: {str(node)[:40]}")
    return cls(*items)


def _counts(v: Any, n: int) -> bool:
    return type(v) is list and len(v) == n and all(type(x) is int and x >= 0 for x in v)


def _rollout(doc: Any, threads: int | None) -> NativeRollout | None:
    """The rollout an entry's JSON describes, or ``None`` when it does not fit in every detail or
    its library is missing."""  # noqa: D205, D209
    if type(doc) is not dict or set(doc) != {"lib", "dtype", "sizes", "vbytes", "noise", "layout"}:
        return None
    name, dtype, vbytes, noise = doc["lib"], doc["dtype"], doc["vbytes"], doc["noise"]
    if not (isinstance(name, str) and _LIB.fullmatch(name) and dtype in _DTYPES
            and _counts(doc["sizes"], 3) and type(vbytes) is int
            and vbytes in (32, 64) and type(noise) is list
            and all(type(g) is list and len(g) == 3 and isinstance(g[0], str)
                    and _counts(g[1:], 2) for g in noise)):  # fmt: skip
        return None
    lib = cache_root() / name
    if not lib.is_file():
        return None
    source = lambda: lib.with_suffix(".c").read_text()  # noqa: E731
    return NativeRollout(lib, tuple(doc["sizes"]), np.dtype(dtype), int(threads or 0), False,
                         source, vbytes, tuple(tuple(g) for g in noise))  # fmt: skip


def load(k: str | None, threads: int | None = None) -> tuple[NativeRollout, Any] | None:
    """``(rollout, layout)`` of the entry ``k`` (``threads`` as :func:`compile_rollout`'s), or
    ``None`` when there is none, or it or its library cannot be read or does not fit (module
    docstring: nothing is unpickled)."""  # noqa: D205, D209
    if k is None:
        return None
    try:
        doc, found = read_entry(_entry(k))
        arrays = {f"a{i}": a for i, a in enumerate(found)}
        rollout = _rollout(doc, threads)
        if rollout is None:
            return None
        return rollout, _unpack(doc["layout"], arrays)
    except (OSError, KeyError, TypeError, ValueError, EOFError, AttributeError,
            RecursionError):  # fmt: skip
        return None


def save(k: str | None, rollout: NativeRollout, layout: Any) -> None:
    """Remember ``rollout`` (its library must be in the cache) and ``layout`` under ``k``;
    a layout of another form (module docstring) is not remembered, and a write that fails is
    ignored (the next run traces again)."""  # noqa: D205, D209
    if k is None or Path(rollout.path).parent != cache_root():
        return
    arrays: list[np.ndarray] = []
    try:
        packed = _pack(layout, arrays)
    except (_UnknownError, RecursionError):
        return
    doc = {"lib": Path(rollout.path).name, "dtype": rollout.dtype.str,
           "sizes": [rollout.n_state, rollout.n_input, rollout.n_param],
           "vbytes": rollout.lanes * rollout.dtype.itemsize,
           "noise": [list(g) for g in rollout.noise], "layout": packed}  # fmt: skip
    with contextlib.suppress(OSError, ValueError):
        write_entry(_entry(k), doc, arrays)
