"""The ROS 2 message definitions quadsim ships (``interfaces.txt``) against the ``rosbags``
library's: the file is what its store generates, every type's Cyclone DDS class writes the bytes
rosbags' serializer writes, and a part's declaration is held to its type's definition (issue 40,
item 6)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from ros2_interfaces_gen import TARGET, generate

pytest.importorskip("cyclonedds")
rosbags_typesys = pytest.importorskip("rosbags.typesys")

from quadsim.app.ros2 import encode, interfaces  # noqa: E402
from quadsim.app.ros2 import msgs as m  # noqa: E402
from quadsim.loop.parts import Output, Ros2, Sensor  # noqa: E402

_NP = {"float32": np.float32, "float64": np.float64, "bool": np.bool_, "byte": np.uint8,
       "char": np.uint8, "int8": np.int8, "uint8": np.uint8, "int16": np.int16,
       "uint16": np.uint16, "int32": np.int32, "uint32": np.uint32, "int64": np.int64,
       "uint64": np.uint64}  # fmt: skip


@pytest.fixture(scope="module")
def store():
    ts = rosbags_typesys.get_typestore(rosbags_typesys.Stores.ROS2_HUMBLE)
    text = interfaces.EXTRA["mavros_msgs/msg/AttitudeTarget"]
    ts.register(rosbags_typesys.get_types_from_msg(text, "mavros_msgs/msg/AttitudeTarget"))
    return ts


def test_the_shipped_definitions_are_rosbags_humble_store():
    assert TARGET.read_text() == generate()
    text = TARGET.read_text()
    assert "Apache-2.0" in text and "common_interfaces" in text  # the licence note
    for pkg in ("std_msgs", "geometry_msgs", "sensor_msgs", "nav_msgs", "builtin_interfaces"):
        assert any(n.startswith(f"{pkg}/msg/") for n in interfaces.names()), pkg


def _value(typ, i):
    if typ in ("string", "wstring"):
        return f"s{i}"
    if typ == "bool":
        return i % 2 == 1
    if typ in ("float32", "float64"):
        return 0.25 + 0.5 * i
    return 1 + i % 100


def _sample(store, name, counter):
    """``(ours, theirs)``: the message ``name`` with a distinct value in every field (sequences of
    two), as quadsim's class and as rosbags' (numbers in arrays as NumPy arrays)."""
    ours, theirs = {}, {}
    for f in interfaces.definition(name).fields:
        n = f.size if f.kind == "array" else (2 if f.kind == "sequence" else 0)
        count = n if f.kind else 1
        if f.type in _NP or f.type in ("string", "wstring"):
            vals = [_value(f.type, next(counter)) for _ in range(count)]
            if f.kind:
                ours[f.name] = vals
                theirs[f.name] = vals if f.type in ("string", "wstring") else np.array(
                    vals, dtype=_NP[f.type])  # fmt: skip
            else:
                ours[f.name] = theirs[f.name] = vals[0]
        else:
            pairs = [_sample(store, f.type, counter) for _ in range(count)]
            ours[f.name] = [p[0] for p in pairs] if f.kind else pairs[0][0]
            theirs[f.name] = [p[1] for p in pairs] if f.kind else pairs[0][1]
    return m.message_class(name)(**ours), store.types[name](**theirs)


@pytest.mark.parametrize("name", interfaces.names())
def test_every_type_writes_the_bytes_of_rosbags(store, name):
    """Each class, from its definition: the fields of rosbags' definition in order, and with a
    distinct value in every field the CDR bytes of rosbags' serializer; its ``.msg`` text parses
    (rosbags) to the same fields."""
    import itertools

    cls = m.message_class(name)
    assert [f.name for f in dataclasses.fields(cls)] == [f[0] for f in store.fielddefs[name][1]]
    assert m.ros_name(cls) == name
    ours, theirs = _sample(store, name, itertools.count(1))
    assert bytes(ours.serialize()) == bytes(store.serialize_cdr(theirs, name)), name
    parsed = rosbags_typesys.get_types_from_msg(m.MSG_TEXT[name], name)
    assert parsed[name][1] == store.fielddefs[name][1] or name.startswith("mavros")
    assert [c[:2] for c in parsed[name][0]] == [c[:2] for c in store.fielddefs[name][0]]


def test_defaults_are_zeros_and_the_unit_quaternion():
    q = m.message_class("geometry_msgs/msg/Quaternion")()
    assert (q.x, q.y, q.z, q.w) == (0.0, 0.0, 0.0, 1.0)
    fix = m.message_class("sensor_msgs/msg/NavSatFix")()
    assert fix.position_covariance == [0.0] * 9 and fix.status.status == 0
    assert m.message_class("sensor_msgs/msg/BatteryState")().cell_voltage == []


class _Mag(Sensor):
    outputs = (Output("field", 3, "T", "field"), Output("valid", 1, "1", "ok"),
               Output("temp", 1, "degC", "temperature"))  # fmt: skip

    def __init__(self, decls):
        super().__init__("mag", 100.0)
        self.decls = decls

    def ros2(self, ctx):
        return self.decls


def _check(*decls):
    interfaces.check_parts([_Mag(decls)], 0.002, [5])


MAG = "sensor_msgs/msg/MagneticField"


@pytest.mark.parametrize(("decl", "why"), [
    (Ros2("sensor_msgs/msg/Magnetometer", (("magnetic_field", "field"),)),
     "no ROS 2 message type 'sensor_msgs/msg/Magnetometer' here (did you mean "
     "'sensor_msgs/msg/MagneticField'?)"),
    (Ros2("sensor_msgs/MagneticField", (("magnetic_field", "field"),)),
     "did you mean 'sensor_msgs/msg/MagneticField'?"),
    (Ros2(MAG, (("magnetic_fild", "field"),)), "has no field 'magnetic_fild'"),
    (Ros2(MAG, (("magnetic_field.w", "temp"),)), "has no field 'magnetic_field.w'"),
    (Ros2(MAG, (("magnetic_field", "temp"),)),
     "magnetic_field holds 3 numbers; the output 'temp' gives 1"),
    (Ros2(MAG, (("magnetic_field_covariance", "field"),)), "holds 9 numbers"),
    (Ros2(MAG, (("magnetic_field", "strength"),)), "the output 'strength', which the part"),
    (Ros2(MAG, (("header.stamp.sec", "temp"),)), "is set by quadsim"),
    (Ros2(MAG, (("magnetic_field", "field"),), (("magnetic_field.x", 1.0),)), "set twice"),
    (Ros2(MAG, (("magnetic_field", "field"),), (("magnetic_field_covariance", (1.0,) * 3),)),
     "holds 9 numbers, given 3"),
    (Ros2(MAG, (("magnetic_field", "field"),), (("magnetic_field_covariance", "x"),)),
     "not a string field"),
    (Ros2(MAG, (("magnetic_field", "field"),), valid="field"), "valid='field' must name an "
     "output of size 1"),
    (Ros2("sensor_msgs/msg/Range", (("range", "temp"),), (("radiation_type", 1.5),)),
     "integer field (uint8: 0..255), given 1.5"),
    (Ros2("sensor_msgs/msg/Range", (("range", "temp"),), (("radiation_type", 256),)),
     "integer field"),
    (Ros2("sensor_msgs/msg/NavSatFix", (("status", "field"),)), "holds int8/uint16 values"),
    (Ros2("std_msgs/msg/String", (("data", "temp"),)), "holds string values"),
    (Ros2(MAG, (("magnetic_field", "field"),), leaf="odom"), "'odom' is taken by quadsim's own"),
    ("sensor_msgs/msg/MagneticField", "returns quadsim.loop.parts.Ros2 records"),
])  # fmt: skip
def test_a_declaration_that_does_not_fit_its_type_is_refused(decl, why):
    with pytest.raises(interfaces.PartMessageError, match=r"^sensor mag: ") as e:
        _check(decl)
    assert why in str(e.value), str(e.value)
    assert e.value.part == "mag"


def test_declarations_that_fit():
    _check(Ros2(MAG, (("magnetic_field", "field"),), (("magnetic_field_covariance",
                                                        np.eye(3) * 1e-12),), valid="valid"))
    _check(Ros2("std_msgs/msg/Float64", (("data", "temp"),), leaf="temp"),  # no header
           Ros2("sensor_msgs/msg/BatteryState", (("cell_voltage", "field"), ("voltage", "temp")),
                (("location", "slot 1"), ("present", True), ("power_supply_status", 2)),
                leaf="battery"),  # a sequence of floats takes the output's size
           Ros2("geometry_msgs/msg/PointStamped", (("point", "field"),), leaf="point"))
    with pytest.raises(ValueError, match="a second ROS 2 message on 'mag'"):
        _check(Ros2(MAG, (("magnetic_field", "field"),)), Ros2(MAG, (("magnetic_field", "field"),)))


def test_any_standard_type_is_encoded_from_its_declaration(store):
    """A header-less ``std_msgs/Float64``, a ``BatteryState`` with float32 fields, a sequence,
    integer and string constants: the message built, read back by rosbags."""
    part = _Mag((Ros2("std_msgs/msg/Float64", (("data", "temp"),), leaf="temp"),
                 Ros2("sensor_msgs/msg/BatteryState", (("cell_voltage", "field"),
                                                      ("voltage", "temp")),
                      (("location", "slot 1"), ("present", True), ("power_supply_status", 2)),
                      leaf="battery", valid="valid")))  # fmt: skip
    t_f, t_b = encode.part_topics([part], 0.002, [5])
    readings = {"mag_field": np.array([[1.0, 2.0, 3.5]] * 2), "mag_temp": np.array([25.5, 26.0]),
                "mag_valid": np.array([1.0, 0.0])}  # fmt: skip
    f = store.deserialize_cdr(bytes(encode.part_message(t_f, 1.5, readings, 1,
                                                        frame="d1/base_link").serialize()),
                              "std_msgs/msg/Float64")  # fmt: skip
    assert f.data == 26.0
    b0 = encode.part_message(t_b, 1.5, readings, 0, frame="d0/base_link")
    b = store.deserialize_cdr(bytes(b0.serialize()), "sensor_msgs/msg/BatteryState")
    assert b.header.frame_id == "d0/base_link" and b.header.stamp.sec == 1
    assert b.cell_voltage.tolist() == [1.0, 2.0, 3.5] and b.voltage == np.float32(25.5)
    assert (b.location, b.present, b.power_supply_status) == ("slot 1", True, 2)
    b1 = encode.part_message(t_b, 1.5, readings, 1, frame="d1/base_link")
    assert math.isinf(b1.voltage) and all(math.isinf(v) for v in b1.cell_voltage)


def test_the_fast_path_renders_the_messages_bytes_for_any_type():
    """The node's and the bag's template of a part's message (``encode.part_template``) gives,
    for random readings, the bytes of the message ``encode.part_message`` builds: float64 and
    float32 fields, a sequence, ``+inf`` without a reading, integer and string constants, and a
    ``Time`` that is not the header's kept as declared."""
    part = _Mag((Ros2(MAG, (("magnetic_field", "field"),), (("magnetic_field_covariance",
                                                              tuple(range(9))),)),
                 Ros2("sensor_msgs/msg/BatteryState", (("cell_voltage", "field"),
                                                      ("voltage", "temp")),
                      (("location", "slot 1"), ("present", True), ("power_supply_status", 2)),
                      leaf="battery", valid="valid"),
                 Ros2("sensor_msgs/msg/TimeReference", (),
                      (("time_ref.sec", 7), ("source", "gps")), leaf="time")))  # fmt: skip
    topics = encode.part_topics([part], 0.002, [5])
    rng = np.random.default_rng(3)
    for pt in topics:
        tpl, at = encode.part_template(pt, "d1/base_link")
        for _ in range(20):
            readings = {"mag_field": rng.normal(size=(2, 3)), "mag_temp": rng.normal(size=2),
                        "mag_valid": (rng.random(2) > 0.3).astype(float)}  # fmt: skip
            t = float(rng.uniform(0, 1e4))
            st = encode.stamp(t)
            want = bytes(encode.part_message(pt, t, readings, 1, frame="d1/base_link").serialize())
            got = tpl.render(st.sec, st.nanosec, at, encode.part_values(pt, readings, 1))
            assert got == want.ljust(len(tpl.base), b"\0"), pt.decl.type
