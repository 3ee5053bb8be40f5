"""What a controller's command is, and how it reaches the rotors (allocation or clipping).

A wrench is allocated (with the saturation priorities of :func:`quadsim.physics.rotors.allocate`);
rotor speeds are clipped to their range.

One home for the step from a command to rotor speeds: the closed loop's per-step function
(:mod:`quadsim.loop.brain`) and :meth:`quadsim.engines.sim.Simulator.step_wrench` both call
:func:`command_allocation`. Pure array-API code (NumPy, JAX, PyTorch, CasADi).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._array import namespace
from .rotors import Allocation, allocate, wrench_from_rpm

__all__ = ["COMMANDS", "command_allocation", "command_kind"]

COMMANDS = ("auto", "wrench", "rpm")
"""What a controller's command may be declared as (``fly(command=...)``)."""


def command_kind(size: int, n_rotors: int, command: str | None = None) -> str:
    """``"wrench"`` or ``"rpm"``: what a controller command with last axis ``size`` is.

    ``command`` ``None``/``"auto"`` decides by the size: 4 is a body wrench ``[F, τx, τy, τz]``,
    ``n_rotors`` (when not 4) rotor speeds [RPM]; on a quadrotor a 4 is a wrench unless
    ``command="rpm"`` says otherwise. ``"wrench"`` and ``"rpm"`` insist (and check the size).

    Raises:
        ValueError: ``command`` unknown, or ``size`` fits neither.
    """
    command = "auto" if command is None else command
    if command not in COMMANDS:
        raise ValueError(f"command must be one of {COMMANDS}; got {command!r}")
    if command in ("auto", "wrench") and size == 4:
        return "wrench"
    if command in ("auto", "rpm") and size == n_rotors:
        return "rpm"
    want = {"auto": f"4 (a wrench) or {n_rotors} (rotor speeds)", "wrench": "4 (a wrench)",
            "rpm": f"{n_rotors} (rotor speeds)"}[command]  # fmt: skip
    raise ValueError(f"the controller's command has last axis {size}; expected {want}")


def command_allocation(output: Any, allocator: Any, command: str | None = None) -> tuple:
    """The logged command of a controller output: ``(cmd_wrench, Allocation)``.

    A wrench ``(..., 4)`` goes through :func:`quadsim.physics.rotors.allocate` (``cmd_wrench`` is
    the wrench asked for). Rotor speeds ``(..., n_rotors)`` [RPM] bypass the allocation: they are
    clipped to ``[rpm_min, rpm_max]`` (``saturated`` where a speed was outside), ``cmd_wrench`` and
    the allocation's ``wrench`` are the wrench those speeds produce
    (:func:`quadsim.physics.rotors.wrench_from_rpm`) and ``lost`` is zero. Array-API code, so it
    traces with JAX and CasADi (:class:`~quadsim.physics._symbolic.SymArray`) like the controller.

    Args:
        output: The controller's command.
        allocator: :class:`~quadsim.physics.rotors.Allocator` of the drone.
        command: ``None``/``"auto"``, ``"wrench"`` or ``"rpm"`` (:func:`command_kind`).
    """
    n_rot = int(np.shape(allocator.mixing_matrix)[1])
    if command_kind(int(output.shape[-1]), n_rot, command) == "wrench":
        return output, allocate(output, allocator)
    xp = namespace(output)
    lo, hi = float(allocator.rpm_min), float(allocator.rpm_max)
    rpm = xp.clip(output, lo, hi)
    outside = (output < lo) | (output > hi)
    saturated = outside[..., 0]
    for i in range(1, n_rot):
        saturated = saturated | outside[..., i]
    wrench = wrench_from_rpm(rpm, allocator)
    return wrench, Allocation(rpm, wrench, 0.0 * wrench, saturated)
