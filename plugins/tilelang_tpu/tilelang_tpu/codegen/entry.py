"""The kernel signature: the entry's C parameters (ABI slots), the global tensor views, and
symbolic (dynamic) tensor dimensions: ``M = T.symbolic("M")`` in ``T.Tensor((M, N), ...)``.

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

from tilelang_tpu.codegen.ir import check_contiguous, min_extent_range, op_name, region
from tilelang_tpu.codegen.layout import DTYPES, WORD_PAIR_DTYPES, storage_dims, storage_type, to4
from tilelang_tpu.codegen.values import GlobalTensor

if TYPE_CHECKING:
    from tilelang_tpu.codegen.context import EmitContext

__all__ = ["check_shape_vars", "declare_globals", "params"]


def check_shape_vars(em: EmitContext, declared: list[Any], shape_vars: list[Any]) -> None:
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


def params(em: EmitContext) -> list[tuple[str, str]]:
    """(C type, name) of each entry parameter, declaring the global tensors.

    One pointer (``fp32 *``) per tensor the user declared and one by-value ``float``
    or ``int`` per scalar, in declared order, unused ones included
    (:func:`tilelang_tpu.abi.bind_pointers`, the binding rule).
    """
    from tvm import tirx

    from tilelang_tpu import abi

    attrs = em.func.attrs
    if attrs is None or abi.DECLARED_PARAMS_ATTR not in attrs:
        raise em.fail(
            "a device function without the record of its declared parameters",
            em.func,
            "lower the kernel with tilelang_tpu.lowering (tilelang.compile(..., target='tpu') does)",
        )
    declared = list(attrs[abi.DECLARED_PARAMS_ATTR])
    shape_vars = list(attrs[abi.SHAPE_VARS_ATTR]) if abi.SHAPE_VARS_ATTR in attrs else []
    check_shape_vars(em, declared, shape_vars)
    try:
        slots = abi.bind_pointers(declared, list(em.func.params), shape_vars)
    except abi.AbiError as err:
        raise em.fail(
            str(err),
            em.func,
            "declare scalar parameters as T.float32 or T.int32 and symbolic dimensions as int32 "
            "(or capture the value as a Python constant)",
        ) from None
    out = []
    for slot in slots:
        if isinstance(slot, abi.ShapeSlot):
            name = em.fresh(slot.symbol)
            em.ids.of_var[slot.var] = name
            em.shape_symbols.append(slot.symbol)
            out.append((abi.SHAPE_CTYPE + " ", name))
            continue
        if isinstance(slot, abi.ScalarSlot):
            em.ids.reserve(slot.name)
            em.ids.of_var[slot.var] = slot.name
            out.append((slot.ctype + " ", slot.name))
            continue
        buf = slot.buffer
        dtype = str(buf.dtype)
        if dtype not in DTYPES and dtype not in WORD_PAIR_DTYPES:
            raise em.fail(f"tensor {buf.name} has dtype {dtype}, which PPL does not support", em.func, f"use one of {', '.join(DTYPES)}")
        em.ids.reserve(slot.name)
        out.append((storage_type(dtype) + " *", slot.name))
        if not slot.used:
            continue
        dims = tuple(int(d) if isinstance(d, tirx.IntImm) else d for d in buf.shape)
        check_contiguous(em, buf)
        gname = em.fresh("g_" + str(buf.name))
        em.globals_[buf.data] = GlobalTensor(gname, dtype, dims, str(buf.name))
        em.ids.of_var[buf.data] = slot.name
    return out


def declare_globals(em: EmitContext) -> None:
    wanted = {(var, "lanes") for var in em.globals_}
    wanted |= _global_layouts(em, em.func.body)
    for var, g in em.globals_.items():
        for layout in ("lanes", "rows_n", "row"):
            if (var, layout) not in wanted:
                continue
            name = g.name if layout == "lanes" else em.fresh(f"{g.name}_{layout}")
            extents = [em.expr(g.extent(i)) for i in range(len(g.dims))]
            if len(extents) > 4:  # rank 5+: one flat W axis, read through strided views (codegen.emit.slices)
                extents = ["1", "1", "1", " * ".join(f"({e})" for e in extents)]
            shape = em.dim4var(storage_dims(to4(extents, layout), g.dtype), name + "_shape")
            em.emit(f"auto {name} = gtensor<{storage_type(g.dtype)}>({shape}, GLOBAL, {em.ids.of_var[var]});")
            em.global_views[(var, layout)] = name


def _global_layouts(em: EmitContext, body: Any) -> set[tuple[Any, str]]:
    from tvm import tirx

    out: set[tuple[Any, str]] = set()

    def visit(node: Any) -> None:
        if isinstance(node, tirx.Call) and op_name(node) in ("tl.tileop.copy", "tl.tileop.atomicadd"):
            src, dst = region(node.args[0])[0], region(node.args[1])[0]
            for g, t in ((src, dst), (dst, src)):
                if g.data in em.globals_ and em.plan.layouts.get(t.data, "lanes") != "lanes" and len(g.shape) == len(t.shape):
                    out.add((g.data, em.plan.layouts[t.data]))

    tirx.stmt_functor.post_order_visit(body, visit)
    return out
