"""The replay's rotational dynamics (issue 29, item 3; ``docs/rotational_dynamics.md``).

The replay's torque is the simulator's for the same rotor speeds (same motor order, arm and
spin conventions), the Crazyflie's motor order is Bitcraze's, and on the repository's three
NanoBench flights ``benchmarks/rotational_suspects.py`` (imported by path) pins what explains
the 8-20 times too large predicted angular acceleration: the prediction's trim below 1 Hz, the
rotors' lag and an inertia 1.4-1.8 times the preset's; with those fitted on the other flights the
held-out roll and pitch R² reach the issue's 0.5. The protocol's own
(``quadsim.app.sysid.replay_rotation``, what ``quadsim replay`` reports) gives the same figures;
its trim removal all but cancels a slow moment added to the PWM, and its nominal terms fit
nothing.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from quadsim.app.sysid import replay as rp
from quadsim.app.sysid import replay_cli
from quadsim.app.sysid import replay_protocol as pr
from quadsim.app.sysid import replay_rotation as rr
from quadsim.app.sysid import thrust_stand as ts
from quadsim.physics import rotors
from quadsim.physics.params import load_params

ROOT = Path(__file__).resolve().parents[2]
FLIGHTS = sorted((ROOT / "data" / "nanobench").glob("*.csv.gz"))
UNIT_MOTOR = ts.RpmFit("linear", np.array([0.0, 1.0, 0.0]), 0.0, 0.0, 0)  # ω = pwm/65535 vbat


def _suspects() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "rotational_suspects", ROOT / "benchmarks" / "rotational_suspects.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("preset", ["cf2x_L250", "cf21B_500", "generic_x", "f450_plus"])
def test_the_replays_torque_is_the_simulators(preset):
    """Same rotor speeds, same thrust and torque as ``quadsim.physics.rotors`` (motor order,
    arm length and spin as the simulator flies them)."""
    p = load_params(preset)
    rpm = np.random.default_rng(0).uniform(8000.0, 20000.0, size=(6, len(p.rotor_spin)))
    w, thrust, tau = rp.rotor_forces(p, UNIT_MOTOR, rpm, np.full(6, 65535.0))
    np.testing.assert_allclose(w, rpm, rtol=1e-12)
    wrench = np.asarray(rotors.wrench_from_rpm(rpm, p))
    np.testing.assert_allclose(thrust, wrench[:, 0], rtol=1e-12)
    np.testing.assert_allclose(tau, wrench[:, 1:], rtol=1e-9, atol=1e-15)


def test_the_crazyflie_motor_order_is_bitcrazes():
    """Logged m1..m4 are front-right, back-right, back-left, front-left (arms of 32.5 mm on
    each axis): more thrust on the left (m3, m4) rolls right side down (+x in FLU), more on the
    front (m1, m4) pitches nose up (-y), and m1, m3 turn counter-clockwise (their drag yaws the
    body clockwise, -z)."""
    p = load_params("cf2x_L250")
    base = np.full((1, 4), 15000.0)
    J = np.diag(p.J)
    for motors, axis, sign in (((2, 3), 0, 1.0), ((0, 3), 1, -1.0), ((0, 2), 2, -1.0)):
        up = base.copy()
        up[0, list(motors)] += 1000.0
        _, _, tau = rp.rotor_forces(p, UNIT_MOTOR, up, np.full(1, 65535.0))
        acc = rp.euler_ang_acc(p, tau, np.zeros((1, 3)))[0]
        assert np.sign(acc[axis]) == sign, (motors, acc)
        others = [i for i in range(3) if i != axis]
        assert np.all(np.abs(acc[others]) < 1e-9 * abs(acc[axis]) / J[axis] * J[others])
    assert float(p.L) == pytest.approx(0.046 / np.sqrt(2.0), rel=0.01)


@pytest.fixture(scope="module")
def suspects():
    mod = _suspects()
    motor = rp.fit_motor()
    runs = [ts.load_stand(f) for f in ts.default_files()]
    rpm = np.concatenate([r["rpm_each"] for r in runs])
    pwm, vbat = (np.concatenate([r[k] for r in runs]) for k in ("pwm", "vbat"))
    each = [ts.fit_pwm_voltage_to_rpm(pwm, vbat, rpm[:, i], "linear") for i in range(4)]
    flights = [mod.prepare(f, motor, each, mod.PARAMS) for f in FLIGHTS]
    return mod, motor, flights


def test_tool_checks_on_the_flights(suspects):
    """The Bitcraze order correlates (0.77-0.88 measured); a mirrored one does not on the
    mirrored axis (-0.30 to -0.11); the logged PWM is after the battery compensation (0.997-1.003
    of the firmware's compensated command, 0.94-1.02 of the command itself)."""
    mod, motor, flights = suspects
    for f in flights:
        order = mod._motor_order(f, mod.PARAMS, motor)
        bitcraze = order["Bitcraze (M1 FR, M2 BR, M3 BL, M4 FL)"]
        assert min(bitcraze[:2]) > 0.7, f["name"]
        assert order["mirrored left-right"][0] < 0.1, f["name"]
        assert order["mirrored front-back"][1] < 0.1, f["name"]
        _, post = mod._compensation(f)
        assert post == pytest.approx(1.0, abs=0.01), f["name"]


def test_what_explains_the_too_large_prediction(suspects):
    """64-81 % of the predicted variance lies below 1 Hz against 2-9 % of the measured one; in
    2-7 Hz the two are coherent (0.79-0.92) with a gain of 0.29-0.38 and a phase near -80 deg."""
    mod, _, flights = suspects
    for f in flights:
        for low_pred, low_meas, coh, gain, phase in mod.spectrum(f):
            assert low_pred > 0.55 and low_meas < 0.15, f["name"]
            assert coh > 0.7 and 0.2 < gain < 0.5 and -110 < phase < -50, f["name"]


def test_held_out_roll_and_pitch_meet_the_target(suspects):
    """Leave one flight out (lag, delay, trim cut-off and gains from the other two): R² 0.62-0.79
    measured, >= 0.5 on both axes of every flight. The gain (preset's over effective inertia)
    trades off against the rotor lag (R² is flat over 20-150 ms); it stays within 0.3-1.5.
    Without the trim removed the same model stays below 0.3."""
    mod, _, flights = suspects
    trimmed = mod.held_out(flights, mod.TRIM_HZ, drag=False)
    plain = mod.held_out(flights, (None,), drag=False)
    for name, (r2, (tc, _, _), gains) in trimmed.items():
        assert min(r2) >= 0.5, name
        assert tc >= 0.02, name
        assert all(0.3 < g < 1.5 for g in gains), name
        assert max(plain[name][0]) < 0.3, name


# --------------------------------------------------------------------------- the protocol's

DATA = Path(__file__).resolve().parents[2] / "data" / "nanobench"
LOGS = {k: DATA / f"{k}_{rest}.csv.gz"
        for k, rest in (("B2", "circle_medium_rep1"), ("B3", "figure8_medium_rep1"),
                        ("B9", "trefoil_slow_rep1"))}  # fmt: skip
PRESET = "cf21_nanobench"
# held out over these three flights (terms fitted on the other two): roll, pitch
HELD = {"B2": (0.743, 0.661), "B3": (0.774, 0.767), "B9": (0.790, 0.615)}
# nothing fitted (the preset's rotor lag, 68 ms, and inertia; trim below 2 Hz)
NOMINAL = {"B2": (0.656, 0.618), "B3": (0.643, 0.668), "B9": (0.790, 0.414)}


@pytest.fixture(scope="module")
def motor():
    return rp.fit_motor()


@pytest.fixture(scope="module")
def params():
    return load_params(PRESET)


@pytest.fixture(scope="module")
def flights():
    return {k: rp.load_log(p) for k, p in LOGS.items()}


def test_the_protocols_held_out_roll_and_pitch(flights, params, motor):
    """``replay_rotation.leave_one_out_rotation`` (what ``quadsim replay`` reports): the
    script's L3 figures, >= 0.5 on both axes of every flight."""
    rows = rr.leave_one_out_rotation(list(flights.values()), params, motor, [True] * 3)
    for (k, _), r in zip(flights.items(), rows, strict=True):
        got = r["ang_acc_trimmed_r2"]
        assert got == pytest.approx(HELD[k], abs=0.01), k
        assert min(got) >= 0.5, k  # issue 29's target
        t = r["rotation_terms"]
        assert 0.0 < t["time_constant"] <= 0.15 and 0.5 < min(t["gain"]) < 1.5, k
    # a flight is never trained on itself: with B9 alone to train, B2 scores otherwise
    solo = rr.leave_one_out_rotation([flights["B2"], flights["B9"]], params, motor, [True, True])
    assert solo[0]["ang_acc_trimmed_r2"] != rows[0]["ang_acc_trimmed_r2"]


def test_nominal_terms_fit_nothing(flights, params, motor):
    terms = rr.RotationTerms.nominal(pr.ThrustTerms.of(params).time_constant)
    assert terms.time_constant == pytest.approx(1.0 / 14.760)
    assert (terms.delay, terms.trim_hz, terms.gain, terms.offset) == (0, 2.0, (1, 1), (0, 0))
    for k, f in flights.items():
        got = rr.score_rotation(f, params, motor, terms)["ang_acc_trimmed_r2"]
        assert got == pytest.approx(NOMINAL[k], abs=0.01), k


def test_a_slow_moment_on_the_pwm_is_removed_as_trim(flights, params, motor):
    """A 0.1-Hz roll moment added to the PWM (right motors up, left down, 3000 counts) moves
    the untrimmed prediction by more than its own RMS; the trimmed one by under 2 % of that."""
    f = flights["B3"]
    t, keep = np.asarray(f["t"]), rp.airborne(f)
    pwm = np.array(f["pwm"], dtype=np.float64)
    d = 3000.0 * np.sin(2 * np.pi * 0.1 * t)[:, None]
    slow = dict(f, pwm=np.where(pwm > 0, pwm + np.hstack([d, d, -d, -d]), 0.0))

    def raw(fl):
        tau = rp.rotor_forces(params, motor, fl["pwm"], fl["vbat"], 0.08, 0.01)[2]
        return rp.lowpass(rp.euler_ang_acc(params, tau, np.asarray(fl["gyro"])), 0.01)[keep, 0]

    moved_raw = np.sqrt(np.mean((raw(slow) - raw(f)) ** 2))
    a, b = (rr.trimmed_prediction(x, params, motor, 0.08, 0, 2.0)[keep, 0] for x in (f, slow))
    moved = np.sqrt(np.mean((a - b) ** 2))
    assert moved_raw > np.sqrt(np.mean(raw(f) ** 2))
    assert moved < 0.02 * moved_raw


def test_replay_json_reports_roll_and_pitch(tmp_path, capsys):
    out = tmp_path / "r.json"
    logs = [str(p) for p in LOGS.values()]
    assert replay_cli.main([*logs, "--preset", PRESET, "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    for r, k in zip(doc["held_out"], LOGS, strict=True):
        assert r["ang_acc_trimmed_r2"] == pytest.approx(HELD[k], abs=0.01)
        assert set(r["rotation_terms"]) >= {"time_constant", "delay_s", "trim_hz", "gain"}
        assert len(r["ang_acc_r2"]) == 3  # the replay's own, as it is
    for r, k in zip(doc["flights"], LOGS, strict=True):
        assert r["ang_acc_trimmed_r2"] == pytest.approx(NOMINAL[k], abs=0.01)
    assert "wx R2" in capsys.readouterr().out
