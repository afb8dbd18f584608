"""Global tensors read inside ``T.Parallel`` together with other operations.

``B[r, c] = A[r, c] * 2`` with ``A`` and ``B`` kernel tensors (upstream's ``if_range`` test, a
hand-written im2col, causal conv1d), ``y[i, j] = x[i, j] * w[bx * BM + i, j]``: the TIU computes on
local tiles only, so each global read is first staged -- loaded into a temporary tile over the
loop variables it uses, by the DMA forms of :mod:`tilelang_tpu.codegen.emit.gather` (a block,
a strided or transposed view, a row gather; clipped at the tensor's edge, where it reads 0 as
the other targets' bounds-checked reads do) -- and the expression then reads that tile.

A read that does not vary over the loop (``scale[0]``, ``BlockExpert[by]``) is one element: the
scalar unit reads it (:func:`tilelang_tpu.codegen.emit.elements.element_value`) and the
expression uses it as a scalar operand.

Reads are staged at the store that uses them, after the body's earlier stores, so a body that
stores into a tensor and then reads it sees its own stores.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tilelang_tpu.codegen.emit.elements import SCALAR_DTYPES, element_value
from tilelang_tpu.codegen.emit.gather import emit_global_read
from tilelang_tpu.codegen.emit.half_elements import HALF_DTYPES
from tilelang_tpu.codegen.ir import same_expr
from tilelang_tpu.codegen.layout import storage_dims, storage_type, to4
from tilelang_tpu.codegen.values import Tile

if TYPE_CHECKING:
    from tilelang_tpu.codegen.context import EmitContext

__all__ = ["stage_global_reads"]


def stage_global_reads(em: EmitContext, store: Any, loop_vars: list[Any], extents: list[int], loop: Any) -> Any:
    """``store`` with every read of a global tensor in its value replaced by a read of a tile
    (or a scalar) that holds the same elements, loaded just now."""
    from tvm import tirx

    loads: list[Any] = []
    tirx.stmt_functor.post_order_visit(
        tirx.Evaluate(store.value), lambda n: loads.append(n) if isinstance(n, tirx.BufferLoad) and n.buffer.data in em.globals_ else None
    )
    # The outermost reads only: a gather's whole read (table[ids[i], j]) is staged as one, its ids with it.
    inner: list[Any] = []
    for load in loads:
        for index in load.indices:
            tirx.stmt_functor.post_order_visit(tirx.Evaluate(index), lambda n: inner.append(n) if isinstance(n, tirx.BufferLoad) else None)
    staged: list[tuple[Any, Any]] = []  # (global load, its replacement), staged here: errors are raised outside TVM callbacks
    for load in loads:
        if any(load.same_as(n) for n in inner) or any(same_expr(seen, load) for seen, _ in staged):
            continue
        staged.append((load, _stage(em, load, loop_vars, extents, loop)))

    def visit(node: Any) -> Any:
        if isinstance(node, tirx.BufferLoad):
            for seen, value in staged:
                if same_expr(seen, node):
                    return value
        return None

    value = tirx.stmt_functor.ir_transform(tirx.Evaluate(store.value), visit, None, ["tirx.BufferLoad"]).value
    return tirx.BufferStore(store.buffer, value, list(store.indices))


def _stage(em: EmitContext, load: Any, loop_vars: list[Any], extents: list[int], loop: Any) -> Any:
    from tvm import tirx

    used = [k for k, v in enumerate(loop_vars) if any(_mentions(i, v) for i in load.indices)]
    dtype = str(load.buffer.dtype)
    if not used:
        if dtype not in SCALAR_DTYPES and dtype not in HALF_DTYPES:
            raise em.fail(
                f"T.Parallel read of the single {dtype} element {load.buffer.name}[{', '.join(map(str, load.indices))}]",
                loop,
                hint="copy it into a tile (T.copy) and read the tile, or pass the tensor as float32",
            )
        name = element_value(em, load)
        var = tirx.Var(name, "int32" if "int" in dtype else "float32")  # 16-bit floats come as float
        em.ids.of_var[var] = name
        return var if str(var.dtype) == dtype else tirx.Cast(dtype, var)
    vars_ = [loop_vars[k] for k in used]
    shape = tuple(extents[k] for k in used)
    buf = tirx.decl_buffer(shape, dtype, f"{load.buffer.name}_staged", scope="local.fragment")
    name = em.fresh(f"{load.buffer.name}_staged")
    block = storage_dims(to4([str(s) for s in shape]), dtype)
    bvar = em.dim4var(block, name + "_block")
    em.emit(f"auto {name} = make_tensor<{storage_type(dtype)}>({bvar}, {bvar});")
    tile = Tile(name, dtype, shape, block)
    em.tiles[buf.data] = tile
    emit_global_read(em, tirx.BufferStore(buf, load, vars_), tile, vars_, list(shape), loop)
    return tirx.BufferLoad(buf, vars_)


def _mentions(e: Any, var: Any) -> bool:
    from tvm import tirx

    found: list[Any] = []
    tirx.stmt_functor.post_order_visit(tirx.Evaluate(e), lambda n: found.append(n) if isinstance(n, tirx.Var) and n.same_as(var) else None)
    return bool(found)
