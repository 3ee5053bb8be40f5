"""The power chain (quadsim.physics.power), its identification on the thrust stand
(quadsim.app.sysid.power) and the PWM command level (quadsim.engines.pwm)."""

from __future__ import annotations

import numpy as np
import pytest

from quadsim.app.sysid import power as fit
from quadsim.app.sysid import thrust_stand as ts
from quadsim.engines.pwm import PwmDrive
from quadsim.engines.sim import Simulator
from quadsim.physics import power as pw
from quadsim.physics.envelope import envelope

P_LAG_ROWS = 23  # the fitted lag (rows of the stand's log)


@pytest.fixture(scope="module")
def P():
    return pw.load_power("cf21_stock")


def test_the_preset_is_the_fit_on_the_stand(P, tmp_path):
    """The packaged preset is what `python -m quadsim.app.sysid.power` fits (rounded to 6
    significant digits in the file), and its sources name the data set."""
    f = fit.fit_power()
    np.testing.assert_allclose(P.r_internal, f["r_internal"], rtol=1e-5)
    np.testing.assert_allclose(P.rpm_coef, f["rpm"].coef, rtol=1e-5, atol=1e-9)
    np.testing.assert_allclose(P.power_coef, f["power_coef"], rtol=1e-5)
    path = tmp_path / "p.toml"
    path.write_text(fit.preset_text(f))
    again = pw.load_power(path)
    for a, b in zip(again, P, strict=True):
        if not isinstance(a, str):
            np.testing.assert_array_equal(a, b)  # the written file reads back as the preset
    text = (pw._root() / "cf21_stock.toml").read_text()
    assert text.count("crazyflie-system-id") >= 4


def test_stand_fit_figures(P):
    """Internal resistance of the two runs within 25 % of each other (0.16 and 0.20 ohm); the
    power curve fitted on one run predicts the other within 10 % of its mean power."""
    f = fit.fit_power()
    r = f["r_runs"]
    assert 0.1 < min(r) and max(r) < 0.3 and max(r) / min(r) < 1.3
    for c in fit.cross_run():
        print(f"power {c['fit']} -> {c['test']}: {c['power_rmse_w']:.3f} W "
              f"({100 * c['power_rmse_rel']:.1f} %)")  # fmt: skip
        assert c["power_rmse_rel"] < 0.10


def test_battery_voltage_current_and_power_agree(P):
    q = np.linspace(0, 1, 11)
    np.testing.assert_allclose(pw.ocv(q, P), P.ocv, atol=1e-12)  # the table's points
    for power in (0.0, 5.0, 12.0):
        V, cur = pw.battery_state(q, np.full(11, power), P)
        np.testing.assert_allclose(V * cur, power, rtol=1e-12)  # P = V I
        np.testing.assert_allclose(V, pw.ocv(q, P) - P.r_internal * cur, atol=1e-12)  # sag
    assert np.all(np.diff(pw.battery_state(q, np.full(11, 8.0), P)[0]) > 0)


def test_pwm_model_inverts_and_rises_with_voltage(P):
    pwm = np.array([5000.0, 20000.0, 40000.0, 65535.0])
    lo, hi = pw.rpm_from_pwm(pwm, 3.5, P), pw.rpm_from_pwm(pwm, 4.1, P)
    assert lo[0] == 0 and np.all(hi[1:] > lo[1:]) and np.all(np.diff(hi) > 0)
    # the stand's rotor speeds predicted from its PWM and deck voltage (lagged rows aside)
    d = ts.load_stand(ts.default_files()[1])
    keep = d["pwm"] >= ts.PWM_MIN
    pred = ts.lowpass(pw.rpm_from_pwm(d["pwm"], d["v_deck"], P), P_LAG_ROWS)[keep]
    rel = np.sqrt(np.mean((pred - d["rpm"][keep]) ** 2)) / np.mean(d["rpm"][keep])
    print(f"rotor speed from PWM and voltage on {d['name']}: {100 * rel:.2f} % RMS")
    assert rel < 0.04, rel


def test_bad_power_values_are_rejected(P, tmp_path):
    with pytest.raises(ValueError, match="capacity"):
        pw.check_power_params(P._replace(capacity=-1.0))
    with pytest.raises(ValueError, match="ocv"):
        pw.check_power_params(P._replace(ocv=P.ocv[::-1]))
    with pytest.raises(ValueError, match="rpm_coef"):
        pw.check_power_params(P._replace(rpm_coef=np.array([0.0, -1.0, 0.0])))
    bad = tmp_path / "bad.toml"
    bad.write_text((pw._root() / "cf21_stock.toml").read_text().replace('unit = "ohm"',
                                                                         'unit = "furlong"'))
    with pytest.raises(ValueError, match="r_internal"):
        pw.load_power(bad)
    with pytest.raises(ValueError, match="unknown power preset"):
        pw.load_power("nope")


def test_pwm_drive_hovers_drains_and_counts_energy(P):
    sim = Simulator("cf2x_L250", n=2, dt=1 / 500)
    sim.reset(pos=np.array([[0.0, 0.0, 1.0]] * 2))
    h = envelope(sim.drone).hover_rpm
    d = PwmDrive(sim, charge=[1.0, 0.3])
    v0 = d.voltage.copy()
    e = 0.0
    for _ in range(1000):  # 2 s at the PWM that holds the hover speed at the present voltage
        p_before = d.power
        d.step(d.hover_pwm(h)[:, None] * np.ones(4))
        e += 0.5 * (p_before + d.power) * sim.dt
    np.testing.assert_allclose(sim.state.pos[:, 2], 1.0, atol=2e-3)
    np.testing.assert_allclose(d.energy, e, rtol=1e-12)
    np.testing.assert_allclose(d.energy, 2.0 * pw.electrical_power(np.full(4, h), P), rtol=1e-3)
    assert np.all(d.voltage < v0) and d.voltage[1] < d.voltage[0]  # sag, lower when emptier
    used = (1.0 - d.charge[0]) * 3600 * P.capacity  # charge in coulombs
    np.testing.assert_allclose(used, d.energy[0] / np.mean([v0[0], d.voltage[0]]), rtol=2e-3)
    with pytest.raises(ValueError, match="pwm"):
        d.step(np.full(4, 70000.0))


def test_hover_endurance_matches_the_drive(P):
    """The closed-form endurance and a PwmDrive hovering until the cut-off agree (the drive
    stepped at 0.1 s with its rotor speeds held)."""
    h = envelope(Simulator("cf2x_L250", n=1).drone).hover_rpm
    t = pw.hover_endurance(P, h, dt=0.1)
    print(f"cf2x_L250 hover endurance on the cf21_stock battery: {t / 60:.2f} min")
    assert 4 * 60 < t < 8 * 60  # Bitcraze quotes up to 7 min for the lighter stock drone
    q, tt, Pw = 1.0, 0.0, float(pw.electrical_power(np.full(4, h), P))
    while pw.battery_state(np.asarray(q), np.asarray(Pw), P)[0] >= P.v_cutoff:
        _, i = pw.battery_state(np.asarray(q), np.asarray(Pw), P)
        q, tt = q + 0.01 * float(pw.charge_rate(i, P)), tt + 0.01
    assert abs(tt - t) < 1.0


def test_fit_command_prints_and_fails_cleanly(tmp_path):
    """`python -m quadsim.app.sysid.power` as a user runs it: the table, the preset written,
    and a missing file exiting 2 with one line and no traceback."""
    import subprocess
    import sys

    out = tmp_path / "p.toml"
    r = subprocess.run([sys.executable, "-m", "quadsim.app.sysid.power", "--write", str(out)],
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    assert r.returncode == 0 and "internal resistance" in r.stdout and out.exists()
    assert pw.load_power(out).r_internal > 0
    r = subprocess.run([sys.executable, "-m", "quadsim.app.sysid.power", "--files", "/no.csv",
                        "/no2.csv"], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert r.returncode == 2 and "Traceback" not in r.stderr and "/no.csv" in r.stderr


def _fly_step(power, charge, compiled=None):
    import warnings

    from quadsim.loop.brain import Sensors
    from quadsim.loop.control import control, load_gains
    from quadsim.loop.flight import fly
    from quadsim.loop.trajectories import Step

    sim = Simulator("cf2x_L250", n=2, dt=1 / 500, backend="native", dtype="float64")
    sim.reset(pos=np.array([0.0, 0.0, 1.0]))
    gains = load_gains("cf2x_L250_geometric", drone=sim.drone, dt=sim.dt)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fly(sim, Step(start=(0, 0, 1.0), end=(0, 0, 2.0), t_step=0.5), control, gains,
                   duration=2.5, sensors=Sensors(power=power, charge=charge),
                   compiled=compiled)  # fmt: skip


def test_the_battery_in_the_loop_caps_the_rotors_as_it_empties():
    """A 1 m climb: on a full battery the PWM chain changes nothing (the flight equals the ideal
    supply's); on an empty one the sagging voltage cannot give the hover speed, the rotors are
    capped (saturated) and the drone sinks. Compiled and per-step loops agree."""
    ideal = _fly_step(None, 1.0)
    full_empty = _fly_step("cf21_stock", [1.0, 0.0])
    assert full_empty.meta["loop"] == "compiled"
    np.testing.assert_allclose(full_empty.log["pos"][:, 0], ideal.log["pos"][:, 0], atol=1e-9)
    sat = np.asarray(full_empty.log["saturated"], bool)
    assert not sat[:, 0].any() and sat[:, 1].mean() > 0.9
    assert full_empty.log["pos"][-1, 1, 2] < 0.5 < 1.9 < full_empty.log["pos"][-1, 0, 2]
    v = full_empty.log["battery_v"]
    assert v[:, 1].max() < 3.0 < v[:, 0].min()  # the empty battery sags below the cut-off
    # the charge falls by the integrated current
    q, i = full_empty.log["battery_charge"][:, 0], full_empty.log["battery_i"][:, 0]
    used = np.sum(i[:-1]) * 0.002 / 3600 / 0.25
    np.testing.assert_allclose(q[0] - q[-1], used, rtol=0.02)
    python = _fly_step("cf21_stock", [1.0, 0.0], compiled=False)
    for key in ("pos", "battery_v", "battery_charge", "cmd_rpm"):
        np.testing.assert_allclose(python.log[key], full_empty.log[key], rtol=1e-9, atol=1e-9)


def test_scenario_pwm_command_logs_the_battery_and_the_energy(tmp_path):
    """`sim.command = "pwm"` from a scenario file: battery columns in the log, `power` in the
    summary (energy = mean power x time), bad values exit 2 naming the key."""
    import json
    import subprocess
    import sys

    import pyarrow.parquet as pq

    f = tmp_path / "s.toml"
    f.write_text('duration = 2.0\nn = 2\n[sim]\ncommand = "pwm"\nbattery_charge = 0.5\n'
                 '[trajectory]\nkind = "circle"\n')  # fmt: skip
    r = subprocess.run([sys.executable, "-m", "quadsim.app.cli", "fly", str(f), "--out",
                        str(tmp_path / "o"), "--no-plots"], capture_output=True, text=True,
                       timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr
    s = json.loads((tmp_path / "o" / "summary.json").read_text())["power"]
    assert s["charge_start"] == pytest.approx(0.5, abs=1e-4) and s["charge_end"] < 0.5
    assert s["energy_j_per_drone"] == pytest.approx(s["mean_power_w"] * 2.0, rel=1e-9)
    assert 6 < s["mean_power_w"] < 12 and 4 * 60 < s["hover_endurance_s"] < 8 * 60
    cols = pq.read_schema(tmp_path / "o" / "trajectory.parquet").names
    assert {"battery_v", "battery_i", "battery_p", "battery_charge"} <= set(cols)
    for bad, key in (('power = "nope"', "sim.power"), ("battery_charge = 1.5",
                                                        "sim.battery_charge")):  # fmt: skip
        g = tmp_path / "bad.toml"
        g.write_text(f'duration = 1.0\n[sim]\ncommand = "pwm"\n{bad}\n')
        r = subprocess.run([sys.executable, "-m", "quadsim.app.cli", "fly", str(g), "--out",
                            str(tmp_path / "b")], capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and key in r.stderr and "line 4" in r.stderr
        assert "Traceback" not in r.stderr


@pytest.mark.parametrize("backend", ["numpy", "native"])
def test_env_pwm_action_level_holds_hover_and_drains_the_battery(backend):
    """`action_level="pwm"`: the action is the firmware's PWM; the hover PWM at the present
    voltage holds the drone (it rises as the battery sags), the charge falls by the current at
    hover, a reset refills it; on the reference path and on the compiled env step."""
    import warnings

    from quadsim.app.envs.starts import InitRanges
    from quadsim.app.envs.vector import HoverVectorEnv
    from quadsim.engines.native import available

    if backend == "native" and not available():
        pytest.skip("native backend not available (no C compiler or CasADi)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = HoverVectorEnv(num_envs=2, action_level="pwm", init=InitRanges(0, 0, 0, 0, 0),
                             action_options={"battery_charge": 0.6}, backend=backend,
                             dtype="float64")  # fmt: skip
    core = env.core
    assert (core.compiled is not None) == (backend == "native"), core.compiled_reason
    env.reset(seed=0)
    P = core.level.power
    h = envelope(core.params).hover_rpm
    z0 = np.asarray(env.sim.state.pos)[:, 2].copy()
    pwms = []
    for _ in range(200):  # 2 s
        charge, volts = core.battery
        pwm = (h - P.rpm_coef[0]) / P.rpm_coef[1] / volts * pw.PWM_FULL
        pwms.append(pwm[0])
        _, _, term, trunc, info = env.step(np.repeat((2 * pwm / pw.PWM_FULL - 1)[:, None], 4, 1))
        assert not (term.any() or trunc.any())
    np.testing.assert_allclose(np.asarray(env.sim.state.pos)[:, 2], z0, atol=5e-3)
    assert pwms[-1] > pwms[0]  # the voltage sags: the same speed needs more PWM
    hover_p = float(pw.electrical_power(np.full(4, h), P))
    _, i = pw.battery_state(np.array(0.6), np.array(hover_p), P)
    charge, volts = core.battery
    np.testing.assert_allclose(0.6 - charge, 2.0 * i / 3600 / P.capacity, rtol=0.01)
    np.testing.assert_allclose(info["battery_v"], volts)
    env.reset(seed=1)
    np.testing.assert_allclose(core.battery[0], 0.6)
    assert np.all(core.level.command(np.full((2, 4), -1.0)) == 0)  # PWM 0: the motors stand still
    with pytest.raises(ValueError, match="battery_charge"):
        HoverVectorEnv(num_envs=1, action_level="pwm", action_options={"battery_charge": 2.0})
