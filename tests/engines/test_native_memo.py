"""The memo of traced steps (quadsim.engines.native_memo): a key that every input moves, none for
what it cannot encode, and a hit that flies exactly as the trace it stands for."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import quadsim.loop.closed_loop_native as cln
from quadsim.engines import native, native_memo
from quadsim.engines.sim import Simulator, Wind
from quadsim.engines.sim_native import traced_params
from quadsim.loop.control import control, load_gains
from quadsim.loop.flight import fly
from quadsim.loop.trajectories import Circle, Lemniscate
from quadsim.physics.wind import dryden_preset

needs_native = pytest.mark.skipif(not native.available(), reason="needs CasADi and a C compiler")
GAINS = load_gains("cf2x_L250_geometric", dt=0.002)
TRAJ = Lemniscate(size=1.0, period=8.0, center=(0.0, 0.0, 1.0))


def test_the_encoding_tells_apart_what_a_trace_depends_on():
    enc = native_memo.encode
    base = (GAINS, TRAJ, {"mass": np.array([0.03, 0.031])}, control, 0.002)
    assert enc(base) == enc((GAINS, TRAJ, {"mass": np.array([0.03, 0.031])}, control, 0.002))
    other = [
        (GAINS._replace(dt=0.004), *base[1:]),
        (GAINS, Lemniscate(size=1.5, period=8.0, center=(0.0, 0.0, 1.0)), *base[2:]),
        (GAINS, Circle(radius=1.0, speed=1.0), *base[2:]),
        (*base[:2], {"mass": np.array([0.03, 0.032])}, *base[3:]),
        (*base[:2], {"mass": np.array([0.03, 0.031], np.float32)}, *base[3:]),
        (*base[:2], {"mass": np.array([[0.03, 0.031]])}, *base[3:]),
        (*base[:3], functools.partial(control, gains=GAINS), 0.002),
        (*base[:4], 0.0020000000000000001),  # the same float: the same encoding
        (*base[:4], 0.002 * (1 + 2**-52)),
    ]
    codes = [enc(o) for o in other]
    assert codes[7] == enc(base)
    del codes[7]
    assert len({*codes, enc(base)}) == len(codes) + 1


@pytest.mark.parametrize("alien", [
    lambda s, r, g, c: (s, c),  # a function of this test module, not of quadsim
    object(),
    np.random.default_rng(0),
    {1, 2},
    np.array([object()]),
])  # fmt: skip
def test_no_key_for_what_it_cannot_encode(alien):
    with pytest.raises(ValueError, match="no canonical encoding"):
        native_memo.encode((GAINS, alien))
    assert native_memo.key(GAINS, alien) is None


def test_a_cycle_has_no_encoding():
    a: list = [1]
    a.append(a)
    with pytest.raises(ValueError, match="a cycle"):
        native_memo.encode(a)


@needs_native
def test_the_key_follows_the_environment(monkeypatch):
    k = native_memo.key(GAINS, TRAJ)
    assert k is not None and k == native_memo.key(GAINS, TRAJ)
    monkeypatch.setenv("QUADSIM_NO_TRACE_MEMO", "1")
    assert native_memo.key(GAINS, TRAJ) is None


def _flight(n=3):
    sim = Simulator("cf2x_L250", n=n, dt=0.002, backend="native", dtype="float64",
                    wind=Wind((1.0, 0.0, 0.0), dryden_preset("light", 1.0, 2.0)),
                    seed=4)  # fmt: skip
    r0 = TRAJ(0.0)
    sim.reset(pos=np.asarray(r0.pos) + np.arange(n)[:, None] * [0.0, 1.0, 0.0])
    return fly(sim, TRAJ, control, GAINS, duration=0.5, compiled=True, log_every=5)


@needs_native
def test_a_hit_skips_the_trace_and_flies_bitwise_alike(tmp_path, monkeypatch):
    """First flight: traced and remembered; the second: no trace, the same log to the bit; a
    damaged entry or a missing library: traced again."""
    monkeypatch.setenv("QUADSIM_CACHE_DIR", str(tmp_path))
    traced = []
    real = cln.closed_loop_step
    monkeypatch.setattr(cln, "closed_loop_step", lambda *a, **k: traced.append(1) or real(*a, **k))
    first = _flight()
    entries = list(tmp_path.glob("trace_*.pkl"))
    assert traced == [1] and len(entries) == 1
    second = _flight()
    assert traced == [1]
    for key in first.log:
        np.testing.assert_array_equal(second.log[key], first.log[key], err_msg=key)
    entries[0].write_bytes(b"not a pickle")
    third = _flight()
    assert traced == [1, 1]
    np.testing.assert_array_equal(third.log["pos"], first.log["pos"])
    for lib in tmp_path.glob("quadsim_*.so"):
        lib.unlink()
    _flight()
    assert traced == [1, 1, 1]


def _masses(masses, **kw):
    return Simulator("cf2x_L250", n=len(masses), dt=0.002, backend="numpy", dtype="float64",
                     params={"mass": masses}, **kw)  # fmt: skip


def test_the_drones_own_values_are_inputs_not_part_of_the_key():
    """Per-drone values that differ are the trace's inputs: other values, the same key; values
    all drones share are constants of the trace: another shared value, another key."""
    view = lambda sim: traced_params(sim.system, sim.model_params)  # noqa: E731
    enc = native_memo.encode
    spread, other = view(_masses([0.030, 0.031])), view(_masses([0.029, 0.033]))
    assert enc(spread) == enc(other)
    same, heavier = view(_masses([0.030, 0.030])), view(_masses([0.031, 0.031]))
    assert len({enc(spread), enc(same), enc(heavier)}) == 3


@needs_native
def test_a_hit_with_other_per_drone_values_flies_as_a_fresh_trace(tmp_path, monkeypatch):
    monkeypatch.setenv("QUADSIM_CACHE_DIR", str(tmp_path))

    def flight(masses):
        sim = Simulator("cf2x_L250", n=2, dt=0.002, backend="native", dtype="float64",
                        params={"mass": masses})  # fmt: skip
        sim.reset(pos=[[0.0, 0.0, 1.0], [0.0, 1.0, 1.0]])
        return fly(sim, TRAJ, control, GAINS, duration=0.4, compiled=True, log_every=5).log

    flight([0.030, 0.031])
    assert len(list(tmp_path.glob("trace_*.pkl"))) == 1
    hit = flight([0.028, 0.034])
    assert len(list(tmp_path.glob("trace_*.pkl"))) == 1  # the same entry served it
    monkeypatch.setenv("QUADSIM_NO_TRACE_MEMO", "1")
    fresh = flight([0.028, 0.034])
    for key in fresh:
        np.testing.assert_array_equal(hit[key], fresh[key], err_msg=key)
