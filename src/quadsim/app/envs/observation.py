r"""The observation of the environments (pure, array API; one implementation for both paths).

With the position error ``e_p = p - p_ref(t)`` [m], the observation (float32), in this order, is
``e_p`` (3), ``v`` (3, world), ``R_wb`` row-major (9), ``ω`` (3, body), ``a_{t-1}`` (k, the action
just applied; zeros after a reset), with ``observe_rotors`` the rotor-speed estimate ``Ω̂`` (N,
normalised like the rotor_speeds action; :mod:`quadsim.app.envs.observer`: the nominal motor model
run on the commands sent), with ``observe_integral`` the position-error integral ``I / I_max`` (3,
same module), with ``observe_body`` the position error and the velocity in the body frame ``R^T
e_p``, ``R^T v`` (3 + 3: what the rotors can act on, the same for every heading); tracking adds
``v_ref(t)`` (3) and ``p - p_ref(t + τ_j)`` (3 per look-ahead time ``τ_j``).
"""

from __future__ import annotations

import math
from typing import Any

from ...physics._array import namespace
from ...physics.rotation import rotate_inverse, to_matrix
from .observer import INTEGRAL_MAX

__all__ = ["finite", "observation", "observation_size"]


def observation_size(act_dim: int, n_rotors: int, rotors: bool = False, integral: bool = False,
                     body: bool = False, look_ahead: int | None = None) -> int:  # fmt: skip
    """The length of :func:`observation`'s vector: ``act_dim`` actions, ``n_rotors`` rotors,
    the options observed, and tracking's ``look_ahead`` points (``None``: hover)."""  # noqa: D205, D209
    return (18 + act_dim + (n_rotors if rotors else 0) + (3 if integral else 0)
            + (6 if body else 0) + (0 if look_ahead is None else 3 + 3 * look_ahead))  # fmt: skip


def observation(
    pos: Any, quat: Any, vel: Any, ang_vel: Any, last_action: Any, ref_pos: Any, ref_vel: Any,
    ahead: Any = None, rotors: Any = None, integral: Any = None, body: bool = False,
) -> tuple[Any, Any, Any, Any]:  # fmt: skip
    """The observation and the errors behind the reward (pure, array API, batch shape ``...``).

    The one implementation of the module docstring's observation:
    :class:`~quadsim.app.envs.core.QuadCore` calls it on NumPy arrays, the compiled env step
    (:mod:`quadsim.app.envs.compiled`) traces it for one drone.

    Args:
        pos: World position ``(..., 3)`` [m].
        quat: Attitude ``(..., 4)`` (xyzw).
        vel: World velocity ``(..., 3)`` [m/s].
        ang_vel: Body rates ``(..., 3)`` [rad/s].
        last_action: The action just applied ``(..., k)``.
        ref_pos: Reference position at the current time [m].
        ref_vel: Reference velocity at the current time [m/s].
        ahead: Reference positions at the look-ahead times ``(..., J, 3)`` (tracking), or
            ``None`` (hover: no reference terms).
        rotors: The observed rotor-speed estimate ``(..., N)``
            (:func:`quadsim.app.envs.observer.normalized`), or ``None`` (not observed).
        integral: The position-error integral ``(..., 3)`` [m s]
            (:func:`quadsim.app.envs.observer.integrate_error`), or ``None`` (not observed).
        body: Also observe ``R^T e_p`` and ``R^T v`` (the body frame).

    Returns:
        ``(obs, e_p, e_v, R_zz)``: observation ``(..., obs_dim)`` in the state's dtype (non-finite
        entries as ``numpy.nan_to_num`` with ±1e6), position and velocity errors, and ``R_zz``.
    """
    xp = namespace(pos, quat, vel, ang_vel)
    R = to_matrix(quat)
    e_p = pos - ref_pos
    R9 = xp.reshape(R, (*R.shape[:-2], 9))
    parts = [e_p, vel, xp.clip(R9, -1.0, 1.0), ang_vel, last_action]
    if rotors is not None:
        parts.append(rotors)
    if integral is not None:
        parts.append(integral * (1.0 / INTEGRAL_MAX))
    if body:
        parts += [rotate_inverse(quat, e_p), rotate_inverse(quat, vel)]
    if ahead is not None:
        d = pos[..., None, :] - ahead
        parts += [ref_vel, xp.reshape(d, (*d.shape[:-2], d.shape[-2] * 3))]
    obs = xp.concat([xp.broadcast_to(p, (*e_p.shape[:-1], p.shape[-1])) for p in parts], axis=-1)
    return finite(obs), e_p, vel - ref_vel, R[..., 2, 2]


def finite(obs: Any) -> Any:
    """``obs`` with its non-finite entries as :func:`numpy.nan_to_num` with ±1e6 (NaN: 0, ±inf:
    ±1e6; pure, array API): what an observation holds instead, its sensor readings included."""  # noqa: D205, D209
    xp = namespace(obs)
    big = xp.where(obs > 0.0, 1e6, xp.where(obs < 0.0, -1e6, 0.0))
    return xp.where(xp.abs(obs) < math.inf, obs, big)
