"""The statement walker: prints a kernel body statement by statement through the emit context.

Control flow is the walker's business -- sequences, grid and serial loops (and the grid
split over cores), ``if``, bindings, allocations, scalar stores -- and it dispatches each
tile op through the construct table (:mod:`tilelang_tpu.codegen.table`) and each
``T.Parallel`` loop to :mod:`tilelang_tpu.codegen.emit.parallel`.  Anything the table does
not cover raises a :class:`~tilelang_tpu.codegen.values.CodegenError` naming the construct
and the TIR statement it came from: the walker never guesses.
"""

from __future__ import annotations

import logging
from typing import Any

from tilelang_tpu.codegen.context import NOT_PIPELINED, EmitContext
from tilelang_tpu.codegen.emit.elements import (
    ELEMENT_ATOMICS,
    element_tiles,
    element_value,
    emit_element_atomic,
    emit_element_store,
    has_element_access,
    has_tile_work,
    keep_live,
    refuse_store,
    scalar_capable,
    sync,
)
from tilelang_tpu.codegen.emit.half_elements import half_cast, release_shadows, shadow_half_tiles
from tilelang_tpu.codegen.emit.parallel import elementwise, emit_parallel
from tilelang_tpu.codegen.emit.reshape import reshape_global
from tilelang_tpu.codegen.emit.serial_ops import emit_fill_elements, per_element_loop
from tilelang_tpu.codegen.entry import declare_globals
from tilelang_tpu.codegen.ir import is_const, is_zero, min_extent_range, op_name, region, stmt_text, updates_in_place_before_loading
from tilelang_tpu.codegen.layout import DTYPES, REDUCE_ALIGN, WORD_PAIR_DTYPES, storage_dims, storage_type, to4
from tilelang_tpu.codegen.masked_gemm import masked_gemm
from tilelang_tpu.codegen.plan import GridSplit, clearing_reduce, first_step_gemm, grid_split, overwriting_gemm, plan_kernel
from tilelang_tpu.codegen.ranges import cast_in_range, safe_rsqrts
from tilelang_tpu.codegen.table import supported_tile_ops_hint, tile_op_handlers
from tilelang_tpu.codegen.values import LOCAL_SCOPES, CodegenError, Tile

__all__ = ["run", "stmt"]

_log = logging.getLogger("tilelang_tpu")


def run(em: EmitContext) -> None:
    """Plan the kernel, declare its global views, then print its body into ``em.lines``."""
    em.walk = lambda s: stmt(em, s)
    em.element_load = lambda load: element_value(em, load)
    em.half_cast = lambda value, source, dtype, guard: half_cast(em, value, source, dtype, guard)
    em.element_tiles = element_tiles(em.func.body)
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
        done: set[int] = set()
        for index, child in enumerate(children):
            if index in done or _aliased_copy(em, child):
                continue
            masked = masked_gemm(child, children[index + 1]) if index + 1 < len(children) else None
            if masked is not None:
                _masked_gemm(em, child, children[index + 1], *masked)
                done.add(index + 1)
                continue
            gemm = overwriting_gemm(child, children[index + 1]) if index + 1 < len(children) else None
            if gemm is not None:
                # T.clear(c); T.gemm(a, b, c): no fill, the GEMM overwrites c.
                em.overwriting = gemm
                continue
            stepped = first_step_gemm(child, children[index + 1]) if index + 1 < len(children) else None
            if stepped is not None:
                # T.clear(c); for k ...: T.gemm(a, b, c): no fill, the first K step overwrites c.
                em.first_step = stepped
                continue
            # A staging copy that became an alias emits nothing: the reduction after it is next.
            following = [c for c in children[index + 1 :] if not _aliased_copy(em, c)]
            reduce = clearing_reduce(child, following[0]) if following else None
            if reduce is not None:
                # T.fill(m, -inf); T.reduce_max(x, m, clear=False): no fill, the reduction clears m.
                em.clearing = reduce
                continue
            # Value ranges the statements before this one prove (codegen.ranges): a narrowing
            # copy without the overflow fix, T.rsqrt as tiu::frsqrt.
            em.in_range, em.safe_rsqrts = cast_in_range(children[:index], child), safe_rsqrts(children[:index], child)
            em.before = children[:index]  # T.sqrt skips its fix-ups where these prove the argument safe
            try:
                stmt(em, child)
            finally:
                em.in_range, em.safe_rsqrts, em.before = None, [], ()
        # Tiles allocated in this sequence and used by per-element code stay live to its end.
        for child in children:
            if isinstance(child, tirx.AllocBuffer) and child.buffer.data in em.element_tiles and child.buffer.data in em.tiles:
                keep_live(em, em.tiles[child.buffer.data].name)
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
            em.emit(f"if ({em.element_expr(s.condition)}) {{")
            synced = em.scalar_synced
            block(em, s.then_case)
            after_then, em.scalar_synced = em.scalar_synced, synced
            if s.else_case is not None:
                em.emit("} else {")
                block(em, s.else_case)
            em.scalar_synced = em.scalar_synced and after_then
            em.emit("}")
        elif isinstance(s, tirx.While):
            while_(em, s)
        elif isinstance(s, tirx.Bind):
            if "int" not in str(s.var.dtype) and "float" not in str(s.var.dtype) and str(s.var.dtype) != "bool":
                raise em.fail(f"binding of a {s.var.dtype} value")
            value = em.element_expr(s.value)
            name = em.fresh(s.var.name)
            ctype = "bool" if str(s.var.dtype) == "bool" else "int" if "int" in str(s.var.dtype) else "float"
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


def _masked_gemm(em: EmitContext, mask: Any, gemm_stmt: Any, gemm: Any, all_kept: Any) -> None:
    """A mask written into a GEMM's accumulator and the GEMM, the mask only where it can change
    something (:mod:`tilelang_tpu.codegen.masked_gemm`); the loop bounds decide statically when they can."""
    from tvm import tirx

    def overwriting() -> None:
        em.overwriting = gemm
        try:
            stmt(em, gemm_stmt)
        finally:
            em.overwriting = None

    if em.analyzer.can_prove(all_kept):
        overwriting()
    elif em.analyzer.can_prove(tirx.Not(all_kept)):
        stmt(em, mask)
        stmt(em, gemm_stmt)
    else:
        em.emit(f"if ({em.expr(all_kept)}) {{  // the mask keeps every element: the GEMM overwrites")
        em.indent += 1
        overwriting()
        em.indent -= 1
        em.emit("} else {")
        block(em, mask)
        block(em, gemm_stmt)
        em.emit("}")


def block(em: EmitContext, s: Any) -> None:
    em.indent += 1
    stmt(em, s)
    em.indent -= 1


def decl_buffer(em: EmitContext, buf: Any) -> None:
    # DeclBuffer re-declares a buffer whose storage is already known (a kernel
    # parameter or a tile allocated just before); nothing to print.
    g = em.globals_.get(buf.data)
    if g is not None and [str(d) for d in buf.shape] != [str(d) for d in g.dims]:
        reshape_global(em, buf)  # the tensor seen in the new shape (codegen.emit.reshape)
        return
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
    if scope == "global":
        raise em.fail(
            f"T.alloc_global workspace {buf.name} (a tensor shared by the T.Kernel blocks of one prim_func)",
            hint="the tpu target compiles one T.Kernel per prim_func: pass the workspace as a tensor parameter and write "
            "one prim_func per T.Kernel, called in turn (examples/tpu/flash_decoding.py does this for split-KV decoding)",
        )
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
    if buf.data in em.element_tiles:
        keep_live(em, name)  # (codegen.emit.elements.element_tiles)


def for_(em: EmitContext, loop: Any) -> None:
    from tvm import tirx

    if loop.kind in (tirx.ForKind.PARALLEL, tirx.ForKind.VECTORIZED):  # T.vectorized: independent iterations too
        em.stmt_text = stmt_text(loop)
        # A scope of its own: the temporaries' local memory is free again after it.
        saved = (list(em.lines), em.indent, em.prologue, dict(em.hoisted_tiles), dict(em.tiles))
        em.emit("{")
        em.indent += 1
        try:
            emit_parallel(em, loop)
        except CodegenError as refusal:
            serial = per_element_loop(em, loop)
            if serial is None:
                raise
            # No vector form: the same iterations one element at a time (a performance note).
            em.lines, em.indent, em.prologue, em.hoisted_tiles, em.tiles = saved
            em.emit(f"// per-element T.Parallel (no vector form: {refusal.construct[:120]})".replace("\n", " "))
            # ppl-compile places tiles by the live ranges of their DMA/TIU uses and does not see the
            # scalar unit's: keep every tile the loop touches live across it (without this, a tile
            # written element by element shared local memory with another one: a gather's output
            # came back mostly zeros).
            touched = sorted(em.tiles[data].name for data in element_tiles(serial) if data in em.tiles)
            for name in touched:
                keep_live(em, name)
            try:
                stmt(em, serial)
            except CodegenError:
                raise refusal from None  # the vector path's refusal names the construct and its rewrite
            for name in touched:
                keep_live(em, name)
            _log.info("tpu: T.Parallel runs per element (no vector form: %s)", refusal.construct)
            return
        em.scalar_synced = False
        em.indent -= 1
        em.emit("}")
        return
    if loop.kind not in (tirx.ForKind.SERIAL, tirx.ForKind.UNROLLED):
        kind = {tirx.ForKind.THREAD_BINDING: "T.thread_binding"}.get(loop.kind, f"{loop.kind.name.lower()} kind")
        raise em.fail(
            f"{kind} loop over {loop.loop_var.name}",
            loop,
            "the tpu target has no SIMT threads: write the per-thread work as a T.Parallel loop over the tile "
            "(or a T.serial loop), without T.get_thread_binding",
        )
    em.stmt_text = f"for {loop.loop_var.name} in range({loop.min}, {loop.min + loop.extent}):"
    if em.split.loops and loop.same_as(em.split.loops[0]):
        emit_split_grid(em, em.split)
        return
    var = em.fresh(loop.loop_var.name)
    em.ids.of_var[loop.loop_var] = var
    lo = em.element_expr(loop.min)
    hi = em.element_expr(loop.min + loop.extent) if not is_zero(loop.min) else em.element_expr(loop.extent)
    em.analyzer.bind(loop.loop_var, min_extent_range(loop.min, loop.extent))
    elements = has_element_access(loop.body)
    tile_work = has_tile_work(em, loop.body)
    shadowed: list[Any] = []
    if elements and not tile_work:
        sync(em)  # one wait before a loop of per-element code only
        shadowed = shadow_half_tiles(em, loop.body)  # fp32 copies of the 16-bit tiles it only reads
    em.emit(f"for (int {var} = {lo}; {var} < {hi}; ++{var}) {{")
    if tile_work:
        em.scalar_synced = False  # the previous iteration's tile ops
    single_trip = is_const(loop.extent) and int(loop.extent) == 1  # nothing to overlap; ppl-compile 1.30.2 may crash on it
    if (
        not single_trip
        and not elements
        and (("num_stages" in loop.annotations and int(loop.annotations["num_stages"]) > 1) or loop.same_as(em.plan.pipelined_grid))
        and not updates_in_place_before_loading(loop.body)
    ):
        # T.Pipelined, or the innermost T.Kernel grid loop (its iterations are independent
        # blocks): ppl-compile software-pipelines the loop body, overlapping the DMA of the
        # next iteration with the compute of this one (data dependences kept).
        em.emit("  ppl::enable_pipeline();")
    mark = (len(em.lines), em.prologue)
    block(em, loop.body)
    _unpipeline_per_element(em, *mark)
    if tile_work:
        em.scalar_synced = False
    em.emit("}")
    release_shadows(em, shadowed)


def while_(em: EmitContext, loop: Any) -> None:
    """``while cond:``: the condition is evaluated at the top of every iteration (it may read
    elements that the body's tile ops write)."""
    elements = has_element_access(loop.body) or has_element_access(loop)
    tile_work = has_tile_work(em, loop.body)
    if elements and not tile_work:
        sync(em)
    em.emit("while (true) {")
    em.indent += 1
    if tile_work:
        em.scalar_synced = False
    em.emit(f"if (!({em.element_expr(loop.condition)})) break;")
    em.indent -= 1
    block(em, loop.body)
    if tile_work:
        em.scalar_synced = False
    em.emit("}")


def buffer_store(em: EmitContext, s: Any) -> None:
    if s.buffer.data in em.scalars:
        # (A 16-bit T.alloc_var holds a value of its type: the printer rounds 16-bit casts and arithmetic.)
        em.emit(f"{em.scalars[s.buffer.data]} = {em.element_expr(s.value)};")
        return
    tile_form = ((s.buffer.data in em.tiles or s.buffer.data in em.globals_) and all(is_const(i) for i in s.indices)) or (
        s.buffer.data in em.globals_ and _tile_values_only(em, s.value)
    )
    if scalar_capable(em, s):
        # One element, by the scalar unit (a T.serial loop body, a T.alloc_local accumulator,
        # one element of a 1-row tile's statistics).
        saved = (list(em.lines), em.prologue, dict(em.hoisted_tiles), em.scalar_synced, em.elements_ok)
        em.elements_ok = True
        try:
            emit_element_store(em, s)
            return
        except CodegenError:
            if not tile_form:
                raise
            # The scalar unit lacks an operation (T.rsqrt, T.exp, ...): the tile path below.
            em.lines, em.prologue, em.hoisted_tiles, em.scalar_synced, _ = saved
        finally:
            em.elements_ok = saved[4]
    if tile_form:
        # One element of a tile: what a T.Parallel over extent-1 axes leaves (tilelang
        # drops such loops), e.g. the per-row statistics of a 1-row tile.
        em.emit("{")
        em.indent += 1
        elementwise(em, s, [], [], s)
        em.scalar_synced = False
        em.indent -= 1
        em.emit("}")
        return
    raise refuse_store(em, s)


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
    if op in ELEMENT_ATOMICS:
        emit_element_atomic(em, call)
        return
    if op == "tl.tileop.fill" and region(call.args[0])[0].data in em.globals_:
        emit_fill_elements(em, call)  # T.fill of a global tensor: per element
        return
    if handler is None:
        name = op.removeprefix("tl.tileop.")
        raise em.fail(f"T.{name}" if op.startswith("tl.tileop.") else f"call to {op}", hint=supported_tile_ops_hint())
    em.emit("{")
    em.indent += 1
    em.scalar_synced = False  # (a handler that lowers to per-element loops waits itself)
    handler(em, call)
    em.scalar_synced = False
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
    em.scalar_synced = False
    if innermost.same_as(em.plan.pipelined_grid) and not has_element_access(innermost.body):
        # Blocks are independent: overlap the next block's DMA with this one's compute.
        em.emit("  ppl::enable_pipeline();")
    mark = (len(em.lines), em.prologue)
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
    _unpipeline_per_element(em, *mark)
    em.indent -= 1
    em.emit("}")


def _unpipeline_per_element(em: EmitContext, body_start: int, prologue: int) -> None:
    """Drop the ``ppl::enable_pipeline()`` printed just before ``em.lines[body_start]`` when the
    loop body turned out to hold per-element code (``ppl::tpu_poll``: ppl-compile cannot
    pipeline it; a tile op lowered to per-element loops or a ``T.Parallel`` without a vector
    form decide that only while they are emitted)."""
    start = body_start + em.prologue - prologue  # hoisted lines went in before the loop
    pipelined = start > 0 and em.lines[start - 1].strip() == "ppl::enable_pipeline();"
    if pipelined and any("ppl::tpu_poll();" in line or NOT_PIPELINED in line for line in em.lines[start:]):
        del em.lines[start - 1]
