"""Issue 15's feasibility check: could the throws a Recover-v0 policy crashes have been saved?

Flies the policy on Recover-v0's evaluation throws (the nominal drone, no randomisation; the
throws of ``quadsim eval``'s seed 0) and, for every throw it crashed (floor or wall), solves an
optimal-control problem on the CasADi twin of the plant
(:func:`quadsim.models.first_principles.symbolic_dynamics`, the same model, rotor dynamics and
drag included):

    maximise  s   subject to   z_k >= s,  x_k <= 2.95 m (the wall),
              rpm_min <= u_k <= rpm_max,  R_zz(T) >= 0.7,  v_z(T) >= -0.5 m/s

over ``T = 1.2 s`` (multiple shooting, 60 intervals of 20 ms, RK4, rotor commands held per
interval; IPOPT), warm-started from the policy's own flight. A solution is replayed in the
simulator (500 Hz); the throw is **avoidable** when the replay stays above the floor: the
drone is then within 45 degrees of upright, not falling faster than 0.5 m/s, and above the
floor by the replay's margin, from where hover is reachable. IPOPT is a local solver: a throw it
does not save may still be savable (reported as "not found"), so the count of avoidable throws
is a lower bound and the policy's shortfall is at least that.

``python benchmarks/recover_oracle.py [--policy FILE] [--throws N] [--max-solves K]``; results
in docs/rl.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
HORIZON, KNOTS = 1.2, 60


def make_solver(params: object):
    """``solve(x0, X_guess, U_guess) -> (status, lowest_height, commands)``."""
    import casadi as cs

    from quadsim.physics.models.first_principles import symbolic_dynamics

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


def replay(params: object, x0: np.ndarray, commands: np.ndarray) -> float:
    """The lowest height [m] of the simulator flying ``commands`` ``(4, KNOTS)`` from ``x0``."""
    from quadsim.engines.sim import Simulator

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
    from quadsim.app.rl.evaluate import SUCCESS_RADIUS, make_vector_env
    from quadsim.app.rl.policy import load_policy

    pol = load_policy(path)
    opts = {k: pol.meta[k] for k in ("observe_rotors", "observe_integral") if k in pol.meta}
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


def main() -> int:
    """The command line (module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policy", default=str(ROOT / "runs" / "train_recover" / "policy.npz"))
    ap.add_argument("--throws", type=int, default=1000)
    ap.add_argument("--max-solves", type=int, default=None, help="solve at most K crashed throws")
    ap.add_argument("--json", default=None, help="write the per-throw results here")
    args = ap.parse_args()
    if not Path(args.policy).is_file():
        print(f"recover_oracle: no policy file {args.policy}; train one first", file=sys.stderr)
        return 2
    core, xs, us, crashed, term, ok = fly_policy(args.policy, args.throws)
    n = args.throws
    print(f"{args.policy} on the nominal drone, {n} throws: success {100 * ok.mean():.1f} %, "
          f"crashed {100 * crashed.mean():.1f} %, terminated {100 * term.mean():.1f} %", flush=True)
    solve = make_solver(core.params)
    per = round(HORIZON / KNOTS / core.control_dt)  # control steps per interval
    rows = {}
    t0 = time.perf_counter()
    todo = np.flatnonzero(crashed)[: args.max_solves]
    for j, i in enumerate(todo):
        xg = xs[::per, i].T
        ug = np.mean(us[: KNOTS * per, i].reshape(KNOTS, per, -1), axis=1).T
        status, low, cmds = solve(xs[0, i], xg, ug)
        sim_low = None if cmds is None else replay(core.params, xs[0, i], cmds)
        verdict = "avoidable" if sim_low is not None and sim_low > 0.0 else "not found"
        rows[int(i)] = {"ipopt": status, "lowest_m": low, "replay_lowest_m": sim_low,
                        "verdict": verdict}  # fmt: skip
        low_s = "-" if sim_low is None else f"{sim_low:.3f} m"
        print(f"  {j + 1}/{todo.size} throw {i}: {verdict} (IPOPT {status}, replay lowest "
              f"{low_s}; {time.perf_counter() - t0:.0f} s)", flush=True)  # fmt: skip
    saved = sum(r["verdict"] == "avoidable" for r in rows.values())
    line = (f"crashed throws checked: {len(rows)} of {int(crashed.sum())}; avoidable (a recovery "
            f"found and replayed): {saved}; not found: {len(rows) - saved}")
    if len(rows) == crashed.sum():
        line += (f"; crashes physics may force: at most {100 * (len(rows) - saved) / n:.1f} % of "
                 f"the throws (success possible: at least {100 * (ok.mean() + saved / n):.1f} %)")
    print(line)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
