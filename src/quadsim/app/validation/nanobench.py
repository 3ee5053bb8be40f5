r"""quadsim's error-state EKF on real Crazyflie 2.1 flights (NanoBench), against the onboard EKF.

NanoBench (Ullah and Baca, arXiv 2603.09908, 2026; BSD 3-Clause) logs a Crazyflie 2.1 under
Vicon: the raw IMU (BMI088), the onboard EKF's estimate and the Vicon pose, resampled to the
Vicon clock at 100 Hz (``data/nanobench/README.md``). This module

* loads a flight into SI units and quadsim's frames (:func:`load_flight`; world ENU, body FLU,
  quaternions xyzw body to world: the data are already in these frames, see
  ``docs/validation_nanobench.md``);
* measures the IMU's time shift against Vicon (:func:`estimate_imu_shift`: the gyroscope
  cross-correlated with the body rate of the Vicon attitude) and its noise in flight
  (:func:`hover_noise`);
* runs :func:`quadsim.loop.estimation.eskf.eskf_predict` on the real IMU at 100 Hz and fuses the
  Vicon pose sub-sampled to a motion-capture stream with added noise (:func:`run_ekf`);
* compares the absolute trajectory error (position RMSE after SE(3) alignment,
  :func:`quadsim.app.analysis.ate`) of that filter and of the onboard EKF on the same
  samples (:func:`evaluate`).

``python -m quadsim.app.validation.nanobench [--files ...]`` prints the table for the flights
in ``data/nanobench/`` (:func:`main`).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...loop.estimation import eskf
from ...physics import rotation
from ...physics.sensors import load_imu
from .. import analysis
from ..sysid.csvlog import read_columns

__all__ = [
    "FLIGHT_COLUMNS",
    "G_LOG",
    "G_VEC",
    "PWM_FLYING",
    "default_files",
    "estimate_imu_shift",
    "evaluate",
    "flight_from_columns",
    "hover_noise",
    "load_flight",
    "main",
    "rest_check",
    "run_ekf",
    "vicon_body_rate",
]

G_LOG = 9.81
"""[m/s²] per g of the logged accelerometer (the Crazyflie firmware's ``GRAVITY_MAGNITUDE``)."""

G_VEC = (0.0, 0.0, -9.81)
"""Gravity in the world frame (ENU) [m/s²]."""

PWM_FLYING = 1000.0
"""A sample is *in flight* when motor 1's PWM exceeds this (NanoBench's own flight mask)."""

_REPO_DATA = Path(__file__).resolve().parents[4] / "data" / "nanobench"


def default_files() -> list[Path]:
    """The flights ``data/nanobench/*.csv.gz`` of the repository checkout (sorted)."""
    return sorted(_REPO_DATA.glob("*.csv.gz"))


def _read_metadata(path: Path) -> dict[str, Any]:
    """The scalar entries of a NanoBench ``*_metadata.yaml`` (one nesting level, no lists).

    A small reader for the files' plain ``key: value`` layout (no YAML library needed); nested
    mappings become dicts, list items are skipped, numbers become floats.
    """
    out: dict[str, Any] = {}
    parent: dict[str, Any] | None = None
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.lstrip().startswith(("#", "-")) or ":" not in line:
            continue
        key, _, value = line.strip().partition(":")
        value = value.strip()
        try:
            val: Any = float(value)
        except ValueError:
            val = value
        if not line.startswith(" "):
            if value:
                out[key] = val
                parent = None
            else:
                parent = out.setdefault(key, {})
        elif parent is not None and value:
            parent[key] = val
    return out


FLIGHT_COLUMNS = (
    "t",
    *("px", "py", "pz", "qx", "qy", "qz", "qw", "vx", "vy", "vz"),
    *(f"imu_acc_{a}" for a in "xyz"),
    *(f"imu_gyro_{a}" for a in "xyz"),
    *(f"motor_motor_m{i}" for i in range(1, 5)),
    *(f"est_stateEstimate_{a}" for a in "xyz"),
    *(f"att_stateEstimate_q{a}" for a in "xyzw"),
)
"""The NanoBench columns :func:`load_flight` reads (the others are not read)."""


def load_flight(path: str | Path) -> dict[str, Any]:
    """A NanoBench flight ``*.csv.gz`` (or ``*.csv``) in SI units and quadsim's frames.

    Args:
        path: The flight's CSV; a ``<stem>_metadata.yaml`` next to it is read when present.

    Returns:
        :func:`flight_from_columns`'s dict.

    Raises:
        ValueError: (:class:`quadsim.app.sysid.csvlog.LogError`) an unreadable file, a missing
            column of :data:`FLIGHT_COLUMNS`, a truncated row or a cell of those columns that is
            not a finite number: the message names the file, the row (the file's line, the
            header being row 1) and the column.
    """
    cols = read_columns(path, FLIGHT_COLUMNS, min_rows=2)
    return flight_from_columns(path, cols.data)


def flight_from_columns(path: str | Path, data: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """The flight's dict from its columns (:data:`FLIGHT_COLUMNS`, as logged).

    Args:
        path: The flight's CSV (its name and the metadata file next to it).
        data: ``{column: (T,) array}``, finite.

    Returns:
        ``dict`` with ``"name"`` (str), ``"meta"`` (dict from the metadata file, possibly
        empty), ``"t0"`` (the Vicon host's time of the first sample [s]) and NumPy arrays over
        the ``T`` samples: ``"t"`` ``(T,)`` [s] from the first sample; ``"gyro"`` ``(T, 3)``
        [rad/s] and ``"accel"`` ``(T, 3)`` [m/s²] (specific force), body frame FLU; Vicon
        ``"pos"`` ``(T, 3)`` [m] (world ENU), ``"quat"`` ``(T, 4)`` (xyzw body to world, unit)
        and ``"vel"`` ``(T, 3)`` [m/s]; the onboard EKF's ``"est_pos"`` ``(T, 3)`` [m] and
        ``"est_quat"`` ``(T, 4)``; ``"pwm"`` ``(T, 4)`` (0..65535); ``"flying"`` ``(T,)`` bool
        (motor 1's PWM above :data:`PWM_FLYING`).

    Raises:
        ValueError: The metadata file cannot be read (named).
    """
    path = Path(path)

    def cols(*names: str) -> np.ndarray:
        return np.stack([np.asarray(data[n], dtype=np.float64) for n in names], axis=-1)

    t_abs = np.asarray(data["t"], dtype=np.float64)
    stem = path.name.removesuffix(".gz").removesuffix(".csv")
    meta_path = path.with_name(f"{stem}_metadata.yaml")
    try:
        meta = _read_metadata(meta_path) if meta_path.is_file() else {}
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{meta_path}: unreadable metadata file ({e})") from None
    quat = rotation.normalize(cols("qx", "qy", "qz", "qw"))
    est_quat = rotation.normalize(cols(*(f"att_stateEstimate_q{a}" for a in "xyzw")))
    pwm = cols(*(f"motor_motor_m{i}" for i in range(1, 5)))
    return {
        "name": stem,
        "meta": meta,
        "t0": float(t_abs[0]),
        "t": t_abs - t_abs[0],
        "gyro": cols("imu_gyro_x", "imu_gyro_y", "imu_gyro_z"),
        "accel": cols("imu_acc_x", "imu_acc_y", "imu_acc_z") * G_LOG,
        "pos": cols("px", "py", "pz"),
        "quat": quat,
        "vel": cols("vx", "vy", "vz"),
        "est_pos": cols(*(f"est_stateEstimate_{a}" for a in "xyz")),
        "est_quat": est_quat,
        "pwm": pwm,
        "flying": pwm[:, 0] > PWM_FLYING,
    }


def _rest(flight: dict[str, Any], margin: float = 0.2) -> np.ndarray:
    """Indices before the motors start, less ``margin`` [s] (the drone on the ground)."""
    t, on = flight["t"], np.nonzero(np.any(flight["pwm"] > 0, axis=1))[0]
    end = t[on[0]] - margin if len(on) else t[-1]
    idx = np.nonzero(t <= end)[0]
    if len(idx) < 10:
        raise ValueError(f"{flight['name']}: fewer than 10 samples at rest before take-off")
    return idx


def rest_check(flight: dict[str, Any]) -> dict[str, Any]:
    """Frame checks on the samples at rest before take-off.

    Returns:
        ``{"n", "accel_mean", "accel_norm", "up_imu", "up_vicon", "tilt_deg", "gyro_mean"}``:
        the number of samples, the mean accelerometer reading (body) [m/s²] and its norm, the
        world's up direction in the body frame seen by the accelerometer and by Vicon's
        attitude ``R(q)ᵀ e_z``, the angle between the two [deg] (the tilt between the IMU's
        and Vicon's body frames, plus the accelerometer's bias) and the mean gyro [rad/s].
    """
    i = _rest(flight)
    a = flight["accel"][i].mean(axis=0)
    up_imu = a / np.linalg.norm(a)
    up_vicon = rotation.rotate_inverse(flight["quat"][i], np.array([0.0, 0.0, 1.0])).mean(axis=0)
    up_vicon = up_vicon / np.linalg.norm(up_vicon)
    tilt = math.degrees(math.acos(min(1.0, float(up_imu @ up_vicon))))
    return {
        "n": len(i),
        "accel_mean": a,
        "accel_norm": float(np.linalg.norm(a)),
        "up_imu": up_imu,
        "up_vicon": up_vicon,
        "tilt_deg": tilt,
        "gyro_mean": flight["gyro"][i].mean(axis=0),
    }


def vicon_body_rate(flight: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """``(t, ω)``: the body rate [rad/s] of the Vicon attitude by central differences
    ``Log(q_{k-1}⁻¹ ⊗ q_{k+1}) / (t_{k+1} - t_{k-1})`` at the inner samples."""  # noqa: D205, D209
    t, q = flight["t"], flight["quat"]
    dq = rotation.multiply(rotation.conjugate(q[:-2]), q[2:])
    return t[1:-1], rotation.log(dq) / (t[2:] - t[:-2])[:, None]


def estimate_imu_shift(
    flight: dict[str, Any], max_shift: float = 0.1, step: float = 0.001
) -> float:
    """Time shift ``τ`` [s] of the IMU stream against Vicon: the gyro stamped ``t + τ`` saw the
    motion Vicon stamped ``t`` (``τ > 0``: the IMU lags).

    The maximum over ``|τ| <= max_shift`` (grid ``step``) of the correlation, pooled over the
    three axes and the samples in flight, of the Vicon body rate (:func:`vicon_body_rate`) with
    the gyro linearly interpolated at ``t + τ``.
    """  # noqa: D205
    tv, wv = vicon_body_rate(flight)
    keep = flight["flying"][1:-1]
    tv, wv = tv[keep], wv[keep]
    t, g = flight["t"], flight["gyro"]
    x = wv - wv.mean(axis=0)
    taus = np.arange(-max_shift, max_shift + step / 2, step)
    corr = np.empty(len(taus))
    for j, tau in enumerate(taus):
        y = np.stack([np.interp(tv + tau, t, g[:, k]) for k in range(3)], axis=-1)
        y = y - y.mean(axis=0)
        corr[j] = np.sum(x * y) / math.sqrt(float(np.sum(x * x) * np.sum(y * y)))
    return float(taus[int(np.argmax(corr))])


def hover_noise(flight: dict[str, Any], imu: str = "bmi088") -> dict[str, Any]:
    """The IMU's white noise in flight against the preset's (per axis).

    The sample noise ``σ = 1.4826 MAD(x_{k+1} - x_k)/√2`` over the samples in flight (the
    first difference removes the slow motion; what remains is noise, vibration and the fastest
    real motion, so it is an upper bound; the median absolute deviation ignores the take-off and
    landing transients) becomes a density ``N = σ √Δt`` (the convention of
    :func:`~quadsim.loop.estimation.eskf.eskf_predict`: a sample averaged over ``Δt`` has noise
    ``N/√Δt``).

    Returns:
        ``{"gyro_density", "accel_density"}`` ``(3,)`` measured, ``{"gyro_preset",
        "accel_preset"}`` ``(3,)`` the preset's, and ``{"gyro_inflation", "accel_inflation"}``:
        ``max(1, max_axis measured/preset)``.
    """
    p = load_imu(imu)
    dt = float(np.median(np.diff(flight["t"])))
    fly = flight["flying"]
    both = fly[1:] & fly[:-1]
    out: dict[str, Any] = {}
    for name, preset in (("gyro", p.gyro_noise_density), ("accel", p.accel_noise_density)):
        d = np.diff(flight[name], axis=0)[both]
        mad = np.median(np.abs(d - np.median(d, axis=0)), axis=0)
        dens = 1.4826 * mad / math.sqrt(2.0) * math.sqrt(dt)
        out[f"{name}_density"] = dens
        out[f"{name}_preset"] = np.asarray(preset, dtype=np.float64)
        out[f"{name}_inflation"] = float(max(1.0, np.max(dens / preset)))
    return out


def run_ekf(
    flight: dict[str, Any],
    *,
    mocap_rate: float = 20.0,
    pos_std: float = 1e-3,
    att_std: float | None = math.radians(0.5),
    seed: int = 0,
    imu: str = "bmi088",
    inflate: tuple[float, float] | None = None,
    time_shift: float | None = None,
) -> dict[str, Any]:
    """The quadsim ESKF over a flight: the real IMU at 100 Hz, the Vicon pose as motion capture.

    The filter starts at the first sample (on the ground) from the first motion-capture pose,
    at rest, with standard deviations 1 cm, 0.1 m/s, 2 deg, 0.5 m/s² (accelerometer bias: it
    also absorbs the IMU-to-Vicon tilt, :func:`rest_check`) and 0.01 rad/s. Every IMU sample
    ``k`` propagates from ``t_k`` to ``t_{k+1}``
    (:func:`~quadsim.loop.estimation.eskf.eskf_predict`, gravity :data:`G_VEC`); every
    ``round(100/mocap_rate)``-th sample, the Vicon position plus ``N(0, pos_std²)`` per axis
    (and, unless ``att_std`` is ``None``, the Vicon attitude times ``exp(n)``,
    ``n ~ N(0, att_std²)`` per body axis) is fused at ``t_k`` before the estimate is recorded.

    Args:
        flight: :func:`load_flight`'s dict.
        mocap_rate: Motion-capture rate [Hz] (the 100 Hz Vicon samples, sub-sampled).
        pos_std: Position noise added and assumed [m].
        att_std: Attitude noise added and assumed [rad]; ``None``: position updates only.
        seed: Seed of the measurement noise (:func:`numpy.random.default_rng`).
        imu: IMU preset (or TOML path) of the process noise.
        inflate: ``(gyro, accel)`` factors on the preset's noise densities; ``None``: measured
            from the flight (:func:`hover_noise`).
        time_shift: IMU time shift [s] (:func:`estimate_imu_shift`); ``None``: estimated. The
            IMU used at ``t`` is the logged IMU interpolated at ``t + time_shift``.

    Returns:
        ``{"t", "pos", "vel", "quat", "accel_bias", "gyro_bias", "pos_std"}`` over the ``T``
        samples (``pos_std`` the filter's position standard deviations ``(T, 3)``), and
        ``"mocap"`` (indices of the fused samples), ``"time_shift"``, ``"inflate"``,
        ``"noise"`` (:class:`~quadsim.loop.estimation.eskf.EskfNoise`), ``"mocap_rate"``,
        ``"pos_std_m"``, ``"att_std_rad"``.
    """
    if mocap_rate <= 0 or pos_std <= 0 or (att_std is not None and att_std <= 0):
        raise ValueError("mocap_rate, pos_std and att_std must be > 0")
    t = flight["t"]
    n = len(t)
    rate = 1.0 / float(np.median(np.diff(t)))
    every = max(1, round(rate / mocap_rate))
    tau = estimate_imu_shift(flight) if time_shift is None else float(time_shift)
    gyro = np.stack([np.interp(t + tau, t, flight["gyro"][:, k]) for k in range(3)], axis=-1)
    accel = np.stack([np.interp(t + tau, t, flight["accel"][:, k]) for k in range(3)], axis=-1)
    if inflate is None:
        h = hover_noise(flight, imu)
        inflate = (h["gyro_inflation"], h["accel_inflation"])
    p = load_imu(imu)
    noise = eskf.EskfNoise(
        gyro_noise_density=p.gyro_noise_density * inflate[0],
        accel_noise_density=p.accel_noise_density * inflate[1],
        gyro_bias_walk=p.gyro_bias_walk,
        accel_bias_walk=p.accel_bias_walk,
    )

    rng = np.random.default_rng(seed)
    mocap = np.arange(0, n, every)
    m_pos = flight["pos"][mocap] + pos_std * rng.standard_normal((len(mocap), 3))
    m_quat = flight["quat"][mocap]
    if att_std is not None:
        m_quat = rotation.normalize(
            rotation.multiply(m_quat, rotation.exp(att_std * rng.standard_normal((len(mocap), 3))))
        )

    std = np.array([0.01] * 3 + [0.1] * 3 + [math.radians(2.0)] * 3 + [0.5] * 3 + [0.01] * 3)
    state = eskf.eskf_init(m_pos[0], np.zeros(3), m_quat[0], std)
    g_vec = np.asarray(G_VEC)
    out = {k: np.empty((n, 3)) for k in ("pos", "vel", "accel_bias", "gyro_bias", "pos_std")}
    out["quat"] = np.empty((n, 4))
    diag = np.array([0, 15, 29])  # packed indices of P[0,0], P[1,1], P[2,2]
    j = 0
    for k in range(n):
        if j < len(mocap) and mocap[j] == k:
            if k > 0:
                rows = eskf.position_rows(state, m_pos[j], pos_std)
                if att_std is not None:
                    rows += eskf.attitude_rows(state, m_quat[j], att_std)
                state = eskf.correct(state, rows, True)
            j += 1
        out["pos"][k], out["vel"][k], out["quat"][k] = state.pos, state.vel, state.quat
        out["accel_bias"][k], out["gyro_bias"][k] = state.accel_bias, state.gyro_bias
        out["pos_std"][k] = np.sqrt(state.cov[diag])
        if k + 1 < n:
            state = eskf.eskf_predict(
                state, gyro[k], accel[k], g_vec, float(t[k + 1] - t[k]), noise
            )
    out.update(
        t=t.copy(),
        mocap=mocap,
        time_shift=tau,
        inflate=tuple(map(float, inflate)),
        noise=noise,
        mocap_rate=rate / every,
        pos_std_m=float(pos_std),
        att_std_rad=None if att_std is None else float(att_std),
    )
    return out


def _best_shift_ate(
    t: np.ndarray,
    est: np.ndarray,
    true: np.ndarray,
    sel: np.ndarray,
    max_shift: float = 0.1,
    step: float = 0.005,
) -> tuple[float, float]:
    """``(τ, ATE)``: the constant time shift of ``est`` (``est(t + τ)`` against ``true(t)``)
    that minimises the ATE over the samples ``sel``, and that ATE [m]."""  # noqa: D205, D209
    best = (0.0, math.inf)
    for tau in np.arange(-max_shift, max_shift + step / 2, step):
        e = np.stack([np.interp(t[sel] + tau, t, est[:, k]) for k in range(3)], axis=-1)
        r = analysis.ate(e, true[sel]).rmse
        if r < best[1]:
            best = (float(tau), float(r))
    return best


def evaluate(flight: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    """ATE and attitude RMSE of quadsim's EKF and of the onboard EKF against Vicon.

    Over the same samples: those in flight (``flight["flying"]``, NanoBench's mask). The ATE is
    the position RMSE after the SE(3) alignment of :func:`quadsim.app.analysis.ate`;
    the attitude RMSE is that of the attitude errors after the same alignment's rotation.

    Returns:
        ``{"name", "n", "ekf_ate_m", "ekf_ate_mean_m", "ekf_att_rmse_deg", "onboard_ate_m",
        "onboard_ate_mean_m", "onboard_att_rmse_deg", "onboard_shift_s",
        "onboard_ate_shifted_m", "imu_shift_s", "mocap_rate_hz", "pos_std_m", "att_std_deg"}``
        (``onboard_shift_s`` and ``onboard_ate_shifted_m``: the onboard estimate's best constant
        time shift and its ATE after it, an explanation of its error, not part of the metric).
    """
    sel = np.nonzero(flight["flying"])[0]
    if len(sel) < 10:
        raise ValueError(f"{flight['name']}: fewer than 10 samples in flight")
    true_p, true_q = flight["pos"][sel], flight["quat"][sel]
    ours = analysis.ate(result["pos"][sel], true_p, est_quat=result["quat"][sel], true_quat=true_q)
    onb = analysis.ate(
        flight["est_pos"][sel], true_p, est_quat=flight["est_quat"][sel], true_quat=true_q
    )
    shift, shifted = _best_shift_ate(flight["t"], flight["est_pos"], flight["pos"], sel)
    att = result.get("att_std_rad")
    return {
        "name": flight["name"],
        "n": len(sel),
        "ekf_ate_m": ours.rmse,
        "ekf_ate_mean_m": ours.mean,
        "ekf_att_rmse_deg": ours.rot.rmse,
        "onboard_ate_m": onb.rmse,
        "onboard_ate_mean_m": onb.mean,
        "onboard_att_rmse_deg": onb.rot.rmse,
        "onboard_shift_s": shift,
        "onboard_ate_shifted_m": shifted,
        "imu_shift_s": float(result["time_shift"]),
        "mocap_rate_hz": float(result["mocap_rate"]),
        "pos_std_m": float(result["pos_std_m"]),
        "att_std_deg": None if att is None else math.degrees(att),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: the comparison table for NanoBench flights (see the module docstring)."""
    ap = argparse.ArgumentParser(
        prog="python -m quadsim.app.validation.nanobench",
        description="quadsim's ESKF (real IMU + simulated motion capture from Vicon) against "
        "the Crazyflie's onboard EKF on NanoBench flights: ATE after SE(3) alignment.",
    )
    ap.add_argument(
        "--files",
        nargs="+",
        type=Path,
        default=None,
        help="flight CSVs (default: data/nanobench/*.csv.gz of the checkout)",
    )
    ap.add_argument("--mocap-rate", type=float, default=20.0, help="motion-capture rate [Hz]")
    ap.add_argument("--pos-std", type=float, default=1.0, help="position noise [mm]")
    ap.add_argument(
        "--att-std", type=float, default=0.5, help="attitude noise [deg]; 0: position updates only"
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--imu", default="bmi088", help="IMU preset of the process noise")
    args = ap.parse_args(argv)
    files = args.files if args.files is not None else default_files()
    if not files:
        ap.error("no flights given and none found in data/nanobench/")
    att = math.radians(args.att_std) if args.att_std > 0 else None
    print(
        f"quadsim ESKF: IMU 100 Hz ({args.imu}, noise measured in flight), mocap "
        f"{args.mocap_rate:g} Hz, noise {args.pos_std:g} mm / "
        f"{args.att_std:g} deg, seed {args.seed}; samples in flight (PWM m1 > 1000)"
    )
    head = (
        f"{'flight':26s} {'n':>5s} {'IMU dt':>7s} {'infl g/a':>9s} {'ATE quadsim':>11s} "
        f"{'ATE onboard':>11s} {'att quadsim':>11s} {'att onboard':>11s} "
        f"{'onb. lag':>8s} {'onb. ATE@lag':>12s}"
    )
    units = (
        f"{'':26s} {'':>5s} {'[ms]':>7s} {'':>9s} {'[mm]':>11s} {'[mm]':>11s} "
        f"{'[deg]':>11s} {'[deg]':>11s} {'[ms]':>8s} {'[mm]':>12s}"
    )
    print(head)
    print(units)
    for f in files:
        flight = load_flight(f)
        res = run_ekf(
            flight,
            mocap_rate=args.mocap_rate,
            pos_std=args.pos_std * 1e-3,
            att_std=att,
            seed=args.seed,
            imu=args.imu,
        )
        ev = evaluate(flight, res)
        infl = f"{res['inflate'][0]:.1f}/{res['inflate'][1]:.1f}"
        print(
            f"{ev['name']:26s} {ev['n']:5d} {ev['imu_shift_s'] * 1e3:7.0f} {infl:>9s} "
            f"{ev['ekf_ate_m'] * 1e3:11.2f} {ev['onboard_ate_m'] * 1e3:11.2f} "
            f"{ev['ekf_att_rmse_deg']:11.2f} {ev['onboard_att_rmse_deg']:11.2f} "
            f"{ev['onboard_shift_s'] * 1e3:8.0f} {ev['onboard_ate_shifted_m'] * 1e3:12.2f}"
        )
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
