"""The hostile-part suite (issue 40, item 5): parts that break their declaration in one way each
(``tests/hostile/hostile_parts.py``) are refused by the real ``quadsim fly`` before it flies,
exit 2 with one line naming the file, the part's table and its line, on every runner. Before,
13 such cases exited 70, a raising ``measure`` 1, a wrong size was broadcast into every column
on the compiled loop, float32 readings made the runners differ and a part drawing more normals
than it declared reused one sample for every axis.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from quadsim.engines import native

HOSTILE = Path(__file__).parent / "hostile"
BACKENDS = ["numpy", "jax"] + (["native"] if native.available() else [])

SENSORS = [
    ("BareArray", "BareArray.measure returned readings as ndarray, not a dict"),
    ("ReturnsNone", "ReturnsNone.measure returned NoneType None; it returns (readings dict, "),
    ("MissingKey", "returned the keys ['height']; it declares ['h'] (missing ['h'])"),
    ("ExtraKey", "(not declared: ['debug'])"),
    ("TooSmall", "returned 'v' of shape (2,); its declared size 3 needs (2, 3)"),
    ("TooBig", "returned 'h' of shape (2, 3); its declared size 1 needs (2,)"),
    ("Float32", "returned 'h' as float32 on a float64 state"),
    ("NotFinite", "returned 'h' not finite on a level hover at 1 m"),
    ("Raises", "Raises.measure failed on a level hover at 1 m: RuntimeError: sensor on fire"),
    ("InitRaises", "InitRaises.init failed for 2 drones: KeyError"),
    ("NotOutputs", "NotOutputs: outputs must be a tuple of quadsim.loop.parts.Output records"),
    ("StealsNormals", "reads normals past its 1 declared (column 2 of z); declare them"),
    ("Billion", "streams declare 1000000000 normals a step; at most 4096 per drone"),
]
CONTROLLERS = [
    ("NoneCommand", "NoneCommand.__call__ returned NoneType None; it returns (command, "),
    ("WrongCommand", "returned a command of shape (2, 3): the controller's command has last "
                     "axis 3"),
]


def _fly(tmp_path, text):
    scen = tmp_path / "s.toml"
    scen.write_text(text)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(HOSTILE), *filter(None, [os.environ.get("PYTHONPATH")])])}  # fmt: skip
    r = subprocess.run([sys.executable, "-m", "quadsim.app.cli", "fly", str(scen), "--out",
                        str(tmp_path / "run"), "--no-plots"], capture_output=True, text=True,
                       env=env, cwd=tmp_path, timeout=300)  # fmt: skip
    return scen, r


def _refused(r, scen, where, says, tmp_path):
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert f"quadsim: {scen}: {where}: " in r.stderr, r.stderr
    assert says in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp_path / "run").exists()  # refused before anything flew or was written


# every case before the per-step runner; the check is the same before the others (three show it)
CASES = [(b, c, s) for b in BACKENDS for c, s in SENSORS
         if b == "numpy" or c in ("TooSmall", "Float32", "StealsNormals")]  # fmt: skip


@pytest.mark.parametrize(("backend", "cls", "says"), CASES, ids=[f"{b}-{c}" for b, c, _ in CASES])
def test_a_hostile_sensor_part_exits_2_on_every_runner(tmp_path, backend, cls, says):
    scen, r = _fly(tmp_path, f'duration = 0.2\nn = 2\n[sim]\nbackend = "{backend}"\n\n'
                             f'[sensors.bad]\nkind = "hostile_parts:{cls}"\n')  # fmt: skip
    _refused(r, scen, "sensors.bad (line 6)", says, tmp_path)


def test_from_table_returning_a_non_part_exits_2(tmp_path):
    scen, r = _fly(tmp_path, 'duration = 0.2\n[sensors.bad]\n'
                             'kind = "hostile_parts:BuildsNothing"\n')  # fmt: skip
    _refused(r, scen, "sensors.bad.kind (line 3)", "BuildsNothing.from_table returned object",
             tmp_path)  # fmt: skip


@pytest.mark.parametrize(("cls", "says"), CONTROLLERS, ids=[c for c, _ in CONTROLLERS])
def test_a_hostile_controller_part_exits_2(tmp_path, cls, says):
    scen, r = _fly(tmp_path, f'duration = 0.2\nn = 2\n\n[controller]\n'
                             f'kind = "hostile_parts:{cls}"\n')  # fmt: skip
    _refused(r, scen, "controller.kind (line 5)", says, tmp_path)


def test_the_api_checks_parts_too(tmp_path):
    """``fly`` itself holds a part to its declaration, naming it."""
    sys.path.insert(0, str(HOSTILE))
    try:
        from hostile_parts import TooSmall

        from quadsim.engines.sim import Simulator
        from quadsim.loop.control import control, load_gains
        from quadsim.loop.flight import fly
        from quadsim.loop.trajectories import Hover

        sim = Simulator("cf2x_L250", n=3, dt=0.002, backend="numpy")
        gains = load_gains("cf2x_L250_geometric", drone=sim.drone, dt=sim.dt)
        with pytest.raises(ValueError, match=r"sensor part 'v3': TooSmall.measure returned 'v' "
                                             r"of shape \(2,\)"):  # fmt: skip
            fly(sim, Hover((0, 0, 1)), control, gains, duration=0.1, sensors=[TooSmall("v3")])
    finally:
        sys.path.remove(str(HOSTILE))
        sys.modules.pop("hostile_parts", None)


@pytest.mark.skipif(not native.available(), reason="needs CasADi and a C compiler")
def test_a_part_that_does_not_trace_is_named_in_one_line_and_quiet_silences_it(tmp_path):
    text = ('duration = 0.2\n[sim]\nbackend = "native"\n\n'
            '[sensors.bad]\nkind = "hostile_parts:NumpyOnly"\n')  # fmt: skip
    scen, r = _fly(tmp_path, text)
    assert r.returncode == 0, r.stderr
    (line,) = [ln for ln in r.stderr.splitlines() if "could not be traced" in ln]
    assert line.startswith("quadsim: warning: fly: sensor part 'bad' (NumpyOnly) could not be "
                           "traced by CasADi"), line  # fmt: skip
    assert "Geometric" not in line and ".py:" not in r.stderr, r.stderr
    q = subprocess.run([sys.executable, "-m", "quadsim.app.cli", "fly", str(scen), "--out",
                        str(tmp_path / "q"), "--no-plots", "--quiet"], capture_output=True,
                       text=True, cwd=tmp_path, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(HOSTILE)})  # fmt: skip
    assert q.returncode == 0 and q.stderr == "", q.stderr
