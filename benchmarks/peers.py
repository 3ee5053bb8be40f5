"""Peer simulators timed on quadsim's benchmark workload: crazyflow 0.4.0 and RotorPy 3.0.0.

Workload: N quadrotors (rigid body plus first-order rotor dynamics), a constant hover command,
dt = 1/500 s, T steps; no controller, rendering or contacts. Rates are drone-steps per second
(N*T / seconds), the median of ``repeats`` timed runs after an untimed warm-up that includes any
compilation. Peers are imported lazily, so this module imports without them; install them with
``bash benchmarks/setup_peers.sh`` (they need their own virtualenv, see ``benchmarks/README.md``).

Used by ``benchmarks/closed_loop.py`` and ``benchmarks/plant.py`` (which import it as ``peers``
from this folder). Every crazyflow measurement runs in a child interpreter that runs this file::

    python benchmarks/peers.py JOB KWARGS_JSON   # a child: prints one record per line
    python benchmarks/peers.py                   # prints the installed peer versions
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = [
    "available",
    "crazyflow_closed_loop",
    "crazyflow_env",
    "crazyflow_rollout",
    "rotorpy_batched",
    "rotorpy_single_step",
]

DT = 1.0 / 500.0
"""Step [s] of every peer measurement (crazyflow's ``freq=500``)."""

_SCRIPT = str(Path(__file__).resolve())
"""This file, which a child interpreter runs (``python peers.py JOB KWARGS_JSON``)."""
_MARK = "QUADSIM-BENCH-RECORD "
"""Prefix of the result lines a child prints (crazyflow's imports print to stdout too)."""


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
    interpreter (``sys.executable`` running this file, same virtualenv, ``JAX_ENABLE_X64=0``),
    which also keeps crazyflow's compiled programs and buffers out of the caller's JAX runtime.

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
    got = _run_child("rollout", dict(n=n, steps=steps, repeats=repeats))
    return float(got[-1]["drone_steps_per_s"])


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


# -- the child interpreter; crazyflow's closed loop and Gymnasium environment (closed_loop.py) ----


def _child_env() -> dict[str, str]:
    return {**os.environ, "SCIPY_ARRAY_API": "1", "JAX_ENABLE_X64": "0"}


def _run_child(job: str, kwargs: dict, on_record: Callable[[dict], None] | None = None) -> list:
    """Run ``job`` (a name in :func:`_child_main`) in a child interpreter; its records, in order.

    The child prints one JSON record per measurement as soon as it has it; ``on_record`` sees
    each one then (progress). Its stderr (MJX's import warnings, compiler chatter) goes to a
    temporary file and is quoted only when the child fails.

    Raises:
        RuntimeError: If the child exits with an error.
    """
    import tempfile

    records = []
    with tempfile.TemporaryFile("w+") as err:
        cmd = [sys.executable, _SCRIPT, job, json.dumps(kwargs)]
        with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True,
                              env=_child_env()) as proc:  # fmt: skip
            assert proc.stdout is not None
            for line in proc.stdout:
                if line.startswith(_MARK):
                    rec = json.loads(line[len(_MARK):])
                    records.append(rec)
                    if on_record is not None:
                        on_record(rec)
            code = proc.wait()
        if code != 0:
            err.seek(0)
            tail = err.read()[-2000:]
            raise RuntimeError(f"crazyflow {job} benchmark failed (exit {code}):\n{tail}")
    return records


def _child_main(job: str, kwargs: dict) -> None:
    """Body of the child interpreter: run a job and print its records as they come."""
    fn = {"rollout": _crazyflow_rollout_here, "closed_loop": _crazyflow_closed_loop_here,
          "env": _crazyflow_env_here}[job]  # fmt: skip
    for rec in fn(**kwargs):
        print(_MARK + json.dumps(rec), flush=True)


def _crazyflow_rollout_here(n: int, steps: int, repeats: int) -> Iterator[dict]:
    """The record of :func:`crazyflow_rollout` (a generator, as the child's jobs are)."""
    yield {"n": n, "steps": steps, "drone_steps_per_s": _crazyflow_here(n, steps, repeats)}


def crazyflow_closed_loop(
    sizes: list[int], seconds: float = 0.4, repeats: int = 5,
    modes: tuple[str, ...] = ("loop", "held", "scan"),
    on_record: Callable[[dict], None] | None = None,
) -> list[dict]:  # fmt: skip
    """Closed-loop drone-steps per second of crazyflow's Mellinger state controller.

    Configuration, per ``n`` in ``sizes``: ``Sim(n_worlds=n, n_drones=1, drone=cf2x_L250,
    dynamics=first_principles, control=state, integrator=rk4, freq=500, state_freq=500,
    attitude_freq=500, force_torque_freq=500)`` on JAX's default backend, float32. Every step
    runs the whole Mellinger cascade (position -> attitude -> force/torque -> rotor speeds) and
    the RK4 first-principles plant with rotor dynamics. Drones start on the reference, at hover
    rotor speed; the reference is quadsim's :class:`~quadsim.loop.trajectories.Circle` (1 m radius,
    1 m/s, 1 m up) as crazyflow's 16-entry state command ``[pos, vel, acc, quat(yaw), 0]``.

    Modes (each timed on the same ``Sim``):

    * ``loop``: the per-step public API, ``sim.state_control(cmd_k); sim.step()`` in a Python
      loop; the commands are device arrays made beforehand.
    * ``held``: ``sim.state_control(cmd_0); sim.step(T)``, one jitted ``lax.scan`` of ``T``
      steps with the setpoint held (not a moving reference: an upper bound of crazyflow's
      speed on this workload).
    * ``scan``: the moving reference inside one jitted ``lax.scan`` over a ``(T, 16)`` table of
      commands, built from crazyflow's functional API (``functional.state_control`` then the
      sim's own jitted one-step function).

    ``T`` comes from a probe so one timed run lasts about ``seconds``; a new ``T`` recompiles
    (untimed: two warm-up calls). Every timed run starts from the same initial data. Runs in a
    child interpreter (see :func:`crazyflow_rollout`).

    Args:
        sizes: Drone counts (worlds of one drone).
        seconds: Target wall time of one timed run.
        repeats: Timed runs per mode; the median is reported.
        modes: Subset of ``("loop", "held", "scan")``.
        on_record: Called with each record as it arrives.

    Returns:
        Records ``{"n", "mode", "steps", "drone_steps_per_s", "runs", "build_s"}`` (``runs``:
        the rate of every timed run).

    Raises:
        RuntimeError: If the child process fails.
    """
    kwargs = dict(sizes=list(sizes), seconds=seconds, repeats=repeats, modes=list(modes))
    return _run_child("closed_loop", kwargs, on_record)


def _circle_commands(steps: int) -> Any:
    """State commands of crazyflow, ``(steps, 16)`` float32 of the benchmark circle at 500 Hz."""
    import numpy as np

    from quadsim.loop.trajectories import Circle

    ref = Circle(radius=1.0, speed=1.0, center=(0.0, 0.0, 1.0))(np.arange(steps) * DT)
    out = np.zeros((steps, 16), np.float32)
    out[:, 0:3], out[:, 3:6], out[:, 6:9] = ref.pos, ref.vel, ref.acc
    yaw = np.broadcast_to(np.asarray(ref.yaw, np.float64), (steps,))
    out[:, 11], out[:, 12] = np.sin(yaw / 2), np.cos(yaw / 2)  # quaternion xyzw of the yaw
    return out


def _hover_rpm(params: Any) -> float:
    """Hover rotor speed of crazyflow [RPM]: ``k0 + k1 w + k2 w² = m g / 4``."""
    import numpy as np

    k0, k1, k2 = np.asarray(params.rpm2thrust, np.float64).reshape(-1)[:3]
    f = float(np.asarray(params.mass).reshape(-1)[0]) * -float(params.gravity_vec[2]) / 4
    return (-k1 + math.sqrt(k1 * k1 - 4 * k2 * (k0 - f))) / (2 * k2)


def _crazyflow_closed_loop_here(sizes: list[int], seconds: float, repeats: int,
                                modes: list[str]) -> Any:  # fmt: skip
    """In-process body of :func:`crazyflow_closed_loop` (a generator of records)."""
    for n in sizes:
        yield from _crazyflow_closed_loop_n(n, seconds, repeats, modes)


def _crazyflow_closed_loop_n(n: int, seconds: float, repeats: int, modes: list[str]) -> Any:
    """The records of :func:`crazyflow_closed_loop` for ``n`` drones."""
    import jax
    import jax.numpy as jnp
    from crazyflow import Control, Drone, Dynamics, Sim
    from crazyflow.sim import functional
    from crazyflow.sim.integration import Integrator

    t0 = time.perf_counter()
    hz = round(1 / DT)
    sim = Sim(
        n_worlds=n, n_drones=1, drone=Drone.cf2x_L250, dynamics=Dynamics.first_principles,
        control=Control.state, integrator=Integrator.rk4, freq=hz, state_freq=hz,
        attitude_freq=hz, force_torque_freq=hz, device=jax.default_backend(),
    )  # fmt: skip
    build = time.perf_counter() - t0

    def put(a: Any) -> Any:
        return jax.device_put(jnp.asarray(a, jnp.float32), sim.device)

    first = _circle_commands(1)[0]
    hover = _hover_rpm(sim.data.params)
    st = sim.data.states.replace(
        pos=put(jnp.broadcast_to(first[0:3], (n, 1, 3))),
        vel=put(jnp.broadcast_to(first[3:6], (n, 1, 3))),
        rotor_vel=put(jnp.full((n, 1, 4), hover)),
    )
    data0 = sim.data.replace(states=st)
    step1 = sim._step  # the sim's own jitted pipeline, (data, n_steps) -> data

    def body(data: Any, ref: Any) -> tuple[Any, None]:
        data = functional.state_control(data, jnp.broadcast_to(ref, (n, 1, 16)))
        return step1(data, n_steps=1), None

    scan = jax.jit(lambda data, refs: jax.lax.scan(body, data, refs)[0])

    def make(mode: str, steps: int) -> Callable[[], None]:
        table = _circle_commands(steps)
        if mode == "loop":
            cap = max(1, min(steps, (64 << 20) // (64 * n)))  # distinct commands kept (64 MB)
            cmds = [put(jnp.broadcast_to(table[k], (n, 1, 16))) for k in range(cap)]

            def run() -> None:
                for k in range(steps):
                    sim.state_control(cmds[k % cap])
                    sim.step()
                jax.block_until_ready(sim.data)

            return run
        if mode == "held":
            cmd = put(jnp.broadcast_to(table[0], (n, 1, 16)))

            def run() -> None:
                sim.state_control(cmd)
                sim.step(steps)
                jax.block_until_ready(sim.data)

            return run
        if mode != "scan":
            raise ValueError(f"crazyflow closed-loop mode must be loop, held or scan; got {mode!r}")
        refs = put(table)

        def run() -> None:
            sim.data = scan(sim.data, refs)
            jax.block_until_ready(sim.data)

        return run

    def timed(run: Callable[[], None]) -> float:
        sim.data = jax.tree.map(lambda a: a.copy() if isinstance(a, jax.Array) else a, data0)
        jax.block_until_ready(sim.data)
        t = time.perf_counter()
        run()
        return time.perf_counter() - t

    for mode in modes:
        steps = 20 if mode == "loop" else 50
        run = make(mode, steps)
        timed(run)
        timed(run)  # compilation, then a recompile for an uncommitted input, if any
        t = timed(run)
        if t < 0.5 * seconds:  # longer runs: a round number of steps lasting about `seconds`
            steps = int(float(f"{min(200_000, max(steps, seconds / max(t, 1e-9) * steps)):.2g}"))
            run = make(mode, steps)
            timed(run)
            if mode != "loop":
                timed(run)
        times = [timed(run) for _ in range(max(1, repeats))]
        yield {"n": n, "mode": mode, "steps": steps, "build_s": build,
               "drone_steps_per_s": n * steps / statistics.median(times),
               "runs": [n * steps / t for t in times]}  # fmt: skip


def crazyflow_env(
    num_envs: int, steps: int = 200, repeats: int = 5,
    configs: tuple[str, ...] = ("first_principles+rk4", "first_principles", "so_rpy"),
    on_record: Callable[[dict], None] | None = None,
) -> list[dict]:  # fmt: skip
    """Env-steps per second of crazyflow's ``DroneReachPos-v0`` vector environment.

    ``gymnasium.make_vec("DroneReachPos-v0", num_envs=num_envs, freq=100, dynamics=...,
    device=jax.default_backend())``: attitude actions (roll, pitch, yaw, collective thrust,
    crazyflow's default control) at 100 Hz on its 500 Hz simulation (5 physics steps per env
    step, the Mellinger attitude controller at 500 Hz), float32, drone cf2x_L250 (the env's
    default), autoreset. Configurations:

    * ``so_rpy``: the registered defaults (``so_rpy`` fitted attitude dynamics, Euler);
    * ``first_principles``: first-principles dynamics with rotor dynamics, crazyflow's default
      integrator (Euler, 1 derivative evaluation per step);
    * ``first_principles+rk4``: the same with the ``"integration"`` stage of the sim's step
      pipeline replaced by RK4 (the stage's documented replace hook): quadsim's workload.

    Random actions uniform in the action space, drawn beforehand and put on the device;
    ``steps`` env steps per timed run after 10 warm-up steps (which compile), the median of
    ``repeats`` runs, synchronised with ``jax.block_until_ready`` on the last step's outputs.
    Runs in a child interpreter (see :func:`crazyflow_rollout`).

    Returns:
        Records ``{"config", "num_envs", "steps", "env_steps_per_s", "runs", "substeps"}``.

    Raises:
        RuntimeError: If the child process fails.
    """
    kwargs = dict(num_envs=num_envs, steps=steps, repeats=repeats, configs=list(configs))
    return _run_child("env", kwargs, on_record)


def _crazyflow_env_here(num_envs: int, steps: int, repeats: int, configs: list[str]) -> Any:
    """In-process body of :func:`crazyflow_env` (a generator of records)."""
    import crazyflow.envs  # noqa: F401  (registers DroneReachPos-v0)
    import gymnasium as gym
    import jax
    import jax.numpy as jnp
    import numpy as np
    from crazyflow.sim.integration import Integrator
    from crazyflow.sim.sim import select_dynamics_fn, select_integrate_fn

    for config in configs:
        dynamics, _, integrator = config.partition("+")
        env = gym.make_vec("DroneReachPos-v0", num_envs=num_envs, freq=100, dynamics=dynamics,
                           device=jax.default_backend())  # fmt: skip
        sim = env.unwrapped.sim
        if integrator:
            stage = select_integrate_fn(Integrator(integrator), select_dynamics_fn(sim.dynamics))
            sim.step_pipeline["integration"] = stage
            sim.integrator = Integrator(integrator)
            sim.build_step_fn()
        env.reset(seed=0)
        rng = np.random.default_rng(0)
        low, high = env.action_space.low, env.action_space.high
        actions = [jax.device_put(jnp.asarray(rng.uniform(low, high).astype(np.float32)),
                                  sim.device) for _ in range(steps)]  # fmt: skip
        out = None
        for a in actions[:10]:
            out = env.step(a)
        jax.block_until_ready(out)

        def run(actions: list = actions, env: Any = env) -> None:
            out = None
            for a in actions:
                out = env.step(a)
            jax.block_until_ready(out)

        times = []
        for _ in range(max(1, repeats)):
            t = time.perf_counter()
            run()
            times.append(time.perf_counter() - t)
        yield {"config": config, "num_envs": num_envs, "steps": steps,
               "substeps": int(env.unwrapped.n_substeps), "integrator": str(sim.integrator),
               "env_steps_per_s": num_envs * steps / statistics.median(times),
               "runs": [num_envs * steps / t for t in times]}  # fmt: skip
        env.close()


if __name__ == "__main__":
    if len(sys.argv) == 3:  # a child interpreter of _run_child
        _child_main(sys.argv[1], json.loads(sys.argv[2]))
    else:
        print("peers:", available())
