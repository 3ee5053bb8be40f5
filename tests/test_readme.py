"""The README stays true: its commands, its Python example and its quickstart output."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def blocks(lang: str) -> list[str]:
    """Fenced code blocks of the README whose info string is ``lang`` ("" for plain blocks)."""
    found = re.findall(r"^```(\w*)\n(.*?)^```$", README, flags=re.S | re.M)
    return [body for info, body in found if info == lang]


def test_ci_runs_exactly_the_readme_test_command():
    test_cmd = next(b.strip() for b in blocks("bash") if "pytest" in b)
    ci_lines = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert test_cmd in ci_lines


def test_readme_python_examples_run():
    code = blocks("python")
    assert code, "the README shows a Python example"
    for block in code:
        exec(compile(block, "README.md", "exec"), {})


def test_quickstart_flies_the_showcase_and_writes_what_the_readme_lists(tmp_path):
    quick = next(b for b in blocks("bash") if "quadsim fly" in b).strip()
    cmd = quick.split("&&")[1].split()
    assert cmd[:2] == ["quadsim", "fly"]
    out = subprocess.run(
        [sys.executable, "-m", "quadsim.app.cli", *cmd[1:], "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    shown = next(b for b in blocks("") if b.startswith("status")).strip().splitlines()
    printed = out.stdout.strip().splitlines()[: len(shown)]
    timing = ("wall time", "real-time factor")  # machine-dependent
    assert [ln for ln in printed if not ln.startswith(timing)] == [
        ln for ln in shown if not ln.startswith(timing)
    ]
    quickstart = README[README.index("## Quickstart") : README.index("## Install")]
    listed = re.findall(r"^\| `([\w.]+)` \|", quickstart, flags=re.M)
    assert "trajectory.parquet" in listed and "flight.gif" in listed
    for name in listed:
        assert (tmp_path / name).stat().st_size > 0, name


def test_the_open_loop_quickstart_script_runs():
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py")],
        capture_output=True, text=True, check=True, timeout=300,
    ).stdout  # fmt: skip
    assert "cf2x_L250: mass 31.9 g, hover 18968 RPM" in out and "after 0.5 s" in out


def _extra(name: str, extras: dict) -> set[str]:
    """The distributions an extra of pyproject.toml brings, its quadsim[...] extras resolved."""
    out = set()
    for req in extras[name]:
        m = re.fullmatch(r"quadsim\[([\w,]+)\]", req)
        if m:
            for sub in m.group(1).split(","):
                out |= _extra(sub, extras)
        else:
            out.add(re.split(r"[<>=!\[ ;]", req, maxsplit=1)[0].lower())
    return out


BLOCKER = """
import importlib.abc, sys
BLOCKED = set(sys.argv.pop(1).split(","))
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"blocked: {name} (not in the quickstart's extra)")
sys.meta_path.insert(0, Block())
from quadsim.app.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_the_quickstart_extra_is_what_the_showcase_needs(tmp_path):
    """Issue 40, item 15: the quickstart installs an extra with what ``quadsim fly`` needs (not
    2.4 GB of ``all``): the showcase flies with every module of the other extras blocked."""
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = extras["optional-dependencies"]
    quick = next(b for b in blocks("bash") if "quadsim fly" in b).strip()
    m = re.search(r'pip install -e "\.\[(\w+)\]"', quick)
    assert m and m.group(1) != "all", quick
    need = _extra(m.group(1), extras)
    assert {"casadi", "pyarrow", "matplotlib", "pillow", "tqdm"} <= need
    modules = {"jax": "jax", "jaxlib": "jaxlib", "torch": "torch", "ray": "ray",
               "gymnasium": "gymnasium", "stable-baselines3": "stable_baselines3",
               "cyclonedds": "cyclonedds", "mcap": "mcap", "imageio-ffmpeg": "imageio_ffmpeg"}
    others = set().union(*(_extra(x, extras) for x in extras if x not in ("dev", "bench")))
    blocked = sorted(modules[d] for d in others - need if d in modules)
    assert {"jax", "torch", "ray"} <= set(blocked)
    cmd = quick.split("&&")[1].split()[1:]
    r = subprocess.run([sys.executable, "-c", BLOCKER, ",".join(blocked), *cmd, "--out",
                        str(tmp_path), "--quiet"], capture_output=True, text=True,
                       timeout=600)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "flight.gif").stat().st_size > 0
