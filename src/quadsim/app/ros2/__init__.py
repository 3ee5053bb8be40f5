"""quadsim on ROS 2 over DDS, without a ROS install: the node (``quadsim ros2``), its message
types, the live loop it steps and the MCAP bags of ``quadsim fly --rosbag`` (docs/ros2.md).

Needs the ``ros2`` extra (``pip install 'quadsim[ros2]'``: Cyclone DDS and mcap); nothing here
is imported by ``import quadsim``."""  # noqa: D205, D209
