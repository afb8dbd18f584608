"""The construct table's rows for ``T.Parallel`` bodies (element-wise code), kept apart from
:mod:`tilelang_tpu.codegen.table` for length; the table lists them in this order."""

from __future__ import annotations

from tilelang_tpu.codegen.row import REFUSED, Construct

__all__ = ["PARALLEL_ROWS"]

PARALLEL_ROWS: tuple[Construct, ...] = (
    Construct(
        "`T.Parallel` loops `c[i, j] = expr`",
        "one TIU instruction per operation over the whole tile. Tile ⊕ tile: `tiu::fadd/fsub/fmul/fdiv/fmax/fmin`. "
        "Tile ⊕ scalar (either side): the same functions with a `float` constant (the PPL `_C` forms). Casts: `tiu::cast`, "
        "with overflow to ±inf as in IEEE (`codegen/emit/cast.py`). "
        "Functions: `T.exp` → `fexp` (PPL's range-reduced exp; a `gt_select` gives +inf above ln(max), where fexp is finite garbage, unless ranges prove the argument below), `T.exp2(x)` → `fexp(x · ln 2)` (a constant "
        "scale `x · c`, `c · x` or `a · c ± b · c` folds into that one multiply: `fexp((a ± b) · c ln 2)`), `T.log` → `flog`, "
        "`T.log2(x)` → `flog(x) / ln 2`, `T.tanh` → `tanh_fp32` and `T.sigmoid` → `sigmoid_fp32` (fp32 only; others refused "
        "by name), `T.abs` → `tiu::fabs`, `T.sqrt` → `tiu::fsqrt` (with selects for +inf and arguments below 2^-100, unless ranges prove them needless), `a / b` → `tiu::fdiv` (fp32/bf16: both operands scaled by 2^±64 where |b| may leave [2^-100, 2^100]), `T.rsqrt` (which tilelang lowers to `1 / sqrt`) → `tiu::frsqrt` where the argument is proven >= 2^-124, "
        "else `fsqrt` and `fdiv` (fp32; see the performance notes). On fp16/bf16 tiles, division, `T.sqrt`, `T.rsqrt`, "
        "`T.exp`, `T.exp2`, `T.log` and `T.log2` are computed in fp32 and rounded once (`tiu::cast` up, the op, the IEEE "
        "cast down), as torch and the `c` target do: PPL's 16-bit forms are up to one ulp off (fp16 `sqrt(3)` 1.7314 for "
        "1.7324, bf16 `x / 4` wrong on 2,047 of 2,048 elements). Intermediate values live in "
        "temporary tiles inside a `{ }` scope",
        "codegen/emit/parallel",
    ),
    Construct(
        "a per-row vector `m[i]` (or `m[i, 0]`) inside an `(i, j)` loop",
        "a view of `m` with `W` stride 0 that broadcasts each lane's value along the row (softmax, rmsnorm). Its `C` "
        "stride is `m`'s own aligned row-group stride (`codegen.layout.broadcast_strides`), so rows 64 and up (the "
        "second pass over the lanes) read their own values",
        "codegen/emit/parallel",
    ),
    Construct(
        "`T.Parallel` over a 1-row tile (tilelang drops the extent-1 loop and writes the index 0)",
        "the same tile ops over a 1-row domain",
        "codegen/emit/parallel",
    ),
    Construct("`T.Parallel` over part of a tile (extents smaller than the tile)", "`sub_view` of the tile", "codegen/emit/parallel"),
    Construct(
        "`T.Parallel` over a 3-D or 4-D tile (`y[b, h, i, j] = x[b, h, i, j] * 2.0 - 1.0`)",
        "the same whole-tile ops on the tile's `[N, C, H, W]` view (`[b, rows, cols]` is `[b, rows, 1, cols]`; 4-D as is). "
        "The per-row and per-column broadcasts are those of 2-D `(i, j)` loops",
        "codegen/emit/parallel",
    ),
    Construct(
        "a per-column vector `w[j]` inside an `(i, j)` loop (norm weights, bias epilogues)",
        "`w` gets the `row` layout (`[1, 1, 1, n]`, one lane; its global copy uses a matching `gtensor` view); at the use "
        "`tiu::broadcast` copies it to one pass of the lanes and a view with `C` stride 0 repeats that pass over the row groups",
        "codegen/emit/parallel",
    ),
    Construct(
        "`T.if_then_else(cond, a, b)` with `cond` comparing integer expressions of loop and block indices "
        "(`<`, `<=`, `>`, `>=`, `==`, `!=`; causal and sequence-length masks)",
        "index tiles (PPL's serial-number table along `W`; transposed onto the lanes, + 64·g per row group, for rows), "
        "their difference as exact fp32 integers, then `tiu::gt_select`/`lt_select` against a half-integer threshold. "
        "For `<`, `<=`, `>`, `>=` of a sum of loop variables with constant factors plus a scalar part (`bx * 128 + i >= k * 128 + j`), "
        "the index difference (`i - j`) is built once at the start of the kernel, before every loop, and the scalar part "
        "(clamped to ±2^20) moves into the threshold: in the loop only the select remains",
        "codegen/emit/select",
    ),
    Construct(
        "int32 arithmetic in `T.Parallel`: `+ - *`, `T.max/T.min`, `& | ^ ~`, `<< >>` (by a scalar or per element), "
        "a loop variable used as a value (`j`, `bx * BM + i`)",
        "`tiu::add/sub/mul/max/min` without saturation (two's-complement wrap-around, as C and the `c` target), "
        "`tiu::bitwise_and/or/xor`, `tiu::shift` rounding down (arithmetic `>>`); a loop variable is the exact index tile "
        "cast to int32. int64 and uint32 arithmetic is refused by name: compute in int32 (`T.cast(x, 'int32')`)",
        "codegen/emit/integers",
    ),
    Construct(
        "int8, uint8, int16 and uint16 arithmetic in `T.Parallel`, `T.reinterpret` between integers of one width "
        "(upstream's int4 unpacking: `T.reinterpret('int8', ((b[i, j // 2] >> s) & 0xF) << 4) >> 4`)",
        "as C and the `c` target compute it: operands promoted to int32, the int32 instructions above, the value "
        "truncated (masked, sign-extended) only where it is stored, cast, bound to a variable or reinterpreted. "
        "Performance: each narrow operand adds a widening cast, each truncation about four instructions",
        "codegen/emit/integers",
    ),
    Construct(
        "repeating reads `x[i, j // c + b]`, `x[i, j >> k]` (two int4 values per byte, a per-group scale `s[i, j // group]`)",
        "the `ceil(W / c)` source columns moved into a tile, read through a view `[.., ceil(W / c), c]` with `H` stride 1 "
        "and `W` stride 0 by one `tiu::move`, then seen as the domain's rows: three instructions per read",
        "codegen/emit/repeat",
    ),
    Construct(
        "`x // c`, `x % c` (floor, TileLang's `//` and `%`) and `T.truncdiv`/`T.truncmod` of int32 by a positive constant "
        "(by `2^k` TVM already writes shifts and masks)",
        "an fp32 estimate of the quotient, corrected three times with exact int32 remainders, then a last exact "
        "compare-select fix-up (and one more for truncation). Performance: about 30 TIU instructions per division; "
        "divide by a power of two where you can",
        "codegen/emit/integers",
    ),
    Construct(
        "integer division or modulo by a variable or a negative constant inside `T.Parallel`",
        "refused by name: divide by a positive integer constant, or compute in float32 (`T.cast(x, 'float32') / y`) and cast back",
        "codegen/emit/integers",
        REFUSED,
    ),
    Construct(
        "casts between fp32, fp16, bf16, int32, int16, int8, uint16 and uint8, in `T.Parallel` (`T.cast(q[i, j], 'float16') * s[i]`, "
        "w8a16 dequantisation) and in a casting `T.copy` (int8 tensor → fp16 tile)",
        "C's rules, as the `c` target: int → float rounds to nearest even (`tiu::cast`), float → int rounds toward zero "
        "(`RM_TOWARDS_ZERO`), int → int keeps the value or wraps modulo 2^bits (masked in int32 first: `tiu::cast` "
        "between integers saturates)",
        "codegen/emit/cast",
    ),
    Construct(
        "reads at offsets and of other rows: `x[i, j + 64]`, `y[i, j + half] = ...` (RoPE's rotate-half), `x[i + 1, j]`, "
        "`x[k, j]` with `k` a serial loop's variable; stores at offsets `y[i, j + 64]`",
        "a `sub_view` at the offsets. TIU operands share their lanes, so a region starting on another lane than 0 is "
        "first moved onto lanes from 0 by a local DMA (`dma::move`), and a store whose rows start elsewhere is computed "
        "on lanes from 0 and moved into place. Reads or stores that may fall outside their tile are refused by name",
        "codegen/emit/tile_reads",
    ),
    Construct(
        "a column `w[i, k]` inside an `(i, j)` loop, `k` not varying over it (conv taps, causal conv1d)",
        "column `k` moved into a `[rows, 1]` tile, read across the row through a view with `W` stride 0",
        "codegen/emit/tile_reads",
    ),
    Construct(
        "other tile reads whose indices are the loop variables in any order, forwards or backwards, or left out, plus "
        "offsets that do not vary over the loop: transposed `x[j, i]`, reversed `x[i, N - 1 - j]`, `x[k, j]` / `x[k]` "
        "in an `(i, j)` loop, `x[i, k]` / `x[k, i]` / `x[k]` in a loop whose other extent is 1",
        "the region read (`sub_view`, moved onto lanes from 0), transposed by `dma::transpose_cw` where the lanes and `W` "
        "swap; a reversed axis copied one column (`tiu::move`) or row (`dma::move`) at a time in a loop -- one "
        "instruction per column or row, a performance note; an axis the read does not follow repeated by a view with "
        "stride 0 (along `W`) or `tiu::broadcast` (onto the lanes). Reads that may fall outside the tile are refused by name",
        "codegen/emit/affine_reads",
    ),
    Construct(
        "`T.vectorized` loops, alone or under `T.serial` (`for i in T.serial(BM): for j in T.vectorized(N): y[i, j] = ...`)",
        "like `T.Parallel`: one set of TIU instructions per iteration of the serial loop (one row each). Performance: "
        "a whole-tile `T.Parallel(BM, N)` is one set for all rows",
        "codegen/emit/parallel",
    ),
    Construct(
        "`&`, `|`, `~` of conditions in `T.if_then_else` (upstream's sliding-window and band masks), "
        "`T.Let`/`T.Select` in a `T.Parallel` body",
        "the logical `and`, `or`, `not` they mean (compare-selects, see the data-dependent `T.if_then_else` row); "
        "`T.Let` substituted, `T.Select` as `T.if_then_else`",
        "codegen/emit/select",
    ),
    Construct(
        "`T.clamp(x, lo, hi)`",
        "`min(max(x, lo), hi)` as TileLang defines it: int32 `tiu::max/min`; floats as two IEEE compare-selects "
        "(NaN propagates, `lo > hi` gives `hi`, as `torch.clamp`)",
        "codegen/emit/operands",
    ),
    Construct(
        "`T.erf` (exact GELU), `T.sin`, `T.cos` (fp32)",
        "`T.erf`: Abramowitz-Stegun 7.1.26 with `fexp` (absolute error below 1.5e-7; PPL's own `ferf` is off by 2e-2 on "
        "the emulator); `T.sin`/`T.cos`: PPL's `fsin`/`fcos` (range-reduced). Other dtypes refused by name: compute in fp32",
        "codegen/emit/operands",
    ),
    Construct(
        "`T.atomic_add(C[bx * BM + i, j], v[i, j])` inside `T.Parallel` (upstream's `examples/gemm_splitk`)",
        "the values computed into a tile over the domain, the region of `C` loaded (clipped like `T.copy`), `tiu::fadd`, "
        "stored back; the kernel runs on one core and its grid loop is not pipelined (consecutive blocks may add into one "
        "region). Other atomics inside `T.Parallel` are refused by name",
        "codegen/emit/parallel",
    ),
    Construct(
        "temporaries bound inside `T.Parallel` (`t = x[i, j] - m[i]`)",
        "substituted into the assignments that use them (each use recomputes it as tile ops)",
        "codegen/emit/parallel",
    ),
    Construct(
        "stores to a global tensor inside `T.Parallel`, indexed `offset + loop variable` (LayerNorm's `Mean`/`Rstd`); "
        "or one element outside any loop (`Mean[bx] = mean[0]` of a 1-row tile)",
        "the value is computed into a tile over the loop domain, then one `dma::store`, clipped at the tensor's edge like `T.copy`",
        "codegen/emit/parallel",
    ),
    Construct(
        "embedding lookups `out[i, j] = table[ids[i], j]` in `T.Parallel`: `ids` an int32 or int64 index tile (`T.copy` "
        "of the ids block), or the ids tensor read directly as `ids[offset + i]` or `ids[b, offset + i]`; fp32/fp16/bf16 tables (a cast to the "
        "tile's dtype is allowed); ids out of order, repeated, a block that overhangs the ids",
        "one `dma::gather_h`: the table seen as a `[1, rows, V, D]` view with lane stride 0, one `uint32` index per lane "
        "(int32 ids through `view<uint32>()`: a negative id is a huge one). Ids outside `[0, V)` give rows of zeros (torch "
        "raises; CUDA reads out of bounds); rows past the end of the ids tensor read zeros. int64 ids (PPL has no 64-bit "
        "tensors) are held as pairs of `uint32` words (`W` doubled); the DMA engine splits them and `tiu::eq_select` "
        "keeps the low word where the high word is 0, else `V` (so a negative or ≥ 2³² id is out of range too)",
        "codegen/emit/gather",
    ),
    Construct(
        "int64 tensors and tiles used other than as embedding ids (arithmetic, fills, tile copies)",
        "refused by name: int64 data is copied from global memory and indexes row gathers only; use int32",
        "codegen/emit/gather",
        REFUSED,
    ),
    Construct(
        "strided and transposed reads `t[i, j] = A[o0 + s0 * j, o1 + s1 * i]` in `T.Parallel` (a block read transposed, "
        "every other column, any positive steps)",
        "one `dma::load` from a `gtensor` view with those strides; rows or columns past the tensor's edge read zeros "
        "(`dma::zero` first), as a `T.copy` of an overhanging tile. The DMA takes at most 128 bytes between elements along "
        "`W`: a larger step (a transposed read) loads the block with lanes and `W` swapped, then `dma::transpose_cw`; a "
        "read with both steps larger is refused by name",
        "codegen/emit/gather",
    ),
    Construct(
        "`t[j, i] = a[i, j]` in `T.Parallel(I, J)` (a tile transposed into another tile of the same dtype)",
        "one local `dma::transpose_cw`. In place, or of an fp32 `T.gemm` tile, refused by name",
        "codegen/emit/copy",
    ),
    Construct(
        "reads of global tensors combined with other operations inside `T.Parallel` (`Y[r, j] = X[r, j] * s[r] + b[0]`, "
        "into a tile or a global tensor)",
        "each read staged first: loaded into a temporary tile over the loop variables it uses by the DMA forms above "
        "(block, strided view, row gather; clipped at the edge, reading 0 there), then the expression reads the tile; a "
        "read that does not vary over the loop (`b[0]`, `BlockExpert[by]`) is one element read by the scalar unit and used "
        "as a scalar operand",
        "codegen/emit/staging",
    ),
    Construct(
        "`if`/`else` statements inside `T.Parallel` (`if 16 < row < 96: B[...] = A[...] * 2 else: B[...] = A[...] * 0.5`, "
        "nested, with temporaries)",
        "selects: stores to the same element in both branches become one store of `T.Select(cond, then, else)`; any other "
        "store keeps the old value where its branch is not taken (`T.Select(cond, value, buf[idx])`; a `T.atomic_add` adds "
        "0 there). Both branches are computed for every element (a performance note). A condition that reads what the "
        "branches write is refused here and the loop runs per element (next rows)",
        "codegen/emit/branches",
    ),
    Construct(
        "data-dependent `T.if_then_else(cond, a, b)`: `cond` compares tile values with tiles, per-row vectors `m[i]`, "
        "index expressions or scalars (on either side), combined with `&&`, `||`, `!`; fp32/fp16/bf16, int32, "
        "int16/uint16/int8/uint8 data and values (masked fills, upstream's top-k argmax)",
        "compare-selects over the whole tile, values copied (exact). Float data is compared with `tiu::gt_select` only "
        "(`a < b` is `b > a`), the one PPL compare that is IEEE on the emulator; `==`, `>=`, `<=`, `!=` are built from "
        "`>` and guarded for NaN operands. int32 data and index expressions compare as int32. int16/uint16/int8/uint8 "
        "data and values are widened to int32 (exact), selected in int32 and the result narrowed back (exact: it is one "
        "of the values). Broadcast views are copied to whole tiles first (the selects abort on strided operands); of two "
        "scalar values into an fp16/bf16 result one is filled into a tile first (the emulator aborts on two fp32 scalars "
        "there)",
        "codegen/emit/select",
    ),
    Construct(
        "`T.if_then_else` whose condition is a constant bool once `&`, `|`, `~` are read as logical "
        "(`c & T.bool(True)`, `c` or-ed with `T.bool(False)`, `T.bool(True)` or-ed with itself, nested)",
        "folded at compile time (`c && true` is `c`, `c && false` is `false`, or-ed likewise); a constant condition "
        "emits only the chosen branch",
        "codegen/emit/select",
    ),
    Construct(
        "`T.if_then_else` selecting or comparing other integer types (uint32, int64)",
        "refused: pass the data as int32 or float tensors",
        "codegen/emit/select",
        REFUSED,
    ),
)
