"""T.gemm: ``tiu::fmm2_nn/nt`` (fp16/bf16; ``transpose_A`` through a TIU transpose of A),
``tiu::mm2_nn/nt`` (int8/uint8 into int32, exact; the same operand layouts and transposes) and
``tiu::fmm`` (fp32, mm v1; transposed operands through DMA transposes into its layout)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tilelang_tpu.codegen.context import NOT_PIPELINED
from tilelang_tpu.codegen.emit.transpose import emit_lane_transpose
from tilelang_tpu.codegen.ir import region
from tilelang_tpu.codegen.layout import DTYPES, FLOAT_DTYPES
from tilelang_tpu.codegen.values import Tile

#: Operand dtypes of the integer matmul (``tiu::mm2_nn/nt``, int32 accumulator).
INT8_DTYPES = ("int8", "uint8")

if TYPE_CHECKING:
    from tilelang_tpu.codegen.context import EmitContext

__all__ = ["emit_gemm"]


def emit_gemm(em: EmitContext, call: Any) -> None:
    a, amin, aext = region(call.args[0])
    b, bmin, bext = region(call.args[1])
    c, cmin, cext = region(call.args[2])
    trans_a, trans_b = bool(int(call.args[3])), bool(int(call.args[4]))
    # clear_accum=True, or the zero fill just before it was dropped (codegen.plan.overwriting_gemm).
    clear = bool(int(call.args[9])) or (em.overwriting is not None and call.same_as(em.overwriting))
    tiles = [em.tiles.get(x.data) for x in (a, b, c)]
    if any(t is None for t in tiles):
        raise em.fail("T.gemm on a buffer that is not a local tile")
    at, bt, ct = tiles
    assert at is not None and bt is not None and ct is not None
    for t, mins, ext in ((at, amin, aext), (bt, bmin, bext), (ct, cmin, cext)):
        if len(t.shape) > 2:
            raise em.fail(
                f"a batched T.gemm on the rank-{len(t.shape)} tile {t.name}{list(t.shape)}",
                hint="the TPU's matrix unit multiplies 2-D tiles: put the batch in the T.Kernel grid (or a T.serial loop) "
                "and T.copy each batch's 2-D slice into 2-D tiles",
            )
        if len(t.shape) != 2 or not em.full_local(t, mins, ext):
            raise em.fail(f"T.gemm on part of, or a non-2-D, tile {t.name}", hint="T.gemm takes whole 2-D tiles")
    integer = at.dtype in INT8_DTYPES
    if at.dtype != bt.dtype or not (integer or at.dtype in FLOAT_DTYPES):
        raise em.fail(f"T.gemm of {at.dtype} x {bt.dtype}", hint="A and B must both be fp32, fp16, bf16, int8 or uint8")
    if integer and ct.dtype != "int32":
        raise em.fail(f"T.gemm accumulating {at.dtype} into {ct.dtype}", hint="accumulate int8/uint8 products in int32")
    if not integer and ct.dtype != "float32" and ct.dtype != at.dtype:
        raise em.fail(f"T.gemm accumulating {at.dtype} into {ct.dtype}", hint="accumulate in float32")
    m, k = (at.shape[1], at.shape[0]) if trans_a else at.shape
    kb, n = (bt.shape[1], bt.shape[0]) if trans_b else bt.shape
    if k != kb or ct.shape != (m, n):
        raise em.fail(
            f"T.gemm shapes A{list(at.shape)} B{list(bt.shape)} C{list(ct.shape)} do not agree (transpose_A={trans_a}, transpose_B={trans_b})"
        )
    accumulate = "false" if clear else "true"
    if not clear and em.first_step is not None and call.same_as(em.first_step[0]):
        # The zero fill before the K loop was dropped (codegen.plan.first_step_gemm): the first step overwrites.
        loop = em.first_step[1]
        accumulate = f"({em.expr(loop.loop_var)} != {em.expr(loop.min)})"
    if at.dtype == "float32":
        # fp32 runs on the mm v1 unit (tiu::fmm); its operands use the rows_n layout
        # (rows on N, a whole row in one lane), chosen for these tiles up front.  A
        # transposed operand is first transposed into a rows_n scratch tile.
        # Operands the plan kept on the lanes (also reduced or computed with lanes tiles:
        # codegen.plan) go through rows_n scratch tiles.
        if "lanes" in (ct.layout, at.layout if not trans_a else "", bt.layout if not trans_b else ""):
            em.emit(f"{NOT_PIPELINED}fp32 T.gemm operands staged through rows_n (ppl-compile 1.30.2 crashes pipelining it)")
        c_name = _rows_n_scratch(em, ct, accumulate != "false") if ct.layout == "lanes" else ct.name
        if ct.layout not in ("lanes", "rows_n"):
            raise em.fail(f"fp32 T.gemm into {ct.name}, which is not in the fp32 matmul layout")
        a_name = _rows_n_transposed(em, at) if trans_a else _rows_n_scratch(em, at, True) if at.layout == "lanes" else at.name
        b_name = _rows_n_transposed(em, bt) if trans_b else _rows_n_scratch(em, bt, True) if bt.layout == "lanes" else bt.name
        em.emit(f"tiu::fmm({c_name}, {a_name}, {b_name}, {accumulate});")
        if c_name != ct.name:
            em.emit(f"dma::transpose_nc({ct.name}, {c_name});")
        return
    a_name = at.name
    if trans_a:
        # A is a [K, M] tile; mm2 takes A as [M, K]: swap C and W into a scratch tile first
        # (a TIU transpose rather than fmm2_tn/tt).
        shape = em.dim4var(["1", str(m), "1", str(k)], "atshape")
        a_name = emit_lane_transpose(em, at.name, DTYPES[at.dtype], int(k), int(m), shape, shape)
    form = "nt" if trans_b else "nn"
    if integer:
        # The integer mm2 form: int32 products summed exactly; no saturation (an int32 sum of
        # int8 products wraps only past K = 2**17, as C's int32 arithmetic would).
        # PPL's six-argument overload cannot deduce its unused template types, so this is
        # the full form, its bias / zero-point / requant operands as named zero lvalues.
        em.emit(
            f"{{ int mm_zero = 0; tiu::mm2_{form}({ct.name}, {a_name}, {bt.name}, mm_zero, {accumulate}, DT_NONE, false, "
            "mm_zero, mm_zero, 1, 0, 0, false, RM_HALF_TO_EVEN); }"
        )
        return
    em.emit(f"tiu::fmm2_{form}({ct.name}, {a_name}, {bt.name}, {accumulate});")


def _rows_n_scratch(em: EmitContext, tile: Tile, load: bool) -> str:
    """A rows_n scratch tile (``[r, 1, 1, c]``) for the lanes tile ``tile`` (``[r, c]``), holding
    its values when ``load`` (one ``dma::transpose_nc``: the lanes onto N); returns its name."""
    if tile.layout != "lanes" or len(tile.shape) != 2:
        raise em.fail(f"fp32 T.gemm operand {tile.name} in the {tile.layout} layout", hint="T.gemm takes 2-D tiles")
    rows, cols = (str(d) for d in tile.shape)
    block = em.dim4var([rows, "1", "1", cols], "mmn")
    out = em.fresh(f"{tile.name}_mmn")
    em.emit(f"auto {out} = make_tensor<{DTYPES[tile.dtype]}>({block}, {block});")
    if load:
        em.emit(f"dma::transpose_nc({out}, {tile.name});")
    return out


def _rows_n_transposed(em: EmitContext, tile: Tile) -> str:
    """A scratch tile holding ``tile`` (TileLang shape ``[r, c]``) transposed, in the rows_n
    layout of ``tiu::fmm`` (``[c, 1, 1, r]``); returns its name.

    ``tiu::fmm`` keeps a whole row in one lane, so a transpose moves data across lanes:
    ``dma::transpose_cw`` swaps the lanes (C) and W of a lanes-layout tile, then
    ``dma::transpose_nc`` moves the lanes onto N.  A rows_n tile is first moved back onto
    the lanes with one more ``transpose_nc``.  (DMA, not PPL's ``fmm2_tt``/mm2 forms, which
    fp32 operands crash on the emulator.)
    """
    rows, cols = (str(d) for d in tile.shape)
    source = tile.name
    if tile.layout == "rows_n":
        lanes = em.dim4var(["1", rows, "1", cols], "tlanes")
        back = em.fresh(f"{tile.name}_lanes")
        em.emit(f"auto {back} = make_tensor<{DTYPES[tile.dtype]}>({lanes}, {lanes});")
        em.emit(f"dma::transpose_nc({back}, {source});")
        source = back
    elif tile.layout != "lanes":
        raise em.fail(f"fp32 T.gemm transposing tile {tile.name} in the {tile.layout} layout")
    swapped = em.dim4var(["1", cols, "1", rows], "tswap")
    across = em.fresh(f"{tile.name}_t")
    em.emit(f"auto {across} = make_tensor<{DTYPES[tile.dtype]}>({swapped}, {swapped});")
    em.emit(f"dma::transpose_cw({across}, {source});")
    operand = em.dim4var([cols, "1", "1", rows], "tmm")
    out = em.fresh(f"{tile.name}_mm")
    em.emit(f"auto {out} = make_tensor<{DTYPES[tile.dtype]}>({operand}, {operand});")
    em.emit(f"dma::transpose_nc({out}, {across});")
    return out
