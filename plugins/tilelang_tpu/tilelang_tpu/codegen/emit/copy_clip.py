"""``T.copy`` regions whose start may be negative: a row offset or an expert id read from a
tensor (``T.copy(X[BlockRow[by], k * bk], x_s)``, ``T.copy(W[e, bx * bn, 0], w_s)`` in a
grouped GEMM), which the analyzer cannot bound.

TileLang's copy guards every element with ``0 <= start + i < size`` where it cannot prove it
(a load reads zeros there, a store skips it).  The DMA equivalent: the region is clipped at
both ends at run time -- it starts at ``lo = max(start, 0)``, ``skip = lo - start`` elements
later on the tile's side, and moves ``min(extent - skip, size - lo)`` elements, nothing when
that is not positive.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tilelang_tpu.codegen.ir import is_const

if TYPE_CHECKING:
    from tilelang_tpu.codegen.context import EmitContext

__all__ = ["clip_start"]


def clip_start(
    em: EmitContext, name: str, axis: int, start: Any, extent: Any, size: Any, count: str, same_rank: bool
) -> tuple[Any, str | None]:
    """Emit the clip of dimension ``axis`` of tensor ``name``: declares ``int {count}`` (the
    elements moved, guarded ``> 0`` by the caller) and returns the global start (a TIR variable
    bound to the C one) and the
    elements skipped on the tile's side (C; None where that dimension has extent 1 on a tile of
    lower rank, so a clipped element means nothing is moved)."""
    if not same_rank and not (is_const(extent) and int(extent) == 1):
        raise em.fail(
            f"T.copy from {name} whose region may start before 0 (dimension {axis} starts at {start}) into a tile of another rank",
            hint="copy into a tile of the tensor's rank, or bound the start (T.max(start, 0))",
        )
    lo, skip = em.fresh("lo"), em.fresh("skip")
    em.emit(f"int {lo} = max((int)({em.expr(start)}), 0);")
    em.emit(f"int {skip} = {lo} - (int)({em.expr(start)});")
    em.emit(f"int {count} = min({em.expr(extent)} - {skip}, {em.expr(size)} - {lo});")
    from tvm import tirx

    var = tirx.Var(lo, "int32")
    em.ids.of_var[var] = lo
    return var, skip if same_rank else None
