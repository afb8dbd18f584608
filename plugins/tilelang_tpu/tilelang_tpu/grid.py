"""Multi-core: the ``T.Kernel`` grid loops and the core count a kernel is launched on (``tpu:cores=N``).

Shared by lowering (which marks the grid loops), the code generator (which splits them:
:func:`tilelang_tpu.codegen.plan.grid_split`) and the runtime (which launches the cores).

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
while one core walks the blocks that add into a region (:mod:`tilelang_tpu.codegen.emit.atomic`),
so a kernel that uses it is split only over the outer grid loops that separate the
regions, or else runs on one core (:func:`tilelang_tpu.codegen.plan.grid_split`).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["GRID_LOOP", "is_marked_grid_loop", "launch_cores", "mark_grid_loops"]

#: Annotation lowering puts on the serial loops MaterializeKernelLaunch makes of the T.Kernel grid.
GRID_LOOP = "tilelang_tpu.grid_loop"
#: The block ``MaterializeKernelLaunch`` wraps a kernel's body in, inside its grid loops.
_KERNEL_ROOT_BLOCK = "tilelang_root"
_SET_CORE_NUM = re.compile(r"\bset_core_num\s*\(([^()]*)\)")


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
