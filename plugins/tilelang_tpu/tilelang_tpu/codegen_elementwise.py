"""T.Parallel element-wise bodies: one TIU instruction per operation over the loop domain,
with scalar operands, casts, unary functions and per-row broadcasts."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tilelang_tpu.codegen_ir import CodegenError, Operand, Tile, as_float, is_const, is_zero, op_name, same_index, same_var
from tilelang_tpu.codegen_layout import DTYPES, FLOAT_DTYPES, broadcast_strides, offset4, to4

if TYPE_CHECKING:
    from tilelang_tpu.codegen_emit import Emitter

__all__ = ['elementwise', 'emit_parallel']


def emit_parallel(em: Emitter, loop: Any) -> None:
    from tvm import tirx

    loops = []
    body = loop
    while isinstance(body, tirx.For) and body.kind == tirx.ForKind.PARALLEL:
        if not is_zero(body.min) or not is_const(body.extent):
            raise em.fail("T.Parallel loop with a non-zero start or a symbolic extent", loop)
        loops.append(body)
        body = body.body
    stores = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
    loop_vars = [lp.loop_var for lp in loops]
    extents = [int(lp.extent) for lp in loops]
    for store in stores:
        if not isinstance(store, tirx.BufferStore):
            raise em.fail(
                f"{type(store).__name__} inside T.Parallel",
                loop,
                hint="a T.Parallel body must be tile element assignments c[i, j] = expr",
            )
        elementwise(em, store, loop_vars, extents, loop)


def elementwise(em: Emitter, store: Any, loop_vars: list[Any], extents: list[int], loop: Any) -> None:
    from tvm import tirx

    tile = em.tiles.get(store.buffer.data)
    if tile is None:
        raise em.fail(
            f"T.Parallel store to {store.buffer.name}, which is not a local tile",
            loop,
            hint="compute into a tile, then T.copy it to global memory",
        )
    # The store's index per tile dimension: a T.Parallel variable (the whole loop
    # extent) or a constant (one element there; tilelang drops a T.Parallel loop of
    # extent 1 and writes its index as 0, e.g. over a 1-row tile).
    index = list(store.indices)
    vars_in_order = [i for i in index if isinstance(i, tirx.Var)]
    valid = (
        len(index) == len(tile.shape)
        and all(isinstance(i, (tirx.Var, tirx.IntImm)) for i in index)
        and len(vars_in_order) == len(loop_vars)
        and all(same_var(i, v) for i, v in zip(vars_in_order, loop_vars, strict=True))
    )
    if not valid:
        raise em.fail(
            f"T.Parallel store {store.buffer.name}[{', '.join(map(str, index))}] not indexed by the loop variables in order",
            loop,
            hint="write c[i, j] = ... with the T.Parallel variables as the indices",
        )
    loop_extent = dict(zip((v.name for v in loop_vars), extents, strict=True))
    dom_ext = [loop_extent[i.name] if isinstance(i, tirx.Var) else 1 for i in index]
    dom_off = [0 if isinstance(i, tirx.Var) else int(i) for i in index]
    if any(o + e > s for o, e, s in zip(dom_off, dom_ext, tile.shape, strict=True)):
        raise em.fail(f"T.Parallel store {store.buffer.name}[{', '.join(map(str, index))}] outside the tile {list(tile.shape)}", loop)
    if tuple(dom_ext) != tile.shape:
        dom = em.dim4var(to4([str(e) for e in dom_ext], tile.layout), "dom")
        origin = em.dim4var(offset4([str(o) for o in dom_off], tile.layout), "origin")
        dst = f"{tile.name}.sub_view({dom}, {origin})"
    else:
        dst = tile.name
    ctx = _Elementwise(em, loop_vars, index, dom_ext, dom_off, tile, loop)
    result = ctx.compute(store.value, dst)
    if result is not None:
        if result.is_tile:
            if result.dtype != tile.dtype:
                em.emit(f"tiu::cast({dst}, {result.text});")
            else:
                em.emit(f"tiu::move({dst}, {result.text});")
        else:
            em.emit(f"tiu::fill({dst}, {result.text});")


class _Elementwise:
    """Compiles one ``T.Parallel`` assignment into tile ops over the loop domain."""

    def __init__(
        self, em: Emitter, loop_vars: list[Any], index: list[Any], dom_ext: list[int], dom_off: list[int], dst_tile: Tile, loop: Any
    ) -> None:
        self.em = em
        self.loop_vars = loop_vars
        self.index = index  # the destination's index per tile dim: loop variable or constant
        self.extents = dom_ext  # the domain's extent per destination tile dim
        self.offsets = dom_off  # and its offset (non-zero only at a constant index)
        self.dst_tile = dst_tile
        self.loop = loop
        self.dom4 = to4([str(e) for e in dom_ext], dst_tile.layout)
        self.block = None

    def fail(self, what: str, hint: str = "") -> CodegenError:
        return self.em.fail(what, self.loop, hint)

    def temp(self, dtype: str) -> str:
        em = self.em
        if self.block is None:
            self.block = em.dim4var(self.dom4, "ew")
        name = em.fresh("t")
        em.emit(f"auto {name} = make_tensor<{DTYPES[dtype]}>({self.block}, {self.block});")
        return name

    def uses_loop_vars(self, e: Any) -> bool:
        from tvm import tirx

        found = []

        def visit(n: Any) -> None:
            if isinstance(n, tirx.Var) and any(n.same_as(v) for v in self.loop_vars):
                found.append(n)
            if isinstance(n, tirx.BufferLoad) and n.buffer.data in self.em.tiles:
                found.append(n)

        tirx.stmt_functor.post_order_visit(tirx.Evaluate(e), visit)
        return bool(found)

    def compute(self, e: Any, dst: str | None) -> Operand | None:
        """Compute ``e``; write it into ``dst`` when given (returns None), else return an operand."""
        from tvm import tirx

        em = self.em
        if not self.uses_loop_vars(e):
            return Operand(em.expr(e), str(e.dtype), False)
        if isinstance(e, tirx.BufferLoad):
            return self.load(e)
        if isinstance(e, tirx.Cast):
            src = self.compute(e.value, None)
            assert src is not None
            dtype = str(e.dtype)
            if dtype not in FLOAT_DTYPES or src.dtype not in FLOAT_DTYPES:
                raise self.fail(f"cast {src.dtype} -> {dtype} in a T.Parallel body", "casts between fp32, fp16 and bf16 are supported")
            if dtype == src.dtype:
                return src
            out = dst if dst is not None and self.dst_tile.dtype == dtype else self.temp(dtype)
            em.emit(f"tiu::cast({out}, {src.text});")
            return None if out == dst else Operand(out, dtype, True)
        binary = {tirx.Add: "fadd", tirx.Sub: "fsub", tirx.Mul: "fmul", tirx.Div: "fdiv", tirx.Max: "fmax", tirx.Min: "fmin"}
        for cls, fn in binary.items():
            if isinstance(e, cls):
                return self.binary(fn, e, dst)
        if isinstance(e, tirx.Call):
            op = op_name(e)
            unary = _UNARY_OPS.get(op)
            args = list(e.args)
            if op in ("tirx.call_pure_extern", "tirx.call_extern") and args and isinstance(args[0], tirx.StringImm):
                # tilelang's device preparation (LowerIntrin) has turned T.exp into expf(...) etc.
                op = str(args[0].value)
                unary = _UNARY_EXTERN.get(op)
                args = args[1:]
            if unary is not None and len(args) == 1:
                return self.unary(unary, e, dst, args[0])
            raise self.fail(f"call to {op} in a T.Parallel body", "supported element-wise functions: exp, abs, sqrt, rsqrt")
        raise self.fail(
            f"{type(e).__name__} in a T.Parallel body ({e})",
            "supported: + - * / max min, exp, abs, sqrt, rsqrt, casts, tile loads and scalars",
        )

    def _out(self, dtype: str, dst: str | None) -> str:
        if dst is not None and self.dst_tile.dtype == dtype:
            return dst
        return self.temp(dtype)

    def binary(self, fn: str, e: Any, dst: str | None) -> Operand | None:
        em = self.em
        dtype = str(e.dtype)
        if dtype not in FLOAT_DTYPES:
            raise self.fail(f"{dtype} arithmetic in a T.Parallel body", "tile arithmetic is supported for fp32, fp16 and bf16")
        a = self.compute(e.a, None)
        b = self.compute(e.b, None)
        assert a is not None and b is not None
        out = self._out(dtype, dst)
        if a.is_tile and b.is_tile:
            em.emit(f"tiu::{fn}({out}, {a.text}, {b.text});")
        elif a.is_tile:
            em.emit(f"tiu::{fn}({out}, {a.text}, {as_float(b.text)});")
        elif fn in ("fadd", "fmul", "fmax", "fmin"):
            em.emit(f"tiu::{fn}({out}, {b.text}, {as_float(a.text)});")
        else:  # scalar - tile, scalar / tile
            em.emit(f"tiu::{fn}({out}, {as_float(a.text)}, {b.text});")
        return None if out == dst else Operand(out, dtype, True)

    def unary(self, fn: str, e: Any, dst: str | None, arg: Any) -> Operand | None:
        em = self.em
        dtype = str(e.dtype)
        if dtype not in FLOAT_DTYPES:
            raise self.fail(f"{fn} of {dtype} in a T.Parallel body", "fp32, fp16 and bf16 are supported")
        src = self.compute(arg, None)
        assert src is not None
        out = self._out(dtype, dst)
        if fn == "exp":
            if self.block is None:
                self.block = em.dim4var(self.dom4, "ew")
            # PPL's range-reduced exp (ppl_wrapper_func.h): clamps, splits into 2^k * e^r.
            em.emit(f"fexp({out}, {src.text}, &{self.block}, &{self.block});")
        else:
            em.emit(f"tiu::{fn}({out}, {src.text});")
        return None if out == dst else Operand(out, dtype, True)

    def load(self, e: Any) -> Operand:
        from tvm import tirx

        em = self.em
        tile = em.tiles.get(e.buffer.data)
        if tile is None:
            if e.buffer.data in em.globals_:
                raise self.fail(
                    f"read of global tensor {e.buffer.name} inside T.Parallel",
                    "copy the tile to local memory with T.copy first",
                )
            raise self.fail(f"read of {e.buffer.name} inside T.Parallel")
        idx = list(e.indices)
        if tile.layout != self.dst_tile.layout:
            raise self.fail(
                f"element-wise operation mixing tile {e.buffer.name} ({tile.layout} layout) with {self.dst_tile.name} ({self.dst_tile.layout} layout)",
                "fp32 T.gemm operands keep whole rows in one lane; operate on them only together with other fp32 T.gemm operands",
            )
        # Same-domain operand: indexed exactly like the destination.
        if len(idx) == len(self.index) and all(same_index(i, d) for i, d in zip(idx, self.index, strict=True)):
            if tuple(self.extents) == tile.shape:
                return Operand(tile.name, tile.dtype, True)
            dom = em.dim4var(self.dom4, "dom")
            origin = em.dim4var(offset4([str(o) for o in self.offsets], tile.layout), "origin")
            return Operand(f"{tile.name}.sub_view({dom}, {origin})", tile.dtype, True)
        # Row vector broadcast along the last axis: x[i] or x[i, 0] in an (i, j) domain.
        rowvec = (
            len(self.index) == 2
            and isinstance(self.index[1], tirx.Var)
            and tile.layout == "lanes"
            and self.offsets[0] == 0
            and (
                (len(idx) == 1 and same_index(idx[0], self.index[0]))
                or (
                    len(idx) == 2
                    and same_index(idx[0], self.index[0])
                    and isinstance(idx[1], tirx.IntImm)
                    and int(idx[1]) == 0
                    and tile.shape[1] == 1
                )
            )
        )
        if rowvec and self.extents[0] <= tile.shape[0]:
            # A [rows, 1] tile seen as [rows, cols] with W stride 0: PPL reads each
            # lane's single element across the whole row.  The C stride stays the
            # tile's own: row r + 64 is in row r's lane, one aligned row group further.
            shape = em.dim4var(self.dom4, "bshape")
            stride = em.dim4var(broadcast_strides(tile.block, DTYPES[tile.dtype], (3,)), "bstride")
            view = em.fresh("bcast")
            em.emit(f"auto &{view} = {tile.name}.view({shape}, {stride});")
            return Operand(view, tile.dtype, True)
        raise self.fail(
            f"tile read {e.buffer.name}[{', '.join(map(str, idx))}] in a T.Parallel over ({', '.join(v.name for v in self.loop_vars)})",
            "operands must be indexed by the loop variables in order, or be a per-row vector x[i] broadcast along the row",
        )


_UNARY_OPS = {"tirx.exp": "exp", "tirx.fabs": "fabs", "tirx.sqrt": "fsqrt", "tirx.rsqrt": "frsqrt"}
_UNARY_EXTERN = {
    "expf": "exp",
    "exp": "exp",
    "__expf": "exp",
    "hexp": "exp",
    "fabsf": "fabs",
    "fabs": "fabs",
    "__habs": "fabs",
    "sqrtf": "fsqrt",
    "sqrt": "fsqrt",
    "hsqrt": "fsqrt",
    "rsqrtf": "frsqrt",
    "rsqrt": "frsqrt",
    "hrsqrt": "frsqrt",
}
