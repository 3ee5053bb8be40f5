"""quadsim's ESKF on a real Crazyflie flight (NanoBench trefoil B9) against the onboard EKF.

Numbers measured on this repository's copy of the data (docs/validation_nanobench.md): the
quadsim ESKF (real IMU, Vicon sub-sampled to 20 Hz with 1 mm / 0.5 deg noise, seed 0) has an
ATE of 3.2 mm on B9, the onboard EKF 14.1 mm; the bounds below leave a wide margin for other
CPUs and BLAS builds.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from quadsim.app.validation import nanobench as nb

DATA = Path(__file__).resolve().parents[2] / "data" / "nanobench"
B9 = DATA / "B9_trefoil_slow_rep1.csv.gz"

pytestmark = pytest.mark.skipif(not B9.exists(), reason="data/nanobench/ not in this checkout")


@pytest.fixture(scope="module")
def flight() -> dict:
    return nb.load_flight(B9)


@pytest.fixture(scope="module")
def result(flight: dict) -> dict:
    return nb.run_ekf(flight, mocap_rate=20.0, pos_std=1e-3, att_std=math.radians(0.5), seed=0)


def test_load_units_and_frames(flight: dict) -> None:
    t = flight["t"]
    n = len(t)
    assert t[0] == 0.0 and np.all(np.diff(t) > 0)
    assert abs(np.median(np.diff(t)) - 0.01) < 1e-4  # 100 Hz
    for key, width in (
        ("gyro", 3),
        ("accel", 3),
        ("pos", 3),
        ("quat", 4),
        ("est_pos", 3),
        ("est_quat", 4),
        ("vel", 3),
        ("pwm", 4),
    ):
        assert flight[key].shape == (n, width), key
    assert flight["meta"]["trajectory_type"] == "trefoil"
    np.testing.assert_allclose(np.linalg.norm(flight["quat"], axis=1), 1.0, atol=1e-9)
    np.testing.assert_allclose(np.linalg.norm(flight["est_quat"], axis=1), 1.0, atol=1e-9)
    # at rest on the ground: the accelerometer reads +1 g on body z (FLU, specific force)
    rest = nb.rest_check(flight)
    assert abs(rest["accel_norm"] - 9.81) < 0.05
    assert rest["up_imu"][2] > 0.999 and rest["up_vicon"][2] > 0.999  # Vicon world z is up
    assert rest["tilt_deg"] < 5.0  # Vicon's body frame within a few degrees of the IMU's
    assert np.all(np.abs(rest["gyro_mean"]) < 0.01)
    # in flight: the mean specific force is gravity's (hover), Vicon z around the altitude
    fly = flight["flying"]
    assert fly.sum() > 1500
    hover = np.nonzero(fly)[0][200:-200]  # without the 2 s of take-off and landing
    assert abs(np.linalg.norm(flight["accel"][hover].mean(axis=0)) - 9.81) < 0.1  # 9.81 here
    alt = flight["meta"]["params"]["altitude_m"]
    z = flight["pos"][fly, 2]
    assert abs(np.median(z) - alt) < 0.2
    assert z.max() < alt + flight["meta"]["params"]["z_amplitude_m"] + 0.15


def test_imu_time_shift_below_half_a_sample(flight: dict) -> None:
    tau = nb.estimate_imu_shift(flight)
    print(f"\nB9 IMU shift against Vicon: {tau * 1e3:+.0f} ms")
    assert abs(tau) <= 0.008


def test_hover_noise_above_datasheet(flight: dict) -> None:
    h = nb.hover_noise(flight)
    # vibration in flight: more than the BMI088 data sheet's white noise, but the same order
    assert 1.0 < h["accel_inflation"] < 10.0
    assert 1.0 < h["gyro_inflation"] < 30.0


def test_ekf_ate_on_trefoil(flight: dict, result: dict) -> None:
    ev = nb.evaluate(flight, result)
    print(
        f"\nB9: quadsim ESKF ATE {ev['ekf_ate_m'] * 1e3:.2f} mm "
        f"(att {ev['ekf_att_rmse_deg']:.2f} deg), onboard EKF ATE "
        f"{ev['onboard_ate_m'] * 1e3:.2f} mm (att {ev['onboard_att_rmse_deg']:.2f} deg), "
        f"n = {ev['n']}"
    )
    assert len(result["mocap"]) == pytest.approx(len(flight["t"]) / 5, abs=2)  # 20 Hz
    assert np.all(np.isfinite(result["pos"])) and np.all(np.isfinite(result["pos_std"]))
    assert ev["ekf_ate_m"] < 0.010  # measured 3.2 mm
    assert ev["ekf_att_rmse_deg"] < 3.0  # measured 1.5 deg
    assert ev["ekf_ate_m"] < ev["onboard_ate_m"]


def test_onboard_ate_in_published_range(flight: dict, result: dict) -> None:
    """NanoBench: onboard EKF ATE 21.1 ± 3.3 mm (slow trefoils, 11 runs); this run: 14.1 mm.

    One run at the low end of the spread: accept the published mean ± 3 standard deviations.
    """
    ev = nb.evaluate(flight, result)
    onb = ev["onboard_ate_m"] * 1e3
    print(f"\nB9 onboard EKF ATE {onb:.2f} mm (NanoBench: 21.1 ± 3.3 mm over slow trefoils)")
    assert 21.1 - 3 * 3.3 < onb < 21.1 + 3 * 3.3
    assert 0.5 < ev["onboard_att_rmse_deg"] < 5.0  # NanoBench: 2.12 ± 0.05 deg


def test_cli_prints_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert nb.main(["--files", str(B9)]) == 0
    out = capsys.readouterr().out
    assert "B9_trefoil_slow_rep1" in out and "ATE quadsim" in out


def test_load_flight_names_the_file_row_and_column(tmp_path) -> None:
    """A cell that is no number: the file, its line (the header is row 1) and the column; the
    columns the loader does not use are not read."""
    import gzip

    with gzip.open(B9, "rt", encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    head = lines[0].split(",")

    def edited(line: int, column: str, value: str) -> Path:
        out = list(lines)
        cells = out[line - 1].split(",")
        cells[head.index(column)] = value
        out[line - 1] = ",".join(cells)
        path = tmp_path / "log.csv"
        path.write_text("\n".join(out) + "\n", encoding="utf-8")
        return path

    path = edited(501, "imu_gyro_x", "1.0.0")
    with pytest.raises(ValueError, match=r"log\.csv: row 501, column 'imu_gyro_x': not a num"):
        nb.load_flight(path)
    flight = nb.load_flight(edited(501, "roll", "text"))
    assert len(flight["t"]) == len(lines) - 1
