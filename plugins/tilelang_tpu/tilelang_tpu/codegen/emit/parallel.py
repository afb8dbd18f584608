"""T.Parallel loops: the body's assignments, each compiled over the loop domain
(:class:`~tilelang_tpu.codegen.emit.operands.ParallelBody`: one TIU instruction per operation,
with scalar operands, casts, unary functions and per-row broadcasts), stores to global
memory, tile transposes and global reads (gathers, strided loads)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tilelang_tpu.codegen.emit.branches import branch_stores
from tilelang_tpu.codegen.emit.cast import emit_convert
from tilelang_tpu.codegen.emit.gather import emit_global_read, reads_global
from tilelang_tpu.codegen.emit.operands import ParallelBody
from tilelang_tpu.codegen.emit.staging import stage_global_reads
from tilelang_tpu.codegen.emit.transpose import emit_tile_transpose
from tilelang_tpu.codegen.ir import is_const, is_zero, same_var
from tilelang_tpu.codegen.layout import DTYPES, FLOAT_DTYPES, WORD_PAIR_DTYPES, offset4, to4
from tilelang_tpu.codegen.values import Operand, Tile

if TYPE_CHECKING:
    from tilelang_tpu.codegen.context import EmitContext

__all__ = ["elementwise", "emit_parallel"]


def emit_parallel(em: EmitContext, loop: Any) -> None:
    from tvm import tirx

    loops = []
    body = loop
    while isinstance(body, tirx.For) and body.kind in (tirx.ForKind.PARALLEL, tirx.ForKind.VECTORIZED):
        if not is_zero(body.min) or not is_const(body.extent):
            raise em.fail("T.Parallel loop with a non-zero start or a symbolic extent", loop)
        loops.append(body)
        body = body.body
    loop_vars = [lp.loop_var for lp in loops]
    extents = [int(lp.extent) for lp in loops]
    for store, accumulate in _stores(em, body, loop):
        if accumulate:
            _global_store(em, store, loop_vars, extents, loop, accumulate=True)
        else:
            elementwise(em, store, loop_vars, extents, loop)


def _atomic_store(em: EmitContext, stmt: Any, loop: Any) -> Any:
    """``T.atomic_add(dst[index], value)`` inside T.Parallel (``tl.atomic_add_elem_op`` of an
    ``access_ptr``) as a BufferStore of ``value`` to ``dst[index]`` (to accumulate), or None."""
    from tvm import tirx

    from tilelang_tpu.codegen.ir import op_name

    call = stmt.value if isinstance(stmt, tirx.Evaluate) else None
    if not (isinstance(call, tirx.Call) and "atomic" in op_name(call)):
        return None
    pointer = call.args[0] if call.args else None
    target = pointer.args[0] if isinstance(pointer, tirx.Call) and op_name(pointer) == "tl.access_ptr" and pointer.args else None
    if op_name(call) != "tl.atomic_add_elem_op" or not isinstance(target, tirx.BufferLoad) or target.buffer.data not in em.globals_:
        raise em.fail(
            f"{op_name(call)} inside T.Parallel",
            loop,
            hint="T.atomic_add(C[bx * BM + i, j], value) into a global tensor is supported; for other atomics "
            "compute the tile and use the tile form (T.atomic_add(C[bx * BM, 0], c_tile))",
        )
    return tirx.BufferStore(target.buffer, call.args[1], list(target.indices))


def _stores(em: EmitContext, body: Any, loop: Any) -> list[tuple[Any, bool]]:
    """The assignments of a T.Parallel body, with temporaries bound inside it
    (``t = x[i, j] * 2``) substituted into the statements that use them, each with whether it
    accumulates (a ``T.atomic_add``) rather than stores."""
    from tvm import tirx

    # A temporary is a flat ``Bind`` statement or a ``LetStmt`` with a body, depending on the TVM build.
    bind_stmt: tuple[type[Any], ...] = tuple(getattr(tirx, name) for name in ("Bind",) if hasattr(tirx, name))
    let_stmt: tuple[type[Any], ...] = tuple(getattr(tirx, name) for name in ("LetStmt",) if hasattr(tirx, name))

    values: dict[Any, Any] = {}
    stale: set[str] = set()  # temporaries whose inputs a later store overwrote
    out: list[tuple[Any, bool]] = []
    pending = [body]
    while pending:
        stmt = pending.pop(0)
        if isinstance(stmt, tirx.SeqStmt):
            pending = list(stmt.seq) + pending
            continue
        for var in [v for v in values if v.name in stale and _mentions_var(stmt, v)]:
            raise em.fail(
                f"temporary {var.name} used after a store to a buffer it reads",
                loop,
                hint="bind the temporary after the store, or store into another tile",
            )
        if isinstance(stmt, bind_stmt):
            values[stmt.var] = _bound(tirx.stmt_functor.substitute(stmt.value, values), stmt.var)
        elif isinstance(stmt, let_stmt):
            values[stmt.var] = _bound(tirx.stmt_functor.substitute(stmt.value, values), stmt.var)
            pending.insert(0, stmt.body)
        elif isinstance(stmt, tirx.BufferStore):
            out.append((tirx.stmt_functor.substitute(stmt, values) if values else stmt, False))
            # Substitution re-reads a temporary's inputs where it is used: that is only its
            # bound value while no store in between overwrites them.
            stale.update(v.name for v, value in values.items() if _reads(value, stmt.buffer.data))
        elif (atomic := _atomic_store(em, stmt, loop)) is not None:
            out.append((tirx.stmt_functor.substitute(atomic, values) if values else atomic, True))
        elif isinstance(stmt, tirx.IfThenElse):
            # if/else: each store keeps the old value where the condition is false (codegen.emit.branches).
            branch = tirx.stmt_functor.substitute(stmt, values) if values else stmt
            selected = branch_stores(em, branch, loop, lambda part: _stores(em, part, loop))
            out.extend(selected)
            for store, _ in selected:
                stale.update(v.name for v, value in values.items() if _reads(value, store.buffer.data))
        else:
            raise em.fail(
                f"{type(stmt).__name__} inside T.Parallel",
                loop,
                hint="a T.Parallel body must be element assignments c[i, j] = expr (temporaries t = expr are allowed)",
            )
    return out


def elementwise(em: EmitContext, store: Any, loop_vars: list[Any], extents: list[int], loop: Any) -> None:
    from tvm import tirx

    tile = em.tiles.get(store.buffer.data)
    if tile is None and store.buffer.data in em.globals_:
        _global_store(em, store, loop_vars, extents, loop)
        return
    if tile is not None and tile.dtype in WORD_PAIR_DTYPES:
        raise em.fail(f"T.Parallel store to {tile.dtype} tile {store.buffer.name}", loop, hint="compute integers in int32 tiles")
    if tile is not None and emit_tile_transpose(em, store, loop_vars, extents):
        return
    if tile is not None and reads_global(em, store.value):
        plain = store.value.value if isinstance(store.value, tirx.Cast) else store.value
        if isinstance(plain, tirx.BufferLoad) and plain.buffer.data in em.globals_:
            # A gather or strided load from global memory (codegen.emit.gather).
            emit_global_read(em, store, tile, loop_vars, extents, loop)
            return
        store = stage_global_reads(em, store, loop_vars, extents, loop)  # other operations too
    if tile is None:
        raise em.fail(
            f"T.Parallel store to {store.buffer.name}, which is not a local tile",
            loop,
            hint="compute into a tile, then T.copy it to global memory",
        )
    # The store's index per tile dimension: a T.Parallel variable (the whole loop extent),
    # in order, or a value that does not vary over the loop (one element there: a constant
    # where tilelang dropped a T.Parallel loop of extent 1, or a serial loop's variable
    # around the T.Parallel/T.vectorized loop -- then each iteration computes one row).
    index, shifts = _split_index(em, list(store.indices), loop_vars)
    if index is None:
        raise em.fail(
            f"T.Parallel store {store.buffer.name}[{', '.join(map(str, store.indices))}] not indexed by the loop variables in order",
            loop,
            hint="write c[i, j + k] = ... with the T.Parallel variables in order (plus offsets, or indices that do not vary over the loop)",
        )
    along = [any(same_var(i, v) for v in loop_vars) for i in index]  # per dim: a T.Parallel variable?
    loop_extent = dict(zip((v.name for v in loop_vars), extents, strict=True))
    dom_ext = [loop_extent[i.name] if p else 1 for i, p in zip(index, along, strict=True)]
    dom_off: list[int | str] = [int(o) if is_const(o) else em.expr(o) for o in shifts]
    if len(index) != len(tile.shape) or not all(
        em.analyzer.can_prove(o >= 0) and em.analyzer.can_prove(o + e <= s) for o, e, s in zip(shifts, dom_ext, tile.shape, strict=True)
    ):
        raise em.fail(
            f"T.Parallel store {store.buffer.name}[{', '.join(map(str, store.indices))}] outside the tile {list(tile.shape)}", loop
        )
    if tuple(dom_ext) != tile.shape:
        dom = em.dim4var(to4([str(e) for e in dom_ext], tile.layout), "dom")
        origin = em.dim4var(offset4([str(o) for o in dom_off], tile.layout), "origin")
        dst = f"{tile.name}.sub_view({dom}, {origin})"
    else:
        dst = tile.name
    ctx = ParallelBody(em, loop_vars, index, dom_ext, dom_off, tile, loop, shifts)
    if not ctx.rows_at_zero:
        # Computed on lanes from 0, then moved onto the destination's rows (ParallelDomain).
        value = ctx.compute(store.value, None)
        assert value is not None
        if not value.is_tile:
            em.emit(f"tiu::fill({dst}, {value.text});")
            return
        if value.dtype != tile.dtype:
            converted = ctx.temp(tile.dtype)
            emit_convert(em, converted, value.text, tile.dtype, value.dtype, ctx.temp)
            value = Operand(converted, tile.dtype, True)
        em.emit(f"dma::move({dst}, {value.text});  // onto the destination's lanes")
        return
    result = ctx.compute(store.value, dst)
    if result is not None:
        if result.is_tile:
            if result.dtype != tile.dtype:  # a float cast, or a promoted narrow integer truncated
                emit_convert(em, dst, result.text, tile.dtype, result.dtype, ctx.temp)
            else:
                em.emit(f"tiu::move({dst}, {result.text});")
        else:
            em.emit(f"tiu::fill({dst}, {result.text});")


def _global_store(em: EmitContext, store: Any, loop_vars: list[Any], extents: list[int], loop: Any, accumulate: bool = False) -> None:
    """A store to a global tensor inside T.Parallel, ``Mean[bx * BM + i] = mean[i]``
    (LayerNorm's per-row outputs): the value is computed into a tile over the loop
    domain, then one DMA stores it, clipped at the tensor's edge like ``T.copy``.
    ``accumulate``: ``T.atomic_add(C[...], value)`` (upstream's split-K): the region is loaded,
    added to and stored back -- atomic because one core walks the blocks that add into a
    region (:func:`tilelang_tpu.codegen.plan.grid_split`), as for the tile form.

    Each global index must be ``offset + loop variable`` (the variables in order) or
    loop-invariant; the offset must not depend on the loop variables.
    """
    from tvm import tirx

    if reads_global(em, store.value):
        store = stage_global_reads(em, store, loop_vars, extents, loop)
    g = em.globals_[store.buffer.data]
    index = list(store.indices)
    offsets: list[Any] = []
    dom: list[int] = []
    used = []
    for idx in index:
        var = next((v for v in loop_vars if _mentions(idx, v)), None)
        if var is None:
            offsets.append(idx)
            dom.append(1)
            continue
        offset = em.analyzer.simplify(idx - var)
        if _mentions(offset, var) or any(_mentions(offset, v) for v in loop_vars):
            raise em.fail(
                f"T.Parallel store {store.buffer.name}[{', '.join(map(str, index))}] to global memory with index {idx}",
                loop,
                hint="index global stores as offset + loop variable, or compute into a tile and T.copy it",
            )
        offsets.append(offset)
        dom.append(extents[[v.name for v in loop_vars].index(var.name)])
        used.append(var)
    if len(used) != len(loop_vars) or any(not u.same_as(v) for u, v in zip(used, loop_vars, strict=True)):
        raise em.fail(
            f"T.Parallel store {store.buffer.name}[{', '.join(map(str, index))}] not indexed by every loop variable in order", loop
        )
    # Compute the value into a tile shaped like the loop domain (rows on lanes).
    shape = tuple(d for d in dom if d != 1) or (1,)
    name = em.fresh(f"{store.buffer.name}_out")
    block = em.dim4var(to4([str(d) for d in shape]), name + "_block")
    em.emit(f"auto {name} = make_tensor<{DTYPES[g.dtype]}>({block}, {block});")
    tile = Tile(name, g.dtype, shape, to4([str(d) for d in shape]))
    tile_index = [v for v in loop_vars] if len(shape) == len(loop_vars) else [tirx.const(0, "int32")]
    ctx = ParallelBody(em, loop_vars, tile_index, list(shape), [0] * len(shape), tile, loop)
    result = ctx.compute(store.value, name)
    if result is not None:
        if result.is_tile and result.dtype != g.dtype:
            emit_convert(em, name, result.text, g.dtype, result.dtype, ctx.temp)
        else:
            em.emit(f"tiu::{'move' if result.is_tile else 'fill'}({name}, {result.text});")
    real = []
    guards = []  # clipped extents that may be <= 0 (along a symbolic dimension, see codegen.entry)
    for axis, (off, d) in enumerate(zip(offsets, dom, strict=True)):
        size = g.extent(axis)
        if em.analyzer.can_prove(tirx.LE(off + d, size)):
            real.append(str(d))
            continue
        inside = em.analyzer.can_prove(tirx.LT(off, size))
        if not inside and (g.is_static or not em.analyzer.can_prove(tirx.GE(off, 0))):
            raise em.fail(f"T.Parallel store to {store.buffer.name} whose region may start outside it (at {off})", loop)
        n = em.fresh("n")
        em.emit(f"int {n} = min({d}, {em.expr(size)} - ({em.expr(off)}));")
        real.append(n)
        if not inside:
            guards.append(f"{n} > 0")
    gshape = em.dim4var(to4(real), "gshp")
    goff = em.dim4var(offset4([em.expr(o) for o in offsets]), "goff")
    lshape = em.dim4var(to4([r for r, d in zip(real, dom, strict=True) if d != 1] or ["1"]), "lshp")
    zero = em.dim4var(["0", "0", "0", "0"], "lzero")
    guard = f"if ({' && '.join(guards)}) " if guards else ""
    if accumulate:
        if g.dtype not in FLOAT_DTYPES:
            raise em.fail(
                f"T.atomic_add into {g.dtype} tensor {store.buffer.name} inside T.Parallel", loop, hint="accumulate fp32, fp16 or bf16"
            )
        current = em.fresh(f"{store.buffer.name}_acc")
        em.emit(f"auto {current} = make_tensor<{DTYPES[g.dtype]}>({block}, {block});")
        em.emit(
            f"{guard}dma::load({current}.sub_view({lshape}, {zero}), {em.global_view(store.buffer.data, 'lanes')}.sub_view({gshape}, {goff}));"
        )
        em.emit(f"tiu::fadd({name}, {name}, {current});")  # the overhang is never stored
    em.emit(
        f"{guard}dma::store({em.global_view(store.buffer.data, 'lanes')}.sub_view({gshape}, {goff}), {name}.sub_view({lshape}, {zero}));"
    )


def _bound(value: Any, var: Any) -> Any:
    """The value a temporary holds: a narrow integer (``i4: T.uint8 = ...``) is truncated to its
    type where C binds it, so substituting it keeps that truncation as a cast."""
    from tvm import tirx

    if str(var.dtype) in ("int8", "uint8", "int16", "uint16"):
        return tirx.Cast(str(var.dtype), value)
    return value


def _reads(e: Any, data: Any) -> bool:
    from tvm import tirx

    found: list[Any] = []
    tirx.stmt_functor.post_order_visit(
        tirx.Evaluate(e), lambda n: found.append(n) if isinstance(n, tirx.BufferLoad) and n.buffer.data.same_as(data) else None
    )
    return bool(found)


def _mentions_var(stmt: Any, var: Any) -> bool:
    from tvm import tirx

    found: list[Any] = []
    tirx.stmt_functor.post_order_visit(stmt, lambda n: found.append(n) if isinstance(n, tirx.Var) and n.same_as(var) else None)
    return bool(found)


def _mentions(e: Any, var: Any) -> bool:
    from tvm import tirx

    found: list[Any] = []
    tirx.stmt_functor.post_order_visit(tirx.Evaluate(e), lambda n: found.append(n) if isinstance(n, tirx.Var) and n.same_as(var) else None)
    return bool(found)


def _mentions_any(e: Any, variables: list[Any]) -> bool:
    return any(_mentions(e, v) for v in variables)


def _split_index(em: EmitContext, indices: list[Any], loop_vars: list[Any]) -> tuple[list[Any] | None, list[Any]]:
    """A store's index per dimension as (loop variable or scalar index, origin): ``j + 64`` is
    ``(j, 64)``, a value that does not vary over the loop ``k`` is ``(k, k)``.  ``(None, [])``
    unless the loop variables appear alone, once each, in order, with offsets that do not vary."""
    from tvm import tirx

    index: list[Any] = []
    origin: list[Any] = []
    for i in indices:
        used = [v for v in loop_vars if _mentions(i, v)]
        if not used:
            index.append(i)
            origin.append(i)
            continue
        offset = em.analyzer.simplify(i - used[0])
        if len(used) > 1 or _mentions_any(offset, loop_vars):
            return None, []
        index.append(used[0])
        origin.append(offset if "int" in str(offset.dtype) else tirx.const(0, "int32"))
    order = [i for i in index if any(same_var(i, v) for v in loop_vars)]
    if len(order) != len(loop_vars) or not all(same_var(i, v) for i, v in zip(order, loop_vars, strict=True)):
        return None, []
    return index, origin
