r"""Rotor thrust and speed identified on a Crazyflie 2.1 thrust stand.

The data (``data/crazyflie-thrust-stand/``, IMRCLab ``crazyflie-system-id``, MIT) are two runs
of a Crazyflie 2.1 with stock propellers on a scale: the whole drone's thrust in grams, the PWM
command (the same for the four motors), the drone's battery voltage, the four rotor speeds and
the voltage, current and power at the system-id deck, one row per sample (no time column).

Conventions: thrust in newtons with ``g = 9.81 m/s²`` (the gravity of the ``cf2x_L250`` preset,
:data:`G`), per rotor = the scale's total / 4 (the four motors get the same command), rotor speed
``ω`` = mean of the four ``rpm`` columns [RPM], duty = ``pwm / 65535``, time in rows.

Models:

* thrust per rotor ``T = a + b ω + c ω²`` (``kind="quadratic"``) or ``T = k ω²``
  (``kind="pure"``) [N, N/RPM, N/RPM²], least squares (:func:`fit_thrust_curve`);
* steady rotor speed from the effective motor voltage ``u = duty · V`` [V]:
  ``ω_ss = c0 + c1 u`` (``kind="linear"``) or ``+ c2 u²`` (``"quadratic"``), and ``ω_ss = c0 +
  c1 duty`` (``"duty"``, the voltage ignored) for comparison; the measured ``ω`` follows
  ``ω_ss`` through a first-order lag of ``tau`` rows, fitted with the coefficients
  (:func:`fit_pwm_voltage_to_rpm`);
* thrust from PWM and voltage: the rotor-speed model through the thrust curve
  (:func:`predict_thrust`).

Transients: the scale's reading lags the rotor speed by some 24-27 rows (it updates about every
10 rows), so a thrust sample belongs to the rotor speed of that many rows earlier;
:func:`scale_delay` finds the shift (the one that minimizes the quadratic fit's residual) and
:func:`align` applies it. The rotor speed's own lag behind the command is the ``tau`` above.
The raw (unaligned) errors are reported too: they are what the issue measured.

``python -m quadsim.app.sysid.thrust_stand [--files ...]`` prints the table (:func:`main`).
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from scipy.signal import lfilter

from ...physics.params import load_params

__all__ = [
    "PWM_FULL",
    "PWM_MIN",
    "G",
    "RpmFit",
    "ThrustFit",
    "align",
    "cross_run",
    "default_files",
    "evaluate",
    "fit_pwm_voltage_to_rpm",
    "fit_thrust_curve",
    "load_stand",
    "lowpass",
    "main",
    "predict_thrust",
    "scale_delay",
    "thrust_rmse",
]

G = 9.81
"""[m/s²] per gram-force of the scale (the ``cf2x_L250`` preset's gravity)."""

PWM_FULL = 65535.0
"""PWM at full duty."""

PWM_MIN = 10000.0
"""Rows with a lower PWM are left out of the rotor-speed fit and the cross-run error: there the
motor starts and stops (it stays still up to about 7000 on the way up of run 1 and still turns
at 4000 on the way down)."""

N_ROTORS = 4
_COLUMNS = ("weight[g]", "pwm", "vbat[V]", "rpm1", "rpm2", "rpm3", "rpm4", "v[V]", "i[A]", "p[W]")
_REPO_DATA = Path(__file__).resolve().parents[4] / "data" / "crazyflie-thrust-stand"


def default_files() -> list[Path]:
    """The runs ``data/crazyflie-thrust-stand/*.csv`` of the repository checkout (sorted)."""
    return sorted(_REPO_DATA.glob("*.csv"))


def load_stand(path: str | Path) -> dict[str, Any]:
    """One thrust-stand run in SI units.

    Returns:
        dict of float64 arrays (one entry per row) and ``name`` (the file's stem):
        ``thrust_total`` [N] (scale reading × :data:`G` / 1000), ``thrust`` [N] per rotor
        (``thrust_total / 4``), ``pwm`` (0..65535), ``duty`` (``pwm / 65535``), ``vbat`` [V] (the
        drone's battery voltage), ``rpm`` [RPM] (mean of the four), ``rpm_each`` (n, 4) [RPM],
        ``v_deck`` [V], ``current`` [A], ``power`` [W] (system-id deck).

    Raises:
        ValueError: a missing column or a non-numeric cell, naming the file, column and row.
    """
    path = Path(path)
    with path.open(newline="") as fh:
        rows = list(csv.reader(fh))
    if not rows:
        raise ValueError(f"{path}: empty file")
    head = [h.strip() for h in rows[0]]
    missing = [c for c in _COLUMNS if c not in head]
    if missing:
        raise ValueError(f"{path}: missing columns {missing}; found {head}")
    idx = [head.index(c) for c in _COLUMNS]
    data = np.empty((len(rows) - 1, len(_COLUMNS)))
    for r, row in enumerate(rows[1:]):
        for j, (c, k) in enumerate(zip(_COLUMNS, idx, strict=True)):
            try:
                data[r, j] = float(row[k])
            except (ValueError, IndexError):
                cell = row[k] if k < len(row) else "<missing>"
                raise ValueError(f"{path}: column {c!r}, row {r + 2}: {cell!r}") from None
    col = dict(zip(_COLUMNS, data.T, strict=True))
    total = col["weight[g]"] * 1e-3 * G
    rpm_each = np.stack([col[f"rpm{i}"] for i in range(1, 5)], axis=1)
    return {
        "name": path.stem,
        "thrust_total": total,
        "thrust": total / N_ROTORS,
        "pwm": col["pwm"],
        "duty": col["pwm"] / PWM_FULL,
        "vbat": col["vbat[V]"],
        "rpm": rpm_each.mean(axis=1),
        "rpm_each": rpm_each,
        "v_deck": col["v[V]"],
        "current": col["i[A]"],
        "power": col["p[W]"],
    }


def align(x: np.ndarray, delay: int) -> np.ndarray:
    """``x`` moved ``delay`` rows earlier (``y[i] = x[i + delay]``); the last rows are NaN."""
    x = np.asarray(x, dtype=np.float64)
    y = np.full_like(x, np.nan)
    y[: len(x) - delay] = x[delay:]
    return y


def lowpass(x: np.ndarray, tau: float) -> np.ndarray:
    """First-order lag of ``tau`` rows: ``y[n] = y[n-1] + a (x[n] - y[n-1])``.

    ``a = 1 - exp(-1/tau)``. Starts at rest (``y[-1] = x[0]``); ``tau <= 0`` returns ``x``
    unchanged.
    """
    x = np.asarray(x, dtype=np.float64)
    if tau <= 0.0:
        return x.copy()
    a = 1.0 - np.exp(-1.0 / tau)
    y, _ = lfilter([a], [1.0, a - 1.0], x, zi=[(1.0 - a) * x[0]])
    return y


class ThrustFit(NamedTuple):
    """A thrust curve per rotor, ``T = coef[0] + coef[1] ω + coef[2] ω²``.

    Attributes:
        kind: ``"quadratic"`` or ``"pure"`` (``coef[0] = coef[1] = 0``).
        coef: Shape (3,) [N, N/RPM, N/RPM²], the layout of a preset's ``rpm2thrust``.
        rmse: Root-mean-square residual on the fitted rows [N].
        n: Rows fitted.
    """

    kind: str
    coef: np.ndarray
    rmse: float
    n: int

    def __call__(self, rpm: Any) -> np.ndarray:
        """Thrust per rotor [N] at rotor speed ``rpm`` [RPM]."""
        w = np.asarray(rpm, dtype=np.float64)
        return self.coef[0] + self.coef[1] * w + self.coef[2] * w * w


def fit_thrust_curve(rpm: Any, thrust: Any, kind: str = "quadratic") -> ThrustFit:
    """Least-squares thrust curve per rotor (``numpy.linalg.lstsq``); NaN rows are skipped.

    Args:
        rpm: Rotor speeds [RPM].
        thrust: Thrust per rotor [N], same shape.
        kind: ``"quadratic"``: ``T = a + b ω + c ω²``; ``"pure"``: ``T = k ω²``.
    """
    w, t = np.asarray(rpm, dtype=np.float64).ravel(), np.asarray(thrust, dtype=np.float64).ravel()
    ok = np.isfinite(w) & np.isfinite(t)
    w, t = w[ok], t[ok]
    if kind == "quadratic":
        cols = [np.ones_like(w), w, w * w]
    elif kind == "pure":
        cols = [w * w]
    else:
        raise ValueError(f"kind must be 'quadratic' or 'pure'; got {kind!r}")
    A = np.stack(cols, axis=1)
    scale = np.max(np.abs(A), axis=0)  # columns span 1 .. 1e9: scale them for conditioning
    scale[scale == 0.0] = 1.0
    sol, *_ = np.linalg.lstsq(A / scale, t, rcond=None)
    sol = sol / scale
    coef = sol if kind == "quadratic" else np.array([0.0, 0.0, sol[0]])
    fit = ThrustFit(kind, coef, 0.0, len(t))
    return fit._replace(rmse=float(np.sqrt(np.mean((fit(w) - t) ** 2))))


def thrust_rmse(
    params: Any, stand: dict[str, Any], *, delay: int = 0, rows: np.ndarray | None = None
) -> float:
    """RMSE [N] per rotor of a preset's own RPM-to-thrust curve against the stand.

    ``params.rpm2thrust`` (a :class:`quadsim.physics.params.Params`) evaluated at the measured
    mean rotor speed against the measured thrust per rotor ``delay`` rows later (0: raw);
    ``rows`` defaults to the rows with ``pwm > 0``.
    """
    k = np.asarray(params.rpm2thrust, dtype=np.float64)
    w = stand["rpm"]
    t = align(stand["thrust"], delay)
    rows = stand["pwm"] > 0 if rows is None else rows
    ok = rows & np.isfinite(t)
    pred = k[0] + k[1] * w + k[2] * w * w
    return float(np.sqrt(np.mean((pred - t)[ok] ** 2)))


def scale_delay(stand: dict[str, Any], max_rows: int = 60) -> int:
    """Rows by which the scale lags the rotor speed.

    The shift in ``0..max_rows`` that minimizes the residual of a quadratic thrust curve fitted
    to ``thrust[i + delay]`` against ``rpm[i]`` (rows ``pwm > 0``).
    """
    on = stand["pwm"] > 0
    best = (np.inf, 0)
    for d in range(max_rows + 1):
        fit = fit_thrust_curve(stand["rpm"][on], align(stand["thrust"], d)[on])
        best = min(best, (fit.rmse, d))
    return best[1]


class RpmFit(NamedTuple):
    """Rotor speed from PWM and supply voltage, with a first-order lag.

    ``ω_ss = coef[0] + coef[1] x + coef[2] x²`` [RPM] with ``x = u = duty · V`` [V] (``kind``
    ``"linear"``: ``coef[2] = 0``; ``"quadratic"``) or ``x = duty`` (``"duty"``); the rotor speed
    follows ``ω_ss`` through :func:`lowpass` of ``tau`` rows.

    Attributes:
        kind: ``"linear"``, ``"quadratic"`` or ``"duty"``.
        coef: Shape (3,) [RPM, RPM/V, RPM/V²] (``"duty"``: [RPM, RPM, RPM]).
        tau: Lag [rows].
        rmse: RMSE of the lagged model on the fitted rows [RPM].
        n: Rows fitted.
    """

    kind: str
    coef: np.ndarray
    tau: float
    rmse: float
    n: int

    def steady(self, pwm: Any, volt: Any) -> np.ndarray:
        """Steady rotor speed [RPM] at PWM ``pwm`` (0..65535) and supply voltage ``volt`` [V]."""
        x = _rpm_input(self.kind, pwm, volt)
        return self.coef[0] + self.coef[1] * x + self.coef[2] * x * x

    def predict(self, pwm: Any, volt: Any) -> np.ndarray:
        """Rotor speed [RPM] of a sequence of rows: :meth:`steady` through the lag."""
        return lowpass(self.steady(pwm, volt), self.tau)


def _rpm_input(kind: str, pwm: Any, volt: Any) -> np.ndarray:
    duty = np.asarray(pwm, dtype=np.float64) / PWM_FULL
    if kind == "duty":
        return duty * np.ones_like(np.asarray(volt, dtype=np.float64))
    if kind in ("linear", "quadratic"):
        return duty * np.asarray(volt, dtype=np.float64)
    raise ValueError(f"kind must be 'linear', 'quadratic' or 'duty'; got {kind!r}")


def fit_pwm_voltage_to_rpm(
    pwm: Any,
    vbat: Any,
    rpm: Any,
    kind: str = "linear",
    *,
    tau: float | None = None,
    rows: np.ndarray | None = None,
    taus: Sequence[float] = tuple(range(41)),
) -> RpmFit:
    """Fit :class:`RpmFit` to a sequence of rows (least squares, ``numpy.linalg.lstsq``).

    The lag is linear, so for a given ``tau`` the lagged model is linear in the coefficients
    (the lag of each regressor); ``tau=None`` picks the ``tau`` in ``taus`` [rows] with the least
    residual.

    Args:
        pwm: PWM per row (0..65535), in time order.
        vbat: Supply voltage per row [V].
        rpm: Measured rotor speed per row [RPM].
        kind: ``"linear"``, ``"quadratic"`` or ``"duty"`` (see :class:`RpmFit`).
        tau: Fixed lag [rows], or None to fit it.
        rows: Rows fitted (boolean mask); default ``pwm >= PWM_MIN``.
        taus: Candidate lags [rows] when ``tau`` is None.
    """
    pwm = np.asarray(pwm, dtype=np.float64)
    w = np.asarray(rpm, dtype=np.float64)
    x = _rpm_input(kind, pwm, vbat)
    rows = pwm >= PWM_MIN if rows is None else np.asarray(rows, dtype=bool)
    n = 3 if kind == "quadratic" else 2
    best: RpmFit | None = None
    for t in [tau] if tau is not None else taus:
        A = np.stack([lowpass(x**p, float(t)) for p in range(n)], axis=1)[rows]
        sol, *_ = np.linalg.lstsq(A, w[rows], rcond=None)
        rmse = float(np.sqrt(np.mean((A @ sol - w[rows]) ** 2)))
        if best is None or rmse < best.rmse:
            coef = np.zeros(3)
            coef[:n] = sol
            best = RpmFit(kind, coef, float(t), rmse, int(rows.sum()))
    assert best is not None
    return best


def predict_thrust(rpm_fit: RpmFit, curve: ThrustFit, pwm: Any, volt: Any) -> np.ndarray:
    """Total thrust [N] of the four rotors: :meth:`RpmFit.predict` through the thrust curve."""
    return N_ROTORS * curve(rpm_fit.predict(pwm, volt))


def cross_run(
    train: dict[str, Any], test: dict[str, Any], *, volt: str = "vbat", kind: str = "linear"
) -> dict[str, Any]:
    """Fit on ``train``, predict the total thrust of ``test`` from its PWM and voltage.

    On ``train``: the scale delay, the quadratic thrust curve on the aligned rows ``pwm > 0`` and
    the rotor-speed model on the rows ``pwm >= PWM_MIN``. On ``test``: the predicted total thrust
    against the measured one moved by the training run's scale delay, rows ``pwm >= PWM_MIN``.

    Args:
        train: Run the models are fitted on (:func:`load_stand`).
        test: Run they are tested on.
        kind: Rotor-speed model (:class:`RpmFit`).
        volt: ``"vbat"`` (the drone's battery voltage) or ``"v_deck"`` (the deck's).

    Returns:
        dict: ``delay`` [rows], ``curve`` (:class:`ThrustFit`), ``rpm_fit`` (:class:`RpmFit`),
        ``rpm_rmse`` [RPM] and ``thrust_rmse`` [N] on ``test``, ``mean_thrust`` [N] and
        ``thrust_rmse_pct`` (RMSE as % of the mean measured total thrust).
    """
    d = scale_delay(train)
    on = train["pwm"] > 0
    curve = fit_thrust_curve(train["rpm"][on], align(train["thrust"], d)[on])
    rfit = fit_pwm_voltage_to_rpm(train["pwm"], train[volt], train["rpm"], kind)
    w = rfit.predict(test["pwm"], test[volt])
    pred = N_ROTORS * curve(w)
    meas = align(test["thrust_total"], d)
    rows = (test["pwm"] >= PWM_MIN) & np.isfinite(meas)
    rmse = float(np.sqrt(np.mean((pred - meas)[rows] ** 2)))
    mean = float(np.mean(meas[rows]))
    return {
        "delay": d,
        "curve": curve,
        "rpm_fit": rfit,
        "rpm_rmse": float(np.sqrt(np.mean((w - test["rpm"])[rows] ** 2))),
        "thrust_rmse": rmse,
        "mean_thrust": mean,
        "thrust_rmse_pct": 100.0 * rmse / mean,
        "n": int(rows.sum()),
    }


def evaluate(files: Sequence[str | Path], preset: str = "cf2x_L250") -> dict[str, Any]:
    """All figures of the table (:func:`main`) for the runs ``files``.

    Returns:
        dict: ``runs`` (one dict per file: ``name``, ``n`` rows with ``pwm > 0``, ``delay``,
        ``preset_rmse``, ``quad``, ``pure`` raw and ``*_aligned`` [N or :class:`ThrustFit`]) and
        ``cross`` (``(train, test, volt, kind) -> cross_run dict`` over ordered pairs of runs).
    """
    params = load_params(preset)
    stands = [load_stand(f) for f in files]
    runs = []
    for s in stands:
        on = s["pwm"] > 0
        d = scale_delay(s)
        t_al = align(s["thrust"], d)
        runs.append(
            {
                "name": s["name"],
                "n": int(on.sum()),
                "delay": d,
                "preset_rmse": thrust_rmse(params, s),
                "preset_rmse_aligned": thrust_rmse(params, s, delay=d),
                "quad": fit_thrust_curve(s["rpm"][on], s["thrust"][on]),
                "pure": fit_thrust_curve(s["rpm"][on], s["thrust"][on], "pure"),
                "quad_aligned": fit_thrust_curve(s["rpm"][on], t_al[on]),
                "pure_aligned": fit_thrust_curve(s["rpm"][on], t_al[on], "pure"),
            }
        )
    cross = {}
    for a in stands:
        for b in stands:
            if a is b:
                continue
            for volt in ("vbat", "v_deck"):
                for kind in ("linear", "quadratic", "duty"):
                    cross[(a["name"], b["name"], volt, kind)] = cross_run(
                        a, b, volt=volt, kind=kind
                    )
    return {"preset": preset, "runs": runs, "cross": cross}


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: the fits and errors for the thrust-stand runs (see the module docstring)."""
    ap = argparse.ArgumentParser(
        prog="python -m quadsim.app.sysid.thrust_stand",
        description="RPM-to-thrust and PWM/voltage-to-RPM fits on Crazyflie thrust-stand runs.",
    )
    ap.add_argument(
        "--files",
        nargs="+",
        type=Path,
        default=None,
        help="thrust-stand CSVs (default: data/crazyflie-thrust-stand/*.csv of the checkout)",
    )
    ap.add_argument("--preset", default="cf2x_L250", help="preset whose thrust curve is checked")
    args = ap.parse_args(argv)
    files = args.files if args.files is not None else default_files()
    if not files:
        ap.error("no runs given and none found in data/crazyflie-thrust-stand/")
    try:
        res = evaluate(files, args.preset)
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(
        f"RPM -> thrust per rotor (scale x {G} / 4 against the mean of the four rpm; rows "
        f"pwm > 0). raw: as logged; aligned: thrust moved back by the scale delay."
    )
    print(
        f"{'run':22s} {'rows':>5s} {'delay':>5s} | {args.preset + ' RMSE':>16s} "
        f"{'quad RMSE':>9s} {'pure RMSE':>9s} | {'quadratic fit a, b, c (aligned)':>40s} "
        f"{'pure k':>10s}"
    )
    print(
        f"{'':22s} {'':>5s} {'[row]':>5s} | {'[mN] raw/aligned':>16s} {'raw/al.':>9s} "
        f"{'raw/al.':>9s} | {'[N, N/RPM, N/RPM^2]':>40s} {'[N/RPM^2]':>10s}"
    )
    for r in res["runs"]:
        c = r["quad_aligned"].coef
        print(
            f"{r['name']:22s} {r['n']:5d} {r['delay']:5d} | "
            f"{1e3 * r['preset_rmse']:7.3f} / {1e3 * r['preset_rmse_aligned']:6.3f} "
            f"{1e3 * r['quad'].rmse:4.2f}/{1e3 * r['quad_aligned'].rmse:4.2f} "
            f"{1e3 * r['pure'].rmse:4.2f}/{1e3 * r['pure_aligned'].rmse:4.2f} | "
            f"{c[0]:+.3e}, {c[1]:+.3e}, {c[2]:.4e} {r['pure_aligned'].coef[2]:.4e}"
        )
    print()
    print(
        f"PWM and voltage -> total thrust, fitted on one run, tested on the other (rows pwm >= "
        f"{PWM_MIN:.0f}; u = pwm/65535 x voltage; lag tau fitted)"
    )
    print(
        f"{'train -> test':44s} {'voltage':>7s} {'model':>9s} {'tau':>4s} "
        f"{'c0, c1, c2 [RPM, RPM/V, RPM/V^2]':>34s} {'RPM err':>7s} {'thrust':>7s} {'%mean':>6s}"
    )
    for (a, b, volt, kind), r in res["cross"].items():
        c = r["rpm_fit"].coef
        print(
            f"{a + ' -> ' + b:44s} {volt:>7s} {kind:>9s} {r['rpm_fit'].tau:4.0f} "
            f"{c[0]:10.1f}, {c[1]:10.1f}, {c[2]:9.1f} {r['rpm_rmse']:7.0f} "
            f"{1e3 * r['thrust_rmse']:5.1f}mN {r['thrust_rmse_pct']:6.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
