r"""Component kernels shared by the rigid-body models (rotors, Newton, Euler).

Every function here works on tuples of components (arrays of one batch shape, or CasADi scalars)
and takes an ``ops`` namespace for the few non-arithmetic functions, see
:mod:`quadsim.physics._array`.

Rotors (speeds ``Ω_i`` in RPM, ``N`` rotors, seed 000):

.. math::

    f_i = k_0 + k_1 Ω_i + k_2 Ω_i^2, \qquad τ_i = m_0 + m_1 Ω_i + m_2 Ω_i^2,

    \dot Ω_i = c_0 (Ω^{cmd}_i - Ω_i) + c_1 (Ω^{cmd\,2}_i - Ω_i^2) \text{ if } Ω^{cmd}_i > Ω_i,
    \text{ else the same with } c_2, c_3.

Body wrench, with mixing matrix ``M`` (3 x N), lever ``L`` and propeller inertia ``J_p``:

.. math::

    F_b = (0, 0, Σ f_i), \quad
    τ = (L M_0 f,\; L M_1 f,\; M_2 τ_p) - ω × h_r + (0, 0, J_p M_2 \dot Ω),
    \quad h_r = -J_p (M_2 Ω)\, e_z .

``h_r`` is the angular momentum of the rotors in the body frame: a rotor with yaw-row sign
``M_{2,i}`` spins about ``-M_{2,i} e_z`` (its drag pushes the body the other way). Rotor speeds are
converted to rad/s for ``h_r`` and ``\dot Ω``. The gyroscopic torque ``-ω × h_r`` is perpendicular
to ``ω`` and does no work; the last term is the reaction to spinning the rotors up.

Newton and Euler, with ``R = R_wb`` (of a quaternion of any nonzero norm, or of Euler angles),
air-relative velocity ``a = v - w`` (wind ``w``), linear body
drag matrix ``D``, quadratic drag ``k_d`` and rotational drag ``c_ω`` (seed 002) and world
disturbances:

.. math::

    m \dot v = m g + R F_b + R D R^T a - k_d \lVert a \rVert a + f_{dist}, \qquad
    J \dot ω = τ - c_ω ω + R^T τ_{dist} - ω × J ω .

Axial inflow (:mod:`quadsim.physics.motor_thermal`, coefficient ``c_i`` [s/m], default 0): every
rotor's thrust ``f_i`` is multiplied by ``max(1 - c_i v_z, 0)``, with ``v_z = (R^T a)_z`` the
air-relative velocity along body ``+z`` (climb positive), so the thrust and the roll and pitch
torques it makes fall in a climb; the rotors' drag torque ``τ_i`` is left as it is (the flights
that identified ``c_i`` measure thrust only).

Motor warm-up (:mod:`quadsim.physics.motor_thermal`, with the state ``θ_i`` per rotor,
``motor_heat``, when a model carries it): every rotor's thrust is also multiplied by
``max(1 - c_w θ_i, 0)``, and ``\dot θ_i = ((Ω_i / Ω_h)^3 - θ_i) / τ_w`` (``warmup_coef``,
``warmup_time``, ``hover_rpm``; ``Ω_i`` the rotor's actual speed).

Terms whose parameter is an exact Python ``0`` are left out of the traced code.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np

from .._array import as_like, check_real, check_shape, unstack
from ..motor_thermal import inflow_factor, warmup_drive, warmup_factor, warmup_rate
from ..rotation import is_const, kcross, kdot

RPM_TO_RAD_S = 2.0 * math.pi / 60.0

Comp = tuple[Any, ...]


ROTOR_PARAMS: dict[str, tuple[int | None, ...]] = {
    "mass": (),
    "gravity_vec": (3,),
    "J": (3, 3),
    "J_inv": (3, 3),
    "L": (),
    "mixing_matrix": (3, None),
    "prop_inertia": (),
    "rpm2thrust": (3,),
    "rpm2torque": (3,),
    "rotor_dyn_coef": (4,),
    "drag_matrix": (3, 3),
    "drag_coef": (),
    "rot_drag_coef": (),
    "inflow_coef": (),
    "warmup_coef": (),
    "warmup_time": (),
    "hover_rpm": (),
}
"""Keyword parameters of the rotor-level models and their trailing shapes (``None``: rotors)."""


DRAG_DEFAULTS = {"drag_coef": 0.0, "rot_drag_coef": 0.0, "inflow_coef": 0.0, "warmup_coef": 0.0,
                 "warmup_time": math.inf, "hover_rpm": 1.0}  # fmt: skip
"""The rotor-level models' optional parameters: no quadratic or rotational drag, no axial-inflow
thrust loss, no motor warm-up (``hover_rpm`` [RPM], the hover speed ``Ω_h`` the warm-up's drive
is relative to, is then unused)."""


def takes_params(spec: dict, defaults: dict | None = None) -> Callable[[Callable], Callable]:
    """Decorator: ``fn(..., **params)`` takes the model parameters of ``spec`` by keyword.

    Each is a keyword-only argument of the decorated function's signature (what
    ``inspect.signature`` and :func:`quadsim.physics.bind.parametrize` read); a missing one raises
    ``TypeError`` as Python does, unless ``defaults`` gives it a value; an unknown keyword raises
    ``TypeError`` too. ``fn`` gets them all in ``**params``, so the parameter list is written
    once, here, for every model function.
    """
    defaults = defaults or {}
    kw_only, empty = inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.empty

    def wrap(fn: Callable) -> Callable:
        sig = inspect.signature(fn)
        own = [q for q in sig.parameters.values() if q.kind is not q.VAR_KEYWORD]
        names = {q.name for q in own} | set(spec)
        required = [name for name in spec if name not in defaults]
        extra = [inspect.Parameter(name, kw_only, default=defaults.get(name, empty),
                                   annotation=Any) for name in spec]  # fmt: skip

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            for name in required:
                if name not in kwargs:
                    raise TypeError(f"{fn.__name__}() missing required keyword-only argument: "
                                    f"{name!r}")  # fmt: skip
            for name in kwargs:
                if name not in names:
                    raise TypeError(f"{fn.__name__}() got an unexpected keyword argument "
                                    f"{name!r}")  # fmt: skip
            return fn(*args, **{**defaults, **kwargs})

        before = [q for q in own if q.kind is not kw_only]
        call.__signature__ = sig.replace(  # type: ignore[attr-defined]
            parameters=[*before, *extra, *(q for q in own if q.kind is kw_only)])
        return call

    return wrap


def _split(a: Any, ndim: int) -> Any:
    """Nested tuples of components over the last ``ndim`` axes of ``a``."""
    if ndim == 0:
        return a
    rest = (slice(None),) * (ndim - 1)
    return tuple(_split(a[(..., i, *rest)], ndim - 1) for i in range(a.shape[-ndim]))


def _check_param(name: str, want: tuple[int | None, ...], shape: tuple[int, ...]) -> None:
    got = shape[len(shape) - len(want) :] if want else ()
    if len(shape) < len(want) or any(w not in (None, g) for w, g in zip(want, got, strict=True)):
        spec = ", ".join(["..."] + ["N" if w is None else str(w) for w in want])
        raise ValueError(f"parameter {name} must have shape ({spec}); got shape {shape}")


def _check_names(spec: dict, kw: dict) -> None:
    if set(kw) != set(spec):
        missing, extra = sorted(set(spec) - set(kw)), sorted(set(kw) - set(spec))
        raise TypeError(f"model parameters: missing {missing}, unexpected {extra}")


def numeric_params(xp: Any, like: Any, spec: dict, **kw: Any) -> SimpleNamespace:
    """Convert parameters to ``xp`` arrays with the dtype and device of ``like``, then split.

    Parameters may carry leading batch dimensions (one value per drone) that broadcast against the
    state's batch shape.
    """
    _check_names(spec, kw)
    out = {}
    for name, trailing in spec.items():
        raw = kw[name]
        if isinstance(raw, np.ndarray | float | int) and np.ndim(raw) == len(trailing):
            # one drone's values, known now: Python floats (weak scalars keep the state's dtype)
            a = np.asarray(raw, dtype=np.float64)
            _check_param(name, trailing, a.shape)
            out[name] = a.tolist() if a.ndim else float(a)
            continue
        if isinstance(raw, np.ndarray):  # per-drone values known now: fold the uniform entries
            _check_param(name, trailing, raw.shape)
            out[name] = _split_folded(xp, like, np.asarray(raw, dtype=np.float64), len(trailing))
            continue
        a = as_like(xp, raw, like)
        _check_param(name, trailing, tuple(a.shape))
        out[name] = _split(a, len(trailing))
    return SimpleNamespace(**out)


def _split_folded(xp: Any, like: Any, a: np.ndarray, ndim: int) -> Any:
    """:func:`_split` of per-drone NumPy values; an entry equal for every drone becomes a float.

    So a batch of diagonal inertias carries only its diagonal, and a parameter that does not
    actually vary costs nothing beyond the shared case.
    """
    if ndim == 0:
        flat = a.reshape(-1)
        return float(flat[0]) if np.all(flat == flat[0]) else as_like(xp, a, like)
    return tuple(_split_folded(xp, like, a[..., i, *([slice(None)] * (ndim - 1))], ndim - 1)
                 for i in range(a.shape[-ndim]))  # fmt: skip


def symbolic_params(spec: dict, **kw: Any) -> SimpleNamespace:
    """Parameters as nested lists of Python floats (one drone), for the CasADi twins."""
    _check_names(spec, kw)
    out = {}
    for name, trailing in spec.items():
        a = np.asarray(kw[name], dtype=np.float64)
        _check_param(name, trailing, a.shape)
        if a.ndim != len(trailing):
            raise ValueError(f"symbolic models take one drone's parameters; {name}: {a.shape}")
        out[name] = a.tolist() if a.ndim else float(a)
    return SimpleNamespace(**out)


def check_state(xp: Any, **arrays: tuple[Any, int]) -> tuple[Any, ...]:
    """Check ``name=(array, k)`` pairs and broadcast them to one batch shape.

    Each non-``None`` array must hold real numbers and have shape ``(..., k)``, and the leading
    batch shapes must broadcast together; the arrays are returned in the order given, each
    broadcast to ``(*batch, k)`` (views where the backend has them), so every derivative a model
    returns has the same batch shape.

    Raises:
        ValueError: Naming the array whose dtype or shape is wrong, or the batch shapes that do
            not broadcast.
    """
    given = {name: (x, k) for name, (x, k) in arrays.items() if x is not None}
    for name, (x, k) in given.items():
        check_shape(x, (k,), name)
        check_real(x, name)
    batches = {name: tuple(x.shape[:-1]) for name, (x, _) in given.items()}
    try:
        batch = np.broadcast_shapes(*batches.values())
    except ValueError:
        shapes = ", ".join(f"{name} {b}" for name, b in batches.items())
        raise ValueError(f"the state's batch shapes do not broadcast together: {shapes}") from None
    out = []
    for x, k in arrays.values():
        if x is None or tuple(x.shape[:-1]) == batch:
            out.append(x)
        else:
            out.append(xp.broadcast_to(x, (*batch, k)))
    return tuple(out)


def unstack_opt(*arrays: Any) -> list[tuple | None]:
    """:func:`unstack` each array, passing ``None`` through."""
    return [None if a is None else unstack(a) for a in arrays]


def casadi_state(parts: dict[str, int], n_cmd: int) -> tuple[dict, Any, Any]:
    """Fresh CasADi ``MX`` symbols for a state made of named parts, and the command ``U``.

    Returns:
        ``(sym, U, comps)``: the symbols by name, the command symbol, and ``comps(name)`` giving a
        part as a tuple of scalar components (``None`` for an absent part).
    """
    import casadi as cs

    sym = {k: cs.MX.sym(k, d) for k, d in parts.items() if d}
    U = cs.MX.sym("cmd", n_cmd)

    def comps(name: str) -> tuple | None:
        s = U if name == "cmd" else sym.get(name)
        return None if s is None else tuple(s[i] for i in range(s.shape[0]))

    return sym, U, comps


def casadi_assemble(sym: dict, derivs: list, U: Any, outputs: tuple[str, ...]) -> tuple:
    """``(X_dot, X, U, Y)`` from symbols and per-part derivatives (``None``: constant part)."""
    import casadi as cs

    X_dot = cs.vertcat(*[cs.MX.zeros(s.shape[0]) if d is None else cs.vertcat(*d)
                         for s, d in zip(sym.values(), derivs, strict=True)])  # fmt: skip
    Y = cs.vertcat(*[sym[k] for k in outputs])
    return X_dot, cs.vertcat(*sym.values()), U, Y


def matvec(A: tuple[Comp, ...], v: Comp) -> Comp:
    """``A @ v`` for a matrix given as row tuples."""
    return tuple(kdot(row, v) for row in A)


def matTvec(A: tuple[Comp, ...], v: Comp) -> Comp:
    """``A.T @ v`` for a matrix given as row tuples."""
    cols = len(A[0])
    return tuple(kdot(tuple(row[j] for row in A), v) for j in range(cols))


def poly2(c: Comp, x: Any) -> Any:
    """``c0 + c1 x + c2 x²`` (terms with an exact zero coefficient are skipped)."""
    return kdot(c, (1.0, x, x * x))


def rotor_speed_dot(cmd: Comp, rotor: Comp, c: Comp, ops: Any) -> Comp:
    """Asymmetric quadratic rotor dynamics of seed 000 [RPM/s], one entry per rotor."""
    out = []
    for u, w in zip(cmd, rotor, strict=True):
        du, dsq = u - w, u * u - w * w
        out.append(ops.where(u > w, c[0] * du + c[1] * dsq, c[2] * du + c[3] * dsq))
    return tuple(out)


def rotor_wrench(rotor: Comp, rotor_dot: Comp | None, ang_vel: Comp, p: Any,
                 thrust_scale: Any = None) -> tuple[Any, Comp]:  # fmt: skip
    """Total thrust [N] along body z and body torque [N m] from rotor speeds [RPM].

    Args:
        rotor: Actual rotor speeds [RPM], one component per rotor.
        rotor_dot: Rotor accelerations [RPM/s], or ``None`` when rotor speeds are not states.
        ang_vel: Body angular velocity [rad/s].
        p: Parameters.
        thrust_scale: A factor [1] on every rotor's thrust (the axial inflow's), a tuple of one
            per rotor (with the warm-up's), or ``None``.
    """
    f = tuple(poly2(p.rpm2thrust, w) for w in rotor)
    if isinstance(thrust_scale, tuple):
        f = tuple(fi * si for fi, si in zip(f, thrust_scale, strict=True))
    elif thrust_scale is not None:
        f = tuple(fi * thrust_scale for fi in f)
    tq = tuple(poly2(p.rpm2torque, w) for w in rotor)
    thrust = f[0]
    for fi in f[1:]:
        thrust = thrust + fi
    m_yaw = p.mixing_matrix[2]
    h_z = -p.prop_inertia * RPM_TO_RAD_S * kdot(m_yaw, rotor)  # rotor momentum along body z
    gyro = kcross(ang_vel, (0.0, 0.0, h_z))  # ω × h_r
    tau_z = kdot(m_yaw, tq)
    if rotor_dot is not None:
        tau_z = tau_z + p.prop_inertia * RPM_TO_RAD_S * kdot(m_yaw, rotor_dot)
    torque = (
        p.L * kdot(p.mixing_matrix[0], f) - gyro[0],
        p.L * kdot(p.mixing_matrix[1], f) - gyro[1],
        tau_z,
    )
    return thrust, torque


def linear_accel(
    R: tuple[Comp, Comp, Comp],
    vel: Comp,
    thrust: Any,
    p: Any,
    dist_f: Comp | None,
    wind: Comp | None = None,
    ops: Any = None,
) -> Comp:
    """World acceleration [m/s²]: gravity, body thrust, drag, world disturbance.

    Drag acts on the air-relative velocity ``a = vel - wind`` (world frame, m/s): linear body drag
    ``R D Rᵀ a`` and quadratic drag ``-k_d |a| a`` (seed 002; needs ``ops`` when ``k_d != 0``).
    """
    air = vel if wind is None else tuple(vel[i] - wind[i] for i in range(3))
    force = [R[i][2] * thrust for i in range(3)]
    if not all(is_const(d, 0) for row in p.drag_matrix for d in row):
        drag_w = matvec(R, matvec(p.drag_matrix, matTvec(R, air)))
        force = [force[i] + drag_w[i] for i in range(3)]
    if not is_const(p.drag_coef, 0):
        speed = norm_safe(air, ops)
        force = [force[i] - p.drag_coef * speed * air[i] for i in range(3)]
    if dist_f is not None:
        force = [force[i] + dist_f[i] for i in range(3)]
    inv_m = 1.0 / p.mass
    return tuple(kdot((p.gravity_vec[i], inv_m), (1.0, force[i])) for i in range(3))


def norm_safe(v: Comp, ops: Any) -> Any:
    """``|v|`` with a finite derivative at ``v = 0`` (double where: no ``sqrt(0)`` gradient)."""
    s2 = v[0] * v[0] + v[1] * v[1] + v[2] * v[2]
    pos = s2 > 0
    return ops.where(pos, ops.sqrt(ops.where(pos, s2, 1.0 + 0.0 * s2)), 0.0 * s2)


def rotational_drag(torque: Comp, ang_vel: Comp, p: Any) -> Comp:
    """Body torque minus linear rotational drag ``c_ω ω`` [N m] (seed 002)."""
    if is_const(p.rot_drag_coef, 0):
        return torque
    return tuple(torque[i] - p.rot_drag_coef * ang_vel[i] for i in range(3))


def angular_accel(
    R: tuple[Comp, Comp, Comp], ang_vel: Comp, torque: Comp, p: Any, dist_t: Comp | None
) -> Comp:
    """Body angular acceleration [rad/s²] from Euler's equation with a world torque disturbance."""
    if dist_t is not None:
        dt_b = matTvec(R, dist_t)
        torque = tuple(torque[i] + dt_b[i] for i in range(3))
    coriolis = kcross(ang_vel, matvec(p.J, ang_vel))
    return matvec(p.J_inv, tuple(torque[i] - coriolis[i] for i in range(3)))


def rotor_accels(R: tuple[Comp, Comp, Comp], vel: Comp, ang_vel: Comp, cmd: Comp,
                 rotor_vel: Comp | None, dist_f: Comp | None, dist_t: Comp | None, p: Any,
                 ops: Any, wind: Comp | None, heat: Comp | None = None,
                 ) -> tuple[Comp, Comp, Comp | None, Comp | None]:  # fmt: skip
    """``(vel_dot, ang_vel_dot, rotor_vel_dot, motor_heat_dot)`` of a rotor-driven rigid body at
    attitude ``R``.

    The rotors' speeds are ``rotor_vel`` [RPM] driven toward ``cmd`` (:func:`rotor_speed_dot`),
    or ``cmd`` itself when ``rotor_vel`` is ``None`` (then ``rotor_vel_dot`` is ``None``); their
    wrench (:func:`rotor_wrench`, its thrust scaled by the axial inflow when ``p.inflow_coef`` is
    not an exact 0, and per rotor by the warm-up of the motors' state ``heat``, ``θ`` [1], when
    given; ``motor_heat_dot`` is ``None`` without) with drag, wind and disturbances gives the
    accelerations (:func:`linear_accel`, :func:`angular_accel`). The one body of every
    rotor-level model's kernel; the models differ in their attitude and its rate.
    """  # noqa: D205
    if rotor_vel is None:
        rotor, rotor_dot = cmd, None
    else:
        rotor, rotor_dot = rotor_vel, rotor_speed_dot(cmd, rotor_vel, p.rotor_dyn_coef, ops)
    scale = None
    if not is_const(p.inflow_coef, 0):
        air = vel if wind is None else tuple(vel[i] - wind[i] for i in range(3))
        v_axial = kdot((R[0][2], R[1][2], R[2][2]), air)  # (Rᵀ a)_z: along body +z
        scale = inflow_factor(v_axial, p.inflow_coef, ops)
    heat_dot = None
    if heat is not None:
        warm = tuple(warmup_factor(th, p.warmup_coef, ops) for th in heat)
        scale = warm if scale is None else tuple(w * scale for w in warm)
        heat_dot = tuple(warmup_rate(th, warmup_drive(w, p.hover_rpm), p.warmup_time)
                         for th, w in zip(heat, rotor, strict=True))  # fmt: skip
    thrust, torque = rotor_wrench(rotor, rotor_dot, ang_vel, p, scale)
    vel_dot = linear_accel(R, vel, thrust, p, dist_f, wind, ops)
    ang_vel_dot = angular_accel(R, ang_vel, rotational_drag(torque, ang_vel, p), p, dist_t)
    return vel_dot, ang_vel_dot, rotor_dot, heat_dot
