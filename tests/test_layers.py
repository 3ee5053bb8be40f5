"""The package's layers (README, "Architecture"): a module imports only from its own layer or below.

Read from the source with :mod:`ast` (every ``import``, at module level or inside a function,
relative or absolute), so a new upward import, or a new module that no layer names, fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "quadsim"

LAYERS = {
    "physics": ["__init__", "_array", "_toml", "bind", "envelope", "integrators", "models",
                "noise", "params", "presets", "rotation", "rotors", "sensors", "systems", "wind",
                "world"],
    "engines": ["native", "sim", "sim_native"],
    "flight": ["brain", "closed_loop", "closed_loop_jax", "control", "flight", "initial",
               "trajectories"],
    "product": ["bench", "bench_closed_loop", "bench_peers", "cli", "envs", "io", "plotting",
                "preflight", "run", "scenario"],
}  # fmt: skip
"""Layer -> top-level modules and sub-packages of ``quadsim``, lowest layer first."""

RANK = {name: i for i, names in enumerate(LAYERS.values()) for name in names}


def _unit(path: Path) -> tuple[str, list[str]]:
    """``(top-level unit, package path)`` of a source file, e.g. ``("envs", ["envs"])``."""
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    package = parts[:-1]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return (parts[0] if parts else "__init__"), package


def _imported_units(path: Path) -> set[str]:
    """Top-level ``quadsim`` units that the file imports."""
    _, package = _unit(path)
    units = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - (node.level - 1)]
            if node.module:
                units.add([*base, *node.module.split(".")][0])
            else:
                units.update([*base, a.name][0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("quadsim"):
            parts = node.module.split(".")
            units.add(parts[1] if len(parts) > 1 else "__init__")
        elif isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                if parts[0] == "quadsim":
                    units.add(parts[1] if len(parts) > 1 else "__init__")
    return units


FILES = sorted(SRC.rglob("*.py"))


def test_every_module_has_a_layer():
    units = {_unit(p)[0] for p in FILES}
    assert not units - set(RANK), f"add these to LAYERS and the README: {sorted(units - set(RANK))}"
    assert not set(RANK) - units, f"LAYERS names what does not exist: {sorted(set(RANK) - units)}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(SRC)))
def test_imports_only_point_down(path):
    unit, _ = _unit(path)
    up = sorted(u for u in _imported_units(path) if u in RANK and RANK[u] > RANK[unit])
    layer = next(k for k, v in LAYERS.items() if unit in v)
    assert not up, f"{path.relative_to(SRC)} ({layer}) imports from a higher layer: {up}"


def test_the_check_sees_an_upward_import(tmp_path, monkeypatch):
    """The parser finds relative, absolute and function-level imports (so the test can fail)."""
    fake = SRC / "world.py"
    text = "def f():\n    from .flight import fly\n    import quadsim.cli\nfrom ..x import y\n"
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: text)
    assert {"flight", "cli"} <= _imported_units(fake)
