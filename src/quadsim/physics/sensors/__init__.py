r"""Sensors: an IMU (gyroscope + accelerometer) and motion capture, with explicit randomness.

Frames: world ENU (z up), body FLU; ``quat`` (xyzw) maps body to world, ``R_wb = to_matrix(q)``.

Submodules:

* :mod:`quadsim.sensors.imu`: the IMU noise model (``ImuParams``, ``imu_init``, ``imu_measure``)
  and its exact discretisation (``imu_discrete_std``);
* :mod:`quadsim.sensors.loading`: IMU presets and TOML files (``load_imu``, ``list_imu_presets``,
  units, ``bias_walk_from_instability``);
* :mod:`quadsim.sensors.mocap`: motion capture with latency (``MocapParams``, ``mocap_init``,
  ``mocap_measure``);
* :mod:`quadsim.sensors.allan`: the overlapping Allan deviation (``allan_deviation``).

Randomness is explicit: every noisy function takes ``noise``: a ``numpy.random.Generator``, a JAX
PRNG key, a ``torch.Generator``, or an array of standard normal samples ``z`` (the pure core;
shapes ``(..., 12)`` for :func:`imu_measure`, ``(..., 6)`` for :func:`imu_init` and
:func:`mocap_measure`). The same generator state, key or ``z`` gives bitwise the same readings.
"""

from .allan import allan_deviation
from .imu import (
    IMU_INIT_NOISE_DIM,
    IMU_NOISE_DIM,
    ImuParams,
    ImuReading,
    ImuState,
    check_imu_params,
    imu_discrete_std,
    imu_init,
    imu_measure,
)
from .loading import G_N, bias_walk_from_instability, list_imu_presets, load_imu
from .mocap import (
    MOCAP_NOISE_DIM,
    MocapParams,
    MocapReading,
    MocapState,
    mocap_delay_steps,
    mocap_init,
    mocap_measure,
)

__all__ = [
    "G_N",
    "IMU_INIT_NOISE_DIM",
    "IMU_NOISE_DIM",
    "MOCAP_NOISE_DIM",
    "ImuParams",
    "ImuReading",
    "ImuState",
    "MocapParams",
    "MocapReading",
    "MocapState",
    "allan_deviation",
    "bias_walk_from_instability",
    "check_imu_params",
    "imu_discrete_std",
    "imu_init",
    "imu_measure",
    "list_imu_presets",
    "load_imu",
    "mocap_delay_steps",
    "mocap_init",
    "mocap_measure",
]
