"""Assembly of a validated scenario into the objects of a flight, and the files it reads.

:func:`build` turns a :class:`~quadsim.app.scenario.validate.Scenario` into an
:class:`Assembly` (simulator, reference, controller, sensors, estimator, battery, run metadata),
reusing what validation prepared; :func:`fly_assembly` flies it
(:func:`quadsim.loop.flight.fly`); :func:`resolved_files` lists the files a scenario reads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ...engines.sim import Simulator, Wind
from ...loop import flight
from ...loop.brain import Sensors, loop_periods
from ...loop.estimation.complementary import ComplementaryGains
from ...loop.estimation.estimators import (
    ComplementaryEstimator,
    EkfEstimator,
    default_init_std,
)
from ...physics.envelope import envelope
from ...physics.power import hover_endurance, list_power_presets, load_power
from ...physics.rotation import from_euler
from ...physics.sensors import (
    check_gnss_params,
    gnss_delay_steps,
    list_baro_presets,
    list_gnss_presets,
    load_baro,
    load_gnss,
    load_imu,
)
from ...physics.wind import dryden_preset
from .locations import failer
from .presets import gains_name, is_path, load_named, mocap_params
from .validate import Scenario, prepare

__all__ = ["Assembly", "build", "fly_assembly", "resolved_files"]


class Assembly(NamedTuple):
    """A scenario assembled into the objects of a flight (what :func:`build` returns).

    Attributes:
        sim: The :class:`~quadsim.engines.sim.Simulator`, reset to the initial states.
        trajectory: The reference ``t -> Reference``.
        control: The controller function.
        gains: Its gains.
        ref_offset: Per-drone reference offsets ``(n, 3)`` [m] (formation).
        duration: Flight time [s] (``duration`` of the file).
        output: The ``[output]`` section.
        seed: Key of the sensor noise and the turbulence (the scenario's ``seed``,
            :mod:`quadsim.physics.noise`).
        drone: The nominal :class:`~quadsim.physics.params.Params` (the controller's model).
        meta: The run's metadata (:func:`quadsim.loop.flight.run_meta`): drone, time step, duration
            in whole steps, rotors, backend, model, integrator, dtype, scenario, name,
            controller, trajectory, seed and output options (``animate``: ``None``).
        estimator: What the controller reads instead of the truth
            (:mod:`quadsim.loop.estimation.estimators`), or ``None``.
        sensors: The loop's :class:`~quadsim.loop.brain.Sensors`: the IMU, motion capture,
            barometer, GNSS (their parameter records, or ``None``), the power chain
            (``sim.command = "pwm"``), the battery's charge at the start and the sensor parts of
            the ``[sensors.<name>]`` tables; each is also an attribute of its own (``imu``,
            ``mocap``, ``baro``, ``gnss``, ``power``, ``battery_charge``, ``parts``).
    """

    sim: Any
    trajectory: Any
    control: Any
    gains: Any
    ref_offset: np.ndarray
    duration: float
    output: dict
    seed: int
    drone: Any
    meta: dict
    estimator: Any = None
    sensors: Sensors = Sensors()

    imu = property(lambda self: self.sensors.imu)
    mocap = property(lambda self: self.sensors.mocap)
    baro = property(lambda self: self.sensors.baro)
    gnss = property(lambda self: self.sensors.gnss)
    power = property(lambda self: self.sensors.power)
    battery_charge = property(lambda self: self.sensors.charge)
    parts = property(lambda self: self.sensors.parts)


def build(sc: Scenario) -> Assembly:
    """Assemble a validated scenario into the objects of a flight (:func:`quadsim.loop.flight.fly`).

    Reuses what :func:`~quadsim.app.scenario.load_scenario` computed (``sc.prepared``: drone,
    trajectory, world, the random draws, gains); draws nothing new but the simulator's and
    sensors' generators.
    """
    v = sc.values
    top, sm = v[""], v["sim"]
    seed, n = top["seed"], top["n"]
    prep = sc.prepared or prepare(v, failer(sc.source, sc.text))
    init = {key: _copy(val) for key, val in prep.initial.items()}  # the sim must not alias them

    sim = Simulator(
        prep.drone,
        n=n,
        dt=sm["dt"],
        model=sm["model"],
        integrator=sm["integrator"],
        backend=sm["backend"],
        dtype=sm["dtype"],
        seed=seed,
        world=prep.world,
        rotor_dynamics=sm["rotor_dynamics"],
        params=init["per_drone"] or None,
        wind=_wind(v["wind"]),
    )
    rpy = init["rpy"]
    attitude = rpy if sm["model"] == "euler_zyx" else from_euler(rpy)
    ang_vel = init.get("ang_vel", v["initial"]["ang_vel"])  # per drone from a sweep axis
    sim.reset(pos=init["pos"], attitude=attitude, vel=init["vel"], ang_vel=ang_vel)

    imu = mocap = None
    sv = v["sensors"]
    if sv["imu"] != "none":
        imu = load_imu(sv["imu"])  # checked by load_scenario
    if sv["mocap_pos_std"] is not None:
        mocap = mocap_params(sv, sm["dt"])
    baro, gnss = _baro_gnss(sv, failer(sc.source, sc.text))
    power = _power(sm, prep.drone, failer(sc.source, sc.text))
    estimator = _estimator(v["estimator"], imu, mocap, prep.drone, sm["dt"], prep.gains, baro,
                           gnss)  # fmt: skip
    meta = _meta(sc, sim, power, prep.drone)
    control = prep.control
    return Assembly(
        sim=sim,
        trajectory=prep.trajectory,
        control=control,
        gains=prep.gains,
        ref_offset=init["offset"],
        duration=top["duration"],
        output=v["output"],
        seed=seed,
        drone=prep.drone,
        meta=meta,
        estimator=estimator,
        sensors=Sensors(imu, mocap, baro, gnss, power, sm["battery_charge"], prep.parts),
    )


def _wind(wv: dict) -> Any:
    """The :class:`~quadsim.engines.sim.Wind` of ``[wind]``, or ``None`` for still air."""
    if not (any(wv["mean"]) or wv["turbulence"] != "none"):
        return None
    turb = None
    if wv["turbulence"] != "none":
        turb = dryden_preset(wv["turbulence"], wv["altitude"], wv["airspeed"])
    return Wind(mean=tuple(wv["mean"]), turbulence=turb)


def _meta(sc: Scenario, sim: Any, power: Any, drone: Any) -> dict:
    """The run's metadata (:func:`quadsim.loop.flight.run_meta`) of an assembled scenario."""
    v = sc.values
    top, sm, o = v[""], v["sim"], v["output"]
    return flight.run_meta(
        sim,
        max(1, round(top["duration"] / sim.dt)) * sim.dt,
        {
            "model": sm["model"],
            "integrator": sm["integrator"],
            "dtype": sm["dtype"],
            "scenario": sc.source,
            "name": top["name"] or Path(sc.source).stem,
            "controller": v["controller"]["kind"],
            "estimator": v["estimator"]["kind"],
            "command": sm["command"],
            **({"power": power.name, "hover_endurance_s": _hover_endurance(power, drone)}
               if power is not None else {}),
            "trajectory": v["trajectory"]["kind"],
            "seed": top["seed"],
            "output": {
                "csv": o["csv"],
                "plots": o["plots"],
                "animate": None,
                "settle": o["settle"],
                "plot_drones": o["plot_drones"],
            },
        },
    )


def fly_assembly(objs: Assembly, **kwargs: Any) -> Any:
    """:func:`quadsim.loop.flight.fly` of an assembled scenario: its simulator, reference,
    controller, offsets, sensors, estimator, battery and seed; ``kwargs`` are ``fly``'s other
    arguments (``log_every``, ``chunk_steps``, ``on_chunk``, ``keep_log``, ``meta``, ...)."""  # noqa: D205, D209
    return flight.fly(objs.sim, objs.trajectory, objs.control, objs.gains,
                      duration=objs.duration, ref_offset=objs.ref_offset, sensors=objs.sensors,
                      estimator=objs.estimator, seed=objs.seed, **kwargs)  # fmt: skip


def resolved_files(sc: Scenario) -> dict[str, str]:
    """The files a validated scenario reads besides itself: ``{"section.key": path}``.

    Every key that names a file by path and is used: ``drone.preset``, ``sim.power`` (with
    ``sim.command = "pwm"``), ``controller.gains`` (or ``controller.path`` for a policy),
    ``sensors.imu``, ``sensors.baro`` and ``sensors.gnss``. Paths are as written (a relative one
    is relative to the directory the scenario was validated in); presets named by name are
    packaged with quadsim and not listed.
    """
    v = sc.values
    named = [("drone", "preset"), ("sensors", "imu"), ("sensors", "baro"), ("sensors", "gnss")]
    if v["sim"]["command"] == "pwm":
        named.append(("sim", "power"))
    out = {f"{s}.{k}": v[s][k] for s, k in named if v[s][k] != "none" and is_path(v[s][k])}
    if v["controller"]["kind"] == "policy":
        out["controller.path"] = v["controller"]["path"]
    elif is_path(gains_name(v)):
        out["controller.gains"] = gains_name(v)
    return out


def _power(sm: dict, drone: Any, fail: Any) -> Any:
    """The power chain of a ``[sim]`` section (``sim.command = "pwm"``), or ``None``."""
    if sm["command"] != "pwm":
        return None
    if sm["battery_charge"] > 1:
        raise fail("sim", "battery_charge", f"must be in 0..1; got {sm['battery_charge']}")
    return load_named(fail, "sim", "power", sm["power"], load_power, list_power_presets(),
                      "power preset", "available")  # fmt: skip


def _hover_endurance(power: Any, drone: Any) -> float:
    """Seconds of hover on a full battery (:func:`quadsim.physics.power.hover_endurance`)."""
    return hover_endurance(power, envelope(drone).hover_rpm, drone.mixing_matrix.shape[1])


def _baro_gnss(sv: dict, fail: Any) -> tuple[Any, Any]:
    """The barometer and GNSS of a ``[sensors]`` section (``None`` where absent); a preset or
    file that does not load names its key."""  # noqa: D205, D209
    out = []
    for key, load, names, what in (("baro", load_baro, list_baro_presets, "barometer preset"),
                                   ("gnss", load_gnss, list_gnss_presets, "GNSS preset")):
        name = sv[key]
        out.append(None if name == "none" else
                   load_named(fail, "sensors", key, name, load, names(), what, "available",
                              none=True))  # fmt: skip
    gnss = out[1]
    if gnss is not None and sv["gnss_pos_std"] is not None:
        sd = sv["gnss_pos_std"]
        gnss = gnss._replace(pos_std_h=sd, pos_std_v=sd, gm_std_h=0.0, gm_std_v=0.0)
    if gnss is not None and sv["gnss_latency"] is not None:
        gnss = gnss._replace(latency=sv["gnss_latency"])
    if gnss is not None:
        try:
            gnss_delay_steps(check_gnss_params(gnss))
        except ValueError as e:
            raise fail("sensors", "gnss_latency" if sv["gnss_latency"] is not None else "gnss",
                       str(e)) from None  # fmt: skip
    return out[0], gnss


def _estimator(ev: dict, imu: Any, mocap: Any, drone: Any, dt: float, gains: Any,
               baro: Any = None, gnss: Any = None) -> Any:  # fmt: skip
    """The estimator of an ``[estimator]`` section (``None`` for the truth); its noise comes
    from the sensors' presets."""  # noqa: D205, D209
    kind = ev["kind"]
    if kind == "truth":
        return None
    periods = loop_periods(dt, gains, Sensors(imu, mocap, baro, gnss))
    if kind == "complementary":
        fix = periods.mocap if mocap is not None else periods.gnss
        g = ComplementaryGains(k_p=ev["k_p"], k_i=ev["k_i"], meas_period=float(fix) * dt)
        return ComplementaryEstimator(imu, mocap, drone.gravity_vec, dt, periods, gains=g,
                                      gnss=gnss)  # fmt: skip
    std = default_init_std(imu, ev["init_pos_std"], ev["init_vel_std"], ev["init_att_std"])
    return EkfEstimator(imu, mocap, drone.gravity_vec, dt, periods, init_std=std,
                        latency_compensation=ev["latency_compensation"],
                        mocap_attitude=ev["mocap_attitude"], gnss=gnss, baro=baro,
                        gyro_bias_noise=ev["gyro_bias_noise"],
                        accel_bias_noise=ev["accel_bias_noise"])  # fmt: skip


def _copy(x: Any) -> Any:
    """A copy of the arrays in ``x`` (an array or a dict of arrays)."""
    if isinstance(x, dict):
        return {k: np.array(a) for k, a in x.items()}
    return np.array(x)
