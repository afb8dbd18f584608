"""T.cumsum along either axis of a 2-D tile (or a 1-D tile): a log-step (Hillis-Steele) scan of TIU adds.

Step ``s`` (1, 2, 4, ... < n) adds the tile shifted by ``s`` columns to itself:
``x[:, s:] += x_prev[:, :n-s]`` (``reverse``: ``x[:, :n-s] += x_prev[:, s:]``), as
``tiu::fadd`` on ``W``-offset sub-views; ``ceil(log2 n)`` steps in all.  The
additions happen in a different order than a sequential scan (fp rounding differs
by a few ulps, as it does between GPU implementations).  Along the rows (dim 0, the lanes) the
shifted copy is moved across lanes by the DMA engine first (:func:`_scan_lanes`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tilelang_tpu.codegen.ir import region
from tilelang_tpu.codegen.layout import DTYPES, FLOAT_DTYPES

if TYPE_CHECKING:
    from tilelang_tpu.codegen.context import EmitContext

__all__ = ["emit_cumsum"]


def emit_cumsum(em: EmitContext, call: Any) -> None:
    src, smin, sext = region(call.args[0])
    dst, dmin, dext = region(call.args[1])
    dim, reverse = int(call.args[2]), bool(int(call.args[3]))
    st, dt = em.tiles.get(src.data), em.tiles.get(dst.data)
    if st is None or dt is None:
        raise em.fail("T.cumsum of a buffer that is not a local tile")
    if not em.full_local(st, smin, sext) or not em.full_local(dt, dmin, dext) or st.shape != dt.shape:
        raise em.fail("T.cumsum of part of a tile, or into a tile of another shape", hint="scan a whole tile into one of its shape")
    rank = len(st.shape)
    dim = dim + rank if dim < 0 else dim
    if rank in (1, 2) and dim == 0 and st.layout == "lanes" and dt.layout == "lanes" and st.dtype in FLOAT_DTYPES and dt.dtype == st.dtype:
        _scan_lanes(em, st.name, dt.name, st.dtype, dt, reverse)
        return
    if rank != 2 or dim != 1 or st.layout != "lanes" or dt.layout != "lanes":
        raise em.fail(
            f"T.cumsum along dim {dim} of a rank-{rank} tile",
            hint="the tpu target scans along either axis of a 2-D tile or along a 1-D tile",
        )
    if st.dtype not in FLOAT_DTYPES or dt.dtype != st.dtype:
        raise em.fail(f"T.cumsum of {st.dtype} into {dt.dtype}", hint="scan fp32, fp16 or bf16 tiles into a tile of the same dtype")
    rows, n = st.shape4[1], int(st.shape4[3])
    if dt.name != st.name:
        em.emit(f"tiu::move({dt.name}, {st.name});")
    ty = DTYPES[st.dtype]
    block = em.dim4var(dt.block, "scan_block")
    shape = em.dim4var(dt.shape4, "scan_shape")
    prev = em.fresh("scan_prev")
    em.emit(f"auto {prev} = make_tensor<{ty}>({block}, {shape});")
    zero = em.dim4var(["0", "0", "0", "0"], "scan_at0")
    s = 1
    while s < n:
        part = em.dim4var(["1", rows, "1", str(n - s)], "scan_part")
        shifted = em.dim4var(["0", "0", "0", str(s)], "scan_at")
        into, frm = (zero, shifted) if reverse else (shifted, zero)
        em.emit(f"tiu::move({prev}, {dt.name});")
        acc, add = em.fresh("scan_acc"), em.fresh("scan_add")
        em.emit(f"auto &{acc} = {dt.name}.sub_view({part}, {into});")
        em.emit(f"auto &{add} = {prev}.sub_view({part}, {frm});")
        em.emit(f"tiu::fadd({acc}, {acc}, {add});")
        s *= 2


def _scan_lanes(em: EmitContext, src: str, dst: str, dtype: str, dt: Any, reverse: bool) -> None:
    """``T.cumsum`` along the rows (dim 0 of a 2-D or 1-D tile, on the lanes): the same log-step
    scan, the shifted copy moved across lanes by the DMA engine (``dma::move`` between sub-views
    at different row offsets: the TIU adds only operands on the same lanes)."""
    rows, cols = int(dt.shape4[1]), dt.shape4[3]
    if dst != src:
        em.emit(f"tiu::move({dst}, {src});")
    block = em.dim4var(dt.block, "scan_block")
    shifted = em.fresh("scan_shifted")
    em.emit(f"auto {shifted} = make_tensor<{DTYPES[dtype]}>({block}, {em.dim4var(dt.shape4, 'scan_shape')});")
    zero = em.dim4var(["0", "0", "0", "0"], "scan_at0")
    s = 1
    while s < rows:
        part = em.dim4var(["1", str(rows - s), "1", cols], "scan_part")
        at = em.dim4var(["0", str(s), "0", "0"], "scan_at")
        # forward: x[s:] += x[:-s]; reverse: x[:-s] += x[s:]
        into, frm = (zero, at) if reverse else (at, zero)
        em.emit(f"dma::move({shifted}.sub_view({part}, {into}), {dst}.sub_view({part}, {frm}));")
        em.emit(f"tiu::fadd({dst}.sub_view({part}, {into}), {dst}.sub_view({part}, {into}), {shifted}.sub_view({part}, {into}));")
        s *= 2
