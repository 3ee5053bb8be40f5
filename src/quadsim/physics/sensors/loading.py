r"""IMU presets and TOML files: loading, unit conversion to SI, bias instability to bias walk.

Presets live in ``quadsim/physics/presets/sensors/*.toml`` (:func:`quadsim.physics.presets.folder`).
Values are converted to SI; ``N`` is a noise density and ``K`` a bias random walk density as in
:mod:`quadsim.physics.sensors.imu`, whose Allan variance is ``σ²(τ) = N²/τ + K² τ/3``.

**Bias instability.** Data sheets quote the in-run bias stability ``B`` (the minimum of the Allan
deviation, a flicker-noise floor) rather than ``K``. :func:`load_imu` replaces the flicker floor
by the random walk whose Allan curve has the same minimum together with the white noise ``N``:
``min_τ σ²(τ) = 2 N K/√3`` at ``τ* = √3 N/K``, hence ``K = √3 B²/(2 N)``. This is a modelling
assumption (the model has no flicker term); ``docs/sensors.md`` lists the resulting values.
"""

from __future__ import annotations

import functools
import math
import os
import re
import tomllib
from typing import Any

import numpy as np

from .. import presets
from .._toml import REQUIRED, check_keys, open_toml, read_entry
from ._validate import axis_vec3
from .imu import ImuParams, check_imu_params

G_N = 9.80665  # standard gravity [m/s^2], defines the unit g (µg, mg) of data sheets

_D2R = math.pi / 180.0
_U_GYRO_DENS = {
    "rad/s/sqrt(Hz)": 1.0,
    "deg/s/sqrt(Hz)": _D2R,
    "deg/sqrt(hr)": _D2R / 60.0,
    "rad/sqrt(s)": 1.0,
}
_U_GYRO_WALK = {"rad/s^2/sqrt(Hz)": 1.0, "deg/s^2/sqrt(Hz)": _D2R, "deg/hr/sqrt(hr)": _D2R / 216e3}
_U_GYRO = {"rad/s": 1.0, "deg/s": _D2R, "deg/hr": _D2R / 3600.0}
_U_ACC_DENS = {
    "m/s^2/sqrt(Hz)": 1.0,
    "ug/sqrt(Hz)": G_N * 1e-6,
    "mg/sqrt(Hz)": G_N * 1e-3,
    "m/s/sqrt(hr)": 1.0 / 60.0,
}
_U_ACC_WALK = {"m/s^3/sqrt(Hz)": 1.0, "ug/s/sqrt(Hz)": G_N * 1e-6, "m/s^2/sqrt(hr)": 1.0 / 60.0}
_U_ACC = {"m/s^2": 1.0, "mg": G_N * 1e-3, "ug": G_N * 1e-6}


def _imu_keys() -> dict[str, tuple[dict[str, float], Any]]:
    """Keys of an IMU file -> (accepted units {unit: factor to SI}, default): ``rate``, then
    the same six keys for the gyro and the accelerometer, each in its own units."""  # noqa: D205, D209
    keys: dict[str, tuple[dict[str, float], Any]] = {"rate": ({"Hz": 1.0}, REQUIRED)}
    for s, dens, walk, bias in (("gyro", _U_GYRO_DENS, _U_GYRO_WALK, _U_GYRO),
                                ("accel", _U_ACC_DENS, _U_ACC_WALK, _U_ACC)):  # fmt: skip
        keys |= {
            f"{s}_noise_density": (dens, REQUIRED),
            f"{s}_bias_walk": (walk, None),
            f"{s}_bias_instability": (bias, None),
            f"{s}_bias": (bias, 0.0),
            f"{s}_bias_std": (bias, 0.0),
            f"{s}_scale": ({"1": 1.0}, 1.0),
        }
    return keys


_IMU_KEYS = _imu_keys()
_TEXT_KEYS = ("name", "description")


def norm_unit(unit: str) -> str:
    """Canonical spelling: no spaces, ° -> deg, µ/μ -> u, √X -> sqrt(X), ² ³ -> ^2 ^3."""
    s = "".join(str(unit).split())
    for a, b in (("°", "deg"), ("µ", "u"), ("μ", "u"), ("²", "^2"), ("³", "^3"), ("sec", "s")):
        s = s.replace(a, b)
    return re.sub(r"√\(?([A-Za-z]+)\)?", r"sqrt(\1)", s)


def bias_walk_from_instability(instability: Any, noise_density: Any) -> np.ndarray:
    """Bias random walk ``K = √3 B²/(2 N)`` whose Allan minimum with ``N`` equals ``B``.

    The model ``σ²(τ) = N²/τ + K² τ/3`` has its minimum ``2 N K/√3`` at ``τ* = √3 N/K``; setting
    it to ``B²`` gives ``K``. An assumption standing in for the flicker floor a data sheet's
    in-run bias stability describes.

    Args:
        instability: ``B`` [unit], scalar or ``(3,)``, >= 0.
        noise_density: ``N`` [unit/√Hz], scalar or ``(3,)``; > 0 where ``B > 0``.

    Returns:
        ``K`` [unit/s/√Hz], float64 ``(3,)``.
    """
    B = axis_vec3(instability, "bias_instability", nonneg=True)
    N = axis_vec3(noise_density, "noise_density", nonneg=True)
    if np.any((B > 0.0) & (N <= 0.0)):
        raise ValueError("noise_density must be > 0 to convert a bias instability to a bias walk")
    return np.where(B > 0.0, math.sqrt(3.0) * B * B / (2.0 * np.where(N > 0.0, N, 1.0)), 0.0)


def preset_root() -> Any:
    """The folder of the packaged sensor presets (``quadsim/physics/presets/sensors``)."""
    return presets.folder("sensors")


def preset_kind(entry: Any) -> str:
    """The ``kind`` a packaged sensor preset declares (``"imu"`` when it declares none)."""
    try:
        return str(tomllib.loads(entry.read_text(encoding="utf-8")).get("kind", "imu"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError):
        return "imu"  # load_imu reports the malformed file


@functools.cache
def _packaged_kinds() -> tuple[tuple[str, str], ...]:
    """``(name, kind)`` of every packaged sensor preset, sorted (read once a process: the
    package's files do not change under it)."""  # noqa: D205, D209
    return tuple(sorted((p.name[:-5], preset_kind(p)) for p in preset_root().iterdir()
                        if p.name.endswith(".toml")))  # fmt: skip


def list_presets(kind: str) -> list[str]:
    """Sorted names of the packaged sensor presets of ``kind`` (``"imu"``, ``"baro"``, ...)."""
    return [name for name, k in _packaged_kinds() if k == kind]


def list_imu_presets() -> list[str]:
    """Sorted names of the packaged IMU presets (``quadsim/physics/presets/sensors/*.toml``)."""
    return list_presets("imu")


def load_imu(name_or_path: str | os.PathLike[str]) -> ImuParams:
    """Load an IMU from a preset name (``"adis16470"``, ``"bmi088"``) or a TOML file path.

    Every value is an inline table ``{ value, unit, source, note }`` (presets must give ``unit``
    and ``source``; a user file may give a bare number in the first listed unit); units are
    converted to SI here. Give at most one of ``*_bias_walk`` and ``*_bias_instability`` per
    sensor; an instability ``B`` becomes ``K = √3 B²/(2 N)`` (:func:`bias_walk_from_instability`);
    neither means no bias walk. See ``docs/sensors.md``.

    Raises:
        ValueError: Naming the file (or preset) and the key: unknown key or unit, bad shape,
            missing required value, negative density, both walk and instability given.
        FileNotFoundError: A path that does not exist.
    """
    doc, stem, preset, fail = read_sensor_file(name_or_path, "IMU", list_imu_presets(),
                                               [*_TEXT_KEYS, *_IMU_KEYS])  # fmt: skip
    v = {k: _entry(doc, k, preset, fail) for k in _IMU_KEYS}
    for s in ("gyro", "accel"):
        walk, inst = v.pop(f"{s}_bias_walk"), v.pop(f"{s}_bias_instability")
        if walk is not None and inst is not None:
            raise fail(f"{s}_bias_walk", f"give at most one of it and '{s}_bias_instability'")
        dens = v[f"{s}_noise_density"]
        if inst is not None:
            if np.any(inst < 0.0) or np.any(dens < 0.0):
                raise fail(f"{s}_bias_instability", "instability and noise density must be >= 0")
            try:
                walk = bias_walk_from_instability(inst, dens)
            except ValueError as e:
                raise fail(f"{s}_bias_instability", str(e)) from e
        v[f"{s}_bias_walk"] = 0.0 if walk is None else walk
    v["rate"] = float(v["rate"]) if v["rate"].ndim == 0 else v["rate"]
    try:
        return check_imu_params(ImuParams(**v, name=doc.get("name", stem)))
    except ValueError as e:
        key = str(e).split(" ", 1)[0]
        raise fail(key, str(e)) from e


def read_sensor_file(name_or_path: str | os.PathLike[str], what: str, names: list[str],
                     allowed: list[str], text_keys: tuple[str, ...] = _TEXT_KEYS,
                     root: Any = None) -> tuple[dict[str, Any], str, bool, Any]:  # fmt: skip
    """A sensor preset (by name) or TOML file, parsed, its keys and text fields checked.

    The one reader of the preset files with ``{ value, unit, source }`` entries (IMU,
    barometer, GNSS, and the power chain's, :func:`quadsim.physics.power.load_power`): a name
    without a path separator or ``.toml`` is a packaged preset among ``names``, in ``root`` (default
    the sensor presets).

    Returns:
        ``(document, stem, is_preset, fail)``; ``fail(key, msg)`` builds the ``ValueError``
        naming the file (or preset) and the key.

    Raises:
        ValueError: An unknown preset, malformed TOML, an unknown key, a text field that is not
            a string (naming the file and the key).
        FileNotFoundError: A path that does not exist.
    """
    doc, where, stem, preset = open_toml(name_or_path, names, root or preset_root(),
                                         f"{what} preset", "presets")  # fmt: skip

    def fail(key: str, msg: str) -> ValueError:
        return ValueError(f"{where}: key {key!r}: {msg}")

    check_keys(doc, allowed, text_keys, fail)
    return doc, stem, preset, fail


def _entry(doc: dict[str, Any], key: str, preset: bool, fail: Any) -> Any:
    """The value of ``key`` in SI units (float64 array), its default, or None."""
    units, default = _IMU_KEYS[key]
    a, factor = read_entry(doc, key, units, packaged=preset, packaged_name="presets",
                           normalize=norm_unit, fail=fail, default=default)  # fmt: skip
    if factor is None:  # absent: its default
        return a
    shapes = ((),) if key == "rate" else ((), (3,))
    if a.shape not in shapes:
        raise fail(key, f"wrong shape {a.shape}; expected one of {list(shapes)}")
    if not np.all(np.isfinite(a)):
        raise fail(key, f"must be finite; got {a.tolist()!r}")
    return a * factor
