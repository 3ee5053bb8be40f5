"""Fast CDR encoding of the node's messages: serialize once, then write numbers into a copy.

Cyclone DDS's Python serializer walks a message field by field (about 70 µs for an odometry
message), which is most of a 16-drone tick. The messages the node publishes have a fixed layout
once their strings and sequence lengths are fixed (a drone's frame names, its rotor count), so
:class:`Template` serializes a message once with Cyclone DDS itself, finds where each number
lies in the bytes (every ``float64`` or ``float32`` and every stamp's ``sec``/``nanosec`` is
given a distinct sentinel value whose bytes must occur exactly once), and afterwards builds a
message as a copy of those bytes with the numbers written in: a slice assignment through a NumPy
view. The bytes are the serializer's own for the same values (``tests/app/test_ros2_msgs.py``
compares them); :func:`write` hands them to the writer as its ``write`` would. Every sensor
part's message takes this path (its outputs fill only float fields,
:mod:`quadsim.app.ros2.interfaces`): a ``sensor_msgs/Range`` as an ``Imu``.

In XCDR1 a ``float64`` is aligned to 8 bytes from the start of the payload, which follows a
4-byte encapsulation header, so it sits at ``4 + 8 j`` in the buffer; a ``float32`` at
``4 + 4 j``. A sentinel is a ``float32`` value (exact in both), looked for first as the 8 bytes of
a ``float64``, then as the 4 bytes of a ``float32`` outside the places found.
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


def _sentinel(i: int) -> float:
    """A distinct ``float32`` value (exact as a ``float64`` too) for slot ``i < 2**22``."""
    return struct.unpack("<f", struct.pack("<I", 0x5EC00000 | i))[0]


def _places(data: bytes, pattern: bytes, step: int, skip: set[int]) -> list[int]:
    """Where ``pattern`` starts in ``data`` at ``4 + step j``, outside the offsets ``skip``."""
    out, at = [], data.find(pattern)
    while at >= 0:
        if (at - 4) % step == 0 and at not in skip:
            out.append(at)
        at = data.find(pattern, at + 1)
    return out


class Template:
    """The CDR bytes of ``sample`` with the places of its numbers.

    Args:
        sample: A message (one of :mod:`quadsim.app.ros2.msgs`) with the strings and sequence
            lengths every message made from the template will have.
        stamped: The paths of the ``Time`` fields :meth:`render` stamps (``None``: every one;
            the others keep the sample's).

    Attributes:
        paths: The float fields' paths (``"pose.pose.position.x"``, ``"velocity[2]"``), in
            serialization order.
        stamps: The stamped ``Time`` fields' paths.
    """

    def __init__(self, sample: Any, stamped: tuple[str, ...] | None = None) -> None:
        base = bytes(sample.serialize())
        slots: list[tuple[str, Any, Any]] = []
        _slots(sample, "", slots)
        marked = self._marked(sample, slots)
        if len(marked) != len(base):
            raise ValueError("the sample's layout changed with its values")
        floats = [(i, path) for i, (path, _, k) in enumerate(slots) if k != "stamp"]
        self.paths = [path for _, path in floats]
        self.stamps = [path for path, _, k in slots
                       if k == "stamp" and (stamped is None or path in stamped)]  # fmt: skip
        self._stamp_offsets = []
        for i, (path, _, k) in enumerate(slots):
            if k == "stamp" and path in self.stamps:
                hit = _places(marked, struct.pack("<iI", 0x5EC70000 + i, 0x7A5E0000 + i), 4, set())
                if len(hit) != 1:
                    raise ValueError(f"cannot place {path} in the CDR bytes")
                self._stamp_offsets.append(hit[0])
        hits = {i: _places(marked, struct.pack("<d", _sentinel(i)), 8, set()) for i, _ in floats}
        taken = {h[0] + d for h in hits.values() if len(h) == 1 for d in (0, 4)}
        offset, wide = [], []
        for i, path in floats:
            if len(hits[i]) == 1:
                offset.append((hits[i][0] - 4) // 8)
                wide.append(True)
                continue
            narrow = _places(marked, struct.pack("<f", _sentinel(i)), 4, taken)
            if hits[i] or len(narrow) != 1:
                raise ValueError(f"cannot place {path} in the CDR bytes")
            offset.append((narrow[0] - 4) // 4)
            wide.append(False)
        self.base = base.ljust((len(base) + 3) & ~3, b"\0")  # as DataWriter.write pads
        self._offset = np.asarray(offset, dtype=np.intp)
        self._narrow = ~np.asarray(wide, dtype=bool)
        self._any_narrow = bool(self._narrow.any())
        self._splits: dict[bytes, tuple] = {}  # index -> (f64 places, values, f32 places, values)

    @staticmethod
    def _marked(sample: Any, slots: list) -> bytes:
        """The bytes of ``sample`` with a sentinel in every slot (its values put back after)."""

        def value(c: Any, k: Any) -> Any:
            if k == "stamp":
                return (c.sec, c.nanosec)
            return c[k] if isinstance(c, list) else getattr(c, k)

        saved = [(c, k, value(c, k)) for _, c, k in slots]
        try:
            for i, (_, c, k) in enumerate(slots):
                if k == "stamp":
                    c.sec, c.nanosec = 0x5EC70000 + i, 0x7A5E0000 + i
                elif isinstance(c, list):
                    c[k] = _sentinel(i)
                else:
                    setattr(c, k, _sentinel(i))
            return bytes(sample.serialize())
        finally:
            for c, k, v in saved:
                if isinstance(c, list):
                    c[k] = v
                elif k == "stamp":
                    c.sec, c.nanosec = v
                else:
                    setattr(c, k, v)

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
        if self._any_narrow:
            key = index.tobytes()
            split = self._splits.get(key)
            if split is None:
                narrow = self._narrow[index]
                split = self._splits[key] = (self._offset[index[~narrow]], np.flatnonzero(~narrow),
                                             self._offset[index[narrow]], np.flatnonzero(narrow))
            v = np.asarray(values, dtype=np.float64)
            wide = np.frombuffer(buf, dtype="<f8", offset=4, count=(len(buf) - 4) // 8)
            wide[split[0]] = v[split[1]]
            thin = np.frombuffer(buf, dtype="<f4", offset=4, count=(len(buf) - 4) // 4)
            thin[split[2]] = v[split[3]]
        else:
            view = np.frombuffer(buf, dtype="<f8", offset=4, count=(len(buf) - 4) // 8)
            view[self._offset[index]] = values
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
