"""A quadsim plugin: two sensors (:mod:`.sonar`, :mod:`.magnetometer`, with its own ROS 2
message) and a controller (:mod:`.altitude`) that quadsim finds from a scenario by name, with no
edit to quadsim itself."""  # noqa: D205, D209
