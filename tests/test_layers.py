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


# --- a module's underscore names are its own ------------------------------------------------------


def _module(path: Path) -> str:
    """Dotted name of a source file: ``quadsim.loop.flight``; an ``__init__``, its package's."""
    parts = ["quadsim", *path.relative_to(SRC).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(p): p for p in FILES}


def _from(path: Path, node: ast.ImportFrom) -> str:
    """The absolute module of ``from ... import``: relative levels resolved from ``path``."""
    if not node.level:
        return node.module or ""
    package = _package(path) if path.name != "__init__.py" else _module(path).split(".")
    base = package[: len(package) - (node.level - 1)]
    return ".".join([*base, *(node.module.split(".") if node.module else [])])


def _private(name: str) -> bool:
    """``_name`` or ``__name`` (not a dunder like ``__version__``)."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _ours(module: str) -> bool:
    return module == "quadsim" or module.startswith("quadsim.")


def _private_uses(path: Path) -> list[str]:
    """Another quadsim module's underscore names that the file uses, one line each.

    ``from m import _x`` (any level, relative or absolute, at module level or in a function),
    and ``m._x`` / ``m.sub._x`` where ``m`` is a name an import bound to a quadsim module
    (``import quadsim.x as m``, ``from quadsim.x import m``, ``from . import m``; ``import
    quadsim.x`` binds ``quadsim``). Importing a private *module* (``from . import _common``,
    ``from .._array import stack``) is allowed: the names it offers the others are public.
    """
    tree = ast.parse(path.read_text())
    found, modules = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and _ours(module := _from(path, node)):
            for a in node.names:
                if f"{module}.{a.name}" in MODULES:  # a submodule: bound to a module
                    modules[a.asname or a.name] = f"{module}.{a.name}"
                elif _private(a.name):
                    found.append(f"line {node.lineno}: from {module} import {a.name}")
        elif isinstance(node, ast.Import):
            for a in node.names:
                if _ours(a.name):
                    modules[a.asname or "quadsim"] = a.name if a.asname else "quadsim"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            chain, value = [node.attr], node.value
            while isinstance(value, ast.Attribute):
                chain.insert(0, value.attr)
                value = value.value
            if isinstance(value, ast.Name) and value.id in modules:
                found.append(f"line {node.lineno}: {value.id}.{'.'.join(chain)}")
    return found


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(SRC)))
def test_no_module_uses_another_modules_private_names(path):
    """A shared helper has a public name in the module that owns it (a private module's too)."""
    used = _private_uses(path)
    assert not used, f"{path.relative_to(SRC)} uses private names of other modules: {used}"


def test_the_check_sees_private_names(monkeypatch):
    """Relative, absolute, aliased and function-level imports, and attribute access (so it can
    fail); public names, dunders and private modules pass."""
    fake = SRC / "app" / "plotting" / "figures.py"
    text = ("from ...loop.flight import _x64, fly\nfrom quadsim.engines.sim import _as_cmd as a\n"
            "import quadsim.physics.rotation as rot\nimport quadsim.physics.noise\n"
            "from ...physics import noise\nfrom . import _common\nfrom .. import __version__\n"
            "def f():\n    from ...loop.trajectories.reference import _number\n"
            "    x = _common.figure, _common._thin, noise.normals, noise._check_seed\n"
            "    return rot._kdot, quadsim.physics.noise._check_seed, rot.kdot, fly._c\n"
            )  # fmt: skip
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: text)
    assert _private_uses(fake) == [
        "line 1: from quadsim.loop.flight import _x64",
        "line 2: from quadsim.engines.sim import _as_cmd",
        "line 9: from quadsim.loop.trajectories.reference import _number",
        "line 10: _common._thin",
        "line 10: noise._check_seed",
        "line 11: rot._kdot",
        "line 11: quadsim.physics.noise._check_seed",
    ]


# --- no import cycles at module level -------------------------------------------------------------


def _runs_on_import(body: list[ast.stmt]) -> list[ast.Import | ast.ImportFrom]:
    """The imports a module executes when it is imported: its body's, and those under
    module-level ``if``/``try``/``with`` and in class bodies, not in functions nor under
    ``if TYPE_CHECKING:``."""
    out: list[ast.Import | ast.ImportFrom] = []
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            out.append(node)
        elif isinstance(node, ast.If):
            test = node.test
            typing_only = getattr(test, "id", getattr(test, "attr", None)) == "TYPE_CHECKING"
            out += _runs_on_import(([] if typing_only else node.body) + node.orelse)
        elif isinstance(node, ast.Try | ast.TryStar):
            out += _runs_on_import(node.body + node.orelse + node.finalbody)
            for handler in node.handlers:
                out += _runs_on_import(handler.body)
        elif isinstance(node, ast.With | ast.ClassDef):
            out += _runs_on_import(node.body)
    return out


def _imported_modules(path: Path) -> set[str]:
    """The quadsim modules a module imports when it is imported.

    The module an import names, or the submodule (``from package import submodule``), and the
    packages above it that are not above the importer (Python runs their ``__init__`` first).
    """
    me = _module(path)
    named = set()
    for node in _runs_on_import(ast.parse(path.read_text()).body):
        if isinstance(node, ast.ImportFrom):
            module = _from(path, node)
            subs = {f"{module}.{a.name}" for a in node.names} & MODULES.keys()
            named |= subs if len(subs) == len(node.names) else subs | {module}
        else:
            named |= {a.name for a in node.names}
    above_me = {me.rsplit(".", k)[0] for k in range(1, me.count(".") + 1)}
    out = set()
    for m in filter(_ours, named):
        out |= {m.rsplit(".", k)[0] for k in range(m.count(".") + 1)} - above_me
    return (out & MODULES.keys()) - {me}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One shortest cycle through the first module of each strongly connected component."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    comps: list[set[str]] = []

    def visit(v: str) -> None:  # Tarjan
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while (w := stack.pop()) != v:
                comp.add(w)
            comps.append(comp | {v})

    for v in sorted(graph):
        if v not in index:
            visit(v)
    cycles = []
    for comp in (c for c in comps if len(c) > 1):
        start = min(comp)
        paths = {start: [start]}
        queue = [start]
        while queue:  # breadth first, back to start
            v = queue.pop(0)
            for w in sorted(graph[v] & comp):
                if w == start:
                    cycles.append([*paths[v], start])
                    queue = []
                    break
                if w not in paths:
                    paths[w] = [*paths[v], w]
                    queue.append(w)
    return sorted(cycles)


def test_no_import_cycles_at_module_level():
    """The modules' import graph, counting the imports that run on import, has no cycle."""
    graph = {_module(p): _imported_modules(p) for p in FILES}
    cycles = [" -> ".join(c) for c in _cycles(graph)]
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def _all_imports(path: Path) -> set[str]:
    """The quadsim modules a module imports, on import (:func:`_imported_modules`) or inside
    its functions when they run (:func:`_function_imports`, with the packages above)."""
    me = _module(path)
    lazy = set().union(*(_brings_in(me, m) for _, m, _ in _function_imports(path)))
    return _imported_modules(path) | (lazy & MODULES.keys())


def test_no_import_cycles_through_lazy_imports():
    """No cycle either once the imports inside functions count (issue 40: ``replay`` imported
    ``replay_cli`` in its ``main``, which imports ``replay``): a lazy import is there to keep
    start-up light or a heavy dependency optional, not to hide a cycle."""
    graph = {_module(p): _all_imports(p) for p in FILES}
    cycles = [" -> ".join(c) for c in _cycles(graph)]
    assert not cycles, "import cycles through imports inside functions:\n" + "\n".join(cycles)


def test_the_cycle_check_sees_a_cycle(monkeypatch):
    """Module-level imports (under ``try`` too) count, function-level ones only in the lazy
    check's graph; the cycle finder reports each cycle once (so the check can fail)."""
    fake = SRC / "loop" / "flight.py"
    text = ("import quadsim.physics.rotation\nfrom . import brain, FOO\n"
            "try:\n    from ..engines.state import State\nexcept ImportError:\n    pass\n"
            "def f():\n    from ..app import cli\n")  # fmt: skip
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: text)
    assert _imported_modules(fake) == {
        "quadsim.physics", "quadsim.physics.rotation", "quadsim.loop.brain",
        "quadsim.engines", "quadsim.engines.state",
    }  # fmt: skip
    assert _all_imports(fake) == _imported_modules(fake) | {"quadsim.app", "quadsim.app.cli"}
    graph = {"a": {"b"}, "b": {"c", "d"}, "c": {"a"}, "d": set(), "e": {"e2"}, "e2": {"e"}}
    assert _cycles(graph) == [["a", "b", "c", "a"], ["e", "e2", "e"]]


MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 120


def _long_functions(text: str) -> list[tuple[str, int]]:
    """``(name, lines)`` of every function (or method) longer than :data:`MAX_FUNCTION_LINES`,
    counted from its ``def`` (decorators excluded) to its last line, docstring included."""
    return [(node.name, node.end_lineno - node.lineno + 1) for node in ast.walk(ast.parse(text))
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]  # fmt: skip


def test_files_and_functions_are_small():
    """No module over 600 lines, no function over 120 (issue 28: files named for one job)."""
    big = [f"{p.relative_to(SRC)}: {n} lines" for p in FILES
           if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES]  # fmt: skip
    long = [f"{p.relative_to(SRC)}: {name} ({n} lines)" for p in FILES
            for name, n in _long_functions(p.read_text())]  # fmt: skip
    assert not big and not long, "\n".join(big + long)


def test_the_size_check_sees_a_long_function():
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    assert _long_functions(f"def f():\n{body}\n\ndef g():\n    pass\n") == [
        ("f", MAX_FUNCTION_LINES + 1)]


HEAVY = {"jax", "jaxlib", "torch", "casadi", "matplotlib", "pyarrow", "gymnasium", "cyclonedds",
         "ray", "stable_baselines3", "scipy", "tqdm", "mcap", "PIL"}  # fmt: skip
"""The heavy optional dependencies: imported where they are used, inside functions."""
STARTUP = {
    "app/cli.py": {
        "_fly": {"quadsim.app.run", "quadsim.app.io"},
        "_recover": {"quadsim.app.run", "quadsim.app.io"},
        "_info": {"quadsim.app.plotting"},
        "_dispatch": {"quadsim.app.sweep.run", "quadsim.app.ros2.run", "quadsim.app.rl.train",
                      "quadsim.app.rl.evaluate", "quadsim.app.bench",
                      "quadsim.app.bench_closed_loop", "quadsim.app.io.files",
                      "quadsim.engines.native"},
    },
    "app/run.py": {"finish_run": {"quadsim.app.plotting"},
                   "_relative_error": {"quadsim.app.analysis"}},
    "app/io/summary.py": {"_add_estimate": {"quadsim.app.analysis"},
                          "_estimation": {"quadsim.app.analysis"}},
    "app/preflight.py": {"check_outputs": {"quadsim.app.plotting.animation"}},
}  # fmt: skip
"""The one exemption, start-up: ``{file: {function: modules}}`` that stay imported inside those
functions though nothing heavy comes with them, because the ``quadsim`` command must not load
what the command it runs does not use. The command's module (``cli``) imports a subcommand's
implementation when that subcommand runs: ``quadsim fly`` must not load the sweep, RL, ROS 2
and bench code, nor ``quadsim presets`` the flight's (the logs, ``io``; the compiler driver,
``engines.native``, whose error a failed compilation raises). A flight imports the code of its
optional outputs when it writes them (the figures, ``plotting``; the estimate's errors,
``analysis``; the mp4 check, ``plotting.animation``), so that ``quadsim fly --no-plots`` loads
none of them."""


def _heavy_on_import(path: Path) -> set[str]:
    """The heavy dependencies a module imports when it is imported (itself, not its imports)."""
    found = set()
    for node in _runs_on_import(ast.parse(path.read_text()).body):
        names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [
            a.name for a in node.names]  # fmt: skip
        if not getattr(node, "level", 0):
            found |= {n.split(".")[0] for n in names} & HEAVY
    return found


def _function_imports(path: Path) -> list[tuple[int, str, str]]:
    """``(line, module, function)`` of the quadsim modules a module imports inside its functions
    (``function``: the outermost one, a method's own name)."""
    out = []

    def visit(node: ast.AST, fn: str | None) -> None:
        if fn is not None and isinstance(node, ast.ImportFrom):
            module = _from(path, node)
            subs = {f"{module}.{a.name}" for a in node.names} & MODULES.keys()
            out.extend((node.lineno, m, fn) for m in sorted(subs or {module}) if _ours(m))
        elif fn is not None and isinstance(node, ast.Import):
            out.extend((node.lineno, a.name, fn) for a in node.names if _ours(a.name))
        for child in ast.iter_child_nodes(node):
            inner = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            visit(child, fn if fn is not None or not inner else child.name)

    visit(ast.parse(path.read_text()), None)
    return out


def _brings_in(importer: str, module: str) -> set[str]:
    """The modules whose code an ``import module`` in ``importer`` runs first: ``module`` and
    the packages above it that are not above ``importer`` (their ``__init__`` runs first)."""
    above = {module.rsplit(".", k)[0] for k in range(1, module.count(".") + 1)}
    mine = {importer.rsplit(".", k)[0] for k in range(1, importer.count(".") + 1)}
    return ({module} | above) - mine - {importer}


def test_modules_import_at_module_level():
    """A module imports the others at its top, where a reader sees the plan. Inside a function
    only a module that brings in a heavy optional dependency when imported (directly, through its
    own imports, or through its package's ``__init__``), so that ``import quadsim`` stays light;
    and the few of :data:`STARTUP`, which keep the ``quadsim`` command's start-up short."""
    graph = {m: _imported_modules(p) for m, p in MODULES.items()}
    direct = {m: _heavy_on_import(p) for m, p in MODULES.items()}

    def heavy(m: str, seen: set[str]) -> set[str]:
        if m in seen:
            return set()
        seen.add(m)
        return direct.get(m, set()).union(*(heavy(t, seen) for t in graph.get(m, ())))

    hidden, used = [], set()
    for p in FILES:
        rel = p.relative_to(SRC).as_posix()
        for line, m, fn in _function_imports(p):
            if any(heavy(r, set()) for r in _brings_in(_module(p), m)):
                continue
            if m in STARTUP.get(rel, {}).get(fn, ()):
                used.add((rel, fn, m))
                continue
            hidden.append(f"{rel}:{line}: {m} (in {fn})")
    assert not hidden, "imports inside functions of modules that import nothing heavy:\n" + (
        "\n".join(hidden))
    listed = {(f, fn, m) for f, fns in STARTUP.items() for fn, ms in fns.items() for m in ms}
    assert listed <= used, f"STARTUP names imports that are not there: {sorted(listed - used)}"


def test_the_module_level_check_sees_hidden_and_heavy_imports(monkeypatch):
    fake = SRC / "loop" / "flight.py"
    text = ("import casadi.tools\nfrom ..physics import rotation\ndef f():\n    import jax\n"
            "    from . import brain\n    from ..engines import native\n")  # fmt: skip
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: text)
    assert _function_imports(fake) == [(5, "quadsim.loop.brain", "f"),
                                       (6, "quadsim.engines.native", "f")]  # fmt: skip
    assert _heavy_on_import(fake) == {"casadi"}
    assert _brings_in("quadsim.app.ros2.live", "quadsim.app.envs.actions") == {
        "quadsim.app.envs", "quadsim.app.envs.actions"}  # its package's __init__ runs first
    assert _brings_in("quadsim.app.envs.core", "quadsim.app.envs.actions") == {
        "quadsim.app.envs.actions"}  # fmt: skip
