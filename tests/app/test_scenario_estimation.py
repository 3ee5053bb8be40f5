"""The scenario's ``[estimator]`` (issue 11): a run flown on the EKF's estimate, its Parquet
columns and summary, and bad input rejected with exit 2 naming the key."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from quadsim.app.scenario import build, load_scenario

SCENARIO = """\
name = "figure eight on the EKF"
duration = {duration}
n = 2
seed = 3

[sim]
dt = 0.002

[controller]
kind = "geometric"

[trajectory]
kind = "lemniscate"
size = 1.0
period = 8.0
center = [0.0, 0.0, 1.0]

[sensors]
imu = "{imu}"
mocap_pos_std = 0.001
mocap_att_std = 0.0087
mocap_latency = {latency}
mocap_rate = 100.0

[estimator]
kind = "{kind}"
{extra}

[output]
settle = 1.0
plots = false
"""


def scenario(duration=3.0, imu="bmi088", latency=0.01, kind="ekf", extra=""):
    return SCENARIO.format(duration=duration, imu=imu, latency=latency, kind=kind, extra=extra)


def test_a_run_on_the_ekf_writes_the_estimate_and_its_errors(tmp_path):
    import pyarrow.parquet as pq

    path = tmp_path / "ekf.toml"
    path.write_text(scenario())
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "quadsim.app.cli", "fly", str(path), "--out", str(out), "--quiet"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    summary = json.loads((out / "summary.json").read_text())
    est = summary["estimation"]
    assert set(est) == {"pos_rmse_m", "ate_m", "vel_rmse_m_s", "att_rmse_deg", "nees_mean",
                        "nees_dof", "rte_1m_m", "rte_drones"}  # fmt: skip
    assert est["pos_rmse_m"] < 2e-3 and est["att_rmse_deg"] < 0.5 and est["nees_dof"] == 9
    assert 0 < est["ate_m"] <= est["pos_rmse_m"]  # the alignment can only lower it
    assert est["rte_drones"] == 1 and 0 < est["rte_1m_m"] < 5e-3  # plots off: drone 0 kept
    assert 3.0 < est["nees_mean"] < 20.0
    assert summary["rates_hz"]["mocap"] == pytest.approx(100.0)
    names = pq.read_schema(out / "trajectory.parquet").names
    for col in ("est_x", "est_vz", "est_qw", "est_bgx", "est_bax", "est_var_x", "est_var_rz",
                "est_nees"):  # fmt: skip
        assert col in names


def test_a_run_without_an_estimator_reports_none(tmp_path):
    sc = load_scenario(scenario(kind="truth"), text=True)
    assert build(sc).estimator is None


def test_the_complementary_filter_is_built_from_the_scenario():
    sc = load_scenario(scenario(kind="complementary", extra="k_p = 2.0\nk_i = 0.5"), text=True)
    est = build(sc).estimator
    assert est.kind == "complementary"
    assert (est.gains.k_p, est.gains.k_i) == (2.0, 0.5)
    assert est.gains.meas_period == pytest.approx(0.01)


@pytest.mark.parametrize("text, key", [
    (scenario(imu="none"), "estimator.kind"),
    (scenario(extra="init_pos_std = -0.001"), "estimator.init_pos_std"),
    (scenario(latency=0.015), "sensors.mocap_latency"),
    (scenario(kind="kalman"), "estimator.kind"),
    (scenario(extra="gain = 3"), "estimator.gain"),
    (scenario().replace("mocap_rate = 100.0", "mocap_rate = 300.0"), "sensors.mocap_rate"),
    (scenario().replace("mocap_rate = 100.0", "mocap_rate = -100.0"), "sensors.mocap_rate"),
])  # fmt: skip
def test_bad_estimator_input_names_the_key(text, key):
    """An estimator without the sensor it needs, a negative std, a latency that is not a whole
    number of motion-capture periods, an unknown kind or key, a rate that is not a whole number
    of physics steps: one error naming the key and its line."""
    with pytest.raises(ValueError, match=rf"<scenario>: {key} \(line \d+\)"):
        load_scenario(text, text=True)


def test_the_cli_exits_2_on_an_estimator_without_its_sensor(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text(scenario(imu="none"))
    cmd = [sys.executable, "-m", "quadsim.app.cli", "fly", str(path), "--out",
           str(tmp_path / "out")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert "estimator.kind (line" in r.stderr and "needs an IMU" in r.stderr
    assert "Traceback" not in r.stderr


OUTDOOR = """\
duration = {duration}
n = 2
seed = 1

[drone]
preset = "skydio2_x"

[sim]
dt = 0.002

[controller]
kind = "geometric"

[trajectory]
kind = "circle"
radius = 5.0
speed = 2.0
center = [0.0, 0.0, 10.0]

[wind]
mean = [5.0, 0.0, 0.0]
turbulence = "moderate"

[sensors]
imu = "bmi088"
baro = "bmp388"
gnss = "{gnss}"
gnss_pos_std = 0.5
{extra}

[estimator]
kind = "ekf"
init_pos_std = 0.5

[output]
settle = 5.0
plots = false
"""


def test_an_outdoor_run_on_gnss_and_the_barometer(tmp_path):
    """The outdoor case from a scenario file: u-blox M9N with 0.5 m white noise and no latency,
    the BMP388, no motion capture; the summary's position RMSE is below 0.5 m."""
    path = tmp_path / "outdoor.toml"
    path.write_text(OUTDOOR.format(duration=20.0, gnss="ublox_m9n", extra="gnss_latency = 0.0"))
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "quadsim.app.cli", "fly", str(path), "--out", str(out), "--quiet"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rates_hz"]["gnss"] == pytest.approx(5.0)
    assert summary["rates_hz"]["baro"] == pytest.approx(50.0)
    assert summary["estimation"]["pos_rmse_m"] < 0.5, summary["estimation"]
    assert summary["crash_count"] == 0


@pytest.mark.parametrize("gnss, extra, key", [
    ("ublox_m12", "", "sensors.gnss"),
    ("ublox_m9n", "gnss_latency = 0.15", "sensors.gnss_latency"),
    ("ublox_m9n", "gnss_pos_std = -1.0", "sensors.gnss_pos_std"),
    ("ublox_m9n", 'baro = "bmp999"', "sensors.baro"),
])  # fmt: skip
def test_bad_gnss_and_barometer_input_names_the_key(gnss, extra, key):
    text = OUTDOOR.format(duration=1.0, gnss=gnss, extra=extra)
    if extra.startswith(("gnss_pos_std", "baro")):  # replace the key rather than repeat it
        name = extra.split(" = ")[0]
        text = "\n".join(line for line in text.splitlines()
                         if not line.startswith(name + " =")) + "\n"  # fmt: skip
        text = text.replace("[sensors]\n", f"[sensors]\n{extra}\n")
    with pytest.raises(ValueError, match=rf"<scenario>: {key} \(line \d+\)"):
        build(load_scenario(text, text=True))


@pytest.mark.parametrize("extra, key", [
    ("mocap_dropout = 1.0", "sensors.mocap_dropout"),
    ("mocap_gap = 0.5", "sensors.mocap_gap"),
])  # fmt: skip
def test_bad_dropouts_name_the_key(extra, key):
    text = scenario().replace("mocap_rate = 100.0", f"mocap_rate = 100.0\n{extra}")
    with pytest.raises(ValueError, match=rf"<scenario>: {key} \(line \d+\)"):
        load_scenario(text, text=True)


def test_dropouts_from_the_scenario():
    text = scenario().replace("mocap_rate = 100.0", "mocap_rate = 100.0\nmocap_dropout = 0.1\n"
                              "mocap_gap = 3.0")  # fmt: skip
    m = build(load_scenario(text, text=True)).mocap
    assert (m.dropout, m.gap, m.rate) == (0.1, 3.0, 100.0)
