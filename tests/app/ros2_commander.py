"""A ROS 2 commanding process for the node's tests (not a test module).

``python tests/app/ros2_commander.py good OUT.json --rpm R --seconds S [--ns NS] [--domain-id D]``
waits until the node's ``cmd_rotor_speeds`` reader is matched, then sends rotor speeds
``R (1 + 0.01 sin(2π 0.5 t)) (1 + 0.002 s_i)`` [RPM] of rotor ``i`` (in rad/s), ``s = (1, -1,
1.05, -0.95)`` (a collective oscillation and a small yaw torque: the drone stays level), at
100 Hz for ``S`` seconds and writes the commands it sent [RPM].

``python tests/app/ros2_commander.py bad OUT.json [--ns NS] [--domain-id D]`` sends, 50 ms apart,
one of each kind of bad command the node must drop (wrong length, NaN, negative, oversized,
unknown joint names, a pose with NaN, a pose in another frame, an attitude with thrust 2, an
unknown mode) and writes how many it sent.
"""

from __future__ import annotations

import argparse
import json
import math
import time

from quadsim.app.ros2 import dds
from quadsim.app.ros2 import msgs as m
from quadsim.app.ros2.encode import RPM_TO_RAD_S


def _writer(dp, ns: str, leaf: str, typ: type):
    from cyclonedds.pub import DataWriter
    from cyclonedds.topic import Topic

    name = dds.dds_topic(dds.topic(ns, "d0", leaf))
    return DataWriter(dp, Topic(dp, name, typ), qos=dds.command_qos())


def _wait_matched(w, timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while not w.get_matched_subscriptions():
        if time.monotonic() > end:
            raise SystemExit("no subscriber matched")
        time.sleep(0.01)
    time.sleep(0.2)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=("good", "bad"))
    ap.add_argument("out")
    ap.add_argument("--rpm", type=float, default=0.0)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--ns", default="quadsim")
    ap.add_argument("--domain-id", type=int, default=0)
    a = ap.parse_args()
    dp = dds.open_participant(a.domain_id)
    js = _writer(dp, a.ns, "cmd_rotor_speeds", m.JointState)
    _wait_matched(js)
    sent = []
    if a.mode == "good":
        t0 = time.monotonic()
        k = 0
        while (t := time.monotonic() - t0) < a.seconds:
            wave = a.rpm * (1.0 + 0.01 * math.sin(2 * math.pi * 0.5 * t))
            rpm = [wave * (1.0 + 0.002 * s) for s in (1.0, -1.0, 1.05, -0.95)]
            js.write(m.JointState(velocity=[r * RPM_TO_RAD_S for r in rpm]))
            sent.append(rpm)
            k += 1
            time.sleep(max(0.0, t0 + 0.01 * k - time.monotonic()))
        out = {"sent": sent}
    else:
        pose = _writer(dp, a.ns, "cmd_pose", m.PoseStamped)
        att = _writer(dp, a.ns, "cmd_attitude", m.AttitudeTarget)
        mode = _writer(dp, a.ns, "cmd_mode", m.String)
        for w in (pose, att, mode):
            _wait_matched(w)
        bad = [
            (js, m.JointState(velocity=[1000.0, 1000.0, 1000.0])),
            (js, m.JointState(velocity=[1000.0, float("nan"), 1000.0, 1000.0])),
            (js, m.JointState(velocity=[1000.0, -5.0, 1000.0, 1000.0])),
            (js, m.JointState(velocity=[1.0] * 100_000)),
            (js, m.JointState(name=["a", "b", "c", "d"], velocity=[1000.0] * 4)),
            (js, m.JointState(velocity=[1e9] * 4)),
            (pose, m.PoseStamped(pose=m.Pose(position=m.Point(x=float("nan"))))),
            (pose, m.PoseStamped(header=m.Header(frame_id="map"))),
            (att, m.AttitudeTarget(thrust=2.0)),
            (att, m.AttitudeTarget(orientation=m.Quaternion(w=float("inf")), thrust=0.5)),
            (mode, m.String(data="fly to the moon")),
        ]
        for w, msg in bad:
            w.write(msg)
            time.sleep(0.05)
        out = {"sent": len(bad)}
    time.sleep(0.3)
    with open(a.out, "w", encoding="utf-8") as fh:
        json.dump(out, fh)


if __name__ == "__main__":
    main()
