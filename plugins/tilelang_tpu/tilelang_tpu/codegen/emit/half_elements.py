"""fp16/bf16 elements in per-element code (outside ``T.Parallel``).

The scalar unit computes in ``float`` and the integer types; PPL's ``fp16``/``bf16`` are bare
16-bit structs there.  Conversions are the TIU's (``tiu::cast``, round-to-nearest-even, with the
IEEE overflow fix of :func:`tilelang_tpu.codegen.emit.cast.emit_cast`), so per-element code sees
exactly the values tilelang's ``c`` target computes (it converts through ``float`` too):

* **Shadows** -- a loop of per-element code only (the walker waits once before it) that reads a
  16-bit tile without writing it reads an fp32 copy made once before the loop (``tiu::cast`` of
  the whole tile): upstream's CPU GEMM on fp16 ``A_local``/``B_local``.  One instruction per
  tile, then plain ``float`` reads.
* **One element at a time** -- any other access (a 16-bit tile the loop writes, a global 16-bit
  tensor) moves the element through a one-element scratch on lane 0: ``dma::move`` (or
  ``dma::load``/``dma::store`` for global memory) and ``tiu::cast``, and a wait before the scalar
  unit reads it.  Two or three instructions and a wait per element: a performance note, keep
  such data in float32 tiles where speed matters.

Casts to fp16/bf16 round the same way, wherever scalar code has one (:func:`half_cast`; a cast
in ``T.serial`` code, in a loop bound, in a ``tiu`` op's scalar operand): the value, a C
``float`` (C's ``(float)`` of an integer rounds to nearest even past 2^24, as torch's ``.to()``
does first), goes through the one-element scratch and back.  A store to a 16-bit element rounds
its value by the same steps (:func:`half_write`), so a cast to the element's own type there is
the store's rounding and costs nothing more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tilelang_tpu.codegen.emit.cast import emit_cast, temp_tiles
from tilelang_tpu.codegen.layout import DTYPES, offset4, to4
from tilelang_tpu.codegen.scalar import HALF_DTYPES

if TYPE_CHECKING:
    from tilelang_tpu.codegen.context import EmitContext

__all__ = ["HALF_DTYPES", "half_cast", "half_read", "half_write", "release_shadows", "shadow_half_tiles"]


def _one(em: EmitContext) -> str:
    return em.hoisted(("element", "one"), lambda: em.dim4var(["1", "1", "1", "1"], "elem_one"))


def _scratch(em: EmitContext, dtype: str) -> str:
    """A one-element tile of ``dtype`` on lane 0 (built once per kernel)."""

    def build() -> str:
        name = em.fresh(f"elem_{DTYPES[dtype]}")
        em.emit(f"auto {name} = make_tensor<{DTYPES[dtype]}>({_one(em)}, {_one(em)});")
        return name

    return em.hoisted(("element", "scratch", dtype), build)


def _source(em: EmitContext, buf: Any, indices: Any) -> tuple[str, bool]:
    """(C view of the one element ``buf[indices]``, whether it is in global memory)."""
    one = _one(em)
    tile = em.tiles.get(buf.data)
    if tile is not None:
        off = em.dim4var(offset4([em.expr(i) for i in indices], tile.layout), "eoff")
        return f"{tile.name}.sub_view({one}, {off})", False
    g = em.globals_.get(buf.data)
    if g is None:
        raise em.fail(f"element {buf.name}[{', '.join(map(str, indices))}] of a buffer the tpu codegen did not allocate")
    one_g = em.dim4var(to4(["1"] * len(g.dims)), "gone")
    off = em.dim4var(offset4([em.expr(i) for i in indices]), "goff")
    return f"{em.global_view(buf.data, 'lanes')}.sub_view({one_g}, {off})", True


def _guard(em: EmitContext, buf: Any, indices: Any) -> str:
    """C condition that ``indices`` lie inside global tensor ``buf`` (``""`` when proved)."""
    from tvm import tirx

    if buf.data not in em.globals_:
        return ""
    g = em.globals_[buf.data]
    checks = []
    for axis, index in enumerate(indices):
        if not em.analyzer.can_prove(tirx.GE(index, tirx.const(0, index.dtype))):
            checks.append(f"({em.expr(index)}) >= 0")
        if not em.analyzer.can_prove(tirx.LT(index, g.extent(axis))):
            checks.append(f"({em.expr(index)}) < {em.expr(g.extent(axis))}")
    return " && ".join(checks)


def half_read(em: EmitContext, load: Any) -> str:
    """A fresh C ``float`` holding the 16-bit element ``load`` reads (0 outside a global tensor)."""
    dtype = str(load.buffer.dtype)
    name = em.fresh("ev")
    shadow = em.half_shadows.get(load.buffer.data)
    if shadow is not None:
        off = em.dim4var(offset4([em.expr(i) for i in load.indices], em.tiles[load.buffer.data].layout), "eoff")
        ptr = em.fresh("ep")
        em.emit(f"fp32 *{ptr} = get_lmem_ptr({shadow}.sub_view({_one(em)}, {off}));")
        em.emit(f"float {name} = {ptr}[0];")
        return name
    guard = _guard(em, load.buffer, load.indices)
    source, is_global = _source(em, load.buffer, load.indices)
    half, wide = _scratch(em, dtype), _scratch(em, "float32")
    em.emit(f"float {name} = 0.0f;")
    em.emit(f"if ({guard or 'true'}) {{")
    em.indent += 1
    em.emit(f"dma::{'load' if is_global else 'move'}({half}, {source});")
    return _read_back(em, name, half, wide)


def _round(em: EmitContext, value: str, dtype: str) -> str:
    """Inside a guarded block: ``value`` (a C float expression) rounded into the 16-bit scratch of
    ``dtype`` (returned), by the TIU: IEEE round to nearest even, ±inf past the largest finite value
    (:func:`~tilelang_tpu.codegen.emit.cast.emit_cast`).  The one rounding of every 16-bit value
    scalar code makes: :func:`half_write` and :func:`half_cast`."""
    half, wide = _scratch(em, dtype), _scratch(em, "float32")
    em.emit(f"get_lmem_ptr({wide})[0] = {value};")
    one = _one(em)
    emit_cast(em, half, wide, dtype, "float32", temp_tiles(em, one, one))
    return half


def half_write(em: EmitContext, store: Any, value: str) -> None:
    """``buf[indices] = value`` (a C float expression) into a 16-bit tile or tensor element."""
    dtype = str(store.buffer.dtype)
    if store.buffer.data in em.half_shadows:
        raise em.fail(f"per-element store to {store.buffer.name} while it is shadowed")  # shadows are read-only: a bug if reached
    guard = _guard(em, store.buffer, store.indices)
    if not em.scalar_synced:
        em.emit("ppl::tpu_poll();")  # the scratch may still be read by an instruction issued before
    em.emit(f"if ({guard or 'true'}) {{")
    em.indent += 1
    half = _round(em, value, dtype)
    target, is_global = _source(em, store.buffer, store.indices)
    em.emit(f"dma::{'store' if is_global else 'move'}({target}, {half});")
    em.indent -= 1
    em.emit("}")
    em.scalar_synced = False


def half_cast(em: EmitContext, value: str, source: str, dtype: str, guard: str) -> str:
    """A fresh C ``float`` holding ``value`` (a C expression of a ``source`` value) cast to the
    16-bit ``dtype``, computed where ``guard`` holds (``""``: always; else 0)."""
    name = em.fresh("hc")
    wide = _scratch(em, "float32")
    # Always wait: the scratch may still be used by an instruction issued before, also in an earlier
    # iteration of a loop of per-element code (which waits only once, before the loop).
    em.emit("ppl::tpu_poll();")
    em.emit(f"float {name} = 0.0f;")
    em.emit(f"if ({guard or 'true'}) {{")
    em.indent += 1
    half = _round(em, value if source in ("float32", *HALF_DTYPES) else f"(float)({value})", dtype)
    return _read_back(em, name, half, wide)


def shadow_half_tiles(em: EmitContext, body: Any) -> list[Any]:
    """Before a loop of per-element code only: an fp32 copy of every 16-bit tile ``body`` reads
    and does not write; returns their data variables (for :func:`release_shadows`)."""
    from tvm import tirx

    read: list[Any] = []
    written: set[Any] = set()

    def visit(node: Any) -> None:
        if isinstance(node, tirx.BufferLoad) and node.buffer.data in em.tiles and str(node.buffer.dtype) in HALF_DTYPES:
            if not any(node.buffer.data.same_as(r) for r in read):
                read.append(node.buffer.data)
        elif isinstance(node, tirx.BufferStore):
            written.add(node.buffer.data)
        elif isinstance(node, tirx.Call) and "atomic" in str(getattr(node.op, "name", "")):
            tirx.stmt_functor.post_order_visit(
                tirx.Evaluate(node.args[0]), lambda n: written.add(n.buffer.data) if isinstance(n, tirx.BufferLoad) else None
            )

    tirx.stmt_functor.post_order_visit(body, visit)
    shadowed = []
    for data in read:
        if data in written or data in em.half_shadows:
            continue
        tile = em.tiles[data]
        name = em.fresh(f"{tile.name}_fp32")
        block = em.dim4var(tile.block, name + "_block")
        em.emit(f"auto {name} = make_tensor<fp32>({block}, {em.dim4var(tile.shape4, name + '_shape')});")
        em.emit(f"tiu::cast({name}, {tile.name});")  # exact
        em.half_shadows[data] = name
        shadowed.append(data)
    if shadowed:
        em.emit("ppl::tpu_poll();")
        em.scalar_synced = True
    return shadowed


def release_shadows(em: EmitContext, shadowed: list[Any]) -> None:
    """After the loop: the shadows are done with (kept live to here for ppl-compile)."""
    for data in shadowed:
        name = em.half_shadows.pop(data)
        em.emit(f"tiu::move({name}, {name});")
    if shadowed:
        em.scalar_synced = False


def _read_back(em: EmitContext, name: str, half: str, wide: str) -> str:
    """Close a guarded block that left a 16-bit value in the scratch ``half``: widen it (exact),
    wait, and read it into the C float ``name``."""
    em.emit(f"tiu::cast({wide}, {half});")  # exact
    em.emit("ppl::tpu_poll();")
    em.emit(f"{name} = get_lmem_ptr({wide})[0];")
    em.emit(f"tiu::move({wide}, {wide});")  # keeps the scratch live past the scalar read (codegen.emit.elements.keep_live)
    em.indent -= 1
    em.emit("}")
    em.scalar_synced = False
    return name
