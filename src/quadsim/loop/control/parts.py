"""The built-in controllers as controller parts (:mod:`quadsim.loop.parts`).

``[controller] kind = "geometric"`` or ``"pid"``: the part loads its gains (``gains``: a packaged
name or a TOML path; default ``<drone preset>_<kind>``, :func:`~quadsim.loop.control.load_gains`)
for the drone and the control period, and is called like :func:`~quadsim.loop.control.control`.
A part is what a scenario names; ``fly`` also takes the plain function and a gains record.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ..parts import Controller
from . import geometric, pid
from .gains import GeometricGains, PidGains, load_gains

__all__ = ["Geometric", "Pid"]


class _GainsFile(Controller):
    """A controller whose gains come from a gains file (``gains``)."""

    gains_type: ClassVar[type] = GeometricGains
    kind: ClassVar[str] = ""
    law: ClassVar[Any] = None
    """The controller's module: its ``control`` and ``init_state``."""

    def __call__(self, state: Any, ref: Any, gains: Any, cstate: Any) -> tuple[Any, Any]:
        """``(wrench (..., 4), cstate)`` of the law."""
        return self.law.control(state, ref, gains, cstate)

    def init_state(self, gains: Any, shape: tuple, xp: Any = None, dtype: Any = None) -> Any:
        """The law's zero state for ``shape`` drones."""
        return self.law.init_state(gains, shape, xp, dtype)

    @classmethod
    def from_table(cls, table: dict, drone: Any, dt: float) -> _GainsFile:
        """From ``[controller]``: ``gains``, a packaged name or a TOML path (default
        ``<drone preset>_<kind>``).

        Raises:
            ValueError: ``"gains: why"`` (a file that does not load, or another controller's).
        """  # noqa: D205
        unknown = sorted(set(table) - {"gains"})
        if unknown:
            raise ValueError(f"{unknown[0]}: not a key of the {cls.kind} controller")
        name = table.get("gains") or f"{drone.name}_{cls.kind}"
        try:
            gains = load_gains(name, drone=drone, dt=dt)
        except ValueError as e:
            hint = "" if table.get("gains") else " (the default for drone.preset and kind)"
            raise ValueError(f"gains: {e}{hint}") from None
        if not isinstance(gains, cls.gains_type):
            raise ValueError(f"gains: are not {cls.kind} gains")
        return cls(gains)


class Geometric(_GainsFile):
    """Geometric SE(3) tracking (:mod:`quadsim.loop.control.geometric`)."""

    gains_type: ClassVar[type] = GeometricGains
    kind: ClassVar[str] = "geometric"
    law: ClassVar[Any] = geometric


class Pid(_GainsFile):
    """Cascaded PID (:mod:`quadsim.loop.control.pid`)."""

    gains_type: ClassVar[type] = PidGains
    kind: ClassVar[str] = "pid"
    law: ClassVar[Any] = pid
