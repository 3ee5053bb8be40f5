r"""Errors of a state estimate against the truth: RMSE, NEES, absolute and relative errors.

Analysis of logged flights for the application layer (summaries, figures, validation); the
closed loop does not use it. Everything here is plain NumPy (float64) run once over a logged
flight, not array-API code for the compiled loop. Frames and conventions are quadsim's
(``docs/conventions.md``): positions and velocities in the world frame (ENU, m and m/s),
attitudes as xyzw quaternions ``q`` mapping body vectors to the world, ``R = R_wb =
to_matrix(q)``. Quaternion algebra is :mod:`quadsim.physics.rotation`'s: ``⊗`` is ``multiply``,
``q⁻¹ ∝ q*`` is ``conjugate``, ``exp`` and ``Log`` map rotation vectors to quaternions and back
(``Log`` takes ``w ≥ 0``, so ``q`` and ``-q`` and any nonzero multiple ``c q`` give the same
result: inputs need not be normalised).

Shapes: ``T`` samples in time, optionally ``n`` drones: vectors ``(T, 3)`` or ``(T, n, 3)``,
quaternions ``(T, 4)`` or ``(T, n, 4)``. The RMSE, NEES and summary functions accept both; the
trajectory errors (ATE, RTE) take one trajectory ``(T, ·)`` (loop over the drones).

Modules (their docstrings hold the definitions and references):

* :mod:`~quadsim.app.analysis.accuracy`: root-mean-square errors of position, velocity and
  attitude, and error statistics;
* :mod:`~quadsim.app.analysis.consistency`: the error state, the NEES and its chi-square band
  (Bar-Shalom), and the estimation block of a run's summary;
* :mod:`~quadsim.app.analysis.trajectory_error`: Umeyama alignment (SE(3), Sim(3), position and
  yaw), the absolute trajectory error and the relative error per travelled distance (Zhang and
  Scaramuzza, IROS 2018);
* :mod:`~quadsim.app.analysis.inputs`: the input checks they share.
"""

from __future__ import annotations

from .accuracy import (
    ErrorStats,
    attitude_angle,
    attitude_rmse_deg,
    error_stats,
    rmse,
    vector_rmse,
)
from .consistency import attitude_error_vector, estimation_summary, nees, nees_band, pose_error
from .trajectory_error import (
    ALIGNMENTS,
    ATEResult,
    RTEResult,
    align_trajectory,
    ate,
    ate_from_moments,
    rte,
    umeyama,
)

__all__ = [
    "ALIGNMENTS",
    "ATEResult",
    "ErrorStats",
    "RTEResult",
    "align_trajectory",
    "ate",
    "ate_from_moments",
    "attitude_angle",
    "attitude_error_vector",
    "attitude_rmse_deg",
    "error_stats",
    "estimation_summary",
    "nees",
    "nees_band",
    "pose_error",
    "rmse",
    "rte",
    "umeyama",
    "vector_rmse",
]
