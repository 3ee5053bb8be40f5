"""A sensor part checked once, when the loop is built, against what it declares.

:func:`check_sensor` holds a part to its declaration before anything flies, so that a mistake
is one clear error naming the part (a scenario names its table, file and line) instead of an
internal error, a silent broadcast or runners that differ:

* **the declaration**: ``outputs`` a tuple of :class:`~quadsim.loop.parts.Output` records with
  distinct names and whole sizes in ``1 ..`` :data:`MAX_SIZE`, ``streams`` ``((name, count),
  ...)`` with whole counts, at most :data:`MAX_NORMALS` normals a step in all (a part's normals
  and readings are per drone and step: a declaration of 10⁹ grew to 24 GB before);
* **one step** of ``init`` and ``measure`` on NumPy float64, two drones (one for a flight of
  one) hovering level at 1 m: ``measure`` returns ``(readings, state)``, ``readings`` a dict
  with every declared output (and ``fresh`` for a part that holds its own readings) and no
  other key, each reading an array of the state's dtype (float64: a float32 reading is rounded
  on some runners only) and shape ``(n,)`` for a size-1 output, else ``(n, size)`` (not
  broadcast), finite;
* **the normals**: ``measure`` reads no column of ``z`` past its declared count (NumPy slices
  past the end silently, and a reading built from one normal broadcast to three axes is three
  equal numbers); a second step from the returned state has the same readings' shapes.

:func:`check_controller` calls a controller part once the same way, at hover with its set point
there and its readings as zeros of their sizes: it returns ``(command, state)``, the command a
finite float64 array ``(n, 4)`` (a wrench) or ``(n, n_rotors)`` (rotor speeds) as its
``command`` says.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...engines.state import State
from ...physics.commands import command_kind
from ..trajectories import Hover
from . import Context, Output

__all__ = ["MAX_NORMALS", "MAX_SIZE", "check_controller", "check_sensor", "declared_bytes"]

MAX_NORMALS = 4096
"""The most standard normals a part may draw per drone and step (all its streams)."""
MAX_SIZE = 1 << 20
"""The most entries one output may have per drone (a 1024 x 1024 depth image)."""


class _Watched(np.ndarray):
    """The normals ``z`` ``(n, count)`` handed to ``measure``: it notes a column past ``count``."""

    past: list

    def __getitem__(self, key: Any) -> Any:
        past = getattr(self, "past", None)  # arrays computed from z are plain ones
        keys = key if isinstance(key, tuple) else (key,)
        full = Ellipsis in keys or len(keys) >= self.ndim  # the key reaches the last axis
        last = keys[-1] if full and keys else slice(None)
        if (past is not None and isinstance(last, slice) and last.stop is not None
                and last.stop > self.shape[-1]):  # fmt: skip
            past.append(last.stop)
        return np.asarray(super().__getitem__(key))

    def __array_wrap__(self, arr: Any, context: Any = None, return_scalar: bool = False) -> Any:
        return np.asarray(arr)  # what ufuncs make of z is a plain array


def declared_bytes(part: Any) -> int:
    """Bytes per drone the part's declaration costs a flight (its normals, its readings held,
    logged and handed on, about four copies of each)."""  # noqa: D205, D209
    normals = sum(int(c) for _, c in part.streams)
    return 8 * 4 * (normals + sum(int(o.size) for o in part.outputs))


def _declaration(part: Any) -> str | None:
    """What is wrong with the part's ``outputs`` and ``streams``, or ``None``."""
    outputs, streams = getattr(part, "outputs", None), getattr(part, "streams", None)
    if not isinstance(outputs, tuple) or not all(isinstance(o, Output) for o in outputs):
        return f"outputs must be a tuple of quadsim.loop.parts.Output records; got {outputs!r}"
    names = [o.name for o in outputs]
    if len(set(names)) != len(names) or not all(isinstance(x, str) and x for x in names):
        return f"outputs must have distinct non-empty names; got {names}"
    for o in outputs:
        if isinstance(o.size, bool) or not isinstance(o.size, int) or not 1 <= o.size <= MAX_SIZE:
            return (f"output {o.name!r}: size must be a whole number in 1..{MAX_SIZE}; got "
                    f"{o.size!r}")  # fmt: skip
    if not isinstance(streams, tuple) or not all(
        isinstance(s, tuple) and len(s) == 2 and isinstance(s[0], str)
        and isinstance(s[1], int) and not isinstance(s[1], bool) and s[1] >= 0 for s in streams
    ):  # fmt: skip
        return f"streams must be a tuple of (name, whole count >= 0) pairs; got {streams!r}"
    total = sum(c for _, c in streams)
    if total > MAX_NORMALS:
        return f"streams declare {total} normals a step; at most {MAX_NORMALS} per drone"
    return None


def _reading(part: Any, o: Output, v: Any, n: int) -> str | None:
    """What is wrong with the reading ``v`` of output ``o``, or ``None``."""
    if not isinstance(v, np.ndarray | np.generic | float | int):
        return f"{o.name!r} as a {type(v).__name__}, not an array"
    a = np.asarray(v)
    want = (n,) if o.size == 1 else (n, o.size)
    if a.shape != want:
        return f"{o.name!r} of shape {a.shape}; its declared size {o.size} needs {want}"
    if a.dtype != np.float64:
        return (f"{o.name!r} as {a.dtype} on a float64 state; a reading keeps the state's dtype "
                "(build it from the state's arrays, or cast with ctx.xp.astype)")  # fmt: skip
    if not np.all(np.isfinite(a)):
        return f"{o.name!r} not finite on a level hover at 1 m ({a.tolist()})"
    return None


def _step(part: Any, k: float, truth: State, state: Any, ctx: Context, n: int) -> tuple:
    """One ``measure`` on watched normals: ``(readings, state)``; raises ``ValueError``."""
    count = sum(c for _, c in part.streams)
    z = np.random.default_rng(0).standard_normal((n, count)).view(_Watched)
    z.past = []
    name = f"{type(part).__name__}.measure"
    try:
        got = part.measure(k, truth, state, z, ctx)
    except Exception as e:
        raise ValueError(f"{name} failed on a level hover at 1 m: {type(e).__name__}: "
                         f"{e}") from None  # fmt: skip
    if z.past:
        raise ValueError(f"{name} reads normals past its {count} declared (column "
                         f"{max(z.past) - 1} of z); declare them in streams")  # fmt: skip
    if not (isinstance(got, tuple) and len(got) == 2):
        raise ValueError(f"{name} returned {type(got).__name__} {got!r:.80}; it returns "
                         "(readings dict, state)")  # fmt: skip
    if not isinstance(got[0], dict):
        raise ValueError(f"{name} returned readings as {type(got[0]).__name__}, not a dict "
                         "{output name: array}")  # fmt: skip
    readings, new = got
    declared = [o.name for o in part.outputs] + (["fresh"] if part.holds else [])
    missing = [x for x in declared if x not in readings]
    extra = [x for x in readings if x not in declared]
    if missing or extra:
        raise ValueError(f"{name} returned the keys {sorted(readings)}; it declares "
                         f"{declared}" + (f" (missing {missing})" if missing else "")
                         + (f" (not declared: {extra})" if extra else ""))  # fmt: skip
    for o in part.outputs:
        why = _reading(part, o, readings[o.name], n)
        if why:
            raise ValueError(f"{name} returned {why}")
    return readings, new


def check_sensor(part: Any, dt: float, world: Any = None, gravity: Any = (0.0, 0.0, -9.81),
                 n: int = 2) -> None:  # fmt: skip
    """Hold a sensor part to its declaration (module docstring): two steps on NumPy.

    Args:
        part: The sensor part (:class:`quadsim.loop.parts.Sensor`).
        dt: Physics step [s].
        world: The flight's :class:`~quadsim.physics.world.World`, or ``None``.
        gravity: Gravity vector [m/s²] ``(3,)``.
        n: Drones in the check (2; a flight of one drone checks one).

    Raises:
        ValueError: ``<Class>.measure returned ...`` (or ``failed``, or ``reads normals past``),
            or what is wrong with its declaration.
    """
    why = _declaration(part)
    if why:
        raise ValueError(f"{type(part).__name__}: {why}")
    truth = _hover(n)
    ctx = Context(float(dt), np, world=world, gravity=gravity)
    try:
        state = part.init(n, truth, ctx)
    except Exception as e:
        raise ValueError(f"{type(part).__name__}.init failed for {n} drones: "
                         f"{type(e).__name__}: {e}") from None  # fmt: skip
    _, state = _step(part, 0.0, truth, state, ctx, n)
    _step(part, 1.0, truth, state, ctx, n)


def _hover(n: int) -> State:
    """``n`` drones level at 1 m, at rest (float64)."""
    return State(np.tile([0.0, 0.0, 1.0], (n, 1)), np.tile([0.0, 0.0, 0.0, 1.0], (n, 1)),
                 np.zeros((n, 3)), np.zeros((n, 3)), None)  # fmt: skip


def check_controller(control: Any, n_rotors: int, sizes: dict[str, int], n: int = 2) -> None:
    """Hold a controller part to what the loop expects of it (module docstring): one call.

    Args:
        control: The controller part (:class:`quadsim.loop.parts.Controller`), with its gains.
        n_rotors: The drone's rotors (a rotor-speed command has that many entries).
        sizes: The size of every reading it may read (``{key: size}``), given to it as zeros.
        n: Drones in the check.

    Raises:
        ValueError: ``<Class>.__call__ returned ...`` or ``failed ...``.
    """
    name = f"{type(control).__name__}.__call__"
    reads = tuple(getattr(control, "reads", None) or ())
    readings = {r: np.zeros((n,) if sizes.get(r, 1) == 1 else (n, sizes[r])) for r in reads}
    ref = Hover((0.0, 0.0, 1.0))(0.0)
    try:
        cstate = control.init_state(control.gains, (n,), np, np.float64)
        args = (_hover(n), ref, control.gains, cstate) + ((readings,) if reads else ())
        got = control(*args)
    except Exception as e:
        raise ValueError(f"{name} failed at hover with its set point there: "
                         f"{type(e).__name__}: {e}") from None  # fmt: skip
    if not (isinstance(got, tuple) and len(got) == 2):
        raise ValueError(f"{name} returned {type(got).__name__} {got!r:.80}; it returns "
                         "(command, controller state)")  # fmt: skip
    cmd = got[0]
    if not isinstance(cmd, np.ndarray | np.generic):
        raise ValueError(f"{name} returned a command of type {type(cmd).__name__}, not an array")
    size = cmd.shape[-1] if cmd.ndim else 0
    try:
        command_kind(size, n_rotors, getattr(control, "command", None))
    except ValueError as e:
        raise ValueError(f"{name} returned a command of shape {cmd.shape}: {e}") from None
    if cmd.shape != (n, size) or cmd.dtype != np.float64 or not np.all(np.isfinite(cmd)):
        raise ValueError(f"{name} returned a command of shape {cmd.shape} and dtype "
                         f"{cmd.dtype} ({cmd.tolist()!r:.80}); it must be finite float64 "
                         f"({n}, {size}) at hover")  # fmt: skip
