"""Figures and animation of flight logs (matplotlib, imported lazily; Agg, no pyplot state).

Every function takes a log dict (see :mod:`quadsim.io`: ``time`` (T,) [s], ``pos`` (T, N, 3)
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

import math
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

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

DPI = 100
#: Figure sizes [inch] (pixels = inches × :data:`DPI`).
FIGSIZE = {
    "path_3d": (8.0, 7.0),
    "states": (13.0, 10.0),
    "rotors": (12.0, 8.0),
    "tracking_error": (11.0, 8.0),
    "envelope": (8.0, 5.0),
}
MAX_DRONES = 8
_ANIM_SIZE = (6.0, 6.0)
_ANIM_DPI = 80


# --------------------------------------------------------------------------- helpers


def _figure(kind: str, figsize: tuple[float, float] | None = None, dpi: int = DPI) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize or FIGSIZE[kind], dpi=dpi)
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Any, path: str | os.PathLike[str]) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(p, dpi=fig.dpi)
    return p


def _fin(a: Any) -> np.ndarray:
    """Float64 copy with non-finite entries replaced by NaN (matplotlib breaks lines there)."""
    a = np.asarray(a, dtype=np.float64)
    return np.where(np.isfinite(a), a, np.nan)


def _drones(log: Mapping[str, Any], drones: Sequence[int] | None, max_drones: int) -> list[int]:
    n = np.asarray(log["pos"]).shape[1]
    if drones is None:
        return list(range(min(n, max_drones)))
    sel = [int(i) for i in drones]
    bad = [i for i in sel if not 0 <= i < n]
    if bad:
        raise ValueError(f"drones: indices {bad} outside [0, {n})")
    return sel[:max_drones]


def _title(meta: Mapping[str, Any], what: str, shown: list[int], n: int) -> str:
    parts = [what]
    if meta.get("drone"):
        parts.append(str(meta["drone"]))
    if meta.get("scenario"):
        parts.append(str(meta["scenario"]))
    t = " — ".join(parts)
    if n > len(shown):
        t += f"  ({len(shown)} of {n} drones shown)"
    return t


def _color(k: int) -> str:
    return f"C{k % 10}"


def _unwrap(a: np.ndarray) -> np.ndarray:
    """np.unwrap along axis 0 over the finite samples only (NaN stay NaN)."""
    out = np.array(a, dtype=np.float64)
    for idx in np.ndindex(out.shape[1:]):
        col = out[(slice(None), *idx)]
        ok = np.isfinite(col)
        if ok.any():
            col[ok] = np.unwrap(col[ok])
    return out


def _euler_deg(quat: Any) -> np.ndarray:
    from .rotation import to_euler

    q = np.asarray(quat, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        rpy = to_euler(q)
    rpy = _fin(rpy)
    rpy[..., 2] = _unwrap(rpy[..., 2])
    return np.degrees(rpy)


def _limits(*arrays: np.ndarray, pad: float = 0.05, min_span: float = 0.5) -> np.ndarray:
    """Cube limits (3, 2) [m] around the finite points of (..., 3) arrays."""
    pts = np.concatenate([np.asarray(a, dtype=np.float64).reshape(-1, 3) for a in arrays])
    pts = pts[np.all(np.isfinite(pts), axis=1)]
    if pts.size == 0:
        return np.array([[-1.0, 1.0]] * 3)
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    c = (lo + hi) / 2
    h = max(float((hi - lo).max()), min_span) * (0.5 + pad)
    return np.stack([c - h, c + h], axis=1)


def _no_data(ax: Any, what: str) -> None:
    ax.text(
        0.5,
        0.5,
        f"{what} not logged",
        ha="center",
        va="center",
        transform=ax.transAxes,
        color="0.5",
    )


# --------------------------------------------------------------------------- figures


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

    sel = _drones(log, drones, max_drones)
    pos = _fin(log["pos"])[:, sel]
    ref = _fin(log["ref_pos"])[:, sel] if "ref_pos" in log else None
    fig = _figure("path_3d")
    ax = fig.add_subplot(projection="3d")
    for k, i in enumerate(sel):
        c = _color(k)
        ax.plot(pos[:, k, 0], pos[:, k, 1], pos[:, k, 2], color=c, lw=1.5)
        if ref is not None:
            ax.plot(ref[:, k, 0], ref[:, k, 1], ref[:, k, 2], color=c, lw=1.0, ls="--", alpha=0.7)
        ok = np.flatnonzero(np.all(np.isfinite(pos[:, k]), axis=1))
        if ok.size:
            ax.scatter(*pos[ok[0], k], color=c, marker="o", s=20)
            ax.scatter(*pos[ok[-1], k], color=c, marker="s", s=20)
        if "crashed" in log and np.asarray(log["crashed"], dtype=bool)[:, i].any():
            j = int(np.argmax(np.asarray(log["crashed"], dtype=bool)[:, i]))
            ax.scatter(*pos[j, k], color=c, marker="X", s=60)
    lim = _limits(pos, *(() if ref is None else (ref,)))
    ax.set_xlim(*lim[0])
    ax.set_ylim(*lim[1])
    ax.set_zlim(*lim[2])
    ax.set_box_aspect((1, 1, 1))
    ax.set_xlabel("x [m]")
    ax.set_ylabel("y [m]")
    ax.set_zlabel("z [m]")
    handles = [
        Line2D([], [], color="k", lw=1.5, label="flown"),
        Line2D([], [], color="k", lw=1.0, ls="--", label="reference"),
        Line2D([], [], color="k", marker="o", ls="", label="start"),
        Line2D([], [], color="k", marker="s", ls="", label="end"),
        Line2D([], [], color="k", marker="X", ls="", label="crash"),
    ]
    handles += [
        Line2D([], [], color=_color(k), lw=2, label=f"drone {i}") for k, i in enumerate(sel)
    ]
    ax.legend(handles=handles, loc="upper left", fontsize="small")
    ax.set_title(_title(meta, "3-D path", sel, np.asarray(log["pos"]).shape[1]))
    return _save(fig, path)


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
    sel = _drones(log, drones, max_drones)
    t = _fin(log["time"])
    rows: list[tuple[str, str, Any, Any, tuple[str, ...]]] = [
        ("position", "m", log.get("pos"), log.get("ref_pos"), ("x", "y", "z")),
        ("velocity", "m/s", log.get("vel"), log.get("ref_vel"), ("vx", "vy", "vz")),
        ("attitude", "deg", None, None, ("roll", "pitch", "yaw")),
        ("body rate", "deg/s", None, None, ("ωx", "ωy", "ωz")),
    ]
    att = _euler_deg(np.asarray(log["quat"])[:, sel])
    ref_att = None
    if "ref_yaw" in log:
        ref_att = np.full(att.shape, np.nan)
        ref_att[..., 2] = np.degrees(_unwrap(_fin(np.asarray(log["ref_yaw"])[:, sel])))
    rows[2] = (*rows[2][:2], att, ref_att, rows[2][4])
    if "ang_vel" in log:
        rows[3] = (
            *rows[3][:2],
            np.degrees(_fin(np.asarray(log["ang_vel"])[:, sel])),
            None,
            rows[3][4],
        )
    fig = _figure("states")
    axes = fig.subplots(4, 3, sharex=True, squeeze=False)
    for r, (name, unit, val, ref, comps) in enumerate(rows):
        for j, comp in enumerate(comps):
            ax = axes[r, j]
            ax.set_ylabel(f"{comp} [{unit}]")
            ax.grid(True, alpha=0.3)
            if val is None:
                _no_data(ax, name)
                continue
            v = _fin(val) if r >= 2 else _fin(np.asarray(val)[:, sel])
            for k in range(len(sel)):
                ax.plot(
                    t,
                    v[:, k, j],
                    color=_color(k),
                    lw=1.2,
                    label=f"drone {sel[k]}" if (r, j) == (0, 0) else None,
                )
                if ref is not None:
                    rv = _fin(ref) if r >= 2 else _fin(np.asarray(ref)[:, sel])
                    if np.isfinite(rv[:, k, j]).any():
                        ax.plot(t, rv[:, k, j], color=_color(k), lw=1.0, ls="--", alpha=0.8)
    for ax in axes[-1]:
        ax.set_xlabel("time [s]")
    if len(sel) > 1:
        axes[0, 0].legend(fontsize="x-small", ncol=2)
    fig.suptitle(_title(meta, "states (reference dashed)", sel, np.asarray(log["pos"]).shape[1]))
    fig.subplots_adjust(left=0.07, right=0.985, bottom=0.06, top=0.94, wspace=0.28, hspace=0.12)
    return _save(fig, path)


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
    sel = _drones(log, drones, max_drones)
    t = _fin(log["time"])
    act = _fin(np.asarray(log["rotor_rpm"])[:, sel]) if "rotor_rpm" in log else None
    cmd = _fin(np.asarray(log["cmd_rpm"])[:, sel]) if "cmd_rpm" in log else None
    R = (act if act is not None else cmd).shape[2]
    sat = (
        np.asarray(log["saturated"], dtype=bool)[:, sel].any(axis=1) if "saturated" in log else None
    )
    ncols = 1 if R == 1 else 2
    nrows = math.ceil(R / ncols)
    fig = _figure("rotors")
    axes = np.atleast_1d(
        fig.subplots(nrows, ncols, sharex=True, sharey=True, squeeze=False)
    ).ravel()
    for r in range(R):
        ax = axes[r]
        if sat is not None and sat.any():
            ax.fill_between(
                t,
                0,
                1,
                where=sat,
                transform=ax.get_xaxis_transform(),
                color="red",
                alpha=0.12,
                lw=0,
                label="saturated" if r == 0 else None,
            )
        for k in range(len(sel)):
            if act is not None:
                ax.plot(
                    t,
                    act[:, k, r],
                    color=_color(k),
                    lw=1.2,
                    label=f"drone {sel[k]}" if r == 0 else None,
                )
            if cmd is not None:
                ax.plot(
                    t,
                    cmd[:, k, r],
                    color=_color(k),
                    lw=0.9,
                    ls="--",
                    alpha=0.8,
                    label="commanded" if r == 0 and k == 0 else None,
                )
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
        _title(meta, "rotor speeds (commanded dashed)", sel, np.asarray(log["pos"]).shape[1])
    )
    fig.subplots_adjust(left=0.08, right=0.985, bottom=0.08, top=0.93, wspace=0.12, hspace=0.1)
    return _save(fig, path)


def plot_tracking_error(
    log: Mapping[str, Any],
    meta: Mapping[str, Any],
    path: str | os.PathLike[str],
    drones: Sequence[int] | None = None,
    max_drones: int = MAX_DRONES,
) -> Path:
    """Position tracking error ``pos - ref_pos`` [m] per axis and its norm against time.

    Crashes (first ``crashed`` sample) are marked with a vertical line.

    Args:
        log: Log dict: ``time`` (T,), ``pos``, ``ref_pos`` (T, N, 3) [m], optionally
            ``crashed`` (T, N).
        meta: Run metadata (title).
        path: PNG file to write.
        drones: Drone indices to show (default the first ``max_drones``).
        max_drones: At most this many drones are drawn.

    Returns:
        The path written.

    Raises:
        ValueError: If the log has no ``ref_pos``.
    """
    if "ref_pos" not in log:
        raise ValueError("plot_tracking_error: log has no 'ref_pos'")
    sel = _drones(log, drones, max_drones)
    t = _fin(log["time"])
    e = _fin(np.asarray(log["pos"])[:, sel]) - _fin(np.asarray(log["ref_pos"])[:, sel])
    en = np.linalg.norm(e, axis=-1)
    fig = _figure("tracking_error")
    axes = fig.subplots(4, 1, sharex=True)
    labels = ("e_x [m]", "e_y [m]", "e_z [m]", "|e| [m]")
    for j, ax in enumerate(axes):
        for k in range(len(sel)):
            y = e[:, k, j] if j < 3 else en[:, k]
            ax.plot(t, y, color=_color(k), lw=1.2, label=f"drone {sel[k]}" if j == 0 else None)
        ax.set_ylabel(labels[j])
        ax.grid(True, alpha=0.3)
    if "crashed" in log:
        cr = np.asarray(log["crashed"], dtype=bool)[:, sel]
        for k in range(len(sel)):
            if cr[:, k].any():
                tc = t[np.argmax(cr[:, k])]
                for ax in axes:
                    ax.axvline(tc, color=_color(k), ls=":", lw=1.5)
                axes[3].annotate(
                    "crash",
                    (tc, 1.0),
                    xycoords=("data", "axes fraction"),
                    va="top",
                    fontsize="small",
                    color=_color(k),
                )
    axes[-1].set_xlabel("time [s]")
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(en)
        rms = float(np.sqrt(np.mean(en[ok] ** 2))) if ok.any() else math.nan
        mx = float(en[ok].max()) if ok.any() else math.nan
    axes[0].legend(fontsize="x-small", ncol=4)
    fig.suptitle(
        _title(
            meta,
            f"tracking error (RMS {rms:.3g} m, max {mx:.3g} m)",
            sel,
            np.asarray(log["pos"]).shape[1],
        )
    )
    fig.subplots_adjust(left=0.09, right=0.98, bottom=0.07, top=0.94, hspace=0.1)
    return _save(fig, path)


def plot_all(
    log: Mapping[str, Any],
    meta: Mapping[str, Any],
    out_dir: str | os.PathLike[str],
    drones: Sequence[int] | None = None,
    max_drones: int = MAX_DRONES,
) -> list[Path]:
    """Write ``path_3d.png``, ``states.png``, ``rotors.png``, ``tracking_error.png`` to ``out_dir``.

    A figure whose data are not in the log (no rotor speeds, no reference) is skipped. With more
    than ``max_drones`` drones only ``drones`` (default the first ``max_drones``) are drawn.

    Returns:
        The paths written.
    """
    out = Path(out_dir)
    paths = [
        plot_path_3d(log, meta, out / "path_3d.png", drones, max_drones),
        plot_states(log, meta, out / "states.png", drones, max_drones),
    ]
    if "rotor_rpm" in log or "cmd_rpm" in log:
        paths.append(plot_rotors(log, meta, out / "rotors.png", drones, max_drones))
    if "ref_pos" in log:
        paths.append(plot_tracking_error(log, meta, out / "tracking_error.png", drones, max_drones))
    return paths


def plot_envelope(params: Any, path: str | os.PathLike[str], n: int = 200) -> Path:
    """Terminal velocity in level flight [m/s] against tilt [deg], up to ``tilt_max`` (marked).

    Uses :func:`quadsim.envelope.terminal_velocity` (seed 002's ``v(θ)`` curve with this drone's
    drag) on ``n`` tilts in ``[0, tilt_max]``.

    Args:
        params: A :class:`~quadsim.params.Params`, preset name or TOML path.
        path: PNG file to write.
        n: Number of tilt samples.

    Returns:
        The path written.
    """
    from .envelope import envelope, terminal_velocity
    from .params import Params, load_params

    p = params if isinstance(params, Params) else load_params(params)
    env = envelope(p)
    th = np.linspace(0.0, env.tilt_max, n)
    v = _fin(terminal_velocity(p, th))
    fig = _figure("envelope")
    ax = fig.add_subplot()
    deg = np.degrees(th)
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
    return _save(fig, path)


# --------------------------------------------------------------------------- animation


def _ffmpeg() -> str | None:
    try:
        import imageio_ffmpeg

        return str(imageio_ffmpeg.get_ffmpeg_exe())
    except (ImportError, RuntimeError):
        return shutil.which("ffmpeg")


def _frame_indices(time: np.ndarray, fps: float, max_frames: int) -> tuple[np.ndarray, float]:
    """Sample indices of the frames and the frame period [s] (real-time playback)."""
    T = time.shape[0]
    if T == 0:
        raise ValueError("animate: empty log")
    span = float(time[-1] - time[0]) if T > 1 else 0.0
    n = max(1, min(math.floor(span * fps) + 1, int(max_frames), T))
    ft = np.linspace(float(time[0]), float(time[-1]), n)
    idx = np.clip(np.searchsorted(time, ft, side="left"), 0, T - 1)
    period = span / (n - 1) if n > 1 else 1.0 / fps
    return idx, period


def _polyline(segments: list[np.ndarray]) -> np.ndarray:
    """Join (k, 3) segments into one (M, 3) polyline separated by NaN rows."""
    nan = np.full((1, 3), np.nan)
    return np.concatenate([x for s in segments for x in (s, nan)])


def animate(
    log: Mapping[str, Any],
    meta: Mapping[str, Any],
    path: str | os.PathLike[str],
    fps: float = 30.0,
    drone: int = 0,
    trail: float | None = None,
    max_frames: int = 600,
    scale: float | None = None,
) -> Path:
    """Animate one drone: arms, rotor discs, body axes, trailing path and reference.

    Frames are taken every ``1/fps`` s of simulated time (at most ``max_frames``, evenly spread,
    so playback stays real time). GIF is written with Pillow; MP4 needs an ``ffmpeg`` binary
    (the ``imageio-ffmpeg`` package or ``ffmpeg`` on ``PATH``).

    Args:
        log: Log dict: ``time`` (T,) [s], ``pos`` (T, N, 3) [m], ``quat`` (T, N, 4) xyzw,
            optionally ``ref_pos`` (T, N, 3) [m].
        meta: Run metadata: ``rotor_positions`` (R, 2) [m] body FLU (default an X quad with
            0.1 m arms), ``drone``/``scenario`` for the title.
        path: Output file, ``.gif`` or ``.mp4``.
        fps: Frames per simulated second.
        drone: Index of the drone to animate.
        trail: Length of the trailing path [s]; ``None`` for the whole path flown so far.
        max_frames: Upper bound on the number of frames.
        scale: Drawing scale of the drone; default enlarges it to ~8 % of the scene.

    Returns:
        The path written.

    Raises:
        ValueError: Unknown suffix, bad ``drone``, empty log.
        RuntimeError: MP4 requested but no ffmpeg available.
    """
    from PIL import Image

    from .rotation import to_matrix

    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in (".gif", ".mp4"):
        raise ValueError(f"animate: path must end in .gif or .mp4, got {p.name!r}")
    ffmpeg = _ffmpeg() if suffix == ".mp4" else None
    if suffix == ".mp4" and ffmpeg is None:
        raise RuntimeError(
            "animate: MP4 needs ffmpeg (pip install imageio-ffmpeg, or put "
            "ffmpeg on PATH); write a .gif instead"
        )
    n_drones = np.asarray(log["pos"]).shape[1]
    if not 0 <= drone < n_drones:
        raise ValueError(f"animate: drone = {drone} outside [0, {n_drones})")
    if fps <= 0 or max_frames < 1:
        raise ValueError(f"animate: need fps > 0 and max_frames >= 1, got {fps}, {max_frames}")
    time = np.asarray(log["time"], dtype=np.float64)
    pos = _fin(np.asarray(log["pos"])[:, drone])
    quat = np.asarray(log["quat"], dtype=np.float64)[:, drone]
    ref = _fin(np.asarray(log["ref_pos"])[:, drone]) if "ref_pos" in log else None
    rp = meta.get("rotor_positions")
    rotors = (
        np.asarray(rp, dtype=np.float64).reshape(-1, 2)
        if rp is not None
        else 0.1 / math.sqrt(2) * np.array([[1, -1], [1, 1], [-1, 1], [-1, -1]], float)
    )
    arm = float(np.max(np.linalg.norm(rotors, axis=1))) or 0.1
    lim = _limits(pos, *(() if ref is None else (ref,)), pad=0.15)
    extent = float(lim[0, 1] - lim[0, 0])
    if scale is None:
        scale = max(1.0, 0.08 * extent / arm)
    # rotor disc radius: half the smallest rotor spacing, capped by the arm length
    d = np.linalg.norm(rotors[:, None] - rotors[None], axis=-1)
    d = d[d > 0]
    r_disc = 0.45 * min(float(d.min()) if d.size else arm, arm)
    ang = np.linspace(0, 2 * np.pi, 17)
    circle = np.stack([np.cos(ang), np.sin(ang), np.zeros_like(ang)], axis=1) * r_disc
    body_rot = np.concatenate([rotors, np.zeros((len(rotors), 1))], axis=1)  # (R, 3)

    idx, period = _frame_indices(time, fps, max_frames)
    with np.errstate(invalid="ignore", divide="ignore"):
        R_wb = np.asarray(to_matrix(quat[idx]))  # (F, 3, 3)

    fig = _figure("", figsize=_ANIM_SIZE, dpi=_ANIM_DPI)
    ax = fig.add_subplot(projection="3d")
    ax.set_xlim(*lim[0])
    ax.set_ylim(*lim[1])
    ax.set_zlim(*lim[2])
    ax.set_box_aspect((1, 1, 1))
    ax.set_xlabel("x [m]")
    ax.set_ylabel("y [m]")
    ax.set_zlabel("z [m]")
    if ref is not None:
        ax.plot(ref[:, 0], ref[:, 1], ref[:, 2], color="0.5", ls="--", lw=1.0, label="reference")
    (trail_ln,) = ax.plot([], [], [], color="C0", lw=1.5, label="path")
    (arms_ln,) = ax.plot([], [], [], color="k", lw=2.0)
    (disc_ln,) = ax.plot([], [], [], color="C1", lw=1.2)
    axes_ln = [ax.plot([], [], [], color=c, lw=2.0)[0] for c in ("red", "green", "blue")]
    ax.legend(loc="upper left", fontsize="small")
    base = _title(meta, f"drone {drone}", [drone], 1)
    if scale > 1.0:
        base += f" (drawn ×{scale:.0f})"
    title = fig.text(0.5, 0.97, "", ha="center", va="top", fontsize="medium")
    dynamic = [trail_ln, arms_ln, disc_ln, *axes_ln, title]
    for a in dynamic:
        a.set_animated(True)
    # blitting: the fixed view (axes, grid, reference, legend) is rendered once
    fig.canvas.draw()
    background = fig.canvas.copy_from_bbox(fig.bbox)

    frames: list[Any] = []
    proc = None
    if ffmpeg is not None:
        w, h = fig.canvas.get_width_height()
        proc = subprocess.Popen(
            [
                ffmpeg,
                "-y",
                "-loglevel",
                "error",
                "-f",
                "rawvideo",
                "-pix_fmt",
                "rgb24",
                "-s",
                f"{w}x{h}",
                "-r",
                f"{1.0 / period:.6g}",
                "-i",
                "-",
                "-pix_fmt",
                "yuv420p",
                "-vcodec",
                "libx264",
                str(p),
            ],
            stdin=subprocess.PIPE,
        )
    p.parent.mkdir(parents=True, exist_ok=True)
    try:
        for f, k in enumerate(idx):
            lo = 0 if trail is None else int(np.searchsorted(time, time[k] - trail))
            seg = pos[lo : k + 1]
            trail_ln.set_data_3d(seg[:, 0], seg[:, 1], seg[:, 2])
            c, Rm = pos[k], R_wb[f]
            if np.all(np.isfinite(c)) and np.all(np.isfinite(Rm)):
                tips = c + scale * body_rot @ Rm.T  # (R, 3)
                arms = _polyline([np.stack([c, tip]) for tip in tips])
                discs = _polyline([tip + scale * circle @ Rm.T for tip in tips])
                for j, ln in enumerate(axes_ln):
                    e = c + scale * 1.2 * arm * Rm[:, j]
                    ln.set_data_3d([c[0], e[0]], [c[1], e[1]], [c[2], e[2]])
            else:
                arms = discs = np.full((1, 3), np.nan)
                for ln in axes_ln:
                    ln.set_data_3d([], [], [])
            arms_ln.set_data_3d(arms[:, 0], arms[:, 1], arms[:, 2])
            disc_ln.set_data_3d(discs[:, 0], discs[:, 1], discs[:, 2])
            title.set_text(f"{base}\nt = {time[k]:6.2f} s")
            fig.canvas.restore_region(background)
            for a in dynamic:
                (fig if a is title else ax).draw_artist(a)
            rgb = np.asarray(fig.canvas.buffer_rgba())[..., :3]
            if proc is not None:
                proc.stdin.write(np.ascontiguousarray(rgb).tobytes())
            else:
                frames.append(
                    Image.fromarray(rgb).quantize(colors=64, method=Image.Quantize.FASTOCTREE)
                )
    finally:
        if proc is not None:
            proc.stdin.close()
            if proc.wait() != 0:
                raise RuntimeError(f"animate: ffmpeg failed writing {p}")
    if frames:
        frames[0].save(
            p,
            save_all=True,
            append_images=frames[1:],
            loop=0,
            duration=max(round(period * 1000), 20),
            disposal=1,
        )
    return p
