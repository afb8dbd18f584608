"""Multi-core: the ``T.Kernel`` grid split over the chip's TPU cores (``tpu:cores=N``).

PPL's model: ``ppl::set_core_num(N)`` makes every core run the same kernel, and
``ppl::get_core_index()`` says which one this is; the runtime launches the kernel
with ``block_num = N`` (what ppl-compile's own host glue does).  The core count is
a compile-time constant of the library: ``get_core_num()`` folds to ``N`` whatever
the launch says, so a library compiled for ``N`` cores and launched on fewer
silently skips blocks.  The runtime therefore reads the count back from the
source (:func:`launch_cores`) and launches exactly that many.

The split: the grid loops (marked by :func:`mark_grid_loops` when
``MaterializeKernelLaunch`` makes them) are flattened, and each core walks one
contiguous chunk of the flattened grid, the first ``total % N`` cores one block
more than the others.  A grid of fewer blocks than ``N`` (known at compile time) is
launched on one core per block.  Blocks are
independent, so any split gives the one-core results -- except where blocks share
memory on purpose: ``T.atomic_add`` is a read-modify-write that is atomic only
while one core walks the blocks that add into a region (:mod:`tilelang_tpu.codegen_atomic`),
so a kernel that uses it is split only over the outer grid loops that separate the
regions, or else runs on one core (:func:`grid_split`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tilelang_tpu.codegen_ir import GRID_LOOP, is_ret, op_name

if TYPE_CHECKING:
    from tilelang_tpu.codegen_emit import Emitter

__all__ = ["GRID_LOOP", "GridSplit", "emit_split_grid", "grid_split", "launch_cores", "mark_grid_loops"]

#: The block ``MaterializeKernelLaunch`` wraps a kernel's body in, inside its grid loops.
_KERNEL_ROOT_BLOCK = "tilelang_root"
_SET_CORE_NUM = re.compile(r"\bset_core_num\s*\(([^()]*)\)")


@dataclass(frozen=True)
class GridSplit:
    """How the grid runs: ``loops`` (outermost first) split over ``cores`` cores, or ``reason`` it runs on one."""

    loops: tuple[Any, ...] = ()
    cores: int = 1
    reason: str = ""


def mark_grid_loops(mod: Any) -> Any:
    """Annotate the grid loops of every PrimFunc in ``mod`` with :data:`GRID_LOOP`.

    Run right after ``MaterializeKernelLaunch``, the one point where the grid loops
    are known for sure: they are the serial loops around the ``tilelang_root`` block.
    A user's ``T.serial`` loop is never marked, so it is never split over cores.
    """
    from tvm import tirx

    def reaches_root(stmt: Any) -> bool:
        while isinstance(stmt, tirx.For):
            stmt = stmt.body
        return isinstance(stmt, tirx.SBlockRealize) and stmt.block.name_hint == _KERNEL_ROOT_BLOCK

    def mark(stmt: Any) -> Any:
        if isinstance(stmt, tirx.For) and stmt.kind == tirx.ForKind.SERIAL and not stmt.annotations and reaches_root(stmt.body):
            return tirx.For(stmt.loop_var, stmt.min, stmt.extent, stmt.kind, stmt.body, annotations={GRID_LOOP: 1})
        return None

    out = {}
    for gvar, func in mod.functions.items():
        if isinstance(func, tirx.PrimFunc):
            func = func.with_body(tirx.stmt_functor.ir_transform(func.body, None, mark, ["tirx.For"]))
        out[gvar] = func
    for gvar, func in out.items():
        mod[gvar] = func
    return mod


def is_marked_grid_loop(stmt: Any) -> bool:
    from tvm import tirx

    return isinstance(stmt, tirx.For) and stmt.kind == tirx.ForKind.SERIAL and GRID_LOOP in stmt.annotations


def grid_loops(body: Any) -> tuple[Any, ...]:
    """The grid loops of a kernel body, outermost first (``()`` if the body is not one grid loop nest)."""
    from tvm import tirx

    while True:
        stmts = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
        rest = [s for s in stmts if not isinstance(s, tirx.DeclBuffer) and not is_ret(s)]
        if len(rest) != 1:
            return ()
        if not isinstance(rest[0], tirx.AttrStmt):
            break
        body = rest[0].body  # an annotation around the grid (tl.assume of symbolic shapes): emitted as its body
    if not is_marked_grid_loop(rest[0]):
        return ()
    loops = [rest[0]]
    while is_marked_grid_loop(loops[-1].body):
        loops.append(loops[-1].body)
    return tuple(loops)


def grid_split(body: Any, cores: int) -> GridSplit:
    """How the grid of the kernel whose body is ``body`` runs on a launch of ``cores`` cores."""
    from tvm import tirx

    if cores <= 1:
        return GridSplit(reason="one core asked for")
    loops = grid_loops(body)
    if not loops:
        return GridSplit(reason="the kernel has a grid of one block")
    atomics: list[Any] = []
    tirx.stmt_functor.post_order_visit(
        body, lambda n: atomics.append(n) if isinstance(n, tirx.Call) and op_name(n) == "tl.tileop.atomicadd" else None
    )
    if atomics:
        # Two cores adding into one region would race (codegen_atomic's read-modify-write):
        # split only over the grid loops that separate the regions (split-K's bx, by).
        loops, reason = _atomic_safe_loops(body, loops, atomics)
        if not loops:
            return GridSplit(reason=reason)
    if all(isinstance(loop.extent, tirx.IntImm) for loop in loops):
        blocks = 1
        for loop in loops:
            blocks *= int(loop.extent)
        if blocks <= 1:
            return GridSplit(reason="the kernel has a grid of one block")
        cores = min(cores, blocks)  # a core without a block would only cost its launch
    return GridSplit(loops, cores)


def _atomic_safe_loops(body: Any, loops: tuple[Any, ...], atomics: list[Any]) -> tuple[tuple[Any, ...], str]:
    """The outer grid loops a kernel with ``T.atomic_add`` can be split over, or ``()`` and why not.

    Blocks that add into one region must stay on one core, in the one-core order
    (which also keeps the sums bitwise those of one core).  So the split covers the
    outermost grid loops down to the first one whose variable no destination index
    uses (split-K's ``bz``, walked whole by each core), and only if every
    destination tensor is written by one form of ``T.atomic_add`` alone (no other
    reads or writes of it) whose index separates those loops: for each split
    variable ``v`` some dimension's index is ``c * v + k``, with a constant ``k`` and
    ``|c|`` at least the region's extent there.  Then blocks of two
    cores differ in some ``v`` and their regions are disjoint.
    """
    from tvm import arith, ir, tirx

    from tilelang_tpu.codegen_ir import region

    one_core = "T.atomic_add is atomic only while one core walks the grid"
    destinations: dict[Any, tuple[list[Any], list[Any]]] = {}
    for call in atomics:
        dst, mins, extents = region(call.args[1])
        # The region written is the value tile's (a BufferLoad destination has extents 1).
        tile_extents = list(region(call.args[0])[2])
        if len(tile_extents) > len(extents):
            return (), one_core
        aligned = [tirx.const(1, "int32")] * (len(extents) - len(tile_extents)) + tile_extents
        extents = [arith.Analyzer().simplify(tirx.max(e, t)) for e, t in zip(extents, aligned, strict=True)]
        known = destinations.setdefault(dst.data, (mins, extents))
        if not (ir.structural_equal(known[0], mins) and ir.structural_equal(known[1], extents)):
            return (), f"{one_core} (two T.atomic_add forms write {dst.name})"

    def touches(node: Any) -> list[Any]:
        found: list[Any] = []
        tirx.stmt_functor.post_order_visit(
            node,
            lambda n: found.append(n) if isinstance(n, (tirx.BufferLoad, tirx.BufferStore)) and n.buffer.data in destinations else None,
        )
        return found

    if len(touches(body)) != sum(len(touches(tirx.Evaluate(call.args[1]))) for call in atomics):
        return (), f"{one_core} (its destination is also read or written otherwise)"

    split: list[Any] = []
    for loop in loops:
        var = loop.loop_var
        if not any(_mentions(m, var) for mins, _ in destinations.values() for m in mins):
            break
        for mins, extents in destinations.values():
            if not any(_separates(m, e, var, arith) for m, e in zip(mins, extents, strict=False)):
                return tuple(split), f"{one_core} (its regions do not separate the grid's blocks)"
        split.append(loop)
    return tuple(split), one_core


def _mentions(expr: Any, var: Any) -> bool:
    from tvm import tirx

    found: list[Any] = []
    tirx.stmt_functor.post_order_visit(expr, lambda n: found.append(n) if isinstance(n, tirx.Var) and n.same_as(var) else None)
    return bool(found)


def _separates(index: Any, extent: Any, var: Any, arith: Any) -> bool:
    """Whether ``index`` is ``c * var + k`` with a constant ``k`` and ``|c| >= extent``.

    ``k`` must be a constant, not merely free of grid variables: a loop variable inside
    the block (``C[by * 64 + i * 32, ...]``) widens a block's regions into the next block's.
    """
    from tvm import tirx

    coefficients = arith.detect_linear_equation(index, [var])
    if len(coefficients) != 2 or not isinstance(extent, tirx.IntImm):
        return False
    coefficient, base = coefficients
    return isinstance(coefficient, tirx.IntImm) and isinstance(base, tirx.IntImm) and abs(int(coefficient)) >= int(extent)


def emit_split_grid(em: Emitter, split: GridSplit) -> None:
    """Print the flattened grid loop of ``split``: this core's contiguous chunk of blocks."""
    from tvm import tirx

    from tilelang_tpu.codegen_ir import min_extent_range

    extents = [em.expr(loop.extent) for loop in split.loops]
    total, core, per_core, extra, first, last, block = (
        em.fresh(n) for n in ("grid_blocks", "core", "blocks_per_core", "extra_blocks", "first_block", "last_block", "block")
    )
    em.emit(f"int {total} = {' * '.join(f'({e})' for e in extents)};")
    em.emit(f"int {core} = ppl::get_core_index();")
    em.emit(f"int {per_core} = {total} / {split.cores};")
    em.emit(f"int {extra} = {total} % {split.cores};")
    # Chunks of per_core blocks, the first `extra` cores one more: sizes differ by at most one.
    em.emit(f"int {first} = {core} * {per_core} + min({core}, {extra});")
    em.emit(f"int {last} = {first} + {per_core};")
    em.emit(f"if ({core} < {extra}) {last} += 1;")
    em.emit(f"for (int {block} = {first}; {block} < {last}; ++{block}) {{")
    innermost = split.loops[-1]
    if innermost.same_as(em.plan.pipelined_grid):
        # Blocks are independent: overlap the next block's DMA with this one's compute.
        em.emit("  ppl::enable_pipeline();")
    em.indent += 1
    stride = block
    for index, loop in enumerate(reversed(split.loops)):
        var = em.fresh(loop.loop_var.name)
        em.ids.of_var[loop.loop_var] = var
        em.analyzer.bind(loop.loop_var, min_extent_range(loop.min, loop.extent))
        extent = extents[len(extents) - 1 - index]
        position = stride if index == len(split.loops) - 1 else f"{stride} % ({extent})"
        offset = "" if isinstance(loop.min, tirx.IntImm) and int(loop.min) == 0 else f"{em.expr(loop.min)} + "
        em.emit(f"int {var} = {offset}{position};")
        stride = f"{stride} / ({extent})" if index == 0 else f"({stride}) / ({extent})"
    em.stmt(innermost.body)
    em.indent -= 1
    em.emit("}")


def launch_cores(source: str, chip_cores: int) -> int:
    """The number of cores ``source`` must be launched on: its ``set_core_num(N)``, else 1.

    ``N`` must be a literal in ``1..chip_cores``: the runtime launches exactly that many
    cores, because a library launched on fewer cores than it was compiled for skips blocks.
    """
    found = _SET_CORE_NUM.findall(source)
    if not found:
        return 1
    values = {text.strip() for text in found}
    if len(values) != 1 or not next(iter(values)).isdigit() or not 1 <= int(next(iter(values))) <= chip_cores:
        raise ValueError(
            f"the PPL source calls set_core_num({', '.join(sorted(values))}); the tpu runtime launches a kernel on the core "
            f"count it was compiled for, so set_core_num must be called with one integer literal in 1..{chip_cores}"
        )
    return int(next(iter(values)))
