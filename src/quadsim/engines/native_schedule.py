r"""Guarded evaluation for the generated C: which instructions a step needs only sometimes.

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
"""

from __future__ import annotations

from typing import Any

__all__ = ["ALWAYS", "MAX_CONDS", "MAX_TERM", "MIN_BLOCK", "guarded_schedule", "selects"]

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
