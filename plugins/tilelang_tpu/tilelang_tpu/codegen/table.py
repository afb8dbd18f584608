"""The table of TileLang constructs the tpu code generator knows: one row per construct,
with what it becomes in PPL, its status, the module that emits it and, for a tile op, the
handler function itself.

The table is the single source of two things:

* the dispatch of tile-op calls (``tl.tileop.copy`` -> :func:`~tilelang_tpu.codegen.emit.copy.emit_copy`,
  ...) by the walker, through :func:`tile_op_handlers`;
* the "Supported constructs" table of ``docs/backends/tpu-codegen.md``, through
  :func:`tilelang_tpu.codegen.doc_table.markdown_table` (``python -m tilelang_tpu.codegen.doc_table``
  rewrites it; a test checks that the page matches).

Rows with status ``refused`` are constructs users write that the generator rejects
with a :class:`~tilelang_tpu.codegen.TpuCodegenError` naming them (never wrong code).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

from tilelang_tpu.codegen.context import EmitContext
from tilelang_tpu.codegen.emit.atomic import emit_atomic_add, emit_atomic_max, emit_atomic_min
from tilelang_tpu.codegen.emit.copy import emit_copy
from tilelang_tpu.codegen.emit.fill import emit_fill
from tilelang_tpu.codegen.emit.gemm import emit_gemm
from tilelang_tpu.codegen.emit.reduce import emit_reduce
from tilelang_tpu.codegen.emit.scan import emit_cumsum
from tilelang_tpu.codegen.emit.serial_ops import emit_cummax, emit_im2col, emit_transpose
from tilelang_tpu.codegen.parallel_rows import PARALLEL_ROWS
from tilelang_tpu.codegen.row import REFUSED, SUPPORTED, Construct

__all__ = ["CONSTRUCTS", "REFUSED", "SUPPORTED", "Construct", "supported_tile_ops_hint", "tile_op_handlers"]

#: How every float cast behaves (the T.copy cast row; ``codegen.emit.cast`` has the measurements).
_CAST_NOTE = (
    "round-to-nearest-even with overflow to ±inf as in IEEE: on BM1690 PPL's fp32 → fp16/bf16 `tiu::cast` saturates (`inf` → 65504), "
    "so two `tiu::gt_select` after it send the elements beyond the rounding threshold to ±inf, NaN stays NaN "
    "(`codegen/emit/cast.py`); fp16/bf16 → fp32 is exact, fp16 ↔ bf16 IEEE. fp32 subnormals become ±0 in bf16 (torch keeps them)"
)

CONSTRUCTS: tuple[Construct, ...] = (
    # ------------------------------------------------------------------ control flow / storage
    Construct(
        "`T.Kernel(gx, gy, ...)` grid",
        "nested `for` loops over the block indices, walked by one core under `tpu:cores=1` (the default splits them "
        "over every core, next row). The "
        "innermost starts with `ppl::enable_pipeline()` when that is safe (see the performance notes)",
        "codegen/walk",
    ),
    Construct(
        "the grid under `target='tpu:cores=N'` (BM1690: N = 1..8; the default `cores=max` is 8)",
        "`ppl::set_core_num(N)`; the grid loops become one loop over the flattened grid, and core "
        "`ppl::get_core_index()` walks one contiguous chunk of it (the first `blocks % N` cores one block more). A grid "
        "of fewer blocks than N runs on one core per block, a grid of one block on one core. The runtime launches "
        "exactly the library's `set_core_num` cores (`tpuRtKernelLaunch` `block_num`). Results are bitwise those of one core",
        "codegen/plan",
    ),
    Construct(
        "`tpu:cores=N` (N > 1) for a kernel with `T.atomic_add` (split-K GEMM)",
        "the read-modify-write is atomic only while one core walks the blocks that add into a region, so only the outer "
        "grid loops that separate the regions are split (split-K's `bx`, `by`; each core walks every K-slice `bz` of its "
        "blocks in the one-core order, so the sums are bitwise those of one core). A loop is split when every "
        "`T.atomic_add` destination index has a dimension `c * v + k` with a constant `k` and `|c|` at least "
        "the region's extent, and the destination is used by nothing else. Otherwise the kernel runs on one core",
        "codegen/plan",
    ),
    Construct(
        "`tpu:cores=N` beyond the chip (BM1690: N > 8; BM1684X: N > 1)",
        "refused with a `TargetOptionError` naming the chip: BM1684X kernels launch through bmlib's `tpu_kernel_launch`, "
        "which has no core count",
        "chips",
        REFUSED,
    ),
    Construct(
        "tensor parameters (`T.Tensor`, static or symbolic shape, fp32/fp16/bf16/int*), in any order, used or not",
        "`__KERNEL__ void <name>_kernel(fp32 *ptr_0, ...)`: `ptr_i` is the i-th *declared* tensor (unused ones included), "
        "bound by identity (`abi.bind_pointers`), and one `gtensor` per used tensor. A prim_func already named `*_kernel` keeps its name",
        "codegen/entry",
    ),
    Construct("`T.alloc_shared`, `T.alloc_fragment`, `T.alloc_local`", "`make_tensor<T>(block, shape)`, a local tensor", "codegen/walk"),
    Construct("`T.alloc_var`", "a C scalar", "codegen/walk"),
    Construct(
        "`T.Pipelined(n, num_stages=s)`",
        "a `for` loop starting with `ppl::enable_pipeline()`: ppl-compile overlaps the next iteration's DMA with this "
        "iteration's compute and keeps the data dependences. The results are those of sequential execution. A loop of "
        "one trip is not pipelined (nothing to overlap; ppl-compile 1.30.2 crashes on some)",
        "codegen/walk",
    ),
    Construct("`T.serial` loops, `if`, scalar bindings", "C `for`, `if`, `int`/`float` locals", "codegen/walk"),
    Construct(
        "scalar expressions (per-element code, loop bounds, scalar operands of tile ops): `T.if_then_else` (the guarded "
        "load `T.if_then_else(bx * BM + i < M, A[bx * BM + i, j], 0)`), `T.Select`, nested float `T.min`/`T.max`, "
        "`T.clamp`, `T.exp`/`exp2`/`log`/`log2`/`sqrt`/`abs`/`floor`/`ceil`, `&`/`|` of conditions",
        "C `?:` (only the chosen branch is evaluated) whose branches are cast to their C type, values and never variables "
        "(ppl-compile 1.30.2 fails to verify, or crashes on, a `?:` of two variables inside another); `T.clamp` as "
        "`torch.clamp` (NaN in the value or a bound propagates, `lo > hi` gives `hi`); the `ppl::` scalar functions in "
        "float, an fp16/bf16 result rounded once, as torch rounds it. Computing on uint8/uint16/uint32 values in scalar "
        "code is refused by name (ppl-compile 1.30.2 compiles only copies of them, and wrapping a signed integer "
        "into one, `T.cast(bx, 'uint8')`); hold such data in int32",
        "codegen/scalar",
    ),
    Construct(
        "`T.infinity(dtype)`, `-T.infinity(dtype)` (fills, selects, stores, reduction identities)",
        "IEEE ±inf, spelled `(3.0e38f * 2.0f)` (PPL has no inf literal); fp16/bf16 tiles filled with it hold ±inf",
        "codegen/scalar",
    ),
    Construct(
        "scalar kernel parameters (`alpha: T.float32`, `n: T.int32`), passed as Python numbers, in any order, used or not",
        "by-value `float arg_i` / `int arg_i` entry parameters in their declared slot (`abi.SCALAR_TYPES`; the runtime "
        "packs them into ppl-compile's argument struct with C alignment); usable wherever an index or a scalar operand is "
        "(values, masks, loop bounds). Other scalar types and scalars on bm1684x are refused by name",
        "codegen/entry",
    ),
    Construct(
        'symbolic (dynamic) dimensions: `M = T.dynamic("M")` (or `T.symbolic`) in `T.Tensor((M, N), dtype)`, grids '
        "`T.ceildiv(M, block_M)`, loop bounds and masks using `M`",
        "one `int M` entry parameter per distinct variable, after the declared ones (`abi.ShapeSlot`, in `abi.shape_symbols` "
        "order); the runtime reads each size from the tensors at every call (tilecore's launcher has checked that the tensors "
        "agree), so one compiled kernel serves every size. `M` appears in the `gtensor` shapes and wherever a scalar may; "
        "tiles stay static. Copies along `M` are clipped at run time and guarded by `n > 0`: a block wholly past the end "
        "loads zeros and stores nothing",
        "codegen/entry",
    ),
    Construct(
        "a dimension that is an expression (`T.Tensor((M * 2, N))`); two variables of one name; an `int64` one "
        '(`T.dynamic("M", "int64")`); a tile of symbolic shape; symbolic dimensions on bm1684x',
        "refused by name: declare each dynamic dimension as its own `int32` variable, allocate block-sized tiles, run on bm1690 "
        "(bm1684x's runtime passes no scalar arguments)",
        "codegen/entry",
        REFUSED,
    ),
    # ------------------------------------------------------------------ copy
    Construct(
        "`T.copy` global → tile / tile → global",
        "`dma::load(tile, g.sub_view(shape, offset))` / `dma::store(g.sub_view(shape, offset), tile)`",
        "codegen/emit/copy",
        tile_op="tl.tileop.copy",
        handler=emit_copy,
    ),
    Construct(
        "`T.copy` whose tile overhangs the tensor (shapes that do not divide)",
        "extents clipped at run time (`int n = min(64, 130 - by * 64)`); on loads the tile is first zero-filled with "
        "`dma::zero`, which matches TileLang's rule that out-of-bounds reads give 0 and out-of-bounds writes are dropped",
        "codegen/emit/copy",
    ),
    Construct(
        "`T.copy` that changes fp32/fp16/bf16",
        "DMA of a staging tile plus `tiu::cast` (a load into a whole tile casts the whole zero-filled staging tile); " + _CAST_NOTE,
        "codegen/emit/copy",
    ),
    Construct(
        "`T.copy` between a 2-D/3-D tile and a slice of a 3-D/4-D tensor: `Q[bz, bx * BM : (bx + 1) * BM, by, :]` (bshd), "
        "`Q[bz, by, bx * BM : (bx + 1) * BM, :]` (bhsd)",
        "a slice whose rows run along the tensor's second axis already has the tile's `[1, rows, 1, cols]` shape; any other "
        "slice reads the tensor through a permuted view, `g.view(shape, stride).sub_view(extent, offset)`, that puts the "
        "axes the slice spans where the tile has them (row-major strides, symbolic ones included)",
        "codegen/emit/slices",
    ),
    Construct(
        "`T.copy` of a slice of a rank-5 (or higher) tensor (flash decoding's `Partial[b, rows, h, split, :]`), or of a "
        "rank-3/4 tensor into a 1-D tile (`Lse[b, h, split, rows]`, GQA's per-key mask `mask[b, keys, h]`)",
        "the same permuted view; the axes the slice does not span are folded into one axis of stride 1 whose offset is "
        "their linear offset. A 1-D per-column vector may take its elements from a non-contiguous axis when the stride "
        "is at most 128 bytes (the DMA's `W` stride limit)",
        "codegen/emit/slices",
    ),
    Construct(
        "`T.copy` whose start is read from a tensor (`T.copy(X[BlockRow[by], 0], x_s)`, "
        "`T.copy(W[group_idx_for_bx[bx], n0:n1, k0:k1], w_s)`: a grouped GEMM by expert id), or a region larger than a "
        "tensor dimension (GQA's `block_H` rows of fewer heads)",
        "clipped at both ends at run time, as TileLang's copy predicates do: `lo = max(start, 0)`, the tile side starts "
        "`lo - start` later, `min(extent - skip, size - lo)` elements move (nothing when not positive); loads zero-fill "
        "the rest. Only a region larger than a size-1 dimension (the `[M, 1]` tensor into a `[rows]` tile slip) is refused",
        "codegen/emit/copy_clip",
    ),
    Construct(
        "`T.alloc_global` workspaces and several `T.Kernel` blocks in one `prim_func` (upstream's one-function flash decoding)",
        "refused by name: the tpu target compiles one `T.Kernel` per `prim_func`; pass the workspace as a tensor parameter "
        "and write one `prim_func` per `T.Kernel`, called in turn (`examples/tpu/flash_decoding.py`)",
        "codegen/walk",
        REFUSED,
    ),
    Construct(
        "a slice whose tile columns do not run along the tensor's last axis (`X[b, rows, 0:4, 0]` into a `[rows, 4]` tile)",
        "refused by name: the DMA's `W` must be the tensor's contiguous axis; copy slices whose last extent is the last axis",
        "codegen/emit/slices",
        REFUSED,
    ),
    Construct(
        "`T.copy` tile → tile",
        "`tiu::move`, or `tiu::cast` across dtypes (overflow gives ±inf, as in IEEE: `codegen/emit/cast.py`). The staging copy that `T.reduce_*` inserts for shared inputs is "
        "removed: the reduction reads the original tile",
        "codegen/emit/copy",
    ),
    Construct(
        "`T.copy` between tiles whose regions start on different lanes (`T.copy(x[k, :], v)` of a 1-row tile, a row "
        "copied to another row), or of a tile row to or from a 1-D tile (`T.copy(lse[k, :], lse_split)`)",
        "the local DMA: `dma::move` across lanes (a TIU instruction stays on its lanes), `dma::transpose_cw` for a row "
        "↔ 1-D tile (the elements of one lane spread over the lanes)",
        "codegen/emit/copy",
    ),
    Construct(
        "`T.copy` between an fp32 `T.gemm` tile and an ordinary 2-D tile of the same shape and dtype",
        "`dma::transpose_nc` (the `rows_n` layout's rows are on N, an ordinary tile's on the lanes). A `T.reduce_*` of "
        "such a copy reduces the copy",
        "codegen/emit/copy",
    ),
    Construct(
        "`T.copy(table[ids[k], :], tile[k, :])` or `T.copy(table[ids_local[0], :], row)`: one row of a 2-D table at a "
        "position read from an int32/int64 tile or tensor (per-row embedding lookups in a serial loop)",
        "`dma::gather_h` of one lane: the index is a one-element `view<uint32>()` of the ids, the table a `[1, 1, V, D]` view. "
        "Ids outside `[0, V)` give a row of zeros",
        "codegen/emit/gather",
    ),
    Construct(
        "`T.copy` to a data-dependent position (a scatter); strided slices `A[a:b, 0:N:2]` "
        '(tilelang itself refuses them: "Buffer slicing with step is not supported")',
        "refused by name: store whole blocks; read strided data in a `T.Parallel` (`t[i, j] = A[r + i, 2 * j]`, below)",
        "codegen/emit/gather",
        REFUSED,
    ),
    Construct(
        "`T.reshape`/`T.view` of a global tensor (`T.copy(T.reshape(A, [N // M, M]), B)`)",
        "one more `gtensor` over the same pointer in the new shape (kernel tensors are contiguous), used from then on. "
        "A kernel that uses the tensor in both shapes is refused by name",
        "codegen/emit/reshape",
    ),
    Construct(
        "`T.copy` global → global (`T.copy(A[by * BM:(by + 1) * BM, :], B[...])`, casts included)",
        "through a temporary tile: the two `T.copy` forms above (clipped at each tensor's edge, cast on the store), in "
        "chunks of at most 32 KiB per lane along the region's outer axis. Regions of symbolic size are refused by name",
        "codegen/emit/global_copy",
    ),
    # ------------------------------------------------------------------ fill
    Construct(
        "`T.fill(tile, v)`, `T.clear(tile)`", "`tiu::fill(tile, v)`", "codegen/emit/fill", tile_op="tl.tileop.fill", handler=emit_fill
    ),
    *PARALLEL_ROWS,
    # ------------------------------------------------------------------ reductions
    Construct(
        "`T.reduce_max/min/sum/abssum/absmax(x, y, dim=-1)` on a 2-D tile (fp32/fp16/bf16)",
        "`quick_pooling` (pads each row's tail to whole EUs with the identity, then two pooling passes). `min` is "
        "computed as `-max(-x)`; `abs*` reduce `tiu::fabs(x)`; `clear=False` combines with `tiu::fadd/fmax/fmin`. Rows of "
        "exactly 32 bytes (8 fp32, 16 fp16/bf16 elements) get their tail filled here in two parts: `quick_pooling`'s one "
        "fill of it kills the BM1690 emulator",
        "codegen/emit/reduce",
        tile_op="tl.tileop.reduce",
        handler=emit_reduce,
    ),
    Construct(
        "`T.reduce_*(x, y, dim=0)` of a 2-D tile (column reductions) or of a 1-D tile",
        "the lanes axis is moved to `W` first: `tiu::transpose_cw` (into a `TPU_ROW_ALIGN` scratch, then `tiu::move`) "
        "when `C >= W`, `tiu::transpose_wc` otherwise; then `quick_pooling` as above. The result is a 1-D tile (`[1]` for a 1-D source)",
        "codegen/emit/reduce",
    ),
    Construct(
        "`T.reduce_*(x, y, dim=-1)` of a 3-D tile `[b, rows, cols]` (or a 4-D tile `[a, b, 1, cols]`) into `[b, rows, 1]`",
        "`quick_pooling` over the tile's `[b, rows, 1, cols]` view, as for 2-D tiles",
        "codegen/emit/reduce",
    ),
    Construct(
        "`T.reduce_*` of a 4-D tile whose third axis is not 1 (`[1, heads, rows, cols]`)",
        "refused by name: PPL's pooling reduces `[N, C, 1, W]` rows (with `H > 1` it gave wrong sums on the emulator); "
        "use a 3-D tile `[heads, rows, cols]`",
        "codegen/emit/reduce",
        REFUSED,
    ),
    Construct(
        "`T.reduce_sum/max/min/abssum/absmax` of int32 tiles (`dim=-1`, or `dim=0` of a 2-D/1-D tile; `clear=False` too)",
        "exact: a scratch copy folded in half along `W` until one column is left, `ceil(log2 n)` integer "
        "`tiu::add/max/min` on `W`-offset sub-views (`dim=0` transposes first, as above); sums wrap in two's complement "
        "like int32 sums on GPUs. `abssum`/`absmax` fold `max(x, 0 - x)` (a wrapping negation: `|-2^31|` is `-2^31`, "
        "as torch's int32 `abs`). The pooling unit is not used: it takes floats only, and fp32 rounds beyond 2^24",
        "codegen/emit/reduce_int",
    ),
    Construct(
        "reductions of other integer tiles (int8/int16/uint*); along a middle axis of a 3-D/4-D tile",
        "refused: pass the data as an int32 or float tensor; reduce along the last axis",
        "codegen/emit/reduce",
        REFUSED,
    ),
    # ------------------------------------------------------------------ gemm
    Construct(
        "`T.gemm(A, B, C)` with fp16/bf16 A and B and an fp32 C",
        "`tiu::fmm2_nn(C, A, B, accumulate)`; `transpose_B=True` gives `tiu::fmm2_nt`",
        "codegen/emit/gemm",
        tile_op="tl.tileop.gemm",
        handler=emit_gemm,
    ),
    Construct(
        "`T.gemm` with fp32 A and B",
        "`tiu::fmm(C, A, B, accumulate)` on the mm v1 unit (the operand layout is described below)",
        "codegen/emit/gemm",
    ),
    Construct(
        "`T.gemm(A, B, C)` with int8 A and B, or uint8 A and B, and an int32 C (upstream's `kernel_gemm_int8_int32_nn`), "
        "with or without `transpose_A` / `transpose_B`",
        "`tiu::mm2_nn`/`mm2_nt(C, A, B, ..., accumulate, ...)` (PPL's integer mm2: exact int32 sums, no saturation, "
        "no requantisation); `transpose_A` as for fp16. int8 x uint8 and integer operands into a float C are refused by name",
        "codegen/emit/gemm",
    ),
    Construct("`T.gemm(..., clear_accum=True)`", "`accumulate = false`", "codegen/emit/gemm"),
    Construct(
        "`T.clear(C)` / `T.fill(C, 0)` of the whole tile immediately followed by `T.gemm(A, B, C)` (C not an operand)",
        "no fill; the GEMM is emitted with `accumulate = false` and overwrites C. A fill of part of C, of another value, "
        "or with a statement in between is kept",
        "codegen/emit/gemm",
    ),
    Construct(
        "`T.gemm(transpose_A=True)` (A a `[K, M]` tile) with fp16/bf16 operands, with or without `transpose_B`",
        "A is transposed into a scratch `[M, K]` tile (`tiu::transpose_cw`/`transpose_wc`, as for dim-0 reductions), then "
        "`tiu::fmm2_nn`/`fmm2_nt`",
        "codegen/emit/gemm",
    ),
    Construct(
        "a batched `T.gemm` on 3-D tiles",
        "refused by name (tilelang's frontend already refuses a batch > 1): the matrix unit multiplies 2-D tiles; put the "
        "batch in the `T.Kernel` grid and `T.copy` each batch's 2-D slice into 2-D tiles",
        "codegen/emit/gemm",
        REFUSED,
    ),
    Construct(
        "fp32 `T.gemm` with `transpose_A`, `transpose_B` or both",
        "the transposed operand keeps the lanes layout; before `tiu::fmm` it is moved into a `rows_n` scratch tile of its "
        "transpose by `dma::transpose_cw` (lanes ↔ W) and `dma::transpose_nc` (lanes → N)",
        "codegen/emit/gemm",
    ),
    Construct(
        "fp32 `T.gemm` whose operand is also reduced, computed in a `T.Parallel` with ordinary tiles, or copied from a "
        "slice of a tensor of another rank (fp32 flash attention: the scores and the output)",
        "the operand keeps the lanes layout (`codegen/plan.py`); around each `tiu::fmm` it goes through a `rows_n` scratch "
        "tile by `dma::transpose_nc` (an accumulator in and out). The loop holding it is not software-pipelined "
        "(ppl-compile 1.30.2 segfaults on it)",
        "codegen/emit/gemm",
    ),
    # ------------------------------------------------------------------ atomic add
    Construct(
        "`T.atomic_add(C[by * BM, bx * BN], c_tile)` (tile region; split-K GEMM)",
        "the blocks adding into a region run on one core, one after another (under `tpu:cores=N` too, see above), so a "
        "read-modify-write is atomic: `dma::load` the region (clipped "
        "like `T.copy`) into a scratch tile, `tiu::fadd` the tile, `dma::store` it back. Tile and tensor of the same "
        "float dtype; the clipped read needs no zero fill (the overhang is never stored). Element-wise `T.atomic_add` in "
        "`T.Parallel` is refused by name",
        "codegen/emit/atomic",
        tile_op="tl.tileop.atomicadd",
        handler=emit_atomic_add,
    ),
    # ------------------------------------------------------------------ scans
    Construct(
        "`T.cumsum(x, [y,] dim=0 or 1, reverse=...)` of a 2-D fp32/fp16/bf16 tile (shared or fragment), or of a 1-D tile",
        "a log-step scan: `ceil(log2 n)` rounds of `tiu::move` + `tiu::fadd` on `W`-offset sub-views (`x[:, s:] += x[:, :n-s]`); "
        "along the rows (dim 0, the lanes) the shifted copy is a `dma::move` across lanes. "
        "Tiles of rank 3-4 and integer scans are refused by name",
        "codegen/emit/scan",
        tile_op="tl.tileop.cumsum",
        handler=emit_cumsum,
    ),
    Construct(
        "`T.atomic_max(C[...], tile)` / `T.atomic_min(C[...], tile)` (tile region)",
        "the read-modify-write of `T.atomic_add` with `tiu::fmax` / `tiu::fmin` (the same core rules under `tpu:cores=N`)",
        "codegen/emit/atomic",
        tile_op="tl.tileop.atomicmax",
        handler=emit_atomic_max,
        more_ops=(("tl.tileop.atomicmin", emit_atomic_min),),
    ),
    # ------------------------------------------------------------------ per-element code
    Construct(
        "per-element code outside `T.Parallel` on fp32/integer elements: `c[i, j] += a[i, k] * b[k, j]` in `T.serial` "
        "loops (a hand-written GEMM), `acc += A[bx, j]` into a `T.alloc_var`, `if x[i, j] > best:`, `Out[bx * BM + i] = v`",
        "the scalar unit reads and writes the element: `get_lmem_ptr(t.sub_view({1, 1, 1, 1}, offset))[0]` of a tile "
        "(PPL resolves lane and address), `get_gmem_ptr(ptr)[flat]` of a tensor (row-major). `ppl::tpu_poll()` first waits "
        "for the DMA/TIU instructions issued before; such loops are not software-pipelined; `tiu::move(t, t)` keeps each "
        "tile the scalar unit uses live over its scope (`codegen/emit/elements.py`). One element at a time (a performance note)",
        "codegen/emit/elements",
    ),
    Construct(
        "per-element access to fp16/bf16 elements outside `T.Parallel` (upstream's CPU GEMM on fp16 `A_local`), and "
        "`T.Parallel` bodies with no vector form over them",
        "through fp32, with the TIU's conversions: a loop of per-element code that only reads a 16-bit tile reads an fp32 "
        "copy made once before it (`tiu::cast`); any other access moves the element through a one-element scratch "
        "(`dma::move`/`load`/`store`, `tiu::cast` with the IEEE overflow fix, a wait). Scalar code holds 16-bit values in `float`s "
        "of their type: every cast to fp16/bf16 (from an integer, fp32 or the other 16-bit type) and every fp16/bf16 "
        "`+ - * /` rounds through the same scratch, as torch does (an integer through fp32 first). "
        "Performance: 2-3 instructions and a wait per element off the shadow path",
        "codegen/emit/half_elements",
    ),
    Construct(
        "per-element access to int64 elements outside `T.Parallel`",
        "refused by name: the scalar unit has no 64-bit arithmetic on these word-pair tiles; compute in int32",
        "codegen/emit/elements",
        REFUSED,
    ),
    Construct(
        "scalar atomics `T.atomic_add/max/min(H[ids[i]], v)`; `while cond:`; loops of runtime length (`T.serial(n)`)",
        "a read-modify-write by the scalar unit (the grid then runs on one core: two blocks may meet at an element); "
        "`while (true) { if (!(cond)) break; ... }`; a C `for` with the runtime bound",
        "codegen/emit/elements",
    ),
    Construct(
        "`T.cummax(src, [dst,] dim, reverse)`, `T.reduce_bitxor/bitor/bitand`, `T.transpose(src, dst)` (2-D)",
        "per-element loops (fp32/integer elements, as above); `T.transpose` of two whole local tiles of one dtype is "
        "`dma::transpose_cw(dst, src)`",
        "codegen/emit/serial_ops",
        tile_op="tl.tileop.cummax",
        handler=emit_cummax,
        more_ops=(("tl.tileop.transpose", emit_transpose),),
    ),
    Construct(
        "other targets' hints (`T.use_swizzle`, `T.annotate_layout`, `T.disable_warp_group_reg_alloc`, `T.no_set_max_nreg`, "
        "`T.sync_threads`, ...); per-thread indexing (`T.get_thread_binding`)",
        "hints are ignored (`lowering.HINT_OPS`: a core runs a block as one sequential program); per-thread indexing is "
        "refused by name before lowering, with the tile-level rewrite (tilelang's `c` target refuses it too)",
        "lowering",
    ),
    Construct(
        "tile-level work under a guard on the thread index (`if tx < 128: T.copy(...)` or a `T.Parallel`; upstream's mask-op tests)",
        "decided at compile time: tilelang does such work once, collectively, when some thread passes the guard, so the body "
        "stays when an index in `T.Kernel(threads=...)` satisfies the condition and is dropped otherwise. Guards with an "
        "`else`, on other values, or around per-thread code keep the per-thread refusal",
        "thread_guards",
    ),
    Construct(
        "`T.im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad)` of an NHWC image (upstream's convolution)",
        "tilelang's own definition element by element: the per-element loops of the rows above, the image read through "
        "the bounds check (0 in the padding). Performance: one element at a time (fp16 through fp32 scratches)",
        "codegen/emit/serial_ops",
        tile_op="tl.tileop.im2col",
        handler=emit_im2col,
    ),
    Construct(
        "other tile ops",
        "refused, naming the op",
        "codegen/walk",
        REFUSED,
    ),
)


@cache
def tile_op_handlers() -> dict[str, Callable[[EmitContext, Any], None]]:
    """TIR tile-op name -> ``handler(context, call)``, from the table."""
    handlers = {c.tile_op: c.handler for c in CONSTRUCTS if c.tile_op is not None and c.handler is not None}
    handlers.update({op: handler for c in CONSTRUCTS for op, handler in c.more_ops})
    return handlers


def supported_tile_ops_hint() -> str:
    """The fix line of an unknown tile op's error: the tile ops the table supports."""
    spelled = {
        "atomicadd": "T.atomic_add",
        "atomicmax": "T.atomic_max/T.atomic_min",
        "cummax": "T.cummax, T.transpose",
        "cumsum": "T.cumsum",
        "copy": "T.copy",
        "fill": "T.fill/T.clear",
        "reduce": "T.reduce_{max,min,sum,abssum,absmax,bitxor,bitor,bitand}",
        "gemm": "T.gemm",
    }
    ops = [c.tile_op.removeprefix("tl.tileop.") for c in CONSTRUCTS if c.tile_op]
    return "supported tile ops on tpu: " + ", ".join(spelled.get(op, f"T.{op}") for op in ops) + ", T.Parallel element-wise loops"
