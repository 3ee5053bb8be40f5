"""Minimum-snap piecewise-polynomial references through waypoints.

**Minimum snap** through waypoints ``w₀ … w_{K-1}`` at knot times ``t₀ = 0 < t₁ < … < t_{K-1}
= T`` (``T_i = t_{i+1} - t_i``): each coordinate ``x`` (and yaw) minimises
``J = ∫₀^T (x⁽⁴⁾)² dt`` subject to ``x(t_i) = w_i`` and rest at both ends,
``x' = x'' = x''' = 0`` at ``0`` and ``T``. The Euler-Lagrange equation ``x⁽⁸⁾ = 0`` makes each
segment a 7th-order polynomial; the natural conditions at the (free-derivative) interior knots
make ``x', …, x⁽⁶⁾`` continuous there (``x⁽⁷⁾`` jumps). That is ``2M + 6 + 6(M-1) = 8M``
linear equations for the ``8M`` coefficients of ``M = K - 1`` segments: the closed-form
optimum, one sparse solve (SciPy SuperLU) for all coordinates at once. Segment ``i`` is stored
in normalised time ``s = (t - t_i)/T_i`` as ``Σ_j c_ij s^j``. Outside ``[0, T]`` the reference
holds the end point at rest.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...physics._array import as_like
from .reference import Reference, as_time, finite_array, finite_number, set_frozen


def allocate_times(
    waypoints: Any, *, speed: float | None = None, total_time: float | None = None
) -> np.ndarray:
    """Segment durations proportional to the segment lengths.

    Args:
        waypoints: Waypoints, shape (K, 3) [m], K >= 2, consecutive ones distinct.
        speed: Nominal mean speed [m/s]: ``T_i = |w_{i+1} - w_i| / speed``.
        total_time: Total time [s]: ``T_i = total_time |w_{i+1} - w_i| / Σ|Δw|``.
            Give exactly one of ``speed`` and ``total_time``.

    Returns:
        Durations, shape (K-1,) [s]. (Min-snap starts and ends at rest, so its peak speed is
        above the mean speed.)
    """
    o = "allocate_times"
    w = finite_array(o, "waypoints", waypoints, (None, 3))
    if w.shape[0] < 2:
        raise ValueError(f"{o}: waypoints must have shape (K, 3) with K >= 2; got {w.shape}")
    if (speed is None) == (total_time is None):
        raise ValueError(
            f"{o}: give exactly one of speed and total_time; got speed={speed!r}, "
            f"total_time={total_time!r}"
        )
    lengths = np.linalg.norm(np.diff(w, axis=0), axis=1)
    if np.any(lengths == 0.0):
        i = int(np.argmin(lengths))
        raise ValueError(
            f"{o}: waypoints {i} and {i + 1} coincide, so length-based allocation gives a zero "
            "duration; pass durations explicitly"
        )
    if speed is not None:
        return lengths / finite_number(o, "speed", speed, positive=True)
    return lengths * (finite_number(o, "total_time", total_time, positive=True) / lengths.sum())


def _min_snap_coeffs(durations: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Normalised-time coefficients (M, 8, m) of the min-snap spline through ``values`` (K, m)."""
    M = durations.shape[0]
    fact = [math.factorial(j) for j in range(8)]
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    rhs = np.zeros((8 * M, values.shape[1]))
    r = 0

    def put(seg: int, k: int, at_end: bool, scale: float) -> None:
        # k-th derivative w.r.t. s at s = 1 (sum over j >= k) or s = 0 (only j = k).
        for j in range(k, 8) if at_end else (k,):
            rows.append(r)
            cols.append(8 * seg + j)
            vals.append(scale * fact[j] / fact[j - k])

    for i in range(M):
        put(i, 0, False, 1.0)
        rhs[r] = values[i]
        r += 1
        put(i, 0, True, 1.0)
        rhs[r] = values[i + 1]
        r += 1
    for k in (1, 2, 3):  # rest at both ends (rows scaled by T^k)
        put(0, k, False, 1.0)
        r += 1
        put(M - 1, k, True, 1.0)
        r += 1
    for i in range(M - 1):  # continuity of derivatives 1-6 at interior knots
        h = math.sqrt(durations[i] * durations[i + 1])
        for k in range(1, 7):
            put(i, k, True, (h / durations[i]) ** k)
            put(i + 1, k, False, -((h / durations[i + 1]) ** k))
            r += 1
    import scipy.sparse as sp  # here, not at import: only a min-snap solve needs SciPy
    import scipy.sparse.linalg as spla

    A = sp.csc_matrix((vals, (rows, cols)), shape=(8 * M, 8 * M))
    sol = spla.splu(A).solve(rhs)
    if not np.all(np.isfinite(sol)):
        raise ValueError("MinSnap: the linear system is singular (check the durations)")
    return sol.reshape(M, 8, values.shape[1])


@dataclass(frozen=True, eq=False)
class MinSnap:
    """Minimum-snap piecewise 7th-order polynomial through waypoints, rest to rest.

    Solves the unconstrained closed-form problem of the module docstring (one sparse solve,
    no QP). Durations are given, or allocated proportionally to the segment lengths from a
    nominal ``speed`` or a ``total_time`` (:func:`allocate_times`). Yaw is interpolated by the
    same min-snap spline through ``yaw`` waypoints taken as given (no wrapping: unwrap them,
    e.g. with ``numpy.unwrap``, for shortest turns). Before 0 the reference holds the first
    waypoint and after ``duration`` the last, at rest.

    Attributes:
        waypoints: Waypoints, shape (K, 3) [m], K >= 2.
        durations: Segment durations, shape (K-1,) [s], > 0 (filled in when allocated).
        speed: Nominal mean speed for the allocation [m/s] (keyword only).
        total_time: Total time for the allocation [s] (keyword only).
        yaw: Heading waypoints, shape (K,) [rad], or one number for a constant heading.
        knots: Waypoint times, shape (K,) [s], from 0 to ``duration``.
        duration: Total time T [s].
        coeffs: Coefficients, shape (K-1, 8, 4): segment, power of ``s = (t - t_i)/T_i``,
            column (x, y, z, yaw).
    """

    waypoints: Any
    durations: Any = None
    speed: float | None = field(default=None, kw_only=True)
    total_time: float | None = field(default=None, kw_only=True)
    yaw: Any = field(default=0.0, kw_only=True)
    knots: np.ndarray = field(init=False, repr=False)
    duration: float = field(init=False)
    coeffs: np.ndarray = field(init=False, repr=False)
    _table: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        o = "MinSnap"
        w = finite_array(o, "waypoints", self.waypoints, (None, 3))
        K = w.shape[0]
        if K < 2:
            raise ValueError(f"{o}: waypoints must have shape (K, 3) with K >= 2; got {w.shape}")
        if self.durations is None:
            if self.speed is None and self.total_time is None:
                raise ValueError(f"{o}: give durations, speed or total_time; got none of them")
            d = allocate_times(w, speed=self.speed, total_time=self.total_time)
        else:
            if self.speed is not None or self.total_time is not None:
                raise ValueError(
                    f"{o}: give durations or (speed or total_time), not both; got "
                    f"speed={self.speed!r}, total_time={self.total_time!r} with durations"
                )
            d = np.array(
                finite_array(
                    o, "durations", self.durations, (K - 1,), f" (K-1 for K={K} waypoints)"
                )
            )
            if np.any(d <= 0.0):
                raise ValueError(f"{o}: durations must be > 0; got {d.tolist()}")
        d.setflags(write=False)
        if np.ndim(self.yaw) == 0:
            yaw = np.full(K, finite_number(o, "yaw", self.yaw))
            yaw.setflags(write=False)
        else:
            yaw = finite_array(o, "yaw", self.yaw, (K,), " (one per waypoint)")
        coeffs = _min_snap_coeffs(d, np.concatenate([w, yaw[:, None]], axis=1))
        # table[i, k, p, :] = d^k/dt^k coefficient of s^p: c_{p+k} (p+k)!/p! / T_i^k
        table = np.zeros((K - 1, 8, 8, 4))
        for k in range(8):
            for p in range(8 - k):
                scale = math.factorial(p + k) / math.factorial(p) / d[:, None] ** k
                table[:, k, p, :] = coeffs[:, p + k, :] * scale
        knots = np.concatenate([[0.0], np.cumsum(d)])
        for a in (coeffs, table, knots):
            a.setflags(write=False)
        set_frozen(
            self,
            waypoints=w,
            durations=d,
            yaw=yaw,
            knots=knots,
            duration=float(knots[-1]),
            coeffs=coeffs,
            _table=table,
        )

    def derivative(self, t: Any, order: int) -> Any:
        """``order``-th time derivative (0-7) of (x, y, z, yaw) at ``t`` [s], shape (..., 4).

        Units m/sᵏ and rad/sᵏ. Zero outside [0, T] for ``order >= 1``. At an interior knot the
        segment that starts there is used (only ``order = 7`` differs between the two sides).
        """
        if order not in range(8):
            raise ValueError(f"MinSnap.derivative: order must be an integer in 0..7; got {order!r}")
        return self._evaluate(t, (order,))[0]

    def snap_cost(self) -> float:
        """Exact cost ``∫₀^T ‖p⁽⁴⁾‖² dt`` of the position (x, y, z) [m² s⁻⁷]."""
        p = np.arange(8)
        hilbert = 1.0 / (p[:, None] + p[None, :] + 1.0)
        a = self._table[:, 4, :, :3]  # (M, 8, 3)
        per_seg = np.einsum("ipa,pq,iqa->i", a, hilbert, a)
        return float(np.sum(per_seg * self.durations))

    def _evaluate(self, t: Any, orders: Sequence[int]) -> list[Any]:
        xp, t = as_time(t)
        shape = tuple(t.shape)
        flat = xp.reshape(t, (-1,))
        M = self.durations.shape[0]
        tc = xp.clip(flat, 0.0, self.duration)
        ends = as_like(xp, self.knots[1:], flat)
        idx = xp.clip(xp.searchsorted(ends, tc, side="right"), 0, M - 1)
        t0 = xp.take(as_like(xp, self.knots[:-1], flat), idx, axis=0)
        dt = xp.take(as_like(xp, self.durations, flat), idx, axis=0)
        s = (tc - t0) / dt
        powers = xp.stack([s**p for p in range(8)], axis=-1)  # (n, 8)
        table = np.ascontiguousarray(self._table[:, list(orders)]).reshape(M, -1)
        rows = xp.take(as_like(xp, table, flat), idx, axis=0)
        rows = xp.reshape(rows, (-1, len(orders), 8, 4))
        vals = xp.sum(rows * powers[:, None, :, None], axis=2)  # (n, orders, 4)
        inside = xp.astype(xp.logical_and(flat >= 0.0, flat <= self.duration), flat.dtype)
        out = []
        for i, k in enumerate(orders):
            v = vals[:, i, :] if k == 0 else vals[:, i, :] * inside[:, None]
            out.append(xp.reshape(v, (*shape, 4)))
        return out

    def __call__(self, t: Any) -> Reference:
        """Reference at time ``t`` [s], shape (...): fields (..., 3) and (...)."""
        d = self._evaluate(t, range(5))
        return Reference(*[v[..., :3] for v in d], d[0][..., 3], d[1][..., 3])
