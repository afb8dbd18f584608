"""Index tiles of a ``T.Parallel`` domain: fp32 tiles holding the value of an integer
expression of the loop variables at every element (masks compare them), and the causal
mask's index tile hoisted to the kernel's start."""

from __future__ import annotations

from typing import Any

from tilelang_tpu.codegen.emit.domain import ParallelDomain
from tilelang_tpu.codegen.layout import broadcast_strides

__all__ = ["axis_tile", "hoisted_difference", "index_tile"]

#: A hoisted mask's scalar offset is clamped to +-this (its index tile stays far below it).
_HOIST_CLAMP = 1 << 20


def hoisted_difference(ctx: ParallelDomain, e: Any, threshold: str) -> tuple[str, str] | None:
    """``e > threshold`` as ``index > limit``: ``e`` split into a linear combination of the
    T.Parallel variables with constant coefficients (``i - j``) plus a scalar part ``s``
    that carries the block and loop indices and offsets (``bx * 128 - k * 128``).  The
    index tile depends on no kernel variable, so it is built once at the start of the
    kernel (:meth:`EmitContext.hoisted`); in the loop only the scalar limit
    ``threshold - s`` is computed.  Returns (index tile, C expression of the limit), or
    None when ``e`` is not of that form (the mask is then built where it is used).

    ``s`` is clamped to ``[-2^20, 2^20]`` first: the index tile's values are far smaller,
    so the comparison is the same (always true or always false beyond), and
    ``threshold - s`` is then an exact fp32 value (a half-integer below 2^21).
    """
    from tvm import tirx

    terms = _linear(ctx, e)
    if terms is None:
        return None
    coefficients, scalar = terms
    dims: dict[int, int] = {}
    for var, c in coefficients:
        positions = [d for d, idx in enumerate(ctx.index) if isinstance(idx, tirx.Var) and idx.same_as(var)]
        if not positions:
            return None
        dims[positions[0]] = dims.get(positions[0], 0) + c
    terms_by_dim = sorted((d, c) for d, c in dims.items() if c != 0)
    if not terms_by_dim or sum(abs(c) * ctx.extents[d] for d, c in terms_by_dim) >= _HOIST_CLAMP:
        return None
    if ctx.dst_tile.layout != "lanes" or len(ctx.index) > 2:
        return None
    em = ctx.em
    key = ("mask-index", tuple(ctx.dom4), tuple(terms_by_dim))

    def build() -> str:
        scratch = ParallelDomain(em, ctx.loop_vars, ctx.index, ctx.extents, ctx.offsets, ctx.dst_tile, ctx.loop)
        block = em.dim4var(ctx.dom4, "mask_block")
        out = em.fresh("mask_index")
        em.emit(f"auto {out} = make_tensor<fp32>({block}, {block});")
        em.emit("{")
        em.indent += 1
        (d0, c0), rest = terms_by_dim[0], terms_by_dim[1:]
        first = axis_tile(scratch, d0)
        if rest and c0 == 1 and rest[0][1] == -1:
            em.emit(f"tiu::fsub({out}, {first}, {axis_tile(scratch, rest[0][0])});")
            rest = rest[1:]
        elif c0 == 1:
            em.emit(f"tiu::move({out}, {first});")
        else:
            em.emit(f"tiu::fmul({out}, {first}, (float)({c0}));")
        for d, c in rest:
            axis = axis_tile(scratch, d)
            if c in (1, -1):
                em.emit(f"tiu::{'fadd' if c == 1 else 'fsub'}({out}, {out}, {axis});")
            else:
                scaled = scratch.temp("float32")
                em.emit(f"tiu::fmul({scaled}, {axis}, (float)({c}));")
                em.emit(f"tiu::fadd({out}, {out}, {scaled});")
        em.indent -= 1
        em.emit("}")
        return out

    tile = em.hoisted(key, build)
    if scalar is None:
        return tile, threshold
    dtype = str(scalar.dtype)
    bound = tirx.IntImm(dtype, _HOIST_CLAMP)
    clamped = tirx.Min(tirx.Max(scalar, tirx.IntImm(dtype, -_HOIST_CLAMP)), bound)
    return tile, f"{threshold} - (float)({em.expr(clamped)})"


def _linear(ctx: ParallelDomain, e: Any) -> tuple[list[tuple[Any, int]], Any] | None:
    """``e`` as (``[(T.Parallel variable, coefficient)]``, scalar part or None), for sums,
    differences and products by integer constants; None if ``e`` is of another form."""
    from tvm import tirx

    if not ctx.uses_loop_vars(e):
        return [], e
    if isinstance(e, tirx.Var):
        return [(e, 1)], None
    if isinstance(e, (tirx.Add, tirx.Sub)):
        left, right = _linear(ctx, e.a), _linear(ctx, e.b)
        if left is None or right is None:
            return None
        sign = 1 if isinstance(e, tirx.Add) else -1
        coefficients = left[0] + [(v, sign * c) for v, c in right[0]]
        a, b = left[1], right[1]
        if a is not None and b is not None and str(a.dtype) != str(b.dtype):
            return None
        if b is None:
            scalar = a
        elif a is None:
            scalar = b if sign == 1 else tirx.Sub(tirx.IntImm(str(b.dtype), 0), b)
        else:
            scalar = tirx.Add(a, b) if sign == 1 else tirx.Sub(a, b)
        return coefficients, scalar
    if isinstance(e, tirx.Mul):
        for factor, other in ((e.a, e.b), (e.b, e.a)):
            if isinstance(factor, tirx.IntImm):
                inner = _linear(ctx, other)
                if inner is None or inner[1] is not None:
                    return None
                return [(v, c * int(factor.value)) for v, c in inner[0]], None
    return None


def index_tile(ctx: ParallelDomain, e: Any) -> str:
    """An fp32 tile over the domain holding the integer expression ``e`` of the loop
    variables and scalars (+, -, and * by a scalar)."""
    from tvm import tirx

    em = ctx.em
    if not ctx.uses_loop_vars(e):
        t = ctx.temp("float32")
        em.emit(f"tiu::fill({t}, (float)({em.expr(e)}));")
        return t
    if isinstance(e, tirx.Var):
        dims = [d for d, idx in enumerate(ctx.index) if isinstance(idx, tirx.Var) and idx.same_as(e)]
        if not dims:
            raise ctx.fail(f"index {e} in a T.if_then_else condition that the store does not use")
        return axis_tile(ctx, dims[0])
    if isinstance(e, (tirx.Add, tirx.Sub, tirx.Mul)):
        fn = {tirx.Add: "fadd", tirx.Sub: "fsub", tirx.Mul: "fmul"}[type(e)]
        sides = []
        for side in (e.a, e.b):
            sides.append(index_tile(ctx, side) if ctx.uses_loop_vars(side) else None)
        out = ctx.temp("float32")
        if sides[0] is not None and sides[1] is not None:
            em.emit(f"tiu::{fn}({out}, {sides[0]}, {sides[1]});")
        elif sides[0] is not None:
            em.emit(f"tiu::{fn}({out}, {sides[0]}, (float)({em.expr(e.b)}));")
        elif fn == "fsub":
            em.emit(f"tiu::{fn}({out}, (float)({em.expr(e.a)}), {sides[1]});")
        else:
            em.emit(f"tiu::{fn}({out}, {sides[1]}, (float)({em.expr(e.a)}));")
        return out
    raise ctx.fail(f"index expression {e} in a T.if_then_else condition", "use +, - and * of loop indices and scalars")


def axis_tile(ctx: ParallelDomain, dim: int) -> str:
    """fp32 tile over the domain holding the index along destination dim ``dim``.

    Along ``W`` (the last dim of a 2-D tile): PPL's serial-number table
    (``arange_broadcast``) in every lane.  Along ``C`` (rows): the same table on one
    lane, transposed onto the lanes (``tiu::transpose_wc``), then broadcast along ``W``
    with a stride-0 view that keeps the real row-group stride.
    """
    em = ctx.em
    if dim in ctx.axis_tiles:
        return ctx.axis_tiles[dim]
    if ctx.dst_tile.layout != "lanes" or len(ctx.index) > 2:
        raise ctx.fail("a T.if_then_else mask over a tile of rank > 2 or an fp32 T.gemm operand")
    _, c, _, w = ctx.dom4
    along_w = len(ctx.index) == 2 and dim == 1
    lanes = f"min({c}, LANE_NUM)"  # PPL's table and transpose instructions span one pass of the lanes
    if along_w:
        # The column index is the same in every row: build it on one pass of the lanes
        # and repeat that pass over the row groups with a C stride of 0.
        block = em.dim4var(["1", lanes, "1", w], "iw_block")
        ints, cols = em.fresh("iw"), em.fresh("iwf")
        em.emit(f"auto {ints} = make_tensor<int32>({block}, {block});")
        em.emit(f"arange_broadcast({ints}, {lanes}, 0, 1, {w});")
        em.emit(f"auto {cols} = make_tensor<fp32>({block}, {block});")
        em.emit(f"tiu::cast({cols}, {ints});")
        shape = em.dim4var(ctx.dom4, "iwshape")
        stride = em.dim4var(broadcast_strides(["1", lanes, "1", w], "fp32", (1,)), "iwstride")
        out = em.fresh("icols")
        em.emit(f"auto &{out} = {cols}.view({shape}, {stride});")
    else:
        # Lane index 0..63 (a serial-number row transposed onto the lanes), then + 64 g
        # for row group g.
        row_shape = em.dim4var(["1", "1", "1", lanes], "irow_shape")
        lane_shape = em.dim4var(["1", lanes, "1", "1"], "ilane_shape")
        col_shape = em.dim4var(["1", c, "1", "1"], "icol_shape")
        row, lane, lanef, colf = em.fresh("irow"), em.fresh("ilane"), em.fresh("ilanef"), em.fresh("icolf")
        em.emit(f"auto {row} = make_tensor<int32>({row_shape}, {row_shape});")
        em.emit(f"arange_broadcast({row}, 1, 0, 1, {lanes});")
        em.emit(f"auto {lane} = make_tensor<int32>({lane_shape}, {lane_shape});")
        em.emit(f"tiu::transpose_wc({lane}, {row});")
        em.emit(f"auto {lanef} = make_tensor<fp32>({lane_shape}, {lane_shape});")
        em.emit(f"tiu::cast({lanef}, {lane});")
        em.emit(f"auto {colf} = make_tensor<fp32>({col_shape}, {col_shape});")
        group = em.fresh("g")
        em.emit(f"for (int {group} = 0; {group} < {c}; {group} += LANE_NUM) {{")
        em.emit(f"  dim4 {group}_shape = {{1, min(LANE_NUM, {c} - {group}), 1, 1}};")
        em.emit(f"  dim4 {group}_offset = {{0, {group}, 0, 0}};")
        em.emit(f"  tiu::fadd({colf}.sub_view({group}_shape, {group}_offset), {lanef}.view({group}_shape), (float){group});")
        em.emit("}")
        if w == "1":
            out = colf
        else:
            shape = em.dim4var(ctx.dom4, "ishape")
            stride = em.dim4var(broadcast_strides(["1", c, "1", "1"], "fp32", (3,)), "istride")
            out = em.fresh("irows")
            em.emit(f"auto &{out} = {colf}.view({shape}, {stride});")
    ctx.axis_tiles[dim] = out
    return out
