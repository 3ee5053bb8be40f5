"""``quadsim fly`` says which flight loop ran: ``loop`` and ``loop_reason`` in the run metadata
of every part (so ``quadsim recover`` sees them) and in ``summary.json``, listed in the docs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from quadsim.app import io, run
from quadsim.engines import native

SEEN: list = []  # SIGINT's state where a signal test raised it (for its failure message)

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not native.available(), reason="needs CasADi and a C compiler")


def _scenario(tmp_path, **replace):
    """The showcase, 0.3 s long, with some lines replaced."""
    text = (ROOT / "examples" / "figure8_wind.toml").read_text()
    text = re.sub(r"^duration = .*$", "duration = 0.3", text, flags=re.M)
    for old, new in replace.items():
        text = re.sub(rf"^{old} = .*$", f"{old} = {new}", text, flags=re.M)
    path = tmp_path / "figure8_short.toml"
    path.write_text(text)
    return path


def _fly(tmp_path, **replace):
    out = tmp_path / "out"
    summary = run.fly_scenario(_scenario(tmp_path, **replace), out, plots=False,
                               progress=False, echo=lambda s: None)  # fmt: skip
    return summary, out


def test_the_showcase_runs_compiled_and_says_so(tmp_path):
    summary, out = _fly(tmp_path)
    assert summary["loop"] == "compiled" and summary["loop_reason"] is None
    _, meta = io.read_log(out / "trajectory.parquet")
    assert meta["loop"] == "compiled" and meta["loop_reason"] is None
    assert list(summary).index("loop") == list(summary).index("model") + 1
    # the loop's rates: the showcase's BMI088 (1 kHz) is averaged to the 500 Hz physics step
    want = {"physics": 500.0, "control": 500.0, "imu": 500.0}
    assert summary["rates_hz"] == pytest.approx(want) and meta["rates_hz"] == pytest.approx(want)


def test_a_python_loop_run_says_why(tmp_path):
    summary, out = _fly(tmp_path, backend='"numpy"')
    assert summary["loop"] == "python" and summary["loop_reason"].startswith("backend 'numpy'")
    _, meta = io.read_log(out / "trajectory.parquet")
    assert meta["loop"] == "python" and meta["loop_reason"] == summary["loop_reason"]


def test_a_jax_run_scans_and_every_part_says_so(tmp_path, monkeypatch):
    """On jax the parts are written with ``scan`` before the flight (what recover reads)."""
    pytest.importorskip("jax")
    with monkeypatch.context() as m:
        m.setattr(run, "finish_run", lambda *a, **k: {})  # keep the parts: read their meta
        _fly(tmp_path, backend='"jax"')
    summary = run.recover(tmp_path / "out", plots=False)
    assert summary["loop"] == "scan" and summary["loop_reason"] is None


def test_recover_sees_the_loop(tmp_path, monkeypatch):
    """A run killed after its parts were written: recover's summary names the loop."""
    with monkeypatch.context() as m:
        m.setattr(run, "finish_run", lambda *a, **k: {})  # the process "dies" before merging
        _fly(tmp_path)
    out = tmp_path / "out"
    assert list((out / "trajectory.parts").glob("part-*.parquet"))
    summary = run.recover(out, plots=False)
    assert summary["recovered"] is True and summary["loop"] == "compiled"
    assert summary["loop_reason"] is None


def test_docs_list_the_summary_keys(tmp_path):
    summary, _ = _fly(tmp_path)
    doc = (ROOT / "docs" / "outputs.md").read_text()
    section = doc[doc.index("## `summary.json`") :]
    listed = set(re.findall(r"`(\w+)`", "\n".join(
        line.split("|")[1] for line in section.splitlines() if line.startswith("| `")
    )))  # fmt: skip
    missing = set(summary) - listed
    assert not missing, f"docs/outputs.md does not list the summary keys {sorted(missing)}"
    assert {"loop", "loop_reason", "signal", "recovered"} <= listed


@pytest.mark.usefixtures("stop_signals_default")
def test_an_interrupted_compiled_run_keeps_its_chunks(tmp_path, monkeypatch):
    """SIGINT raised while the third chunk is handed over: the compiled run (IMU, mocap,
    gusts, mass spread) keeps its completed chunks and says which loop ran."""
    import signal

    from quadsim.loop import flight

    fly = flight.fly

    def fly_stopped_in_the_third_chunk(*a, on_chunk, **k):
        calls = []

        def stop(chunk):
            calls.append(chunk)
            if len(calls) == 3:
                SEEN.append(__import__("conftest").sigint_state())
                signal.raise_signal(signal.SIGINT)  # held until the chunk is written
            on_chunk(chunk)

        return fly(*a, on_chunk=stop, **k)

    monkeypatch.setattr(flight, "fly", fly_stopped_in_the_third_chunk)
    text = _scenario(tmp_path).read_text().replace("[output]", "[output]\nchunk_steps = 25")
    text = text.replace("[sensors]", "[sensors]\nmocap_pos_std = 0.001\nmocap_latency = 0.004")
    scen = tmp_path / "short.toml"
    scen.write_text(text)
    summary = run.fly_scenario(scen, tmp_path / "out", plots=False, progress=False,
                               echo=lambda s: None)  # fmt: skip
    assert summary["interrupted"] is True and summary["signal"] == "SIGINT", SEEN
    assert summary["loop"] == "compiled"
    log, _ = io.read_log(tmp_path / "out" / "trajectory.parquet")
    assert log["time"].shape == (15,)  # three chunks of 25 steps, logged every 5th step
    assert {"gyro", "accel", "mocap_pos"} <= set(log)
