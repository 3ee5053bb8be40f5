"""The memo of traced steps (quadsim.engines.native_memo): a key that every input moves, none for
what it cannot encode, and a hit that flies exactly as the trace it stands for; an entry is read
without unpickling anything (issue 40): a crafted one runs nothing and is a miss."""

from __future__ import annotations

import functools
import json
import pickle
from types import SimpleNamespace

import numpy as np
import pytest

import quadsim.loop.closed_loop_native as cln
from quadsim.engines import native, native_memo
from quadsim.engines.sim import Simulator, Wind
from quadsim.engines.sim_native import traced_params
from quadsim.loop.brain import BrainState, Held
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
    entries = list(tmp_path.glob("trace_*.memo"))
    assert traced == [1] and len(entries) == 1
    second = _flight()
    assert traced == [1]
    for key in first.log:
        np.testing.assert_array_equal(second.log[key], first.log[key], err_msg=key)
    entries[0].write_bytes(b"not a memo entry")
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
    assert len(list(tmp_path.glob("trace_*.memo"))) == 1
    hit = flight([0.028, 0.034])
    assert len(list(tmp_path.glob("trace_*.memo"))) == 1  # the same entry served it
    monkeypatch.setenv("QUADSIM_NO_TRACE_MEMO", "1")
    fresh = flight([0.028, 0.034])
    for key in fresh:
        np.testing.assert_array_equal(hit[key], fresh[key], err_msg=key)


LIB = "quadsim_" + "ab" * 16 + ".so"
KEY = "0123456789abcdef" * 2 + "01234567"


def _layout() -> tuple:
    """A closed loop's layout as :func:`quadsim.loop.closed_loop_native.compile_for_simulator`
    remembers it: the rows by field and a brain state template."""
    rows = {"pos": slice(0, 3), "quat": slice(3, 7), "step": slice(7, 8, None)}
    template = BrainState(j=np.float64(0.0), ctrl=(np.zeros(3), np.arange(4.0), None),
                          held=Held(cmd_rpm=np.full(4, 1.5e4)), est=None,
                          battery=np.array(0.9), parts=((np.ones((2, 3)), None),))  # fmt: skip
    return rows, [template, -0.0, 7, "x", True, float("nan")]


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray | np.generic):
        return (type(a) is type(b) and a.dtype == b.dtype and a.shape == b.shape
                and a.tobytes() == b.tobytes())  # fmt: skip
    if isinstance(a, tuple | list):
        return (type(a) is type(b) and len(a) == len(b)
                and all(_same(x, y) for x, y in zip(a, b, strict=True)))  # fmt: skip
    if isinstance(a, dict):
        return type(b) is dict and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, float):
        return type(b) is float and np.float64(a).tobytes() == np.float64(b).tobytes()
    return type(a) is type(b) and a == b


@pytest.fixture
def memo(tmp_path, monkeypatch):
    """A cache in ``tmp_path`` with a library file, a rollout standing for it, and the
    libraries the memo would load (recorded instead)."""
    monkeypatch.setenv("QUADSIM_CACHE_DIR", str(tmp_path))
    (tmp_path / LIB).write_bytes(b"a library")
    loaded = []
    monkeypatch.setattr(native_memo, "NativeRollout", lambda *a: loaded.append(a) or a)
    rollout = SimpleNamespace(path=tmp_path / LIB, dtype=np.dtype("float64"), lanes=4,
                              n_state=12, n_input=3, n_param=0,
                              noise=(("imu", 12, 0), ("dryden", 5, 1)))  # fmt: skip
    return tmp_path, rollout, loaded


def test_an_entry_holds_no_pickle_and_gives_back_the_layout(memo):
    """The entry is JSON and arrays (read with ``allow_pickle=False``); the layout comes back
    alike in every type, dtype and bit; a layout of another kind is not remembered."""
    root, rollout, loaded = memo
    layout = _layout()
    native_memo.save(KEY, rollout, layout)
    entry = root / f"trace_{KEY}.memo"
    assert native_memo.read_entry(entry)[0]["lib"] == LIB
    got = native_memo.load(KEY, threads=2)
    assert got is not None and _same(got[1], layout)
    assert loaded == [(root / LIB, (12, 3, 0), np.dtype("float64"), 2, False, loaded[0][5], 32,
                       (("imu", 12, 0), ("dryden", 5, 1)))]  # fmt: skip
    entry.unlink()
    for alien in (lambda: 0, SimpleNamespace(a=1), {1, 2}, np.array([None], dtype=object)):
        native_memo.save(KEY, rollout, (layout[0], alien))
        assert not entry.exists()


def _doc_with(change: dict) -> dict:
    doc = {"lib": LIB, "dtype": "<f8", "sizes": [12, 3, 0], "vbytes": 32, "noise": [],
           "layout": None}  # fmt: skip
    return {**doc, **change}


@pytest.mark.parametrize(
    "change",
    [{"lib": "../" + LIB}, {"lib": "/usr/lib/" + LIB}, {"lib": "libc.so.6"}, {"dtype": "|O"},
     {"sizes": [12, -3, 0]}, {"vbytes": "32"}, {"noise": [["imu", 12]]}, {"extra": 1},
     {"layout": {"t": "named", "cls": "os:system", "v": ["true"]}},
     {"layout": {"t": "named", "cls": "quadsim.app.cli:main", "v": []}},
     {"layout": {"t": "named", "cls": "quadsim.not_imported:X", "v": []}},
     {"layout": {"t": "nd", "i": 0}}, {"layout": {"t": "pickle", "v": []}}],
    ids=lambda c: next(iter(c)) + ":" + json.dumps(next(iter(c.values())))[:30],
)  # fmt: skip
def test_an_entry_that_does_not_fit_is_a_miss(memo, change):
    """A library elsewhere than the cache (or not named as quadsim names them) is never loaded;
    a class that is not one of quadsim's NamedTuples already imported is never looked up."""
    root, _, loaded = memo
    native_memo.write_entry(root / f"trace_{KEY}.memo", _doc_with(change), [])
    assert native_memo.load(KEY) is None
    if "lib" in change:
        assert loaded == []


def test_a_crafted_entry_runs_nothing_and_is_a_miss(memo, crafted):
    """A pickle where the entry was (``trace_<key>.pkl`` and ``.npz``, older quadsims' names, or
    the ``.memo``), or an object array in the entry: never unpickled, a miss, the marker
    absent."""
    root, _, loaded = memo
    payload, marker = crafted
    (root / f"trace_{KEY}.pkl").write_bytes(pickle.dumps({"lib": LIB, "x": payload}))
    assert native_memo.load(KEY) is None
    entry = root / f"trace_{KEY}.memo"
    for name in (f"trace_{KEY}.npz", entry.name):  # an older quadsim's name, and today's
        (root / name).write_bytes(pickle.dumps(payload))
        assert native_memo.load(KEY) is None
    # an entry whose array claims to hold objects, its bytes the pickle: refused unread
    raw = pickle.dumps(payload)
    head = {"doc": _doc_with({"layout": {"t": "nd", "i": 0}}),
            "arrays": [{"dtype": "|O", "shape": [len(raw) // 8]}]}  # fmt: skip
    entry.write_bytes(native_memo.MAGIC + json.dumps(head).encode() + b"\n" + raw)
    assert native_memo.load(KEY) is None
    assert not marker.exists() and loaded == []
    pickle.loads(raw)  # the payload is live: unpickled, it runs
    assert marker.exists()
