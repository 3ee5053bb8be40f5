r"""Run summaries: :func:`summarize`, :func:`write_summary`, :func:`format_summary_table`.

**Summary** (:func:`summarize`). With position error ``e = pos - ref_pos`` [m] and only the
samples before a drone's first crash counted ("flying" samples):

* ``tracking_rms_m = sqrt(mean |e|^2)`` over all drones and flying samples with ``time >= t_from``
  (per drone likewise), ``tracking_max_m = max |e|``;
* tilt = angle between body z and world z, ``atan2(sqrt(z_x^2 + z_y^2), z_z)`` with
  ``z = R_wb e_z``; reported in degrees;
* each sample stands for the interval until the next one (sample-and-hold; the last one for
  the median step ``dt``): ``sim_time_s = t_last - t_first + dt``; time in rotor saturation
  sums those intervals where the allocation flag ``saturated`` is set (if the log has no
  ``saturated``: where any ``cmd_rpm`` lies at ``rpm_min`` or ``rpm_max``);
* ``real_time_factor = sim_time_s / wall_time_s`` (simulated seconds of the whole batch per
  wall-clock second) and ``drone_seconds_per_wall_second = N sim_time_s / wall_time_s``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ._json import _dumps


def _sample_dt(time: np.ndarray, meta: Mapping[str, Any]) -> np.ndarray:
    """Interval [s] each sample stands for (sample-and-hold), shape (T,)."""
    T = time.shape[0]
    if T == 0:
        return np.zeros(0)
    if T > 1:
        d = np.diff(time)
        last = float(np.median(d))
    else:
        d = np.zeros(0)
        last = float(meta.get("dt") or 0.0)
    return np.concatenate([d, [last]])


def tilt(quat: np.ndarray) -> np.ndarray:
    """Angle [rad] between body z and world z of xyzw quaternions ``(..., 4)`` -> ``(...)``."""
    q = np.asarray(quat, dtype=np.float64)
    x, y, z, w = (q[..., i] for i in range(4))
    n2 = x * x + y * y + z * z + w * w
    zx = 2.0 * (x * z + w * y)
    zy = 2.0 * (y * z - w * x)
    zz = w * w + z * z - x * x - y * y  # = n2 (1 - 2(x²+y²)/n2)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.arctan2(np.hypot(zx, zy) / n2, zz / n2)


def _nanmax(a: np.ndarray, axis: Any = None) -> Any:
    a = np.where(np.isfinite(a), a, -np.inf)
    m = np.max(a, axis=axis, initial=-np.inf)
    return np.where(np.isinf(m) & (m < 0), np.nan, m)


def summarize(
    log: Mapping[str, Any],
    meta: Mapping[str, Any] | None,
    wall_time: float,
    interrupted: bool = False,
    t_from: float = 0.0,
) -> dict[str, Any]:
    """Summary statistics of a flight log (definitions in the module docstring).

    Args:
        log: Log dict (``time`` (T,), ``pos`` (T, N, 3), ``quat``, optionally ``ref_pos``,
            ``saturated``, ``cmd_rpm``, ``crashed``...).
        meta: Run metadata (``rpm_min``, ``rpm_max``, ``dt`` used when present).
        wall_time: Wall-clock time of the run [s].
        interrupted: The run was stopped early (Ctrl-C).
        t_from: Tracking error counts samples with ``time >= t_from`` [s] (settling skipped).

    Returns:
        A JSON-able dict: ``interrupted``, ``n_drones``, ``n_samples``, ``sim_time_s``,
        ``wall_time_s``, ``real_time_factor``, ``drone_seconds_per_wall_second``, ``t_from_s``,
        ``tracking_rms_m``, ``tracking_max_m``, ``max_tilt_deg``, ``saturation_time_s`` (worst
        drone), ``saturation_fraction`` (of all drone-samples), ``crash_count``, ``crashes``
        (list of ``{"drone", "time_s"}``), ``landed_count`` (at the last sample) and
        ``per_drone`` (list of per-drone dicts). Missing quantities are ``None``; NaN only
        where no finite sample exists.
    """
    meta = dict(meta or {})
    time = np.asarray(log["time"], dtype=np.float64)
    pos = np.asarray(log["pos"], dtype=np.float64)
    T, N = pos.shape[:2]
    dt = _sample_dt(time, meta)
    sim_time = float(dt.sum())

    crashed = np.asarray(log.get("crashed", np.zeros((T, N), bool)), dtype=bool)
    ever = np.logical_or.accumulate(crashed, axis=0) if T else crashed
    flying = ~ever
    crash_idx = np.argmax(crashed, axis=0) if T else np.zeros(N, int)
    crash_t = [float(time[crash_idx[i]]) if T and crashed[:, i].any() else None for i in range(N)]
    crashes = sorted(
        ({"drone": i, "time_s": t} for i, t in enumerate(crash_t) if t is not None),
        key=lambda c: (c["time_s"], c["drone"]),
    )

    # tracking error
    err_rms_d = np.full(N, np.nan)
    err_max_d = np.full(N, np.nan)
    rms = mx = None
    if "ref_pos" in log:
        e = np.linalg.norm(pos - np.asarray(log["ref_pos"], dtype=np.float64), axis=-1)
        use = flying & (time >= t_from)[:, None] & np.isfinite(e)
        e2 = np.where(use, e * e, 0.0)
        cnt = use.sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            err_rms_d = np.sqrt(e2.sum(axis=0) / cnt)
            rms = float(np.sqrt(e2.sum() / cnt.sum())) if cnt.sum() else math.nan
        err_max_d = _nanmax(np.where(use, e, np.nan), axis=0)
        mx = float(_nanmax(np.where(use, e, np.nan)))

    # tilt
    til = np.degrees(tilt(log["quat"]))
    til_d = _nanmax(np.where(flying, til, np.nan), axis=0)
    max_tilt = float(_nanmax(np.where(flying, til, np.nan)))

    # saturation
    sat = None
    if "saturated" in log:
        sat = np.asarray(log["saturated"], dtype=bool)
    elif "cmd_rpm" in log and "rpm_min" in meta and "rpm_max" in meta:
        c = np.asarray(log["cmd_rpm"], dtype=np.float64)
        tol = 1e-9 * max(abs(float(meta["rpm_max"])), 1.0)
        sat = np.any(
            (c >= float(meta["rpm_max"]) - tol) | (c <= float(meta["rpm_min"]) + tol), axis=-1
        )
    if sat is not None:
        sat = sat & flying
        sat_d = (sat * dt[:, None]).sum(axis=0)
        sat_time = float(sat_d.max()) if N else 0.0
        sat_frac = float(sat_d.sum() / (N * sim_time)) if N and sim_time > 0 else math.nan
    else:
        sat_d = np.full(N, np.nan)
        sat_time = sat_frac = None

    landed = np.asarray(log["landed"], dtype=bool)[-1] if "landed" in log and T else None
    wall = float(wall_time)
    with np.errstate(divide="ignore", invalid="ignore"):
        rtf = sim_time / wall if wall > 0 else math.inf
    per_drone = [
        {
            "drone": i,
            "tracking_rms_m": float(err_rms_d[i]),
            "tracking_max_m": float(err_max_d[i]),
            "max_tilt_deg": float(til_d[i]),
            "saturation_time_s": float(sat_d[i]),
            "crash_time_s": crash_t[i],
            "landed": None if landed is None else bool(landed[i]),
        }
        for i in range(N)
    ]
    return {
        "interrupted": bool(interrupted),
        "drone": meta.get("drone"),
        "scenario": meta.get("scenario"),
        "n_drones": int(N),
        "n_samples": int(T),
        "sim_time_s": sim_time,
        "wall_time_s": wall,
        "real_time_factor": rtf,
        "drone_seconds_per_wall_second": N * rtf,
        "t_from_s": float(t_from),
        "tracking_rms_m": rms,
        "tracking_max_m": mx,
        "max_tilt_deg": max_tilt,
        "saturation_time_s": sat_time,
        "saturation_fraction": sat_frac,
        "crash_count": len(crashes),
        "crashes": crashes,
        "landed_count": None if landed is None else int(landed.sum()),
        "per_drone": per_drone,
    }


def write_summary(path: str | os.PathLike[str], summary: Mapping[str, Any]) -> None:
    """Write a summary as indented JSON; NaN and ±inf become ``null``."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(_dumps(summary, indent=2) + "\n")


def _fmt(v: Any, unit: str = "", prec: int = 4) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "n/a" if v is None or math.isnan(v) else ("inf" if v > 0 else "-inf")
    if isinstance(v, float):
        return f"{v:.{prec}g}{(' ' + unit) if unit else ''}"
    return f"{v}{(' ' + unit) if unit else ''}"


def format_summary_table(summary: Mapping[str, Any], max_crashes: int = 5) -> str:
    """A short plain-text table of a :func:`summarize` result (two columns, no dependencies)."""
    s = summary
    crashes = s.get("crashes") or []
    ct = ", ".join(f"#{c['drone']} at {_fmt(c['time_s'], 's')}" for c in crashes[:max_crashes])
    if len(crashes) > max_crashes:
        ct += f", ... ({len(crashes) - max_crashes} more)"
    frac = s.get("saturation_fraction")
    rows = [
        ("status", "INTERRUPTED" if s.get("interrupted") else "completed"),
        ("drones x samples", f"{s.get('n_drones')} x {s.get('n_samples')}"),
        ("sim time", _fmt(s.get("sim_time_s"), "s")),
        ("wall time", _fmt(s.get("wall_time_s"), "s")),
        (
            "real-time factor",
            _fmt(s.get("real_time_factor"), "x")
            + f"  ({_fmt(s.get('drone_seconds_per_wall_second'))} drone-s/s)",
        ),
        (
            "tracking RMS" + (f" (t >= {_fmt(s.get('t_from_s'))} s)" if s.get("t_from_s") else ""),
            _fmt(s.get("tracking_rms_m"), "m"),
        ),
        ("tracking max", _fmt(s.get("tracking_max_m"), "m")),
        ("max tilt", _fmt(s.get("max_tilt_deg"), "deg")),
        (
            "rotor saturation",
            _fmt(s.get("saturation_time_s"), "s")
            + ("" if frac is None else f"  ({_fmt(100 * frac if math.isfinite(frac) else frac)}%)"),
        ),
        ("crashes", f"{s.get('crash_count', 0)}" + (f": {ct}" if ct else "")),
    ]
    w = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{w}}  {v}" for k, v in rows)
