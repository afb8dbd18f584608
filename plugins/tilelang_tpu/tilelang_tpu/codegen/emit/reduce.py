"""T.reduce_*: row reductions with PPL's ``quick_pooling``.

``quick_pooling`` reduces along ``W`` (the last axis of a 2-D tile).  A reduction
along the lanes -- dim 0 of a 2-D tile (column sums) or of a 1-D tile -- first
transposes ``C`` and ``W`` with ``tiu::transpose_cw``/``transpose_wc`` into a
scratch tile, which puts the reduced axis on ``W``, and pools that.

int32 tiles are not pooled (the pooling unit takes floats only): after the same
checks they go to :mod:`tilelang_tpu.codegen.emit.reduce_int`, an exact integer tree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tilelang_tpu.codegen.emit.reduce_int import INT_REDUCE_DTYPES, emit_int_reduce
from tilelang_tpu.codegen.emit.serial_ops import BIT_REDUCTIONS, emit_bit_reduce
from tilelang_tpu.codegen.emit.transpose import emit_lane_transpose
from tilelang_tpu.codegen.ir import float_imm, region
from tilelang_tpu.codegen.layout import DTYPES, ELEMENT_BYTES, FLOAT_DTYPES, REDUCE_ALIGN

if TYPE_CHECKING:
    from tilelang_tpu.codegen.context import EmitContext

__all__ = ["emit_reduce"]

#: Bytes of one execution unit of the TIU (64 on BM1690 and BM1684X): a row shorter than this is
#: padded before pooling (see emit_reduce).
_EU_BYTES = 64


# Reduce kinds -> (quick_pooling mode, identity used to pad a row, negate around it, abs first)
_REDUCE = {
    "max": (0, "-inf", False, False),
    "min": (0, "-inf", True, False),
    "sum": (1, "0", False, False),
    "abssum": (1, "0", False, True),
    "absmax": (0, "-inf", False, True),
}


def emit_reduce(em: EmitContext, call: Any) -> None:
    src, smin, sext = region(call.args[0])
    dst, _dmin, _dext = region(call.args[1])
    kind = str(call.args[2].value) if hasattr(call.args[2], "value") else str(call.args[2])
    dim = int(call.args[3])
    # clear=True, or the identity fill just before it was dropped (codegen.plan.clearing_reduce).
    clear = bool(int(call.args[4])) or (em.clearing is not None and call.same_as(em.clearing))
    if kind in BIT_REDUCTIONS:
        emit_bit_reduce(em, call)
        return
    if kind not in _REDUCE:
        raise em.fail(f"T.reduce_{kind}", hint=f"supported reductions: {', '.join('reduce_' + k for k in _REDUCE)}")
    st = em.tiles.get(src.data)
    if st is None or dst.data not in em.tiles:
        raise em.fail("T.reduce on a buffer that is not a local tile")
    dim = dim + len(st.shape) if dim < 0 else dim
    # Along W (the last axis of a 2-D or higher tile), or along the lanes (dim 0 of a 1-D or 2-D tile).
    across_lanes = st.layout == "lanes" and dim == 0 and len(st.shape) in (1, 2)
    if not across_lanes and (len(st.shape) < 2 or dim != len(st.shape) - 1):
        raise em.fail(
            f"T.reduce_{kind} over dim {dim} of a rank-{len(st.shape)} tile",
            hint="the tpu target reduces along the last axis of a tile, or along dim 0 of a 1-D or 2-D tile",
        )
    if not across_lanes and st.shape4[2] != "1":
        # quick_pooling reduces [N, C, 1, W] rows; with H > 1 it gave wrong sums on the emulator.
        raise em.fail(
            f"T.reduce_{kind} of the 4-D tile {src.name}{list(st.shape)}, whose third axis is not 1",
            hint="reduce a 3-D tile [b, rows, cols] (or a 4-D tile [a, b, 1, cols]): the TPU pools rows of [N, C, 1, W]",
        )
    if st.dtype not in FLOAT_DTYPES and st.dtype not in INT_REDUCE_DTYPES:
        raise em.fail(
            f"T.reduce_{kind} of {st.dtype} data",
            hint="fp32, fp16, bf16 and int32 are supported (the TPU pools floats only, int32 reduces with integer TIU ops): "
            "pass the data as an int32 or float tensor (integer casts between tiles are not supported)",
        )
    if not em.full_local(st, smin, sext):
        raise em.fail(f"T.reduce_{kind} of part of tile {src.name}", hint="reduce a whole tile")
    dt = em.tiles[dst.data]
    if dt.layout != "lanes":
        raise em.fail(f"T.reduce_{kind} into fp32 T.gemm operand {dst.name}", hint="reduce into a separate tile")
    if dt.dtype != st.dtype:
        raise em.fail(f"T.reduce_{kind} from {st.dtype} into {dt.dtype}", hint="reduce into a tile of the source dtype")
    mode, identity, negate, absolute = _REDUCE[kind]
    if across_lanes:
        # [1, C, 1, W] -> [1, W, 1, C]: the reduced axis goes to W, the kept one to the lanes.
        reduced, kept = st.shape4[1], st.shape4[3]
        pooled_shape = ["1", kept, "1", reduced]
        pooled_block = ["1", kept, "1", str(-(-int(reduced) // REDUCE_ALIGN) * REDUCE_ALIGN)]
        out_shape = ["1", kept, "1", "1"]
        expected = f"[{st.shape[1]}]" if len(st.shape) == 2 else "[1]"
    else:
        pooled_shape, pooled_block = list(st.shape4), list(st.block)
        out_shape = list(st.shape4)
        out_shape[3] = "1"
        expected = f"{list(st.shape[:-1])} or {[*list(st.shape[:-1]), 1]}"
    if dt.shape4 != out_shape:
        raise em.fail(f"T.reduce_{kind} into tile {dst.name} of shape {list(dt.shape)}; expected {expected}")
    if st.dtype in INT_REDUCE_DTYPES:
        # Exact integer tree instead of the float-only pooling unit.
        emit_int_reduce(em, kind, st, dt, across_lanes, clear)
        return
    ident = em.expr(float_imm(identity, st.dtype))
    out = dt.name
    blk = em.dim4var(pooled_block, "rblock")
    real = em.dim4var(pooled_shape, "rreal")
    source = st.name
    if across_lanes:
        source = emit_lane_transpose(em, st.name, DTYPES[st.dtype], int(st.shape4[1]), int(st.shape4[3]), blk, real)
    if negate or absolute:
        # min = -max(-x); abs* pool |x|.  Work on a scratch copy: the source tile stays intact.
        scratch = source if across_lanes else em.fresh("rsrc")
        if not across_lanes:
            em.emit(f"auto {scratch} = make_tensor<{DTYPES[st.dtype]}>({blk}, {real});")
        if absolute:
            em.emit(f"tiu::fabs({scratch}, {source});")
        else:
            em.emit(f"tiu::fmul({scratch}, {source}, -1.0f);")
        source = scratch
    target = out
    if not clear:
        target = em.fresh("racc")
        tblk = em.dim4var(out_shape, "racc_block")
        em.emit(f"auto {target} = make_tensor<{DTYPES[st.dtype]}>({tblk}, {tblk});")
    if not across_lanes and int(st.shape4[3]) * ELEMENT_BYTES[st.dtype] < _EU_BYTES:
        # A row shorter than one execution unit: quick_pooling's own tail fill (at a W offset
        # inside the first EU) kills the emulator for a 32-byte row (8 fp32 / 16 fp16 columns,
        # ASSERT R_addr % EU bytes; measured, bug K1).  The row goes into a scratch tile filled
        # with the identity first, so the pooling needs no fill.  (Two more instructions.)
        padded = em.fresh("rpad")
        whole = em.dim4var([*pooled_shape[:3], f"get_eu_num<{DTYPES[st.dtype]}>()"], "rpad_real")
        whole_block = em.dim4var([*pooled_block[:3], f"get_eu_num<{DTYPES[st.dtype]}>()"], "rpad_block")
        em.emit(f"auto {padded} = make_tensor<{DTYPES[st.dtype]}>({whole_block}, {whole});")
        em.emit(f"tiu::fill({padded}, {ident});")
        em.emit(f"tiu::move({padded}.sub_view({real}, {em.dim4var(['0', '0', '0', '0'], 'rpad_at')}), {source});")
        source, real, blk = padded, whole, whole_block
    # PPL's row reduction: pads each row to whole EUs with the identity, then pools twice.
    em.emit(f"quick_pooling({target}, {source}, &{blk}, &{real}, {ident}, {mode}, 1.0f);")
    if negate:
        em.emit(f"tiu::fmul({target}, {target}, -1.0f);")
    if not clear:
        combine = {"max": "fmax", "absmax": "fmax", "min": "fmin", "sum": "fadd", "abssum": "fadd"}[kind]
        em.emit(f"tiu::{combine}({out}, {out}, {target});")
