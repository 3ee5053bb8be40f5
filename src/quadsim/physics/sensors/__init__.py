r"""Sensors: an IMU (gyroscope + accelerometer) and motion capture, with explicit randomness.

Frames: world ENU (z up), body FLU; ``quat`` (xyzw) maps body to world, ``R_wb = to_matrix(q)``.

Submodules:

* :mod:`quadsim.physics.sensors.imu`: the IMU noise model (``ImuParams``, ``imu_init``,
  ``imu_measure``) and its exact discretisation (``imu_discrete_std``);
* :mod:`quadsim.physics.sensors.loading`: IMU presets and TOML files (``load_imu``,
  ``list_imu_presets``, units, ``bias_walk_from_instability``);
* :mod:`quadsim.physics.sensors.mocap`: motion capture with latency (``MocapParams``,
  ``mocap_init``, ``mocap_measure``);
* :mod:`quadsim.physics.sensors.baro`: a barometric altimeter with white noise, constant offset,
  turn-on bias and bias random walk (``BaroParams``, ``baro_init``, ``baro_measure``);
* :mod:`quadsim.physics.sensors.gnss`: a GNSS position/velocity receiver with latency, white noise
  and a Gauss-Markov position error (``GnssParams``, ``gnss_init``, ``gnss_measure``);
* :mod:`quadsim.physics.sensors.loading_aux`: barometer and GNSS presets and TOML files
  (``load_baro``, ``load_gnss``, ``list_baro_presets``, ``list_gnss_presets``);
* :mod:`quadsim.physics.sensors.allan`: the overlapping Allan deviation (``allan_deviation``).

Randomness is explicit: every noisy function takes ``noise``: a ``numpy.random.Generator``, a JAX
PRNG key, a ``torch.Generator``, or an array of standard normal samples ``z`` (the pure core;
shapes ``(..., 12)`` for :func:`imu_measure`, ``(..., 6)`` for :func:`imu_init` and
:func:`mocap_measure`, ``(..., 2)`` for :func:`baro_measure`, ``(..., 1)`` for :func:`baro_init`,
``(..., 9)`` for :func:`gnss_measure` and ``(..., 3)`` for :func:`gnss_init`). The same generator
state, key or ``z`` gives bitwise the same readings.
"""

from .allan import allan_deviation
from .baro import (
    BARO_INIT_NOISE_DIM,
    BARO_NOISE_DIM,
    M_PER_PA,
    BaroParams,
    BaroState,
    baro_init,
    baro_measure,
    check_baro_params,
)
from .gnss import (
    CEP_PER_SIGMA,
    GNSS_INIT_NOISE_DIM,
    GNSS_NOISE_DIM,
    GnssParams,
    GnssReading,
    GnssState,
    check_gnss_params,
    gnss_delay_steps,
    gnss_gm_coefficient,
    gnss_init,
    gnss_measure,
)
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
from .loading_aux import list_baro_presets, list_gnss_presets, load_baro, load_gnss
from .mocap import (
    MOCAP_NOISE_DIM,
    MocapParams,
    MocapReading,
    MocapState,
    dropout_thresholds,
    mocap_delay_steps,
    mocap_init,
    mocap_measure,
)

__all__ = [
    "BARO_INIT_NOISE_DIM",
    "BARO_NOISE_DIM",
    "CEP_PER_SIGMA",
    "GNSS_INIT_NOISE_DIM",
    "GNSS_NOISE_DIM",
    "G_N",
    "IMU_INIT_NOISE_DIM",
    "IMU_NOISE_DIM",
    "MOCAP_NOISE_DIM",
    "M_PER_PA",
    "BaroParams",
    "BaroState",
    "GnssParams",
    "GnssReading",
    "GnssState",
    "ImuParams",
    "ImuReading",
    "ImuState",
    "MocapParams",
    "MocapReading",
    "MocapState",
    "allan_deviation",
    "baro_init",
    "baro_measure",
    "bias_walk_from_instability",
    "check_baro_params",
    "check_gnss_params",
    "check_imu_params",
    "dropout_thresholds",
    "gnss_delay_steps",
    "gnss_gm_coefficient",
    "gnss_init",
    "gnss_measure",
    "imu_discrete_std",
    "imu_init",
    "imu_measure",
    "list_baro_presets",
    "list_gnss_presets",
    "list_imu_presets",
    "load_baro",
    "load_gnss",
    "load_imu",
    "mocap_delay_steps",
    "mocap_init",
    "mocap_measure",
]
