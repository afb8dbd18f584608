"""Tile ops with no vector form on the TPU, lowered to per-element loops: ``T.cummax``/
``T.cummin``-style scans, ``T.reduce_bitxor``/``bitand``/``bitor``, and ``T.transpose``
(a DMA transpose when both sides are 2-D local tiles of one dtype, per-element otherwise).

Each builds the TIR loop nest that the op means and hands it to the statement walker
(``EmitContext.walk``), so the elements are read and written by the scalar unit exactly as
a user's ``T.serial`` loop would be (:mod:`tilelang_tpu.codegen.emit.elements`): correct
for every element type the scalar unit has, one element at a time (a performance note).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tilelang_tpu.codegen.ir import region, same_exprs

if TYPE_CHECKING:
    from tilelang_tpu.codegen.context import EmitContext

__all__ = ["BIT_REDUCTIONS", "emit_bit_reduce", "emit_cummax", "emit_fill_elements", "emit_im2col", "emit_transpose", "per_element_loop"]

#: ``T.reduce_<kind>`` kinds lowered here -> (TIR op of one step, identity).
BIT_REDUCTIONS = {"bitxor": ("bitwise_xor", 0), "bitor": ("bitwise_or", 0), "bitand": ("bitwise_and", -1)}


def _nest(extents: list[Any], body_of: Any, names: str = "ijkl") -> Any:
    """Serial loops over ``extents`` (outermost first) around ``body_of(vars)``."""
    from tvm import tirx

    loop_vars = [tirx.Var(f"e{names[a]}", "int32") for a in range(len(extents))]
    body = body_of(loop_vars)
    for var, extent in reversed(list(zip(loop_vars, extents, strict=True))):
        body = tirx.For(var, tirx.const(0, "int32"), extent, tirx.ForKind.SERIAL, body)
    return body


def _walk(em: EmitContext, stmt: Any) -> None:
    assert em.walk is not None, "the statement walker sets EmitContext.walk"
    em.walk(stmt)


def emit_cummax(em: EmitContext, call: Any) -> None:
    """``T.cummax(src, dst, dim, reverse)``: ``dst`` along ``dim`` is the running maximum of ``src``."""
    from tvm import tirx

    src, smin, sext = region(call.args[0])
    dst, dmin, _ = region(call.args[1])
    dim, reverse = int(call.args[2]), bool(int(call.args[3]))
    rank = len(sext)
    if dim < 0:
        dim += rank
    n = sext[dim]
    others = [sext[a] for a in range(rank) if a != dim]

    def body_of(vs: list[Any]) -> Any:
        outer, k = vs[:-1], vs[-1]
        pos = n - 1 - k if reverse else k
        prev = pos + 1 if reverse else pos - 1

        def at(mins: list[Any], p: Any) -> list[Any]:
            it = iter(outer)
            return [mins[a] + (p if a == dim else next(it)) for a in range(rank)]

        value = tirx.BufferLoad(src, at(smin, pos))
        running = tirx.Max(tirx.BufferLoad(dst, at(dmin, prev)), value)
        return tirx.IfThenElse(
            tirx.EQ(k, tirx.const(0, "int32")), tirx.BufferStore(dst, value, at(dmin, pos)), tirx.BufferStore(dst, running, at(dmin, pos))
        )

    _walk(em, _nest([*others, n], body_of))


def emit_bit_reduce(em: EmitContext, call: Any) -> None:
    """``T.reduce_bitxor/bitor/bitand(src, dst, dim, clear)`` of an integer tile."""
    from tvm import tirx

    src, smin, sext = region(call.args[0])
    dst, dmin, _ = region(call.args[1])
    kind, dim, clear = str(call.args[2].value), int(call.args[3]), bool(int(call.args[4]))
    step, identity = BIT_REDUCTIONS[kind]
    if not str(src.dtype).startswith(("int", "uint")):
        raise em.fail(f"T.reduce_{kind} of a {src.dtype} tile", hint=f"T.reduce_{kind} takes integer tiles")
    rank = len(sext)
    if dim < 0:
        dim += rank
    kept = [a for a in range(rank) if a != dim]
    op = getattr(tirx, step)

    def body_of(vs: list[Any]) -> Any:
        out = [dmin[i] + v for i, v in enumerate(vs)] if len(dmin) == len(vs) else [dmin[0] + vs[0]]
        k = tirx.Var("ek", "int32")
        src_index = []
        it = iter(vs)
        for a in range(rank):
            src_index.append(smin[a] + (k if a == dim else next(it)))
        acc = tirx.BufferLoad(dst, out)
        update = tirx.BufferStore(dst, op(acc, tirx.BufferLoad(src, src_index)), out)
        loop = tirx.For(k, tirx.const(0, "int32"), sext[dim], tirx.ForKind.SERIAL, update)
        if not clear:
            return loop
        return tirx.SeqStmt([tirx.BufferStore(dst, tirx.const(identity, str(dst.dtype)), out), loop])

    _walk(em, _nest([sext[a] for a in kept] or [tirx.const(1, "int32")], body_of) if kept else body_of([]))


def emit_transpose(em: EmitContext, call: Any) -> None:
    """``T.transpose(src, dst)``: ``dst[j, i] = src[i, j]``."""
    from tvm import tirx

    src, smin, sext = region(call.args[0])
    dst, dmin, dext = region(call.args[1])
    if len(sext) != 2 or len(dext) != 2:
        raise em.fail("T.transpose of other than 2-D regions", hint="transpose 2-D tiles")
    st, dt = em.tiles.get(src.data), em.tiles.get(dst.data)
    if (
        st is not None
        and dt is not None
        and st is not dt
        and st.layout == "lanes"
        and dt.layout == "lanes"
        and st.dtype == dt.dtype
        and em.full_local(st, smin, sext)
        and em.full_local(dt, dmin, dext)
    ):
        em.emit(f"dma::transpose_cw({dt.name}, {st.name});")
        return
    _walk(
        em,
        _nest(
            list(sext),
            lambda vs: tirx.BufferStore(dst, tirx.BufferLoad(src, [smin[0] + vs[0], smin[1] + vs[1]]), [dmin[0] + vs[1], dmin[1] + vs[0]]),
        ),
    )


def per_element_loop(em: EmitContext, loop: Any) -> Any:
    """``loop`` (a ``T.Parallel`` nest the vector path refused) as serial loops of per-element
    code, or ``None`` when the scalar unit cannot run it (an fp16/bf16/int64 element, a tile
    op inside).  Running the iterations of a ``T.Parallel`` one after another is one of its
    valid schedules, so the results are those of the vector path where it applies (fp16/bf16
    elements through fp32: codegen.emit.half_elements).  Fresh loop
    variables keep the refused attempt's bindings apart."""
    from tvm import tirx

    from tilelang_tpu.codegen.emit.elements import SCALAR_DTYPES
    from tilelang_tpu.codegen.emit.half_elements import HALF_DTYPES

    ok = [True]

    def check(node: Any) -> None:
        if isinstance(node, (tirx.BufferLoad, tirx.BufferStore)):
            scalar = str(node.buffer.dtype) in SCALAR_DTYPES or str(node.buffer.dtype) in HALF_DTYPES
            if (node.buffer.data not in em.scalars and not scalar) or (
                node.buffer.data not in em.scalars and node.buffer.data not in em.tiles and node.buffer.data not in em.globals_
            ):
                ok[0] = False
        elif isinstance(node, tirx.Call) and str(getattr(node.op, "name", "")).startswith("tl.tileop."):
            ok[0] = False

    tirx.stmt_functor.post_order_visit(loop, check)
    if not ok[0] or _reads_what_another_iteration_writes(loop):
        return None

    def serial(node: Any) -> Any:
        if isinstance(node, tirx.For) and node.kind == tirx.ForKind.PARALLEL:
            var = tirx.Var(node.loop_var.name, node.loop_var.dtype)
            body = tirx.stmt_functor.substitute(node.body, {node.loop_var: var})
            return tirx.For(var, node.min, node.extent, tirx.ForKind.SERIAL, body)
        return None

    return tirx.stmt_functor.ir_transform(loop, None, serial, ["tirx.For"])


def _reads_what_another_iteration_writes(loop: Any) -> bool:
    """Whether the nest loads a buffer it stores to at other indices (``a[j, i] = a[i, j]``).

    The iterations of such a ``T.Parallel`` are not independent: one order of them is not one
    of its valid schedules (an in-place transpose run in order mirrors the lower triangle), so
    it keeps the vector path's named refusal.
    """
    from tvm import tirx

    stores: dict[Any, list[Any]] = {}
    loads: list[Any] = []

    def visit(node: Any) -> None:
        if isinstance(node, tirx.BufferStore):
            stores.setdefault(node.buffer.data, []).append(list(node.indices))
        elif isinstance(node, tirx.BufferLoad):
            loads.append(node)

    tirx.stmt_functor.post_order_visit(loop, visit)
    for load in loads:
        for indices in stores.get(load.buffer.data, []):
            # same_exprs, not structural_equal: that equates x[i, p0[j]] with x[i, p1[j]] (two index
            # tiles of one shape), and a T.Parallel whose iterations read each other's writes ran in order.
            if not same_exprs(list(load.indices), indices):
                return True
    return False


def emit_fill_elements(em: EmitContext, call: Any) -> None:
    """``T.fill(G[region], v)`` of a global tensor: per-element stores of ``v`` over the region."""
    from tvm import tirx

    buf, mins, extents = region(call.args[0])
    value = call.args[1]
    if str(value.dtype) != str(buf.dtype):
        value = tirx.Cast(str(buf.dtype), value)
    # (The element stores drop what lies outside the tensor: codegen.emit.elements.global_access.)
    _walk(em, _nest(list(extents), lambda vs: tirx.BufferStore(buf, value, [m + v for m, v in zip(mins, vs, strict=True)])))


def emit_im2col(em: EmitContext, call: Any) -> None:
    """``T.im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad)``: ``col[i, j]`` is the
    NHWC image element that output pixel ``nhw_step * BM + i`` reads at filter position
    ``c_step * BK + j`` (``(kh, kw, c)``, channels fastest), 0 in the padding -- tilelang's own
    definition of the op, element by element."""
    from tvm import tirx

    img, _, _ = region(call.args[0])
    col, cmin, cext = region(call.args[1])
    nhw_step, c_step = call.args[2], call.args[3]
    kernel, stride, dilation, pad = (int(a) for a in call.args[4:8])
    if len(img.shape) != 4 or len(cext) < 2:
        raise em.fail("T.im2col of other than a 4-D NHWC image into a 2-D tile", hint="pass the image as [N, H, W, C]")
    h, w, c = img.shape[1], img.shape[2], img.shape[3]
    out_h = tirx.floordiv(h + 2 * pad - (kernel - 1) * dilation - 1, stride) + 1
    out_w = tirx.floordiv(w + 2 * pad - (kernel - 1) * dilation - 1, stride) + 1
    block_m, block_k = cext[-2], cext[-1]

    def body_of(vs: list[Any]) -> Any:
        i, j = vs
        m, k = nhw_step * block_m + i, c_step * block_k + j
        ah = tirx.floordiv(tirx.floormod(m, out_h * out_w), out_w) * stride + tirx.floordiv(k, kernel * c) * dilation - pad
        aw = tirx.floormod(m, out_w) * stride + tirx.floormod(tirx.floordiv(k, c), kernel) * dilation - pad
        inside = tirx.all(ah >= 0, aw >= 0, ah < h, aw < w)
        index = [cmin[d] + (i if d == len(cext) - 2 else j if d == len(cext) - 1 else 0) for d in range(len(cext))]
        value = tirx.BufferLoad(img, [tirx.floordiv(m, out_h * out_w), ah, aw, tirx.floormod(k, c)])
        zero = tirx.BufferStore(col, tirx.const(0, str(col.dtype)), index)
        return tirx.IfThenElse(inside, tirx.BufferStore(col, value, index), zero)

    _walk(em, _nest([block_m, block_k], body_of))
