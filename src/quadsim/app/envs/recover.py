"""``quadsim/Recover-v0``: seed 001's recovery task, the drone thrown at the wall.

Seed 001 puts a wall at x = 3 m "so the RL recovery policy has something to be thrown at". Each
episode throws the Crazyflie (``cf2x_L250``) 2 to 2.5 m from the wall: position
``(0.75 ± 0.25, ±0.5, 2.5 ± 0.3)`` m, roll and pitch uniform in ``±π`` (up to upside down), yaw in
``±π``, body rates up to 15 rad/s (uniform in the ball ``‖ω‖ <= 15`` rad/s: any axis, any
magnitude up to the issue's 15 rad/s), velocity 0 to 3 m/s toward the wall (``v_x``) and ``±1``
m/s across and vertically. It must reach and hold a hover at :data:`TARGET` without touching
the floor or the wall (a crash terminates the episode: the world is the floor at z = 0 and the
wall, both with ``crash_speed = 0``). Tilt does not terminate (it starts upside down); leaving
3 m around the target does. Episodes last 500 control steps (5 s).

Everything else is Hover's (observation, reward, action levels; docs/envs.md), except that the
reward also weighs the tilt (:data:`REWARD`: being upright is the first thing a thrown drone
must get back) and the observation includes the rotor-speed estimate (``observe_rotors``,
:mod:`quadsim.app.envs.observer`: the rotors lag the command by about 0.1 s, and recovering from a
tumble depends on what they are doing) and the position error and velocity in the body frame
(``observe_body``: the same for every heading, so that what is learnt at one yaw holds at all).
Domain randomisation for transfer (:data:`RANDOMIZE`,
per environment and episode batch, relative half-widths): mass and inertia ±10 %, thrust curve
±5 %, rotor dynamics (the motor lag) ±10 %.
Action latency, wind and sensor noise are options (``disturbances``,
:mod:`quadsim.app.envs.disturbances`), off by default.
"""

from __future__ import annotations

import math
from typing import Any

from ...physics.world import Ground, World, wall
from .reward import RewardWeights, Termination
from .single import HoverEnv
from .starts import InitRanges
from .vector import HoverVectorEnv

__all__ = [
    "INIT",
    "RANDOMIZE",
    "REWARD",
    "TARGET",
    "TERMINATION",
    "WORLD",
    "RecoverEnv",
    "RecoverVectorEnv",
]

TARGET = (1.0, 0.0, 2.5)
"""The hover to reach [m]: 2 m from the wall, 2.5 m up (room to fall while turning over)."""

WORLD = World(ground=Ground(height=0.0, crash_speed=0.0), boxes=(wall("x", 3.0),))
"""The floor and seed 001's wall at x = 3 m (the solid side x >= 3 m); touching either is a
crash."""

INIT = InitRanges(
    pos=(0.25, 0.5, 0.3),
    vel=(1.5, 1.0, 1.0),
    tilt=math.pi,
    yaw=math.pi,
    ang_vel=0.0,
    pos_center=(-0.25, 0.0, 0.0),
    vel_center=(1.5, 0.0, 0.0),
    ang_vel_norm=15.0,
)
"""The throw (module docstring), around :data:`TARGET`."""

TERMINATION = Termination(max_pos_error=3.0, max_tilt=None)
"""Crashes and faults, and 3 m from the target; no tilt limit."""

REWARD = RewardWeights(action_rate=0.0, attitude=3.0)
"""Hover's reward weights plus ``w_R = 3`` on ``(1 - R_zz) / 2`` (an upside-down drone earns
``e^-3`` of an upright one at the same place: a shaping of the way back) and without the
action-rate term (``w_a = 0``: digging a drone out of a tumble takes bang-bang rotor commands,
which the term held back). Measured in exploratory runs (docs/rl.md): the tilt weight 84-87 %
of the throws recovered instead of 82-85 %, then no action-rate term 89-90 % instead of
87-88 %."""

RANDOMIZE = {"mass": 0.1, "J": 0.1, "rpm2thrust": 0.05, "rotor_dyn_coef": 0.1}
"""Domain randomisation (vector environment): relative half-widths per model parameter."""


def _defaults(kwargs: dict) -> dict:
    kwargs.setdefault("world", WORLD)
    kwargs.setdefault("init", INIT)
    kwargs.setdefault("termination", TERMINATION)
    kwargs.setdefault("reward", REWARD)
    kwargs.setdefault("observe_rotors", True)
    kwargs.setdefault("observe_body", True)
    return kwargs


class RecoverEnv(HoverEnv):
    """One drone thrown at the wall (``quadsim/Recover-v0``; module docstring).

    Args:
        target: The hover to reach [m].
        action_level: See :class:`~quadsim.app.envs.QuadsimEnv`.
        **kwargs: See :class:`~quadsim.app.envs.QuadsimEnv` (``world``, ``init``, ``termination``
            default to this module's).
    """

    def __init__(self, target: Any = TARGET, action_level: str = "rotor_speeds",
                 **kwargs: Any) -> None:  # fmt: skip
        super().__init__(target, action_level, **_defaults(kwargs))


class RecoverVectorEnv(HoverVectorEnv):
    """Vectorised :class:`RecoverEnv` (``make_vec("quadsim/Recover-v0", ...)``), with the domain
    randomisation :data:`RANDOMIZE` unless ``randomize_params`` says otherwise."""  # noqa: D205, D209

    def __init__(self, num_envs: int = 1, target: Any = TARGET,
                 action_level: str = "rotor_speeds", **kwargs: Any) -> None:  # fmt: skip
        kwargs.setdefault("randomize_params", dict(RANDOMIZE))
        super().__init__(num_envs, target, action_level, **_defaults(kwargs))
