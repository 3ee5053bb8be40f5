#!/usr/bin/env bash
# Create .venv-bench: quadsim plus the peer simulators crazyflow 0.4.0 and RotorPy 3.0.0,
# so that `.venv-bench/bin/python benchmarks/closed_loop.py` (closed loop, vector envs) and
# `.venv-bench/bin/python benchmarks/plant.py` (plant) measure quadsim and the peers in one run.
#
# A separate virtualenv because crazyflow 0.4.0 requires jax != 0.10.2 (our main pin).
# torch is installed FIRST and exactly as 2.13.0: that pin resolves to the local CPU
# wheel; any other torch spec (e.g. rotorpy[batched]'s `torch>=1.11`) would otherwise
# pull the newest CUDA build (gigabytes). With 2.13.0 present, later ranges are satisfied.
#
# Usage: bash benchmarks/setup_peers.sh [PYTHON]   (default: python3)
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${1:-python3}"
VENV=.venv-bench

"$PY" -m venv "$VENV"
PIP="$VENV/bin/pip"
"$PIP" install --quiet --upgrade pip
"$PIP" install "torch==2.13.0"
# Constrain torch so no resolver step can swap in a CUDA build.
CONSTRAINTS="$(mktemp)"
trap 'rm -f "$CONSTRAINTS"' EXIT
echo "torch==2.13.0" >"$CONSTRAINTS"

if ! "$PIP" install -c "$CONSTRAINTS" -e ".[all]" "crazyflow==0.4.0" "rotorpy[batched]==3.0.0"; then
    echo "rotorpy[batched] failed; retrying without the batched extra" >&2
    "$PIP" install -c "$CONSTRAINTS" -e ".[all]" "crazyflow==0.4.0" "rotorpy==3.0.0"
fi

# Guard: no CUDA runtime packages may have been pulled in.
if "$PIP" list 2>/dev/null | grep -Ei '^(nvidia-|jax-cuda|triton)'; then
    echo "ERROR: CUDA packages were installed into $VENV (see above)" >&2
    exit 1
fi
"$VENV/bin/python" - <<'PY'
import torch

assert torch.__version__.startswith("2.13.0"), torch.__version__
assert torch.version.cuda is None, f"CUDA torch installed: {torch.version.cuda}"
PY
"$VENV/bin/python" benchmarks/peers.py   # prints the peers' versions (None: not installed)
