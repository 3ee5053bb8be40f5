"""Validation of a scenario: read, check every key and combination, prepare what to fly.

:func:`load_scenario` reads a file (or TOML text) and :func:`validate_doc` checks a parsed
document: types and ranges key by key (:mod:`.schema`), combinations (:mod:`.checks`), the
memory the run needs (:func:`quadsim.app.preflight.memory_problem`), then :func:`prepare` loads
the drone, reference, world and gains (:mod:`.presets`) and draws the initial states
(:mod:`.initial`). The result is a :class:`Scenario` holding its :class:`Prepared` objects.
"""

from __future__ import annotations

import math
import os
import tomllib
from pathlib import Path
from typing import Any, NamedTuple

from ...engines import native
from ...loop.parts.checks import declared_bytes
from ...physics.params import PhysicalError, check_physical
from ..preflight import memory_problem
from .checks import check_combinations, check_ranges
from .initial import check_start, draw_initial
from .locations import failer, read_text
from .parts import check_reads, load_controller, load_parts, split_parts
from .presets import check_imu, load_drone, load_trajectory, load_world
from .schema import EXPECT, REQUIRED, SCHEMA, Key, type_ok

__all__ = ["Prepared", "Scenario", "default_backend", "load_scenario", "prepare", "validate_doc"]


class Prepared(NamedTuple):
    """What validating a scenario computed, and assembling it reuses (nothing is drawn twice).

    Attributes:
        drone: The nominal :class:`~quadsim.physics.params.Params` (preset and overrides).
        trajectory: The reference ``t -> Reference``.
        world: The :class:`~quadsim.physics.world.World`.
        initial: Per-drone parameters and initial state
            (:func:`~quadsim.app.scenario.initial.draw_initial`).
        gains: The controller's gains.
        parts: The sensor parts of the ``[sensors.<name>]`` tables (:mod:`.parts`).
        control: The controller part (:mod:`quadsim.loop.parts`): a built-in one
            (``geometric``, ``pid``, ``policy``) or a user's.
    """

    drone: Any
    trajectory: Any
    world: Any
    initial: dict
    gains: Any
    parts: tuple = ()
    control: Any = None


class Scenario(NamedTuple):
    """A validated scenario: section -> key -> value (defaults filled), and where it came from.

    ``text`` is the file's text, for the line numbers of errors found while building (``""``:
    unknown, errors then name the key without a line). ``prepared`` holds what validation
    computed (drone, trajectory, world, the random draws, gains) for :func:`build`; ``None``:
    :func:`build` computes it again from ``values``.
    """

    values: dict
    source: str
    text: str = ""
    prepared: Prepared | None = None

    def get(self, path: str) -> Any:
        """Value at ``"section.key"`` (or ``"key"`` for the top level)."""
        section, _, key = path.rpartition(".")
        return self.values[section][key]


def load_scenario(path_or_text: str | os.PathLike[str], *, text: bool = False) -> Scenario:
    """Read and validate a scenario file (or, with ``text=True``, TOML text).

    Besides types and ranges this loads the drone (preset and overrides) and the IMU and checks
    them with :func:`quadsim.physics.params.check_physical`, draws the randomisation exactly as
    :func:`build` will and checks every drone, and checks that no drone starts below the floor
    or inside a wall or box.

    Raises:
        ValueError: ``FILE: KEY (line N): what is wrong``; or ``FILE: what is wrong`` for a file
            that is missing, a directory, unreadable or not text.
    """
    if text:
        raw, where = str(path_or_text), "<scenario>"
    else:
        raw, where = read_text(Path(path_or_text)), str(path_or_text)
    try:
        doc = tomllib.loads(raw)
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{where}: malformed TOML: {e}") from e
    return validate_doc(doc, where, raw)


def validate_doc(doc: dict, where: str, raw: str = "") -> Scenario:
    """Validate a parsed scenario document (what :func:`load_scenario` does after reading the
    TOML): ``where`` names it in errors, ``raw`` (its text, or ``""``) gives the line numbers.

    Raises:
        ValueError: ``WHERE: KEY (line N): what is wrong``.
    """  # noqa: D205
    fail = failer(where, raw)
    doc, part_tables, controller_keys = split_parts(doc)

    values: dict[str, dict] = {}
    for section, keys in SCHEMA.items():
        given = doc if section == "" else doc.get(section, {})
        if not isinstance(given, dict):
            raise fail("", section, "must be a table ([section])")
        values[section] = _section_values(section, keys, given, fail)
    # not schema sections: the parts' own tables (checked by the parts, in prepare)
    values["parts"] = {"sensors": part_tables, "controller": controller_keys}
    if values["sim"]["backend"] == "auto":
        values["sim"]["backend"] = default_backend(values["sim"]["integrator"])
    check_combinations(values, fail)
    check_ranges(values, fail)
    # the memory check, before anything is drawn per drone
    problem = memory_problem(values[""]["n"], values["sim"]["backend"])
    if problem:
        raise fail("", "n", problem)
    prepared = prepare(values, fail)
    return Scenario(values, where, raw, prepared)


def _section_values(section: str, keys: dict, given: dict, fail: Any) -> dict:
    """The values of one section: each key of the schema checked (type, finite, sign, choices)
    or its default, then no key the schema does not know."""  # noqa: D205, D209
    out = {}
    for key, spec in keys.items():
        if key not in given:
            if spec.default is REQUIRED:
                raise fail(section, key, f"missing; expected {EXPECT[spec.type]}")
            out[key] = spec.default
            continue
        out[key] = _checked_value(section, key, spec, given[key], fail)
    unknown = [k for k in given if k not in keys and not (section == "" and k in SCHEMA)]
    if unknown:
        valid = sorted(keys) if section else sorted([*keys, *[s for s in SCHEMA if s]])
        raise fail(section, unknown[0], f"unknown key; valid keys here: {valid}")
    return out


def _checked_value(section: str, key: str, spec: Key, v: Any, fail: Any) -> Any:
    """Value ``v`` given at ``section.key``, checked against its :class:`Key` (floats as float)."""
    if not type_ok(spec.type, v):
        raise fail(section, key, f"expected {EXPECT[spec.type]}; got {v!r}")
    if spec.type == "float":
        v = float(v)
        if not math.isfinite(v):
            raise fail(section, key, f"must be finite; got {v!r}")
    if spec.type in ("vec3", "floats"):
        v = [float(x) for x in v]
        if not all(math.isfinite(x) for x in v):
            raise fail(section, key, f"must be finite; got {v!r}")
    if spec.positive and v <= 0:
        raise fail(section, key, f"must be positive; got {v!r}")
    if spec.nonneg and (min(v) if isinstance(v, list) else v) < 0:
        raise fail(section, key, f"must be >= 0; got {v!r}")
    if spec.type in ("float",) and key.endswith(("_rel", "_std", "_std_deg")) and v < 0:
        raise fail(section, key, f"must be >= 0; got {v!r}")
    if spec.choices is not None and v not in spec.choices:
        raise fail(section, key, f"expected one of {list(spec.choices)}; got {v!r}")
    return v


def default_backend(integrator: str = "rk4") -> str:
    """What ``sim.backend = "auto"`` means here: the fastest backend that runs ``integrator``.

    ``"native"`` where CasADi and a C compiler are available
    (:func:`quadsim.engines.native.available`), else ``"numpy"``; ``"numpy"`` for ``rk45`` (adaptive
    steps run on NumPy only).
    """
    if integrator == "rk45":
        return "numpy"
    return "native" if native.available() else "numpy"


def prepare(v: dict, fail: Any) -> Prepared:
    """Drone, trajectory, world, initial draws and gains of a scenario, every check passed.

    Args:
        v: Values checked key by key (section -> key -> value, defaults filled).
        fail: The error builder of the file (:func:`~quadsim.app.scenario.locations.failer`).
    """
    check_imu(v, fail)
    drone = load_drone(v, fail)
    try:
        traj = load_trajectory(v["trajectory"])
    except ValueError as e:  # what the trajectory itself rejects (e.g. coinciding waypoints)
        key = "waypoints" if v["trajectory"]["kind"] == "min_snap" else "kind"
        raise fail("trajectory", key, str(e)) from None
    world = load_world(v)
    init = draw_initial(v, drone, traj)
    try:  # cannot fail for mass_rel < 1; inertia draws can break the triangle inequality
        check_physical(init["per_drone"])
    except PhysicalError as e:
        key = "mass_rel" if e.key == "mass" else "inertia_rel"
        at = f"drone {e.index[0]}: " if e.index else ""
        raise fail("randomize", key, f"{at}{e.reason}; lower randomize.{key}") from None
    check_start(v, world, init, fail)
    named = v.get("parts", {})
    parts = load_parts(named.get("sensors", {}), v["sim"]["dt"], world, drone.gravity_vec, fail,
                       n=v[""]["n"])  # fmt: skip
    problem = memory_problem(v[""]["n"], v["sim"]["backend"],
                             sum(declared_bytes(p) for p in parts))  # fmt: skip
    if parts and problem:  # what the parts declare counts too
        raise fail("", "n", problem)
    control = load_controller(v, named.get("controller", {}), drone, fail)
    gains = control.gains
    check_reads(control, parts, v, fail, int(drone.mixing_matrix.shape[1]))
    return Prepared(drone, traj, world, init, gains, parts, control)
