"""A ROS 2 subscriber process for the node's tests (not a test module): it subscribes with the
ROS 2 message types (``quadsim.app.ros2.msgs``, checked against rosbags' definitions in
``test_ros2_msgs.py``) on the loopback domain the node uses, and writes what it received.

``python tests/app/ros2_probe.py OUT.json SECONDS [--ns quadsim] [--drones N] [--domain-id D]``:
per drone and topic (``odom``, ``imu``), the receive times (``time.monotonic``) and the message
stamps and contents, as JSON. It prints ``ready`` once its readers exist.
"""

from __future__ import annotations

import argparse
import json
import time

from quadsim.app.ros2 import dds
from quadsim.app.ros2 import msgs as m


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("seconds", type=float)
    ap.add_argument("--ns", default="quadsim")
    ap.add_argument("--drones", type=int, default=1)
    ap.add_argument("--domain-id", type=int, default=0)
    a = ap.parse_args()
    from cyclonedds.sub import DataReader
    from cyclonedds.topic import Topic

    dp = dds.open_participant(a.domain_id)
    readers = {}
    for i in range(a.drones):
        for leaf, typ in (("odom", m.Odometry), ("imu", m.Imu)):
            name = dds.topic(a.ns, f"d{i}", leaf)
            qos = dds.sensor_qos()
            readers[f"d{i}/{leaf}"] = DataReader(dp, Topic(dp, dds.dds_topic(name), typ), qos=qos)
    got: dict[str, list] = {k: [] for k in readers}
    print("ready", flush=True)
    end = time.monotonic() + a.seconds
    while time.monotonic() < end:
        for key, r in readers.items():
            for s in r.take(N=256):
                now = time.monotonic()
                st = s.header.stamp
                t = st.sec + st.nanosec * 1e-9
                if key.endswith("odom"):
                    p, q, v, w = (
                        s.pose.pose.position,
                        s.pose.pose.orientation,
                        s.twist.twist.linear,
                        s.twist.twist.angular,
                    )
                    row = [now, t, p.x, p.y, p.z, q.x, q.y, q.z, q.w, v.x, v.y, v.z, w.x, w.y, w.z]
                else:
                    g, acc = s.angular_velocity, s.linear_acceleration
                    row = [
                        now,
                        t,
                        g.x,
                        g.y,
                        g.z,
                        acc.x,
                        acc.y,
                        acc.z,
                        s.angular_velocity_covariance[0],
                        s.linear_acceleration_covariance[0],
                    ]
                got[key].append(row)
        time.sleep(0.001)
    with open(a.out, "w", encoding="utf-8") as fh:
        json.dump(got, fh)


if __name__ == "__main__":
    main()
