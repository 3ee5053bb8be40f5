r"""Could a throw have been saved? An optimal-control check of Recover-v0 throws.

For a start state ``x_0`` (plant state with rotor speeds, 17 numbers) the CasADi twin of the
plant (:func:`quadsim.physics.models.first_principles.symbolic_dynamics`: the same model, rotor
dynamics and drag included) is flown over ``T = 1.2 s`` by rotor commands held for 20 ms each
(multiple shooting, 60 intervals, RK4; IPOPT):

.. math::

    \max_{u, s}\ s \quad \text{s.t.}\quad z_k \ge s,\; x_k \le 2.95\ \mathrm{m}
    \ (\text{the wall}),\; Ω_{min} \le u_k \le Ω_{max},\; R_{zz}(T) \ge 0.7,\;
    v_z(T) \ge -0.5\ \mathrm{m/s}

(the highest lowest point of a flight that ends within 45 degrees of upright and not falling
fast), warm-started from a given flight (a policy's). :func:`replay` flies the solution's
commands in the simulator at 500 Hz. A start is **savable** when the replay stays above the
floor. IPOPT is a local solver: a start it does not save may still be savable.

``benchmarks/recover_oracle.py`` runs it on every throw a policy crashes (docs/rl.md).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...engines.sim import Simulator
from ...physics.models.first_principles import symbolic_dynamics
from .evaluate import SUCCESS_RADIUS, make_vector_env
from .policy import load_policy, observation_options

__all__ = ["HORIZON", "KNOTS", "fly_policy", "make_solver", "replay"]

HORIZON = 1.2
"""``T`` [s]."""
KNOTS = 60
"""Intervals of the horizon (commands held for ``T / KNOTS``)."""


def make_solver(params: Any) -> Any:
    """``solve(x0, X_guess, U_guess) -> (status, lowest_height, commands)``."""
    import casadi as cs

    keys = ("mass", "L", "prop_inertia", "gravity_vec", "J", "J_inv", "rpm2thrust", "rpm2torque",
            "mixing_matrix", "rotor_dyn_coef", "drag_matrix", "drag_coef", "rot_drag_coef")
    xdot, x, u, _ = symbolic_dynamics(True, **{k: getattr(params, k) for k in keys})
    f = cs.Function("f", [x, u], [xdot]).expand()
    h = HORIZON / KNOTS
    scale = np.array([1.0] * 13 + [1e4] * 4)  # rotor speeds in 10^4 RPM

    def solve(x0: np.ndarray, xg: np.ndarray, ug: np.ndarray) -> tuple:
        opti = cs.Opti()
        xn, un = opti.variable(17, KNOTS + 1), opti.variable(4, KNOTS)
        xs, us = cs.diag(scale) @ xn, 1e4 * un
        opti.subject_to(xn[:, 0] == x0 / scale)
        for k in range(KNOTS):
            a, c = xs[:, k], us[:, k]
            k1 = f(a, c)
            k2 = f(a + h / 2 * k1, c)
            k3 = f(a + h / 2 * k2, c)
            k4 = f(a + h * k3, c)
            opti.subject_to(xn[:, k + 1] == (a + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)) / scale)
        opti.subject_to(opti.bounded(params.rpm_min / 1e4, cs.vec(un), params.rpm_max / 1e4))
        low = opti.variable()
        opti.subject_to(xn[2, :] >= low)
        opti.subject_to(xn[0, :] <= 2.95)
        q = xn[3:7, KNOTS]
        opti.subject_to(1 - 2 * (q[0] ** 2 + q[1] ** 2) >= 0.7)
        opti.subject_to(xn[9, KNOTS] >= -0.5)
        opti.minimize(-low + 1e-4 * cs.sumsqr(un - 1.9))
        guess = xg.copy()
        guess[2] = np.maximum(guess[2], 0.03)
        opti.set_initial(xn, guess / scale[:, None])
        opti.set_initial(un, ug / 1e4)
        opti.set_initial(low, 0.0)
        opti.solver("ipopt", {"print_time": False},
                    {"print_level": 0, "max_iter": 300, "mu_strategy": "adaptive", "sb": "yes"})
        try:
            opti.solve()
        except RuntimeError:
            return opti.stats()["return_status"], None, None
        return "solved", float(opti.value(low)), np.asarray(opti.value(us))

    return solve


def replay(params: Any, x0: np.ndarray, commands: np.ndarray) -> float:
    """The lowest height [m] of the simulator flying ``commands`` ``(4, KNOTS)`` from ``x0``."""
    sim = Simulator(params, n=1, dt=0.002, backend="numpy", world=None)
    sim.reset(pos=x0[None, :3], attitude=x0[None, 3:7], vel=x0[None, 7:10],
              ang_vel=x0[None, 10:13])  # fmt: skip
    low = float(x0[2])
    per = round(HORIZON / KNOTS / 0.002)
    for k in range(KNOTS):
        for _ in range(per):
            sim.step(commands[:, k][None])
            low = min(low, float(np.asarray(sim.state.pos)[0, 2]))
    return low


def fly_policy(path: str, throws: int) -> tuple:
    """The policy's flights on the nominal drone: states every control step (first 1.2 s),
    commands, and the crashed, terminated and succeeded masks."""  # noqa: D205, D209
    pol = load_policy(path)
    opts = observation_options(pol.meta)
    env = make_vector_env("quadsim/Recover-v0", throws, autoreset="NextStep",
                          randomize_params={}, **opts)  # fmt: skip
    obs, _ = env.reset(seed=0)
    core = env.core

    def state() -> np.ndarray:
        s = core.sim.state
        return np.concatenate([np.asarray(getattr(s, k), np.float64) for k in
                               ("pos", "quat", "vel", "ang_vel", "rotor_vel")], axis=1)  # fmt: skip

    steps = round(HORIZON / core.control_dt)
    xs, us = [state()], []
    alive, crashed, term = np.ones(throws, bool), np.zeros(throws, bool), np.zeros(throws, bool)
    final = np.zeros(throws)
    for k in range(core.max_episode_steps):
        a = pol(obs).astype(np.float32)
        us.append(core.level.command(np.clip(a.astype(np.float64), -1, 1), None))
        obs, _, te, tr, info = env.step(a)
        live = alive.copy()
        final[live] = np.linalg.norm(obs[live, :3], axis=1)
        crashed |= live & info["crashed"]
        term |= live & te
        alive &= ~(te | tr)
        if k < steps:
            xs.append(state())
    ok = ~term & (final < SUCCESS_RADIUS)
    return core, np.array(xs), np.array(us), crashed, term, ok
