"""The ROS 2 message types quadsim knows, from their definitions; a part's messages checked.

:data:`FILE` (``interfaces.txt``, beside this module) holds the definitions of the standard ROS 2
Humble interface packages (``builtin_interfaces``, ``std_msgs``, ``geometry_msgs``,
``sensor_msgs``, ``nav_msgs``, ``diagnostic_msgs``, ``shape_msgs``, ``stereo_msgs``,
``trajectory_msgs``, ``visualization_msgs``, ``tf2_msgs``, ``rosgraph_msgs``), generated from the
``rosbags`` library's store with their licence note (``tests/app/ros2_interfaces_gen.py``);
:data:`EXTRA` adds ``mavros_msgs/msg/AttitudeTarget`` (a command the node takes). From them
:mod:`quadsim.app.ros2.msgs` builds the Cyclone DDS type of any of these messages, and
:func:`msgdef` the ``ros2msg`` schema an MCAP bag carries. Nothing here needs Cyclone DDS.

A sensor part declares its messages (:meth:`quadsim.loop.parts.Sensor.ros2`, records
:class:`quadsim.loop.parts.Ros2`); :func:`check_message` holds one to the type's definition and
:func:`check_parts` every part's, before anything flies:

* the type is one of these (``"pkg/msg/Type"``);
* every field an output fills exists (a dotted path), holds only ``float32``/``float64``
  numbers, as many as the output's size: a number, a fixed array, a message of numbers
  (``geometry_msgs/Vector3``: 3, ``Pose``: 7, in the order of the definition), or a sequence
  of floats (it gets the output's size as its length);
* every constant fits its field: a number for a numeric field (an integer in the range of an
  integer field), a sequence for an array (of its length) or a sequence, a string for a string;
* no field is set twice, and ``header`` (stamp and frame, set by quadsim) by none;
* ``valid`` names an output of size 1.
"""

from __future__ import annotations

import difflib
import functools
import math
import re
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ...loop.parts import Context, Ros2

__all__ = [
    "EXTRA",
    "FILE",
    "FLOATS",
    "INTEGERS",
    "RESERVED_LEAVES",
    "Field",
    "Message",
    "PartMessageError",
    "check_message",
    "check_parts",
    "definition",
    "has_header",
    "leaves",
    "msgdef",
    "names",
]

FILE = Path(__file__).with_name("interfaces.txt")
"""The shipped definitions (generated; licence note at its top)."""

EXTRA = {
    "mavros_msgs/msg/AttitudeTarget": (
        "std_msgs/Header header\nuint8 type_mask\ngeometry_msgs/Quaternion orientation\n"
        "geometry_msgs/Vector3 body_rate\nfloat32 thrust\nuint8 IGNORE_ROLL_RATE=1\n"
        "uint8 IGNORE_PITCH_RATE=2\nuint8 IGNORE_YAW_RATE=4\nuint8 IGNORE_THRUST=64\n"
        "uint8 IGNORE_ATTITUDE=128\n"
    ),
}
"""Definitions besides the standard ones: ``mavros_msgs/AttitudeTarget`` (the mavros project,
BSD-3-Clause), the attitude command ``quadsim ros2`` takes."""

FLOATS = ("float32", "float64")
"""The field types a part's output may fill."""

INTEGERS = {"bool": (0, 1), "byte": (0, 255), "char": (0, 255), "int8": (-(2**7), 2**7 - 1),
            "uint8": (0, 2**8 - 1), "int16": (-(2**15), 2**15 - 1), "uint16": (0, 2**16 - 1),
            "int32": (-(2**31), 2**31 - 1), "uint32": (0, 2**32 - 1),
            "int64": (-(2**63), 2**63 - 1), "uint64": (0, 2**64 - 1)}  # fmt: skip
"""The integer field types and their ranges (``bool``: 0 or 1)."""

_STRINGS = ("string", "wstring")
_BASE = {*FLOATS, *INTEGERS, *_STRINGS}
_TYPE = re.compile(r"(?P<base>[A-Za-z][A-Za-z0-9_/]*)(?:<=(?P<bound>\d+))?"
                   r"(?:\[(?P<seq><=)?(?P<n>\d*)\])?")  # fmt: skip

RESERVED_LEAVES = ("odom", "rotor_speeds", "reference", "cmd_rotor_speeds", "cmd_pose",
                   "cmd_attitude", "cmd_mode")  # fmt: skip
"""The topics ``quadsim ros2`` has per drone itself; no part's message may take one."""


class Field(NamedTuple):
    """One field of a message definition.

    Attributes:
        name: Its name.
        type: A base type (``"float64"``, ``"string"``, ...) or a message (``"pkg/msg/Type"``).
        kind: ``""`` (one value), ``"array"`` (``size`` of them) or ``"sequence"`` (any number,
            at most ``size`` where ``size > 0``).
        size: The array's length, or the sequence's bound (0: none).
        bound: A bounded string's largest length (``string<=N``; 0: none).
        default: Its default value as written (``""``: the type's zero).
    """

    name: str
    type: str
    kind: str = ""
    size: int = 0
    bound: int = 0
    default: str = ""


class Message(NamedTuple):
    """A message definition: its full name, fields in order, constants ``(type, name, value)``
    and its ``.msg`` text (fields and constants, message types written ``pkg/Type``)."""  # noqa: D205, D209

    name: str
    fields: tuple[Field, ...]
    constants: tuple[tuple[str, str, str], ...]
    text: str


class PartMessageError(ValueError):
    """A sensor part's ROS 2 declaration that does not fit (``part``: the part's name)."""

    def __init__(self, part: str, why: str) -> None:
        super().__init__(f"sensor {part}: {why}")
        self.part, self.why = part, why


def _field_type(token: str, pkg: str) -> tuple[str, str, int, int]:
    """``(type, kind, size, bound)`` of a ``.msg`` type token in package ``pkg``."""
    m = _TYPE.fullmatch(token)
    if m is None:
        raise ValueError(f"malformed type {token!r}")
    base = m["base"]
    if base not in _BASE:
        p, _, name = base.rpartition("/")
        base = f"{p or pkg}/msg/{name}"
    kind = "" if m["n"] is None else ("sequence" if m["seq"] or not m["n"] else "array")
    return base, kind, int(m["n"] or 0), int(m["bound"] or 0)


def _parse(name: str, text: str) -> Message:
    """The :class:`Message` of ``name``'s ``.msg`` text (comments and blank lines skipped)."""
    pkg = name.split("/")[0]
    fields, consts, lines = [], [], []
    for raw in text.splitlines():
        line = raw.split("#")[0].strip()
        if not line:
            continue
        lines.append(line)
        token, rest = line.split(None, 1)
        if "=" in rest and "<=" not in token:  # a constant: TYPE NAME=VALUE
            cname, value = (s.strip() for s in rest.split("=", 1))
            consts.append((token, cname, value))
            continue
        fname, _, default = rest.partition(" ")
        typ, kind, size, bound = _field_type(token, pkg)
        fields.append(Field(fname, typ, kind, size, bound, default.strip()))
    return Message(name, tuple(fields), tuple(consts), "\n".join(lines) + "\n")


@functools.cache
def _table() -> dict[str, Message]:
    """Every definition, by ``pkg/msg/Type`` (read once)."""
    out: dict[str, Message] = {}
    name, body = None, []
    for line in [*FILE.read_text().splitlines(), "MSG: <end>"]:
        if line.startswith("MSG: "):
            if name is not None:
                out[name] = _parse(name, "\n".join(body))
            name, body = line[5:].strip(), []
        elif name is not None:
            body.append(line)
    for name, text in EXTRA.items():
        out[name] = _parse(name, text)
    return out


def names() -> list[str]:
    """Every message type quadsim knows, ``pkg/msg/Type``, sorted."""
    return sorted(_table())


def definition(name: str) -> Message:
    """The definition of ``pkg/msg/Type``.

    Raises:
        ValueError: A type quadsim does not know, with the closest ones it does.
    """
    table = _table()
    if isinstance(name, str) and name in table:
        return table[name]
    text = str(name)
    pkg, _, typ = text.rpartition("/")
    full = f"{pkg}/msg/{typ}" if pkg and "/" not in pkg else text
    score = {c: difflib.SequenceMatcher(None, full, c).ratio() for c in table}
    best = max(score.values())
    close = [full] if full in table else sorted(
        (c for c, r in score.items() if r >= max(best - 0.01, 0.8)), key=lambda c: -score[c])
    hint = f" (did you mean {' or '.join(repr(c) for c in close[:3])}?)" if close else ""
    same = sorted(n.split("/")[-1] for n in table if n.startswith(f"{full.split('/')[0]}/"))
    known = (f"{full.split('/')[0]} has {', '.join(same)}" if same else "the packages are "
             + ", ".join(sorted({n.split("/")[0] for n in table})))  # fmt: skip
    raise ValueError(f"no ROS 2 message type {name!r} here{hint}; a type is 'pkg/msg/Type' of "
                     f"the ROS 2 Humble interfaces quadsim ships: {known}")  # fmt: skip


def has_header(name: str) -> bool:
    """Whether ``pkg/msg/Type`` starts with a ``std_msgs/Header header`` (stamped by quadsim)."""
    f = definition(name).fields
    return bool(f) and f[0].name == "header" and f[0].type == "std_msgs/msg/Header"


def msgdef(name: str) -> str:
    """The ``ros2msg`` schema text of ``pkg/msg/Type``: its definition, then each type it uses,
    depth first, once (after ``=`` * 80 and ``MSG: pkg/Type``)."""  # noqa: D205, D209
    seen: list[str] = []

    def walk(n: str) -> None:
        for f in definition(n).fields:
            if f.type not in _BASE and f.type not in seen:
                seen.append(f.type)
                walk(f.type)

    walk(name)
    parts = [definition(name).text]
    for d in seen:
        pkg, _, typ = d.split("/")
        parts.append("=" * 80 + f"\nMSG: {pkg}/{typ}\n" + definition(d).text)
    return "".join(parts)


def _flat(f: Field, path: str, length: int | None) -> list[tuple[str, str]]:
    """``(leaf path, base type)`` of every value of field ``f`` at ``path``, in order (a
    sequence has ``length`` values)."""  # noqa: D205, D209
    if f.kind == "sequence":
        if length is None:
            raise ValueError(f"{path} is a sequence ({f.type}[]) of no fixed length; only a "
                             "sequence field itself takes an output or a constant")  # fmt: skip
        if f.size and length > f.size:
            raise ValueError(f"{path} holds at most {f.size} values; given {length}")
        paths = [f"{path}[{i}]" for i in range(length)]
    elif f.kind == "array":
        paths = [f"{path}[{i}]" for i in range(f.size)]
    else:
        paths = [path]
    if f.type in _BASE:
        return [(p, f.type) for p in paths]
    out = []
    for p in paths:
        for sub in definition(f.type).fields:
            out += _flat(sub, f"{p}.{sub.name}", None)
    return out


@functools.lru_cache(maxsize=4096)
def leaves(name: str, path: str, length: int | None = None) -> tuple[tuple[str, str], ...]:
    """``(leaf path, base type)`` of every value the field ``path`` (dotted) of ``pkg/msg/Type``
    holds, in the order of the definition; a sequence field has ``length`` values (remembered:
    the definitions do not change).

    Raises:
        ValueError: No such field, or a sequence inside it.
    """  # noqa: D205
    msg = definition(name)
    steps = path.split(".") if isinstance(path, str) else [""]
    for i, step in enumerate(steps):
        f = next((x for x in msg.fields if x.name == step), None)
        where = ".".join(steps[:i]) or name
        if f is None:
            known = ", ".join(x.name for x in msg.fields)
            raise ValueError(f"{name} has no field {path!r} ({where} has {known})")
        if i == len(steps) - 1:
            return tuple(_flat(f, path, length))
        if f.kind or f.type in _BASE:
            raise ValueError(f"{name} has no field {path!r} ({'.'.join(steps[: i + 1])} is "
                             f"{f.type}{'[]' if f.kind else ''}, not a message)")  # fmt: skip
        msg = definition(f.type)
    raise AssertionError  # unreachable: the loop returns at the last step


def _number_ok(typ: str, v: Any) -> str | None:
    """Why ``v`` does not fit a field of base type ``typ``, or ``None``."""
    if typ in _STRINGS:
        return f"a string field, given {v!r}"
    if typ == "bool" and isinstance(v, bool | np.bool_):
        return None
    if isinstance(v, bool | np.bool_) or not isinstance(v, int | float | np.integer | np.floating):
        return f"a number field, given {v!r}"
    if typ in INTEGERS:
        lo, hi = INTEGERS[typ]
        if not (math.isfinite(v) and float(v).is_integer() and lo <= v <= hi):
            return f"an integer field ({typ}: {lo}..{hi}), given {v!r}"
    return None


def _constant(name: str, path: str, value: Any) -> list[str]:
    """The leaf paths the constant ``value`` of ``path`` sets; raises ``ValueError``."""
    if isinstance(value, str):
        lv = leaves(name, path)
        if len(lv) != 1 or lv[0][1] not in _STRINGS:
            raise ValueError(f"{name}.{path} is not a string field; given {value!r}")
        return [lv[0][0]]
    seq = not isinstance(value, int | float | np.integer | np.floating)
    try:
        values = np.asarray(value, dtype=object).ravel().tolist() if seq else [value]
    except Exception:
        values = None
    if values is None or (seq and isinstance(value, dict | set)):
        raise ValueError(f"{name}.{path}: a constant is a number, a sequence of numbers or a "
                         f"string; given {value!r:.60}")  # fmt: skip
    lv = leaves(name, path, len(values))
    if len(lv) != len(values):
        raise ValueError(f"{name}.{path} holds {len(lv)} numbers, given {len(values)}")
    for (leaf, typ), v in zip(lv, values, strict=True):
        why = _number_ok(typ, v)
        if why:
            raise ValueError(f"{name}.{leaf} is {why}")
    return [leaf for leaf, _ in lv]


def check_message(decl: Any, sizes: dict[str, int]) -> None:
    """Hold one ROS 2 declaration of a part to its type's definition (module docstring).

    Args:
        decl: A :class:`quadsim.loop.parts.Ros2`.
        sizes: The part's outputs: ``{name: size}``.

    Raises:
        ValueError: What does not fit, naming the type and the field.
    """
    if not isinstance(decl, Ros2):
        raise ValueError(f"ros2() returns quadsim.loop.parts.Ros2 records; got {decl!r:.80}")
    name = decl.type
    definition(name)
    taken: dict[str, str] = {}
    stamped = has_header(name)

    def take(paths: list[str], what: str) -> None:
        for p in paths:
            if p in taken:
                raise ValueError(f"{name}.{p} is set twice ({taken[p]} and {what})")
            taken[p] = what

    for path, _ in [*_pairs(decl.fields, "fields"), *_pairs(decl.constants, "constants")]:
        if stamped and path.split(".")[0] == "header":
            raise ValueError(f"{name}.{path} is set by quadsim (the sample's stamp and the "
                             f"drone's frame); a declaration may not set it")  # fmt: skip
    for path, out in _pairs(decl.fields, "fields"):
        if out not in sizes:
            raise ValueError(f"{name}.{path} takes the output {out!r}, which the part does not "
                             f"declare (its outputs: {sorted(sizes)})")  # fmt: skip
        lv = leaves(name, path, sizes[out])
        wrong = sorted({t for _, t in lv if t not in FLOATS})
        if wrong:
            raise ValueError(f"{name}.{path} holds {'/'.join(wrong)} values; an output fills "
                             f"only float32 and float64 fields")  # fmt: skip
        if len(lv) != sizes[out]:
            raise ValueError(f"{name}.{path} holds {len(lv)} numbers; the output {out!r} gives "
                             f"{sizes[out]}")  # fmt: skip
        take([leaf for leaf, _ in lv], f"the output {out!r}")
    for path, value in _pairs(decl.constants, "constants"):
        take(_constant(name, path, value), f"the constant of {path!r}")
    if decl.valid and sizes.get(decl.valid) != 1:
        raise ValueError(f"valid={decl.valid!r} must name an output of size 1 (its outputs: "
                         f"{sizes})")  # fmt: skip
    if decl.leaf and not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", str(decl.leaf)):
        raise ValueError(f"leaf={decl.leaf!r}: a topic's last name is letters, digits and _")


def _pairs(items: Any, what: str) -> list[tuple[str, Any]]:
    """``items`` as ``(field path, value)`` pairs; raises ``ValueError`` otherwise."""
    ok = isinstance(items, tuple | list) and all(
        isinstance(p, tuple | list) and len(p) == 2 and isinstance(p[0], str) for p in items)
    if not ok:
        raise ValueError(f"{what} must be ((field path, value), ...); got {items!r:.80}")
    return [tuple(p) for p in items]


def check_parts(parts: Any, dt: float, periods: Any) -> None:
    """Hold every sensor part's ROS 2 messages to their definitions (:func:`check_message`): its
    ``ros2(ctx)`` called at its sample period, no two messages on one topic, none on a topic of
    quadsim's own (:data:`RESERVED_LEAVES`).

    Args:
        parts: The sensor parts.
        dt: The physics step [s].
        periods: Each part's period in physics steps.

    Raises:
        PartMessageError: The first part whose messages do not fit, naming it.
    """  # noqa: D205
    leaves_of: dict[str, str] = {}
    for part, period in zip(parts, periods, strict=True):
        name = getattr(part, "name", "?")
        try:
            decls = part.ros2(Context(dt=float(dt), xp=np, period=int(period)))
        except Exception as e:
            raise PartMessageError(name, f"{type(part).__name__}.ros2 failed: "
                                         f"{type(e).__name__}: {e}") from None  # fmt: skip
        if not isinstance(decls, tuple | list):
            raise PartMessageError(name, f"{type(part).__name__}.ros2 returned "
                                         f"{decls!r:.60}; it returns (Ros2, ...)")  # fmt: skip
        sizes = {o.name: int(o.size) for o in part.outputs}
        for decl in decls:
            try:
                check_message(decl, sizes)
            except ValueError as e:
                raise PartMessageError(name, f"its ROS 2 message: {e}") from None
            leaf = decl.leaf or name
            if leaf in RESERVED_LEAVES:
                raise PartMessageError(name, f"its ROS 2 topic {leaf!r} is taken by quadsim's "
                                             "own; give its Ros2 another leaf")  # fmt: skip
            if leaf in leaves_of:
                raise PartMessageError(name, f"a second ROS 2 message on {leaf!r} (the first: "
                                             f"sensor {leaves_of[leaf]}'s); give its Ros2 "
                                             "another leaf")  # fmt: skip
            leaves_of[leaf] = name
