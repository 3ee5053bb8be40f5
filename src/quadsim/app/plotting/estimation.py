r"""State-estimate figure: the estimator's error against the truth, its ±3σ bands and NEES.

The error is *true minus estimate*, as in :mod:`quadsim.app.analysis`::

    δp = p - p̂ [m],   δv = v - v̂ [m/s],   δθ = Log(q̂⁻¹ ⊗ q) [rad] (estimated body frame)

(:func:`~quadsim.app.analysis.attitude_error_vector`). The RMSE of a row pools the
samples of the drones drawn with ``time >= t_from``, before each drone's first crash and with a
finite error: position and velocity ``sqrt(mean |e|²)``, attitude ``sqrt(mean θ²)`` with the
rotation angle ``θ = |δθ|``; the mean NEES pools the same samples. These are the definitions of
the ``estimation`` entry of ``summary.json`` (:mod:`quadsim.app.io.summary`), so with every
drone drawn and finite data the figure and the summary give the same numbers.

The NEES band is the two-sided 95 % region of one run, ``χ²⁻¹_9(0.025)`` to ``χ²⁻¹_9(0.975)``
(2.70 to 19.02, :func:`~quadsim.app.analysis.nees_band` with ``n_runs = 1``): the
NEES of a consistent filter lies inside it at about 95 % of the samples.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ..analysis import attitude_error_vector, nees_band
from ._common import (
    MAX_DRONES,
    drone_color,
    figure_title,
    first_crashes,
    mark_no_data,
    mark_settle,
    nan_masked,
    new_figure,
    plot_thinned,
    save_figure,
    select_drones,
    thin_columns,
    thin_indices,
)

__all__ = ["FIGSIZE_ESTIMATION", "NEES_DOF", "EstimationErrors", "estimation_errors",
           "plot_estimation"]  # fmt: skip

#: Figure size [inch] of :func:`plot_estimation` (4 rows).
FIGSIZE_ESTIMATION = (11.0, 10.0)
#: Degrees of freedom of the logged NEES (position, velocity, attitude).
NEES_DOF = 9
_AXES = ("x", "y", "z")


class EstimationErrors(NamedTuple):
    """Errors of a state estimate (true minus estimate) and their statistics.

    Arrays are ``(T, n, ...)`` over the ``n`` selected drones; ``None`` where the log lacks the
    estimate or the truth. Statistics pool the ``counted`` samples (``time >= t_from``, before
    the drone's first crash) whose error is finite; NaN when there is none.
    """

    pos: np.ndarray  #: (T, n, 3) position error [m]
    vel: np.ndarray | None  #: (T, n, 3) velocity error [m/s]
    att: np.ndarray | None  #: (T, n, 3) attitude error, body-frame rotation vector [rad]
    nees: np.ndarray | None  #: (T, n) NEES (9 dof), dimensionless
    counted: np.ndarray  #: (T, n) bool: samples the statistics may count
    pos_rmse_m: float
    vel_rmse_m_s: float | None
    att_rmse_deg: float | None
    nees_mean: float | None
    nees_in_band: float | None  #: fraction of counted NEES samples inside the 95 % band


def _nees_band_one_run() -> tuple[float, float]:
    return nees_band(NEES_DOF, 1, 0.95)


def _attitude_error(q_est: np.ndarray, q_true: np.ndarray) -> np.ndarray:
    """``Log(q_est⁻¹ ⊗ q_true)`` [rad] (..., 3); NaN where either quaternion is unusable."""
    a = nan_masked(q_est)
    b = nan_masked(q_true)
    ok = (
        np.all(np.isfinite(a), axis=-1)
        & np.all(np.isfinite(b), axis=-1)
        & (np.linalg.norm(np.nan_to_num(a), axis=-1) > 1e-12)
        & (np.linalg.norm(np.nan_to_num(b), axis=-1) > 1e-12)
    )
    out = np.full((*a.shape[:-1], 3), np.nan)
    if ok.any():
        out[ok] = attitude_error_vector(a[ok], b[ok])
    return out


def _rms(sq: np.ndarray | None, use: np.ndarray) -> float | None:
    """``sqrt(mean)`` of the squared norms ``sq`` (T, n) over ``use`` and finite entries."""
    if sq is None:
        return None
    ok = use & np.isfinite(sq)
    return float(np.sqrt(sq[ok].mean())) if ok.any() else math.nan


def estimation_errors(
    log: Mapping[str, Any], t_from: float = 0.0, drones: Sequence[int] | None = None
) -> EstimationErrors:
    """Errors of the logged estimate against the truth and their RMSE (module docstring).

    Args:
        log: Log dict: ``time`` (T,) [s], ``pos`` (T, N, 3) [m], ``est_pos`` (T, N, 3) [m];
            optionally ``vel``/``est_vel`` (T, N, 3) [m/s], ``quat``/``est_quat`` (T, N, 4)
            xyzw, ``est_nees`` (T, N), ``crashed`` (T, N).
        t_from: Statistics count samples with ``time >= t_from`` [s].
        drones: Drone indices (default all of them).

    Returns:
        The errors, ``counted`` mask, RMSE (position [m], velocity [m/s], attitude [deg]) and
        the mean NEES with the fraction of its samples inside the one-run 95 % band.

    Raises:
        ValueError: If the log has no ``est_pos``, or ``drones`` names a missing drone.
    """
    if "est_pos" not in log:
        raise ValueError("estimation: log has no 'est_pos' (no estimator in the loop)")
    n = np.asarray(log["pos"]).shape[1]
    sel = select_drones(log, drones, n)
    t = nan_masked(log["time"])
    pick = lambda k: np.asarray(log[k])[:, sel]  # noqa: E731
    pos = nan_masked(pick("pos")) - nan_masked(pick("est_pos"))
    vel = None
    if "vel" in log and "est_vel" in log:
        vel = nan_masked(pick("vel")) - nan_masked(pick("est_vel"))
    att = (
        _attitude_error(pick("est_quat"), pick("quat"))
        if "quat" in log and "est_quat" in log
        else None
    )
    nees = nan_masked(pick("est_nees")).reshape(len(t), len(sel)) if "est_nees" in log else None
    counted = np.broadcast_to((t >= float(t_from))[:, None], (len(t), len(sel))).copy()
    if "crashed" in log:
        counted &= ~np.logical_or.accumulate(np.asarray(pick("crashed"), dtype=bool), axis=0)
    sq = lambda e: None if e is None else np.sum(e * e, axis=-1)  # noqa: E731
    att_rms = _rms(sq(att), counted)
    nees_mean = nees_in = None
    if nees is not None:
        ok = counted & np.isfinite(nees)
        lo, hi = _nees_band_one_run()
        v = nees[ok]
        nees_mean = float(v.mean()) if v.size else math.nan
        nees_in = float(np.mean((v >= lo) & (v <= hi))) if v.size else math.nan
    return EstimationErrors(
        pos=pos,
        vel=vel,
        att=att,
        nees=nees,
        counted=counted,
        pos_rmse_m=_rms(sq(pos), counted),  # type: ignore[arg-type]
        vel_rmse_m_s=_rms(sq(vel), counted),
        att_rmse_deg=None if att_rms is None else math.degrees(att_rms),
        nees_mean=nees_mean,
        nees_in_band=nees_in,
    )


def _sigma(cov: np.ndarray | None, cols: slice, scale: float) -> np.ndarray | None:
    """``scale · sqrt(cov[..., cols])`` (T, n, 3); NaN where a variance is negative or missing."""
    if cov is None:
        return None
    v = cov[..., cols]
    return scale * np.sqrt(np.where(v >= 0, v, np.nan))


def _window(t_from: float) -> str:
    return f", t ≥ {t_from:g} s" if t_from > 0 else ""


class _Row(NamedTuple):
    """An error row of the figure: the error drawn and the RMSE its title states."""

    name: str  #: "position", "velocity" or "attitude"
    unit: str  #: unit of the values drawn
    scale: float  #: values drawn = ``scale`` × error
    err: np.ndarray | None  #: (T, n, 3) error (true − estimate), SI; ``None``: not logged
    sigma: np.ndarray | None  #: (T, n, 3) 1σ of the estimate, in ``unit``; ``None``: no covariance
    rmse: float | None  #: RMSE (``estimation_errors``' units)
    rmse_scale: float  #: the title's RMSE = ``rmse_scale`` × ``rmse``
    rmse_unit: str
    comps: tuple[str, ...]  #: the components' labels


def _error_rows(err: EstimationErrors, cov: np.ndarray | None) -> list[_Row]:
    """The position, velocity and attitude rows; ``cov`` (T, n, >= 9) gives the ±3σ bands."""
    deg = math.degrees(1.0)
    return [
        _Row("position", "mm", 1e3, err.pos, _sigma(cov, slice(0, 3), 1e3), err.pos_rmse_m,
             1e3, "mm", _AXES),
        _Row("velocity", "mm/s", 1e3, err.vel, _sigma(cov, slice(3, 6), 1e3), err.vel_rmse_m_s,
             1e3, "mm/s", _AXES),
        _Row("attitude", "deg", deg, err.att, _sigma(cov, slice(6, 9), deg), err.att_rmse_deg,
             1.0, "deg", ("about body x", "about body y", "about body z")),
    ]  # fmt: skip


def _error_lines(
    ax: Any, t: np.ndarray, y: np.ndarray, n: int, cols: int, comps: tuple[str, ...]
) -> None:
    """The components of ``y`` (T, n, 3): bold for the first drone (labelled), light for others."""
    for k in range(n - 1, -1, -1):  # the first drone on top
        for j in range(3):
            if k == 0:
                plot_thinned(ax, t, y[:, 0, j], cols, color=drone_color(j), lw=1.2,
                             label=f"{comps[j]}", zorder=3)  # fmt: skip
            else:
                plot_thinned(ax, t, y[:, k, j], cols, color=drone_color(j), lw=0.6, alpha=0.3,
                             zorder=2)  # fmt: skip


def _sigma_bands(ax: Any, t: np.ndarray, s: np.ndarray, cols: int) -> None:
    """Shade ``±s`` (T, 3) per component, with dashed edges."""
    idx = thin_indices(s, cols)
    for j in range(3):
        ax.fill_between(t[idx], -s[idx, j], s[idx, j], color=drone_color(j), alpha=0.1,
                        lw=0, label="±3σ" if j == 0 else None, zorder=1)  # fmt: skip
        for sign in (-1.0, 1.0):  # the edges, so overlapping bands stay apart
            ax.plot(t[idx], sign * s[idx, j], color=drone_color(j), lw=0.7, ls="--",
                    alpha=0.7, zorder=1)  # fmt: skip


def _error_row(ax: Any, row: _Row, t: np.ndarray, n: int, cols: int, counted: str) -> None:
    """``row`` of ``n`` drones: errors, the first drone's ±3σ, the RMSE over ``counted``."""
    name = row.name
    ax.set_ylabel(f"{name} error [{row.unit}]")
    ax.grid(True, alpha=0.3)
    if row.err is None:
        mark_no_data(ax, f"{name} estimate or truth")
        ax.set_title(f"{name} error: not logged", fontsize="medium")
        return
    _error_lines(ax, t, row.scale * row.err, n, cols, row.comps)
    if row.sigma is not None:
        _sigma_bands(ax, t, 3.0 * row.sigma[:, 0], cols)
    rmse = row.rmse
    stat = ("n/a" if rmse is None or not math.isfinite(rmse)
            else f"{rmse * row.rmse_scale:.3g} {row.rmse_unit}")  # fmt: skip
    what = "rotation angle " if name == "attitude" else ""
    ax.set_title(f"{name} error (true − estimate): {what}RMSE {stat} ({counted})",
                 fontsize="medium")  # fmt: skip
    ax.legend(fontsize="x-small", ncol=4, loc="upper right")


def _running_mean(x: np.ndarray, use: np.ndarray) -> np.ndarray:
    """Mean of ``x`` (T,) over the ``use``d finite samples so far; NaN at the others."""
    ok = use & np.isfinite(x)
    csum = np.cumsum(np.where(ok, x, 0.0))
    cnt = np.cumsum(ok)
    with np.errstate(invalid="ignore", divide="ignore"):
        run = np.where(cnt > 0, csum / cnt, np.nan)
    run[~ok] = np.nan
    return run


def _nees_row(
    ax: Any,
    err: EstimationErrors,
    t: np.ndarray,
    sel: list[int],
    cols: int,
    t_from: float,
    counted: str,
) -> None:
    """The NEES: one-run 95 % band, every drone's, the first's running mean, stats (``counted``)."""
    lo, hi = _nees_band_one_run()
    nees = err.nees
    ax.axhspan(lo, hi, color="green", alpha=0.12, lw=0,
               label=f"95 % band, one run [{lo:.3g}, {hi:.3g}]")  # fmt: skip
    ax.axhline(NEES_DOF, color="green", ls=":", lw=1.0, label=f"mean {NEES_DOF} (χ² dof)")
    for k in range(len(sel) - 1, 0, -1):
        plot_thinned(ax, t, nees[:, k], cols, color="0.4", lw=0.6, alpha=0.3)
    plot_thinned(ax, t, nees[:, 0], cols, color="C0", lw=0.9, label=f"NEES, drone {sel[0]}")
    run = _running_mean(nees[:, 0], err.counted[:, 0])
    plot_thinned(ax, t, run, cols, color="C3", lw=1.6, label="running mean" + _window(t_from))
    pos_vals = nees[np.isfinite(nees) & (nees > 0)]
    if pos_vals.size:
        ax.set_yscale("log")
    ax.set_ylabel("NEES [-] (9 dof)")
    ax.grid(True, alpha=0.3)
    m, f = err.nees_mean, err.nees_in_band
    stat = (
        "n/a"
        if m is None or not math.isfinite(m)
        else f"mean {m:.3g}, {100 * f:.3g} % of samples in the 95 % band"  # type: ignore[operator]
    )
    ax.set_title(f"NEES of position, velocity, attitude: {stat} ({counted})", fontsize="medium")
    ax.legend(fontsize="x-small", ncol=4, loc="upper right")


def _mark_crashes(axes: Any, log: Mapping[str, Any], sel: list[int], t: np.ndarray) -> None:
    """A dotted line at each drawn drone's first crash (black for the first), labelled on top."""
    for k, j in first_crashes(log, sel).items():
        tc = t[j]
        for ax in axes:
            ax.axvline(tc, color="k" if k == 0 else "0.6", ls=":", lw=1.2)
        axes[0].annotate(f" crash {sel[k]}", (tc, 0.0), xycoords=("data", "axes fraction"),
                         va="bottom", fontsize="small", color="0.3")  # fmt: skip


def _estimation_figure(
    log: Mapping[str, Any],
    meta: Mapping[str, Any],
    drones: Sequence[int] | None = None,
    max_drones: int = MAX_DRONES,
    t_from: float = 0.0,
) -> tuple[Any, EstimationErrors]:
    """The figure of :func:`plot_estimation` (not saved) and the errors its titles state."""
    if "est_pos" not in log:
        raise ValueError("plot_estimation: log has no 'est_pos' (no estimator in the loop)")
    sel = select_drones(log, drones, max_drones)
    n_all = np.asarray(log["pos"]).shape[1]
    t_from = float(t_from)
    err = estimation_errors(log, t_from, sel)
    t = nan_masked(log["time"])
    cov = None
    if "est_cov" in log:
        c = nan_masked(np.asarray(log["est_cov"])[:, sel])
        cov = c if c.shape[-1] >= 9 else None
    has_nees = err.nees is not None
    nrows = 4 if has_nees else 3
    fig = new_figure("estimation", (FIGSIZE_ESTIMATION[0], FIGSIZE_ESTIMATION[1] * nrows / 4))
    cols = thin_columns(fig)
    axes = fig.subplots(nrows, 1, sharex=True, squeeze=False)[:, 0]
    who = f"drone {sel[0]}" + (f"; drones {', '.join(map(str, sel[1:]))} light" if
                                len(sel) > 1 else "")  # fmt: skip
    pooled = f"{len(sel)} drones" if len(sel) > 1 else f"drone {sel[0]}"
    counted = pooled + _window(t_from)
    for ax, row in zip(axes, _error_rows(err, cov), strict=False):
        _error_row(ax, row, t, len(sel), cols, counted)
    if has_nees:
        _nees_row(axes[3], err, t, sel, cols, t_from, counted)
    mark_settle(axes, t, t_from)
    _mark_crashes(axes, log, sel, t)
    axes[-1].set_xlabel("time [s]")
    fig.suptitle(figure_title(meta, f"state estimate against truth ({who})", sel, n_all))
    h = fig.get_figheight()  # margins in inches: room for the suptitle and the row titles
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.55 / h, top=1 - 0.8 / h, hspace=0.32)
    return fig, err


def plot_estimation(
    log: Mapping[str, Any],
    meta: Mapping[str, Any],
    path: str | os.PathLike[str],
    drones: Sequence[int] | None = None,
    max_drones: int = MAX_DRONES,
    t_from: float = 0.0,
) -> Path:
    """Error of the state estimate against the truth, with ±3σ bands and the NEES.

    Rows: position error [mm], velocity error [mm/s] and attitude error [deg] (the body-frame
    rotation vector ``Log(q̂⁻¹ ⊗ q)``), one line per axis for the first drone drawn and light
    lines for the other drawn drones; shaded ``±3σ`` of the first drone from ``sqrt`` of the
    matching ``est_cov`` columns when logged. With ``est_nees`` a last row: the NEES (log
    scale), the one-run 95 % χ²(9) band and the running mean from ``t_from``. Each row's title
    states its RMSE (mean NEES and the share inside the band) over the drawn drones from
    ``t_from`` on, before crashes (module docstring, :func:`estimation_errors`). A log with only
    ``est_pos``, ``est_vel``, ``est_quat`` (the complementary filter) gets the error rows without
    bands and no NEES row.

    Args:
        log: Log dict: ``time`` (T,), ``pos``, ``est_pos`` (T, N, 3) [m]; optionally ``vel``,
            ``est_vel`` (T, N, 3) [m/s], ``quat``, ``est_quat`` (T, N, 4) xyzw, ``est_cov``
            (T, N, 15) [m², m²/s², rad², ...], ``est_nees`` (T, N), ``crashed`` (T, N).
        meta: Run metadata (title).
        path: PNG file to write.
        drones: Drone indices to show (default the first ``max_drones``).
        max_drones: At most this many drones are drawn.
        t_from: The statistics count from this time [s] (``output.settle``).

    Returns:
        The path written.

    Raises:
        ValueError: If the log has no ``est_pos``.
    """
    fig, _ = _estimation_figure(log, meta, drones, max_drones, t_from)
    return save_figure(fig, path)
