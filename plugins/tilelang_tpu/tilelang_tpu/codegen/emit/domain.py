"""The loop domain of one ``T.Parallel`` assignment: its destination tile, the loop
variables and extents, and the temporaries computed over it.

:class:`ParallelDomain` is what the expression helpers (:mod:`.index_tiles`, :mod:`.select`)
work on.  It leaves :meth:`ParallelDomain.compute` -- an expression computed over the domain --
to :class:`~tilelang_tpu.codegen.emit.operands.ParallelBody`, so the recursion
"expression -> select -> expression" goes through this class, not through an import circle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tilelang_tpu.codegen.layout import DTYPES, LAYOUTS, to4

if TYPE_CHECKING:
    from tilelang_tpu.codegen.context import EmitContext
    from tilelang_tpu.codegen.values import CodegenError, Operand, Tile

__all__ = ["ParallelDomain"]


class ParallelDomain:
    """One ``T.Parallel`` assignment's domain, over which its temporaries are tiles."""

    def __init__(
        self,
        em: EmitContext,
        loop_vars: list[Any],
        index: list[Any],
        dom_ext: list[int],
        dom_off: list[int | str],
        dst_tile: Tile,
        loop: Any,
        origins: list[Any] | None = None,
    ) -> None:
        self.em = em
        self.loop_vars = loop_vars
        self.index = index  # the destination's index per tile dim: loop variable or constant
        self.extents = dom_ext  # the domain's extent per destination tile dim
        self.offsets = dom_off  # and its origin (an int or C expression): see origins
        self.dst_tile = dst_tile
        # The destination's origin per dim as TIR: the offset along a loop variable (c[i, j + 64]),
        # else the index itself.
        self.origins = origins if origins is not None else [0 if self.is_loop_var(i) else i for i in index]
        # TIU instructions work lane by lane: every operand of one must start on the same lane.
        # Temporaries start on lane 0, so a destination whose rows start elsewhere (c[k, j] in a
        # serial loop over k, c[i + 1, j]) is computed on lane 0 and moved into place by a DMA.
        self.rows_at_zero = self.starts_on_lane_zero(self.origins)
        self.loop = loop
        self.dom4 = to4([str(e) for e in dom_ext], dst_tile.layout)
        self.block: str | None = None  # the 4-D block of the temporaries, declared on first use
        self.axis_tiles: dict[int, str] = {}  # destination dim -> fp32 tile of its index

    def starts_on_lane_zero(self, origins: list[Any]) -> bool:
        """Whether a view of the domain's shape at ``origins`` (TIR, per dim) starts on lane 0."""
        if self.dst_tile.layout != "lanes":
            return True
        o = origins[LAYOUTS["lanes"][len(origins)].index(1)]
        return bool(isinstance(o, int) and o == 0) or bool(self.em.analyzer.can_prove_equal(o, 0))

    def is_loop_var(self, e: Any) -> bool:
        """Whether ``e`` is one of the T.Parallel variables (not a serial loop's, not a constant)."""
        from tvm import tirx

        return isinstance(e, tirx.Var) and any(e.same_as(v) for v in self.loop_vars)

    def fail(self, what: str, hint: str = "") -> CodegenError:
        return self.em.fail(what, self.loop, hint)

    def temp(self, dtype: str) -> str:
        """A new temporary tile of ``dtype`` over the domain."""
        block = self.temp_block()
        name = self.em.fresh("t")
        self.em.emit(f"auto {name} = make_tensor<{DTYPES[dtype]}>({block}, {block});")
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

    def temp_block(self) -> str:
        """The 4-D block of the temporaries (declared on first use)."""
        if self.block is None:
            self.block = self.em.dim4var(self.dom4, "ew")
        return self.block

    def output(self, dtype: str, dst: str | None) -> str:
        """``dst`` if a result of ``dtype`` may be written there directly, else a new temporary."""
        if dst is not None and self.dst_tile.dtype == dtype:
            return dst
        return self.temp(dtype)

    def compute(self, e: Any, dst: str | None) -> Operand | None:
        """Compute ``e`` over the domain; write it into ``dst`` when given (returns None), else
        return an operand.  Only :class:`~tilelang_tpu.codegen.emit.operands.ParallelBody` computes."""
        raise NotImplementedError("ParallelDomain.compute: use ParallelBody")
