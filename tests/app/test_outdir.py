"""An output folder belongs to one run at a time; a failure never deletes earlier results; a
damaged log part costs only its own chunk (issue 27 §1, §3, §4, §5, §10)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from quadsim.app import io
from quadsim.app.io import outdir

pq = pytest.importorskip("pyarrow.parquet")

SHORT = """
name = "short"
duration = 0.4
n = 2
[drone]
preset = "cf2x_L250"
[trajectory]
kind = "circle"
radius = 0.5
speed = 0.5
[output]
plots = false
chunk_steps = 10
log_every = 2
"""

LONG = SHORT.replace("duration = 0.4", "duration = 600.0").replace('name = "short"',
                                                                   'name = "long"')  # fmt: skip


def _quadsim(*args, **kw):
    return subprocess.run([sys.executable, "-m", "quadsim.app.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=240, **kw)  # fmt: skip


def _start(*args):
    return subprocess.Popen([sys.executable, "-m", "quadsim.app.cli", *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


def _wait_for_parts(out, proc, count=2, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if len(list((out / "trajectory.parts").glob("part-*.parquet"))) >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"no parts appeared (exit {proc.poll()}): {proc.stderr.read()}")


def test_a_claimed_folder_refuses_a_second_claim_and_names_the_holder(tmp_path):
    with outdir.claim(tmp_path / "d", "quadsim fly a.toml") as d:
        assert outdir.holder(d)["pid"] == os.getpid()
        with pytest.raises(outdir.FolderBusyError) as e, outdir.claim(d):
            pass
        assert isinstance(e.value, ValueError)  # bad input: exit 2
        assert f"process {os.getpid()} (quadsim fly a.toml, since " in str(e.value)
        assert str(d) in str(e.value)
    assert outdir.holder(d) is None and not (d / outdir.LOCK).exists()
    with outdir.claim(d):  # free again
        pass


def test_a_lock_held_by_a_killed_process_is_free(tmp_path):
    d = tmp_path / "d"
    code = ("import sys, time; from quadsim.app.io import outdir\n"
            f"with outdir.claim({str(d)!r}):\n    print('held', flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    assert outdir.holder(d)["pid"] == proc.pid
    with pytest.raises(outdir.FolderBusyError, match=f"process {proc.pid}"), outdir.claim(d):
        pass
    proc.kill()
    proc.wait(timeout=30)
    assert outdir.holder(d) is None  # the kernel let go with the process
    with outdir.claim(d):
        pass


def test_set_aside_discard_and_restore(tmp_path):
    (tmp_path / "summary.json").write_text("old")
    (tmp_path / "states.png").write_text("old png")
    assert outdir.set_aside(tmp_path, ["summary.json", "states.png", "flight.gif"]) == [
        "summary.json", "states.png"]  # fmt: skip
    assert not (tmp_path / "summary.json").exists()
    (tmp_path / "summary.json").write_text("new")
    assert outdir.restore(tmp_path) == ["states.png"]  # the new run's own file stays
    assert (tmp_path / "summary.json").read_text() == "new"
    assert (tmp_path / "states.png").read_text() == "old png"
    outdir.set_aside(tmp_path, ["summary.json"])
    outdir.discard(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["states.png"]


def test_two_flights_into_one_folder_the_second_is_refused_and_nothing_mixes(tmp_path):
    (tmp_path / "a.toml").write_text(LONG)
    (tmp_path / "c.toml").write_text(SHORT.replace("n = 2", "n = 3"))
    out = tmp_path / "D"
    first = _start("fly", tmp_path / "a.toml", "--out", out, "--quiet")
    try:
        _wait_for_parts(out, first)
        second = _quadsim("fly", tmp_path / "c.toml", "--out", out, "--quiet")
        assert second.returncode == 2, second.stderr
        assert second.stderr.strip() == (
            f"quadsim: {out}: in use by process {first.pid} (" + second.stderr.split("(", 1)[1]
        ).strip()
        assert "a.toml" in second.stderr and "Traceback" not in second.stderr
        rec = _quadsim("recover", out)  # a run still flying is not "recovered" under it
        assert rec.returncode == 2 and f"in use by process {first.pid}" in rec.stderr
    finally:
        first.send_signal(signal.SIGTERM)
        _, err = first.communicate(timeout=120)
    assert first.returncode == 143, err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_drones"] == 2 and summary["scenario"].endswith("a.toml")
    log, meta = io.read_log(out / "trajectory.parquet")
    assert log["pos"].shape[1] == 2 and meta["scenario"].endswith("a.toml")
    np.testing.assert_allclose(np.diff(log["time"]), 0.004, rtol=1e-9)  # one run, no holes
    assert not (out / outdir.LOCK).exists() and not (out / outdir.PREVIOUS).exists()


def _finished_run(tmp_path):
    (tmp_path / "s.toml").write_text(SHORT)
    out = tmp_path / "D"
    r = _quadsim("fly", tmp_path / "s.toml", "--out", out, "--quiet")
    assert r.returncode == 0, r.stderr
    return out, {p.name: p.read_bytes() for p in out.iterdir()}


def test_a_bad_option_or_a_failed_build_leaves_the_earlier_results(tmp_path):
    out, before = _finished_run(tmp_path)
    assert {"trajectory.parquet", "summary.json"} <= set(before)
    bad = tmp_path / "bad.toml"
    bad.write_text(SHORT + '[sim]\nbackend = "native"\n')
    env = {**os.environ, "CC": "/bin/false", "QUADSIM_CACHE_DIR": str(tmp_path / "cache")}
    r = _quadsim("fly", bad, "--out", out, "--quiet", env=env)  # no working C compiler
    assert r.returncode == 2, r.stderr  # the machine's set-up, not a simulation failure
    assert "C compiler" in r.stderr and "Traceback" not in r.stderr
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    r = _quadsim("fly", tmp_path / "s.toml", "--out", out, "--animate", "mp4", "--quiet",
                 env={**os.environ, "PATH": "/nonexistent"})  # fmt: skip  (no ffmpeg)
    assert r.returncode == 2 and {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_a_new_run_replaces_the_earlier_results_whole(tmp_path):
    out, _ = _finished_run(tmp_path)
    (out / "states.png").write_bytes(b"a figure of the earlier run")
    r = _quadsim("fly", tmp_path / "s.toml", "--out", out, "--quiet", "--csv")
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in out.iterdir()) == ["summary.json", "trajectory.csv",
                                                     "trajectory.parquet"]  # fmt: skip


def test_a_full_disk_names_the_file_and_what_is_kept(tmp_path):
    """Writes past RLIMIT_FSIZE fail with EFBIG as a full disk fails with ENOSPC: same path."""
    out, before = _finished_run(tmp_path)
    (tmp_path / "big.toml").write_text(LONG.replace("duration = 600.0", "duration = 4.0")
                                       + "part_seconds = 0\n")
    code = ("import resource, signal, sys\n"
            "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
            "resource.setrlimit(resource.RLIMIT_FSIZE, (60_000, 60_000))\n"
            "from quadsim.app.cli import main\n"
            f"sys.exit(main(['fly', {str(tmp_path / 'big.toml')!r}, '--out', {str(out)!r}, "
            "'--quiet']))")  # fmt: skip
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert lines[0].startswith(f"quadsim: {out}/") and "File too large" in lines[0], r.stderr
    assert "kept:" in r.stderr and f"quadsim recover {out}" in r.stderr
    assert not list(out.rglob("*.partial")) and not list(out.rglob("*.tmp"))
    parts = sorted((out / "trajectory.parts").glob("part-*.parquet"))
    assert parts and f"the {len(parts)} complete log part" in r.stderr
    # the earlier results stay until the new log is recovered
    assert (out / "summary.json").read_bytes() == before["summary.json"]
    rec = _quadsim("recover", out, "--no-plots")
    assert rec.returncode == 0, rec.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["recovered"] and summary["scenario"].endswith("big.toml")
    assert not (out / outdir.PREVIOUS).exists()


def _write_parts(folder, count, rng):
    from quadsim.app.io.parts import PartWriter

    w = PartWriter(folder, {"drone": "cf2x_L250", "n": 2, "n_rotors": 4}, durable=False,
                   flush_seconds=0)
    for i in range(count):
        t = 0.01 * (5 * i + np.arange(5))
        w.write({"time": t, "pos": rng.normal(size=(5, 2, 3)),
                 "quat": np.tile([0.0, 0.0, 0.0, 1.0], (5, 2, 1)),
                 "vel": rng.normal(size=(5, 2, 3)), "ang_vel": rng.normal(size=(5, 2, 3)),
                 "rotor_rpm": np.full((5, 2, 4), 1e4), "cmd_rpm": np.full((5, 2, 4), 1e4)},
                0.1 * i)  # fmt: skip
    return sorted(folder.glob("part-*.parquet"))


@pytest.mark.parametrize("damage", ["truncated", "empty", "random", "no metadata"])
def test_merge_skips_a_damaged_part_names_it_and_keeps_every_good_one(tmp_path, rng, damage):
    from quadsim.app.io.parts import merge_parts, remove_parts

    folder = tmp_path / "trajectory.parts"
    files = _write_parts(folder, 16, rng)
    bad = files[7]
    if damage == "truncated":
        bad.write_bytes(bad.read_bytes()[: bad.stat().st_size // 2])
    elif damage == "empty":
        bad.write_bytes(b"")
    elif damage == "random":
        bad.write_bytes(rng.bytes(3000))
    else:
        pq.write_table(pq.read_table(bad).replace_schema_metadata({}), bad)
    merged = merge_parts(folder, tmp_path / "trajectory.parquet")
    assert merged.parts == 15 and len(merged.damaged) == 1
    d = merged.damaged[0]
    assert d.path == bad and d.reason
    assert d.after_s == pytest.approx(0.34) and d.before_s == pytest.approx(0.40)
    log, _ = io.read_log(tmp_path / "trajectory.parquet")
    want = np.concatenate([0.01 * (5 * i + np.arange(5)) for i in range(16) if i != 7])
    np.testing.assert_allclose(log["time"], want, atol=1e-12)
    kept = remove_parts(folder, merged.damaged)
    assert not folder.exists() and kept[0].path.parent.name == "trajectory.damaged"
    assert kept[0].path.exists()  # the damaged file is kept, not deleted


def test_recover_with_a_damaged_part_warns_exits_0_and_marks_the_gap(tmp_path, rng):
    out = tmp_path / "run"
    files = _write_parts(out / "trajectory.parts", 15, rng)
    files[3].write_bytes(b"PAR1 not really")
    r = _quadsim("recover", out, "--no-plots")
    assert r.returncode == 0, r.stderr
    assert r.stderr.startswith("quadsim: warning: 1 damaged log part skipped")
    assert "part-000003.parquet" in r.stderr and "gap from 0.14 s to 0.2 s" in r.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["recovered"] and summary["n_samples"] == 14 * 5
    [d] = summary["damaged_parts"]
    assert d["file"].endswith("trajectory.damaged/part-000003.parquet") and d["reason"]
    assert (out / "trajectory.damaged" / "part-000003.parquet").exists()


def test_recover_with_no_readable_part_exits_2_naming_each_and_keeps_them(tmp_path):
    out = tmp_path / "run"
    (out / "trajectory.parts").mkdir(parents=True)
    for i in range(2):
        (out / "trajectory.parts" / f"part-00000{i}.parquet").write_bytes(b"")
    r = _quadsim("recover", out)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "part-000000.parquet: empty file" in r.stderr and "part-000001" in r.stderr
    assert len(list((out / "trajectory.parts").iterdir())) == 2


def test_recover_says_which_listed_file_is_missing(tmp_path):
    out, _ = _finished_run(tmp_path)
    (out / "trajectory.parquet").unlink()
    r = _quadsim("recover", out)
    assert r.returncode == 2 and "trajectory.parquet" in r.stderr and "missing" in r.stderr
