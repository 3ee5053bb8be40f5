"""Start-up of the ``quadsim`` command: what it imports, checked in a fresh interpreter.

No wall-clock assertion (a loaded 2-core CI machine would make it flaky): the heavy modules a
run does not need must not be imported at all. JAX only runs the Python flight loop, matplotlib
only draws the figures, SciPy only discretises Dryden turbulence (matrix exponential, Lyapunov
equation), solves min-snap trajectories and integrates with RK45; PyTorch and gymnasium belong
to other backends and the environments. The showcase has turbulence, so it may load SciPy.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "figure8_wind.toml"
HEAVY = ("jax", "jaxlib", "matplotlib", "scipy", "torch", "gymnasium")
SHOWCASE_HEAVY = tuple(m for m in HEAVY if m != "scipy")  # its Dryden turbulence needs SciPy


def _imported_after(code: str, path: Path | None = None) -> dict:
    """Run ``code`` in a fresh interpreter (``path`` first on its ``sys.path``); the top-level
    modules it imported and its ``out``."""
    script = (
        "import json, sys\nout = None\n" + code + "\n"
        "print(json.dumps({'modules': sorted({m.split('.')[0] for m in sys.modules}), "
        "'out': out}))\n"
    )
    if path is not None:
        script = f"import sys\nsys.path.insert(0, {str(path)!r})\n" + script
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_import_cli_loads_no_heavy_module():
    got = _imported_after("import quadsim.app.cli")
    loaded = (set(HEAVY) | {"casadi", "pyarrow", "PIL", "tqdm"}) & set(got["modules"])
    assert not loaded, sorted(loaded)


def test_showcase_scenario_validates_and_builds_without_jax_matplotlib():
    got = _imported_after(
        "from quadsim.app.scenario import build, load_scenario\n"
        f"build(load_scenario({str(EXAMPLE)!r}))"
    )
    loaded = set(SHOWCASE_HEAVY) & set(got["modules"])
    assert not loaded, sorted(loaded)


def test_showcase_fly_without_plots_loads_no_jax_matplotlib(tmp_path):
    from quadsim.engines import native

    if not native.available():
        pytest.skip("no C compiler: the showcase runs the Python loop (JAX where installed)")
    got = _imported_after(
        "from quadsim.app.cli import main\n"
        f"rc = main(['fly', {str(EXAMPLE)!r}, '--no-plots', '--quiet', '--out', "
        f"{str(tmp_path / 'run')!r}])\n"
        "flown = sorted(sys.modules)\n"
        "import pyarrow.parquet as pq\n"
        f"meta = json.loads(pq.read_schema({str(tmp_path / 'run' / 'trajectory.parquet')!r})"
        ".metadata[b'quadsim'])['meta']\n"
        "out = {'rc': rc, 'loop': meta.get('loop'), 'reason': meta.get('loop_reason'), "
        "'flown': flown}"
    )
    assert got["out"]["rc"] == 0
    loaded = set(SHOWCASE_HEAVY) & set(got["modules"])
    why = f"the flight ran the {got['out']['loop']!r} loop ({got['out']['reason']})"
    assert not loaded, f"{sorted(loaded)} imported; {why}"
    # what a flight does not need either: NumPy's masked arrays (pa.array looks for them) and
    # the resource readers with zipfile (importlib.resources.files); 30 ms of start-up together
    spared = {"numpy.ma", "zipfile", "importlib.readers"} & set(got["out"]["flown"])
    assert not spared, sorted(spared)


def test_a_flight_and_reading_its_log_do_not_import_pandas(tmp_path):
    """pyarrow imports pandas where it is installed (``to_numpy``, ``read_table``: 0.4 s); a
    stand-in ``pandas`` on the path shows whether anything asks for it."""
    from quadsim.engines import native

    if not native.available():
        pytest.skip("no C compiler: the showcase runs the Python loop (JAX where installed)")
    fake = tmp_path / "fake" / "pandas"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("__version__ = '2.2.0'\n")
    run = tmp_path / "run"
    got = _imported_after(
        "from quadsim.app.cli import main\n"
        f"rc = main(['fly', {str(EXAMPLE)!r}, '--no-plots', '--quiet', '--out', {str(run)!r}])\n"
        "from quadsim.app.io import read_log\n"
        f"log, meta = read_log({str(run / 'trajectory.parquet')!r})\n"
        "out = {'rc': rc, 'rows': int(log['pos'].shape[0])}",
        path=tmp_path / "fake",
    )
    assert got["out"]["rc"] == 0 and got["out"]["rows"] > 100
    assert "pandas" not in got["modules"]
