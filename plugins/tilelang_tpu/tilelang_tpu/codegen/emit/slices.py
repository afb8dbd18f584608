"""Copies between a tile and a lower-rank slice of a 3-D/4-D global tensor.

A 2-D tile ``[rows, cols]`` lives as ``[1, rows, 1, cols]`` (rows on the lanes, ``C``).
A global tensor of rank 4 is viewed as is, ``[N, C, H, W]``, so a slice whose rows run
along its second axis -- ``Q[b, s0:s0 + 64, h, :]`` of a bshd tensor -- already has the
tile's shape ``[1, 64, 1, D]``.  A slice along another axis -- ``Q[b, h, s0:s0 + 64, :]``
of a bhsd tensor, ``[1, 1, 64, D]`` -- does not.  For those, the copy reads the tensor
through a *permuted* view: a ``gtensor`` ``view(shape, stride)`` that puts each axis the
slice spans where the tile has it, with that axis's row-major stride, and the other axes
(of extent 1 in the slice) in the remaining places.  The DMA engine walks ``N``, ``C``
and ``H`` with any stride; ``W`` must stay the tensor's last, contiguous axis, so a slice
whose columns are not the tensor's last axis (a transposing copy) is refused by name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tilelang_tpu.codegen.emit.gather import MAX_W_STRIDE_BYTES
from tilelang_tpu.codegen.ir import is_const
from tilelang_tpu.codegen.layout import ELEMENT_BYTES, LAYOUTS
from tilelang_tpu.codegen.values import GlobalTensor, Tile

if TYPE_CHECKING:
    from tilelang_tpu.codegen.context import EmitContext

__all__ = ["permuted_slice"]

#: ``[N, C, H, W]`` position of ``W``, the contiguous axis of every PPL tensor.
_W = 3


def permuted_slice(
    em: EmitContext, gname: str, g: GlobalTensor, gmin: list[Any], gext: list[Any], real: list[str], tile: Tile, lext: list[Any]
) -> tuple[str, str, list[str]]:
    """(C expression of the global side, the ``dim4`` variable of its extents, those 4-D
    extents) of a copy between ``tile`` and the
    region ``gmin``/``gext`` (extents clipped to ``real``) of ``g`` whose natural 4-D view
    does not line up with the tile (or that has no 4-D view: rank 5 and more): a permuted,
    strided view of the tensor, then the region's ``sub_view``.  The caller has checked that the non-unit extents agree."""
    rank = len(g.dims)
    spanned = [d for d in range(rank) if not (is_const(gext[d]) and int(gext[d]) == 1)]
    positions = LAYOUTS[tile.layout][len(tile.shape)]
    tile_spanned = [positions[k] for k, e in enumerate(lext) if not (is_const(e) and int(e) == 1)]
    # place[p]: the tensor axis at 4-D position p (None: an inserted axis of size 1).
    place: list[int | None] = [None] * 4
    for axis, pos in zip(spanned, tile_spanned, strict=True):
        place[pos] = axis
    unspanned = [d for d in range(rank) if d not in spanned]
    free = [pos for pos in range(4) if place[pos] is None]
    folded: int | None = None  # the 4-D position of the axes folded into one (see below)
    if len(unspanned) > len(free) or (place[_W] is None and _W in free[: len(unspanned)]):
        # More fixed axes than free places (a rank-5 tensor), or one would land on W: the fixed
        # axes, each of extent 1 in the slice, become one axis of stride 1 whose offset is
        # their linear offset (sum of index * stride), the tensor seen as one flat run.
        folded = next((pos for pos in free if pos != _W), None)
        if folded is None:
            raise em.fail(f"T.copy between a slice of the rank-{rank} tensor {g.tensor or gname} and tile {list(tile.shape)}")
    else:
        rest = iter(unspanned)
        for pos in range(4):
            if place[pos] is None:
                place[pos] = next(rest, None)
    if place[_W] not in (None, rank - 1) and not _short_w_stride(g, place[_W], lext):
        raise em.fail(
            f"T.copy whose tile {list(tile.shape)} takes its columns from axis {place[_W]} of a rank-{rank} tensor "
            f"(the tensor's contiguous axis is {rank - 1})",
            hint="copy slices whose last extent runs along the tensor's last axis (a transposing copy needs a T.gemm "
            "transpose or a tile transposed with T.Parallel)",
        )
    dims = [em.expr(g.extent(d)) for d in range(rank)]
    strides = ["1"] * rank
    for d in range(rank - 2, -1, -1):
        strides[d] = f"{strides[d + 1]} * {dims[d + 1]}" if strides[d + 1] != "1" else dims[d + 1]
    vshape_ = [dims[a] if a is not None else "1" for a in place]
    vstride_ = [strides[a] if a is not None else "1" for a in place]
    goff_ = [em.expr(gmin[a]) if a is not None else "0" for a in place]
    if folded is not None:
        vshape_[folded] = " * ".join(f"({d})" for d in dims)
        goff_[folded] = " + ".join(f"({em.expr(gmin[d])}) * ({strides[d]})" for d in unspanned) or "0"
    vshape = em.dim4var(vshape_, "vshape")
    vstride = em.dim4var(vstride_, "vstride")
    extents = [real[a] if a is not None else "1" for a in place]
    shape = em.dim4var(extents, "shp")
    goff = em.dim4var(goff_, "goff")
    return f"{gname}.view({vshape}, {vstride}).sub_view({shape}, {goff})", shape, extents


def _short_w_stride(g: GlobalTensor, axis: int | None, lext: list[Any]) -> bool:
    """Whether a 1-D tile may take its elements from ``axis`` of a static tensor with a stride the
    DMA engine walks along ``W``: at most ``MAX_W_STRIDE_BYTES`` (a per-KV-head mask
    ``mask[b, s0:s0 + n, h]`` into a per-column vector, upstream's GQA decoding)."""
    if axis is None or len(lext) != 1 or not g.is_static:
        return False
    stride = 1
    for d in g.shape[axis + 1 :]:
        stride *= d
    return stride * ELEMENT_BYTES[g.dtype] <= MAX_W_STRIDE_BYTES
