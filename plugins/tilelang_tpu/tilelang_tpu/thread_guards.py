"""Thread-index guards around tile-level work: ``if tx < 128: T.copy(...)`` / ``T.Parallel``.

tilelang runs a tile-level statement (``T.copy``, ``T.fill``, ``T.gemm``, a ``T.Parallel`` loop)
collectively: the threads that reach it share its elements between them, so under a guard on
the thread index it is done once, completely, when at least one thread passes the guard
(upstream's ``test_tilelang_language_mask_op``).  A TPU core runs the block as one sequential
program, so such a guard is decided at compile time: the tile-level body stays when some thread
index in the block's ``T.Kernel(threads=...)`` satisfies it, and is dropped when none does.

Only guards whose condition reads nothing but thread indices and constants, with no ``else``,
and whose body does not use a thread index and holds only tile-level statements are rewritten;
every other use of a thread index is still refused by name (:mod:`tilelang_tpu.lowering`).
"""

from __future__ import annotations

import itertools
from typing import Any

__all__ = ["drop_thread_guards"]

#: Thread-index combinations tried when deciding a guard (a block has at most 1024 threads).
_MAX_THREADS = 1024


def drop_thread_guards(mod: Any) -> Any:
    """``mod`` with every decidable thread-index guard around tile-level work resolved."""
    from tvm import tirx

    updates = {}
    for gvar, func in mod.functions.items():
        if isinstance(func, tirx.PrimFunc):
            body = _resolve(func.body)
            if not body.same_as(func.body):
                updates[gvar] = func.with_body(body)
    for gvar, func in updates.items():
        mod[gvar] = func
    return mod


def _resolve(body: Any) -> Any:
    from tvm import tirx

    thread_vars: list[Any] = []
    extents: list[int] = [1, 1, 1]

    def find(node: Any) -> None:
        if (
            isinstance(node, tirx.Bind)
            and isinstance(node.value, tirx.Call)
            and str(getattr(node.value.op, "name", "")) == "tl.launch_thread_idx"
        ):
            thread_vars.append((node.var, int(node.value.args[0])))
        elif isinstance(node, tirx.SBlock) and "tl.launch_threads" in node.annotations:
            for axis, extent in enumerate(node.annotations["tl.launch_threads"]):
                extents[axis] = int(extent)

    tirx.stmt_functor.post_order_visit(body, find)
    if not thread_vars or any(e < 1 for e in extents) or extents[0] * extents[1] * extents[2] > _MAX_THREADS:
        return body
    axis_of = {v: axis for v, axis in thread_vars}

    def decide(node: Any) -> Any:
        if not isinstance(node, tirx.IfThenElse) or node.else_case is not None:
            return None
        used = _vars(node.condition)
        if not used or any(not any(u.same_as(v) for v in axis_of) for u in used):
            return None  # not a guard on thread indices alone
        if any(any(u.same_as(v) for v in axis_of) for u in _vars_stmt(node.then_case)) or not _tile_level(node.then_case):
            return None
        from tvm import arith

        analyzer = arith.Analyzer()
        keys = list(axis_of)
        for values in itertools.product(*(range(extents[axis_of[v]]) for v in keys)):
            bound = tirx.stmt_functor.substitute(node.condition, {v: tirx.const(x, v.dtype) for v, x in zip(keys, values, strict=True)})
            value = analyzer.simplify(bound)
            if not isinstance(value, tirx.IntImm):
                return None
            if int(value):
                return node.then_case  # some thread passes the guard: the work is done, once
        return tirx.Evaluate(tirx.const(0, "int32"))  # no thread does

    return tirx.stmt_functor.ir_transform(body, None, decide, ["tirx.IfThenElse"])


def _vars(expr: Any) -> list[Any]:
    from tvm import tirx

    found: list[Any] = []
    tirx.stmt_functor.post_order_visit(tirx.Evaluate(expr), lambda n: found.append(n) if isinstance(n, tirx.Var) else None)
    return found


def _vars_stmt(stmt: Any) -> list[Any]:
    from tvm import tirx

    found: list[Any] = []
    tirx.stmt_functor.post_order_visit(stmt, lambda n: found.append(n) if isinstance(n, tirx.Var) else None)
    return found


def _tile_level(stmt: Any) -> bool:
    """Whether ``stmt`` is a sequence of tile-op calls and ``T.Parallel`` loops."""
    from tvm import tirx

    if isinstance(stmt, tirx.SeqStmt):
        return all(_tile_level(s) for s in stmt.seq)
    if isinstance(stmt, tirx.For):
        return bool(stmt.kind == tirx.ForKind.PARALLEL)
    if isinstance(stmt, tirx.Evaluate) and isinstance(stmt.value, tirx.Call):
        return str(getattr(stmt.value.op, "name", "")).startswith("tl.tileop.")
    return False
