"""Fast CDR encoding of the node's messages: serialize once, then write numbers into a copy.

Cyclone DDS's Python serializer walks a message field by field (about 70 µs for an odometry
message), which is most of a 16-drone tick. The messages the node publishes have a fixed layout
once their strings and sequence lengths are fixed (a drone's frame names, its rotor count), so
:class:`Template` serializes a message once with Cyclone DDS itself, finds where each number
lies in the bytes (every ``float64`` and every stamp's ``sec``/``nanosec`` is given a distinct
sentinel value whose bytes must occur exactly once), and afterwards builds a message as a copy
of those bytes with the numbers written in: a slice assignment through a NumPy view. The bytes
are the serializer's own for the same values (``tests/app/test_ros2_msgs.py`` compares them);
:func:`write` hands them to the writer as its ``write`` would.

In XCDR1 a ``float64`` is aligned to 8 bytes from the start of the payload, which follows a
4-byte encapsulation header, so every number sits at ``4 + 8 j`` in the buffer.
"""

from __future__ import annotations

import struct
from dataclasses import fields, is_dataclass
from typing import Any

import numpy as np

from . import msgs as m

__all__ = ["Template", "write"]


def _slots(obj: Any, path: str, out: list[tuple[str, Any, Any]]) -> None:
    """``(path, container, key)`` of every float and every ``Time`` in ``obj``, depth first."""
    if isinstance(obj, m.Time):
        out.append((path, obj, "stamp"))
        return
    for f in fields(obj):
        v = getattr(obj, f.name)
        p = f"{path}.{f.name}" if path else f.name
        if is_dataclass(v):
            _slots(v, p, out)
        elif isinstance(v, float):
            out.append((p, obj, f.name))
        elif isinstance(v, list):
            for j, x in enumerate(v):
                if is_dataclass(x):
                    _slots(x, f"{p}[{j}]", out)
                elif isinstance(x, float):
                    out.append((f"{p}[{j}]", v, j))


def _sentinel_f64(i: int) -> float:
    return float.fromhex(f"0x1.{0x5EC7 << 36 | i:013x}p-777")


class Template:
    """The CDR bytes of ``sample`` with the places of its numbers.

    Args:
        sample: A message (one of :mod:`quadsim.app.ros2.msgs`) with the strings and sequence
            lengths every message made from the template will have.

    Attributes:
        paths: The float fields' paths (``"pose.pose.position.x"``, ``"velocity[2]"``), in
            serialization order.
        stamps: The ``Time`` fields' paths.
    """

    def __init__(self, sample: Any) -> None:
        base = bytes(sample.serialize())
        slots: list[tuple[str, Any, Any]] = []
        _slots(sample, "", slots)

        def value(c: Any, k: Any) -> Any:
            if k == "stamp":
                return (c.sec, c.nanosec)
            return c[k] if isinstance(c, list) else getattr(c, k)

        saved = [(c, k, value(c, k)) for _, c, k in slots]
        floats, stamps = [], []
        try:
            for i, (path, c, k) in enumerate(slots):
                if k == "stamp":
                    c.sec, c.nanosec = 0x5EC70000 + i, 0x7A5E0000 + i
                    stamps.append(path)
                else:
                    val = _sentinel_f64(i)
                    if isinstance(c, list):
                        c[k] = val
                    else:
                        setattr(c, k, val)
                    floats.append(path)
            marked = bytes(sample.serialize())
        finally:
            for c, k, v in saved:
                if isinstance(c, list):
                    c[k] = v
                elif k == "stamp":
                    c.sec, c.nanosec = v
                else:
                    setattr(c, k, v)
        if len(marked) != len(base):
            raise ValueError("the sample's layout changed with its values")

        def find(pattern: bytes, what: str) -> int:
            at = marked.find(pattern)
            if at < 0 or marked.find(pattern, at + 1) >= 0:
                raise ValueError(f"cannot place {what} in the CDR bytes")
            return at

        self.paths, self.stamps = floats, stamps
        f_off, s_off = [], []
        for i, (path, _, k) in enumerate(slots):
            if k == "stamp":
                s_off.append(find(struct.pack("<iI", 0x5EC70000 + i, 0x7A5E0000 + i), path))
            else:
                at = find(struct.pack("<d", _sentinel_f64(i)), path)
                if (at - 4) % 8:
                    raise ValueError(f"{path} is not 8-aligned after the header")
                f_off.append((at - 4) // 8)
        self.base = base.ljust((len(base) + 3) & ~3, b"\0")  # as DataWriter.write pads
        self._n64 = (len(self.base) - 4) // 8
        self._float_index = np.asarray(f_off, dtype=np.intp)
        self._stamp_offsets = s_off

    def index(self, *prefixes: str) -> np.ndarray:
        """Positions (into :meth:`render`'s ``values``) of the float fields under each prefix,
        prefix by prefix (``index("pose.pose.position", "twist.twist.angular")``)."""  # noqa: D205, D209
        out = []
        for pre in prefixes:
            hit = [
                j
                for j, p in enumerate(self.paths)
                if p == pre or p.startswith((pre + ".", pre + "["))
            ]
            if not hit:
                raise KeyError(f"no float field under {pre!r}")
            out += hit
        return np.asarray(out, dtype=np.intp)

    def render(self, sec: int, nanosec: int, index: np.ndarray, values: Any) -> bytes:
        """The message's bytes with every stamp set to ``(sec, nanosec)`` and the float fields
        ``index`` (from :meth:`index`) set to ``values``; the others keep the sample's."""  # noqa: D205, D209
        buf = bytearray(self.base)
        view = np.frombuffer(buf, dtype="<f8", offset=4, count=self._n64)
        view[self._float_index[index]] = values
        for at in self._stamp_offsets:
            struct.pack_into("<iI", buf, at, sec, nanosec)
        return bytes(buf)


def write(writer: Any, data: bytes) -> None:
    """Publish CDR bytes (:meth:`Template.render`) on a Cyclone DDS ``DataWriter``: what its
    ``write`` does after serializing."""  # noqa: D205, D209
    from cyclonedds._clayer import ddspy_write
    from cyclonedds.core import DDSException

    ret = ddspy_write(writer._ref, data)
    if ret < 0:
        raise DDSException(ret, f"Occurred while writing sample in {writer!r}")
