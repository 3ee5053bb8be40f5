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


def test_quickstart_prints_what_the_readme_shows():
    shown = next(b for b in blocks("") if "hover" in b).strip()
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py")],
        capture_output=True, text=True, check=True, timeout=300,
    ).stdout.strip()  # fmt: skip
    assert out == shown
