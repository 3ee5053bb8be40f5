"""The package's layers (README, "Architecture"): the folders are the layers, and a module imports
only from its own layer or below.

Read from the source with :mod:`ast` (every ``import``, at module level or inside a function,
relative or absolute), so a new upward import, or a module in no layer folder, fails here. Every
module has one name: the flat paths of the earlier layout (``quadsim.sim`` for
``quadsim.engines.sim``) are gone.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "quadsim"
ORDER = ["physics", "engines", "loop", "app"]
"""The layers, lowest first; the package root (``__init__``) sits with physics."""
RANK = {"root": 0, **{name: i for i, name in enumerate(ORDER)}}
FILES = sorted(SRC.rglob("*.py"))


def _layer_of(module: list[str]) -> str | None:
    """Layer of an absolute module path (``["quadsim", "loop", "flight"]``)."""
    parts = module
    if parts[0] != "quadsim":
        return None
    if len(parts) == 1 or parts[1] == "__init__":
        return "root"
    return parts[1] if parts[1] in RANK else None


def _package(path: Path) -> list[str]:
    parts = ["quadsim", *path.relative_to(SRC).with_suffix("").parts]
    return parts[:-1]


def _imported_layers(path: Path) -> set[str]:
    """Layers whose modules the file imports."""
    package = _package(path)
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets = []
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - (node.level - 1)]
            if node.module:
                targets.append([*base, *node.module.split(".")])
            else:
                targets += [[*base, a.name] for a in node.names]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("quadsim"):
            targets.append(node.module.split("."))
        elif isinstance(node, ast.Import):
            targets += [a.name.split(".") for a in node.names if a.name.startswith("quadsim")]
        found |= {layer for t in targets if (layer := _layer_of(t)) is not None}
    return found


def test_the_folders_are_the_layers():
    top = {p.name for p in SRC.iterdir() if p.is_dir() and not p.name.startswith("__")}
    assert top == set(ORDER), f"folders {sorted(top)}; the layers are {ORDER}"
    loose = sorted(p.name for p in SRC.glob("*.py"))
    assert loose == ["__init__.py"], f"modules outside the layers: {loose}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(SRC)))
def test_imports_only_point_down(path):
    layer = _layer_of(["quadsim", *path.relative_to(SRC).with_suffix("").parts])
    up = sorted(x for x in _imported_layers(path) if RANK[x] > RANK[layer])
    assert not up, f"{path.relative_to(SRC)} ({layer}) imports from a higher layer: {up}"


def test_the_check_sees_an_upward_import(monkeypatch):
    """The parser finds relative, absolute and function-level imports (so it can fail)."""
    fake = SRC / "physics" / "world.py"
    text = ("def f():\n    from ..loop.flight import fly\n    import quadsim.app.cli\n"
            "from quadsim.engines.sim import Simulator\n")  # fmt: skip
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: text)
    assert _imported_layers(fake) == {"loop", "app", "engines"}


FLAT = ["quadsim.sim", "quadsim.flight", "quadsim.models.first_principles", "quadsim.control.pid",
        "quadsim.envs.core", "quadsim.cli"]  # fmt: skip
"""Paths of the earlier flat layout (now ``quadsim.engines.sim``, ``quadsim.loop.flight``, ...)."""


@pytest.mark.parametrize("flat", FLAT)
def test_a_module_has_one_name(flat):
    """No alias finder: the flat paths do not import, and the package has no such attribute."""
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(flat)
    import quadsim

    assert not hasattr(quadsim, flat.split(".")[1])
