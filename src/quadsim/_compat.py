"""The module paths of the flat layout: ``quadsim.sim`` is ``quadsim.engines.sim``, and so on.

The modules live in four layer packages (README, "Architecture"): ``quadsim.physics``,
``quadsim.engines``, ``quadsim.loop`` and ``quadsim.app``. Every earlier path
``quadsim.<name>[.<sub>...]`` (``quadsim.sim``, ``quadsim.models.first_principles``,
``quadsim.control``, ...) keeps working: a finder on ``sys.meta_path`` (added once, when
``quadsim`` is imported; it answers only for those names) hands out the layered module itself,
so both names are one module object (monkeypatching either patches both) and nothing is imported
before it is asked for.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from typing import Any

LAYERS = {
    "physics": ("_array", "_toml", "bind", "commands", "envelope", "integrators", "models",
                "noise", "params", "power", "presets", "rotation", "rotors", "sensors", "systems",
                "wind", "world"),
    "engines": ("native", "native_codegen", "native_schedule", "pwm", "signals", "sim",
                "sim_native"),
    "loop": ("brain", "closed_loop", "closed_loop_jax", "control", "estimation", "flight",
             "initial", "trajectories"),
    "app": ("bench", "bench_closed_loop", "bench_peers", "cli", "envs", "io", "plotting",
            "preflight", "rl", "ros2", "run", "scenario", "sweep", "sysid", "validation"),
}  # fmt: skip
"""Layer package -> the top-level names it holds (``tests/test_layers.py`` checks the folders)."""

MOVED = {name: layer for layer, names in LAYERS.items() for name in names}


def layered(name: str) -> str | None:
    """The layered module name of a flat one (``quadsim.sim`` -> ``quadsim.engines.sim``)."""
    parts = name.split(".")
    if len(parts) < 2 or parts[0] != "quadsim" or parts[1] not in MOVED:
        return None
    return ".".join(["quadsim", MOVED[parts[1]], *parts[1:]])


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers ``import quadsim.<flat name>`` with the layered module (see the module docstring)."""

    def __init__(self) -> None:
        self._specs: dict[str, Any] = {}

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        real = layered(fullname)
        if real is None:
            return None
        spec = importlib.util.find_spec(real)
        if spec is None:
            return None
        return importlib.util.spec_from_loader(fullname, self, origin=real,
                                               is_package=spec.submodule_search_locations
                                               is not None)  # fmt: skip

    def create_module(self, spec: Any) -> Any:
        module = importlib.import_module(spec.origin)
        self._specs[module.__name__] = module.__spec__
        return module

    def exec_module(self, module: Any) -> None:
        # the import system has set the alias's spec on the module: give it back its own
        module.__spec__ = self._specs.pop(module.__name__, module.__spec__)

    def get_code(self, fullname: str) -> Any:
        """``python -m quadsim.cli``: run the layered module as ``__main__``."""
        real = layered(fullname)
        return compile(f"import runpy\nrunpy.run_module({real!r}, run_name='__main__', "
                       "alter_sys=True)\n", f"<quadsim: {fullname} is {real}>", "exec")


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once).

    First, before the path finder, which would otherwise load a second copy of
    ``quadsim.models.first_principles`` from the package's folder.
    """
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
    # the layered modules imported so far (by ``quadsim/__init__``) under their flat names too,
    # so that importing ``quadsim.envelope`` later does not rebind the attribute
    # ``quadsim.envelope`` (the function) to the module
    for name, module in list(sys.modules.items()):
        parts = name.split(".")
        if len(parts) > 2 and parts[0] == "quadsim" and parts[1] in LAYERS:
            sys.modules.setdefault(".".join(["quadsim", *parts[2:]]), module)
