"""Figures and animation of flight logs (matplotlib, imported lazily; Agg, no pyplot state).

Every function takes a log dict (see :mod:`quadsim.app.io`: ``time`` (T,) [s], ``pos`` (T, N, 3)
[m], ``quat`` (T, N, 4) xyzw, ...) and the run metadata, writes one file and returns its path.
Figures are :class:`matplotlib.figure.Figure` objects rendered with the Agg canvas, so nothing
touches pyplot's global state. Non-finite samples (NaN, ±inf) are masked: lines break there.
With many drones, the figures show at most ``max_drones`` (default 8) of them: ``drones``
selects which (default the first ``max_drones``); the title says how many were shown.

Attitude is shown as Euler ZYX angles ``(roll, pitch, yaw)`` [deg] (yaw unwrapped), body rates
in [deg/s]. The animation draws the drone from ``meta["rotor_positions"]`` (R, 2) [m]: arms from
the centre to each rotor, rotor discs, body axes (x red, y green, z blue), the trailing path
and the reference; when the drone is tiny against the scene it is drawn enlarged (the factor is
in the title).
"""

from __future__ import annotations

from ._common import DPI, FIGSIZE, MAX_DRONES
from .animation import animate
from .envelope import plot_envelope
from .figures import plot_all, plot_path_3d, plot_rotors, plot_states, plot_tracking_error

__all__ = [
    "DPI",
    "FIGSIZE",
    "MAX_DRONES",
    "animate",
    "plot_all",
    "plot_envelope",
    "plot_path_3d",
    "plot_rotors",
    "plot_states",
    "plot_tracking_error",
]
