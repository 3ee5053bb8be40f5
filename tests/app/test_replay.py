"""Flight-log replay (``quadsim.app.sysid.replay``) on the NanoBench flights in ``data/nanobench/``:
the measured figures with margins (``docs/validation.md``, "Flight logs: replay"), the malformed-
log errors, the command line and a synthetic oracle with known mass, delays and motor model.

The hostile inputs (absurd values, gaps, garbage files, data the fits cannot use, a held --out,
a failing --json write) each exit 2 with one line naming the file, the row (the file's own line
number) and the column; most fail while the log is read, so they cost a fraction of a second."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from quadsim.app.sysid import replay as rp
from quadsim.app.sysid import replay_cli
from quadsim.app.sysid import thrust_stand as ts
from quadsim.physics.params import load_params

DATA = Path(__file__).resolve().parents[2] / "data" / "nanobench"
B2, B3, B9 = (
    DATA / "B2_circle_medium_rep1.csv.gz",
    DATA / "B3_figure8_medium_rep1.csv.gz",
    DATA / "B9_trefoil_slow_rep1.csv.gz",
)


@pytest.fixture(scope="module")
def motor() -> ts.RpmFit:
    return rp.fit_motor()


@pytest.fixture(scope="module")
def flights() -> dict:
    return {p.name.split("_")[0]: rp.load_log(p) for p in (B2, B3, B9)}


@pytest.fixture(scope="module")
def own(flights, motor) -> dict:
    out = {k: rp.replay(f, motor=motor) for k, f in flights.items()}
    for k in ("B2", "B3"):
        out[k]["no_lag"] = rp.replay(flights[k], motor=motor, time_constant=0.0, horizons=())
    return out


def test_motor_model_from_stand(motor):
    # the stand's vbat fit (docs/validation.md): about 2860 + 6760 u RPM
    assert motor.kind == "linear"
    assert 2000 < motor.coef[0] < 4000 and 6000 < motor.coef[1] < 7500


def test_in_sample_specific_force(own):
    """Mass, rotor time constant and delays fitted on the flight itself: measured R² 0.898
    (B2), 0.700 (B3), 0.889 (B9); RMSE 0.14, 0.20, 0.11 m/s² (10 Hz low-pass, airborne
    samples)."""
    floor = {"B2": 0.85, "B3": 0.65, "B9": 0.85}
    for k, r in own.items():
        assert r["specific_force_z_r2"] >= floor[k], k
        assert r["specific_force_z_rmse_m_s2"] < 0.25, k
        assert 1700 < r["n_samples"] <= r["n_samples_flying_mask"]
        # with ground contact (take-off, landing) in the sample set the fit collapses
        assert r["specific_force_z_r2_flying_mask"] < 0.0
        # the PWM delay matters: without it the fit is worse
        assert r["specific_force_z_r2_zero_delay"] < r["specific_force_z_r2"]


def test_mass_is_an_effective_mass(own):
    """44.6-47.2 g from the IMU (Vicon within 1 %): above the 30-40 g of a Crazyflie 2.1 with
    decks; the thrust model's level error (vbat sag, the stand's 8-10 %) is folded into it."""
    masses = []
    for k, r in own.items():
        assert 0.040 < r["mass_kg"] < 0.050, k
        assert r["mass_vicon_kg"] == pytest.approx(r["mass_kg"], rel=0.02), k
        masses.append(r["mass_kg"])
    assert max(masses) / min(masses) < 1.08


def test_delays_and_rotor_time_constant(own):
    """The rotors' response is a first-order lag, not a pure delay: with the lag fitted the
    PWM-to-IMU delay is within ±5 ms of zero and the time constant 35-60 ms (measured 60, 45,
    35 ms on B2, B3, B9; delays 1, 4, -2 ms). Without the lag the delay stands in for it (35-44
    ms) and the fit is worse (R² 0.865 / 0.649 / 0.889 against 0.898 / 0.700 / 0.889)."""
    for k, r in own.items():
        d = r["delays_s"]
        assert abs(d["pwm_to_imu"]) <= 0.008, k
        assert 0.03 <= r["time_constant_s"] <= 0.065, k
        assert r["time_constant_fitted_s"] == r["time_constant_s"]
        assert -0.005 <= d["pwm_to_gyro"] <= 0.02, k
        assert abs(d["imu_to_vicon"]) <= 0.01, k
    for k in ("B2", "B3"):
        f = own[k]
        assert f["specific_force_z_r2"] > 0.03 + f["no_lag"]["specific_force_z_r2"], k
        assert 0.03 <= f["no_lag"]["delays_s"]["pwm_to_imu"] <= 0.05, k


def test_held_out_specific_force(flights, motor, monkeypatch):
    """Mass, rotor lag, delays and angular bias fitted on one flight, tested on another.
    Measured: B2->B3 0.398, B3->B2 0.663, and negative to and from B9 (-1.77, -0.21, -0.91,
    -0.33): a 3-6 % mismatch of the effective mass shifts the level by 0.3-0.6 m/s² against a
    signal of 0.33-0.43 m/s² standard deviation. The issue's target (>= 0.8) is not met held
    out on these three flights (docs/validation.md: it holds for three pairs of B2, B5, B7).

    Each flight is fitted once (issue 40: not once per pair), and a row is still the test
    flight's :func:`replay` given the training flight's values."""
    fitted, replay = [], rp.replay
    monkeypatch.setattr(rp, "replay", lambda f, **kw: fitted.append(f["name"]) or replay(f, **kw))
    rows = {
        (r["train"][:2], r["test"][:2]): r
        for r in rp.cross_flights([flights[k] for k in ("B2", "B3", "B9")], motor=motor)
    }
    assert sorted(fitted) == sorted(f["name"] for f in flights.values())
    r = rows["B3", "B9"]
    want = replay(flights["B9"], motor=motor, mass=r["mass_kg"], delays=r["delays_s"],
                  ang_bias=r["ang_acc_bias_rad_s2"], time_constant=r["time_constant_s"],
                  horizons=())  # fmt: skip
    for key in ("specific_force_z_r2", "specific_force_z_rmse_m_s2", "ang_acc_r2", "n_samples"):
        assert r[key] == want[key], key
    measured = {
        ("B2", "B3"): 0.398,
        ("B3", "B2"): 0.663,
        ("B3", "B9"): -0.212,
        ("B9", "B3"): -0.329,
        ("B9", "B2"): -0.909,
        ("B2", "B9"): -1.768,
    }
    for pair, value in measured.items():
        assert rows[pair]["specific_force_z_r2"] >= value - 0.1, pair
    assert max(r["specific_force_z_r2"] for r in rows.values()) < 0.8


def test_angular_acceleration_as_measured(own):
    """Negative R² per axis (measured -6 to -48): the predicted ω̇ correlates with the gyro's
    derivative (0.24-0.52) but is 8-20 times too large."""
    for k, r in own.items():
        assert all(np.isfinite(r["ang_acc_r2"])), k
        assert max(r["ang_acc_r2"]) < 0.5, k
        rmse, std = np.array(r["ang_acc_rmse_rad_s2"]), np.array(r["ang_acc_std_rad_s2"])
        assert np.all(rmse > std), k


def test_horizons(own):
    for r in own.values():
        h = r["horizons"]
        assert set(h) == {"0.1", "0.5"}
        assert h["0.1"]["dv_z_r2"] > 0.55
        assert h["0.5"]["dv_rmse_m_s"][2] < 0.12
        assert h["0.1"]["dv_rmse_m_s"][2] < h["0.5"]["dv_rmse_m_s"][2]


def test_main_json_and_plot(tmp_path, capsys):
    js, out = tmp_path / "r.json", tmp_path / "plots"
    assert replay_cli.main([str(B9), "--json", str(js), "--out", str(out)]) == 0
    doc = json.loads(js.read_text(), parse_constant=_no_nan)  # strict JSON: no NaN
    # written whole (no partial file left); the folder's lock let go
    assert sorted(p.name for p in out.iterdir()) == ["replay_B9_trefoil_slow_rep1.png"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plots", "r.json"]
    for key in (
        "n_samples",
        "specific_force_z_r2",
        "specific_force_z_rmse_m_s2",
        "ang_acc_r2",
        "mass_kg",
        "delays_s",
        "horizons",
    ):
        assert key in doc
    assert len(doc["ang_acc_r2"]) == 3 and "pwm_to_imu" in doc["delays_s"]
    assert (out / "replay_B9_trefoil_slow_rep1.png").stat().st_size > 10_000
    assert "B9_trefoil_slow_rep1" in capsys.readouterr().out


def _cut_csv(tmp_path: Path, n_rows: int, *, cut_last: bool, drop: str | None = None) -> Path:
    with gzip.open(B9, "rt", encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    head = lines[0].split(",")
    rows = lines[1 : n_rows + 1]
    if drop is not None:
        j = head.index(drop)
        rows = [",".join(c for i, c in enumerate(r.split(",")) if i != j) for r in rows]
        head = [h for h in head if h != drop]
    if cut_last:
        rows[-1] = ",".join(rows[-1].split(",")[:20])
    path = tmp_path / "cut.csv"
    path.write_text("\n".join([",".join(head), *rows]) + "\n", encoding="utf-8")
    return path


def test_truncated_row_names_file_row_and_column(tmp_path, capsys):
    path = _cut_csv(tmp_path, 300, cut_last=True)
    # 20 fields left: the 21st column of the header (imu_gyro_x) is the first missing one
    with pytest.raises(ValueError, match=r"cut\.csv: row 301: .*'imu_gyro_x' missing"):
        rp.load_log(path)
    assert replay_cli.main([str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"quadsim: {path}: row 301")


def test_missing_column_and_bad_cell(tmp_path):
    path = _cut_csv(tmp_path, 300, cut_last=False, drop="pwr_pm_vbat")
    with pytest.raises(
        ValueError, match=r"cut\.csv: row 1 \(header\): missing column 'pwr_pm_vbat'"
    ):
        rp.load_log(path)
    text = _cut_csv(tmp_path, 300, cut_last=False).read_text().splitlines()
    cells = text[10].split(",")
    cells[text[0].split(",").index("motor_motor_m3")] = "nan"
    text[10] = ",".join(cells)
    path.write_text("\n".join(text) + "\n")
    with pytest.raises(ValueError, match=r"cut\.csv: row 11, column 'motor_motor_m3': not a "
                       r"finite number; got 'nan'"):  # fmt: skip
        rp.load_log(path)
    bad = tmp_path / "bad.csv.gz"
    bad.write_bytes(B9.read_bytes()[:5000])  # a gzip stream cut short
    with pytest.raises(ValueError, match=r"bad\.csv\.gz: unreadable or truncated"):
        rp.load_log(bad)


def test_synthetic_oracle():
    """Known motor model, rotor time constant, mass, PWM delays and inertia; the data generated
    independently (the rotors' lag by ``scipy.signal.lsim`` on a 1 ms grid, thrust from the
    curve, torque as r × F and the rotors' reaction, Euler's equation integrated at 1 kHz);
    replay recovers the mass, the time constant and both delays."""
    from scipy.signal import lsim

    p = load_params("cf2x_L250")
    coef = np.array([3000.0, 6500.0, 0.0])
    motor = ts.RpmFit("linear", coef, 0.0, 0.0, 0)
    mass, d_f, d_w, t_m = 0.036, 0.05, 0.03, 0.04
    rng = np.random.default_rng(3)
    freq = rng.uniform(0.3, 2.5, size=(4, 3))
    phase = rng.uniform(0, 2 * np.pi, size=(4, 3))

    def pwm_at(t):
        t = np.atleast_1d(t)[:, None, None]
        wave = np.sum(np.sin(2 * np.pi * freq * t + phase), axis=-1) * 700.0
        return 42000.0 + 3000.0 * np.sin(2 * np.pi * 0.4 * t[:, :, 0]) + wave

    def vbat_at(t):
        return 3.9 - 0.02 * np.asarray(t)

    dt, n = 0.01, 1200
    t = np.arange(n) * dt
    fine = np.arange(-100, n * 10) * dt / 10  # from -0.1 s: delays need the past
    w_ss = coef[0] + coef[1] * pwm_at(fine) / 65535.0 * vbat_at(fine)[:, None]
    lag = ([1.0], [t_m, 1.0])
    w = np.stack(
        [lsim(lag, w_ss[:, i], fine - fine[0], X0=[w_ss[0, i] * t_m])[1] for i in range(4)],
        axis=-1,
    )

    def forces(tq):
        wq = np.stack([np.interp(tq, fine, w[:, i]) for i in range(4)], axis=-1)
        k, q = p.rpm2thrust, p.rpm2torque
        T, Q = k[0] + k[1] * wq + k[2] * wq * wq, q[0] + q[1] * wq + q[2] * wq * wq
        r = np.concatenate([p.rotor_positions, np.zeros((4, 1))], axis=1)
        F = np.zeros((*T.shape, 3))
        F[..., 2] = T
        tau = np.sum(np.cross(r, F), axis=-2)
        tau[..., 2] += -np.sum(p.rotor_spin * Q, axis=-1)
        return T.sum(axis=-1), tau

    fine_t = np.arange(n * 10) * dt / 10
    _, tau_f = forces(fine_t - d_w)
    J, Ji = np.asarray(p.J), np.linalg.inv(np.asarray(p.J))
    om = np.zeros((len(fine_t), 3))
    for i in range(1, len(fine_t)):
        o = om[i - 1]
        om[i] = o + dt / 10 * Ji @ (tau_f[i - 1] - np.cross(o, J @ o))
    gyro = om[::10]
    thrust, _ = forces(t - d_f)
    accel = np.zeros((n, 3))
    accel[:, 2] = thrust / mass
    flight = {
        "name": "synthetic",
        "t": t,
        "pwm": pwm_at(t),
        "vbat": vbat_at(t),
        "accel": accel,
        "gyro": gyro,
        "flying": np.ones(n, dtype=bool),
    }
    r = rp.replay(flight, motor=motor)
    assert r["mass_kg"] == pytest.approx(mass, rel=0.01)
    assert r["time_constant_s"] == pytest.approx(t_m, abs=0.006)
    # the replay holds the command over a sample: half a sample of delay is its own
    assert r["delays_s"]["pwm_to_imu"] == pytest.approx(d_f, abs=0.008)
    assert r["delays_s"]["pwm_to_gyro"] == pytest.approx(d_w, abs=0.008)
    assert r["specific_force_z_r2"] > 0.99
    assert min(r["ang_acc_r2"]) > 0.95
    assert np.max(np.abs(r["ang_acc_bias_rad_s2"])) < 0.5
    # without the lag the delay has to stand in for it and the fit is worse
    r0 = rp.replay(flight, motor=motor, time_constant=0.0, horizons=())
    assert r0["delays_s"]["pwm_to_imu"] > d_f + 0.02
    assert r0["specific_force_z_r2"] < r["specific_force_z_r2"]


def test_the_quadsim_replay_command(tmp_path):
    """``quadsim replay`` (the CLI's subcommand): a real log exits 0 with its JSON; a truncated
    one exits 2 with one line naming the file, no traceback."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    log = Path(__file__).resolve().parents[2] / "data" / "nanobench" / "B9_trefoil_slow_rep1.csv.gz"
    out = tmp_path / "r.json"
    r = subprocess.run([sys.executable, "-m", "quadsim.app.cli", "replay", str(log), "--json",
                        str(out)], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads(out.read_text())["n_samples"] > 1000
    bad = tmp_path / "bad.csv"
    bad.write_text("t,px\n1,2\n")
    r = subprocess.run([sys.executable, "-m", "quadsim.app.cli", "replay", str(bad)],
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    assert r.returncode == 2 and str(bad) in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_the_same_flight_twice_exits_2_naming_both(tmp_path):
    """``quadsim replay`` refuses a flight given twice under two names (issue 40: held out it
    was fitted on itself, "R²" 0.906 -> 0.926), by content: here a copy decompressed, so not
    even the bytes are the same. Exit 2, one line naming both files, nothing fitted."""
    import subprocess
    import sys

    plain = tmp_path / "again.csv"
    with gzip.open(B9, "rb") as fh:
        plain.write_bytes(fh.read())
    cmd = [sys.executable, "-m", "quadsim.app.cli", "replay", B9, B2, plain, "--quiet"]
    r = subprocess.run(list(map(str, cmd)), capture_output=True, text=True, timeout=120)
    err = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(err) == 1, r.stderr
    assert err[0].startswith(f"quadsim: {plain}: the same flight as {B9}")
    assert "Traceback" not in r.stderr and r.stdout == ""


# --------------------------------------------------------------------------- hostile logs


@pytest.fixture(scope="module")
def b9_lines() -> list[str]:
    with gzip.open(B9, "rt", encoding="utf-8") as fh:
        return fh.read().splitlines()


def _edit(lines: list[str], line: int, column: str, value: str) -> list[str]:
    """``lines`` with the cell of ``column`` on the file's line ``line`` (1-based) set."""
    out = list(lines)
    cells = out[line - 1].split(",")
    cells[lines[0].split(",").index(column)] = value
    out[line - 1] = ",".join(cells)
    return out


def _column(lines: list[str], column: str, value) -> list[str]:
    """``lines`` with every data cell of ``column`` set to ``value(old_text)``."""
    j = lines[0].split(",").index(column)
    out = [lines[0]]
    for line in lines[1:]:
        cells = line.split(",")
        cells[j] = value(cells[j])
        out.append(",".join(cells))
    return out


def _write(tmp_path: Path, lines: list[str], name: str = "log.csv", end: str = "\n") -> Path:
    path = tmp_path / name
    path.write_bytes((end.join(lines) + end).encode("utf-8"))
    return path


def _quadsim_replay(capsys, *args) -> tuple[int, list[str]]:
    """``quadsim replay ARGS`` in this process: the exit code and stderr's lines."""
    from quadsim.app.cli import main

    rc = main(["replay", *map(str, args)])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return rc, err.strip().splitlines()


@pytest.mark.parametrize(
    ("column", "value", "what", "shown"),
    [
        ("motor_motor_m2", "1e308", "PWM outside 0..65535", "1e308"),
        ("pwr_pm_vbat", "1e300", "battery voltage outside 2.0..4.5 V", "1e300"),
        ("pwr_pm_vbat", "0", "battery voltage outside 2.0..4.5 V", "0"),
        ("imu_acc_x", "30", "accelerometer beyond the BMI088's range", "30"),
        ("imu_gyro_z", "-40", "gyro beyond the BMI088's range", "-40"),
        ("est_stateEstimate_y", "1e6", "position beyond ±100 m", "1e6"),
        ("vx", "nan", "not a finite number", "'nan'"),
        ("vz", "1e400", "not a finite number", "'1e400'"),
        ("px", "abc", "not a number", "'abc'"),
        ("motor_motor_m4", "", "empty cell", "''"),
    ],
)
def test_an_absurd_cell_exits_2_naming_file_row_and_column(
    tmp_path, capsys, b9_lines, column, value, what, shown
):
    """One absurd cell (before: a PWM of 1e308 or a vbat of 1e300 made every metric NaN, exit
    0): exit 2, ``quadsim: FILE: row N, column C: what; got V``, N the file's own line."""
    path = _write(tmp_path, _edit(b9_lines, 701, column, value))
    assert path.read_text().splitlines()[700].split(",")[b9_lines[0].split(",").index(column)] == (
        value
    )
    rc, err = _quadsim_replay(capsys, path)
    assert rc == 2 and len(err) == 1, err
    assert err[0].startswith(f"quadsim: {path}: row 701, column '{column}': {what}"), err[0]
    assert err[0].endswith(f"; got {shown}"), err[0]


@pytest.mark.parametrize(
    ("names", "values", "what"),
    [
        (("qx", "qy", "qz", "qw"), ("0", "0", "0", "0"), "Vicon quaternion of norm 0"),
        (tuple(f"att_stateEstimate_q{a}" for a in "xyzw"), ("0", "0", "0.5", "1.5"),
         "onboard EKF quaternion of norm 1.58"),
    ],
)  # fmt: skip
def test_a_quaternion_not_of_unit_norm_exits_2(tmp_path, capsys, b9_lines, names, values, what):
    """Before: one all-zero quaternion moved the IMU-to-Vicon delay to -100 ms, exit 0."""
    lines = b9_lines
    for n, v in zip(names, values, strict=True):
        lines = _edit(lines, 1001, n, v)
    path = _write(tmp_path, lines)
    rc, err = _quadsim_replay(capsys, path)
    cols = ", ".join(repr(n) for n in names)
    assert rc == 2 and len(err) == 1
    assert err[0].startswith(f"quadsim: {path}: row 1001, columns {cols}: {what}"), err[0]
    assert err[0].endswith(f"; got ({', '.join(values)})")


def test_a_gap_or_a_step_back_in_time_exits_2(tmp_path, capsys, b9_lines):
    """Before: a 5-s gap was ignored (exit 0). Steps of 2 periods (a dropped sample, in the
    real logs) pass; more than :data:`GAP_FACTOR` periods do not."""
    head, rows = b9_lines[:1001], b9_lines[1001:]
    later = _column([b9_lines[0], *rows], "t", lambda c: repr(float(c) + 5.0))[1:]
    path = _write(tmp_path, head + later, "gap.csv")
    rc, err = _quadsim_replay(capsys, path)
    assert rc == 2 and len(err) == 1
    assert err[0].startswith(
        f"quadsim: {path}: row 1002, column 't': a gap of 5.01 s after row 1001, more than 5 "
        "times the median sample period (0.01 s); got 17724290"
    ), err[0]
    t650 = b9_lines[650].split(",")[0]
    path = _write(tmp_path, _edit(b9_lines, 701, "t", t650), "back.csv")
    with pytest.raises(ValueError, match=r"back\.csv: row 701, column 't': time does not incr"):
        rp.load_log(path)


def test_rows_are_the_files_lines_for_every_column(tmp_path, b9_lines):
    """Blank lines, CRLF ends, a byte order mark: the row named is the line an editor shows.
    Columns replay does not use are not read (text there is no error, docs/validation.md);
    the row numbers were off by two for them before (NumPy's 0-based data rows)."""
    lines = _edit(_edit(b9_lines, 701, "roll", "abc"), 901, "imu_acc_y", "abc")
    lines = [*lines[:10], "", "", *lines[10:]]  # lines 701, 901 are now 703, 903
    path = tmp_path / "crlf.csv"
    path.write_bytes(("\ufeff" + "\r\n".join(lines) + "\r\n").encode("utf-8"))
    with pytest.raises(ValueError, match=r"crlf\.csv: row 903, column 'imu_acc_y': not a num"):
        rp.load_log(path)
    ok = rp.load_log(_write(tmp_path, _edit(b9_lines, 701, "roll", "abc"), "unused.csv"))
    np.testing.assert_array_equal(ok["pwm"], rp.load_log(B9)["pwm"])
    assert ok["lines"][0] == 2 and ok["lines"][-1] == len(b9_lines)


def _garbage(tmp_path: Path, b9_lines: list[str], kind: str) -> tuple[Path, str]:
    """A damaged log of ``kind`` and a piece of the message it must give."""
    text = "\n".join(b9_lines) + "\n"
    head = b9_lines[0]
    cases: dict[str, tuple[Any, str]] = {
        "empty": (lambda: b"", "empty file (no header row)"),
        "header only": (lambda: (head + "\n").encode(), "only 0 data rows"),
        "one row": (lambda: "\n".join(b9_lines[:2]).encode(), "only 1 data rows"),
        "cut mid-row": (lambda: text[: len(text) // 2].encode(),
                        "fields, the header has 52 (truncated"),
        "cut gzip": (lambda: B9.read_bytes()[:4000], "unreadable or truncated gzip file"),
        "binary": (lambda: bytes(range(256)) * 20, "row 2: not UTF-8 text (byte 0x80): binary"),
        "NUL": (lambda: (text[:3000] + "\0\n").encode(), "a NUL character: binary data"),
        "latin-1": (lambda: (text[:3000] + "é\n").encode("latin-1"),
                    "not UTF-8 text (byte 0xe9)"),
        "missing column": (lambda: text.replace("imu_acc_z", "imu_acc_w", 1).encode(),
                           "row 1 (header): missing column 'imu_acc_z'"),
        "duplicate column": (lambda: text.replace(",roll,", ",pz,", 1).encode(),
                             "row 1 (header), column 'pz': appears twice in the header"),
        "more fields": (lambda: "\n".join([*b9_lines[:300], b9_lines[300] + ",7"]).encode(),
                        "row 301: 53 fields, the header has 52 (more fields than columns)"),
        "huge field": (lambda: "\n".join([*b9_lines[:300], "9" * 200_000]).encode(),
                       "row 301: malformed CSV (field larger than field limit"),
        "picoseconds": (lambda: "\n".join([head, *(f"{i}e-12," + r.split(",", 1)[1]
                                                     for i, r in enumerate(b9_lines[1:]))])
                        .encode(), "column 't': median sample period 1e-12 s"),
        "directory": (None, "is a directory, not a log file"),
        "no file": (None, "no such file"),
    }  # fmt: skip
    data, what = cases[kind]
    path = tmp_path / f"{kind.replace(' ', '_')}.csv"
    if kind == "directory":
        path.mkdir()
    elif data is not None:
        path.write_bytes(data())
    return path, what


@pytest.mark.parametrize(
    "kind",
    ["empty", "header only", "one row", "cut mid-row", "cut gzip", "binary", "NUL", "latin-1",
     "missing column", "duplicate column", "more fields", "huge field", "picoseconds",
     "directory", "no file"],
)  # fmt: skip
def test_a_damaged_log_exits_2_with_one_line(tmp_path, capsys, b9_lines, kind):
    path, what = _garbage(tmp_path, b9_lines, kind)
    rc, err = _quadsim_replay(capsys, path)
    assert rc == 2 and len(err) == 1, err
    assert err[0].startswith(f"quadsim: {path}: ") and what in err[0], err[0]


def test_a_pickle_given_as_a_log_runs_no_code(tmp_path, capsys, crafted):
    """Issue 40: a log is read as text: a pickle (one that creates a file when unpickled) exits
    2 with one line naming the file, and runs nothing."""
    import pickle

    payload, marker = crafted
    for path in (tmp_path / "flight.csv", tmp_path / "flight.csv.gz"):
        raw = pickle.dumps(payload)
        path.write_bytes(gzip.compress(raw) if path.suffix == ".gz" else raw)
        rc, err = _quadsim_replay(capsys, path)
        assert rc == 2 and len(err) == 1 and err[0].startswith(f"quadsim: {path}: "), err
    assert not marker.exists()


@pytest.mark.parametrize(
    ("column", "value", "what"),
    [
        (tuple(f"motor_motor_m{i}" for i in range(1, 5)), lambda c: "40000",
         "the PWM never changes over the 476 airborne samples (rows 326-801): the rotors' time "
         "constant and the PWM delays cannot be fitted"),
        (("imu_acc_z",), lambda c: "1.0", "the accelerometer's z never changes"),
        (("imu_acc_z",), lambda c: repr(-float(c)),
         "the accelerometer's z does not follow the predicted thrust (fitted mass -0.0"),
        (("imu_gyro_y",), lambda c: "0", "the gyro's y never changes"),
    ],
)  # fmt: skip
def test_data_the_fits_cannot_use_exit_2_saying_why(tmp_path, capsys, b9_lines, column, value,
                                                    what):  # fmt: skip
    """Before: a constant PWM fitted a 23 g drone with a 300 ms delay (exit 0)."""
    lines = b9_lines[:801]
    for c in column:
        lines = _column(lines, c, value)
    path = _write(tmp_path, lines)
    rc, err = _quadsim_replay(capsys, path)
    cols = ", ".join(repr(c) for c in column)
    assert rc == 2 and len(err) == 1, err
    assert err[0].startswith(f"quadsim: {path}: column{'s' if len(column) > 1 else ''} {cols}: ")
    assert what in err[0], err[0]


def test_a_time_step_in_the_wrong_unit_is_no_singular_matrix(flights, motor):
    """Before: ``Singular matrix`` (NumPy's, from the 10 Hz filter's initial state at a 1e-14 s
    period), no file, no column."""
    fl = dict(flights["B9"], t=flights["B9"]["t"] * 1e-12)
    with pytest.raises(ValueError, match=r"B9_trefoil_slow_rep1\.csv\.gz: column 't': median "
                       r"sample period 1e-14 s, outside 0\.1 to 25 ms"):  # fmt: skip
        rp.replay(fl, motor=motor)


def _no_nan(name: str) -> None:
    raise AssertionError(f"not strict JSON: {name}")


def test_json_is_written_whole_or_not_at_all(tmp_path, capsys, monkeypatch, b9_lines):
    """A write that fails half way (a full disk) leaves the earlier file as it was and no
    partial file; the message names the file."""
    import errno

    log = _write(tmp_path, b9_lines[:801])
    js = tmp_path / "r.json"
    js.write_text('{"earlier": 1}\n')

    def half(self, data, *a, **kw):
        with open(self, "w", encoding="utf-8") as fh:
            fh.write(data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", half)
    rc, err = _quadsim_replay(capsys, log, "--json", js)
    monkeypatch.undo()
    assert rc == 2 and err == [f"quadsim: {js}: No space left on device (the disk is full)"]
    assert js.read_text() == '{"earlier": 1}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.csv", "r.json"]
    rc, err = _quadsim_replay(capsys, log, "--json", js)
    assert rc == 0
    doc = json.loads(js.read_text(), parse_constant=_no_nan)
    assert doc["n_samples"] == 476 and doc["mass_kg"] > 0
    rc, err = _quadsim_replay(capsys, log, "--json", tmp_path / "nowhere" / "r.json")
    assert rc == 2 and err == [f"quadsim: --json {tmp_path / 'nowhere' / 'r.json'}: the folder "
                               f"{tmp_path / 'nowhere'} does not exist"]  # fmt: skip


def test_a_second_replay_into_a_held_out_folder_exits_2(tmp_path, capsys):
    """``--out DIR`` is held for the run (``quadsim.app.io.outdir.claim``): another replay into
    it exits 2 naming the holder, before it reads anything."""
    import os

    from quadsim.app.io import outdir

    out = tmp_path / "plots"
    with outdir.claim(out, command="quadsim replay first.csv --out plots"):
        rc, err = _quadsim_replay(capsys, B9, "--out", out)
    assert rc == 2 and len(err) == 1
    assert err[0].startswith(
        f"quadsim: {out}: in use by process {os.getpid()} (quadsim replay first.csv --out plots"
    ), err[0]
    assert list(out.iterdir()) == []


def test_the_battery_range_is_the_power_presets(tmp_path):
    """2.0-4.5 V: the cf21_stock cell's cut-off less 1 V to its full charge plus 0.3 V."""
    from quadsim.app.sysid import replay_log
    from quadsim.physics.power import load_power

    p = load_power("cf21_stock")
    assert replay_log.VBAT_RANGE_V == pytest.approx((p.v_cutoff - 1.0, p.ocv[-1] + 0.3))
