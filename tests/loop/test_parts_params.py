"""A part's vector and matrix parameters (issue 40, item 7): ``Param(shape=)`` checked by
``check_params`` (shape, finiteness, range and sign of every entry), stored read-only, given as
lists in a scenario (errors with the file, key and line), listed with their units and shapes in
the run metadata; and the rotation helpers a part uses to turn a world vector into the body."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

from quadsim.app.scenario import load_scenario
from quadsim.loop.parts import (
    MAX_PARAM_SIZE,
    Output,
    Param,
    Sensor,
    check_params,
    param_unit,
    part_params,
)
from quadsim.physics.rotation import from_euler, rotate, rotate_inverse

PLUGINS = Path(__file__).resolve().parents[2] / "examples" / "plugins"

PARAMS = {
    "field": Param((20.0, 0.0, -40.0), "field [uT]", lo=-100.0, hi=100.0, shape=(3,)),
    "mount": Param(((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)), "mount rotation",
                   shape=(3, 3), unit="1"),
    "gain": Param((1.0, 1.0), "gains [1]", positive=True, shape=(2,)),
    "noise": Param(0.1, "noise std [uT]", lo=0.0),
}  # fmt: skip


def test_vectors_and_matrices_are_read_only_float64_arrays_of_their_shape():
    v = check_params(PARAMS, {"field": [1, 2.5, -3], "mount": np.eye(3) * 2})
    assert v["field"].dtype == np.float64 and v["field"].tolist() == [1.0, 2.5, -3.0]
    assert v["mount"].shape == (3, 3) and v["mount"][2, 2] == 2.0
    assert v["gain"].tolist() == [1.0, 1.0] and v["noise"] == 0.1  # defaults; a scalar a float
    with pytest.raises(ValueError, match="read-only"):
        v["field"][0] = 0.0


@pytest.mark.parametrize(("values", "why"), [
    ({"field": [1.0, 2.0]}, "field: must be a list of finite numbers of shape [3] (field [uT]); "
                            "got [1.0, 2.0] of shape [2]"),
    ({"field": 1.0}, "field: must be a list of finite numbers of shape [3] (field [uT]); got 1.0 "
                     "(a number)"),
    ({"field": [1.0, math.nan, 0.0]}, "field: must be a list of finite numbers"),
    ({"field": [1.0, True, 0.0]}, "field: must be a list of finite numbers"),
    ({"field": [1.0, "2", 0.0]}, "field: must be a list of finite numbers"),
    ({"field": [0.0, 0.0, 200.0]}, "field: must be in [-100.0, 100.0] (field [uT]); got "
                                   "[0.0, 0.0, 200.0] (entry [2])"),
    ({"mount": [[1, 0, 0], [0, 1], [0, 0, 1]]}, "mount: must be a nested list of finite numbers "
                                                "of shape [3, 3]"),
    ({"mount": [[1, 0, 0], [0, 1, 0]]}, "of shape [2, 3]"),
    ({"gain": [1.0, 0.0]}, "gain: must be > 0 (gains [1]); got [1.0, 0.0] (entry [1])"),
    ({"noise": [0.1]}, "noise: must be a finite number (noise std [uT]); got [0.1] of shape [1]"),
])  # fmt: skip
def test_a_value_of_another_shape_or_out_of_range_is_refused_naming_the_entry(values, why):
    with pytest.raises(ValueError) as e:
        check_params(PARAMS, values)
    assert why in str(e.value), str(e.value)


def test_a_declared_shape_must_be_small():
    for shape in ((2, 2, 2), (MAX_PARAM_SIZE + 1,), (0,), (3.0,)):
        with pytest.raises(ValueError, match="its declared shape"):
            check_params({"x": Param(None, "x", shape=shape)}, {"x": [0.0]})


def test_units_come_from_the_param_or_its_doc():
    assert param_unit(PARAMS["field"]) == "uT" and param_unit(PARAMS["mount"]) == "1"
    assert param_unit(Param(0.0, "no unit")) == ""


class _Vec(Sensor):
    outputs = (Output("v", 3, "uT", "v"),)
    params = PARAMS

    def measure(self, k, truth, state, z, ctx):
        return {"v": 0.0 * truth.pos + ctx.xp.asarray(self.field)}, state


def test_the_metadata_lists_every_parameter_with_unit_and_shape():
    part = _Vec("vec", 50.0, field=[1.0, 2.0, 3.0])
    assert "field=[1.0, 2.0, 3.0]" in repr(part)
    meta = part_params([part])["vec"]
    assert meta["kind"].endswith(":_Vec") and meta["rate_hz"] == 50.0
    assert meta["params"]["field"] == {"value": [1.0, 2.0, 3.0], "unit": "uT", "shape": [3]}
    assert meta["params"]["mount"]["value"] == np.eye(3).tolist()
    assert meta["params"]["noise"] == {"value": 0.1, "unit": "uT", "shape": []}


MAG = """
duration = 0.2
[sim]
dt = 0.002
backend = "numpy"
[sensors.mag]
kind = "quadsim_plugin_demo.magnetometer:Magnetometer"
field = {field}
soft_iron = {iron}
"""


@pytest.fixture
def plugins(monkeypatch):
    monkeypatch.syspath_prepend(str(PLUGINS))
    yield
    sys.modules.pop("quadsim_plugin_demo.magnetometer", None)


def test_a_scenario_gives_vectors_and_matrices_as_lists(plugins):
    sc = load_scenario(MAG.format(field="[0.0, 20.0, -40.0]", iron="[[1.1, 0, 0], [0, 1, 0], "
                                  "[0, 0, 0.9]]"), text=True)  # fmt: skip
    (part,) = sc.prepared.parts
    assert part.field.tolist() == [0.0, 20.0, -40.0] and part.soft_iron[2, 2] == 0.9


@pytest.mark.parametrize(("field", "iron", "key", "line", "why"), [
    ("[0.0, 20.0]", "[[1, 0, 0], [0, 1, 0], [0, 0, 1]]", "field", 8,
     "must be a list of finite numbers of shape [3]"),
    ("[0.0, 20.0, 400.0]", "[[1, 0, 0], [0, 1, 0], [0, 0, 1]]", "field", 8,
     "must be in [-100.0, 100.0]"),
    ("[0.0, 20.0, -40.0]", "[[1, 0, 0], [0, 1, 0]]", "soft_iron", 9, "of shape [3, 3]"),
    ("[0.0, 20.0, -40.0]", "[1, 0, 0]", "soft_iron", 9, "a nested list of finite numbers"),
])  # fmt: skip
def test_a_scenarios_bad_vector_names_its_key_and_line(plugins, field, iron, key, line, why):
    with pytest.raises(ValueError) as e:
        load_scenario(MAG.format(field=field, iron=iron), text=True)
    msg = str(e.value)
    assert msg.startswith(f"<scenario>: sensors.mag.{key} (line {line}): ") and why in msg, msg


def test_the_rotation_helpers_turn_world_vectors_into_the_body_and_back():
    """What docs/parts.md shows: ``rotate_inverse(q, v_world)`` is the body's view (world to
    body), ``rotate(q, v_body)`` the world's (body to world), batched over drones."""
    q = from_euler(np.array([[0.0, 0.0, math.pi / 2], [math.pi / 2, 0.0, 0.0]]))  # yaw, roll
    north_up = np.array([0.0, 1.0, 1.0])
    body = rotate_inverse(q, north_up)
    np.testing.assert_allclose(body, [[1.0, 0.0, 1.0], [0.0, 1.0, -1.0]], atol=1e-15)
    np.testing.assert_allclose(rotate(q, body), [north_up, north_up], atol=1e-15)


def test_a_bound_without_a_lower_end_is_said_as_an_interval():
    """Issue 40, item 11: the rangefinder's max_range said "must be in [None, 100.0]"."""
    from quadsim.loop.parts.rangefinder import Rangefinder

    with pytest.raises(ValueError, match=r"^max_range: must be in \(0, 100\.0\] \(largest range "
                                         r"read \[m\]\); got 200\.0$"):  # fmt: skip
        Rangefinder("tof", max_range=200.0)
