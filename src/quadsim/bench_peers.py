"""Peer simulators timed on quadsim's benchmark workload: crazyflow 0.4.0 and RotorPy 3.0.0.

Workload: N quadrotors (rigid body plus first-order rotor dynamics), a constant hover command,
dt = 1/500 s, T steps; no controller, rendering or contacts. Rates are drone-steps per second
(N*T / seconds), the median of ``repeats`` timed runs after an untimed warm-up that includes any
compilation. Peers are imported lazily, so this module imports without them; install them with
``benchmarks/setup_peers.sh`` (they need their own virtualenv, see ``benchmarks/README.md``).
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from importlib import metadata

__all__ = ["available", "crazyflow_rollout", "rotorpy_batched", "rotorpy_single_step"]

DT = 1.0 / 500.0
"""Step [s] of every peer measurement (crazyflow's ``freq=500``)."""

_CHILD = "import json,sys;from quadsim.bench_peers import _crazyflow_here as f;print(json.dumps(f(*map(int,sys.argv[1:]))))"  # noqa: E501


def available() -> dict[str, str | None]:
    """Installed peer versions, read from package metadata without importing the peers.

    Returns:
        ``{"crazyflow": version or None, "rotorpy": version or None}``.
    """
    out: dict[str, str | None] = {}
    for name in ("crazyflow", "rotorpy"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def _median_rate(run: Callable[[], object], work: int, repeats: int) -> float:
    """``work`` divided by the median wall time of ``repeats`` calls of ``run``."""
    times = []
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return work / statistics.median(times)


def crazyflow_rollout(n: int, steps: int, repeats: int = 3, *, isolate: bool = True) -> float:
    """Drone-steps per second of crazyflow's own batched rollout, ``Sim.step(steps)``.

    Configuration: ``Sim(n_worlds=n, n_drones=1, drone=cf21B_500, dynamics=first_principles,
    control=rotor_vel, integrator=rk4, freq=500)`` on JAX's default backend, float32 (crazyflow's
    default; x64 off). First-principles Newton-Euler model with first-order rotor dynamics
    (asymmetric spin-up/down), gyroscopic rotor torque and linear body drag; classic RK4 whose
    attitude update is the exponential map of the angular velocity. ``rotor_vel`` control means no
    controller stage runs: the command (hover RPM, also the initial rotor speed) is held. One
    ``sim.step(steps)`` call is a single jitted ``lax.scan`` of ``steps`` steps, the pattern
    crazyflow's benchmarks use; we time it with ``jax.block_until_ready(sim.data)``.

    Differences from quadsim's workload: each step also clamps rotor commands to the motor limits,
    clips positions at the floor and increments a step counter. MJX collision detection is NOT
    part of ``Sim.step`` (it runs only when rendering or querying contacts), so no contacts are
    computed. Drones are laid out as ``n`` worlds of one drone (crazyflow's RL layout); one world
    of ``n`` drones would build an MJX scene with ``n`` bodies.

    Global state: ``import crazyflow`` sets ``SCIPY_ARRAY_API=1`` and refuses to import if SciPy
    was already imported without it; the flag switches SciPy into array-API mode for the whole
    process. With ``isolate=True`` (default) the measurement therefore runs in a fresh child
    interpreter (``sys.executable``, same virtualenv, ``JAX_ENABLE_X64=0``), which also keeps
    crazyflow's compiled programs and buffers out of the caller's JAX runtime.

    Args:
        n: Number of drones (worlds).
        steps: Steps per timed rollout.
        repeats: Timed rollouts; the median is reported.
        isolate: Measure in a child process (see above); ``False`` measures in this process.

    Returns:
        Drone-steps per second.

    Raises:
        RuntimeError: If the child process fails.
    """
    if not isolate:
        return _crazyflow_here(n, steps, repeats)
    env = {**os.environ, "SCIPY_ARRAY_API": "1", "JAX_ENABLE_X64": "0"}
    cmd = [sys.executable, "-c", _CHILD, str(n), str(steps), str(repeats)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"crazyflow benchmark failed:\n{proc.stderr[-2000:]}")
    return float(json.loads(proc.stdout.strip().splitlines()[-1]))


def _crazyflow_here(n: int, steps: int, repeats: int) -> float:
    """In-process body of :func:`crazyflow_rollout`."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from crazyflow import Control, Drone, Dynamics, Sim
    from crazyflow.sim.integration import Integrator

    sim = Sim(
        n_worlds=n, n_drones=1, drone=Drone.cf21B_500, dynamics=Dynamics.first_principles,
        control=Control.rotor_vel, integrator=Integrator.rk4, freq=round(1 / DT),
        device=jax.default_backend(),
    )  # fmt: skip
    p = sim.data.params
    k0, k1, k2 = np.asarray(p.rpm2thrust, np.float64).reshape(-1)[:3]
    f = float(np.asarray(p.mass).reshape(-1)[0]) * -float(p.gravity_vec[2]) / 4
    rpm = (-k1 + math.sqrt(k1 * k1 - 4 * k2 * (k0 - f))) / (2 * k2)  # hover: k0+k1 w+k2 w² = f
    hover = jax.device_put(jnp.full((n, 1, 4), rpm, jnp.float32), sim.device)
    sim.rotor_vel_control(hover)
    states = sim.data.states.replace(rotor_vel=hover, pos=sim.data.states.pos.at[..., 2].set(1.0))
    sim.data = sim.data.replace(states=states)

    def run() -> None:
        sim.step(steps)
        jax.block_until_ready(sim.data)

    run()  # compile (n_steps is static) and warm up
    run()  # an input that is not committed to the device would compile again here
    return _median_rate(run, n * steps, repeats)


def _rotorpy_setup(n: int | None):
    """RotorPy's Crazyflie Brushless parameters, hover state and command (torch if ``n``)."""
    import numpy as np
    from rotorpy.vehicles.crazyfliebrushless_params import quad_params

    w = math.sqrt(quad_params["mass"] * 9.81 / (4 * quad_params["k_eta"]))  # hover [rad/s]
    state = {"x": [0.0, 0.0, 1.0], "v": [0.0] * 3, "q": [0.0, 0.0, 0.0, 1.0], "w": [0.0] * 3}
    state |= {"wind": [0.0] * 3, "rotor_speeds": [w] * 4}
    if n is None:
        state = {k: np.array(v) for k, v in state.items()}
        return quad_params, state, {"cmd_motor_speeds": np.full(4, w)}
    import torch

    state = {k: torch.tensor(v, dtype=torch.float64).repeat(n, 1) for k, v in state.items()}
    return quad_params, state, {"cmd_motor_speeds": torch.full((n, 4), w, dtype=torch.float64)}


def rotorpy_single_step(
    steps: int, repeats: int = 3, *, aero: bool = True, adaptive: bool = False
) -> float:
    """Steps per second of ONE RotorPy drone, ``Multirotor.step`` called from a Python loop.

    Configuration: ``Multirotor(crazyfliebrushless params, control_abstraction="cmd_motor_speeds",
    aero=aero)``, NumPy float64, ``t_step = DT`` per call, hover command held, no controller, no
    ground contact (RotorPy's default ``enable_ground=False``). RotorPy integrates each step with
    ``scipy.integrate.solve_ivp`` (there is no fixed-step RK4). With ``adaptive=False`` we pass
    ``integrator_kwargs={"method": "RK45", "first_step": DT}``: one Dormand-Prince step per call,
    7 derivative evaluations (vs 4 for RK4). ``adaptive=True`` keeps RotorPy's default
    (``{"method": "RK45"}``), whose cost depends on the state: at exact hover SciPy's initial
    step guess is tiny and each call takes 32 evaluations, about 4x slower.

    Model: rigid body, quaternion state, first-order motors (``tau_m``); ``aero=True`` (RotorPy's
    default) adds quadratic parasitic drag, rotor drag, blade flapping and translational lift.
    Each call also renormalises the quaternion and clips rotor speeds.

    Args:
        steps: Steps per timed run.
        repeats: Timed runs; the median is reported.
        aero: RotorPy's aerodynamic wrenches.
        adaptive: Use RotorPy's default adaptive RK45 instead of one RK45 step per call.

    Returns:
        Steps per second.
    """
    from rotorpy.vehicles.multirotor import Multirotor

    params, state, ctrl = _rotorpy_setup(None)
    kwargs = {"method": "RK45"} if adaptive else {"method": "RK45", "first_step": DT}
    vehicle = Multirotor(params, state, "cmd_motor_speeds", aero=aero, integrator_kwargs=kwargs)

    def run(count: int = steps) -> None:
        s = state
        for _ in range(count):
            s = vehicle.step(s, ctrl, DT)

    run(min(steps, 20))  # warm-up
    return _median_rate(run, steps, repeats)


def rotorpy_batched(n: int, steps: int, repeats: int = 3, *, aero: bool = True) -> float | None:
    """Drone-steps per second of RotorPy's PyTorch ``BatchedMultirotor.step``.

    Configuration: ``BatchedMultirotor(BatchedMultirotorParams([crazyfliebrushless] * n),
    control_abstraction="cmd_motor_speeds", aero=aero, integrator="rk4")`` on the CPU, float64
    state (RotorPy's requirement; its derivative buffer is float32), ``t_step = DT`` per call,
    hover command held, eager PyTorch with its default thread count. ``integrator="rk4"`` is
    torchdiffeq's fixed-grid RK4 (the 3/8-rule variant, 4 evaluations) over the grid ``[0, DT]``:
    one step per call, as in RotorPy's gym environment. ``idxs=np.arange(n)`` as in
    ``rotorpy.simulate.simulate_batch`` (the default ``idxs=None`` builds a Python list and is
    ~4x slower at n = 4096). Same model as :func:`rotorpy_single_step` (no ground handling).

    Args:
        n: Number of drones.
        steps: Steps per timed run.
        repeats: Timed runs; the median is reported.
        aero: RotorPy's aerodynamic wrenches.

    Returns:
        Drone-steps per second, or None when torch, torchdiffeq or roma is missing.
    """
    try:
        import roma  # noqa: F401  (RotorPy swallows these ImportErrors itself)
        import torch
        import torchdiffeq  # noqa: F401
    except ImportError:
        return None
    import numpy as np
    from rotorpy.vehicles.multirotor import BatchedMultirotor, BatchedMultirotorParams

    params, state, ctrl = _rotorpy_setup(n)
    cpu = torch.device("cpu")
    batched = BatchedMultirotorParams([params] * n, n, cpu)
    vehicles = BatchedMultirotor(batched, n, state, cpu, "cmd_motor_speeds", aero, "rk4")
    idxs = np.arange(n)

    def run(count: int = steps) -> None:
        s = state
        for _ in range(count):
            s = vehicles.step(s, ctrl, DT, idxs=idxs)

    run(min(steps, 5))  # warm-up
    return _median_rate(run, n * steps, repeats)
