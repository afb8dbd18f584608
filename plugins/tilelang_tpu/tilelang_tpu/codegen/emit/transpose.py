"""Transposes, the primitives several constructs share: ``C`` and ``W`` of a tile swapped by
the TIU (row reductions along the lanes, GEMM operands) or by the DMA engine (a
``T.Parallel`` transpose of one tile into another)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tilelang_tpu.codegen.context import EmitContext

__all__ = ["emit_lane_transpose", "emit_tile_transpose"]


def emit_lane_transpose(em: EmitContext, src: str, ty: str, c: int, w: int, block: str, real: str) -> str:
    """Emit a TPU_ALIGN tile (allocated as ``block``, viewed as ``real`` = ``[1, w, 1, c]``)
    holding ``src`` (``[1, c, 1, w]``) with ``C`` and ``W`` swapped; returns its name.

    PPL: ``transpose_cw`` when ``C >= W``, ``transpose_wc`` otherwise (both swap C and W;
    checked on the emulator).  ``transpose_cw`` must write a ``TPU_ROW_ALIGN`` tensor,
    which is then moved into a ``TPU_ALIGN`` one (what pooling and matmul read).
    """
    out = em.fresh("tr")
    if c >= w:
        staged = em.fresh("trrow")
        em.emit(f"auto {staged} = make_tensor<{ty}>({block}, {real}, TPU_ROW_ALIGN);")
        em.emit(f"tiu::transpose_cw({staged}, {src});")
        em.emit(f"auto {out} = make_tensor<{ty}>({block}, {real});")
        em.emit(f"tiu::move({out}, {staged});")
    else:
        em.emit(f"auto {out} = make_tensor<{ty}>({block}, {real});")
        em.emit(f"tiu::transpose_wc({out}, {src});")
    return out


def emit_tile_transpose(em: EmitContext, store: Any, loop_vars: list[Any], extents: list[int]) -> bool:
    """``b[j, i] = a[i, j]`` in a ``T.Parallel(I, J)`` over local 2-D tiles of one dtype:
    ``dma::transpose_cw`` (lanes and W swapped by the DMA engine, local to local).
    Returns False, emitting nothing, for any other statement."""
    from tvm import tirx

    value = store.value
    if not (isinstance(value, tirx.BufferLoad) and value.buffer.data in em.tiles and store.buffer.data in em.tiles):
        return False
    dst_index, src_index = list(store.indices), list(value.indices)
    if len(loop_vars) != 2 or len(dst_index) != 2 or len(src_index) != 2:
        return False
    if not all(isinstance(x, tirx.Var) for x in (*dst_index, *src_index)):
        return False
    if not (dst_index[0].same_as(src_index[1]) and dst_index[1].same_as(src_index[0]) and not dst_index[0].same_as(dst_index[1])):
        return False
    if not all(any(x.same_as(v) for v in loop_vars) for x in dst_index):
        return False
    dt, st = em.tiles[store.buffer.data], em.tiles[value.buffer.data]
    if dt is st:
        raise em.fail(f"in-place transpose of tile {store.buffer.name}", hint="transpose into another tile")
    if dt.layout != "lanes" or st.layout != "lanes":
        raise em.fail(
            f"transpose {store.buffer.name}[{dst_index[0]}, {dst_index[1]}] = {value.buffer.name}[...] of an fp32 T.gemm operand",
            hint="transpose a tile that is not a T.gemm operand, or use T.gemm's transpose_A/transpose_B",
        )
    if dt.dtype != st.dtype:
        raise em.fail(f"transpose from {st.dtype} to {dt.dtype}", hint="transpose within one dtype, then cast")
    extent = {v.name: e for v, e in zip(loop_vars, extents, strict=True)}
    rows, cols = extent[src_index[0].name], extent[src_index[1].name]
    if rows > st.shape[0] or cols > st.shape[1] or cols > dt.shape[0] or rows > dt.shape[1]:
        raise em.fail(f"transpose of a [{rows}, {cols}] domain outside tile {value.buffer.name} or {store.buffer.name}")
    zero = [tirx.const(0, "int32")] * 2
    _, src_view, _ = em.region_view(value.buffer, zero, [tirx.const(rows, "int32"), tirx.const(cols, "int32")])
    _, dst_view, _ = em.region_view(store.buffer, zero, [tirx.const(cols, "int32"), tirx.const(rows, "int32")])
    em.emit(f"dma::transpose_cw({dst_view}, {src_view});")
    return True
