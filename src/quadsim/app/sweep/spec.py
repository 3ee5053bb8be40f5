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

__all__ = ["METHODS", "PER_DRONE", "Run", "Sweep", "load_sweep", "make_runs", "set_key"]

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

    def digest(self) -> str:
        """A hash of what the results depend on (sweep and base scenario texts, quadsim's
        version): a resumed sweep must be the same sweep."""  # noqa: D205, D209
        from ... import __version__

        h = hashlib.sha256()
        for part in (self.text, self.base_text, __version__):
            h.update(part.encode())
            h.update(b"\0")
        return h.hexdigest()[:16]


class Run(NamedTuple):
    """One run: its index, design point, replicate and axis values."""

    run: int
    point: int
    replicate: int
    values: dict


def _line(text: str, needle: str) -> str:
    for i, line in enumerate(text.splitlines(), 1):
        if needle in line:
            return f" (line {i})"
    return ""


def load_sweep(path: str | Path) -> Sweep:
    """Read and check a sweep file (not the runs' values: :func:`make_runs`).

    Raises:
        ValueError: ``FILE: KEY (line N): what is wrong``.
    """
    from ..scenario import SCHEMA, _read_text, _type_ok

    p = Path(path)
    text = _read_text(p)
    where = str(p)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{where}: malformed TOML: {e}") from None

    def fail(key: str, msg: str, needle: str | None = None) -> ValueError:
        return ValueError(f"{where}: {key}{_line(text, needle or key)}: {msg}")

    for k in doc:
        if k not in _TOP:
            raise fail(k, f"unknown key; valid keys: {sorted(_TOP)}")
    if "base" not in doc or not isinstance(doc["base"], str):
        raise fail("base", "missing; expected the base scenario file (a string)")
    method = doc.get("method", "grid")
    if method not in METHODS:
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
        base_text = _read_text(base)
        base_doc = tomllib.loads(base_text)
    except (ValueError, OSError, tomllib.TOMLDecodeError) as e:
        raise fail("base", f"cannot read the base scenario: {e}") from None
    raw_axes = doc.get("axes", {})
    if not isinstance(raw_axes, dict) or not raw_axes:
        raise fail("axes", "expected a table of at least one axis ([axes])", "[axes]")
    axes: dict[str, tuple[str, Any]] = {}
    for key, spec in raw_axes.items():
        name = f'axes."{key}"'
        section, _, k = key.rpartition(".")
        if section not in SCHEMA or k not in SCHEMA[section] or key in ("n", "seed"):
            valid = sorted(
                f"{s}.{x}" if s else x
                for s, ks in SCHEMA.items()
                for x in ks
                if (s, x) not in (("", "n"), ("", "seed"))
            )
            raise fail(name, f"unknown scenario key {key!r}; valid keys: {valid}", f'"{key}"')
        kind = SCHEMA[section][k].type
        if isinstance(spec, list):
            spec = {"values": spec}
        if not isinstance(spec, dict) or not (
            set(spec) == {"values"} or set(spec) == {"low", "high"}
        ):
            raise fail(
                name,
                "expected a list of values, { values = [...] } or { low = ..., high = ... }",
                f'"{key}"',
            )
        if "values" in spec:
            vals = spec["values"]
            if not isinstance(vals, list) or not vals:
                raise fail(name, "an axis needs at least one value", f'"{key}"')
            for v in vals:
                if not _type_ok(kind, v):
                    raise fail(name, f"value {v!r} is not {_expect(kind)}", f'"{key}"')
            axes[key] = ("values", vals)
        else:
            if method == "grid":
                raise fail(
                    name,
                    'a grid needs values, not a range (or use method = "random" or "lhs")',
                    f'"{key}"',
                )
            lo, hi = spec["low"], spec["high"]
            if kind not in ("float", "vec3", "floats", "int"):
                raise fail(
                    name, f"a range needs a numeric key; {key} is {_expect(kind)}", f'"{key}"'
                )
            a, b = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
            if a.shape != b.shape or not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
                raise fail(
                    name, f"low and high must be finite and alike; got {lo!r}, {hi!r}", f'"{key}"'
                )
            if not np.all(a <= b):
                raise fail(name, f"low must not exceed high; got {lo!r}, {hi!r}", f'"{key}"')
            if not _type_ok(kind, lo) or not _type_ok(kind, hi):
                raise fail(name, f"low and high must be {_expect(kind)}", f'"{key}"')
            axes[key] = ("range", (lo, hi))
    return Sweep(p, base, base_doc, base_text, method, samples, replicates, seed, batch, axes, text)


def _expect(kind: str) -> str:
    from ..scenario import _EXPECT

    return _EXPECT.get(kind, kind)


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
                if isinstance(spec[0], int) and not isinstance(spec[0], bool):
                    pt[k] = math.floor(pt[k] + 0.5)
        out.append(pt)
    return out


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


def value_label(v: Any) -> str:
    """A short, path-safe text of an axis value (partitions, plots)."""
    s = json.dumps(v, separators=(",", ":"))
    return s.replace("/", "_").replace(" ", "")
