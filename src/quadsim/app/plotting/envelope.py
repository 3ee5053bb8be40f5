"""Flight-envelope figure: level-flight terminal velocity against tilt."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from ...physics.envelope import envelope, terminal_velocity
from ...physics.params import Params, load_params
from ._common import nan_masked, new_figure, save_figure


def plot_envelope(params: Any, path: str | os.PathLike[str], n: int = 200) -> Path:
    """Terminal velocity in level flight [m/s] against tilt [deg], up to ``tilt_max`` (marked).

    Uses :func:`quadsim.physics.envelope.terminal_velocity` (seed 002's ``v(θ)`` curve with this
    drone's drag) on ``n`` tilts in ``[0, tilt_max]``. The drag model holds up to the drone's
    ``drag_speed_max`` [m/s] (the speed range it was identified over; ``inf`` when unknown):
    above it the speed band is hatched and the curve dashed, labelled "drag model extrapolated
    beyond X m/s".

    Args:
        params: A :class:`~quadsim.physics.params.Params`, preset name or TOML path.
        path: PNG file to write (missing parent folders are created).
        n: Number of tilt samples.

    Returns:
        The path written.
    """
    p = params if isinstance(params, Params) else load_params(params)
    env = envelope(p)
    th = np.linspace(0.0, env.tilt_max, n)
    v = nan_masked(terminal_velocity(p, th))
    fig = new_figure("envelope")
    ax = fig.add_subplot()
    deg = np.degrees(th)
    v_ok = float(getattr(p, "drag_speed_max", math.inf))
    if math.isfinite(v_ok) and np.isfinite(v).any() and float(np.nanmax(v)) > v_ok:
        # the curve within the identified range solid, beyond it dashed over a hatched band
        inside = np.where(v <= v_ok, v, np.nan)
        beyond = np.where(v >= v_ok, v, np.nan)
        j = int(np.argmax(v > v_ok))  # first sample beyond: join the two pieces there
        if j > 0:
            beyond[j - 1] = v[j - 1]
        ax.plot(deg, inside, lw=2, color="C0", label="terminal velocity")
        ax.plot(deg, beyond, lw=2, color="C0", ls="--", alpha=0.8)
        ax.axhspan(
            v_ok,
            float(np.nanmax(v)) * 1.12 + 1e-9,
            facecolor="0.85",
            edgecolor="0.55",
            hatch="//",
            lw=0,
            alpha=0.5,
            zorder=0,
            label=f"drag model extrapolated beyond {v_ok:.3g} m/s",
        )
        ax.axhline(v_ok, color="0.4", lw=1.0, ls=":")
    else:
        ax.plot(deg, v, lw=2, label="terminal velocity")
    ax.axvline(
        math.degrees(env.tilt_max),
        color="red",
        ls="--",
        label=f"tilt_max = {math.degrees(env.tilt_max):.1f}° (T/W = {env.thrust_to_weight:.2f})",
    )
    if np.isfinite(v[-1]):
        ax.plot(deg[-1], v[-1], "o", color="red")
        ax.annotate(
            f"{v[-1]:.1f} m/s",
            (deg[-1], v[-1]),
            textcoords="offset points",
            xytext=(-10, 6),
            ha="right",
            color="red",
        )
    if not np.isfinite(v[1:]).any():
        ax.text(
            0.5, 0.5, "no drag in this model: speed unbounded", ha="center", transform=ax.transAxes
        )
    ax.set_xlim(0, max(float(deg[-1]) * 1.05, 1.0))
    if np.isfinite(v).any():
        ax.set_ylim(0, float(np.nanmax(v)) * 1.12 + 1e-9)
    ax.set_xlabel("tilt [deg]")
    ax.set_ylabel("speed [m/s]")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left")
    ax.set_title(f"{p.name}: level-flight speed vs tilt (hover {env.hover_rpm:.0f} RPM)")
    fig.subplots_adjust(left=0.09, right=0.97, bottom=0.1, top=0.92)
    return save_figure(fig, path)
