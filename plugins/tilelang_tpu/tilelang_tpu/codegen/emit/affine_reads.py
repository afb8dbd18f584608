"""Tile reads whose indices are the ``T.Parallel`` variables in another order, reversed, or left
out, each plus an offset that does not vary over the loop: ``x[j, i]`` (a transposed read),
``x[i, N - 1 - j]`` (a reversed one), ``x[k]`` / ``x[i, k]`` / ``x[k, i]`` in a domain whose
other axis has extent 1 (tilelang drops a loop of extent 1), ``x[k]`` in an ``(i, j)`` domain
(one element everywhere), ``x[k, j]`` in an ``(i, j)`` domain (one row on every lane).

The destination's axes are on the lanes (``C``) and along ``W`` (rank 1 and 2, ``lanes``
layout); so are the source tile's.  Each source axis either follows one destination axis,
forwards or backwards, or stays at one index.  The read is built in at most four steps:

1. the source region the domain reads, a ``sub_view`` of the tile (moved onto lanes from 0 by
   a local DMA when it starts on another lane);
2. ``dma::transpose_cw`` when the source's lanes follow the destination's ``W`` (or the
   other way round);
3. a reversed axis copied column by column (``tiu::move`` along ``W``) or row by row
   (``dma::move`` across the lanes) in a loop: one instruction per column or row -- a
   performance note, not a correctness one (PPL views have no negative stride);
4. an axis of the destination the source does not follow, repeated: along ``W`` by a view
   with stride 0, onto the lanes by ``tiu::broadcast`` (then a view with ``C`` stride 0 for
   row groups past the 64 lanes).

Reads that may fall outside the tile are refused by name, as for the other tile reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tilelang_tpu.codegen.layout import DTYPES, LAYOUTS, broadcast_strides
from tilelang_tpu.codegen.values import Operand

if TYPE_CHECKING:
    from tilelang_tpu.codegen.emit.domain import ParallelDomain
    from tilelang_tpu.codegen.values import Tile

__all__ = ["affine_read"]

_C, _W = 1, 3  # the 4-D axes a rank-1 or rank-2 ``lanes`` tile uses


@dataclass
class _Axis:
    """How one 4-D axis (``C`` or ``W``) of the region read follows the destination."""

    follows: int | None  # the destination's 4-D axis it runs along, or None (one index)
    backwards: bool  # runs against that axis (index ``offset - v``)
    extent: int  # elements read along it
    low: Any  # its lowest index in the tile (TIR)


def _split(ctx: ParallelDomain, index: Any) -> tuple[Any, int, Any] | None:
    """``index`` as (loop variable or None, coefficient, offset): ``offset + coefficient * v``
    with a coefficient of 1 or -1; None when it is not of that form."""
    from tvm import tirx

    em = ctx.em
    used = [v for v in ctx.loop_vars if _mentions(index, v)]
    if not used:
        return None if ctx.uses_loop_vars(index) else (None, 0, index)  # a tile element as an index: data-dependent
    if len(used) > 1:
        return None
    var = used[0]
    offset = em.analyzer.simplify(tirx.stmt_functor.substitute(index, {var: tirx.const(0, var.dtype)}))
    if ctx.uses_loop_vars(offset):
        return None
    for coefficient in (1, -1):
        if em.analyzer.can_prove(tirx.EQ(index, offset + coefficient * var)):
            return var, coefficient, offset
    return None


def affine_read(ctx: ParallelDomain, name: str, tile: Tile, idx: list[Any]) -> Operand | None:
    """``tile[idx]`` over the domain as an operand (module doc), or None for a read of another form."""
    from tvm import tirx

    em = ctx.em
    if tile.layout != "lanes" or ctx.dst_tile.layout != "lanes" or len(idx) not in (1, 2) or len(ctx.index) not in (1, 2):
        return None
    dst_axes = LAYOUTS["lanes"][len(ctx.index)]
    dom = {_C: 1, _W: 1}
    axis_of: dict[str, int] = {}  # loop variable name -> the destination's 4-D axis
    for position, (d, extent) in enumerate(zip(ctx.index, ctx.extents, strict=True)):
        dom[dst_axes[position]] = extent
        if ctx.is_loop_var(d):
            axis_of[d.name] = dst_axes[position]
    if any(v.name not in axis_of for v in ctx.loop_vars):
        return None
    src_axes = LAYOUTS["lanes"][len(idx)]
    shape4 = {_C: 1, _W: 1}
    for position, size in enumerate(tile.shape):
        shape4[src_axes[position]] = size
    axes: dict[int, _Axis] = {_C: _Axis(None, False, 1, tirx.const(0, "int32")), _W: _Axis(None, False, 1, tirx.const(0, "int32"))}
    followed: set[int] = set()
    for position, index in enumerate(idx):
        split = _split(ctx, index)
        if split is None:
            return None
        var, coefficient, offset = split
        if var is None:
            axes[src_axes[position]] = _Axis(None, False, 1, offset)
            continue
        target = axis_of[var.name]
        if target in followed:
            return None
        followed.add(target)
        extent = dom[target]
        low = offset if coefficient == 1 else em.analyzer.simplify(offset - (extent - 1))
        axes[src_axes[position]] = _Axis(target, coefficient == -1, extent, low)
    for axis, a in axes.items():
        if not (em.analyzer.can_prove(a.low >= 0) and em.analyzer.can_prove(a.low + a.extent <= shape4[axis])):
            raise ctx.fail(
                f"tile read {name}[{', '.join(map(str, idx))}] that may fall outside the tile {list(tile.shape)}",
                "keep every read inside its tile (TileLang leaves reads outside a tile undefined; the tpu target refuses them)",
            )
    ppl = DTYPES.get(tile.dtype)
    if ppl is None:
        return None
    # 1. The region read, on lanes from 0.
    region = ["1", str(axes[_C].extent), "1", str(axes[_W].extent)]
    region_var = em.dim4var(region, "ar_region")
    at = em.dim4var(["0", em.expr(axes[_C].low), "0", em.expr(axes[_W].low)], "ar_at")
    view = f"{tile.name}.sub_view({region_var}, {at})"
    transposed = axes[_C].follows == _W or axes[_W].follows == _C
    if transposed:
        # 2. The source's lanes become W and its W the lanes.
        swapped = ["1", region[3], "1", region[1]]
        block = em.dim4var(swapped, "ar_tblock")
        current = em.fresh("ar_t")
        em.emit(f"auto {current} = make_tensor<{ppl}>({block}, {block});")
        em.emit(f"dma::transpose_cw({current}, {view});  // a transposed read")
        axes = {_C: axes[_W], _W: axes[_C]}
        shape = swapped
    else:
        shape = region
        block = em.dim4var(shape, "ar_block")
        current = em.fresh("ar_r")
        em.emit(f"auto {current} = make_tensor<{ppl}>({block}, {block});")
        on_lane_zero = em.analyzer.can_prove_equal(axes[_C].low, 0)
        mover = "tiu::move" if on_lane_zero else "dma::move"
        em.emit(f"{mover}({current}, {view});")
    # 3. Reversed axes, one column (row) at a time.
    for axis in (_W, _C):
        if not axes[axis].backwards or axes[axis].extent == 1:
            continue
        current = _reverse(ctx, current, ppl, block, shape, axis)
    # 4. Destination axes the source does not follow, repeated.
    zero_axes: list[int] = []
    base, base_block = current, shape
    if dom[_C] > 1 and axes[_C].follows is None:
        lanes = f"min({dom[_C]}, LANE_NUM)"
        base_block = ["1", lanes, "1", shape[3]]
        copies_block = em.dim4var(base_block, "ar_cblock")
        base = em.fresh("ar_copies")
        em.emit(f"auto {base} = make_tensor<{ppl}>({copies_block}, {copies_block});")
        em.emit(f"tiu::broadcast({base}, {current}, {lanes});  // one row on every lane")
        zero_axes.append(_C)  # row groups past the 64 lanes read the same copies
    if dom[_W] > 1 and axes[_W].follows is None:
        zero_axes.append(_W)
    if not zero_axes:
        return Operand(base, tile.dtype, True)
    dom4 = em.dim4var(["1", str(dom[_C]), "1", str(dom[_W])], "ar_shape")
    stride = em.dim4var(broadcast_strides(base_block, ppl, tuple(zero_axes)), "ar_stride")
    repeated = em.fresh("ar_view")
    em.emit(f"auto &{repeated} = {base}.view({dom4}, {stride});")
    return Operand(repeated, tile.dtype, True)


def _reverse(ctx: ParallelDomain, source: str, ppl: str, block: str, shape: list[str], axis: int) -> str:
    """A new tile holding ``source`` (``shape``) with ``axis`` (``C`` or ``W``) reversed."""
    em = ctx.em
    out = em.fresh("ar_rev")
    em.emit(f"auto {out} = make_tensor<{ppl}>({block}, {block});")
    n = int(shape[axis])
    k = em.fresh("k")
    one = list(shape)
    one[axis] = "1"
    part = em.dim4var(one, "ar_one")
    to = ["0", "0", "0", "0"]
    frm = ["0", "0", "0", "0"]
    to[axis], frm[axis] = k, f"{n - 1} - {k}"
    # Along W every column stays on its lanes (a TIU move); across the lanes each row moves to
    # another lane (a local DMA).  One instruction per column or row.
    mover = "tiu::move" if axis == _W else "dma::move"
    em.emit(f"for (int {k} = 0; {k} < {n}; ++{k}) {{")
    em.emit(f"  dim4 {k}_to = {{{', '.join(to)}}};")
    em.emit(f"  dim4 {k}_from = {{{', '.join(frm)}}};")
    em.emit(f"  {mover}({out}.sub_view({part}, {k}_to), {source}.sub_view({part}, {k}_from));  // a reversed read")
    em.emit("}")
    return out


def _mentions(e: Any, var: Any) -> bool:
    from tvm import tirx

    found: list[Any] = []
    tirx.stmt_functor.post_order_visit(tirx.Evaluate(e), lambda n: found.append(n) if isinstance(n, tirx.Var) and n.same_as(var) else None)
    return bool(found)
