"""``T.copy`` from one global tensor to another (upstream's ``test_tilelang_language_copy``:
``T.copy(A[by * BM:(by + 1) * BM, ...], B[...])``, casts included).

The DMA engine moves global memory only to and from local memory here, so the region goes
through a temporary tile: loaded (clipped at the source's edge, where it reads 0), then stored
(clipped at the destination's edge, cast on the way where the dtypes differ) -- the two
``T.copy`` forms of :mod:`tilelang_tpu.codegen.emit.copy`.  A region larger than
:data:`CHUNK_BYTES` per lane is moved in chunks along its outermost non-unit axis.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tilelang_tpu.codegen.ir import is_const, min_extent_range
from tilelang_tpu.codegen.layout import ELEMENT_BYTES, storage_dims, storage_type, to4
from tilelang_tpu.codegen.values import Tile

if TYPE_CHECKING:
    from tilelang_tpu.codegen.context import EmitContext

__all__ = ["CHUNK_BYTES", "copy_global_to_global"]

#: Local memory per lane the staging tile may take (of 256 KiB on BM1690).
CHUNK_BYTES = 32 * 1024

#: Lanes of a TPU core (rows of a tile are spread over them).
_LANES = 64

Copy = Callable[[Any, list[Any], list[Any], Any, list[Any], list[Any]], None]


def copy_global_to_global(
    em: EmitContext, src: Any, src_min: list[Any], src_ext: list[Any], dst: Any, dst_min: list[Any], dst_ext: list[Any], copy: Copy
) -> None:
    """``T.copy(src[region], dst[region])`` between global tensors through a tile; ``copy`` is
    :func:`tilelang_tpu.codegen.emit.copy.copy_regions` (passed in: that module calls this one)."""
    from tvm import tirx

    if not all(is_const(e) for e in list(src_ext) + list(dst_ext)):
        raise em.fail(
            f"T.copy from global {src.name} to global {dst.name} over a region of symbolic size",
            hint="copy block-sized regions (T.copy(A[bx * BM:(bx + 1) * BM, :], B[...]) with constant block sizes)",
        )
    squeezed = [int(e) for e in src_ext if int(e) != 1] or [1]
    if squeezed != ([int(e) for e in dst_ext if int(e) != 1] or [1]):
        raise em.fail(f"T.copy between regions of different extents ({src.name}: {list(src_ext)} vs {dst.name}: {list(dst_ext)})")
    if len(src_ext) > 4:
        raise em.fail(
            f"T.copy from global {src.name} to global {dst.name} over a rank-{len(src_ext)} region",
            hint="copy regions of rank 4 or less (one T.copy per outer index)",
        )
    dtype = str(src.dtype)
    s_axis, d_axis = _outer(src_ext), _outer(dst_ext)
    shape = [int(e) for e in src_ext]  # the tile has the source region's rank, so their layouts agree
    rows = shape[s_axis]
    chunk = rows
    while chunk > 1 and _lane_bytes([chunk if a == s_axis else e for a, e in enumerate(shape)], dtype) > CHUNK_BYTES:
        chunk = -(-chunk // 2)
    tile_shape = tuple(chunk if a == s_axis else e for a, e in enumerate(shape))
    buf = tirx.decl_buffer(tile_shape, dtype, f"{src.name}_to_{dst.name}", scope="local.fragment")
    name = em.fresh(f"{src.name}_to_{dst.name}")
    block = storage_dims(to4([str(s) for s in tile_shape]), dtype)
    bvar = em.dim4var(block, name + "_block")
    em.emit(f"auto {name} = make_tensor<{storage_type(dtype)}>({bvar}, {bvar});")
    em.tiles[buf.data] = Tile(name, dtype, tile_shape, block)

    def move(start: Any, count: int) -> None:
        """Rows ``[start, start + count)`` of the outermost axis, through the tile."""
        tmin = [tirx.const(0, "int32")] * len(tile_shape)
        text = [tirx.const(count if a == s_axis else e, "int32") for a, e in enumerate(shape)]
        s_min, s_ext = _chunk(src_min, src_ext, s_axis, start, count)
        d_min, d_ext = _chunk(dst_min, dst_ext, d_axis, start, count)
        copy(src, s_min, s_ext, buf, tmin, text)
        copy(buf, tmin, text, dst, d_min, d_ext)

    full, tail = divmod(rows, chunk)
    if full == 1:
        move(tirx.const(0, "int32"), chunk)
    elif full > 1:
        var = tirx.Var("gchunk", "int32")
        c_name = em.fresh("gchunk")
        em.ids.of_var[var] = c_name
        em.analyzer.bind(var, min_extent_range(tirx.const(0, "int32"), tirx.const(full, "int32")))
        em.emit(f"for (int {c_name} = 0; {c_name} < {full}; ++{c_name}) {{")
        em.indent += 1
        move(var * chunk, chunk)
        em.indent -= 1
        em.emit("}")
    if tail:
        move(tirx.const(full * chunk, "int32"), tail)


def _lane_bytes(shape: list[int], dtype: str) -> int:
    """Local memory per lane of a tile of ``shape`` (rows on the lanes, rows EU-aligned)."""
    n, c, h, w = (int(d) for d in to4([str(d) for d in shape]))
    return n * -(-c // _LANES) * -(-(h * w * ELEMENT_BYTES.get(dtype, 4)) // 64) * 64


def _outer(extents: list[Any]) -> int:
    """The first axis of a region longer than 1 (the last axis when none is)."""
    return next((a for a, e in enumerate(extents) if int(e) != 1), len(extents) - 1)


def _chunk(mins: list[Any], extents: list[Any], axis: int, start: Any, rows: int) -> tuple[list[Any], list[Any]]:
    from tvm import tirx

    new_min, new_ext = list(mins), list(extents)
    new_min[axis] = mins[axis] + start
    new_ext[axis] = tirx.const(rows, str(extents[axis].dtype))
    return new_min, new_ext
