r"""``quadsim ros2``: a scenario's drones as a ROS 2 node over DDS (seed 001's node).

Every physics step (the scenario's ``sim.dt``: 200 Hz for seed 001) the node

1. takes the commands that arrived (each checked; a bad one is counted, dropped and logged),
2. falls back, for a drone whose rotor-speed or attitude commands stopped for longer than the
   timeout, to what ``--on-timeout`` says (``hover`` where it is, ``land``, ``cut`` the motors),
3. runs the closed loop's step (:class:`~quadsim.app.ros2.live.LiveLoop`: sensors, estimator,
   controller, then the plant with the command of each drone's mode),
4. publishes, stamped with the simulated time ``t_k`` of the state it describes (the state
   before the step, as a row of the log): per drone ``/<ns>/<drone>/odom``
   (``nav_msgs/Odometry``), ``rotor_speeds`` (``sensor_msgs/JointState``, rad/s) and
   ``reference`` (``geometry_msgs/PoseStamped``), and every sensor part's messages when its
   reading is new (:meth:`quadsim.loop.parts.Sensor.ros2`: the IMU's ``imu``,
   ``sensor_msgs/Imu``, at the IMU's rate); all drones on ``/tf``; with ``--rate max``
   ``/clock`` (``rosgraph_msgs/Clock``),
5. appends the sample to the log (the same parts, ``trajectory.parquet`` and ``summary.json``
   as ``quadsim fly``; ``summary.json`` adds ``ros2``: pacing and command counts).

Commands (per drone, reliable QoS): ``cmd_rotor_speeds`` (``sensor_msgs/JointState``: one
``velocity`` per rotor in rad/s, ``name`` empty or ``rotor_0`` ...; the seed's interface),
``cmd_pose`` (``geometry_msgs/PoseStamped`` in ``world``: the onboard controller holds that
position and yaw), ``cmd_attitude`` (``mavros_msgs/AttitudeTarget``: roll and pitch of
``orientation``, yaw rate ``body_rate.z``, ``thrust`` 0..1 of the drone's collective range) and
``cmd_mode`` (``std_msgs/String``: ``auto`` back to the scenario's reference, ``hover``,
``land``, ``cut``). Without commands the drones fly the scenario's controller and reference.

**Pacing.** ``--rate real``: tick ``k`` is due at ``t_0 + k dt`` of the monotonic clock; the
node sleeps until then (the last 0.3 ms spinning) and measures the lateness of every tick
(its start minus its due time) and the time its work takes (commands, step, publishing),
reported at the end (median, p99, max; ``summary.json`` ``ros2.lateness_ms`` and
``ros2.tick_work_ms``). A tick that overruns is not skipped: the next ones catch up. ``--rate
max``: as fast as it goes, simulated time on ``/clock``.

SIGINT, SIGTERM and SIGHUP (a dropped SSH session) stop the node at the end of a tick; the log
is merged and the summary written (exit 0: the normal end of a node); a bad scenario or option
exits 2 with one line, and leaves the output folder as it was.
"""

from __future__ import annotations

import gc
import math
import sys
import time
from typing import Any

import numpy as np

from ...loop.brain import part_periods, sensor_parts
from ...loop.records import log_record, numpy_state
from ...loop.sensing import due
from ...physics.rotation import rotate_inverse, to_euler
from ..signals import stop_flag
from . import dds
from .commands import IGNORE_YAW_RATE, check_attitude, check_pose, check_rotor_speeds
from .live import LiveLoop, yaw_of

__all__ = ["ON_TIMEOUT", "Background", "Ros2Node"]

ON_TIMEOUT = ("hover", "land", "cut")
"""What a drone does when its rotor-speed or attitude commands stop (``--on-timeout``)."""

_SPIN_S = 0.0003  # the end of a wait is spun, not slept (sleep overshoots by ~0.1 ms)
_SWITCH_S = 0.0002  # the interpreter's thread switch interval while the node runs
_LOG_FIRST = 10  # log lines per kind of bad command before only every 100th is logged


class Ros2Node:
    """The node: the scenario's loop, its publishers and subscribers, pacing and the log.

    Args:
        objs: The assembled scenario (:func:`quadsim.app.scenario.build`).
        namespace: ROS 2 namespace of the topics (``quadsim``).
        domain_id: DDS domain (0..232).
        network: Network interface for DDS, or ``None``: loopback only (:mod:`.dds`).
        rate: ``"real"`` (paced at ``sim.dt``) or ``"max"`` (as fast as possible, ``/clock``).
        timeout: Seconds of simulated time without rotor-speed or attitude commands before a
            drone falls back (> 0).
        on_timeout: :data:`ON_TIMEOUT`.
        log: Called with each log line (default: stderr).
        jit: :class:`~quadsim.app.ros2.live.LiveLoop`'s ``jit``.
    """

    def __init__(
        self,
        objs: Any,
        *,
        namespace: str = "quadsim",
        domain_id: int = 0,
        network: str | None = None,
        rate: str = "real",
        timeout: float = 0.5,
        on_timeout: str = "hover",
        log: Any = None,
        jit: bool | None = None,
    ) -> None:
        if rate not in ("real", "max"):
            raise ValueError(f"--rate must be 'real' or 'max'; got {rate!r}")
        if not (isinstance(timeout, int | float) and math.isfinite(timeout) and timeout > 0):
            raise ValueError(f"--timeout must be a positive number of seconds; got {timeout!r}")
        if on_timeout not in ON_TIMEOUT:
            raise ValueError(f"--on-timeout must be one of {ON_TIMEOUT}; got {on_timeout!r}")
        self.ns = namespace.strip("/")
        dds.topic(self.ns)  # validates the namespace
        self.rate, self.timeout, self.on_timeout = rate, float(timeout), on_timeout
        self.log = log or (lambda s: print(f"quadsim ros2: {s}", file=sys.stderr, flush=True))
        self.loop = LiveLoop(objs, jit=jit)
        self.n = self.loop.sim.n
        self.names = [f"d{i}" for i in range(self.n)]
        self.participant = dds.open_participant(domain_id, network)
        self.network = network
        self.domain_id = domain_id
        self._make_endpoints()
        self.counts = {"received": 0, "dropped": 0, "timeouts": 0}
        self.dropped_by: dict[str, int] = {}
        self.last_cmd = np.full(self.n, -np.inf)  # sim time of the last rpm/attitude command
        self.lateness: list[float] = []
        self.work: list[float] = []  # seconds each tick took (commands, step, publishing)
        self.ticks = 0
        self._make_templates()

    # ------------------------------------------------------------------ endpoints

    def _make_endpoints(self) -> None:
        from cyclonedds.pub import DataWriter
        from cyclonedds.sub import DataReader
        from cyclonedds.topic import Topic

        from . import msgs as m
        from .encode import part_topics

        dp = self.participant
        topics: dict[str, Any] = {}

        def tp(name: str, typ: type) -> Any:
            if name not in topics:
                topics[name] = Topic(dp, dds.dds_topic(name), typ)
            return topics[name]

        self.topics: dict[str, str] = {}
        self.pub: list[dict[str, Any]] = []
        self.sub: list[dict[str, Any]] = []
        # per drone: (where the endpoints go, writer or reader, QoS, (leaf topic, type) ...)
        kinds = (
            (self.pub, DataWriter, dds.sensor_qos, (("odom", m.Odometry),
             ("rotor_speeds", m.JointState), ("reference", m.PoseStamped))),
            (self.sub, DataReader, dds.command_qos, (("cmd_rotor_speeds", m.JointState),
             ("cmd_pose", m.PoseStamped), ("cmd_attitude", m.AttitudeTarget),
             ("cmd_mode", m.String))),
        )  # fmt: skip
        for d in self.names:
            for ends, endpoint, qos, leaves in kinds:
                ends.append({})
                for leaf, typ in leaves:
                    name = dds.topic(self.ns, d, leaf)
                    ends[-1][leaf] = endpoint(dp, tp(name, typ), qos=qos())
                    self.topics[f"{d}/{leaf}"] = name
        # every sensor part's messages (encode.part_topics: the IMU's too), published when a
        # reading is new
        lp = self.loop
        self.part_pubs = part_topics(sensor_parts(lp.sens), lp.sim.dt,
                                     part_periods(lp.periods, lp.sens))  # fmt: skip
        for d, ends in zip(self.names, self.pub, strict=True):
            for pt in self.part_pubs:
                if pt.leaf in ends:
                    raise ValueError(f"sensor {pt.part.name}: its ROS 2 topic {pt.leaf!r} is "
                                     f"taken by quadsim's own")  # fmt: skip
                name = dds.topic(self.ns, d, pt.leaf)
                typ = m.message_class(pt.decl.type)
                ends[pt.leaf] = DataWriter(dp, tp(name, typ), qos=dds.sensor_qos())
                self.topics[f"{d}/{pt.leaf}"] = name
        self.tf_writer = DataWriter(dp, tp("/tf", m.TFMessage), qos=dds.tf_qos())
        self.clock_writer = None
        if self.rate == "max":
            self.clock_writer = DataWriter(dp, tp("/clock", m.Clock), qos=dds.clock_qos())

    # ------------------------------------------------------------------ commands

    def _drop(self, drone: int, leaf: str, why: str) -> None:
        self.counts["dropped"] += 1
        key = f"{self.names[drone]}/{leaf}"
        k = self.dropped_by[key] = self.dropped_by.get(key, 0) + 1
        if k <= _LOG_FIRST or k % 100 == 0:
            self.log(f"dropped a command on {self.topics[key]}: {why} ({k} dropped there so far)")

    def _take(self, drone: int, leaf: str) -> list:
        """The samples that arrived on ``leaf``: data only (a writer leaving sends an invalid
        sample, a lifecycle notice, which is no command)."""  # noqa: D205, D209
        reader = self.sub[drone][leaf]
        try:
            got = reader.take(N=64)
        except Exception as e:  # a sample that does not deserialize
            self._drop(drone, leaf, f"malformed ({type(e).__name__}: {e})")
            return []
        typ = reader.topic.data_type if hasattr(reader, "topic") else None
        return [x for x in got if typ is None or isinstance(x, typ)]

    def poll(self) -> None:
        """Take and apply the commands that arrived (the last valid one of each kind wins).

        A command that fails its checks, or that cannot be applied, is counted and dropped
        with a log line; the node goes on.
        """
        for i in range(self.n):
            for leaf, apply in (
                ("cmd_mode", self._mode),
                ("cmd_pose", self._pose),
                ("cmd_attitude", self._attitude),
                ("cmd_rotor_speeds", self._rotor_speeds),
            ):
                for msg in self._take(i, leaf):
                    self.counts["received"] += 1
                    try:
                        why = apply(i, msg)
                    except Exception as e:
                        why = f"malformed ({type(e).__name__}: {e})"
                    if why:
                        self._drop(i, leaf, why)

    def _mode(self, i: int, msg: Any) -> str | None:
        mode = str(msg.data).strip()
        if mode not in ("auto", "hover", "land", "cut"):
            return f"unknown mode {mode[:40]!r} (auto, hover, land, cut)"
        self.loop.set_mode(i, "pose" if mode == "hover" else mode)
        return None

    def _pose(self, i: int, msg: Any) -> str | None:
        why = check_pose(msg)
        if why is None:
            p, q = msg.pose.position, msg.pose.orientation
            self.loop.set_pose(i, (p.x, p.y, p.z), yaw_of((q.x, q.y, q.z, q.w)))
        return why

    def _attitude(self, i: int, msg: Any) -> str | None:
        why = check_attitude(msg)
        if why is None:
            q = msg.orientation
            roll, pitch, _ = (float(v) for v in to_euler(np.array([q.x, q.y, q.z, q.w])))
            yaw_rate = 0.0 if msg.type_mask & IGNORE_YAW_RATE else float(msg.body_rate.z)
            self.loop.set_attitude(i, roll, pitch, yaw_rate, float(msg.thrust))
            self.last_cmd[i] = self.loop.time
        return why

    def _rotor_speeds(self, i: int, msg: Any) -> str | None:
        rpm, why = check_rotor_speeds(msg, self.loop.n_rotors, self.loop.rpm_max)
        if why is None:
            self.loop.set_rpm(i, rpm)
            self.last_cmd[i] = self.loop.time
        return why

    def _timeouts(self) -> None:
        lp, t = self.loop, self.loop.time
        commanded = np.isin(lp.mode, ("rpm", "attitude"))
        late = commanded & (t - self.last_cmd > self.timeout)
        for i in np.flatnonzero(late):
            self.counts["timeouts"] += 1
            mode = {"hover": "pose", "land": "land", "cut": "cut"}[self.on_timeout]
            lp.set_mode(int(i), mode)
            self.log(
                f"{self.names[i]}: no command for {self.timeout:g} s "
                f"(t = {t:.3f} s): {self.on_timeout}"
            )

    # ------------------------------------------------------------------ publishing

    def _make_templates(self) -> None:
        """One :class:`~quadsim.app.ros2.cdr.Template` per drone and topic, from the messages
        :mod:`quadsim.app.ros2.encode` builds (so the fast path sends exactly those)."""  # noqa: D205, D209
        from . import encode
        from . import msgs as m
        from .cdr import Template

        z3, q0 = np.zeros(3), np.array([0.0, 0.0, 0.0, 1.0])
        self.tpl = []
        for d in self.names:
            base = f"{d}/base_link"
            tpl = {
                "odom": Template(encode.odometry(0.0, z3, q0, z3, z3, child=base)),
                "rotor_speeds": Template(
                    encode.rotors(0.0, np.zeros(self.loop.n_rotors), frame=base)
                ),
                "reference": Template(encode.reference(0.0, z3, 0.0)),
            }
            self.tpl.append(tpl)
        self.idx = {
            "odom": self.tpl[0]["odom"].index(
                "pose.pose.position",
                "pose.pose.orientation",
                "twist.twist.linear",
                "twist.twist.angular",
            ),
            "rotor_speeds": self.tpl[0]["rotor_speeds"].index("velocity"),
            "reference": self.tpl[0]["reference"].index("pose.position", "pose.orientation"),
        }
        tf = m.TFMessage(
            transforms=[encode.transform(0.0, z3, q0, child=f"{d}/base_link") for d in self.names]
        )
        # every part's message from a template (its readings are floats, float32 included)
        self.part_tpl = [[encode.part_template(pt, f"{d}/base_link") for pt in self.part_pubs]
                         for d in self.names]  # fmt: skip
        self.tf_tpl = Template(tf)
        self.tf_idx = self.tf_tpl.index("transforms")
        self.clock_tpl = Template(m.Clock())

    def publish(self, t: float, state: Any, out: dict) -> None:
        """Publish the state ``x_k`` and the readings at ``t_k`` of every drone: the messages of
        :mod:`quadsim.app.ros2.encode`, rendered from templates (:mod:`quadsim.app.ros2.cdr`)."""  # noqa: D205, D209
        from .cdr import write
        from .encode import RPM_TO_RAD_S, part_message, part_values, stamp, yaw_quat

        st = stamp(t)
        sec, ns = st.sec, st.nanosec
        rotor = state.rotor_vel if state.rotor_vel is not None else out["cmd_rpm"]
        pos, quat = np.asarray(state.pos), np.asarray(state.quat)
        odom = np.concatenate(
            [pos, quat, rotate_inverse(quat, np.asarray(state.vel)), np.asarray(state.ang_vel)],
            axis=-1,
        )
        ref = np.concatenate(
            [out["ref_pos"], [yaw_quat(float(y)) for y in out["ref_yaw"]]], axis=-1
        )
        rot = np.asarray(rotor, dtype=np.float64) * RPM_TO_RAD_S
        idx = self.idx
        for i in range(self.n):
            w, tpl = self.pub[i], self.tpl[i]
            write(w["odom"], tpl["odom"].render(sec, ns, idx["odom"], odom[i]))
            write(
                w["rotor_speeds"], tpl["rotor_speeds"].render(sec, ns, idx["rotor_speeds"], rot[i])
            )
            write(w["reference"], tpl["reference"].render(sec, ns, idx["reference"], ref[i]))
        for j, pt in enumerate(self.part_pubs):  # when its reading is new
            if due(float(self.ticks), pt.period, np):
                values = part_values(pt, out)  # (n, k): every drone's, once
                for i, d in enumerate(self.names):
                    fast = self.part_tpl[i][j]
                    if fast is None:
                        self.pub[i][pt.leaf].write(
                            part_message(pt, t, out, i, frame=f"{d}/base_link"))
                    else:
                        tp, index = fast
                        write(self.pub[i][pt.leaf],
                              tp.render(sec, ns, index, values[i]))
        write(
            self.tf_writer,
            self.tf_tpl.render(sec, ns, self.tf_idx, np.concatenate([pos, quat], -1).ravel()),
        )
        if self.clock_writer is not None:
            write(self.clock_writer, self.clock_tpl.render(sec, ns, np.zeros(0, np.intp), []))

    # ------------------------------------------------------------------ running

    def tick(self) -> dict:
        """Commands, fallbacks, the loop's step, publishing; the log record of ``x_k``."""
        lp = self.loop
        self.poll()
        self._timeouts()
        state, t = lp.state, lp.time
        out = lp.think()
        self.publish(t, state, out)
        sim = lp.sim
        rec = log_record(out, state, t, lp.rpm, sim.status, self.n)
        lp.state = numpy_state(sim.step(lp.rpm))
        self.ticks += 1
        return rec

    def run(
        self,
        duration: float | None = None,
        on_chunk: Any = None,
        chunk_steps: int = 1000,
        log_every: int = 1,
        status_every: float = 10.0,
    ) -> dict:
        """Run until ``duration`` seconds of simulated time (``None``: until stopped by SIGINT,
        SIGTERM or SIGHUP); returns the run's ``ros2`` report (:meth:`report`) with ``signal``."""  # noqa: D205, D209
        dt = float(self.loop.sim.dt)
        total = None if duration is None else max(1, round(duration / dt))
        with stop_flag() as flag:  # SIGINT, SIGTERM, SIGHUP: stop after this tick
            # the log's writer thread must hand the interpreter back within 0.2 ms (not 5 ms), and
            # what exists now is never scanned by the garbage collector again
            switch = sys.getswitchinterval()
            sys.setswitchinterval(_SWITCH_S)
            gc.collect()
            gc.freeze()
            rows = _Rows(max(1, chunk_steps // log_every))
            k = 0
            real = self.rate == "real"
            t0 = time.perf_counter()
            next_status = status_every
            lateness, work = self.lateness, self.work
            try:
                while not flag and (total is None or k < total):
                    if real:
                        due = t0 + k * dt
                        now = _wait_until(due)
                        lateness.append(now - due)
                    start = time.perf_counter()
                    rec = self.tick()
                    if k % log_every == 0:
                        rows.add(rec)
                        if rows.full():
                            chunk = rows.take()
                            if on_chunk is not None:
                                on_chunk(chunk)
                    work.append(time.perf_counter() - start)
                    k += 1
                    if self.loop.time >= next_status:
                        next_status += status_every
                        self.log(self._status_line())
            finally:
                sys.setswitchinterval(switch)
                gc.unfreeze()
        if rows.count and on_chunk is not None:
            on_chunk(rows.take())
        rep = self.report(time.perf_counter() - t0)
        rep["signal"] = flag.signum
        return rep

    def _status_line(self) -> str:
        lat = self.lateness_ms()
        pace = f", lateness p99 {lat['p99']:.3f} ms" if lat else ""
        return (
            f"t = {self.loop.time:.1f} s{pace}, commands {self.counts['received']} "
            f"(dropped {self.counts['dropped']}), timeouts {self.counts['timeouts']}"
        )

    def lateness_ms(self) -> dict:
        """Tick lateness [ms] so far (the tick's start after its due time): ``median``,
        ``p99``, ``max``, ``n``, ``over_1ms`` (empty at ``--rate max``)."""  # noqa: D205, D209
        return _stats_ms(self.lateness)

    def report(self, wall: float) -> dict:
        """What ``summary.json`` holds under ``ros2``."""
        dt = float(self.loop.sim.dt)
        return {
            "rate": self.rate,
            "rate_hz": 1.0 / dt,
            "drones": self.n,
            "ticks": self.ticks,
            "wall_s": wall,
            "achieved_hz": self.ticks / wall if wall > 0 else math.nan,
            "lateness_ms": self.lateness_ms(),
            "tick_work_ms": _stats_ms(self.work),
            "commands": dict(self.counts),
            "dropped_by_topic": {self.topics[k]: v for k, v in self.dropped_by.items()},
            "domain_id": self.domain_id,
            "network": self.network or "loopback",
            "namespace": "/" + self.ns if self.ns else "/",
            "loop": self.loop.backend,
        }


class _Rows:
    """A chunk of log records in preallocated arrays (a record is copied in; a full chunk is
    handed over whole, so no tick pays for building or freeing thousands of small arrays)."""  # noqa: D205, D209

    def __init__(self, size: int) -> None:
        self.size, self.count = size, 0
        self.buf: dict[str, np.ndarray] = {}

    def add(self, rec: dict) -> None:
        if not self.buf:
            self.buf = {
                k: np.empty((self.size, *np.shape(v)), dtype=np.asarray(v).dtype)
                for k, v in rec.items()
            }
        for k, v in rec.items():
            self.buf[k][self.count] = v
        self.count += 1

    def full(self) -> bool:
        return self.count >= self.size

    def take(self) -> dict[str, np.ndarray]:
        out = {k: v[: self.count] for k, v in self.buf.items()}
        self.buf, self.count = {}, 0
        return out


class Background:
    """Hands each chunk to ``fn`` on a worker thread (a Parquet part takes milliseconds that a
    paced loop does not have); the ``with`` block's end waits until every chunk is written and
    re-raises the first error of the worker, which the next chunk handed over raises too (a full
    disk stops the node instead of letting it run on without a log)."""  # noqa: D205, D209

    def __init__(self, fn: Any) -> None:
        import queue
        import threading

        self.fn, self.q = fn, queue.Queue()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._work, name="quadsim-ros2-log", daemon=True)

    def _work(self) -> None:
        while (chunk := self.q.get()) is not None:
            if self.error is None:
                try:
                    self.fn(chunk)
                except BaseException as e:
                    self.error = e

    def __enter__(self) -> Any:
        self.thread.start()
        return self.put

    def put(self, chunk: Any) -> None:
        """Queue a chunk; raise the worker's error if writing an earlier one failed."""
        if self.error is not None:
            raise self.error
        self.q.put(chunk)

    def __exit__(self, *exc: Any) -> None:
        self.q.put(None)
        self.thread.join()
        if self.error is not None and exc[0] is None:
            raise self.error


def _stats_ms(seconds: list[float]) -> dict:
    if not seconds:
        return {}
    a = np.asarray(seconds) * 1e3
    return {
        "median": float(np.median(a)),
        "p99": float(np.percentile(a, 99)),
        "max": float(a.max()),
        "n": int(a.size),
        "over_1ms": int(np.sum(a > 1.0)),
    }


def _wait_until(due: float) -> float:
    """Sleep until ``due`` (``perf_counter`` seconds), spinning the last :data:`_SPIN_S`."""
    now = time.perf_counter()
    if due - now > _SPIN_S:
        time.sleep(due - now - _SPIN_S)
    now = time.perf_counter()
    while now < due:
        now = time.perf_counter()
    return now
