"""Repeating reads in ``T.Parallel``: ``x[i, j // c + b]`` (also written ``x[i, j >> k]``), each
source column read by ``c`` consecutive destination columns.

Upstream's int4 dequantisation reads its packed bytes this way
(``B_local[i, j // num_elems_per_byte]``, two int4 values per byte), and a grouped scale
``s[i, j // group]`` too.  PPL has no repeat-interleave instruction, but a 4-D view can
repeat along ``W`` with a stride of 0: the ``ceil(W / c)`` source columns, moved into a
tile, are seen as ``[.., ceil(W / c), c]`` with ``H`` stride 1 and ``W`` stride 0, copied
by one ``tiu::move`` into a tile whose rows are then exactly the repeated columns.  Three
instructions per read, whatever ``c``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tilelang_tpu.codegen.ir import op_name
from tilelang_tpu.codegen.layout import DTYPES, aligned_strides, offset4
from tilelang_tpu.codegen.values import Operand

if TYPE_CHECKING:
    from tilelang_tpu.codegen.emit.domain import ParallelDomain
    from tilelang_tpu.codegen.values import Tile

__all__ = ["repeated"]


def _divisor(e: Any, var: Any) -> int | None:
    """``c`` where ``e`` contains ``var // c`` (or C's ``var / c``) or ``var >> k`` (``c = 2**k``), else None."""
    from tvm import tirx

    found: list[int] = []

    def visit(n: Any) -> None:
        if isinstance(n, (tirx.FloorDiv, tirx.Div)) and isinstance(n.a, tirx.Var) and n.a.same_as(var) and isinstance(n.b, tirx.IntImm):
            found.append(int(n.b.value))
        elif (
            isinstance(n, tirx.Call)
            and op_name(n) == "tirx.shift_right"
            and isinstance(n.args[0], tirx.Var)
            and n.args[0].same_as(var)
            and isinstance(n.args[1], tirx.IntImm)
        ):
            found.append(1 << int(n.args[1].value))

    tirx.stmt_functor.post_order_visit(tirx.Evaluate(e), visit)
    return found[0] if len(set(found)) == 1 and found[0] > 1 else None


def _spells_division(n: Any, var: Any) -> bool:
    """Whether ``n`` is ``var >> k`` or C's ``var / c`` (equal to ``var // c``: loop variables are >= 0)."""
    from tvm import tirx

    if isinstance(n, tirx.Div):
        return isinstance(n.a, tirx.Var) and bool(n.a.same_as(var))
    return op_name(n) == "tirx.shift_right" and isinstance(n.args[0], tirx.Var) and bool(n.args[0].same_as(var))


def repeated(ctx: ParallelDomain, name: str, tile: Tile, idx: list[Any]) -> Operand | None:
    """``x[.., j // c + b]`` in a domain whose last index is the loop variable ``j`` (the other
    indices as :meth:`~tilelang_tpu.codegen.emit.operands.ParallelBody.shifted` takes them), or
    None for any other read."""
    from tvm import tirx

    em = ctx.em
    if (
        tile.layout != "lanes"
        or ctx.dst_tile.layout != "lanes"
        or len(idx) != len(ctx.index)
        or len(idx) not in (2, 3)
        or not ctx.is_loop_var(ctx.index[-1])
    ):
        return None
    j = ctx.index[-1]
    c = _divisor(idx[-1], j)
    if c is None:
        return None
    last = tirx.stmt_functor.ir_transform(  # j >> k and C's j / c as j // c (j >= 0), which the analyzer cancels
        tirx.Evaluate(idx[-1]),
        None,
        lambda n: tirx.floordiv(j, c) if _spells_division(n, j) else None,
        ["tirx.Call", "tirx.Div"],
    ).value
    b = em.analyzer.simplify(last - tirx.floordiv(j, c))
    if ctx.uses_loop_vars(b):
        return None
    origin: list[Any] = []
    for i, d in zip(idx[:-1], ctx.index[:-1], strict=True):
        offset = em.analyzer.simplify(i - d) if ctx.is_loop_var(d) else i
        if ctx.uses_loop_vars(offset):
            return None
        origin.append(offset)
    origin.append(b)
    width = ctx.extents[-1]
    groups = -(-width // c)  # source columns read
    extents = [*ctx.extents[:-1], groups]
    for axis, (o, extent) in enumerate(zip(origin, extents, strict=True)):
        if not (em.analyzer.can_prove(o >= 0) and em.analyzer.can_prove(o + extent <= tile.shape[axis])):
            raise ctx.fail(
                f"tile read {name}[{', '.join(map(str, idx))}] that may fall outside the tile {list(tile.shape)}",
                "keep every read inside its tile (TileLang leaves reads outside a tile undefined; the tpu target refuses them)",
            )
    ppl = DTYPES[tile.dtype]
    n, rows = ctx.dom4[0], ctx.dom4[1]
    src_block = em.dim4var([n, rows, "1", str(groups)], "rep_src")
    at = em.dim4var(offset4([em.expr(o) for o in origin], "lanes"), "rep_at")
    source = em.fresh("rep_src")
    em.emit(f"auto {source} = make_tensor<{ppl}>({src_block}, {src_block});")
    # The source region onto lanes from 0 (a local DMA when it starts on another lane).
    mover = "tiu::move" if ctx.starts_on_lane_zero([*origin[:-1], 0]) else "dma::move"
    em.emit(f"{mover}({source}, {tile.name}.sub_view({src_block}, {at}));")
    rep_block = em.dim4var([n, rows, str(groups), str(c)], "rep_block")
    n_stride, c_stride, _, _ = aligned_strides([n, rows, "1", str(groups)], ppl)
    stride = em.dim4var([n_stride, c_stride, "1", "0"], "rep_stride")
    spread = em.fresh("rep")
    em.emit(f"auto {spread} = make_tensor<{ppl}>({rep_block}, {rep_block});")
    em.emit(f"tiu::move({spread}, {source}.view({rep_block}, {stride}));  // each column {c} times")
    flat = em.dim4var([n, rows, "1", str(groups * c)], "rep_flat")
    out = ctx.temp(tile.dtype)
    dom = em.dim4var(ctx.dom4, "rep_dom")
    zero = em.dim4var(["0", "0", "0", "0"], "rep_zero")
    em.emit(f"tiu::move({out}, {spread}.view({flat}).sub_view({dom}, {zero}));")
    return Operand(out, tile.dtype, True)
