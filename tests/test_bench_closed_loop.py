"""``quadsim bench --closed-loop --envs``: the command runs and reports (the timing is no test)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from quadsim.app import bench_closed_loop as bcl
from quadsim.app import bench_peers, cli


def _sane(rate: float) -> bool:
    return 1e2 < rate < 1e11


def test_quick_run_in_a_subprocess_writes_table_and_json(tmp_path):
    path = tmp_path / "bench.json"
    args = [sys.executable, "-m", "quadsim.app.cli", "bench", "--closed-loop", "--envs", "--quick",
            "--sizes", "1", "8", "--num-envs", "8", "--no-fly", "--json", str(path)]  # fmt: skip
    installed = bench_peers.available()["crazyflow"] is not None
    if installed:  # measuring crazyflow takes a minute: the skip is reported the same way
        args.append("--no-peers")
    out = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    note = "skipped (--no-peers)" if installed else "crazyflow: not installed, quadsim only"
    assert note in out.stdout and note in out.stderr  # in the table and as progress
    assert "Traceback" not in out.stderr
    assert "quadsim   compiled      N=     8" in out.stderr  # progress goes to stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("machine: ") and " cores (" in lines[0]
    assert lines[1].startswith("versions: ") and "quadsim " in lines[1]
    head = next(i for i, ln in enumerate(lines) if ln.split()[:3] == ["N", "quadsim", "compiled"])
    for ln, n in zip(lines[head + 1:head + 3], (1, 8), strict=True):
        cells = ln.split()
        assert cells[0] == str(n) and _sane(float(cells[1].replace(",", "")))
    for level in bcl.LEVELS:
        assert any(ln.split()[:2] == ["quadsim", level] for ln in lines)

    data = json.loads(path.read_text())
    assert data["settings"]["sizes"] == [1, 8] and data["settings"]["num_envs"] == 8
    assert data["peer"]["crazyflow"] is None and data["peer"]["note"]
    assert data["machine"]["cores"] >= 1 and data["versions"]["quadsim"]
    loop = data["closed_loop"]
    assert [(r["system"], r["path"], r["n"]) for r in loop] == [
        ("quadsim", "compiled", 1), ("quadsim", "compiled", 8)]  # fmt: skip
    for r in loop:
        assert _sane(r["drone_steps_per_s"]) and len(r["runs"]) == 3 and r["steps"] >= 50
        assert all(_sane(x) for x in r["runs"])
    assert [r["action"] for r in data["envs"]] == list(bcl.LEVELS)
    for r in data["envs"]:
        assert r["num_envs"] == 8 and r["substeps"] == 5 and _sane(r["env_steps_per_s"])
        assert r["drone_steps_per_s"] == pytest.approx(5 * r["env_steps_per_s"])


def test_missing_or_failing_peer_is_reported_not_raised(monkeypatch):
    monkeypatch.setattr(bench_peers, "available", lambda: {"crazyflow": None, "rotorpy": None})
    lines = []
    res = bcl.run(True, False, True, sizes=[2], repeats=1, fly=False, echo=lines.append)
    assert "crazyflow: not installed" in lines[0] and res["peer"]["crazyflow"] is None
    assert [r["system"] for r in res["closed_loop"]] == ["quadsim"]
    assert "ratio" not in bcl.table(res)  # no peer column without the peer

    def broken(*args, **kwargs):
        raise RuntimeError("crazyflow closed_loop benchmark failed (exit 1):\nImportError: x")

    monkeypatch.setattr(bench_peers, "available", lambda: {"crazyflow": "0.4.0", "rotorpy": None})
    monkeypatch.setattr(bench_peers, "crazyflow_closed_loop", broken)
    lines.clear()
    res = bcl.run(True, False, True, sizes=[2], repeats=1, fly=False, echo=lines.append)
    assert res["peer"]["note"] == ("crazyflow: closed loop not measured: crazyflow closed_loop "
                                   "benchmark failed (exit 1):")  # fmt: skip
    assert res["peer"]["note"] in lines and len(res["closed_loop"]) == 1


def test_table_ratios_and_targets():
    res = {
        "machine": {"cpu": "X", "cores": 2, "usable_cores": 2, "platform": "Linux x86_64",
                    "omp_num_threads": None, "load_avg": [1.0, 1.0, 1.0]},
        "versions": {"quadsim": "0.1.0", "crazyflow": "0.4.0"},
        "settings": {"sizes": [1, 1024], "repeats": 5, "quick": False},
        "peer": {"crazyflow": "0.4.0", "note": None}, "load_end": [1.5, 1.0, 1.0],
        "closed_loop": [
            {"system": "quadsim", "path": "compiled", "n": 1, "drone_steps_per_s": 2e6},
            {"system": "quadsim", "path": "compiled", "n": 1024, "drone_steps_per_s": 3e7},
            {"system": "crazyflow", "path": "loop", "n": 1, "drone_steps_per_s": 4e3},
            {"system": "crazyflow", "path": "held", "n": 1, "drone_steps_per_s": 2.5e5},
            {"system": "crazyflow", "path": "scan", "n": 1, "drone_steps_per_s": 1e5},
            {"system": "crazyflow", "path": "held", "n": 1024, "drone_steps_per_s": 4e6},
        ],
        "envs": [
            {"system": "quadsim", "action": "thrust_attitude", "config": "native float32",
             "num_envs": 1024, "env_steps_per_s": 1e6, "drone_steps_per_s": 5e6, "substeps": 5},
            {"system": "crazyflow", "action": "attitude", "config": "first_principles+rk4",
             "num_envs": 1024, "env_steps_per_s": 4e5, "drone_steps_per_s": 2e6, "substeps": 5},
            {"system": "crazyflow", "action": "attitude", "config": "so_rpy",
             "num_envs": 1024, "env_steps_per_s": 8e5, "drone_steps_per_s": 4e6, "substeps": 5},
        ],
    }  # fmt: skip
    text = bcl.table(res)
    assert "load average 1.00 at the start, 1.50 at the end" in text
    row1 = next(ln.split() for ln in text.splitlines() if ln.split()[:1] == ["1"])
    assert row1 == ["1", "2,000,000", "4,000", "100,000", "250,000", "8.0x", "20.0x"]
    row2 = next(ln.split() for ln in text.splitlines() if ln.split()[:1] == ["1024"])
    assert row2 == ["1024", "30,000,000", "-", "-", "4,000,000", "7.5x", "-"]
    assert "met      closed loop N=1: quadsim / crazyflow best = 8.0x (target >= 5x)" in text
    assert "NOT MET  closed loop N=1024: quadsim / crazyflow best = 7.5x (target >= 10x)" in text
    assert "NOT MET  env thrust_attitude: quadsim / crazyflow attitude env " \
           "(first_principles+rk4) = 2.5x, vs its fastest configuration 1.2x" in text


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--closed-loop", "--sizes", "0"], "--sizes takes positive integers; got '0'"),
        (["--closed-loop", "--sizes", "x"], "--sizes takes positive integers; got 'x'"),
        (["--envs", "--num-envs", "-3"], "--num-envs takes positive integers; got '-3'"),
        (["--sizes", "4"], "--sizes needs --closed-loop or --envs"),
        (["--envs", "--sizes", "4"], "--sizes needs --closed-loop"),
        (["--closed-loop", "--num-envs", "4"], "--num-envs needs --envs"),
        (["--no-peers"], "--no-peers needs --closed-loop or --envs"),
    ],
)
def test_bad_flags_exit_2_with_one_line(argv, message, capsys):
    assert cli.main(["bench", *argv]) == 2
    err = capsys.readouterr().err
    assert err == f"quadsim: bench: {message}\n"
