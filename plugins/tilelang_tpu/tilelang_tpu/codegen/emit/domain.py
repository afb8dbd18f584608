"""The loop domain of one ``T.Parallel`` assignment: its destination tile, the loop
variables and extents, and the temporaries computed over it.

:class:`ParallelDomain` is what the expression helpers (:mod:`.index_tiles`, :mod:`.select`)
work on.  It leaves :meth:`ParallelDomain.compute` -- an expression computed over the domain --
to :class:`~tilelang_tpu.codegen.emit.operands.ParallelBody`, so the recursion
"expression -> select -> expression" goes through this class, not through an import circle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tilelang_tpu.codegen.layout import DTYPES, to4

if TYPE_CHECKING:
    from tilelang_tpu.codegen.context import EmitContext
    from tilelang_tpu.codegen.values import CodegenError, Operand, Tile

__all__ = ["ParallelDomain"]


class ParallelDomain:
    """One ``T.Parallel`` assignment's domain, over which its temporaries are tiles."""

    def __init__(
        self, em: EmitContext, loop_vars: list[Any], index: list[Any], dom_ext: list[int], dom_off: list[int], dst_tile: Tile, loop: Any
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
