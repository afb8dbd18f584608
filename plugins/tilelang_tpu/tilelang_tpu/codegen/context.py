"""The emit context: the one mutable state of a kernel's PPL emission, and the helpers
every construct emitter shares.

It owns the output lines, the C identifiers, the local tiles, global tensors and scalars
declared so far, the kernel plan (made before emission) and the hoisted prologue.  It walks
nothing: the statement walker (:mod:`tilelang_tpu.codegen.walk`) drives it, and the construct
emitters (:mod:`tilelang_tpu.codegen.emit`) print through it, so they import this module and
never the walker.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tilelang_tpu.codegen.ir import is_const, is_zero, stmt_text
from tilelang_tpu.codegen.layout import WORD_PAIR_DTYPES, dim4, offset4, to4
from tilelang_tpu.codegen.plan import GridSplit, KernelPlan
from tilelang_tpu.codegen.scalar import HalfCast, ScalarPrinter, Unsupported
from tilelang_tpu.codegen.values import CodegenError, GlobalTensor, Namer, Tile

__all__ = ["NOT_PIPELINED", "EmitContext"]

#: A comment a construct prints inside a loop body that ppl-compile must not software-pipeline
#: (the loop's ``ppl::enable_pipeline()`` is then dropped: ``walk._unpipeline_per_element``).
NOT_PIPELINED = "// not pipelined: "


@dataclass
class EmitContext:
    """The state of one kernel's emission; create one per kernel (:func:`tilelang_tpu.codegen.generate`)."""

    func: Any
    chip: str = "bm1690"  # the ppl-compile chip (chip-specific code: codegen.emit.cast)
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
    split: GridSplit = field(default_factory=GridSplit)  # how the grid runs on them (plan.grid_split)
    overwriting: Any = None  # the T.gemm call whose zero fill was dropped (it overwrites its accumulator)
    clearing: Any = None  # the T.reduce call whose identity fill was dropped (it reduces with clear=True)
    first_step: Any = None  # (T.gemm call, its loop): the zero fill before the loop was dropped
    # Proven by codegen.ranges for the statement being emitted: the data var of a tile whose
    # narrowing cast needs no overflow fix; the 1 / sqrt(x) that may be tiu::frsqrt.
    in_range: Any = None
    safe_rsqrts: list[Any] = field(default_factory=list)
    before: Sequence[Any] = ()  # the statements before the one being emitted (codegen.ranges reads them)
    prologue: int = 0  # where in ``lines`` hoisted code goes: the kernel body's start, before every loop
    hoisted_tiles: dict[Any, str] = field(default_factory=dict)  # key -> tile built once in the prologue
    # Per-element code (codegen.emit.elements): whether the DMA/TIU instructions issued so far have
    # been waited for; whether the expression being printed may read single elements (only
    # outside T.Parallel); the walker, for emitters that lower a tile op to a loop nest.
    scalar_synced: bool = False
    elements_ok: bool = False
    walk: Callable[[Any], None] | None = None
    element_load: Callable[[Any], str] | None = None
    # A cast to fp16/bf16 in a scalar expression, rounded by the TIU (codegen.emit.half_elements.half_cast).
    half_cast: HalfCast | None = None
    element_tiles: set[Any] = field(default_factory=set)  # data vars of tiles per-element code touches
    half_shadows: dict[Any, str] = field(default_factory=dict)  # 16-bit tile -> its fp32 copy (codegen.emit.half_elements)

    def __post_init__(self) -> None:
        from tvm import arith

        self.analyzer = arith.Analyzer()
        self.scalar = ScalarPrinter(self.ids.of_var, self.analyzer, self._scalar_load, self._half_cast)

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

    def element_expr(self, e: Any) -> str:
        """Like :meth:`expr`, where ``e`` may read single tile and tensor elements (per-element
        code outside T.Parallel: :mod:`tilelang_tpu.codegen.emit.elements`)."""
        saved, self.elements_ok = self.elements_ok, True
        try:
            return self.expr(e)
        finally:
            self.elements_ok = saved

    def _half_cast(self, value: str, source: str, dtype: str, guard: str) -> str:
        if self.half_cast is None:
            raise Unsupported(f"scalar cast of a {source} value to {dtype} outside a kernel body")
        return self.half_cast(value, source, dtype, guard)

    def _scalar_load(self, load: Any) -> str:
        data = load.buffer.data
        if data in self.scalars:
            return self.scalars[data]
        if self.elements_ok and self.element_load is not None:
            return self.element_load(load)
        if data in self.globals_:
            raise Unsupported(
                f"scalar read of global tensor element {load.buffer.name}[{', '.join(map(str, load.indices))}] "
                "(the TPU reads global memory by DMA into tiles; T.copy the region into a tile and use T.Parallel over it)"
            )
        raise Unsupported(
            f"scalar read of tile element {load.buffer.name}[{', '.join(map(str, load.indices))}] "
            "(TPU local tensors are read a whole tile at a time; use T.Parallel over the tile)"
        )

    def global_view(self, var: Any, layout: str) -> str:
        """Name of the gtensor viewing kernel parameter ``var`` in ``layout``."""
        return self.global_views[(var, layout)]

    def hoisted(self, key: Any, build: Callable[[], str]) -> str:
        """The tile that ``build`` emits, emitted once at the start of the kernel body (before
        every loop) instead of where it is used; ``key`` identifies it (built once per key).
        ``build`` must depend on no variable of the kernel, only on constants."""
        if key in self.hoisted_tiles:
            return self.hoisted_tiles[key]
        # ``build`` may hoist in turn (a scratch tile hoists its shape): those lines go at the start
        # of ``build``'s own lines, so the kernel's prologue index moves only once, below, by
        # everything built (moving it for the nested lines too put the next hoisted lines one
        # line later each time, and the loop-body marks of walk._unpipeline_per_element missed
        # their ``ppl::enable_pipeline()``: a per-element body stayed pipelined, wrong results).
        saved, indent, prologue = self.lines, self.indent, self.prologue
        self.lines, self.indent, self.prologue = [], 1, 0
        try:
            name = build()
            built = self.lines
        finally:
            self.lines, self.indent, self.prologue = saved, indent, prologue
        self.lines[self.prologue : self.prologue] = built
        self.prologue += len(built)
        self.hoisted_tiles[key] = name
        return name

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
