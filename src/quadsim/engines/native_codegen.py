r"""The C source of a compiled rollout: a CasADi step function, instruction by instruction.

Every C variable is a vector of ``lanes`` drones (GCC/Clang vector extensions); :func:`generate`
emits one ``noinline`` function per block of drones that runs all its steps, and the rollout
entry point ``quadsim_roll`` that shares the blocks between threads
(:func:`~quadsim.engines.native_schedule.pool_source`). :mod:`quadsim.engines.native` compiles
it, caches it and calls it; this module only writes text.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..physics.noise import c_source, stream_id
from .native_schedule import ALWAYS, guarded_schedule, pool_source, selects

__all__ = ["C_TYPES", "MVEC_BINARY", "OMP_WORK", "generate", "simd_decls"]

# CasADi op name -> C expression over vector operands {0}, {1}; ("lane", f): scalar libm f per lane.
# B(mask) turns an integer lane mask into 0.0/1.0 like CasADi's comparisons.
OPS: dict[str, Any] = {
    "ADD": "{0}+{1}", "SUB": "{0}-{1}", "MUL": "{0}*{1}", "DIV": "{0}/{1}", "NEG": "-{0}",
    "SQ": "{0}*{0}", "TWICE": "{0}+{0}", "INV": "ONE/{0}", "FABS": "(vf)((vi){0} & ABS_BITS)",
    "LT": "B({0}<{1})", "LE": "B({0}<={1})", "EQ": "B({0}=={1})", "NE": "B({0}!={1})",
    "NOT": "B({0}==ZERO)",
    "AND": "B(({0}!=ZERO)&({1}!=ZERO))", "OR": "B(({0}!=ZERO)|({1}!=ZERO))",
    "IF_ELSE_ZERO": "(vf)(({0}!=ZERO) & (vi){1})",
    **{k: ("lane", k.lower()) for k in ["SQRT", "SIN", "COS", "TAN", "ASIN", "ACOS", "ATAN",
       "SINH", "COSH", "TANH", "ASINH", "ACOSH", "ATANH", "EXP", "LOG", "EXPM1", "LOG1P",
       "FLOOR", "CEIL", "ERF", "ATAN2", "POW", "FMIN", "FMAX", "FMOD", "REMAINDER", "COPYSIGN",
       "HYPOT"]},
    "CONSTPOW": ("lane", "pow"), "SIGN": ("lane", "sgn"),
}  # fmt: skip
_BINARY = {"ATAN2", "POW", "CONSTPOW", "FMIN", "FMAX", "FMOD", "REMAINDER", "COPYSIGN", "HYPOT"}
C_TYPES = {np.dtype(np.float32): ("float", "int32_t", "0x3f800000", "0x7fffffff", "f"),
            np.dtype(np.float64): ("double", "int64_t", "0x3ff0000000000000LL",
                                   "0x7fffffffffffffffLL", "")}  # fmt: skip

MVEC_BINARY = {"atan2", "pow", "hypot"}
"""libm functions of two arguments among those with vector variants."""


def simd_decls(names: Any, ctype: str) -> str:
    """Declarations of the libm functions ``names`` of ``ctype`` as having vector variants."""
    sfx = "f" if ctype == "float" else ""
    return "".join(
        f"{ctype} {f}{sfx}({ctype}{', ' + ctype if f in MVEC_BINARY else ''}) "
        f'__attribute__((simd("notinbranch")));\n' for f in names
    )


def _literal(c: float, suffix: str) -> str:
    if math.isnan(c):
        return "NAN"
    if math.isinf(c):
        return "INFINITY" if c > 0 else "-INFINITY"
    return f"({c!r}{suffix})"


OMP_WORK = 256 * 1500
"""Threads only when blocks × steps × instructions reach this; smaller calls run on the caller's
thread (:func:`quadsim.engines.native_schedule.pool_source` shares the blocks of larger ones).

Measured on the project's 2-core AMD EPYC (float64 ``thrust_attitude`` env step: 12132 vector
instructions a call, 0.28 ns each on one core), a call shared with a helper spinning for it
takes 3 to 5 µs more than half of it alone (2 blocks: 7.7 µs against 7.9 µs; 64 blocks: 27.8
against 48.7); a helper that must be woken starts tens of µs later (the caller does not wait for
it, but it saves that much less). Threads pay clearly once half a call is well above that:
about 100 µs alone, 384 000 instructions (a 128-env step; 256 block-steps of the RK4 plant)."""


def generate(F: Any, dtype: np.dtype, sizes: tuple[int, int, int], vbytes: int = 32,
              noise: tuple = (), simd: tuple = ()) -> str:
    """C source of ``quadsim_roll`` for the SX Function ``F`` (see :func:`compile_rollout`)."""
    import casadi as cs


    T, Ti, one, absb, sfx = C_TYPES[dtype]
    lanes = vbytes // dtype.itemsize
    names = {getattr(cs, "OP_" + k): k for k in [*OPS, "CONST", "INPUT", "OUTPUT"]
             if hasattr(cs, "OP_" + k)}  # fmt: skip
    rows_in = [F.sparsity_in(i).find() for i in range(F.n_in())]
    rows_out = F.sparsity_out(0).find()
    blocks, deps = guarded_schedule(F)
    blends = selects(F, deps)
    body, used, stale = [], set(), []
    for guard, ks in blocks:
        if guard is not ALWAYS:  # evaluated when a lane needs it (quadsim.engines.native_schedule)
            terms = (" && ".join(f"any_nz(t{c})" for c in t) for t in guard)
            body.append(f"if (({') || ('.join(terms)})) {{")
            stale += ks
        for k in ks:
            line = (f"t{k} = SEL(t{blends[k][0]}, t{blends[k][1]}, t{blends[k][2]});"
                    if k in blends else
                    _instruction(F, k, deps[k], names, rows_in, rows_out, sfx, used))  # fmt: skip
            body.append(("  " if guard is not ALWAYS else "") + line)
        if guard is not ALWAYS:
            body.append("}")
    body += [f"xn[{r}] = ZERO;" for r in sorted(set(range(sizes[0])) - set(rows_out))]
    helpers = [simd_decls(sorted({OPS[k][1] for k in used} & set(simd)), T)]
    for name in sorted(used):
        f = OPS[name][1] + (sfx if OPS[name][1] != "sgn" else "")
        two = name in _BINARY
        args, call = ("vf a, vf b", f"{f}(a[l], b[l])") if two else ("vf a", f"{f}(a[l])")
        helpers.append(f"static inline vf v_{name}({args}) {{ vf r; "
                       f"for (int l = 0; l < W; ++l) r[l] = {call}; return r; }}")  # fmt: skip
    nz = sum(g[1] for g in noise)
    draw = ""
    if nz:  # the block's drones' normals at this step (quadsim.physics.noise), then as vectors
        calls, at = [], 0
        for stream, count, key in noise:
            calls.append(f"quadsim_normals_w({('seed', 'seed2')[key]}, {stream_id(stream)}u, "
                         f"step0 + s, j, {count}, zb + {at});")
            at += count
        draw = (f"{{ double zb[{nz}][W]; {' '.join(calls)} for (int k = 0; k < {nz}; ++k) "
                f"for (int l = 0; l < W; ++l) zs[k][l] = (T)zb[k][l]; }}")
        # Box-Muller's log, cos and sin in double, as vector functions where the C library has
        helpers.insert(0, simd_decls(sorted({"log", "cos", "sin"} & set(simd)), "double"))
    decl = "vf " + ", ".join(f"t{k}" for k in range(max(F.n_instructions(), 1))) + ";"
    if stale:  # a skipped block's variables are read only where masked away; give them a value
        decl += " " + " ".join(f"t{k} = ZERO;" for k in stale)
    return f"""/* quadsim.engines.native: generated from CasADi Function '{F.name()}' */
#define _GNU_SOURCE
#include <math.h>
#include <stdint.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
typedef {T} T;
typedef T vf __attribute__((vector_size({vbytes})));
typedef {Ti} vi __attribute__((vector_size({vbytes})));
#define W {lanes}
#define ZERO ((vf){{}})
#define ONE ((vf){{}} + 1)
#define ONE_BITS ((vi){{}} + {one})
#define ABS_BITS ((vi){{}} + {absb})
#define B(m) ((vf)((m) & ONE_BITS))
#define SEL(c, a, b) ((vf)((((vi)((c) != ZERO)) & (vi)(a)) | (~((vi)((c) != ZERO)) & (vi)(b))))
static inline T sgn(T a) {{ return a < 0 ? -1 : (a > 0 ? 1 : a); }}
static inline int any_nz(vf a) {{ vi m = (vi)(a != ZERO); int r = 0;
  for (int l = 0; l < W; ++l) r |= m[l] != 0; return r; }}
{chr(10).join(helpers)}
{c_source() if nz else ""}
{_block_source(F.n_instructions(), sizes, nz, decl, draw, body)}"""


def _block_source(n_instructions: int, sizes: tuple[int, int, int], nz: int, decl: str,
                  draw: str, body: list[str]) -> str:  # fmt: skip
    """C of ``qs_block`` (all steps of one block of drones: ``decl``, then per step ``draw`` and
    ``body``), the thread pool and ``quadsim_roll``."""  # noqa: D205, D209
    nx, nu, npar = sizes
    load = "memcpy(&{0}[k], {1}, sizeof(vf));"
    return f"""typedef struct {{
  T *X; const T *U; const T *P; T *R;
  int64_t N, steps, rec, step0; uint64_t seed, seed2; int u_per_step, p_per_drone;
}} qs_args;
/* All steps of the W drones from drone j. One copy (noinline), whichever thread runs it. */
static __attribute__((noinline)) void qs_block(const qs_args *a, int64_t j) {{
  T *restrict X = a->X, *restrict R = a->R;
  const T *restrict U = a->U, *restrict P = a->P;
  const int64_t N = a->N, steps = a->steps, rec = a->rec, step0 = a->step0;
  const uint64_t seed = a->seed, seed2 = a->seed2;
  const int u_per_step = a->u_per_step, p_per_drone = a->p_per_drone;
  (void)seed; (void)step0; (void)seed2;
  vf xa[{max(nx, 1)}], xb[{max(nx, 1)}], us[{max(nu, 1)}], ps[{max(npar, 1)}], zs[{max(nz, 1)}];
  vf *xs = xa, *xn = xb;  /* this step's state and the next: swapped */
  {decl}
  for (int k = 0; k < {nx}; ++k) {load.format("xs", "X + k * N + j")}
  for (int k = 0; k < {nu}; ++k) {load.format("us", "U + k * N + j")}
  for (int k = 0; k < {npar}; ++k) {{
    if (p_per_drone) {load.format("ps", "P + k * N + j")} else ps[k] = ZERO + P[k];
  }}
  for (int64_t s = 0; s < steps;) {{
    int64_t e = (rec > 0 && s + rec < steps) ? s + rec : steps;
    for (; s < e; ++s) {{
      if (u_per_step)
        for (int k = 0; k < {nu}; ++k) {load.format("us", "U + (s * " + str(nu) + " + k) * N + j")}
      {draw}
      {chr(10).join("      " + b for b in body).lstrip()}
      {{ vf *t = xs; xs = xn; xn = t; }}
    }}
    if (rec > 0 && s % rec == 0)
      for (int k = 0; k < {nx}; ++k) memcpy(R + ((s / rec - 1) * {nx} + k) * N + j, &xs[k], sizeof(vf));
  }}
  for (int k = 0; k < {nx}; ++k) memcpy(X + k * N + j, &xs[k], sizeof(vf));
}}
{pool_source(n_instructions, OMP_WORK)}
/* Returns the number of threads that took part (1: the caller's alone). */
int quadsim_roll(T *restrict X, const T *restrict U, const T *restrict P, int64_t N,
                 int64_t steps, int u_per_step, int p_per_drone, int64_t rec, T *restrict R,
                 int threads, uint64_t seed, int64_t step0, uint64_t seed2) {{
  qs_args a = {{X, U, P, R, N, steps, rec, step0, seed, seed2, u_per_step, p_per_drone}};
  return qs_run(&a, N / W, threads);
}}
"""  # noqa: E501


def _instruction(F: Any, k: int, args: list[int], names: dict, rows_in: list, rows_out: list,
                 sfx: str, used: set) -> str:  # fmt: skip
    """C statement of instruction ``k`` of ``F``, its result in ``t{k}`` (SSA: ``args`` are the
    instructions whose results it reads); ``used`` collects the per-lane helpers it needs."""  # noqa: D205, D209
    import casadi as cs

    op = F.instruction_id(k)
    name = names.get(op)
    if name is None:
        all_ops = {getattr(cs, n): n for n in dir(cs) if n.startswith("OP_")}
        raise NotImplementedError(f"CasADi operation {all_ops.get(op, op)} is not supported")
    if name == "CONST":
        rhs = f"((vf){{}} + {_literal(F.instruction_constant(k), sfx)})"
    elif name == "INPUT":
        i = F.instruction_input(k)
        rhs = f"{'xupz'[i[0]]}s[{rows_in[i[0]][i[1]]}]"
    elif name == "OUTPUT":
        return f"xn[{rows_out[F.instruction_output(k)[1]]}] = t{args[0]};"
    elif isinstance(OPS[name], tuple):
        used.add(name)
        rhs = f"v_{name}({', '.join(f't{a}' for a in args)})"
    else:
        rhs = OPS[name].format(*[f"t{a}" for a in args])
    return f"t{k} = {rhs};"
