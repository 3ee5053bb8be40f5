r"""Run summaries: :func:`summarize`, :class:`SummaryAccumulator`, :func:`write_summary` et al.

**Summary** (:func:`summarize`). With position error ``e = pos - ref_pos`` [m] and only the
samples before a drone's first crash counted ("flying" samples):

* ``tracking_rms_m = sqrt(mean |e|^2)`` over all drones and flying samples with ``time >= t_from``
  (per drone likewise), ``tracking_max_m = max |e|``;
* tilt = angle between body z and world z, ``atan2(sqrt(z_x^2 + z_y^2), z_z)`` with
  ``z = R_wb e_z``; reported in degrees;
* each sample stands for the interval until the next one (sample-and-hold; the last one for
  the median step ``dt``, or for nothing when it is the end-of-flight sample at
  ``t = duration``): ``sim_time_s = t_last - t_first + dt_last``; time in rotor saturation
  sums those intervals where the allocation flag ``saturated`` is set (if the log has no
  ``saturated``: where any ``cmd_rpm`` lies at ``rpm_min`` or ``rpm_max``);
* ``real_time_factor = sim_time_s / wall_time_s`` (simulated seconds of the whole batch per
  wall-clock second) and ``drone_seconds_per_wall_second = N sim_time_s / wall_time_s``;
* with an estimator in the loop (``est_*`` columns), ``estimation``: the RMSE of the estimate
  against the truth over the same samples as the tracking error, position ``sqrt(mean |p̂ -
  p|²)`` [m], velocity [m/s] and attitude (the rotation angle of ``q̂⁻¹ ⊗ q``) [deg], and the
  mean NEES with its degrees of freedom (9; the EKF's), and ``ate_m``, the absolute
  trajectory error of Zhang and Scaramuzza (the position RMSE after each drone's estimate is
  aligned to its truth by Umeyama's SE(3) least squares,
  :func:`quadsim.app.analysis.ate_from_moments`; pooled over the drones); ``None``
  without an estimator. ``rte_1m_m`` (the relative trajectory error over 1 m of travel) is added by
  the run from the drones it keeps for the figures;
* a drone whose state diverged (non-finite, or past the world's limits on speed, body rate or
  rotor speed: :func:`quadsim.engines.sim.fault_report`) is frozen by the world; it is listed in
  ``faults`` (drone, step, time, quantity) and in its ``per_drone`` entry, and left out of every
  metric over the drones (tracking, tilt, saturation, estimation, power);
* with a battery in the loop (``battery_*`` columns), ``power``: ``energy_j`` (the electrical
  energy ``∑ P Δt`` of the flying samples, sample-and-hold, summed over the drones, and its mean
  per drone ``energy_j_per_drone``), ``mean_power_w`` per drone, ``voltage_min_v``,
  ``charge_start`` and ``charge_end`` (means over the drones) and ``hover_endurance_s`` (from a
  full battery at the drone's hover speed, :func:`quadsim.physics.power.hover_endurance`, when the
  run put it in the metadata); ``None`` without.

:class:`SummaryAccumulator` computes the same from chunks, so a flight's summary needs only
per-drone sums and the sample times in memory, not the log.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .strict_json import strict_dumps


def _last_interval(time: np.ndarray, meta: Mapping[str, Any]) -> float:
    """Interval [s] the last sample stands for.

    The median spacing (``meta["dt"]`` for a single sample), or 0 when it is the end-of-flight
    sample at ``t = meta["duration"]``.
    """
    T = time.shape[0]
    if T == 0:
        return 0.0
    end = meta.get("duration")
    if end is not None and T > 1 and abs(time[-1] - float(end)) <= 1e-9 * max(1.0, abs(end)):
        return 0.0
    if T > 1:
        return float(np.median(np.diff(time)))
    return float(meta.get("dt") or 0.0)


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


class SummaryAccumulator:
    """The summary of a log fed chunk by chunk: memory independent of the flight's length.

    ``add`` takes time-major chunks in order (the keys of :func:`summarize`'s ``log``);
    ``result`` gives what :func:`summarize` gives for their concatenation. Kept per drone:
    sums and counts of squared errors, maxima, crash times, saturated time; kept per sample:
    the sample times only (for the median interval of the last sample).

    Args:
        meta: Run metadata (``rpm_min``, ``rpm_max``, ``dt``, ``duration`` used when present).
        t_from: Tracking error counts samples with ``time >= t_from`` [s].
    """

    def __init__(self, meta: Mapping[str, Any] | None = None, t_from: float = 0.0):
        self.meta = dict(meta or {})
        self.t_from = float(t_from)
        self.n: int | None = None
        self._times: list[np.ndarray] = []
        self._pending: np.ndarray | None = None  # saturated flags of the last sample seen

    def _start(self, N: int) -> None:
        self.n = N
        self._e2 = np.zeros(N)
        self._cnt = np.zeros(N, dtype=np.int64)
        self._emax = np.full(N, -np.inf)
        self._tilt = np.full(N, -np.inf)
        self._crash_t: list[float | None] = [None] * N
        self._ever = np.zeros(N, bool)
        self._sat = np.zeros(N)
        self._has_sat: bool | None = None
        self._has_ref = False
        self._landed: np.ndarray | None = None
        self._est: dict[str, float] | None = None  # sums of squared estimate errors
        self._pw: dict[str, Any] | None = None  # energy, voltage and charge of the batteries

    def add(self, chunk: Mapping[str, Any]) -> None:
        """Fold in the next chunk of samples (``time`` (T,), ``pos`` (T, N, 3), ...)."""
        time = np.asarray(chunk["time"], dtype=np.float64)
        pos = np.asarray(chunk["pos"], dtype=np.float64)
        T, N = pos.shape[:2]
        if self.n is None:
            self._start(N)
        elif N != self.n:
            raise ValueError(f"summary: chunk has {N} drones, expected {self.n}")
        if T == 0:
            return
        crashed = np.asarray(chunk.get("crashed", np.zeros((T, N), bool)), dtype=bool)
        for i in np.flatnonzero(crashed.any(axis=0) & ~self._ever):
            self._crash_t[i] = float(time[np.argmax(crashed[:, i])])
        flying = ~(np.logical_or.accumulate(crashed, axis=0) | self._ever)
        self._ever |= crashed.any(axis=0)

        if "ref_pos" in chunk:
            self._has_ref = True
            e = np.linalg.norm(pos - np.asarray(chunk["ref_pos"], dtype=np.float64), axis=-1)
            use = flying & (time >= self.t_from)[:, None] & np.isfinite(e)
            self._e2 += np.where(use, e * e, 0.0).sum(axis=0)
            self._cnt += use.sum(axis=0)
            self._emax = np.maximum(self._emax, np.where(use, e, -np.inf).max(axis=0))
        if "est_pos" in chunk:
            self._add_estimate(chunk, flying & (time >= self.t_from)[:, None])
        if "battery_p" in chunk:
            self._add_power(chunk, time, flying)
        til = np.degrees(tilt(chunk["quat"]))
        til = np.where(flying & np.isfinite(til), til, -np.inf)
        self._tilt = np.maximum(self._tilt, til.max(axis=0))

        sat = self._saturated(chunk, T, N)
        if sat is not None:
            sat = sat & flying
            # sample-and-hold: each sample stands for the interval to the next one
            if self._pending is not None:
                self._sat += self._pending * (time[0] - self._times[-1][-1])
            self._sat += (sat[:-1] * np.diff(time)[:, None]).sum(axis=0)
            self._pending = sat[-1]
        self._times.append(time)
        if "landed" in chunk:
            self._landed = np.asarray(chunk["landed"], dtype=bool)[-1]

    def _add_power(self, chunk: Mapping[str, Any], time: np.ndarray, flying: np.ndarray) -> None:
        """Fold in the batteries' energy (sample-and-hold, like the saturated time), voltage
        and charge."""  # noqa: D205, D209
        p = np.where(flying, np.asarray(chunk["battery_p"], np.float64).reshape(flying.shape), 0.0)
        v = np.asarray(chunk["battery_v"], np.float64).reshape(flying.shape)
        q = np.asarray(chunk["battery_charge"], np.float64).reshape(flying.shape)
        a = self._pw or {"e": np.zeros(p.shape[1]), "pending": None,
                         "vmin": np.full(p.shape[1], math.inf), "q0": q[0].copy()}  # fmt: skip
        if a["pending"] is not None:
            a["e"] += a["pending"] * (time[0] - self._times[-1][-1])
        a["e"] += (p[:-1] * np.diff(time)[:, None]).sum(axis=0)
        a["pending"], a["q1"] = p[-1], q[-1]
        a["vmin"] = np.minimum(a["vmin"], np.min(np.where(flying, v, np.inf), axis=0))
        self._pw = a

    def _power(self, last: float, sim_time: float, ok: np.ndarray) -> dict[str, Any] | None:
        """The ``power`` entry of the summary (module docstring) over the drones ``ok``."""
        a = self._pw
        if a is None:
            return None
        e = a["e"] + (a["pending"] * last if a["pending"] is not None else 0.0)
        a["pending"] = None
        e, n = e[ok], max(int(ok.sum()), 1)
        vmin = float(np.min(a["vmin"][ok], initial=math.inf))
        mean = lambda q: float(np.mean(q[ok])) if ok.any() else None  # noqa: E731
        hover = self.meta.get("hover_endurance_s")
        return {"energy_j": float(e.sum()), "energy_j_per_drone": float(e.sum() / n),
                "mean_power_w": float(e.sum() / n / sim_time) if sim_time > 0 else None,
                "voltage_min_v": vmin if math.isfinite(vmin) else None,
                "charge_start": mean(a["q0"]), "charge_end": mean(a["q1"]),
                "hover_endurance_s": None if hover is None else float(hover)}  # fmt: skip

    def _add_estimate(self, chunk: Mapping[str, Any], use: np.ndarray) -> None:
        """Fold in the squared errors of the estimate (``est_*``) on the samples ``use``."""
        from ..analysis import attitude_angle

        f = lambda k: np.asarray(chunk[k], dtype=np.float64)  # noqa: E731
        acc = self._est if self._est is not None else dict.fromkeys(
            ("pos", "vel", "att", "n", "nees", "n_nees"), 0.0)  # fmt: skip
        est_pos, pos = f("est_pos"), f("pos")
        acc["pos"] += np.where(use, ((est_pos - pos) ** 2).sum(-1), 0.0).sum(axis=0)
        # the moments of the aligned trajectory error (analysis.ate_from_moments), per drone,
        # about each drone's first true position (for rounding)
        if "ref" not in acc:
            n = pos.shape[1]
            acc.update(ref=np.where(np.isfinite(pos[0]), pos[0], 0.0), m_n=np.zeros(n),
                       m_x=np.zeros((n, 3)), m_y=np.zeros((n, 3)), m_yx=np.zeros((n, 3, 3)),
                       m_xx=np.zeros(n), m_yy=np.zeros(n))  # fmt: skip
        ok = use & np.isfinite(est_pos).all(-1) & np.isfinite(pos).all(-1)
        x = np.where(ok[..., None], est_pos - acc["ref"], 0.0)
        y = np.where(ok[..., None], pos - acc["ref"], 0.0)
        acc["m_n"] = acc["m_n"] + ok.sum(0)
        acc["m_x"] = acc["m_x"] + x.sum(0)
        acc["m_y"] = acc["m_y"] + y.sum(0)
        acc["m_yx"] = acc["m_yx"] + np.einsum("tni,tnj->nij", y, x)
        acc["m_xx"] = acc["m_xx"] + (x * x).sum((0, 2))
        acc["m_yy"] = acc["m_yy"] + (y * y).sum((0, 2))
        if "est_vel" in chunk and "vel" in chunk:
            e2 = ((f("est_vel") - f("vel")) ** 2).sum(-1)
            acc["vel"] += np.where(use, e2, 0.0).sum(axis=0)
        if "est_quat" in chunk:
            acc["att"] += np.where(use, attitude_angle(f("est_quat"), f("quat")) ** 2,
                                   0.0).sum(axis=0)  # fmt: skip
        acc["n"] += use.sum(axis=0)
        if "est_nees" in chunk:
            nees = f("est_nees")
            ok = use & np.isfinite(nees)
            acc["nees"] += np.where(ok, nees, 0.0).sum(axis=0)
            acc["n_nees"] += ok.sum(axis=0)
        acc["has_vel"] = float("est_vel" in chunk)
        acc["has_att"] = float("est_quat" in chunk)
        self._est = acc

    def _estimation(self, ok: np.ndarray) -> dict[str, Any] | None:
        """The ``estimation`` entry of the summary (module docstring) over the drones ``ok``,
        or ``None``."""  # noqa: D205, D209
        a = self._est
        if a is None:
            return None
        tot = {k: float(np.sum(np.where(ok, a[k], 0.0))) for k in ("pos", "vel", "att", "n",
                                                                   "nees", "n_nees")}  # fmt: skip
        n = tot["n"]
        rms = lambda s: float(np.sqrt(s / n)) if n else math.nan  # noqa: E731
        from ..analysis import ate_from_moments

        ate_d = ate_from_moments(a["m_n"], a["m_x"], a["m_y"], a["m_yx"], a["m_xx"], a["m_yy"])
        good = np.isfinite(ate_d) & ok
        ate = (float(np.sqrt(np.sum(a["m_n"][good] * ate_d[good] ** 2) / a["m_n"][good].sum()))
               if good.any() else None)  # fmt: skip
        return {
            "pos_rmse_m": rms(tot["pos"]),
            "ate_m": ate,
            "vel_rmse_m_s": rms(tot["vel"]) if a["has_vel"] else None,
            "att_rmse_deg": math.degrees(rms(tot["att"])) if a["has_att"] else None,
            "nees_mean": tot["nees"] / tot["n_nees"] if tot["n_nees"] else None,
            "nees_dof": 9 if tot["n_nees"] else None,
        }

    def _saturated(self, chunk: Mapping[str, Any], T: int, N: int) -> np.ndarray | None:
        meta = self.meta
        if "saturated" in chunk:
            sat = np.asarray(chunk["saturated"], dtype=bool)
        elif "cmd_rpm" in chunk and "rpm_min" in meta and "rpm_max" in meta:
            c = np.asarray(chunk["cmd_rpm"], dtype=np.float64)
            tol = 1e-9 * max(abs(float(meta["rpm_max"])), 1.0)
            sat = np.any(
                (c >= float(meta["rpm_max"]) - tol) | (c <= float(meta["rpm_min"]) + tol), axis=-1
            )
        else:
            sat = None
        if self._has_sat is None:
            self._has_sat = sat is not None
        elif self._has_sat != (sat is not None):
            raise ValueError("summary: chunks differ in their saturation keys")
        return sat

    def result(self, wall_time: float, interrupted: bool = False,
               faults: list | None = None) -> dict[str, Any]:  # fmt: skip
        """The summary of everything added so far (see :func:`summarize`)."""
        meta = self.meta
        N = self.n or 0
        if self.n is None:
            self._start(0)
        faults = [f for f in faults or () if 0 <= int(f["drone"]) < N]
        fault_of = {int(f["drone"]): f for f in faults}
        ok = np.ones(N, bool)
        ok[list(fault_of)] = False
        time = np.concatenate(self._times) if self._times else np.zeros(0)
        T = time.shape[0]
        last = _last_interval(time, meta)
        sim_time = float(time[-1] - time[0] + last) if T else 0.0
        if self._pending is not None:
            self._sat += self._pending * last
        self._pending = None  # result() may be called once per accumulation

        crashes = sorted(
            ({"drone": i, "time_s": t} for i, t in enumerate(self._crash_t) if t is not None),
            key=lambda c: (c["time_s"], c["drone"]),
        )
        rms = mx = None
        err_rms_d = err_max_d = np.full(N, np.nan)
        if self._has_ref:  # the metrics leave the faulted drones out
            with np.errstate(invalid="ignore", divide="ignore"):
                err_rms_d = np.sqrt(self._e2 / self._cnt)
                total = self._cnt[ok].sum()
                rms = float(np.sqrt(self._e2[ok].sum() / total)) if total else math.nan
            err_max_d = _inf_to_nan(self._emax)
            mx = float(_inf_to_nan(self._emax[ok].max(initial=-np.inf)))
        til_d = _inf_to_nan(self._tilt)
        max_tilt = float(_inf_to_nan(self._tilt[ok].max(initial=-np.inf)))
        n_ok = int(ok.sum())
        if self._has_sat:
            sat_d = self._sat
            sat_time = float(sat_d[ok].max()) if n_ok else 0.0
            sat_frac = (float(sat_d[ok].sum() / (n_ok * sim_time)) if n_ok and sim_time > 0
                        else math.nan)  # fmt: skip
        else:
            sat_d = np.full(N, np.nan)
            sat_time = sat_frac = None
        landed = self._landed
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
                "crash_time_s": self._crash_t[i],
                "landed": None if landed is None else bool(landed[i]),
                "fault": ({k: v for k, v in fault_of[i].items() if k != "drone"}
                          if i in fault_of else None),
            }
            for i in range(N)
        ]
        return {
            "interrupted": bool(interrupted),
            "drone": meta.get("drone"),
            "scenario": meta.get("scenario"),
            "backend": meta.get("backend"),
            "model": meta.get("model"),
            "loop": meta.get("loop"),
            "loop_reason": meta.get("loop_reason"),
            "rates_hz": meta.get("rates_hz"),
            "n_drones": int(N),
            "n_samples": int(T),
            "sim_time_s": sim_time,
            "wall_time_s": wall,
            "real_time_factor": rtf,
            "drone_seconds_per_wall_second": N * rtf,
            "t_from_s": self.t_from,
            "tracking_rms_m": rms,
            "tracking_max_m": mx,
            "max_tilt_deg": max_tilt,
            "saturation_time_s": sat_time,
            "saturation_fraction": sat_frac,
            "crash_count": len(crashes),
            "crashes": crashes,
            "landed_count": None if landed is None else int(landed.sum()),
            "fault_count": len(faults),
            "faults": faults,
            "estimation": self._estimation(ok),
            "power": self._power(last, sim_time, ok),
            "per_drone": per_drone,
        }


def _inf_to_nan(a: Any) -> Any:
    """-inf (no finite sample) -> NaN."""
    a = np.asarray(a, dtype=np.float64)
    return np.where(np.isneginf(a), np.nan, a)


def summarize(
    log: Mapping[str, Any],
    meta: Mapping[str, Any] | None,
    wall_time: float,
    interrupted: bool = False,
    t_from: float = 0.0,
    faults: list | None = None,
) -> dict[str, Any]:
    """Summary statistics of a flight log (definitions in the module docstring).

    Args:
        log: Log dict (``time`` (T,), ``pos`` (T, N, 3), ``quat``, optionally ``ref_pos``,
            ``saturated``, ``cmd_rpm``, ``crashed``...).
        meta: Run metadata (``rpm_min``, ``rpm_max``, ``dt``, ``duration`` used when present).
        wall_time: Wall-clock time of the run [s].
        interrupted: The run was stopped early (Ctrl-C, a signal).
        t_from: Tracking error counts samples with ``time >= t_from`` [s] (settling skipped).
        faults: The drones that diverged (:func:`quadsim.engines.sim.fault_report`: dicts with
            ``drone``, ``step``, ``time_s``, ``quantity``); left out of every metric over the
            drones.

    Returns:
        A JSON-able dict: ``interrupted``, ``drone``, ``scenario``, ``backend``, ``model``,
        ``loop`` and ``loop_reason`` (from ``meta``: the flight loop that ran, ``"compiled"``,
        ``"scan"`` or ``"python"``, and why the backend's fast loop did not run), ``rates_hz``
        (the loop's rates, :func:`quadsim.loop.brain.rates_hz`), ``n_drones``,
        ``n_samples``, ``sim_time_s``,
        ``wall_time_s``, ``real_time_factor``, ``drone_seconds_per_wall_second``, ``t_from_s``,
        ``tracking_rms_m``, ``tracking_max_m``, ``max_tilt_deg``, ``saturation_time_s`` (worst
        drone), ``saturation_fraction`` (of all drone-samples), ``crash_count``, ``crashes``
        (list of ``{"drone", "time_s"}``), ``landed_count`` (at the last sample),
        ``fault_count`` and ``faults`` (as given, the drones in the batch) and ``per_drone``
        (list of per-drone dicts; ``fault``: the drone's ``step``, ``time_s`` and ``quantity``,
        or ``None``). Missing quantities are ``None``; NaN only
        where no finite sample exists. The same as :class:`SummaryAccumulator` fed the log in
        any number of chunks.
    """
    acc = SummaryAccumulator(meta, t_from)
    acc.add(log)
    return acc.result(wall_time, interrupted, faults)


def write_summary(path: str | os.PathLike[str], summary: Mapping[str, Any]) -> None:
    """Write a summary as indented JSON; NaN and ±inf become ``null``."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(strict_dumps(summary, indent=2) + "\n")


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
    faults = s.get("faults") or []
    if faults:  # shown only when a drone diverged (the table's usual rows are above)
        ft = ", ".join(f"#{f['drone']} {f['quantity']} at {_fmt(f['time_s'], 's')}"
                       for f in faults[:max_crashes])  # fmt: skip
        more = len(faults) - max_crashes
        rows.append(("diverged", f"{len(faults)}: {ft}" + (f", ... ({more} more)" if more > 0
                                                          else "")))  # fmt: skip
    est = s.get("estimation")
    if est:  # an estimator flew: its errors against the truth
        att = est.get("att_rmse_deg")
        rows.append(("estimate RMSE", _fmt(est.get("pos_rmse_m"), "m")
                     + ("" if att is None else f", {_fmt(att, 'deg')}")
                     + ("" if est.get("ate_m") is None else
                        f"  (ATE {_fmt(est['ate_m'], 'm')})")))  # fmt: skip
        if est.get("nees_mean") is not None:
            rows.append(("estimate NEES", f"{_fmt(est['nees_mean'])} (mean; "
                         f"{est['nees_dof']} degrees of freedom)"))  # fmt: skip
    pw = s.get("power")
    if pw:  # a battery in the loop
        rows.append(("energy", f"{_fmt(pw['energy_j_per_drone'], 'J')} per drone (mean "
                     f"{_fmt(pw.get('mean_power_w'), 'W')}); battery "
                     f"{_fmt(pw['charge_start'])} -> {_fmt(pw['charge_end'])}, min "
                     f"{_fmt(pw.get('voltage_min_v'), 'V')}"))  # fmt: skip
        if pw.get("hover_endurance_s") is not None:
            rows.append(("hover endurance", f"{_fmt(pw['hover_endurance_s'] / 60, 'min')} "
                         "(full battery)"))  # fmt: skip
    w = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{w}}  {v}" for k, v in rows)
