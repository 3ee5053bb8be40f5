"""Controllers: pure ``(state, reference, gains, controller_state) -> (wrench, controller_state)``.

* :mod:`quadsim.loop.control.pid`: cascaded PID (position -> velocity -> attitude -> body rate),
  PX4-like, with anti-windup and tilt/rate limits; its stages are public functions.
* :mod:`quadsim.loop.control.geometric`: geometric SE(3) tracking controller (Lee, Leok and
  McClamroch 2010) with flatness feed-forward from the reference's acceleration, jerk, snap and
  yaw rate.

The command is the body wrench ``(..., 4)`` = ``[F (N) along body z, τx, τy, τz (N m, FLU)]``;
rotor speeds come from :func:`quadsim.physics.rotors.allocate`. Gains are loaded with
:func:`load_gains` (TOML files in ``quadsim/physics/presets/gains``), which also attaches the
drone's mass, inertia, thrust range and tilt limit and the control period. :func:`control` and
:func:`init_state` dispatch on the gains record's type.

Everything is batched over leading dimensions, written once over the array API (NumPy, JAX,
PyTorch), ``jit``-able (no Python branching on array values) and keeps the state's dtype. Under
``jax.jit`` close over the gains record (its NumPy values and strings are constants), e.g.
``jax.jit(lambda s, r, c: control(s, r, gains, c))``. Per-drone gains are possible on NumPy by
giving gain fields a leading batch axis (``(n, 3)`` vectors, ``(n,)`` scalars).

Example::

    gains = load_gains("cf2x_L250_geometric")           # drone and dt from the file
    cstate = init_state(gains, (n,))
    wrench, cstate = control(sim.state, traj(t), gains, cstate)
    sim.step(quadsim.physics.rotors.allocate(wrench, allocator).rpm)
"""

from __future__ import annotations

from typing import Any

from . import geometric, pid
from .gains import GeometricGains, PidGains, list_gains, load_gains
from .geometric import GeometricState
from .pid import PidState

__all__ = [
    "GeometricGains",
    "GeometricState",
    "PidGains",
    "PidState",
    "control",
    "geometric",
    "init_state",
    "list_gains",
    "load_gains",
    "pid",
]


def _module(gains: Any) -> Any:
    if isinstance(gains, GeometricGains):
        return geometric
    if isinstance(gains, PidGains):
        return pid
    raise ValueError(f"gains must be PidGains or GeometricGains; got {type(gains).__name__}")


def init_state(
    gains: PidGains | GeometricGains, batch_shape: tuple[int, ...] = (), xp: Any = None,
    dtype: Any = None,
) -> PidState | GeometricState:  # fmt: skip
    """Zero controller state of the controller that ``gains`` belong to.

    Args:
        gains: :class:`PidGains` or :class:`GeometricGains`.
        batch_shape: Leading batch shape ``...``.
        xp: Array namespace (default NumPy).
        dtype: Floating dtype (default: the namespace's default, float64 for NumPy).
    """
    return _module(gains).init_state(gains, batch_shape, xp, dtype)


def control(state: Any, ref: Any, gains: PidGains | GeometricGains, cstate: Any) -> tuple:
    """One controller step, dispatched on the gains type: ``(wrench (..., 4), cstate)``."""
    return _module(gains).control(state, ref, gains, cstate)
