r"""Drone parameters: the immutable :class:`Params` record and its TOML loader.

Rotor curves are polynomials in rotor speed ``Ω`` [RPM] (seed 000): thrust
``f = k_0 + k_1 Ω + k_2 Ω^2`` [N], drag torque ``τ = m_0 + m_1 Ω + m_2 Ω^2`` [N m]. Curves given per
rad/s convert with ``s = 2π/60``: ``k_1^{RPM} = s k_1^{rad/s}``, ``k_2^{RPM} = s^2 k_2^{rad/s}``.

The mixing matrix follows from the rotor positions ``(x_i, y_i)`` (body FLU) and spins ``s_i``
(+1 = counter-clockwise seen from above): for thrust ``f_i e_z`` at ``r_i``, ``τ = r_i × f_i e_z =
(y_i f_i, -x_i f_i, 0)``, so with ``L = max_i max(|x_i|, |y_i|)``

.. math::  M_{0,i} = y_i / L, \quad M_{1,i} = -x_i / L, \quad M_{2,i} = -s_i,

and ``τ_{xy} = L M_{0:2} f``, ``τ_z = M_2 τ_p`` (a rotor spinning about ``+z`` pushes the body
about ``-z``). Presets live in ``quadsim/presets/*.toml``; see ``docs/presets.md`` for the format.
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ._toml import read_entry

__all__ = [
    "Params",
    "invert_curve",
    "list_presets",
    "load_params",
    "rad_s_to_rpm",
    "rpm_to_rad_s",
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


_S = _RPM_TO_RAD_S
_CURVE_RAD = (1.0, _S, _S * _S)  # multiply a per-rad/s curve by this to get it per RPM
_REQ = object()  # default of a required key
_V3, _M3 = ((3,),), ((3, 3), (3,))  # accepted shapes; -1 = any length
# key -> ({accepted unit: factor to the canonical (first) unit}, accepted shapes, default)
_KEYS: dict[str, tuple[dict[str, Any], tuple[tuple[int, ...], ...], Any]] = {
    "mass": ({"kg": 1.0}, ((),), _REQ),
    "gravity": ({"m/s^2": 1.0}, ((),), 9.81),
    "inertia": ({"kg m^2": 1.0}, _M3, _REQ),
    "rotor_positions": ({"m": 1.0}, ((-1, 2),), _REQ),
    "rotor_spin": ({"1": 1.0}, ((-1,),), _REQ),
    "prop_inertia": ({"kg m^2": 1.0}, ((),), 0.0),
    "thrust_curve": (
        {"N, N/RPM, N/RPM^2": 1.0, "N, N/(rad/s), N/(rad/s)^2": _CURVE_RAD},
        _V3,
        _REQ,
    ),
    "torque_curve": (
        {"N m, N m/RPM, N m/RPM^2": 1.0, "N m, N m/(rad/s), N m/(rad/s)^2": _CURVE_RAD},
        _V3,
        _REQ,
    ),
    "rotor_dyn_coef": ({"1/s, 1/(s RPM), 1/s, 1/(s RPM)": 1.0}, ((4,),), None),
    "motor_constant": ({"1/s": 1.0}, ((),), None),
    "rotor_speed_range": ({"RPM": 1.0, "rad/s": 1.0 / _S}, ((2,),), None),
    "rotor_thrust_range": ({"N": 1.0}, ((2,),), None),
    "drag_matrix": ({"N s/m": 1.0}, _M3, (0.0, 0.0, 0.0)),
    "drag_coef": ({"N s^2/m^2": 1.0}, ((),), 0.0),
    "rot_drag_coef": ({"N m s/rad": 1.0}, ((),), 0.0),
}
_TEXT_KEYS = ("name", "description", "layout")


def list_presets() -> list[str]:
    """Sorted names of the packaged presets (``quadsim/presets/*.toml``)."""
    root = resources.files("quadsim") / "presets"
    return sorted(p.name[:-5] for p in root.iterdir() if p.name.endswith(".toml"))


def load_params(name_or_path: str | os.PathLike[str]) -> Params:
    """Load and validate a drone from a preset name (e.g. ``"cf2x_L250"``) or a TOML file path.

    A string ending in ``.toml`` or containing a path separator, and any ``os.PathLike``, is a
    path; anything else is a preset name. Every failure is a ``ValueError`` naming the file (path
    or preset) and the offending key. Presets must give ``unit`` and ``source`` for every value.
    """
    seps = [s for s in (os.sep, os.altsep, "/") if s]
    is_path = not isinstance(name_or_path, str) or name_or_path.endswith(".toml")
    if is_path or any(s in name_or_path for s in seps):
        path = Path(name_or_path)
        where, stem, preset = str(path), path.stem, False
        raw = path.read_bytes()
    else:
        names = list_presets()
        if name_or_path not in names:
            raise ValueError(f"unknown preset {name_or_path!r}; available presets: {names}")
        where, stem, preset = f"preset {name_or_path!r}", name_or_path, True
        raw = (resources.files("quadsim") / "presets" / f"{name_or_path}.toml").read_bytes()
    try:
        doc = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{where}: malformed TOML: {e}") from e
    return _build(doc, where, stem, preset)


def _build(doc: dict[str, Any], where: str, stem: str, preset: bool) -> Params:
    def fail(key: str, msg: str) -> ValueError:
        return ValueError(f"{where}: key {key!r}: {msg}")

    def need(ok: Any, key: str, msg: str) -> None:
        if not ok:
            raise fail(key, msg)

    allowed = [*_TEXT_KEYS, *_KEYS]
    for key in doc:
        need(key in allowed, key, f"unknown key; allowed: {allowed}")
    for key in _TEXT_KEYS:
        need(isinstance(doc.get(key, ""), str), key, f"must be a string; got {doc.get(key)!r}")
    v = {k: _value(doc, k, preset, fail) for k in _KEYS}

    mass, g = float(v["mass"]), float(v["gravity"])
    need(mass > 0.0, "mass", f"must be > 0; got {mass}")
    need(g > 0.0, "gravity", f"must be > 0; got {g}")
    J = np.diag(v["inertia"]) if v["inertia"].ndim == 1 else v["inertia"]
    sym = np.max(np.abs(J - J.T)) <= 1e-12 * np.max(np.abs(J))
    need(sym, "inertia", f"must be symmetric; got {J.tolist()}")
    J = 0.5 * (J + J.T)
    eig = np.linalg.eigvalsh(J)
    need(eig[0] > 0.0, "inertia", f"must be positive definite; eigenvalues {eig.tolist()}")
    tri = eig[0] + eig[1] >= eig[2] * (1.0 - 1e-9)  # holds for every real rigid body
    need(tri, "inertia", f"principal moments {eig.tolist()} break the triangle inequality")
    pos, spin = v["rotor_positions"], v["rotor_spin"]
    n, L = pos.shape[0], float(np.max(np.abs(pos), initial=0.0))
    need(n >= 3, "rotor_positions", f"need at least 3 rotors; got {n}")
    need(L > 0.0, "rotor_positions", "all rotors sit at the centre of mass")
    ok = spin.shape == (n,) and np.all(np.abs(spin) == 1.0)
    need(ok, "rotor_spin", f"must be {n} entries of +1 or -1; got {spin.tolist()}")
    for key in ("prop_inertia", "drag_coef", "rot_drag_coef"):
        need(v[key] >= 0.0, key, f"must be >= 0; got {v[key]}")
    D = np.diag(v["drag_matrix"]) if v["drag_matrix"].ndim == 1 else v["drag_matrix"]
    nsd = np.linalg.eigvalsh(0.5 * (D + D.T))[-1] <= 1e-12 * np.max(np.abs(D))
    need(nsd, "drag_matrix", f"must be negative semi-definite (force = D v); got {D.tolist()}")

    km, dyn = v["motor_constant"], v["rotor_dyn_coef"]
    one = (km is None) != (dyn is None)
    need(one, "motor_constant", "give exactly one of 'motor_constant', 'rotor_dyn_coef'")
    if km is not None:
        need(km > 0.0, "motor_constant", f"must be > 0; got {km}")
        dyn = np.array([km, 0.0, km, 0.0])
    ok = np.all(dyn >= 0.0) and dyn[0] + dyn[1] > 0.0 and dyn[2] + dyn[3] > 0.0
    need(ok, "rotor_dyn_coef", f"must be >= 0 with spin-up and -down terms; got {dyn.tolist()}")
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
    slope = min(thrust[1] + 2.0 * thrust[2] * w for w in (lo, hi))  # thrust' is linear in Ω
    ok = np.polyval(thrust[::-1], hi) > 0.0 and slope >= 0.0
    need(ok, "thrust_curve", f"must give increasing, positive thrust up to {hi} RPM")

    M = np.stack([pos[:, 1] / L, -pos[:, 0] / L, -spin]) + 0.0  # + 0.0 turns -0.0 into 0.0
    arrays = dict(gravity_vec=[0.0, 0.0, -g], J=J, J_inv=np.linalg.inv(J), mixing_matrix=M)
    arrays |= dict(rotor_positions=pos, rotor_spin=spin, rpm2thrust=thrust, drag_matrix=D)
    arrays |= dict(rpm2torque=v["torque_curve"], rotor_dyn_coef=dyn)
    for name, a in arrays.items():
        a = arrays[name] = np.array(a, dtype=np.float64)
        a.flags.writeable = False
    scalars = {k: float(v[k]) for k in ("prop_inertia", "drag_coef", "rot_drag_coef")}
    name = doc.get("name", stem)
    return Params(name=name, mass=mass, L=L, rpm_min=lo, rpm_max=hi, **scalars, **arrays)


def _value(doc: dict[str, Any], key: str, preset: bool, fail: Any) -> Any:
    """The value of ``key`` in canonical units, shape-checked and finite (or its default)."""
    units, shapes, default = _KEYS[key]
    if key not in doc:
        if default is _REQ:
            raise fail(key, "required key is missing")
        return None if default is None else np.asarray(default, dtype=np.float64)
    a, factor = read_entry(doc, key, units, packaged=preset, packaged_name="presets",
                           normalize=_norm_unit, fail=fail)  # fmt: skip
    ok = (
        len(s) == a.ndim and all(w in (-1, d) for w, d in zip(s, a.shape, strict=True))
        for s in shapes
    )
    if not any(ok):
        want = " or ".join(str(s).replace("-1", "N") for s in shapes)
        raise fail(key, f"wrong shape {a.shape}; expected {want}")
    if not np.all(np.isfinite(a)):
        raise fail(key, f"must be finite; got {a.tolist()!r}")
    return a * np.asarray(factor)


def _norm_unit(unit: str) -> str:
    """A unit as spelled in ``_KEYS``: single spaces, ``", "`` between the curve's units."""
    return re.sub(r"\s*,\s*", ", ", " ".join(unit.split()))
