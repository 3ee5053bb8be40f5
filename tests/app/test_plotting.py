"""Plots and animation: each writes a real, non-trivial image; non-finite data do not crash."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("matplotlib")
Image = pytest.importorskip("PIL.Image")

from quadsim.app import plotting  # noqa: E402
from quadsim.app.plotting import forked  # noqa: E402
from quadsim.physics.rotation import from_euler  # noqa: E402

META = {
    "drone": "cf2x_L250",
    "rpm_min": 4070.3,
    "rpm_max": 21666.4,
    "dt": 0.02,
    "n": 3,
    "n_rotors": 4,
    "rotor_positions": [[0.03, -0.03], [0.03, 0.03], [-0.03, 0.03], [-0.03, -0.03]],
    "scenario": "circle",
}


def make_log(T: int = 150, N: int = 3, R: int = 4, dt: float = 0.02) -> dict:
    t = dt * np.arange(T)
    ones = np.ones((1, N))
    ref = np.stack(
        [np.cos(t)[:, None] * ones, np.sin(t)[:, None] + np.arange(N), np.ones((T, N))], axis=-1
    )
    pos = ref + 0.05 * np.sin(3 * t)[:, None, None]
    rpy = np.stack([0.1 * np.sin(2 * t), 0.1 * np.cos(2 * t), t], axis=-1)[:, None]
    rpy = rpy * ones[..., None]
    rpm = 15000 + 3000 * np.sin(t)[:, None, None] * np.ones((T, N, R))
    log = {
        "time": t,
        "pos": pos,
        "quat": np.asarray(from_euler(rpy)),
        "vel": np.gradient(pos, dt, axis=0),
        "ang_vel": np.gradient(rpy, dt, axis=0),
        "rotor_rpm": rpm,
        "cmd_rpm": rpm + 200,
        "saturated": ((t > 1) & (t < 1.5))[:, None] & np.ones((T, N), bool),
        "ref_pos": ref,
        "ref_vel": np.gradient(ref, dt, axis=0),
        "ref_yaw": t[:, None] * ones,
        "crashed": (t > 2.5)[:, None] & (np.arange(N) == 1)[None],
    }
    # non-finite samples must be masked, not crash anything
    log["pos"][T // 8 : T // 8 + 4, 0] = np.nan
    log["pos"][T // 4, 0, 1] = np.inf
    log["quat"][T // 3, -1] = np.nan
    log["rotor_rpm"][T // 2, 0, 0] = -np.inf
    return log


@pytest.fixture(scope="module")
def log() -> dict:
    return make_log()


def check_png(path, kind: str) -> None:
    assert path.stat().st_size > 10_000
    with Image.open(path) as im:
        assert im.format == "PNG"
        w, h = plotting.FIGSIZE[kind]
        assert im.size == (round(w * plotting.DPI), round(h * plotting.DPI))
        px = np.asarray(im.convert("RGB"), dtype=np.uint32)
    packed = (px[..., 0] << 16) | (px[..., 1] << 8) | px[..., 2]
    assert len(np.unique(packed)) > 20  # a drawing, not a blank canvas


@pytest.mark.parametrize(
    ("func", "kind"),
    [
        ("plot_path_3d", "path_3d"),
        ("plot_states", "states"),
        ("plot_rotors", "rotors"),
        ("plot_tracking_error", "tracking_error"),
    ],
)
def test_each_plot_writes_png(tmp_path, log, func, kind):
    out = getattr(plotting, func)(log, META, tmp_path / f"{kind}.png")
    assert out == tmp_path / f"{kind}.png"
    check_png(out, kind)


def test_plot_all_many_drones_and_missing_keys(tmp_path):
    big = make_log(T=40, N=12)
    paths = plotting.plot_all(big, META, tmp_path / "a")
    assert [p.name for p in paths] == [
        "path_3d.png",
        "states.png",
        "rotors.png",
        "tracking_error.png",
    ]
    for p, kind in zip(paths, ["path_3d", "states", "rotors", "tracking_error"], strict=True):
        check_png(p, kind)
    minimal = {k: big[k] for k in ("time", "pos", "quat")}
    paths = plotting.plot_all(minimal, {}, tmp_path / "b", drones=[11, 3])
    assert [p.name for p in paths] == ["path_3d.png", "states.png"]
    with pytest.raises(ValueError, match="drones"):
        plotting.plot_states(big, META, tmp_path / "c.png", drones=[12])
    with pytest.raises(ValueError, match="ref_pos"):
        plotting.plot_tracking_error(minimal, META, tmp_path / "d.png")


def test_all_nan_drone_does_not_crash(tmp_path):
    lg = make_log(T=30, N=2)
    for k in ("pos", "quat", "ref_pos", "rotor_rpm"):
        lg[k][:, 1] = np.nan
    plotting.plot_all(lg, META, tmp_path)
    lg["pos"][:] = np.nan
    plotting.plot_path_3d(lg, META, tmp_path / "p.png")


@pytest.mark.parametrize("preset", ["cf2x_L250", "generic_x"])  # generic_x has no drag: v = inf
def test_plot_envelope(tmp_path, preset):
    check_png(plotting.plot_envelope(preset, tmp_path / "env.png"), "envelope")


def test_animate_gif(tmp_path, log):
    out = plotting.animate(
        log, META, tmp_path / "fly.gif", fps=10, drone=0, trail=1.0, max_frames=4
    )
    with Image.open(out) as im:
        assert im.format == "GIF" and im.n_frames == 4
        frames = []
        for k in range(im.n_frames):
            im.seek(k)
            frames.append(np.asarray(im.convert("RGB")))
    assert not np.array_equal(frames[0], frames[-1])  # the drone moved
    with pytest.raises(ValueError, match=r"\.gif or \.mp4"):
        plotting.animate(log, META, tmp_path / "fly.avi")
    with pytest.raises(ValueError, match="drone"):
        plotting.animate(log, META, tmp_path / "fly.gif", drone=3)


def test_animate_mp4_or_clear_error(tmp_path, log):
    from quadsim.app.plotting.animation import ffmpeg_exe

    if ffmpeg_exe() is None:
        with pytest.raises(RuntimeError, match="ffmpeg"):
            plotting.animate(log, META, tmp_path / "fly.mp4", max_frames=3)
    else:
        out = plotting.animate(log, META, tmp_path / "fly.mp4", max_frames=6)
        assert out.stat().st_size > 1000


def _gif_frames(path) -> list[np.ndarray]:
    with Image.open(path) as im:
        frames = []
        for k in range(im.n_frames):
            im.seek(k)
            frames.append(np.asarray(im.convert("RGB"), dtype=np.float64))
    return frames


def _keep_figures(monkeypatch) -> list:
    """The figures :func:`plotting.animate` draws on, kept to read titles and artists back."""
    from quadsim.app.plotting import animation

    figs = []
    new = animation.new_figure
    monkeypatch.setattr(
        animation, "new_figure", lambda *a, **k: figs.append(new(*a, **k)) or figs[-1]
    )
    return figs


def test_animate_draws_every_drone_in_its_colour(tmp_path, monkeypatch):
    """Issue 40, item 16: a three-drone log animates three drones, not drone 0 alone. Each
    drone's colour covers more of the last frame than of the first (its trail has grown; the
    legend and the dashed references are the same in both), and the title names them."""
    from matplotlib.colors import to_rgb

    figs = _keep_figures(monkeypatch)
    out = plotting.animate(make_log(), META, tmp_path / "all.gif", fps=10, max_frames=6)
    first, *_, last = _gif_frames(out)
    for k in range(3):  # within 60 of it: the GIF has 64 colours (+134 to +155 here; 1 drone: <= 1)
        rgb = 255 * np.array(to_rgb(f"C{k}"))
        near = [int((np.linalg.norm(f - rgb, axis=-1) < 60).sum()) for f in (first, last)]
        assert near[1] > near[0] + 80, (k, near)
    (fig,) = figs
    assert "drones 0–2 — cf2x_L250 — circle" in fig.texts[0].get_text()
    texts = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert texts == ["drone 0", "drone 1", "drone 2", "reference"]


def test_animate_picks_drones_and_keeps_the_one_drone_keyword(tmp_path, monkeypatch):
    """``drones=`` a subset (the title says which, of how many), ``drone=`` or one index: one."""
    figs = _keep_figures(monkeypatch)
    log = make_log(T=20)
    plotting.animate(log, META, tmp_path / "a.gif", max_frames=2, drones=[0, 2])
    plotting.animate(log, META, tmp_path / "b.gif", max_frames=2, drone=1)
    plotting.animate(log, META, tmp_path / "c.gif", 30.0, 2, max_frames=2)  # one index
    titles = [fig.texts[0].get_text() for fig in figs]
    assert [t.split(" — ")[0] for t in titles] == ["drones 0, 2", "drone 1", "drone 2"]
    assert "(2 of 3 drones shown)" in titles[0]
    with pytest.raises(ValueError, match="not both"):
        plotting.animate(log, META, tmp_path / "d.gif", drones=[0], drone=0)
    with pytest.raises(ValueError, match="outside"):
        plotting.animate(log, META, tmp_path / "d.gif", drones=[0, 5])


def test_no_import_side_effects_and_no_pyplot():
    code = (
        "import sys, numpy as np\n"
        "import quadsim.app.plotting as p\n"
        "assert 'matplotlib' not in sys.modules\n"
        "import tempfile, pathlib\n"
        "d = pathlib.Path(tempfile.mkdtemp())\n"
        "p.plot_envelope('cf2x_L250', d / 'e.png')\n"
        "assert 'matplotlib.pyplot' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# --- issue 9 §8: the figures say what summary.json says, the GIF plays in real time ---------------


def _capture_figures(monkeypatch, module):
    """Keep every figure ``module`` saves (its ``save_figure``), to read titles and artists back
    (drawn in this process: no forked child draws them)."""
    monkeypatch.setattr(forked, "cores", lambda n: 1)
    figs = []
    save = module.save_figure

    def keep(fig, path):
        figs.append(fig)
        return save(fig, path)

    monkeypatch.setattr(module, "save_figure", keep)
    return figs


def test_tracking_error_title_is_the_summary_window(tmp_path, monkeypatch):
    from quadsim.app.io.summary import summarize
    from quadsim.app.plotting import figures

    T, N, t_from = 200, 3, 1.5
    lg = make_log(T=T, N=N)
    t = lg["time"]
    rng = np.random.default_rng(0)
    err = np.where(t < t_from, 0.8, 0.01)[:, None, None] * rng.standard_normal((T, N, 3))
    lg["pos"] = lg["ref_pos"] + err  # large before settling, small after
    lg["pos"][150:, 1] += 5.0  # drone 1 crashes at t = 2.52 s (make_log): huge error after
    lg["pos"][120, 2] = np.nan  # a non-finite sample is skipped
    figs = _capture_figures(monkeypatch, figures)
    plotting.plot_all(lg, META, tmp_path, t_from=t_from)
    (fig,) = [f for f in figs if f._suptitle and "tracking error" in f._suptitle.get_text()]
    title = fig._suptitle.get_text()
    s = summarize(lg, META, 0.0, t_from=t_from)
    whole = summarize(lg, META, 0.0, t_from=0.0)
    assert s["tracking_max_m"] < 0.1 < whole["tracking_max_m"]  # the window matters here
    assert f"RMS {s['tracking_rms_m']:.3g} m, max {s['tracking_max_m']:.3g} m" in title
    assert f"t >= {t_from:g} s" in title
    assert f"{whole['tracking_rms_m']:.3g}" not in title
    # the numbers themselves, unrounded, for any subset of drones shown
    rms, mx = figures._tracking_stats(lg, META, [0, 2], t_from)
    sub = summarize({k: v[:, [0, 2]] if k != "time" else v for k, v in lg.items()}, META, 0.0,
                    t_from=t_from)  # fmt: skip
    assert (rms, mx) == (sub["tracking_rms_m"], sub["tracking_max_m"])
    # the settling time is marked on every panel
    for ax in fig.axes:
        xs = [ln.get_xdata() for ln in ax.get_lines() if ln.get_linestyle() == "--"]
        assert any(list(x) == [t_from, t_from] for x in xs)


def test_tracking_error_without_settle_is_whole_run(tmp_path, monkeypatch):
    from quadsim.app.io.summary import summarize
    from quadsim.app.plotting import figures

    lg = make_log(T=60, N=2)
    figs = _capture_figures(monkeypatch, figures)
    plotting.plot_tracking_error(lg, META, tmp_path / "e.png")
    s = summarize(lg, META, 0.0)
    title = figs[0]._suptitle.get_text()
    assert f"RMS {s['tracking_rms_m']:.3g} m, max {s['tracking_max_m']:.3g} m)" in title


@pytest.mark.parametrize("fps", [30.0, 25.0, 12.0, 100.0])
def test_gif_plays_in_flight_time(tmp_path, fps):
    from PIL import ImageSequence

    lg = make_log(T=50, N=1, dt=0.02)  # 0.98 s of flight
    span = float(lg["time"][-1] - lg["time"][0])
    out = plotting.animate(lg, META, tmp_path / "f.gif", fps=fps, trail=0.5)
    with Image.open(out) as im:
        durations = [fr.info["duration"] for fr in ImageSequence.Iterator(im)]
    n = len(durations)
    assert n >= 2 and all(d >= 20 for d in durations)  # browsers slow down delays < 20 ms
    period = span / (n - 1)  # the frames sample the flight evenly, first to last sample
    assert period >= 1.0 / min(fps, 50.0) - 1e-12
    total = sum(durations) / 1000.0
    # n frames stand for n periods of flight; GIF delays are whole centiseconds, so the sum may
    # be off by half a tick, never by a fraction of every frame (33.3 ms -> 30 ms: 10 % fast)
    assert abs(total - n * period) <= 0.005 + 1e-9
    assert abs(total - span) <= period + 0.005 + 1e-9  # within one frame of the flight time


def test_gif_durations_track_flight_time():
    from quadsim.app.plotting.animation import _gif_durations

    d = _gif_durations(9, 1 / 30)
    assert set(d) == {30, 40} and all(x % 10 == 0 for x in d)
    assert np.all(np.abs(np.cumsum(d) - 1000 / 30 * np.arange(1, 10)) <= 5 + 1e-9)
    assert _gif_durations(5, 0.04) == [40] * 5


def _params_with_drag_speed_max(name: str, v: float):
    from quadsim.physics.params import Params, load_params

    p = load_params(name)
    if "drag_speed_max" in Params._fields:
        return p._replace(drag_speed_max=v)

    # quadsim.physics.params has no drag_speed_max field yet: a Params subclass carrying it as a
    # class attribute (plot_envelope reads it with getattr) stands in until the field lands
    class WithDragRange(Params):
        drag_speed_max = v

    return WithDragRange(*p)


def test_envelope_marks_where_drag_model_is_extrapolated(tmp_path, monkeypatch):
    from quadsim.app.plotting import envelope as env_mod

    figs = _capture_figures(monkeypatch, env_mod)
    p = _params_with_drag_speed_max("cf2x_L250", 5.0)
    out = plotting.plot_envelope(p, tmp_path / "new" / "dir" / "env.png")  # parents created
    check_png(out, "envelope")
    ax = figs[-1].axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "drag model extrapolated beyond 5 m/s" in labels
    (band,) = [a for a in ax.patches if a.get_label().startswith("drag model extrapolated")]
    assert band.get_hatch() == "//"
    v_lo, v_hi = band.get_extents().transformed(ax.transData.inverted()).intervaly
    assert v_lo == pytest.approx(5.0, rel=1e-9, abs=1e-9) and v_hi > 20.0  # 26.8 m/s at tilt_max
    # without a known range (inf: not stated) nothing is marked
    plotting.plot_envelope(_params_with_drag_speed_max("cf2x_L250", math.inf), tmp_path / "e2.png")
    ax = figs[-1].axes[0]
    assert not any("extrapolated" in t.get_text() for t in ax.get_legend().get_texts())
    assert not ax.patches


# --- long logs: fewer points, the same lines; PNG written through Pillow ---------------------


def test_thin_keeps_each_runs_extremes_and_nan_breaks():
    from quadsim.app.plotting._common import thin_indices

    y = np.sin(np.linspace(0.0, 40.0, 1000))
    assert thin_indices(y, 250) == slice(None)  # 4 samples per column or fewer: drawn whole
    rng = np.random.default_rng(1)
    T, cols = 100_003, 500
    y = np.cumsum(rng.standard_normal((T, 3)), axis=0)
    y[40_000:40_010, 1] = np.nan
    idx = thin_indices(y, cols)
    assert idx[0] == 0 and idx[-1] == T - 1 and np.all(np.diff(idx) > 0)
    assert idx.size <= 4 * 3 * cols + 4 and idx.size < T // 10
    k = -(-T // cols)
    for c in range(3):
        for b in range(0, T, k * 37):  # every run keeps its min and max of each column
            run = y[b : b + k, c]
            if np.isfinite(run).any():
                kept = y[idx[(idx >= b) & (idx < b + k)], c]
                assert np.nanmin(kept) == np.nanmin(run) and np.nanmax(kept) == np.nanmax(run)
    assert {39_999, 40_000, 40_009, 40_010} <= set(idx.tolist())  # the line breaks where it did


def test_runs_keep_the_shaded_intervals():
    from quadsim.app.plotting._common import run_indices

    T = 50_000
    m = np.zeros(T, bool)
    m[:7] = m[100:105] = m[30_000] = m[-3:] = True
    idx = run_indices(m, 100)
    assert idx.size < 30

    def intervals(t, mask):
        edges = np.flatnonzero(np.diff(np.concatenate([[0], mask.astype(int), [0]])))
        return [(t[a], t[b - 1]) for a, b in zip(edges[::2], edges[1::2], strict=True)]

    t = np.arange(T) * 0.01
    assert intervals(t[idx], m[idx]) == intervals(t, m)
    assert run_indices(m[:300], 100) == slice(None)


def test_long_log_draws_fewer_points_same_limits(tmp_path, monkeypatch):
    from quadsim.app.plotting import figures

    lg = make_log(T=40_000, N=2, dt=0.01)
    figs = _capture_figures(monkeypatch, figures)
    plotting.plot_all(lg, META, tmp_path)
    for fig in figs:
        for ax in fig.axes:
            for line in ax.get_lines():
                assert len(line.get_xdata()) < 40_000 // 3
    states = next(f for f in figs if f._suptitle and f._suptitle.get_text().startswith("states"))
    t = lg["time"]
    x = states.axes[0].get_lines()[0]  # x of drone 0: whole time span, same extremes
    assert x.get_xdata()[0] == t[0] and x.get_xdata()[-1] == t[-1]
    assert np.nanmax(x.get_ydata()) == np.nanmax(lg["pos"][:, 0, 0])
    assert np.nanmin(x.get_ydata()) == np.nanmin(lg["pos"][:, 0, 0])
    figs.clear()
    plotting.plot_states(make_log(T=150), META, tmp_path / "s.png")  # short logs: every sample
    assert all(len(ln.get_xdata()) == 150 for ln in figs[0].axes[0].get_lines())


def test_png_is_opaque_rgb_with_the_figure_dpi(tmp_path, log):
    out = plotting.plot_rotors(log, META, tmp_path / "r.png")
    with Image.open(out) as im:
        assert im.mode == "RGB"
        assert im.info["dpi"] == pytest.approx((plotting.DPI, plotting.DPI), abs=1e-3)
        assert im.info["Software"].startswith("Matplotlib")
