"""Packaged drone presets: one TOML data file per drone (see docs/presets.md); the controller
gains, power chains and sensors in the folders ``gains/``, ``power/`` and ``sensors/``."""  # noqa: D205, D209

from __future__ import annotations

from pathlib import Path

__all__ = ["folder"]


def folder(kind: str = "") -> Path:
    """The folder of the packaged files: the drone presets, or ``kind`` (``"gains"``,
    ``"power"``, ``"sensors"``) of them.

    The package is installed as files (a wheel unpacks), so this is the path next to this
    module, what ``importlib.resources.files`` finds for it; finding it so does not import the
    resource readers and ``zipfile`` (about 10 ms of every command's start-up).
    """  # noqa: D205
    here = Path(__file__).parent
    return here / kind if kind else here
