"""TIR queries of the PPL code generator: op names, tile-op regions, loop shapes and small
index helpers (no emission, no state)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from tilelang_tpu.codegen.values import CodegenError
from tilelang_tpu.grid import GRID_LOOP

__all__ = [
    "GRID_LOOP",
    "as_float",
    "check_contiguous",
    "float_imm",
    "is_const",
    "is_grid_loop",
    "is_ret",
    "is_zero",
    "local_dims",
    "min_extent_range",
    "op_name",
    "parallel_store",
    "pipelinable_grid_loop",
    "region",
    "same_expr",
    "same_exprs",
    "same_index",
    "same_var",
    "squeeze",
    "stmt_text",
    "tile_call",
    "whole",
    "wrapping_cast",
]


def op_name(call: Any) -> str:
    op = call.op
    return str(op.name) if hasattr(op, "name") else str(op)


def region(arg: Any) -> tuple[Any, list[Any], list[Any]]:
    """(buffer, mins, extents) of a ``tl.region`` argument."""
    from tvm import tirx

    if isinstance(arg, tirx.Call) and op_name(arg) == "tl.region":
        load = arg.args[0]
        extents = list(arg.args[2:])
        mins = list(load.indices)
        if len(extents) < len(mins):
            extents = [tirx.const(1, "int32")] * (len(mins) - len(extents)) + extents
        return load.buffer, mins, extents
    if isinstance(arg, tirx.BufferLoad):
        return arg.buffer, list(arg.indices), [tirx.const(1, "int32")] * len(arg.indices)
    raise CodegenError(f"tile-op operand {arg}", str(arg))


def pipelinable_grid_loop(body: Any) -> Any:
    """The innermost T.Kernel grid loop, if ppl-compile can pipeline its body.

    MaterializeKernelLaunch turns the grid into the kernel's outermost serial loops.
    Their iterations are independent blocks, so pipelining the innermost one is
    always correct -- except through global memory.  It is skipped when the body has a
    loop of its own (that loop is the one to pipeline), an atomic add (consecutive blocks may
    add into one region: the pipeline would load it before the previous block stored it), or
    an in-place element-wise update (``x[i, j] = f(x[i, j])``): ppl-compile 1.7 (tpu_mlir
    1.30.2) crashes with SIGSEGV on such bodies in a pipelined loop.
    """
    from tvm import tirx

    stmts = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
    rest = [s for s in stmts if not isinstance(s, tirx.DeclBuffer) and not is_ret(s)]
    if len(rest) != 1 or not is_grid_loop(rest[0]):
        return None
    loop = rest[0]
    while is_grid_loop(loop.body):
        loop = loop.body
    blockers: list[Any] = []

    def visit(node: Any) -> None:
        if isinstance(node, tirx.For) and node.kind != tirx.ForKind.PARALLEL:
            blockers.append(node)
        elif isinstance(node, tirx.Call) and "atomic" in op_name(node):
            # A read-modify-write of global memory: the next block's load of the region must
            # follow this block's store, a dependence through global memory that the pipeline
            # does not keep (measured: split-K over the innermost grid loop summed stale values).
            blockers.append(node)
        elif isinstance(node, tirx.BufferStore):
            reads: list[Any] = []
            tirx.stmt_functor.post_order_visit(
                tirx.Evaluate(node.value),
                lambda n: reads.append(n) if isinstance(n, tirx.BufferLoad) and n.buffer.data.same_as(node.buffer.data) else None,
            )
            if reads:
                blockers.append(node)
        elif isinstance(node, tirx.Call) and op_name(node) in ("tl.tileop.atomicadd", "tl.tileop.atomicmax", "tl.tileop.atomicmin"):
            # The read-modify-write updates a DMA-loaded scratch tile in place (the crash above).
            blockers.append(node)

    tirx.stmt_functor.post_order_visit(loop.body, visit)
    return None if blockers else loop


def updates_in_place_before_loading(body: Any) -> bool:
    """Whether ``body`` updates a tile in place (``c[i, j] = f(c[i, j])``) before its first
    ``T.copy``: such a loop must not be software-pipelined.

    Measured on the emulator (ppl-compile 1.30.2): ``T.Pipelined(K, num_stages=2)`` whose body
    starts with ``c = c * 0.5`` and then loads A and B and runs ``T.gemm(a, b, c)`` gives sums off
    by up to 17 with ``ppl::enable_pipeline()`` and exact ones without; the same update placed
    after the loads (flash attention's rescale of its output) is exact either way.  Refusing to
    pipeline costs speed only.
    """
    from tvm import tirx

    stmts = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
    for stmt in stmts:
        copies: list[Any] = []
        in_place: list[Any] = []

        def visit(node: Any, copies: list[Any] = copies, in_place: list[Any] = in_place) -> None:
            if isinstance(node, tirx.Call) and op_name(node) == "tl.tileop.copy":
                copies.append(node)
            elif isinstance(node, tirx.BufferStore):
                tirx.stmt_functor.post_order_visit(
                    tirx.Evaluate(node.value),
                    lambda n: in_place.append(n) if isinstance(n, tirx.BufferLoad) and n.buffer.data.same_as(node.buffer.data) else None,
                )

        tirx.stmt_functor.post_order_visit(stmt, visit)
        if in_place:
            return True
        if copies:
            return False
    return False


def is_grid_loop(stmt: Any) -> bool:
    from tvm import tirx

    return isinstance(stmt, tirx.For) and stmt.kind == tirx.ForKind.SERIAL and set(stmt.annotations) <= {GRID_LOOP}


def is_ret(stmt: Any) -> bool:
    from tvm import tirx

    return isinstance(stmt, tirx.Evaluate) and isinstance(stmt.value, tirx.Call) and op_name(stmt.value) == "tirx.ret"


def tile_call(stmt: Any, op: str) -> Any:
    from tvm import tirx

    if isinstance(stmt, tirx.Evaluate) and isinstance(stmt.value, tirx.Call) and op_name(stmt.value) == op:
        return stmt.value
    return None


def whole(buf: Any, mins: list[Any], extents: list[Any]) -> bool:
    return (
        all(is_zero(m) for m in mins)
        and all(is_const(e) for e in extents)
        and all(is_const(x) for x in buf.shape)
        and [int(e) for e in extents] == [int(x) for x in buf.shape]
    )


_FREE_DECL = re.compile(r"^\s*\w+ = T\.(Buffer|handle|int\d+|uint\d+|float\d+|bfloat16|bool|Var)\(")


def stmt_text(node: Any) -> str:
    try:
        text = node.script() if hasattr(node, "script") else str(node)
    except Exception:
        text = str(node)
    # TVMScript prints free buffers and variables as declarations first; they are not the statement.
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#") and not _FREE_DECL.match(ln)]
    if len(lines) > 6:
        lines = [*lines[:6], "..."]
    return "\n".join(lines)


def is_zero(e: Any) -> bool:
    return is_const(e) and int(e) == 0


def is_const(e: Any) -> bool:
    from tvm import tirx

    return isinstance(e, tirx.IntImm)


def same_expr(a: Any, b: Any) -> bool:
    """Whether two expressions compute the same value: structurally equal, their free variables
    the same, and every buffer they read the same buffer.

    ``tvm.ir.structural_equal`` alone maps the buffers of two loads onto each other even with
    ``map_free_vars=False``: ``X0[i, j]`` and ``X1[i, j]`` of two tensors of one shape compare
    equal (found by the differential run: ``T.min(X0, X0 / (abs(X1) + 1))`` read X0 twice).
    """
    from tvm import ir, tirx

    if not ir.structural_equal(a, b, map_free_vars=False):
        return False
    loads: tuple[list[Any], list[Any]] = ([], [])
    for e, found in zip((a, b), loads, strict=True):
        tirx.stmt_functor.post_order_visit(
            tirx.Evaluate(e) if isinstance(e, tirx.PrimExpr) else e,
            lambda n, f=found: f.append(n) if isinstance(n, tirx.BufferLoad) else None,
        )
    return len(loads[0]) == len(loads[1]) and all(p.buffer.data.same_as(q.buffer.data) for p, q in zip(*loads, strict=True))


def same_exprs(a: Sequence[Any], b: Sequence[Any]) -> bool:
    """:func:`same_expr` of two lists of expressions (indices, region bounds), element by element."""
    return len(a) == len(b) and all(same_expr(x, y) for x, y in zip(a, b, strict=True))


def same_index(a: Any, b: Any) -> bool:
    """Both the same variable, or both the same integer constant."""
    from tvm import tirx

    if isinstance(a, tirx.IntImm) and isinstance(b, tirx.IntImm):
        return int(a) == int(b)
    return same_var(a, b)


def same_var(a: Any, b: Any) -> bool:
    from tvm import tirx

    return isinstance(a, tirx.Var) and a.same_as(b)


def min_extent_range(lo: Any, extent: Any) -> Any:
    from tvm import ir

    return ir.Range.from_min_extent(lo, extent)


def squeeze(extents: list[Any]) -> list[str]:
    return [str(e) for e in extents if not (is_const(e) and int(e) == 1)]


def local_dims(lext: list[Any], gext: list[Any], real: list[str]) -> list[str]:
    """Extents of the local side of a DMA: the local region's extents, each non-unit
    one replaced by the (possibly clipped) global extent it pairs with, in order."""
    gpairs = [r for e, r in zip(gext, real, strict=True) if not (is_const(e) and int(e) == 1)]
    out = []
    for e in lext:
        out.append("1" if is_const(e) and int(e) == 1 else gpairs.pop(0))
    return out


def check_contiguous(em: Any, buf: Any) -> None:
    """Refuse a tensor whose strides are not row-major (compared symbolically: a dimension
    may be a shape variable)."""
    from tvm import tirx

    if not len(buf.strides):
        return
    expected: list[Any] = []
    acc: Any = tirx.const(1, buf.shape[-1].dtype)
    for dim in reversed(list(buf.shape)):
        expected.append(acc)
        acc = acc * dim
    if not all(em.analyzer.can_prove_equal(s, e) for s, e in zip(buf.strides, reversed(expected), strict=True)):
        raise em.fail(f"tensor {buf.name} has strides {list(buf.strides)}; the tpu target needs contiguous (row-major) tensors", em.func)


def float_imm(text: str, dtype: str) -> Any:
    from tvm import tirx

    return tirx.FloatImm(dtype, float(text))


def as_float(text: str) -> str:
    return text if text.endswith("f") else f"(float)({text})"


def parallel_store(stmt: Any) -> tuple[Any, list[tuple[Any, int]]] | None:
    """(the BufferStore, [(loop var, extent)]) of a nest of T.Parallel loops from 0 around one store."""
    from tvm import tirx

    loops: list[tuple[Any, int]] = []
    node = stmt
    while isinstance(node, tirx.For) and node.kind == tirx.ForKind.PARALLEL:
        if not (isinstance(node.min, tirx.IntImm) and int(node.min) == 0 and isinstance(node.extent, tirx.IntImm)):
            return None
        loops.append((node.loop_var, int(node.extent)))
        node = node.body
    if not loops or not isinstance(node, tirx.BufferStore):
        return None
    return node, loops


#: Bounds of the narrow integer dtypes a cast may wrap into.
_NARROW_RANGE = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767), "uint16": (0, 65535)}


def wrapping_cast(e: Any, analyzer: Any) -> Any | None:
    """A cast in ``e`` of an integer value to a narrow integer dtype that may wrap, or None.

    TVM's bound analysis takes such a cast to keep its value (``T.cast(128, "int8")`` is
    ``[0, 127]``, not -128), so ``Simplify`` rewrites a floor division (``//``, ``%``) of it as
    C's truncating ``/``, ``%``; the truncating division the code generator then sees may have
    been a floor division whose dividend is negative after all (``-128 // 3`` came out -42, not
    -43; TileLang's ``c`` target does the same).  The caller refuses the division.
    """
    from tvm import tirx

    found: list[Any] = []

    def visit(n: Any) -> None:
        if isinstance(n, tirx.Cast) and str(n.dtype) in _NARROW_RANGE and "int" in str(n.value.dtype):
            lo, hi = _NARROW_RANGE[str(n.dtype)]
            bound = analyzer.const_int_bound(n.value)
            if bound.min_value < lo or bound.max_value > hi:
                found.append(n)

    tirx.stmt_functor.post_order_visit(tirx.Evaluate(e), visit)
    return found[0] if found else None
