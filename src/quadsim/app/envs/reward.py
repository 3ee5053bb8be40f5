r"""The reward and the termination of a control step (pure, array API) and their settings.

With the position error ``e_p = p - p_ref(t)`` [m], the velocity error ``e_v = v - v_ref(t)``
[m/s] (hover: ``v_ref = 0``), body rates ``ω`` [rad/s] and actions ``a_t``:

* reward ``r = exp(-(w_p ‖e_p‖ + w_v ‖e_v‖ + w_ω ‖ω‖ + w_a ‖a_t - a_{t-1}‖
  + w_R (1 - R_zz) / 2))`` ∈ (0, 1] (``(1 - R_zz) / 2`` is 0 upright, 1 upside down),
  minus ``crash_penalty`` on the step that terminates (weights: :class:`RewardWeights`);
* termination: crash (the world's ground impact, boxes or bounds), a simulator fault (diverged
  state), ``‖e_p‖ > max_pos_error`` or tilt ``arccos(R_zz) > max_tilt`` (limits:
  :class:`Termination`).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from ...physics._array import namespace

__all__ = ["RewardWeights", "Termination", "check_weights", "outcome"]


class RewardWeights(NamedTuple):
    """Weights of the reward (module docstring), all finite and >= 0.

    ``r = exp(-(w_p ‖e_p‖ + w_v ‖e_v‖ + w_ω ‖ω‖ + w_a ‖Δa‖ + w_R (1 - R_zz) / 2))``.

    Attributes:
        pos: ``w_p`` [1/m].
        vel: ``w_v`` [s/m].
        ang_vel: ``w_ω`` [s/rad].
        action_rate: ``w_a`` (per unit of normalised action change).
        crash_penalty: Subtracted on the step that terminates the episode.
        attitude: ``w_R`` (on ``(1 - R_zz) / 2``: 0 upright, 1 upside down; default 0, Recover-v0
            :data:`quadsim.app.envs.recover.REWARD`).
    """

    pos: float = 1.0
    vel: float = 0.1
    ang_vel: float = 0.05
    action_rate: float = 0.05
    crash_penalty: float = 10.0
    attitude: float = 0.0


def check_weights(w: RewardWeights) -> RewardWeights:
    """``w`` if every weight is a finite number >= 0 (else ValueError naming it)."""
    for name, v in w._asdict().items():
        ok = isinstance(v, (int, float, np.floating, np.integer)) and not isinstance(v, bool)
        if not (ok and math.isfinite(v) and v >= 0):
            raise ValueError(f"reward.{name} must be a finite number >= 0; got {v!r}")
    return w


class Termination(NamedTuple):
    """Termination limits besides crashes and faults (``None`` disables one).

    Attributes:
        max_pos_error: Largest distance to the reference ``‖e_p‖`` [m].
        max_tilt: Largest angle between body z and world z [rad].
    """

    max_pos_error: float | None = 2.0
    max_tilt: float | None = math.pi / 2


def outcome(
    e_p: Any, e_v: Any, ang_vel: Any, action: Any, prev_action: Any, crashed: Any, fault: Any,
    R_zz: Any, weights: RewardWeights, termination: Termination,
) -> tuple[Any, Any, Any, Any, Any]:  # fmt: skip
    """Reward and termination of a control step (pure, array API; module docstring).

    Args:
        e_p: Position error ``(..., 3)`` [m].
        e_v: Velocity error ``(..., 3)`` [m/s].
        ang_vel: Body rates [rad/s] ``(..., 3)``.
        action: This step's action ``(..., k)``.
        prev_action: The previous step's action ``(..., k)``.
        crashed: The simulator's crash flags ``(...)`` (booleans).
        fault: The simulator's fault flags ``(...)`` (booleans).
        R_zz: ``cos`` of the tilt ``(...)``.
        weights: :class:`RewardWeights`.
        termination: :class:`Termination`.

    Returns:
        ``(reward, terminated, out_of_bounds, tilted, pos_error)``.
    """
    xp = namespace(e_p, e_v, ang_vel)

    def norm(v: Any) -> Any:
        return xp.sqrt(xp.sum(v * v, axis=-1))

    dist = norm(e_p)
    terminated = crashed | fault
    never = xp.zeros_like(dist) > 0.0
    out = never if termination.max_pos_error is None else dist > termination.max_pos_error
    tilted = never if termination.max_tilt is None else R_zz < math.cos(termination.max_tilt)
    if termination.max_pos_error is not None:
        terminated = terminated | out
    if termination.max_tilt is not None:
        terminated = terminated | tilted
    wt = weights
    cost = (wt.pos * dist + wt.vel * norm(e_v) + wt.ang_vel * norm(ang_vel)
            + wt.action_rate * norm(action - prev_action))  # fmt: skip
    if wt.attitude:  # (left out at 0: nothing changes for the envs that do not use it)
        cost = cost + wt.attitude * 0.5 * (1.0 - R_zz)
    reward = xp.exp(-cost) - wt.crash_penalty * terminated
    reward = xp.where(xp.abs(reward) < math.inf, reward, -wt.crash_penalty)
    return reward, terminated, out, tilted, dist
