"""Shared by the RL tests: a scenario that flies a policy file, and damaged policy files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

SCENARIO = """
name = "policy hover"
duration = 5.0
[drone]
preset = "cf2x_L250"
[sim]
dt = 0.002
backend = "native"
[initial]
start_on_reference = false
pos = [0.3, -0.3, 0.7]
rpy_deg = [10.0, -5.0, 30.0]
[controller]
kind = "policy"
path = "{path}"
[trajectory]
kind = "hover"
center = [0.0, 0.0, 1.0]
[output]
plots = false
"""


def bad_policy(tmp_path: Path, kind: str) -> Path:
    from quadsim.app.rl.policy import save_policy

    p = tmp_path / f"{kind}.npz"
    rng = np.random.default_rng(0)
    if kind == "corrupt":
        p.write_bytes(b"PK\x03\x04 not really a zip")
    elif kind == "shape":  # Hover's 22 inputs on Track-v0 (34)
        save_policy(p, [(rng.normal(size=(8, 22)), np.zeros(8)), (rng.normal(size=(4, 8)),
                    np.zeros(4))], {"env_id": "quadsim/Track-v0"})
    elif kind == "meta":  # an observation option that is not a boolean
        save_policy(p, [(rng.normal(size=(4, 22)), np.zeros(4))],
                    {"env_id": "quadsim/Hover-v0", "observe_integral": "yes"})  # fmt: skip
    elif kind == "chain":
        np.savez(p, meta=np.array("{}"), W0=np.zeros((8, 22)), b0=np.zeros(8),
                 W1=np.zeros((4, 9)), b1=np.zeros(4))
    elif kind == "text":  # a text file renamed
        p.write_text("W0 = [[1, 2], [3, 4]]\n")
    else:  # a Hover policy file with one thing wrong
        meta = {"env_id": "quadsim/Hover-v0", "action_level": "rotor_speeds", "obs_dim": 22}
        arrays = {"W0": rng.normal(size=(8, 22)), "b0": np.zeros(8),
                  "W1": rng.normal(size=(4, 8)), "b1": np.zeros(4)}  # fmt: skip
        change = {
            "strbias": {"b1": np.array(["0.1"] * 4)},
            "object": {"b0": np.array([0.0, None] * 4, dtype=object)},
            "complex": {"W1": arrays["W1"] + 1j},
            "nan": {"W0": np.full((8, 22), np.nan)},
            "gap": {"W2": arrays.pop("W1"), "b2": arrays.pop("b1")},
            "metaint": {"meta": json.dumps({**meta, "obs_dim": "x"})},
            "metajson": {"meta": "{'env_id': 'quadsim/Hover-v0'}"},
            "metalist": {"meta": "[22, 4]"},
            "metaarray": {"meta": np.arange(3.0)},
            "nometa": {},
        }[kind]
        arrays.update({"meta": np.array(json.dumps(meta))} if kind != "nometa" else {})
        arrays.update({k: np.asarray(v) for k, v in change.items()})
        with open(p, "wb") as fh:
            np.savez(fh, **arrays)
    return p
