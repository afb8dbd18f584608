"""T.reduce_*: row reductions with PPL's ``quick_pooling``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tilelang_tpu.codegen_ir import float_imm, region
from tilelang_tpu.codegen_layout import DTYPES, FLOAT_DTYPES

if TYPE_CHECKING:
    from tilelang_tpu.codegen_emit import Emitter

__all__ = ['emit_reduce']


# Reduce kinds -> (quick_pooling mode, identity used to pad a row, negate around it, abs first)
_REDUCE = {
    "max": (0, "-inf", False, False),
    "min": (0, "-inf", True, False),
    "sum": (1, "0", False, False),
    "abssum": (1, "0", False, True),
    "absmax": (0, "-inf", False, True),
}


def emit_reduce(em: Emitter, call: Any) -> None:
    src, smin, sext = region(call.args[0])
    dst, _dmin, _dext = region(call.args[1])
    kind = str(call.args[2].value) if hasattr(call.args[2], "value") else str(call.args[2])
    dim = int(call.args[3])
    clear = bool(int(call.args[4]))
    if kind not in _REDUCE:
        raise em.fail(f"T.reduce_{kind}", hint=f"supported reductions: {', '.join('reduce_' + k for k in _REDUCE)}")
    st = em.tiles.get(src.data)
    if st is None or dst.data not in em.tiles:
        raise em.fail("T.reduce on a buffer that is not a local tile")
    if len(st.shape) < 2 or dim != len(st.shape) - 1:
        raise em.fail(
            f"T.reduce_{kind} over dim {dim} of a rank-{len(st.shape)} tile",
            hint="the tpu target reduces along the last axis of a 2-D (or higher) tile (rows are on the lanes)",
        )
    if st.dtype not in FLOAT_DTYPES:
        raise em.fail(f"T.reduce_{kind} of {st.dtype} data", hint="fp32, fp16 and bf16 are supported")
    if not em.full_local(st, smin, sext):
        raise em.fail(f"T.reduce_{kind} of part of tile {src.name}", hint="reduce a whole tile")
    dt = em.tiles[dst.data]
    if dt.layout != "lanes":
        raise em.fail(f"T.reduce_{kind} into fp32 T.gemm operand {dst.name}", hint="reduce into a separate tile")
    if dt.dtype != st.dtype:
        raise em.fail(f"T.reduce_{kind} from {st.dtype} into {dt.dtype}", hint="reduce into a tile of the source dtype")
    mode, identity, negate, absolute = _REDUCE[kind]
    ident = em.expr(float_imm(identity, st.dtype))
    out_shape = list(st.shape4)
    out_shape[3] = "1"
    if dt.shape4 != out_shape:
        raise em.fail(
            f"T.reduce_{kind} into tile {dst.name} of shape {list(dt.shape)}; expected {list(st.shape[:-1])} or {[*list(st.shape[:-1]), 1]}"
        )
    out = dt.name
    blk = em.dim4var(st.block, "rblock")
    real = em.dim4var(st.shape4, "rreal")
    source = st.name
    if negate or absolute:
        # min = -max(-x); abs* pool |x|.  Work on a scratch copy: the source tile stays intact.
        source = em.fresh("rsrc")
        em.emit(f"auto {source} = make_tensor<{DTYPES[st.dtype]}>({blk}, {real});")
        if absolute:
            em.emit(f"tiu::fabs({source}, {st.name});")
        else:
            em.emit(f"tiu::fmul({source}, {st.name}, -1.0f);")
    target = out
    if not clear:
        target = em.fresh("racc")
        tblk = em.dim4var(out_shape, "racc_block")
        em.emit(f"auto {target} = make_tensor<{DTYPES[st.dtype]}>({tblk}, {tblk});")
    # PPL's row reduction: pads each row to whole EUs with the identity, then pools twice.
    em.emit(f"quick_pooling({target}, {source}, &{blk}, &{real}, {ident}, {mode}, 1.0f);")
    if negate:
        em.emit(f"tiu::fmul({target}, {target}, -1.0f);")
    if not clear:
        combine = {"max": "fmax", "absmax": "fmax", "min": "fmin", "sum": "fadd", "abssum": "fadd"}[kind]
        em.emit(f"tiu::{combine}({out}, {out}, {target});")
