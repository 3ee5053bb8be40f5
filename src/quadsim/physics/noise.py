r"""Counter-based random numbers: the noise of a drone at a step, whatever the batch or the chunk.

Every random number quadsim draws inside a flight (sensor noise, the IMU's turn-on bias, Dryden
turbulence) is a pure function of ``(seed, stream, step, drone)``, so drone 3's IMU at step 500
reads the same whether 4 or 4096 drones fly, in one chunk or fifty, on NumPy, JAX or the compiled
C loop (which evaluates the same function in C, :func:`c_source`). Nothing is carried between
draws and there is no generator object to pass around.

**Generator.** Philox4x32-10 (Salmon, Moraes, Dror & Shaw, "Parallel random numbers: as easy as
1, 2, 3", SC 2011; the generator of cuRAND, JAX's ``rbg`` and TensorFlow), which maps a 128-bit
counter and a 64-bit key to 128 random bits with ten rounds of

.. math::

    (c_0, c_1, c_2, c_3) \leftarrow (\mathrm{hi}(M_1 c_2) \oplus c_1 \oplus k_0,\;
    \mathrm{lo}(M_1 c_2),\; \mathrm{hi}(M_0 c_0) \oplus c_3 \oplus k_1,\; \mathrm{lo}(M_0 c_0)),

the key bumped by the Weyl constants ``(W_0, W_1)`` between rounds. Here the key is the seed
(its low and high 32 bits) and the counter is ``(step mod 2^32, step div 2^32, drone, stream *
2^16 + block)``: block ``b`` gives normals ``4b .. 4b + 3`` of the draw.

**Normals.** Each pair of words ``(a, b)`` becomes two standard normals by Box-Muller,
``u_1 = (a + 1/2) 2^{-32}``, ``u_2 = (b + 1/2) 2^{-32}``,
``z = \sqrt{-2 \ln u_1}\,(\cos 2π u_2, \sin 2π u_2)``, evaluated in float64 (``|z| < 6.7``).
The C twin uses the C library's ``log``, ``cos`` and ``sin``, so the two agree to a few units in
the last place, not bitwise; the 32-bit words agree exactly.

**Streams** (:data:`STREAMS`) keep the uses apart: the IMU's noise does not change when motion
capture is added, and the turbulence of a flight does not change when an IMU is.
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np

__all__ = ["STREAMS", "c_source", "normals", "philox4x32", "stream_id"]

# The C twin (c_source) has a scalar draw (quadsim_normals, one drone) and a lane-batched one
# (quadsim_normals_w, the W drones of a vector block: the compiled loops use it, vectorised with
# the C library's vector log and sin; cos is taken as sin(a + pi/2), equal to 1e-15).

STREAMS = {
    "imu": 1,
    "imu_init": 2,
    "mocap": 3,
    "dryden": 4,
    "dryden_init": 5,
    "baro": 6,
    "baro_init": 7,
    "gnss": 8,
    "gnss_init": 9,
    "est_init": 10,
}
"""Stream of each built-in use (the high half of the counter's last word)."""

_PART_STREAMS = 1024
"""Streams below this number are reserved for :data:`STREAMS`; a part's name hashes above it."""


def stream_id(name: str) -> int:
    """The stream number of ``name``: :data:`STREAMS` for the built-in uses, else a hash of the
    name (CRC-32) in ``[1024, 65536)``, so a part's noise (:mod:`quadsim.loop.parts`) does not
    depend on which other parts a run has."""  # noqa: D205, D209
    if name in STREAMS:
        return STREAMS[name]
    if not isinstance(name, str) or not name:
        raise ValueError(f"a noise stream is named by a non-empty string; got {name!r}")
    return _PART_STREAMS + zlib.crc32(name.encode()) % (2**16 - _PART_STREAMS)

_M0, _M1 = 0xD2511F53, 0xCD9E8D57
_W0, _W1 = 0x9E3779B9, 0xBB67AE85
_MASK = np.uint64(0xFFFFFFFF)


def philox4x32(counter: Any, key: Any) -> np.ndarray:
    """Philox4x32-10 of counters ``(..., 4)`` and keys ``(..., 2)`` (uint32 words, broadcast).

    Returns:
        ``(..., 4)`` uint32: the random words (Random123's known answers,
        ``tests/physics/test_noise.py``).
    """
    c = [np.asarray(w, np.uint64) for w in np.moveaxis(np.asarray(counter, np.uint64), -1, 0)]
    k0, k1 = (np.asarray(w, np.uint64) for w in np.moveaxis(np.asarray(key, np.uint64), -1, 0))
    for r in range(10):
        if r:
            k0, k1 = (k0 + np.uint64(_W0)) & _MASK, (k1 + np.uint64(_W1)) & _MASK
        p0, p1 = np.uint64(_M0) * c[0], np.uint64(_M1) * c[2]
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ k0, p1 & _MASK, (p0 >> np.uint64(32)) ^ c[3] ^ k1,
             p0 & _MASK]  # fmt: skip
    return np.stack(np.broadcast_arrays(*c), -1).astype(np.uint32)


def check_seed(seed: Any) -> int:
    """``seed`` as an ``int`` in ``[0, 2**64)`` (a key of :func:`normals`), else a ValueError."""
    s = int(seed)
    if s != seed or not 0 <= s < 2**64:
        raise ValueError(f"seed must be an integer in [0, 2**64); got {seed!r}")
    return s


def normals(seed: int, stream: str, step: Any, drone: Any, count: int) -> np.ndarray:
    """Standard normals of ``(seed, stream, step, drone)`` (module docstring), float64.

    Args:
        seed: Key, an integer in ``[0, 2**64)``.
        stream: A name in :data:`STREAMS`, or a part's stream name (:func:`stream_id`).
        step: Step indices (integers >= 0), any shape.
        drone: Drone indices (integers >= 0), broadcasting with ``step``.
        count: Normals per draw, >= 0.

    Returns:
        ``(*broadcast(step, drone).shape, count)``.
    """
    s, sid = check_seed(seed), stream_id(stream)
    step = np.asarray(step, np.int64)
    drone = np.asarray(drone, np.int64)
    step, drone = np.broadcast_arrays(step, drone)
    blocks = np.arange(-(-int(count) // 4), dtype=np.uint64)
    st = step.astype(np.uint64)[..., None]
    ctr = [st & _MASK, st >> np.uint64(32), drone.astype(np.uint64)[..., None],
           np.uint64(sid << 16) + blocks]  # fmt: skip
    ctr = np.stack(np.broadcast_arrays(*ctr), -1)
    w = philox4x32(ctr, np.array([s & 0xFFFFFFFF, s >> 32], np.uint64)).astype(np.float64)
    u1, u2 = (w[..., 0::2] + 0.5) * 2.0**-32, (w[..., 1::2] + 0.5) * 2.0**-32
    r, a = np.sqrt(-2.0 * np.log(u1)), 2.0 * np.pi * u2
    z = np.stack([r * np.cos(a), r * np.sin(a)], -1).reshape(*step.shape, -1)
    return z[..., : int(count)]


def c_source() -> str:
    """C99 of ``quadsim_normals(seed, stream, step, drone, count, out)``, :func:`normals` in C."""
    return f"""static inline void quadsim_philox(uint32_t c[4], uint32_t k0, uint32_t k1) {{
  for (int r = 0; r < 10; ++r) {{
    if (r) {{ k0 += 0x{_W0:08X}u; k1 += 0x{_W1:08X}u; }}
    uint64_t p0 = (uint64_t)0x{_M0:08X}u * c[0], p1 = (uint64_t)0x{_M1:08X}u * c[2];
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c[1] ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c[3] ^ k1;
    c[0] = n0; c[1] = (uint32_t)p1; c[2] = n2; c[3] = (uint32_t)p0;
  }}
}}
static inline void quadsim_normals(uint64_t seed, uint32_t stream, int64_t step, int64_t drone,
                                   int count, double *out) {{
  for (int b = 0; 4 * b < count; ++b) {{
    uint32_t c[4] = {{(uint32_t)step, (uint32_t)((uint64_t)step >> 32), (uint32_t)drone,
                     (stream << 16) + (uint32_t)b}};
    quadsim_philox(c, (uint32_t)seed, (uint32_t)(seed >> 32));
    for (int h = 0; h < 2; ++h) {{
      double u1 = (c[2 * h] + 0.5) * 0x1p-32, u2 = (c[2 * h + 1] + 0.5) * 0x1p-32;
      double r = sqrt(-2.0 * log(u1)), a = 6.283185307179586 * u2;
      if (4 * b + 2 * h < count) out[4 * b + 2 * h] = r * cos(a);
      if (4 * b + 2 * h + 1 < count) out[4 * b + 2 * h + 1] = r * sin(a);
    }}
  }}
}}
#ifdef W
/* the same normals for the W drones j0 .. j0 + W - 1 at once, out[k][lane]: every loop runs over
   the lanes, so the compiler vectorises Philox and Box-Muller across drones */
static inline void quadsim_normals_w(uint64_t seed, uint32_t stream, int64_t step, int64_t j0,
                                     int count, double (*out)[W]) {{
  for (int b = 0; 4 * b < count; ++b) {{
    uint32_t c0[W], c1[W], c2[W], c3[W], k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int l = 0; l < W; ++l) {{
      c0[l] = (uint32_t)step; c1[l] = (uint32_t)((uint64_t)step >> 32);
      c2[l] = (uint32_t)(j0 + l); c3[l] = (stream << 16) + (uint32_t)b;
    }}
    for (int r = 0; r < 10; ++r) {{
      if (r) {{ k0 += 0x{_W0:08X}u; k1 += 0x{_W1:08X}u; }}
      _Pragma("omp simd") for (int l = 0; l < W; ++l) {{
        uint64_t p0 = (uint64_t)0x{_M0:08X}u * c0[l], p1 = (uint64_t)0x{_M1:08X}u * c2[l];
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1[l] ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3[l] ^ k1;
        c0[l] = n0; c1[l] = (uint32_t)p1; c2[l] = n2; c3[l] = (uint32_t)p0;
      }}
    }}
    for (int h = 0; h < 2; ++h) {{
      const uint32_t *ua = h ? c2 : c0, *ub = h ? c3 : c1;
      double rr[W], aa[W], cr[W], sr[W];
      _Pragma("omp simd") for (int l = 0; l < W; ++l) {{
        double u1 = (ua[l] + 0.5) * 0x1p-32, u2 = (ub[l] + 0.5) * 0x1p-32;
        rr[l] = sqrt(-2.0 * log(u1)); aa[l] = 6.283185307179586 * u2;
      }}
      /* cos a as sin(a + pi/2) (the same to 1e-15): a sin and a cos of one argument would be
         merged into a scalar sincos call, which has no vector form here */
      _Pragma("omp simd") for (int l = 0; l < W; ++l)
        cr[l] = rr[l] * sin(aa[l] + 1.5707963267948966);
      _Pragma("omp simd") for (int l = 0; l < W; ++l) sr[l] = rr[l] * sin(aa[l]);
      int i = 4 * b + 2 * h;
      if (i < count) for (int l = 0; l < W; ++l) out[i][l] = cr[l];
      if (i + 1 < count) for (int l = 0; l < W; ++l) out[i + 1][l] = sr[l];
    }}
  }}
}}
#endif
"""
