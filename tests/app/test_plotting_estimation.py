"""State-estimate figure: errors and RMSE against a hand computation, bands, NEES, a valid PNG."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

pytest.importorskip("matplotlib")
from matplotlib.collections import PolyCollection
from matplotlib.image import imread
from scipy.stats import chi2

from quadsim.app.plotting.estimation import (
    _estimation_figure,
    estimation_errors,
    plot_estimation,
)
from quadsim.physics.rotation import exp, from_euler, multiply

META = {"drone": "cf2x_L250", "scenario": "circle"}
T, N, DT = 500, 2, 0.01
SIG_P, SIG_V, SIG_A = 0.004, 0.02, 0.003  # [m], [m/s], [rad]
OFF_P = np.array([0.002, -0.001, 0.003])  # [m]
OFF_V = np.array([0.0, 0.01, -0.005])  # [m/s]
OFF_A = np.array([0.001, -0.002, 0.004])  # [rad]
T_CRASH = 4.0  # drone 1 crashes here: its later samples are not counted


def make_log(seed: int = 0) -> tuple[dict, dict]:
    """A log whose errors (true - estimate) are known: offsets plus Gaussian noise."""
    rng = np.random.default_rng(seed)
    t = DT * np.arange(T)
    ones = np.ones((1, N))
    pos = np.stack([np.cos(t)[:, None] * ones, np.sin(t)[:, None] + np.arange(N),
                    np.ones((T, N))], axis=-1)  # fmt: skip
    vel = np.gradient(pos, DT, axis=0)
    rpy = (
        np.stack([0.1 * np.sin(2 * t), 0.1 * np.cos(2 * t), t], axis=-1)[:, None] * ones[..., None]
    )
    quat = np.asarray(from_euler(rpy))
    e_p = OFF_P + SIG_P * rng.standard_normal((T, N, 3))
    e_v = OFF_V + SIG_V * rng.standard_normal((T, N, 3))
    e_a = OFF_A + SIG_A * rng.standard_normal((T, N, 3))
    # q_true = q_est ⊗ exp(δθ)  =>  q_est = q_true ⊗ exp(-δθ)
    est_quat = np.asarray(multiply(quat, exp(-e_a)))
    cov = np.empty((T, N, 15))
    cov[..., 0:3] = SIG_P**2
    cov[..., 3:6] = SIG_V**2
    cov[..., 6:9] = SIG_A**2
    cov[..., 9:12] = 0.01**2
    cov[..., 12:15] = 0.001**2
    log = {
        "time": t,
        "pos": pos,
        "vel": vel,
        "quat": quat,
        "est_pos": pos - e_p,
        "est_vel": vel - e_v,
        "est_quat": -est_quat,  # the sign of a quaternion does not matter
        "est_gyro_bias": 1e-3 * np.ones((T, N, 3)),
        "est_accel_bias": 1e-2 * np.ones((T, N, 3)),
        "est_cov": cov,
        "est_nees": rng.chisquare(9, size=(T, N)),
        "crashed": (t >= T_CRASH)[:, None] & (np.arange(N) == 1)[None],
    }
    return log, {"pos": e_p, "vel": e_v, "att": e_a}


def hand_stats(log: dict, err: dict, t_from: float) -> dict:
    """RMSE [m, m/s, deg], mean NEES and share in the band, by plain loops over the samples."""
    lo, hi = chi2.ppf([0.025, 0.975], 9)
    s = {"pos": 0.0, "vel": 0.0, "att": 0.0}
    n = 0
    nees = []
    for k in range(T):
        for i in range(N):
            if log["time"][k] < t_from or (i == 1 and log["time"][k] >= T_CRASH):
                continue
            n += 1
            for key in s:
                s[key] += float(np.dot(err[key][k, i], err[key][k, i]))
            nees.append(log["est_nees"][k, i])
    nees = np.array(nees)
    return {
        "pos": math.sqrt(s["pos"] / n),
        "vel": math.sqrt(s["vel"] / n),
        "att": math.degrees(math.sqrt(s["att"] / n)),
        "nees": float(nees.mean()),
        "in_band": float(np.mean((nees >= lo) & (nees <= hi))),
    }


def _number(title: str, before: str) -> float:
    m = re.search(re.escape(before) + r"\s*([-+0-9.eE]+)", title)
    assert m, (before, title)
    return float(m.group(1))


@pytest.mark.parametrize("t_from", [0.0, 1.5])
def test_estimation_errors_match_hand_computation(t_from: float) -> None:
    log, err = make_log()
    e = estimation_errors(log, t_from)
    np.testing.assert_allclose(e.pos, err["pos"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(e.vel, err["vel"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(e.att, err["att"], rtol=0, atol=1e-9)
    h = hand_stats(log, err, t_from)
    assert e.pos_rmse_m == pytest.approx(h["pos"], rel=1e-9)
    assert e.vel_rmse_m_s == pytest.approx(h["vel"], rel=1e-9)
    assert e.att_rmse_deg == pytest.approx(h["att"], rel=1e-6)
    assert e.nees_mean == pytest.approx(h["nees"], rel=1e-12)
    assert e.nees_in_band == pytest.approx(h["in_band"], rel=1e-12)
    # sanity of the synthetic errors: RMSE ≈ sqrt(|offset|² + 3σ²)
    assert e.pos_rmse_m == pytest.approx(math.sqrt(OFF_P @ OFF_P + 3 * SIG_P**2), rel=0.1)
    assert e.att_rmse_deg == pytest.approx(
        math.degrees(math.sqrt(OFF_A @ OFF_A + 3 * SIG_A**2)), rel=0.1
    )
    # the drone's samples after its crash are not counted
    assert not e.counted[log["time"] >= T_CRASH, 1].any()
    assert e.counted[:, 0].sum() == np.sum(log["time"] >= t_from)


def test_estimation_errors_one_drone_and_summary_agree() -> None:
    from quadsim.app.io.summary import summarize

    log, err = make_log(1)
    e = estimation_errors(log, 0.0, drones=[0])
    assert e.pos.shape == (T, 1, 3)
    assert e.pos_rmse_m == pytest.approx(
        math.sqrt(np.mean(np.sum(err["pos"][:, 0] ** 2, axis=-1))), rel=1e-12
    )
    # every drone shown: the same numbers as summary.json's estimation entry
    s = summarize(log, META, 1.0, t_from=0.5)["estimation"]
    e = estimation_errors(log, 0.5)
    assert e.pos_rmse_m == pytest.approx(s["pos_rmse_m"], rel=1e-9)
    assert e.vel_rmse_m_s == pytest.approx(s["vel_rmse_m_s"], rel=1e-9)
    assert e.att_rmse_deg == pytest.approx(s["att_rmse_deg"], rel=1e-9)
    assert e.nees_mean == pytest.approx(s["nees_mean"], rel=1e-9)


def test_figure_titles_state_the_rmse(tmp_path) -> None:
    log, err = make_log()
    t_from = 1.0
    fig, e = _estimation_figure(log, META, t_from=t_from)
    h = hand_stats(log, err, t_from)
    assert e.pos_rmse_m == pytest.approx(h["pos"], rel=1e-9)  # what the titles state
    axes = fig.axes
    assert len(axes) == 4
    titles = [ax.get_title() for ax in axes]
    # titles show 3 significant figures: compare with the hand numbers at that precision
    assert _number(titles[0], "RMSE") == pytest.approx(float(f"{h['pos'] * 1e3:.3g}"))
    assert "mm" in titles[0] and "t ≥ 1 s" in titles[0]
    assert _number(titles[1], "RMSE") == pytest.approx(float(f"{h['vel'] * 1e3:.3g}"))
    assert "mm/s" in titles[1]
    assert _number(titles[2], "RMSE") == pytest.approx(float(f"{h['att']:.3g}"))
    assert "deg" in titles[2]
    assert _number(titles[3], "mean") == pytest.approx(float(f"{h['nees']:.3g}"))
    assert _number(titles[3], ",") == pytest.approx(float(f"{100 * h['in_band']:.3g}"))
    # units on every axis
    for ax, unit in zip(axes, ("[mm]", "[mm/s]", "[deg]", "NEES"), strict=True):
        assert unit in ax.get_ylabel()
    assert axes[-1].get_xlabel() == "time [s]"
    # ±3σ bands on the error rows; the one-run χ²(9) band on the NEES row
    for ax in axes[:3]:
        assert sum(isinstance(c, PolyCollection) for c in ax.collections) == 3
    lo, hi = chi2.ppf([0.025, 0.975], 9)
    assert any(f"[{lo:.3g}, {hi:.3g}]" in t.get_text() for t in axes[3].get_legend().get_texts())
    assert axes[3].get_yscale() == "log"
    # the band of the position row spans ±3σ [mm]
    band = axes[0].collections[0].get_paths()[0].vertices[:, 1]
    assert band.max() == pytest.approx(3 * SIG_P * 1e3)
    assert band.min() == pytest.approx(-3 * SIG_P * 1e3)


def test_plot_estimation_writes_a_png(tmp_path) -> None:
    log, _ = make_log()
    out = plot_estimation(log, META, tmp_path / "sub" / "estimation.png", t_from=0.5)
    assert out == tmp_path / "sub" / "estimation.png"
    assert out.stat().st_size > 10_000
    img = imread(out)
    assert img.ndim == 3 and img.shape[0] > 500 and img.shape[1] > 500
    assert img.std() > 0.01  # not a blank image


def test_complementary_log_without_cov_and_nees(tmp_path) -> None:
    log, err = make_log(2)
    for k in ("est_cov", "est_nees", "est_accel_bias"):
        del log[k]
    fig, e = _estimation_figure(log, META, drones=[1])
    assert len(fig.axes) == 3
    for ax in fig.axes:
        assert not any(isinstance(c, PolyCollection) for c in ax.collections)
    assert e.nees is None and e.nees_mean is None and e.nees_in_band is None
    h = math.sqrt(np.mean(np.sum(err["pos"][log["time"] < T_CRASH, 1] ** 2, axis=-1)))
    assert e.pos_rmse_m == pytest.approx(h, rel=1e-12)
    out = plot_estimation(log, META, tmp_path / "comp.png")
    img = imread(out)
    assert img.shape[0] > 0 and img.shape[1] > 0 and img.std() > 0.01


def test_non_finite_samples_are_masked(tmp_path) -> None:
    log, err = make_log(3)
    log["est_pos"][10:20, 0] = np.nan
    log["est_quat"][30, 0] = np.nan
    log["est_quat"][31, 0] = 0.0
    log["est_nees"][40, 0] = np.inf
    log["est_cov"][50, 0, 0] = -1.0
    e = estimation_errors(log)
    assert np.isnan(e.pos[10:20, 0]).all()
    assert np.isnan(e.att[30:32, 0]).all()
    ok = np.ones((T, N), bool)
    ok[10:20, 0] = False
    ok[log["time"] >= T_CRASH, 1] = False
    h = math.sqrt(np.mean(np.sum(err["pos"] ** 2, axis=-1)[ok]))
    assert e.pos_rmse_m == pytest.approx(h, rel=1e-12)
    assert math.isfinite(e.att_rmse_deg) and math.isfinite(e.nees_mean)
    out = plot_estimation(log, META, tmp_path / "nan.png")
    assert imread(out).size > 0


def test_missing_est_pos_raises(tmp_path) -> None:
    log, _ = make_log()
    del log["est_pos"]
    with pytest.raises(ValueError, match="est_pos"):
        plot_estimation(log, META, tmp_path / "x.png")
    with pytest.raises(ValueError, match="est_pos"):
        estimation_errors(log)
    assert not (tmp_path / "x.png").exists()


def test_drone_selection() -> None:
    log, _ = make_log()
    fig, e = _estimation_figure(log, META, drones=[1, 0], max_drones=1)
    assert e.pos.shape[1] == 1
    assert "(drone 1)" in fig.get_suptitle() and "1 of 2 drones shown" in fig.get_suptitle()
    with pytest.raises(ValueError):
        _estimation_figure(log, META, drones=[5])
