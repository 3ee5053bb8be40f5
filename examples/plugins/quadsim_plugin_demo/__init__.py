"""A quadsim plugin: a sensor (:mod:`.sonar`) and a controller (:mod:`.altitude`) that quadsim
finds from a scenario by name, with no edit to quadsim itself."""  # noqa: D205, D209
