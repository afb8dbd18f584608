"""The statement walker: prints a kernel body statement by statement through the emit context.

Control flow is the walker's business -- sequences, grid and serial loops (and the grid
split over cores), ``if``, bindings, allocations, scalar stores -- and it dispatches each
tile op through the construct table (:mod:`tilelang_tpu.codegen.table`) and each
``T.Parallel`` loop to :mod:`tilelang_tpu.codegen.emit.parallel`.  Anything the table does
not cover raises a :class:`~tilelang_tpu.codegen.values.CodegenError` naming the construct
and the TIR statement it came from: the walker never guesses.
"""

from __future__ import annotations

from typing import Any

from tilelang_tpu.codegen.context import EmitContext
from tilelang_tpu.codegen.emit.parallel import elementwise, emit_parallel
from tilelang_tpu.codegen.entry import declare_globals
from tilelang_tpu.codegen.ir import is_const, is_zero, min_extent_range, op_name, stmt_text
from tilelang_tpu.codegen.layout import DTYPES, REDUCE_ALIGN, WORD_PAIR_DTYPES, storage_dims, storage_type, to4
from tilelang_tpu.codegen.plan import GridSplit, grid_split, overwriting_gemm, plan_kernel
from tilelang_tpu.codegen.table import supported_tile_ops_hint, tile_op_handlers
from tilelang_tpu.codegen.values import LOCAL_SCOPES, CodegenError, Tile

__all__ = ["run", "stmt"]


def run(em: EmitContext) -> None:
    """Plan the kernel, declare its global views, then print its body into ``em.lines``."""
    em.plan = plan_kernel(em.func.body)
    em.split = grid_split(em.func.body, em.cores)
    declare_globals(em)
    em.prologue = len(em.lines)
    stmt(em, em.func.body)


def _aliased_copy(em: EmitContext, s: Any) -> bool:
    """True for a staging copy whose destination became an alias of its source."""
    for copy, dst in em.plan.skipped:
        if s.same_as(copy):
            tile = em.tiles.get(dst)
            return tile is not None and tile is em.tiles.get(em.plan.aliases[dst])
    return False


def stmt(em: EmitContext, s: Any) -> None:
    from tvm import tirx

    if isinstance(s, tirx.SeqStmt):
        children = list(s.seq)
        for index, child in enumerate(children):
            if _aliased_copy(em, child):
                continue
            gemm = overwriting_gemm(child, children[index + 1]) if index + 1 < len(children) else None
            if gemm is not None:
                # T.clear(c); T.gemm(a, b, c): no fill, the GEMM overwrites c.
                em.overwriting = gemm
                continue
            stmt(em, child)
        return
    previous = em.stmt_text
    if not isinstance(s, (tirx.For, tirx.IfThenElse, tirx.AttrStmt)):
        em.stmt_text = stmt_text(s)
    try:
        if isinstance(s, tirx.DeclBuffer):
            decl_buffer(em, s.buffer)
        elif isinstance(s, tirx.AllocBuffer):
            alloc(em, s.buffer)
        elif isinstance(s, tirx.For):
            for_(em, s)
        elif isinstance(s, tirx.Evaluate):
            evaluate(em, s)
        elif isinstance(s, tirx.IfThenElse):
            em.stmt_text = f"if {s.condition}:"
            em.emit(f"if ({em.expr(s.condition)}) {{")
            block(em, s.then_case)
            if s.else_case is not None:
                em.emit("} else {")
                block(em, s.else_case)
            em.emit("}")
        elif isinstance(s, tirx.Bind):
            if "int" not in str(s.var.dtype) and "float" not in str(s.var.dtype):
                raise em.fail(f"binding of a {s.var.dtype} value")
            value = em.expr(s.value)
            name = em.fresh(s.var.name)
            ctype = "int" if "int" in str(s.var.dtype) else "float"
            em.emit(f"{ctype} {name} = {value};")
            em.ids.of_var[s.var] = name
        elif isinstance(s, tirx.AttrStmt):
            stmt(em, s.body)
        elif isinstance(s, tirx.BufferStore):
            buffer_store(em, s)
        elif isinstance(s, tirx.AssertStmt):
            raise em.fail("assert statement")
        else:
            raise em.fail(f"statement kind {type(s).__name__}")
    except CodegenError as err:
        if not err.where:  # raised outside the emitter (GlobalTensor.shape): name the statement
            err.where = em.stmt_text
        raise
    finally:
        em.stmt_text = previous


def block(em: EmitContext, s: Any) -> None:
    em.indent += 1
    stmt(em, s)
    em.indent -= 1


def decl_buffer(em: EmitContext, buf: Any) -> None:
    # DeclBuffer re-declares a buffer whose storage is already known (a kernel
    # parameter or a tile allocated just before); nothing to print.
    if buf.data in em.globals_ or buf.data in em.tiles or buf.data in em.scalars:
        return
    raise em.fail(f"buffer {buf.name} declared over storage the tpu codegen did not allocate")


def alloc(em: EmitContext, buf: Any) -> None:
    from tvm import tirx

    if buf.data in em.plan.aliases and em.plan.aliases[buf.data] in em.tiles:
        em.tiles[buf.data] = em.tiles[em.plan.aliases[buf.data]]
        return
    scope = buf.scope()
    dtype = str(buf.dtype)
    if scope == "local.var":
        ctype = "int" if "int" in dtype else "float"
        name = em.fresh(str(buf.name))
        em.emit(f"{ctype} {name} = 0;")
        em.scalars[buf.data] = name
        return
    if scope not in LOCAL_SCOPES:
        raise em.fail(f"buffer scope {scope!r} of {buf.name}", hint=f"supported: {', '.join(LOCAL_SCOPES)} and local.var")
    if dtype not in DTYPES and dtype not in WORD_PAIR_DTYPES:
        raise em.fail(f"tile {buf.name} has dtype {dtype}, which PPL does not support", hint=f"use one of {', '.join(DTYPES)}")
    if not all(isinstance(s, tirx.IntImm) for s in buf.shape):
        raise em.fail(
            f"tile {buf.name} of symbolic shape {list(buf.shape)}",
            hint="tiles live in local memory and need static sizes: allocate block-sized tiles "
            "(T.alloc_shared((block_M, N))) and loop over T.ceildiv(M, block_M) blocks; copies clip the last one",
        )
    shape = tuple(int(s) for s in buf.shape)
    if not 1 <= len(shape) <= 4:
        raise em.fail(f"tile {buf.name} has rank {len(shape)}; ranks 1 to 4 are supported")
    layout = em.plan.layouts.get(buf.data, "lanes")
    if layout != "lanes" and buf.data in em.plan.reduce_sources:
        raise em.fail(
            f"tile {buf.name} is both an fp32 T.gemm operand and a T.reduce source",
            hint="fp32 matmul operands keep whole rows in one lane; copy the result to another tile before reducing it",
        )
    if layout == "rows_n" and len(shape) != 2:
        raise em.fail(f"T.gemm operand {buf.name} of rank {len(shape)}", hint="T.gemm takes 2-D tiles")
    block = storage_dims(to4([str(s) for s in shape], layout), dtype)
    if buf.data in em.plan.reduce_sources:
        # The row reduction pads each row's tail in place (see quick_pooling).
        block[3] = str(-(-int(block[3]) // REDUCE_ALIGN) * REDUCE_ALIGN)
    name = em.fresh(str(buf.name))
    shape4 = storage_dims(to4([str(s) for s in shape], layout), dtype)
    bvar = em.dim4var(block, name + "_block")
    if block == shape4:
        em.emit(f"auto {name} = make_tensor<{storage_type(dtype)}>({bvar}, {bvar});")
    else:
        rvar = em.dim4var(shape4, name + "_shape")
        em.emit(f"auto {name} = make_tensor<{storage_type(dtype)}>({bvar}, {rvar});")
    em.tiles[buf.data] = Tile(name, dtype, shape, block, layout)


def for_(em: EmitContext, loop: Any) -> None:
    from tvm import tirx

    if loop.kind == tirx.ForKind.PARALLEL:
        em.stmt_text = stmt_text(loop)
        # A scope of its own: the temporaries' local memory is free again after it.
        em.emit("{")
        em.indent += 1
        emit_parallel(em, loop)
        em.indent -= 1
        em.emit("}")
        return
    if loop.kind not in (tirx.ForKind.SERIAL, tirx.ForKind.UNROLLED):
        raise em.fail(f"{loop.kind} loop", loop)
    em.stmt_text = f"for {loop.loop_var.name} in range({loop.min}, {loop.min + loop.extent}):"
    if em.split.loops and loop.same_as(em.split.loops[0]):
        emit_split_grid(em, em.split)
        return
    var = em.fresh(loop.loop_var.name)
    em.ids.of_var[loop.loop_var] = var
    lo = em.expr(loop.min)
    hi = em.expr(loop.min + loop.extent) if not is_zero(loop.min) else em.expr(loop.extent)
    em.analyzer.bind(loop.loop_var, min_extent_range(loop.min, loop.extent))
    em.emit(f"for (int {var} = {lo}; {var} < {hi}; ++{var}) {{")
    single_trip = is_const(loop.extent) and int(loop.extent) == 1  # nothing to overlap; ppl-compile 1.30.2 may crash on it
    if not single_trip and (
        ("num_stages" in loop.annotations and int(loop.annotations["num_stages"]) > 1) or loop.same_as(em.plan.pipelined_grid)
    ):
        # T.Pipelined, or the innermost T.Kernel grid loop (its iterations are independent
        # blocks): ppl-compile software-pipelines the loop body, overlapping the DMA of the
        # next iteration with the compute of this one (data dependences kept).
        em.emit("  ppl::enable_pipeline();")
    block(em, loop.body)
    em.emit("}")


def buffer_store(em: EmitContext, s: Any) -> None:
    if s.buffer.data in em.scalars:
        em.emit(f"{em.scalars[s.buffer.data]} = {em.expr(s.value)};")
        return
    if ((s.buffer.data in em.tiles or s.buffer.data in em.globals_) and all(is_const(i) for i in s.indices)) or (
        s.buffer.data in em.globals_ and _tile_values_only(em, s.value)
    ):
        # One element of a tile: what a T.Parallel over extent-1 axes leaves (tilelang
        # drops such loops), e.g. the per-row statistics of a 1-row tile.
        em.emit("{")
        em.indent += 1
        elementwise(em, s, [], [], s)
        em.indent -= 1
        em.emit("}")
        return
    raise em.fail(
        f"scalar store to {s.buffer.name}",
        hint="TPU tiles are written a whole tile at a time: use T.copy, T.fill or a T.Parallel loop over the tile",
    )


def _tile_values_only(em: EmitContext, value: Any) -> bool:
    """True if ``value`` reads local tiles (a per-row statistic stored to global memory
    outside a loop, e.g. ``Mean[bx] = mean[0]`` of a 1-row tile)."""
    from tvm import tirx

    reads: list[Any] = []
    tirx.stmt_functor.post_order_visit(tirx.Evaluate(value), lambda n: reads.append(n) if isinstance(n, tirx.BufferLoad) else None)
    return bool(reads) and all(r.buffer.data in em.tiles for r in reads)


def evaluate(em: EmitContext, s: Any) -> None:
    from tvm import tirx

    call = s.value
    if isinstance(call, tirx.IntImm):
        return
    if not isinstance(call, tirx.Call):
        raise em.fail(f"expression statement {type(call).__name__}")
    op = op_name(call)
    handler = tile_op_handlers().get(op)
    if op == "tirx.ret":
        return
    if handler is None:
        name = op.removeprefix("tl.tileop.")
        raise em.fail(f"T.{name}" if op.startswith("tl.tileop.") else f"call to {op}", hint=supported_tile_ops_hint())
    em.emit("{")
    em.indent += 1
    handler(em, call)
    em.indent -= 1
    em.emit("}")


def emit_split_grid(em: EmitContext, split: GridSplit) -> None:
    """Print the flattened grid loop of ``split``: this core's contiguous chunk of blocks."""
    from tvm import tirx

    extents = [em.expr(loop.extent) for loop in split.loops]
    total, core, per_core, extra, first, last, block = (
        em.fresh(n) for n in ("grid_blocks", "core", "blocks_per_core", "extra_blocks", "first_block", "last_block", "block")
    )
    em.emit(f"int {total} = {' * '.join(f'({e})' for e in extents)};")
    em.emit(f"int {core} = ppl::get_core_index();")
    em.emit(f"int {per_core} = {total} / {split.cores};")
    em.emit(f"int {extra} = {total} % {split.cores};")
    # Chunks of per_core blocks, the first `extra` cores one more: sizes differ by at most one.
    em.emit(f"int {first} = {core} * {per_core} + min({core}, {extra});")
    em.emit(f"int {last} = {first} + {per_core};")
    em.emit(f"if ({core} < {extra}) {last} += 1;")
    em.emit(f"for (int {block} = {first}; {block} < {last}; ++{block}) {{")
    innermost = split.loops[-1]
    if innermost.same_as(em.plan.pipelined_grid):
        # Blocks are independent: overlap the next block's DMA with this one's compute.
        em.emit("  ppl::enable_pipeline();")
    em.indent += 1
    stride = block
    for index, loop in enumerate(reversed(split.loops)):
        var = em.fresh(loop.loop_var.name)
        em.ids.of_var[loop.loop_var] = var
        em.analyzer.bind(loop.loop_var, min_extent_range(loop.min, loop.extent))
        extent = extents[len(extents) - 1 - index]
        position = stride if index == len(split.loops) - 1 else f"{stride} % ({extent})"
        offset = "" if isinstance(loop.min, tirx.IntImm) and int(loop.min) == 0 else f"{em.expr(loop.min)} + "
        em.emit(f"int {var} = {offset}{position};")
        stride = f"{stride} / ({extent})" if index == 0 else f"({stride}) / ({extent})"
    stmt(em, innermost.body)
    em.indent -= 1
    em.emit("}")
