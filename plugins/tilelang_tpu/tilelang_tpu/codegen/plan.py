"""Whole-kernel decisions the emitter makes before printing anything.

* which tiles are row-reduction sources (their rows are padded to whole EUs);
* which tiles are fp32 ``T.gemm`` operands (the ``rows_n`` layout of ``tiu::fmm``; transposed
  operands stay in the lanes layout);
* which staging copies ``T.reduce_*`` inserted can be skipped (the reduction then
  reads the original tile);
* which grid loop, if any, can be software-pipelined;
* which grid loops are split over the TPU cores (:func:`grid_split`, ``tpu:cores=N``).

The plan is computed once from the device PrimFunc and only read afterwards.
:func:`overwriting_gemm` and :func:`clearing_reduce` are the local (two-statement) decisions,
made while emitting.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

from tilelang_tpu.codegen.ir import is_ret, op_name, pipelinable_grid_loop, region, same_exprs, tile_call, whole
from tilelang_tpu.grid import is_marked_grid_loop

__all__ = ["GridSplit", "KernelPlan", "clearing_reduce", "first_step_gemm", "grid_loops", "grid_split", "overwriting_gemm", "plan_kernel"]

#: Reduce kind -> the fill values a ``clear=False`` reduction leaves unchanged (its identities).
_REDUCE_IDENTITIES = {"max": (-math.inf,), "min": (math.inf,), "sum": (0.0,), "abssum": (0.0,), "absmax": (0.0, -math.inf)}


@dataclass
class KernelPlan:
    reduce_sources: set[Any] = field(default_factory=set)  # data vars of row-reduction sources
    layouts: dict[Any, str] = field(default_factory=dict)  # data var -> non-default layout
    aliases: dict[Any, Any] = field(default_factory=dict)  # staging tile -> tile it copies
    skipped: list[tuple[Any, Any]] = field(default_factory=list)  # (staging copy, its destination)
    pipelined_grid: Any = None  # the innermost grid loop, when its body can be pipelined


def plan_kernel(body: Any) -> KernelPlan:
    """The plan of the kernel whose body is ``body``."""
    plan = KernelPlan(pipelined_grid=None if _has_tile_op(body, "tl.tileop.cumsum") else pipelinable_grid_loop(body))
    _find_reduce_staging(plan, body)
    _collect_uses(plan, body)
    kept = [(stmt, staged) for stmt, staged in plan.skipped if plan.layouts.get(plan.aliases[staged], "lanes") != "lanes"]
    for stmt, staged in kept:
        # The staging copy of an fp32 T.gemm tile changes its layout: keep it, reduce the copy.
        plan.skipped.remove((stmt, staged))
        del plan.aliases[staged]
    if kept:
        plan.reduce_sources.clear()
        _collect_uses(plan, body)
    _keep_shared_operands_on_lanes(plan, body)
    return plan


def _keep_shared_operands_on_lanes(plan: KernelPlan, body: Any) -> None:
    """fp32 ``T.gemm`` operands that are also reduced, or computed in a ``T.Parallel`` together
    with ordinary (lanes) tiles -- flash attention's scores and output in fp32 -- or copied from
    a slice of a tensor of another rank (a bshd head), stay in the
    lanes layout; ``codegen.emit.gemm`` moves them into ``rows_n`` scratch tiles around each
    ``tiu::fmm`` (one ``dma::transpose_nc`` per operand, two for an accumulator)."""
    from tvm import tirx

    rows_n = {data for data, layout in plan.layouts.items() if layout == "rows_n"}
    demoted = {data for data in rows_n if data in plan.reduce_sources}
    groups: list[set[Any]] = []

    def visit(node: Any) -> None:
        if isinstance(node, tirx.Call) and op_name(node) == "tl.tileop.copy":
            src, dst = region(node.args[0])[0], region(node.args[1])[0]
            for tile, other in ((src, dst), (dst, src)):
                if tile.data in rows_n and not _is_tile(other.data) and len(other.shape) != len(tile.shape):
                    demoted.add(tile.data)  # a slice of a rank-3/4 tensor (bshd): the lanes layout's strided view
        if isinstance(node, tirx.For) and node.kind == tirx.ForKind.PARALLEL:
            found: set[Any] = set()
            tirx.stmt_functor.post_order_visit(
                node, lambda n: found.add(n.buffer.data) if isinstance(n, (tirx.BufferLoad, tirx.BufferStore)) else None
            )
            groups.append(found)

    tirx.stmt_functor.post_order_visit(body, visit)
    changed = True
    while changed:
        changed = False
        for group in groups:
            operands = {d for d in group if d in rows_n and d not in demoted}
            others = {d for d in group if _is_tile(d) and (d not in rows_n or d in demoted)}
            if operands and others:
                demoted |= operands
                changed = True
    for data in demoted:
        del plan.layouts[data]


def _is_tile(data: Any) -> bool:
    """Whether the buffer variable ``data`` is a local tile (not a kernel parameter)."""
    scope = str(getattr(data.type_annotation, "storage_scope", ""))
    return scope not in ("", "global", "local.var")


def overwriting_gemm(first: Any, second: Any) -> Any:
    """The ``T.gemm`` call of ``second`` when ``first`` is a zero fill that it overwrites, else None.

    ``T.clear(c)`` / ``T.fill(c, 0)`` of a whole tile immediately followed by
    ``T.gemm(a, b, c)``: the GEMM writes every element of ``c`` (codegen.emit.gemm only takes
    whole tiles), so it is emitted non-accumulating (``accumulate = false``, as
    ``clear_accum=True``) and the fill is dropped, as a PPL programmer writes it.  Only when
    the fill covers the whole tile, its value is +0, and ``c`` is neither operand of the
    GEMM.  (An accumulating GEMM adds its products to +0 exactly: the result is the same.)
    """
    from tvm import tirx

    fill, gemm = tile_call(first, "tl.tileop.fill"), tile_call(second, "tl.tileop.gemm")
    if fill is None or gemm is None:
        return None
    value = fill.args[1]
    if isinstance(value, tirx.IntImm):
        zero = int(value.value) == 0
    else:
        zero = isinstance(value, tirx.FloatImm) and value.value == 0.0 and math.copysign(1.0, value.value) > 0
    buf, mins, ext = region(fill.args[0])
    a, b, (c, cmin, cext) = region(gemm.args[0])[0], region(gemm.args[1])[0], region(gemm.args[2])
    if (
        zero
        and whole(buf, mins, ext)
        and c.data.same_as(buf.data)
        and whole(c, cmin, cext)
        and not a.data.same_as(buf.data)
        and not b.data.same_as(buf.data)
    ):
        return gemm
    return None


def first_step_gemm(first: Any, second: Any) -> tuple[Any, Any] | None:
    """(the ``T.gemm`` call, its loop) when ``first`` is a zero fill of a tile that the loop
    ``second`` first writes with that GEMM, else None.

    ``T.clear(c); for k in T.Pipelined(K // BK): ...; T.gemm(a, b, c)`` -- every GEMM kernel's K
    loop: the fill is dropped and the GEMM accumulates from the second step on
    (``accumulate = (k != k0)``), as a PPL programmer writes it (``benchmarks/tpu_ppl/matmul.pl``:
    ``tiu::fmm2_nn(c, a, b, k > 0)``).  Only when the loop runs at least once (constant extent),
    the GEMM is a statement of the loop body itself (not under a condition) that
    :func:`overwriting_gemm` would take after the fill, and no statement of the body before it
    touches ``c``: then the first step overwrites exactly the +0 the fill wrote.
    """
    from tvm import tirx

    if not isinstance(second, tirx.For) or second.kind not in (tirx.ForKind.SERIAL, tirx.ForKind.UNROLLED):
        return None
    if not isinstance(second.extent, tirx.IntImm) or int(second.extent) < 1:
        return None
    body = list(second.body.seq) if isinstance(second.body, tirx.SeqStmt) else [second.body]
    fill = tile_call(first, "tl.tileop.fill")
    if fill is None:
        return None
    data = region(fill.args[0])[0].data
    for stmt in body:
        gemm = overwriting_gemm(first, stmt)
        if gemm is not None:
            return gemm, second
        if _touches(stmt, data):
            return None
    return None


def _touches(stmt: Any, data: Any) -> bool:
    """Whether ``stmt`` reads or writes the buffer whose data variable is ``data``."""
    from tvm import tirx

    found: list[Any] = []

    def visit(node: Any) -> None:
        buffer_access = isinstance(node, (tirx.BufferLoad, tirx.BufferStore)) and node.buffer.data.same_as(data)
        if buffer_access or (isinstance(node, tirx.Var) and node.same_as(data)):
            found.append(node)

    tirx.stmt_functor.post_order_visit(stmt, visit)
    return bool(found)


def clearing_reduce(first: Any, second: Any) -> Any:
    """The ``T.reduce_*`` call of ``second`` when ``first`` is a fill that it makes redundant, else None.

    ``T.fill(m, -inf); T.reduce_max(x, m, clear=False)`` (flash attention's running max) is
    ``T.reduce_max(x, m)``: the fill writes the reduction's identity into every element of
    ``m``, so combining the row results with it changes nothing.  The reduction is then
    emitted with ``clear=True`` -- one ``quick_pooling`` straight into ``m`` -- and the fill
    (and the combining ``fmax``) are dropped.  Only when the fill covers the whole destination
    tile, its value is exactly an identity of the reduction (-inf for max, +inf for min, +0
    for sum; 0 or -inf for absmax), and the destination is not the reduced tile.
    """
    from tvm import tirx

    fill, reduce = tile_call(first, "tl.tileop.fill"), tile_call(second, "tl.tileop.reduce")
    if fill is None or reduce is None or bool(int(reduce.args[4])):
        return None
    kind = str(reduce.args[2].value) if hasattr(reduce.args[2], "value") else str(reduce.args[2])
    value = fill.args[1]
    if not isinstance(value, (tirx.IntImm, tirx.FloatImm)):
        return None
    if kind == "absmax" and isinstance(value, tirx.IntImm):
        return None  # int32 |-2^31| wraps to -2^31, below 0: 0 is no identity there
    number = float(value.value)
    identities = _REDUCE_IDENTITIES.get(kind, ())
    if not any(number == v and math.copysign(1.0, number) == math.copysign(1.0, v) for v in identities):
        return None
    buf, mins, ext = region(fill.args[0])
    src, (dst, dmin, dext) = region(reduce.args[0])[0], region(reduce.args[1])
    if whole(buf, mins, ext) and dst.data.same_as(buf.data) and whole(dst, dmin, dext) and not src.data.same_as(buf.data):
        return reduce
    return None


def _has_tile_op(body: Any, op: str) -> bool:
    """Whether ``body`` calls tile op ``op``.  (A T.cumsum's W-offset sub-views inside a
    software-pipelined grid loop make ppl-compile 1.30.2 segfault: such grids are not pipelined.)"""
    from tvm import tirx

    found: list[Any] = []
    tirx.stmt_functor.post_order_visit(body, lambda n: found.append(n) if isinstance(n, tirx.Call) and op_name(n) == op else None)
    return bool(found)


def _collect_uses(plan: KernelPlan, body: Any) -> None:
    """Reduce sources (padded rows) and fp32 matmul operands (the rows_n layout)."""
    from tvm import tirx

    def visit(node: Any) -> None:
        if not isinstance(node, tirx.Call):
            return
        op = op_name(node)
        if op == "tl.tileop.reduce":
            source = region(node.args[0])[0].data
            plan.reduce_sources.add(plan.aliases.get(source, source))
        elif op == "tl.tileop.gemm":
            a, b, c = (region(arg)[0] for arg in node.args[:3])
            transposed = (bool(int(node.args[3])), bool(int(node.args[4])), False)
            if str(a.dtype) == "float32":
                # A transposed operand keeps the lanes layout: codegen.emit.gemm transposes it
                # into a rows_n scratch tile with two DMA transposes.
                for buf, trans in zip((a, b, c), transposed, strict=True):
                    if not trans:
                        plan.layouts[buf.data] = "rows_n"

    tirx.stmt_functor.post_order_visit(body, visit)
    _find_column_vectors(plan, body)


def _find_column_vectors(plan: KernelPlan, body: Any) -> None:
    """1-D local tiles read as ``w[j]`` in an ``(i, j)`` T.Parallel loop (norm weights,
    bias epilogues) get the ``row`` layout: the vector along ``W`` of one lane, from
    where it is broadcast to every lane where it is used."""
    from tvm import tirx

    def visit(node: Any) -> None:
        # The innermost T.Parallel loop whose variable is the last index of a 2-D store.
        if not (isinstance(node, tirx.For) and node.kind == tirx.ForKind.PARALLEL):
            return
        if isinstance(node.body, tirx.For) and node.body.kind == tirx.ForKind.PARALLEL:
            return
        column = node.loop_var
        stores: list[Any] = []
        tirx.stmt_functor.post_order_visit(
            node.body,
            lambda n: (
                stores.append(n)
                if isinstance(n, tirx.BufferStore)
                and len(n.indices) >= 2
                and isinstance(n.indices[-1], tirx.Var)
                and n.indices[-1].same_as(column)
                else None
            ),
        )
        if not stores:
            return

        def loads(n: Any) -> None:
            if (
                isinstance(n, tirx.BufferLoad)
                and len(n.buffer.shape) == 1
                and n.buffer.scope() != "global"
                and isinstance(n.indices[0], tirx.Var)
                and n.indices[0].same_as(column)
            ):
                plan.layouts[n.buffer.data] = "row"

        tirx.stmt_functor.post_order_visit(node.body, loads)

    tirx.stmt_functor.post_order_visit(body, visit)


def _find_reduce_staging(plan: KernelPlan, body: Any) -> None:
    """Find ``T.copy(x, x_frag); T.reduce(x_frag, ...)`` pairs to reduce ``x`` directly.

    ``T.reduce_*`` on a shared buffer stages it through a fragment copy (a GPU
    register-file concern).  On the TPU both live in local memory, so when the
    fragment is used by nothing else the reduction reads the original tile and
    the copy is not emitted.  (The row reduction writes only the row padding,
    outside the tile's logical data.)
    """
    from tvm import tirx

    uses: dict[Any, int] = {}
    pairs: list[tuple[Any, Any, Any]] = []

    def visit(node: Any) -> None:
        if isinstance(node, (tirx.BufferLoad, tirx.BufferStore)):
            uses[node.buffer.data] = uses.get(node.buffer.data, 0) + 1
        if isinstance(node, tirx.SeqStmt):
            seq = list(node.seq)
            for first, second in itertools.pairwise(seq):
                copy, red = tile_call(first, "tl.tileop.copy"), tile_call(second, "tl.tileop.reduce")
                if copy is None or red is None:
                    continue
                (src, smin, sext), (dst, dmin, dext) = region(copy.args[0]), region(copy.args[1])
                src_shape = _static(src.shape)
                same_kind = str(src.dtype) == str(dst.dtype) and src_shape is not None and src_shape == _static(dst.shape)
                if same_kind and region(red.args[0])[0].same_as(dst) and whole(src, smin, sext) and whole(dst, dmin, dext):
                    pairs.append((first, src, dst))

    tirx.stmt_functor.post_order_visit(body, visit)
    for stmt, src, dst in pairs:
        if uses.get(dst.data) == 2 and src.scope() != "global":
            plan.aliases[dst.data] = src.data
            plan.skipped.append((stmt, dst.data))


def _static(shape: Any) -> list[int] | None:
    """``shape`` as integers, or ``None`` if a dimension is symbolic."""
    from tvm import tirx

    return [int(d) for d in shape] if all(isinstance(d, tirx.IntImm) for d in shape) else None


@dataclass(frozen=True)
class GridSplit:
    """How the grid runs: ``loops`` (outermost first) split over ``cores`` cores, or ``reason`` it runs on one."""

    loops: tuple[Any, ...] = ()
    cores: int = 1
    reason: str = ""


def grid_loops(body: Any) -> tuple[Any, ...]:
    """The grid loops of a kernel body, outermost first (``()`` if the body is not one grid loop nest)."""
    from tvm import tirx

    while True:
        stmts = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
        rest = [s for s in stmts if not isinstance(s, tirx.DeclBuffer) and not is_ret(s)]
        if len(rest) != 1:
            return ()
        if not isinstance(rest[0], tirx.AttrStmt):
            break
        body = rest[0].body  # an annotation around the grid (tl.assume of symbolic shapes): emitted as its body
    if not is_marked_grid_loop(rest[0]):
        return ()
    loops = [rest[0]]
    while is_marked_grid_loop(loops[-1].body):
        loops.append(loops[-1].body)
    return tuple(loops)


#: Tile-region atomics (a read-modify-write of a region: codegen.emit.atomic), whose blocks
#: must not race on two cores.
_TILE_ATOMICS = frozenset({"tl.tileop.atomicadd", "tl.tileop.atomicmax", "tl.tileop.atomicmin"})


def grid_split(body: Any, cores: int) -> GridSplit:
    """How the grid of the kernel whose body is ``body`` runs on a launch of ``cores`` cores."""
    from tvm import tirx

    if cores <= 1:
        return GridSplit(reason="one core asked for")
    loops = grid_loops(body)
    if not loops:
        return GridSplit(reason="the kernel has a grid of one block")
    atomics: list[Any] = []
    tirx.stmt_functor.post_order_visit(
        body, lambda n: atomics.append(n) if isinstance(n, tirx.Call) and op_name(n) in _TILE_ATOMICS else None
    )
    elementwise: list[Any] = []
    tirx.stmt_functor.post_order_visit(
        body, lambda n: elementwise.append(n) if isinstance(n, tirx.Call) and op_name(n).endswith("_elem_op") else None
    )
    if elementwise:
        # An element atomic (in T.Parallel: emit.parallel; in serial code: emit.elements) is a
        # read-modify-write: only one core may walk the blocks, in the one-core order.
        return GridSplit(
            reason="element atomics (T.atomic_add(H[i], v), also inside T.Parallel) are atomic only while one core walks the grid"
        )
    if atomics:
        # Two cores adding into one region would race (codegen.emit.atomic's read-modify-write):
        # split only over the grid loops that separate the regions (split-K's bx, by).
        loops, reason = _atomic_safe_loops(body, loops, atomics)
        if not loops:
            return GridSplit(reason=reason)
    if all(isinstance(loop.extent, tirx.IntImm) for loop in loops):
        blocks = 1
        for loop in loops:
            blocks *= int(loop.extent)
        if blocks <= 1:
            return GridSplit(reason="the kernel has a grid of one block")
        cores = min(cores, blocks)  # a core without a block would only cost its launch
    return GridSplit(loops, cores)


def _atomic_safe_loops(body: Any, loops: tuple[Any, ...], atomics: list[Any]) -> tuple[tuple[Any, ...], str]:
    """The outer grid loops a kernel with ``T.atomic_add`` can be split over, or ``()`` and why not.

    Blocks that add into one region must stay on one core, in the one-core order
    (which also keeps the sums bitwise those of one core).  So the split covers the
    outermost grid loops down to the first one whose variable no destination index
    uses (split-K's ``bz``, walked whole by each core), and only if every
    destination tensor is written by one form of ``T.atomic_add`` alone (no other
    reads or writes of it) whose index separates those loops: for each split
    variable ``v`` some dimension's index is ``c * v + k``, with a constant ``k`` and
    ``|c|`` at least the region's extent there.  Then blocks of two
    cores differ in some ``v`` and their regions are disjoint.
    """
    from tvm import arith, tirx

    one_core = "T.atomic_add is atomic only while one core walks the grid"
    destinations: dict[Any, tuple[list[Any], list[Any]]] = {}
    for call in atomics:
        dst, mins, extents = region(call.args[1])
        # The region written is the value tile's (a BufferLoad destination has extents 1).
        tile_extents = list(region(call.args[0])[2])
        if len(tile_extents) > len(extents):
            return (), one_core
        aligned = [tirx.const(1, "int32")] * (len(extents) - len(tile_extents)) + tile_extents
        extents = [arith.Analyzer().simplify(tirx.max(e, t)) for e, t in zip(extents, aligned, strict=True)]
        known = destinations.setdefault(dst.data, (mins, extents))
        if not (same_exprs(known[0], mins) and same_exprs(known[1], extents)):  # not structural_equal: X0[0] is not X1[0]
            return (), f"{one_core} (two T.atomic_add forms write {dst.name})"

    def touches(node: Any) -> list[Any]:
        found: list[Any] = []
        tirx.stmt_functor.post_order_visit(
            node,
            lambda n: found.append(n) if isinstance(n, (tirx.BufferLoad, tirx.BufferStore)) and n.buffer.data in destinations else None,
        )
        return found

    if len(touches(body)) != sum(len(touches(tirx.Evaluate(call.args[1]))) for call in atomics):
        return (), f"{one_core} (its destination is also read or written otherwise)"

    split: list[Any] = []
    for loop in loops:
        var = loop.loop_var
        if not any(_mentions(m, var) for mins, _ in destinations.values() for m in mins):
            break
        for mins, extents in destinations.values():
            if not any(_separates(m, e, var, arith) for m, e in zip(mins, extents, strict=False)):
                return tuple(split), f"{one_core} (its regions do not separate the grid's blocks)"
        split.append(loop)
    return tuple(split), one_core


def _mentions(expr: Any, var: Any) -> bool:
    from tvm import tirx

    found: list[Any] = []
    tirx.stmt_functor.post_order_visit(expr, lambda n: found.append(n) if isinstance(n, tirx.Var) and n.same_as(var) else None)
    return bool(found)


def _separates(index: Any, extent: Any, var: Any, arith: Any) -> bool:
    """Whether ``index`` is ``c * var + k`` with a constant ``k`` and ``|c| >= extent``.

    ``k`` must be a constant, not merely free of grid variables: a loop variable inside
    the block (``C[by * 64 + i * 32, ...]``) widens a block's regions into the next block's.
    """
    from tvm import tirx

    coefficients = arith.detect_linear_equation(index, [var])
    if len(coefficients) != 2 or not isinstance(extent, tirx.IntImm):
        return False
    coefficient, base = coefficients
    return isinstance(coefficient, tirx.IntImm) and isinstance(base, tirx.IntImm) and abs(int(coefficient)) >= int(extent)
