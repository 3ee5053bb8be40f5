r"""The compiled env step: one control step of every environment in one call into C.

A control step is ``S`` steps of the closed loop every runner traces,
:func:`quadsim.loop.closed_loop.closed_loop_step` (the loop's brain, then the plant: model,
integrator, world contacts and flags, the simulator's per-drone parameters as inputs), followed
by the episode's bookkeeping; traced once for one drone with CasADi ``SX`` symbols
(:class:`quadsim.physics._symbolic.SymArray`) and compiled by
:func:`quadsim.engines.native.compile_rollout` into a vectorised, multi-threaded step over all
environments:

.. math::

    a = \mathrm{clip}(u, -1, 1); \quad \text{for } j < S: \;
    y_{j+1} = \mathrm{loop\_step}(y_j, [w, a_j]); \quad
    \mathrm{observation}(x_S, a, \mathrm{ref}(t)), \; \mathrm{outcome}(\dots)

(NaN entries of ``u`` as 0: an action that holds a NaN flags the drone as faulted at the first
substep, so that the plant keeps its state, as :meth:`quadsim.app.envs.core.QuadCore._fault`),
where ``y`` is the loop step's column (plant state ``x``, world flags, brain state, clock,
command), ``w`` the control step's wind and ``a_j`` the action, or the previous one while
``j`` is below the latency. With the thrust levels the loop's controller is their inner loop
(:func:`quadsim.app.envs.actions.inner_control`, its memory the brain's controller state) and the
action its reference; ``rotor_speeds`` gives the loop its affine map's rotor command and no brain,
``pwm`` the rotor command of its PWM at the battery's voltage (held over the control step; the
battery drained after it at the rotors' power, :meth:`~quadsim.app.envs.actions.Pwm.drained`).
Then :func:`quadsim.app.envs.observation.observation` and :func:`quadsim.app.envs.reward.outcome`
at ``t = (steps + 1) Δt_control`` on the task's reference (the trajectory traced too). Nothing is
written twice: the NumPy reference path of :class:`~quadsim.app.envs.core.QuadCore` calls the same
functions (:func:`quadsim.app.envs.actions.inner_loop` is the same brain).

Compiled state of one environment (structure of arrays, environment index last, rows
:attr:`CompiledStep.rows`)::

    x = [the loop step's rows (:func:`~quadsim.loop.closed_loop.closed_loop_step`: plant state |
         world flags (5, with a world) | brain state (thrust levels: j, the inner loop's memory
         ctrl_<field>) | step (the clock) | cmd_rpm | cmd_wrench, saturated (thrust levels)) |
         steps | last_action (k) | battery_charge, battery_v (pwm) | rotor_est (N, with
         observe_rotors) | err_int (3, with
         observe_integral) | sensor parts (with sensors: each part's state leaves
         sensor_<name>_state..., sensor_held, sensor_<name>_fresh; :mod:`.compiled_sensing`) |
         obs (d) | reward | flag_terminated, flag_truncated, flag_crashed, flag_fault,
         flag_out_of_bounds, flag_tilted | pos_error]
    u = [action (k), unclipped | fresh | start deviations: pos, vel, rpy, ang_vel (3 each) |
         wind (3) | latency d (physics steps) | sensor_k (with sensors)]
    p = per-drone model parameters (if any; an empty input with sensors and none)
    z = with sensors: the parts' standard normals, then their reset twins, drawn in C

The rows from ``obs`` on are outputs of the step. ``fresh = 1`` starts a new episode instead of
stepping (the ``NEXT_STEP`` autoreset): the state becomes
:func:`quadsim.app.envs.starts.start_state` of the task's reference at ``t = 0`` plus the drawn
deviations, with hover rotor speeds, clear flags and inner memory, and the environment returns
its first observation (with the sensor parts' first reading), reward 0 and no flags. A second
compiled function recomputes only ``obs`` from the state (after other resets, which write their
starts into the selected columns), and the sensor rows of the environments with ``fresh = 1``
(those reset, whose first reading it takes at once). Python writes the actions (and the
deviations of the environments starting anew), makes one call, and copies the outputs out. Where
the time goes (float32, 1024 envs, one core): the call itself is all but some 25 µs of a step;
see docs/envs.md.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...engines.native import compile_rollout
from ...engines.state import check_unit_quat
from ...loop.brain import Periods
from ...loop.closed_loop import closed_loop_step, per_drone_params
from ...physics._symbolic import SymArray, symbolic
from ...physics.world import Status
from .actions import NAN_FAULT, init_inner, inner_control
from .compiled_sensing import SensorRows
from .observation import finite
from .observer import advance, integrate_error
from .reward import outcome
from .starts import start_state
from .tracing import Trace, cse, flat, traced_reference

__all__ = ["CompiledStep"]

INNER = init_inner()
"""One environment's inner-loop memory at a fresh episode (zeros; the thrust levels'
:class:`~quadsim.app.envs.actions.InnerState`): the controller state of the loop's step, rows
``ctrl_<field>`` of its brain state (:func:`quadsim.loop.brain.state_leaves`)."""
FLAGS = ("terminated", "truncated", "crashed", "fault", "out_of_bounds", "tilted")
"""The boolean outputs, rows ``flag_<name>`` in this order (contiguous)."""
START = ("pos", "vel", "rpy", "ang_vel")
"""The start deviations among the inputs (3 rows each, after ``fresh``), in this order."""
N_U_EXTRA = 4
"""Inputs after the start deviations: the world wind [m/s] (3) and the action latency in physics
steps (1) of the control step (:mod:`quadsim.app.envs.disturbances`; zeros without); with sensor
parts one more, ``sensor_k`` (:mod:`quadsim.app.envs.compiled_sensing`)."""


class CompiledStep:
    """The compiled step of a :class:`~quadsim.app.envs.core.QuadCore` (its ``compiled`` path).

    Args:
        core: The core (task, action level, substeps, weights, termination, truncation).
        sim: Its :class:`~quadsim.engines.sim.Simulator` (plant: model, per-drone parameters,
            integrator, world, dt, dtype); its current state is taken over.
        cache: A previous :class:`CompiledStep` of the same core whose compiled functions are
            reused when the per-drone parameter layout is the same (a new draw of values).

    Raises:
        NotImplementedError: If the plant is not a rotor-level quaternion model, the task's
            trajectory does not trace, or a sensor part does not
            (:mod:`quadsim.app.envs.compiled_sensing`).
    """

    def __init__(self, core: Any, sim: Any, cache: CompiledStep | None = None) -> None:
        system = sim.system
        if (system.attitude != "quat" or system.model == "wrench"
                or system.n_cmd != sim.drone.mixing_matrix.shape[1]):  # fmt: skip
            raise NotImplementedError(f"model {system.model!r} (the compiled env step needs a "
                                      "rotor-level quaternion model)")  # fmt: skip
        self.core, self.system, self.world = core, system, sim.world
        self.dtype = np.dtype(sim.dtype)
        self.n, self.k_act, self.substeps = core.n, core.act_dim, core.substeps
        varying, values = per_drone_params(system, sim.model_params)  # the loop step's p[3:]
        layout = tuple((name, idx) for name, idx, _ in varying)
        self.sensors = None if core.sensing is None else SensorRows(core.sensing)
        reuse = cache is not None and cache._key[0] == layout
        self._loop = cache._loop if reuse else self._loop_step(sim)
        loop_rows = self._loop[1]
        self.n_loop = max(r.stop for r in loop_rows.values())
        self.rows = self._layout(loop_rows)
        self.n_u = self.k_act + 1 + 3 * len(START) + N_U_EXTRA + (self.sensors is not None)
        self.n_x = max(s.stop for s in self.rows.values())
        self._template = self._fresh_column(sim)
        key = (layout, self._template.tobytes())
        if cache is not None and cache._key == key:
            self._step_fn, self._obs_fn = cache._step_fn, cache._obs_fn
        else:
            self._step_fn, self._obs_fn = self._compile(len(varying))
        self._key = key
        n, lanes = self.n, self._step_fn.lanes
        self.n_pad = -(-n // lanes) * lanes
        self._X = np.zeros((self.n_x, self.n_pad), self.dtype)
        self._U = np.zeros((self.n_u, self.n_pad), self.dtype)
        P = None
        if values is not None:
            P = np.empty((len(varying), self.n_pad), self.dtype)
            P[:, :n] = values
            P[:, n:] = P[:, n - 1 : n]
        self._P = P
        self._advance = self._step_fn.bind(self._X, self._U, P)
        self._refresh = self._obs_fn.bind(self._X, self._U, P)
        self._fresh = False
        self._take_state(sim)

    # -- layout and tracing -----------------------------------------------------------------------
    def _loop_step(self, sim: Any) -> tuple[Any, dict[str, slice]]:
        """The loop's one physics step for this plant and action level, and its rows: the step
        every runner traces (:func:`quadsim.loop.closed_loop.closed_loop_step`), with the inner
        loop (:func:`~quadsim.app.envs.actions.inner_control`) as its controller and the action
        as its reference, or without a brain, the rotor command as its input."""  # noqa: D205, D209
        level, args = self.core.level, (sim.dt, sim.integrator, self.dtype, sim.world)
        if level.inner_loop:
            c = level.consts
            F, rows, _ = closed_loop_step(self.system, sim.model_params, inner_control, c, None,
                                          c.alloc, *args, ctrl_state=INNER, command="wrench",
                                          periods=Periods(), ref_inputs=self.k_act)  # fmt: skip
        else:
            F, rows, _ = closed_loop_step(self.system, sim.model_params, None, None, None, None,
                                          *args)  # fmt: skip
        return F, rows

    def _layout(self, loop_rows: dict[str, slice]) -> dict[str, slice]:
        """The loop step's rows, then the episode's (module docstring)."""
        rows, at = dict(loop_rows), self.n_loop
        sizes = [("steps", 1), ("last_action", self.k_act)]
        if self.core.level.name == "pwm":  # its batteries
            sizes += [("battery_charge", 1), ("battery_v", 1)]
        if self.core.observe_rotors:
            sizes.append(("rotor_est", self.core.n_rotors))
        if self.core.observe_integral:
            sizes.append(("err_int", 3))
        if self.sensors is not None:
            sizes += self.sensors.layout()
        sizes += [("obs", self.core.obs_dim),
                  ("reward", 1), *(("flag_" + f, 1) for f in FLAGS), ("pos_error", 1)]  # fmt: skip
        for name, size in sizes:
            rows[name], at = slice(at, at + size), at + size
        return rows

    def _compile(self, n_varying: int) -> tuple[Any, Any]:
        """The compiled step and the compiled observation (module docstring), built from one
        trace (:class:`Trace`) of an environment's column."""  # noqa: D205, D209
        import casadi as cs

        sensors = self.sensors
        tr = Trace(self, n_varying, 0 if sensors is None else 2 * sensors.n_z)
        G = cs.Function("quadsim_env_observe", tr.inputs,
                        [cse(cs.vertcat(*self._observe_column(tr)))])  # fmt: skip
        F = cs.Function("quadsim_env_step", tr.inputs,
                        [cse(cs.vertcat(*self._step_column(tr)))])  # fmt: skip
        noise = () if sensors is None else sensors.noise
        return (compile_rollout(F, self.dtype, noise=noise),
                compile_rollout(G, self.dtype, noise=noise))  # fmt: skip

    def _observe_column(self, tr: Trace) -> list:
        """The column of the observation of the current state (after resets): only the ``obs``
        rows change, and with sensor parts those of the environments with ``fresh = 1`` (reset
        now): their first reading."""  # noqa: D205, D209
        import casadi as cs

        xs, rows = tr.xs, self.rows
        x, steps = tuple(xs[: tr.nx]), xs[rows["steps"].start]
        obs = tr.observe(x, steps, tr.sym("last_action"), tr.rotor_est(), tr.error_integral())[0]
        out = list(xs)
        obs = flat(obs, self.dtype)
        if self.sensors is not None:
            span, fresh = self.sensors.span(rows), tr.U[self.k_act] > 0.5
            read = self.sensors.read(tr, x, fresh, steps, tr.U[self.n_u - 1])
            out[span] = [cs.if_else(fresh, a, b) for a, b in zip(read, xs[span], strict=True)]
            obs += flat(finite(symbolic(out[rows["sensor_held"]], self.dtype)), self.dtype)
        out[rows["obs"]] = obs
        return out

    def _step_column(self, tr: Trace) -> list:
        """The column after the control step; an environment with ``fresh = 1`` (``NEXT_STEP``
        autoreset) starts anew instead: its start state, first observation, reward 0 and no
        flags."""  # noqa: D205, D209
        import casadi as cs

        dtype, U, ku, rows = self.dtype, tr.U, self.k_act, self.rows
        ok = [U[i] <= math.inf for i in range(ku)]  # False for NaN only (CasADi folds u == u)
        good = ok[0]
        for k in ok[1:]:
            good = cs.logic_and(good, k)
        tr.nan = cs.logic_not(good)  # a NaN action: a fault (core.QuadCore._fault)
        a = tr.xp.clip(symbolic([cs.if_else(k, U[i], 0.0) for i, k in enumerate(ok)], dtype),
                       -1.0, 1.0)  # NaN entries as 0 (actions.clean_action)
        tr.fresh = U[ku] > 0.5
        dev = [U[ku + 1 + i] for i in range(3 * len(START))]
        tr.new = self._start_column(self.core, tr.xp, dev)
        col, est = self._substeps(tr, a)
        clock = rows["step"].start  # the simulator's clock runs on through a new episode
        col = [*tr.keep(col[:clock], slice(0, clock)), col[clock],
               *tr.keep(col[clock + 1:], slice(clock + 1, self.n_loop))]
        x = tuple(col[: tr.nx])
        st = Status(*(col[rows[f].start] for f in Status._fields)) if self.world else None
        return col + self._episode_rows(tr, a, x, st, est)

    def _substeps(self, tr: Trace, a: SymArray) -> tuple[list, Any]:
        """The physics substeps of a control step with the action ``a``: each the loop's step
        (:meth:`_loop_step`) with the action (the inner loop's reference) or its rotor command,
        the previous action's until the latency, in the control step's wind; the rotor-speed
        observer fed with the commands.

        Returns:
            ``(column, est)``: the loop step's rows after the last substep (plant state, world
            flags, brain state, clock, command), and the rotor-speed estimate (``None`` unless
            observed).
        """  # noqa: D205
        import casadi as cs

        F, _ = self._loop
        dtype, U, level = self.dtype, tr.U, self.core.level
        w0 = self.k_act + 1 + 3 * len(START)
        wind, delay, prev = [U[w0], U[w0 + 1], U[w0 + 2]], U[w0 + 3], tr.sym("last_action")
        if level.inner_loop:  # the action is the inner loop's reference
            now, before = flat(a, dtype), flat(prev, dtype)
        elif level.name == "pwm":  # the rotor command at the battery's voltage, held
            v = tr.sym("battery_v")[0]
            now = flat(level.rotor_command(a, v), dtype)
            before = flat(level.rotor_command(prev, v), dtype)
        else:  # the action's rotor command is the step's input
            now = flat(level.command(a, None), dtype)
            before = flat(level.command(prev, None), dtype)
        p = cs.vertcat(0.0, 0.0, 0.0, *[tr.P[i] for i in range(tr.P.numel())])
        col, est = cs.vertcat(*self._flag_nan(tr)), tr.rotor_est()
        cmd = self.rows["cmd_rpm"]
        for j in range(self.substeps):
            late = delay > j
            u = [cs.if_else(late, b, c) for b, c in zip(before, now, strict=True)]
            col = F(col, cs.vertcat(*wind, *u), p)
            if est is not None:  # fed with the inner loop's command, else the action as sent
                sent = [col[i] for i in range(cmd.start, cmd.stop)] if level.inner_loop else now
                est = advance(est, symbolic(list(sent), dtype), tr.observer)
        return [col[i] for i in range(self.n_loop)], est

    def _flag_nan(self, tr: Trace) -> list:
        """The loop step's rows at the start of the control step, a drone with a NaN action
        flagged as faulted at its first substep (the simulator then keeps its state, as the
        reference path's :meth:`~quadsim.app.envs.core.QuadCore._fault`; without a world
        nothing is flagged)."""  # noqa: D205, D209
        import casadi as cs

        col, rows = list(tr.xs[: self.n_loop]), self.rows
        if self.world is None:
            return col
        fs, fc = rows["fault_step"].start, rows["fault_code"].start
        clear = cs.logic_and(col[fs] < 0.0, col[rows["crashed"].start] < 0.5)
        new = cs.logic_and(tr.nan, clear)
        col[fs] = cs.if_else(new, col[rows["step"].start], col[fs])
        col[fc] = cs.if_else(new, float(NAN_FAULT), col[fc])
        return col

    def _episode_rows(self, tr: Trace, a: SymArray, x: tuple, st: Any, est: Any) -> list:
        """The rows from ``steps`` on after the step to ``x`` (flags ``st``) with the action
        ``a``: steps, last action, observer states, observation, reward, flags, position
        error."""  # noqa: D205, D209
        import casadi as cs

        core, rows, dtype, xp, fresh = self.core, self.rows, self.dtype, tr.xp, tr.fresh
        steps = cs.if_else(fresh, 0.0, tr.xs[rows["steps"].start] + 1)
        sensed = [] if self.sensors is None else self.sensors.read(tr, x, fresh, steps,
                                                                   tr.U[self.n_u - 1])
        last = symbolic(tr.keep(flat(a, dtype), rows["last_action"]), dtype)
        battery = []
        if "battery_v" in rows:  # drained over the control step at the rotors' power
            q, v = core.level.drained(tr.sym("battery_charge")[0],
                                      symbolic(x[tr.sl["rotor_vel"]], dtype), core.control_dt)
            span = slice(rows["battery_charge"].start, rows["battery_v"].stop)
            battery = tr.keep([*flat(q, dtype), *flat(v, dtype)], span)
        if est is not None:
            est = symbolic(tr.keep(flat(est, dtype), rows["rotor_est"]), dtype)
        integral = int0 = tr.error_integral()
        if int0 is not None:  # after the step, with the error at the new time
            t1 = symbolic([steps * core.control_dt], dtype)[0]
            e1 = symbolic(x[tr.sl["pos"]], dtype) - traced_reference(core.task, t1, xp)[0]
            integral = integrate_error(int0, e1, core.control_dt)
            integral = symbolic(tr.keep(flat(integral, dtype), rows["err_int"]), dtype)
        obs, e_p, e_v, R_zz = tr.observe(x, steps, last, est, integral)
        never = xp.zeros(()) > 0.0
        crashed = never if st is None else SymArray(st.crashed, dtype) > 0.5
        fault = never if st is None else SymArray(st.fault_step, dtype) >= 0.0
        fault = fault | (SymArray(tr.nan, dtype) > 0.5)  # a NaN action (also without a world)
        w = symbolic(x[tr.sl["ang_vel"]], dtype)
        reward, term, oob, tilted, dist = outcome(e_p, e_v, w, last, tr.sym("last_action"),
                                                  crashed, fault, R_zz, core.weights,
                                                  core.termination)  # fmt: skip
        mx = core.max_episode_steps
        trunc = never if mx is None else SymArray(steps, dtype) >= float(mx)
        held = []
        if self.sensors is not None:  # the readings end the observation
            at, r = self.sensors.span(rows).start, rows["sensor_held"]
            held = flat(finite(symbolic(sensed[r.start - at : r.stop - at], dtype)), dtype)
        out = [steps, *last.entries(), *battery, *(flat(est, dtype) if est is not None else ()),
               *(flat(integral, dtype) if integral is not None else ()), *sensed,
               *flat(obs, dtype), *held]
        for f in (reward, term, trunc, crashed, fault, oob, tilted):
            out += [cs.if_else(fresh, 0.0, e) for e in flat(f, dtype)]
        return out + flat(dist, dtype)

    def _start_column(self, core: Any, xp: Any, dev: list) -> list:
        """The compiled state of a new episode (up to ``steps``) from the traced deviations
        ``dev`` (:data:`START`), around the task's reference at ``t = 0``."""  # noqa: D205, D209
        import casadi as cs

        dtype, rows = self.dtype, self.rows
        d = {name: symbolic(dev[3 * i : 3 * i + 3], dtype) for i, name in enumerate(START)}
        ref_pos, ref_vel = (np.asarray(r, np.float64).reshape(-1, 3)[0]
                            for r in core.task.reference(np.zeros(1)))  # fmt: skip
        state = start_state(d["pos"] + ref_pos, d["rpy"], d["vel"] + ref_vel, d["ang_vel"],
                            core.floor)  # fmt: skip
        col: list = [cs.SX(float(v)) for v in self._template]
        for name, value in zip(("pos", "quat", "vel", "ang_vel"), state, strict=True):
            col[rows[name]] = flat(value, dtype)
        return col

    # -- state ------------------------------------------------------------------------------------
    def _fresh_column(self, sim: Any) -> np.ndarray:
        """The compiled state of a fresh episode (plant fields filled in by :meth:`reset`)."""
        col = np.zeros(self.n_x)
        if "rotor_vel" in self.rows:
            col[self.rows["rotor_vel"]] = sim.hover_rpm
        if "rotor_est" in self.rows:
            col[self.rows["rotor_est"]] = self.core.observer.hover
        if "battery_v" in self.rows:  # the batteries at their start charge
            col[self.rows["battery_charge"]] = self.core.level.q0
            col[self.rows["battery_v"]] = self.core.level.start_voltage()
        if self.world is not None:
            col[self.rows["crash_time"]] = math.nan
            col[self.rows["fault_step"]] = -1.0
        if self.sensors is not None:
            self.sensors.fill(col, self.rows)
        return col

    def _take_state(self, sim: Any) -> None:
        """Load the simulator's state, flags and clock (inner memory, steps, actions: zero)."""
        n, X, rows = self.n, self._X, self.rows
        X[:, :n] = self._template[:, None]
        for name, _ in self.system.fields:
            X[rows[name], :n] = np.asarray(getattr(sim.state, name), np.float64).T
        status = sim.status
        if self.world is not None and status is not None:
            for name, v in zip(status._fields, status, strict=True):
                X[rows[name], :n] = np.asarray(v, np.float64)
        self._clock = int(sim.k)
        X[rows["step"], :n] = self._clock
        X[:, n:] = X[:, n - 1 : n]
        self._stale, self._dirty = True, False

    def reset(self, idx: np.ndarray, full: bool, fields: dict, check: Any = ()) -> None:
        """Start new episodes in the columns ``idx`` (``full``: also restart the clock).

        Args:
            idx: Environment indices.
            full: Restart the clock at 0 (a full reset of the simulator).
            fields: ``pos``, ``quat``, ``vel``, ``ang_vel``, each broadcast to ``(m, size)``.
            check: Names of the fields to validate (given by the user, not drawn).

        Raises:
            ValueError: A checked value is not finite or a quaternion is not a unit one (as
                :meth:`quadsim.engines.sim.Simulator.reset_drones`).
        """
        where = "reset" if full else "reset_drones"
        m, rows, n = idx.size, self.rows, self.n
        if full:
            self._clock = 0
        block = np.repeat(self._template[:, None], m, axis=1)
        block[rows["step"]] = self._clock
        for name, value in fields.items():
            r = rows[name]
            if name in check:
                v = np.broadcast_to(np.asarray(value, dtype=np.float64), (m, r.stop - r.start))
                if not np.all(np.isfinite(v)):
                    raise ValueError(f"{where}: {name} must be finite")
                if name == "quat":
                    check_unit_quat(v, idx, where)
                block[r] = v.T
            else:
                block[r] = np.transpose(value)
        X = self._X
        if m == n:
            X[:, :n] = block
            X[:, n:] = block[:, -1:]
        else:
            X[:, idx] = block
            if full:  # every other environment restarts its clock too
                X[rows["step"]] = 0.0
        self._stale, self._dirty = True, True
        if self.sensors is not None:  # their first reading, now: the refresh with fresh = 1
            U, k = self._U, self.k_act
            U[k] = 0.0
            U[k, idx] = 1.0
            self._read(self._refresh)
            U[k] = 0.0
            self._fresh, self._stale = False, False

    def steps(self) -> np.ndarray:
        """Control steps of the current episodes ``(n,)``."""
        return self._X[self.rows["steps"].start, : self.n].astype(np.int64)

    def last_action(self) -> np.ndarray:
        """Last actions ``(n, k)`` (float64)."""
        return self._X[self.rows["last_action"], : self.n].T.astype(np.float64)

    def error_integral(self) -> np.ndarray:
        """The position-error integrals ``(n, 3)`` [m s] (float64)."""
        return self._X[self.rows["err_int"], : self.n].T.astype(np.float64)

    def battery(self) -> tuple[np.ndarray, np.ndarray]:
        """The pwm level's batteries ``(charge (n,), voltage (n,) [V])`` (float64)."""
        X, rows, n = self._X, self.rows, self.n
        return (X[rows["battery_charge"].start, :n].astype(np.float64),
                X[rows["battery_v"].start, :n].astype(np.float64))  # fmt: skip

    def rotor_estimate(self) -> np.ndarray:
        """The observer's rotor speeds ``(n, N)`` [RPM] (float64)."""
        return self._X[self.rows["rotor_est"], : self.n].T.astype(np.float64)

    def sync(self, sim: Any) -> None:
        """Bring the simulator's state, flags and clock up to the compiled states."""
        if not self._dirty:
            return

        X, rows, n = self._X, self.rows, self.n
        fields = {name: X[rows[name], :n].T.astype(np.float64) for name, _ in self.system.fields}
        sim.k = self._clock
        sim.state = type(sim.state)(**fields)
        if self.world is not None:
            f = {name: X[rows[name].start, :n] for name in Status._fields}
            sim.status = Status(landed=f["landed"] > 0.5, crashed=f["crashed"] > 0.5,
                                crash_time=f["crash_time"].astype(np.float64),
                                fault_step=f["fault_step"].astype(np.int32),
                                fault_code=f["fault_code"].astype(np.int32))  # fmt: skip
        self._dirty = False

    # -- the hot path -----------------------------------------------------------------------------
    def observe(self) -> np.ndarray:
        """Observations ``(n, obs_dim)`` float32 of the current states."""
        if self._stale:
            self._refresh()
            self._stale = False
        return np.ascontiguousarray(self._X[self.rows["obs"], : self.n].T, dtype=np.float32)

    def step(self, action: Any, fresh: np.ndarray | None = None, start: Any = None,
             wind: Any = None, delay: Any = None) -> tuple[
            np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict]:  # fmt: skip
        """One control step of every environment (:meth:`quadsim.app.envs.core.QuadCore.step`).

        Args:
            action: Actions ``(n, k)``.
            fresh: Boolean mask ``(n,)`` of environments that start a new episode instead
                (they return their first observation, reward 0 and all flags false), or
                ``None``.
            start: Their drawn deviations from the reference at ``t = 0``
                (:class:`quadsim.loop.initial.Start` with ``pos``, ``vel``, ``rpy``, ``ang_vel``,
                each ``(m, 3)``, ``m`` the number of ``fresh`` environments).
            wind: World wind of the control step ``(n, 3)`` [m/s], or ``None`` (still air).
            delay: Action latency ``(n,)`` [physics steps], or ``None`` (none).
        """
        n, rows, X, U, k = self.n, self.rows, self._X, self._U, self.k_act
        a = np.asarray(action)
        if a.shape != (n, k):
            a = a.reshape(n, k)
        U[:k, :n] = a.T
        w0 = k + 1 + 3 * len(START)
        U[w0 : w0 + 3, :n] = 0.0 if wind is None else np.asarray(wind).T
        U[w0 + 3, :n] = 0.0 if delay is None else delay
        if fresh is not None:
            idx = np.flatnonzero(fresh)
            U[k, :n] = fresh
            U[k + 1 : w0, idx] = np.concatenate([getattr(start, f) for f in START], axis=1).T
            self._fresh = True
        elif self._fresh:
            U[k] = 0.0
            self._fresh = False
        if self.sensors is None:
            self._advance()
        else:
            self.sensors.sensing.advance()  # the read at the end of the step
            self._read(self._advance)
        self._clock += self.substeps
        self._stale, self._dirty = False, True
        obs = np.ascontiguousarray(X[rows["obs"], :n].T, dtype=np.float32)
        reward = X[rows["reward"].start, :n].astype(np.float64)
        f0 = rows["flag_" + FLAGS[0]].start
        term, trunc, crashed, fault, oob, tilted = X[f0 : f0 + len(FLAGS), :n] > 0.5
        info = {"crashed": crashed, "fault": fault, "out_of_bounds": oob, "tilted": tilted,
                "pos_error": X[rows["pos_error"].start, :n].astype(np.float64),
                "time": X[rows["steps"].start, :n].astype(np.float64)
                * self.core.control_dt}  # fmt: skip
        if "battery_v" in rows:
            info["battery_v"] = X[rows["battery_v"].start, :n].astype(np.float64)
        if self.sensors is not None:
            info["sensors"] = self.sensors.readings(X, rows, n)
        return obs, reward, term, trunc, info

    def _read(self, call: Any) -> None:
        """Make the compiled ``call`` with the sensor parts' normals: their seed, and their step
        count ``k`` (also the input ``sensor_k``)."""  # noqa: D205, D209
        sensing = self.sensors.sensing
        self._U[self.n_u - 1] = sensing.k
        call(1, sensing.seed, sensing.k)
