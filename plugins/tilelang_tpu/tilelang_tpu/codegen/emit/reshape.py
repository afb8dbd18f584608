"""``T.reshape``/``T.view`` of a global tensor: ``T.copy(T.reshape(A, [N // M, M]), B)``.

The reshaped buffer shares the parameter's memory (a ``DeclBuffer`` over the same data).
Kernel tensors are contiguous, so when the kernel reads and writes that memory only through
the reshaped buffer, the tensor is simply seen in the new shape: one more ``gtensor`` over the
same pointer, used from then on.  A kernel that uses both shapes of one tensor is refused by
name (each access would need its own view of the same data).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tilelang_tpu.codegen.layout import storage_dims, storage_type, to4
from tilelang_tpu.codegen.values import GlobalTensor

if TYPE_CHECKING:
    from tilelang_tpu.codegen.context import EmitContext

__all__ = ["reshape_global"]


def reshape_global(em: EmitContext, buf: Any) -> None:
    """See ``buf`` (a reshape of a kernel tensor) as that tensor from here on, or refuse by name."""
    from tvm import tirx

    g = em.globals_[buf.data]
    dims = [int(d) if isinstance(d, tirx.IntImm) else None for d in buf.shape]
    others: list[Any] = []

    def visit(node: Any) -> None:
        if isinstance(node, (tirx.BufferLoad, tirx.BufferStore)) and node.buffer.data.same_as(buf.data) and not node.buffer.same_as(buf):
            others.append(node.buffer)

    tirx.stmt_functor.post_order_visit(em.func.body, visit)
    size = 1
    for d in dims:
        size *= d if d is not None else 0
    fixed = all(d is not None for d in dims) and g.is_static
    extra_views = [layout for (var, layout) in em.global_views if var.same_as(buf.data) and layout != "lanes"]
    if others or not fixed or len(dims) > 4 or extra_views or size != _product(g.shape if fixed else ()):
        raise em.fail(
            f"T.reshape/T.view of global tensor {g.tensor or buf.name} as {list(buf.shape)}"
            + (" while the kernel also uses it in its declared shape" if others else ""),
            hint="declare the kernel parameter in the shape the kernel reads (the caller reshapes the torch tensor), "
            "or T.copy it into a tile and T.reshape the tile",
        )
    shape = [str(d) for d in dims]
    name = em.fresh(f"{g.name}_as")
    view = em.dim4var(storage_dims(to4(shape), g.dtype), name + "_shape")
    em.emit(f"auto {name} = gtensor<{storage_type(g.dtype)}>({view}, GLOBAL, {em.ids.of_var[buf.data]});")
    em.globals_[buf.data] = GlobalTensor(name, g.dtype, tuple(int(d) for d in shape), g.tensor)
    em.global_views[(buf.data, "lanes")] = name


def _product(dims: tuple[int, ...]) -> int:
    out = 1
    for d in dims:
        out *= d
    return out
