"""Sensor and controller parts that break their declarations, each in one way (issue 40, item 5).

Imported by the real ``quadsim fly`` in ``tests/test_parts_hostile.py`` (this folder on its
``PYTHONPATH``), never by quadsim itself.
"""

from __future__ import annotations

import numpy as np

from quadsim.loop.parts import Controller, Output, Sensor


class _Height(Sensor):
    outputs = (Output("h", 1, "m", "height"),)

    def good(self, truth):
        return truth.pos[..., 2]


class BareArray(_Height):
    def measure(self, k, truth, state, z, ctx):
        return self.good(truth), state


class ReturnsNone(_Height):
    def measure(self, k, truth, state, z, ctx):
        return None


class MissingKey(_Height):
    def measure(self, k, truth, state, z, ctx):
        return {"height": self.good(truth)}, state


class ExtraKey(_Height):
    def measure(self, k, truth, state, z, ctx):
        return {"h": self.good(truth), "debug": self.good(truth)}, state


class TooSmall(Sensor):
    outputs = (Output("v", 3, "m/s", "a vector"),)

    def measure(self, k, truth, state, z, ctx):
        return {"v": truth.pos[..., 2]}, state  # (n,), silently broadcast into 3 columns before


class TooBig(_Height):
    def measure(self, k, truth, state, z, ctx):
        return {"h": truth.pos}, state


class Float32(_Height):
    def measure(self, k, truth, state, z, ctx):
        return {"h": ctx.xp.astype(self.good(truth), ctx.xp.float32)}, state


class NotFinite(_Height):
    def measure(self, k, truth, state, z, ctx):
        return {"h": self.good(truth) * np.nan}, state


class Raises(_Height):
    def measure(self, k, truth, state, z, ctx):
        raise RuntimeError("sensor on fire")


class InitRaises(_Height):
    def init(self, n, truth, ctx):
        raise KeyError("calibration")

    def measure(self, k, truth, state, z, ctx):
        return {"h": self.good(truth)}, state


class NotOutputs(Sensor):
    outputs = (("h", 1, "m", "height"),)

    def measure(self, k, truth, state, z, ctx):
        return {"h": truth.pos[..., 2]}, state


class BuildsNothing(_Height):
    @classmethod
    def from_table(cls, name, table, ctx):
        return object()


class StealsNormals(Sensor):
    outputs = (Output("v", 3, "m/s", "a noisy vector"),)
    streams = (("steal", 1),)

    def measure(self, k, truth, state, z, ctx):
        return {"v": truth.vel + 0.1 * z[..., 0:3]}, state  # one normal on three axes


class Billion(_Height):
    streams = (("huge", 10**9),)

    def measure(self, k, truth, state, z, ctx):
        return {"h": self.good(truth)}, state


class NoneCommand(Controller):
    """A controller part whose call returns nothing."""

    @classmethod
    def from_table(cls, table, drone, dt):
        return cls(None)

    def __call__(self, state, ref, gains, cstate):
        return None


class WrongCommand(NoneCommand):
    """A controller part whose command has the wrong size (3, not a 4-wrench)."""

    def __call__(self, state, ref, gains, cstate):
        return state.pos * 0.0, cstate


class NumpyOnly(_Height):
    """A correct part that only runs on NumPy (it cannot be traced): flown per step, named."""

    def measure(self, k, truth, state, z, ctx):
        h = self.good(truth)
        return {"h": h if bool((h > -1e9).all()) else 0.0 * h}, state  # a Python if
