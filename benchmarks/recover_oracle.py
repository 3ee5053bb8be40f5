"""Issue 15's feasibility check: could the throws a Recover-v0 policy crashes have been saved?

Flies the policy on Recover-v0's evaluation throws (the nominal drone, no randomisation; the
throws of ``quadsim eval``'s seed 0) and, for every throw it crashed (floor or wall), solves the
optimal-control problem of :mod:`quadsim.app.rl.oracle` on the CasADi twin of the plant from the
same start, warm-started from the policy's own flight, and replays the solution in the
simulator: the throw is **avoidable** when the replay stays above the floor (ending within 45
degrees of upright and not falling faster than 0.5 m/s after 1.2 s). IPOPT is a local solver:
a throw it does not save may still be savable ("not found"), so the count of avoidable throws
is a lower bound and the policy's shortfall at least that.

``python benchmarks/recover_oracle.py [--policy FILE] [--throws N] [--max-solves K]
[--json FILE]``; results in docs/rl.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


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
    from quadsim.app.rl.oracle import HORIZON, KNOTS, fly_policy, make_solver, replay

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
