"""Tile reads in a ``T.Parallel`` body, each an operand over the loop domain: the tile itself,
a ``sub_view`` at an offset (moved onto lanes from 0 when it starts on another lane), a per-row
vector ``x[i]`` broadcast along the row, a ``row``-layout vector ``w[j]`` copied to the lanes,
a column ``w[i, k]`` broadcast along the row, a repeating read ``x[i, j // c]``
(:mod:`.repeat`), and every other read whose indices are the loop variables (in any order,
reversed, or left out) plus offsets (:mod:`.affine_reads`)."""

from __future__ import annotations

from typing import Any

from tilelang_tpu.codegen.emit.affine_reads import affine_read
from tilelang_tpu.codegen.emit.domain import ParallelDomain
from tilelang_tpu.codegen.emit.repeat import repeated
from tilelang_tpu.codegen.ir import same_index
from tilelang_tpu.codegen.layout import DTYPES, broadcast_strides, offset4
from tilelang_tpu.codegen.values import Operand, Tile

__all__ = ["moved", "read_tile"]


def read_tile(ctx: ParallelDomain, e: Any) -> Operand:
    from tvm import tirx

    em = ctx.em
    tile = em.tiles.get(e.buffer.data)
    if tile is None:
        if e.buffer.data in em.globals_:
            raise ctx.fail(
                f"read of global tensor {e.buffer.name} inside T.Parallel",
                "copy the tile to local memory with T.copy first",
            )
        raise ctx.fail(f"read of {e.buffer.name} inside T.Parallel")
    idx = list(e.indices)
    column = (
        tile.layout == "row"
        and ctx.dst_tile.layout == "lanes"
        and len(ctx.index) == 2
        and len(idx) == 1
        and ctx.is_loop_var(ctx.index[1])
        and same_index(idx[0], ctx.index[1])
        and ctx.extents[1] <= tile.shape[0]
    )
    if column:
        return _column_broadcast(ctx, tile)
    if tile.layout != ctx.dst_tile.layout:
        raise ctx.fail(
            f"element-wise operation mixing tile {e.buffer.name} ({tile.layout} layout) with {ctx.dst_tile.name} ({ctx.dst_tile.layout} layout)",
            "fp32 T.gemm operands keep whole rows in one lane; operate on them only together with other fp32 T.gemm operands",
        )
    # Same-domain operand: indexed exactly like the destination.
    if len(idx) == len(ctx.index) and all(same_index(i, d) for i, d in zip(idx, ctx.index, strict=True)):
        if tuple(ctx.extents) == tile.shape and all(ctx.is_loop_var(d) for d in ctx.index):
            return Operand(tile.name, tile.dtype, True)
        dom = em.dim4var(ctx.dom4, "dom")
        at = ["0" if ctx.is_loop_var(d) else str(o) for d, o in zip(ctx.index, ctx.offsets, strict=True)]
        origin = em.dim4var(offset4(at, tile.layout), "origin")
        view = f"{tile.name}.sub_view({dom}, {origin})"
        if ctx.rows_at_zero:
            return Operand(view, tile.dtype, True)
        return moved(ctx, view, tile.dtype)
    # Row vector broadcast along the last axis: x[i] or x[i, 0] in an (i, j) domain.
    rowvec = (
        len(ctx.index) == 2
        and ctx.is_loop_var(ctx.index[1])
        and tile.layout == "lanes"
        and ctx.offsets[0] == 0
        and (
            (len(idx) == 1 and same_index(idx[0], ctx.index[0]))
            or (
                len(idx) == 2
                and same_index(idx[0], ctx.index[0])
                and isinstance(idx[1], tirx.IntImm)
                and int(idx[1]) == 0
                and tile.shape[1] == 1
            )
        )
    )
    if rowvec and ctx.extents[0] <= tile.shape[0]:
        # A [rows, 1] tile seen as [rows, cols] with W stride 0: PPL reads each
        # lane's single element across the whole row.  The C stride stays the
        # tile's own: row r + 64 is in row r's lane, one aligned row group further.
        shape = em.dim4var(ctx.dom4, "bshape")
        stride = em.dim4var(broadcast_strides(tile.block, DTYPES[tile.dtype], (3,)), "bstride")
        view = em.fresh("bcast")
        em.emit(f"auto &{view} = {tile.name}.view({shape}, {stride});")
        return Operand(view, tile.dtype, True)
    tap = _column_of(ctx, e.buffer.name, tile, idx)
    if tap is not None:
        return tap
    shifted = _shifted(ctx, e.buffer.name, tile, idx)
    if shifted is not None:
        return shifted
    spread = repeated(ctx, e.buffer.name, tile, idx)
    if spread is not None:
        return spread
    general = affine_read(ctx, e.buffer.name, tile, idx)
    if general is not None:
        return general
    raise ctx.fail(
        f"tile read {e.buffer.name}[{', '.join(map(str, idx))}] "
        + (f"in a T.Parallel over ({', '.join(v.name for v in ctx.loop_vars)})" if ctx.loop_vars else "in a scalar store"),
        "index a tile by the loop variables (in any order, forwards or backwards) plus offsets that do not vary over the loop, "
        "or by j // c + offset along the last axis",
    )


def _column_broadcast(ctx: ParallelDomain, tile: Tile) -> Operand:
    """``w[j]`` in an ``(i, j)`` domain, ``w`` a 1-D tile in the ``row`` layout (one lane):
    ``tiu::broadcast`` copies it to one pass of the lanes, and a view with ``C`` stride 0
    repeats that pass over the row groups."""
    em = ctx.em
    _, c, _, w = ctx.dom4
    lanes = f"min({c}, LANE_NUM)"
    block = em.dim4var(["1", lanes, "1", w], "wb_block")
    copies = em.fresh("wb")
    em.emit(f"auto {copies} = make_tensor<{DTYPES[tile.dtype]}>({block}, {block});")
    source = tile.name
    if ctx.extents[1] != tile.shape[0]:
        part = em.dim4var(["1", "1", "1", w], "wpart")
        origin = em.dim4var(["0", "0", "0", "0"], "worigin")
        source = f"{tile.name}.sub_view({part}, {origin})"
    em.emit(f"tiu::broadcast({copies}, {source}, {lanes});")
    shape = em.dim4var(ctx.dom4, "wshape")
    stride = em.dim4var(broadcast_strides(["1", lanes, "1", w], DTYPES[tile.dtype], (1,)), "wstride")
    view = em.fresh("wcols")
    em.emit(f"auto &{view} = {copies}.view({shape}, {stride});")
    return Operand(view, tile.dtype, True)


def _column_of(ctx: ParallelDomain, name: str, tile: Tile, idx: list[Any]) -> Operand | None:
    """``w[i, k]`` in an ``(i, j)`` domain, ``k`` not varying over the loop (a conv tap, a
    per-row scale picked by a serial loop): column ``k`` moved into a ``[rows, 1]`` tile,
    then read across the row through a view with ``W`` stride 0.  None for other reads."""
    em = ctx.em
    if not (
        len(ctx.index) == 2
        and len(idx) == 2
        and ctx.is_loop_var(ctx.index[0])
        and ctx.is_loop_var(ctx.index[1])
        and tile.layout == "lanes"
        and ctx.offsets[0] == 0
        and same_index(idx[0], ctx.index[0])
        and not ctx.uses_loop_vars(idx[1])
        and ctx.extents[0] <= tile.shape[0]
    ):
        return None
    if not (em.analyzer.can_prove(idx[1] >= 0) and em.analyzer.can_prove(idx[1] < tile.shape[1])):
        raise ctx.fail(
            f"tile read {name}[{', '.join(map(str, idx))}] whose column may fall outside the tile {list(tile.shape)}",
            "keep every read inside its tile",
        )
    rows = ctx.dom4[1]
    block = em.dim4var(["1", rows, "1", "1"], "col_block")
    column = em.fresh("col")
    em.emit(f"auto {column} = make_tensor<{DTYPES[tile.dtype]}>({block}, {block});")
    at = em.dim4var(["0", "0", "0", em.expr(idx[1])], "col_at")
    em.emit(f"tiu::move({column}, {tile.name}.sub_view({block}, {at}));")
    shape = em.dim4var(ctx.dom4, "cshape")
    stride = em.dim4var(broadcast_strides(["1", rows, "1", "1"], DTYPES[tile.dtype], (3,)), "cstride")
    view = em.fresh("cbcast")
    em.emit(f"auto &{view} = {column}.view({shape}, {stride});")
    return Operand(view, tile.dtype, True)


def _shifted(ctx: ParallelDomain, name: str, tile: Tile, idx: list[Any]) -> Operand | None:
    """``x[i, j + 64]``, ``x[i + 1, j]``, ``x[k, j]``: a read of a tile of the destination's rank
    whose index along each dimension is the destination's loop variable plus an offset that
    does not vary over the domain, or a scalar where the destination has one: a ``sub_view``
    at the offsets, moved onto lanes from 0 by a local DMA when it starts on another lane
    (:func:`moved`).  Returns None for any other read."""

    em = ctx.em
    if tile.layout != "lanes" or ctx.dst_tile.layout != "lanes" or len(idx) != len(ctx.index):
        return None
    origin: list[Any] = []
    for i, d in zip(idx, ctx.index, strict=True):
        if ctx.is_loop_var(d):
            offset = em.analyzer.simplify(i - d)
            if ctx.uses_loop_vars(offset):
                return None
            origin.append(offset)
        else:
            if ctx.uses_loop_vars(i):
                return None
            origin.append(i)
    for axis, (o, extent) in enumerate(zip(origin, ctx.extents, strict=True)):
        if not (em.analyzer.can_prove(o >= 0) and em.analyzer.can_prove(o + extent <= tile.shape[axis])):
            raise ctx.fail(
                f"tile read {name}[{', '.join(map(str, idx))}] that may fall outside the tile {list(tile.shape)}",
                "keep every read inside its tile (TileLang leaves reads outside a tile undefined; the tpu target refuses them)",
            )
    dom = em.dim4var(ctx.dom4, "dom")
    at = em.dim4var(offset4([em.expr(o) for o in origin], "lanes"), "at")
    view = f"{tile.name}.sub_view({dom}, {at})"
    if ctx.starts_on_lane_zero(origin):
        return Operand(view, tile.dtype, True)
    return moved(ctx, view, tile.dtype)


def moved(ctx: ParallelDomain, view: str, dtype: str) -> Operand:
    """``view`` (a region starting on another lane than 0) moved onto lanes from 0 by a local DMA."""
    moved = ctx.temp(dtype)
    ctx.em.emit(f"dma::move({moved}, {view});  // onto lanes from 0: TIU operands share their lanes")
    return Operand(moved, dtype, True)
