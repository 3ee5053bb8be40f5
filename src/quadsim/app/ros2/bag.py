"""``quadsim fly --rosbag``: a run's log as a ROS 2 bag in MCAP (Foxglove, ``ros2 bag play``).

:func:`write_bag` reads ``trajectory.parquet`` (:func:`quadsim.app.io.read_log`) and writes, for
every logged sample ``t`` and drone ``d<i>``, the messages the node publishes for that state
(:mod:`quadsim.app.ros2.encode`, one home for both): ``/<ns>/d<i>/odom``, ``rotor_speeds`` and
``reference`` (when the log has one), every sensor part's messages
(:func:`quadsim.app.ros2.encode.part_topics`: the IMU's ``sensor_msgs/Imu`` on ``imu``, the
rangefinder's ``sensor_msgs/Range`` on ``/<ns>/d<i>/<name>``), and one ``/tf`` message with
every drone's transform; log and publish time are the simulated time [ns]. Channels carry the
``cdr`` encoding and ``ros2msg`` schemas (:func:`quadsim.app.ros2.msgs.msgdef`), the MCAP
``ros2`` profile, zstd-compressed chunks: the form ``ros2 bag record -s mcap`` writes, which
``ros2 bag play FILE.mcap`` (ROS 2 Iron and newer), Foxglove and the ``rosbags`` library read.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from ...loop.parts import part_outputs
from ..io import read_log
from ..io.files import atomic_write
from . import dds, encode
from . import msgs as m

__all__ = ["write_bag"]


def write_bag(
    log_path: str | os.PathLike[str],
    bag_path: str | os.PathLike[str],
    *,
    namespace: str = "quadsim",
    parts: Any = (),
    dt: float = 1.0,
    periods: Any = None,
    progress: Any = None,
) -> dict[str, int]:
    """Write the run's log ``log_path`` (Parquet) as the MCAP bag ``bag_path``.

    Args:
        log_path: ``trajectory.parquet`` of a run.
        bag_path: The ``.mcap`` file to write (replaced; written to a temporary name first).
        namespace: ROS 2 namespace of the topics, as ``quadsim ros2 --namespace``.
        parts: The run's sensor parts (:func:`quadsim.loop.brain.sensor_parts`, the IMU's
            included): their ROS 2 messages (:func:`quadsim.app.ros2.encode.part_topics`) at
            every logged sample.
        dt: The physics step [s].
        periods: Each part's period in physics steps (:func:`quadsim.loop.brain.part_periods`;
            default 1 each): a message's covariances may depend on it.
        progress: Called with ``(samples done, samples)`` now and then, or ``None``.

    Returns:
        Messages written per topic.
    """
    from mcap.writer import CompressionType, Writer

    log, _ = read_log(log_path)
    t_all = np.asarray(log["time"], dtype=np.float64)  # (T,)
    n_t, n = log["pos"].shape[:2]
    names = [f"d{i}" for i in range(n)]
    has_ref = "ref_pos" in log and "ref_yaw" in log
    rotor_key = "rotor_rpm" if "rotor_rpm" in log else "cmd_rpm"
    periods = (1,) * len(parts) if periods is None else periods
    topics = encode.part_topics(parts, dt, periods)
    part_keys = {key for key, _ in part_outputs([pt.part for pt in topics])}
    counts: dict[str, int] = {}
    classes = [m.message_class(pt.decl.type) for pt in topics]
    fast = [[encode.part_template(pt, f"{d}/base_link") for d in names] for pt in topics]

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as fh:
            w = Writer(fh, compression=CompressionType.ZSTD)
            w.start(profile="ros2", library="quadsim")
            schemas: dict[type, int] = {}
            channels: dict[str, int] = {}

            def channel(topic: str, cls: type) -> int:
                if cls not in schemas:
                    name = m.ros_name(cls)
                    schemas[cls] = w.register_schema(
                        name=name, encoding="ros2msg", data=m.msgdef(name).encode()
                    )
                if topic not in channels:
                    channels[topic] = w.register_channel(
                        topic=topic, message_encoding="cdr", schema_id=schemas[cls]
                    )
                    counts[topic] = 0
                return channels[topic]

            def put(topic: str, msg: Any, ns_time: int, cls: Any = None) -> None:
                """Write ``msg`` (a message, or its CDR bytes with its class ``cls``)."""
                data = msg if cls is not None else msg.serialize()
                cid = channel(topic, cls if cls is not None else type(msg))
                w.add_message(cid, log_time=ns_time, data=data, publish_time=ns_time,
                              sequence=counts[topic])  # fmt: skip
                counts[topic] += 1

            tf_topic = "/tf"
            for k in range(n_t):
                tfs = []
                row = {key: log[key][k] for key in part_keys}  # the parts' readings at sample k
                values = [encode.part_values(pt, row) for pt in topics]  # (n, k) each
                st = encode.stamp(float(t_all[k]))
                stamp = (st.sec, st.nanosec)
                for i, d in enumerate(names):
                    t = float(t_all[k])
                    ns_t = round(t * 1e9)
                    base = f"{d}/base_link"
                    pos, quat = log["pos"][k, i], log["quat"][k, i]
                    put(
                        dds.topic(namespace, d, "odom"),
                        encode.odometry(
                            t, pos, quat, log["vel"][k, i], log["ang_vel"][k, i], child=base
                        ),
                        ns_t,
                    )
                    if rotor_key in log:
                        put(
                            dds.topic(namespace, d, "rotor_speeds"),
                            encode.rotors(t, log[rotor_key][k, i], frame=base),
                            ns_t,
                        )
                    if has_ref:
                        put(
                            dds.topic(namespace, d, "reference"),
                            encode.reference(t, log["ref_pos"][k, i], log["ref_yaw"][k, i]),
                            ns_t,
                        )
                    for j, pt in enumerate(topics):  # from its template where it has one
                        leaf = dds.topic(namespace, d, pt.leaf)
                        if fast[j][i] is None:
                            put(leaf, encode.part_message(pt, t, row, i, frame=base), ns_t)
                        else:
                            tpl, at = fast[j][i]
                            put(leaf, tpl.render(*stamp, at, values[j][i]), ns_t, classes[j])
                    tfs.append(encode.transform(t, pos, quat, child=base))
                put(tf_topic, m.TFMessage(transforms=tfs), round(float(t_all[k]) * 1e9))
                if progress is not None and (k % 500 == 0 or k == n_t - 1):
                    progress(k + 1, n_t)
            w.finish()

    atomic_write(bag_path, write)
    return counts

