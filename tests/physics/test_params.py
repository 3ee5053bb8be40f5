"""quadsim.physics.params (Params, TOML loading, validation) and quadsim.physics.envelope."""

from __future__ import annotations

import fnmatch
import math
import re
import tomllib
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from quadsim.physics.envelope import Envelope, envelope, terminal_velocity
from quadsim.physics.params import (
    Params,
    _build,
    invert_curve,
    list_presets,
    load_params,
    rad_s_to_rpm,
    rpm_to_rad_s,
)

PRESETS = [
    "cf21B_500",
    "cf21_nanobench",
    "cf2x_L250",
    "cf2x_P250",
    "cf2x_T350",
    "f450_plus",
    "generic_x",
    "skydio2_x",
]
TEXT_KEYS = {"name", "description", "layout"}
S = 2.0 * math.pi / 60.0  # rad/s per RPM

# drone-models 0.1.0, drone_models/data/params.toml: published mixing matrix (all four drones)
DM_MIXING = np.array([[-1.0, -1.0, 1.0, 1.0], [-1.0, 1.0, 1.0, -1.0], [-1.0, 1.0, -1.0, 1.0]])
DM_L = {"cf2x_L250": 0.03253, "cf2x_P250": 0.03253, "cf2x_T350": 0.03253, "cf21B_500": 0.035355}

# Hover speed of every preset [RPM], recorded from envelope() (also in docs/presets.md).
HOVER_RPM = {
    "cf21B_500": 15896.30,
    "cf21_nanobench": 22294.69,
    "cf2x_L250": 18967.77,
    "cf2x_P250": 23191.77,
    "cf2x_T350": 19040.96,
    "f450_plus": 1890.12,
    "generic_x": 9590.03,
    "skydio2_x": 8451.54,
}


def raw_preset(name: str) -> dict:
    text = (resources.files("quadsim.physics") / "presets" / f"{name}.toml").read_text("utf-8")
    return tomllib.loads(text)


def thrust(p: Params, rpm: float) -> float:
    k0, k1, k2 = p.rpm2thrust
    return k0 + k1 * rpm + k2 * rpm * rpm


# --------------------------------------------------------------------------------- presets


def test_list_presets() -> None:
    assert list_presets() == PRESETS


@pytest.mark.parametrize("name", PRESETS)
def test_preset_loads_and_validates(name: str) -> None:
    p = load_params(name)
    assert isinstance(p, Params)
    assert p.name == name
    n = p.rotor_positions.shape[0]
    assert p.rotor_positions.shape == (n, 2) and p.rotor_spin.shape == (n,)
    assert p.mixing_matrix.shape == (3, n)
    assert p.J.shape == p.J_inv.shape == p.drag_matrix.shape == (3, 3)
    np.testing.assert_allclose(p.J_inv @ p.J, np.eye(3), atol=1e-12)
    assert p.gravity_vec[0] == p.gravity_vec[1] == 0.0 and p.gravity_vec[2] < 0.0
    assert 0.0 <= p.rpm_min < p.rpm_max
    assert np.all(np.linalg.eigvalsh(p.J) > 0.0)
    assert np.all(np.linalg.eigvalsh(p.drag_matrix) <= 0.0)
    for field in Params._fields:
        value = getattr(p, field)
        if isinstance(value, np.ndarray):
            assert value.dtype == np.float64 and not value.flags.writeable, field
            assert np.all(np.isfinite(value)), field


@pytest.mark.parametrize("name", PRESETS)
def test_preset_entries_have_unit_and_source(name: str) -> None:
    doc = raw_preset(name)
    assert doc["name"] == name
    assert isinstance(doc["description"], str) and doc["layout"] in ("x", "plus")
    for key, entry in doc.items():
        if key in TEXT_KEYS:
            continue
        assert isinstance(entry, dict), key
        assert isinstance(entry.get("unit"), str) and entry["unit"], key
        assert isinstance(entry.get("source"), str) and entry["source"], key


def test_preset_strictness_rejects_bare_values() -> None:
    doc = raw_preset("skydio2_x")
    doc["mass"] = 1.0
    with pytest.raises(ValueError, match="mass"):
        _build(doc, "preset 'x'", "x", preset=True)
    doc["mass"] = {"value": 1.0, "unit": "kg"}
    with pytest.raises(ValueError, match="source"):
        _build(doc, "preset 'x'", "x", preset=True)
    assert _build(doc, "x.toml", "x", preset=False).mass == 1.0


@pytest.mark.parametrize("name", sorted(DM_L))
def test_cf2x_mixing_matches_drone_models(name: str) -> None:
    p = load_params(name)
    np.testing.assert_array_equal(p.mixing_matrix, DM_MIXING)
    assert p.L == DM_L[name]
    np.testing.assert_array_equal(p.rotor_spin, [1.0, -1.0, 1.0, -1.0])


@pytest.mark.parametrize("name", PRESETS)
def test_mixing_is_r_cross_f(name: str) -> None:
    """L M[0:2] f is the torque of forces f_i e_z at r_i; M[2] tau_p is the reaction to the spin."""
    p = load_params(name)
    n = p.rotor_positions.shape[0]
    f = np.random.default_rng(0).uniform(0.1, 1.0, n)
    r = np.column_stack([p.rotor_positions, np.zeros(n)])
    forces = np.outer(f, [0.0, 0.0, 1.0])
    np.testing.assert_allclose(p.L * p.mixing_matrix[:2] @ f, np.cross(r, forces).sum(0)[:2])
    # a rotor spinning about +z (spin +1) pushes the body about -z
    np.testing.assert_array_equal(p.mixing_matrix[2] @ (p.rotor_spin * f), -f.sum())


def test_f450_reproduces_seed_001_mixing_matrix() -> None:
    p = load_params("f450_plus")
    kt, kq, L = 3.13e-5, 7.5e-7, 0.17  # seed 001, per (rad/s)^2
    seed = np.array(
        [
            [kt, kt, kt, kt],
            [0.0, kt * L, 0.0, -kt * L],
            [-kt * L, 0.0, kt * L, 0.0],
            [-kq, kq, -kq, kq],
        ]
    )
    kt_p = p.rpm2thrust[2] / S**2  # back to N/(rad/s)^2
    kq_p = p.rpm2torque[2] / S**2
    M = p.mixing_matrix
    ours = np.vstack([kt_p * np.ones(4), kt_p * p.L * M[0], kt_p * p.L * M[1], kq_p * M[2]])
    np.testing.assert_allclose(ours, seed, rtol=1e-14, atol=0.0)
    assert p.L == L


def test_rad_s_conversion_f450() -> None:
    p = load_params("f450_plus")
    np.testing.assert_allclose(p.rpm2thrust, [0.0, 0.0, 3.13e-5 * S**2], rtol=1e-15)
    np.testing.assert_allclose(p.rpm2torque, [0.0, 0.0, 7.5e-7 * S**2], rtol=1e-15)
    assert p.rpm_min == 0.0
    assert p.rpm_max == pytest.approx(395.86 * 60.0 / (2.0 * math.pi), rel=1e-15)
    # same thrust whether the speed is expressed in RPM or rad/s
    w = 300.0  # rad/s
    assert thrust(p, rad_s_to_rpm(w)) == pytest.approx(3.13e-5 * w**2, rel=1e-14)
    assert rpm_to_rad_s(60.0) == pytest.approx(2.0 * math.pi, rel=1e-15)
    assert rad_s_to_rpm(rpm_to_rad_s(1234.5)) == pytest.approx(1234.5, rel=1e-15)
    np.testing.assert_allclose(rpm_to_rad_s(np.array([60.0, 120.0])), [2 * np.pi, 4 * np.pi])


def test_rotor_thrust_range_converts_to_rpm() -> None:
    p = load_params("cf2x_L250")
    assert thrust(p, p.rpm_max) == pytest.approx(0.12, rel=1e-12)
    assert thrust(p, p.rpm_min) == pytest.approx(0.012817578393224994, rel=1e-12)
    p = load_params("skydio2_x")
    assert p.rpm_min == 0.0 and thrust(p, p.rpm_max) == pytest.approx(5.0, rel=1e-14)


def test_params_immutable() -> None:
    p = load_params("cf2x_L250")
    with pytest.raises(AttributeError):
        p.mass = 1.0  # type: ignore[misc]
    for field in ("J", "J_inv", "mixing_matrix", "rpm2thrust", "rotor_positions", "gravity_vec"):
        with pytest.raises(ValueError, match="read-only"):
            getattr(p, field)[0] = 0.0
    assert load_params("cf2x_L250").J[0, 0] == 16.8e-6


def _assert_same(a: Params, b: Params) -> None:
    for field in Params._fields:
        va, vb = getattr(a, field), getattr(b, field)
        if isinstance(va, np.ndarray):
            np.testing.assert_array_equal(va, vb, err_msg=field)
        else:
            assert va == vb, field


@pytest.mark.parametrize("name", ["f450_plus", "cf21B_500"])
def test_user_file_copy_loads_like_preset(name: str, tmp_path: Path) -> None:
    text = (resources.files("quadsim.physics") / "presets" / f"{name}.toml").read_text("utf-8")
    path = tmp_path / "copy.toml"
    path.write_text(text)
    _assert_same(load_params(path), load_params(name))
    _assert_same(load_params(str(path)), load_params(name))


def test_user_file_bare_values_mean_canonical_units(tmp_path: Path) -> None:
    doc = raw_preset("skydio2_x")
    lines = [f"{k} = {v['value']!r}" for k, v in doc.items() if k not in TEXT_KEYS]
    path = tmp_path / "bare"
    path.mkdir()
    (path / "drone.toml").write_text("\n".join(lines))
    p = load_params(path / "drone.toml")
    assert p.name == "drone"  # no name key: the file stem
    _assert_same(p._replace(name="skydio2_x"), load_params("skydio2_x"))


def test_defaults(tmp_path: Path) -> None:
    path = tmp_path / "minimal.toml"
    path.write_text(BASE)
    p = load_params(path)
    assert p.gravity_vec.tolist() == [0.0, 0.0, -9.81]
    assert p.prop_inertia == p.drag_coef == p.rot_drag_coef == 0.0
    assert p.drag_speed_max == math.inf  # validity range of the drag model: not stated
    assert not np.any(p.drag_matrix)
    np.testing.assert_array_equal(p.rotor_dyn_coef, [20.0, 0.0, 20.0, 0.0])
    assert p.rpm_max == pytest.approx(4000.0)


def test_unknown_preset_lists_presets() -> None:
    with pytest.raises(ValueError, match="unknown preset") as info:
        load_params("cf3_nope")
    for name in PRESETS:
        assert name in str(info.value)


# ------------------------------------------------------------------------------ bad files

BASE = """
mass = 0.5
inertia = [2.3e-3, 2.3e-3, 4.5e-3]
rotor_positions = [[0.17, 0.0], [0.0, 0.17], [-0.17, 0.0], [0.0, -0.17]]
rotor_spin = [1, -1, 1, -1]
thrust_curve = { value = [0.0, 0.0, 3.13e-5], unit = "N, N/(rad/s), N/(rad/s)^2" }
torque_curve = [0.0, 0.0, 8e-12]
motor_constant = 20.0
rotor_speed_range = { value = [0.0, 4000.0], unit = "RPM" }
"""


def _replace(key: str, line: str | None) -> str:
    """BASE with the line for ``key`` replaced (or removed when ``line`` is None)."""
    out = [ln for ln in BASE.splitlines() if not ln.startswith(f"{key} =")]
    return "\n".join(out + ([line] if line is not None else []))


BAD = {
    "unknown_key": ("colour", _replace("colour", 'colour = "red"')),
    "unknown_field": ("mass", _replace("mass", 'mass = { value = 0.5, unit = "kg", sauce = 1 }')),
    "no_value": ("mass", _replace("mass", 'mass = { unit = "kg" }')),
    "wrong_unit": ("mass", _replace("mass", 'mass = { value = 500.0, unit = "g" }')),
    "wrong_curve_unit": (
        "thrust_curve",
        _replace("thrust_curve", 'thrust_curve = { value = [0, 0, 1e-8], unit = "N/RPM^2" }'),
    ),
    "wrong_range_unit": (
        "rotor_speed_range",
        _replace("rotor_speed_range", 'rotor_speed_range = { value = [0, 10], unit = "Hz" }'),
    ),
    "shape_inertia": ("inertia", _replace("inertia", "inertia = [1e-3, 1e-3]")),
    "shape_curve": ("thrust_curve", _replace("thrust_curve", "thrust_curve = [0.0, 1e-8]")),
    "shape_positions": (
        "rotor_positions",
        _replace("rotor_positions", "rotor_positions = [[1, 0, 0], [0, 1, 0], [-1, 0, 0]]"),
    ),
    "ragged": ("inertia", _replace("inertia", "inertia = [[1e-3, 0], [0, 1e-3, 0], [0, 0, 1]]")),
    "scalar_as_list": ("mass", _replace("mass", "mass = [0.5]")),
    "string_value": ("mass", _replace("mass", 'mass = "heavy"')),
    "bool_value": ("drag_coef", _replace("drag_coef", "drag_coef = true")),
    "text_key_type": ("layout", _replace("layout", "layout = 4")),
    "nan": ("mass", _replace("mass", "mass = nan")),
    "inf": ("drag_coef", _replace("drag_coef", "drag_coef = inf")),
    "nan_in_matrix": ("inertia", _replace("inertia", "inertia = [1e-3, nan, 2e-3]")),
    "mass_zero": ("mass", _replace("mass", "mass = 0.0")),
    "mass_negative": ("mass", _replace("mass", "mass = -0.5")),
    "gravity_zero": ("gravity", _replace("gravity", "gravity = 0.0")),
    "inertia_asymmetric": (
        "inertia",
        _replace("inertia", "inertia = [[2e-3, 1e-4, 0], [0, 2e-3, 0], [0, 0, 4e-3]]"),
    ),
    "inertia_negative": ("inertia", _replace("inertia", "inertia = [1.0, 1.0, -1.0]")),
    "inertia_indefinite": (
        "inertia",
        _replace("inertia", "inertia = [[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]]"),
    ),
    "inertia_triangle": ("inertia", _replace("inertia", "inertia = [1e-3, 1e-3, 3e-3]")),
    "two_rotors": (
        "rotor_positions",
        _replace("rotor_positions", "rotor_positions = [[0.1, 0.0], [-0.1, 0.0]]").replace(
            "rotor_spin = [1, -1, 1, -1]", "rotor_spin = [1, -1]"
        ),
    ),
    "spin_count": ("rotor_spin", _replace("rotor_spin", "rotor_spin = [1, -1, 1]")),
    "spin_value": ("rotor_spin", _replace("rotor_spin", "rotor_spin = [1, 0, 1, -1]")),
    "prop_inertia_negative": ("prop_inertia", _replace("prop_inertia", "prop_inertia = -1e-6")),
    "range_unordered": (
        "rotor_speed_range",
        _replace("rotor_speed_range", "rotor_speed_range = [4000.0, 1000.0]"),
    ),
    "range_negative": (
        "rotor_speed_range",
        _replace("rotor_speed_range", "rotor_speed_range = [-10.0, 1000.0]"),
    ),
    "thrust_range_negative": (
        "rotor_thrust_range",
        _replace("rotor_speed_range", "rotor_thrust_range = [-1.0, 5.0]"),
    ),
    "thrust_range_unreachable": (  # the curve starts at 0.5 N: 0.1 N is never produced
        "rotor_thrust_range",
        _replace("rotor_speed_range", "rotor_thrust_range = [0.1, 5.0]").replace(
            "[0.0, 0.0, 3.13e-5]", "[0.5, 0.0, 3.13e-5]"
        ),
    ),
    "both_ranges": ("rotor_thrust_range", BASE + "rotor_thrust_range = [0.0, 5.0]"),
    "no_range": ("rotor_speed_range", _replace("rotor_speed_range", None)),
    "drag_positive": ("drag_matrix", _replace("drag_matrix", "drag_matrix = [0.1, -0.1, -0.1]")),
    "drag_indefinite": (
        "drag_matrix",
        _replace("drag_matrix", "drag_matrix = [[-0.1, 0.5, 0], [0.5, -0.1, 0], [0, 0, -0.1]]"),
    ),
    "drag_coef_negative": ("drag_coef", _replace("drag_coef", "drag_coef = -0.01")),
    "rot_drag_negative": ("rot_drag_coef", _replace("rot_drag_coef", "rot_drag_coef = -0.01")),
    "drag_speed_max_negative": (
        "drag_speed_max",
        _replace("drag_speed_max", "drag_speed_max = -1.0"),
    ),
    "thrust_flat": ("thrust_curve", _replace("thrust_curve", "thrust_curve = [30.0, 0.0, 0.0]")),
    "both_rotor_dyn": ("motor_constant", BASE + "rotor_dyn_coef = [10.0, 0.0, 10.0, 0.0]"),
    "no_rotor_dyn": ("motor_constant", _replace("motor_constant", None)),
    "motor_constant_zero": ("motor_constant", _replace("motor_constant", "motor_constant = 0.0")),
    "rotor_dyn_negative": (
        "rotor_dyn_coef",
        _replace("motor_constant", "rotor_dyn_coef = [10.0, 0.0, -1.0, 0.0]"),
    ),
    "thrust_not_positive": (
        "thrust_curve",
        _replace("thrust_curve", "thrust_curve = [0.0, -1e-3, 1e-8]"),
    ),
    "warmup_coef_above_1": ("warmup_coef", BASE + 'warmup_coef = { value = 1.2, unit = "1" }'),
    "warmup_coef_negative": ("warmup_coef", BASE + "warmup_coef = -0.01"),
    "warmup_time_zero": ("warmup_time", BASE + 'warmup_time = { value = 0.0, unit = "s" }'),
    "warmup_time_negative": ("warmup_time", BASE + "warmup_time = -5.0"),
    "inflow_coef_negative": ("inflow_coef", BASE + 'inflow_coef = { value = -0.05, unit = "s/m" }'),
    "inflow_coef_above_1": ("inflow_coef", BASE + "inflow_coef = 2.0"),
    "inflow_coef_unit": ("inflow_coef", BASE + 'inflow_coef = { value = 0.05, unit = "1/s" }'),
    "missing_mass": ("mass", _replace("mass", None)),
    "missing_inertia": ("inertia", _replace("inertia", None)),
    "missing_positions": ("rotor_positions", _replace("rotor_positions", None)),
    "missing_spin": ("rotor_spin", _replace("rotor_spin", None)),
    "missing_thrust": ("thrust_curve", _replace("thrust_curve", None)),
    "missing_torque": ("torque_curve", _replace("torque_curve", None)),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_file_names_file_and_key(case: str, tmp_path: Path) -> None:
    key, text = BAD[case]
    path = tmp_path / f"bad_{case}.toml"
    path.write_text(text)
    with pytest.raises(ValueError) as info:
        load_params(path)
    msg = str(info.value)
    assert path.name in msg and repr(key) in msg, msg


def test_base_file_is_valid(tmp_path: Path) -> None:
    """The bad-file cases fail because of their one change: the unchanged file loads."""
    path = tmp_path / "good.toml"
    path.write_text(BASE)
    assert load_params(path).mass == 0.5


def test_warmup_and_inflow_coefficients_load(tmp_path: Path) -> None:
    path = tmp_path / "terms.toml"
    path.write_text(BASE + "warmup_coef = 0.05\nwarmup_time = 4.5\ninflow_coef = 0.05\n")
    p = load_params(path)
    assert (p.warmup_coef, p.warmup_time, p.inflow_coef) == (0.05, 4.5, 0.05)


def test_inertia_symmetry_tolerance(tmp_path: Path) -> None:
    """Asymmetry above 1e-12 relative is rejected; below it the matrix is symmetrized."""
    for asym, ok in ((4e-13, False), (4e-17, True)):
        path = tmp_path / f"asym_{ok}.toml"
        row = f"inertia = [[2e-3, {1e-5 + asym!r}, 0], [1e-5, 2e-3, 0], [0, 0, 4e-3]]"
        path.write_text(_replace("inertia", row))
        if ok:
            J = load_params(path).J
            assert np.array_equal(J, J.T) and J[0, 1] == pytest.approx(1e-5, rel=1e-10)
        else:
            with pytest.raises(ValueError, match="symmetric"):
                load_params(path)


def test_malformed_toml(tmp_path: Path) -> None:
    path = tmp_path / "broken.toml"
    path.write_text("mass = { value = 0.5, unit = \n")
    with pytest.raises(ValueError, match=r"broken\.toml") as info:
        load_params(path)
    assert isinstance(info.value.__cause__, tomllib.TOMLDecodeError)


# -------------------------------------------------------------------------------- envelope


def test_invert_curve() -> None:
    for curve in ([0.0, 0.0, 2e-8], [0.0, -5e-7, 2.5e-10], [0.01, 3e-6, 1e-9], [0.0, 1e-4, 0.0]):
        for y in (0.05, 0.5, 3.0):
            w = invert_curve(curve, y)
            assert w > 0.0
            assert np.polyval(curve[::-1], w) == pytest.approx(y, rel=1e-13)
            assert curve[1] + 2.0 * curve[2] * w >= 0.0  # increasing branch
    assert math.isnan(invert_curve([1.0, 0.0, -1e-8], 2.0))
    assert math.isnan(invert_curve([0.0, 0.0, 0.0], 1.0))


def test_f450_hover_matches_seed_001() -> None:
    e = envelope("f450_plus")
    assert isinstance(e, Envelope)
    assert e.hover_rad_s == pytest.approx(math.sqrt(0.5 * 9.81 / (4 * 3.13e-5)), rel=1e-14)
    assert round(e.hover_rad_s, 2) == 197.93
    # the seed's header stores QD_W_HOVER = 197.92, i.e. 197.9326 truncated
    assert abs(e.hover_rad_s - 197.92) < 0.015
    assert abs(e.hover_rpm - 1890.0) < 1.0  # seed: "About 1890 RPM"
    assert e.thrust_to_weight == pytest.approx(4.0, abs=1e-3)


def test_skydio2_tilt_and_terminal_velocity_match_seed_002() -> None:
    p = load_params("skydio2_x")
    e = envelope(p)
    assert e.thrust_max == pytest.approx(20.0, rel=1e-14)
    assert abs(math.degrees(e.tilt_max) - 60.0) < 1e-9
    assert e.accel_up_max == pytest.approx(10.0) and e.accel_down_max == pytest.approx(10.0)
    theta = np.radians([1.0, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0])
    v = terminal_velocity(p, theta)
    C = v / np.sqrt(np.tan(theta))  # seed: v = sqrt(10 tan(theta) / k_d) ~ 15 sqrt(tan(theta))
    np.testing.assert_allclose(C, math.sqrt(10.0 / 0.0425), rtol=1e-14)
    assert round(C[0]) == 15 and round(C[0], 2) == 15.34
    v10 = terminal_velocity(p, math.radians(10.0))
    assert isinstance(v10, float)
    assert v10 == pytest.approx(6.44, abs=5e-3) and round(v10) == 6  # seed: "about 6 m/s"
    assert terminal_velocity(p, 0.0) == 0.0


@pytest.mark.parametrize("name", PRESETS)
def test_hover_thrust_equals_weight(name: str) -> None:
    p = load_params(name)
    e = envelope(p)
    n = p.rotor_positions.shape[0]
    weight = p.mass * -p.gravity_vec[2]
    assert n * thrust(p, e.hover_rpm) == pytest.approx(weight, rel=1e-12)
    assert e.hover_rad_s == pytest.approx(e.hover_rpm * S, rel=1e-15)
    assert p.rpm_min <= e.hover_rpm <= p.rpm_max
    assert e.hover_rpm == pytest.approx(HOVER_RPM[name], abs=0.01)
    assert e.thrust_min == pytest.approx(n * thrust(p, p.rpm_min), rel=1e-15)
    assert e.thrust_max == pytest.approx(n * thrust(p, p.rpm_max), rel=1e-15)
    assert e.thrust_to_weight == pytest.approx(e.thrust_max / weight)
    assert e.accel_up_max == pytest.approx(e.thrust_max / p.mass + p.gravity_vec[2])
    assert e.accel_down_max == pytest.approx(-p.gravity_vec[2] - e.thrust_min / p.mass)
    # at tilt_max full thrust exactly holds altitude
    assert e.thrust_max * math.cos(e.tilt_max) == pytest.approx(weight, rel=1e-12)


def test_envelope_rejects_unreachable_hover() -> None:
    p = load_params("cf2x_L250")
    with pytest.raises(ValueError, match="hover"):
        envelope(p._replace(mass=1.0))  # needs 2.45 N per rotor, max is 0.12 N
    with pytest.raises(ValueError, match="hover"):
        envelope(p._replace(mass=0.001))  # below thrust_min
    heavy = load_params("skydio2_x")._replace(mass=2.0)  # T_max == m g: hover at rpm_max only
    assert envelope(heavy).tilt_max == pytest.approx(0.0, abs=1e-7)
    with pytest.raises(ValueError, match="hover"):
        envelope(heavy._replace(mass=2.0 + 1e-9))


@pytest.mark.parametrize("name", ["cf2x_L250", "cf21B_500", "skydio2_x", "mixed"])
def test_terminal_velocity_balances_drag(name: str) -> None:
    if name == "mixed":  # linear and quadratic drag together
        p = load_params("cf2x_T350")._replace(drag_coef=0.002)
    else:
        p = load_params(name)
    e = envelope(p)
    theta = np.linspace(0.0, e.tilt_max, 13)
    v = terminal_velocity(p, theta)
    assert v.shape == theta.shape and np.all(v >= 0.0) and np.all(np.diff(v) > 0.0)
    D = p.drag_matrix
    c = -(D[0, 0] * np.cos(theta) ** 2 + D[2, 2] * np.sin(theta) ** 2)
    drag = p.drag_coef * v**2 + c * v
    np.testing.assert_allclose(drag, p.mass * -p.gravity_vec[2] * np.tan(theta), rtol=1e-12)


def test_terminal_velocity_without_drag_is_infinite() -> None:
    v = terminal_velocity("f450_plus", np.array([0.0, 0.3]))
    assert v[0] == 0.0 and v[1] == math.inf


@pytest.mark.parametrize("name", ["skydio2_x", "cf2x_L250"])
def test_tilt_outside_envelope_raises(name: str) -> None:
    tilt_max = envelope(name).tilt_max
    terminal_velocity(name, tilt_max)  # the limit itself is flyable
    for bad in (tilt_max + 1e-9, -0.01, np.array([0.1, tilt_max * 1.01])):
        with pytest.raises(ValueError, match="tilt"):
            terminal_velocity(name, bad)


def _quadrant(x: float, y: float) -> str:
    ahead = "front" if x > 1e-9 else "back" if x < -1e-9 else ""
    side = "left" if y > 1e-9 else "right" if y < -1e-9 else ""
    return "-".join(t for t in (ahead, side) if t)


def test_conventions_table_matches_presets():
    """docs/conventions.md's motor numbering table describes the presets as they are."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "conventions.md").read_text()
    table = {}
    for row in text.splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) == 7 and cells[1] in ("X", "+"):
            for pattern in re.findall(r"`([^`]+)`", cells[0]):
                table[pattern] = (cells[2:6], cells[6].strip("`").split())
    for name in list_presets():
        matches = [v for k, v in table.items() if fnmatch.fnmatch(name, k)]
        assert len(matches) == 1, f"{name} is not in the conventions table"
        where, spins = matches[0]
        p = load_params(name)
        assert [_quadrant(x, y) for x, y in p.rotor_positions] == where
        assert [1 if s == "+" else -1 for s in spins] == p.rotor_spin.tolist()
