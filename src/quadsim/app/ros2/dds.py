"""DDS plumbing of the ROS 2 node: the domain's network configuration, QoS, topic names.

**Loopback by default.** Anyone who can reach a DDS domain can command the drones on it, so the
node keeps DDS on the loopback interface with multicast off unless told otherwise
(:func:`config_xml`): discovery then goes by unicast to ``127.0.0.1`` (participant indices
``auto``, up to :data:`MAX_PARTICIPANTS` processes on the machine). A ROS 2 process on the same
machine sees the node when it runs Cyclone DDS with the same configuration (the node prints it:
``export CYCLONEDDS_URI='...'``, then ``ros2 topic echo /quadsim/d0/odom``). With a network
interface (``--network IFACE``) the domain uses that interface and Cyclone DDS's default
multicast discovery, as any ROS 2 node does.

**QoS** as ROS 2 users expect (``rclcpp``'s profiles): sensor data (odometry, IMU, rotor speeds,
reference) best effort, keep last 5, volatile (``SensorDataQoS``); commands reliable, keep last
10, volatile (the default profile); ``/tf`` reliable, keep last 100; ``/clock`` best effort,
keep last 1 (``ClockQoS``).

**Names.** A ROS 2 topic ``/a/b`` is the DDS topic ``rt/a/b`` (:func:`dds_topic`).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = [
    "MAX_PARTICIPANTS",
    "clock_qos",
    "command_qos",
    "config_xml",
    "dds_topic",
    "open_participant",
    "sensor_qos",
    "tf_qos",
    "topic",
]

MAX_PARTICIPANTS = 32
"""Processes that can join a loopback domain on one machine (unicast discovery probes each)."""

_IFACE = re.compile(r"^[A-Za-z0-9_.:-]{1,32}$")


def config_xml(network: str | None = None) -> str:
    """The Cyclone DDS configuration: loopback only (``network=None``) or one interface.

    Raises:
        ValueError: An interface name with characters no interface has.
    """
    if network is None:
        return (
            '<CycloneDDS><Domain id="any"><General><Interfaces>'
            '<NetworkInterface name="lo"/></Interfaces>'
            "<AllowMulticast>false</AllowMulticast></General>"
            "<Discovery><ParticipantIndex>auto</ParticipantIndex>"
            f"<MaxAutoParticipantIndex>{MAX_PARTICIPANTS}</MaxAutoParticipantIndex>"
            '<Peers><Peer address="127.0.0.1"/></Peers></Discovery></Domain></CycloneDDS>'
        )
    if not _IFACE.fullmatch(network):
        raise ValueError(f"--network: {network!r} is not a network interface name")
    return (
        '<CycloneDDS><Domain id="any"><General><Interfaces>'
        f'<NetworkInterface name="{network}"/></Interfaces></General></Domain></CycloneDDS>'
    )


def check_interface(network: str) -> None:
    """``network`` names an interface of this machine.

    Checked before Cyclone DDS starts, which prints its own complaint to the terminal and then
    fails with a generic error.

    Raises:
        ValueError: Naming the interfaces there are.
    """
    import socket

    config_xml(network)  # the name's characters
    try:
        names = [name for _, name in socket.if_nameindex()]
    except OSError:  # no way to list them here: Cyclone DDS will say
        return
    if network not in names:
        raise ValueError(f"--network: no network interface {network!r} on this machine "
                         f"(there are: {', '.join(names)})")  # fmt: skip


def open_participant(domain_id: int = 0, network: str | None = None) -> Any:
    """A ``DomainParticipant`` on ``domain_id`` (0..232) with :func:`config_xml`.

    Raises:
        ValueError: A domain id out of range; an interface Cyclone DDS cannot use.
    """
    from cyclonedds.core import DDSException
    from cyclonedds.domain import Domain, DomainParticipant

    if not (isinstance(domain_id, int) and 0 <= domain_id <= 232):
        raise ValueError(f"--domain-id must be an integer in 0..232; got {domain_id!r}")
    where = f"network interface {network!r}" if network else "the loopback interface"
    if network is not None:
        check_interface(network)
    known = _DOMAINS.get(domain_id)
    if known is not None and known[0] != network:
        raise ValueError(
            f"DDS domain {domain_id} is already open in this process on another "
            f"interface ({known[0] or 'loopback'})"
        )
    try:
        if known is None:  # one Domain per id and process; its participants share it
            _DOMAINS[domain_id] = (network, Domain(domain_id, config_xml(network)))
        participant = DomainParticipant(domain_id)
    except DDSException as e:
        raise ValueError(f"DDS could not start on {where}: {e}") from None
    return participant


_DOMAINS: dict[int, tuple[str | None, Any]] = {}  # filled by open_participant, never at import


def _qos(reliable: bool, depth: int) -> Any:
    from cyclonedds.qos import Policy, Qos

    rel = (
        Policy.Reliability.Reliable(max_blocking_time=0)
        if reliable
        else Policy.Reliability.BestEffort
    )
    return Qos(rel, Policy.History.KeepLast(depth), Policy.Durability.Volatile)


def sensor_qos() -> Any:
    """Best effort, keep last 5, volatile (ROS 2 ``SensorDataQoS``)."""
    return _qos(False, 5)


def command_qos() -> Any:
    """Reliable, keep last 10, volatile (the ROS 2 default profile)."""
    return _qos(True, 10)


def tf_qos() -> Any:
    """Reliable, keep last 100 (``tf2_ros``'s broadcaster)."""
    return _qos(True, 100)


def clock_qos() -> Any:
    """Best effort, keep last 1 (ROS 2 ``ClockQoS``)."""
    return _qos(False, 1)


_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*(/[A-Za-z][A-Za-z0-9_]*)*$")


def topic(namespace: str, *parts: str) -> str:
    """The ROS 2 topic ``/<namespace>/<parts...>`` (``namespace`` may be empty).

    Raises:
        ValueError: A namespace that is not a valid ROS 2 name (letters, digits, ``_``,
            segments separated by ``/``, each starting with a letter).
    """
    ns = namespace.strip("/")
    if ns and not _NAME.fullmatch(ns):
        raise ValueError(
            f"--namespace: {namespace!r} is not a valid ROS 2 namespace "
            "(letters, digits and _, segments starting with a letter)"
        )
    return "/" + "/".join([p for p in (ns, *parts) if p])


def dds_topic(ros_topic: str) -> str:
    """The DDS topic of a ROS 2 topic: ``/a/b`` -> ``rt/a/b``."""
    return "rt" + ros_topic
