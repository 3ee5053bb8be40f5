"""The peer comparisons in ``benchmarks/``: ``closed_loop.py``, ``plant.py`` and ``peers.py``.

The scripts are imported by path (as tests/test_examples_seeds.py does with ``examples/``).
crazyflow and RotorPy are not needed: they live in ``.venv-bench``, and a missing or failing peer
must be reported, not raised. The timing itself is no test.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

from quadsim.app import bench_closed_loop as bcl

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def scripts(monkeypatch) -> SimpleNamespace:
    """``benchmarks/peers.py`` as the ``peers`` the scripts import, and the two scripts."""
    peers = _load("peers")
    monkeypatch.setitem(sys.modules, "peers", peers)
    return SimpleNamespace(peers=peers, closed_loop=_load("closed_loop"), plant=_load("plant"))


def _no_peers(monkeypatch, scripts: SimpleNamespace) -> None:
    monkeypatch.setattr(scripts.peers, "available", lambda: {"crazyflow": None, "rotorpy": None})


def test_peers_imports_without_the_peers_and_prints_their_versions(scripts):
    found = scripts.peers.available()
    assert set(found) == {"crazyflow", "rotorpy"}
    out = subprocess.run([sys.executable, str(BENCH / "peers.py")], capture_output=True,
                         text=True, timeout=60)  # fmt: skip
    assert out.returncode == 0 and out.stdout.strip() == f"peers: {found}"


def test_closed_loop_missing_or_failing_peer_is_reported_not_raised(scripts, monkeypatch):
    cl = scripts.closed_loop
    _no_peers(monkeypatch, scripts)
    lines = []
    res = cl.run(True, False, True, sizes=[2], repeats=1, fly=False, echo=lines.append)
    assert "crazyflow: not installed" in lines[0] and res["peer"]["crazyflow"] is None
    assert "benchmarks/setup_peers.sh" in lines[0] and "benchmarks/closed_loop.py" in lines[0]
    assert [r["system"] for r in res["closed_loop"]] == ["quadsim"]
    text = cl.table(res)
    assert lines[0] in text and "ratio vs best" not in text  # no peer column without the peer

    def broken(*args, **kwargs):
        raise RuntimeError("crazyflow closed_loop benchmark failed (exit 1):\nImportError: x")

    monkeypatch.setattr(scripts.peers, "available",
                        lambda: {"crazyflow": "0.4.0", "rotorpy": None})  # fmt: skip
    monkeypatch.setattr(scripts.peers, "crazyflow_closed_loop", broken)
    monkeypatch.setattr(scripts.peers, "crazyflow_env", broken)
    lines.clear()
    res = cl.run(True, False, True, sizes=[2], repeats=1, fly=False, echo=lines.append)
    assert res["peer"]["note"] == ("crazyflow: closed loop not measured: crazyflow closed_loop "
                                   "benchmark failed (exit 1):")  # fmt: skip
    assert res["peer"]["note"] in lines and len(res["closed_loop"]) == 1
    assert res["peer"]["note"] in cl.table(res)
    res = cl.run(False, True, True, num_envs=4, repeats=1, echo=lines.append)
    assert res["peer"]["note"].startswith("crazyflow: env not measured: ")
    assert [r["system"] for r in res["envs"]] == ["quadsim"] * len(bcl.LEVELS)

    lines.clear()
    res = cl.run(True, False, True, sizes=[2], repeats=1, fly=False, with_peers=False,
                 echo=lines.append)  # fmt: skip
    assert lines[0] == "crazyflow: skipped (--no-peers); quadsim only"


def _result(closed_loop: list, envs: list, **settings) -> dict:
    """A benchmark result as the scripts' ``run`` returns it, with these records."""
    return {
        "machine": {"cpu": "X", "cores": 2, "usable_cores": 2, "platform": "Linux x86_64",
                    "omp_num_threads": None, "load_avg": [1.0, 1.0, 1.0]},
        "versions": {"quadsim": "0.1.0", "crazyflow": "0.4.0"},
        "settings": {"repeats": 5, "quick": False, **settings},
        "peer": {"crazyflow": "0.4.0", "note": None}, "load_end": [1.5, 1.0, 1.0],
        "closed_loop": closed_loop, "envs": envs,
    }  # fmt: skip


def test_comparison_table_ratios_and_targets(scripts):
    res = _result(
        [
            {"system": "quadsim", "path": "compiled", "n": 1, "drone_steps_per_s": 2e6},
            {"system": "quadsim", "path": "compiled", "n": 1024, "drone_steps_per_s": 3e7},
            {"system": "quadsim", "path": "fly-cmd", "n": 1, "drone_steps_per_s": 1e6},
            {"system": "crazyflow", "path": "loop", "n": 1, "drone_steps_per_s": 4e3},
            {"system": "crazyflow", "path": "held", "n": 1, "drone_steps_per_s": 2.5e5},
            {"system": "crazyflow", "path": "scan", "n": 1, "drone_steps_per_s": 1e5},
            {"system": "crazyflow", "path": "held", "n": 1024, "drone_steps_per_s": 4e6},
        ],
        [
            {"system": "quadsim", "action": "thrust_attitude", "config": "native float32",
             "num_envs": 1024, "env_steps_per_s": 1e6, "drone_steps_per_s": 5e6, "substeps": 5},
            {"system": "crazyflow", "action": "attitude", "config": "first_principles+rk4",
             "num_envs": 1024, "env_steps_per_s": 4e5, "drone_steps_per_s": 2e6, "substeps": 5},
            {"system": "crazyflow", "action": "attitude", "config": "so_rpy",
             "num_envs": 1024, "env_steps_per_s": 8e5, "drone_steps_per_s": 4e6, "substeps": 5},
        ],
        sizes=[1, 1024],
    )  # fmt: skip
    text = scripts.closed_loop.table(res)
    lines = text.splitlines()
    assert "load average 1.00 at the start, 1.50 at the end" in text
    head = next(ln for ln in lines if ln.split()[:1] == ["N"])
    assert head.endswith("ratio vs best  vs moving ref  fly-cmd vs best")
    row1 = next(ln.split() for ln in lines if ln.split()[:1] == ["1"])
    assert row1 == ["1", "2,000,000", "1,000,000", "4,000", "100,000", "250,000", "8.0x",
                    "20.0x", "4.0x"]  # fmt: skip
    row2 = next(ln.split() for ln in lines if ln.split()[:1] == ["1024"])
    assert row2 == ["1024", "30,000,000", "-", "-", "-", "4,000,000", "7.5x", "-", "-"]
    assert "met      closed loop N=1: quadsim / crazyflow best = 8.0x (target >= 5x)" in text
    assert "NOT MET  closed loop N=1024: quadsim / crazyflow best = 7.5x (target >= 10x)" in text
    assert ("NOT MET  quadsim fly N=1 (its summary's wall_time_s) / crazyflow best = 4.0x "
            "(target >= 5x)") in text  # fmt: skip
    assert "NOT MET  env thrust_attitude: quadsim / crazyflow attitude env " \
           "(first_principles+rk4) = 2.5x, vs its fastest configuration 1.2x" in text
    assert scripts.closed_loop.MODES_NOTE in lines and bcl.FLY_CMD_NOTE in lines


def test_the_before_column_and_its_ratio(scripts):
    rates = {("quadsim", "compiled"): 2e6, ("quadsim", "fly-cmd"): 1e6,
             ("quadsim", "fly-cmd-before"): 5e4, ("crazyflow", "held"): 2e5}  # fmt: skip
    recs = [{"system": system, "path": path, "n": 1, "drone_steps_per_s": rate}
            for (system, path), rate in rates.items()]  # fmt: skip
    res = _result(recs, [], sizes=[1], fly_before="/tmp/b/src")
    lines = scripts.closed_loop.table(res).splitlines()
    head = next(ln for ln in lines if ln.split()[:1] == ["N"])
    assert "quadsim fly-cmd-before" in head and head.endswith("fly-cmd vs best  before vs best")
    row = next(ln.split() for ln in lines if ln.split()[:1] == ["1"])
    assert row == ["1", "2,000,000", "1,000,000", "50,000", "200,000", "10.0x", "-", "5.0x",
                   "0.2x"]  # fmt: skip
    assert "quadsim fly-cmd-before: the same command, run from /tmp/b/src" in lines


def test_fly_command_rate_runs_the_package_it_is_given(tmp_path):
    """``src`` comes first on the child's path: a stand-in ``quadsim`` whose fly reports 0.5 s."""
    cli = tmp_path / "src" / "quadsim" / "app" / "cli.py"
    cli.parent.mkdir(parents=True)
    (cli.parents[1] / "__init__.py").write_text("")
    (cli.parent / "__init__.py").write_text("")
    cli.write_text("import json, pathlib, sys\n"
                   "out = pathlib.Path(sys.argv[sys.argv.index('--out') + 1])\n"
                   "out.mkdir(parents=True)\n"
                   "(out / 'summary.json').write_text(json.dumps({'wall_time_s': 0.5, "
                   "'loop': 'stand-in'}))\n")  # fmt: skip
    got = bcl.fly_command_rate(1, repeats=2, duration=1.0, src=str(tmp_path / "src"))
    assert got["loop"] == "stand-in" and got["steps"] == round(1.0 / bcl.DT)
    assert got["runs"] == [got["steps"] / 0.5] * 2


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--fly-before", "/nonexistent"], "closed_loop.py: --fly-before /nonexistent: no "
                                           "quadsim/app/cli.py in it (give a checkout's src "
                                           "folder)"),
        (["--fly-before", str(Path(bcl.__file__).parents[2]), "--no-fly"],
         "closed_loop.py: --fly-before needs the closed loop's fly rows"),
        (["--sizes", "0"], "closed_loop.py: --sizes takes positive integers; got '0'"),
        (["--num-envs", "4"], "closed_loop.py: --num-envs needs --envs"),
        (["--no-closed-loop"], "closed_loop.py: --no-closed-loop needs --envs (nothing to "
                               "measure)"),
    ],
)
def test_closed_loop_bad_flags_exit_2_with_one_line(scripts, argv, message, capsys):
    assert scripts.closed_loop.main(argv) == 2
    assert capsys.readouterr().err == message + "\n"


def test_closed_loop_runs_as_a_script(tmp_path):
    """``python benchmarks/closed_loop.py`` finds ``peers`` beside it; quadsim's rows come."""
    path = tmp_path / "cl.json"
    args = [sys.executable, str(BENCH / "closed_loop.py"), "--quick", "--sizes", "1", "--no-fly",
            "--no-peers", "--json", str(path)]  # fmt: skip
    out = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "crazyflow: skipped (--no-peers); quadsim only" in out.stdout
    assert "Traceback" not in out.stderr
    head = next(ln.split() for ln in out.stdout.splitlines() if ln.split()[:1] == ["N"])
    assert head == ["N", "quadsim", "compiled"]
    data = json.loads(path.read_text())
    assert data["peer"] == {"crazyflow": None, "note": "crazyflow: skipped (--no-peers); "
                                                       "quadsim only"}  # fmt: skip
    assert "crazyflow" in data["versions"]


def test_plant_missing_or_failing_peer_is_reported_not_raised(scripts, monkeypatch):
    plant = scripts.plant
    _no_peers(monkeypatch, scripts)
    result, lines = {"records": [], "latency": {"native": 1e5}, "memory": {}}, []
    notes = plant.measure_peers(result, True, lines.append)
    assert notes == [f"crazyflow: not installed, not measured ({plant.SETUP})",
                     f"rotorpy: not installed, not measured ({plant.SETUP})"]  # fmt: skip
    assert result["records"] == [] and lines == [f"  {n}" for n in notes]

    def broken(*args, **kwargs):
        raise RuntimeError("crazyflow rollout benchmark failed (exit 1):\nImportError: x")

    monkeypatch.setattr(scripts.peers, "available",
                        lambda: {"crazyflow": "0.4.0", "rotorpy": None})  # fmt: skip
    monkeypatch.setattr(scripts.peers, "crazyflow_rollout", broken)
    notes = plant.measure_peers(result, True, lines.append)
    assert notes[0] == ("crazyflow: not measured (RuntimeError: crazyflow rollout benchmark "
                        "failed (exit 1):)")  # fmt: skip
    assert result["records"] == []


def test_plant_ratios_and_output(scripts, monkeypatch, capsys, tmp_path):
    plant = scripts.plant
    fake = {
        "records": [
            dict(system="quadsim", backend="native", dtype="float32", n=4096,
                 drone_steps_per_s=9e7),
        ],
        "latency": {"native": 6e4},
        "memory": {},
    }  # fmt: skip

    def peers_run(result, quick, echo):
        result["records"].append(dict(system="crazyflow", backend="jax", dtype="float32", n=4096,
                                      drone_steps_per_s=3e6))  # fmt: skip
        result["latency"]["rotorpy"] = 300.0
        return ["rotorpy: batched not installed"]

    monkeypatch.setattr(plant.bench, "run", lambda quick, echo: fake)
    monkeypatch.setattr(plant, "measure_peers", peers_run)
    path = tmp_path / "plant.json"
    assert plant.main(["--quick", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert "quadsim / crazyflow at N=4096 float32: 30.0x" in out
    assert "quadsim / rotorpy single-drone step: 200x" in out
    assert "best float32: 90,000,000 drone-steps/s" in out
    assert "rotorpy: batched not installed" in out
    assert [r["system"] for r in json.loads(path.read_text())] == ["quadsim", "crazyflow"]
