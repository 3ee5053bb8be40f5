"""Flight logs: Parquet/CSV round trip, units metadata, interrupted writes, summary statistics."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from quadsim.app import io  # noqa: E402
from quadsim.physics.rotation import from_euler, to_matrix  # noqa: E402

T, N, R = 7, 3, 4
META = {
    "drone": "cf2x_L250",
    "rpm_min": 4070.3,
    "rpm_max": 21666.4,
    "dt": 0.01,
    "duration": 0.21,
    "n": N,
    "n_rotors": R,
    "rotor_positions": [[0.03, -0.03], [0.03, 0.03], [-0.03, 0.03], [-0.03, -0.03]],
    "scenario": None,
    "seed": 7,
}


def synthetic_chunk(rng: np.random.Generator, t0: float = 0.0, dtype=np.float64) -> dict:
    """Every key of the contract (optional sensors included), random values, some NaN/inf."""

    def f(*shape):
        return rng.normal(size=shape).astype(dtype)

    c = {
        "time": t0 + 0.01 * np.arange(T, dtype=np.float64),
        "pos": f(T, N, 3),
        "quat": f(T, N, 4),
        "vel": f(T, N, 3),
        "ang_vel": f(T, N, 3),
        "rotor_rpm": f(T, N, R) * 1e4,
        "motor_heat": rng.uniform(0.0, 1.0, (T, N, R)).astype(dtype),
        "cmd_rpm": f(T, N, R) * 1e4,
        "cmd_wrench": f(T, N, 4),
        "lost_wrench": f(T, N, 4),
        "saturated": rng.random((T, N)) < 0.3,
        "ref_pos": f(T, N, 3),
        "ref_vel": f(T, N, 3),
        "ref_yaw": f(T, N),
        "gyro": f(T, N, 3),
        "accel": f(T, N, 3),
        "mocap_pos": f(T, N, 3),
        "baro_alt": f(T, N),
        "mocap_stamp": f(T, N),
        "gnss_stamp": f(T, N),
        "battery_v": f(T, N),
        "battery_i": f(T, N),
        "battery_p": f(T, N),
        "battery_charge": f(T, N),
        "gnss_pos": f(T, N, 3),
        "gnss_vel": f(T, N, 3),
        "est_pos": f(T, N, 3),
        "est_vel": f(T, N, 3),
        "est_quat": f(T, N, 4),
        "est_accel_bias": f(T, N, 3),
        "est_gyro_bias": f(T, N, 3),
        "est_cov": np.abs(f(T, N, 15)),
        "est_nees": np.abs(f(T, N)),
        "crashed": rng.random((T, N)) < 0.2,
        "landed": rng.random((T, N)) < 0.2,
    }
    c["pos"][2, 1, 0] = np.nan
    c["vel"][3, 0, 2] = np.inf
    return c


def concat(chunks: list[dict]) -> dict:
    return {k: np.concatenate([c[k] for c in chunks]) for k in chunks[0]}


def assert_bitwise(a: dict, b: dict) -> None:
    assert set(a) == set(b)
    for k in a:
        assert a[k].dtype == b[k].dtype, k
        assert a[k].shape == b[k].shape, k
        assert a[k].tobytes() == b[k].tobytes(), k


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_parquet_round_trip_is_bitwise(tmp_path, rng, dtype):
    chunks = [synthetic_chunk(rng, 0.07 * i, dtype) for i in range(3)]
    path = tmp_path / "trajectory.parquet"
    with io.LogWriter(path, META) as w:
        for c in chunks:
            w.write(c)
    assert w.rows == 3 * T * N
    log, meta = io.read_log(path)
    assert_bitwise(log, concat(chunks))
    assert meta == META
    f = pq.ParquetFile(path)
    assert f.metadata.num_row_groups == 3
    # row order: time-major then drone
    table = pq.read_table(path)
    assert table.column("drone").to_pylist()[: 2 * N] == [0, 1, 2, 0, 1, 2]
    np.testing.assert_array_equal(table.column("x").to_numpy()[:N], chunks[0]["pos"][0, :, 0])
    assert table.schema.field("drone").type == pa.int32()
    assert table.schema.field("time").type == pa.float64()


def test_column_numpy_reads_what_to_numpy_reads(rng):
    """Several chunks, sliced chunks (offsets, bits not on a byte boundary), empty chunks, nulls."""
    from quadsim.app.io.log import column_numpy

    x, b = rng.standard_normal(50), rng.random(50) < 0.5
    i, f = np.arange(50, dtype=np.int32), x.astype(np.float32)
    for values in (x, b, i, f):
        whole = pa.array(values)
        cols = [pa.chunked_array([whole]),
                pa.chunked_array([whole.slice(3, 20), whole.slice(0, 0), whole.slice(27, 13)]),
                pa.chunked_array([], type=whole.type)]  # fmt: skip
        for col in cols:
            got, want = column_numpy(col), col.to_numpy()
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_array_equal(got, want)
    nulls = pa.chunked_array([pa.array([1.0, None, 3.0])])
    np.testing.assert_array_equal(column_numpy(nulls), [1.0, np.nan, 3.0])


def test_schema_units_and_metadata_json(tmp_path, rng):
    path = tmp_path / "log.parquet"
    io.write_log(path, synthetic_chunk(rng), META)
    schema = pq.read_schema(path)
    units = io.column_units(R)
    assert set(schema.names) == set(units)
    for field in schema:
        assert field.metadata[b"unit"].decode() == units[field.name], field.name
    assert units["x"] == "m" and units["cmd_tau_y"] == "N m" and units["rpm_3"] == "RPM"
    assert units["accel_z"] == "m/s^2" and units["time"] == "s"
    doc = json.loads(schema.metadata[b"quadsim"])
    assert doc["format"] == "quadsim-log" and doc["version"] == 1
    assert doc["meta"] == META and doc["n"] == N and doc["n_rotors"] == R
    assert doc["units"] == {n: units[n] for n in schema.names}
    # the Markdown table documents every column kind
    md = io.describe_columns(R)
    for f in io.COLUMNS:
        assert f"`{f.key}`" in md


def test_metadata_numpy_and_nan_are_json_safe(tmp_path, rng):
    meta = dict(
        META, rotor_positions=np.array(META["rotor_positions"]), wind=np.nan, gain=np.float32(2.5)
    )
    path = tmp_path / "log.parquet"
    io.write_log(path, synthetic_chunk(rng), meta)
    _, back = io.read_log(path)
    assert back["rotor_positions"] == META["rotor_positions"]
    assert back["wind"] is None and back["gain"] == 2.5


def test_csv_same_rows_units_in_header(tmp_path, rng):
    chunks = [synthetic_chunk(rng, 0.07 * i) for i in range(2)]
    pq_path, csv_path = tmp_path / "t.parquet", tmp_path / "t.csv"
    with io.LogWriter(pq_path, META, csv_path=csv_path) as w:
        for c in chunks:
            w.write(c)
    lines = csv_path.read_text().splitlines()
    assert len(lines) == 1 + 2 * T * N
    header = lines[0].split(",")
    assert header[:4] == ["time [s]", "drone [index]", "x [m]", "y [m]"]
    assert "cmd_tau_x [N m]" in header and "saturated [bool]" in header
    assert len(header) == len(pq.read_schema(pq_path).names)
    log_csv, meta_csv = io.read_log(csv_path)
    assert meta_csv == {}
    assert_bitwise(log_csv, concat(chunks))  # shortest round-trip float text is exact


def test_interrupted_writer_keeps_completed_chunks(tmp_path, rng):
    chunks = [synthetic_chunk(rng, 0.07 * i) for i in range(3)]
    path, csv_path = tmp_path / "t.parquet", tmp_path / "t.csv"
    with pytest.raises(KeyboardInterrupt), io.LogWriter(path, META, csv_path=csv_path) as w:
        w.write(chunks[0])
        w.write(chunks[1])
        raise KeyboardInterrupt
    assert pq.ParquetFile(path).metadata.num_rows == 2 * T * N
    log, meta = io.read_log(path)
    assert_bitwise(log, concat(chunks[:2]))
    assert meta == META
    assert len(csv_path.read_text().splitlines()) == 1 + 2 * T * N


def test_writer_without_chunks_writes_nothing_and_rejects_bad_chunks(tmp_path, rng):
    with io.LogWriter(tmp_path / "none.parquet", META):
        pass
    assert not (tmp_path / "none.parquet").exists()
    c = synthetic_chunk(rng)
    with pytest.raises(ValueError, match="unknown key"):
        io.write_log(tmp_path / "a.parquet", {**c, "wind": c["pos"]}, META)
    with pytest.raises(ValueError, match="missing required key 'quat'"):
        io.write_log(tmp_path / "b.parquet", {k: v for k, v in c.items() if k != "quat"}, META)
    with pytest.raises(ValueError, match="'vel' must have shape"):
        io.write_log(tmp_path / "c.parquet", {**c, "vel": c["vel"][:, :2]}, META)
    with io.LogWriter(tmp_path / "d.parquet", META) as w:
        w.write(_drop(c, "gyro"))
        with pytest.raises(ValueError, match="not in the first chunk"):
            w.write(c)
        with pytest.raises(ValueError, match="missing"):
            w.write(_drop(c, "accel"))
        with pytest.raises(ValueError, match="differs from the first chunk"):
            w.write({k: v[:, :2] if v.ndim > 1 else v for k, v in _drop(c, "gyro").items()})
    # the valid first chunk survived the rejected ones
    assert io.read_log(tmp_path / "d.parquet")[0]["pos"].shape == (T, N, 3)


def _drop(c: dict, key: str) -> dict:
    return {k: v for k, v in c.items() if k != key}


# --------------------------------------------------------------------------- summary


def flight(n_samples: int = 200, dt: float = 0.01) -> tuple[dict, dict]:
    """Two drones over 2 s with known answers (see test_summarize_known_answers)."""
    t = dt * np.arange(n_samples)
    ref = np.zeros((n_samples, 2, 3))
    ref[..., 2] = 1.0
    ref[:, :, 0] = np.sin(t)[:, None]
    pos = ref.copy()
    pos[:, 0, 0] += 0.1  # drone 0: constant 0.1 m offset along x
    pos[:, 1, 2] -= 0.1  # drone 1: constant 0.1 m offset along z
    rpy = np.zeros((n_samples, 2, 3))
    rpy[(t >= 0.5) & (t < 0.6), 1, 0] = math.radians(30.0)  # drone 1 rolls 30 deg
    rpy[:, 0, 1] = math.radians(10.0)  # drone 0 pitched 10 deg throughout
    crashed = np.zeros((n_samples, 2), bool)
    crashed[t >= 1.2 - 1e-9, 1] = True  # drone 1 crashes at t = 1.2 s ...
    rpy[t >= 1.2 - 1e-9, 1, 0] = math.radians(90.0)  # ... and lies on its side,
    pos[t >= 1.2 - 1e-9, 1, 2] = 0.0  # on the ground (excluded from the statistics)
    saturated = np.zeros((n_samples, 2), bool)
    saturated[(t >= 1.0 - 1e-9) & (t < 1.5 - 1e-9), 0] = True  # 0.5 s of 2 s
    saturated[t >= 1.3, 1] = True  # after the crash: not counted
    landed = np.zeros((n_samples, 2), bool)
    landed[-1, 1] = True
    log = {
        "time": t,
        "pos": pos,
        "quat": np.asarray(from_euler(rpy)),
        "ref_pos": ref,
        "saturated": saturated,
        "crashed": crashed,
        "landed": landed,
    }
    return log, {"drone": "x", "dt": dt, "rpm_min": 0.0, "rpm_max": 100.0}


def test_summarize_known_answers():
    log, meta = flight()
    s = io.summarize(log, meta, wall_time=0.5)
    assert s["n_drones"] == 2 and s["n_samples"] == 200
    assert s["sim_time_s"] == pytest.approx(2.0)
    assert s["tracking_rms_m"] == pytest.approx(0.1, rel=1e-12)
    assert s["tracking_max_m"] == pytest.approx(0.1, rel=1e-12)
    assert s["max_tilt_deg"] == pytest.approx(30.0, rel=1e-12)
    assert s["per_drone"][0]["max_tilt_deg"] == pytest.approx(10.0, rel=1e-12)
    assert s["saturation_time_s"] == pytest.approx(0.5)
    assert s["per_drone"][1]["saturation_time_s"] == 0.0
    assert s["saturation_fraction"] == pytest.approx(0.5 / 4.0)
    assert s["crash_count"] == 1
    assert s["crashes"] == [{"drone": 1, "time_s": pytest.approx(1.2)}]
    assert s["per_drone"][0]["crash_time_s"] is None
    assert s["real_time_factor"] == pytest.approx(4.0)
    assert s["drone_seconds_per_wall_second"] == pytest.approx(8.0)
    assert s["landed_count"] == 1 and not s["interrupted"]


def test_summarize_t_from_skips_settling():
    log, meta = flight()
    log["pos"][:30, 0, 0] += 0.9  # 1 m error for the first 0.3 s
    e2 = np.r_[np.full(30, 1.0), np.full(170, 0.01), np.full(120, 0.01)]  # both drones
    s_all = io.summarize(log, meta, 1.0)
    assert s_all["tracking_rms_m"] == pytest.approx(math.sqrt(e2.mean()), rel=1e-12)
    assert s_all["tracking_max_m"] == pytest.approx(1.0)
    s = io.summarize(log, meta, 1.0, t_from=0.3 - 1e-9)
    assert s["tracking_rms_m"] == pytest.approx(0.1, rel=1e-12)
    assert s["per_drone"][0]["tracking_rms_m"] == pytest.approx(0.1, rel=1e-12)


def test_summarize_saturation_falls_back_to_rpm_limits():
    log, meta = flight()
    del log["saturated"]
    rpm = np.full((200, 2, 4), 50.0)
    rpm[100:125, 0, 2] = 100.0  # at rpm_max for 0.25 s
    rpm[150:160, 0, 1] = 0.0  # at rpm_min for 0.1 s
    log["cmd_rpm"] = rpm
    s = io.summarize(log, meta, 1.0)
    assert s["saturation_time_s"] == pytest.approx(0.35)
    del log["cmd_rpm"]
    assert io.summarize(log, meta, 1.0)["saturation_time_s"] is None


def test_tilt_matches_rotation_matrix(rng):
    q = rng.normal(size=(50, 4))
    zz = np.asarray(to_matrix(q / np.linalg.norm(q, axis=-1, keepdims=True)))[..., 2, 2]
    np.testing.assert_allclose(io.tilt(q), np.arccos(np.clip(zz, -1, 1)), atol=1e-7)
    a, b = 0.3, -0.4
    assert io.tilt(np.asarray(from_euler(np.array([a, b, 1.0])))) == pytest.approx(
        math.acos(math.cos(a) * math.cos(b)), rel=1e-12
    )
    assert io.tilt(np.array([0.0, 0.0, 0.0, 1.0])) == 0.0


def test_write_summary_nan_safe_and_table(tmp_path):
    log, meta = flight()
    log["ref_pos"][:] = np.nan  # no finite tracking sample
    s = io.summarize(log, meta, wall_time=0.0, interrupted=True)
    path = tmp_path / "summary.json"
    io.write_summary(path, s)
    text = path.read_text()
    assert "NaN" not in text and "Infinity" not in text
    back = json.loads(text)
    assert back["tracking_rms_m"] is None and back["real_time_factor"] is None
    assert back["interrupted"] is True and back["crashes"] == [{"drone": 1, "time_s": 1.2}]
    table = io.format_summary_table(s)
    assert "INTERRUPTED" in table and "#1 at 1.2 s" in table and "n/a" in table
    assert len(table.splitlines()) == 10


def test_docs_list_the_columns_of_the_code():
    from pathlib import Path

    from quadsim.app.io import describe_columns

    doc = (Path(__file__).resolve().parents[2] / "docs" / "outputs.md").read_text()
    assert describe_columns(4) in doc


def test_parts_close_by_wall_time_and_bytes_not_by_chunk(tmp_path, rng, monkeypatch):
    """Chunks are held until a second has passed or they hold ``flush_bytes``; ``flush`` writes
    the rest; the merged log is the chunks, bitwise, in order."""
    from quadsim.app.io import parts

    clock = [100.0]
    monkeypatch.setattr(parts.time, "monotonic", lambda: clock[0])
    chunks = [synthetic_chunk(rng, 0.07 * i) for i in range(7)]
    size = sum(np.asarray(v).nbytes for v in chunks[0].values())
    w = parts.PartWriter(tmp_path / parts.PARTS, META, durable=False, flush_bytes=3 * size)
    written = [w.write(c, 0.6 * (i + 1)) for i, c in enumerate(chunks[:2]) if not
               clock.__setitem__(0, clock[0] + 0.6)]  # 0.6 s apart: the second passes 1 s
    assert written[0] is None and written[1].name == "part-000000.parquet"
    for c in chunks[2:5]:  # no time passes: the third chunk held reaches flush_bytes
        written.append(w.write(c, 1.2))
    assert written[2:4] == [None, None] and written[4].name == "part-000001.parquet"
    assert w.write(chunks[5], 1.3) is None and w.write(chunks[6], 1.5) is None
    assert w.flush().name == "part-000002.parquet"
    assert w.flush() is None and w.count == 3 and w.chunks == 7  # nothing held: no part
    merged = parts.merge_parts(tmp_path / parts.PARTS, tmp_path / "trajectory.parquet")
    log, _ = io.read_log(tmp_path / "trajectory.parquet")
    assert_bitwise(log, concat(chunks))
    assert merged.parts == 3 and merged.wall_time == 1.5
    with pytest.raises(ValueError, match="flush_bytes must be > 0"):
        parts.PartWriter(tmp_path / "other", META, flush_bytes=0)


def test_the_parts_still_in_hand_are_merged_without_reading_them_back(tmp_path, rng,
                                                                       monkeypatch):  # fmt: skip
    """The writer keeps the tables it wrote while all of them total ``flush_bytes`` (then
    none); merging with them reads no file, and the merged file is bitwise the one merged from
    disk."""
    from quadsim.app.io import parts

    chunks = [synthetic_chunk(rng, 0.07 * i) for i in range(3)]
    size = sum(np.asarray(v).nbytes for v in chunks[0].values())
    w = parts.PartWriter(tmp_path / parts.PARTS, META, durable=False, flush_seconds=0,
                         flush_bytes=int(2.5 * size))  # fmt: skip
    for i, c in enumerate(chunks[:2]):
        w.write(c, 0.5 * i)
    assert sorted(w.written) == ["part-000000.parquet", "part-000001.parquet"]
    held = dict(w.written)
    w.write(chunks[2], 1.0)
    assert w.written is None  # three parts pass flush_bytes: nothing is held any more
    disk = parts.merge_parts(tmp_path / parts.PARTS, tmp_path / "disk.parquet", keep_drones=2)
    import pyarrow.parquet as pq

    read, real = [], pq.ParquetFile
    monkeypatch.setattr(pq, "ParquetFile", lambda f, *a, **k: read.append(Path(f).name) or real(
        f, *a, **k))  # fmt: skip
    hand = parts.merge_parts(tmp_path / parts.PARTS, tmp_path / "hand.parquet", keep_drones=2,
                             written=held)  # fmt: skip
    assert read == ["part-000002.parquet"]
    assert (tmp_path / "hand.parquet").read_bytes() == (tmp_path / "disk.parquet").read_bytes()
    assert_bitwise(hand.head, disk.head)
    same = [json.dumps(m.summary.result(1.0, False), sort_keys=True) for m in (hand, disk)]
    assert same[0] == same[1]  # (NaN-safe)


def test_a_run_that_fails_before_its_first_part_leaves_no_parts_folder(tmp_path, rng,
                                                                      monkeypatch):  # fmt: skip
    """The parts folder is made with the first part (issue 40): none while chunks are held, none
    after a chunk the log cannot take or a first part that cannot be written; made and kept once
    a part is on disk."""
    from quadsim.app.io.parts import PARTS, PartWriter, part_files

    folder = tmp_path / PARTS
    w = PartWriter(folder, META, durable=False, flush_seconds=3600)
    w.write(synthetic_chunk(rng, 0.0) | {"extra": np.zeros((T, N))}, 0.0)
    assert not folder.exists()  # held, not written
    with pytest.raises(ValueError, match="unknown key"):
        w.flush()
    assert not folder.exists()

    def full(*a, **k):
        raise OSError(28, "No space left on device")

    real = pq.write_table
    monkeypatch.setattr(pq, "write_table", full)
    w = PartWriter(folder, META, durable=False, flush_seconds=3600)
    w.write(synthetic_chunk(rng, 0.0), 0.0)
    with pytest.raises(OSError, match="No space"):
        w.flush()
    assert not folder.exists()
    monkeypatch.setattr(pq, "write_table", real)
    w.flush()  # the chunk is still held: written now
    assert [f.name for f in part_files(folder)] == ["part-000000.parquet"]


@pytest.mark.parametrize("keep", [0, 2, 5])
def test_merge_parts_bitwise_and_the_head_is_the_first_drones(tmp_path, rng, keep):
    from quadsim.app.io.parts import PARTS, PartWriter, merge_parts, remove_parts

    chunks = [synthetic_chunk(rng, 0.07 * i) for i in range(3)]
    parts = PartWriter(tmp_path / PARTS, META, durable=False, flush_seconds=0)
    for i, c in enumerate(chunks):
        parts.write(c, 0.5 * i)
    merged = merge_parts(tmp_path / PARTS, tmp_path / "trajectory.parquet", keep_drones=keep)
    log, meta = io.read_log(tmp_path / "trajectory.parquet")
    whole = concat(chunks)
    assert_bitwise(log, whole)
    assert meta == META and merged.parts == 3 and merged.wall_time == 1.0 and not merged.damaged
    assert len(list((tmp_path / PARTS).iterdir())) == 3  # kept until the caller is done
    assert not list(tmp_path.glob("*.partial"))
    remove_parts(tmp_path / PARTS)
    assert not (tmp_path / PARTS).exists()
    k = min(keep, N)
    want = {key: v if key == "time" else v[:, :k] for key, v in whole.items()} if k else {}
    assert_bitwise(merged.head, want)
