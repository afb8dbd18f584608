"""T.reduce_sum/max/min/abssum/absmax of int32 tiles: an exact log-step tree of integer TIU ops.

The pooling unit that reduces float rows (``quick_pooling``) takes floats only, and
an int32 sum through fp32 would round beyond 2^24.  Instead, a scratch copy of the
tile is folded in half along ``W`` until one column is left: step by step,
``x[:, :h] op= x[:, n-h:n]`` with ``h = n // 2`` (``tiu::add`` / ``tiu::max`` /
``tiu::min`` on ``W``-offset sub-views, the way ``codegen.emit.scan`` scans), so
``ceil(log2 n)`` integer instructions per reduction, any ``n``.  Sums wrap around
in two's complement on overflow, as int32 sums do on GPUs.

``abssum`` and ``absmax`` first take ``|x|`` of the scratch copy as ``max(x, 0 - x)`` with a
wrapping subtraction (PPL has no integer abs reduction): ``|-2^31|`` is ``-2^31``, as torch's
``abs`` of int32 and C's two's-complement negation give; the sum then wraps like any int32 sum
(torch's ``x.abs().sum(dtype=torch.int32)``).

Reductions along the lanes (dim 0 of a 2-D or 1-D tile) first move the lanes axis
to ``W`` with the same TIU transpose as the float path (a plain data move, exact
for int32).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilelang_tpu.codegen.emit.transpose import emit_lane_transpose
from tilelang_tpu.codegen.layout import DTYPES
from tilelang_tpu.codegen.values import Tile

if TYPE_CHECKING:
    from tilelang_tpu.codegen.context import EmitContext

__all__ = ["INT_REDUCE_DTYPES", "INT_REDUCE_KINDS", "emit_int_reduce"]

#: Integer dtypes reduced exactly (the TIU integer ops checked on the emulator).
INT_REDUCE_DTYPES = ("int32",)

#: Reduce kind -> the TIU integer op that folds two halves (and combines with the
#: destination when ``clear=False``).
INT_REDUCE_KINDS = {"sum": "add", "max": "max", "min": "min", "abssum": "add", "absmax": "max"}

#: Reduce kinds that fold ``|x|`` (a wrapping int32 abs) instead of ``x``.
_ABSOLUTE = ("abssum", "absmax")


def emit_int_reduce(em: EmitContext, kind: str, st: Tile, dt: Tile, across_lanes: bool, clear: bool) -> None:
    """Reduce the int32 tile ``st`` into ``dt`` (shapes already checked by the caller)."""
    if kind not in INT_REDUCE_KINDS:
        raise em.fail(
            f"T.reduce_{kind} of {st.dtype} data",
            hint=f"int32 tiles reduce with {', '.join('reduce_' + k for k in INT_REDUCE_KINDS)}",
        )
    op = INT_REDUCE_KINDS[kind]
    ty = DTYPES[st.dtype]
    if across_lanes:
        kept, n = st.shape4[3], int(st.shape4[1])
        shape = ["1", kept, "1", str(n)]
        block = em.dim4var(shape, "ired_block")
        scratch = emit_lane_transpose(em, st.name, ty, n, int(kept), block, block)
    else:
        shape, n = list(st.shape4), int(st.shape4[3])
        block = em.dim4var(shape, "ired_block")
        scratch = em.fresh("ired")
        em.emit(f"auto {scratch} = make_tensor<{ty}>({block}, {block});")
        em.emit(f"tiu::move({scratch}, {st.name});")  # the source tile stays intact
    n_, c_, h_ = shape[0], shape[1], shape[2]
    if kind in _ABSOLUTE:
        negated = em.fresh("ired_neg")
        em.emit(f"auto {negated} = make_tensor<{ty}>({block}, {block});")
        em.emit(f"tiu::sub({negated}, 0, {scratch}, 0, RM_HALF_UP, false);  // wraps: 0 - (-2^31) = -2^31")
        em.emit(f"tiu::max({scratch}, {scratch}, {negated});")
    at0 = em.dim4var(["0", "0", "0", "0"], "ired_at0")
    while n > 1:
        half = n // 2
        part = em.dim4var([n_, c_, h_, str(half)], "ired_part")
        upper = em.dim4var(["0", "0", "0", str(n - half)], "ired_at")
        acc, other = em.fresh("ired_acc"), em.fresh("ired_hi")
        em.emit(f"auto &{acc} = {scratch}.sub_view({part}, {at0});")
        em.emit(f"auto &{other} = {scratch}.sub_view({part}, {upper});")
        em.emit(f"tiu::{op}({acc}, {acc}, {other});")
        n -= half
    column = em.dim4var([n_, c_, h_, "1"], "ired_col")
    result = f"{scratch}.sub_view({column}, {at0})"
    if clear:
        em.emit(f"tiu::move({dt.name}, {result});")
    else:
        em.emit(f"tiu::{op}({dt.name}, {dt.name}, {result});")
