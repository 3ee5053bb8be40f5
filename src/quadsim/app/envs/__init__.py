"""Gymnasium environments: ``quadsim/Hover-v0``, ``Track-v0`` and ``Recover-v0`` (docs/envs.md).

* :class:`HoverEnv`, :class:`TrackEnv`: one drone (:class:`gymnasium.Env`);
* :class:`QuadsimVectorEnv`, :class:`HoverVectorEnv`, :class:`TrackVectorEnv`: many drones in
  one batched simulator (:class:`gymnasium.vector.VectorEnv`) with autoreset.

This subpackage needs ``gymnasium`` (``pip install 'quadsim[gym]'``); ``import quadsim`` does not
import it. Importing ``quadsim.app.envs`` registers the ids (idempotently, via
:func:`register_envs`), so ``gymnasium.make("quadsim.app.envs:quadsim/Hover-v0")`` works without
any other import, and ``gymnasium.make("quadsim/Hover-v0")`` works after ``import
quadsim.app.envs``.
"""

from __future__ import annotations

from .core import ENV_WORLD
from .disturbances import Disturbances
from .recover import RecoverEnv, RecoverVectorEnv
from .reward import RewardWeights, Termination
from .single import HoverEnv, QuadsimEnv, TrackEnv, make_trajectory
from .starts import InitRanges
from .tasks import HoverTask, TrackTask
from .vector import HoverVectorEnv, QuadsimVectorEnv, TrackVectorEnv

__all__ = [
    "ENV_IDS",
    "ENV_WORLD",
    "Disturbances",
    "HoverEnv",
    "HoverTask",
    "HoverVectorEnv",
    "InitRanges",
    "QuadsimEnv",
    "QuadsimVectorEnv",
    "RecoverEnv",
    "RecoverVectorEnv",
    "RewardWeights",
    "Termination",
    "TrackEnv",
    "TrackTask",
    "TrackVectorEnv",
    "make_trajectory",
    "register_envs",
]

MAX_EPISODE_STEPS = 500
"""Registered episode length: 500 control steps = 5 s at the default 100 Hz."""

ENV_IDS = {
    "quadsim/Hover-v0": ("quadsim.app.envs.single:HoverEnv",
                         "quadsim.app.envs.vector:HoverVectorEnv"),
    "quadsim/Track-v0": ("quadsim.app.envs.single:TrackEnv",
                         "quadsim.app.envs.vector:TrackVectorEnv"),
    "quadsim/Recover-v0": (
        "quadsim.app.envs.recover:RecoverEnv",
        "quadsim.app.envs.recover:RecoverVectorEnv",
    ),
}
"""Registered ids -> (entry point, vector entry point)."""


def register_envs() -> None:
    """Register the ids of :data:`ENV_IDS` with Gymnasium (idempotent).

    Both get ``max_episode_steps=500`` (a :class:`gymnasium.wrappers.TimeLimit` for
    ``gymnasium.make``; passed to the vector environment by ``gymnasium.make_vec``) and a
    ``vector_entry_point``, so ``gymnasium.make_vec(id, num_envs=...)`` builds one batched
    simulator instead of ``num_envs`` copies.
    """
    from gymnasium.envs.registration import register, registry

    for env_id, (entry, vector_entry) in ENV_IDS.items():
        if env_id in registry:
            continue
        register(
            id=env_id,
            entry_point=entry,
            vector_entry_point=vector_entry,
            max_episode_steps=MAX_EPISODE_STEPS,
        )


register_envs()
