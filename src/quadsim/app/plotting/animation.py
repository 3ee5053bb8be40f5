"""Animation of one drone's flight to GIF (Pillow) or MP4 (ffmpeg)."""

from __future__ import annotations

import math
import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ._common import cube_limits, figure_title, nan_masked, new_figure

_ANIM_SIZE = (6.0, 6.0)
_ANIM_DPI = 80


def ffmpeg_exe() -> str | None:
    """Path of an ffmpeg executable (``imageio-ffmpeg``'s, else one on ``PATH``), or ``None``."""
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


#: GIF stores frame delays in centiseconds, and browsers replace delays under 20 ms by 100 ms.
_GIF_TICK_S = 0.01
_GIF_MIN_PERIOD_S = 0.02


def _gif_durations(n: int, period: float) -> list[int]:
    """Delays [ms] of ``n`` GIF frames ``period`` [s] of flight apart, each a whole number of cs.

    A delay of ``period`` rounded to the GIF's 10 ms tick plays fast or slow by up to 5 ms a
    frame (33.3 ms -> 30 ms: 10 % fast). Instead frame ``k`` is shown from ``k period`` to
    ``(k + 1) period``, both rounded to the tick, so the cumulative play time stays within 5 ms
    of the flight time covered (``n period``): delays alternate, e.g. 30/40/30 ms at 30 fps.
    """
    ends = np.rint(np.arange(1, n + 1) * period / _GIF_TICK_S).astype(np.int64)
    ticks = np.diff(ends, prepend=0)
    return [int(c) * 10 for c in ticks]


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
    (the ``imageio-ffmpeg`` package or ``ffmpeg`` on ``PATH``). A GIF's frame delays are whole
    centiseconds: they are chosen so that the total play time tracks the flight time (within
    5 ms), and a GIF has at most 50 frames per second (shorter delays are not honoured).

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

    from ...physics.rotation import to_matrix

    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in (".gif", ".mp4"):
        raise ValueError(f"animate: path must end in .gif or .mp4, got {p.name!r}")
    ffmpeg = ffmpeg_exe() if suffix == ".mp4" else None
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
    pos = nan_masked(np.asarray(log["pos"])[:, drone])
    quat = np.asarray(log["quat"], dtype=np.float64)[:, drone]
    ref = nan_masked(np.asarray(log["ref_pos"])[:, drone]) if "ref_pos" in log else None
    rp = meta.get("rotor_positions")
    rotors = (
        np.asarray(rp, dtype=np.float64).reshape(-1, 2)
        if rp is not None
        else 0.1 / math.sqrt(2) * np.array([[1, -1], [1, 1], [-1, 1], [-1, -1]], float)
    )
    arm = float(np.max(np.linalg.norm(rotors, axis=1))) or 0.1
    lim = cube_limits(pos, *(() if ref is None else (ref,)), pad=0.15)
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

    if suffix == ".gif":
        fps = min(fps, 1.0 / _GIF_MIN_PERIOD_S)
    idx, period = _frame_indices(time, fps, max_frames)
    with np.errstate(invalid="ignore", divide="ignore"):
        R_wb = np.asarray(to_matrix(quat[idx]))  # (F, 3, 3)

    fig = new_figure("", figsize=_ANIM_SIZE, dpi=_ANIM_DPI)
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
    base = figure_title(meta, f"drone {drone}", [drone], 1)
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
            duration=_gif_durations(len(frames), period),
            disposal=1,
        )
    return p
