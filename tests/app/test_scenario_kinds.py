"""A scenario's ``kind`` names code: whatever that code does wrong is exit 2 with the file, key and
line, and nothing of a class is called before it is known to be a part (issue 40, item 4).

Before: ``kind = "venv.__main__:X"`` made a virtual environment named ``fly`` in the current
folder, a module calling ``sys.exit(0)`` on import gave exit 0 with nothing flown, a
``RuntimeError`` exit 1, a ``SyntaxError`` exit 70, a duck-typed class had its ``from_table``
called, and an entry point skipped even that check. Each case runs the real command.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

MODULES = {
    "raises_on_import.py": "raise RuntimeError('boom at import')\n",
    "bad_syntax.py": "def f(:\n",
    "exits_on_import.py": "import sys\nsys.exit(0)\n",
    "duck.py": (
        "import pathlib\n"
        "class Duck:\n"
        "    outputs = ()\n"
        "    def measure(self, *a):\n"
        "        return {}, None\n"
        "    @classmethod\n"
        "    def from_table(cls, *a):\n"
        "        pathlib.Path('DUCK_CALLED').write_text('x')\n"
        "        return cls()\n"
    ),
}
ENTRY_POINTS = (
    "[quadsim.sensors]\nnot_a_part = duck:Duck\ngone = no_such_module_xyz:Part\n"
    "[quadsim.controllers]\nsensor_as_controller = quadsim.loop.parts.rangefinder:Rangefinder\n"
)

CASES = [
    ("sensors", "raises_on_import:Part", "importing 'raises_on_import' failed: RuntimeError"),
    ("sensors", "bad_syntax:Part", "importing 'bad_syntax' failed: SyntaxError"),
    ("sensors", "exits_on_import:Part", "ended the program (SystemExit(0)); nothing was flown"),
    ("sensors", "venv.__main__:X", "a program's __main__ module"),
    ("sensors", "duck:Duck", "is not a sensor part (a subclass of quadsim.loop.parts.Sensor)"),
    ("sensors", "not_a_part", "the entry point 'duck:Duck' of 'quadsim.sensors' is not a sensor"),
    ("sensors", "gone", "cannot import 'no_such_module_xyz'"),
    ("sensors", "no_colon_no_entry_point", "unknown sensor kind 'no_colon_no_entry_point'"),
    ("sensors", ":Part", "expected 'package.module:Class'"),
    ("controller", "quadsim.loop.parts.rangefinder:Rangefinder",
     "is not a controller part (a subclass of quadsim.loop.parts.Controller)"),
    ("controller", "sensor_as_controller", "is not a controller part"),
]


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory):
    """A folder with the hostile modules and a distribution registering entry points."""
    root = tmp_path_factory.mktemp("hostile")
    for name, text in MODULES.items():
        (root / name).write_text(text)
    dist = root / "hostile_parts-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: hostile-parts\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(ENTRY_POINTS)
    return root


@pytest.mark.parametrize(("section", "kind", "says"), CASES,
                         ids=[f"{s}-{k}" for s, k, _ in CASES])  # fmt: skip
def test_a_kind_that_misbehaves_exits_2_with_its_key_and_line(tmp_path, plugin_path, section,
                                                               kind, says):  # fmt: skip
    table = "[sensors.tof]" if section == "sensors" else "[controller]"
    scen = tmp_path / "s.toml"
    scen.write_text(f'duration = 0.1\n\n{table}\nkind = "{kind}"\n')
    env = {**os.environ, "PYTHONPATH": str(plugin_path)}
    r = subprocess.run([sys.executable, "-m", "quadsim.app.cli", "fly", str(scen), "--out",
                        str(tmp_path / "run"), "--quiet", "--no-plots"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    key = "sensors.tof.kind" if section == "sensors" else "controller.kind"
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert f"{scen}: {key} (line 4): " in r.stderr, r.stderr
    assert says in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    # nothing the named code would have done happened, and nothing was flown
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.toml"]
