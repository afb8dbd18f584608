"""T.fill / T.clear: ``tiu::fill`` of a tile or a region of it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tilelang_tpu.codegen.ir import region
from tilelang_tpu.codegen.layout import FLOAT_DTYPES

if TYPE_CHECKING:
    from tilelang_tpu.codegen.context import EmitContext

__all__ = ["emit_fill"]


def emit_fill(em: EmitContext, call: Any) -> None:
    buf, mins, ext = region(call.args[0])
    tile, view, _ = em.region_view(buf, mins, ext)
    value = call.args[1]
    from tvm import tirx

    if isinstance(value, tirx.IntImm) and tile.dtype in FLOAT_DTYPES:
        value = tirx.FloatImm(tile.dtype, float(value.value))
    em.emit(f"tiu::fill({view}, {em.expr(value)});")
