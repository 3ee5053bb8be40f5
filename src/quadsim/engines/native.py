r"""Compiled rollouts: a CasADi step function turned into vectorised, multi-threaded C.

A step ``x_{s+1} = f(x_s, u_s[, p])`` of one drone, given as a CasADi ``SX`` Function, is walked
instruction by instruction and emitted as C that uses GCC/Clang vector extensions: every C variable
is a vector of ``lanes`` drones (8 in float32, 4 in float64 with 32-byte vectors; twice that with
64-byte vectors where the target has AVX-512), a block's state stays in two local buffers
(this step's and the next, swapped, not copied, between steps) over all steps, and threads
share the blocks of drones (:func:`~quadsim.engines.native_schedule.pool_source`: not OpenMP's
fork/join, which a core held by another process stalls). Instructions whose results only a
select that is false in every lane of a vector would read run only when a lane needs them
(:mod:`quadsim.engines.native_schedule`: a sensor update, an estimator's correction, a
controller at a lower rate cost nothing on the steps where no drone of the block has one).
Transcendental functions are libm's, called once per lane, except where the C library has
vector variants of
them (glibc's libmvec, probed once and cached like the toolchain): those are declared ``simd``
and called once per vector (``sin``, ``asin``, ``atan2``, ``exp``, ...; within libmvec's 4 ulp
of libm). The library is
compiled with the system C compiler, cached on disk, and loaded with :mod:`ctypes` (which releases
the GIL during the call).

The on-disk cache (``$QUADSIM_CACHE_DIR`` or ``~/.cache/quadsim/native``) holds two kinds of
entry. A library is keyed by the CasADi serialisation of the (SX) step function, the dtype, this
module's own source (the C generator), the CasADi version and the toolchain (compiler, flags and
its identity), so a hit needs neither the C source (generated only on a miss) nor the compiler.
The toolchain probe (which of ``-march=native`` and ``-fopenmp`` build and load) is keyed by the
compiler's identity, ``--version`` and the target macros of ``-march=native``; those answers are
remembered under the compiler's file (path, size, modification time, inode) and the CPU's model
and flags, so a process on the same machine and compiler asks nothing (asking costs tens of
milliseconds, a probe build more); a failed build drops the probe's entry.
:mod:`quadsim.engines.native_memo` adds a third: what a library was traced from, so that a run
with the same inputs skips the trace (and CasADi) altogether.

Data are structure-of-arrays: the drone index is the *last* axis, ``x`` has shape
``(n_state, N)``. Arithmetic follows IEEE rules except that it may be reassociated and fused
(``-ffast-math`` without ``-ffinite-math-only``), so NaN and infinity still propagate. Nothing is
imported or compiled at import time; CasADi is imported inside the functions that need it.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import importlib.util
import json
import math
import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from .native_codegen import C_TYPES, MVEC_BINARY, generate, simd_decls

__all__ = ["CompileError", "NativeRollout", "available", "build_identity", "cache_root",
           "compile_rollout"]


class CompileError(RuntimeError):
    """No working C compiler, or the generated C did not compile: the machine's set-up, not the
    simulation (the command line's exit code 2)."""  # noqa: D205, D209

# -ffast-math minus -ffinite-math-only, so that NaN and infinity survive (divergence detection).
_FLAGS = ["-O3", "-fno-math-errno", "-fno-trapping-math", "-fassociative-math",
          "-fno-signed-zeros", "-freciprocal-math", "-ffp-contract=fast",
          "-Werror=implicit-function-declaration", "-shared", "-fPIC"]  # fmt: skip
_TEST_SRC = """#include <math.h>
typedef double vd __attribute__((vector_size(32)));
typedef long long vl __attribute__((vector_size(32)));
double probe(double a) { vd v = (vd){} + a; vl m = v < 2.0; v[1] = sqrt(v[0]);
  return v[1] + (double)m[0]; }
"""


_EXTRAS = (["-march=native", "-fopenmp"], ["-march=native"], ["-fopenmp"], [])


def cache_root(cache_dir: str | os.PathLike | None = None) -> Path:
    """The library cache: ``cache_dir``, else ``$QUADSIM_CACHE_DIR``, else
    ``~/.cache/quadsim/native``."""  # noqa: D205, D209
    return Path(cache_dir or os.environ.get("QUADSIM_CACHE_DIR") or
                Path.home() / ".cache" / "quadsim" / "native")  # fmt: skip


def _ask(cc: list[str], *questions: list[str]) -> list[str | None]:
    """Outputs of ``cc args`` for each ``args``, run side by side with stdin empty.

    ``None`` where the command cannot run, times out or fails.
    """
    procs: list[Any] = []
    for args in questions:
        try:
            procs.append(subprocess.Popen([*cc, *args], stdin=subprocess.DEVNULL,
                                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                          text=True))  # fmt: skip
        except OSError:
            procs.append(None)
    out: list[str | None] = []
    for p in procs:
        if p is None:
            out.append(None)
            continue
        try:
            text = p.communicate(timeout=60)[0]
        except subprocess.SubprocessError:
            p.kill()
            p.communicate()
            text = None
        out.append(text if p.returncode == 0 else None)
    return out


def _probe(cc: list[str], extra: list[str]) -> bool:
    """Whether ``cc`` with the flags plus ``extra`` builds a probe library that loads."""
    with tempfile.TemporaryDirectory() as tmp:
        src, lib = Path(tmp, "probe.c"), Path(tmp, "probe.so")
        src.write_text(_TEST_SRC)
        try:
            r = _run([*cc, *_FLAGS, *extra, str(src), "-o", str(lib), "-lm"], timeout=60)
            return not r.returncode and bool(ctypes.CDLL(str(lib)).probe)
        except (OSError, AttributeError, subprocess.SubprocessError):
            return False


def _toolchain_entry(cc: list[str], version: str, native: str | None) -> Path:
    """Cache file of the probe result for this compiler (its identity) and these flags."""
    key = "\0".join([shlex.join(cc), shlex.join(_FLAGS), _TEST_SRC, version, native or "-"])
    return cache_root() / f"toolchain_{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"


# libm functions with vector variants in glibc's libmvec (``_ZGV...``): the set of glibc 2.35,
# then that of 2.22; the generator declares the ones the toolchain links as ``simd``, so GCC
# calls one vector function per block instead of the scalar function once per lane.
_MVEC_TIERS = (
    ("sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "asinh",
     "acosh", "atanh", "exp", "expm1", "log", "log1p", "pow", "erf", "hypot"),
    ("sin", "cos", "exp", "log", "pow"),
)


def _simd_probe(cc: tuple, flags: tuple, names: tuple, vbytes: int) -> bool:
    """Whether the vector variants of ``names`` link, load and give libm's values (1e-5)."""
    parts = ["#include <math.h>\n"]
    for ctype, tag in (("float", "f"), ("double", "d")):
        sfx, w = ("f" if ctype == "float" else ""), vbytes // (4 if ctype == "float" else 8)
        parts += [f"typedef {ctype} v{tag} __attribute__((vector_size({vbytes})));\n",
                  simd_decls(names, ctype)]  # fmt: skip
        for f in names:
            args = "a[l], a[l]" if f in MVEC_BINARY else "a[l]"
            parts.append(
                f"static v{tag} {tag}_{f}(v{tag} a) {{ v{tag} r; for (int l = 0; l < {w}; ++l) "
                f"r[l] = {f}{sfx}({args}); return r; }}\n"
            )
    body = []
    for i, f in enumerate(names):
        body.append(f"vf f{i} = f_{f}((vf){{}} + (float)x[{i}]); "
                    f"vd d{i} = d_{f}((vd){{}} + x[{i}]); "
                    f"out[{2 * i}] = f{i}[1]; out[{2 * i + 1}] = d{i}[1];")  # fmt: skip
    parts.append("void probe(const double *x, double *out) {\n" + "\n".join(body) + "\n}\n")
    x = [1.5 if f == "acosh" else 0.5 for f in names]
    want = [getattr(math, f)(v, v) if f in MVEC_BINARY else getattr(math, f)(v)
            for f, v in zip(names, x, strict=True)]  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        src, lib = Path(tmp, "simd.c"), Path(tmp, "simd.so")
        src.write_text("".join(parts))
        try:
            r = _run([*cc, *flags, str(src), "-o", str(lib), "-lmvec", "-lm"], timeout=60)
            if r.returncode:
                return False
            fn = ctypes.CDLL(str(lib)).probe
            xs, out = (ctypes.c_double * len(x))(*x), (ctypes.c_double * (2 * len(x)))()
            fn(xs, out)
        except (OSError, AttributeError, subprocess.SubprocessError):
            return False
    return all(math.isclose(out[2 * i + j], v, rel_tol=1e-5, abs_tol=1e-6)
               for i, v in enumerate(want) for j in (0, 1))  # fmt: skip


@functools.cache
def _simd(vbytes: int) -> tuple[str, ...]:
    """The libm functions (double names) whose libmvec vector variants the toolchain links here
    for ``vbytes``-byte vectors: the first of :data:`_MVEC_TIERS` whose probe builds, loads and
    agrees with :mod:`math`, else none (no glibc libmvec, another C library, another compiler).
    ``$QUADSIM_NO_MVEC`` turns them off. Cached on disk beside the toolchain's probe."""  # noqa: D205, D209
    tool = _toolchain()
    if tool is None or os.environ.get("QUADSIM_NO_MVEC"):
        return ()
    cc, flags, ident, _ = tool
    key = "\0".join([shlex.join([*cc, *flags]), ident, str(vbytes), repr(_MVEC_TIERS)])
    entry = cache_root() / f"simd_{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        names = tuple(json.loads(entry.read_text())["simd"])
        if names in (*_MVEC_TIERS, ()):
            return names
    names = next((t for t in _MVEC_TIERS if _simd_probe(cc, flags, t, vbytes)), ())
    _write_atomic(entry, json.dumps({"simd": list(names)}))
    return names


def _write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` under a temporary name, then rename; failures are ignored."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except OSError:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.remove(tmp)


def _forget_toolchain() -> None:
    """Drop the cached probe of the toolchain in use (a build failed: probe again next time)."""
    tool = _toolchain()
    if tool is not None and tool[3]:
        with contextlib.suppress(OSError):
            os.remove(tool[3])


def _cpu() -> str | None:
    """The first processor's model and feature flags (``/proc/cpuinfo``), or ``None``."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            first = fh.read(1 << 16).split("\n\n", 1)[0]
    except OSError:
        return None
    keep = [ln for ln in first.splitlines()
            if ln.split(":")[0].strip() in ("vendor_id", "model name", "flags", "Features")]
    return "\n".join(keep) or None


def _answers(cc: list[str]) -> tuple[str | None, str | None]:
    """``cc``'s ``--version`` and ``-march=native`` macros (:func:`_ask`), remembered on disk
    under the compiler's file (its real path, size, modification time and inode) and the CPU's
    model and flags, so that a process on the same machine and compiler does not ask again;
    asked every time where those cannot be read."""  # noqa: D205, D209
    questions = (["--version"], ["-march=native", "-dM", "-E", "-x", "c", "-"])
    path, cpu = shutil.which(cc[0]), _cpu()
    entry = None
    if path is not None and cpu is not None:
        real = os.path.realpath(path)
        with contextlib.suppress(OSError):
            st = os.stat(real)
            quick = "\0".join([shlex.join(cc), real, str(st.st_size), str(st.st_mtime_ns),
                               str(st.st_ino), cpu])  # fmt: skip
            entry = cache_root() / f"ask_{hashlib.sha256(quick.encode()).hexdigest()[:32]}.json"
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError, AttributeError):
        doc = json.loads(entry.read_text())
        if isinstance(doc["version"], str) and isinstance(doc["native"], str | None):
            return doc["version"], doc["native"]
    version, native = _ask(cc, *questions)
    if entry is not None and version is not None:
        _write_atomic(entry, json.dumps({"version": version, "native": native}))
    return version, native


@functools.cache
def _toolchain() -> tuple[tuple[str, ...], tuple[str, ...], str, str] | None:
    """``(compiler, flags, identity, probe file or "")`` of the first compiler building a probe.

    The identity (``--version`` and the target macros of the first extra flag) keys the
    library cache; the probe's result is cached on disk under the compiler's version and
    ``-march=native`` macros, so a process whose compiler answers as before skips the probe
    builds (a cache write that fails is ignored).
    """
    env = os.environ.get("CC")
    candidates = [shlex.split(env)] if env else [[c] for c in ("cc", "gcc") if shutil.which(c)]
    for cc in candidates:
        version, native = _answers(cc)
        # a compiler that does not say its version is probed every time (no cache entry)
        entry = None if version is None else _toolchain_entry(cc, version, native)
        extra = ident = None
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            doc = json.loads(entry.read_text()) if entry is not None else {}
            if doc and doc["extra"] in _EXTRAS and isinstance(doc["ident"], str):
                extra, ident = doc["extra"], doc["ident"]
        if extra is None:
            extra = next((e for e in _EXTRAS if _probe(cc, e)), None)
            if extra is None:
                continue
            macros = native if extra[:1] == ["-march=native"] else _ask(
                cc, [*extra[:1], "-dM", "-E", "-x", "c", "-"])[0]  # fmt: skip
            ident = "\n".join([version or "", macros or ""])
            if entry is not None:
                _write_atomic(entry, json.dumps({"extra": extra, "ident": ident}))
        return tuple(cc), (*_FLAGS, *extra), ident, "" if entry is None else str(entry)
    return None


@functools.cache
def _generator_id() -> str | None:
    """What the C depends on besides the Function: the generators' source and CasADi's version.

    The generators are this module, :mod:`~quadsim.engines.native_codegen`,
    :mod:`~quadsim.engines.native_schedule` and :mod:`quadsim.physics.noise` (its C twin). ``None``
    when a source cannot be read (then the library is keyed by the C source).
    """
    import casadi as cs

    try:
        noise = Path(__file__).parents[1] / "physics" / "noise.py"  # the C twin of the normals
        own = b"".join(Path(__file__).with_name(f).read_bytes()
                       for f in ("native.py", "native_codegen.py", "native_schedule.py"))
        own += noise.read_bytes()
    except OSError:
        return None
    return hashlib.sha256(own + b"\0" + cs.__version__.encode()).hexdigest()


@functools.cache
def available() -> bool:
    """Whether compiled rollouts work here: CasADi is installed and a C compiler builds a probe.

    CasADi is found, not imported (a run whose library and layout are remembered,
    :mod:`quadsim.engines.native_memo`, never needs it). The compiler is ``$CC`` if set, else
    ``cc`` or ``gcc``. The result is cached per process, and the probe's on disk under the
    compiler's identity (see the module docstring).
    """
    if importlib.util.find_spec("casadi") is None:
        return False
    return _toolchain() is not None


def build_identity() -> str | None:
    """What a library depends on besides its step function and this module's generators: the
    toolchain (compiler, flags, identity), the vector width and the vector maths linked;
    ``None`` without a working toolchain."""  # noqa: D205, D209
    tool = _toolchain()
    if tool is None:
        return None
    cc, flags, ident, _ = tool
    vbytes = _vector_bytes(ident)
    return "\0".join([shlex.join([*cc, *flags]), ident, str(vbytes), repr(_simd(vbytes))])


def _run(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, check=False, **kw)


def _vector_bytes(ident: str) -> int:
    """Bytes per vector: 64 where the target has AVX-512 (``__AVX512F__`` among the macros of
    the toolchain's identity), else 32; ``$QUADSIM_VECTOR_BYTES`` (32 or 64) overrides."""  # noqa: D205, D209
    env = os.environ.get("QUADSIM_VECTOR_BYTES", "")
    if env in ("32", "64"):
        return int(env)
    return 64 if "__AVX512F__" in ident else 32


class NativeRollout:
    """A compiled rollout of a one-drone step function over many drones (see compile_rollout).

    Attributes:
        n_state: State size of one drone.
        n_input: Input (command) size of one drone.
        n_param: Parameter size of one drone (0 when the step takes no parameters).
        dtype: Floating-point type of the computation (float32 or float64).
        lanes: Drones per vector (8 for float32, 4 for float64; twice that with AVX-512).
        threads: Threads per call (see :func:`compile_rollout`).
        threads_used: Threads that took part in the last checked call (1: the caller's alone).
        path: The shared library on disk.
        compiled: Whether this object invoked the compiler (False: loaded from the cache).
        source: The generated C source (generated when first read after a cache hit).
    """

    def __init__(self, path: Path, sizes: tuple[int, int, int], dtype: np.dtype, threads: int,
                 compiled: bool, source: str | Any, vbytes: int = 32,
                 noise: tuple = ()) -> None:  # fmt: skip
        self.n_state, self.n_input, self.n_param = sizes
        self.noise = tuple(noise)
        self.dtype, self.lanes, self.threads = dtype, vbytes // dtype.itemsize, threads
        self.path, self.compiled, self._source = path, compiled, source
        self.threads_used = 0
        self._fn = ctypes.CDLL(str(path)).quadsim_roll
        vp, i64, ci = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
        self._fn.argtypes = [vp, vp, vp, i64, i64, ci, ci, i64, vp, ci, ctypes.c_uint64, i64,
                             ctypes.c_uint64]
        self._fn.restype = ci

    @property
    def source(self) -> str:
        """The generated C source of the library."""
        if not isinstance(self._source, str):
            self._source = self._source()
        return self._source

    def __repr__(self) -> str:
        return (f"NativeRollout(n_state={self.n_state}, n_input={self.n_input}, "
                f"n_param={self.n_param}, dtype={self.dtype}, lanes={self.lanes})")  # fmt: skip

    def _pad(self, a: Any, n_pad: int, copy: bool = False) -> np.ndarray:
        a = np.asarray(a)
        if a.shape[-1] == n_pad:
            return np.array(a, dtype=self.dtype, order="C", copy=True if copy else None)
        out = np.empty((*a.shape[:-1], n_pad), self.dtype)
        out[..., : a.shape[-1]], out[..., a.shape[-1] :] = a, a[..., -1:]
        return out

    def __call__(self, x0: Any, u: Any, params: Any = None, steps: int = 1,
                 record_every: int = 0, seed: int = 0, step0: int = 0,
                 seed2: int = 0) -> tuple[np.ndarray, np.ndarray | None]:  # fmt: skip
        """Advance ``N`` drones by ``steps`` steps.

        Args:
            x0: Initial states, shape ``(n_state, N)`` (drone index last), units of the step.
            u: Inputs, shape ``(n_input, N)`` (held over all steps) or ``(steps, n_input, N)``
                (one input per step).
            params: Parameters, shape ``(n_param, N)`` (per drone) or ``(n_param,)`` (shared);
                must be ``None`` when the step takes no parameters.
            steps: Number of steps, ``>= 0``.
            record_every: ``k > 0`` records the state after steps ``k, 2k, ...``.
            seed: Key of the step's normals (a step with a noise input, :attr:`noise`): step
                ``s`` of drone ``i`` draws :func:`quadsim.physics.noise.normals` ``(seed, stream,
                step0 + s, i, count)`` for each group ``(stream, count, 0)``.
            step0: Step index of the first step (the counter of its normals).
            seed2: Key of the groups ``(stream, count, 1)``.

        Returns:
            ``(x_final, record)``: final states ``(n_state, N)`` and, for ``k > 0``, the recorded
            states ``(steps // k, n_state, N)``, else ``None``. The inputs are not modified.

        Raises:
            ValueError: If a shape, ``steps`` or ``record_every`` is invalid.
        """
        nx, nu, npar = self.n_state, self.n_input, self.n_param
        x0, u = np.asarray(x0), np.asarray(u)
        steps, k = int(steps), int(record_every)
        if steps < 0 or k < 0:
            raise ValueError(f"steps and record_every must be >= 0; got {steps}, {k}")
        if x0.ndim != 2 or x0.shape[0] != nx or x0.shape[1] < 1:
            raise ValueError(f"x0 must have shape (n_state, N) = ({nx}, N) with N >= 1; "
                             f"got shape {x0.shape}")  # fmt: skip
        n = x0.shape[1]
        if u.shape not in ((nu, n), (steps, nu, n)):
            raise ValueError(f"u must have shape (n_input, N) = {(nu, n)} or (steps, n_input, N) "
                             f"= {(steps, nu, n)}; got shape {u.shape}")  # fmt: skip
        if npar == 0 and params is not None:
            raise ValueError("this step function takes no parameters; params must be None")
        p = np.zeros((1,), self.dtype) if params is None and npar == 0 else np.asarray(params)
        if npar and p.shape not in ((npar,), (npar, n)):
            raise ValueError(f"params must have shape (n_param,) = ({npar},) or (n_param, N) = "
                             f"{(npar, n)}; got shape {p.shape}")  # fmt: skip
        n_pad = -(-n // self.lanes) * self.lanes
        X = self._pad(x0, n_pad, copy=True)
        U = self._pad(u, n_pad)
        per_drone = npar > 0 and p.ndim == 2
        P = self._pad(p, n_pad) if per_drone else np.ascontiguousarray(p, dtype=self.dtype)
        R = np.empty((steps // k, nx, n_pad), self.dtype) if k else None
        ptr = lambda a: None if a is None else a.ctypes.data_as(ctypes.c_void_p)  # noqa: E731
        self.threads_used = self._fn(ptr(X), ptr(U), ptr(P), n_pad, steps, int(u.ndim == 3),
                                     int(per_drone), k, ptr(R), self.threads, int(seed),
                                     int(step0), int(seed2))  # fmt: skip
        if n_pad != n:
            X = np.ascontiguousarray(X[:, :n])
            R = None if R is None else np.ascontiguousarray(R[..., :n])
        return X, R

    def bind(self, X: np.ndarray, U: np.ndarray, P: np.ndarray | None = None) -> Any:
        """Hot-loop entry: a function ``advance(steps=1, seed=0, step0=0)`` that updates ``X``.

        ``seed`` and ``step0`` are the key and the first step of the normals of a step with a
        noise input, as in :meth:`__call__`. The buffers are checked once here and their
        addresses cached, so each call costs one foreign-function call. The returned function
        keeps the arrays alive.

        Args:
            X: States ``(n_state, N_pad)``, C-contiguous, of :attr:`dtype`, ``N_pad`` a multiple of
                :attr:`lanes`; overwritten by every call.
            U: Inputs ``(n_input, N_pad)`` held over the steps (the caller may rewrite them between
                calls), same layout.
            P: Parameters ``(n_param,)`` (shared) or ``(n_param, N_pad)``, or ``None``.

        Raises:
            ValueError: If a buffer has the wrong shape, dtype or layout.
        """
        n_pad = X.shape[1] if X.ndim == 2 else -1
        for name, a, rows in (("X", X, self.n_state), ("U", U, self.n_input)):
            if (a.shape != (rows, n_pad) or a.dtype != self.dtype or not a.flags.c_contiguous
                    or n_pad % self.lanes):  # fmt: skip
                raise ValueError(f"{name} must be a C-contiguous {self.dtype} array of shape "
                                 f"({rows}, N_pad), N_pad a multiple of {self.lanes}")  # fmt: skip
        per_drone = int(P is not None and P.ndim == 2)
        fn, px, pu = self._fn, X.ctypes.data, U.ctypes.data
        pp = None if P is None else P.ctypes.data
        threads, keep = self.threads, (X, U, P)

        def advance(steps: int = 1, seed: int = 0, step0: int = 0) -> None:
            fn(px, pu, pp, n_pad, steps, 0, per_drone, 0, None, threads, seed, step0, 0)
            return keep and None

        return advance


def compile_rollout(
    step: Any,
    dtype: Any = np.float32,
    *,
    cache_dir: str | os.PathLike | None = None,
    threads: int | None = None,
    noise: tuple = (),
) -> NativeRollout:
    """Compile a one-drone CasADi step function into a vectorised many-drone rollout.

    Args:
        step: CasADi Function ``(x[n_state], u[n_input]) -> x_next[n_state]`` or
            ``(x, u, p[n_param]) -> x_next`` for one drone and one step (MX is expanded to SX).
        dtype: ``np.float32`` (8 drones per vector) or ``np.float64`` (4 drones per vector).
        cache_dir: Directory of compiled libraries; default ``$QUADSIM_CACHE_DIR`` or
            ``~/.cache/quadsim/native``.
        threads: Threads per call: ``k > 0`` up to ``k``; ``None`` or 0 OpenMP's default
            (``$OMP_NUM_THREADS``, else the cores); fewer where the work is small
            (:data:`OMP_WORK`) or threads do not pay (another process holds a core,
            :func:`~quadsim.engines.native_schedule.pool_source`). ``-k``: exactly ``k`` on
            every call, each waiting for the others (tests, measurements). The results do not
            depend on it.
        noise: With a fourth input ``z`` (standard normals): its groups in order, ``(stream,
            count)`` or ``(stream, count, key)`` (:mod:`quadsim.physics.noise`; ``key`` 0 draws with
            the call's ``seed``, 1 with its ``seed2``), drawn in C for each drone and step.

    Returns:
        The callable :class:`NativeRollout`.

    Raises:
        RuntimeError: If no working C compiler is found, or compilation fails (with its stderr).
        NotImplementedError: If ``step`` uses a CasADi operation without a C translation.
        ValueError: If ``step`` has the wrong signature, free variables or sparse inputs.
    """
    import casadi as cs

    dtype = np.dtype(dtype)
    if dtype not in C_TYPES:
        raise ValueError(f"dtype must be float32 or float64; got {dtype}")
    if not isinstance(step, cs.Function):
        raise TypeError(f"step must be a casadi.Function; got {type(step).__name__}")
    F = step if step.is_a("SXFunction") else step.expand()
    if F.n_in() not in (2, 3, 4) or F.n_out() != 1:
        raise ValueError(f"step must map (x, u[, p[, z]]) to x_next; got {F.n_in()} inputs and "
                         f"{F.n_out()} outputs")  # fmt: skip
    noise = tuple((str(g[0]), int(g[1]), int(g[2]) if len(g) > 2 else 0) for g in noise)
    if (F.numel_in(3) if F.n_in() == 4 else 0) != sum(g[1] for g in noise):
        raise ValueError(f"the noise groups {noise} do not fill the step's noise input")
    if F.has_free():
        raise ValueError(f"step has free variables: {F.get_free()}")
    if not all(F.sparsity_in(i).is_dense() for i in range(F.n_in())):
        raise ValueError("step inputs must be dense vectors")
    sizes = (F.numel_in(0), F.numel_in(1), F.numel_in(2) if F.n_in() >= 3 else 0)
    if F.numel_out(0) != sizes[0]:
        raise ValueError(f"x_next has {F.numel_out(0)} entries but x has {sizes[0]}")
    tool = _toolchain()
    if tool is None:
        raise CompileError("quadsim.engines.native: no working C compiler ($CC, cc or gcc) found")
    cc, flags, ident, _ = tool
    vbytes = _vector_bytes(ident)
    simd = _simd(vbytes)

    def source() -> str:
        return generate(F, dtype, sizes, vbytes, noise, simd)

    # Keyed by what determines the library (module docstring), not by the C source: serialising
    # the Function costs a fifth of generating the source, which only a miss needs.
    gen = _generator_id()
    src: str | Any = source if gen is not None else source()
    what = ([F.serialize(), str(dtype), repr(sizes), str(vbytes), repr(noise), gen]
            if gen is not None else [src])  # fmt: skip
    key = hashlib.sha256("\0".join([*what, shlex.join([*cc, *flags]), ident,
                                     repr(simd)]).encode())  # fmt: skip
    root = cache_root(cache_dir)
    root.mkdir(parents=True, exist_ok=True)
    lib, compiled = root / f"quadsim_{key.hexdigest()[:32]}.so", False
    if not lib.exists():
        src = src if isinstance(src, str) else src()
        fd, tmp = tempfile.mkstemp(dir=root, suffix=".c")
        with os.fdopen(fd, "w") as fh:
            fh.write(src)
        tmp_so = tmp[:-2] + ".so"
        try:
            r = _run([*cc, *flags, tmp, "-o", tmp_so, *(["-lmvec"] if simd else []), "-lm"])
            if r.returncode:
                _forget_toolchain()  # the cached probe may be stale (e.g. OpenMP removed)
                raise CompileError(f"quadsim.engines.native: compiling {F.name()} failed "
                                   f"({shlex.join(cc)}):\n{r.stderr[-3000:]}")  # fmt: skip
            os.replace(tmp, lib.with_suffix(".c"))
            os.replace(tmp_so, lib)
            compiled = True
        finally:
            for t in (tmp, tmp_so):
                if os.path.exists(t):
                    os.remove(t)
    return NativeRollout(lib, sizes, dtype, int(threads or 0), compiled, src, vbytes, noise)
