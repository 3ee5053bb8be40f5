r"""When the generated C's work runs: guarded instructions in a step, blocks over threads.

A multi-rate step (a controller at its period, a motion-capture update when a reading is fresh,
an estimator's correction) is traced as straight-line code in which the rarely used results are
selected away by CasADi's ``if_else_zero(c, x)`` (``c ? x : 0``; ``where`` is two of them). The
instructions that feed ``x`` and nothing else are wasted work on every step where ``c`` is
false. This module finds them and orders the step so that they form blocks that the C evaluates
only when a lane needs them.

**Guards.** Walking the instructions backwards from the outputs, each instruction ``k`` gets a
guard ``g(k)``: ``ALWAYS``, or a set of condition instructions ``{c_1, c_2, ...}`` meaning "needed
only in a lane where one of the ``c_i`` is non-zero". An output is ``ALWAYS``; the value input
``x`` of ``if_else_zero(c, x)`` with ``g = ALWAYS`` gets ``{c}``; every other input edge passes
the consumer's guard on; an instruction's guard is the union over its consumers (``ALWAYS``
absorbs). This is conservative: a nested condition is dropped rather than conjoined, so an
instruction is never skipped where it is needed. Conditions themselves are always ``ALWAYS``
(they feed an ``ALWAYS`` select), so they are computed before any block that tests them; an
instruction that a condition of its own guard depends on (a condition computed from a selected
value) is made ``ALWAYS``, since it must be computed before that condition can be tested.

**Blocks.** Guards with more than :data:`MAX_CONDS` terms are made ``ALWAYS``; a group of fewer
than :data:`MIN_BLOCK` instructions (not worth a branch of its own) joins the largest group whose
guard its own implies (a wider guard: evaluated more often, never less), or else is made
``ALWAYS``; the guards are recomputed until nothing changes. The instructions keep CasADi's
order (its register-friendly schedule), except that a guarded one waits until an ``ALWAYS``
instruction reads it; then it runs with the waiting instructions it reads (whatever their
guard: guards may read each other both ways), the waiting ones of its guard, and the guard's
later instructions whose inputs are all computed by then, in CasADi's order, one block per run
of one guard. A condition not computed by then (CasADi places it before its first use, which
may come later) is computed first, with what it reads, when all that is ``ALWAYS`` work;
otherwise the block runs unconditionally. The C evaluates a block with
guard ``{c_i}`` when any lane of any ``c_i`` is non-zero; otherwise its variables keep stale
values that only masked selects read. Values are unchanged: every instruction computes what it
computed before, only some are not computed.

**Threads** (:func:`pool_source`). :mod:`quadsim.engines.native` emits ``qs_block(a, j)`` (all
steps of the ``W`` drones from drone ``j``) and calls ``qs_run(a, n_blocks, threads)``, which
shares the blocks between threads. Every block is computed by the one (``noinline``)
``qs_block``, from its own inputs only, so the results are bitwise the same whichever thread
computes which block and however many threads there are.

Not ``#pragma omp parallel for``: OpenMP's fork/join waits for every thread of its team. On a
2-core machine where another process keeps one core busy, the second thread is late by a time
slice (milliseconds) on most calls, and each env step is one short call: the 1024-env
``thrust_attitude`` vector env fell 19x, whatever the schedule (``static``, ``dynamic`` and
``guided`` measured the same; issue 27 item 15). Here:

- The caller and up to ``threads - 1`` helpers (the library's own pool, started on first use)
  claim chunks of blocks from a shared counter. The caller never waits for a helper that has
  not joined: once every chunk is claimed it closes the call to late helpers and waits only for
  the chunks being computed (a spin of ``QS_WAIT_NS``, then a sleep that frees its core for a
  helper which lost its own).
- A helper waits for the next call spinning ``QS_SPIN_NS`` (env steps come back to back, with
  Python in between), then on a condition variable. A helper on the caller's core neither
  joins nor spins: it sleeps, and the next wake-up places it on an idle core if there is one.
- A call with threads that was no faster than the caller alone would have been (its own time
  per block times the blocks: no helper free in time, or one that lost its core while computing
  a chunk) makes the next calls run alone for a while: 1 ms, doubling up to 0.25 s while
  threaded calls keep losing, halving when one wins. On a machine with every core busy the step
  thus runs about as fast as with one thread, instead of waiting for a time slice.
- ``threads = -k`` (tests, measurements) runs exactly ``k`` threads on every call: the caller
  waits for all of them to join and gives each every ``k``-th chunk.

A chunk is about ``QS_GRAIN`` vector instructions (a few microseconds; at most a quarter of a
thread's share), so a claim (one atomic add) costs about 1 % and a helper that loses its core
holds little work. Linux only (``sched_getcpu``, ``pthread_atfork``: a forked child starts its
own helpers); elsewhere OpenMP's ``schedule(dynamic)`` with the same thread count and threshold.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ALWAYS", "MAX_CONDS", "MAX_TERM", "MIN_BLOCK", "guarded_schedule", "pool_source",
           "selects"]

ALWAYS = None
"""The guard of an instruction every step needs."""
MAX_CONDS = 4
"""Guards with more terms than this are evaluated always (testing them costs more)."""
MAX_TERM = 3
"""Conditions in one term of a guard at most (a full term is not extended: a wider guard)."""
MIN_BLOCK = 24
"""Groups of fewer instructions than this are evaluated always (a branch is not worth it)."""


def _graph(F: Any) -> tuple[list[int], list[list[int]]]:
    """``(ops, deps)``: each instruction's CasADi op and the instructions whose results it reads
    (in SSA form: the work variables CasADi reuses are resolved to their writer)."""  # noqa: D205, D209
    import casadi as cs

    writer: dict[int, int] = {}
    ops, deps = [], []
    for k in range(F.n_instructions()):
        op = F.instruction_id(k)
        ops.append(op)
        if op in (cs.OP_INPUT, cs.OP_CONST):
            deps.append([])
        else:
            deps.append([writer[a] for a in F.instruction_input(k)])
        if op != cs.OP_OUTPUT:
            writer[F.instruction_output(k)[0]] = k
    return ops, deps


def _simplify(terms: set[frozenset], neg: dict[int, int]) -> Any:
    """A guard in disjunctive form, simplified: ``A ∧ c`` or ``A ∧ ¬c`` is ``A`` (``neg`` maps a
    ``NOT`` instruction to its operand), and a term that contains another is dropped; an empty
    term is ``ALWAYS``; more than :data:`MAX_CONDS` terms, ``ALWAYS`` (returned as ``None``)."""  # noqa: D205, D209
    terms = set(terms)
    changed = True
    while changed:
        changed = False
        for t1 in terms:
            for t2 in terms:
                d1, d2 = t1 - t2, t2 - t1
                if len(d1) == 1 and len(d2) == 1:
                    (c1,), (c2,) = d1, d2
                    if neg.get(c1) == c2 or neg.get(c2) == c1:
                        terms -= {t1, t2}
                        terms.add(t1 & t2)
                        changed = True
                        break
            if changed:
                break
    if frozenset() in terms:
        return ALWAYS
    terms = {t for t in terms if not any(o < t for o in terms)}
    return ALWAYS if len(terms) > MAX_CONDS else frozenset(terms)


def _guards(ops: list[int], deps: list[list[int]], forced: set[int], iez: int, output: int,
            neg: dict[int, int], widen: dict[int, frozenset] | None = None,
            ) -> list[Any]:  # fmt: skip
    """One backward pass (module docstring): each instruction's guard, ``ALWAYS``, a frozenset
    of terms (frozensets of condition instructions, all non-zero), or ``False`` (not needed);
    ``widen`` replaces an instruction's guard by a wider one it implies."""  # noqa: D205, D209
    n = len(ops)
    g: list[Any] = [False] * n
    for k in range(n - 1, -1, -1):
        if ops[k] == output or (k in forced and g[k] is not False):
            g[k] = ALWAYS
        elif widen and k in widen and g[k] and _implies(g[k], widen[k]):
            g[k] = widen[k]
        gk = g[k]
        if gk is False:
            continue
        for j, a in enumerate(deps[k]):
            if g[a] is ALWAYS:
                continue
            add: Any = gk
            if ops[k] == iez and j == 1:  # the value of a select: needed where its condition is
                c = deps[k][0]
                add = (frozenset((frozenset((c,)),)) if gk is ALWAYS else
                       frozenset(t | {c} if len(t) < MAX_TERM else t for t in gk))  # fmt: skip
            if add is ALWAYS:
                g[a] = ALWAYS
            else:
                g[a] = add if g[a] is False else _simplify(g[a] | add, neg)
    return g


def _implies(a: frozenset, b: frozenset) -> bool:
    """Whether guard ``a`` implies guard ``b`` (each term of ``a`` contains a term of ``b``)."""
    return all(any(t >= u for u in b) for t in a)


def _conds(guard: frozenset) -> set[int]:
    """The condition instructions a guard tests."""
    return set().union(*guard)


def _ancestors(deps: list[list[int]], of: set[int]) -> dict[int, int]:
    """The instructions each of ``of`` depends on, transitively, as bit sets (Python ints)."""
    if not of:
        return {}
    top = max(of)
    bits = [0] * (top + 1)
    for k in range(top + 1):
        b = 0
        for a in deps[k]:
            b |= bits[a] | (1 << a)
        bits[k] = b
    return {c: bits[c] for c in of}


def guarded_schedule(F: Any) -> tuple[list[tuple[Any, list[int]]], list[list[int]]]:
    """The step's instructions in guarded blocks (module docstring).

    Args:
        F: A CasADi ``SX`` Function.

    Returns:
        ``(blocks, deps)``: ``blocks`` is a list of ``(guard, instructions)`` in evaluation
        order, ``guard`` being ``ALWAYS`` or a sorted tuple of condition instructions whose
        results are tested; ``deps[k]`` the instructions that instruction ``k`` reads (SSA).
        Instructions no output needs are left out.
    """
    import casadi as cs

    ops, deps = _graph(F)
    iez, output = cs.OP_IF_ELSE_ZERO, cs.OP_OUTPUT
    neg = {k: deps[k][0] for k in range(len(ops)) if ops[k] == cs.OP_NOT}
    anc: dict[int, int] = {}  # the ancestors of each condition, as a bit set
    forced: set[int] = set()
    widen: dict[int, frozenset] = {}
    for rounds in range(50):
        g = _guards(ops, deps, forced, iez, output, neg, widen)
        size: dict[frozenset, int] = {}
        for gk in g:
            if gk:
                size[gk] = size.get(gk, 0) + 1
        missing = set().union(*[_conds(gk) for gk in g if gk]) - anc.keys()
        if missing:  # (making instructions ALWAYS can expose new conditions)
            anc.update(_ancestors(deps, missing))
        large = sorted((key for key, m in size.items() if m >= MIN_BLOCK), key=size.get,
                       reverse=True)  # fmt: skip
        more, wider = set(), {}
        for k, gk in enumerate(g):
            if not gk:
                continue
            if any(anc[c] >> k & 1 for c in _conds(gk)):
                more.add(k)
            elif size[gk] < MIN_BLOCK:  # a small group joins the largest one it implies
                to = None if rounds >= 40 else next(
                    (key for key in large if key != gk and _implies(gk, key)), None)  # fmt: skip
                if to is None:
                    more.add(k)
                else:
                    wider[k] = to
        more -= forced
        if not more and not wider:
            break
        forced |= more
        widen.update(wider)
    return _sink(g, deps), deps


def _sink(g: list[Any], deps: list[list[int]]) -> list[tuple[Any, list[int]]]:
    """The instructions in CasADi's order, except that guarded ones wait until an ``ALWAYS``
    instruction (or the end) needs them; then they run with all the waiting instructions they
    read (of any guard) and the waiting ones of their guard, in CasADi's (topological) order,
    one block per run of a guard (module docstring)."""  # noqa: D205, D209
    blocks: list[tuple[Any, list[int]]] = []
    waiting: dict[frozenset, list[int]] = {}
    home: dict[int, frozenset] = {}  # the waiting instructions and their guards
    done: set[int] = set()  # the instructions emitted so far
    later: dict[frozenset, list[int]] = {}  # each guard's instructions, in order
    for k, gk in enumerate(g):
        if gk:
            later.setdefault(gk, []).append(k)

    def pull(conds: set[int]) -> bool:
        """Compute the conditions not computed yet, and what they read, now, if all of that is
        ``ALWAYS`` work; whether the conditions are all computed then."""  # noqa: D205, D209
        need, stack = set(), [c for c in conds if c not in done]
        while stack:
            k = stack.pop()
            if k in need or k in done:
                continue
            if g[k] is not ALWAYS or k in home:
                return False
            need.add(k)
            stack.extend(deps[k])
        if need:
            ks = sorted(need)
            if blocks and blocks[-1][0] is ALWAYS:
                blocks[-1][1].extend(ks)
            else:
                blocks.append((ALWAYS, ks))
            done.update(ks)
        return True

    def emit(ks: list[int], key: Any) -> None:
        if key is ALWAYS or not pull(_conds(key)):  # (a condition that cannot come first)
            key = ALWAYS
        else:
            key = tuple(sorted(tuple(sorted(t)) for t in key))
        if blocks and blocks[-1][0] == key:
            blocks[-1][1].extend(ks)
        else:
            blocks.append((key, list(ks)))

    def flush(key: frozenset) -> None:
        ks = waiting.pop(key, None)
        if not ks:
            return
        S, stack = set(ks), list(ks)
        while stack:  # what they read that waits too, whatever its guard
            for a in deps[stack.pop()]:
                if a in home and a not in S:
                    S.add(a)
                    stack.append(a)
        top = max(S)
        for k in later.get(key, []):  # the guard's later instructions that can run now
            if k > top and k not in done and k not in S and all(a in done or a in S
                                                                for a in deps[k]):  # fmt: skip
                S.add(k)
        later[key] = [k for k in later.get(key, []) if k not in S and k not in done]
        for other in {home[k] for k in S if k in home} - {key}:
            waiting[other] = [k for k in waiting[other] if k not in S]
        order = sorted(S)
        run: list[int] = []
        run_key: Any = key
        for k in order:  # runs of one guard, each a block
            gk = home.pop(k, key)
            if run and gk != run_key:
                emit(run, run_key)
                done.update(run)
                run = []
            run_key = gk
            run.append(k)
        emit(run, run_key)
        done.update(run)

    for k, gk in enumerate(g):
        if gk is False or k in done:
            continue
        if gk is ALWAYS:
            for a in deps[k]:
                if a in home:
                    flush(home[a])
            emit([k], ALWAYS)
            done.add(k)
        else:
            waiting.setdefault(gk, []).append(k)
            home[k] = gk
    for key in list(waiting):
        flush(key)
    return blocks


def selects(F: Any, deps: list[list[int]]) -> dict[int, tuple[int, int, int]]:
    """The two-way selects of ``F``: ``{k: (c, a, b)}`` for each ``ADD`` instruction ``k`` that
    sums ``if_else_zero(c, a)`` and ``if_else_zero(not c, b)`` (how CasADi writes ``c ? a : b``),
    which the C emits as one bitwise blend (``a`` or ``b`` exactly, NaN in the other ignored)."""  # noqa: D205, D209
    import casadi as cs

    ops = [F.instruction_id(k) for k in range(len(deps))]
    iez, add, neg = cs.OP_IF_ELSE_ZERO, cs.OP_ADD, cs.OP_NOT
    out = {}
    for k, op in enumerate(ops):
        if op != add or len(deps[k]) != 2:
            continue
        i, j = deps[k]
        if ops[i] != iez or ops[j] != iez:
            continue
        (ci, a), (cj, b) = deps[i], deps[j]
        if ops[cj] == neg and deps[cj][0] == ci:
            out[k] = (ci, a, b)
        elif ops[ci] == neg and deps[ci][0] == cj:
            out[k] = (cj, b, a)
    return out


# ---------------------------------------------------------------------------------------------
# Threads: the C of qs_run (module docstring)

GRAIN = 20_000
"""Vector instructions per claimed chunk (about 6 µs of the RK4 plant in float64)."""
SPIN_NS = 200_000
"""How long a helper spins for the next call before it sleeps [ns]."""
WAIT_NS = 20_000
"""How long the caller spins for the helpers' last chunks before it sleeps [ns]."""

_POOL = r"""
#if defined(_OPENMP) && defined(__linux__)
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#define QS_PAUSE() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define QS_PAUSE() __asm__ __volatile__("yield")
#else
#define QS_PAUSE() ((void)0)
#endif
typedef struct {
  const qs_args *a;
  int64_t n, chunk, next;   /* blocks, blocks per claim, the next block not claimed */
  int team, room, active, used, force;  /* room: helpers that may still join; used: joined */
} qs_job;
static pthread_mutex_t qs_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t qs_wake = PTHREAD_COND_INITIALIZER, qs_done = PTHREAD_COND_INITIALIZER;
static qs_job *qs_open;     /* the call helpers may join, or NULL (qs_mu) */
static uint64_t qs_gen;     /* calls opened so far: helpers spin on it */
static int qs_helpers, qs_asleep, qs_atfork, qs_cpu = -1;  /* qs_cpu: the caller's core */
static int64_t qs_until, qs_back = 1000000;  /* calls run alone until qs_until [ns] (qs_mu) */

static int64_t qs_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}
static int qs_beside(void) { return sched_getcpu() == __atomic_load_n(&qs_cpu, __ATOMIC_RELAXED); }
static int64_t qs_work(qs_job *J, int me) {  /* the blocks this thread computed */
  int64_t done = 0;
  for (int64_t k = me;; k += J->team) {
    int64_t b = J->force ? k * J->chunk : __atomic_fetch_add(&J->next, J->chunk, __ATOMIC_RELAXED);
    if (b >= J->n) break;
    for (int64_t e = b + J->chunk < J->n ? b + J->chunk : J->n; b < e; ++b, ++done)
      qs_block(J->a, b * W);
  }
  return done;
}
static void *qs_helper(void *arg) {
  uint64_t seen = (uint64_t)(uintptr_t)arg;
  for (;;) {
    for (int64_t i = 1, t0 = qs_ns(); __atomic_load_n(&qs_gen, __ATOMIC_ACQUIRE) == seen; ++i) {
      QS_PAUSE();
      if (i % 64 == 0 && (qs_ns() - t0 > QS_SPIN_NS || qs_beside())) break;
    }
    pthread_mutex_lock(&qs_mu);
    while (qs_gen == seen) {
      qs_asleep++;
      pthread_cond_wait(&qs_wake, &qs_mu);
      qs_asleep--;
    }
    seen = qs_gen;
    qs_job *J = qs_open;
    int me = 0;
    if (J != NULL && J->room > 0 && (J->force || !qs_beside())) {
      J->room--, me = J->used++;
      __atomic_add_fetch(&J->active, 1, __ATOMIC_RELAXED);
      if (J->force && !J->room) pthread_cond_broadcast(&qs_done);
    }
    pthread_mutex_unlock(&qs_mu);
    if (!me) continue;
    qs_work(J, me);
    pthread_mutex_lock(&qs_mu);
    if (__atomic_sub_fetch(&J->active, 1, __ATOMIC_RELEASE) == 0) pthread_cond_broadcast(&qs_done);
    pthread_mutex_unlock(&qs_mu);
  }
  return NULL;
}
static void qs_forked(void) {  /* a forked child has none of the parent's helpers */
  pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t c = PTHREAD_COND_INITIALIZER;
  qs_mu = mu, qs_wake = c, qs_done = c;
  qs_open = NULL, qs_helpers = qs_asleep = 0;
}
static int qs_start(int want) {  /* under qs_mu: helpers up to want (signals blocked in them) */
  sigset_t all, old;
  if (!qs_atfork) qs_atfork = !pthread_atfork(NULL, NULL, qs_forked);
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  for (; qs_helpers < want; ++qs_helpers) {
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    int bad = pthread_create(&t, &at, qs_helper, (void *)(uintptr_t)qs_gen);
    pthread_attr_destroy(&at);
    if (bad) break;
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return qs_helpers < want ? qs_helpers : want;
}
static int qs_run(const qs_args *a, int64_t n, int threads) {
  int64_t per_block = a->steps * QS_WORK, nt = threads > 0 ? threads : threads < 0
                      ? -(int64_t)threads : omp_get_max_threads();
  nt = nt < n ? nt : n;
  nt = nt < 256 ? nt : 256;
  if (nt < 2 || (threads >= 0 && n * per_block < QS_MIN_WORK)) {
    for (int64_t b = 0; b < n; ++b) qs_block(a, b * W);
    return 1;
  }
  int64_t chunk = per_block > 0 ? (QS_GRAIN + per_block - 1) / per_block : n;
  chunk = chunk < n / (4 * nt) ? chunk : n / (4 * nt);
  qs_job J = {a, n, chunk > 1 ? chunk : 1, 0, 1, 0, 0, 1, threads < 0};
  int64_t t0 = qs_ns();
  int open = 0;
  pthread_mutex_lock(&qs_mu);
  if (qs_open == NULL && (J.force || t0 >= qs_until)) {
    J.room = qs_start((int)nt - 1), J.team = 1 + J.room;
    qs_open = &J, open = 1;  /* else another thread's call has the pool, or a pause */
    __atomic_store_n(&qs_cpu, sched_getcpu(), __ATOMIC_RELAXED);
    __atomic_store_n(&qs_gen, qs_gen + 1, __ATOMIC_RELEASE);
    if (qs_asleep) pthread_cond_broadcast(&qs_wake);
    while (J.force && J.room) pthread_cond_wait(&qs_done, &qs_mu);
  }
  pthread_mutex_unlock(&qs_mu);
  int64_t mine = qs_work(&J, 0), t1 = qs_ns();
  if (open) {
    pthread_mutex_lock(&qs_mu);
    qs_open = NULL;  /* every chunk is claimed: no helper joins any more */
    pthread_mutex_unlock(&qs_mu);
    for (int64_t i = 1; __atomic_load_n(&J.active, __ATOMIC_ACQUIRE); ++i) {
      QS_PAUSE();
      if (i % 64 == 0 && qs_ns() - t1 > QS_WAIT_NS) break;
    }
  }
  pthread_mutex_lock(&qs_mu);
  while (__atomic_load_n(&J.active, __ATOMIC_ACQUIRE)) pthread_cond_wait(&qs_done, &qs_mu);
  /* alone, the call would have taken the caller's time per block for every block */
  int64_t t2 = qs_ns();
  if (open && !J.force && mine && (double)(t2 - t0) * mine > (double)(t1 - t0) * n) {
    qs_until = t2 + qs_back;  /* no faster than that: alone a while, longer each time */
    qs_back = qs_back < 128000000 ? 2 * qs_back : 256000000;
  } else if (open && !J.force && qs_back > 1000000) {
    qs_back /= 2;
  }
  pthread_mutex_unlock(&qs_mu);
  return J.used;
}
#elif defined(_OPENMP)
static int qs_run(const qs_args *a, int64_t n, int threads) {
  int nt = threads > 0 ? threads : threads < 0 ? -threads : omp_get_max_threads();
  int par = nt > 1 && n > 1 && (threads < 0 || n * a->steps * QS_WORK >= QS_MIN_WORK);
#pragma omp parallel for schedule(dynamic) num_threads(nt) if(par)
  for (int64_t b = 0; b < n; ++b) qs_block(a, b * W);
  return par ? nt : 1;
}
#else
static int qs_run(const qs_args *a, int64_t n, int threads) {
  (void)threads;
  for (int64_t b = 0; b < n; ++b) qs_block(a, b * W);
  return 1;
}
#endif
"""


def pool_source(instructions: int, min_work: int) -> str:
    """C of ``qs_run`` for a step of ``instructions`` vector instructions; threads only where
    blocks × steps × instructions reach ``min_work`` (unless forced, ``threads < 0``).

    Needs ``qs_args`` (with ``steps``), ``qs_block``, ``W`` and, with OpenMP, ``<omp.h>`` and
    ``_GNU_SOURCE`` defined before the first ``#include``.
    """  # noqa: D205
    defines = (f"#define QS_WORK {int(instructions)}LL\n#define QS_MIN_WORK {int(min_work)}LL\n"
               f"#define QS_GRAIN {GRAIN}LL\n#define QS_SPIN_NS {SPIN_NS}LL\n"
               f"#define QS_WAIT_NS {WAIT_NS}LL\n")  # fmt: skip
    return defines + _POOL
