"""Bring your own controller: a PD position + attitude controller flown by ``fly``.

The controller below is a pure function ``(state, ref, gains, ctrl_state) -> (wrench,
ctrl_state)`` written once over the array API (``array_api_compat.array_namespace``): only
arithmetic, indexing, ``stack``, ``concat``, ``sum``, ``sqrt``, ``sin``, ``cos``, ``clip`` and
``minimum`` (``where`` too, for branches), no Python ``if`` on values and no NumPy calls on the
state. That is all ``fly`` needs to run it on its fast loops:

* ``native``: traced by CasADi with the reference, allocation and plant into one C step
  (``meta["loop"] == "compiled"``);
* ``jax``: traced into one ``jax.lax.scan`` per chunk (``meta["loop"] == "scan"``);
* any backend, ``compiled=False``: called once per step (``"python"``), the reference path.

A controller that cannot be traced still flies, per step, with a ``TraceFallbackWarning`` and
the reason in ``meta["loop_reason"]``. The command may also be rotor speeds ``(n, n_rotors)``
[RPM] instead of a wrench: give ``fly(..., command="rpm")`` on a quadrotor (a last axis of 4 is
read as a wrench otherwise), see docs/flight.md.

The law (ENU world, FLU body, ``R`` body to world with columns ``r1 r2 r3``):

    a_d = kp (p_r - p) + kd (v_r - v) - ki I + a_r + g e_z,   I' = clip(I + (p - p_r) dt)
    F_d = m a_d (tilt-limited),  f = F_d . r3,  R_d = [b1 b2 b3] from b3 = F_d/|F_d| and yaw,
    e_R = 1/2 vee(R_d^T R - R^T R_d),  tau = J (-k_att e_R - k_rate w) + w x J w.

Run:  python examples/own_controller.py
"""

from __future__ import annotations

import math
import time
from typing import Any, NamedTuple

import numpy as np
from array_api_compat import array_namespace

from quadsim.engines.sim import Simulator
from quadsim.loop.flight import fly
from quadsim.loop.trajectories import Circle
from quadsim.physics.params import load_params


class PDGains(NamedTuple):
    """Gains of :func:`pd_control` (numbers and NumPy arrays: constants of the trace)."""

    mass: float  # [kg]
    gravity: float  # [m/s^2]
    inertia: np.ndarray  # principal moments (3,) [kg m^2]
    dt: float  # control period [s]
    kp: np.ndarray  # (3,) [1/s^2]
    kd: np.ndarray  # (3,) [1/s]
    ki: np.ndarray  # (3,) [1/s^3]
    i_max: float  # integral clamp [m s]
    k_att: np.ndarray  # (3,) [1/s^2]
    k_rate: np.ndarray  # (3,) [1/s]
    tilt_max: float  # [rad]


class PDState(NamedTuple):
    """Controller state: the clamped integral of the position error ``(..., 3)`` [m s]."""

    pos_int: Any


def pd_gains(drone: Any, dt: float) -> PDGains:
    """Gains for a drone (:class:`~quadsim.physics.params.Params`), tuned for the Crazyflie."""
    return PDGains(
        mass=float(drone.mass), gravity=float(-drone.gravity_vec[2]),
        inertia=np.diag(np.asarray(drone.J)), dt=float(dt),
        kp=np.array([16.0, 16.0, 25.0]), kd=np.array([7.0, 7.0, 9.0]),
        ki=np.array([4.0, 4.0, 8.0]), i_max=0.1,
        k_att=np.array([300.0, 300.0, 100.0]), k_rate=np.array([60.0, 60.0, 30.0]),
        tilt_max=math.radians(35.0),
    )  # fmt: skip


def _cross(a: Any, b: Any) -> Any:
    xp = array_namespace(a, b)
    return xp.stack([a[..., 1] * b[..., 2] - a[..., 2] * b[..., 1],
                     a[..., 2] * b[..., 0] - a[..., 0] * b[..., 2],
                     a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]], axis=-1)  # fmt: skip


def _dot(a: Any, b: Any) -> Any:
    return array_namespace(a, b).sum(a * b, axis=-1)


def _unit(a: Any) -> Any:
    xp = array_namespace(a)
    return a / xp.sqrt(_dot(a, a) + 1e-12)[..., None]


def pd_control(state: Any, ref: Any, gains: PDGains, cstate: PDState) -> tuple[Any, PDState]:
    """One step of the PD controller: ``(wrench (..., 4) [N, N m], next state)``."""
    xp = array_namespace(state.pos)
    pos, vel, w = state.pos, state.vel, state.ang_vel
    p_r, v_r, a_r = (xp.asarray(a) for a in (ref.pos, ref.vel, ref.acc))
    kp, kd, ki, k_att, k_rate, J = (xp.asarray(a) for a in (
        gains.kp, gains.kd, gains.ki, gains.k_att, gains.k_rate, gains.inertia))  # fmt: skip
    # translation: PD with feed-forward, a small clamped integral (the controller state)
    e = pos - p_r
    pos_int = xp.clip(cstate.pos_int + e * gains.dt, -gains.i_max, gains.i_max)
    a_d = -kp * e + kd * (v_r - vel) - ki * pos_int + a_r
    zero = 0.0 * a_d[..., 0]
    F = gains.mass * (a_d + xp.stack([zero, zero, zero + gains.gravity], axis=-1))
    # tilt limit: shrink the horizontal force to at most F_z tan(tilt_max)
    fz = xp.clip(F[..., 2], min=0.1 * gains.mass * gains.gravity)
    h = xp.sqrt(F[..., 0] ** 2 + F[..., 1] ** 2 + 1e-12)
    s = xp.minimum(1.0 + 0.0 * h, fz * math.tan(gains.tilt_max) / h)
    F = xp.stack([F[..., 0] * s, F[..., 1] * s, fz], axis=-1)
    # attitude: body axes from the quaternion (xyzw), desired axes from F and the yaw
    x, y, z, q0 = (state.quat[..., i] for i in range(4))
    r1 = xp.stack([1 - 2 * (y * y + z * z), 2 * (x * y + z * q0), 2 * (x * z - y * q0)], axis=-1)
    r2 = xp.stack([2 * (x * y - z * q0), 1 - 2 * (x * x + z * z), 2 * (y * z + x * q0)], axis=-1)
    r3 = xp.stack([2 * (x * z + y * q0), 2 * (y * z - x * q0), 1 - 2 * (x * x + y * y)], axis=-1)
    yaw = xp.asarray(ref.yaw) + 0.0 * pos[..., 0]
    heading = xp.stack([xp.cos(yaw), xp.sin(yaw), 0.0 * yaw], axis=-1)
    b3 = _unit(F)
    b2 = _unit(_cross(b3, heading))
    b1 = _cross(b2, b3)
    # e_R = 1/2 vee(R_d^T R - R^T R_d): (R_d^T R)_ij = b_i . r_j
    e_R = 0.5 * xp.stack([_dot(b3, r2) - _dot(b2, r3), _dot(b1, r3) - _dot(b3, r1),
                          _dot(b2, r1) - _dot(b1, r2)], axis=-1)  # fmt: skip
    tau = J * (-k_att * e_R - k_rate * w) + _cross(w, J * w)
    thrust = xp.clip(_dot(F, r3), min=0.0)
    return xp.concat([thrust[..., None], tau], axis=-1), PDState(pos_int)


def init_state(gains: PDGains, batch_shape: tuple = (), xp: Any = None, dtype: Any = None):
    """Zero controller state; ``fly`` finds it as ``pd_control.init_state``."""
    xp = np if xp is None else xp
    return PDState(xp.zeros((*batch_shape, 3), dtype=dtype))


pd_control.init_state = init_state


def main(n: int = 16, duration: float = 6.0) -> dict:
    """Fly ``n`` drones on a 1 m circle at 1 m/s on each backend; returns the results."""
    dt = 1 / 500
    drone = load_params("cf2x_L250")
    gains = pd_gains(drone, dt)
    traj = Circle(radius=1.0, speed=1.0, center=(0.0, 0.0, 1.0))
    offset = np.stack([np.arange(n) % 4, np.arange(n) // 4, np.zeros(n)], axis=1) * 3.0
    results = {}
    for backend in ("native", "jax"):
        try:
            sim = Simulator(drone, n=n, dt=dt, backend=backend)
        except (ImportError, RuntimeError) as e:  # no C compiler, or no JAX
            print(f"{backend:6s}: skipped ({e})")
            continue
        r0 = traj(0.0)
        sim.reset(pos=np.asarray(r0.pos) + offset, vel=r0.vel)
        t0 = time.perf_counter()
        res = fly(sim, traj, pd_control, gains, duration=duration, ref_offset=offset)
        total = time.perf_counter() - t0
        late = res.log["time"] >= min(2.0, duration / 2)  # after the start-up transient
        err = np.linalg.norm(res.log["pos"][late] - res.log["ref_pos"][late], axis=-1)
        print(f"{backend:6s}: loop {res.meta['loop']!r} ({res.meta['loop_reason'] or 'fast path'}),"
              f" tracking RMS {np.sqrt(np.mean(err**2)) * 100:.2f} cm, max {err.max() * 100:.2f}"
              f" cm; {n} drones x {duration:g} s in {total:.2f} s (loop {res.wall_time:.2f} s)")
        results[backend] = res
    return results


if __name__ == "__main__":
    main()
