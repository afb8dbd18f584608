"""T.Parallel element-wise bodies: one TIU instruction per operation over the loop domain,
with scalar operands, casts, unary functions and per-row broadcasts."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tilelang_tpu.codegen_cast import emit_cast
from tilelang_tpu.codegen_copy import emit_tile_transpose
from tilelang_tpu.codegen_gather import WORD_PAIR_DTYPES, emit_global_read, reads_global
from tilelang_tpu.codegen_ir import CodegenError, Operand, Tile, as_float, is_const, is_zero, op_name, same_index, same_var
from tilelang_tpu.codegen_layout import DTYPES, FLOAT_DTYPES, broadcast_strides, offset4, to4
from tilelang_tpu.codegen_select import emit_select

if TYPE_CHECKING:
    from tilelang_tpu.codegen_emit import Emitter

__all__ = ["elementwise", "emit_parallel"]

#: A hoisted mask's scalar offset is clamped to +-this (its index tile stays far below it).
_HOIST_CLAMP = 1 << 20


def emit_parallel(em: Emitter, loop: Any) -> None:
    from tvm import tirx

    loops = []
    body = loop
    while isinstance(body, tirx.For) and body.kind == tirx.ForKind.PARALLEL:
        if not is_zero(body.min) or not is_const(body.extent):
            raise em.fail("T.Parallel loop with a non-zero start or a symbolic extent", loop)
        loops.append(body)
        body = body.body
    loop_vars = [lp.loop_var for lp in loops]
    extents = [int(lp.extent) for lp in loops]
    for store in _stores(em, body, loop):
        elementwise(em, store, loop_vars, extents, loop)


def _stores(em: Emitter, body: Any, loop: Any) -> list[Any]:
    """The assignments of a T.Parallel body, with temporaries bound inside it
    (``t = x[i, j] * 2``) substituted into the statements that use them."""
    from tvm import tirx

    # A temporary is a flat ``Bind`` statement or a ``LetStmt`` with a body, depending on the TVM build.
    bind_stmt: tuple[type[Any], ...] = tuple(getattr(tirx, name) for name in ("Bind",) if hasattr(tirx, name))
    let_stmt: tuple[type[Any], ...] = tuple(getattr(tirx, name) for name in ("LetStmt",) if hasattr(tirx, name))

    values: dict[Any, Any] = {}
    stale: set[str] = set()  # temporaries whose inputs a later store overwrote
    out: list[Any] = []
    pending = [body]
    while pending:
        stmt = pending.pop(0)
        if isinstance(stmt, tirx.SeqStmt):
            pending = list(stmt.seq) + pending
            continue
        for var in [v for v in values if v.name in stale and _mentions_var(stmt, v)]:
            raise em.fail(
                f"temporary {var.name} used after a store to a buffer it reads",
                loop,
                hint="bind the temporary after the store, or store into another tile",
            )
        if isinstance(stmt, bind_stmt):
            values[stmt.var] = tirx.stmt_functor.substitute(stmt.value, values)
        elif isinstance(stmt, let_stmt):
            values[stmt.var] = tirx.stmt_functor.substitute(stmt.value, values)
            pending.insert(0, stmt.body)
        elif isinstance(stmt, tirx.BufferStore):
            out.append(tirx.stmt_functor.substitute(stmt, values) if values else stmt)
            # Substitution re-reads a temporary's inputs where it is used: that is only its
            # bound value while no store in between overwrites them.
            stale.update(v.name for v, value in values.items() if _reads(value, stmt.buffer.data))
        else:
            raise em.fail(
                f"{type(stmt).__name__} inside T.Parallel",
                loop,
                hint="a T.Parallel body must be element assignments c[i, j] = expr (temporaries t = expr are allowed)",
            )
    return out


def elementwise(em: Emitter, store: Any, loop_vars: list[Any], extents: list[int], loop: Any) -> None:
    from tvm import tirx

    tile = em.tiles.get(store.buffer.data)
    if tile is None and store.buffer.data in em.globals_:
        _global_store(em, store, loop_vars, extents, loop)
        return
    if tile is not None and tile.dtype in WORD_PAIR_DTYPES:
        raise em.fail(f"T.Parallel store to {tile.dtype} tile {store.buffer.name}", loop, hint="compute integers in int32 tiles")
    if tile is not None and emit_tile_transpose(em, store, loop_vars, extents):
        return
    if tile is not None and reads_global(em, store.value):
        # A gather or strided load from global memory (codegen_gather).
        emit_global_read(em, store, tile, loop_vars, extents, loop)
        return
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
                emit_cast(em, dst, result.text, tile.dtype, result.dtype, ctx.temp)
            else:
                em.emit(f"tiu::move({dst}, {result.text});")
        else:
            em.emit(f"tiu::fill({dst}, {result.text});")


def _global_store(em: Emitter, store: Any, loop_vars: list[Any], extents: list[int], loop: Any) -> None:
    """A store to a global tensor inside T.Parallel, ``Mean[bx * BM + i] = mean[i]``
    (LayerNorm's per-row outputs): the value is computed into a tile over the loop
    domain, then one DMA stores it, clipped at the tensor's edge like ``T.copy``.

    Each global index must be ``offset + loop variable`` (the variables in order) or
    loop-invariant; the offset must not depend on the loop variables.
    """
    from tvm import tirx

    g = em.globals_[store.buffer.data]
    index = list(store.indices)
    offsets: list[Any] = []
    dom: list[int] = []
    used = []
    for idx in index:
        var = next((v for v in loop_vars if _mentions(idx, v)), None)
        if var is None:
            offsets.append(idx)
            dom.append(1)
            continue
        offset = em.analyzer.simplify(idx - var)
        if _mentions(offset, var) or any(_mentions(offset, v) for v in loop_vars):
            raise em.fail(
                f"T.Parallel store {store.buffer.name}[{', '.join(map(str, index))}] to global memory with index {idx}",
                loop,
                hint="index global stores as offset + loop variable, or compute into a tile and T.copy it",
            )
        offsets.append(offset)
        dom.append(extents[[v.name for v in loop_vars].index(var.name)])
        used.append(var)
    if len(used) != len(loop_vars) or any(not u.same_as(v) for u, v in zip(used, loop_vars, strict=True)):
        raise em.fail(
            f"T.Parallel store {store.buffer.name}[{', '.join(map(str, index))}] not indexed by every loop variable in order", loop
        )
    # Compute the value into a tile shaped like the loop domain (rows on lanes).
    shape = tuple(d for d in dom if d != 1) or (1,)
    name = em.fresh(f"{store.buffer.name}_out")
    block = em.dim4var(to4([str(d) for d in shape]), name + "_block")
    em.emit(f"auto {name} = make_tensor<{DTYPES[g.dtype]}>({block}, {block});")
    tile = Tile(name, g.dtype, shape, to4([str(d) for d in shape]))
    tile_index = [v for v in loop_vars] if len(shape) == len(loop_vars) else [tirx.const(0, "int32")]
    ctx = _Elementwise(em, loop_vars, tile_index, list(shape), [0] * len(shape), tile, loop)
    result = ctx.compute(store.value, name)
    if result is not None:
        if result.is_tile and result.dtype != g.dtype:
            emit_cast(em, name, result.text, g.dtype, result.dtype, ctx.temp)
        else:
            em.emit(f"tiu::{'move' if result.is_tile else 'fill'}({name}, {result.text});")
    real = []
    guards = []  # clipped extents that may be <= 0 (along a symbolic dimension, see codegen_dynamic)
    for axis, (off, d) in enumerate(zip(offsets, dom, strict=True)):
        size = g.extent(axis)
        if em.analyzer.can_prove(tirx.LE(off + d, size)):
            real.append(str(d))
            continue
        inside = em.analyzer.can_prove(tirx.LT(off, size))
        if not inside and (g.is_static or not em.analyzer.can_prove(tirx.GE(off, 0))):
            raise em.fail(f"T.Parallel store to {store.buffer.name} whose region may start outside it (at {off})", loop)
        n = em.fresh("n")
        em.emit(f"int {n} = min({d}, {em.expr(size)} - ({em.expr(off)}));")
        real.append(n)
        if not inside:
            guards.append(f"{n} > 0")
    gshape = em.dim4var(to4(real), "gshp")
    goff = em.dim4var(offset4([em.expr(o) for o in offsets]), "goff")
    lshape = em.dim4var(to4([r for r, d in zip(real, dom, strict=True) if d != 1] or ["1"]), "lshp")
    zero = em.dim4var(["0", "0", "0", "0"], "lzero")
    guard = f"if ({' && '.join(guards)}) " if guards else ""
    em.emit(
        f"{guard}dma::store({em.global_view(store.buffer.data, 'lanes')}.sub_view({gshape}, {goff}), {name}.sub_view({lshape}, {zero}));"
    )


def _reads(e: Any, data: Any) -> bool:
    from tvm import tirx

    found: list[Any] = []
    tirx.stmt_functor.post_order_visit(
        tirx.Evaluate(e), lambda n: found.append(n) if isinstance(n, tirx.BufferLoad) and n.buffer.data.same_as(data) else None
    )
    return bool(found)


def _mentions_var(stmt: Any, var: Any) -> bool:
    from tvm import tirx

    found: list[Any] = []
    tirx.stmt_functor.post_order_visit(stmt, lambda n: found.append(n) if isinstance(n, tirx.Var) and n.same_as(var) else None)
    return bool(found)


def _mentions(e: Any, var: Any) -> bool:
    from tvm import tirx

    found: list[Any] = []
    tirx.stmt_functor.post_order_visit(tirx.Evaluate(e), lambda n: found.append(n) if isinstance(n, tirx.Var) and n.same_as(var) else None)
    return bool(found)


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
        self.block: str | None = None  # the 4-D block of the temporaries, declared on first use
        self.axis_tiles: dict[int, str] = {}  # destination dim -> fp32 tile of its index

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
            unary = _UNARY_OPS.get(op)
            args = list(e.args)
            if op in ("tirx.call_pure_extern", "tirx.call_extern") and args and isinstance(args[0], tirx.StringImm):
                # tilelang's device preparation (LowerIntrin) has turned T.exp into expf(...) etc.
                op = str(args[0].value)
                unary = _UNARY_EXTERN.get(op)
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

    # ------------------------------------------------------------------ masks

    def select(self, e: Any, dst: str | None) -> Operand | None:
        """``T.if_then_else(cond, a, b)`` whose condition compares integer expressions of the
        loop (and block) indices: causal and sequence-length masks.

        The difference of the two sides is computed as an fp32 tile of exact integers
        (|values| < 2^24) from index tiles (:meth:`axis_tile`), then ``tiu::gt_select`` /
        ``tiu::lt_select`` pick ``a`` or ``b`` per element against a half-integer threshold.
        """
        from tvm import tirx

        em = self.em
        cond, a, b = e.args
        dtype = str(e.dtype)
        if dtype not in FLOAT_DTYPES:
            raise self.fail(f"T.if_then_else of {dtype} values in a T.Parallel body", "select between fp32, fp16 or bf16 values")
        compare = {
            tirx.GE: (False, "gt", "-0.5f"),
            tirx.GT: (False, "gt", "0.5f"),
            tirx.LE: (True, "gt", "-0.5f"),
            tirx.LT: (True, "gt", "0.5f"),
        }
        kind = next((v for k, v in compare.items() if isinstance(cond, k)), None)
        if isinstance(cond, (tirx.EQ, tirx.NE)):
            kind = (False, "lt" if isinstance(cond, tirx.EQ) else "gt", "0.5f")
        if kind is None or not all("int" in str(x.dtype) for x in (cond.a, cond.b)):
            raise self.fail(
                f"T.if_then_else condition {cond} in a T.Parallel body",
                "conditions compare integer expressions of the loop and block indices (<, <=, >, >=, ==, !=)",
            )
        swap, op, threshold = kind
        difference = tirx.Sub(cond.b, cond.a) if swap else tirx.Sub(cond.a, cond.b)
        hoisted = None if isinstance(cond, (tirx.EQ, tirx.NE)) else self.hoisted_difference(difference, threshold)
        if hoisted is not None:
            diff, limit_value = hoisted
        else:
            diff, limit_value = self.index_tile(difference), threshold
        if isinstance(cond, (tirx.EQ, tirx.NE)):
            absolute = self.temp("float32")
            em.emit(f"tiu::fabs({absolute}, {diff});")
            diff = absolute
        operands = []
        for value in (a, b):
            v = self.compute(value, None)
            assert v is not None
            if v.is_tile and v.dtype != "float32":
                t = self.temp("float32")
                emit_cast(em, t, v.text, "float32", v.dtype, self.temp)
                v = Operand(t, "float32", True)
            if not v.is_tile:  # the select takes its scalar operands by reference
                name = em.fresh("sel")
                em.emit(f"float {name} = {as_float(v.text)};")
                v = Operand(name, "float32", False)
            operands.append(v.text)
        limit = em.fresh("limit")
        em.emit(f"float {limit} = {limit_value};")
        out = self._out(dtype, dst) if dtype == "float32" else self.temp("float32")
        em.emit(f"tiu::{op}_select({out}, {diff}, {limit}, {operands[0]}, {operands[1]});")
        if dtype != "float32":
            final = self._out(dtype, dst)
            emit_cast(em, final, out, dtype, "float32", self.temp)
            out = final
        return None if out == dst else Operand(out, dtype, True)

    def hoisted_difference(self, e: Any, threshold: str) -> tuple[str, str] | None:
        """``e > threshold`` as ``index > limit``: ``e`` split into a linear combination of the
        T.Parallel variables with constant coefficients (``i - j``) plus a scalar part ``s``
        that carries the block and loop indices and offsets (``bx * 128 - k * 128``).  The
        index tile depends on no kernel variable, so it is built once at the start of the
        kernel (:meth:`Emitter.hoisted`); in the loop only the scalar limit
        ``threshold - s`` is computed.  Returns (index tile, C expression of the limit), or
        None when ``e`` is not of that form (the mask is then built where it is used).

        ``s`` is clamped to ``[-2^20, 2^20]`` first: the index tile's values are far smaller,
        so the comparison is the same (always true or always false beyond), and
        ``threshold - s`` is then an exact fp32 value (a half-integer below 2^21).
        """
        from tvm import tirx

        terms = self._linear(e)
        if terms is None:
            return None
        coefficients, scalar = terms
        dims: dict[int, int] = {}
        for var, c in coefficients:
            positions = [d for d, idx in enumerate(self.index) if isinstance(idx, tirx.Var) and idx.same_as(var)]
            if not positions:
                return None
            dims[positions[0]] = dims.get(positions[0], 0) + c
        terms_by_dim = sorted((d, c) for d, c in dims.items() if c != 0)
        if not terms_by_dim or sum(abs(c) * self.extents[d] for d, c in terms_by_dim) >= _HOIST_CLAMP:
            return None
        if self.dst_tile.layout != "lanes" or len(self.index) > 2:
            return None
        em = self.em
        key = ("mask-index", tuple(self.dom4), tuple(terms_by_dim))

        def build() -> str:
            ctx = _Elementwise(em, self.loop_vars, self.index, self.extents, self.offsets, self.dst_tile, self.loop)
            block = em.dim4var(self.dom4, "mask_block")
            out = em.fresh("mask_index")
            em.emit(f"auto {out} = make_tensor<fp32>({block}, {block});")
            em.emit("{")
            em.indent += 1
            (d0, c0), rest = terms_by_dim[0], terms_by_dim[1:]
            first = ctx.axis_tile(d0)
            if rest and c0 == 1 and rest[0][1] == -1:
                em.emit(f"tiu::fsub({out}, {first}, {ctx.axis_tile(rest[0][0])});")
                rest = rest[1:]
            elif c0 == 1:
                em.emit(f"tiu::move({out}, {first});")
            else:
                em.emit(f"tiu::fmul({out}, {first}, (float)({c0}));")
            for d, c in rest:
                axis = ctx.axis_tile(d)
                if c in (1, -1):
                    em.emit(f"tiu::{'fadd' if c == 1 else 'fsub'}({out}, {out}, {axis});")
                else:
                    scaled = ctx.temp("float32")
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

    def _linear(self, e: Any) -> tuple[list[tuple[Any, int]], Any] | None:
        """``e`` as (``[(T.Parallel variable, coefficient)]``, scalar part or None), for sums,
        differences and products by integer constants; None if ``e`` is of another form."""
        from tvm import tirx

        if not self.uses_loop_vars(e):
            return [], e
        if isinstance(e, tirx.Var):
            return [(e, 1)], None
        if isinstance(e, (tirx.Add, tirx.Sub)):
            left, right = self._linear(e.a), self._linear(e.b)
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
                    inner = self._linear(other)
                    if inner is None or inner[1] is not None:
                        return None
                    return [(v, c * int(factor.value)) for v, c in inner[0]], None
        return None

    def index_tile(self, e: Any) -> str:
        """An fp32 tile over the domain holding the integer expression ``e`` of the loop
        variables and scalars (+, -, and * by a scalar)."""
        from tvm import tirx

        em = self.em
        if not self.uses_loop_vars(e):
            t = self.temp("float32")
            em.emit(f"tiu::fill({t}, (float)({em.expr(e)}));")
            return t
        if isinstance(e, tirx.Var):
            dims = [d for d, idx in enumerate(self.index) if isinstance(idx, tirx.Var) and idx.same_as(e)]
            if not dims:
                raise self.fail(f"index {e} in a T.if_then_else condition that the store does not use")
            return self.axis_tile(dims[0])
        if isinstance(e, (tirx.Add, tirx.Sub, tirx.Mul)):
            fn = {tirx.Add: "fadd", tirx.Sub: "fsub", tirx.Mul: "fmul"}[type(e)]
            sides = []
            for side in (e.a, e.b):
                sides.append(self.index_tile(side) if self.uses_loop_vars(side) else None)
            out = self.temp("float32")
            if sides[0] is not None and sides[1] is not None:
                em.emit(f"tiu::{fn}({out}, {sides[0]}, {sides[1]});")
            elif sides[0] is not None:
                em.emit(f"tiu::{fn}({out}, {sides[0]}, (float)({em.expr(e.b)}));")
            elif fn == "fsub":
                em.emit(f"tiu::{fn}({out}, (float)({em.expr(e.a)}), {sides[1]});")
            else:
                em.emit(f"tiu::{fn}({out}, {sides[1]}, (float)({em.expr(e.a)}));")
            return out
        raise self.fail(f"index expression {e} in a T.if_then_else condition", "use +, - and * of loop indices and scalars")

    def axis_tile(self, dim: int) -> str:
        """fp32 tile over the domain holding the index along destination dim ``dim``.

        Along ``W`` (the last dim of a 2-D tile): PPL's serial-number table
        (``arange_broadcast``) in every lane.  Along ``C`` (rows): the same table on one
        lane, transposed onto the lanes (``tiu::transpose_wc``), then broadcast along ``W``
        with a stride-0 view that keeps the real row-group stride.
        """
        em = self.em
        if dim in self.axis_tiles:
            return self.axis_tiles[dim]
        if self.dst_tile.layout != "lanes" or len(self.index) > 2:
            raise self.fail("a T.if_then_else mask over a tile of rank > 2 or an fp32 T.gemm operand")
        _, c, _, w = self.dom4
        along_w = len(self.index) == 2 and dim == 1
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
            shape = em.dim4var(self.dom4, "iwshape")
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
                shape = em.dim4var(self.dom4, "ishape")
                stride = em.dim4var(broadcast_strides(["1", c, "1", "1"], "fp32", (3,)), "istride")
                out = em.fresh("irows")
                em.emit(f"auto &{out} = {colf}.view({shape}, {stride});")
        self.axis_tiles[dim] = out
        return out

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

    def _block(self) -> str:
        if self.block is None:
            self.block = self.em.dim4var(self.dom4, "ew")
        return self.block

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
        scale = 1.0
        if fn in _WRAPPERS and _WRAPPERS[fn][1] is not None:
            # exp2(x * c) multiplies the tile once, by c * ln 2, instead of by c and then by ln 2.
            arg, scale = _constant_scale(arg)
        src = self.compute(arg, None)
        assert src is not None
        out = self._out(dtype, dst)
        if fn in _WRAPPERS:
            # PPL's wrapper functions (ppl_wrapper_func.h) take the block and real shapes.
            wrapper, pre, post, dtypes = _WRAPPERS[fn]
            if dtype not in dtypes:
                raise self.fail(f"T.{fn} of {dtype} in a T.Parallel body", f"PPL has it for {', '.join(dtypes)}; cast to float32 first")
            if self.block is None:
                self.block = em.dim4var(self.dom4, "ew")
            operand = src.text
            if pre is not None:  # exp2(x) = exp(x * ln 2)
                operand = self.temp(dtype)
                em.emit(f"tiu::fmul({operand}, {src.text}, {pre * scale!r}f);")
            target = out if post is None else self.temp(dtype)
            em.emit(f"{wrapper}({target}, {operand}, &{self.block}, &{self.block});")
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


def _constant_scale(e: Any) -> tuple[Any, float]:
    """``(x, c)`` with ``e == x * c`` for a float constant ``c`` (``(e, 1.0)`` if there is none).

    Recognises ``x * c``, ``c * x`` and ``a * c +/- b * c`` (upstream's attention writes
    ``T.exp2(s * scale - m * scale)``), which becomes ``(a +/- b) * c``: one tile
    operation less, and no less accurate.
    """
    from tvm import tirx

    def split(m: Any) -> tuple[Any, float] | None:
        if isinstance(m, tirx.Mul):
            if isinstance(m.b, tirx.FloatImm):
                return m.a, float(m.b.value)
            if isinstance(m.a, tirx.FloatImm):
                return m.b, float(m.a.value)
        return None

    scaled = split(e)
    if scaled is not None:
        return scaled
    if isinstance(e, (tirx.Add, tirx.Sub)):
        a, b = split(e.a), split(e.b)
        if a is not None and b is not None and a[1] == b[1]:
            return type(e)(a[0], b[0]), a[1]
    return e, 1.0


_UNARY_OPS = {
    "tirx.exp": "exp",
    "tirx.exp2": "exp2",
    "tirx.log": "log",
    "tirx.log2": "log2",
    "tirx.tanh": "tanh",
    "tirx.sigmoid": "sigmoid",
    "tirx.fabs": "fabs",
    "tirx.sqrt": "fsqrt",
    "tirx.rsqrt": "frsqrt",
}

_LN2 = 0.6931471805599453
_ALL_FLOATS = ("float32", "float16", "bfloat16")

#: Functions computed by PPL wrapper functions: name -> (wrapper, multiply the input by,
#: multiply the result by, dtypes the wrapper supports).
_WRAPPERS: dict[str, tuple[str, float | None, float | None, tuple[str, ...]]] = {
    "exp": ("fexp", None, None, _ALL_FLOATS),  # range-reduced: clamps, splits into 2^k * e^r
    "exp2": ("fexp", _LN2, None, _ALL_FLOATS),
    "log": ("flog", None, None, _ALL_FLOATS),
    "log2": ("flog", None, 1.0 / _LN2, _ALL_FLOATS),
    "tanh": ("tanh_fp32", None, None, ("float32",)),
    "sigmoid": ("sigmoid_fp32", None, None, ("float32",)),
}
_UNARY_EXTERN = {
    "expf": "exp",
    "exp": "exp",
    "__expf": "exp",
    "hexp": "exp",
    "exp2f": "exp2",
    "exp2": "exp2",
    "__exp2f": "exp2",
    "hexp2": "exp2",
    "logf": "log",
    "log": "log",
    "__logf": "log",
    "hlog": "log",
    "log2f": "log2",
    "log2": "log2",
    "__log2f": "log2",
    "hlog2": "log2",
    "tanhf": "tanh",
    "tanh": "tanh",
    "htanh": "tanh",
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
