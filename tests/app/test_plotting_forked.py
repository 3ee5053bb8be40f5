"""Figures drawn in forked children: the same bytes as drawn alone, and no child left behind.

The fork tests run in a fresh interpreter (a real process): a test process may have loaded JAX,
whose threads make a fork unsafe and would turn the fork path off.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")
pytest.importorskip("PIL")

from quadsim.app.plotting import forked

LINUX = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fork path is Linux's")


def _run(script: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    here = Path(__file__).parent
    code = f"import sys; sys.path.insert(0, {str(here)!r})\n" + textwrap.dedent(script)
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


def _gone(pid: int) -> bool:
    """No such process, or a zombie of some other parent (not running)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _job(cost: float) -> forked.Job:
    return forked.Job(print, (), {}, Path("x.png"), cost)


def test_shares_balance_cost_costliest_first():
    jobs = [_job(1), _job(3), _job(1.5), _job(1), _job(3)]
    # loads after each: 3|0, 3|3, 4.5|3, 4.5|4, 4.5|5
    assert forked.shares(jobs, 2) == [[1, 2], [4, 0, 3]]
    assert forked.shares(jobs, 1) == [[1, 4, 2, 0, 3]]
    assert sorted(i for share in forked.shares(jobs, 3) for i in share) == list(range(5))


def test_no_fork_for_one_figure_or_with_threaded_libraries(monkeypatch):
    assert forked.cores(1) == 1
    monkeypatch.setitem(sys.modules, "jax", sys.modules["os"])  # a stand-in: only the name counts
    assert forked.cores(4) == 1


@LINUX
def test_forked_figures_are_the_bytes_drawn_alone(tmp_path):
    """plot_all with two processes writes exactly the files drawn in one (every figure)."""
    script = """
        import os, sys
        from test_plotting import META, make_log
        from quadsim.app.plotting import figures, forked
        if len(os.sched_getaffinity(0)) < 2:
            print("one core")  # the fork path cannot run
            raise SystemExit(0)
        log = make_log()
        log["est_pos"] = log["pos"] + 0.01
        log["est_quat"] = log["quat"]
        log["est_vel"] = log["vel"]
        calls = []
        real = os.fork
        os.fork = lambda: (calls.append(1), real())[1]
        par = figures.plot_all(log, META, sys.argv[1] + "/par", t_from=0.5)
        os.fork = real
        assert calls, "no child was forked"
        forked.cores = lambda n: 1
        ser = figures.plot_all(log, META, sys.argv[1] + "/ser", t_from=0.5)
        assert [p.name for p in par] == [p.name for p in ser], (par, ser)
        for a, b in zip(par, ser):
            assert a.read_bytes() == b.read_bytes(), a.name
        print(len(par), "figures", len(calls), "children")
    """
    r = _run(script, str(tmp_path))
    assert r.returncode == 0, r.stderr
    if "one core" not in r.stdout:
        assert r.stdout.split()[:2] == ["5", "figures"], r.stdout


@LINUX
def test_failed_child_is_drawn_by_the_parent_and_errors_raise_as_alone(tmp_path):
    """A figure whose child fails is drawn in the parent; an error raises as without children."""
    script = """
        import os, sys
        from pathlib import Path
        from quadsim.app.plotting import forked
        forked.cores = lambda n: 2
        parent = os.getpid()
        out = Path(sys.argv[1])

        def only_here(target):
            if os.getpid() != parent:
                raise RuntimeError("in the child")
            Path(target).write_bytes(b"parent")
            return Path(target)

        def fine(target):
            (open(target, "wb") if isinstance(target, Path) else target).write(b"child")
            return target

        jobs = [forked.Job(fine, (), {}, out / "a.png", 1.0),
                forked.Job(only_here, (), {}, out / "b.png", 2.0),
                forked.Job(only_here, (), {}, out / "c.png", 0.5)]
        paths = forked.draw_all(jobs)
        assert [p.read_bytes() for p in paths] == [b"child", b"parent", b"parent"], paths

        def bad(target):
            raise ValueError("no such column")
        try:
            forked.draw_all([forked.Job(fine, (), {}, out / "d.png", 5.0),
                             forked.Job(bad, (), {}, out / "e.png")])
        except ValueError as e:
            print("raised", e)
    """
    r = _run(script, str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "raised no such column" in r.stdout


_SLEEPER = """
    import os, sys, time
    from pathlib import Path
    from quadsim.app.plotting import forked
    forked.cores = lambda n: 2
    out = Path(sys.argv[1])

    def sleeper(target):
        (out / "child.pid").write_text(str(os.getpid()))
        time.sleep(60)

    def parent_job(target):
        while not (out / "child.pid").exists():
            time.sleep(0.01)
        print("ready", flush=True)
        {parent_does}

    forked.draw_all([forked.Job(sleeper, (), {{}}, out / "s.png", 1.0),
                     forked.Job(parent_job, (), {{}}, out / "p.png", 2.0)])
"""


@LINUX
def test_an_error_in_the_parent_kills_and_reaps_the_children(tmp_path):
    """The parent's exception (a signal's KeyboardInterrupt) leaves no child running."""
    script = _SLEEPER.format(parent_does="raise KeyboardInterrupt")
    t0 = time.monotonic()
    r = _run(script, str(tmp_path), timeout=60)
    assert r.returncode != 0 and "KeyboardInterrupt" in r.stderr, r.stderr
    assert time.monotonic() - t0 < 30  # not the child's 60 s
    assert _gone(int((tmp_path / "child.pid").read_text()))
    assert not (tmp_path / "s.png").exists()


@LINUX
def test_a_killed_parent_takes_its_children_with_it(tmp_path):
    """SIGKILL of the parent (no handler runs): its drawing child dies too, writing nothing."""
    script = _SLEEPER.format(parent_does="time.sleep(60)")
    here = Path(__file__).parent
    code = f"import sys; sys.path.insert(0, {str(here)!r})\n" + textwrap.dedent(script)
    p = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE,
                         text=True)  # fmt: skip
    try:
        assert p.stdout.readline().strip() == "ready"
        child = int((tmp_path / "child.pid").read_text())
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=10)
        deadline = time.monotonic() + 10
        while not _gone(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _gone(child), json.dumps({"child": child})
        assert sorted(f.name for f in tmp_path.iterdir()) == ["child.pid"]
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_the_collector_is_frozen_while_drawing_and_thawed_after_even_on_error(tmp_path):
    import gc

    seen = []

    def draw(target):
        seen.append(gc.get_freeze_count())
        if len(seen) == 2:
            raise RuntimeError("a figure that fails")
        Path(target).write_bytes(b"png")
        return Path(target)

    before = gc.get_freeze_count()
    assert forked.draw_all([forked.Job(draw, (), {}, tmp_path / "a.png")]) == [tmp_path / "a.png"]
    with pytest.raises(RuntimeError, match="a figure that fails"):
        forked.draw_all([forked.Job(draw, (), {}, tmp_path / "b.png")])
    assert seen[0] > before  # the objects alive before the figures were left out of collections
    assert gc.get_freeze_count() == before  # and given back, also after an error
