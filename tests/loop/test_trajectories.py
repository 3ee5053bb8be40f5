"""Tests for quadsim.loop.trajectories: analytic derivatives against finite differences, circle and
lemniscate geometry, min-snap interpolation, continuity, rest and optimality, batching,
backends (NumPy/array-API-strict/JAX/PyTorch, jit) and argument validation."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from quadsim.loop import trajectories as tr

WAYPOINTS = np.array([[0.0, 0.0, 1.0], [1.0, 0.5, 1.5], [2.0, -0.5, 1.0], [1.0, -1.0, 2.0]])
YAWS = np.array([0.0, 1.0, -0.5, 2.5])
DURATIONS = np.array([1.2, 0.8, 1.5])

CASES = {
    "hover": tr.Hover(pos=(1.0, -2.0, 3.0), yaw=0.4),
    "step_smooth": tr.Step((0, 0, 1), (1, -2, 2), t_step=0.5, rise_time=2.0, yaw=0.2, end_yaw=3.0),
    "circle_fixed": tr.Circle(radius=1.5, speed=2.0, center=(1, 2, 3), yaw=0.3, start_angle=0.7),
    "circle_tangent_cw": tr.Circle(radius=0.8, speed=-1.3, yaw_mode="tangent", yaw=0.1),
    "circle_ramp": tr.Circle(radius=1.0, speed=1.0, yaw_mode="tangent", ramp_time=1.5),
    "lemniscate": tr.Lemniscate(size=2.0, period=7.0, center=(0, 1, 2)),
    "lemniscate_tangent_ramp": tr.Lemniscate(size=1.0, speed=1.0, yaw_mode="tangent", ramp_time=2),
    "minsnap": tr.MinSnap(WAYPOINTS, DURATIONS, yaw=YAWS),
}
FIELDS = ("pos", "vel", "acc", "jerk", "snap")


def wrap(a: np.ndarray) -> np.ndarray:
    return np.angle(np.exp(1j * a))


@pytest.mark.parametrize("name", list(CASES))
def test_derivatives_match_central_differences(name: str, rng: np.random.Generator) -> None:
    traj = CASES[name]
    # random times, away from the ends of min-snap (where snap drops to the hold value 0)
    hi = traj.duration - 0.01 if math.isfinite(traj.duration) and traj.duration > 0 else 12.0
    t = rng.uniform(0.01, hi, 40)
    h = 1e-4
    ref, ahead, back = traj(t), traj(t + h), traj(t - h)
    for lower, upper in itertools.pairwise(FIELDS):
        fd = (getattr(ahead, lower) - getattr(back, lower)) / (2 * h)
        exact = getattr(ref, upper)
        scale = 1.0 + np.max(np.abs(exact))
        np.testing.assert_allclose(fd, exact, rtol=0, atol=1e-6 * scale, err_msg=upper)
    fd_yaw = wrap(ahead.yaw - back.yaw) / (2 * h)
    atol = 1e-6 * (1 + np.abs(ref.yaw_rate).max())
    np.testing.assert_allclose(fd_yaw, ref.yaw_rate, rtol=0, atol=atol)
    if getattr(traj, "yaw_mode", "fixed") == "tangent":  # wrapped to [-π, π)
        assert np.all((ref.yaw >= -math.pi) & (ref.yaw < math.pi))


def test_fd_check_detects_a_wrong_derivative(rng: np.random.Generator) -> None:
    """The tolerance of the finite-difference test is tight enough to see a 1e-4 error."""
    traj = CASES["circle_fixed"]
    t, h = rng.uniform(0, 5, 20), 1e-4
    fd = (traj(t + h).acc - traj(t - h).acc) / (2 * h)
    assert np.max(np.abs(fd - traj(t).jerk * (1 + 1e-4))) > 1e-6 * (1 + np.abs(fd).max())


def test_circle_radius_speed_and_acceleration_are_exact(rng: np.random.Generator) -> None:
    c = tr.Circle(radius=1.0, speed=1.0, center=(0.5, -0.5, 1.0))
    t = rng.uniform(0.0, 50.0, 200)
    ref = c(t)
    off = ref.pos - np.array(c.center)
    np.testing.assert_allclose(np.linalg.norm(off[:, :2], axis=1), 1.0, rtol=1e-14)
    np.testing.assert_allclose(off[:, 2], 0.0, atol=0)
    np.testing.assert_allclose(np.linalg.norm(ref.vel, axis=1), 1.0, rtol=1e-14)
    np.testing.assert_allclose(np.linalg.norm(ref.acc, axis=1), 1.0, rtol=1e-14)  # v²/R
    np.testing.assert_allclose(ref.acc, -off, atol=1e-14)  # centripetal
    np.testing.assert_allclose(np.sum(ref.vel * off, axis=1), 0.0, atol=1e-14)
    np.testing.assert_allclose(c(0.0).pos, [1.5, -0.5, 1.0], atol=1e-15)
    np.testing.assert_allclose(c(0.0).vel, [0.0, 1.0, 0.0], atol=1e-15)  # counter-clockwise
    np.testing.assert_allclose(c(t + c.period).pos, ref.pos, atol=1e-12)
    assert c.period == pytest.approx(2 * math.pi) and c.duration == math.inf


def test_circle_tangent_yaw_faces_velocity(rng: np.random.Generator) -> None:
    for speed in (2.0, -2.0):
        ref = tr.Circle(radius=2.0, speed=speed, yaw_mode="tangent")(rng.uniform(0, 20, 50))
        heading = np.arctan2(ref.vel[:, 1], ref.vel[:, 0])
        np.testing.assert_allclose(wrap(ref.yaw - heading), 0.0, atol=1e-12)
        np.testing.assert_allclose(ref.yaw_rate, speed / 2.0)


def test_circle_ramp_starts_at_rest_and_reaches_speed() -> None:
    c = tr.Circle(radius=1.0, speed=1.0, ramp_time=2.0, start_angle=0.5)
    start = c(np.array([-1.0, 0.0]))
    for f in FIELDS[1:]:
        np.testing.assert_allclose(getattr(start, f), 0.0, atol=1e-15)
    np.testing.assert_allclose(start.pos[:, :2], [[math.cos(0.5), math.sin(0.5)]] * 2)
    t = np.linspace(0.0, 10.0, 201)
    ref = c(t)
    speed = np.linalg.norm(ref.vel, axis=1)
    np.testing.assert_allclose(np.linalg.norm(ref.pos[:, :2], axis=1), 1.0, rtol=1e-14)
    assert np.all(np.diff(speed[t <= 2.0]) > 0)  # monotone ramp
    np.testing.assert_allclose(speed[t >= 2.0], 1.0, rtol=1e-14)
    # after the ramp it is the constant-speed circle delayed by half the ramp time
    np.testing.assert_allclose(
        c(t[t >= 2.0]).pos, tr.Circle(start_angle=0.5)(t[t >= 2.0] - 1.0).pos, atol=1e-12
    )


def test_lemniscate_center_period_extent_and_mean_speed() -> None:
    lem = tr.Lemniscate(size=2.0, speed=1.5, center=(1.0, 2.0, 3.0))
    P = lem.period
    for t0 in (0.0, P / 2, P, 3 * P):
        np.testing.assert_allclose(lem(t0).pos, [1.0, 2.0, 3.0], atol=1e-12)
    t = np.linspace(0.0, P, 4001)
    ref = lem(t)
    for f in ("pos", "vel", "acc", "jerk", "snap"):
        np.testing.assert_allclose(getattr(lem(t + P), f), getattr(ref, f), atol=1e-10)
    off = ref.pos - np.array([1.0, 2.0, 3.0])
    assert off[:, 0].max() == pytest.approx(2.0, abs=1e-6)
    assert off[:, 1].max() == pytest.approx(1.0, abs=1e-6)
    np.testing.assert_allclose(off[:, 2], 0.0, atol=0)
    # Gerono: x⁴ = s² (x² - y²) ... with x = s sin θ, y = s sin θ cos θ: y² = x² (1 - x²/s²)
    np.testing.assert_allclose(
        off[:, 1] ** 2, off[:, 0] ** 2 * (1 - off[:, 0] ** 2 / 4.0), atol=1e-12
    )
    speed = np.linalg.norm(ref.vel, axis=1)
    mean_speed = np.trapezoid(speed, t) / P
    assert mean_speed == pytest.approx(1.5, rel=1e-6)
    assert tr.gerono_perimeter(1.0) == pytest.approx(6.097223470104915, rel=1e-12)
    same = tr.Lemniscate(size=2.0, period=P, center=(1.0, 2.0, 3.0))
    assert same.speed == pytest.approx(1.5, rel=1e-12)


def test_lemniscate_tangent_yaw_faces_velocity(rng: np.random.Generator) -> None:
    lem = tr.Lemniscate(size=1.0, period=6.0, yaw_mode="tangent", ramp_time=1.0)
    ref = lem(rng.uniform(1.1, 20.0, 100))
    heading = np.arctan2(ref.vel[:, 1], ref.vel[:, 0])
    np.testing.assert_allclose(wrap(ref.yaw - heading), 0.0, atol=1e-9)
    assert lem(0.0).yaw == pytest.approx(math.pi / 4) and lem(0.0).yaw_rate == 0.0


def test_step_discontinuous_and_smooth() -> None:
    s = tr.Step((0, 0, 1), (2, 0, 1), t_step=1.0)
    ref = s(np.array([0.0, 0.999, 1.0, 5.0]))
    np.testing.assert_allclose(ref.pos[:, 0], [0, 0, 2, 2])
    for f in FIELDS[1:]:
        assert np.all(getattr(ref, f) == 0.0)
    sm = tr.Step((0, 0, 1), (2, 0, 1), t_step=1.0, rise_time=2.0, end_yaw=1.0)
    assert sm.duration == 3.0
    ref = sm(np.array([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(ref.pos[:, 0], [0, 1, 2], atol=1e-14)
    np.testing.assert_allclose(ref.yaw, [0, 0.5, 1], atol=1e-14)
    for f in FIELDS[1:]:
        np.testing.assert_allclose(getattr(ref, f)[[0, 2]], 0.0, atol=1e-13)  # C⁴: rest at ends
    # mean velocity of the transition is Δ/rise_time
    t = np.linspace(1.0, 3.0, 2001)
    assert np.trapezoid(sm(t).vel[:, 0], t) == pytest.approx(2.0, rel=1e-9)


# --------------------------------------------------------------------------- min-snap


def test_minsnap_interpolates_and_rests() -> None:
    m = tr.MinSnap(WAYPOINTS, DURATIONS, yaw=YAWS)
    np.testing.assert_allclose(m.knots, [0.0, 1.2, 2.0, 3.5])
    assert m.duration == pytest.approx(3.5)
    ref = m(m.knots)
    np.testing.assert_allclose(ref.pos, WAYPOINTS, atol=1e-12)
    np.testing.assert_allclose(ref.yaw, YAWS, atol=1e-12)
    for t in (0.0, m.duration):
        r = m(t)
        for f in ("vel", "acc", "jerk"):
            np.testing.assert_allclose(getattr(r, f), 0.0, atol=1e-10)
        assert r.yaw_rate == pytest.approx(0.0, abs=1e-10)
    assert np.max(np.abs(m(m.duration).snap)) > 1e-3  # snap is free at the ends
    out = m(np.array([-2.0, -1e-9, 3.5 + 1e-9, 10.0]))
    np.testing.assert_allclose(out.pos, WAYPOINTS[[0, 0, -1, -1]], atol=1e-12)
    np.testing.assert_allclose(out.yaw, YAWS[[0, 0, -1, -1]], atol=1e-12)
    for f in FIELDS[1:]:
        assert np.all(getattr(out, f) == 0.0)


def test_minsnap_continuity_at_interior_knots() -> None:
    m = tr.MinSnap(WAYPOINTS, DURATIONS, yaw=YAWS)
    eps = 1e-9
    for tk in m.knots[1:-1]:
        left, right = np.array([tk - eps]), np.array([tk + eps])
        for k in range(7):
            a, b = m.derivative(left, k), m.derivative(right, k)
            scale = 1.0 + np.abs(a).max()
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-6 * scale, err_msg=f"order {k}")
        # the 7th derivative jumps: the check above can see a discontinuity
        j7 = np.abs(m.derivative(left, 7) - m.derivative(right, 7)).max()
        assert j7 > 1e-3 * (1.0 + np.abs(m.derivative(left, 7)).max())


def test_minsnap_single_segment_is_the_rest_to_rest_polynomial() -> None:
    a, b, T = np.array([0.0, 1.0, 2.0]), np.array([3.0, -1.0, 2.5]), 2.0
    m = tr.MinSnap(np.stack([a, b]), [T])
    t = np.linspace(0, T, 11)
    tau = t / T
    shape = 35 * tau**4 - 84 * tau**5 + 70 * tau**6 - 20 * tau**7
    np.testing.assert_allclose(m(t).pos, a + (b - a) * shape[:, None], atol=1e-12)


def _gauss_cost(traj: tr.MinSnap, knots: np.ndarray, snap_fn) -> float:
    """∫‖snap‖² dt by 8-point Gauss-Legendre per segment (exact for degree <= 15)."""
    x, w = np.polynomial.legendre.leggauss(8)
    total = 0.0
    for t0, t1 in itertools.pairwise(knots):
        t = 0.5 * (t1 - t0) * (x + 1) + t0
        total += 0.5 * (t1 - t0) * np.sum(w * np.sum(snap_fn(t) ** 2, axis=-1))
    return total


def _hermite_perturbation(knots: np.ndarray, rng: np.random.Generator):
    """A random feasible direction: C³ piecewise degree-7 q with q = 0 at every knot and
    q' = q'' = q''' = 0 at both ends (interior derivatives 1-3 random). Returns snap(t)."""
    K = len(knots)
    d = np.zeros((K, 4, 3))  # derivative orders 0..3 at each knot, 3 axes
    d[1:-1, 1:] = rng.normal(size=(K - 2, 3, 3))
    coefs = []
    for i in range(K - 1):
        T = knots[i + 1] - knots[i]
        A = np.zeros((8, 8))
        for k in range(4):
            for j in range(k, 8):
                c = math.factorial(j) / math.factorial(j - k)
                A[k, j] = c * (1.0 if j == k else 0.0)
                A[4 + k, j] = c * T ** (j - k)
        coefs.append(np.linalg.solve(A, np.concatenate([d[i], d[i + 1]])))

    def snap(t: np.ndarray) -> np.ndarray:
        i = np.clip(np.searchsorted(knots, t, side="right") - 1, 0, K - 2)
        tau = t - knots[i]
        out = np.zeros((len(t), 3))
        for j in range(4, 8):
            c = math.factorial(j) / math.factorial(j - 4)
            out += c * tau[:, None] ** (j - 4) * np.stack([coefs[n][j] for n in i])
        return out

    return snap


def test_minsnap_is_optimal(rng: np.random.Generator) -> None:
    """J(x + εq) = J(x) + ε² J(q) for every feasible q: the cross term vanishes at the optimum."""
    m = tr.MinSnap(WAYPOINTS, DURATIONS)
    J = _gauss_cost(m, m.knots, lambda t: m(t).snap)
    assert m.snap_cost() == pytest.approx(J, rel=1e-10)
    for _ in range(3):
        q = _hermite_perturbation(m.knots, rng)
        Jq = _gauss_cost(m, m.knots, q)
        for eps in (0.1, -0.1, 0.01):
            Jp = _gauss_cost(m, m.knots, lambda t, e=eps, q=q: m(t).snap + e * q(t))
            assert Jp > J
            assert Jp - J == pytest.approx(eps**2 * Jq, rel=1e-6)


def test_minsnap_beats_other_interpolants() -> None:
    """Lower snap cost than the C⁴ rest-to-rest smoothstep chain through the same points/times."""
    m = tr.MinSnap(WAYPOINTS, DURATIONS)
    chain = [
        tr.Step(WAYPOINTS[i], WAYPOINTS[i + 1], t_step=m.knots[i], rise_time=DURATIONS[i])
        for i in range(len(DURATIONS))
    ]

    def chain_snap(t: np.ndarray) -> np.ndarray:
        return sum(s(t).snap for s in chain)

    assert m.snap_cost() < 0.9 * _gauss_cost(m, m.knots, chain_snap)


def test_time_allocation() -> None:
    lengths = np.linalg.norm(np.diff(WAYPOINTS, axis=0), axis=1)
    np.testing.assert_allclose(tr.allocate_times(WAYPOINTS, speed=2.0), lengths / 2.0)
    d = tr.allocate_times(WAYPOINTS, total_time=6.0)
    assert d.sum() == pytest.approx(6.0) and np.allclose(d / lengths, d[0] / lengths[0])
    m = tr.MinSnap(WAYPOINTS, total_time=6.0)
    assert m.duration == pytest.approx(6.0)
    np.testing.assert_allclose(m(m.knots).pos, WAYPOINTS, atol=1e-12)
    assert tr.MinSnap(WAYPOINTS, speed=1.0).duration == pytest.approx(lengths.sum())


# --------------------------------------------------------------------------- batching/backends


@pytest.mark.parametrize("name", list(CASES))
def test_batched_time(name: str, rng: np.random.Generator) -> None:
    traj = CASES[name]
    t = rng.uniform(-1.0, 6.0, (5, 7))
    ref = traj(t)
    for f in FIELDS:
        assert getattr(ref, f).shape == (5, 7, 3)
    assert ref.yaw.shape == (5, 7) and ref.yaw_rate.shape == (5, 7)
    one = traj(float(t[2, 3]))
    assert one.pos.shape == (3,) and np.shape(one.yaw) == ()
    for a, b in zip(one, ref, strict=True):
        np.testing.assert_allclose(a, b[2, 3], rtol=1e-14, atol=1e-14)
    ints = traj(np.arange(3))
    np.testing.assert_allclose(ints.pos, traj(np.arange(3.0)).pos)


@pytest.mark.parametrize("name", list(CASES))
def test_backends_agree_with_numpy(name: str, xp, rng: np.random.Generator) -> None:
    traj = CASES[name]
    t = rng.uniform(0.0, 3.4, (4, 3))
    want = traj(t)
    got = traj(xp.asarray(t))
    for f, a, b in zip(tr.Reference._fields, got, want, strict=True):
        assert tuple(a.shape) == b.shape, f
        scale = 1.0 + np.abs(b).max()
        np.testing.assert_allclose(xp.numpy(a), b, rtol=0, atol=50 * xp.rtol * scale, err_msg=f)


@pytest.mark.parametrize(
    "name", ["circle_ramp", "lemniscate_tangent_ramp", "minsnap", "step_smooth"]
)
def test_jax_jit(name: str) -> None:
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    traj = CASES[name]
    t = np.linspace(0.0, 3.0, 13)
    got = jax.jit(traj)(jax.numpy.asarray(t))
    for a, b in zip(got, traj(t), strict=True):
        np.testing.assert_allclose(np.asarray(a), b, rtol=1e-12, atol=1e-12)


def test_torch_autograd_velocity() -> None:
    torch = pytest.importorskip("torch")
    t = torch.tensor([0.3, 1.7, 2.9], dtype=torch.float64, requires_grad=True)
    for traj in (CASES["circle_ramp"], CASES["lemniscate"], CASES["minsnap"]):
        ref = traj(t)
        grad = torch.autograd.grad(ref.pos[:, 0].sum(), t)[0]
        np.testing.assert_allclose(grad.numpy(), ref.vel[:, 0].detach().numpy(), rtol=1e-12)


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: tr.MinSnap([[0, 0, 1]], [1.0]), "K >= 2"),
        (lambda: tr.MinSnap(np.zeros((3, 2)), [1.0, 1.0]), r"waypoints must have shape \(K, 3\)"),
        (lambda: tr.MinSnap(WAYPOINTS, [1.0, 0.0, 1.0]), "durations must be > 0"),
        (lambda: tr.MinSnap(WAYPOINTS, [1.0, -1.0, 1.0]), "durations must be > 0"),
        (lambda: tr.MinSnap(WAYPOINTS, [1.0, 1.0]), r"durations must have shape \(3,\)"),
        (lambda: tr.MinSnap(WAYPOINTS, [1.0, np.nan, 1.0]), "durations must be finite"),
        (lambda: tr.MinSnap(WAYPOINTS * np.nan, DURATIONS), "waypoints must be finite"),
        (lambda: tr.MinSnap(WAYPOINTS, DURATIONS, yaw=[0.0, 1.0]), r"yaw must have shape \(4,\)"),
        (lambda: tr.MinSnap(WAYPOINTS, DURATIONS, yaw=math.nan), "yaw must be a finite"),
        (lambda: tr.MinSnap(WAYPOINTS), "give durations, speed or total_time"),
        (lambda: tr.MinSnap(WAYPOINTS, DURATIONS, speed=1.0), "not both"),
        (lambda: tr.MinSnap(WAYPOINTS, speed=-1.0), "speed must be a finite number > 0"),
        (lambda: tr.MinSnap([[0, 0, 0], [0, 0, 0]], speed=1.0), "coincide"),
        (lambda: tr.allocate_times(WAYPOINTS, speed=1.0, total_time=2.0), "exactly one"),
        (lambda: tr.Circle(radius=0.0), "Circle: radius must be a finite number > 0; got 0.0"),
        (lambda: tr.Circle(speed=math.inf), "Circle: speed must be a finite number"),
        (lambda: tr.Circle(yaw_mode="spin"), "yaw_mode must be one of"),
        (lambda: tr.Circle(center=(0, 0)), r"center must have shape \(3,\)"),
        (lambda: tr.Circle(ramp_time=-1.0), "ramp_time must be a finite number >= 0"),
        (lambda: tr.Lemniscate(period=5.0, speed=1.0), "exactly one of period and speed"),
        (lambda: tr.Lemniscate(), "exactly one of period and speed"),
        (lambda: tr.Lemniscate(period=-5.0), "period must be a finite number > 0"),
        (lambda: tr.Lemniscate(size=math.nan, period=5.0), "size must be"),
        (lambda: tr.Hover(pos=(0, math.nan, 1)), "Hover: pos must be finite"),
        (lambda: tr.Step(t_step="soon"), "t_step must be a finite number"),
        (lambda: tr.Step(rise_time=-0.1), "rise_time must be"),
        (lambda: CASES["minsnap"].derivative(0.0, 8), "order must be an integer in 0..7"),
    ],
)
def test_bad_arguments(make, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        make()


def test_trajectories_are_immutable() -> None:
    with pytest.raises(AttributeError):
        CASES["circle_fixed"].radius = 2.0  # type: ignore[misc]
    with pytest.raises(ValueError):
        CASES["minsnap"].waypoints[0, 0] = 5.0
    assert tr.Circle() == tr.Circle(1, 1.0, [0, 0, 1]) and hash(tr.Circle()) == hash(tr.Circle())
