"""Parts a scenario names: sensor tables ``[sensors.<name>]`` and a controller part.

A table under ``[sensors]`` is a sensor part (:mod:`quadsim.loop.parts`): its name is the
table's, ``kind`` says which (a registered kind, ``"package.module:Class"`` or an entry point) and
its other keys are the part's ``rate`` and parameters. A ``[controller]`` whose ``kind`` is not a
built-in one (:data:`BUILTIN_CONTROLLERS`) is a controller part, built from the section's other
keys. Every error names the file, the key and its line, as for the rest of the scenario.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ...loop.brain import Sensors, loop_periods
from ...loop.parts import Context, Sensor, controller_class, part_outputs, sensor_class
from ...loop.parts.checks import check_controller, check_sensor
from .schema import SCHEMA

__all__ = ["BUILTIN_CONTROLLERS", "check_reads", "load_controller", "load_parts", "split_parts"]

BUILTIN_CONTROLLERS = ("geometric", "pid", "policy")
"""The controllers a scenario names without a part (their gains come from ``controller.gains``)."""

_NAME = re.compile(r"[a-z][a-z0-9_]*")
_BUILTIN_READINGS = ("gyro", "accel", "mocap_pos", "mocap_quat", "mocap_stamp", "baro_alt",
                     "gnss_pos", "gnss_vel", "gnss_stamp", "imu_fresh", "mocap_fresh",
                     "baro_fresh", "gnss_fresh")  # fmt: skip
_BUILTIN_SIZES = {"gyro": 3, "accel": 3, "mocap_pos": 3, "mocap_quat": 4, "gnss_pos": 3,
                  "gnss_vel": 3}  # fmt: skip
_BATTERY = ("battery_v", "battery_i", "battery_p", "battery_charge")


class _NotAPartError(Exception):
    """A part class whose ``from_table`` gave something else."""


def split_parts(doc: dict) -> tuple[dict, dict, dict]:
    """``(doc without the part tables, sensor tables by name, controller part's keys)``."""
    doc = dict(doc)
    tables: dict = {}
    sensors = doc.get("sensors")
    if isinstance(sensors, dict):
        tables = {k: v for k, v in sensors.items() if isinstance(v, dict)}
        doc["sensors"] = {k: v for k, v in sensors.items() if k not in tables}
    extra: dict = {}
    ctrl = doc.get("controller")
    if isinstance(ctrl, dict) and ctrl.get("kind", "geometric") not in BUILTIN_CONTROLLERS:
        known = set(SCHEMA["controller"])
        extra = {k: v for k, v in ctrl.items() if k not in known}
        doc["controller"] = {k: v for k, v in ctrl.items() if k in known}
    return doc, tables, extra


def _key_of(e: ValueError, table: dict, default: str) -> tuple[str, str]:
    """``(key, message)`` of a part's ``"key: why"`` error (``default`` for another message)."""
    key, sep, rest = str(e).partition(": ")
    return (key, rest) if sep and key in table else (default, str(e))


def load_parts(tables: dict, dt: float, world: Any, gravity: Any, fail: Any,
               n: int = 2) -> tuple:  # fmt: skip
    """The sensor parts of the ``[sensors.<name>]`` tables, each checked, in file order.

    Each is checked on its table, then its declaration and one step against it for ``min(n,
    2)`` drones (:func:`quadsim.loop.parts.checks.check_sensor`).

    Raises:
        ValueError: ``FILE: sensors.<name>.<key> (line N): why``.
    """
    parts = []
    for name, table in tables.items():
        where = f"sensors.{name}"
        if not _NAME.fullmatch(name):
            raise fail("sensors", name, "a sensor table's name is lower-case letters, digits "
                                        "and _ (it prefixes the part's log columns)")  # fmt: skip
        kind = table.get("kind")
        if not isinstance(kind, str):
            raise fail(where, "kind", f"expected the sensor's kind (e.g. 'rangefinder' or "
                                      f"'package.module:Class'); got {kind!r}")  # fmt: skip
        try:
            cls = sensor_class(kind)
        except ValueError as e:
            raise fail(where, "kind", str(e)) from None
        try:
            part = cls.from_table(name, table, Context(dt, np, world=world, gravity=gravity))
            if not isinstance(part, Sensor):
                raise _NotAPartError(f"{kind}: {cls.__name__}.from_table returned "
                                     f"{type(part).__name__} {part!r:.60}, not a sensor "
                                     "part")  # fmt: skip
            loop_periods(dt, None, Sensors(parts=(part,)))
        except _NotAPartError as e:
            raise fail(where, "kind", str(e)) from None
        except ValueError as e:
            key, why = _key_of(e, table, "rate" if "rate" in table else "kind")
            raise fail(where, key, why) from None
        except Exception as e:  # a user's part failing in its own way: still a bad input
            raise fail(where, "kind", f"{kind} could not be built: {type(e).__name__}: "
                                      f"{e}") from None  # fmt: skip
        try:  # its declaration and one step against it (the runners then agree)
            check_sensor(part, dt, world, gravity, n=min(int(n), 2))
        except ValueError as e:
            raise fail("sensors", name, str(e)) from None
        parts.append(part)
    return tuple(parts)


def load_controller(v: dict, extra: dict, drone: Any, fail: Any) -> Any:
    """The controller part of ``[controller] kind = ...`` at its period: a built-in one from the
    section's ``gains`` or ``path``, a user's from the section's other keys (``extra``).

    The period is ``1 / controller.rate``, else the part's ``default_rate``, else ``sim.dt``; it
    must be a whole number of physics steps.

    Raises:
        ValueError: ``FILE: controller.<key> (line N): why``.
    """  # noqa: D205
    c, kind = v["controller"], v["controller"]["kind"]
    try:
        cls = controller_class(kind)
    except ValueError as e:
        raise fail("controller", "kind", str(e)) from None
    rate = c["rate"] if c["rate"] is not None else getattr(cls, "default_rate", None)
    dt = v["sim"]["dt"] if rate is None else 1.0 / rate
    if rate is not None:
        try:
            loop_periods(v["sim"]["dt"], control_dt=dt)
        except ValueError as e:
            raise fail("controller", "rate", f"{rate:g} Hz: {e}") from None
    table = extra if kind not in BUILTIN_CONTROLLERS else {
        k: c[k] for k in ("gains", "path") if c[k]}  # fmt: skip
    try:
        return cls.from_table(table, drone, dt)
    except ValueError as e:
        key, why = _key_of(e, {**table, **c}, "kind")
        raise fail("controller", key, why) from None
    except Exception as e:
        raise fail("controller", "kind", f"{kind} could not be built: {type(e).__name__}: "
                                         f"{e}") from None  # fmt: skip


def check_reads(control: Any, parts: tuple, v: dict, fail: Any, n_rotors: int = 4) -> None:
    """A controller that reads readings gets only ones its sensors give, and one call of it at
    hover gives a command the loop can fly (:func:`quadsim.loop.parts.checks.check_controller`).

    Raises:
        ValueError: ``FILE: controller.kind (line N): the controller reads [...] ...`` or
            ``<Class>.__call__ returned ...``.
    """  # noqa: D205
    reads = tuple(getattr(control, "reads", None) or ())
    sizes = dict(part_outputs(parts)) | {f"{p.name}_fresh": 1 for p in parts}
    sizes |= {r: _BUILTIN_SIZES.get(r, 1) for r in _BUILTIN_READINGS}
    sizes |= dict.fromkeys(_BATTERY, 1) if v["sim"]["command"] == "pwm" else {}
    missing = [r for r in reads if r not in sizes]
    if missing:
        raise fail("controller", "kind", f"the controller reads {missing}, which no sensor of "
                                         f"the scenario gives (sensor parts: "
                                         f"{[p.name for p in parts]})")  # fmt: skip
    try:
        check_controller(control, n_rotors, sizes, n=min(int(v[""]["n"]), 2))
    except ValueError as e:
        raise fail("controller", "kind", str(e)) from None
