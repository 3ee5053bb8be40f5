"""``quadsim bench --closed-loop --envs``: the command runs and reports (the timing is no test).

It measures quadsim alone; the comparison with crazyflow is ``benchmarks/closed_loop.py``
(tests/test_benchmarks_peers.py).
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

from quadsim.app import bench_closed_loop as bcl
from quadsim.app import cli


def _sane(rate: float) -> bool:
    return 1e2 < rate < 1e11


def test_quick_run_in_a_subprocess_writes_table_and_json(tmp_path):
    path = tmp_path / "bench.json"
    args = [sys.executable, "-m", "quadsim.app.cli", "bench", "--closed-loop", "--envs", "--quick",
            "--sizes", "1", "8", "--num-envs", "8", "--no-fly", "--json", str(path)]  # fmt: skip
    out = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.splitlines()[-1] == bcl.PEERS_NOTE  # where the peers are compared
    assert "python benchmarks/closed_loop.py" in bcl.PEERS_NOTE
    assert "bash benchmarks/setup_peers.sh" in bcl.PEERS_NOTE
    assert "Traceback" not in out.stderr and "crazyflow" not in out.stderr
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
    assert "peer" not in data and "crazyflow" not in data["versions"]
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


def test_table_lists_quadsim_paths_without_peer_columns():
    res = {
        "machine": {"cpu": "X", "cores": 2, "usable_cores": 2, "platform": "Linux x86_64",
                    "omp_num_threads": "1", "load_avg": [1.0, 1.0, 1.0]},
        "versions": {"python": "3.11", "quadsim": "0.1.0", "jax": None},
        "settings": {"sizes": [1, 64], "repeats": 3, "quick": True},
        "load_end": [1.5, 1.0, 1.0],
        "closed_loop": [
            {"system": "quadsim", "path": "compiled", "n": 1, "drone_steps_per_s": 2e6},
            {"system": "quadsim", "path": "compiled", "n": 64, "drone_steps_per_s": 9e7},
            {"system": "quadsim", "path": "fly-cmd", "n": 1, "drone_steps_per_s": 4e5},
        ],
        "envs": [
            {"system": "quadsim", "action": "thrust_attitude", "config": "native float32",
             "num_envs": 64, "env_steps_per_s": 1e6, "drone_steps_per_s": 5e6, "substeps": 5},
        ],
    }  # fmt: skip
    text = bcl.table(res)
    lines = text.splitlines()
    assert lines[0].endswith("load average 1.00 at the start, 1.50 at the end; OMP_NUM_THREADS=1")
    assert lines[1] == "versions: python 3.11, quadsim 0.1.0, jax not installed"
    assert "[--quick: short runs, not for quoting]" in lines[2]
    head = next(ln.split() for ln in lines if ln.split()[:1] == ["N"])
    assert head == ["N", "quadsim", "compiled", "quadsim", "fly-cmd"]
    assert next(ln.split() for ln in lines if ln.split()[:1] == ["1"]) == ["1", "2,000,000",
                                                                          "400,000"]  # fmt: skip
    assert next(ln.split() for ln in lines if ln.split()[:1] == ["64"]) == ["64", "90,000,000",
                                                                           "-"]  # fmt: skip
    assert bcl.FLY_CMD_NOTE in lines and bcl.ENV_TITLE.format(substeps=5) in lines
    assert ["quadsim", "thrust_attitude", "native", "float32", "64", "1,000,000",
            "5,000,000"] in [ln.split() for ln in lines]  # fmt: skip
    assert "vs best" not in text and "crazyflow" not in text and "target" not in text


def test_the_peers_left_the_package():
    """crazyflow's measurement is a benchmarks/ script: the package has no peer module."""
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("quadsim.app.bench_peers")
    assert "crazyflow" not in bcl.versions()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--closed-loop", "--sizes", "0"], "--sizes takes positive integers; got '0'"),
        (["--closed-loop", "--sizes", "x"], "--sizes takes positive integers; got 'x'"),
        (["--envs", "--num-envs", "-3"], "--num-envs takes positive integers; got '-3'"),
        (["--sizes", "4"], "--sizes needs --closed-loop or --envs"),
        (["--envs", "--sizes", "4"], "--sizes needs --closed-loop"),
        (["--closed-loop", "--num-envs", "4"], "--num-envs needs --envs"),
        (["--no-fly"], "--no-fly needs --closed-loop or --envs"),
    ],
)
def test_bad_flags_exit_2_with_one_line(argv, message, capsys):
    assert cli.main(["bench", *argv]) == 2
    err = capsys.readouterr().err
    assert err == f"quadsim: bench: {message}\n"


def test_no_peers_is_not_a_bench_flag(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["bench", "--closed-loop", "--no-peers"])
    assert e.value.code == 2 and "unrecognized arguments: --no-peers" in capsys.readouterr().err
