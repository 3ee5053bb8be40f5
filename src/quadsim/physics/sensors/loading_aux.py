r"""Barometer and GNSS presets and TOML files: loading and unit conversion to SI.

The files live next to the IMU presets (``quadsim/physics/presets/sensors/*.toml``) and declare
their kind at the top, ``kind = "baro"`` or ``kind = "gnss"`` (a file without ``kind`` is an
IMU). Every value is a number in the first listed unit or an inline table
``{ value, unit, source, note }``; packaged presets must give ``unit`` and ``source``.

**Pressure units.** A barometer value may be written in pressure units (``Pa``, ``hPa``); it is
converted to metres of altitude with the sea-level ISA gradient ``|dh/dp| = 1/(ρ_0 g_0) =
0.0832 m/Pa ≈ 8.3 m/hPa`` (:data:`quadsim.physics.sensors.baro.M_PER_PA`). For stds and drift only
the magnitude matters; the constant offset ``bias`` changes sign (a pressure reading too high by
``Δp`` reads ``Δp |dh/dp|`` too low).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .._toml import REQUIRED, read_entry
from .baro import M_PER_PA, BaroParams, check_baro_params
from .gnss import GnssParams, check_gnss_params, gnss_delay_steps
from .loading import list_presets, norm_unit, read_sensor_file

_U_ALT = {"m": 1.0, "cm": 0.01, "mm": 1e-3, "Pa": M_PER_PA, "hPa": 100.0 * M_PER_PA}
_U_ALT_SIGNED = {"m": 1.0, "cm": 0.01, "mm": 1e-3, "Pa": -M_PER_PA, "hPa": -100.0 * M_PER_PA}
_U_ALT_WALK = {
    "m/s/sqrt(Hz)": 1.0,
    "m/sqrt(s)": 1.0,
    "cm/sqrt(s)": 0.01,
    "m/sqrt(hr)": 1.0 / 60.0,
    "Pa/s/sqrt(Hz)": M_PER_PA,
    "Pa/sqrt(s)": M_PER_PA,
    "Pa/sqrt(hr)": M_PER_PA / 60.0,
}
_U_LEN = {"m": 1.0, "cm": 0.01, "mm": 1e-3}
_U_VEL = {"m/s": 1.0, "cm/s": 0.01, "mm/s": 1e-3}
_U_TIME = {"s": 1.0, "ms": 1e-3, "min": 60.0}
_U_RATE = {"Hz": 1.0}

# key -> (accepted units {unit: factor to SI}, default)
_BARO_KEYS: dict[str, tuple[dict[str, float], Any]] = {
    "rate": (_U_RATE, REQUIRED),
    "noise_std": (_U_ALT, REQUIRED),
    "bias_walk": (_U_ALT_WALK, 0.0),
    "bias": (_U_ALT_SIGNED, 0.0),
    "bias_std": (_U_ALT, 0.0),
}
_GNSS_KEYS: dict[str, tuple[dict[str, float], Any]] = {
    "rate": (_U_RATE, REQUIRED),
    "latency": (_U_TIME, 0.0),
    "pos_std_h": (_U_LEN, REQUIRED),
    "pos_std_v": (_U_LEN, REQUIRED),
    "vel_std_h": (_U_VEL, REQUIRED),
    "vel_std_v": (_U_VEL, REQUIRED),
    "gm_std_h": (_U_LEN, 0.0),
    "gm_std_v": (_U_LEN, 0.0),
    "gm_tau": (_U_TIME, 0.0),
}
_TEXT_KEYS = ("kind", "name", "description")
_WHAT = {"baro": "barometer", "gnss": "GNSS"}


def list_baro_presets() -> list[str]:
    """Sorted names of the packaged barometer presets (``kind = "baro"``)."""
    return list_presets("baro")


def list_gnss_presets() -> list[str]:
    """Sorted names of the packaged GNSS presets (``kind = "gnss"``)."""
    return list_presets("gnss")


_Keys = dict[str, tuple[dict[str, float], Any]]


def _read(
    name_or_path: str | os.PathLike[str], kind: str, keys: _Keys
) -> tuple[dict[str, float], str, Any]:
    """Parse a preset or file of ``kind``: (values in SI, name, fail)."""
    doc, stem, preset, fail = read_sensor_file(name_or_path, _WHAT[kind], list_presets(kind),
                                               [*_TEXT_KEYS, *keys], _TEXT_KEYS)  # fmt: skip
    if doc.get("kind", kind) != kind:
        raise fail("kind", f"this is a {doc['kind']!r} file; expected kind = {kind!r}")
    if preset and "kind" not in doc:
        raise fail("kind", f"presets must declare kind = {kind!r}")
    values: dict[str, float] = {}
    for key, (units, default) in keys.items():
        a, factor = read_entry(doc, key, units, packaged=preset, packaged_name="presets",
                               normalize=norm_unit, fail=fail, default=default)  # fmt: skip
        if factor is None:  # absent: its default
            values[key] = float(a)
            continue
        if a.shape != ():
            raise fail(key, f"must be a single number; got shape {a.shape}")
        if not np.isfinite(a):
            raise fail(key, f"must be finite; got {a.tolist()!r}")
        values[key] = float(a) * factor
    return values, doc.get("name", stem), fail


def load_baro(name_or_path: str | os.PathLike[str]) -> BaroParams:
    """Load a barometer from a preset name (``"bmp388"``) or a TOML file path.

    Keys (first unit = canonical): ``rate`` [Hz] (required), ``noise_std`` [m, cm, mm, Pa, hPa]
    (required; per-sample std), ``bias_walk`` [m/s/sqrt(Hz), m/sqrt(s), cm/sqrt(s), m/sqrt(hr),
    Pa/s/sqrt(Hz), Pa/sqrt(s), Pa/sqrt(hr)], ``bias`` and ``bias_std`` [m, cm, mm, Pa, hPa]
    (default 0). Pressure units convert with ``8.3 m/hPa`` (module docstring; ``bias`` flips
    sign).

    Raises:
        ValueError: Naming the file (or preset) and the key: unknown key or unit, missing
            required value, not a single finite number, negative std, wrong ``kind``.
        FileNotFoundError: A path that does not exist.
    """
    v, name, fail = _read(name_or_path, "baro", _BARO_KEYS)
    try:
        return check_baro_params(BaroParams(**v, name=name))
    except ValueError as e:
        raise fail(str(e).split(" ", 1)[0], str(e)) from e


def load_gnss(name_or_path: str | os.PathLike[str]) -> GnssParams:
    """Load a GNSS receiver from a preset name (``"ublox_m9n"``) or a TOML file path.

    Keys (first unit = canonical): ``rate`` [Hz], ``pos_std_h``, ``pos_std_v`` [m, cm, mm],
    ``vel_std_h``, ``vel_std_v`` [m/s, cm/s, mm/s] (required); ``latency`` [s, ms, min],
    ``gm_std_h``, ``gm_std_v`` [m, cm, mm], ``gm_tau`` [s, ms, min] (default 0). The latency is
    checked against the fix period when the receiver is initialised (:func:`gnss_init`) and
    here, so a preset can always be used at its own rate.

    Raises:
        ValueError: Naming the file (or preset) and the key: unknown key or unit, missing
            required value, not a single finite number, negative std, wrong ``kind``, latency
            not an integer number of fix periods.
        FileNotFoundError: A path that does not exist.
    """
    v, name, fail = _read(name_or_path, "gnss", _GNSS_KEYS)
    try:
        p = check_gnss_params(GnssParams(**v, name=name))
        gnss_delay_steps(p)
    except ValueError as e:
        raise fail(str(e).split(" ", 1)[0], str(e)) from e
    return p
