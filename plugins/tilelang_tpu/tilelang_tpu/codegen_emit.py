"""The PPL emitter: walks one lowered device PrimFunc and prints its PPL body.

The input keeps TileLang's tile ops (see :mod:`tilelang_tpu.lowering`), so each
statement maps onto whole-tile PPL:

==========================================  ==========================================
TileLang (lowered TIR)                      PPL
==========================================  ==========================================
``T.Kernel`` grid (serial block loops)      ``for`` loops over the block indices, the innermost
                                            with ``ppl::enable_pipeline()`` when safe
``T.alloc_shared`` / ``T.alloc_fragment``   ``make_tensor<T>(block, real)`` in local memory
``T.copy`` global -> local / local -> glob  ``dma::load`` / ``dma::store`` of a ``sub_view``;
                                            edge tiles use a runtime ``min`` extent and
                                            ``dma::zero`` (TileLang's out-of-bounds rule)
``T.copy`` local -> local                   ``tiu::move`` (``tiu::cast`` across dtypes)
``T.fill`` / ``T.clear``                    ``tiu::fill``
``T.Parallel`` element-wise body            one ``tiu::f*`` per operation on the tile,
                                            ``*_C`` forms for scalar operands,
                                            ``tiu::cast``, ``fexp``; row vectors broadcast
                                            along ``W`` through a stride-0 view
``T.reduce`` (max/min/sum/abs*) last axis   ``quick_pooling`` (two pooling passes)
``T.gemm`` fp16/bf16 (fp32 accumulate)      ``tiu::fmm2_nn`` / ``tiu::fmm2_nt`` (rows on lanes)
``T.gemm`` fp32                             ``tiu::fmm`` (mm v1; operands in the rows_n layout)
``T.Pipelined``                             ``for`` + ``ppl::enable_pipeline()``
serial ``for`` / ``if`` / ``let``           C ``for`` / ``if`` / ``int``
==========================================  ==========================================

Anything else raises :class:`CodegenError` naming the construct and the TIR
statement it came from: the emitter never guesses.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from typing import Any

from tilelang_tpu.codegen_layout import DTYPES, FLOAT_DTYPES, REDUCE_ALIGN, broadcast_strides, dim4, offset4, to4
from tilelang_tpu.codegen_scalar import ScalarPrinter, Unsupported

__all__ = ["CodegenError", "Emitter"]


class CodegenError(Exception):
    """Raised for a construct the tpu codegen does not support (wrapped by codegen.py)."""

    def __init__(self, construct: str, where: str, hint: str = "") -> None:
        self.construct = construct
        self.where = where
        self.hint = hint
        super().__init__(construct)


# Reduce kinds -> (quick_pooling mode, identity used to pad a row, negate around it, abs first)
_REDUCE = {
    "max": (0, "-inf", False, False),
    "min": (0, "-inf", True, False),
    "sum": (1, "0", False, False),
    "abssum": (1, "0", False, True),
    "absmax": (0, "-inf", False, True),
}

_GLOBAL_SCOPES = ("global",)
_LOCAL_SCOPES = ("shared", "shared.dyn", "local.fragment", "local")


@dataclass
class Tile:
    """A local tensor: its C name, element dtype, TileLang shape and PPL block."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    block: list[str]
    layout: str = "lanes"

    @property
    def shape4(self) -> list[str]:
        return to4([str(s) for s in self.shape], self.layout)


@dataclass
class GlobalTensor:
    name: str
    dtype: str
    shape: tuple[int, ...]


@dataclass
class Operand:
    """A value inside an element-wise expression: a tile view or a C scalar."""

    text: str
    dtype: str
    is_tile: bool


@dataclass
class Emitter:
    """Prints the body of one kernel.  Create, then call :meth:`run`."""

    func: Any
    lines: list[str] = field(default_factory=list)
    indent: int = 1
    names: dict[Any, str] = field(default_factory=dict)  # TIR var -> C identifier
    tiles: dict[Any, Tile] = field(default_factory=dict)  # buffer data var -> local tile
    globals_: dict[Any, GlobalTensor] = field(default_factory=dict)  # data var -> global tensor
    scalars: dict[Any, str] = field(default_factory=dict)  # local.var data var -> C name
    used_names: set[str] = field(default_factory=set)
    counter: int = 0
    reduce_sources: set[Any] = field(default_factory=set)
    layouts: dict[Any, str] = field(default_factory=dict)  # data var -> non-default layout
    aliases: dict[Any, Any] = field(default_factory=dict)  # staging tile -> tile it copies
    skipped: list[tuple[Any, Any]] = field(default_factory=list)  # (staging copy, its destination)
    global_views: dict[tuple[Any, str], str] = field(default_factory=dict)
    pipelined_grid: Any = None  # the innermost grid loop, when its body can be pipelined
    stmt_text: str = ""

    def __post_init__(self) -> None:
        from tvm import arith

        self.analyzer = arith.Analyzer()
        self.scalar = ScalarPrinter(self.names, self.analyzer, self._scalar_load)

    # ------------------------------------------------------------------ helpers

    def fail(self, construct: str, node: Any = None, hint: str = "") -> CodegenError:
        where = self.stmt_text if node is None else _stmt_text(node)
        return CodegenError(construct, where, hint)

    def emit(self, line: str) -> None:
        self.lines.append("  " * self.indent + line)

    def fresh(self, base: str) -> str:
        base = re.sub(r"\W", "_", base) or "v"
        if base[0].isdigit():
            base = "v" + base
        name = base
        while name in self.used_names or name in _RESERVED:
            self.counter += 1
            name = f"{base}_{self.counter}"
        self.used_names.add(name)
        return name

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
        """(PPL dtype, pointer name) of each entry parameter, declaring the global tensors.

        One pointer per tensor the user declared, in declared order, unused ones
        included (:func:`tilelang_tpu.abi.bind_pointers`, the binding rule).
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
        try:
            slots = abi.bind_pointers(list(attrs[abi.DECLARED_PARAMS_ATTR]), list(self.func.params))
        except abi.AbiError as err:
            raise self.fail(
                f"{err}; the tpu target bakes shapes in and takes tensor parameters only",
                self.func,
                "pass the value as a Python constant captured by the kernel instead",
            ) from None
        out = []
        for slot in slots:
            buf = slot.buffer
            dtype = str(buf.dtype)
            if dtype not in DTYPES:
                raise self.fail(
                    f"tensor {buf.name} has dtype {dtype}, which PPL does not support", self.func, f"use one of {', '.join(DTYPES)}"
                )
            self.used_names.add(slot.name)
            out.append((DTYPES[dtype], slot.name))
            if not slot.used:
                continue
            shape = tuple(int(s) if isinstance(s, tirx.IntImm) else -1 for s in buf.shape)
            if -1 in shape:
                raise self.fail(f"tensor {buf.name} has a symbolic shape {list(buf.shape)}; the tpu target needs static shapes", self.func)
            if len(shape) > 4:
                raise self.fail(f"tensor {buf.name} has rank {len(shape)}; ranks 1 to 4 are supported", self.func)
            _check_contiguous(self, buf)
            gname = self.fresh("g_" + str(buf.name))
            self.globals_[buf.data] = GlobalTensor(gname, dtype, shape)
            self.names[buf.data] = slot.name
        return out

    def global_view(self, var: Any, layout: str) -> str:
        """Name of the gtensor viewing kernel parameter ``var`` in ``layout``."""
        return self.global_views[(var, layout)]

    def declare_globals(self) -> None:
        wanted = {(var, "lanes") for var in self.globals_}
        wanted |= self._global_layouts(self.func.body)
        for var, g in self.globals_.items():
            for layout in ("lanes", "rows_n"):
                if (var, layout) not in wanted:
                    continue
                name = g.name if layout == "lanes" else self.fresh(f"{g.name}_{layout}")
                shape = self.dim4var(to4([str(s) for s in g.shape], layout), name + "_shape")
                self.emit(f"auto {name} = gtensor<{DTYPES[g.dtype]}>({shape}, GLOBAL, {self.names[var]});")
                self.global_views[(var, layout)] = name

    def run(self) -> None:
        self.pipelined_grid = _pipelinable_grid_loop(self.func.body)
        self._find_reduce_staging(self.func.body)
        self._collect_uses(self.func.body)
        self.declare_globals()
        self.stmt(self.func.body)

    def _collect_uses(self, body: Any) -> None:
        """Reduce sources (padded rows) and fp32 matmul operands (the rows_n layout)."""
        from tvm import tirx

        def visit(node: Any) -> None:
            if not isinstance(node, tirx.Call):
                return
            op = _op_name(node)
            if op == "tl.tileop.reduce":
                source = _region(node.args[0])[0].data
                self.reduce_sources.add(self.aliases.get(source, source))
            elif op == "tl.tileop.gemm":
                a, b, c = (_region(arg)[0] for arg in node.args[:3])
                if str(a.dtype) == "float32":
                    for buf in (a, b, c):
                        self.layouts[buf.data] = "rows_n"

        tirx.stmt_functor.post_order_visit(body, visit)

    def _find_reduce_staging(self, body: Any) -> None:
        """Find ``T.copy(x, x_frag); T.reduce(x_frag, ...)`` pairs to reduce ``x`` directly.

        ``T.reduce_*`` on a shared buffer stages it through a fragment copy (a GPU
        register-file concern).  On the TPU both live in local memory, so when the
        fragment is used by nothing else the reduction reads the original tile and
        the copy is not emitted.  (The row reduction writes only the row padding,
        outside the tile's logical data.)
        """
        from tvm import tirx

        uses: dict[Any, int] = {}
        pairs: list[tuple[Any, Any, Any]] = []

        def visit(node: Any) -> None:
            if isinstance(node, (tirx.BufferLoad, tirx.BufferStore)):
                uses[node.buffer.data] = uses.get(node.buffer.data, 0) + 1
            if isinstance(node, tirx.SeqStmt):
                seq = list(node.seq)
                for first, second in itertools.pairwise(seq):
                    copy, red = _tile_call(first, "tl.tileop.copy"), _tile_call(second, "tl.tileop.reduce")
                    if copy is None or red is None:
                        continue
                    (src, smin, sext), (dst, dmin, dext) = _region(copy.args[0]), _region(copy.args[1])
                    same_kind = str(src.dtype) == str(dst.dtype) and [int(x) for x in src.shape] == [int(x) for x in dst.shape]
                    if same_kind and _region(red.args[0])[0].same_as(dst) and _whole(src, smin, sext) and _whole(dst, dmin, dext):
                        pairs.append((first, src, dst))

        tirx.stmt_functor.post_order_visit(body, visit)
        for stmt, src, dst in pairs:
            if uses.get(dst.data) == 2 and src.scope() != "global":
                self.aliases[dst.data] = src.data
                self.skipped.append((stmt, dst.data))

    def _aliased_copy(self, stmt: Any) -> bool:
        """True for a staging copy whose destination became an alias of its source."""
        for copy, dst in self.skipped:
            if stmt.same_as(copy):
                tile = self.tiles.get(dst)
                return tile is not None and tile is self.tiles.get(self.aliases[dst])
        return False

    def _global_layouts(self, body: Any) -> set[tuple[Any, str]]:
        from tvm import tirx

        out: set[tuple[Any, str]] = set()

        def visit(node: Any) -> None:
            if isinstance(node, tirx.Call) and _op_name(node) == "tl.tileop.copy":
                src, dst = _region(node.args[0])[0], _region(node.args[1])[0]
                for g, t in ((src, dst), (dst, src)):
                    if g.data in self.globals_ and self.layouts.get(t.data, "lanes") != "lanes":
                        out.add((g.data, self.layouts[t.data]))

        tirx.stmt_functor.post_order_visit(body, visit)
        return out

    # ------------------------------------------------------------------ statements

    def stmt(self, s: Any) -> None:
        from tvm import tirx

        if isinstance(s, tirx.SeqStmt):
            for child in s.seq:
                if self._aliased_copy(child):
                    continue
                self.stmt(child)
            return
        previous = self.stmt_text
        if not isinstance(s, (tirx.For, tirx.IfThenElse, tirx.AttrStmt)):
            self.stmt_text = _stmt_text(s)
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
                self.names[s.var] = name
            elif isinstance(s, tirx.AttrStmt):
                self.stmt(s.body)
            elif isinstance(s, tirx.BufferStore):
                self.buffer_store(s)
            elif isinstance(s, tirx.AssertStmt):
                raise self.fail("assert statement")
            else:
                raise self.fail(f"statement kind {type(s).__name__}")
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

        if buf.data in self.aliases and self.aliases[buf.data] in self.tiles:
            self.tiles[buf.data] = self.tiles[self.aliases[buf.data]]
            return
        scope = buf.scope()
        dtype = str(buf.dtype)
        if scope == "local.var":
            ctype = "int" if "int" in dtype else "float"
            name = self.fresh(str(buf.name))
            self.emit(f"{ctype} {name} = 0;")
            self.scalars[buf.data] = name
            return
        if scope not in _LOCAL_SCOPES:
            raise self.fail(f"buffer scope {scope!r} of {buf.name}", hint=f"supported: {', '.join(_LOCAL_SCOPES)} and local.var")
        if dtype not in DTYPES:
            raise self.fail(f"tile {buf.name} has dtype {dtype}, which PPL does not support", hint=f"use one of {', '.join(DTYPES)}")
        if not all(isinstance(s, tirx.IntImm) for s in buf.shape):
            raise self.fail(f"tile {buf.name} has a symbolic shape")
        shape = tuple(int(s) for s in buf.shape)
        if not 1 <= len(shape) <= 4:
            raise self.fail(f"tile {buf.name} has rank {len(shape)}; ranks 1 to 4 are supported")
        layout = self.layouts.get(buf.data, "lanes")
        if layout != "lanes" and buf.data in self.reduce_sources:
            raise self.fail(
                f"tile {buf.name} is both an fp32 T.gemm operand and a T.reduce source",
                hint="fp32 matmul operands keep whole rows in one lane; copy the result to another tile before reducing it",
            )
        if layout != "lanes" and len(shape) != 2:
            raise self.fail(f"T.gemm operand {buf.name} of rank {len(shape)}", hint="T.gemm takes 2-D tiles")
        block = to4([str(s) for s in shape], layout)
        if buf.data in self.reduce_sources:
            # The row reduction pads each row's tail in place (see quick_pooling).
            block[3] = str(-(-int(block[3]) // REDUCE_ALIGN) * REDUCE_ALIGN)
        name = self.fresh(str(buf.name))
        shape4 = to4([str(s) for s in shape], layout)
        bvar = self.dim4var(block, name + "_block")
        if block == shape4:
            self.emit(f"auto {name} = make_tensor<{DTYPES[dtype]}>({bvar}, {bvar});")
        else:
            rvar = self.dim4var(shape4, name + "_shape")
            self.emit(f"auto {name} = make_tensor<{DTYPES[dtype]}>({bvar}, {rvar});")
        self.tiles[buf.data] = Tile(name, dtype, shape, block, layout)

    def for_(self, loop: Any) -> None:
        from tvm import tirx

        if loop.kind == tirx.ForKind.PARALLEL:
            self.stmt_text = _stmt_text(loop)
            # A scope of its own: the temporaries' local memory is free again after it.
            self.emit("{")
            self.indent += 1
            self.parallel(loop)
            self.indent -= 1
            self.emit("}")
            return
        if loop.kind not in (tirx.ForKind.SERIAL, tirx.ForKind.UNROLLED):
            raise self.fail(f"{loop.kind} loop", loop)
        var = self.fresh(loop.loop_var.name)
        self.names[loop.loop_var] = var
        lo = self.expr(loop.min)
        hi = self.expr(loop.min + loop.extent) if not _is_zero(loop.min) else self.expr(loop.extent)
        self.analyzer.bind(loop.loop_var, _range(loop.min, loop.extent))
        self.emit(f"for (int {var} = {lo}; {var} < {hi}; ++{var}) {{")
        if ("num_stages" in loop.annotations and int(loop.annotations["num_stages"]) > 1) or loop.same_as(self.pipelined_grid):
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
        raise self.fail(
            f"scalar store to {s.buffer.name}",
            hint="TPU tiles are written a whole tile at a time: use T.copy, T.fill or a T.Parallel loop over the tile",
        )

    # ------------------------------------------------------------------ tile ops

    def evaluate(self, s: Any) -> None:
        from tvm import tirx

        call = s.value
        if isinstance(call, tirx.IntImm):
            return
        if not isinstance(call, tirx.Call):
            raise self.fail(f"expression statement {type(call).__name__}")
        op = _op_name(call)
        handler = {
            "tl.tileop.copy": self.copy,
            "tl.tileop.fill": self.fill,
            "tl.tileop.reduce": self.reduce,
            "tl.tileop.gemm": self.gemm,
        }.get(op)
        if op == "tirx.ret":
            return
        if handler is None:
            name = op.removeprefix("tl.tileop.")
            raise self.fail(f"T.{name}" if op.startswith("tl.tileop.") else f"call to {op}", hint=_SUPPORTED_HINT)
        self.emit("{")
        self.indent += 1
        handler(call)
        self.indent -= 1
        self.emit("}")

    def region_view(self, buf: Any, mins: list[Any], extents: list[Any]) -> tuple[Tile, str, list[str]]:
        """(tile, C expression of the view, 4-D extents) of a local region."""
        tile = self.tiles.get(buf.data)
        if tile is None:
            raise self.fail(f"{buf.name} is not a local tile (scope {buf.scope()})")
        ext = [self.expr(e) for e in extents]
        if (
            all(_is_zero(m) for m in mins)
            and [int(e) for e in extents if _is_const(e)] == list(tile.shape)
            and all(_is_const(e) for e in extents)
        ):
            return tile, tile.name, tile.shape4
        shp = self.dim4var(to4(ext, tile.layout))
        off = self.dim4var(offset4([self.expr(m) for m in mins], tile.layout), "off")
        return tile, f"{tile.name}.sub_view({shp}, {off})", to4(ext, tile.layout)

    def copy(self, call: Any) -> None:
        src, src_min, src_ext = _region(call.args[0])
        dst, dst_min, dst_ext = _region(call.args[1])
        src_global = src.data in self.globals_
        dst_global = dst.data in self.globals_
        if src_global and dst_global:
            raise self.fail("T.copy from global to global memory", hint="stage the data through a T.alloc_shared tile")
        if not src_global and not dst_global:
            self.copy_local(src, src_min, src_ext, dst, dst_min, dst_ext)
            return
        gbuf, gmin, gext = (src, src_min, src_ext) if src_global else (dst, dst_min, dst_ext)
        lbuf, lmin, lext = (dst, dst_min, dst_ext) if src_global else (src, src_min, src_ext)
        g = self.globals_[gbuf.data]
        tile = self.tiles.get(lbuf.data)
        if tile is None:
            raise self.fail(f"T.copy to or from {lbuf.name}, which is not a local tile (scope {lbuf.scope()})")
        if _squeeze(gext) != _squeeze(lext):
            raise self.fail(f"T.copy between regions of different extents ({gbuf.name}: {list(gext)} vs {lbuf.name}: {list(lext)})")
        if tile.layout != "lanes" and len(g.shape) != len(tile.shape):
            raise self.fail(f"T.copy between {gbuf.name} (rank {len(g.shape)}) and matrix operand {lbuf.name} (rank {len(tile.shape)})")
        from tvm import tirx

        # Extents of the global side clipped at the tensor edge (TileLang's rule for tiles
        # that overhang the tensor: loads read zeros there, stores skip it).
        real: list[str] = []
        partial = False
        for i, (m, e) in enumerate(zip(gmin, gext, strict=True)):
            dim = g.shape[i]
            if _is_const(e) and int(e) > dim:
                raise self.fail(
                    f"T.copy region of extent {int(e)} along dimension {i} of {gbuf.name}, whose size is {dim}",
                    hint="check the slice: a region cannot be larger than the tensor (for a [M, 1] tensor copy into/from a [rows, 1] tile)",
                )
            if self.analyzer.can_prove(tirx.LE(m + e, tirx.const(dim, m.dtype))):
                real.append(self.expr(e))
                continue
            if not self.analyzer.can_prove(tirx.LT(m, tirx.const(dim, m.dtype))):
                raise self.fail(f"T.copy whose region may start outside {gbuf.name} (dimension {i} starts at {m})")
            partial = True
            name = self.fresh("n")
            self.emit(f"int {name} = min({self.expr(e)}, {dim} - {self.expr(m)});")
            real.append(name)
        lreal = _local_dims(lext, gext, real)
        g4 = to4(real, tile.layout if len(g.shape) == len(tile.shape) else "lanes")
        l4 = to4(lreal, tile.layout)
        if g4 != l4:
            raise self.fail(
                f"T.copy between {gbuf.name} region {list(gext)} and tile {lbuf.name}{list(tile.shape)} whose TPU layouts differ ({g4} vs {l4})",
                hint="copy between a region and a tile of the same shape (rows on the lanes, columns along W)",
            )
        shape = self.dim4var(g4)
        goff = self.dim4var(offset4([self.expr(m) for m in gmin], tile.layout if len(g.shape) == len(tile.shape) else "lanes"), "goff")
        gview = f"{self.global_view(gbuf.data, tile.layout)}.sub_view({shape}, {goff})"
        full_local = self._full_local(tile, lmin, lext)
        if full_local and not partial:
            lview = tile.name
        else:
            loff = self.dim4var(offset4([self.expr(m) for m in lmin], tile.layout), "loff")
            lview = f"{tile.name}.sub_view({shape}, {loff})"
        if src_global and partial:
            cond = " || ".join(f"{r} < {self.expr(e)}" for r, e in zip(real, gext, strict=True) if not r.lstrip("-").isdigit())
            if full_local:
                target = tile.name
            else:
                whole = self.dim4var(to4([self.expr(e) for e in lext], tile.layout), "lfull")
                target = f"{tile.name}.sub_view({whole}, {loff})"
            # The zero fill runs on the DMA engine (the TIU stays free for compute; also,
            # ppl-compile 1.7 crashes on a tiu fill + partial load of one tile when pipelined).
            self.emit(f"if ({cond}) dma::zero({target});")
        if g.dtype != tile.dtype:
            self._copy_cast(src_global, g, gview, tile, lview, shape)
        elif src_global:
            self.emit(f"dma::load({lview}, {gview});")
        else:
            self.emit(f"dma::store({gview}, {lview});")

    def _full_local(self, tile: Tile, mins: list[Any], extents: list[Any]) -> bool:
        return all(_is_zero(m) for m in mins) and all(_is_const(e) for e in extents) and tuple(int(e) for e in extents) == tile.shape

    def _copy_cast(self, load: bool, g: GlobalTensor, gview: str, tile: Tile, lview: str, lreal: str) -> None:
        if g.dtype not in FLOAT_DTYPES or tile.dtype not in FLOAT_DTYPES:
            raise self.fail(f"T.copy converting {g.dtype} <-> {tile.dtype}", hint="casts between fp32, fp16 and bf16 are supported")
        blk = self.dim4var(tile.block, "cblk")
        tmp = self.fresh("staged")
        self.emit(f"auto {tmp} = make_tensor<{DTYPES[g.dtype]}>({blk}, {lreal});")
        if load:
            self.emit(f"dma::load({tmp}, {gview});")
            self.emit(f"tiu::cast({lview}, {tmp});")
        else:
            self.emit(f"tiu::cast({tmp}, {lview});")
            self.emit(f"dma::store({gview}, {tmp});")

    def copy_local(self, src: Any, src_min: list[Any], src_ext: list[Any], dst: Any, dst_min: list[Any], dst_ext: list[Any]) -> None:
        if _squeeze(src_ext) != _squeeze(dst_ext):
            raise self.fail(f"T.copy between tiles of different extents ({list(src_ext)} vs {list(dst_ext)})")
        st, sview, s4 = self.region_view(src, src_min, src_ext)
        dt, dview, d4 = self.region_view(dst, dst_min, dst_ext)
        if s4 != d4 or st.layout != dt.layout:
            raise self.fail(
                f"T.copy between tiles whose TPU layouts differ ({src.name}: {st.layout} {s4} vs {dst.name}: {dt.layout} {d4})",
                hint="copy between tiles of the same rank; fp32 T.gemm operands keep whole rows in one lane and cannot be copied to row-on-lane tiles",
            )
        if st.dtype == dt.dtype:
            self.emit(f"tiu::move({dview}, {sview});")
        elif st.dtype in FLOAT_DTYPES and dt.dtype in FLOAT_DTYPES:
            self.emit(f"tiu::cast({dview}, {sview});")
        else:
            raise self.fail(f"T.copy converting {st.dtype} -> {dt.dtype}", hint="casts between fp32, fp16 and bf16 are supported")

    def fill(self, call: Any) -> None:
        buf, mins, ext = _region(call.args[0])
        tile, view, _ = self.region_view(buf, mins, ext)
        value = call.args[1]
        from tvm import tirx

        if isinstance(value, tirx.IntImm) and tile.dtype in FLOAT_DTYPES:
            value = tirx.FloatImm(tile.dtype, float(value.value))
        self.emit(f"tiu::fill({view}, {self.expr(value)});")

    def reduce(self, call: Any) -> None:
        src, smin, sext = _region(call.args[0])
        dst, _dmin, _dext = _region(call.args[1])
        kind = str(call.args[2].value) if hasattr(call.args[2], "value") else str(call.args[2])
        dim = int(call.args[3])
        clear = bool(int(call.args[4]))
        if kind not in _REDUCE:
            raise self.fail(f"T.reduce_{kind}", hint=f"supported reductions: {', '.join('reduce_' + k for k in _REDUCE)}")
        st = self.tiles.get(src.data)
        if st is None or dst.data not in self.tiles:
            raise self.fail("T.reduce on a buffer that is not a local tile")
        if len(st.shape) < 2 or dim != len(st.shape) - 1:
            raise self.fail(
                f"T.reduce_{kind} over dim {dim} of a rank-{len(st.shape)} tile",
                hint="the tpu target reduces along the last axis of a 2-D (or higher) tile (rows are on the lanes)",
            )
        if st.dtype not in FLOAT_DTYPES:
            raise self.fail(f"T.reduce_{kind} of {st.dtype} data", hint="fp32, fp16 and bf16 are supported")
        if not self._full_local(st, smin, sext):
            raise self.fail(f"T.reduce_{kind} of part of tile {src.name}", hint="reduce a whole tile")
        dt = self.tiles[dst.data]
        if dt.layout != "lanes":
            raise self.fail(f"T.reduce_{kind} into fp32 T.gemm operand {dst.name}", hint="reduce into a separate tile")
        if dt.dtype != st.dtype:
            raise self.fail(f"T.reduce_{kind} from {st.dtype} into {dt.dtype}", hint="reduce into a tile of the source dtype")
        mode, identity, negate, absolute = _REDUCE[kind]
        ident = self.expr(_float(identity, st.dtype))
        out_shape = list(st.shape4)
        out_shape[3] = "1"
        if dt.shape4 != out_shape:
            raise self.fail(
                f"T.reduce_{kind} into tile {dst.name} of shape {list(dt.shape)}; expected {list(st.shape[:-1])} or {[*list(st.shape[:-1]), 1]}"
            )
        out = dt.name
        blk = self.dim4var(st.block, "rblock")
        real = self.dim4var(st.shape4, "rreal")
        source = st.name
        if negate or absolute:
            # min = -max(-x); abs* pool |x|.  Work on a scratch copy: the source tile stays intact.
            source = self.fresh("rsrc")
            self.emit(f"auto {source} = make_tensor<{DTYPES[st.dtype]}>({blk}, {real});")
            if absolute:
                self.emit(f"tiu::fabs({source}, {st.name});")
            else:
                self.emit(f"tiu::fmul({source}, {st.name}, -1.0f);")
        target = out
        if not clear:
            target = self.fresh("racc")
            tblk = self.dim4var(out_shape, "racc_block")
            self.emit(f"auto {target} = make_tensor<{DTYPES[st.dtype]}>({tblk}, {tblk});")
        # PPL's row reduction: pads each row to whole EUs with the identity, then pools twice.
        self.emit(f"quick_pooling({target}, {source}, &{blk}, &{real}, {ident}, {mode}, 1.0f);")
        if negate:
            self.emit(f"tiu::fmul({target}, {target}, -1.0f);")
        if not clear:
            combine = {"max": "fmax", "absmax": "fmax", "min": "fmin", "sum": "fadd", "abssum": "fadd"}[kind]
            self.emit(f"tiu::{combine}({out}, {out}, {target});")

    def gemm(self, call: Any) -> None:
        a, amin, aext = _region(call.args[0])
        b, bmin, bext = _region(call.args[1])
        c, cmin, cext = _region(call.args[2])
        trans_a, trans_b = bool(int(call.args[3])), bool(int(call.args[4]))
        clear = bool(int(call.args[9]))
        tiles = [self.tiles.get(x.data) for x in (a, b, c)]
        if any(t is None for t in tiles):
            raise self.fail("T.gemm on a buffer that is not a local tile")
        at, bt, ct = tiles
        assert at is not None and bt is not None and ct is not None
        for t, mins, ext in ((at, amin, aext), (bt, bmin, bext), (ct, cmin, cext)):
            if len(t.shape) != 2 or not self._full_local(t, mins, ext):
                raise self.fail(f"T.gemm on part of, or a non-2-D, tile {t.name}", hint="T.gemm takes whole 2-D tiles")
        if at.dtype != bt.dtype or at.dtype not in FLOAT_DTYPES:
            raise self.fail(f"T.gemm of {at.dtype} x {bt.dtype}", hint="A and B must both be fp32, fp16 or bf16")
        if ct.dtype != "float32" and ct.dtype != at.dtype:
            raise self.fail(f"T.gemm accumulating {at.dtype} into {ct.dtype}", hint="accumulate in float32")
        m, k = (at.shape[1], at.shape[0]) if trans_a else at.shape
        kb, n = (bt.shape[1], bt.shape[0]) if trans_b else bt.shape
        if k != kb or ct.shape != (m, n):
            raise self.fail(
                f"T.gemm shapes A{list(at.shape)} B{list(bt.shape)} C{list(ct.shape)} do not agree (transpose_A={trans_a}, transpose_B={trans_b})"
            )
        accumulate = "false" if clear else "true"
        if at.dtype == "float32":
            # fp32 runs on the mm v1 unit (tiu::fmm); its operands use the rows_n layout
            # (rows on N, a whole row in one lane), chosen for these tiles up front.
            if trans_a or trans_b:
                raise self.fail(
                    f"fp32 T.gemm with transpose_A={trans_a}, transpose_B={trans_b}",
                    hint="fp32 matmul supports untransposed operands; store the operands untransposed or use fp16/bf16 inputs",
                )
            self.emit(f"tiu::fmm({ct.name}, {at.name}, {bt.name}, {accumulate});")
            return
        if trans_a:
            raise self.fail(
                "T.gemm with transpose_A=True",
                hint="PPL's fp16/bf16 matmul (mm2) takes A untransposed; store A as [M, K]",
            )
        form = "nt" if trans_b else "nn"
        self.emit(f"tiu::fmm2_{form}({ct.name}, {at.name}, {bt.name}, {accumulate});")

    # ------------------------------------------------------------------ element-wise

    def parallel(self, loop: Any) -> None:
        from tvm import tirx

        loops = []
        body = loop
        while isinstance(body, tirx.For) and body.kind == tirx.ForKind.PARALLEL:
            if not _is_zero(body.min) or not _is_const(body.extent):
                raise self.fail("T.Parallel loop with a non-zero start or a symbolic extent", loop)
            loops.append(body)
            body = body.body
        stores = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
        loop_vars = [lp.loop_var for lp in loops]
        extents = [int(lp.extent) for lp in loops]
        for store in stores:
            if not isinstance(store, tirx.BufferStore):
                raise self.fail(
                    f"{type(store).__name__} inside T.Parallel",
                    loop,
                    hint="a T.Parallel body must be tile element assignments c[i, j] = expr",
                )
            self.elementwise(store, loop_vars, extents, loop)

    def elementwise(self, store: Any, loop_vars: list[Any], extents: list[int], loop: Any) -> None:
        from tvm import tirx

        tile = self.tiles.get(store.buffer.data)
        if tile is None:
            raise self.fail(
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
            and all(_same_var(i, v) for i, v in zip(vars_in_order, loop_vars, strict=True))
        )
        if not valid:
            raise self.fail(
                f"T.Parallel store {store.buffer.name}[{', '.join(map(str, index))}] not indexed by the loop variables in order",
                loop,
                hint="write c[i, j] = ... with the T.Parallel variables as the indices",
            )
        loop_extent = dict(zip((v.name for v in loop_vars), extents, strict=True))
        dom_ext = [loop_extent[i.name] if isinstance(i, tirx.Var) else 1 for i in index]
        dom_off = [0 if isinstance(i, tirx.Var) else int(i) for i in index]
        if any(o + e > s for o, e, s in zip(dom_off, dom_ext, tile.shape, strict=True)):
            raise self.fail(f"T.Parallel store {store.buffer.name}[{', '.join(map(str, index))}] outside the tile {list(tile.shape)}", loop)
        if tuple(dom_ext) != tile.shape:
            dom = self.dim4var(to4([str(e) for e in dom_ext], tile.layout), "dom")
            origin = self.dim4var(offset4([str(o) for o in dom_off], tile.layout), "origin")
            dst = f"{tile.name}.sub_view({dom}, {origin})"
        else:
            dst = tile.name
        ctx = _Elementwise(self, loop_vars, index, dom_ext, dom_off, tile, loop)
        result = ctx.compute(store.value, dst)
        if result is not None:
            if result.is_tile:
                if result.dtype != tile.dtype:
                    self.emit(f"tiu::cast({dst}, {result.text});")
                else:
                    self.emit(f"tiu::move({dst}, {result.text});")
            else:
                self.emit(f"tiu::fill({dst}, {result.text});")


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
            op = _op_name(e)
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
            em.emit(f"tiu::{fn}({out}, {a.text}, {_as_float(b.text)});")
        elif fn in ("fadd", "fmul", "fmax", "fmin"):
            em.emit(f"tiu::{fn}({out}, {b.text}, {_as_float(a.text)});")
        else:  # scalar - tile, scalar / tile
            em.emit(f"tiu::{fn}({out}, {_as_float(a.text)}, {b.text});")
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
        if len(idx) == len(self.index) and all(_same_index(i, d) for i, d in zip(idx, self.index, strict=True)):
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
                (len(idx) == 1 and _same_index(idx[0], self.index[0]))
                or (
                    len(idx) == 2
                    and _same_index(idx[0], self.index[0])
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


# ---------------------------------------------------------------------- small helpers

#: Element-wise functions: TIR op or the C name LowerIntrin gives it -> PPL tiu function.
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

#: Identifiers a TileLang name must not shadow in the generated C++ (names get a suffix instead).
_RESERVED = {
    *("ppl", "tiu", "dma", "dim4", "tensor", "gtensor", "GLOBAL", "make_tensor", "quick_pooling", "fexp", "min", "max", "align"),
    *("fp32", "fp16", "bf16", "int8", "int16", "int32", "uint8", "uint16", "uint32"),
    *("auto", "bool", "break", "case", "char", "class", "const", "continue", "default", "delete", "do", "double", "else"),
    *("enum", "false", "float", "for", "if", "int", "long", "namespace", "new", "return", "short", "signed", "sizeof"),
    *("static", "struct", "switch", "template", "this", "true", "typedef", "union", "unsigned", "using", "void", "while"),
}

_SUPPORTED_HINT = (
    "supported tile ops on tpu: T.copy, T.fill/T.clear, T.reduce_{max,min,sum,abssum,absmax}, T.gemm, T.Parallel element-wise loops"
)


def _op_name(call: Any) -> str:
    op = call.op
    return str(op.name) if hasattr(op, "name") else str(op)


def _region(arg: Any) -> tuple[Any, list[Any], list[Any]]:
    """(buffer, mins, extents) of a ``tl.region`` argument."""
    from tvm import tirx

    if isinstance(arg, tirx.Call) and _op_name(arg) == "tl.region":
        load = arg.args[0]
        extents = list(arg.args[2:])
        mins = list(load.indices)
        if len(extents) < len(mins):
            extents = [tirx.const(1, "int32")] * (len(mins) - len(extents)) + extents
        return load.buffer, mins, extents
    if isinstance(arg, tirx.BufferLoad):
        return arg.buffer, list(arg.indices), [tirx.const(1, "int32")] * len(arg.indices)
    raise CodegenError(f"tile-op operand {arg}", str(arg))


def _pipelinable_grid_loop(body: Any) -> Any:
    """The innermost T.Kernel grid loop, if ppl-compile can pipeline its body.

    MaterializeKernelLaunch turns the grid into the kernel's outermost serial loops.
    Their iterations are independent blocks, so pipelining the innermost one is
    always correct.  It is skipped when the body has a loop of its own (that loop
    is the one to pipeline) or an in-place element-wise update (``x[i, j] = f(x[i, j])``):
    ppl-compile 1.7 (tpu_mlir 1.30.2) crashes with SIGSEGV on such bodies in a
    pipelined loop.
    """
    from tvm import tirx

    stmts = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
    rest = [s for s in stmts if not isinstance(s, tirx.DeclBuffer) and not _is_ret(s)]
    if len(rest) != 1 or not _is_grid_loop(rest[0]):
        return None
    loop = rest[0]
    while _is_grid_loop(loop.body):
        loop = loop.body
    blockers: list[Any] = []

    def visit(node: Any) -> None:
        if isinstance(node, tirx.For) and node.kind != tirx.ForKind.PARALLEL:
            blockers.append(node)
        elif isinstance(node, tirx.BufferStore):
            reads: list[Any] = []
            tirx.stmt_functor.post_order_visit(
                tirx.Evaluate(node.value),
                lambda n: reads.append(n) if isinstance(n, tirx.BufferLoad) and n.buffer.data.same_as(node.buffer.data) else None,
            )
            if reads:
                blockers.append(node)

    tirx.stmt_functor.post_order_visit(loop.body, visit)
    return None if blockers else loop


def _is_grid_loop(stmt: Any) -> bool:
    from tvm import tirx

    return isinstance(stmt, tirx.For) and stmt.kind == tirx.ForKind.SERIAL and len(stmt.annotations) == 0


def _is_ret(stmt: Any) -> bool:
    from tvm import tirx

    return isinstance(stmt, tirx.Evaluate) and isinstance(stmt.value, tirx.Call) and _op_name(stmt.value) == "tirx.ret"


def _tile_call(stmt: Any, op: str) -> Any:
    from tvm import tirx

    if isinstance(stmt, tirx.Evaluate) and isinstance(stmt.value, tirx.Call) and _op_name(stmt.value) == op:
        return stmt.value
    return None


def _whole(buf: Any, mins: list[Any], extents: list[Any]) -> bool:
    return (
        all(_is_zero(m) for m in mins) and all(_is_const(e) for e in extents) and [int(e) for e in extents] == [int(x) for x in buf.shape]
    )


_FREE_DECL = re.compile(r"^\s*\w+ = T\.(Buffer|handle|int\d+|uint\d+|float\d+|bfloat16|bool|Var)\(")


def _stmt_text(node: Any) -> str:
    try:
        text = node.script() if hasattr(node, "script") else str(node)
    except Exception:
        text = str(node)
    # TVMScript prints free buffers and variables as declarations first; they are not the statement.
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#") and not _FREE_DECL.match(ln)]
    if len(lines) > 6:
        lines = [*lines[:6], "..."]
    return "\n".join(lines)


def _is_zero(e: Any) -> bool:
    return _is_const(e) and int(e) == 0


def _is_const(e: Any) -> bool:
    from tvm import tirx

    return isinstance(e, tirx.IntImm)


def _same_index(a: Any, b: Any) -> bool:
    """Both the same variable, or both the same integer constant."""
    from tvm import tirx

    if isinstance(a, tirx.IntImm) and isinstance(b, tirx.IntImm):
        return int(a) == int(b)
    return _same_var(a, b)


def _same_var(a: Any, b: Any) -> bool:
    from tvm import tirx

    return isinstance(a, tirx.Var) and a.same_as(b)


def _range(lo: Any, extent: Any) -> Any:
    from tvm import ir

    return ir.Range.from_min_extent(lo, extent)


def _squeeze(extents: list[Any]) -> list[str]:
    return [str(e) for e in extents if not (_is_const(e) and int(e) == 1)]


def _local_dims(lext: list[Any], gext: list[Any], real: list[str]) -> list[str]:
    """Extents of the local side of a DMA: the local region's extents, each non-unit
    one replaced by the (possibly clipped) global extent it pairs with, in order."""
    gpairs = [r for e, r in zip(gext, real, strict=True) if not (_is_const(e) and int(e) == 1)]
    out = []
    for e in lext:
        out.append("1" if _is_const(e) and int(e) == 1 else gpairs.pop(0))
    return out


def _check_contiguous(em: Emitter, buf: Any) -> None:
    strides = [int(s) for s in buf.strides] if len(buf.strides) else []
    if not strides:
        return
    expected = []
    acc = 1
    for dim in reversed([int(s) for s in buf.shape]):
        expected.append(acc)
        acc *= dim
    if strides != list(reversed(expected)):
        raise em.fail(f"tensor {buf.name} has strides {strides}; the tpu target needs contiguous (row-major) tensors", em.func)


def _float(text: str, dtype: str) -> Any:
    from tvm import tirx

    return tirx.FloatImm(dtype, float(text))


def _as_float(text: str) -> str:
    return text if text.endswith("f") else f"(float)({text})"
