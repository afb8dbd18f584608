"""``if``/``else`` statements inside ``T.Parallel``, as selects.

Upstream writes per-element branches inside ``T.Parallel`` (``if 16 < row < 96: B[...] = A[...] * 2
else: B[...] = A[...] * 0.5``).  The vector engine has no branches, but an iteration's ``if`` is
the same as each of its stores keeping the old value where the condition is false:

* a then-store and an else-store to the same element (the common form) become one store of
  ``T.Select(cond, then_value, else_value)``;
* any other store in the then-branch becomes ``buf[idx] = T.Select(cond, value, buf[idx])``, and
  in the else-branch ``T.Select(cond, buf[idx], value)``; an accumulating ``T.atomic_add``
  adds ``T.Select(cond, value, 0)``.

Stores in order see the values the stores before them left, under the condition or not, so
the sequence keeps the branch's meaning -- as long as the condition itself reads nothing the
branches write (it would be evaluated again after a store changed it): such a body is refused
here, and the walker then runs the loop per element, where the ``if`` is a C ``if``
(:func:`tilelang_tpu.codegen.emit.serial_ops.per_element_loop`).  Both branches' values are
computed for every element (tile ops): a performance note, not a correctness one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tilelang_tpu.codegen.context import EmitContext

__all__ = ["branch_stores"]

#: One flattened assignment: (BufferStore, whether it accumulates as a ``T.atomic_add``).
Assignment = tuple[Any, bool]


def branch_stores(em: EmitContext, branch: Any, loop: Any, stores_of: Callable[[Any], list[Assignment]]) -> list[Assignment]:
    """The assignments of the ``IfThenElse`` ``branch`` (of a T.Parallel body) as unconditional
    stores of selects; ``stores_of`` flattens a branch body (temporaries, nested ``if``s)."""
    from tvm import tirx

    cond = branch.condition
    then = stores_of(branch.then_case)
    other = stores_of(branch.else_case) if branch.else_case is not None else []
    written = {store.buffer.data for store, _ in then + other}
    read = _loaded(cond)
    if any(any(data.same_as(w) for w in written) for data in read):
        names = sorted({store.buffer.name for store, _ in then + other if any(store.buffer.data.same_as(r) for r in read)})
        raise em.fail(
            f"IfThenElse inside T.Parallel whose condition reads {', '.join(names)}, which the branch writes",
            loop,
            hint="compute the condition into a tile first (mask[i, j] = cond), then branch on mask[i, j]",
        )
    if _paired(then, other):
        return [
            (tirx.BufferStore(t.buffer, tirx.Select(cond, t.value, e.value), list(t.indices)), False)
            for (t, _), (e, _) in zip(then, other, strict=True)
        ]
    out: list[Assignment] = []
    for stores, taken in ((then, True), (other, False)):
        for store, accumulate in stores:
            if accumulate:
                zero = tirx.const(0, str(store.value.dtype))
                value = tirx.Select(cond, store.value, zero) if taken else tirx.Select(cond, zero, store.value)
            else:
                old = tirx.BufferLoad(store.buffer, list(store.indices))
                value = tirx.Select(cond, store.value, old) if taken else tirx.Select(cond, old, store.value)
            out.append((tirx.BufferStore(store.buffer, value, list(store.indices)), accumulate))
    return out


def _paired(then: list[Assignment], other: list[Assignment]) -> bool:
    """Whether both branches store the same elements in the same order (none accumulating)."""
    from tilelang_tpu.codegen.ir import same_exprs

    # same_exprs, not structural_equal: that equates o[i, j + r0[0]] with o[i, j + r1[0]] (two
    # scalars of one shape), and the else-branch's store went to the then-branch's element.
    return (
        len(then) == len(other) > 0
        and all(not a and not b for (_, a), (_, b) in zip(then, other, strict=True))
        and all(
            t.buffer.same_as(e.buffer) and same_exprs(list(t.indices), list(e.indices)) for (t, _), (e, _) in zip(then, other, strict=True)
        )
    )


def _loaded(e: Any) -> list[Any]:
    """Data variables of the buffers expression ``e`` loads from."""
    from tvm import tirx

    found: list[Any] = []
    tirx.stmt_functor.post_order_visit(tirx.Evaluate(e), lambda n: found.append(n.buffer.data) if isinstance(n, tirx.BufferLoad) else None)
    return found
