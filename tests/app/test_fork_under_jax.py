"""Nothing forks a process that has loaded JAX (issue 40, item 16: the suite printed 16 "os.fork()
was called ... JAX is multithreaded ... deadlock" warnings).

A fork that runs Python in the child (``os.fork``, a ``subprocess`` ``preexec_fn``) calls the
handlers of :func:`os.register_at_fork`, JAX's warning among them; a ``subprocess`` without a
``preexec_fn`` and a ``spawn`` pool fork and exec in C and call none. Each test runs in a fresh
interpreter that has JAX loaded and running (its threads started, its warning armed) and counts
those forks with a handler of its own; a ``preexec_fn`` at the end shows the count (and JAX's
warning) would see one.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("jax")

HERE = Path(__file__).parent

_UNDER_JAX = """
    import os, subprocess, sys
    sys.path.insert(0, {here!r})
    import jax.numpy as jnp

    jnp.ones(3).sum().block_until_ready()  # JAX's threads run; its fork warning is armed
    forks = []
    os.register_at_fork(before=lambda: forks.append(1))
"""

_CONTROL = """
    print("forks", len(forks))
    subprocess.run(["true"], preexec_fn=lambda: None)  # a fork that runs Python in the child
    print("then", len(forks))
"""


def _run_under_jax(body: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    code = "".join(textwrap.dedent(x) for x in (_UNDER_JAX.format(here=str(HERE)), body, _CONTROL))
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


def _check(r: subprocess.CompletedProcess) -> None:
    assert r.returncode == 0, r.stderr
    assert "forks 0\nthen 1" in r.stdout, (r.stdout, r.stderr)
    assert r.stderr.count("os.fork() was called") == 1, r.stderr  # the control's alone


FLIGHT = """
name = "short"
duration = 0.5
n = 2
[drone]
preset = "cf2x_L250"
[sim]
backend = "numpy"
[trajectory]
kind = "circle"
radius = 0.5
speed = 0.5
"""

SWEEP = 'base = "base.toml"\n[axes]\n"drone.mass" = [0.029, 0.032]\n'


def test_a_flight_with_its_figures_animation_and_a_sweep_forks_nothing_under_jax(tmp_path):
    """``quadsim fly --animate`` (the figures drawn here, not in forked children) and ``quadsim
    sweep`` with two workers (a ``spawn`` pool) in a process running JAX: no fork."""
    (tmp_path / "base.toml").write_text(FLIGHT)
    (tmp_path / "sweep.toml").write_text(SWEEP)
    body = """
        from pathlib import Path
        from quadsim.app import cli

        tmp = Path(sys.argv[1])
        assert cli.main(["fly", str(tmp / "base.toml"), "--out", str(tmp / "fly"), "--animate",
                         "--quiet"]) == 0
        assert cli.main(["sweep", str(tmp / "sweep.toml"), "--out", str(tmp / "sweep"),
                         "--workers", "2", "--quiet"]) == 0
    """
    r = _run_under_jax(body, str(tmp_path))
    _check(r)
    names = {p.name for p in (tmp_path / "fly").iterdir()}
    assert {"path_3d.png", "states.png", "rotors.png", "flight.gif"} <= names
    assert (tmp_path / "sweep" / "results.parquet").exists()


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc")
def test_children_get_their_signals_and_limits_without_a_fork_hook(tmp_path):
    """:func:`signal_helpers.child_command` (what the tests that signal or limit a child use,
    instead of a ``preexec_fn``): the stop signals back to their defaults though this process
    ignores them, the one asked for ignored, the file size limit set; no fork handler runs."""
    body = """
        import signal
        from signal_helpers import child_command

        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, signal.SIG_IGN)  # as under nohup, or a background job
        cmd = child_command(["cat", "/proc/self/status", "/proc/self/limits"],
                            ignore=[signal.SIGHUP], fsize=123_456)
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        ign = int(next(x for x in out.splitlines() if x.startswith("SigIgn:")).split()[1], 16)
        print("ignored", sorted(s for s in range(1, 64) if ign >> (s - 1) & 1))
        print(next(x for x in out.splitlines() if x.startswith("Max file size")))
    """
    r = _run_under_jax(body)
    _check(r)
    import signal

    ignored = sorted([int(signal.SIGHUP), int(signal.SIGXFSZ)])  # not SIGINT, SIGTERM, SIGPIPE
    assert f"ignored {ignored}" in r.stdout, r.stdout
    assert r.stdout.split("Max file size")[1].split()[:3] == ["123456", "123456", "bytes"]
