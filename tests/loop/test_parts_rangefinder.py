"""The downward rangefinder part (quadsim.loop.parts.rangefinder): its range against a ray-marching
oracle, its noise against the firmware's model, no reading beyond its limits, its rate, and the
same readings on every runner of fly."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from quadsim.engines import native
from quadsim.engines.sim import Simulator
from quadsim.engines.state import State
from quadsim.loop.control import control, load_gains
from quadsim.loop.flight import fly
from quadsim.loop.parts import Context, sensor_class
from quadsim.loop.parts.rangefinder import Rangefinder, ray_range
from quadsim.loop.trajectories import Hover
from quadsim.physics import rotation
from quadsim.physics.world import Box, Ground, World, blocked, wall

WORLD = World(ground=Ground(height=0.2), boxes=(wall("x", 3.0), Box((-2.0, -1.0, 0.2),
                                                                     (-1.0, 1.0, 0.8))))


def _down(quat):
    return rotation.rotate(quat, np.array([0.0, 0.0, -1.0]))


def _march(p, d, world, step=1e-3, far=6.0):
    """The first distance along ``d`` where the point is blocked (the oracle: world.blocked)."""
    t = np.arange(0.0, far, step)
    hits = blocked(world, p[None] + t[:, None] * d[None])
    return t[np.argmax(hits)] if hits.any() else np.inf


def test_range_is_the_first_surface_along_the_body_down_axis():
    rng = np.random.default_rng(7)
    n = 200
    pos = np.column_stack([rng.uniform(-2.5, 2.9, n), rng.uniform(-1.5, 1.5, n),
                           rng.uniform(0.9, 3.0, n)])  # fmt: skip
    quat = rotation.from_euler(np.column_stack([rng.uniform(-1.2, 1.2, (n, 2)),
                                                rng.uniform(-3, 3, n)]))  # fmt: skip
    d = _down(quat)
    got = ray_range(pos, tuple(d.T), WORLD, np)
    want = np.array([_march(p, v, WORLD) for p, v in zip(pos, d, strict=True)])
    hit = np.isfinite(want)
    assert hit.sum() > 150 and (~hit).sum() > 0  # both cases drawn: tilted towards the sky too
    np.testing.assert_allclose(got[hit], want[hit], atol=1.5e-3)
    assert np.all(got[~hit] > 6.0)  # beyond the march: farther, or nothing (1e6)
    # level over the floor: the height above it; over the box: above its top
    level = np.array([[0.0, 0.0, 0.0, 1.0]] * 2)
    at = np.array([[0.0, 0.0, 1.5], [-1.5, 0.0, 1.5]])
    np.testing.assert_allclose(ray_range(at, tuple(_down(level).T), WORLD, np), [1.3, 0.7])


def _truth(pos, quat):
    n = len(pos)
    return State(np.asarray(pos, float), np.asarray(quat, float), np.zeros((n, 3)),
                 np.zeros((n, 3)), None)  # fmt: skip


def test_noise_follows_the_firmware_model_and_beyond_the_limits_there_is_no_reading():
    rf = Rangefinder("tof")
    ctx = Context(0.002, np, world=World(ground=Ground()))
    n = 40_000
    level = np.tile([0.0, 0.0, 0.0, 1.0], (n, 1))
    z = np.random.default_rng(1).standard_normal((n, 1))
    for height in (0.5, 2.5, 3.5):
        got, _ = rf.measure(0, _truth(np.tile([0.0, 0.0, height], (n, 1)), level), None, z, ctx)
        sigma = 0.0025 * (1.0 + math.exp(2.92135 * (height - 2.5)))
        assert np.all(got["valid"] == 1.0)
        assert abs(got["range"].mean() - height) < 4 * sigma / math.sqrt(n)
        assert got["range"].std() == pytest.approx(sigma, rel=0.02)
    far = np.array([[0.0, 0.0, 4.5], [0.0, 0.0, 0.02], [0.0, 0.0, 1.0]])
    upside_down = rotation.from_euler(np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0],
                                                [math.pi, 0.0, 0.0]]))  # fmt: skip
    got, _ = rf.measure(0, _truth(far, upside_down), None, np.zeros((3, 1)), ctx)
    assert got["valid"].tolist() == [0.0, 0.0, 0.0] and got["range"].tolist() == [0.0] * 3


def test_parameters_are_checked_and_the_kind_is_registered():
    assert sensor_class("rangefinder") is Rangefinder
    with pytest.raises(ValueError, match="max_range: must be > 0"):
        Rangefinder("tof", max_range=-1.0)
    with pytest.raises(ValueError, match="min_range: must be below max_range"):
        Rangefinder("tof", min_range=5.0)
    with pytest.raises(ValueError, match="range_max: unknown parameter"):
        Rangefinder("tof", range_max=5.0)
    with pytest.raises(ValueError, match="rate: must be a positive"):
        Rangefinder("tof", rate=0.0)
    with pytest.raises(ValueError, match="unknown sensor kind 'lidar'"):
        sensor_class("lidar")
    with pytest.raises(ValueError, match="cannot import 'nope'"):
        sensor_class("nope:Lidar")


def _fly(backend, compiled=None, parts=(), n=2, duration=0.3, **kw):
    sim = Simulator("cf2x_L250", n=n, dt=1 / 500, backend=backend, dtype="float64")
    sim.reset(pos=np.array([[0.0, 0.0, 1.0], [0.5, 0.0, 2.0]])[:n])
    gains = load_gains("cf2x_L250_geometric", drone=sim.drone, dt=sim.dt)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback to a slower loop
        return fly(sim, Hover((0.0, 0.0, 1.0)), control, gains, duration=duration, seed=5,
                   compiled=compiled, sensors=parts, ref_offset=[[0, 0, 0], [0.5, 0, 1.0]][:n],
                   **kw)  # fmt: skip


RUNNERS = [("numpy", False, "python"), ("jax", None, "scan")]
if native.available():
    RUNNERS.append(("native", None, "compiled"))


@pytest.mark.parametrize(("backend", "compiled", "loop"), RUNNERS)
def test_every_runner_reads_it_alike_at_its_rate(backend, compiled, loop):
    parts = (Rangefinder("tof"),)
    ref = _fly("numpy", False, parts)
    res = ref if backend == "numpy" else _fly(backend, compiled, parts)
    assert res.meta["loop"] == loop and res.meta["rates_hz"]["tof"] == 25.0
    assert res.meta["columns"][0]["key"] == "tof_range"
    r = res.log["tof_range"]
    np.testing.assert_allclose(r, ref.log["tof_range"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(r, res.log["pos"][..., 2], atol=0.02)  # level, over the floor
    # a new reading every 20 steps (25 Hz at 500 Hz), held in between
    changes = np.flatnonzero(np.any(np.diff(r, axis=0) != 0, axis=1)) + 1
    assert changes.tolist() == list(range(20, len(r), 20))
    # its own noise stream: adding it leaves the other drones' flight and readings unchanged
    plain = _fly(backend, compiled)
    np.testing.assert_array_equal(plain.log["pos"], res.log["pos"])
