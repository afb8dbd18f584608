"""Per-element code outside ``T.Parallel``: scalar reads and writes of tile and tensor elements.

Upstream's CPU-style kernels touch single elements in ``T.serial`` loops (a hand-written
GEMM, ``T.alloc_var`` accumulators over ``A[bx, j]``, an argmax scan, scalar
``T.atomic_add(H[ids[i]], w[i])``).  A TPU core has a scalar unit beside its DMA and vector
(TIU) engines, and PPL maps both memories into its address space:

* a local element is ``get_lmem_ptr(t.sub_view({1, 1, 1, 1}, offset))[0]``: PPL resolves
  the lane and the address of the element in the tile's own layout;
* a global element is ``base[flat]`` with ``base = get_gmem_ptr(ptr)`` (the tensors are
  contiguous, so ``flat`` is the row-major offset; symbolic sizes included).

The DMA and TIU engines run asynchronously to the scalar unit: before the scalar unit reads
or writes memory that an instruction issued earlier may still be using, the kernel waits for
them (``ppl::tpu_poll()``).  Instructions issued after a scalar store start after it, so they
see the value.  ``EmitContext.scalar_synced`` tracks whether a wait is needed: the walker
clears it after every tile op and at the head of a loop whose body issues tile ops; a loop
whose body is per-element code only waits once, before the loop.  A loop body with
per-element code is never software-pipelined (``ppl::enable_pipeline`` would move DMA
across the scalar accesses).

Element types: the scalar unit computes in ``float`` and the integer types; fp16/bf16
elements go through fp32 (:mod:`tilelang_tpu.codegen.emit.half_elements`); the word-pair
int64/uint64 tiles are refused by name with the rewrite.
Per-element code runs at the scalar unit's speed, one element at a time: a performance
note, not a correctness one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tilelang_tpu.codegen.emit.half_elements import HALF_DTYPES, half_read, half_write
from tilelang_tpu.codegen.layout import dim4, offset4

if TYPE_CHECKING:
    from tilelang_tpu.codegen.context import EmitContext

__all__ = [
    "ELEMENT_ATOMICS",
    "SCALAR_DTYPES",
    "element_ref",
    "element_tiles",
    "element_value",
    "emit_element_atomic",
    "emit_element_store",
    "global_access",
    "has_element_access",
    "has_tile_work",
    "keep_live",
    "refuse_store",
    "scalar_capable",
    "sync",
]

#: TIR dtype -> the PPL C type the scalar unit reads and writes it as.
SCALAR_DTYPES = {
    "float32": "fp32",
    "int32": "int32",
    "uint32": "uint32",
    "int16": "int16",
    "uint16": "uint16",
    "int8": "int8",
    "uint8": "uint8",
}

#: Element atomics (``T.atomic_add(H[i], v)`` and friends) -> how the new value is formed
#: from the old one ``r`` and the operand ``v`` (the kernel's blocks run one after another on
#: a core, and a grid with element atomics is not split over cores: ``grid.grid_split``).
ELEMENT_ATOMICS = {
    "tl.atomic_add_elem_op": "({r} + {v})",
    "tl.atomic_max_elem_op": "({v} > {r} ? {v} : {r})",
    "tl.atomic_min_elem_op": "({v} < {r} ? {v} : {r})",
}


#: The ``T.reduce_*`` kinds lowered to per-element loops (codegen.emit.serial_ops.BIT_REDUCTIONS).
_BIT_KINDS = frozenset({"bitxor", "bitor", "bitand"})


def _refuse_dtype(em: EmitContext, buf: Any, indices: Any) -> Any:
    dtype = str(buf.dtype)
    where = f"{buf.name}[{', '.join(map(str, indices))}]"
    return em.fail(
        f"per-element access to the {dtype} element {where} outside T.Parallel",
        hint=f"the TPU's scalar unit has no {dtype} arithmetic: keep per-element data in int32 or float32 "
        "(T.copy into such a tile casts it; cast back with T.copy at the end), or compute on "
        "whole tiles with T.Parallel",
    )


def sync(em: EmitContext) -> None:
    """Wait for the DMA and TIU instructions issued so far, unless nothing was issued since
    the last wait."""
    if not em.scalar_synced:
        em.emit("ppl::tpu_poll();")
        em.scalar_synced = True


def element_ref(em: EmitContext, buf: Any, indices: Any) -> str:
    """A C lvalue of the element ``buf[indices]`` of a local tile or a global tensor (the
    lines computing its address are emitted first; the caller uses it in the next line)."""
    ty = SCALAR_DTYPES.get(str(buf.dtype))
    data = buf.data
    if ty is None:
        raise _refuse_dtype(em, buf, indices)
    tile = em.tiles.get(data)
    if tile is not None:
        if str(tile.dtype) != str(buf.dtype):
            raise _refuse_dtype(em, buf, indices)
        sync(em)
        one = em.hoisted(("element", "one"), lambda: em.dim4var(["1", "1", "1", "1"], "elem_one"))
        off = em.fresh("eoff")
        em.emit(f"dim4 {off} = {dim4(offset4([em.expr(i) for i in indices], tile.layout))};")
        ptr = em.fresh("ep")
        em.emit(f"{ty} *{ptr} = get_lmem_ptr({tile.name}.sub_view({one}, {off}));")
        return f"{ptr}[0]"
    g = em.globals_.get(data)
    if g is not None:
        return global_access(em, buf, indices)[0]
    raise em.fail(f"element {buf.name}[{', '.join(map(str, indices))}] of a buffer the tpu codegen did not allocate (scope {buf.scope()})")


def global_access(em: EmitContext, buf: Any, indices: Any) -> tuple[str, str]:
    """(C lvalue, C bounds condition or ``""``) of element ``buf[indices]`` of a global tensor.

    Global accesses are bounds-checked as tilelang's safe-memory legalisation makes them on
    other targets: a read outside the tensor gives 0 and a write outside it is dropped (the
    last block of a grid that overhangs the tensor).  Checks the analyzer proves are left out."""
    from tvm import tirx

    g = em.globals_[buf.data]
    ty = SCALAR_DTYPES[str(buf.dtype)]
    sync(em)
    param = em.ids.of_var[buf.data]

    def base_pointer() -> str:
        name = em.fresh(f"{param}_elems")
        em.emit(f"{ty} *{name} = get_gmem_ptr({param});")
        return name

    base = em.hoisted(("element", "base", buf.data), base_pointer)
    flat, checks = "", []
    for axis, index in enumerate(indices):
        term = em.expr(index)
        if not is_const_expr(index):
            name = em.fresh("ei")
            em.emit(f"int {name} = {term};")
            term = name
        extent = g.extent(axis)
        if not em.analyzer.can_prove(tirx.GE(index, tirx.const(0, index.dtype))):
            checks.append(f"{term} >= 0")
        if not em.analyzer.can_prove(tirx.LT(index, extent)):
            checks.append(f"{term} < {em.expr(extent)}")
        flat = term if not flat else f"({flat}) * ({em.expr(extent)}) + {term}"
    return f"{base}[{flat or '0'}]", " && ".join(checks)


def is_const_expr(e: Any) -> bool:
    from tvm import tirx

    return isinstance(e, (tirx.IntImm, tirx.Var))


def element_value(em: EmitContext, load: Any) -> str:
    """The value of the element ``load`` reads, in a fresh C variable.

    Reads are taken out of the expression that uses them: ppl-compile 1.30.2 aborts on a
    memory read inside a conditional expression (the right side of ``&&``/``||``, a branch of
    ``?:``; ``getOriValue`` assertion), so the expression sees only variables.  A read has no
    side effect; when a condition guards it (``i < M && ids[i] < n``) the value is read but
    unused (the address stays inside the memory the runtime maps)."""
    if str(load.buffer.dtype) in HALF_DTYPES:
        return half_read(em, load)  # through fp32 (codegen.emit.half_elements)
    ty = SCALAR_DTYPES.get(str(load.buffer.dtype))
    name = em.fresh("ev")
    if ty is not None and load.buffer.data in em.globals_:
        ref, guard = global_access(em, load.buffer, load.indices)
        if guard:
            em.emit(f"{ty} {name} = 0;")
            em.emit(f"if ({guard}) {name} = {ref};")
            return name
    else:
        ref = element_ref(em, load.buffer, load.indices)
    em.emit(f"{SCALAR_DTYPES[str(load.buffer.dtype)]} {name} = {ref};")
    return name


def scalar_capable(em: EmitContext, store: Any) -> bool:
    """Whether ``store`` (outside T.Parallel) is per-element code the scalar unit computes:
    every element it touches is of a :data:`SCALAR_DTYPES` type."""
    from tvm import tirx

    bufs = [store.buffer]
    tirx.stmt_functor.post_order_visit(
        tirx.Evaluate(store.value), lambda n: bufs.append(n.buffer) if isinstance(n, tirx.BufferLoad) else None
    )
    for index in store.indices:
        tirx.stmt_functor.post_order_visit(
            tirx.Evaluate(index), lambda n: bufs.append(n.buffer) if isinstance(n, tirx.BufferLoad) else None
        )
    return all(b.data in em.scalars or str(b.dtype) in SCALAR_DTYPES or str(b.dtype) in HALF_DTYPES for b in bufs)


def refuse_store(em: EmitContext, store: Any) -> Any:
    """The error for a per-element ``store`` the scalar unit cannot compute: it names the first
    element of a type the scalar unit lacks (fp16, bf16, int64)."""
    from tvm import tirx

    found: list[Any] = [store]
    tirx.stmt_functor.post_order_visit(tirx.Evaluate(store.value), lambda n: found.append(n) if isinstance(n, tirx.BufferLoad) else None)
    for access in found:
        if access.buffer.data not in em.scalars and str(access.buffer.dtype) not in SCALAR_DTYPES:
            return _refuse_dtype(em, access.buffer, access.indices)
    return em.fail(f"per-element store to {store.buffer.name}")


def emit_element_store(em: EmitContext, store: Any) -> None:
    """``buf[indices] = value`` by the scalar unit."""
    from tvm import tirx

    if str(store.buffer.dtype) in HALF_DTYPES:
        stored = store.value
        if isinstance(stored, tirx.Cast) and str(stored.dtype) == str(store.buffer.dtype):
            # A cast to the element's own 16-bit type is the store's rounding: half_write rounds the
            # value (an integer converted to float by C first, as torch does) once, as the cast would.
            stored = stored.value
        half_write(em, store, em.expr(stored))  # rounded by the TIU (codegen.emit.half_elements)
        return
    value = em.expr(store.value)
    guard = ""
    if store.buffer.data in em.globals_ and str(store.buffer.dtype) in SCALAR_DTYPES:
        ref, guard = global_access(em, store.buffer, store.indices)
    else:
        ref = element_ref(em, store.buffer, store.indices)
    em.emit(f"if ({guard}) {ref} = {value};" if guard else f"{ref} = {value};")


def emit_element_atomic(em: EmitContext, call: Any) -> None:
    """``T.atomic_add/max/min(H[i], v)`` of one element: a read-modify-write by the scalar unit."""
    from tvm import tirx

    from tilelang_tpu.codegen.ir import op_name

    form = ELEMENT_ATOMICS[op_name(call)]
    target = call.args[0]
    if isinstance(target, tirx.Call) and op_name(target) == "tl.access_ptr":
        target = target.args[0]
    if not isinstance(target, tirx.BufferLoad):
        raise em.fail(f"element atomic on {target}", hint="write T.atomic_add(H[index], value) on one element")
    saved, em.elements_ok = em.elements_ok, True
    try:
        value = em.expr(call.args[1])
        guard = ""
        if target.buffer.data in em.globals_ and str(target.buffer.dtype) in SCALAR_DTYPES:
            ref, guard = global_access(em, target.buffer, target.indices)
        else:
            ref = element_ref(em, target.buffer, target.indices)
    finally:
        em.elements_ok = saved
    ty = SCALAR_DTYPES[str(target.buffer.dtype)]
    old, operand = em.fresh("old"), em.fresh("val")
    em.emit(f"if ({guard or 'true'}) {{")
    em.emit(f"  {ty} {old} = {ref};")
    em.emit(f"  {ty} {operand} = {value};")
    em.emit(f"  {ref} = {form.format(r=old, v=operand)};")
    em.emit("}")


def _walk(body: Any, visit: Any) -> bool:
    """Pre-order search of statements outside T.Parallel loops; ``visit`` returns True to stop."""
    from tvm import tirx

    stack = [body]
    while stack:
        s = stack.pop()
        if s is None:
            continue
        if visit(s):
            return True
        if isinstance(s, tirx.SeqStmt):
            stack.extend(s.seq)
        elif isinstance(s, tirx.For):
            if s.kind != tirx.ForKind.PARALLEL:
                stack.append(s.body)
        elif isinstance(s, tirx.IfThenElse):
            stack.extend([s.then_case, s.else_case])
        elif isinstance(getattr(s, "body", None), tirx.Stmt):  # AttrStmt, While, ...
            stack.append(s.body)
    return False


def has_tile_work(em: EmitContext, body: Any) -> bool:
    """Whether ``body`` issues DMA or TIU instructions: a tile op, a T.Parallel loop, or a
    store the scalar unit cannot do (the tile path of the walker)."""
    from tvm import tirx

    from tilelang_tpu.codegen.ir import op_name

    def visit(s: Any) -> bool:
        if isinstance(s, tirx.For) and s.kind == tirx.ForKind.PARALLEL:
            return True
        if isinstance(s, tirx.Evaluate) and isinstance(s.value, tirx.Call):
            return op_name(s.value) not in ELEMENT_ATOMICS and op_name(s.value) != "tirx.ret"
        if isinstance(s, tirx.BufferStore):
            if s.buffer.data not in em.scalars and str(s.buffer.dtype) in HALF_DTYPES:
                return True  # a 16-bit element store issues DMA/TIU instructions (codegen.emit.half_elements)
            return s.buffer.data not in em.scalars and s.buffer.scope() != "local.var" and not scalar_capable(em, s)
        return False

    return _walk(body, visit)


def has_element_access(body: Any) -> bool:
    """Whether ``body`` reads or writes single tile or tensor elements outside T.Parallel
    (such a loop body is not software-pipelined)."""
    from tvm import tirx

    from tilelang_tpu.codegen.ir import op_name

    def reads(expr: Any) -> bool:
        found: list[Any] = []
        tirx.stmt_functor.post_order_visit(
            tirx.Evaluate(expr), lambda n: found.append(n) if isinstance(n, tirx.BufferLoad) and n.buffer.scope() != "local.var" else None
        )
        return bool(found)

    def visit(s: Any) -> bool:
        if isinstance(s, tirx.BufferStore):
            return s.buffer.scope() != "local.var" or reads(s.value)
        if isinstance(s, tirx.Evaluate) and isinstance(s.value, tirx.Call):
            return op_name(s.value) in ELEMENT_ATOMICS
        if isinstance(s, tirx.IfThenElse):
            return reads(s.condition)
        if isinstance(s, tirx.While):
            return reads(s.condition)
        if isinstance(s, tirx.For) and s.kind != tirx.ForKind.PARALLEL:
            return reads(s.min) or reads(s.extent)
        if isinstance(s, tirx.Bind):
            return reads(s.value)
        return False

    return _walk(body, visit)


def element_tiles(body: Any) -> set[Any]:
    """Data variables of the buffers that per-element code (or a tile op lowered to it) reads or
    writes.  ppl-compile places local tensors by the live ranges of its DMA/TIU operations and
    does not see scalar accesses, so the walker keeps each such tile live over its whole scope
    with a no-op ``tiu::move(t, t)`` right after its allocation and at the end of its scope
    (without them two tiles can share local memory while the scalar unit still uses both)."""
    from tvm import tirx

    from tilelang_tpu.codegen.ir import op_name, region

    found: set[Any] = set()

    def loads(node: Any) -> None:
        if isinstance(node, tirx.BufferLoad) and node.buffer.scope() != "local.var":
            found.add(node.buffer.data)

    def expr(e: Any) -> None:
        tirx.stmt_functor.post_order_visit(tirx.Evaluate(e), loads)

    def visit(s: Any) -> bool:
        if isinstance(s, tirx.BufferStore):
            if s.buffer.scope() != "local.var":
                found.add(s.buffer.data)
            expr(s.value)
            for index in s.indices:
                expr(index)
        elif isinstance(s, tirx.Evaluate) and isinstance(s.value, tirx.Call):
            op = op_name(s.value)
            if op in ELEMENT_ATOMICS:
                tirx.stmt_functor.post_order_visit(s, loads)
            elif op in ("tl.tileop.cummax", "tl.tileop.transpose", "tl.tileop.im2col") or (
                op == "tl.tileop.reduce" and str(getattr(s.value.args[2], "value", "")) in _BIT_KINDS
            ):
                for arg in s.value.args[:2]:
                    found.add(region(arg)[0].data)
        elif isinstance(s, (tirx.IfThenElse, tirx.While)):
            expr(s.condition)
        elif isinstance(s, tirx.For) and s.kind != tirx.ForKind.PARALLEL:
            expr(s.min)
            expr(s.extent)
        elif isinstance(s, tirx.Bind):
            expr(s.value)
        return False

    _walk(body, visit)
    return found


def keep_live(em: EmitContext, tile_name: str) -> None:
    """The no-op TIU use of :func:`element_tiles`."""
    em.emit(f"tiu::move({tile_name}, {tile_name});")
