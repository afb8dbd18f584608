"""Greedy shrinking of a failing differential program to its smallest form.

Hypothesis shrinks the programs it draws inside ``@given`` tests; a long run
(``benchmarks/tpu_differential.py``) classifies every program instead of stopping at the
first failure, so it shrinks what failed afterwards with this: repeatedly try a smaller
candidate (a sub-tree in place of a node, a leaf in place of a sub-tree, fewer inputs,
smaller shapes, a plainer output mode) and keep it while the failure persists.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

from .program import Input, Node, Program


def _subtrees(node: Node) -> Iterator[tuple[tuple[int, ...], Node]]:
    yield (), node
    for k, child in enumerate(node.args):
        for path, sub in _subtrees(child):
            yield (k, *path), sub


def _replace_at(node: Node, path: tuple[int, ...], new: Node) -> Node:
    if not path:
        return new
    args = list(node.args)
    args[path[0]] = _replace_at(args[path[0]], path[1:], new)
    return replace(node, args=tuple(args))


def _used(node: Node) -> set[str]:
    names = {str(node.value)} if node.op == "read" else set()
    for a in node.args:
        names |= _used(a)
    return names


def _expr_candidates(expr: Node) -> Iterator[Node]:
    for path, sub in _subtrees(expr):
        for child in sub.args:  # a node replaced by one of its own operands of the same dtype
            if child.dtype == sub.dtype:
                yield _replace_at(expr, path, child)
        if sub.op not in ("const",) and sub.dtype != "bool" and path:
            value: object = 1 if sub.dtype.startswith("int") else 1.0
            yield _replace_at(expr, path, Node("const", sub.dtype, value=value, bound=1, exact=True))


def candidates(prog: Program) -> Iterator[Program]:
    """Programs one step smaller than ``prog``, the most promising first."""
    for expr in _expr_candidates(prog.expr):
        yield replace(prog, expr=expr)
    used = _used(prog.expr)
    kept: tuple[Input, ...] = tuple(x for x in prog.inputs if x.name in used)
    if len(kept) < len(prog.inputs):
        yield _with_inputs(prog, kept)
    for k, x in enumerate(prog.inputs):
        for simpler in (replace(x, view="direct"), replace(x, scope="shared")):
            if simpler != x:
                ins = list(prog.inputs)
                ins[k] = simpler
                yield replace(prog, inputs=tuple(ins))
    if prog.mode == "store":
        yield replace(prog, mode="parallel")
    if prog.order != tuple(range(len(prog.order))):
        yield replace(prog, order=tuple(range(len(prog.order))))
    for N in (1, 7, 16):
        if N < prog.N:
            yield replace(prog, N=N, inputs=tuple(replace(x, offset=min(x.offset, 1) if x.offset else 0) for x in prog.inputs))
    for M in (prog.BM, prog.BM + 1):
        if M < prog.M:
            yield replace(prog, M=M)


def _with_inputs(prog: Program, kept: tuple[Input, ...]) -> Program:
    names = [x.name for x in prog.inputs] + ["Out", "Unused"]
    new_names = [x.name for x in kept] + ["Out", "Unused"]
    old_order = prog.order or tuple(range(len(names)))
    order = tuple(new_names.index(names[k]) for k in old_order if names[k] in new_names)
    return replace(prog, inputs=kept, order=order)


def shrink(prog: Program, still_fails: Callable[[Program], bool], budget: int = 60) -> Program:
    """The smallest program reachable from ``prog`` (at most ``budget`` tries) that still fails."""
    tries = 0
    improved = True
    while improved and tries < budget:
        improved = False
        for cand in candidates(prog):
            tries += 1
            try:
                failing = still_fails(cand)
            except Exception:
                failing = False
            if failing:
                prog, improved = cand, True
                break
            if tries >= budget:
                break
    return prog
