"""Flight-log figures: 3-D path, states, rotor speeds, tracking error, and all of them at once."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..io.summary import summarize
from ._common import (
    MAX_DRONES,
    cube_axes,
    cube_limits,
    drone_color,
    euler_deg,
    figure_title,
    first_crashes,
    mark_no_data,
    mark_settle,
    nan_masked,
    new_figure,
    plot_thinned,
    run_indices,
    save_figure,
    select_drones,
    thin_columns,
    thin_indices,
    unwrap_finite,
)
from .estimation import plot_estimation
from .forked import Job, draw_all


def plot_path_3d(
    log: Mapping[str, Any],
    meta: Mapping[str, Any],
    path: str | os.PathLike[str],
    drones: Sequence[int] | None = None,
    max_drones: int = MAX_DRONES,
) -> Path:
    """3-D path of the drones (solid) against their reference (dashed); equal axes [m].

    Args:
        log: Log dict with ``pos`` (T, N, 3) [m], optionally ``ref_pos`` (T, N, 3) [m],
            ``crashed`` (T, N).
        meta: Run metadata (``drone``, ``scenario`` for the title).
        path: PNG file to write.
        drones: Drone indices to show (default the first ``max_drones``).
        max_drones: At most this many drones are drawn.

    Returns:
        The path written.
    """
    from matplotlib.lines import Line2D

    sel = select_drones(log, drones, max_drones)
    pos = nan_masked(log["pos"])[:, sel]
    ref = nan_masked(log["ref_pos"])[:, sel] if "ref_pos" in log else None
    fig = new_figure("path_3d")
    ax = fig.add_subplot(projection="3d")
    cols = thin_columns(fig, oversample=4)  # a long path keeps the extremes of x, y and z
    crashes = first_crashes(log, sel)
    for k in range(len(sel)):
        c = drone_color(k)
        p = pos[thin_indices(pos[:, k], cols), k]
        ax.plot(p[:, 0], p[:, 1], p[:, 2], color=c, lw=1.5)
        if ref is not None:
            r = ref[thin_indices(ref[:, k], cols), k]
            ax.plot(r[:, 0], r[:, 1], r[:, 2], color=c, lw=1.0, ls="--", alpha=0.7)
        ok = np.flatnonzero(np.all(np.isfinite(pos[:, k]), axis=1))
        if ok.size:
            ax.scatter(*pos[ok[0], k], color=c, marker="o", s=20)
            ax.scatter(*pos[ok[-1], k], color=c, marker="s", s=20)
        if k in crashes:
            ax.scatter(*pos[crashes[k], k], color=c, marker="X", s=60)
    lim = cube_limits(pos, *(() if ref is None else (ref,)))
    cube_axes(ax, lim)
    handles = [
        Line2D([], [], color="k", lw=1.5, label="flown"),
        Line2D([], [], color="k", lw=1.0, ls="--", label="reference"),
        Line2D([], [], color="k", marker="o", ls="", label="start"),
        Line2D([], [], color="k", marker="s", ls="", label="end"),
        Line2D([], [], color="k", marker="X", ls="", label="crash"),
    ]
    handles += [
        Line2D([], [], color=drone_color(k), lw=2, label=f"drone {i}") for k, i in enumerate(sel)
    ]
    ax.legend(handles=handles, loc="upper left", fontsize="small")
    ax.set_title(figure_title(meta, "3-D path", sel, np.asarray(log["pos"]).shape[1]))
    return save_figure(fig, path)


def plot_states(
    log: Mapping[str, Any],
    meta: Mapping[str, Any],
    path: str | os.PathLike[str],
    drones: Sequence[int] | None = None,
    max_drones: int = MAX_DRONES,
) -> Path:
    """State against time: position [m], velocity [m/s], attitude [deg], body rates [deg/s].

    A 4 × 3 grid (rows: position, velocity, roll/pitch/yaw, body rates; columns: axes), one
    colour per drone; the reference (``ref_pos``, ``ref_vel``, ``ref_yaw``) dashed.

    Args:
        log: Log dict: ``time`` (T,), ``pos`` (T, N, 3), ``quat`` (T, N, 4); optionally
            ``vel``, ``ang_vel`` (T, N, 3), ``ref_pos``, ``ref_vel`` (T, N, 3), ``ref_yaw``
            (T, N) [rad].
        meta: Run metadata (title).
        path: PNG file to write.
        drones: Drone indices to show (default the first ``max_drones``).
        max_drones: At most this many drones are drawn.

    Returns:
        The path written.
    """
    sel = select_drones(log, drones, max_drones)
    t = nan_masked(log["time"])
    rows: list[tuple[str, str, Any, Any, tuple[str, ...]]] = [
        ("position", "m", log.get("pos"), log.get("ref_pos"), ("x", "y", "z")),
        ("velocity", "m/s", log.get("vel"), log.get("ref_vel"), ("vx", "vy", "vz")),
        ("attitude", "deg", None, None, ("roll", "pitch", "yaw")),
        ("body rate", "deg/s", None, None, ("ωx", "ωy", "ωz")),
    ]
    att = euler_deg(np.asarray(log["quat"])[:, sel])
    ref_att = None
    if "ref_yaw" in log:
        ref_att = np.full(att.shape, np.nan)
        ref_att[..., 2] = np.degrees(unwrap_finite(nan_masked(np.asarray(log["ref_yaw"])[:, sel])))
    rows[2] = (*rows[2][:2], att, ref_att, rows[2][4])
    if "ang_vel" in log:
        rows[3] = (
            *rows[3][:2],
            np.degrees(nan_masked(np.asarray(log["ang_vel"])[:, sel])),
            None,
            rows[3][4],
        )
    fig = new_figure("states")
    cols = thin_columns(fig)
    axes = fig.subplots(4, 3, sharex=True, squeeze=False)
    for r, (name, unit, val, ref, comps) in enumerate(rows):
        for j, comp in enumerate(comps):
            ax = axes[r, j]
            ax.set_ylabel(f"{comp} [{unit}]")
            ax.grid(True, alpha=0.3)
            if val is None:
                mark_no_data(ax, name)
                continue
            v = nan_masked(val) if r >= 2 else nan_masked(np.asarray(val)[:, sel])
            rv = None
            if ref is not None:
                rv = nan_masked(ref) if r >= 2 else nan_masked(np.asarray(ref)[:, sel])
            for k in range(len(sel)):
                plot_thinned(ax, t, v[:, k, j], cols, color=drone_color(k), lw=1.2,
                             label=f"drone {sel[k]}" if (r, j) == (0, 0) else None)  # fmt: skip
                if rv is not None and np.isfinite(rv[:, k, j]).any():
                    plot_thinned(ax, t, rv[:, k, j], cols, color=drone_color(k), lw=1.0, ls="--",
                                 alpha=0.8)  # fmt: skip
    for ax in axes[-1]:
        ax.set_xlabel("time [s]")
    if len(sel) > 1:
        axes[0, 0].legend(fontsize="x-small", ncol=2)
    n_all = np.asarray(log["pos"]).shape[1]
    fig.suptitle(figure_title(meta, "states (reference dashed)", sel, n_all))
    fig.subplots_adjust(left=0.07, right=0.985, bottom=0.06, top=0.94, wspace=0.28, hspace=0.12)
    return save_figure(fig, path)


def plot_rotors(
    log: Mapping[str, Any],
    meta: Mapping[str, Any],
    path: str | os.PathLike[str],
    drones: Sequence[int] | None = None,
    max_drones: int = MAX_DRONES,
) -> Path:
    """Rotor speeds [RPM] against time, one panel per rotor, with the limits and the command.

    Actual ``rotor_rpm`` solid, commanded ``cmd_rpm`` dashed, ``meta["rpm_min"]`` and
    ``meta["rpm_max"]`` as red dotted lines; intervals where any shown drone's allocation
    saturated (``saturated``) are shaded.

    Args:
        log: Log dict: ``time`` (T,), ``rotor_rpm`` and/or ``cmd_rpm`` (T, N, R) [RPM],
            optionally ``saturated`` (T, N).
        meta: Run metadata (``rpm_min``, ``rpm_max`` [RPM], title).
        path: PNG file to write.
        drones: Drone indices to show (default the first ``max_drones``).
        max_drones: At most this many drones are drawn.

    Returns:
        The path written.

    Raises:
        ValueError: If the log has neither ``rotor_rpm`` nor ``cmd_rpm``.
    """
    if "rotor_rpm" not in log and "cmd_rpm" not in log:
        raise ValueError("plot_rotors: log has neither 'rotor_rpm' nor 'cmd_rpm'")
    sel = select_drones(log, drones, max_drones)
    t = nan_masked(log["time"])
    act = nan_masked(np.asarray(log["rotor_rpm"])[:, sel]) if "rotor_rpm" in log else None
    cmd = nan_masked(np.asarray(log["cmd_rpm"])[:, sel]) if "cmd_rpm" in log else None
    R = (act if act is not None else cmd).shape[2]
    sat = (
        np.asarray(log["saturated"], dtype=bool)[:, sel].any(axis=1) if "saturated" in log else None
    )
    ncols = 1 if R == 1 else 2
    nrows = math.ceil(R / ncols)
    fig = new_figure("rotors")
    cols = thin_columns(fig)
    axes = np.atleast_1d(
        fig.subplots(nrows, ncols, sharex=True, sharey=True, squeeze=False)
    ).ravel()
    runs = run_indices(sat, cols) if sat is not None else None
    for r in range(R):
        ax = axes[r]
        if sat is not None and sat.any():
            ax.fill_between(
                t[runs],
                0,
                1,
                where=sat[runs],
                transform=ax.get_xaxis_transform(),
                color="red",
                alpha=0.12,
                lw=0,
                label="saturated" if r == 0 else None,
            )
        for k in range(len(sel)):
            if act is not None:
                plot_thinned(ax, t, act[:, k, r], cols, color=drone_color(k), lw=1.2,
                             label=f"drone {sel[k]}" if r == 0 else None)  # fmt: skip
            if cmd is not None:
                plot_thinned(ax, t, cmd[:, k, r], cols, color=drone_color(k), lw=0.9, ls="--",
                             alpha=0.8,
                             label="commanded" if r == 0 and k == 0 else None)  # fmt: skip
        for lim in ("rpm_min", "rpm_max"):
            if meta.get(lim) is not None:
                ax.axhline(
                    float(meta[lim]),
                    color="red",
                    ls=":",
                    lw=1.2,
                    label="limits" if r == 0 and lim == "rpm_max" else None,
                )
        ax.set_ylabel(f"rotor {r} [RPM]")
        ax.grid(True, alpha=0.3)
    for ax in axes[R:]:
        ax.set_visible(False)
    for ax in axes[max(R - ncols, 0) : R]:
        ax.set_xlabel("time [s]")
    axes[0].legend(fontsize="x-small", ncol=2)
    fig.suptitle(
        figure_title(meta, "rotor speeds (commanded dashed)", sel, np.asarray(log["pos"]).shape[1])
    )
    fig.subplots_adjust(left=0.08, right=0.985, bottom=0.08, top=0.93, wspace=0.12, hspace=0.1)
    return save_figure(fig, path)


def _tracking_stats(
    log: Mapping[str, Any], meta: Mapping[str, Any], sel: Sequence[int], t_from: float
) -> tuple[float, float]:
    """RMS and max position error [m] of the drones ``sel``, as ``summary.json`` counts them.

    One definition: this is :func:`quadsim.app.io.summary.summarize` on the shown drones (samples
    with ``time >= t_from``, before each drone's first crash, finite errors; RMS over all of
    them), so the figure's title and the summary agree whenever every drone is shown.
    """
    sub = {k: np.asarray(log[k])[:, sel] for k in ("pos", "ref_pos", "crashed") if k in log}
    sub["time"] = log["time"]
    if "quat" in log:
        sub["quat"] = np.asarray(log["quat"])[:, sel]
    else:  # summarize also computes tilt; identity attitudes keep it quiet
        sub["quat"] = np.broadcast_to([0.0, 0.0, 0.0, 1.0], (*sub["pos"].shape[:2], 4))
    s = summarize(sub, meta, 0.0, t_from=t_from)
    rms, mx = s["tracking_rms_m"], s["tracking_max_m"]
    return (math.nan if rms is None else rms), (math.nan if mx is None else mx)


def plot_tracking_error(
    log: Mapping[str, Any],
    meta: Mapping[str, Any],
    path: str | os.PathLike[str],
    drones: Sequence[int] | None = None,
    max_drones: int = MAX_DRONES,
    t_from: float = 0.0,
) -> Path:
    """Position tracking error ``pos - ref_pos`` [m] per axis and its norm against time.

    Crashes (first ``crashed`` sample) are marked with a vertical line. The title's RMS and
    max are those of ``summary.json`` (:func:`quadsim.app.io.summary.summarize`) over the drones
    shown: samples with ``time >= t_from`` before each drone's crash. With ``t_from > 0`` the
    settling time is marked (dashed line, the skipped interval shaded grey).

    Args:
        log: Log dict: ``time`` (T,), ``pos``, ``ref_pos`` (T, N, 3) [m], optionally
            ``crashed`` (T, N).
        meta: Run metadata (title).
        path: PNG file to write.
        drones: Drone indices to show (default the first ``max_drones``).
        max_drones: At most this many drones are drawn.
        t_from: The error statistics count from this time [s] (``output.settle``).

    Returns:
        The path written.

    Raises:
        ValueError: If the log has no ``ref_pos``.
    """
    if "ref_pos" not in log:
        raise ValueError("plot_tracking_error: log has no 'ref_pos'")
    sel = select_drones(log, drones, max_drones)
    t = nan_masked(log["time"])
    e = nan_masked(np.asarray(log["pos"])[:, sel]) - nan_masked(np.asarray(log["ref_pos"])[:, sel])
    en = np.linalg.norm(e, axis=-1)
    fig = new_figure("tracking_error")
    cols = thin_columns(fig)
    axes = fig.subplots(4, 1, sharex=True)
    labels = ("e_x [m]", "e_y [m]", "e_z [m]", "|e| [m]")
    for j, ax in enumerate(axes):
        for k in range(len(sel)):
            plot_thinned(ax, t, e[:, k, j] if j < 3 else en[:, k], cols, color=drone_color(k),
                         lw=1.2, label=f"drone {sel[k]}" if j == 0 else None)  # fmt: skip
        ax.set_ylabel(labels[j])
        ax.grid(True, alpha=0.3)
    for k, j in first_crashes(log, sel).items():
        tc = t[j]
        for ax in axes:
            ax.axvline(tc, color=drone_color(k), ls=":", lw=1.5)
        axes[3].annotate(
            "crash",
            (tc, 1.0),
            xycoords=("data", "axes fraction"),
            va="top",
            fontsize="small",
            color=drone_color(k),
        )
    t_from = float(t_from)
    mark_settle(axes, t, t_from)
    if t_from > 0:
        axes[3].annotate(
            f" settle: counted from t = {t_from:g} s",
            (t_from, 1.0),
            xycoords=("data", "axes fraction"),
            va="top",
            fontsize="small",
            color="0.3",
        )
    axes[-1].set_xlabel("time [s]")
    rms, mx = _tracking_stats(log, meta, sel, t_from)
    window = f", t >= {t_from:g} s" if t_from > 0 else ""
    axes[0].legend(fontsize="x-small", ncol=4)
    fig.suptitle(
        figure_title(
            meta,
            f"tracking error (RMS {rms:.3g} m, max {mx:.3g} m{window})",
            sel,
            np.asarray(log["pos"]).shape[1],
        )
    )
    fig.subplots_adjust(left=0.09, right=0.98, bottom=0.07, top=0.94, hspace=0.1)
    return save_figure(fig, path)


def plot_all(
    log: Mapping[str, Any],
    meta: Mapping[str, Any],
    out_dir: str | os.PathLike[str],
    drones: Sequence[int] | None = None,
    max_drones: int = MAX_DRONES,
    t_from: float = 0.0,
) -> list[Path]:
    """Write ``path_3d.png``, ``states.png``, ``rotors.png``, ``tracking_error.png`` to ``out_dir``.

    With an estimate in the log also ``estimation.png`` (:func:`plot_estimation`). A figure
    whose data are not in the log (no rotor speeds, no reference) is skipped. With more than
    ``max_drones`` drones only ``drones`` (default the first ``max_drones``) are drawn.
    ``t_from`` [s] (``output.settle``) is passed to :func:`plot_tracking_error`: its RMS and max
    count from there, as in ``summary.json``.

    Returns:
        The paths written.
    """
    out = Path(out_dir)
    pick = {"drones": drones, "max_drones": max_drones}
    settle = pick | {"t_from": t_from}
    jobs = [Job(plot_path_3d, (log, meta), pick, out / "path_3d.png"),
            Job(plot_states, (log, meta), pick, out / "states.png", cost=3.0)]  # fmt: skip
    if "rotor_rpm" in log or "cmd_rpm" in log:
        jobs.append(Job(plot_rotors, (log, meta), pick, out / "rotors.png", cost=1.5))
    if "ref_pos" in log:
        jobs.append(Job(plot_tracking_error, (log, meta), settle, out / "tracking_error.png"))
    if "est_pos" in log:  # an estimator flew: its estimate against the truth
        jobs.append(Job(plot_estimation, (log, meta), settle, out / "estimation.png", cost=3.0))
    return draw_all(jobs)
