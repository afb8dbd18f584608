"""Reads of global tensors whose addresses are not one rectangular block: data-dependent
row gathers (embedding lookups) and strided, layout-changing loads.

* ``out[i, j] = table[ids[i], j]`` in a ``T.Parallel`` (``ids`` a local index tile, or a
  global index tensor read as ``ids[offset + i]``), and ``T.copy(table[ids[k], :], row)``
  with a data-dependent first index: ``dma::gather_h``.  The table is seen as one
  ``[V, D]`` plane per lane (a ``gtensor`` view with lane stride 0), each lane's index
  picks its row.  The index must be ``uint32`` for the DMA engine: int32 indices are
  reinterpreted, so a negative id becomes a huge one.  Ids outside ``[0, V)`` give a row
  of zeros (the DMA's out-of-range fill value); torch raises for them and CUDA reads
  whatever memory is there.
* ``tile[i, j] = A[o0 + s0 * j, o1 + s1 * i]`` (each global index an offset plus a
  multiple of one loop variable; a transposed block, every other column, ...): one
  ``dma::load`` from a ``gtensor`` view with those strides.  Rows or columns past the
  tensor's edge read zeros, as a ``T.copy`` of an overhanging tile does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tilelang_tpu.codegen.emit.cast import emit_cast, temp_tiles
from tilelang_tpu.codegen.ir import is_const, same_var
from tilelang_tpu.codegen.layout import DTYPES, ELEMENT_BYTES, FLOAT_DTYPES, WORD_PAIR_DTYPES, offset4, storage_dims, storage_type, to4
from tilelang_tpu.codegen.values import Tile

if TYPE_CHECKING:
    from tilelang_tpu.codegen.context import EmitContext

__all__ = ["copy_gathered_row", "emit_global_read", "reads_global", "uses_loaded_index"]

#: Integer dtypes an index tensor may have (reinterpreted as the DMA's uint32 index).
INDEX_DTYPES = ("int32", "uint32", "int64")

#: The largest distance, in bytes, between consecutive elements along ``W`` that a DMA takes
#: from global memory (``MAX_WSTRIDE_BYTE_LEN`` of PPL's DMA checker; the BM1684X emulator
#: asserts on more).
MAX_W_STRIDE_BYTES = 128


def reads_global(em: EmitContext, value: Any) -> bool:
    """Whether the expression ``value`` reads a global tensor."""
    return any(load.buffer.data in em.globals_ for load in _loads(value))


def _loads(value: Any) -> list[Any]:
    from tvm import tirx

    found: list[Any] = []
    tirx.stmt_functor.post_order_visit(tirx.Evaluate(value), lambda n: found.append(n) if isinstance(n, tirx.BufferLoad) else None)
    return found


def uses_loaded_index(indices: list[Any]) -> bool:
    """Whether a region's start reads a buffer (a data-dependent address)."""
    from tvm import tirx

    found: list[Any] = []
    for index in indices:
        tirx.stmt_functor.post_order_visit(tirx.Evaluate(index), lambda n: found.append(n) if isinstance(n, tirx.BufferLoad) else None)
    return bool(found)


def emit_global_read(em: EmitContext, store: Any, tile: Tile, loop_vars: list[Any], extents: list[int], loop: Any) -> None:
    """``tile[i, j] = G[...]`` in a ``T.Parallel``: a row gather or a strided load (module doc)."""
    from tvm import tirx

    value = store.value
    cast_to = None
    if isinstance(value, tirx.Cast):
        cast_to, value = str(value.dtype), value.value
    if not isinstance(value, tirx.BufferLoad) or value.buffer.data not in em.globals_:
        name = next(n.buffer.name for n in _loads(store.value) if n.buffer.data in em.globals_)
        raise em.fail(
            f"read of global tensor {name} inside T.Parallel, combined with other operations",
            loop,
            hint="a T.Parallel may copy global data into a tile (tile[i, j] = A[...] alone, a row gather or a strided read); "
            "T.copy the data to a tile first and compute on the tile",
        )
    index = list(store.indices)
    if len(index) != len(loop_vars) or not all(same_var(i, v) for i, v in zip(index, loop_vars, strict=True)):
        raise em.fail(
            f"T.Parallel read of global {value.buffer.name} into {store.buffer.name}[{', '.join(map(str, index))}]",
            loop,
            hint="index the destination tile by the T.Parallel variables in order",
        )
    if tuple(extents) != tile.shape:
        raise em.fail(
            f"T.Parallel read of global {value.buffer.name} into part of tile {store.buffer.name}", loop, hint="fill the whole tile"
        )
    if tile.layout != "lanes":
        raise em.fail(f"T.Parallel read of global {value.buffer.name} into {store.buffer.name} ({tile.layout} layout)", loop)
    g = em.globals_[value.buffer.data]
    if cast_to is not None and (cast_to != tile.dtype or g.dtype not in FLOAT_DTYPES or tile.dtype not in FLOAT_DTYPES):
        raise em.fail(f"T.Parallel read of {g.dtype} global {value.buffer.name} cast to {cast_to}", loop)
    if cast_to is None and g.dtype != tile.dtype:
        raise em.fail(f"T.Parallel read of {g.dtype} global {value.buffer.name} into {tile.dtype} tile {store.buffer.name}", loop)
    target = tile.name
    if g.dtype != tile.dtype:
        # The staging tile has the tile's real shape, not its block: a cast over the block's
        # shape read rows past a lane group's end (65 rows: row 64 came out wrong).
        block = em.dim4var(tile.block, "gblk")
        shape = em.dim4var(tile.shape4, "gshp")
        target = em.fresh("gathered")
        em.emit(f"auto {target} = make_tensor<{DTYPES[g.dtype]}>({block}, {shape});")
    if uses_loaded_index(list(value.indices)):
        _row_gather(em, value, loop_vars, extents, target, loop)
    else:
        _strided_load(em, value, loop_vars, extents, target, loop)
    if target != tile.name:
        emit_cast(em, tile.name, target, tile.dtype, g.dtype, temp_tiles(em, block, shape))


def _row_gather(em: EmitContext, load: Any, loop_vars: list[Any], extents: list[int], target: str, loop: Any) -> None:
    """``target[i, j] = table[ids(i), c + j]``: ``dma::gather_h`` with one index per lane."""
    from tvm import tirx

    g = em.globals_[load.buffer.data]
    if len(g.shape) != 2 or len(loop_vars) != 2:
        raise em.fail(
            f"data-dependent read of rank-{len(g.shape)} global {load.buffer.name} in a rank-{len(loop_vars)} T.Parallel",
            loop,
            hint="gather rows of a 2-D table into a 2-D tile: out[i, j] = table[ids[i], j]",
        )
    row_index, col_index = load.indices
    i, j = loop_vars
    column = em.analyzer.simplify(col_index - j)
    if _mentions_any(column, loop_vars) or uses_loaded_index([column]):
        raise em.fail(
            f"row gather from {load.buffer.name} with column index {col_index}",
            loop,
            hint="read whole rows: table[ids[i], j] (or table[ids[i], offset + j])",
        )
    rows, cols = extents
    vocab, width = g.shape
    if not em.analyzer.can_prove(tirx.LE(column + cols, tirx.const(width, column.dtype))) or not em.analyzer.can_prove(
        tirx.GE(column, tirx.const(0, column.dtype))
    ):
        raise em.fail(f"row gather of columns [{column}, {column} + {cols}) of {load.buffer.name}, which has {width} columns", loop)
    index_view, real_rows = _index_view(em, row_index, i, rows, vocab, loop)
    # Every lane sees the whole table (lane stride 0) as `vocab` rows along H.
    part = em.dim4var(["1", str(vocab), "1", str(cols)], "tpart")
    origin = em.dim4var(["0", "0", "0", em.expr(column)], "tcol")
    plane = em.dim4var(["1", real_rows, str(vocab), str(cols)], "tplane")
    stride = em.dim4var(["0", "0", str(width), "1"], "tstride")
    table = f"{em.global_view(load.buffer.data, 'lanes')}.sub_view({part}, {origin}).view({plane}, {stride})"
    if real_rows != str(rows):
        # The ids end inside this block: the rows past them read zeros (as T.copy's overhang does).
        em.emit(f"if ({real_rows} < {rows}) dma::zero({target});")
        shape = em.dim4var(["1", real_rows, "1", str(cols)], "gshape")
        zero = em.dim4var(["0", "0", "0", "0"], "gzero")
        target = f"{target}.sub_view({shape}, {zero})"
    em.emit(f"dma::gather_h({target}, {table}, {index_view}, 0);")


def _index_view(em: EmitContext, row_index: Any, row_var: Any, rows: int, vocab: int, loop: Any) -> tuple[str, str]:
    """(C expression of a ``[1, n, 1, 1]`` uint32 view of the ids ``row_index`` reads per row,
    ``n``): ``n`` is ``rows``, or fewer where the ids tensor ends inside the block."""
    from tvm import tirx

    ids = row_index
    if isinstance(ids, tirx.Cast) and "int" in str(ids.dtype):
        ids = ids.value
    if not isinstance(ids, tirx.BufferLoad) or str(ids.buffer.dtype) not in INDEX_DTYPES:
        raise em.fail(
            f"row index {row_index}",
            loop,
            hint="gather with the ids themselves: table[ids[i], j] with an int32 index tile or tensor",
        )
    name = ids.buffer.name
    shape = em.dim4var(["1", str(rows), "1", "1"], "ishape")
    if ids.buffer.data in em.tiles:
        tile = em.tiles[ids.buffer.data]
        positions = list(ids.indices)
        per_row = tile.layout == "lanes" and (
            (len(positions) == 1 and same_var(positions[0], row_var))
            or (len(positions) == 2 and same_var(positions[0], row_var) and is_const(positions[1]) and int(positions[1]) == 0)
        )
        if not per_row or tile.shape[0] < rows:
            raise em.fail(f"row index {row_index}", loop, hint="index the ids tile by the row variable: ids[i] (or ids[i, 0])")
        origin = em.dim4var(["0", "0", "0", "0"], "iorigin")
        ids32 = _narrowed(em, tile.name, tile.block[1], vocab) if tile.dtype in WORD_PAIR_DTYPES else f"{tile.name}.view<uint32>()"
        return f"{ids32}.sub_view({shape}, {origin})", str(rows)
    g = em.globals_.get(ids.buffer.data)
    if g is None:
        raise em.fail(f"row index {row_index} read from {name}", loop, hint="read the ids from a tensor or a local tile")
    # ids[b, ..., offset + i]: consecutive ids along the last axis, the other indices fixed.
    *outer, last = list(ids.indices)
    offset = em.analyzer.simplify(last - row_var)
    if _mentions_any(offset, [row_var]) or uses_loaded_index([offset, *outer]) or any(_mentions_any(x, [row_var]) for x in outer):
        raise em.fail(f"row index {row_index}", loop, hint="read the ids as ids[offset + i] (or ids[b, offset + i])")
    for dim, index in enumerate(outer):
        if not em.analyzer.can_prove(tirx.LT(index, tirx.const(g.shape[dim], index.dtype))):
            raise em.fail(f"row gather reading ids {name} at index {index} of dimension {dim}, which may be outside it", loop)
    length = g.shape[-1]
    count = str(rows)
    if not em.analyzer.can_prove(tirx.LE(offset + rows, tirx.const(length, offset.dtype))):
        if not em.analyzer.can_prove(tirx.LT(offset, tirx.const(length, offset.dtype))):
            raise em.fail(f"row gather whose ids {name}[..., {offset} + i] may start past the end of {name}", loop)
        count = em.fresh("n")
        em.emit(f"int {count} = min({rows}, {length} - ({em.expr(offset)}));")
        shape = em.dim4var(["1", count, "1", "1"], "ishape")
    # The ids tensor seen flat, one id per lane: [1, size, 1, 1] (word pairs: [1, size, 1, 2]).
    size, flat_offset = 1, offset
    for dim in range(len(g.shape) - 1, -1, -1):
        if dim < len(outer):
            flat_offset = flat_offset + outer[dim] * size
        size *= g.shape[dim]
    flat = em.dim4var(storage_dims(["1", str(size), "1", "1"], g.dtype), "iflat")
    origin = em.dim4var(["0", em.expr(em.analyzer.simplify(flat_offset)), "0", "0"], "ioffset")
    ids_flat = f"{em.global_view(ids.buffer.data, 'lanes')}.view({flat})"
    if g.dtype in WORD_PAIR_DTYPES:
        pairs = _load_narrowed(em, ids_flat, str(rows), count, origin, vocab)
        return f"{pairs}.sub_view({shape}, {em.dim4var(['0'] * 4, 'iorigin')})", count
    return f"{ids_flat}.view<uint32>().sub_view({shape}, {origin})", count


def _narrowed(em: EmitContext, pairs: str, lanes: str, vocab: int) -> str:
    """A ``[1, lanes, 1, 1]`` uint32 tile of the 64-bit ids in ``pairs`` (a ``[1, lanes, 1, 2]``
    uint32 tile of (low, high) words): the low word where the high word is 0, else ``vocab``
    (the table's row count).  So a negative id or one of 2^32 and more is out of range (a row
    of zeros), like any id past the table, instead of aliasing a valid row."""
    block = em.dim4var(["1", lanes, "1", "1"], "nblock")
    low, high = em.dim4var(["0", "0", "0", "0"], "nlow"), em.dim4var(["0", "0", "0", "1"], "nhigh")
    out, zero, past = em.fresh("ids32"), em.fresh("zero"), em.fresh("past")
    # The TIU reads aligned tiles only: the DMA engine splits the words first.
    words = []
    for part, at in (("lo", low), ("hi", high)):
        name = em.fresh(f"ids_{part}")
        em.emit(f"auto {name} = make_tensor<uint32>({block}, {block});")
        em.emit(f"dma::move({name}, {pairs}.sub_view({block}, {at}));")
        words.append(name)
    em.emit(f"auto {out} = make_tensor<uint32>({block}, {block});")
    # An int scalar to compare with: ppl-compile 1.7 rejects unsigned ones in eq_select (an
    # i32/ui32 mismatch), and a negative int scalar as the replacement came out as 0 (row 0!).
    # So the replacement is a tile filled with the table's row count, the first id past it.
    em.emit(f"int {zero} = 0;")
    em.emit(f"auto {past} = make_tensor<uint32>({block}, {block});")
    em.emit(f"tiu::fill({past}, {vocab});")
    em.emit(f"tiu::eq_select({out}, {words[1]}, {zero}, {words[0]}, {past});")
    return out


def _load_narrowed(em: EmitContext, ids: str, lanes: str, count: str, origin: str, vocab: int) -> str:
    """:func:`_narrowed` of ``count`` 64-bit ids of the global tensor ``ids`` (its word-pair
    view) from ``origin`` on, loaded into a ``[1, lanes, 1, 2]`` tile first."""
    block = em.dim4var(["1", lanes, "1", "2"], "pblock")
    real = em.dim4var(["1", count, "1", "2"], "preal")
    zero = em.dim4var(["0", "0", "0", "0"], "pzero")
    pairs = em.fresh("id_pairs")
    em.emit(f"auto {pairs} = make_tensor<uint32>({block}, {block});")
    em.emit(f"dma::load({pairs}.sub_view({real}, {zero}), {ids}.sub_view({real}, {origin}));")
    return _narrowed(em, pairs, lanes, vocab)


def _strided_load(em: EmitContext, load: Any, loop_vars: list[Any], extents: list[int], target: str, loop: Any) -> None:
    """``target[v0, v1, ...] = G[o0 + s0 * v_a, ...]``: one DMA from a strided ``gtensor`` view."""
    from tvm import tirx

    g = em.globals_[load.buffer.data]
    gstrides = [1] * len(g.shape)
    for d in range(len(g.shape) - 2, -1, -1):
        gstrides[d] = gstrides[d + 1] * g.shape[d + 1]
    origin: list[Any] = []
    strides = [0] * len(loop_vars)  # element stride in G per destination dim
    clipped: dict[int, str] = {}  # destination dim -> C variable of its clipped extent
    guards: list[str] = []
    used = [False] * len(loop_vars)
    hint = "index each global dimension by offset + step * one T.Parallel variable (or by a value the loop does not change)"
    for dim, idx in enumerate(load.indices):
        var_pos = [k for k, v in enumerate(loop_vars) if _mentions_any(idx, [v])]
        if not var_pos:
            if not em.analyzer.can_prove(tirx.LT(idx, tirx.const(g.shape[dim], idx.dtype))):
                raise em.fail(f"T.Parallel read of {load.buffer.name} at index {idx} of dimension {dim}, which may be outside it", loop)
            origin.append(idx)
            continue
        if len(var_pos) > 1 or used[var_pos[0]]:
            raise em.fail(f"T.Parallel read {load.buffer.name}[{', '.join(map(str, load.indices))}]", loop, hint=hint)
        k = var_pos[0]
        var = loop_vars[k]
        used[k] = True
        start = em.analyzer.simplify(tirx.stmt_functor.substitute(idx, {var: tirx.const(0, var.dtype)}))
        step = em.analyzer.simplify(idx - start)
        step_value = em.analyzer.simplify(tirx.stmt_functor.substitute(step, {var: tirx.const(1, var.dtype)}))
        if not is_const(step_value) or int(step_value) < 1 or not em.analyzer.can_prove(tirx.EQ(step, step_value * var)):
            raise em.fail(f"T.Parallel read {load.buffer.name}[{', '.join(map(str, load.indices))}]", loop, hint=hint)
        origin.append(start)
        strides[k] += int(step_value) * gstrides[dim]
        step_int, extent, size = int(step_value), extents[k], g.shape[dim]
        last = start + step_int * (extent - 1)
        if em.analyzer.can_prove(tirx.LT(last, tirx.const(size, last.dtype))):
            continue
        if not em.analyzer.can_prove(tirx.LT(start, tirx.const(size, start.dtype))):
            raise em.fail(f"T.Parallel read of {load.buffer.name} whose region may start outside it (dimension {dim} at {start})", loop)
        # Clipped at the tensor's edge: the elements that exist along this axis.
        n = em.fresh("n")
        em.emit(f"int {n} = min({extent}, ({size} - ({em.expr(start)}) + {step_int - 1}) / {step_int});")
        clipped[k] = n
        guards.append(f"{n} < {extent}")
    if not all(used):
        raise em.fail(f"T.Parallel read {load.buffer.name}[{', '.join(map(str, load.indices))}] not using every loop variable", loop)
    for dim, start in enumerate(origin):
        if not em.analyzer.can_prove(tirx.GE(start, tirx.const(0, start.dtype))):
            raise em.fail(f"T.Parallel read of {load.buffer.name} at a possibly negative index {start} (dimension {dim})", loop)
    real = [clipped.get(k, str(e)) for k, e in enumerate(extents)]
    shape = em.dim4var(to4(real), "sshape")
    stride = em.dim4var(to4([str(s) for s in strides]), "sstride")
    # The origin as a 1-element sub-view of the tensor in its own layout, re-viewed with the strides.
    one = em.dim4var(to4(["1"] * len(g.shape)), "sone")
    start = em.dim4var(offset4([em.expr(o) for o in origin]), "sstart")
    base = f"{em.global_view(load.buffer.data, 'lanes')}.sub_view({one}, {start})"
    if guards:
        em.emit(f"if ({' || '.join(guards)}) dma::zero({target});")
    zero = em.dim4var(["0", "0", "0", "0"], "szero")
    destination = f"{target}.sub_view({shape}, {zero})" if guards else target
    elem = ELEMENT_BYTES[g.dtype]
    if strides[-1] * elem <= MAX_W_STRIDE_BYTES:
        em.emit(f"dma::load({destination}, {base}.view({shape}, {stride}));")
        return
    # A W stride the DMA engine cannot take (a block read transposed, say): read the block
    # with the lanes and W swapped, whose W stride is then the small one, and swap them back
    # with a local transpose.
    if len(extents) != 2 or strides[0] * elem > MAX_W_STRIDE_BYTES:
        raise em.fail(
            f"T.Parallel read of {load.buffer.name} whose innermost step is {strides[-1] * elem} bytes in global memory",
            loop,
            hint=f"the DMA engine takes at most {MAX_W_STRIDE_BYTES} bytes between consecutive elements of a row: "
            "read a 2-D block whose row or column is contiguous, or T.copy the block and rearrange it in local memory",
        )
    swapped_real = [real[1], real[0]]
    swapped_shape = em.dim4var(to4(swapped_real), "swshape")
    swapped_stride = em.dim4var(to4([str(strides[1]), str(strides[0])]), "swstride")
    block = em.dim4var(to4([str(extents[1]), str(extents[0])]), "swblock")
    scratch = em.fresh("swapped")
    em.emit(f"auto {scratch} = make_tensor<{storage_type(g.dtype)}>({block}, {block});")
    em.emit(f"dma::load({scratch}.sub_view({swapped_shape}, {zero}), {base}.view({swapped_shape}, {swapped_stride}));")
    em.emit(f"dma::transpose_cw({destination}, {scratch}.sub_view({swapped_shape}, {zero}));")


def copy_gathered_row(
    em: EmitContext, src: Any, src_min: list[Any], src_ext: list[Any], dst: Any, dst_min: list[Any], dst_ext: list[Any]
) -> None:
    """``T.copy(table[ids[k], c:c + n], row)``: one row chosen by a value read from a tile or
    tensor, as a one-lane ``dma::gather_h`` into a ``[1, n]`` tile or one row of a 2-D tile."""
    from tvm import tirx

    g = em.globals_[src.data]
    tile = em.tiles.get(dst.data)
    if tile is None or len(g.shape) != 2 or not uses_loaded_index([src_min[0]]) or uses_loaded_index(src_min[1:]):
        raise em.fail(
            f"T.copy from {src.name} at a data-dependent position",
            hint="copy one row of a 2-D table chosen by an id: T.copy(table[ids[k], :], row_tile)",
        )
    if not (is_const(src_ext[0]) and int(src_ext[0]) == 1) or not is_const(src_ext[1]):
        raise em.fail(f"T.copy of {list(src_ext)} elements from {src.name} at a data-dependent row", hint="copy one row per id")
    cols = int(src_ext[1])
    if tile.layout != "lanes" or len(tile.shape) != 2 or [str(e) for e in dst_ext if not (is_const(e) and int(e) == 1)] != [str(cols)]:
        raise em.fail(
            f"T.copy of a gathered row into {dst.name}{list(tile.shape)}",
            hint="copy the row into a [1, n] tile or one row of a 2-D tile (tile[k, :])",
        )
    _, row_view, _ = em.region_view(dst, dst_min, [tirx.const(1, "int32"), tirx.const(cols, "int32")])
    if tile.dtype != g.dtype:
        raise em.fail(
            f"T.copy of a gathered {g.dtype} row into {tile.dtype} tile {dst.name}", hint="gather into a tile of the table's dtype"
        )
    column = src_min[1]
    if not em.analyzer.can_prove(tirx.LE(column + cols, tirx.const(g.shape[1], column.dtype))) or not em.analyzer.can_prove(
        tirx.GE(column, tirx.const(0, column.dtype))
    ):
        raise em.fail(f"T.copy of columns [{column}, {column} + {cols}) of {src.name}, which has {g.shape[1]} columns")
    ids = src_min[0]
    if isinstance(ids, tirx.Cast):
        ids = ids.value
    if not isinstance(ids, tirx.BufferLoad) or str(ids.buffer.dtype) not in INDEX_DTYPES or uses_loaded_index(list(ids.indices)):
        raise em.fail(f"T.copy from {src.name} at row {src_min[0]}", hint="index the table by one id: table[ids[k], :] with int32 ids")
    one = em.dim4var(["1", "1", "1", "1"], "ione")
    where = em.dim4var(offset4([em.expr(x) for x in ids.indices]), "iat")
    if ids.buffer.data in em.tiles:
        itile = em.tiles[ids.buffer.data]
        if itile.layout != "lanes":
            raise em.fail(f"T.copy indexed by {ids.buffer.name} ({itile.layout} layout)")
        where = em.dim4var(offset4([em.expr(x) for x in ids.indices], itile.layout), "iat")
        ids32 = _narrowed(em, itile.name, itile.block[1], g.shape[0]) if itile.dtype in WORD_PAIR_DTYPES else f"{itile.name}.view<uint32>()"
        index = f"{ids32}.sub_view({one}, {where})"
    elif ids.buffer.data in em.globals_ and em.globals_[ids.buffer.data].dtype in WORD_PAIR_DTYPES:
        index = _load_narrowed(em, em.global_view(ids.buffer.data, "lanes"), "1", "1", where, g.shape[0])
    elif ids.buffer.data in em.globals_:
        index = f"{em.global_view(ids.buffer.data, 'lanes')}.view<uint32>().sub_view({one}, {where})"
    else:
        raise em.fail(f"T.copy indexed by {ids.buffer.name}", hint="read the id from a tile or a tensor")
    part = em.dim4var(["1", str(g.shape[0]), "1", str(cols)], "tpart")
    origin = em.dim4var(["0", "0", "0", em.expr(column)], "tcol")
    plane = em.dim4var(["1", "1", str(g.shape[0]), str(cols)], "tplane")
    stride = em.dim4var(["0", "0", str(g.shape[1]), "1"], "tstride")
    table = f"{em.global_view(src.data, 'lanes')}.sub_view({part}, {origin}).view({plane}, {stride})"
    em.emit(f"dma::gather_h({row_view}, {table}, {index}, 0);")


def _mentions_any(e: Any, variables: list[Any]) -> bool:
    from tvm import tirx

    found: list[Any] = []
    tirx.stmt_functor.post_order_visit(
        tirx.Evaluate(e), lambda n: found.append(n) if isinstance(n, tirx.Var) and any(n.same_as(v) for v in variables) else None
    )
    return bool(found)
