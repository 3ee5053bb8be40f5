"""Shared plotting helpers: figure creation, data masking, drone selection, styles.

Agg figures and saving, figure sizes and colours, non-finite masking, drone selection, titles,
Euler angles, axis limits, 3-D cube axes, crashes and the settling-time mark. A private module
of :mod:`quadsim.app.plotting`: its functions serve the sibling plot modules only.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from ...physics.rotation import to_euler

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


def new_figure(kind: str, figsize: tuple[float, float] | None = None, dpi: int = DPI) -> Any:
    """An Agg :class:`~matplotlib.figure.Figure`, ``FIGSIZE[kind]`` [inch] unless given."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize or FIGSIZE[kind], dpi=dpi)
    FigureCanvasAgg(fig)
    return fig


#: zlib level of the PNGs. Level 3 on RGB encodes the four flight figures in about 2/3 of the
#: time ``savefig`` takes (RGBA, Pillow's default level 6), in files a few per cent smaller.
PNG_COMPRESS_LEVEL = 3


def save_figure(fig: Any, path: str | os.PathLike[str] | BinaryIO) -> Path | BinaryIO:
    """Render ``fig`` (Agg, at its dpi) and write it; a ``.png`` goes straight through Pillow.

    An opaque figure (every one here) is written as RGB rather than RGBA: the same pixels,
    a fifth less to compress. The PNG carries what ``savefig`` writes: the dpi and the
    ``Software`` tag. A name without a suffix gets ``.png`` (as ``savefig`` would add it), and
    the path returned is the file written. ``path`` may also be a binary file (a PNG is written
    to it, and it is returned).
    """
    if hasattr(path, "write"):
        _write_png(fig, path)
        return path
    p = Path(path)
    if not p.suffix:
        p = p.with_name(p.name + ".png")
    p.parent.mkdir(parents=True, exist_ok=True)
    if p.suffix.lower() != ".png":
        fig.savefig(p, dpi=fig.dpi)
        return p
    _write_png(fig, p)
    return p


def _write_png(fig: Any, target: Path | BinaryIO) -> None:
    """Draw ``fig`` and write it as a PNG (RGB where opaque) to ``target``."""
    import matplotlib
    from PIL import Image, PngImagePlugin

    fig.canvas.draw()
    rgba = np.asarray(fig.canvas.buffer_rgba())
    opaque = bool((rgba[..., 3] == 255).all())
    img = Image.fromarray(np.ascontiguousarray(rgba[..., :3]) if opaque else rgba)
    info = PngImagePlugin.PngInfo()
    info.add_text("Software", f"Matplotlib version{matplotlib.__version__}, https://matplotlib.org/")
    img.save(target, format="png", pnginfo=info, dpi=(fig.dpi, fig.dpi),
             compress_level=PNG_COMPRESS_LEVEL)  # fmt: skip


def thin_indices(y: np.ndarray, columns: int) -> np.ndarray | slice:
    """Indices of the samples of ``y`` that draw the same line ``columns`` pixels wide.

    Long series only: with more than 4 samples per column, the samples are cut into
    ``columns`` runs and each run keeps its first, last, lowest and highest sample (M4,
    Jugel et al., VLDB 2014), per column of ``y`` (T, ...) (the union over them); the
    samples on either side of every NaN run are kept too, so the line breaks where it did.
    Shorter series are drawn whole (``slice(None)``).
    """
    T = y.shape[0]
    columns = max(1, int(columns))
    if T <= 4 * columns:
        return slice(None)
    Y = np.asarray(y, dtype=np.float64).reshape(T, -1)
    k = -(-T // columns)  # samples per run
    nb = -(-T // k)
    Yp = np.concatenate([Y, np.repeat(Y[-1:], nb * k - T, axis=0)]).reshape(nb, k, -1)
    nan = np.isnan(Yp)
    base = (np.arange(nb) * k)[:, None]
    keep = [
        np.arange(nb) * k,
        np.minimum(np.arange(nb) * k + k - 1, T - 1),
        (base + np.where(nan, np.inf, Yp).argmin(axis=1)).ravel(),
        (base + np.where(nan, -np.inf, Yp).argmax(axis=1)).ravel(),
    ]
    edges = np.flatnonzero(np.diff(np.isnan(Y), axis=0).any(axis=1))
    keep += [edges, edges + 1]
    idx = np.unique(np.concatenate(keep))
    return idx[idx < T]


def plot_thinned(ax: Any, t: np.ndarray, y: np.ndarray, columns: int, **style: Any) -> Any:
    """``ax.plot(t, y, **style)`` of one series ``y`` (T,) against ``t`` (T,) [s], drawn from the
    samples :func:`thin_indices` keeps for ``columns`` pixel columns (the same line).

    Returns:
        What ``ax.plot`` returns.
    """  # noqa: D205
    idx = thin_indices(y, columns)
    return ax.plot(t[idx], y[idx], **style)


def run_indices(mask: np.ndarray, columns: int) -> np.ndarray | slice:
    """Indices of a boolean series that shade the same intervals (``fill_between(where=)``).

    For long series (as :func:`thin_indices`): the ends of the series and of every run of ``True``
    with the samples just outside it, so each run keeps its extent and runs stay apart.
    """
    T = mask.shape[0]
    if T <= 4 * max(1, int(columns)):
        return slice(None)
    m = np.asarray(mask, dtype=bool)
    change = np.flatnonzero(m[1:] != m[:-1])  # the last sample before each change
    idx = np.unique(np.concatenate([[0, T - 1], change, change + 1]))
    return idx


def thin_columns(fig: Any, oversample: int = 2) -> int:
    """Runs for :func:`thin_indices`: ``oversample`` per pixel column of the whole figure."""
    return int(oversample * fig.get_figwidth() * fig.dpi)


def nan_masked(a: Any) -> np.ndarray:
    """Float64 copy with non-finite entries replaced by NaN (matplotlib breaks lines there)."""
    a = np.asarray(a, dtype=np.float64)
    return np.where(np.isfinite(a), a, np.nan)


def select_drones(
    log: Mapping[str, Any], drones: Sequence[int] | None, max_drones: int
) -> list[int]:
    """Indices of the drones to draw, at most ``max_drones``.

    ``drones`` (checked against the log's ``N``), or the first ones when ``None``.
    """
    n = np.asarray(log["pos"]).shape[1]
    if drones is None:
        return list(range(min(n, max_drones)))
    sel = [int(i) for i in drones]
    bad = [i for i in sel if not 0 <= i < n]
    if bad:
        raise ValueError(f"drones: indices {bad} outside [0, {n})")
    return sel[:max_drones]


def figure_title(meta: Mapping[str, Any], what: str, shown: list[int], n: int) -> str:
    """``what — drone — scenario``, and how many of the ``n`` drones are ``shown``."""
    parts = [what]
    if meta.get("drone"):
        parts.append(str(meta["drone"]))
    if meta.get("scenario"):
        parts.append(str(meta["scenario"]))
    t = " — ".join(parts)
    if n > len(shown):
        t += f"  ({len(shown)} of {n} drones shown)"
    return t


def drone_color(k: int) -> str:
    """Colour of the ``k``-th drone drawn (matplotlib's ``C0``..``C9`` cycle)."""
    return f"C{k % 10}"


def unwrap_finite(a: np.ndarray) -> np.ndarray:
    """np.unwrap along axis 0 over the finite samples only (NaN stay NaN)."""
    out = np.array(a, dtype=np.float64)
    for idx in np.ndindex(out.shape[1:]):
        col = out[(slice(None), *idx)]
        ok = np.isfinite(col)
        if ok.any():
            col[ok] = np.unwrap(col[ok])
    return out


def euler_deg(quat: Any) -> np.ndarray:
    """Euler ZYX angles [deg] ``(T, ..., 3)`` of quaternions ``(T, ..., 4)``, yaw unwrapped."""
    q = np.asarray(quat, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        rpy = to_euler(q)
    rpy = nan_masked(rpy)
    rpy[..., 2] = unwrap_finite(rpy[..., 2])
    return np.degrees(rpy)


def cube_limits(*arrays: np.ndarray, pad: float = 0.05, min_span: float = 0.5) -> np.ndarray:
    """Cube limits (3, 2) [m] around the finite points of (..., 3) arrays."""
    pts = np.concatenate([np.asarray(a, dtype=np.float64).reshape(-1, 3) for a in arrays])
    pts = pts[np.all(np.isfinite(pts), axis=1)]
    if pts.size == 0:
        return np.array([[-1.0, 1.0]] * 3)
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    c = (lo + hi) / 2
    h = max(float((hi - lo).max()), min_span) * (0.5 + pad)
    return np.stack([c - h, c + h], axis=1)


def cube_axes(ax: Any, lim: np.ndarray) -> None:
    """Set the 3-D axes ``ax`` to the cube ``lim`` (3, 2) [m] (equal aspect) and label them."""
    ax.set_xlim(*lim[0])
    ax.set_ylim(*lim[1])
    ax.set_zlim(*lim[2])
    ax.set_box_aspect((1, 1, 1))
    ax.set_xlabel("x [m]")
    ax.set_ylabel("y [m]")
    ax.set_zlabel("z [m]")


def mark_no_data(ax: Any, what: str) -> None:
    """Write "``what`` not logged" in the middle of the axes ``ax``."""
    ax.text(
        0.5,
        0.5,
        f"{what} not logged",
        ha="center",
        va="center",
        transform=ax.transAxes,
        color="0.5",
    )


def first_crashes(log: Mapping[str, Any], sel: Sequence[int]) -> dict[int, int]:
    """``{k: index of the first crashed sample}`` of the drones ``sel[k]`` that crash."""
    if "crashed" not in log:
        return {}
    cr = np.asarray(log["crashed"], dtype=bool)[:, sel]
    return {k: int(np.argmax(cr[:, k])) for k in range(len(sel)) if cr[:, k].any()}


def mark_settle(axes: Any, t: np.ndarray, t_from: float) -> None:
    """Mark ``t_from`` [s] > 0 on each of ``axes``: a dashed line, the time before it shaded."""
    if t_from > 0:
        t0 = float(np.nanmin(t)) if np.isfinite(t).any() else 0.0
        for ax in axes:
            if t_from > t0:
                ax.axvspan(t0, t_from, color="0.5", alpha=0.12, lw=0)
            ax.axvline(t_from, color="0.3", ls="--", lw=1.2)
