"""The replay's rotational dynamics (issue 29, item 3; ``docs/rotational_dynamics.md``).

The replay's torque is the simulator's for the same rotor speeds (same motor order, arm and
spin conventions), the Crazyflie's motor order is Bitcraze's, and on the repository's three
NanoBench flights ``benchmarks/rotational_suspects.py`` (imported by path) pins what explains
the 8-20 times too large predicted angular acceleration: the prediction's trim below 1 Hz, the
rotors' lag and an inertia 1.4-1.8 times the preset's; with those fitted on the other flights the
held-out roll and pitch R² reach the issue's 0.5.
The protocol's own (``quadsim.app.sysid.replay_rotation``, what ``quadsim replay`` reports) is
tested in ``tests/app/test_replay_protocol.py``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from quadsim.app.sysid import replay as rp
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
