"""The closed loop's per-step function (quadsim.loop.brain): rates as whole numbers of steps,
validated once; the controller and the sensors at their own periods on every loop of fly."""

from __future__ import annotations

import numpy as np
import pytest

from quadsim.engines import native
from quadsim.engines.sim import Simulator
from quadsim.loop.brain import Periods, Sensors, checked_sensors, loop_periods
from quadsim.loop.control import control, load_gains
from quadsim.loop.flight import fly
from quadsim.loop.parts.rangefinder import Rangefinder
from quadsim.loop.parts.standard import Imu, Mocap
from quadsim.loop.trajectories import Circle, Hover
from quadsim.physics.params import load_params
from quadsim.physics.power import load_power
from quadsim.physics.sensors import MocapParams, imu_discrete_std, load_imu

DT = 1 / 500
CIRCLE = Circle(radius=1.0, speed=1.0, center=(0.0, 0.0, 1.0))


def test_periods_are_whole_numbers_of_steps():
    g250 = load_gains("cf2x_L250_geometric", dt=2 * DT)
    imu = load_imu("bmi088")  # 1000 Hz: two samples per 500 Hz step, averaged
    mocap = MocapParams(pos_std=1e-3, att_std=0.0, latency=0.0, rate=100.0)
    p = loop_periods(DT, g250, Sensors(imu, mocap))
    assert p == Periods(control=2, imu=1, mocap=5, imu_dt=DT)
    assert loop_periods(DT, None, Sensors(imu._replace(rate=250.0))).imu_dt == pytest.approx(2 * DT)
    with pytest.raises(ValueError, match=r"controller .* not a whole number of physics steps"):
        loop_periods(DT, load_gains("cf2x_L250_geometric", dt=1.5 * DT))
    with pytest.raises(ValueError, match="controller"):  # faster than the physics: no
        loop_periods(DT, load_gains("cf2x_L250_geometric", dt=DT / 2))
    with pytest.raises(ValueError, match=r"IMU \(400 Hz\)"):
        loop_periods(DT, None, Sensors(imu._replace(rate=400.0)))
    with pytest.raises(ValueError, match="motion capture"):
        loop_periods(DT, None, Sensors(mocap=mocap._replace(rate=300.0)))


def test_fly_validates_the_rates_once_and_says_them():
    sim = Simulator("cf2x_L250", dt=DT)
    sim.reset(pos=(0.0, 0.0, 1.0))
    with pytest.raises(ValueError, match="not a whole number"):
        fly(sim, Hover(pos=(0.0, 0.0, 1.0)), control,
            load_gains("cf2x_L250_geometric", dt=0.003), duration=0.01)  # fmt: skip
    res = fly(sim, Hover(pos=(0.0, 0.0, 1.0)), control,
              load_gains("cf2x_L250_geometric", dt=4 * DT), duration=0.01,
              sensors=Sensors(load_imu("bmi088")._replace(rate=250.0)))  # fmt: skip
    assert res.meta["rates_hz"] == pytest.approx({"physics": 500.0, "control": 125.0,
                                                   "imu": 250.0})  # fmt: skip


def test_sensors_come_as_one_collection_a_record_or_a_list_of_parts():
    imu = load_imu("bmi088")._replace(rate=250.0)
    mocap = MocapParams(pos_std=1e-3, att_std=1e-2, latency=3 * DT, rate=100.0)
    rf = Rangefinder()
    got = checked_sensors([Imu(imu), rf, Mocap(mocap)])  # built-ins to their fields, in any order
    assert got == Sensors(imu=imu, mocap=mocap, parts=(rf,))
    assert checked_sensors(None) == Sensors() and checked_sensors(()) == Sensors()
    power = checked_sensors(Sensors(power="cf21_stock")).power  # a preset name is loaded
    for got_v, want_v in zip(power, load_power("cf21_stock"), strict=True):
        np.testing.assert_array_equal(got_v, want_v)
    for bad, msg in (([Imu(imu), Imu(imu)], "two imu parts"),
                     ([rf, Rangefinder()], "share a name"),
                     ([Imu(imu), Rangefinder("imu")], "share a name"),  # a part named like one
                     ([rf, "sonar"], "'sonar' is not a sensor part"),
                     ("bmi088", "expected a Sensors record or a collection"),
                     (Sensors(parts=(object(),)), "is not a sensor part")):  # fmt: skip
        with pytest.raises(ValueError, match=msg):
            checked_sensors(bad)
    sim = Simulator("cf2x_L250", dt=DT)
    sim.reset(pos=(0.0, 0.0, 1.0))
    with pytest.raises(ValueError, match="two imu parts"):
        fly(sim, Hover(pos=(0.0, 0.0, 1.0)), control, load_gains("cf2x_L250_geometric", dt=DT),
            duration=0.01, sensors=[Imu(imu), Imu(imu)])  # fmt: skip
    # the list and the record fly the same flight, sample for sample
    a = _flight("numpy", False, steps=40, sensors=[Mocap(mocap), Imu(imu)]).log
    b = _flight("numpy", False, steps=40).log
    assert a.keys() == b.keys() and "gyro" in a and "mocap_pos" in a
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def _flight(backend, compiled, n=3, steps=120, **kw):
    sim = Simulator("cf2x_L250", n=n, dt=DT, backend=backend, dtype="float64", seed=3)
    r0 = CIRCLE(0.0)
    sim.reset(pos=np.asarray(r0.pos) + np.linspace(-0.02, 0.02, n)[:, None], vel=r0.vel)
    gains = load_gains("cf2x_L250_geometric", dt=2 * DT)  # 250 Hz
    imu = load_imu("bmi088")._replace(rate=250.0)  # two steps
    mocap = MocapParams(pos_std=1e-3, att_std=1e-2, latency=3 * DT, rate=100.0)  # five steps
    kw.setdefault("sensors", Sensors(imu, mocap))
    return fly(sim, CIRCLE, control, gains, duration=steps * DT,
               compiled=compiled, jit=False if compiled is False else None, chunk_steps=35,
               **kw)  # fmt: skip


def test_held_between_updates():
    log = _flight("numpy", False).log
    for key, m in (("cmd_rpm", 2), ("cmd_wrench", 2), ("gyro", 2), ("accel", 2),
                   ("mocap_pos", 5)):  # fmt: skip
        v = log[key]
        steps = len(v) - 1
        held = [i for i in range(steps) if i % m]
        fresh = [i for i in range(1, steps) if i % m == 0]
        np.testing.assert_array_equal(v[held], v[[i - i % m for i in held]], err_msg=key)
        assert np.all(np.abs(v[fresh] - v[[i - 1 for i in fresh]]).max(axis=-1) > 0), key
    # the reference is evaluated every step (logged as it is)
    assert np.all(np.abs(np.diff(log["ref_pos"], axis=0)).max(axis=-1) > 0)


@pytest.mark.skipif(not native.available(), reason="needs CasADi and a C compiler")
def test_compiled_equals_python_with_periods():
    comp, py = _flight("native", None), _flight("native", False)
    assert comp.meta["loop"] == "compiled" and py.meta["loop"] == "python"
    for key, v in py.log.items():
        if v.dtype == bool:
            np.testing.assert_array_equal(comp.log[key], v, err_msg=key)
        else:
            scale = max(1.0, float(np.abs(v).max()))
            np.testing.assert_allclose(comp.log[key], v, rtol=1e-9, atol=1e-9 * scale,
                                       err_msg=key)  # fmt: skip


def test_scan_equals_python_with_periods():
    pytest.importorskip("jax")
    scan, py = _flight("jax", None, steps=60), _flight("jax", False, steps=60)
    assert scan.meta["loop"] == "scan" and py.meta["loop"] == "python"
    for key, v in py.log.items():
        if v.dtype == bool:
            np.testing.assert_array_equal(scan.log[key], v, err_msg=key)
        else:
            scale = max(1.0, float(np.abs(v).max()))
            np.testing.assert_allclose(scan.log[key], v, rtol=1e-9, atol=1e-9 * scale,
                                       err_msg=key)  # fmt: skip


def test_a_slower_imu_averages_over_its_longer_period():
    """The gyro's white noise per sample is N/sqrt(period) (a sample averages its period):
    measured within 10 % at 500 and 250 Hz, sqrt(2) quieter at 250 Hz."""
    imu = load_imu("bmi088")
    stds = []
    for rate in (500.0, 250.0):
        sim = Simulator("cf2x_L250", n=64, dt=DT, seed=1)
        sim.reset(pos=(0.0, 0.0, 1.0))
        p = imu._replace(rate=rate, gyro_bias_walk=0.0, gyro_bias_std=0.0)
        res = fly(sim, Hover(pos=(0.0, 0.0, 1.0)), control,
                  load_gains("cf2x_L250_geometric", dt=DT), duration=0.4,
                  sensors=[Imu(p)])  # fmt: skip
        m = round(1 / (rate * DT))
        g = res.log["gyro"][::m] - res.log["ang_vel"][::m]  # one per sample
        want = imu_discrete_std(p, 1 / rate)["gyro"]
        stds.append((g.std(axis=(0, 1)), want))
    for got, want in stds:
        np.testing.assert_allclose(got, want, rtol=0.1)
    assert stds[1][1][0] / stds[0][1][0] == pytest.approx(1 / np.sqrt(2), rel=1e-9)


def test_the_estimator_slot_feeds_the_controller():
    """The controller reads what the estimator gives (default: the truth), which sees the
    step's sensor readings; the slot the estimation issue fills."""
    from quadsim.loop.brain import brain_init, make_brain
    from quadsim.physics.rotors import make_allocator

    gains = load_gains("cf2x_L250_geometric", dt=DT)
    alloc = make_allocator(load_params("cf2x_L250"))
    imu = load_imu("bmi088")
    n, hover = 3, Hover(pos=(0.0, 0.0, 1.0))
    pos = np.array([[0.0, 0.0, 1.0]] * n)
    quat, vel, w = np.array([[0.0, 0.0, 0.0, 1.0]] * n), np.zeros((n, 3)), np.zeros((n, 3))
    seen = {}

    def biased(k, truth, readings, est):
        seen.update(readings)
        return truth._replace(pos=truth.pos + 0.1), est

    def run(estimator, p):
        brain = make_brain(hover, control, gains, alloc, Sensors(imu), np.array([0, 0, -9.81]),
                           DT, estimator=estimator)  # fmt: skip
        bs = brain_init(n, _pid_zero(gains, n), p, quat, vel,
                        sens=Sensors(imu), dt=DT, periods=Periods())  # fmt: skip
        return brain(0, p, quat, vel, w, np.zeros((n, 3)), bs, np.zeros((n, 12)))[0]

    truth, est = run(None, pos), run(biased, pos)
    assert np.abs(truth["cmd_wrench"] - est["cmd_wrench"]).max() > 1e-3
    np.testing.assert_allclose(est["cmd_wrench"], run(None, pos + 0.1)["cmd_wrench"], rtol=1e-12)
    np.testing.assert_array_equal(est["gyro"], truth["gyro"])  # the sensors read the truth
    assert set(seen) == {"gyro", "accel", "imu_fresh"}


def _pid_zero(gains, n):
    from quadsim.loop.control import init_state

    return init_state(gains, (n,))


def test_a_period_too_long_to_count_is_refused():
    """Issue 40, item 11: a rangefinder at 1e-9 Hz was accepted (one reading, at the start)."""
    why = r"sensor tof \(1e-09 Hz\) has a period of 1e\+09 s, 500,000,000,000 physics steps"
    with pytest.raises(ValueError, match=why + "; at most 16,777,216"):
        loop_periods(0.002, None, Sensors(parts=(Rangefinder("tof", rate=1e-9),)))
    slow = Rangefinder("tof", rate=500.0 / 2**24)  # the longest period that counts exactly
    assert loop_periods(0.002, None, Sensors(parts=(slow,))).parts == (2**24,)
