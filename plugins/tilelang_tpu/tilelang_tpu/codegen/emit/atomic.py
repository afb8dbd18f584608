"""T.atomic_add(dst_region, tile): accumulate a tile into global memory (split-K GEMM).

The tpu target runs the whole ``T.Kernel`` grid on one core, one block after the
other, so a read-modify-write of the destination region is atomic with respect to
every other block: load the region (clipped at the tensor's edge like ``T.copy``)
into a scratch tile, ``tiu::fadd`` the tile, store it back.  This is the documented
equivalent of TileLang's tile-region atomic add on this target.  Under ``tpu:cores=N``
only the grid loops whose blocks add into disjoint regions are split over cores
(:func:`grid.grid_split`): two cores adding into one region would race.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tilelang_tpu.codegen.emit.copy import copy_regions
from tilelang_tpu.codegen.ir import region
from tilelang_tpu.codegen.layout import DTYPES, FLOAT_DTYPES
from tilelang_tpu.codegen.values import Tile

if TYPE_CHECKING:
    from tilelang_tpu.codegen.context import EmitContext

__all__ = ["emit_atomic_add"]


def emit_atomic_add(em: EmitContext, call: Any) -> None:
    from tvm import tirx

    src, src_min, src_ext = region(call.args[0])
    dst, dst_min, dst_ext = region(call.args[1])
    st = em.tiles.get(src.data)
    if st is None or dst.data not in em.globals_:
        raise em.fail(
            "T.atomic_add whose value is not a local tile or whose destination is not a global tensor",
            hint="write T.atomic_add(C[by * BM, bx * BN], c_tile) with c_tile a T.alloc_fragment/T.alloc_shared tile",
        )
    if not em.full_local(st, src_min, src_ext):
        raise em.fail(f"T.atomic_add of part of tile {src.name}", hint="add a whole tile")
    g = em.globals_[dst.data]
    if st.dtype not in FLOAT_DTYPES or g.dtype != st.dtype:
        raise em.fail(
            f"T.atomic_add of a {st.dtype} tile into a {g.dtype} tensor",
            hint="accumulate a tile of the destination's dtype (fp32, fp16 or bf16); T.copy the tile to one first",
        )
    # A scratch tile of the source's shape and layout, known to the copy code as a local buffer.
    scratch_buf = tirx.decl_buffer(src.shape, src.dtype, f"{src.name}_acc", scope="local.fragment")
    name = em.fresh(f"{src.name}_acc")
    block = em.dim4var(st.block, name + "_block")
    em.emit(f"auto {name} = make_tensor<{DTYPES[st.dtype]}>({block}, {block});")
    em.tiles[scratch_buf.data] = Tile(name, st.dtype, st.shape, st.block, st.layout)
    zeros = [tirx.const(0, "int32")] * len(st.shape)
    em.emit("{")
    copy_regions(em, dst, dst_min, dst_ext, scratch_buf, zeros, src_ext, zero_fill=False)  # the overhang is never stored
    em.emit("}")
    em.emit(f"tiu::fadd({name}, {name}, {st.name});")
    em.emit("{")
    copy_regions(em, scratch_buf, zeros, src_ext, dst, dst_min, dst_ext)
    em.emit("}")
    del em.tiles[scratch_buf.data]
