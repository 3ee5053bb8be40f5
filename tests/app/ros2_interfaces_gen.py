"""The text of ``src/quadsim/app/ros2/interfaces.txt``, from the ``rosbags`` library's ROS 2
Humble store (a dev dependency): the definitions quadsim ships, generated, not typed.

``python tests/app/ros2_interfaces_gen.py`` rewrites the file; ``test_ros2_interfaces.py``
checks that the shipped file is what this makes.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TARGET = ROOT / "src" / "quadsim" / "app" / "ros2" / "interfaces.txt"

PACKAGES = {
    "ros2/common_interfaces (Apache-2.0)": (
        "std_msgs", "geometry_msgs", "sensor_msgs", "nav_msgs", "diagnostic_msgs", "shape_msgs",
        "stereo_msgs", "trajectory_msgs", "visualization_msgs"),
    "ros2/rcl_interfaces (Apache-2.0)": ("builtin_interfaces", "rosgraph_msgs"),
    "ros2/geometry2 (BSD-3-Clause)": ("tf2_msgs",),
}  # fmt: skip
"""The packages shipped, by the repository (and licence) their definitions come from."""

DEFAULTS = {"geometry_msgs/msg/Quaternion": {"x": "0", "y": "0", "z": "0", "w": "1"}}
"""Default values the ``.msg`` files give (rosbags' store keeps none): only ``Quaternion``'s."""

HEADER = """\
# The ROS 2 message definitions a quadsim sensor part may declare (quadsim.app.ros2.interfaces),
# in the .msg syntax: "MSG: pkg/msg/Type", then its fields ("type name [default]") and constants
# ("type NAME=value"); a message type is written pkg/Type, as in the ros2msg schemas of a bag.
#
# The definitions of the ROS 2 Humble interface packages below, generated from the store
# ros2_humble of the rosbags library (Apache-2.0) by tests/app/ros2_interfaces_gen.py, which a
# test compares with this file. The interface definitions are the ROS 2 project's:
{sources}
# Copyright the ROS 2 authors (Open Source Robotics Foundation, Willow Garage and others);
# Apache-2.0: https://www.apache.org/licenses/LICENSE-2.0; BSD-3-Clause:
# https://opensource.org/licenses/BSD-3-Clause. Only the definitions (names and types) are here.
"""


def _type(node: tuple) -> str:
    """The ``.msg`` spelling of a rosbags field type."""
    kind, arg = node
    kind = kind.name
    if kind == "BASE":
        name, bound = arg
        return f"{name}<={bound}" if bound else name
    if kind == "NAME":
        pkg, _, typ = arg.split("/")
        return f"{pkg}/{typ}"
    inner, n = arg
    if kind == "ARRAY":
        return f"{_type(inner)}[{n}]"
    return f"{_type(inner)}[<={n}]" if n else f"{_type(inner)}[]"


def generate() -> str:
    """The file's text."""
    from rosbags.typesys.stores import ros2_humble

    sources = "\n".join(
        textwrap.fill(f"{repo}: {', '.join(pkgs)}", 96, initial_indent="#   ",
                      subsequent_indent="#     ") for repo, pkgs in PACKAGES.items())  # fmt: skip
    wanted = {p for pkgs in PACKAGES.values() for p in pkgs}
    out = [HEADER.format(sources=sources)]
    for name in sorted(ros2_humble.FIELDDEFS):
        if name.split("/")[0] not in wanted:
            continue
        consts, fields = ros2_humble.FIELDDEFS[name]
        out.append(f"MSG: {name}\n")
        defaults = DEFAULTS.get(name, {})
        for field, node in fields:
            default = f" {defaults[field]}" if field in defaults else ""
            out.append(f"{_type(node)} {field}{default}\n")
        for cname, ctype, value in consts:
            out.append(f"{ctype} {cname}={value}\n")
    return "".join(out)


if __name__ == "__main__":
    TARGET.write_text(generate())
    print(f"wrote {TARGET}", file=sys.stderr)
