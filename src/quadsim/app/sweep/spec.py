r"""Sweep files: a base scenario, its axes and how they are sampled, and the runs they define.

A sweep file (TOML)::

    base = "figure8.toml"          # the scenario file, relative to the sweep file
    method = "grid"                # "grid", "random" or "lhs" (Latin hypercube)
    samples = 100                  # points of "random" and "lhs"
    replicates = 3                 # runs per point (each its own noise and gusts)
    seed = 0                       # the sweep's seed
    batch = 1024                   # runs per task (one batched simulation)
    [axes]
    "drone.mass" = [0.030, 0.032, 0.034]                  # values (grid; a choice otherwise)
    "wind.mean" = [[0.0, 0.0, 0.0], [2.0, 0.0, 0.0]]
    "trajectory.period" = { low = 6.0, high = 10.0 }     # a range (random, lhs)

An axis is any scenario key (``section.key``, ``docs/scenarios.md``) but ``n`` and ``seed``,
given as a list of values or ``{ values = [...] }`` (grid: every value; random: a uniform
choice; lhs: one stratum per value), or as ``{ low = a, high = b }`` with numbers or lists of
numbers (random and lhs: uniform in the box; not on a grid).

**Runs.** Grid: every combination of the axes' values, the last axis fastest; random and lhs:
``samples`` points (NumPy's PCG64 and SciPy's ``qmc.LatinHypercube``, both seeded by the sweep
seed). Point ``p``, replicate ``r`` is run ``p · replicates + r``.

Every value of a run is checked as the scenario checks it (type, range, the physical checks of
the drone), so a bad value is an error naming the run and the value before anything flies.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import tomllib
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ... import __version__
from ..scenario.locations import failer, line_of, read_text
from ..scenario.schema import EXPECT, SCHEMA, type_ok

__all__ = ["METHODS", "PER_DRONE", "Run", "Sweep", "count_runs", "load_sweep", "make_runs",
           "set_key", "value_label"]  # fmt: skip

METHODS = ("grid", "random", "lhs")

PER_DRONE = ("drone.mass", "drone.inertia", "initial.pos", "initial.vel", "initial.rpy_deg",
             "initial.ang_vel")
"""Axes that vary per drone inside one batched simulation (the plant's mass and inertia, the
start); every other axis changes the simulation's structure (its own batch). The controller
keeps the base scenario's drone: a mass or inertia axis measures robustness to the mismatch,
as ``randomize.mass_rel`` does."""

_TOP = {
    "base": "str",
    "method": "str",
    "samples": "int",
    "replicates": "int",
    "seed": "int",
    "batch": "int",
    "axes": "table",
}


class Sweep(NamedTuple):
    """A validated sweep file.

    Attributes:
        path: The sweep file.
        base: The base scenario file (resolved).
        base_doc: The base scenario's TOML document.
        base_text: Its text.
        method: ``grid``, ``random`` or ``lhs``.
        samples: Points of ``random`` and ``lhs``.
        replicates: Runs per point.
        seed: The sweep's seed.
        batch: Runs per task at most.
        axes: ``key -> ("values", [v, ...])`` or ``("range", (low, high))``, in file order.
        text: The sweep file's text.
    """

    path: Path
    base: Path
    base_doc: dict
    base_text: str
    method: str
    samples: int
    replicates: int
    seed: int
    batch: int
    axes: dict
    text: str

    def digest(self, inputs: dict[str, str] | None = None) -> str:
        """A hash of what the results depend on: the sweep and base scenario texts, quadsim's
        version and ``inputs`` (``{path: sha256}`` of every file the scenarios read,
        :func:`quadsim.app.sweep.run.inputs`): a resumed sweep must be the same sweep."""  # noqa: D205, D209
        h = hashlib.sha256()
        parts = [self.text, self.base_text, __version__]
        parts += [f"{k}={v}" for k, v in sorted((inputs or {}).items())]
        for part in parts:
            h.update(part.encode())
            h.update(b"\0")
        return h.hexdigest()[:16]


class Run(NamedTuple):
    """One run: its index, design point, replicate and axis values."""

    run: int
    point: int
    replicate: int
    values: dict


def load_sweep(path: str | Path) -> Sweep:
    """Read and check a sweep file (not the runs' values: :func:`make_runs`).

    Raises:
        ValueError: ``FILE: KEY (line N): what is wrong`` (the scenario's line finder).
    """
    p = Path(path)
    text = read_text(p)
    where = str(p)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{where}: malformed TOML: {e}") from None
    top = failer(where, text)

    def fail(key: str, msg: str, axis: bool = False) -> ValueError:
        if not axis:
            return top("", key, msg)
        line = line_of(text, "axes", key) or line_of(text, "axes", "")
        return ValueError(f'{where}: axes."{key}"' + (f" (line {line})" if line else "") +
                          f": {msg}")  # fmt: skip

    for k in doc:
        if k not in _TOP:
            raise fail(k, f"unknown key; valid keys: {sorted(_TOP)}")
    if "base" not in doc or not isinstance(doc["base"], str) or not doc["base"]:
        raise fail("base", "missing; expected the base scenario file (a string)")
    method = doc.get("method", "grid")
    if not isinstance(method, str) or method not in METHODS:
        raise fail("method", f"expected one of {list(METHODS)}; got {method!r}")

    def integer(key: str, default: int, low: int) -> int:
        v = doc.get(key, default)
        if not isinstance(v, int) or isinstance(v, bool) or v < low:
            raise fail(key, f"expected an integer >= {low}; got {v!r}")
        return v

    replicates = integer("replicates", 1, 1)
    seed = integer("seed", 0, 0)
    batch = integer("batch", 1024, 1)
    samples = integer("samples", 0, 0)
    if method != "grid" and samples < 1:
        raise fail("samples", f"method {method!r} needs samples >= 1")
    if method == "grid" and "samples" in doc:
        raise fail("samples", "a grid takes every combination of the axes; no samples")
    base = (p.parent / doc["base"]).resolve()
    try:
        base_text = read_text(base)
        base_doc = tomllib.loads(base_text)
    except (ValueError, OSError, tomllib.TOMLDecodeError) as e:
        raise fail("base", f"cannot read the base scenario: {e}") from None
    raw_axes = doc.get("axes", {})
    if not isinstance(raw_axes, dict) or not raw_axes:
        raise fail("axes", "expected a table of at least one axis ([axes])")
    axes = {key: _axis(key, spec, method, fail) for key, spec in raw_axes.items()}
    return Sweep(p, base, base_doc, base_text, method, samples, replicates, seed, batch, axes, text)


def _axis(key: str, spec: Any, method: str, fail: Any) -> tuple[str, Any]:
    """One axis of ``[axes]``: ``("values", [...])`` or ``("range", (low, high))``."""
    section, _, k = key.rpartition(".")
    if section not in SCHEMA or k not in SCHEMA[section] or key in ("n", "seed"):
        valid = sorted(
            f"{s}.{x}" if s else x
            for s, ks in SCHEMA.items()
            for x in ks
            if (s, x) not in (("", "n"), ("", "seed"))
        )
        hint = ""
        if key in SCHEMA and isinstance(spec, dict):  # axes.drone.mass: a dotted key unquoted
            hint = f' (quote a dotted key: "{key}.{next(iter(spec), "...")}" = [...])'
        raise fail(key, f"unknown scenario key {key!r}{hint}; valid keys: {valid}", True)
    kind = SCHEMA[section][k].type
    if isinstance(spec, list):
        spec = {"values": spec}
    if not isinstance(spec, dict) or not (set(spec) == {"values"} or set(spec) == {"low", "high"}):
        raise fail(key, "expected a list of values, { values = [...] } or "
                        "{ low = ..., high = ... }", True)  # fmt: skip
    if "values" in spec:
        vals = spec["values"]
        if not isinstance(vals, list) or not vals:
            raise fail(key, "an axis needs at least one value (a list)", True)
        for v in vals:
            if not type_ok(kind, v):
                raise fail(key, f"value {v!r} is not {_expect(kind)}", True)
            if kind in ("float", "vec3", "floats") and not _finite(v):
                raise fail(key, f"value {v!r} is not finite", True)
            if not _int64(v):
                raise fail(key, f"value {v!r}: an integer beyond 64 bits (write a float: 1e29)",
                           True)  # fmt: skip
        return ("values", vals)
    if method == "grid":
        raise fail(key, 'a grid needs values, not a range (or use method = "random" or "lhs")',
                   True)  # fmt: skip
    lo, hi = spec["low"], spec["high"]
    if kind not in ("float", "vec3", "floats", "int"):
        raise fail(key, f"a range needs a numeric key; {key} is {_expect(kind)}", True)
    if not type_ok(kind, lo) or not type_ok(kind, hi) or not (_int64(lo) and _int64(hi)):
        raise fail(key, f"low and high must be {_expect(kind)} (integers of 64 bits); got "
                        f"{lo!r}, {hi!r}", True)  # fmt: skip
    a, b = np.asarray(lo, dtype=object), np.asarray(hi, dtype=object)
    if a.shape != b.shape or a.size == 0 or not (_finite(lo) and _finite(hi)):
        raise fail(key, f"low and high must be finite, alike and not empty; got {lo!r}, {hi!r}",
                   True)  # fmt: skip
    if not np.all(np.asarray(lo, dtype=float) <= np.asarray(hi, dtype=float)):
        raise fail(key, f"low must not exceed high; got {lo!r}, {hi!r}", True)
    return ("range", (lo, hi))


def _int64(v: Any) -> bool:
    """Whether every integer in ``v`` (a value, or nested lists and tables) fits 64 bits (the
    results' columns)."""  # noqa: D205, D209
    if isinstance(v, bool):
        return True
    if isinstance(v, int):
        return -(2**63) <= v < 2**63
    if isinstance(v, list):
        return all(_int64(x) for x in v)
    if isinstance(v, dict):
        return all(_int64(x) for x in v.values())
    return True


def _finite(v: Any) -> bool:
    """Whether a number or list of numbers converts to finite floats (big integers too)."""
    try:
        return bool(np.all(np.isfinite(np.asarray(v, dtype=float))))
    except (OverflowError, ValueError, TypeError):
        return False


def _kind(key: str) -> str:
    """The scenario type of an axis key (``SCHEMA``)."""
    section, _, k = key.rpartition(".")
    return SCHEMA[section][k].type


def _expect(kind: str) -> str:
    return EXPECT.get(kind, kind)


def _points(sw: Sweep) -> list[dict]:
    """The design points (axis -> value), in order."""
    keys = list(sw.axes)
    if sw.method == "grid":
        import itertools

        grids = [sw.axes[k][1] for k in keys]
        return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*grids)]
    n, d = sw.samples, len(keys)
    if sw.method == "random":
        u = np.random.Generator(np.random.PCG64([sw.seed, 0x5EE9])).random((n, d))
    else:
        from scipy.stats import qmc

        u = qmc.LatinHypercube(d=d, seed=np.random.Generator(np.random.PCG64([sw.seed, 0x1B5])))
        u = u.random(n)
    out = []
    for row in u:
        pt = {}
        for j, k in enumerate(keys):
            how, spec = sw.axes[k]
            if how == "values":
                pt[k] = spec[min(int(row[j] * len(spec)), len(spec) - 1)]
            else:
                lo, hi = np.asarray(spec[0], float), np.asarray(spec[1], float)
                v = lo + row[j] * (hi - lo)
                pt[k] = v.tolist() if v.ndim else float(v)
                if _kind(k) == "int":  # not a float key given integer bounds
                    pt[k] = math.floor(pt[k] + 0.5)
        out.append(pt)
    return out


def count_runs(sw: Sweep) -> int:
    """The number of runs, from the axes' lengths (grid) or ``samples``, times the replicates:
    nothing is materialised (:func:`quadsim.app.sweep.limits.check_size` refuses huge sweeps)."""  # noqa: D205, D209
    if sw.method == "grid":
        return math.prod(len(spec) for _, spec in sw.axes.values()) * sw.replicates
    return sw.samples * sw.replicates


def make_runs(sw: Sweep) -> list[Run]:
    """Every run of the sweep, in run order (module docstring)."""
    return [
        Run(p * sw.replicates + r, p, r, pt)
        for p, pt in enumerate(_points(sw))
        for r in range(sw.replicates)
    ]


def set_key(doc: dict, key: str, value: Any) -> dict:
    """A deep copy of the scenario document ``doc`` with ``section.key`` set to ``value``."""
    out = copy.deepcopy(doc)
    section, _, k = key.rpartition(".")
    (out.setdefault(section, {}) if section else out)[k] = value
    return out


LABEL_MAX = 64
"""Longest readable partition value (bytes); a longer one, or a table, is written as a hash."""

_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._+-,[]")


def value_label(v: Any) -> str:
    """A short, path-safe text of an axis value (the ``runs/<axis>=<label>`` partitions, plots).

    A string is written bare, a number, boolean or list as JSON (``3.0``, ``true``,
    ``[0.0,0.0,1.0]``); every byte outside ``[A-Za-z0-9._+-,[]]`` is percent-encoded
    (``a/b`` -> ``a%2Fb``: what Hive-style partitioning decodes), the empty string is ``%00``.
    A label longer than :data:`LABEL_MAX` bytes, and any table, becomes ``~`` and 16 hex digits of
    the SHA-256 of the value's JSON: short, and always the same for the same value.
    """
    if isinstance(v, dict) or (not isinstance(v, str) and len(_json(v)) > LABEL_MAX):
        return "~" + hashlib.sha256(_json(v).encode()).hexdigest()[:16]
    text = v if isinstance(v, str) else _json(v)
    out = "".join(chr(b) if chr(b) in _SAFE else f"%{b:02X}" for b in text.encode()) or "%00"
    if len(out) > LABEL_MAX:
        return "~" + hashlib.sha256(_json(v).encode()).hexdigest()[:16]
    return out


def _json(v: Any) -> str:
    return json.dumps(v, separators=(",", ":"), sort_keys=True)
