"""Animation of one drone's flight to GIF (Pillow) or MP4 (ffmpeg)."""

from __future__ import annotations

import math
import os
import shutil
import subprocess
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ...physics.rotation import to_matrix
from ._common import cube_axes, cube_limits, figure_title, nan_masked, new_figure

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


def _check_request(
    log: Mapping[str, Any], p: Path, drone: int, fps: float, max_frames: int
) -> str | None:
    """The ffmpeg executable an ``.mp4`` needs (``None`` for a ``.gif``); bad requests raise."""
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
    return ffmpeg


class _Shape(NamedTuple):
    """The drone as drawn, in its body frame [m] and before the drawing scale."""

    rotors: np.ndarray  #: (R, 3) rotor centres (FLU, z = 0)
    disc: np.ndarray  #: (17, 3) rim of a rotor disc about its centre
    arm: float  #: longest arm [m]


def _drone_shape(meta: Mapping[str, Any]) -> _Shape:
    """Rotors from ``meta["rotor_positions"]`` (default an X quad with 0.1 m arms), discs, arm."""
    rp = meta.get("rotor_positions")
    rotors = (
        np.asarray(rp, dtype=np.float64).reshape(-1, 2)
        if rp is not None
        else 0.1 / math.sqrt(2) * np.array([[1, -1], [1, 1], [-1, 1], [-1, -1]], float)
    )
    arm = float(np.max(np.linalg.norm(rotors, axis=1))) or 0.1
    # rotor disc radius: half the smallest rotor spacing, capped by the arm length
    d = np.linalg.norm(rotors[:, None] - rotors[None], axis=-1)
    d = d[d > 0]
    r_disc = 0.45 * min(float(d.min()) if d.size else arm, arm)
    ang = np.linspace(0, 2 * np.pi, 17)
    disc = np.stack([np.cos(ang), np.sin(ang), np.zeros_like(ang)], axis=1) * r_disc
    return _Shape(np.concatenate([rotors, np.zeros((len(rotors), 1))], axis=1), disc, arm)


class _Scene(NamedTuple):
    """The animation's figure: a fixed view rendered once, and the artists redrawn each frame."""

    fig: Any
    ax: Any
    trail: Any  #: the path flown (the trailing part)
    arms: Any
    discs: Any
    body_axes: list[Any]  #: x, y, z body axes (red, green, blue)
    title: Any
    background: Any  #: the rendered fixed view, restored before each frame

    @property
    def dynamic(self) -> list[Any]:
        return [self.trail, self.arms, self.discs, *self.body_axes, self.title]


def _scene(lim: np.ndarray, ref: np.ndarray | None) -> _Scene:
    """Figure, 3-D axes within ``lim``, the reference path and the (blitted) moving artists."""
    fig = new_figure("", figsize=_ANIM_SIZE, dpi=_ANIM_DPI)
    ax = fig.add_subplot(projection="3d")
    cube_axes(ax, lim)
    if ref is not None:
        ax.plot(ref[:, 0], ref[:, 1], ref[:, 2], color="0.5", ls="--", lw=1.0, label="reference")
    (trail,) = ax.plot([], [], [], color="C0", lw=1.5, label="path")
    (arms,) = ax.plot([], [], [], color="k", lw=2.0)
    (discs,) = ax.plot([], [], [], color="C1", lw=1.2)
    body_axes = [ax.plot([], [], [], color=c, lw=2.0)[0] for c in ("red", "green", "blue")]
    ax.legend(loc="upper left", fontsize="small")
    title = fig.text(0.5, 0.97, "", ha="center", va="top", fontsize="medium")
    for a in (trail, arms, discs, *body_axes, title):
        a.set_animated(True)
    # blitting: the fixed view (axes, grid, reference, legend) is rendered once
    fig.canvas.draw()
    background = fig.canvas.copy_from_bbox(fig.bbox)
    return _Scene(fig, ax, trail, arms, discs, body_axes, title, background)


def _pose(scene: _Scene, shape: _Shape, scale: float, c: np.ndarray, Rm: np.ndarray) -> None:
    """Place the arms, discs and body axes at ``c`` [m] turned by ``Rm``; hide them if unknown."""
    if np.all(np.isfinite(c)) and np.all(np.isfinite(Rm)):
        tips = c + scale * shape.rotors @ Rm.T  # (R, 3)
        arms = _polyline([np.stack([c, tip]) for tip in tips])
        discs = _polyline([tip + scale * shape.disc @ Rm.T for tip in tips])
        for j, ln in enumerate(scene.body_axes):
            e = c + scale * 1.2 * shape.arm * Rm[:, j]
            ln.set_data_3d([c[0], e[0]], [c[1], e[1]], [c[2], e[2]])
    else:
        arms = discs = np.full((1, 3), np.nan)
        for ln in scene.body_axes:
            ln.set_data_3d([], [], [])
    scene.arms.set_data_3d(arms[:, 0], arms[:, 1], arms[:, 2])
    scene.discs.set_data_3d(discs[:, 0], discs[:, 1], discs[:, 2])


def _frames(
    scene: _Scene,
    shape: _Shape,
    scale: float,
    time: np.ndarray,
    pos: np.ndarray,
    R_wb: np.ndarray,
    idx: np.ndarray,
    trail: float | None,
    base: str,
) -> Iterator[np.ndarray]:
    """Each frame's RGB image (H, W, 3): frame ``f`` is sample ``idx[f]``, attitude ``R_wb[f]``."""
    fig = scene.fig
    for f, k in enumerate(idx):
        lo = 0 if trail is None else int(np.searchsorted(time, time[k] - trail))
        seg = pos[lo : k + 1]
        scene.trail.set_data_3d(seg[:, 0], seg[:, 1], seg[:, 2])
        _pose(scene, shape, scale, pos[k], R_wb[f])
        scene.title.set_text(f"{base}\nt = {time[k]:6.2f} s")
        fig.canvas.restore_region(scene.background)
        for a in scene.dynamic:
            (fig if a is scene.title else scene.ax).draw_artist(a)
        yield np.asarray(fig.canvas.buffer_rgba())[..., :3]


def _write_mp4(
    frames: Iterable[np.ndarray], size: tuple[int, int], ffmpeg: str, period: float, p: Path
) -> None:
    """Pipe the RGB ``frames`` (``size`` = (w, h)), ``period`` [s] apart, to ffmpeg: H.264 ``p``."""
    w, h = size
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
        for rgb in frames:
            proc.stdin.write(np.ascontiguousarray(rgb).tobytes())
    finally:
        proc.stdin.close()
        if proc.wait() != 0:
            raise RuntimeError(f"animate: ffmpeg failed writing {p}")


def _write_gif(frames: Iterable[np.ndarray], period: float, p: Path) -> None:
    """Write the RGB ``frames`` (64 colours each), ``period`` [s] of flight apart, as a GIF."""
    from PIL import Image

    p.parent.mkdir(parents=True, exist_ok=True)
    images = [
        Image.fromarray(rgb).quantize(colors=64, method=Image.Quantize.FASTOCTREE) for rgb in frames
    ]
    if images:
        images[0].save(
            p,
            save_all=True,
            append_images=images[1:],
            loop=0,
            duration=_gif_durations(len(images), period),
            disposal=1,
        )


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
    p = Path(path)
    ffmpeg = _check_request(log, p, drone, fps, max_frames)
    time = np.asarray(log["time"], dtype=np.float64)
    pos = nan_masked(np.asarray(log["pos"])[:, drone])
    quat = np.asarray(log["quat"], dtype=np.float64)[:, drone]
    ref = nan_masked(np.asarray(log["ref_pos"])[:, drone]) if "ref_pos" in log else None
    shape = _drone_shape(meta)
    lim = cube_limits(pos, *(() if ref is None else (ref,)), pad=0.15)
    if scale is None:
        scale = max(1.0, 0.08 * float(lim[0, 1] - lim[0, 0]) / shape.arm)
    gif = p.suffix.lower() == ".gif"
    if gif:
        fps = min(fps, 1.0 / _GIF_MIN_PERIOD_S)
    idx, period = _frame_indices(time, fps, max_frames)
    with np.errstate(invalid="ignore", divide="ignore"):
        R_wb = np.asarray(to_matrix(quat[idx]))  # (F, 3, 3)
    scene = _scene(lim, ref)
    base = figure_title(meta, f"drone {drone}", [drone], 1)
    if scale > 1.0:
        base += f" (drawn ×{scale:.0f})"
    frames = _frames(scene, shape, scale, time, pos, R_wb, idx, trail, base)
    if gif:
        _write_gif(frames, period, p)
    else:
        _write_mp4(frames, scene.fig.canvas.get_width_height(), ffmpeg, period, p)
    return p
