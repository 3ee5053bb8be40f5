"""Animation of the drones' flight to GIF (Pillow) or MP4 (ffmpeg)."""

from __future__ import annotations

import math
import os
import shutil
import subprocess
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ...physics.rotation import to_matrix
from ._common import (
    MAX_DRONES,
    cube_axes,
    cube_limits,
    drone_color,
    figure_title,
    nan_masked,
    new_figure,
    select_drones,
)

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


def _check_request(
    log: Mapping[str, Any],
    p: Path,
    drones: Sequence[int] | None,
    fps: float,
    max_frames: int,
    max_drones: int,
) -> tuple[str | None, list[int]]:
    """The ffmpeg executable an ``.mp4`` needs (``None`` for a ``.gif``) and the drones drawn;
    bad requests raise."""  # noqa: D205, D209
    suffix = p.suffix.lower()
    if suffix not in (".gif", ".mp4"):
        raise ValueError(f"animate: path must end in .gif or .mp4, got {p.name!r}")
    ffmpeg = ffmpeg_exe() if suffix == ".mp4" else None
    if suffix == ".mp4" and ffmpeg is None:
        raise RuntimeError(
            "animate: MP4 needs ffmpeg (pip install imageio-ffmpeg, or put "
            "ffmpeg on PATH); write a .gif instead"
        )
    try:
        sel = select_drones(log, drones, max_drones)
    except ValueError as e:
        raise ValueError(f"animate: {e}") from None
    if not sel:
        raise ValueError("animate: no drone to draw")
    if fps <= 0 or max_frames < 1:
        raise ValueError(f"animate: need fps > 0 and max_frames >= 1, got {fps}, {max_frames}")
    return ffmpeg, sel


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


#: Colours of the body axes x, y, z (every drone's).
_AXIS_COLORS = ("red", "green", "blue")


class _Scene(NamedTuple):
    """The animation's figure: a fixed view rendered once, and the artists redrawn each frame.

    Each moving part is one 3-D line collection for all the drones (one artist, however many
    drones), its segments in a fixed order with their colours: ``trails`` a polyline per drone,
    ``discs`` a rim per rotor (drone by drone), ``frames`` per drone its arms then its body axes.
    A drone's trail, discs and dashed reference have its colour; arms are black, body axes RGB.
    """

    fig: Any
    ax: Any
    trails: Any  #: the paths flown (the trailing part), one per drone
    discs: Any  #: the rotor discs
    frames: Any  #: the arms and the body axes
    clock: Any  #: the time shown under the title
    background: Any  #: the rendered fixed view, restored before each frame

    @property
    def moving(self) -> list[Any]:
        """The 3-D collections redrawn each frame, back to front."""
        return [self.trails, self.discs, self.frames]


def _scene(lim: np.ndarray, ref: np.ndarray | None, sel: list[int], R: int, title: str) -> _Scene:
    """Figure, 3-D axes within ``lim``, the references (T, D, 3), legend and title, and the
    (blitted) moving artists of the drones ``sel`` with ``R`` rotors each."""  # noqa: D205, D209
    from matplotlib.lines import Line2D
    from mpl_toolkits.mplot3d.art3d import Line3DCollection

    fig = new_figure("", figsize=_ANIM_SIZE, dpi=_ANIM_DPI)
    ax = fig.add_subplot(projection="3d")
    cube_axes(ax, lim)
    colors = [drone_color(k) for k in range(len(sel))]
    if ref is not None:
        for k, c in enumerate(colors):
            ax.plot(ref[:, k, 0], ref[:, k, 1], ref[:, k, 2], color=c, ls="--", lw=1.0, alpha=0.7)
    trails = Line3DCollection([], colors=colors, linewidths=1.5)
    discs = Line3DCollection([], colors=[c for c in colors for _ in range(R)], linewidths=1.2)
    frames = Line3DCollection(
        [],
        colors=[x for _ in colors for x in (*["k"] * R, *_AXIS_COLORS)],
        linewidths=2.0,
    )
    for a in (trails, discs, frames):
        a.set_animated(True)
        ax.add_collection(a)
    handles = [
        Line2D([], [], color=c, lw=2.0, label=f"drone {i}")
        for c, i in zip(colors, sel, strict=True)
    ]
    if ref is not None:
        handles.append(Line2D([], [], color="0.4", ls="--", lw=1.0, label="reference"))
    ax.legend(handles=handles, loc="upper left", fontsize="small")
    fig.text(0.5, 0.97, title, ha="center", va="top", fontsize="medium")
    clock = fig.text(0.5, 0.935, "", ha="center", va="top", fontsize="medium", animated=True)
    # blitting: the fixed view (axes, grid, references, legend, title) is rendered once
    fig.canvas.draw()
    background = fig.canvas.copy_from_bbox(fig.bbox)
    return _Scene(fig, ax, trails, discs, frames, clock, background)


def _poses(
    shape: _Shape, scale: float, c: np.ndarray, Rm: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Segments of the discs (D R, 17, 3) and of the arms and body axes (D (R + 3), 2, 3) [m] of
    drones at ``c`` (D, 3) turned by ``Rm`` (D, 3, 3); NaN (not drawn) where either is unknown."""  # noqa: D205, D209
    D, R = c.shape[0], shape.rotors.shape[0]
    tips = c[:, None] + scale * np.einsum("rj,dij->dri", shape.rotors, Rm)  # (D, R, 3)
    rims = tips[:, :, None] + scale * np.einsum("pj,dij->dpi", shape.disc, Rm)[:, None]
    ends = c[:, None] + (scale * 1.2 * shape.arm) * Rm.transpose(0, 2, 1)  # (D, 3, 3): axis j
    tops = np.concatenate([tips, ends], axis=1)  # (D, R + 3, 3)
    lines = np.stack([np.broadcast_to(c[:, None], tops.shape), tops], axis=2)
    unknown = ~(np.isfinite(c).all(axis=1) & np.isfinite(Rm).all(axis=(1, 2)))
    rims[unknown] = np.nan
    lines[unknown] = np.nan
    return rims.reshape(D * R, -1, 3), lines.reshape(D * (R + 3), 2, 3)


def _frames(
    scene: _Scene,
    shape: _Shape,
    scale: float,
    time: np.ndarray,
    pos: np.ndarray,
    R_wb: np.ndarray,
    idx: np.ndarray,
    trail: float | None,
) -> Iterator[np.ndarray]:
    """Each frame's RGB image (H, W, 3): frame ``f`` is sample ``idx[f]`` of ``pos`` (T, D, 3),
    attitudes ``R_wb[f]`` (D, 3, 3)."""  # noqa: D205, D209
    fig, ax = scene.fig, scene.ax
    for f, k in enumerate(idx):
        lo = 0 if trail is None else int(np.searchsorted(time, time[k] - trail))
        scene.trails.set_segments(pos[lo : k + 1].transpose(1, 0, 2))
        rims, lines = _poses(shape, scale, pos[k], R_wb[f])
        scene.discs.set_segments(rims)
        scene.frames.set_segments(lines)
        scene.clock.set_text(f"t = {time[k]:6.2f} s")
        fig.canvas.restore_region(scene.background)
        for a in scene.moving:
            a.do_3d_projection()  # what the axes' own draw does first (here: no full draw)
            ax.draw_artist(a)
        fig.draw_artist(scene.clock)
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


def _which(sel: list[int]) -> str:
    """``drone 0``, ``drones 0-3`` (a run of three or more) or ``drones 0, 2``."""
    if len(sel) == 1:
        return f"drone {sel[0]}"
    if len(sel) > 2 and sel == list(range(sel[0], sel[0] + len(sel))):
        return f"drones {sel[0]}–{sel[-1]}"
    return "drones " + ", ".join(map(str, sel))


def animate(
    log: Mapping[str, Any],
    meta: Mapping[str, Any],
    path: str | os.PathLike[str],
    fps: float = 30.0,
    drones: Sequence[int] | int | None = None,
    trail: float | None = None,
    max_frames: int = 600,
    scale: float | None = None,
    max_drones: int = MAX_DRONES,
    *,
    drone: int | None = None,
) -> Path:
    """Animate the drones: each one's arms, rotor discs, body axes, trailing path and reference.

    Every drone is drawn in its own colour, the figures' (``C0``, ``C1``, ...: its trail, rotor
    discs and dashed reference; the arms black, the body axes x, y, z red, green, blue), all at
    one drawing scale in one scene whose limits cover them all; the title names the drones.
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
        drones: Indices of the drones to animate (one index: that drone); default every drone
            of the log, up to ``max_drones``.
        trail: Length of the trailing path [s]; ``None`` for the whole path flown so far.
        max_frames: Upper bound on the number of frames.
        scale: Drawing scale of the drones; default enlarges them to ~8 % of the scene.
        max_drones: At most this many drones are drawn (the first of ``drones``).
        drone: One drone to animate (as ``drones=[drone]``).

    Returns:
        The path written.

    Raises:
        ValueError: Unknown suffix, bad ``drones``/``drone`` (or both given), empty log.
        RuntimeError: MP4 requested but no ffmpeg available.
    """
    if drone is not None:
        if drones is not None:
            raise ValueError("animate: give drones or drone, not both")
        drones = [drone]
    elif isinstance(drones, int | np.integer):
        drones = [int(drones)]
    p = Path(path)
    ffmpeg, sel = _check_request(log, p, drones, fps, max_frames, max_drones)
    time = np.asarray(log["time"], dtype=np.float64)
    pos = nan_masked(np.asarray(log["pos"])[:, sel])
    quat = np.asarray(log["quat"], dtype=np.float64)[:, sel]
    ref = nan_masked(np.asarray(log["ref_pos"])[:, sel]) if "ref_pos" in log else None
    shape = _drone_shape(meta)
    lim = cube_limits(pos, *(() if ref is None else (ref,)), pad=0.15)
    if scale is None:
        scale = max(1.0, 0.08 * float(lim[0, 1] - lim[0, 0]) / shape.arm)
    gif = p.suffix.lower() == ".gif"
    if gif:
        fps = min(fps, 1.0 / _GIF_MIN_PERIOD_S)
    idx, period = _frame_indices(time, fps, max_frames)
    with np.errstate(invalid="ignore", divide="ignore"):
        R_wb = np.asarray(to_matrix(quat[idx]))  # (F, D, 3, 3)
    title = figure_title(meta, _which(sel), sel, np.asarray(log["pos"]).shape[1])
    if scale > 1.0:
        title += f" (drawn ×{scale:.0f})"
    scene = _scene(lim, ref, sel, shape.rotors.shape[0], title)
    frames = _frames(scene, shape, scale, time, pos, R_wb, idx, trail)
    if gif:
        _write_gif(frames, period, p)
    else:
        _write_mp4(frames, scene.fig.canvas.get_width_height(), ffmpeg, period, p)
    return p
