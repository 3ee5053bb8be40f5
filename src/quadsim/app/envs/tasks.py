"""The tasks of the environments: the reference an environment follows (:class:`TrackTask`) or
holds (:class:`HoverTask`), evaluated at the control steps' times."""  # noqa: D205, D209

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...loop.initial import make_trajectory

__all__ = ["HoverTask", "TrackTask"]


class TrackTask:
    """Follow a trajectory ``traj(t) -> Reference`` (:mod:`quadsim.loop.trajectories`).

    A trajectory that is constant from the start (``duration == 0``, e.g.
    :class:`~quadsim.loop.trajectories.Hover`) is evaluated once.

    Args:
        trajectory: Callable of time [s] (any shape ``(...)``) returning a
            :class:`~quadsim.loop.trajectories.Reference` with ``pos``, ``vel`` of shape ``(...,
            3)``.
        future: Look-ahead times ``τ_j`` [s] of the reference points in the observation.

    Attributes:
        constant: ``(pos, vel)`` of a reference that does not move (a trajectory of
            ``duration`` 0: a hover point), else ``None``; the compiled step folds it in.
    """

    name = "track"

    def __init__(self, trajectory: Callable, future: Any = (0.1, 0.25, 0.5)) -> None:
        if not callable(trajectory):
            raise ValueError(f"trajectory must be a callable t -> Reference; got {trajectory!r}")
        self.trajectory = trajectory
        self.future = tuple(float(x) for x in future)
        self.constant = None
        if getattr(trajectory, "duration", None) == 0.0:
            ref = trajectory(0.0)
            self.constant = (np.asarray(ref.pos, dtype=np.float64),
                              np.asarray(ref.vel, dtype=np.float64))  # fmt: skip

    def reference(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Reference position and velocity ``(n, 3)`` at times ``t`` ``(n,)`` [s]."""
        shape = (*np.shape(t), 3)
        if self.constant is not None:
            pos, vel = self.constant
        else:
            ref = self.trajectory(np.asarray(t, dtype=np.float64))
            pos, vel = np.asarray(ref.pos, dtype=np.float64), np.asarray(ref.vel, dtype=np.float64)
        return np.broadcast_to(pos, shape), np.broadcast_to(vel, shape)

    def ahead(self, t: np.ndarray) -> np.ndarray:
        """Reference positions ``(n, J, 3)`` at ``t + τ_j``."""
        t = np.asarray(t, dtype=np.float64)
        if not self.future:
            return np.zeros((*t.shape, 0, 3))
        tt = t[..., None] + np.asarray(self.future)
        if self.constant is not None:
            return np.broadcast_to(self.constant[0], (*tt.shape, 3))
        pos = np.asarray(self.trajectory(tt).pos, dtype=np.float64)
        return np.broadcast_to(pos, (*tt.shape, 3))


class HoverTask(TrackTask):
    """Hold a fixed target position (yaw is free): :class:`TrackTask` of a hover reference.

    Args:
        target: World target [m], ``(3,)``.
    """

    name = "hover"

    def __init__(self, target: Any = (0.0, 0.0, 1.0)) -> None:
        target = np.asarray(target, dtype=np.float64)
        if target.shape != (3,) or not np.all(np.isfinite(target)):
            raise ValueError(f"target must be a finite (3,) position [m]; got {target!r}")
        super().__init__(make_trajectory("hover", center=tuple(target.tolist())), future=())
        self.target = target
