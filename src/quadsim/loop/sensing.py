r"""The loop's sensors at one step: the built-in ones and the sensor parts, each at its period.

:func:`make_sense` builds the function :func:`quadsim.loop.brain.make_brain` calls first at every
step: from the true state ``x_k`` it gives the readings of every sensor of a
:class:`~quadsim.loop.brain.Sensors` record, a reading taken where ``j ≡ 0 (mod m)`` (``m`` its
period in physics steps, ``j`` the steps since the flight's start) and held in between:

* IMU: ``a = (v_k - v_{last}) / (m_i dt)``, ``(ω_m, a_m, b) = imu(q_k, ω_k, a, b, z)``;
* motion capture: a delay line that moves every step, a sample every ``m_m`` steps, which a
  dropout gap may lose;
* barometer: a bias that walks every step, a sample every ``m_b`` steps;
* GNSS: a delay line and a correlated error that move every step, a fix every ``m_g`` steps;
* every sensor part (:mod:`quadsim.loop.parts`): ``(readings, state) = part.measure(k, x_k,
  state, z, ctx)``, its readings held between its samples.

``z`` holds the step's standard normals, cut into each sensor's group in the order of
:func:`quadsim.loop.brain.noise_groups`. Everything is array-API code with ``where`` for the
holds, so the function traces on CasADi and JAX.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..physics import sensors
from ..physics._array import namespace
from .parts import Context


def dropping(mocap: Any) -> bool:
    """Whether the motion capture loses samples (``dropout > 0``)."""
    return mocap is not None and float(getattr(mocap, "dropout", 0.0)) > 0.0


def due(j: Any, m: int, xp: Any) -> Any:
    """``j ≡ 0 (mod m)`` for float step counts ``j`` (exact for integers below 2^24 / 2^53)."""
    return (j - m * xp.floor(j / m)) == 0


def tree_map(fn: Any, tree: Any, *rest: Any) -> Any:
    """``fn(leaf, *leaves of rest)`` at every leaf of ``tree``, in the tree's structure.

    A tree is ``None`` (kept), a tuple or NamedTuple of trees (rebuilt as the same type), or a
    leaf (an array or number); the trees of ``rest`` have the structure of ``tree``. Leaves are
    visited depth first, left to right (the order of :func:`quadsim.loop.brain.ctrl_leaves`).
    """
    if tree is None:
        return None
    if isinstance(tree, tuple):
        items = [tree_map(fn, *parts) for parts in zip(tree, *rest, strict=True)]
        return type(tree)(*items) if hasattr(tree, "_fields") else tuple(items)
    return fn(tree, *rest)


def pick(when: Any, new: Any, old: Any, xp: Any) -> Any:
    """``new`` where ``when`` (per drone, ``(n,)``), else ``old``; over trees of arrays."""

    def leaf(a: Any, b: Any) -> Any:
        extra = len(np.shape(a)) - len(np.shape(when))
        d = xp.reshape(when, (*np.shape(when), *([1] * extra))) if extra > 0 else when
        return xp.where(d, a, b)

    return tree_map(leaf, new, old)


def sampled(m: int, j: Any, new: Any, held: Callable[[], Any], xp: Any) -> tuple[Any, Any]:
    """A sensor read every ``m`` steps: ``(fresh, values)``.

    ``fresh`` is where the sample is due (``True`` when ``m == 1``, else :func:`due` of the step
    count ``j`` ``(n,)``); ``values`` is the tree ``new`` where fresh, else ``held()`` (the
    values held since the last sample, a tree like ``new``; called only when ``m > 1``).
    """
    if not m > 1:
        return True, new
    fresh = due(j, m, xp)
    return fresh, pick(fresh, new, held(), xp)


def make_sense(sens: Any, periods: Any, g_vec: Any, dt: float, offsets: dict,
               part_at: dict, world: Any = None) -> Any:  # fmt: skip
    """The sensors' step ``sense(k, truth, bs, z) -> (out, readings, states)``.

    ``truth`` is the true :class:`~quadsim.engines.state.State` ``(n, ...)``, ``bs`` the
    :class:`~quadsim.loop.brain.BrainState`, ``z`` the normals ``(n, n_z)`` whose groups start at
    ``offsets[stream]`` (a part's at ``part_at[name]``). ``out`` holds the readings logged
    (``gyro``, ``accel``, ``mocap_pos``, ``mocap_stamp``, ``baro_alt``, ``gnss_*``,
    ``<part>_<output>``), ``readings`` what the estimator reads (those, ``mocap_quat`` and the
    ``*_fresh`` flags), ``states`` the sensors' next states by
    :class:`~quadsim.loop.brain.BrainState` field (``imu``, ``imu_vel``, ``mocap``,
    ``mocap_gap``, ``baro``, ``gnss``, ``parts``).
    """
    makers = ((_imu_step, sens.imu), (_mocap_step, sens.mocap), (_baro_step, sens.baro),
              (_gnss_step, sens.gnss))  # fmt: skip
    steps = [make(sensor, periods, g_vec, dt, offsets) for make, sensor in makers
             if sensor is not None]  # fmt: skip
    if sens.parts:
        steps.append(_parts_step(tuple(sens.parts), periods, g_vec, dt, part_at, world))

    def sense(k: Any, truth: Any, bs: Any, z: Any) -> tuple[dict, dict, dict]:
        xp = namespace(truth.quat)
        out: dict = {}
        readings: dict = {}
        new = {"imu": bs.imu, "imu_vel": bs.imu_vel, "mocap": bs.mocap, "mocap_gap": bs.mocap_gap,
               "baro": bs.baro, "gnss": bs.gnss, "parts": bs.parts}  # fmt: skip
        for step in steps:
            step(k, truth, bs, z, xp, out, readings, new)
        return out, readings, new

    return sense


def _imu_step(imu: Any, periods: Any, g_vec: Any, dt: float, offsets: dict) -> Any:
    """The IMU: the mean acceleration over its period, a sample every ``m_i`` steps, held."""
    m_i, imu_dt, at = periods.imu, periods.imu_dt or dt, offsets["imu"]

    def step(k, truth, bs, z, xp, out, readings, new):
        held = bs.held
        acc = (truth.vel - bs.imu_vel) / imu_dt
        reading, imu_new = sensors.imu_measure(truth.quat, truth.ang_vel, acc, g_vec, imu, bs.imu,
                                               imu_dt, z[..., at:at + 12])  # fmt: skip
        fresh, (gyro, accel, imu_s, imu_vel) = sampled(
            m_i, bs.j, (reading.gyro, reading.accel, imu_new, truth.vel),
            lambda: (held.gyro, held.accel, bs.imu, bs.imu_vel), xp)  # fmt: skip
        out["gyro"], out["accel"] = gyro, accel
        readings |= {"gyro": gyro, "accel": accel, "imu_fresh": fresh}
        new |= {"imu": imu_s, "imu_vel": imu_vel}

    return step


def _mocap_step(mocap: Any, periods: Any, g_vec: Any, dt: float, offsets: dict) -> Any:
    """Motion capture: a delay line every step, a sample every ``m_m`` steps, dropouts."""
    m_m, at = periods.mocap, offsets["mocap"]
    if dropping(mocap):
        c_start, c_stay = sensors.dropout_thresholds(mocap)

    def step(k, truth, bs, z, xp, out, readings, new):
        held, gap, pos = bs.held, bs.mocap_gap, truth.pos
        reading, mocap_s = sensors.mocap_measure(pos, truth.quat, mocap, bs.mocap,
                                                 z[..., at:at + 6])  # fmt: skip
        p_m, q_m, fresh = reading.pos, reading.quat, True
        stamp = k * dt - float(mocap.latency) + 0.0 * pos[..., 0]
        now = True if m_m == 1 else due(bs.j, m_m, xp)
        if gap is not None:  # a sample due may be lost (module docstring of the mocap)
            zd = z[..., at + 6]
            lost = xp.where(gap > 0.5, zd < c_stay, zd > c_start)
            gap = xp.where(now, xp.where(lost, 1.0, 0.0), gap) if m_m > 1 else \
                xp.where(lost, 1.0, 0.0)  # fmt: skip
            fresh = gap < 0.5 if m_m == 1 else xp.logical_and(now, gap < 0.5)
        else:
            fresh = now
        if m_m > 1 or gap is not None:
            p_m = pick(fresh, p_m, held.mocap_pos, xp)  # (the held attitude is not used)
            stamp = pick(fresh, stamp, held.mocap_stamp, xp)
        out["mocap_pos"], out["mocap_stamp"] = p_m, stamp
        readings |= {"mocap_pos": p_m, "mocap_quat": q_m, "mocap_fresh": fresh}
        new |= {"mocap": mocap_s, "mocap_gap": gap}

    return step


def _baro_step(baro: Any, periods: Any, g_vec: Any, dt: float, offsets: dict) -> Any:
    """The barometer: a bias that walks every step, a sample every ``m_b`` steps, held."""
    m_b, at = periods.baro, offsets["baro"]

    def step(k, truth, bs, z, xp, out, readings, new):
        alt, baro_s = sensors.baro_measure(truth.pos, baro, bs.baro, dt, z[..., at:at + 2])
        fresh, alt = sampled(m_b, bs.j, alt, lambda: bs.held.baro_alt, xp)
        out["baro_alt"] = alt
        readings |= {"baro_alt": alt, "baro_fresh": fresh}
        new["baro"] = baro_s

    return step


def _gnss_step(gnss: Any, periods: Any, g_vec: Any, dt: float, offsets: dict) -> Any:
    """GNSS: a delay line and a correlated error every step, a fix every ``m_g`` steps."""
    m_g, at = periods.gnss, offsets["gnss"]

    def step(k, truth, bs, z, xp, out, readings, new):
        held = bs.held
        fix, gnss_s = sensors.gnss_measure(truth.pos, truth.vel, gnss, bs.gnss,
                                           z[..., at:at + 9], dt)  # fmt: skip
        g_t = k * dt - float(gnss.latency) + 0.0 * truth.pos[..., 0]
        fresh, (g_p, g_v, g_t) = sampled(
            m_g, bs.j, (fix.pos, fix.vel, g_t),
            lambda: (held.gnss_pos, held.gnss_vel, held.gnss_stamp), xp)  # fmt: skip
        out["gnss_pos"], out["gnss_vel"], out["gnss_stamp"] = g_p, g_v, g_t
        readings |= {"gnss_pos": g_p, "gnss_vel": g_v, "gnss_fresh": fresh}
        new["gnss"] = gnss_s

    return step


def _parts_step(parts: tuple, periods: Any, g_vec: Any, dt: float, part_at: dict,
                world: Any) -> Any:  # fmt: skip
    """Every sensor part: its ``measure`` each step, its readings held between its samples."""

    def step(k, truth, bs, z, xp, out, readings, new):
        ctx = Context(dt, xp, world=world, gravity=g_vec)
        states = []
        for part, m, (state, held) in zip(parts, periods.parts, bs.parts, strict=True):
            count = sum(c for _, c in part.streams)
            at = part_at[part.name]
            got, state = part.measure(k, truth, state, z[..., at:at + count], ctx)
            values = tuple(got[o.name] for o in part.outputs)
            fresh, values = sampled(m, bs.j, values, lambda held=held: held, xp)
            for o, v in zip(part.outputs, values, strict=True):
                out[f"{part.name}_{o.name}"] = v
                readings[f"{part.name}_{o.name}"] = v
            readings[f"{part.name}_fresh"] = fresh
            states.append((state, values if m > 1 else None))
        new["parts"] = tuple(states)

    return step
