"""The PPL emitter core: walks one lowered device PrimFunc and prints its PPL body.

It owns what every construct shares -- the output lines, C identifiers, the
local tiles and global tensors declared so far, the kernel plan -- and the
control-flow constructs (grid and serial loops, ``if``, bindings, allocations).
Each tile op is emitted by the module that the construct table
(:mod:`tilelang_tpu.codegen_constructs`) names for it: copy, fill, reduce, gemm,
element-wise.  Anything the table does not cover raises :class:`CodegenError`
naming the construct and the TIR statement it came from: the emitter never guesses.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tilelang_tpu.codegen_constructs import supported_tile_ops_hint, tile_op_handlers
from tilelang_tpu.codegen_dynamic import check_shape_vars
from tilelang_tpu.codegen_gather import WORD_PAIR_DTYPES, storage_dims, storage_type
from tilelang_tpu.codegen_ir import (
    LOCAL_SCOPES,
    CodegenError,
    GlobalTensor,
    Namer,
    Tile,
    check_contiguous,
    is_const,
    is_zero,
    min_extent_range,
    op_name,
    region,
    stmt_text,
)
from tilelang_tpu.codegen_layout import DTYPES, REDUCE_ALIGN, dim4, offset4, to4
from tilelang_tpu.codegen_masked_gemm import emit_masked_gemm, masked_gemm
from tilelang_tpu.codegen_multicore import GridSplit, emit_split_grid, grid_split
from tilelang_tpu.codegen_plan import KernelPlan, clearing_reduce, overwriting_gemm, plan_kernel
from tilelang_tpu.codegen_scalar import ScalarPrinter, Unsupported

__all__ = ["CodegenError", "Emitter", "Tile"]


@dataclass
class Emitter:
    """Prints the body of one kernel.  Create, then call :meth:`run`."""

    func: Any
    chip: str = "bm1690"  # the ppl-compile chip (chip-specific code: codegen_cast)
    lines: list[str] = field(default_factory=list)
    indent: int = 1
    stmt_text: str = ""  # the TIR statement being emitted (for error messages)
    ids: Namer = field(default_factory=Namer)  # C identifiers, and the C name of each TIR variable
    plan: KernelPlan = field(default_factory=KernelPlan)  # whole-kernel decisions, made before emission
    tiles: dict[Any, Tile] = field(default_factory=dict)  # buffer data var -> local tile
    globals_: dict[Any, GlobalTensor] = field(default_factory=dict)  # data var -> global tensor
    scalars: dict[Any, str] = field(default_factory=dict)  # local.var data var -> C name
    global_views: dict[tuple[Any, str], str] = field(default_factory=dict)  # (data var, layout) -> gtensor name
    shape_symbols: list[str] = field(default_factory=list)  # symbolic dimensions, in entry order (abi.ShapeSlot)
    cores: int = 1  # cores the target asks for (tpu:cores=N)
    split: GridSplit = field(default_factory=GridSplit)  # how the grid runs on them (codegen_multicore)
    overwriting: Any = None  # the T.gemm call whose zero fill was dropped (it overwrites its accumulator)
    clearing: Any = None  # the T.reduce call whose identity fill was dropped (it reduces with clear=True)
    prologue: int = 0  # where in ``lines`` hoisted code goes: the kernel body's start, before every loop
    hoisted_tiles: dict[Any, str] = field(default_factory=dict)  # key -> tile built once in the prologue

    def __post_init__(self) -> None:
        from tvm import arith

        self.analyzer = arith.Analyzer()
        self.scalar = ScalarPrinter(self.ids.of_var, self.analyzer, self._scalar_load)

    # ------------------------------------------------------------------ helpers

    def fail(self, construct: str, node: Any = None, hint: str = "") -> CodegenError:
        where = self.stmt_text if node is None else stmt_text(node)
        return CodegenError(construct, where, hint)

    def emit(self, line: str) -> None:
        self.lines.append("  " * self.indent + line)

    def fresh(self, base: str) -> str:
        return self.ids.fresh(base)

    def dim4var(self, values: list[str], base: str = "shp") -> str:
        name = self.fresh(base)
        self.emit(f"dim4 {name} = {dim4(values)};")
        return name

    def expr(self, e: Any) -> str:
        try:
            return self.scalar(e)
        except Unsupported as err:
            raise self.fail(str(err)) from None

    def _scalar_load(self, load: Any) -> str:
        data = load.buffer.data
        if data in self.scalars:
            return self.scalars[data]
        raise Unsupported(
            f"scalar read of tile element {load.buffer.name}[{', '.join(map(str, load.indices))}] "
            "(TPU local tensors are read a whole tile at a time; use T.Parallel over the tile)"
        )

    # ------------------------------------------------------------------ entry

    def params(self) -> list[tuple[str, str]]:
        """(C type, name) of each entry parameter, declaring the global tensors.

        One pointer (``fp32 *``) per tensor the user declared and one by-value ``float``
        or ``int`` per scalar, in declared order, unused ones included
        (:func:`tilelang_tpu.abi.bind_pointers`, the binding rule).
        """
        from tvm import tirx

        from tilelang_tpu import abi

        attrs = self.func.attrs
        if attrs is None or abi.DECLARED_PARAMS_ATTR not in attrs:
            raise self.fail(
                "a device function without the record of its declared parameters",
                self.func,
                "lower the kernel with tilelang_tpu.lowering (tilelang.compile(..., target='tpu') does)",
            )
        declared = list(attrs[abi.DECLARED_PARAMS_ATTR])
        shape_vars = list(attrs[abi.SHAPE_VARS_ATTR]) if abi.SHAPE_VARS_ATTR in attrs else []
        check_shape_vars(self, declared, shape_vars)
        try:
            slots = abi.bind_pointers(declared, list(self.func.params), shape_vars)
        except abi.AbiError as err:
            raise self.fail(
                str(err),
                self.func,
                "declare scalar parameters as T.float32 or T.int32 and symbolic dimensions as int32 "
                "(or capture the value as a Python constant)",
            ) from None
        out = []
        for slot in slots:
            if isinstance(slot, abi.ShapeSlot):
                name = self.fresh(slot.symbol)
                self.ids.of_var[slot.var] = name
                self.shape_symbols.append(slot.symbol)
                out.append((abi.SHAPE_CTYPE + " ", name))
                continue
            if isinstance(slot, abi.ScalarSlot):
                self.ids.reserve(slot.name)
                self.ids.of_var[slot.var] = slot.name
                out.append((slot.ctype + " ", slot.name))
                continue
            buf = slot.buffer
            dtype = str(buf.dtype)
            if dtype not in DTYPES and dtype not in WORD_PAIR_DTYPES:
                raise self.fail(
                    f"tensor {buf.name} has dtype {dtype}, which PPL does not support", self.func, f"use one of {', '.join(DTYPES)}"
                )
            self.ids.reserve(slot.name)
            out.append((storage_type(dtype) + " *", slot.name))
            if not slot.used:
                continue
            dims = tuple(int(d) if isinstance(d, tirx.IntImm) else d for d in buf.shape)
            if len(dims) > 4:
                raise self.fail(f"tensor {buf.name} has rank {len(dims)}; ranks 1 to 4 are supported", self.func)
            check_contiguous(self, buf)
            gname = self.fresh("g_" + str(buf.name))
            self.globals_[buf.data] = GlobalTensor(gname, dtype, dims, str(buf.name))
            self.ids.of_var[buf.data] = slot.name
        return out

    def global_view(self, var: Any, layout: str) -> str:
        """Name of the gtensor viewing kernel parameter ``var`` in ``layout``."""
        return self.global_views[(var, layout)]

    def declare_globals(self) -> None:
        wanted = {(var, "lanes") for var in self.globals_}
        wanted |= self._global_layouts(self.func.body)
        for var, g in self.globals_.items():
            for layout in ("lanes", "rows_n", "row"):
                if (var, layout) not in wanted:
                    continue
                name = g.name if layout == "lanes" else self.fresh(f"{g.name}_{layout}")
                extents = [self.expr(g.extent(i)) for i in range(len(g.dims))]
                shape = self.dim4var(storage_dims(to4(extents, layout), g.dtype), name + "_shape")
                self.emit(f"auto {name} = gtensor<{storage_type(g.dtype)}>({shape}, GLOBAL, {self.ids.of_var[var]});")
                self.global_views[(var, layout)] = name

    def run(self) -> None:
        self.plan = plan_kernel(self.func.body)
        self.split = grid_split(self.func.body, self.cores)
        self.declare_globals()
        self.prologue = len(self.lines)
        self.stmt(self.func.body)

    def hoisted(self, key: Any, build: Callable[[], str]) -> str:
        """The tile that ``build`` emits, emitted once at the start of the kernel body (before
        every loop) instead of where it is used; ``key`` identifies it (built once per key).
        ``build`` must depend on no variable of the kernel, only on constants."""
        if key in self.hoisted_tiles:
            return self.hoisted_tiles[key]
        saved, indent = self.lines, self.indent
        self.lines, self.indent = [], 1
        try:
            name = build()
            built = self.lines
        finally:
            self.lines, self.indent = saved, indent
        self.lines[self.prologue : self.prologue] = built
        self.prologue += len(built)
        self.hoisted_tiles[key] = name
        return name

    def _aliased_copy(self, stmt: Any) -> bool:
        """True for a staging copy whose destination became an alias of its source."""
        for copy, dst in self.plan.skipped:
            if stmt.same_as(copy):
                tile = self.tiles.get(dst)
                return tile is not None and tile is self.tiles.get(self.plan.aliases[dst])
        return False

    def _global_layouts(self, body: Any) -> set[tuple[Any, str]]:
        from tvm import tirx

        out: set[tuple[Any, str]] = set()

        def visit(node: Any) -> None:
            if isinstance(node, tirx.Call) and op_name(node) in ("tl.tileop.copy", "tl.tileop.atomicadd"):
                src, dst = region(node.args[0])[0], region(node.args[1])[0]
                for g, t in ((src, dst), (dst, src)):
                    if g.data in self.globals_ and self.plan.layouts.get(t.data, "lanes") != "lanes":
                        out.add((g.data, self.plan.layouts[t.data]))

        tirx.stmt_functor.post_order_visit(body, visit)
        return out

    # ------------------------------------------------------------------ statements

    def stmt(self, s: Any) -> None:
        from tvm import tirx

        if isinstance(s, tirx.SeqStmt):
            children = list(s.seq)
            done: set[int] = set()
            for index, child in enumerate(children):
                if index in done or self._aliased_copy(child):
                    continue
                masked = masked_gemm(child, children[index + 1]) if index + 1 < len(children) else None
                if masked is not None:
                    emit_masked_gemm(self, child, children[index + 1], *masked)
                    done.add(index + 1)
                    continue
                gemm = overwriting_gemm(child, children[index + 1]) if index + 1 < len(children) else None
                if gemm is not None:
                    # T.clear(c); T.gemm(a, b, c): no fill, the GEMM overwrites c.
                    self.overwriting = gemm
                    continue
                # A staging copy that became an alias emits nothing: the reduction after it is next.
                following = [c for c in children[index + 1 :] if not self._aliased_copy(c)]
                reduce = clearing_reduce(child, following[0]) if following else None
                if reduce is not None:
                    # T.fill(m, -inf); T.reduce_max(x, m, clear=False): no fill, the reduction clears m.
                    self.clearing = reduce
                    continue
                self.stmt(child)
            return
        previous = self.stmt_text
        if not isinstance(s, (tirx.For, tirx.IfThenElse, tirx.AttrStmt)):
            self.stmt_text = stmt_text(s)
        try:
            if isinstance(s, tirx.DeclBuffer):
                self.decl_buffer(s.buffer)
            elif isinstance(s, tirx.AllocBuffer):
                self.alloc(s.buffer)
            elif isinstance(s, tirx.For):
                self.for_(s)
            elif isinstance(s, tirx.Evaluate):
                self.evaluate(s)
            elif isinstance(s, tirx.IfThenElse):
                self.stmt_text = f"if {s.condition}:"
                self.emit(f"if ({self.expr(s.condition)}) {{")
                self.block(s.then_case)
                if s.else_case is not None:
                    self.emit("} else {")
                    self.block(s.else_case)
                self.emit("}")
            elif isinstance(s, tirx.Bind):
                if "int" not in str(s.var.dtype) and "float" not in str(s.var.dtype):
                    raise self.fail(f"binding of a {s.var.dtype} value")
                value = self.expr(s.value)
                name = self.fresh(s.var.name)
                ctype = "int" if "int" in str(s.var.dtype) else "float"
                self.emit(f"{ctype} {name} = {value};")
                self.ids.of_var[s.var] = name
            elif isinstance(s, tirx.AttrStmt):
                self.stmt(s.body)
            elif isinstance(s, tirx.BufferStore):
                self.buffer_store(s)
            elif isinstance(s, tirx.AssertStmt):
                raise self.fail("assert statement")
            else:
                raise self.fail(f"statement kind {type(s).__name__}")
        except CodegenError as err:
            if not err.where:  # raised outside the emitter (GlobalTensor.shape): name the statement
                err.where = self.stmt_text
            raise
        finally:
            self.stmt_text = previous

    def block(self, s: Any) -> None:
        self.indent += 1
        self.stmt(s)
        self.indent -= 1

    def decl_buffer(self, buf: Any) -> None:
        # DeclBuffer re-declares a buffer whose storage is already known (a kernel
        # parameter or a tile allocated just before); nothing to print.
        if buf.data in self.globals_ or buf.data in self.tiles or buf.data in self.scalars:
            return
        raise self.fail(f"buffer {buf.name} declared over storage the tpu codegen did not allocate")

    def alloc(self, buf: Any) -> None:
        from tvm import tirx

        if buf.data in self.plan.aliases and self.plan.aliases[buf.data] in self.tiles:
            self.tiles[buf.data] = self.tiles[self.plan.aliases[buf.data]]
            return
        scope = buf.scope()
        dtype = str(buf.dtype)
        if scope == "local.var":
            ctype = "int" if "int" in dtype else "float"
            name = self.fresh(str(buf.name))
            self.emit(f"{ctype} {name} = 0;")
            self.scalars[buf.data] = name
            return
        if scope not in LOCAL_SCOPES:
            raise self.fail(f"buffer scope {scope!r} of {buf.name}", hint=f"supported: {', '.join(LOCAL_SCOPES)} and local.var")
        if dtype not in DTYPES and dtype not in WORD_PAIR_DTYPES:
            raise self.fail(f"tile {buf.name} has dtype {dtype}, which PPL does not support", hint=f"use one of {', '.join(DTYPES)}")
        if not all(isinstance(s, tirx.IntImm) for s in buf.shape):
            raise self.fail(
                f"tile {buf.name} of symbolic shape {list(buf.shape)}",
                hint="tiles live in local memory and need static sizes: allocate block-sized tiles "
                "(T.alloc_shared((block_M, N))) and loop over T.ceildiv(M, block_M) blocks; copies clip the last one",
            )
        shape = tuple(int(s) for s in buf.shape)
        if not 1 <= len(shape) <= 4:
            raise self.fail(f"tile {buf.name} has rank {len(shape)}; ranks 1 to 4 are supported")
        layout = self.plan.layouts.get(buf.data, "lanes")
        if layout != "lanes" and buf.data in self.plan.reduce_sources:
            raise self.fail(
                f"tile {buf.name} is both an fp32 T.gemm operand and a T.reduce source",
                hint="fp32 matmul operands keep whole rows in one lane; copy the result to another tile before reducing it",
            )
        if layout == "rows_n" and len(shape) != 2:
            raise self.fail(f"T.gemm operand {buf.name} of rank {len(shape)}", hint="T.gemm takes 2-D tiles")
        block = storage_dims(to4([str(s) for s in shape], layout), dtype)
        if buf.data in self.plan.reduce_sources:
            # The row reduction pads each row's tail in place (see quick_pooling).
            block[3] = str(-(-int(block[3]) // REDUCE_ALIGN) * REDUCE_ALIGN)
        name = self.fresh(str(buf.name))
        shape4 = storage_dims(to4([str(s) for s in shape], layout), dtype)
        bvar = self.dim4var(block, name + "_block")
        if block == shape4:
            self.emit(f"auto {name} = make_tensor<{storage_type(dtype)}>({bvar}, {bvar});")
        else:
            rvar = self.dim4var(shape4, name + "_shape")
            self.emit(f"auto {name} = make_tensor<{storage_type(dtype)}>({bvar}, {rvar});")
        self.tiles[buf.data] = Tile(name, dtype, shape, block, layout)

    def for_(self, loop: Any) -> None:
        from tvm import tirx

        if loop.kind == tirx.ForKind.PARALLEL:
            self.stmt_text = stmt_text(loop)
            # A scope of its own: the temporaries' local memory is free again after it.
            self.emit("{")
            self.indent += 1
            emit_parallel(self, loop)
            self.indent -= 1
            self.emit("}")
            return
        if loop.kind not in (tirx.ForKind.SERIAL, tirx.ForKind.UNROLLED):
            raise self.fail(f"{loop.kind} loop", loop)
        self.stmt_text = f"for {loop.loop_var.name} in range({loop.min}, {loop.min + loop.extent}):"
        if self.split.loops and loop.same_as(self.split.loops[0]):
            emit_split_grid(self, self.split)
            return
        var = self.fresh(loop.loop_var.name)
        self.ids.of_var[loop.loop_var] = var
        lo = self.expr(loop.min)
        hi = self.expr(loop.min + loop.extent) if not is_zero(loop.min) else self.expr(loop.extent)
        self.analyzer.bind(loop.loop_var, min_extent_range(loop.min, loop.extent))
        self.emit(f"for (int {var} = {lo}; {var} < {hi}; ++{var}) {{")
        single_trip = is_const(loop.extent) and int(loop.extent) == 1  # nothing to overlap; ppl-compile 1.30.2 may crash on it
        if not single_trip and (
            ("num_stages" in loop.annotations and int(loop.annotations["num_stages"]) > 1) or loop.same_as(self.plan.pipelined_grid)
        ):
            # T.Pipelined, or the innermost T.Kernel grid loop (its iterations are independent
            # blocks): ppl-compile software-pipelines the loop body, overlapping the DMA of the
            # next iteration with the compute of this one (data dependences kept).
            self.emit("  ppl::enable_pipeline();")
        self.block(loop.body)
        self.emit("}")

    def buffer_store(self, s: Any) -> None:
        if s.buffer.data in self.scalars:
            self.emit(f"{self.scalars[s.buffer.data]} = {self.expr(s.value)};")
            return
        if ((s.buffer.data in self.tiles or s.buffer.data in self.globals_) and all(is_const(i) for i in s.indices)) or (
            s.buffer.data in self.globals_ and self._tile_values_only(s.value)
        ):
            # One element of a tile: what a T.Parallel over extent-1 axes leaves (tilelang
            # drops such loops), e.g. the per-row statistics of a 1-row tile.
            from tilelang_tpu.codegen_elementwise import elementwise

            self.emit("{")
            self.indent += 1
            elementwise(self, s, [], [], s)
            self.indent -= 1
            self.emit("}")
            return
        raise self.fail(
            f"scalar store to {s.buffer.name}",
            hint="TPU tiles are written a whole tile at a time: use T.copy, T.fill or a T.Parallel loop over the tile",
        )

    def _tile_values_only(self, value: Any) -> bool:
        """True if ``value`` reads local tiles (a per-row statistic stored to global memory
        outside a loop, e.g. ``Mean[bx] = mean[0]`` of a 1-row tile)."""
        from tvm import tirx

        reads: list[Any] = []
        tirx.stmt_functor.post_order_visit(tirx.Evaluate(value), lambda n: reads.append(n) if isinstance(n, tirx.BufferLoad) else None)
        return bool(reads) and all(r.buffer.data in self.tiles for r in reads)

    # ------------------------------------------------------------------ tile ops

    def evaluate(self, s: Any) -> None:
        from tvm import tirx

        call = s.value
        if isinstance(call, tirx.IntImm):
            return
        if not isinstance(call, tirx.Call):
            raise self.fail(f"expression statement {type(call).__name__}")
        op = op_name(call)
        handler = tile_op_handlers().get(op)
        if op == "tirx.ret":
            return
        if handler is None:
            name = op.removeprefix("tl.tileop.")
            raise self.fail(f"T.{name}" if op.startswith("tl.tileop.") else f"call to {op}", hint=supported_tile_ops_hint())
        self.emit("{")
        self.indent += 1
        handler(self, call)
        self.indent -= 1
        self.emit("}")

    def region_view(self, buf: Any, mins: list[Any], extents: list[Any]) -> tuple[Tile, str, list[str]]:
        """(tile, C expression of the view, 4-D extents) of a local region."""
        tile = self.tiles.get(buf.data)
        if tile is None:
            raise self.fail(f"{buf.name} is not a local tile (scope {buf.scope()})")
        if tile.dtype in WORD_PAIR_DTYPES:
            raise self.fail(
                f"{tile.dtype} tile {buf.name} used other than as gather ids",
                hint=f"{tile.dtype} tiles are copied from global memory and index row gathers only; use int32 for other integer work",
            )
        ext = [self.expr(e) for e in extents]
        if (
            all(is_zero(m) for m in mins)
            and [int(e) for e in extents if is_const(e)] == list(tile.shape)
            and all(is_const(e) for e in extents)
        ):
            return tile, tile.name, tile.shape4
        shp = self.dim4var(to4(ext, tile.layout))
        off = self.dim4var(offset4([self.expr(m) for m in mins], tile.layout), "off")
        return tile, f"{tile.name}.sub_view({shp}, {off})", to4(ext, tile.layout)

    def full_local(self, tile: Tile, mins: list[Any], extents: list[Any]) -> bool:
        return all(is_zero(m) for m in mins) and all(is_const(e) for e in extents) and tuple(int(e) for e in extents) == tile.shape


def emit_parallel(em: Emitter, loop: Any) -> None:
    from tilelang_tpu.codegen_elementwise import emit_parallel as emit

    emit(em, loop)
