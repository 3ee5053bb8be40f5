"""Plots and animation: each writes a real, non-trivial image; non-finite data do not crash."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("matplotlib")
Image = pytest.importorskip("PIL.Image")

from quadsim import plotting  # noqa: E402
from quadsim.rotation import from_euler  # noqa: E402

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
    if plotting._ffmpeg() is None:
        with pytest.raises(RuntimeError, match="ffmpeg"):
            plotting.animate(log, META, tmp_path / "fly.mp4", max_frames=3)
    else:
        out = plotting.animate(log, META, tmp_path / "fly.mp4", max_frames=6)
        assert out.stat().st_size > 1000


def test_no_import_side_effects_and_no_pyplot():
    code = (
        "import sys, numpy as np\n"
        "import quadsim.plotting as p\n"
        "assert 'matplotlib' not in sys.modules\n"
        "import tempfile, pathlib\n"
        "d = pathlib.Path(tempfile.mkdtemp())\n"
        "p.plot_envelope('cf2x_L250', d / 'e.png')\n"
        "assert 'matplotlib.pyplot' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
