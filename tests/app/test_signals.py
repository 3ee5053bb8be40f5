"""Stop signals (:mod:`quadsim.app.signals`, :mod:`quadsim.engines.signals`): a signal the process
was started with ignored stays ignored (``nohup``, a background job of a script), in this
process and through a real ``quadsim fly``; the others stop a run with their own number."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest
from signal_helpers import LONG_FLIGHT, child_command

from quadsim.app.signals import Interrupted, raising, stop_flag
from quadsim.engines.signals import catchable, interrupt_after


@pytest.fixture
def sighup_ignored(stop_signals_default):
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # put back by stop_signals_default


@pytest.mark.parametrize("block", [raising, stop_flag, interrupt_after])
def test_an_ignored_signal_stays_ignored_and_the_others_come_back(sighup_ignored, block):
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    assert signal.SIGHUP not in catchable() and signal.SIGTERM in catchable()
    with block():
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) is not before[signal.SIGTERM]
        signal.raise_signal(signal.SIGHUP)  # ignored: nothing happens
    assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    assert {s: signal.getsignal(s) for s in before} == before


@pytest.mark.usefixtures("stop_signals_default")
def test_raising_turns_sigterm_into_interrupted_with_its_number():
    with pytest.raises(Interrupted) as e, raising():
        signal.raise_signal(signal.SIGTERM)
    assert e.value.signum == signal.SIGTERM and e.value.args == ("SIGTERM",)
    assert isinstance(e.value, KeyboardInterrupt)  # what keeps a run's results on Ctrl-C


@pytest.mark.usefixtures("stop_signals_default")
def test_stop_flag_keeps_the_first_signal():
    with stop_flag() as flag:
        assert not flag
        signal.raise_signal(signal.SIGHUP)
        signal.raise_signal(signal.SIGTERM)
    assert flag and flag.signum == signal.SIGHUP


@pytest.mark.parametrize("ignored", [signal.SIGHUP, signal.SIGINT])
def test_quadsim_fly_started_with_a_signal_ignored_flies_on_through_it(tmp_path, ignored):
    """``nohup quadsim fly`` (SIGHUP ignored) or ``quadsim fly &`` in a script (SIGINT ignored):
    that signal does not stop the flight; SIGTERM still does, keeping what was flown (143)."""
    scen = tmp_path / "long.toml"
    scen.write_text(LONG_FLIGHT)
    out = tmp_path / "out"
    proc = subprocess.Popen(
        child_command([sys.executable, "-m", "quadsim.app.cli", "fly", str(scen), "--out",
                       str(out), "--quiet", "--no-plots"], ignore=[ignored]),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    parts = out / "trajectory.parts"

    def wait_for_parts(count: int) -> None:
        deadline = time.monotonic() + 120
        while len(list(parts.glob("part-*.parquet"))) < count:
            assert proc.poll() is None, proc.communicate()[1]  # ended: the parts were merged
            assert time.monotonic() < deadline, f"fewer than {count} parts in 120 s"
            time.sleep(0.05)

    try:
        wait_for_parts(1)
        proc.send_signal(ignored)
        wait_for_parts(len(list(parts.glob("part-*.parquet"))) + 3)  # it flies on
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 128 + signal.SIGTERM, stderr
    assert "interrupted (SIGTERM)" in stderr and "Traceback" not in stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["signal"] == "SIGTERM"
