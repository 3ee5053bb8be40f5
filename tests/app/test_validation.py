"""Physically impossible inputs are rejected, in the promised format (issue 9, parts 2 to 4).

One home for the physical rules (:func:`quadsim.physics.params.check_physical`), reached from preset
files (the error names the file and key), scenario files (``FILE: KEY (line N): what``) and
``Simulator(params=...)`` (``params['J'][3]: what``).
"""

from __future__ import annotations

import math
import os
import re
import tomllib
import warnings
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from quadsim.app.scenario import build, load_scenario
from quadsim.engines.sim import Simulator
from quadsim.physics.params import (
    Params,
    PhysicalError,
    check_physical,
    list_presets,
    load_params,
    thrust_to_weight,
)
from quadsim.physics.world import Box, Ground, World, below_floor, blocked, box_containing, wall

ROOT = Path(__file__).resolve().parents[2]

# ------------------------------------------------------------------------------ preset files

BASE = """\
mass = 0.5
inertia = [2.3e-3, 2.3e-3, 4.5e-3]
rotor_positions = [[0.17, 0.0], [0.0, 0.17], [-0.17, 0.0], [0.0, -0.17]]
rotor_spin = [1, -1, 1, -1]
thrust_curve = [0.0, 0.0, 3.4e-7]
torque_curve = [0.0, 0.0, 8e-12]
motor_constant = 20.0
rotor_speed_range = [0.0, 4000.0]
"""


def _with(**lines: str | None) -> str:
    """BASE with the line of each given key replaced (``None``: removed) or appended."""
    out = [ln for ln in BASE.splitlines() if ln.split(" =")[0] not in lines]
    return "\n".join(out + [f"{k} = {v}" for k, v in lines.items() if v is not None]) + "\n"


BAD_PRESETS = {
    # key in the message, file text
    "inertia_negative_diagonal": ("inertia", _with(inertia="[2.3e-3, -2.3e-3, 4.5e-3]")),
    "inertia_triangle": ("inertia", _with(inertia="[1e-3, 1e-3, 2.1e-3]")),
    "inertia_indefinite": ("inertia", _with(inertia="[[1, 2, 0], [2, 1, 0], [0, 0, 1]]")),
    "mass_zero": ("mass", _with(mass="0.0")),
    "drag_coef_negative": ("drag_coef", _with(drag_coef="-0.01")),
    "rot_drag_negative": ("rot_drag_coef", _with(rot_drag_coef="-0.01")),
    "drag_not_dissipative": ("drag_matrix", _with(drag_matrix="[-0.1, 0.05, -0.1]")),
    "drag_skew_indefinite": (
        "drag_matrix",
        _with(drag_matrix="[[-0.1, 0.3, 0], [0.3, -0.1, 0], [0, 0, -0.1]]"),
    ),
    "prop_inertia_negative": ("prop_inertia", _with(prop_inertia="-1e-6")),
    "rpm_min_above_max": ("rotor_speed_range", _with(rotor_speed_range="[4000.0, 1000.0]")),
    "rpm_min_equals_max": ("rotor_speed_range", _with(rotor_speed_range="[2000.0, 2000.0]")),
    # new: flat thrust (slope 0 at both ends) was accepted by the old ">= 0" slope test
    "thrust_constant": ("thrust_curve", _with(thrust_curve="[5.0, 0.0, 0.0]")),
    "thrust_decreasing_at_top": (
        "thrust_curve",
        _with(thrust_curve="[0.0, 4e-3, -6e-7]"),  # slope 4e-3 - 1.2e-6 Ω < 0 above 3333 RPM
    ),
    "drag_speed_max_zero": ("drag_speed_max", _with(drag_speed_max="0.0")),
    "drag_speed_max_negative": ("drag_speed_max", _with(drag_speed_max="-3.0")),
    "drag_speed_max_nan": ("drag_speed_max", _with(drag_speed_max="nan")),
    "drag_speed_max_minus_inf": ("drag_speed_max", _with(drag_speed_max="-inf")),
}


@pytest.mark.parametrize("case", sorted(BAD_PRESETS))
def test_impossible_preset_is_rejected_naming_file_and_key(case: str, tmp_path: Path) -> None:
    key, text = BAD_PRESETS[case]
    path = tmp_path / f"{case}.toml"
    path.write_text(text)
    with pytest.raises(ValueError) as info:
        load_params(path)
    msg = str(info.value)
    assert str(path) in msg and repr(key) in msg, msg


def test_base_preset_is_valid_and_flat_body_is_accepted(tmp_path: Path) -> None:
    """The bad cases fail for their one change; a flat plate (J3 = J1 + J2) is a real body."""
    path = tmp_path / "good.toml"
    path.write_text(BASE)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_params(path).mass == 0.5
    path.write_text(_with(inertia="[1e-3, 2e-3, 3e-3]"))
    assert load_params(path).J[2, 2] == 3e-3


def test_cannot_hover_is_a_warning_not_an_error(tmp_path: Path) -> None:
    path = tmp_path / "heavy.toml"
    path.write_text(_with(mass="4.0"))  # T_max = 4 x 3.4e-7 x 4000^2 = 21.76 N; weight 39.24 N
    with pytest.warns(UserWarning, match=r"heavy\.toml: cannot hover: thrust-to-weight 0\.555 < 1"):
        p = load_params(path)
    assert thrust_to_weight(p) == pytest.approx(21.76 / 39.24)


def test_drag_speed_max_default_inf_and_inf_accepted(tmp_path: Path) -> None:
    path = tmp_path / "d.toml"
    path.write_text(BASE)
    assert load_params(path).drag_speed_max == math.inf
    path.write_text(_with(drag_speed_max="inf"))
    assert load_params(path).drag_speed_max == math.inf
    path.write_text(_with(drag_speed_max='{ value = 12.5, unit = "m/s" }'))
    assert load_params(path).drag_speed_max == 12.5


@pytest.mark.parametrize("name", list_presets())
def test_every_preset_states_its_drag_validity_range(name: str) -> None:
    text = (resources.files("quadsim.physics") / "presets" / f"{name}.toml").read_text("utf-8")
    entry = tomllib.loads(text)["drag_speed_max"]
    assert entry["unit"] == "m/s" and entry["source"]
    assumed = "ASSUMPTION" in entry["source"]
    assert assumed or name == "skydio2_x", "only seed 002 states the speed of its drag model"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every shipped preset can hover: no warning
        p = load_params(name)
    assert 0.0 < p.drag_speed_max == entry["value"] < math.inf
    assert thrust_to_weight(p) > 1.0


def test_params_fields_are_appended_with_defaults() -> None:
    p = load_params("cf2x_L250")
    new = ("drag_speed_max", "warmup_coef", "warmup_time", "inflow_coef")
    assert Params._fields[-4:] == new and p.drag_speed_max == 2.0
    assert (p.warmup_coef, p.warmup_time, p.inflow_coef) == (0.0, math.inf, 0.0)  # off
    old_style = Params(*p[:-4])  # positional construction without the new fields still works
    assert old_style.drag_speed_max == math.inf and old_style.inflow_coef == 0.0
    assert p._replace(mass=0.04).drag_speed_max == 2.0


# --------------------------------------------------------------------------- check_physical


def test_check_physical_names_the_first_bad_drone() -> None:
    J = np.tile(np.diag([1.0, 1.0, 1.5]), (6, 1, 1))
    J[4] = np.diag([1.0, 1.0, 2.5])
    with pytest.raises(PhysicalError, match="triangle") as info:
        check_physical({"J": J})
    assert info.value.key == "J" and info.value.index == (4,)
    J[1, 0, 0] = -1.0
    with pytest.raises(PhysicalError, match="diagonal") as info:
        check_physical({"J": J})
    assert info.value.index == (1,)
    with pytest.raises(PhysicalError) as info:
        check_physical({"mass": np.array([1.0, 0.5, -0.1])})
    assert info.value.index == (2,) and str(info.value) == "mass[2]: must be > 0; got -0.1"
    check_physical({"J": np.tile(np.diag([1.0, 1.0, 2.0]), (3, 1, 1)), "mass": np.ones(3)})


def test_check_physical_thrust_curve_ends() -> None:
    ok = {"rpm_min": 0.0, "rpm_max": 4000.0, "rpm2thrust": [0.0, 0.0, 1e-7]}
    check_physical(ok)  # slope 0 at Ω = 0 only: still strictly increasing
    with pytest.raises(PhysicalError, match="strictly increasing"):
        check_physical(ok | {"rpm2thrust": [0.0, -1e-4, 1e-8]})  # slope < 0 at rpm_min
    with pytest.raises(PhysicalError, match="rpm_min < rpm_max"):
        check_physical(ok | {"rpm_min": 4000.0})


# ----------------------------------------------------------------- Simulator(params=...)


@pytest.mark.parametrize(
    ("key", "bad", "expect"),
    [
        ("J", lambda J: J.__setitem__((3, 2, 2), -1e-5), r"params\['J'\]\[3\]: diagonal"),
        ("J", lambda J: J.__setitem__((3, 2, 2), 4e-5), r"params\['J'\]\[3\]: principal"),
        ("mass", lambda m: m.__setitem__(3, -0.03), r"params\['mass'\]\[3\]: must be > 0"),
        ("drag_coef", lambda d: d.__setitem__(3, -1.0), r"params\['drag_coef'\]\[3\]: must be"),
    ],
)
def test_simulator_per_drone_params_name_the_drone(key, bad, expect) -> None:
    p = load_params("cf2x_L250")
    value = np.array([np.asarray(getattr(p, key), dtype=float)] * 5)
    Simulator(p, n=5, params={key: value.copy()})  # the good batch flies
    bad(value)
    with pytest.raises(ValueError, match=expect):
        Simulator(p, n=5, params={key: value})


# -------------------------------------------------------------------------------- world


def test_world_obstacle_helpers() -> None:
    world = World(
        ground=Ground(height=0.5), boxes=(wall("x", 3.0), Box((0.0, 0.0, 0.0), (1.0, 1.0, 1.0)))
    )
    pts = np.array([[0.0, 0.0, 0.4], [0.0, 0.0, 0.5], [3.5, 0.0, 1.0], [0.5, 0.5, 0.7],
                    [1.0, 0.5, 0.7], [3.0, 0.0, 1.0]])  # fmt: skip
    assert below_floor(world, pts).tolist() == [True, False, False, False, False, False]
    assert box_containing(world, pts).tolist() == [-1, -1, 0, 1, -1, -1]  # faces are outside
    assert blocked(world, pts).tolist() == [True, False, True, True, False, False]
    assert not below_floor(World(ground=None), [0.0, 0.0, -5.0])
    bounded = World(bounds=Box((-1.0, -1.0, -1.0), (1.0, 1.0, 2.0)))
    assert blocked(bounded, [[0.0, 0.0, 1.0], [0.0, 0.0, 3.0]]).tolist() == [False, True]


# ---------------------------------------------------------------------------- scenarios


def load(text: str):
    return load_scenario(text, text=True)


WALL = "[world]\nwalls = [{axis = 'x', at = 3.0}]\n"

BAD_SCENARIOS = [
    # (text, key path, line, more of the message)
    ("# drone\n[drone]\npreset = 'cf9_nope'\n", "drone.preset", 3, "unknown preset 'cf9_nope'"),
    ("[drone]\npreset = 'no/such/file.toml'\n", "drone.preset", 2, "not found"),
    ("[sensors]\n\nimu = 'mpu6050'\n", "sensors.imu", 3, "unknown IMU preset 'mpu6050'"),
    ("name = 'x'\nseed = -1\n", "seed", 2, "must be >= 0"),
    ("[drone]\nmass = 0.03\ndrag_coef = -0.1\n", "drone.drag_coef", 3, "must be >= 0"),
    ("[drone]\ninertia = [1e-5, -1e-5, 2e-5]\n", "drone.inertia", 2, "must be > 0"),
    ("[drone]\ninertia = [1e-5, 1e-5, 3e-5]\n", "drone.inertia", 2, "triangle inequality"),
    ("[drone]\nmass = 0.5\n", "drone.mass", 2, "cannot hover"),
    ("[world]\nrestitution = 1.5\n", "world.restitution", 2, "[0, 1]"),
    ("[world]\nrestitution = -0.2\n", "world.restitution", 2, "[0, 1]"),
    ("[world]\nfriction = -0.3\n", "world.friction", 2, "must be >= 0"),
    ("n = 4\n[randomize]\nspacing = -1.0\n", "randomize.spacing", 3, "must be >= 0"),
    ("[randomize]\nmass_rel = 2.0\n", "randomize.mass_rel", 2, "must be < 1"),
    ("[randomize]\nmass_rel = 1.0\n", "randomize.mass_rel", 2, "must be < 1"),
    ("[randomize]\ninertia_rel = 1.5\n", "randomize.inertia_rel", 2, "must be < 1"),
    (  # a flat-ish Crazyflie randomised by 20 %: some drone breaks J1 + J2 >= J3
        "n = 8\n[randomize]\ninertia_rel = 0.2\n",
        "randomize.inertia_rel",
        3,
        "drone 2: principal moments",
    ),
    (
        "[initial]\nstart_on_reference = false\npos = [0.0, 0.0, -0.5]\n",
        "initial.pos",
        3,
        "below the floor",
    ),
    (
        "[initial]\nstart_on_reference = false\npos = [4.0, 0.0, 1.0]\n" + WALL,
        "initial.pos",
        3,
        "inside world.walls[0]",
    ),
    (
        "[initial]\nstart_on_reference = false\npos = [0.5, 0.5, 0.5]\n[world]\n"
        "boxes = [{lo = [0, 0, 0], hi = [1, 1, 1]}]\n",
        "initial.pos",
        3,
        "inside world.boxes[0]",
    ),
    (
        "[world]\nground_height = 2.0\n",  # the default reference hovers at z = 1
        "trajectory.center",
        None,
        "the reference starts at [0.0, 0.0, 1.0], below the floor",
    ),
    ("[trajectory]\ncenter = [4.0, 0.0, 1.0]\n" + WALL, "trajectory.center", 2, "walls[0]"),
    (
        "[trajectory]\nkind = 'min_snap'\nwaypoints = [[3.5, 0, 1], [0, 0, 1]]\n" + WALL,
        "trajectory.waypoints",
        3,
        "inside world.walls[0]",
    ),
    (
        "n = 4\n[trajectory]\ncenter = [2.0, 0.0, 1.0]\n[randomize]\nspacing = 2.5\n" + WALL,
        "randomize.spacing",
        5,
        "the formation: drone 1 would start at [3.25, -1.25, 1.0], inside world.walls[0]",
    ),
    (
        "n = 4\nseed = 0\n[trajectory]\ncenter = [0.0, 0.0, 0.1]\n[randomize]\npos_std = 0.5\n",
        "randomize.pos_std",
        6,
        "the random draw (seed = 0): drone 0 would start at",
    ),
]


@pytest.mark.parametrize(("text", "key", "line", "what"), BAD_SCENARIOS)
def test_bad_scenario_names_key_and_line(text: str, key: str, line: int | None, what: str):
    with pytest.raises(ValueError) as info:
        load(text)
    msg = str(info.value)
    at = f" (line {line})" if line else ""
    assert msg.startswith(f"<scenario>: {key}{at}: "), msg
    assert what in msg, msg


def test_scenario_file_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("duration = 2.0\n\n[drone]\ninertia = [1e-5, 1e-5, 3e-5]\n")
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}: drone\.inertia \(line 4\): "):
        load_scenario(path)


def test_no_floor_means_a_start_below_zero_is_fine() -> None:
    load("[world]\nground = false\n[initial]\nstart_on_reference = false\npos = [0, 0, -3]\n")
    load("[initial]\nstart_on_reference = false\npos = [0, 0, 0]\n")  # on the floor: landed


@pytest.mark.parametrize(
    ("text", "key", "line"),
    [
        ('"drône" = 1\n', "drône", 1),
        ("name = 'x'\n\n'drône' = 1\n", "drône", 3),
        ('duration = 2.0\n[wind]\nmean = [1, 0, 0]\n"vitesse" = 2\n', "wind.vitesse", 4),
        ("[wind]\n'vitesse' = 2\n", "wind.vitesse", 2),
        ('["wind"]\n# comment\n"vitesse" = 2\n', "wind.vitesse", 3),
        ("seed = 1\nwind.vitesse = 2\n", "wind.vitesse", 2),
        ("seed = 1\n\"wind\".'vitesse' = 2\n", "wind.vitesse", 2),
        ("seed = 1\nwind = { mean = [1, 0, 0], \"vitesse\" = 2 }\n", "wind.vitesse", 2),
        ("[wind]\nmean = [0, 0, 0]\n[sim]\n\"wind\" = 1\n", "sim.wind", 4),
    ],
)
def test_quoted_and_dotted_keys_get_their_line(text: str, key: str, line: int) -> None:
    with pytest.raises(ValueError, match=rf"^<scenario>: {key} \(line {line}\): unknown key"):
        load(text)


def test_override_in_inline_table_gets_its_line() -> None:
    text = "seed = 2\ndrone = { preset = 'cf2x_L250', drag_coef = -1.0 }\n"
    with pytest.raises(ValueError, match=r"drone\.drag_coef \(line 2\): must be >= 0"):
        load(text)


def test_binary_scenario_is_not_a_text_file(tmp_path: Path) -> None:
    nul = tmp_path / "nul.toml"
    nul.write_bytes(b"duration = 1.0\n\x00\x01\x02")
    with pytest.raises(ValueError, match=rf"^{re.escape(str(nul))}: not a text file \(.*NUL"):
        load_scenario(nul)
    latin = tmp_path / "latin.toml"
    latin.write_bytes('name = "café"\n'.encode("latin-1"))
    with pytest.raises(ValueError, match=rf"^{re.escape(str(latin))}: not a text file \(.*UTF-8"):
        load_scenario(latin)


def test_directory_scenario_says_so(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=rf"^{re.escape(str(tmp_path))}: is a directory"):
        load_scenario(tmp_path)
    with pytest.raises(ValueError, match=r"nope\.toml: scenario file not found"):
        load_scenario(tmp_path / "nope.toml")


def test_unreadable_scenario_read_error_is_a_value_error(tmp_path, monkeypatch) -> None:
    """The OSError path, forced (runs as root too): ``FILE: cannot read: <reason>``."""
    path = tmp_path / "locked.toml"
    path.write_text("duration = 1.0\n")

    def denied(self):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_bytes", denied)
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}: cannot read: Permission"):
        load_scenario(path)


@pytest.mark.skipif(
    hasattr(os, "geteuid") and os.geteuid() == 0,
    reason="running as root: chmod 000 does not stop root from reading the file",
)
def test_unreadable_scenario_chmod_000_not_root(tmp_path: Path) -> None:
    path = tmp_path / "locked.toml"
    path.write_text("duration = 1.0\n")
    path.chmod(0)
    try:
        with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}: cannot read: "):
            load_scenario(path)
    finally:
        path.chmod(0o644)


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("name", list_presets())
def test_every_preset_flies_in_a_scenario(name: str) -> None:
    kind = "pid" if name == "f450_plus" else "geometric"
    gains = resources.files("quadsim.physics") / "presets" / "gains" / f"{name}_{kind}.toml"
    text = f"[drone]\npreset = '{name}'\n[controller]\nkind = '{kind}'\n"
    if gains.is_file():
        assert build(load(text)).drone.name == name
    else:  # no gains for this drone: said when the file is loaded, naming the key
        with pytest.raises(ValueError, match=r"controller\.gains \(line 3\): unknown gains"):
            load(text)


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("path", sorted((ROOT / "examples").glob("*.toml")), ids=lambda p: p.name)
def test_every_example_scenario_loads_and_builds_without_warning(path: Path) -> None:
    objs = build(load_scenario(path))
    assert objs.sim.n == load_scenario(path).get("n")
