r"""Drone parameters: the immutable :class:`Params` record and its TOML loader.

Rotor curves are polynomials in rotor speed ``Ω`` [RPM] (seed 000): thrust
``f = k_0 + k_1 Ω + k_2 Ω^2`` [N], drag torque ``τ = m_0 + m_1 Ω + m_2 Ω^2`` [N m]. Curves given per
rad/s convert with ``s = 2π/60``: ``k_1^{RPM} = s k_1^{rad/s}``, ``k_2^{RPM} = s^2 k_2^{rad/s}``.

The mixing matrix follows from the rotor positions ``(x_i, y_i)`` (body FLU) and spins ``s_i``
(+1 = counter-clockwise seen from above): for thrust ``f_i e_z`` at ``r_i``, ``τ = r_i × f_i e_z =
(y_i f_i, -x_i f_i, 0)``, so with ``L = max_i max(|x_i|, |y_i|)``

.. math::  M_{0,i} = y_i / L, \quad M_{1,i} = -x_i / L, \quad M_{2,i} = -s_i,

and ``τ_{xy} = L M_{0:2} f``, ``τ_z = M_2 τ_p`` (a rotor spinning about ``+z`` pushes the body
about ``-z``). Presets live in ``quadsim/physics/presets/*.toml``; see ``docs/presets.md`` for the
format.
"""

from __future__ import annotations

import math
import os
import re
import warnings
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from . import presets
from ._toml import REQUIRED, check_keys, open_toml, read_entry

__all__ = [
    "Params",
    "PhysicalError",
    "check_physical",
    "invert_curve",
    "list_presets",
    "load_params",
    "rad_s_to_rpm",
    "rpm_to_rad_s",
    "thrust_to_weight",
]

_RPM_TO_RAD_S = 2.0 * math.pi / 60.0


def rpm_to_rad_s(x: Any) -> Any:
    """Rotor speed [RPM] -> [rad/s] (multiply by 2π/60)."""
    return x * _RPM_TO_RAD_S


def rad_s_to_rpm(x: Any) -> Any:
    """Rotor speed [rad/s] -> [RPM] (multiply by 60/2π)."""
    return x / _RPM_TO_RAD_S


class Params(NamedTuple):
    """One drone's physical parameters (immutable; arrays are read-only float64).

    Attributes:
        name: Preset or file name.
        mass: Mass [kg].
        gravity_vec: Gravity, shape (3,) [m/s^2], ENU, e.g. (0, 0, -9.81).
        J: Inertia matrix, shape (3, 3) [kg m^2], body frame.
        J_inv: Inverse of ``J``, shape (3, 3) [1/(kg m^2)].
        L: Lever arm used with the mixing matrix [m].
        mixing_matrix: Shape (3, N): roll, pitch, yaw signs per rotor (see module docstring).
        rotor_positions: Shape (N, 2) [m], body FLU (x, y) of each rotor.
        rotor_spin: Shape (N,), +1 = counter-clockwise seen from above (spin vector +z_body).
        prop_inertia: Rotor inertia about its spin axis [kg m^2].
        rpm2thrust: Thrust curve, shape (3,) [N, N/RPM, N/RPM^2].
        rpm2torque: Drag-torque curve, shape (3,) [N m, N m/RPM, N m/RPM^2].
        rotor_dyn_coef: Shape (4,) [1/s, 1/(s RPM), 1/s, 1/(s RPM)]: spin-up c0, c1, down c2, c3.
        rpm_min: Lowest rotor speed [RPM].
        rpm_max: Highest rotor speed [RPM].
        drag_matrix: Linear body drag, shape (3, 3) [N s/m], ``f_b = D v_b`` (D <= 0).
        drag_coef: Quadratic drag [N s^2/m^2], ``f = -k_d |v| v``.
        rot_drag_coef: Linear rotational drag [N m s/rad], ``τ = -c ω``.
        drag_speed_max: Highest airspeed [m/s] at which the drag model (``drag_matrix``,
            ``drag_coef``) was identified or is claimed to hold; ``inf`` when not stated.
            Informational: the simulation does not clip to it.
        warmup_coef: Fraction of thrust per command a motor loses once warm in hover, ``c_w``
            [1] in ``[0, 1)`` (:mod:`quadsim.physics.motor_thermal`; 0: no warm-up term).
        warmup_time: The warm-up's time constant ``τ_w`` [s] > 0 (``inf``: never warms).
        inflow_coef: Axial-inflow thrust loss ``c_i`` [s/m] >= 0 per m/s of climb
            (:func:`~quadsim.physics.motor_thermal.inflow_factor`; 0: none).
    """

    name: str
    mass: float
    gravity_vec: np.ndarray
    J: np.ndarray
    J_inv: np.ndarray
    L: float
    mixing_matrix: np.ndarray
    rotor_positions: np.ndarray
    rotor_spin: np.ndarray
    prop_inertia: float
    rpm2thrust: np.ndarray
    rpm2torque: np.ndarray
    rotor_dyn_coef: np.ndarray
    rpm_min: float
    rpm_max: float
    drag_matrix: np.ndarray
    drag_coef: float
    rot_drag_coef: float
    drag_speed_max: float = math.inf
    warmup_coef: float = 0.0
    warmup_time: float = math.inf
    inflow_coef: float = 0.0

    @property
    def hover_rpm(self) -> float:
        """The hover speed ``Ω_h`` [RPM]: each rotor's thrust curve at ``m g / N`` (N rotors;
        NaN when the curve does not reach it). The motor warm-up's drive is relative to it."""  # noqa: D205, D209
        n = np.asarray(self.rotor_positions).shape[0]
        weight = float(self.mass) * float(np.linalg.norm(self.gravity_vec))
        return invert_curve(self.rpm2thrust, weight / n)


def invert_curve(coefs: Any, value: float) -> float:
    """Rotor speed at which ``c0 + c1 Ω + c2 Ω^2 == value``, on the curve's increasing branch.

    Args:
        coefs: Curve coefficients, shape (3,) (e.g. ``rpm2thrust`` [N, N/RPM, N/RPM^2]).
        value: Target curve value (e.g. thrust [N]).

    Returns:
        Ω [RPM] (units of the curve), NaN when the value is not reached.
    """
    c0, c1, c2 = (float(c) for c in coefs)
    c = c0 - value
    disc = c1 * c1 - 4.0 * c2 * c
    if disc < 0.0 or (c1 <= 0.0 and c2 == 0.0):
        return math.nan
    if c1 > 0.0:  # the two algebraically equal forms, chosen to avoid cancellation
        return 2.0 * c / (-c1 - math.sqrt(disc))
    return (-c1 + math.sqrt(disc)) / (2.0 * c2)


class PhysicalError(ValueError):
    """A physically impossible parameter, raised by :func:`check_physical`.

    Attributes:
        key: The :class:`Params` field (``"mass"``, ``"J"``, ``"rpm2thrust"``, ...).
        reason: What is wrong, with the offending value.
        index: Leading (per-drone) index of the first bad entry; ``()`` for a single drone.
    """

    def __init__(self, key: str, reason: str, index: tuple[int, ...] = ()) -> None:
        self.key, self.reason, self.index = key, reason, tuple(index)
        at = "".join(f"[{i}]" for i in self.index)
        super().__init__(f"{key}{at}: {reason}")


_SYM_TOL = 1e-12  # relative asymmetry accepted (then symmetrized) in inertia and drag matrices
_TRI_TOL = 1e-9  # relative slack of the triangle inequality (flat bodies sit on its boundary)


def check_physical(values: Mapping[str, Any]) -> None:
    """Reject physically impossible drone parameters; the one home of these rules.

    Every present key of ``values`` (named like the :class:`Params` fields) is checked; absent
    keys are skipped, so the function serves preset files, scenario overrides and per-drone
    arrays alike. Values may carry leading batch (per-drone) axes: ``mass`` of shape ``(n,)``,
    ``J`` of shape ``(n, 3, 3)``; the error then names the first bad index.

    Rules:
        * ``mass`` > 0.
        * ``J``: symmetric (1e-12 relative), every diagonal entry > 0, positive definite, and
          the principal moments (eigenvalues) obey the rigid-body triangle inequalities
          ``J1 + J2 >= J3`` and permutations (relative slack 1e-9, for flat bodies).
        * ``drag_matrix`` (``f_b = D v_b``) dissipative: symmetric part negative semi-definite.
        * ``drag_coef``, ``rot_drag_coef``, ``prop_inertia`` >= 0; ``drag_speed_max`` > 0.
        * ``rotor_dyn_coef`` >= 0 with a spin-up and a spin-down term.
        * ``rpm_min``, ``rpm_max``: ``0 <= rpm_min < rpm_max``; with ``rpm2thrust`` the thrust
          curve must be strictly increasing on ``[rpm_min, rpm_max]`` (its derivative
          ``k1 + 2 k2 Ω`` is linear: >= 0 at both ends and not zero at both) and positive at
          ``rpm_max``.
        * ``warmup_coef`` in ``[0, 1)`` (a motor cannot gain thrust warming up, nor lose all of
          it), ``warmup_time`` > 0 (``inf``: never warms), ``inflow_coef`` in ``[0, 1)`` s/m
          (climbing never adds thrust at a fixed speed; momentum theory bounds it by ``1 / v_h``,
          about 0.2 s/m for a Crazyflie and less for larger rotors); ``hover_rpm`` (the warm-up's
          ``Ω_h``, a model parameter) finite and > 0.

    Args:
        values: Parameter name -> value (number or array, optionally per drone).

    Raises:
        PhysicalError: A ``ValueError`` with ``key``, ``reason`` and ``index`` of the first
            violation.
    """

    def need(key: str, ok: Any, msg: Any) -> None:
        """Raise for the first False in ``ok``; ``msg(index)`` describes it."""
        ok = np.asarray(ok, dtype=bool)
        if not ok.all():
            idx = tuple(int(i) for i in np.argwhere(~ok)[0]) if ok.ndim else ()
            raise PhysicalError(key, msg(idx), idx)

    def arr(key: str, tail: int) -> np.ndarray:
        """``values[key]`` as float64 with ``tail`` trailing (non-batch) axes, NaN-free."""
        a = np.asarray(values[key], dtype=np.float64)
        if a.ndim < tail:
            raise PhysicalError(key, f"expected at least {tail} dimensions; got shape {a.shape}")
        ok = np.all(~np.isnan(a), axis=tuple(range(a.ndim - tail, a.ndim)))
        need(key, ok, lambda i: f"must be a number; got {a[i].tolist()!r}")
        return a

    def matrix(key: str) -> np.ndarray:
        a = arr(key, 2)
        if a.shape[-2:] != (3, 3):
            raise PhysicalError(key, f"must be a 3 x 3 matrix; got shape {a.shape}")
        ok = np.all(np.isfinite(a), axis=(-2, -1))
        need(key, ok, lambda i: f"must be finite; got {a[i].tolist()}")
        return a

    if "mass" in values:
        m = arr("mass", 0)
        need("mass", np.isfinite(m) & (m > 0.0), lambda i: f"must be > 0; got {m[i]}")
    if "J" in values:
        J = matrix("J")
        diag = np.diagonal(J, axis1=-2, axis2=-1)
        msg = "diagonal entries (moments of inertia) must be > 0; got {}"
        need("J", np.all(diag > 0.0, axis=-1), lambda i: msg.format(diag[i].tolist()))
        Jt = np.swapaxes(J, -1, -2)
        sym = np.max(np.abs(J - Jt), axis=(-2, -1)) <= _SYM_TOL * np.max(np.abs(J), axis=(-2, -1))
        need("J", sym, lambda i: f"must be symmetric; got {J[i].tolist()}")
        eig = np.linalg.eigvalsh(0.5 * (J + Jt))
        msg = "must be positive definite; eigenvalues {}"
        need("J", eig[..., 0] > 0.0, lambda i: msg.format(eig[i].tolist()))
        tri = eig[..., 0] + eig[..., 1] >= eig[..., 2] * (1.0 - _TRI_TOL)  # eig is sorted
        msg = "principal moments {} break the triangle inequality J1 + J2 >= J3 of a rigid body"
        need("J", tri, lambda i: msg.format(eig[i].tolist()))
    if "drag_matrix" in values:
        D = matrix("drag_matrix")
        top = np.linalg.eigvalsh(0.5 * (D + np.swapaxes(D, -1, -2)))[..., -1]
        ok = top <= _SYM_TOL * np.max(np.abs(D), axis=(-2, -1))
        msg = "must be dissipative (force = D v): symmetric part negative semi-definite; got {}"
        need("drag_matrix", ok, lambda i: msg.format(D[i].tolist()))
    for key in ("drag_coef", "rot_drag_coef", "prop_inertia"):
        if key in values:
            a = arr(key, 0)
            need(key, a >= 0.0, lambda i, a=a: f"must be >= 0; got {a[i]}")
    if "drag_speed_max" in values:
        a = arr("drag_speed_max", 0)
        need("drag_speed_max", a > 0.0, lambda i: f"must be > 0 (inf: not stated); got {a[i]}")
    _check_thrust_terms(values, arr, need)
    if "rotor_dyn_coef" in values:
        c = arr("rotor_dyn_coef", 1)
        ok = np.all(c >= 0.0, axis=-1) & (c[..., 0] + c[..., 1] > 0) & (c[..., 2] + c[..., 3] > 0)
        msg = "must be >= 0 with spin-up and -down terms; got {}"
        need("rotor_dyn_coef", ok, lambda i: msg.format(c[i].tolist()))
    if "rpm_min" in values and "rpm_max" in values:
        lo, hi = np.broadcast_arrays(arr("rpm_min", 0), arr("rpm_max", 0))
        ok = (lo >= 0.0) & (lo < hi) & np.isfinite(hi)
        msg = "rotor speed range must satisfy 0 <= rpm_min < rpm_max; got [{}, {}] RPM"
        need("rpm_min", ok, lambda i: msg.format(lo[i], hi[i]))
        if "rpm2thrust" in values:
            k = arr("rpm2thrust", 1)
            k0, k1, k2 = k[..., 0], k[..., 1], k[..., 2]
            d_lo, d_hi = k1 + 2.0 * k2 * lo, k1 + 2.0 * k2 * hi  # thrust' is linear in Ω
            f_hi = k0 + k1 * hi + k2 * hi * hi
            ok = (d_lo >= 0.0) & (d_hi >= 0.0) & (d_lo + d_hi > 0.0) & (f_hi > 0.0)
            d_lo, d_hi, f_hi = np.broadcast_arrays(d_lo, d_hi, f_hi)
            msg = (
                "thrust must be positive and strictly increasing over [rpm_min, rpm_max]; slope "
                "{:.6g} and {:.6g} N/RPM at the ends, {:.6g} N at rpm_max"
            )
            need("rpm2thrust", ok, lambda i: msg.format(d_lo[i], d_hi[i], f_hi[i]))


def _check_thrust_terms(values: Mapping[str, Any], arr: Any, need: Any) -> None:
    """The rules of :func:`check_physical` for the warm-up and inflow coefficients."""
    for key in ("warmup_coef", "inflow_coef"):
        if key in values:
            a = arr(key, 0)
            ok = np.isfinite(a) & (a >= 0.0) & (a < 1.0)
            need(key, ok, lambda i, a=a: f"must be in [0, 1); got {a[i]}")
    if "warmup_time" in values:
        a = arr("warmup_time", 0)
        need("warmup_time", a > 0.0, lambda i: f"must be > 0 (inf: never warms); got {a[i]}")
    if "hover_rpm" in values:  # the model's Ω_h (Params.hover_rpm), set per drone
        a = arr("hover_rpm", 0)
        need("hover_rpm", np.isfinite(a) & (a > 0.0),
             lambda i: f"must be a finite speed > 0 [RPM]; got {a[i]}")  # fmt: skip


def thrust_to_weight(p: Params) -> float:
    """Maximum total thrust over weight, ``N f(rpm_max) / (m g)``; below 1 it cannot hover."""
    total = p.rotor_positions.shape[0] * float(np.polyval(p.rpm2thrust[::-1], p.rpm_max))
    return total / (p.mass * float(np.linalg.norm(p.gravity_vec)))


_S = _RPM_TO_RAD_S
_CURVE_RAD = (1.0, _S, _S * _S)  # multiply a per-rad/s curve by this to get it per RPM
_V3, _M3 = ((3,),), ((3, 3), (3,))  # accepted shapes; -1 = any length
# key -> ({accepted unit: factor to the canonical (first) unit}, accepted shapes, default)
_KEYS: dict[str, tuple[dict[str, Any], tuple[tuple[int, ...], ...], Any]] = {
    "mass": ({"kg": 1.0}, ((),), REQUIRED),
    "gravity": ({"m/s^2": 1.0}, ((),), 9.81),
    "inertia": ({"kg m^2": 1.0}, _M3, REQUIRED),
    "rotor_positions": ({"m": 1.0}, ((-1, 2),), REQUIRED),
    "rotor_spin": ({"1": 1.0}, ((-1,),), REQUIRED),
    "prop_inertia": ({"kg m^2": 1.0}, ((),), 0.0),
    "thrust_curve": (
        {"N, N/RPM, N/RPM^2": 1.0, "N, N/(rad/s), N/(rad/s)^2": _CURVE_RAD},
        _V3,
        REQUIRED,
    ),
    "torque_curve": (
        {"N m, N m/RPM, N m/RPM^2": 1.0, "N m, N m/(rad/s), N m/(rad/s)^2": _CURVE_RAD},
        _V3,
        REQUIRED,
    ),
    "rotor_dyn_coef": ({"1/s, 1/(s RPM), 1/s, 1/(s RPM)": 1.0}, ((4,),), None),
    "motor_constant": ({"1/s": 1.0}, ((),), None),
    "rotor_speed_range": ({"RPM": 1.0, "rad/s": 1.0 / _S}, ((2,),), None),
    "rotor_thrust_range": ({"N": 1.0}, ((2,),), None),
    "drag_matrix": ({"N s/m": 1.0}, _M3, (0.0, 0.0, 0.0)),
    "drag_coef": ({"N s^2/m^2": 1.0}, ((),), 0.0),
    "rot_drag_coef": ({"N m s/rad": 1.0}, ((),), 0.0),
    "drag_speed_max": ({"m/s": 1.0}, ((),), math.inf),
    "warmup_coef": ({"1": 1.0}, ((),), 0.0),
    "warmup_time": ({"s": 1.0}, ((),), math.inf),
    "inflow_coef": ({"s/m": 1.0}, ((),), 0.0),
}
_TEXT_KEYS = ("name", "description", "layout")
_SCALARS = ("prop_inertia", "drag_coef", "rot_drag_coef", "drag_speed_max", "warmup_coef",
            "warmup_time", "inflow_coef")  # fmt: skip
_MAY_BE_INF = ("drag_speed_max", "warmup_time")  # +inf allowed (TOML ``inf``): "no limit stated"


def list_presets() -> list[str]:
    """Sorted names of the packaged presets (``quadsim/physics/presets/*.toml``)."""
    root = presets.folder()
    return sorted(p.name[:-5] for p in root.iterdir() if p.name.endswith(".toml"))


def load_params(name_or_path: str | os.PathLike[str]) -> Params:
    """Load and validate a drone from a preset name (e.g. ``"cf2x_L250"``) or a TOML file path.

    A string ending in ``.toml`` or containing a path separator, and any ``os.PathLike``, is a
    path; anything else is a preset name. Every failure is a ``ValueError`` naming the file (path
    or preset) and the offending key. Presets must give ``unit`` and ``source`` for every value.
    """
    root = presets.folder()
    doc, where, stem, preset = open_toml(name_or_path, list_presets(), root, "preset", "presets")
    p = _build(doc, where, stem, preset)
    tw = thrust_to_weight(p)
    if tw < 1.0:
        warnings.warn(
            f"{where}: cannot hover: thrust-to-weight {tw:.3g} < 1 (the drone can only fall)",
            stacklevel=2,
        )
    return p


def _build(doc: dict[str, Any], where: str, stem: str, preset: bool) -> Params:
    def fail(key: str, msg: str) -> ValueError:
        return ValueError(f"{where}: key {key!r}: {msg}")

    def need(ok: Any, key: str, msg: str) -> None:
        if not ok:
            raise fail(key, msg)

    check_keys(doc, [*_TEXT_KEYS, *_KEYS], _TEXT_KEYS, fail)
    v = {k: _value(doc, k, preset, fail) for k in _KEYS}

    mass, g = float(v["mass"]), float(v["gravity"])
    need(g > 0.0, "gravity", f"must be > 0; got {g}")
    J = np.diag(v["inertia"]) if v["inertia"].ndim == 1 else v["inertia"]
    pos, spin = v["rotor_positions"], v["rotor_spin"]
    n, L = pos.shape[0], float(np.max(np.abs(pos), initial=0.0))
    need(n >= 3, "rotor_positions", f"need at least 3 rotors; got {n}")
    need(L > 0.0, "rotor_positions", "all rotors sit at the centre of mass")
    ok = spin.shape == (n,) and np.all(np.abs(spin) == 1.0)
    need(ok, "rotor_spin", f"must be {n} entries of +1 or -1; got {spin.tolist()}")
    D = np.diag(v["drag_matrix"]) if v["drag_matrix"].ndim == 1 else v["drag_matrix"]

    km, dyn = v["motor_constant"], v["rotor_dyn_coef"]
    one = (km is None) != (dyn is None)
    need(one, "motor_constant", "give exactly one of 'motor_constant', 'rotor_dyn_coef'")
    if km is not None:
        need(km > 0.0, "motor_constant", f"must be > 0; got {km}")
        dyn = np.array([km, 0.0, km, 0.0])
    thrust = v["thrust_curve"]
    keys = [k for k in ("rotor_speed_range", "rotor_thrust_range") if v[k] is not None]
    msg = "give exactly one of 'rotor_speed_range', 'rotor_thrust_range'"
    need(len(keys) == 1, keys[-1] if keys else "rotor_speed_range", msg)
    lo, hi = (float(x) for x in v[keys[0]])
    need(0.0 <= lo < hi, keys[0], f"must satisfy 0 <= min < max; got [{lo}, {hi}]")
    if keys[0] == "rotor_thrust_range":
        lo, hi = invert_curve(thrust, lo), invert_curve(thrust, hi)
        msg = f"thrust_curve does not reach it at >= 0 RPM (got [{lo}, {hi}] RPM)"
        need(0.0 <= lo < hi, keys[0], msg)

    # the physical rules live in check_physical; name the file's key, not the Params field
    file_key = {"J": "inertia", "rpm2thrust": "thrust_curve", "rpm_min": keys[0]}
    file_key["rotor_dyn_coef"] = "motor_constant" if km is not None else "rotor_dyn_coef"
    physical = dict(mass=mass, J=J, drag_matrix=D, rotor_dyn_coef=dyn, rpm2thrust=thrust)
    physical |= dict(rpm_min=lo, rpm_max=hi)
    physical |= {k: v[k] for k in _SCALARS}
    try:
        check_physical(physical)
    except PhysicalError as e:
        raise fail(file_key.get(e.key, e.key), e.reason) from None
    J = 0.5 * (J + J.T)

    M = np.stack([pos[:, 1] / L, -pos[:, 0] / L, -spin]) + 0.0  # + 0.0 turns -0.0 into 0.0
    arrays = dict(gravity_vec=[0.0, 0.0, -g], J=J, J_inv=np.linalg.inv(J), mixing_matrix=M)
    arrays |= dict(rotor_positions=pos, rotor_spin=spin, rpm2thrust=thrust, drag_matrix=D)
    arrays |= dict(rpm2torque=v["torque_curve"], rotor_dyn_coef=dyn)
    for name, a in arrays.items():
        a = arrays[name] = np.array(a, dtype=np.float64)
        a.flags.writeable = False
    scalars = {k: float(v[k]) for k in _SCALARS}
    name = doc.get("name", stem)
    return Params(name=name, mass=mass, L=L, rpm_min=lo, rpm_max=hi, **scalars, **arrays)


def _value(doc: dict[str, Any], key: str, preset: bool, fail: Any) -> Any:
    """The value of ``key`` in canonical units, shape-checked and finite (or its default)."""
    units, shapes, default = _KEYS[key]
    a, factor = read_entry(doc, key, units, packaged=preset, packaged_name="presets",
                           normalize=_norm_unit, fail=fail, default=default)  # fmt: skip
    if factor is None:  # absent: its default
        return a
    ok = (
        len(s) == a.ndim and all(w in (-1, d) for w, d in zip(s, a.shape, strict=True))
        for s in shapes
    )
    if not any(ok):
        want = " or ".join(str(s).replace("-1", "N") for s in shapes)
        raise fail(key, f"wrong shape {a.shape}; expected {want}")
    finite = np.isfinite(a) | ((a == math.inf) & (key in _MAY_BE_INF))
    if not np.all(finite):
        raise fail(key, f"must be finite; got {a.tolist()!r}")
    return a * np.asarray(factor)


def _norm_unit(unit: str) -> str:
    """A unit as spelled in ``_KEYS``: single spaces, ``", "`` between the curve's units."""
    return re.sub(r"\s*,\s*", ", ", " ".join(unit.split()))
