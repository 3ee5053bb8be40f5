"""Flight-log replay (``quadsim.app.sysid.replay``) on the NanoBench flights in ``data/nanobench/``:
the measured figures with margins (``docs/validation.md``, "Flight logs: replay"), the malformed-
log errors, the command line and a synthetic oracle with known mass, delays and motor model."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from quadsim.app.sysid import replay as rp
from quadsim.app.sysid import thrust_stand as ts
from quadsim.physics.params import load_params

DATA = Path(__file__).resolve().parents[1] / "data" / "nanobench"
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


def test_held_out_specific_force(flights, motor):
    """Mass, rotor lag, delays and angular bias fitted on one flight, tested on another.
    Measured: B2->B3 0.398, B3->B2 0.663, and negative to and from B9 (-1.77, -0.21, -0.91,
    -0.33): a 3-6 % mismatch of the effective mass shifts the level by 0.3-0.6 m/s² against a
    signal of 0.33-0.43 m/s² standard deviation. The issue's target (>= 0.8) is not met held
    out on these three flights (docs/validation.md: it holds for three pairs of B2, B5, B7)."""
    rows = {
        (r["train"][:2], r["test"][:2]): r
        for r in rp.cross_flights([flights[k] for k in ("B2", "B3", "B9")], motor=motor)
    }
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
    assert rp.main([str(B9), "--json", str(js), "--out", str(out)]) == 0
    doc = json.loads(js.read_text())
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
    assert rp.main([str(path)]) == 2
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
    with pytest.raises(ValueError, match=r"cut\.csv: column 'motor_motor_m3', row 11"):
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

    log = Path(__file__).resolve().parents[1] / "data" / "nanobench" / "B9_trefoil_slow_rep1.csv.gz"
    out = tmp_path / "r.json"
    r = subprocess.run([sys.executable, "-m", "quadsim.cli", "replay", str(log), "--json",
                        str(out)], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads(out.read_text())["n_samples"] > 1000
    bad = tmp_path / "bad.csv"
    bad.write_text("t,px\n1,2\n")
    r = subprocess.run([sys.executable, "-m", "quadsim.cli", "replay", str(bad)],
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    assert r.returncode == 2 and str(bad) in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
