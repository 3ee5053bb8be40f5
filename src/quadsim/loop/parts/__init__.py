"""Parts of the closed loop: what a sensor declares, and how a scenario names one.

A **sensor part** is an object the loop carries in a collection (:attr:`Sensors.parts
<quadsim.loop.brain.Sensors>`), never as a keyword argument of its own. It declares:

* ``name``: its instance name (the scenario table's), the prefix of its log keys;
* ``rate``: samples per second (a whole number of physics steps), or ``None`` for every step;
* ``streams``: ``((stream, count), ...)``, the standard normals it draws at each step
  (counter-based, :func:`quadsim.physics.noise.normals` of ``(seed, stream, step, drone)``;
  a stream of its own name hashes to its own numbers, :func:`quadsim.physics.noise.stream_id`);
* ``outputs``: ``(Output, ...)``: the readings it gives, with sizes, units and meanings; they
  become log columns (``<name>_<output>``), what estimators and controllers read, and the
  summary's column list;
* ``init(n, truth, ctx) -> state`` and ``measure(k, truth, state, z, ctx) -> (readings, state)``,
  pure array-API functions of the true :class:`~quadsim.engines.state.State` ``(n, ...)``, its
  state (a tree of arrays or ``None``), its normals ``z`` ``(n, count)`` and a :class:`Context`;
* ``ros2(ctx)``: the ROS 2 messages its readings become (:class:`Ros2`, of any standard ROS 2
  type; ``quadsim ros2`` publishes them when a reading is new, ``--rosbag`` writes them at every
  logged sample); ``ctx`` gives its sample period, on which a covariance may depend.
* ``params``: ``{name: Param}``, the parameters its scenario table gives (:func:`check_params`):
  numbers, vectors or small matrices (:attr:`Param.shape`, a read-only float64 array on the
  part), with their units; the run metadata lists them (:func:`part_params`).

The loop wires the rest: each part's normals are cut from the step's, its readings are taken at
its period and held in between (``<name>_fresh`` tells when a reading is new), its state joins the
loop's, and every runner (per step, ``lax.scan``, generated C) runs it because all three run
the same per-step function (:func:`quadsim.loop.brain.make_brain`). A part that cannot be traced
(CasADi or JAX) runs on the per-step loop, with the reason in the run's ``loop_reason``.

A **controller part** is a class built from its scenario table with ``from_table(table,
drone, dt)`` (its :attr:`Controller.params` checked by :func:`check_params`) into a callable
``(state, ref, gains, cstate[, readings]) -> (command, cstate)`` with ``gains``, ``init_state``,
``command`` (``"wrench"`` or ``"rpm"``) and ``reads``: the readings it takes (a sensor part's
``<name>_<output>``), given as a dict when it has any (:func:`quadsim.loop.brain.make_brain`).

Parts are named by ``kind``: a registered name (:data:`SENSORS`; built-ins register there, one
line each), ``"package.module:Class"`` (a user's part, imported on use), or the name of an entry
point (groups :data:`ENTRY_POINTS`). :func:`sensor_class` and :func:`controller_class` turn a kind
into its class; a sensor class builds itself from its scenario table with ``from_table(name,
table, ctx)`` after :func:`check_params` of its declared :attr:`Sensor.params`.

A kind names code: importing a user's module runs it, so a scenario file is trusted like a
script. The class must subclass :class:`Sensor` or :class:`Controller` (checked before any of its
code is called); whatever its module does wrong on import (an exception, ``sys.exit``) is a
``ValueError`` naming the kind, and a program's ``__main__`` module is refused unimported.
"""

from __future__ import annotations

import importlib
import math
import re
from typing import Any, ClassVar, NamedTuple

import numpy as np

__all__ = [
    "CONTROLLERS",
    "ENTRY_POINTS",
    "MAX_PARAM_AXES",
    "MAX_PARAM_SIZE",
    "SENSORS",
    "Context",
    "Controller",
    "Output",
    "Param",
    "Ros2",
    "Sensor",
    "check_params",
    "controller_class",
    "log_columns",
    "output_key",
    "param_unit",
    "part_outputs",
    "part_params",
    "sensor_class",
]

SENSORS = {
    "rangefinder": "quadsim.loop.parts.rangefinder:Rangefinder",
}
"""Built-in sensor parts: kind -> ``module:Class`` (imported when a scenario names it)."""

CONTROLLERS = {
    "geometric": "quadsim.loop.control.parts:Geometric",
    "pid": "quadsim.loop.control.parts:Pid",
}
"""Built-in controller parts: kind -> ``module:Class`` (``policy``, in the application layer,
registers itself as an entry point of ``quadsim.controllers``)."""

ENTRY_POINTS = {"sensor": "quadsim.sensors", "controller": "quadsim.controllers"}
"""The entry-point group a package registers its parts under (``kind = "<entry point name>"``)."""

_NAME = re.compile(r"[a-z][a-z0-9_]*")


class Output(NamedTuple):
    """One reading a part gives.

    Attributes:
        name: Its name; the log key is ``<part name>_<name>``.
        size: Entries per drone (1: a scalar per drone, logged as ``(T, N)``).
        unit: Unit of every entry (``"m"``, ``"1"``, ...).
        description: What it is, for the log's column table.
        key: The log and reading key when not ``<part name>_<name>`` (the built-in IMU's
            ``gyro`` and ``accel``).
        logged: ``False``: read by estimators and controllers, not logged (motion capture's
            attitude).
    """

    name: str
    size: int
    unit: str
    description: str
    key: str = ""
    logged: bool = True


class Ros2(NamedTuple):
    """A ROS 2 message a part's readings are published as (``quadsim ros2``, ``--rosbag``).

    Attributes:
        type: Its ROS 2 type, ``"pkg/msg/Type"``: any of the standard ROS 2 interfaces
            quadsim ships (``std_msgs``, ``geometry_msgs``, ``sensor_msgs``, ``nav_msgs``, ...;
            :mod:`quadsim.app.ros2.interfaces`, which checks a declaration against the type's
            definition before anything flies).
        fields: ``((field, output), ...)``: the message's fields (a dotted path) that take the
            part's readings (its outputs' names). An output of size ``k`` fills a field that
            holds ``k`` floats (``float32`` or ``float64``), in order: a number, a vector
            (``angular_velocity``: ``x, y, z``), any message of numbers, a fixed-size array or
            a sequence (of the output's size).
        constants: ``((field, value), ...)``: the message's fixed fields; a value is a number
            (an integer for an integer field), a sequence of numbers for an array or sequence
            field (a covariance), or a string for a string field.
        valid: An output whose ``0`` means "no reading": the ``fields`` are then ``+inf`` (the
            ROS convention for a range sensor that detects nothing, REP 117), or ``""``.
        leaf: The topic's last name, ``/<namespace>/<drone>/<leaf>`` (default the part's name).
    """

    type: str
    fields: tuple[tuple[str, str], ...]
    constants: tuple[tuple[str, Any], ...] = ()
    valid: str = ""
    leaf: str = ""


class Param(NamedTuple):
    """A parameter a part takes from its scenario table.

    Attributes:
        default: Its value when the table omits it: a float, a nested sequence of ``shape``
            (``(0.0, 0.0, 0.0)``), or ``None``: required.
        doc: What it is, with its unit (``"noise std [m]"``).
        lo: Smallest allowed value (inclusive) of every entry, or ``None``.
        hi: Largest allowed value (inclusive) of every entry, or ``None``.
        positive: Every entry must be ``> 0``.
        shape: ``()`` for a number, ``(3,)`` for a vector, ``(3, 3)`` for a matrix (at most
            :data:`MAX_PARAM_AXES` axes, :data:`MAX_PARAM_SIZE` entries): the scenario gives a
            list of that shape (``mount_pos = [0.02, 0.0, 0.0]``), the part gets a read-only
            float64 array.
        unit: The unit of every entry (default: the last ``[...]`` of ``doc``).
    """

    default: Any
    doc: str
    lo: float | None = None
    hi: float | None = None
    positive: bool = False
    shape: tuple[int, ...] = ()
    unit: str = ""


MAX_PARAM_AXES = 2
"""The most axes a part's parameter has (a vector, a small matrix)."""
MAX_PARAM_SIZE = 1024
"""The most entries a part's parameter has."""


class Context(NamedTuple):
    """What a part's functions may use besides the state.

    Attributes:
        dt: Physics step [s].
        xp: The array namespace of the step (NumPy, JAX, or the traced one).
        seed: The run's seed (for :func:`quadsim.physics.noise.normals` at ``init``).
        k0: The step a flight starts at.
        world: The :class:`~quadsim.physics.world.World`, or ``None``.
        gravity: Gravity vector [m/s²] ``(3,)``.
        period: The part's period in physics steps (its samples are ``period * dt`` apart).
        due: Where a sample is due at this step (``True``, or per drone ``(n,)``); what a part
            that holds its own readings (:attr:`Sensor.holds`) reads.
    """

    dt: float
    xp: Any
    seed: int = 0
    k0: int = 0
    world: Any = None
    gravity: Any = (0.0, 0.0, -9.81)
    period: int = 1
    due: Any = True


class Sensor:
    """Base of a sensor part (the module docstring); subclasses set the class attributes and
    write :meth:`measure`."""  # noqa: D205, D209

    kind: ClassVar[str] = ""
    """The registered name (informational)."""
    outputs: ClassVar[tuple[Output, ...]] = ()
    params: ClassVar[dict[str, Param]] = {}
    default_rate: ClassVar[float | None] = None
    """[Hz] its rate when a scenario table gives none (``None``: every physics step)."""
    streams: tuple[tuple[str, int], ...] = ()
    label: str = ""
    """How messages name it (default ``sensor <name>``)."""
    faster_ok: ClassVar[bool] = False
    """A rate above the physics rate, a whole multiple of it, is read once per physics step."""
    held_state: ClassVar[bool] = False
    """Its state, like its readings, moves on only at its samples (held in between)."""
    holds: ClassVar[bool] = False
    """It holds its own readings (in its state) and says when they are new: its readings
    include ``fresh``; the loop then holds nothing for it."""

    def __init__(self, name: str, rate: float | None = None, **values: Any) -> None:
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ValueError(f"a part's name is lower-case letters, digits and _; got {name!r}")
        if rate is not None and (isinstance(rate, bool) or not isinstance(rate, int | float)
                                 or not (math.isfinite(rate) and rate > 0)):  # fmt: skip
            raise ValueError(f"rate: must be a positive number of Hz; got {rate!r}")
        self.name, self.rate = name, None if rate is None else float(rate)
        for key, value in check_params(self.params, values).items():
            setattr(self, key, value)

    @classmethod
    def from_table(cls, name: str, table: dict, ctx: Context) -> Sensor:
        """The part of a scenario table (its keys: ``rate``, default :attr:`default_rate`, and
        :attr:`params`)."""  # noqa: D205, D209
        values = {k: v for k, v in table.items() if k not in ("kind", "rate")}
        return cls(name, table.get("rate", cls.default_rate), **values)

    def init(self, n: int, truth: Any, ctx: Context) -> Any:
        """The part's state at a flight's start (default: none)."""
        return None

    def measure(self, k: Any, truth: Any, state: Any, z: Any, ctx: Context) -> tuple[dict, Any]:
        """``(readings by output name, state)`` at step ``k`` of the true state ``truth``."""
        raise NotImplementedError

    def ros2(self, ctx: Context) -> tuple[Ros2, ...]:
        """The ROS 2 messages its readings are published as (default: none); ``ctx`` has the
        physics step and the part's period (its samples are ``ctx.period * ctx.dt`` apart)."""  # noqa: D205, D209
        return ()

    def __repr__(self) -> str:
        vals = ", ".join(f"{k}={_shown(getattr(self, k))!r}" for k in self.params)
        return f"{type(self).__name__}({self.name!r}, rate={self.rate!r}, {vals})"


def _shown(v: Any) -> Any:
    """A parameter's value as :meth:`Sensor.__repr__` shows it (an array as nested lists)."""
    return v.tolist() if isinstance(v, np.ndarray) else v


def _interval(p: Param) -> str:
    """``[lo, hi]`` of a parameter, open where unbounded (``(0, 100]`` for a positive one)."""
    lo = "(0" if p.lo is None and p.positive else "(-inf" if p.lo is None else f"[{p.lo}"
    return f"{lo}, {'inf)' if p.hi is None else f'{p.hi}]'}"


def check_params(params: dict[str, Param], values: dict) -> dict[str, Any]:
    """``values`` completed with the defaults, each checked against its :class:`Param`.

    A scalar parameter is a ``float``; one of ``shape`` ``(3,)`` or ``(3, 3)`` a read-only float64
    array of that shape (given as a nested list, tuple or array of exactly that shape); every
    entry finite, in ``[lo, hi]`` and ``> 0`` where the parameter says so.

    Raises:
        ValueError: ``"<key>: why"`` for an unknown key, a missing one, a value that is not a
            finite number (or an array of them of the declared shape) or out of its range (the
            scenario adds the file and line).
    """
    unknown = sorted(set(values) - set(params))
    if unknown:
        raise ValueError(f"{unknown[0]}: unknown parameter; known: {sorted(params)}")
    out = {}
    for key, p in params.items():
        v = values.get(key, p.default)
        if v is None:
            raise ValueError(f"{key}: required ({p.doc})")
        shape = tuple(getattr(p, "shape", ()) or ())
        a = _param_array(key, p, shape, v)
        for j, x in enumerate(a.ravel().tolist()):
            at = f" (entry {[int(i) for i in np.unravel_index(j, shape)]})" if shape else ""
            if p.positive and not x > 0:
                raise ValueError(f"{key}: must be > 0 ({p.doc}); got {v!r}{at}")
            if (p.lo is not None and x < p.lo) or (p.hi is not None and x > p.hi):
                raise ValueError(f"{key}: must be in {_interval(p)} ({p.doc}); got "
                                 f"{v!r}{at}")  # fmt: skip
        if shape:
            a.flags.writeable = False
            out[key] = a
        else:
            out[key] = float(a)
    return out


def _param_array(key: str, p: Param, shape: tuple, v: Any) -> np.ndarray:
    """``v`` as a float64 array of ``shape`` (``()``: a number), finite; else ``ValueError``."""
    if len(shape) > MAX_PARAM_AXES or not all(
            isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in shape) or (
            math.prod(shape) > MAX_PARAM_SIZE):  # fmt: skip
        raise ValueError(f"{key}: its declared shape {shape!r} is not one of at most "
                         f"{MAX_PARAM_AXES} axes of whole sizes and {MAX_PARAM_SIZE} "
                         "entries")  # fmt: skip
    want = "a finite number" if not shape else (
        f"a {'list' if len(shape) == 1 else 'nested list'} of finite numbers of shape "
        f"{list(shape)}")  # fmt: skip
    try:
        raw = np.asarray(v, dtype=object) if isinstance(v, list | tuple | np.ndarray) else v
    except ValueError:  # ragged
        raw = None
    flat = raw.ravel().tolist() if isinstance(raw, np.ndarray) else [raw]
    ok = all(isinstance(x, int | float | np.integer | np.floating)
             and not isinstance(x, bool | np.bool_) for x in flat)  # fmt: skip
    got_shape = raw.shape if isinstance(raw, np.ndarray) else ()
    if not ok or got_shape != shape or not all(math.isfinite(x) for x in flat):
        got = ("" if got_shape == shape or not ok else " (a number)" if not got_shape
               else f" of shape {list(got_shape)}")  # fmt: skip
        raise ValueError(f"{key}: must be {want} ({p.doc}); got {v!r}{got}")
    return np.array(flat, dtype=np.float64).reshape(shape)


def param_unit(p: Param) -> str:
    """A parameter's unit: :attr:`Param.unit`, else the last ``[...]`` of its doc (``""``)."""
    if getattr(p, "unit", ""):
        return p.unit
    found = re.findall(r"\[([^\[\]]+)\]", p.doc)
    return found[-1] if found else ""


def part_params(parts: Any) -> dict[str, dict]:
    """The sensor parts' parameters, for the run metadata (``meta["part_params"]``): per part
    name ``{"kind", "rate_hz", "params"}``, ``params`` ``{key: {"value", "unit", "shape"}}``
    (a vector's or matrix's value as nested lists)."""  # noqa: D205, D209
    out = {}
    for part in parts:
        cls = type(part)
        params = {}
        for key, p in getattr(part, "params", {}).items():
            v = getattr(part, key, p.default)
            value = np.asarray(v, dtype=np.float64).tolist() if v is not None else None
            params[key] = {"value": value, "unit": param_unit(p), "shape": list(p.shape)}
        out[part.name] = {"kind": f"{cls.__module__}:{cls.__qualname__}",
                          "rate_hz": part.rate, "params": params}  # fmt: skip
    return out


def _imported(kind: str, what: str, module: str, load: Any) -> Any:
    """``load()`` (the import a kind names), every failure of the imported code a ValueError.

    A scenario names code: importing a user's module runs it (scenario files are trusted like
    scripts). What that code does wrong when imported, an exception or ``sys.exit``, is the
    scenario's mistake (exit 2 with the key), not quadsim's; a Ctrl-C stays a Ctrl-C.
    """
    if module.rpartition(".")[2] == "__main__":
        raise ValueError(f"{what} kind {kind!r}: {module!r} is a program's __main__ module, which "
                         "runs the program when imported; name the module that defines the "
                         "part")  # fmt: skip
    try:
        return load()
    except ImportError as e:
        raise ValueError(f"{what} kind {kind!r}: cannot import {module!r} ({e})") from None
    except SystemExit as e:
        raise ValueError(f"{what} kind {kind!r}: importing {module!r} ended the program "
                         f"(SystemExit({e.code!r})); nothing was flown") from None  # fmt: skip
    except Exception as e:
        raise ValueError(f"{what} kind {kind!r}: importing {module!r} failed: "
                         f"{type(e).__name__}: {e}") from None  # fmt: skip


def _resolve(kind: str, what: str, registry: dict[str, str], base: type) -> type:
    """The class of a part ``kind``: registered, ``"module:Class"``, or an entry point; a
    subclass of ``base`` (checked before anything of it is called)."""  # noqa: D205, D209
    target = registry.get(kind)
    if target is None and ":" not in str(kind):
        from importlib import metadata  # only here: importing it adds ~15 ms to start-up

        eps = {ep.name: ep for ep in metadata.entry_points(group=ENTRY_POINTS[what])}
        if kind not in eps:
            raise ValueError(f"unknown {what} kind {kind!r}; known: {sorted({*registry, *eps})}, "
                             f"or 'package.module:Class'")  # fmt: skip
        ep = eps[kind]
        cls = _imported(kind, what, ep.module, ep.load)
        where = f"the entry point {ep.value!r} of {ENTRY_POINTS[what]!r}"
    else:
        module, _, attr = (target or kind).partition(":")
        if not module or not attr:
            raise ValueError(f"{what} kind {kind!r}: expected 'package.module:Class'")
        cls = getattr(_imported(kind, what, module, lambda: importlib.import_module(module)),
                      attr, None)  # fmt: skip
        if cls is None:
            raise ValueError(f"{what} kind {kind!r}: {module!r} has no {attr!r}")
        where = f"{module}:{attr}"
    if not (isinstance(cls, type) and issubclass(cls, base)):
        raise ValueError(f"{what} kind {kind!r}: {where} is not a {what} part (a subclass of "
                         f"quadsim.loop.parts.{base.__name__}); got {cls!r}")  # fmt: skip
    return cls


def sensor_class(kind: str) -> type:
    """The class of a sensor ``kind``: registered (:data:`SENSORS`), ``"module:Class"``, or an
    entry point of the ``quadsim.sensors`` group.

    Raises:
        ValueError: An unknown kind, a module that does not import (or fails, or exits, when
            imported; a program's ``__main__`` module is not imported at all), a missing class,
            or a class that is not a :class:`Sensor` (saying which, and the known kinds).
    """  # noqa: D205
    return _resolve(kind, "sensor", SENSORS, Sensor)


def controller_class(kind: str) -> type:
    """The class of a controller ``kind``: registered (:data:`CONTROLLERS`), ``"module:Class"``,
    or an entry point of the ``quadsim.controllers`` group (as :func:`sensor_class`)."""  # noqa: D205, D209
    return _resolve(kind, "controller", CONTROLLERS, Controller)


class Controller:
    """Base of a controller part (the module docstring): subclasses set :attr:`params` and
    :attr:`reads` and write ``__call__``; ``gains`` is what :meth:`from_table` made."""  # noqa: D205, D209

    params: ClassVar[dict[str, Param]] = {}
    command: ClassVar[str | None] = "wrench"
    reads: tuple[str, ...] = ()

    def __init__(self, gains: Any) -> None:
        self.gains = gains

    @classmethod
    def from_table(cls, table: dict, drone: Any, dt: float) -> Controller:
        """The controller of a scenario's ``[controller]`` table (keys besides ``kind``)."""
        raise NotImplementedError

    def init_state(self, gains: Any, shape: tuple, xp: Any = None, dtype: Any = None) -> Any:
        """The controller state of ``shape`` drones at the start (default: none)."""
        return None


def output_key(part: Any, output: Output) -> str:
    """The log and reading key of a part's output: ``<part name>_<output>`` unless it names
    its own."""  # noqa: D205, D209
    return getattr(output, "key", "") or f"{part.name}_{output.name}"


def part_outputs(parts: Any) -> list[tuple[str, int]]:
    """``(log key, size)`` of every part's logged outputs, in order."""
    return [(output_key(p, o), int(o.size)) for p in parts for o in p.outputs
            if getattr(o, "logged", True)]  # fmt: skip


def log_columns(parts: Any) -> list[dict]:
    """The log columns of the parts' outputs, for the run metadata (``meta["columns"]``): one
    ``{"key", "columns", "units", "description"}`` per output (columns ``<key>`` for a scalar,
    ``<key>_0 ...`` otherwise)."""  # noqa: D205, D209
    cols = []
    for p in parts:
        for o in p.outputs:
            if not getattr(o, "logged", True):
                continue
            key = output_key(p, o)
            names = [key] if o.size == 1 else [f"{key}_{i}" for i in range(o.size)]
            cols.append({"key": key, "columns": names, "units": [o.unit] * len(names),
                         "description": f"{p.name}: {o.description}"})  # fmt: skip
    return cols
