"""The table of TileLang constructs the tpu code generator knows: one row per construct,
with what it becomes in PPL, its status and the module that emits it.

The table is the single source of two things:

* the dispatch of tile-op calls (``tl.tileop.copy`` -> :func:`codegen_copy.emit_copy`, ...),
  through :func:`tile_op_handlers`;
* the "Supported constructs" table of ``docs/backends/tpu-codegen.md``, through
  :func:`markdown_table` (``python -m tilelang_tpu.codegen_constructs`` rewrites it;
  a test checks that the page matches).

Rows with status ``refused`` are constructs users write that the generator rejects
with a :class:`~tilelang_tpu.codegen.TpuCodegenError` naming them (never wrong code).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

__all__ = ["CONSTRUCTS", "Construct", "markdown_table", "supported_tile_ops_hint", "tile_op_handlers"]

SUPPORTED = "supported"
REFUSED = "refused"


@dataclass(frozen=True)
class Construct:
    """One construct: what users write, what the tpu target emits for it, and where."""

    tilelang: str  #: what the user writes (Markdown)
    ppl: str  #: what is emitted, or why it is refused and what to do instead (Markdown)
    module: str  #: the codegen module that emits (or refuses) it
    status: str = SUPPORTED
    tile_op: str | None = None  #: the TIR tile-op call dispatched to ``handler``
    handler: str | None = None  #: function of ``module`` that emits ``tile_op``


CONSTRUCTS: tuple[Construct, ...] = (
    # ------------------------------------------------------------------ control flow / storage
    Construct(
        "`T.Kernel(gx, gy, ...)` grid",
        "nested `for` loops over the block indices, walked by one core under `tpu:cores=1` (the default splits them "
        "over every core, next row). The "
        "innermost starts with `ppl::enable_pipeline()` when that is safe (see the performance notes)",
        "codegen_emit",
    ),
    Construct(
        "the grid under `target='tpu:cores=N'` (BM1690: N = 1..8; the default `cores=max` is 8)",
        "`ppl::set_core_num(N)`; the grid loops become one loop over the flattened grid, and core "
        "`ppl::get_core_index()` walks one contiguous chunk of it (the first `blocks % N` cores one block more). A grid "
        "of fewer blocks than N runs on one core per block, a grid of one block on one core. The runtime launches "
        "exactly the library's `set_core_num` cores (`tpuRtKernelLaunch` `block_num`). Results are bitwise those of one core",
        "codegen_multicore",
    ),
    Construct(
        "`tpu:cores=N` (N > 1) for a kernel with `T.atomic_add` (split-K GEMM)",
        "the read-modify-write is atomic only while one core walks the blocks that add into a region, so only the outer "
        "grid loops that separate the regions are split (split-K's `bx`, `by`; each core walks every K-slice `bz` of its "
        "blocks in the one-core order, so the sums are bitwise those of one core). A loop is split when every "
        "`T.atomic_add` destination index has a dimension `c * v + k` with a constant `k` and `|c|` at least "
        "the region's extent, and the destination is used by nothing else. Otherwise the kernel runs on one core",
        "codegen_multicore",
    ),
    Construct(
        "`tpu:cores=N` beyond the chip (BM1690: N > 8; BM1684X: N > 1)",
        "refused with a `TargetOptionError` naming the chip: BM1684X kernels launch through bmlib's `tpu_kernel_launch`, "
        "which has no core count",
        "codegen_multicore",
        REFUSED,
    ),
    Construct(
        "tensor parameters (`T.Tensor`, static shape, fp32/fp16/bf16/int*), in any order, used or not",
        "`__KERNEL__ void <name>_kernel(fp32 *ptr_0, ...)`: `ptr_i` is the i-th *declared* tensor (unused ones included), "
        "bound by identity (`abi.bind_pointers`), and one `gtensor` per used tensor. A prim_func already named `*_kernel` keeps its name",
        "codegen_emit",
    ),
    Construct("`T.alloc_shared`, `T.alloc_fragment`, `T.alloc_local`", "`make_tensor<T>(block, shape)`, a local tensor", "codegen_emit"),
    Construct("`T.alloc_var`", "a C scalar", "codegen_emit"),
    Construct(
        "`T.Pipelined(n, num_stages=s)`",
        "a `for` loop starting with `ppl::enable_pipeline()`: ppl-compile overlaps the next iteration's DMA with this "
        "iteration's compute and keeps the data dependences. The results are those of sequential execution. A loop of "
        "one trip is not pipelined (nothing to overlap; ppl-compile 1.30.2 crashes on some)",
        "codegen_emit",
    ),
    Construct("`T.serial` loops, `if`, scalar bindings", "C `for`, `if`, `int`/`float` locals", "codegen_emit"),
    Construct(
        "scalar kernel parameters (`alpha: T.float32`, `n: T.int32`), passed as Python numbers, in any order, used or not",
        "by-value `float arg_i` / `int arg_i` entry parameters in their declared slot (`abi.SCALAR_TYPES`; the runtime "
        "packs them into ppl-compile's argument struct with C alignment); usable wherever an index or a scalar operand is "
        "(values, masks, loop bounds). Other scalar types and scalars on bm1684x are refused by name",
        "codegen_emit",
    ),
    Construct("symbolic shapes (`T.symbolic`, `T.dynamic`)", "refused: static shapes only", "codegen_emit", REFUSED),
    # ------------------------------------------------------------------ copy
    Construct(
        "`T.copy` global → tile / tile → global",
        "`dma::load(tile, g.sub_view(shape, offset))` / `dma::store(g.sub_view(shape, offset), tile)`",
        "codegen_copy",
        tile_op="tl.tileop.copy",
        handler="emit_copy",
    ),
    Construct(
        "`T.copy` whose tile overhangs the tensor (shapes that do not divide)",
        "extents clipped at run time (`int n = min(64, 130 - by * 64)`); on loads the tile is first zero-filled with "
        "`dma::zero`, which matches TileLang's rule that out-of-bounds reads give 0 and out-of-bounds writes are dropped",
        "codegen_copy",
    ),
    Construct("`T.copy` that changes fp32/fp16/bf16", "DMA of a staging tile plus `tiu::cast`", "codegen_copy"),
    Construct(
        "`T.copy` tile → tile",
        "`tiu::move`, or `tiu::cast` across dtypes. The staging copy that `T.reduce_*` inserts for shared inputs is "
        "removed: the reduction reads the original tile",
        "codegen_copy",
    ),
    Construct("`T.copy` global → global", "refused: stage the data through a `T.alloc_shared` tile", "codegen_copy", REFUSED),
    # ------------------------------------------------------------------ fill
    Construct("`T.fill(tile, v)`, `T.clear(tile)`", "`tiu::fill(tile, v)`", "codegen_fill", tile_op="tl.tileop.fill", handler="emit_fill"),
    # ------------------------------------------------------------------ element-wise
    Construct(
        "`T.Parallel` loops `c[i, j] = expr`",
        "one TIU instruction per operation over the whole tile. Tile ⊕ tile: `tiu::fadd/fsub/fmul/fdiv/fmax/fmin`. "
        "Tile ⊕ scalar (either side): the same functions with a `float` constant (the PPL `_C` forms). Casts: `tiu::cast`. "
        "Functions: `T.exp` → `fexp` (PPL's range-reduced exp), `T.exp2(x)` → `fexp(x · ln 2)`, `T.log` → `flog`, "
        "`T.log2(x)` → `flog(x) / ln 2`, `T.tanh` → `tanh_fp32` and `T.sigmoid` → `sigmoid_fp32` (fp32 only; others refused "
        "by name), `T.abs` → `tiu::fabs`, `T.sqrt` → `tiu::fsqrt`, `T.rsqrt` → `tiu::frsqrt`. Intermediate values live in "
        "temporary tiles inside a `{ }` scope",
        "codegen_elementwise",
    ),
    Construct(
        "a per-row vector `m[i]` (or `m[i, 0]`) inside an `(i, j)` loop",
        "a view of `m` with `W` stride 0 that broadcasts each lane's value along the row (softmax, rmsnorm). Its `C` "
        "stride is `m`'s own aligned row-group stride (`codegen_layout.broadcast_strides`), so rows 64 and up (the "
        "second pass over the lanes) read their own values",
        "codegen_elementwise",
    ),
    Construct(
        "`T.Parallel` over a 1-row tile (tilelang drops the extent-1 loop and writes the index 0)",
        "the same tile ops over a 1-row domain",
        "codegen_elementwise",
    ),
    Construct("`T.Parallel` over part of a tile (extents smaller than the tile)", "`sub_view` of the tile", "codegen_elementwise"),
    Construct(
        "a per-column vector `w[j]` inside an `(i, j)` loop (norm weights, bias epilogues)",
        "`w` gets the `row` layout (`[1, 1, 1, n]`, one lane; its global copy uses a matching `gtensor` view); at the use "
        "`tiu::broadcast` copies it to one pass of the lanes and a view with `C` stride 0 repeats that pass over the row groups",
        "codegen_elementwise",
    ),
    Construct(
        "`T.if_then_else(cond, a, b)` with `cond` comparing integer expressions of loop and block indices "
        "(`<`, `<=`, `>`, `>=`, `==`, `!=`; causal and sequence-length masks)",
        "index tiles (PPL's serial-number table along `W`; transposed onto the lanes, + 64·g per row group, for rows), "
        "their difference as exact fp32 integers, then `tiu::gt_select`/`lt_select` against a half-integer threshold",
        "codegen_elementwise",
    ),
    Construct(
        "temporaries bound inside `T.Parallel` (`t = x[i, j] - m[i]`)",
        "substituted into the assignments that use them (each use recomputes it as tile ops)",
        "codegen_elementwise",
    ),
    Construct(
        "stores to a global tensor inside `T.Parallel`, indexed `offset + loop variable` (LayerNorm's `Mean`/`Rstd`); "
        "or one element outside any loop (`Mean[bx] = mean[0]` of a 1-row tile)",
        "the value is computed into a tile over the loop domain, then one `dma::store`, clipped at the tensor's edge like `T.copy`",
        "codegen_elementwise",
    ),
    Construct(
        "reads of global tensors inside `T.Parallel`; `if_then_else` on data values; `&&`/`||` conditions",
        "refused: `T.copy` the data to a tile first; compare indices only",
        "codegen_elementwise",
        REFUSED,
    ),
    # ------------------------------------------------------------------ reductions
    Construct(
        "`T.reduce_max/min/sum/abssum/absmax(x, y, dim=-1)` on a 2-D tile (fp32/fp16/bf16)",
        "`quick_pooling` (pads each row's tail to whole EUs with the identity, then two pooling passes). `min` is "
        "computed as `-max(-x)`; `abs*` reduce `tiu::fabs(x)`; `clear=False` combines with `tiu::fadd/fmax/fmin`",
        "codegen_reduce",
        tile_op="tl.tileop.reduce",
        handler="emit_reduce",
    ),
    Construct(
        "`T.reduce_*(x, y, dim=0)` of a 2-D tile (column reductions) or of a 1-D tile",
        "the lanes axis is moved to `W` first: `tiu::transpose_cw` (into a `TPU_ROW_ALIGN` scratch, then `tiu::move`) "
        "when `C >= W`, `tiu::transpose_wc` otherwise; then `quick_pooling` as above. The result is a 1-D tile (`[1]` for a 1-D source)",
        "codegen_reduce",
    ),
    Construct(
        "reductions of integer tiles; along a middle axis of a 3-D/4-D tile",
        "refused: the TPU pools floats only (an int32 sum through fp32 would round beyond 2^24); `T.copy` to a float32 tile",
        "codegen_reduce",
        REFUSED,
    ),
    # ------------------------------------------------------------------ gemm
    Construct(
        "`T.gemm(A, B, C)` with fp16/bf16 A and B and an fp32 C",
        "`tiu::fmm2_nn(C, A, B, accumulate)`; `transpose_B=True` gives `tiu::fmm2_nt`",
        "codegen_gemm",
        tile_op="tl.tileop.gemm",
        handler="emit_gemm",
    ),
    Construct(
        "`T.gemm` with fp32 A and B",
        "`tiu::fmm(C, A, B, accumulate)` on the mm v1 unit (the operand layout is described below)",
        "codegen_gemm",
    ),
    Construct("`T.gemm(..., clear_accum=True)`", "`accumulate = false`", "codegen_gemm"),
    Construct(
        "`T.gemm(transpose_A=True)` (A a `[K, M]` tile) with fp16/bf16 operands, with or without `transpose_B`",
        "A is transposed into a scratch `[M, K]` tile (`tiu::transpose_cw`/`transpose_wc`, as for dim-0 reductions), then "
        "`tiu::fmm2_nn`/`fmm2_nt`",
        "codegen_gemm",
    ),
    Construct(
        "fp32 `T.gemm` with a transpose",
        "refused: the fp32 unit's operands keep whole rows in one lane; store the operands untransposed or use fp16/bf16 inputs",
        "codegen_gemm",
        REFUSED,
    ),
    # ------------------------------------------------------------------ atomic add
    Construct(
        "`T.atomic_add(C[by * BM, bx * BN], c_tile)` (tile region; split-K GEMM)",
        "the blocks adding into a region run on one core, one after another (under `tpu:cores=N` too, see above), so a "
        "read-modify-write is atomic: `dma::load` the region (clipped "
        "like `T.copy`) into a scratch tile, `tiu::fadd` the tile, `dma::store` it back. Tile and tensor of the same "
        "float dtype; the clipped read needs no zero fill (the overhang is never stored). Element-wise `T.atomic_add` in "
        "`T.Parallel` is refused by name",
        "codegen_atomic",
        tile_op="tl.tileop.atomicadd",
        handler="emit_atomic_add",
    ),
    # ------------------------------------------------------------------ scans
    Construct(
        "`T.cumsum(x, [y,] dim=1, reverse=...)` of a 2-D fp32/fp16/bf16 tile (shared or fragment)",
        "a log-step scan: `ceil(log2 n)` rounds of `tiu::move` + `tiu::fadd` on `W`-offset sub-views (`x[:, s:] += x[:, :n-s]`). "
        "Other axes, 1-D tiles and integer scans are refused by name (use a `[1, n]` tile)",
        "codegen_scan",
        tile_op="tl.tileop.cumsum",
        handler="emit_cumsum",
    ),
    Construct(
        "other tile ops (`T.cummax`, ...)",
        "refused, naming the op",
        "codegen_emit",
        REFUSED,
    ),
)


@cache
def tile_op_handlers() -> dict[str, Callable[[Any, Any], None]]:
    """TIR tile-op name -> ``handler(emitter, call)``, from the table."""
    handlers = {}
    for c in CONSTRUCTS:
        if c.tile_op is not None and c.handler is not None:
            handlers[c.tile_op] = getattr(importlib.import_module(f"tilelang_tpu.{c.module}"), c.handler)
    return handlers


def supported_tile_ops_hint() -> str:
    """The fix line of an unknown tile op's error: the tile ops the table supports."""
    spelled = {
        "atomicadd": "T.atomic_add",
        "cumsum": "T.cumsum(dim=1)",
        "copy": "T.copy",
        "fill": "T.fill/T.clear",
        "reduce": "T.reduce_{max,min,sum,abssum,absmax}",
        "gemm": "T.gemm",
    }
    ops = [c.tile_op.removeprefix("tl.tileop.") for c in CONSTRUCTS if c.tile_op]
    return "supported tile ops on tpu: " + ", ".join(spelled.get(op, f"T.{op}") for op in ops) + ", T.Parallel element-wise loops"


def markdown_table() -> str:
    """The "Supported constructs" table of docs/backends/tpu-codegen.md."""
    rows = ["| TileLang | PPL emitted | status | module |", "| --- | --- | --- | --- |"]
    for c in CONSTRUCTS:
        rows.append(f"| {c.tilelang} | {c.ppl} | {c.status} | `{c.module}.py` |")
    return "\n".join(rows) + "\n"


#: Markers around the generated table in the doc page.
DOC_START = "<!-- constructs-table:start (generated by python -m tilelang_tpu.codegen_constructs; do not edit) -->"
DOC_END = "<!-- constructs-table:end -->"


def rewrite_doc(path: Path) -> bool:
    """Replace the table between the markers in ``path``; True if the file changed."""
    text = path.read_text()
    head, _, rest = text.partition(DOC_START)
    _, _, tail = rest.partition(DOC_END)
    if not rest:
        raise ValueError(f"{path} has no {DOC_START!r} marker")
    new = f"{head}{DOC_START}\n{markdown_table()}{DOC_END}{tail}"
    if new != text:
        path.write_text(new)
    return new != text


if __name__ == "__main__":  # pragma: no cover - a maintenance command
    doc = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[3] / "docs" / "backends" / "tpu-codegen.md"
    print(f"{doc}: {'updated' if rewrite_doc(doc) else 'up to date'}")
