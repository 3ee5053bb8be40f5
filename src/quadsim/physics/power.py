r"""The power chain: PWM and battery voltage to rotor speed, rotor speed to power, the battery.

The battery's charge and voltage sag, for the Crazyflie (the ``cf21_stock`` preset).

Motor (steady state, identified on the thrust stand, :mod:`quadsim.app.sysid.power`): with the
duty ``d = pwm / 65535`` and the battery voltage ``V`` [V], the effective motor voltage is
``u = d V`` and

.. math::

    ω_{ss} = \max(c_0 + c_1 u + c_2 u^2, 0) \quad (pwm ≥ pwm_{start}, \text{ else } 0) \quad [RPM];

the rotor follows ``ω_ss`` with the drone preset's motor time constant (the stand has no time
base; its lag is in samples).

Electrical power drawn from the battery (the whole drone: electronics and four motors):

.. math::

    P = p_0 + \sum_i (p_1 ω_i + p_2 ω_i^2) \quad [W].

Battery (one LiPo cell): open-circuit voltage ``E(q)`` against the charge ``q ∈ [0, 1]``
(piecewise linear through a table at ``q = 0, 0.1, …, 1``), internal resistance ``R``; at power
``P`` the terminal voltage and current are

.. math::

    V = \tfrac12 \big(E + \sqrt{E^2 - 4 R P}\big), \quad I = P / V, \quad
    \dot q = -\frac{I}{3600\, C} \quad (C \text{ in A h}),

(``E² < 4RP``: more power than the cell can give; ``V = E/2``, the maximum-power point). The
battery is empty at ``V < v_cutoff``.

Pure array-API functions (NumPy, JAX, CasADi through :class:`~quadsim.physics._symbolic.SymArray`);
:func:`load_power` reads a preset (``presets/power/<name>.toml``) or a TOML file, every value
with its unit and source.
"""

from __future__ import annotations

import math
import os
from typing import Any, NamedTuple

import numpy as np

from . import presets
from ._array import namespace
from ._toml import read_entry
from .sensors.loading import read_sensor_file

__all__ = [
    "PWM_FULL",
    "PowerParams",
    "battery_state",
    "charge_rate",
    "check_power_params",
    "discharge",
    "electrical_power",
    "hover_endurance",
    "list_power_presets",
    "load_power",
    "ocv",
    "rpm_from_pwm",
]

PWM_FULL = 65535.0
"""The firmware's PWM at full duty."""


class PowerParams(NamedTuple):
    """A drone's power chain (module docstring), SI units.

    Attributes:
        capacity: Battery capacity ``C`` [A h].
        r_internal: Internal resistance ``R`` [Ω].
        ocv: Open-circuit voltage at charge ``0, 0.1, …, 1`` (11 values, increasing) [V].
        v_cutoff: Terminal voltage below which the battery is empty [V].
        rpm_coef: ``(c0, c1, c2)`` of the steady rotor speed [RPM, RPM/V, RPM/V²].
        pwm_start: PWM below which the motors stand still.
        power_coef: ``(p0, p1, p2)`` of the electrical power [W, W/RPM, W/RPM²] (``p1``, ``p2``
            per rotor).
        name: Preset or file name.
    """

    capacity: float
    r_internal: float
    ocv: Any
    v_cutoff: float
    rpm_coef: Any
    pwm_start: float
    power_coef: Any
    name: str = ""


def check_power_params(p: PowerParams) -> PowerParams:
    """``p`` with arrays as float64, checked for physical sense.

    Raises:
        ValueError: Naming the field: a capacity or resistance that is not finite and > 0 (>= 0
            for the resistance), an open-circuit curve that is not 11 finite increasing values,
            a cut-off outside it, a PWM start outside 0..65535, a rotor-speed model that does
            not rise with the voltage, a negative idle power or a power that falls with speed.
    """
    ocv_ = np.asarray(p.ocv, np.float64)
    rpm = np.asarray(p.rpm_coef, np.float64)
    pw = np.asarray(p.power_coef, np.float64)
    if not (math.isfinite(p.capacity) and p.capacity > 0):
        raise ValueError(f"capacity must be > 0 [A h]; got {p.capacity!r}")
    if not (math.isfinite(p.r_internal) and p.r_internal >= 0):
        raise ValueError(f"r_internal must be >= 0 [ohm]; got {p.r_internal!r}")
    if ocv_.shape != (11,) or not np.all(np.isfinite(ocv_)) or np.any(np.diff(ocv_) <= 0):
        raise ValueError(f"ocv must be 11 increasing voltages at charge 0, 0.1, ..., 1; "
                         f"got {ocv_.tolist()!r}")  # fmt: skip
    if not (ocv_[0] <= p.v_cutoff < ocv_[-1]):
        raise ValueError(f"v_cutoff must lie in the open-circuit curve [{ocv_[0]}, {ocv_[-1]}) V; "
                         f"got {p.v_cutoff!r}")  # fmt: skip
    if not (0 <= p.pwm_start <= PWM_FULL):
        raise ValueError(f"pwm_start must be in 0..65535; got {p.pwm_start!r}")
    u = np.linspace(0.5, ocv_[-1], 8)
    if rpm.shape != (3,) or not np.all(np.isfinite(rpm)) or np.any(np.diff(
            rpm[0] + rpm[1] * u + rpm[2] * u * u) <= 0):  # fmt: skip
        raise ValueError(f"rpm_coef must be 3 finite values whose speed rises with the motor "
                         f"voltage; got {rpm.tolist()!r}")  # fmt: skip
    w = np.linspace(0.0, 30000.0, 8)
    if pw.shape != (3,) or not np.all(np.isfinite(pw)) or pw[0] < 0 or np.any(np.diff(
            pw[1] * w + pw[2] * w * w) < 0):  # fmt: skip
        raise ValueError(f"power_coef must be 3 finite values, an idle power >= 0 and a power "
                         f"that rises with speed; got {pw.tolist()!r}")  # fmt: skip
    return p._replace(ocv=ocv_, rpm_coef=rpm, power_coef=pw, capacity=float(p.capacity),
                      r_internal=float(p.r_internal), v_cutoff=float(p.v_cutoff),
                      pwm_start=float(p.pwm_start))  # fmt: skip


def ocv(charge: Any, p: PowerParams) -> Any:
    """Open-circuit voltage [V] at ``charge`` (0..1, clipped) ``(...)``: piecewise linear."""
    xp = namespace(charge)
    q = xp.clip(charge, 0.0, 1.0)
    v = 0.0 * q + float(p.ocv[0])
    for k in range(10):
        slope = (float(p.ocv[k + 1]) - float(p.ocv[k])) / 0.1
        v = v + slope * xp.clip(q - 0.1 * k, 0.0, 0.1)
    return v


def battery_state(charge: Any, power: Any, p: PowerParams) -> tuple[Any, Any]:
    """``(voltage [V], current [A])`` of the battery at ``charge`` delivering ``power`` [W]."""
    xp = namespace(charge, power)
    E = ocv(charge, p)
    disc = xp.maximum(E * E - 4.0 * p.r_internal * power, 0.0)
    V = 0.5 * (E + xp.sqrt(disc))
    return V, power / V


def charge_rate(current: Any, p: PowerParams) -> Any:
    """``dq/dt`` [1/s] at ``current`` [A]."""
    return -current / (3600.0 * p.capacity)


def discharge(charge: Any, power: Any, dt: float, p: PowerParams) -> Any:
    """The charge ``(...)`` after delivering ``power`` [W] for ``dt`` [s]: the midpoint rule in
    the current (the one integrator of the charge: the loop, :class:`~quadsim.engines.pwm.PwmDrive`,
    the envs' pwm level and :func:`hover_endurance`), clipped to 0..1."""  # noqa: D205, D209
    xp = namespace(charge, power)
    _, i0 = battery_state(charge, power, p)
    _, im = battery_state(charge + 0.5 * dt * charge_rate(i0, p), power, p)
    return xp.clip(charge + dt * charge_rate(im, p), 0.0, 1.0)


def rpm_from_pwm(pwm: Any, voltage: Any, p: PowerParams) -> Any:
    """Steady rotor speed [RPM] ``(..., n)`` from PWM ``(..., n)`` and battery voltage ``(...)``
    or ``(..., 1)`` [V] (module docstring)."""  # noqa: D205, D209
    xp = namespace(pwm)
    u = pwm / PWM_FULL * voltage
    c0, c1, c2 = (float(c) for c in p.rpm_coef)
    w = xp.maximum(c0 + c1 * u + c2 * u * u, 0.0)
    return xp.where(pwm >= p.pwm_start, w, 0.0 * w)


def electrical_power(rpm: Any, p: PowerParams) -> Any:
    """Electrical power [W] ``(...)`` of the drone at rotor speeds ``(..., n)`` [RPM]."""
    xp = namespace(rpm)
    p0, p1, p2 = (float(c) for c in p.power_coef)
    return p0 + xp.sum(p1 * rpm + p2 * rpm * rpm, axis=-1)


def hover_endurance(p: PowerParams, hover_rpm: float, n_rotors: int = 4,
                    dt: float = 0.5) -> float:  # fmt: skip
    """Seconds of hover from a full battery until the terminal voltage falls below the cut-off.

    The power of ``n_rotors`` at ``hover_rpm`` (:func:`electrical_power`) is drawn at constant
    rotor speed (the PWM rising as the voltage sags); the charge is integrated with the
    midpoint rule in steps of ``dt`` [s].
    """
    P = float(electrical_power(np.full(n_rotors, float(hover_rpm)), p))
    q, t = 1.0, 0.0
    while True:
        V, _ = battery_state(np.asarray(q), np.asarray(P), p)
        if float(V) < p.v_cutoff or t > 36000:
            return t
        q, t = float(discharge(np.asarray(q), np.asarray(P), dt, p)), t + dt


_KEYS = {
    "capacity": {"A h": 1.0, "mA h": 1e-3},
    "r_internal": {"ohm": 1.0, "mohm": 1e-3},
    "ocv": {"V": 1.0},
    "v_cutoff": {"V": 1.0},
    "rpm_coef": {"RPM, RPM/V, RPM/V^2": 1.0},
    "pwm_start": {"pwm": 1.0},
    "power_coef": {"W, W/RPM, W/RPM^2": 1.0},
}
_TEXT = ("kind", "name", "description")


def _root() -> Any:
    return presets.folder("power")


def list_power_presets() -> list[str]:
    """Names of the packaged power presets."""
    return sorted(e.name[:-5] for e in _root().iterdir() if e.name.endswith(".toml"))


def load_power(name_or_path: str | os.PathLike[str] = "cf21_stock") -> PowerParams:
    """A power preset by name (``"cf21_stock"``) or a TOML file: every key of
    :class:`PowerParams` as ``{ value, unit, source }`` (``unit`` and ``source`` required in
    presets), units as in the preset.

    Raises:
        ValueError: Naming the file (or preset) and the key: malformed TOML, an unknown or
            missing key, a unit not accepted, a value :func:`check_power_params` rejects.
        FileNotFoundError: A path that does not exist.
    """  # noqa: D205
    doc, name, packaged, fail = read_sensor_file(name_or_path, "power", list_power_presets(),
                                                 [*_KEYS, *_TEXT], _TEXT, root=_root())  # fmt: skip
    values = {}
    for key, units in _KEYS.items():
        a, factor = read_entry(doc, key, units, packaged=packaged, packaged_name="presets",
                               normalize=str.strip, fail=fail)  # fmt: skip
        values[key] = a * factor if a.ndim else float(a) * factor
    try:
        return check_power_params(PowerParams(**values, name=name))
    except ValueError as e:
        raise fail(str(e).split(" ", 1)[0], str(e)) from e
