"""T.copy: DMA between global tensors and local tiles (edge tiles clipped, casts staged),
and TIU moves/casts between tiles."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tilelang_tpu.codegen.emit.cast import CONVERT_DTYPES, emit_convert, temp_tiles
from tilelang_tpu.codegen.emit.copy_clip import clip_start
from tilelang_tpu.codegen.emit.gather import copy_gathered_row, uses_loaded_index
from tilelang_tpu.codegen.emit.global_copy import copy_global_to_global
from tilelang_tpu.codegen.emit.slices import permuted_slice
from tilelang_tpu.codegen.ir import is_const, local_dims, region, squeeze
from tilelang_tpu.codegen.layout import DTYPES, LAYOUTS, WORD_PAIR_DTYPES, offset4, storage_dims, to4
from tilelang_tpu.codegen.values import GlobalTensor, Tile

if TYPE_CHECKING:
    from tilelang_tpu.codegen.context import EmitContext

__all__ = ["copy_local", "copy_regions", "emit_copy"]


def emit_copy(em: EmitContext, call: Any) -> None:
    src, src_min, src_ext = region(call.args[0])
    dst, dst_min, dst_ext = region(call.args[1])
    copy_regions(em, src, src_min, src_ext, dst, dst_min, dst_ext)


def copy_regions(
    em: EmitContext,
    src: Any,
    src_min: list[Any],
    src_ext: list[Any],
    dst: Any,
    dst_min: list[Any],
    dst_ext: list[Any],
    zero_fill: bool = True,
) -> None:
    """``T.copy(src[region], dst[region])`` for buffers the emitter knows (tiles or kernel parameters).
    ``zero_fill=False`` leaves the overhang of a clipped load undefined (for a caller that never stores it)."""
    src_global = src.data in em.globals_
    dst_global = dst.data in em.globals_
    if src_global and dst_global:
        # Through a temporary tile (codegen.emit.global_copy).
        copy_global_to_global(em, src, src_min, src_ext, dst, dst_min, dst_ext, lambda *r: copy_regions(em, *r))
        return
    if src_global and not dst_global and uses_loaded_index(list(src_min)):
        copy_gathered_row(em, src, src_min, src_ext, dst, dst_min, dst_ext)
        return
    if dst_global and uses_loaded_index(list(dst_min)):
        raise em.fail(
            f"T.copy to {dst.name} at a data-dependent position (a scatter)",
            hint="the tpu target gathers rows by id but does not scatter them; store whole blocks",
        )
    if not src_global and not dst_global:
        copy_local(em, src, src_min, src_ext, dst, dst_min, dst_ext)
        return
    gbuf, gmin, gext = (src, src_min, src_ext) if src_global else (dst, dst_min, dst_ext)
    lbuf, lmin, lext = (dst, dst_min, dst_ext) if src_global else (src, src_min, src_ext)
    g = em.globals_[gbuf.data]
    tile = em.tiles.get(lbuf.data)
    if tile is None:
        raise em.fail(f"T.copy to or from {lbuf.name}, which is not a local tile (scope {lbuf.scope()})")
    if squeeze(gext) != squeeze(lext):
        raise em.fail(f"T.copy between regions of different extents ({gbuf.name}: {list(gext)} vs {lbuf.name}: {list(lext)})")
    if tile.layout not in ("lanes", "row") and len(g.dims) != len(tile.shape):
        raise em.fail(
            f"T.copy between {gbuf.name} (rank {len(g.dims)}) and matrix operand {lbuf.name} (rank {len(tile.shape)})",
            hint="copy the slice into a 2-D tile of the tensor's rank-2 shape, or T.copy it into another tile first",
        )
    from tvm import tirx

    # Extents of the global side clipped at the tensor edge (TileLang's rule for tiles
    # that overhang the tensor: loads read zeros there, stores skip it).
    real: list[str] = []
    partial = False
    guards: list[str] = []  # clipped extents that may be <= 0 (a start past the end, or before 0)
    starts = list(gmin)  # the global region's start per dimension
    units: list[str] = []  # clipped counts of unit dimensions (0 or 1)
    skips: dict[int, str] = {}  # global dim -> elements cut before 0 (the local side starts later)
    for i, (m, e) in enumerate(zip(gmin, gext, strict=True)):
        static = isinstance(g.dims[i], int)
        dim = tirx.const(g.dims[i], m.dtype) if static else g.extent(i)
        # Larger than a size-1 dimension: the [M, 1]-tensor-into-[rows]-tile slip, refused; a region
        # larger than another dimension is clipped like any other (GQA's block_H rows of 8 heads).
        if static and is_const(e) and int(e) > g.dims[i] == 1:
            raise em.fail(
                f"T.copy region of extent {int(e)} along dimension {i} of {gbuf.name}, whose size is {g.dims[i]}",
                hint="check the slice: a region cannot be larger than the tensor (for a [M, 1] tensor copy into/from a [rows, 1] tile)",
            )
        if em.analyzer.can_prove(tirx.LE(m + e, dim)):
            real.append(em.expr(e))
            continue
        partial = True
        name = em.fresh("n")
        if not em.analyzer.can_prove(tirx.GE(m, tirx.const(0, m.dtype))):
            # A start that may be negative (a row or expert id read from a tensor): clipped at both
            # ends, as TileLang's copy predicates do (codegen.emit.copy_clip).
            unit = is_const(e) and int(e) == 1  # the region keeps its shape; the guard skips it
            real.append("1" if unit else name)
            guards.append(name)
            units.extend([name] if unit else [])
            starts[i], skip = clip_start(em, gbuf.name, i, m, e, dim, name, len(lext) == len(gext))
            if skip is not None:
                skips[i] = skip
            continue
        em.emit(f"int {name} = min({em.expr(e)}, {em.expr(dim)} - {em.expr(m)});")
        real.append(name)
        if not em.analyzer.can_prove(tirx.LT(m, dim)):
            guards.append(name)  # may start past the end: nothing to move then
    lreal = local_dims(lext, gext, real)
    wide = len(g.dims) > 4  # no 4-D view of its own: always a strided view (codegen.emit.slices)
    g4 = [] if wide else to4(real, tile.layout if len(g.dims) == len(tile.shape) else "lanes")
    l4 = to4(lreal, tile.layout)
    if (wide or g4 != l4) and (tile.layout == "lanes" or len(tile.shape) == 1) and len(g.dims) >= 3 and len(g.dims) > len(tile.shape):
        # A slice of a 3-D/4-D tensor along other axes than the tile's (Q[b, h, s0:s0 + 64, :], bhsd).
        if skips:
            raise em.fail(
                f"T.copy of a slice of {gbuf.name} whose start may be negative (a data-dependent index)",
                hint="bound the start (T.max(start, 0)) or copy into a tile of the tensor's rank",
            )
        if g.dtype in WORD_PAIR_DTYPES:
            raise em.fail(
                f"T.copy of {g.dtype} ids sliced across the axes of the {len(g.dims)}-D tensor {gbuf.name}",
                hint="keep the ids in a 1-D or 2-D tensor, or pass them as int32",
            )
        gview, shape, g4 = permuted_slice(em, em.global_view(gbuf.data, "lanes"), g, starts, gext, real, tile, lext)
    else:
        # 64-bit ids are word pairs: W extents and offsets count 32-bit words (codegen.emit.gather).
        shape = em.dim4var(storage_dims(g4, g.dtype))
        goff = em.dim4var(
            storage_dims(offset4([em.expr(m) for m in starts], tile.layout if len(g.dims) == len(tile.shape) else "lanes"), g.dtype), "goff"
        )
        gview = f"{em.global_view(gbuf.data, tile.layout)}.sub_view({shape}, {goff})"
    if g4 != l4:
        raise em.fail(
            f"T.copy between {gbuf.name} region {list(gext)} and tile {lbuf.name}{list(tile.shape)} whose TPU layouts differ ({g4} vs {l4})",
            hint="copy between a region and a tile of the same shape (rows on the lanes, columns along W)",
        )
    full_local = em.full_local(tile, lmin, lext)
    cond = " || ".join(
        [f"{r} < {em.expr(e)}" for r, e in zip(real, gext, strict=True) if not r.lstrip("-").isdigit()] + [f"{n} < 1" for n in units]
    )
    whole_cast = g.dtype != tile.dtype and full_local and not guards and {g.dtype, tile.dtype} <= set(CONVERT_DTYPES)
    if whole_cast and src_global:
        # A casting load of a whole tile: staged, zero-filled and cast whole (see _cast_load).
        _cast_load(em, g, gview, tile, shape, cond if partial and zero_fill else None, partial)
        return
    if whole_cast and partial:
        # A casting store of a whole tile clipped at the tensor's edge: cast whole, store the part.
        _cast_store(em, g, gview, tile, shape)
        return
    if full_local and not partial:
        lview = tile.name
    else:
        lstart = [em.expr(m) + (f" + {skips[k]}" if k in skips else "") for k, m in enumerate(lmin)]
        loff = em.dim4var(storage_dims(offset4(lstart, tile.layout), tile.dtype), "loff")
        lview = f"{tile.name}.sub_view({shape}, {loff})"
    if src_global and partial and zero_fill:
        if full_local:
            target = tile.name
        else:
            whole = em.dim4var(storage_dims(to4([em.expr(e) for e in lext], tile.layout), tile.dtype), "lfull")
            target = f"{tile.name}.sub_view({whole}, {loff})"
        # The zero fill runs on the DMA engine (the TIU stays free for compute; also,
        # ppl-compile 1.7 crashes on a tiu fill + partial load of one tile when pipelined).
        em.emit(f"if ({cond}) dma::zero({target});")
    if g.dtype != tile.dtype and WORD_PAIR_DTYPES.keys() & {g.dtype, tile.dtype}:
        raise em.fail(f"T.copy converting {g.dtype} <-> {tile.dtype}", hint="copy 64-bit ids into a tile of the same dtype")
    if guards:
        # A region wholly past a symbolic dimension's end: nothing to move (see codegen.entry).
        em.emit(f"if ({' && '.join(f'{n} > 0' for n in guards)}) {{")
        em.indent += 1
    if g.dtype != tile.dtype:
        _copy_cast(em, src_global, g, gview, tile, lview, shape)
    elif src_global:
        em.emit(f"dma::load({lview}, {gview});")
    else:
        em.emit(f"dma::store({gview}, {lview});")
    if guards:
        em.indent -= 1
        em.emit("}")


def _cast_load(em: EmitContext, g: GlobalTensor, gview: str, tile: Tile, shape: str, zero_if: str | None, partial: bool) -> None:
    """``T.copy`` of a global region into a whole tile of another float dtype: the region is
    loaded into a staging tile of the tile's block (zero-filled first where it is clipped),
    which is cast whole.  Casting into a sub-view of a zero-filled tile instead crashes
    ppl-compile 1.30.2 in a pipelined loop (SIGSEGV; so does moving into one), and the
    overflow fix of a narrowing cast needs whole tiles (``codegen.emit.cast``)."""
    blk = em.dim4var(tile.block, "cblk")
    staged = em.fresh("staged")
    em.emit(f"auto {staged} = make_tensor<{DTYPES[g.dtype]}>({blk}, {blk});")
    if zero_if is not None:
        em.emit(f"if ({zero_if}) dma::zero({staged});")
    if partial:
        origin = em.dim4var(["0", "0", "0", "0"], "corigin")
        em.emit(f"dma::load({staged}.sub_view({shape}, {origin}), {gview});")
    else:
        em.emit(f"dma::load({staged}, {gview});")
    emit_convert(em, tile.name, staged, tile.dtype, g.dtype, temp_tiles(em, blk, blk))


def _cast_store(em: EmitContext, g: GlobalTensor, gview: str, tile: Tile, shape: str) -> None:
    """``T.copy`` of a whole tile into a global region of another float dtype that the tensor's
    edge clips: the whole tile is cast into a staging tile (whole tiles need no temporaries for
    the overflow fix, ``codegen.emit.cast``), whose clipped part is stored."""
    blk = em.dim4var(tile.block, "cblk")
    staged = em.fresh("staged")
    em.emit(f"auto {staged} = make_tensor<{DTYPES[g.dtype]}>({blk}, {blk});")
    emit_convert(em, staged, tile.name, g.dtype, tile.dtype, temp_tiles(em, blk, blk))
    origin = em.dim4var(["0", "0", "0", "0"], "corigin")
    em.emit(f"dma::store({gview}, {staged}.sub_view({shape}, {origin}));")


def _copy_cast(em: EmitContext, load: bool, g: GlobalTensor, gview: str, tile: Tile, lview: str, lreal: str) -> None:
    if g.dtype not in CONVERT_DTYPES or tile.dtype not in CONVERT_DTYPES:
        raise em.fail(f"T.copy converting {g.dtype} <-> {tile.dtype}", hint=f"casts between {', '.join(CONVERT_DTYPES)} are supported")
    blk = em.dim4var(tile.block, "cblk")
    tmp = em.fresh("staged")
    em.emit(f"auto {tmp} = make_tensor<{DTYPES[g.dtype]}>({blk}, {lreal});")
    temp = temp_tiles(em, blk, lreal)
    if load:
        em.emit(f"dma::load({tmp}, {gview});")
        emit_convert(em, lview, tmp, tile.dtype, g.dtype, temp)
    else:
        emit_convert(em, tmp, lview, g.dtype, tile.dtype, temp)
        em.emit(f"dma::store({gview}, {tmp});")


def copy_local(em: EmitContext, src: Any, src_min: list[Any], src_ext: list[Any], dst: Any, dst_min: list[Any], dst_ext: list[Any]) -> None:
    if squeeze(src_ext) != squeeze(dst_ext):
        raise em.fail(f"T.copy between tiles of different extents ({list(src_ext)} vs {list(dst_ext)})")
    st, sview, s4 = em.region_view(src, src_min, src_ext)
    dt, dview, d4 = em.region_view(dst, dst_min, dst_ext)
    if {st.layout, dt.layout} == {"lanes", "rows_n"} and s4 == [d4[1], d4[0], d4[2], d4[3]] and st.dtype == dt.dtype:
        # An fp32 T.gemm tile ([rows, 1, 1, cols], a whole row per lane) to or from an ordinary
        # one ([1, rows, 1, cols]): the DMA engine swaps N and the lanes.
        em.emit(f"dma::transpose_nc({dview}, {sview});")
        return
    if (
        st.layout == dt.layout == "lanes"
        and st.dtype == dt.dtype
        and s4 != d4
        and s4 == [d4[0], d4[3], d4[2], d4[1]]
        and "1" in (s4[1], s4[3])
    ):
        # A row of a 2-D tile to or from a 1-D tile (lse[k, :] -> lse_split): the elements of
        # one lane spread over the lanes, or gathered into one; the DMA engine swaps C and W.
        em.emit(f"dma::transpose_cw({dview}, {sview});")
        return
    if s4 != d4 or st.layout != dt.layout:
        raise em.fail(
            f"T.copy between tiles whose TPU layouts differ ({src.name}: {st.layout} {s4} vs {dst.name}: {dt.layout} {d4})",
            hint="copy between tiles of the same rank; an fp32 T.gemm tile copies to or from a 2-D tile of the same shape and dtype",
        )
    if st.layout == "lanes" and not _same_lane(em, src_min, dst_min):
        # The regions start on different lanes (x[k, :] of a tile into a 1-D tile, a row copied to
        # another row): a TIU operation stays on its lanes, the local DMA moves across them.
        if st.dtype == dt.dtype:
            em.emit(f"dma::move({dview}, {sview});")
            return
        block = em.dim4var(d4, "lane_block")
        moved = em.fresh("lane_moved")
        em.emit(f"auto {moved} = make_tensor<{DTYPES[st.dtype]}>({block}, {block});")
        em.emit(f"dma::move({moved}, {sview});")
        sview = moved
        if dt.dtype not in CONVERT_DTYPES or st.dtype not in CONVERT_DTYPES:
            raise em.fail(f"T.copy converting {st.dtype} -> {dt.dtype}", hint=f"casts between {', '.join(CONVERT_DTYPES)} are supported")
        converted = em.fresh("lane_cast")
        em.emit(f"auto {converted} = make_tensor<{DTYPES[dt.dtype]}>({block}, {block});")
        emit_convert(em, converted, moved, dt.dtype, st.dtype, temp_tiles(em, block, block))
        em.emit(f"dma::move({dview}, {converted});")
        return
    if st.dtype == dt.dtype:
        em.emit(f"tiu::move({dview}, {sview});")
    elif st.dtype in CONVERT_DTYPES and dt.dtype in CONVERT_DTYPES:
        # No overflow fix where codegen.ranges proved the source within the destination's range.
        in_range = em.in_range is not None and src.data.same_as(em.in_range)
        emit_convert(em, dview, sview, dt.dtype, st.dtype, temp_tiles(em, d4, d4), in_range=in_range)
    else:
        raise em.fail(f"T.copy converting {st.dtype} -> {dt.dtype}", hint=f"casts between {', '.join(CONVERT_DTYPES)} are supported")


def _same_lane(em: EmitContext, src_min: list[Any], dst_min: list[Any]) -> bool:
    """Whether two regions of ``lanes`` tiles (of the same 4-D shape) start on the same lane."""
    lane = [m[LAYOUTS["lanes"][len(m)].index(1)] if 1 in LAYOUTS["lanes"].get(len(m), ()) else 0 for m in (src_min, dst_min)]
    return bool(em.analyzer.can_prove_equal(lane[0], lane[1])) if not all(isinstance(v, int) for v in lane) else lane[0] == lane[1]
