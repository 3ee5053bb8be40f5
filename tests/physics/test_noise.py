"""Counter-based noise (quadsim.physics.noise): Random123's answers, the C twin, the statistics."""

from __future__ import annotations

import ctypes
import subprocess

import numpy as np
import pytest
from scipy import stats

from quadsim.engines import native, native_codegen
from quadsim.physics.noise import STREAMS, c_source, normals, philox4x32

# Random123's tests/kat_vectors for philox4x32_10: counter, key, output.
KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]  # fmt: skip


@pytest.mark.parametrize(("ctr", "key", "out"), KAT)
def test_philox_known_answers(ctr, key, out):
    assert philox4x32(np.array(ctr), np.array(key)).tolist() == list(out)


def test_known_answers_batched():
    ctr = np.array([k[0] for k in KAT])
    key = np.array([k[1] for k in KAT])
    assert philox4x32(ctr, key).tolist() == [list(k[2]) for k in KAT]


def test_a_drone_draws_the_same_in_any_batch_and_chunk():
    a = normals(7, "imu", np.arange(100)[:, None], np.arange(9)[None], 12)
    b = normals(7, "imu", np.arange(40, 60), 3, 12)
    np.testing.assert_array_equal(a[40:60, 3], b)
    assert a.shape == (100, 9, 12)
    c = normals(7, "mocap", np.arange(100)[:, None], np.arange(9)[None], 12)
    d = normals(8, "imu", np.arange(100)[:, None], np.arange(9)[None], 12)
    assert np.abs(np.corrcoef(a.ravel(), c.ravel())[0, 1]) < 0.02
    assert np.abs(np.corrcoef(a.ravel(), d.ravel())[0, 1]) < 0.02


def test_normals_are_standard_normal_and_white():
    z = normals(1, "dryden", np.arange(20000)[:, None], np.arange(5)[None], 6)
    flat = z.reshape(-1)
    assert stats.kstest(flat, "norm").pvalue > 1e-3
    assert abs(flat.mean()) < 4 / np.sqrt(flat.size)
    assert abs(flat.var() - 1) < 6 * np.sqrt(2 / flat.size)
    lag = np.corrcoef(z[1:, 0, 0], z[:-1, 0, 0])[0, 1]  # consecutive steps
    cross = np.corrcoef(z[:, 0, 0], z[:, 0, 1])[0, 1]  # components of one draw
    assert abs(lag) < 0.03 and abs(cross) < 0.03


def test_bad_seed_and_stream():
    with pytest.raises(ValueError, match="seed"):
        normals(-1, "imu", 0, 0, 3)
    with pytest.raises(ValueError, match="seed"):
        normals(2**64, "imu", 0, 0, 3)
    with pytest.raises(ValueError, match="non-empty string"):
        normals(0, "", 0, 0, 3)


def test_a_part_stream_has_numbers_of_its_own():
    """A name outside STREAMS (a sensor part's) hashes above the built-in streams, the same on
    every call, so its normals differ from every built-in stream's and from another name's."""
    from quadsim.physics.noise import STREAMS, stream_id

    assert stream_id("imu") == STREAMS["imu"]
    ids = {stream_id(f"part:{name}") for name in ("tof", "sonar", "lidar", "flow")}
    assert len(ids) == 4 and min(ids) >= 1024 and max(ids) < 2**16
    assert stream_id("part:tof") == stream_id("part:tof")
    a, b = normals(0, "part:tof", 5, 2, 4), normals(0, "part:sonar", 5, 2, 4)
    assert not np.array_equal(a, b) and not np.array_equal(a, normals(0, "imu", 5, 2, 4))


@pytest.mark.skipif(not native.available(), reason="needs a C compiler")
def test_the_c_twin_draws_the_same(tmp_path):
    src = tmp_path / "n.c"
    src.write_text("#include <math.h>\n#include <stdint.h>\n" + c_source() + """
void draw(uint64_t seed, uint32_t stream, int64_t step, int64_t drone, int count, double *out) {
  quadsim_normals(seed, stream, step, drone, count, out); }
""")
    cc, flags, _, _ = native._toolchain()
    lib = tmp_path / "n.so"
    subprocess.run([*cc, *flags, str(src), "-o", str(lib), "-lm"], check=True)
    fn = ctypes.CDLL(str(lib)).draw
    fn.argtypes = [ctypes.c_uint64, ctypes.c_uint32, ctypes.c_int64, ctypes.c_int64, ctypes.c_int,
                   ctypes.c_void_p]  # fmt: skip
    for seed, stream, step, drone in [(0, "imu", 0, 0), (2**64 - 1, "mocap", 2**40 + 3, 12345),
                                      (99, "dryden", 777, 3)]:  # fmt: skip
        out = np.zeros(7)
        fn(seed, STREAMS[stream], step, drone, 7, out.ctypes.data)
        np.testing.assert_allclose(out, normals(seed, stream, step, drone, 7), rtol=1e-13,
                                   atol=1e-14)  # fmt: skip


@pytest.mark.skipif(not native.available(), reason="needs a C compiler")
@pytest.mark.parametrize("with_simd", [True, False])
def test_the_lane_batched_c_twin_draws_the_same(tmp_path, with_simd):
    """``quadsim_normals_w`` (the compiled loop's: W drones at once, vectorised with the C
    library's vector log and sin where it has them) equals :func:`normals` for every lane."""
    w = 16
    decls = native_codegen.simd_decls(["log", "sin"], "double") if with_simd else ""
    src = tmp_path / "w.c"
    src.write_text(f"#include <math.h>\n#include <stdint.h>\n#define W {w}\n{decls}" + c_source()
                   + """
void draw(uint64_t seed, uint32_t stream, int64_t step, int64_t j0, int count, double *out) {
  quadsim_normals_w(seed, stream, step, j0, count, (double (*)[W])out); }
""")  # fmt: skip
    cc, flags, _, _ = native._toolchain()
    lib = tmp_path / "w.so"
    mvec = ["-lmvec"] if with_simd and native._simd(64) else []
    if with_simd and not mvec:
        pytest.skip("no vector math library here")
    subprocess.run([*cc, *flags, str(src), "-o", str(lib), *mvec, "-lm"], check=True)
    fn = ctypes.CDLL(str(lib)).draw
    fn.argtypes = [ctypes.c_uint64, ctypes.c_uint32, ctypes.c_int64, ctypes.c_int64, ctypes.c_int,
                   ctypes.c_void_p]  # fmt: skip
    for seed, stream, step, j0, count in [(0, "imu", 0, 0, 12), (2**64 - 1, "mocap", 2**40 + 3,
                                                                  48, 7),
                                          (99, "dryden", 777, 16, 5)]:  # fmt: skip
        out = np.zeros((count, w))
        fn(seed, STREAMS[stream], step, j0, count, out.ctypes.data)
        want = normals(seed, stream, step, np.arange(j0, j0 + w), count).T
        np.testing.assert_allclose(out, want, rtol=1e-13, atol=1e-14)
