r"""Controller gains: the :class:`PidGains` and :class:`GeometricGains` records and their loader.

Gains live in TOML files next to the drone presets (``quadsim/physics/presets/gains/*.toml``),
in the preset style: every number is an inline table ``{ value, unit, source, note }``
(packaged files must give ``unit`` and ``source``; a user file may write a bare value in the
canonical unit)::

    controller = "geometric"          # or "pid"
    drone = "cf2x_L250"               # the preset the gains were tuned for (informational)
    dt = { value = 0.002, unit = "s", source = "tuned at 500 Hz" }
    kp = { value = [16.0, 16.0, 20.0], unit = "1/s^2", source = "tuned", note = "..." }

A record also carries what the controller needs from the drone (the ``drone``
:class:`~quadsim.physics.params.Params` given to :func:`load_gains`, and its
:func:`~quadsim.physics.envelope.envelope`) and the control period ``dt`` [s]: mass ``m``, gravity
``g``, inertia ``J``, and

* ``T_min = max(N f(Ω_min), r m g)``, ``r`` = ``min_thrust_ratio`` (a floor that keeps the thrust
  direction defined and the rotors some headroom);
* ``T_max = min(s, 1) N f(Ω_max)``, ``s`` = ``max_thrust_ratio`` (below 1 it keeps rotor
  headroom for torque, which the allocation gives up first when the collective saturates);
* ``θ_max = min(tilt_max, envelope tilt_max)``; ``xy_margin = xy_margin_ratio T_max``;
* the drag to compensate, ``c D`` and ``c k_d`` with ``c`` = ``drag_compensation`` and the
  drone's ``drag_matrix``/``drag_coef``: the controllers subtract the model's drag at the
  measured velocity in still air, ``R c D Rᵀ v - c k_d |v| v``, from the desired force;
* ``torque_max`` (per-axis torque range at hover) and the drone's allocator, for the rotor-lag
  compensation (``motor_tau``, ``motor_tau_target``; see :mod:`quadsim.loop.control.geometric`).

Keys (canonical unit; per-axis keys take a number or 3 numbers; ``*`` = required):

* both: ``controller``\*, ``name``, ``description``, ``drone`` (strings), ``dt`` [s],
  ``tilt_max`` [rad or deg], ``min_thrust_ratio`` (0.1), ``max_thrust_ratio`` (1),
  ``xy_margin_ratio`` (0.3), ``motor_tau`` [s] (0: off), ``motor_tau_target`` [s] (0.02),
  ``drag_compensation`` (0);
* geometric: ``kp``\* [1/s²], ``kv``\* [1/s], ``ki`` [1/s³], ``i_max`` [m s], ``i_zone`` [m/s],
  ``kR``\* [1/s²], ``kW``\* [1/s] (> 0), ``rate_max``\* [rad/s or deg/s];
* pid: ``pos_p``\* [1/s], ``vel_max_xy``\*, ``vel_max_up``\*, ``vel_max_down``\* [m/s],
  ``vel_p``\* [1/s], ``vel_i`` [1/s²], ``vel_i_max`` [m/s²], ``att_p``\* [1/s], ``rate_max``\*
  [rad/s or deg/s], ``rate_p``\* [1/s], ``rate_i`` [1/s²], ``rate_d`` [1], ``rate_i_max``
  [rad/s²].

Gains are *normalised*: position/velocity loops produce accelerations [m/s²] (times ``m`` for a
force), attitude/rate loops angular accelerations [rad/s²] (times ``J`` for a torque), so the
same numbers give the same closed-loop bandwidths on different drones. Every value must be
finite and >= 0 (limits and ``kW`` > 0); every failure is a ``ValueError`` naming the file and
the key.
"""

from __future__ import annotations

import math
import os
import re
import warnings
from typing import Any, NamedTuple

import numpy as np

from ...physics import presets
from ...physics._toml import REQUIRED, check_keys, open_toml, read_entry
from ...physics.envelope import envelope
from ...physics.params import Params, load_params
from ...physics.rotors import Allocator, allocation_matrix, make_allocator

__all__ = ["GeometricGains", "PidGains", "hover_problem", "list_gains", "load_gains", "thrust_cap"]


class GeometricGains(NamedTuple):
    """Gains of :func:`quadsim.loop.control.geometric.control` plus the drone data it uses.

    Attributes:
        name: Gains name (file stem or ``name`` key).
        dt: Control period [s].
        mass: Drone mass [kg].
        gravity: Gravity magnitude ``g`` [m/s²] (gravity is ``(0, 0, -g)``, ENU).
        J: Inertia, ``(3, 3)`` [kg m²].
        thrust_min: Lowest collective thrust commanded [N].
        thrust_max: Highest collective thrust commanded [N].
        tilt_max: Largest tilt of the desired thrust direction from vertical [rad].
        xy_margin: Horizontal thrust kept when the vertical demand saturates [N]
            (``xy_margin_ratio T_max``, PX4's ``MPC_THR_XY_MARG``).
        kp: Position gain, ``(3,)`` [1/s²].
        kv: Velocity gain, ``(3,)`` [1/s].
        ki: Position-integral gain, ``(3,)`` [1/s³].
        i_max: Clamp of the position integral ``∫e_p dt``, ``(3,)`` [m s].
        i_zone: Integration zone, ``(3,)`` [m/s]: an axis integrates only while its velocity
            error ``|e_v| < i_zone`` (conditional integration: transients do not wind it up).
        kR: Attitude gain, ``(3,)`` [1/s²] (torque ``J k_R e_R``).
        kW: Body-rate gain, ``(3,)`` [1/s] (torque ``J k_Ω e_Ω``), > 0.
        rate_max: Limit of the attitude-error rate correction ``k_R e_R / k_Ω``, ``(3,)``
            [rad/s].
        motor_tau: Rotor lag time constant [s] assumed by the lag compensation (0 = off).
        motor_tau_target: Time constant [s] the compensated rotors should have (see
            :mod:`quadsim.loop.control.geometric`).
        drag_matrix: Compensated linear body drag ``c D``, ``(3, 3)`` [N s/m] (``c`` = the
            file's ``drag_compensation``, ``D`` the drone's ``drag_matrix``).
        drag_coef: Compensated quadratic drag ``c k_d`` [N s²/m²].
        torque_max: Largest torque about each body axis alone at hover thrust that the rotors
            can produce, ``(3,)`` [N m] (from the allocation matrix; the lag compensation clips
            its commands to it so its rotor model stays true).
        allocator: The drone's :class:`~quadsim.physics.rotors.Allocator` (used by the lag
            compensation's rotor model).
    """

    name: str
    dt: float
    mass: float
    gravity: float
    J: np.ndarray
    thrust_min: float
    thrust_max: float
    tilt_max: float
    xy_margin: float
    kp: np.ndarray
    kv: np.ndarray
    ki: np.ndarray
    i_max: np.ndarray
    i_zone: np.ndarray
    kR: np.ndarray
    kW: np.ndarray
    rate_max: np.ndarray
    motor_tau: float
    motor_tau_target: float
    drag_matrix: np.ndarray
    drag_coef: float
    torque_max: np.ndarray
    allocator: Allocator


class PidGains(NamedTuple):
    """Gains of the cascaded PID controller (:mod:`quadsim.loop.control.pid`) plus drone data.

    Attributes:
        name, dt, mass, gravity, J, thrust_min, thrust_max, tilt_max, xy_margin: As in
            :class:`GeometricGains`.
        pos_p: Position P gain, ``(3,)`` [1/s] (velocity setpoint per metre of error).
        vel_max_xy: Horizontal speed limit of the velocity setpoint [m/s].
        vel_max_up: Climb-rate limit [m/s].
        vel_max_down: Descent-rate limit [m/s] (a positive number).
        vel_p: Velocity P gain, ``(3,)`` [1/s].
        vel_i: Velocity I gain, ``(3,)`` [1/s²].
        vel_i_max: Clamp of the velocity integrator (an acceleration), ``(3,)`` [m/s²].
        att_p: Attitude P gain, ``(3,)`` [1/s] (body-rate setpoint per radian).
        yaw_weight: ``min(att_p[2] / att_p[0], 1)``: weight of yaw in the attitude error (PX4).
        rate_max: Body-rate setpoint limit, ``(3,)`` [rad/s].
        rate_p: Rate P gain, ``(3,)`` [1/s].
        rate_i: Rate I gain, ``(3,)`` [1/s²].
        rate_d: Rate D gain on the measured rate, ``(3,)`` [1] (times ``dω/dt``).
        rate_i_max: Clamp of the rate integrator (an angular acceleration), ``(3,)`` [rad/s²].
        motor_tau, motor_tau_target, drag_matrix, drag_coef, torque_max, allocator: As in
            :class:`GeometricGains`.
    """

    name: str
    dt: float
    mass: float
    gravity: float
    J: np.ndarray
    thrust_min: float
    thrust_max: float
    tilt_max: float
    xy_margin: float
    pos_p: np.ndarray
    vel_max_xy: float
    vel_max_up: float
    vel_max_down: float
    vel_p: np.ndarray
    vel_i: np.ndarray
    vel_i_max: np.ndarray
    att_p: np.ndarray
    yaw_weight: float
    rate_max: np.ndarray
    rate_p: np.ndarray
    rate_i: np.ndarray
    rate_d: np.ndarray
    rate_i_max: np.ndarray
    motor_tau: float
    motor_tau_target: float
    drag_matrix: np.ndarray
    drag_coef: float
    torque_max: np.ndarray
    allocator: Allocator


_DEG = math.pi / 180.0
_V = ((), (3,))  # per-axis: scalar (all three axes) or (3,)
_S = ((),)
# key -> (units {unit: factor to canonical}, shapes, default, strictly positive?)
_COMMON: dict[str, tuple[dict[str, float], tuple, Any, bool]] = {
    "dt": ({"s": 1.0}, _S, None, True),
    "tilt_max": ({"rad": 1.0, "deg": _DEG}, _S, None, True),
    "min_thrust_ratio": ({"1": 1.0}, _S, 0.1, False),
    "max_thrust_ratio": ({"1": 1.0}, _S, 1.0, True),
    "xy_margin_ratio": ({"1": 1.0}, _S, 0.3, False),
    "motor_tau": ({"s": 1.0}, _S, 0.0, False),
    "motor_tau_target": ({"s": 1.0}, _S, 0.02, True),
    "drag_compensation": ({"1": 1.0}, _S, 0.0, False),
}
_GEOMETRIC = {
    "kp": ({"1/s^2": 1.0}, _V, REQUIRED, False),
    "kv": ({"1/s": 1.0}, _V, REQUIRED, False),
    "ki": ({"1/s^3": 1.0}, _V, 0.0, False),
    "i_max": ({"m s": 1.0}, _V, 0.0, False),
    "i_zone": ({"m/s": 1.0}, _V, 1e9, True),
    "kR": ({"1/s^2": 1.0}, _V, REQUIRED, False),
    "kW": ({"1/s": 1.0}, _V, REQUIRED, True),
    "rate_max": ({"rad/s": 1.0, "deg/s": _DEG}, _V, REQUIRED, True),
}
_PID = {
    "pos_p": ({"1/s": 1.0}, _V, REQUIRED, False),
    "vel_max_xy": ({"m/s": 1.0}, _S, REQUIRED, True),
    "vel_max_up": ({"m/s": 1.0}, _S, REQUIRED, True),
    "vel_max_down": ({"m/s": 1.0}, _S, REQUIRED, True),
    "vel_p": ({"1/s": 1.0}, _V, REQUIRED, False),
    "vel_i": ({"1/s^2": 1.0}, _V, 0.0, False),
    "vel_i_max": ({"m/s^2": 1.0}, _V, 0.0, False),
    "att_p": ({"1/s": 1.0}, _V, REQUIRED, False),
    "rate_max": ({"rad/s": 1.0, "deg/s": _DEG}, _V, REQUIRED, True),
    "rate_p": ({"1/s": 1.0}, _V, REQUIRED, False),
    "rate_i": ({"1/s^2": 1.0}, _V, 0.0, False),
    "rate_d": ({"1": 1.0}, _V, 0.0, False),
    "rate_i_max": ({"rad/s^2": 1.0}, _V, 0.0, False),
}
_SPECS = {"geometric": _GEOMETRIC, "pid": _PID}
_TEXT = ("controller", "name", "description", "drone")


def _root() -> Any:
    return presets.folder("gains")


def list_gains() -> list[str]:
    """Sorted names of the packaged gains files (``quadsim/physics/presets/gains/*.toml``)."""
    return sorted(p.name[:-5] for p in _root().iterdir() if p.name.endswith(".toml"))


def load_gains(
    name_or_path: str | os.PathLike[str],
    drone: Params | str | os.PathLike[str] | None = None,
    dt: float | None = None,
) -> PidGains | GeometricGains:
    """Load and validate controller gains, completed with the drone's data.

    Args:
        name_or_path: Packaged gains name (e.g. ``"cf2x_L250_geometric"``, see
            :func:`list_gains`) or a TOML path (ends in ``.toml``, has a path separator, or is an
            ``os.PathLike``).
        drone: The drone flown: :class:`~quadsim.physics.params.Params`, preset name or path;
            ``None`` uses the file's ``drone`` key.
        dt: Control period [s]; ``None`` uses the file's ``dt``.

    Returns:
        :class:`PidGains` or :class:`GeometricGains` (per the file's ``controller`` key).

    Raises:
        ValueError: Naming the file and the key: unknown key or field, wrong type, unit or
            shape, non-finite or negative value, missing required key, unknown gains name, or a
            ``drone``/``dt`` that is neither given nor in the file.
    """
    doc, where, stem, packaged = open_toml(name_or_path, list_gains(), _root(), "gains", "gains")
    return _build(doc, where, stem, packaged, drone, dt)


def thrust_cap(gains: Any, drone: Params) -> float:
    """The most collective thrust [N] the controller asks for that the rotors give once warm:
    ``T_max (1 - c_w)``, ``T_max = min(max_thrust_ratio, 1)`` times the envelope's, ``c_w`` the
    drone's ``warmup_coef`` (the fraction of thrust per command warm motors lose)."""  # noqa: D205, D209
    return float(gains.thrust_max) * (1.0 - float(getattr(drone, "warmup_coef", 0.0)))


def hover_problem(gains: Any, drone: Params) -> str | None:
    """Why a controller with these gains cannot hold ``drone`` up (its :func:`thrust_cap` below
    the weight ``m g``), or ``None``; for gains without a thrust cap, ``None``."""  # noqa: D205, D209
    if not hasattr(gains, "thrust_max"):
        return None
    cap, weight = thrust_cap(gains, drone), float(gains.mass * gains.gravity)
    if cap >= weight:
        return None
    warm = " once the motors are warm" if getattr(drone, "warmup_coef", 0.0) > 0.0 else ""
    full = envelope(drone).thrust_max
    return (f"the controller's thrust cap, {cap:.3g} N{warm} (max_thrust_ratio "
            f"{gains.thrust_max / full:.3g} of the rotors' {full:.3g} N), is below the weight of "
            f"drone {drone.name!r}, {weight:.3g} N: it cannot hover and sinks; raise "
            "max_thrust_ratio or use gains made for this drone")  # fmt: skip


def _build(
    doc: dict, where: str, stem: str, packaged: bool, drone: Any, dt: float | None
) -> PidGains | GeometricGains:
    def fail(key: str, msg: str) -> ValueError:
        return ValueError(f"{where}: key {key!r}: {msg}")

    kind = doc.get("controller")
    if kind not in _SPECS:
        raise fail("controller", f"must be one of {sorted(_SPECS)}; got {kind!r}")
    spec = {**_COMMON, **_SPECS[kind]}
    check_keys(doc, [*_TEXT, *spec], _TEXT, fail, f"unknown key for controller {kind!r}")
    v = {k: _value(doc, k, spec[k], packaged, fail) for k in spec}

    if drone is None:
        if "drone" not in doc:
            raise fail("drone", "no drone given to load_gains and none named in the file")
        drone = doc["drone"]
    params = drone if isinstance(drone, Params) else load_params(drone)
    if dt is None:
        if v["dt"] is None:
            raise fail("dt", "no dt given to load_gains and none in the file")
        dt = float(v["dt"])
    if not (isinstance(dt, int | float) and math.isfinite(dt) and dt > 0.0):
        raise ValueError(f"dt must be a positive number of seconds; got {dt!r}")
    env = envelope(params)
    g = float(-params.gravity_vec[2])
    weight = params.mass * g
    tilt = env.tilt_max if v["tilt_max"] is None else min(float(v["tilt_max"]), env.tilt_max)
    if not tilt > 0.0:
        raise ValueError(f"{where}: drone {params.name!r} cannot tilt (thrust-to-weight <= 1)")
    common = dict(
        name=doc.get("name", stem),
        dt=float(dt),
        mass=float(params.mass),
        gravity=g,
        J=params.J,
        thrust_min=max(env.thrust_min, float(v["min_thrust_ratio"]) * weight),
        thrust_max=min(float(v["max_thrust_ratio"]), 1.0) * env.thrust_max,
        tilt_max=float(tilt),
        xy_margin=min(float(v["xy_margin_ratio"]), 1.0)
        * min(float(v["max_thrust_ratio"]), 1.0)
        * env.thrust_max,
        motor_tau=float(v["motor_tau"]),
        motor_tau_target=float(v["motor_tau_target"]),
        drag_matrix=_ro(float(v["drag_compensation"]) * params.drag_matrix),
        drag_coef=float(v["drag_compensation"]) * params.drag_coef,
        torque_max=_ro(_torque_max(params, weight)),
        allocator=make_allocator(params),
    )
    if common["motor_tau"] > 0.0 and common["motor_tau_target"] > common["motor_tau"]:
        raise fail("motor_tau_target", f"must be <= motor_tau = {common['motor_tau']} s")
    if common["thrust_min"] >= common["thrust_max"]:
        raise fail("min_thrust_ratio", f"thrust floor {common['thrust_min']} N >= T_max")
    vec = {k: _ro(np.broadcast_to(v[k], (3,))) for k in _SPECS[kind] if spec[k][1] is _V}
    sca = {k: float(v[k]) for k in _SPECS[kind] if spec[k][1] is _S}
    if kind == "geometric":
        gains = GeometricGains(**common, **vec, **sca)
    else:
        att = vec["att_p"]
        yaw_w = float(min(att[2] / att[0], 1.0)) if att[0] > 0.0 else 1.0
        gains = PidGains(**common, **vec, **sca, yaw_weight=yaw_w)
    problem = hover_problem(gains, params)
    if problem:  # a warning, not an error: a drop test or a landing may fly it on purpose
        warnings.warn(f"{where}: {problem}", UserWarning, stacklevel=3)
    return gains


def _torque_max(params: Params, weight: float) -> np.ndarray:
    """Per-axis torque range at hover thrust: ``f = P (m g e_0 + t e_k)`` within rotor limits."""
    A = allocation_matrix(params)
    P = np.linalg.inv(A) if A.shape[1] == 4 else np.linalg.pinv(A)
    k = np.asarray(params.rpm2thrust)
    lo, hi = (float(np.polyval(k[::-1], w)) for w in (params.rpm_min, params.rpm_max))
    base = P[:, 0] * weight
    out = np.zeros(3)
    for axis in range(3):
        d = P[:, axis + 1]
        with np.errstate(divide="ignore"):
            up = np.where(d > 0, (hi - base) / d, np.where(d < 0, (lo - base) / d, np.inf))
            dn = np.where(d > 0, (base - lo) / d, np.where(d < 0, (base - hi) / d, np.inf))
        out[axis] = max(min(up.min(), dn.min()), 0.0)
    return out


def _ro(a: np.ndarray) -> np.ndarray:
    a = np.array(a, dtype=np.float64)
    a.flags.writeable = False
    return a


def _value(doc: dict, key: str, spec: tuple, packaged: bool, fail: Any) -> Any:
    """The value of ``key`` in canonical units, validated (or its default)."""
    units, shapes, default, positive = spec
    a, factor = read_entry(doc, key, units, packaged=packaged,
                           packaged_name="packaged gains", normalize=_norm_unit,
                           fail=fail, default=default)  # fmt: skip
    if factor is None:  # absent: its default
        return a
    if a.shape not in shapes:
        raise fail(key, f"wrong shape {a.shape}; expected one of {list(shapes)}")
    if not np.all(np.isfinite(a)):
        raise fail(key, f"must be finite; got {a.tolist()!r}")
    if np.any(a < 0.0):
        raise fail(key, f"must be >= 0 (no negative gains or limits); got {a.tolist()!r}")
    if positive and np.any(a == 0.0):
        raise fail(key, f"must be > 0; got {a.tolist()!r}")
    return a * factor


def _norm_unit(unit: str) -> str:
    """A unit as spelled in the key tables: single spaces, no spaces around ``/``."""
    return " ".join(re.sub(r"\s*/\s*", "/", unit).split())
