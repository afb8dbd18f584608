"""A mask written into a GEMM's accumulator, then the GEMM: only the blocks the mask can touch pay for it.

Causal attention writes its mask into the score tile and lets ``T.gemm`` accumulate onto it::

    for i, j in T.Parallel(BM, BN):
        acc_s[i, j] = T.if_then_else(bx * BM + i >= k * BN + j, 0, -T.infinity(...))
    T.gemm(Q_shared, K_shared, acc_s, transpose_B=True)

In most key blocks the condition holds for every ``(i, j)``: the mask is all zeros and the
GEMM could simply overwrite ``acc_s``.  :func:`masked_gemm` recognises the pair (a whole-tile
``T.Parallel`` store of ``if_then_else(<integer comparison>, 0, <constant>)`` immediately
followed by an accumulating ``T.gemm`` into that tile, which is not one of its operands) and
returns the scalar condition under which every element keeps the zero -- the minimum of the
comparison over the ``T.Parallel`` box (range analysis, ``tvm.arith``), an expression of the
block and loop indices only.  The walker (``walk.masked_gemm``) then prints::

    if (<all kept>) { <the GEMM, overwriting> } else { <the mask>; <the GEMM, accumulating> }

and when the loop bounds prove the condition always (or never) true, only that branch.  The
result is the same in every case: where every element keeps ``+0``, accumulating onto ``+0`` is
overwriting.  A PPL programmer writes the same branch (``benchmarks/tpu_ppl/flash_attention_causal.pl``).
"""

from __future__ import annotations

import math
from typing import Any

from tilelang_tpu.codegen.ir import parallel_store, region, tile_call, whole

__all__ = ["masked_gemm"]


def _is_plus_zero(value: Any) -> bool:
    from tvm import tirx

    if isinstance(value, tirx.IntImm):
        return int(value.value) == 0
    if isinstance(value, tirx.FloatImm):
        return value.value == 0.0 and math.copysign(1.0, value.value) > 0
    if isinstance(value, tirx.Cast):
        return _is_plus_zero(value.value)
    return False


def masked_gemm(first: Any, second: Any) -> tuple[Any, Any] | None:
    """(the T.gemm call of ``second``, the condition under which ``first``'s mask keeps every
    element at +0) when ``first`` masks ``second``'s accumulator as the module docstring says, else None."""
    from tvm import arith, tirx

    gemm = tile_call(second, "tl.tileop.gemm")
    found = parallel_store(first)
    if gemm is None or found is None or bool(int(gemm.args[9])):
        return None
    store, loops = found
    a, b, (c, cmin, cext) = region(gemm.args[0])[0], region(gemm.args[1])[0], region(gemm.args[2])
    buf = store.buffer
    if not (c.data.same_as(buf.data) and whole(c, cmin, cext)) or a.data.same_as(buf.data) or b.data.same_as(buf.data):
        return None
    # The store covers the whole tile: indices are the loop variables, extents the tile's shape.
    if len(store.indices) != len(loops) or len(buf.shape) != len(loops):
        return None
    for index, (var, extent), dim in zip(store.indices, loops, buf.shape, strict=True):
        if not (isinstance(index, tirx.Var) and index.same_as(var) and isinstance(dim, tirx.IntImm) and int(dim) == extent):
            return None
    value = store.value
    if not (isinstance(value, tirx.Call) and value.op.name == "tirx.if_then_else"):
        return None
    cond, keep, _drop = value.args
    if not _is_plus_zero(keep):
        return None
    if isinstance(cond, tirx.GE):
        diff, least = tirx.Sub(cond.a, cond.b), 0
    elif isinstance(cond, tirx.GT):
        diff, least = tirx.Sub(cond.a, cond.b), 1
    elif isinstance(cond, tirx.LE):
        diff, least = tirx.Sub(cond.b, cond.a), 0
    elif isinstance(cond, tirx.LT):
        diff, least = tirx.Sub(cond.b, cond.a), 1
    else:
        return None
    if "int" not in str(diff.dtype):
        return None
    box = {var: arith.IntervalSet(0, extent - 1) for var, extent in loops}
    bounds = arith.Analyzer().int_set(diff, box)
    lowest = bounds.min_value
    if not isinstance(lowest, tirx.PrimExpr) or "inf" in str(lowest):  # unbounded (pos_inf/neg_inf)
        return None
    used: list[Any] = []
    tirx.stmt_functor.post_order_visit(lowest, lambda n: used.append(n) if isinstance(n, tirx.Var) else None)
    if any(v.same_as(var) for v in used for var, _ in loops):
        return None
    return gemm, tirx.GE(lowest, tirx.IntImm(str(diff.dtype), least))
