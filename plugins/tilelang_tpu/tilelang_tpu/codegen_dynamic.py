"""Symbolic (dynamic) tensor dimensions: ``M = T.symbolic("M")`` in ``T.Tensor((M, N), ...)``.

A symbolic dimension is an ``int`` parameter of the entry (:class:`tilelang_tpu.abi.ShapeSlot`),
set by the runtime from the tensors at each call, so one compiled kernel serves every size.
It may appear wherever a scalar expression may -- gtensor shapes, grid and loop bounds
(``T.ceildiv(M, block_M)``), masks -- and nowhere a size must be known at compile time: tiles
(local memory) stay static.

Copies between a tile and a region along a symbolic dimension are clipped at run time
(``n = min(block, M - offset)``) because nothing proves the region inside the tensor.  Nothing
proves its *start* inside either (``bx * 64 < M`` for ``bx < ceildiv(M, 64)`` is beyond TVM's
analyzer), so such a copy is also guarded by ``n > 0``: a region entirely past the end loads
zeros and stores nothing, TileLang's rule for out-of-bounds accesses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tilelang_tpu.codegen_ir import min_extent_range

if TYPE_CHECKING:
    from tilelang_tpu.codegen_emit import Emitter

__all__ = ["check_shape_vars"]


def check_shape_vars(em: Emitter, declared: list[Any], shape_vars: list[Any]) -> None:
    """Refuse symbolic shapes the ABI cannot carry, and tell the analyzer each dimension's range.

    Each dimension of a declared tensor must be a constant or one shape variable (the
    runtime binds a variable from the size of the first tensor axis it names); distinct
    variables must have distinct names (the runtime knows them by name).  (A shape variable
    that is also a scalar parameter would take two slots; TVMScript cannot express one --
    a parameter of the same name shadows the variable -- so that check is only a guard.)
    """
    from tvm import tirx

    from tilelang_tpu import abi

    for param in declared:
        if not isinstance(param, tirx.Buffer):
            if any(param.same_as(v) for v in shape_vars):
                raise em.fail(
                    f"symbolic dimension {param.name} that is also a scalar parameter",
                    em.func,
                    f"drop the scalar parameter {param.name}: the runtime passes the size of the tensors' dimension",
                )
            continue
        for axis, dim in enumerate(param.shape):
            if not isinstance(dim, (tirx.IntImm, tirx.Var)):
                raise em.fail(
                    f"tensor {param.name} whose dimension {axis} is the expression {dim}",
                    em.func,
                    "declare each dynamic dimension as its own variable (T.symbolic / T.dynamic) and derive sizes inside the kernel",
                )
    names = [str(v.name) for v in shape_vars]
    if len(set(names)) != len(names):
        twice = next(n for n in names if names.count(n) > 1)
        raise em.fail(
            f"two different symbolic variables named {twice}",
            em.func,
            "create each symbolic dimension once (M = T.symbolic('M')) and use that variable in every tensor",
        )
    if abi.shape_symbols([list(p.shape) for p in declared if isinstance(p, tirx.Buffer)]) != names:
        raise em.fail("symbolic dimensions recorded out of order by the lowering", em.func)
    for var in shape_vars:
        em.analyzer.bind(var, min_extent_range(tirx.const(0, "int32"), tirx.const(abi.SHAPE_MAX, abi.SHAPE_DTYPE)))
