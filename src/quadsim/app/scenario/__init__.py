"""Scenario files: one TOML file describes a flight; validated before anything runs.

The schema is :data:`SCHEMA` (section -> key -> :class:`Key`), the one place where defaults live;
``docs/scenarios.md`` prints it (:func:`schema_markdown`, checked by a test). Loading turns
strings into objects (presets, integrators, controllers, trajectories, sensors, world) here and
nowhere else. Every error is a ``ValueError`` that names the file, the key path (``trajectory.
radius``), the line where it can be found, and what was expected.

Example (``examples/figure8_wind.toml``)::

    duration = 12.0
    seed = 1
    [drone]
    preset = "cf2x_L250"
    [trajectory]
    kind = "lemniscate"
    [wind]
    turbulence = "moderate"

The package, one module per job (each imports only those above it here):

- :mod:`.schema`: :data:`SCHEMA`, :class:`Key`, the type check and :func:`schema_markdown`.
- :mod:`.locations`: reading a file, the line of a key (:func:`line_of`), errors naming both.
- :mod:`.presets`: preset names and files loaded into the drone, world, reference, gains.
- :mod:`.initial`: the per-drone draws and the start check (floor, walls, boxes).
- :mod:`.checks`: impossible combinations and ranges across keys; :func:`check_run`, the
  notices before a run.
- :mod:`.validate`: :func:`load_scenario`, :func:`validate_doc`, :class:`Scenario`.
- :mod:`.assemble`: :func:`build` into an :class:`Assembly`, :func:`fly_assembly`,
  :func:`resolved_files`.
"""

from __future__ import annotations

from .assemble import Assembly, build, fly_assembly, resolved_files
from .checks import check_run
from .locations import line_of
from .schema import REQUIRED, SCHEMA, Key, schema_markdown
from .validate import Prepared, Scenario, default_backend, load_scenario, validate_doc

__all__ = [
    "REQUIRED",
    "SCHEMA",
    "Assembly",
    "Key",
    "Prepared",
    "Scenario",
    "build",
    "check_run",
    "default_backend",
    "fly_assembly",
    "line_of",
    "load_scenario",
    "resolved_files",
    "schema_markdown",
    "validate_doc",
]
