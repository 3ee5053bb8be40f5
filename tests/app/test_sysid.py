"""Thrust-stand identification (``quadsim.app.sysid.thrust_stand``) on the Crazyflie 2.1 runs in
``data/crazyflie-thrust-stand/``: the loader's units, the figures of issue 12 (preset and best
quadratic RPM-to-thrust RMSE), the cross-run PWM/voltage model and synthetic oracles."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from quadsim.app.sysid import thrust_stand as ts
from quadsim.physics.params import invert_curve, load_params

DATA = Path(__file__).resolve().parents[2] / "data" / "crazyflie-thrust-stand"
RUN1, RUN2 = DATA / "cf2.1-stock-prop.csv", DATA / "cf21_stock2.csv"


@pytest.fixture(scope="module")
def run1() -> dict:
    return ts.load_stand(RUN1)


@pytest.fixture(scope="module")
def run2() -> dict:
    return ts.load_stand(RUN2)


@pytest.fixture(scope="module")
def preset():
    return load_params("cf2x_L250")


def test_loader_units(run1, run2):
    assert len(run1["pwm"]) == 2573 and len(run2["pwm"]) == 1735
    s = run1
    np.testing.assert_allclose(s["thrust_total"], 4.0 * s["thrust"])
    np.testing.assert_allclose(s["rpm"], s["rpm_each"].mean(axis=1))
    # the scale's largest reading is 50.009 g: 0.4906 N for the drone, 0.1226 N per rotor
    assert s["thrust_total"].max() == pytest.approx(50.008907e-3 * 9.81, rel=1e-6)
    assert s["thrust"].max() == pytest.approx(0.1226, abs=2e-4)
    np.testing.assert_allclose(s["duty"], s["pwm"] / 65535.0)
    assert s["pwm"].max() <= 65535 and s["vbat"].min() > 2.9 and s["vbat"].max() < 4.3
    assert 0.1 < s["current"].min() and s["current"].max() < 5.0  # A, not mA
    # W = V A (the deck samples them apart, so compare typical rows)
    assert np.median(np.abs(s["power"] - s["v_deck"] * s["current"])) < 0.1


def test_hover_thrust_per_rotor(run1, preset):
    """At hover each rotor carries m g / 4 = 0.078 N (0.31 N for the drone): the stand reaches it
    at about 19000 RPM, where the preset's curve puts it too."""
    hover = preset.mass * 9.81 / 4
    assert hover == pytest.approx(0.0782, abs=1e-3)
    d = ts.scale_delay(run1)
    on = run1["pwm"] > 0
    fit = ts.fit_thrust_curve(run1["rpm"][on], ts.align(run1["thrust"], d)[on])
    w_stand = invert_curve(fit.coef, hover)
    w_preset = invert_curve(preset.rpm2thrust, hover)
    assert 17000 < w_stand < 21000
    assert w_preset == pytest.approx(w_stand, rel=0.03)
    assert run1["thrust"].max() > 1.5 * hover  # thrust-to-weight about 1.6


def test_issue_figures_preset_and_quadratic(run1, run2, preset):
    """Issue 12: preset 3.26 mN, best quadratic 2.95 mN on cf2.1-stock-prop (rows pwm > 0, per
    rotor, g = 9.81, mean rpm, as logged); measured here 3.261 and 2.938 mN."""
    assert ts.thrust_rmse(preset, run1) == pytest.approx(3.26e-3, abs=0.05e-3)
    on = run1["pwm"] > 0
    quad = ts.fit_thrust_curve(run1["rpm"][on], run1["thrust"][on])
    assert quad.rmse == pytest.approx(2.95e-3, abs=0.05e-3)
    pure = ts.fit_thrust_curve(run1["rpm"][on], run1["thrust"][on], "pure")
    assert quad.rmse < ts.thrust_rmse(preset, run1) < pure.rmse
    # most of it is the scale's delay: aligned, the fit's residual drops below 0.6 mN
    for s, lo, hi in ((run1, 22, 32), (run2, 19, 29)):
        d = ts.scale_delay(s)
        assert lo <= d <= hi
        on = s["pwm"] > 0
        al = ts.fit_thrust_curve(s["rpm"][on], ts.align(s["thrust"], d)[on])
        assert al.rmse < 0.8e-3
        assert ts.thrust_rmse(preset, s, delay=d) < 2.0e-3


def test_coefficients_physical(run1, run2):
    for s in (run1, run2):
        d = ts.scale_delay(s)
        on = s["pwm"] > 0
        t = ts.align(s["thrust"], d)[on]
        quad = ts.fit_thrust_curve(s["rpm"][on], t)
        pure = ts.fit_thrust_curve(s["rpm"][on], t, "pure")
        a, b, c = quad.coef
        assert 2.2e-10 < c < 2.8e-10 and 1.9e-10 < pure.coef[2] < 2.4e-10  # N/RPM^2
        assert abs(a) < 5e-3  # N: within a scale offset of about 1 g
        w = np.linspace(5000.0, 24000.0, 20)
        assert np.all(b + 2 * c * w > 0) and np.all(quad(w) > -5e-3)
        rf = ts.fit_pwm_voltage_to_rpm(s["pwm"], s["v_deck"], s["rpm"])
        assert 1000 < rf.coef[0] < 5000 and 5000 < rf.coef[1] < 8000  # RPM, RPM/V
        assert 5 <= rf.tau <= 35  # rows


def test_cross_run_pwm_voltage_model(run1, run2):
    """Fitted on one run, tested on the other: total-thrust RMSE under 5 % of the mean with the
    battery voltage at the deck (measured 3.76 % and 3.00 %); the drone's own vbat reading, which
    sags further under load, gives 8.2 % and 9.5 %."""
    for a, b, measured in ((run1, run2, 3.76), (run2, run1, 3.00)):
        r = ts.cross_run(a, b, volt="v_deck", kind="linear")
        assert r["thrust_rmse_pct"] < 4.5
        assert r["thrust_rmse_pct"] == pytest.approx(measured, abs=0.3)
        assert r["n"] > 1000
        r_vbat = ts.cross_run(a, b, volt="vbat", kind="linear")
        assert r_vbat["thrust_rmse_pct"] > 6.0


def test_thrust_fit_recovers_known_coefficients():
    rng = np.random.default_rng(0)
    w = rng.uniform(3000.0, 24000.0, 500)
    k = np.array([-2.0e-3, -4.0e-7, 2.5e-10])
    t = k[0] + k[1] * w + k[2] * w**2
    fit = ts.fit_thrust_curve(w, t)
    np.testing.assert_allclose(fit.coef, k, rtol=1e-6)
    assert fit.rmse < 1e-9
    noisy = ts.fit_thrust_curve(w, t + rng.normal(0.0, 1e-4, w.size))
    assert noisy.coef[2] == pytest.approx(k[2], rel=0.02)
    assert noisy.rmse == pytest.approx(1e-4, rel=0.1)
    pure = ts.fit_thrust_curve(w, 2.2e-10 * w**2, "pure")
    np.testing.assert_allclose(pure.coef, [0.0, 0.0, 2.2e-10], rtol=1e-9, atol=0.0)
    # a known scale delay is found again
    rpm = np.concatenate(
        [np.zeros(20), np.linspace(2000, 24000, 600), np.linspace(24000, 2000, 600)]
    )
    stand = {"pwm": np.where(rpm > 0, 1.0, 0.0), "rpm": rpm}
    stand["thrust"] = np.concatenate([np.zeros(13), (k[2] * rpm**2)[:-13]])
    assert ts.scale_delay(stand) == 13


@pytest.mark.parametrize("kind", ["linear", "quadratic"])
def test_rpm_fit_recovers_known_model(kind):
    rng = np.random.default_rng(1)
    pwm = np.repeat(rng.uniform(10000, 65535, 40), 60)  # steps held 60 rows
    volt = np.linspace(4.1, 3.1, pwm.size) + rng.normal(0.0, 0.01, pwm.size)
    coef = np.array([3000.0, 6500.0, -300.0 if kind == "quadratic" else 0.0])
    true = ts.RpmFit(kind, coef, 12.0, 0.0, pwm.size)
    rpm = true.predict(pwm, volt)
    fit = ts.fit_pwm_voltage_to_rpm(pwm, volt, rpm, kind, rows=np.ones(pwm.size, bool))
    assert fit.tau == 12.0
    np.testing.assert_allclose(fit.coef, coef, rtol=1e-6, atol=1e-6)
    u = pwm / 65535 * volt
    np.testing.assert_allclose(fit.steady(pwm, volt), coef[0] + coef[1] * u + coef[2] * u * u)
    noisy = ts.fit_pwm_voltage_to_rpm(pwm, volt, rpm + rng.normal(0, 100.0, pwm.size), kind)
    assert abs(noisy.tau - 12.0) <= 2.0
    assert noisy.coef[1] == pytest.approx(coef[1], rel=0.05)


def test_lowpass_step():
    y = ts.lowpass(np.r_[0.0, np.ones(100)], 10.0)
    assert y[0] == 0.0
    assert y[10] == pytest.approx(1.0 - np.exp(-1.0), rel=1e-9)
    np.testing.assert_array_equal(ts.lowpass(np.arange(5.0), 0.0), np.arange(5.0))


def test_main_table(capsys):
    assert ts.main(["--files", str(RUN1), str(RUN2)]) == 0
    out = capsys.readouterr().out
    assert "cf2x_L250" in out and "3.261" in out and "v_deck" in out


def test_load_stand_names_bad_cell(tmp_path):
    bad = tmp_path / "bad.csv"
    lines = RUN2.read_text().splitlines()[:5]
    lines[3] = lines[3].replace("15000", "oops", 1)
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"bad\.csv: column 'pwm', row 4"):
        ts.load_stand(bad)
    missing = tmp_path / "missing.csv"
    missing.write_text("weight[g],pwm\n1,2\n")
    with pytest.raises(ValueError, match="missing columns"):
        ts.load_stand(missing)
    assert ts.main(["--files", str(bad)]) == 2
