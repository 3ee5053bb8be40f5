"""The package's layers (README, "Architecture"): the folders are the layers, and a module imports
only from its own layer or below.

Read from the source with :mod:`ast` (every ``import``, at module level or inside a function,
relative or absolute, flat paths such as ``quadsim.sim`` mapped to their layer), so a new upward
import, or a module in no layer folder, fails here. The flat paths of the earlier layout
(``quadsim.sim`` is ``quadsim.engines.sim``) are one module object with the layered ones.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from quadsim._compat import LAYERS, layered

SRC = Path(__file__).resolve().parents[1] / "src" / "quadsim"
ORDER = ["physics", "engines", "loop", "app"]
"""The layers, lowest first; the package root (``__init__``, ``_compat``) sits with physics."""
RANK = {"root": 0, **{name: i for i, name in enumerate(ORDER)}}
FILES = sorted(SRC.rglob("*.py"))


def _layer_of(module: list[str]) -> str | None:
    """Layer of an absolute module path (``["quadsim", "loop", "flight"]``); flat paths mapped."""
    name = ".".join(module)
    real = layered(name) or name
    parts = real.split(".")
    if parts[0] != "quadsim":
        return None
    if len(parts) == 1 or parts[1] in ("__init__", "_compat"):
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
    assert loose == ["__init__.py", "_compat.py"], f"modules outside the layers: {loose}"
    for layer, names in LAYERS.items():
        held = {p.stem for p in (SRC / layer).iterdir()
                if p.name != "__init__.py" and p.name != "__pycache__"}  # fmt: skip
        assert held == set(names), f"{layer}/ holds {sorted(held)}; _compat.LAYERS says {names}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(SRC)))
def test_imports_only_point_down(path):
    layer = _layer_of(["quadsim", *path.relative_to(SRC).with_suffix("").parts])
    up = sorted(x for x in _imported_layers(path) if RANK[x] > RANK[layer])
    assert not up, f"{path.relative_to(SRC)} ({layer}) imports from a higher layer: {up}"


def test_the_check_sees_an_upward_import(monkeypatch):
    """The parser finds relative, absolute, flat and function-level imports (so it can fail)."""
    fake = SRC / "physics" / "world.py"
    text = ("def f():\n    from ..loop.flight import fly\n    import quadsim.cli\n"
            "from quadsim.sim import Simulator\n")  # fmt: skip
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: text)
    assert _imported_layers(fake) == {"loop", "app", "engines"}


FLAT = ["quadsim.sim", "quadsim.flight", "quadsim.models.first_principles", "quadsim.control.pid",
        "quadsim.envs.core", "quadsim.cli"]  # fmt: skip


@pytest.mark.parametrize("flat", FLAT)
def test_flat_paths_are_the_layered_modules(flat):
    module = importlib.import_module(flat)
    assert module is importlib.import_module(layered(flat))
    assert module.__name__ == module.__spec__.name == layered(flat)


def test_flat_paths_import_alone_in_a_fresh_interpreter():
    """``import quadsim.models.first_principles`` first thing: one module object, its own spec."""
    code = ("import sys, quadsim.models.first_principles as m\n"
            "assert m is sys.modules['quadsim.physics.models.first_principles']\n"
            "assert sys.modules['quadsim.models.first_principles'] is m\n"
            "from quadsim.sim import Simulator\n"
            "assert Simulator.__module__ == 'quadsim.engines.sim'\n")  # fmt: skip
    r = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
