"""Delay lines of the sensors with latency (motion capture, GNSS): fill, push, count.

A private module of :mod:`quadsim.physics.sensors`: its functions serve the sibling sensor
modules only. A delay line of ``k`` samples holds one quantity ``(..., k, d)``, oldest first;
each step pushes the value now and delivers the one ``k`` samples old (``k = 0``: the value now).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from array_api_compat import device


def delay_lines(xp: Any, values: Sequence[Any], k: int, batch: tuple[int, ...],
                like: Any) -> list[Any]:  # fmt: skip
    """Delay lines of ``k`` samples, each filled with its initial value (the body rested before).

    Args:
        xp: Array namespace of ``values``.
        values: One initial value a line ``(..., d)``, each broadcastable to ``(*batch, d)``.
        k: Length of the lines [samples], >= 0.
        batch: Batch shape ``...``.
        like: Array whose dtype and device the empty lines of ``k = 0`` take.

    Returns:
        One line ``(*batch, k, d)`` a value.
    """
    lines = []
    for v in values:
        d = v.shape[-1]
        if k:
            lines.append(xp.concat([xp.broadcast_to(v, (*batch, d))[..., None, :]] * k, axis=-2))
        else:
            lines.append(xp.zeros((*batch, 0, d), dtype=like.dtype, device=device(like)))
    return lines


def delay_length(line: Any, name: str, letter: str) -> int:
    """Length ``k`` [samples] of a state's position delay line ``(..., k, 3)``.

    Raises:
        ValueError: If ``line`` has fewer than two axes (naming it ``name``, its length
            ``letter`` as the sensor's docs call it).
    """
    if line.ndim < 2:
        raise ValueError(f"{name} must have shape (..., {letter}, 3); got {line.shape}")
    return line.shape[-2]


def delay_push(xp: Any, lines: Sequence[Any], values: Sequence[Any],
               batch: tuple[int, ...]) -> tuple[list[Any], list[Any]]:  # fmt: skip
    """Push each value now ``(..., d)`` onto its line ``(*batch, k, d)``.

    Returns:
        ``(oldest, lines)``: the entries ``k`` samples old ``(*batch, d)`` (the values themselves
        when ``k = 0``) and the moved lines.
    """
    if not lines[0].shape[-2]:
        return list(values), list(lines)
    oldest = [line[..., 0, :] for line in lines]
    moved = [xp.concat((line[..., 1:, :], xp.broadcast_to(v, (*batch, v.shape[-1]))[..., None, :]),
                       axis=-2) for line, v in zip(lines, values, strict=True)]  # fmt: skip
    return oldest, moved


def delay_count(xp: Any, count: Any, k: int, batch: tuple[int, ...]) -> tuple[Any, Any]:
    """``(valid, count)``: whether the delivered sample is a pushed one (``count >= k``),
    broadcast to ``batch``, and the push count ``()`` advanced, saturating at ``k``."""  # noqa: D205, D209
    valid = xp.broadcast_to(count >= k, batch)
    return valid, xp.where(count < k, count + 1, count)
