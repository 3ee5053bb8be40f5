"""What a training batch costs, estimated before anything is allocated, and the refusal.

``quadsim train --envs M`` (docs/rl.md, "Large batches"): the memory of the batch
(:func:`estimate`: the rollout buffer and its flattened copy, the PPO update's minibatches, the
environments; a base for PyTorch and Stable-Baselines3) against the memory available
(:func:`quadsim.app.preflight.available_memory`), and the time of a PPO iteration; a batch that does
not fit is refused naming the numbers and the batch that fits, a slow one gets a notice.
"""

from __future__ import annotations

import time
from typing import Any

from ..preflight import available_memory

__all__ = ["BASE_BYTES", "NOTICE_SECONDS", "SAMPLE_BYTES", "STEP_SECONDS", "check_resources",
           "estimate", "idle_cores"]  # fmt: skip

SAMPLE_BYTES = 600
"""Memory per rollout sample besides 8 bytes per observation and action entry [bytes]: the
rollout buffer (float32, and its flattened copy for the update), the PPO minibatches' forward
and backward passes, the environments' batch (measured, :func:`estimate`)."""

BASE_BYTES = 450e6
"""Memory of a training process besides its batch [bytes]: PyTorch, Stable-Baselines3, the
compiled env step (measured, :func:`estimate`)."""

STEP_SECONDS = 11e-6
"""Wall time per environment step of training, PPO update included [s]: Hover-v0 on one thread
of an idle core (2.4 M steps in 27 s; two threads and Recover-v0's larger batch: 8.5 us)."""

NOTICE_SECONDS = 10.0
"""A batch whose PPO iteration takes longer than this (estimated) gets a notice [s]."""


def estimate(num_envs: int, obs_dim: int, act_dim: int,
             n_steps: int = 64) -> tuple[float, float, float]:  # fmt: skip
    """``(bytes, bytes per environment, seconds per PPO iteration)`` of ``num_envs`` environments.

    :data:`BASE_BYTES` plus, per environment, ``n_steps`` rollout samples
    (:data:`quadsim.app.rl.train.N_STEPS`) of ``8 (obs_dim + act_dim) +`` :data:`SAMPLE_BYTES`
    bytes; :data:`STEP_SECONDS` per step.

    Measured peak resident memory of one PPO iteration (one thread), against the estimate:
    Hover-v0 (22 + 4 entries) 256 / 4,096 / 16,384 / 65,536 environments: 0.37 / 0.68 / 1.23 /
    3.60 GB (estimate 0.46 / 0.66 / 1.30 / 3.84 GB); Recover-v0 (32 + 4) 1,024 / 8,192: 0.44 /
    0.84 GB (0.51 / 0.92 GB).
    """
    per_env = n_steps * (SAMPLE_BYTES + 8 * (obs_dim + act_dim))
    return BASE_BYTES + num_envs * per_env, per_env, num_envs * n_steps * STEP_SECONDS


def check_resources(num_envs: int, obs_dim: int, act_dim: int, n_steps: int, log: Any) -> None:
    """Refuse a batch that does not fit in the available memory (before any of it is
    allocated); note one whose iterations take long."""  # noqa: D205, D209
    need, per_env, secs = estimate(num_envs, obs_dim, act_dim, n_steps)
    avail = available_memory()
    if avail is not None and need > avail:
        fit = int((avail - BASE_BYTES) // per_env)
        advice = f"give --envs {fit} or fewer" if fit >= 4 else "free some memory first"
        raise ValueError(
            f"--envs {num_envs}: training needs about {need / 1e9:.1f} GB ({per_env / 1e3:.0f} kB "
            f"per environment for its rollout of {n_steps} steps and the PPO update, plus "
            f"{BASE_BYTES / 1e9:.2f} GB), {avail / 1e9:.1f} GB are available; {advice} "
            "(docs/rl.md)"
        )
    if secs > NOTICE_SECONDS and log:
        log(f"{num_envs} environments: about {need / 1e9:.1f} GB and {secs:.0f} s per PPO "
            f"iteration of {num_envs * n_steps} steps on idle cores (a checkpoint after "
            "each; SIGINT stops after the one in progress)")  # fmt: skip


def _cpu_ticks() -> tuple[int, int] | None:
    """``(idle, total)`` jiffies of every core since boot (Linux ``/proc/stat``), or ``None``."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            fields = [int(x) for x in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    return (fields[3] + (fields[4] if len(fields) > 4 else 0), sum(fields[:8])) if fields else None


def idle_cores(seconds: float = 0.25, cores: int | None = None) -> float | None:
    """How many cores no process keeps busy, over ``seconds`` of looking (``None`` where
    ``/proc/stat`` cannot be read): idle and I/O-wait time over all the time, times the cores."""  # noqa: D205, D209
    import os

    a = _cpu_ticks()
    time.sleep(seconds)
    b = _cpu_ticks()
    if a is None or b is None or b[1] <= a[1]:
        return None
    return (b[0] - a[0]) / (b[1] - a[1]) * (cores or os.cpu_count() or 1)
