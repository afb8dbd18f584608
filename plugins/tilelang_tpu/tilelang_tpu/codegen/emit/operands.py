"""The expressions of a ``T.Parallel`` assignment, compiled to tile operations over its
domain: tile loads (whole, partial, per-row and per-column broadcasts), scalars, casts,
binary arithmetic, element-wise functions and selects."""

from __future__ import annotations

from typing import Any

from tilelang_tpu.codegen.emit.cast import emit_cast
from tilelang_tpu.codegen.emit.domain import ParallelDomain
from tilelang_tpu.codegen.emit.ops import UNARY_EXTERN, UNARY_OPS, WRAPPERS, constant_scale
from tilelang_tpu.codegen.emit.select import emit_select
from tilelang_tpu.codegen.ir import as_float, op_name, same_index
from tilelang_tpu.codegen.layout import DTYPES, FLOAT_DTYPES, broadcast_strides, offset4
from tilelang_tpu.codegen.values import Operand, Tile

__all__ = ["ParallelBody"]


class ParallelBody(ParallelDomain):
    """Compiles one ``T.Parallel`` assignment into tile ops over the loop domain."""

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
            emit_cast(em, out, src.text, dtype, src.dtype, self.temp)
            return None if out == dst else Operand(out, dtype, True)
        binary = {tirx.Add: "fadd", tirx.Sub: "fsub", tirx.Mul: "fmul", tirx.Div: "fdiv", tirx.Max: "fmax", tirx.Min: "fmin"}
        for cls, fn in binary.items():
            if isinstance(e, cls):
                return self.binary(fn, e, dst)
        if isinstance(e, tirx.Call) and op_name(e) == "tirx.if_then_else":
            return emit_select(self, e, dst)
        if isinstance(e, tirx.Call):
            op = op_name(e)
            unary = UNARY_OPS.get(op)
            args = list(e.args)
            if op in ("tirx.call_pure_extern", "tirx.call_extern") and args and isinstance(args[0], tirx.StringImm):
                # tilelang's device preparation (LowerIntrin) has turned T.exp into expf(...) etc.
                op = str(args[0].value)
                unary = UNARY_EXTERN.get(op)
                args = args[1:]
            if unary is not None and len(args) == 1:
                return self.unary(unary, e, dst, args[0])
            raise self.fail(
                f"call to {op} in a T.Parallel body",
                "supported element-wise functions: exp, exp2, log, log2, tanh and sigmoid (fp32), abs, sqrt, rsqrt",
            )
        raise self.fail(
            f"{type(e).__name__} in a T.Parallel body ({e})",
            "supported: + - * / max min, exp, abs, sqrt, rsqrt, casts, tile loads and scalars",
        )

    def column_broadcast(self, tile: Tile) -> Operand:
        """``w[j]`` in an ``(i, j)`` domain, ``w`` a 1-D tile in the ``row`` layout (one lane):
        ``tiu::broadcast`` copies it to one pass of the lanes, and a view with ``C`` stride 0
        repeats that pass over the row groups."""
        em = self.em
        _, c, _, w = self.dom4
        lanes = f"min({c}, LANE_NUM)"
        block = em.dim4var(["1", lanes, "1", w], "wb_block")
        copies = em.fresh("wb")
        em.emit(f"auto {copies} = make_tensor<{DTYPES[tile.dtype]}>({block}, {block});")
        source = tile.name
        if self.extents[1] != tile.shape[0]:
            part = em.dim4var(["1", "1", "1", w], "wpart")
            origin = em.dim4var(["0", "0", "0", "0"], "worigin")
            source = f"{tile.name}.sub_view({part}, {origin})"
        em.emit(f"tiu::broadcast({copies}, {source}, {lanes});")
        shape = em.dim4var(self.dom4, "wshape")
        stride = em.dim4var(broadcast_strides(["1", lanes, "1", w], DTYPES[tile.dtype], (1,)), "wstride")
        view = em.fresh("wcols")
        em.emit(f"auto &{view} = {copies}.view({shape}, {stride});")
        return Operand(view, tile.dtype, True)

    def binary(self, fn: str, e: Any, dst: str | None) -> Operand | None:
        em = self.em
        dtype = str(e.dtype)
        if dtype not in FLOAT_DTYPES:
            raise self.fail(f"{dtype} arithmetic in a T.Parallel body", "tile arithmetic is supported for fp32, fp16 and bf16")
        a = self.compute(e.a, None)
        b = self.compute(e.b, None)
        assert a is not None and b is not None
        out = self.output(dtype, dst)
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
        scale = 1.0
        if fn in WRAPPERS and WRAPPERS[fn][1] is not None:
            # exp2(x * c) multiplies the tile once, by c * ln 2, instead of by c and then by ln 2.
            arg, scale = constant_scale(arg)
        src = self.compute(arg, None)
        assert src is not None
        out = self.output(dtype, dst)
        if fn in WRAPPERS:
            # PPL's wrapper functions (ppl_wrapper_func.h) take the block and real shapes.
            wrapper, pre, post, dtypes = WRAPPERS[fn]
            if dtype not in dtypes:
                raise self.fail(f"T.{fn} of {dtype} in a T.Parallel body", f"PPL has it for {', '.join(dtypes)}; cast to float32 first")
            block = self.temp_block()
            operand = src.text
            if pre is not None:  # exp2(x) = exp(x * ln 2)
                operand = self.temp(dtype)
                em.emit(f"tiu::fmul({operand}, {src.text}, {pre * scale!r}f);")
            target = out if post is None else self.temp(dtype)
            em.emit(f"{wrapper}({target}, {operand}, &{block}, &{block});")
            if post is not None:  # log2(x) = log(x) / ln 2
                em.emit(f"tiu::fmul({out}, {target}, {post!r}f);")
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
        column = (
            tile.layout == "row"
            and self.dst_tile.layout == "lanes"
            and len(self.index) == 2
            and len(idx) == 1
            and isinstance(self.index[1], tirx.Var)
            and same_index(idx[0], self.index[1])
            and self.extents[1] <= tile.shape[0]
        )
        if column:
            return self.column_broadcast(tile)
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
