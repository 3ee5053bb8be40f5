"""Guarded evaluation in the generated C (quadsim.engines.native_schedule): blocks of
instructions that only selected-away values need run only when a lane needs them, and the
results equal CasADi's own evaluation lane by lane, whichever lanes select what."""

from __future__ import annotations

import numpy as np
import pytest

from quadsim.engines import native
from quadsim.engines import native_schedule as ns

if not native.available():
    pytest.skip("no C compiler for quadsim.engines.native", allow_module_level=True)

cs = pytest.importorskip("casadi")


def _heavy(x: object, k: int) -> object:
    """A chain of ``k`` transcendental steps (enough instructions to form a block)."""
    y = x
    for i in range(k):
        y = cs.sin(y * 1.3 + i) + cs.cos(y) * 0.5
    return y


def _multirate() -> object:
    """A step with a branch taken on a period (a sensor update), a nested select and a select
    on a condition's negation, as the closed loop has them; x = [s, a, b, c, d, e]."""
    x, u = cs.SX.sym("x", 6), cs.SX.sym("u", 1)
    s = x[0]
    tick = cs.fmod(s, 5) == 0
    inner = x[5] > 0.0  # per lane
    upd = cs.if_else(tick, _heavy(x[1], 12), x[1])  # an update every 5th step
    nested = cs.if_else(tick, cs.if_else(inner, _heavy(x[2], 10), x[2] * 0.5), x[2])
    both = cs.if_else(cs.logic_not(inner), _heavy(x[3], 10), x[3] + 0.1)
    boom = cs.if_else(tick, x[4] / (s - s), x[4] + 1.0)  # the unselected value is inf/NaN
    y = cs.vertcat(s + 1, upd, nested, both, cs.if_else(cs.fabs(boom) < 1e6, boom, 0.0),
                   x[5] + u[0])  # fmt: skip
    return cs.Function("multirate", [x, u], [y])


def _cycle() -> object:
    """Guards that read each other both ways: ``u`` (needed where ``c1``) feeds ``v`` (needed
    where ``c1`` and ``c2``), whose select on ``c2`` is needed where ``c1`` again."""
    x, uu = cs.SX.sym("x", 6), cs.SX.sym("u", 1)
    c1 = cs.fmod(x[0], 3) == 0
    c2 = x[5] > 0.0
    u = _heavy(x[1], 12)
    v = _heavy(u * 0.7, 12)
    inner = cs.if_else(c2, v, x[2])
    outer = cs.if_else(c1, _heavy(inner + u, 12), x[3])
    y = cs.vertcat(x[0] + 1, outer, x[2], x[3] * 0.9 + inner * 0.0 + 0.1, x[4], x[5] + uu[0])
    return cs.Function("cycle", [x, uu], [y])


def test_blocks_are_formed_and_every_instruction_scheduled_once():
    F = _multirate()
    blocks, deps = ns.guarded_schedule(F)
    order = [k for _, ks in blocks for k in ks]
    assert len(order) == len(set(order))
    at = {k: i for i, k in enumerate(order)}
    for k in order:  # every input computed before it is read
        assert all(at[a] < at[k] for a in deps[k])
    guarded = [(g, ks) for g, ks in blocks if g is not ns.ALWAYS]
    assert sum(len(ks) for _, ks in guarded) > 60  # the heavy branches are guarded
    for g, ks in guarded:  # conditions are computed (unguarded) before the block tests them
        for c in {c for t in g for c in t}:
            assert c in at and at[c] < at[ks[0]]
    # the nested branch is guarded by the conjunction (tick and inner), not by tick alone
    assert any(len(t) == 2 for g, _ in guarded for t in g)


@pytest.mark.parametrize("make", [_multirate, _cycle])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_guarded_rollout_equals_casadi_lane_by_lane(make, dtype, tmp_path):
    F = make()
    n, steps = 21, 13  # lanes with mixed branch choices, a padded last vector
    rng = np.random.default_rng(3)
    X = rng.uniform(-1, 1, (6, n))
    X[0] = rng.integers(0, 5, n)  # each lane at its own phase: blocks run for some lanes only
    X[5, ::2] *= -1
    U = rng.uniform(-0.2, 0.2, (1, n))
    roll = native.compile_rollout(F, dtype, cache_dir=tmp_path)
    got, _ = roll(X.astype(dtype), U.astype(dtype), steps=steps)
    want = X.copy()
    Fm = F.map(n)
    for _ in range(steps):
        want = np.asarray(Fm(want, U))
    tol = 1e-10 if dtype == np.float64 else 3e-4
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    src = roll.source
    assert "any_nz(" in src and "if ((" in src
    blocks, deps = ns.guarded_schedule(F)
    at = {k: i for i, k in enumerate(k for _, ks in blocks for k in ks)}
    assert all(at[a] < at[k] for k in at for a in deps[k])  # every input computed first


def test_a_condition_computed_from_a_selected_value_is_not_tested_early():
    """A guard's condition that depends on the guarded value itself: that value is evaluated
    always (it must exist before the condition does)."""
    x = cs.SX.sym("x", 2)
    v = _heavy(x[0], 10)
    sel = cs.if_else(x[1] > 0, v, 0.0)
    c2 = sel > 0.1  # computed from the selected value
    y = cs.if_else(c2, _heavy(sel, 10), sel)
    F = cs.Function("dep", [x, cs.SX.sym("u", 0)], [cs.vertcat(y, x[1])])
    blocks, _ = ns.guarded_schedule(F)
    order = [k for _, ks in blocks for k in ks]
    at = {k: i for i, k in enumerate(order)}
    for g, ks in blocks:
        if g is not ns.ALWAYS:
            for c in {c for t in g for c in t}:
                assert at[c] < at[ks[0]]
