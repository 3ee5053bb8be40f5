r"""Said before a run, not after: output checks, memory and time estimates, step-size advice.

**Memory.** A flight of ``N`` drones needs about ``M_0 + N m_b + M_log`` bytes: ``M_0`` the
process with its libraries, ``m_b`` per drone for the backend's state, integrator stages,
controller and sensor arrays (:data:`BYTES_PER_DRONE`, measured as the peak resident memory of
short flights of 2·10⁴ and 8·10⁴ drones, with a margin), and ``M_log`` for a chunk of the log in its
three forms (samples, long table, Parquet pages), at most about ``4 CHUNK_BYTES``. A run whose
estimate exceeds the memory available (``MemAvailable``) is refused before anything is built.

**Time.** ``steps (a + N b) + (steps / log_every) N c`` with a per-step cost ``a``, a
per-drone-step cost ``b`` for the loop the backend flies (:data:`STEP_COST`) and a cost ``c`` per
logged drone-sample (:data:`LOG_COST`), fitted by ``benchmarks/estimate_time.py`` on a 2-core
machine; printed when above :data:`SAY_TIME_ABOVE`.

**Step size.** The fastest closed-loop time constant is the smaller of the rotor lag
(linearised at hover: ``1 / (c_0 + 2 c_1 Ω_h)`` spinning up, ``1 / (c_2 + 2 c_3 Ω_h)`` down) and
the attitude loop (geometric: the faster root of ``s² + k_Ω s + k_R``; PID: ``1 / rate_p``).
With ``λ = 1/τ``, an integrator of order ``p`` is accurate for ``λ dt`` below
:data:`ACCURATE_LAMBDA_DT` (RK4 0.5: local error ``(λ dt)^5/120 ≈ 3·10⁻⁴``; Euler 0.05) and loses
to rounding below ``0.1 ε^{1/(p+1)}`` (where truncation ``(λ dt)^p`` and rounding
``ε / (λ dt)`` balance, ``ε`` the machine epsilon of the dtype).
"""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from ..loop.driver import CHUNK_BYTES
from ..physics.envelope import envelope
from .io.parts import PARTS, part_files

__all__ = ["check_no_killed_run", "check_out_dir", "check_outputs", "estimate_memory",
           "estimate_time"]  # fmt: skip

BASE_BYTES = 500 * 2**20
"""Resident memory of ``quadsim fly`` with NumPy, JAX, PyArrow and matplotlib loaded [bytes]."""

BYTES_PER_DRONE = {"numpy": 10_000, "jax": 10_000, "torch": 10_000, "native": 10_000}
"""Peak resident memory per drone by backend [bytes]: 6.2 (numpy), 5.9 (jax) and 6.7 kB
(native) measured between 2·10⁴ and 8·10⁴ drones with an IMU, rounded up for margin."""

STEP_COST = {
    "numpy": (3.0e-3, 1.0e-5),
    "jax": (2.5e-5, 1.0e-6),
    "torch": (3.0e-3, 1.0e-5),
    "native": (1.0e-6, 8.0e-8),
}
"""Per step [s] and per drone-step [s] wall-clock cost of the loop each backend flies: the
compiled C loop on ``native``, the scan on ``jax``, the per-step loop elsewhere. Fitted by
``benchmarks/estimate_time.py`` on the 2-core machine under a load of 3 to 4, rounded (issue
40: the old ``native`` figure, 5e-4 s a step, was the per-step loop's and made a 45-s flight
"about 17 min")."""

LOG_COST = 2.0e-6
"""Wall-clock cost of one logged drone-sample [s] (its columns, the summary, the Parquet part;
fitted with :data:`STEP_COST`: 0.7 to 2.8 us on ``native`` and about 3 us on ``jax``, more per
sample when every step is logged; the estimates fall within 0.4x to 3x of the flights)."""

SAY_TIME_ABOVE = 30.0
"""Runs estimated to take longer than this [s] are announced with the estimate."""

ORDER = {"euler": 1, "semi_implicit": 1, "geometric": 1, "rk4": 4, "rk45": 5}
ACCURATE_LAMBDA_DT = {"euler": 0.05, "semi_implicit": 0.05, "geometric": 0.05, "rk4": 0.5,
                      "rk45": math.inf}  # fmt: skip


def format_bytes(b: float) -> str:
    """``512 MB``, ``23.1 GB``, ``1.2 TB``."""
    if b >= 2**40:
        return f"{b / 2**40:.3g} TB"
    return f"{b / 2**30:.3g} GB" if b >= 2**30 else f"{b / 2**20:.0f} MB"


def available_memory() -> int | None:
    """Memory available to a new allocation [bytes] (``MemAvailable``), or ``None``."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _resident() -> int:
    """Resident memory of this process [bytes] (0 where it cannot be read)."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def estimate_memory(n: int, backend: str, chunk_bytes: float, per_drone: float = 0.0) -> float:
    """Bytes a flight of ``n`` drones needs (see the module docstring); ``per_drone``: more bytes
    each drone costs (what its sensor parts declare,
    :func:`quadsim.loop.parts.checks.declared_bytes`)."""  # noqa: D205, D209
    return BASE_BYTES + n * (BYTES_PER_DRONE.get(backend, 10_000) + per_drone) + 4 * chunk_bytes


def estimate_time(n: int, steps: int, backend: str, log_every: int = 1) -> float:
    """Seconds of wall clock for ``steps`` control steps of ``n`` drones, logged every
    ``log_every``-th (rough: :data:`STEP_COST` and :data:`LOG_COST`)."""  # noqa: D205, D209
    a, b = STEP_COST.get(backend, STEP_COST["numpy"])
    return steps * (a + n * b) + steps / max(int(log_every), 1) * n * LOG_COST


def check_out_dir(out: Path) -> None:
    """The output directory exists or can be made, and is writable.

    Raises:
        ValueError: Saying which of these fails.
    """
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out}: exists and is not a directory")
    if (out / "sweep.json").is_file():  # quadsim sweep's folder (quadsim.app.sweep.run)
        raise ValueError(f"--out {out}: holds a sweep (sweep.json); a run there would mix its "
                         "files with the sweep's: choose another --out")  # fmt: skip
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as e:
        raise ValueError(f"--out {out}: cannot write there ({e.strerror or e})") from None


def check_no_killed_run(out: Path) -> None:
    """The output directory holds no log of a killed run (checked once the folder is held).

    Raises:
        ValueError: Saying how to recover it.
    """
    if part_files(out / PARTS):
        raise ValueError(
            f"--out {out}: holds the log of a run that was killed ({PARTS}/); "
            f"run `quadsim recover {out}` first, or delete that folder"
        )


def check_outputs(*, plots: bool, animate: str | None, csv: bool, rosbag: bool = False) -> None:
    """Every requested output has what it needs installed (checked before flying).

    Raises:
        ValueError: Naming the output and what to install.
    """
    import importlib.util

    def need(module: str, what: str, extra: str) -> None:
        if importlib.util.find_spec(module) is None:
            raise ValueError(f"{what} needs {module}: pip install 'quadsim[{extra}]'")

    need("pyarrow", "the flight log", "cli")
    if plots or animate:
        need("matplotlib", "--animate" if animate and not plots else "the figures", "cli")
    if animate:
        need("PIL", "--animate", "cli")
    if rosbag:
        need("mcap", "--rosbag", "ros2")
        need("cyclonedds", "--rosbag", "ros2")
    if animate == "mp4":
        from .plotting.animation import ffmpeg_exe

        if ffmpeg_exe() is None:
            raise ValueError(
                "--animate mp4 needs ffmpeg: pip install 'quadsim[video]' (or put ffmpeg on "
                "PATH), or use --animate gif"
            )


def fastest_time_constant(drone: Any, gains: Any) -> tuple[float, str]:
    """The fastest closed-loop time constant [s] and what it belongs to."""
    c = np.asarray(drone.rotor_dyn_coef, dtype=np.float64)
    w = envelope(drone).hover_rpm
    found = [
        (1.0 / (c[0] + 2 * c[1] * w), "rotor spin-up lag"),
        (1.0 / (c[2] + 2 * c[3] * w), "rotor spin-down lag"),
    ]
    if float(getattr(drone, "warmup_coef", 0.0)) > 0.0:  # θ̇ = ((Ω/Ω_h)³ - θ)/τ_w
        found.append((float(drone.warmup_time), "motor warm-up (warmup_time)"))
    if hasattr(gains, "kR"):
        kr, kw = np.asarray(gains.kR, float), np.asarray(gains.kW, float)
        disc = np.sqrt(np.maximum(kw * kw - 4 * kr, 0.0))
        lam = np.where(kw * kw >= 4 * kr, (kw + disc) / 2, np.sqrt(kr))
        found.append((1.0 / float(lam.max()), "attitude loop"))
    elif hasattr(gains, "rate_p"):
        found.append((1.0 / float(np.max(gains.rate_p)), "body-rate loop"))
    found = [(t, w) for t, w in found if t > 0 and math.isfinite(t)]
    return min(found) if found else (math.inf, "none")


def dt_advice(dt: float, integrator: str, dtype: str, tau: float, what: str) -> str | None:
    """A warning when ``dt`` is outside the range where ``integrator`` is accurate, else None."""
    if not math.isfinite(tau):
        return None
    lam_dt = dt / tau
    hi = ACCURATE_LAMBDA_DT[integrator]
    lo = 0.1 * float(np.finfo(dtype).eps) ** (1.0 / (ORDER[integrator] + 1))
    if lam_dt > hi:
        return (
            f"{dt:g} s is coarse for {integrator}: the {what} has a time constant of "
            f"{tau * 1e3:.3g} ms (dt/tau = {lam_dt:.2g} > {hi:g}); use dt <= {hi * tau:.2g} s"
        )
    if lam_dt < lo:
        return (
            f"{dt:g} s is so small that {dtype} rounding outgrows {integrator}'s "
            f"truncation error (fastest time constant {tau * 1e3:.3g} ms, the {what}); "
            f"use dt >= {lo * tau:.2g} s"
        )
    return None


def memory_problem(n: int, backend: str, per_drone: float = 0.0) -> str | None:
    """Why ``n`` drones on ``backend`` would not fit in the memory available, or ``None``
    (``per_drone``: the bytes per drone of the sensor parts, as :func:`estimate_memory`)."""  # noqa: D205, D209
    # the part of the process's own memory not yet resident is needed as well
    need = estimate_memory(n, backend, CHUNK_BYTES, per_drone) - min(BASE_BYTES, _resident())
    avail = available_memory()
    if avail is not None and need > avail:
        each = BYTES_PER_DRONE.get(backend, 10_000) + per_drone
        parts = f", {per_drone / 1e3:.0f} kB of it the sensor parts'" if per_drone else ""
        return (
            f"{n} drones need about {format_bytes(need)} of memory "
            f"({each / 1e3:.0f} kB per drone on {backend}{parts}); "
            f"{format_bytes(avail)} is available"
        )
    return None


def format_duration(s: float) -> str:
    """``45 s``, ``12 min``, ``3.5 h``, ``9 days``."""
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    if s < 2 * 86400:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.0f} days"
