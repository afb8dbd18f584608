"""Top-k, data-dependent ``T.if_then_else`` and int32 reductions on the BM1690 emulator
against torch (issue 10): upstream's examples/topk kernel, comparisons of tile values
combined with ``&&``/``||``/``!``, ReLU and masked fills, exact int32 row and column
reductions.

Every kernel is written the way TileLang users write them (unused parameters, tiles of
1, 63, 65 and 128 rows over shapes they do not divide) and every run checks that the
inputs are left untouched.  Selects and integer reductions are exact, so every
comparison here is exact (``torch.equal``).
"""

from typing import Any

import pytest
import tilelang
import tilelang.language as T
import torch
from tilelang_tpu import codegen, lowering
from tpu_upstream_kernels import topk_kernel

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}

#: Magnitude of the integers used as distinct, exactly representable test values per dtype
#: (fp16 has an 11-bit significand, bf16 an 8-bit one).
_EXACT_INTS = {"float32": 1 << 20, "float16": 1 << 11, "bfloat16": 1 << 8}


def _run(kernel: Any, *inputs: torch.Tensor) -> Any:
    before = [t.clone() for t in inputs]
    out = kernel(*inputs)
    for original, tensor in zip(before, inputs, strict=True):
        # NaNs included: the inputs of the select test hold some
        torch.testing.assert_close(tensor, original, rtol=0, atol=0, equal_nan=True, msg="the kernel wrote one of its inputs")
    return out


def _exactly(actual: torch.Tensor, expected: torch.Tensor) -> None:
    """Bit-for-bit equal values (NaN where NaN is expected), same dtype."""
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=True)


def _distinct_rows(M: int, N: int, dtype: str) -> torch.Tensor:
    """Random rows of distinct values, exact in ``dtype`` (so a top-k has no ties)."""
    span = _EXACT_INTS[dtype]
    rows = [(torch.randperm(2 * span)[:N] - span).float() / span for _ in range(M)]
    return torch.stack(rows).to(DTYPES[dtype])


# ---------------------------------------------------------------------------- top-k


def _upstream_topk(x: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """What upstream's top-k kernel computes, tied values included: the row maximum, the
    highest index holding it, then every element equal to it masked with -10000."""
    values = x.float().clone()
    columns = torch.arange(x.shape[1])
    masked = torch.tensor(-10000.0, dtype=x.dtype).float()
    gates, indices = [], []
    for _ in range(k):
        best = values.max(1).values
        hit = values == best[:, None]
        gates.append(best)
        indices.append(torch.where(hit, columns, -1).max(1).values)
        values = torch.where(hit, masked, values)
    return torch.stack(gates, 1).to(x.dtype), torch.stack(indices, 1).int()


@pytest.mark.usefixtures("toolchain")
@pytest.mark.parametrize(
    ("M", "N", "k", "blk_m", "dtype"),
    [(130, 100, 8, 64, "float32"), (130, 100, 4, 65, "float16"), (5, 48, 1, 1, "bfloat16")],
)
def test_topk_as_upstream_writes_it(M: int, N: int, k: int, blk_m: int, dtype: str) -> None:
    """Values and indices equal ``torch.topk`` on rows of distinct values; on rows with ties,
    they equal what the kernel's algorithm defines (:func:`_upstream_topk`)."""
    kernel = tilelang.compile(topk_kernel(M, N, k, blk_m, dtype), target="tpu", out_idx=[1, 2])
    x = _distinct_rows(M, N, dtype)
    gates, indices = _run(kernel, x)
    expected_gates, expected_indices = x.float().topk(k, dim=1)
    assert torch.equal(gates.float(), expected_gates)
    assert torch.equal(indices, expected_indices.int())

    tied = x.clone()
    tied[:, 1::3] = tied[:, 0::3][:, : tied[:, 1::3].shape[1]]  # every value twice or more
    gates, indices = _run(kernel, tied)
    expected_gates, expected_indices = _upstream_topk(tied, k)
    assert torch.equal(gates, expected_gates)
    assert torch.equal(indices, expected_indices)


# ---------------------------------------------------------------------------- data-dependent selects


def _selects(M: int, N: int, BM: int, BN: int, dtype: str, valid: int) -> Any:
    @T.prim_func
    def selects(
        Y: T.Tensor((M, N), dtype),
        Unused: T.Tensor((N,), dtype),
        X: T.Tensor((M, N), dtype),
        Relu: T.Tensor((M, N), dtype),
        Masked: T.Tensor((M, N), dtype),
        Combined: T.Tensor((M, N), dtype),
        Compared: T.Tensor((M, N), dtype),
        ArgMax: T.Tensor((M, N), "int32"),
        Picked: T.Tensor((M, N), "int32"),
    ):
        with T.Kernel(T.ceildiv(N, BN), T.ceildiv(M, BM), threads=128) as (bx, by):
            x = T.alloc_shared((BM, BN), dtype)
            y = T.alloc_shared((BM, BN), dtype)
            row_max = T.alloc_fragment((BM,), dtype)
            relu = T.alloc_fragment((BM, BN), dtype)
            masked = T.alloc_fragment((BM, BN), dtype)
            combined = T.alloc_fragment((BM, BN), dtype)
            compared = T.alloc_fragment((BM, BN), dtype)
            argmax = T.alloc_fragment((BM, BN), "int32")
            picked = T.alloc_fragment((BM, BN), "int32")
            T.copy(X[by * BM, bx * BN], x)
            T.copy(Y[by * BM, bx * BN], y)
            T.reduce_max(x, row_max, dim=1)
            for i, j in T.Parallel(BM, BN):
                relu[i, j] = T.max(x[i, j], 0)
                masked[i, j] = T.if_then_else(x[i, j] > y[i, j], x[i, j], 0)
                combined[i, j] = T.if_then_else((x[i, j] >= 0.25 and x[i, j] <= y[i, j]) or not (bx * BN + j < valid), y[i, j], -1.0)
                # a scalar on the left of the comparison, a select nested in a select; the constant is
                # of the tile's dtype, so the select runs in that dtype (a Python float makes TVM select
                # in fp32 and cast back, which also keeps the -inf in y since codegen.emit.cast sends overflow
                # to ±inf; before that fix PPL's saturating fp32 -> fp16/bf16 cast turned it into -65504)
                two = T.cast(2.0, dtype)
                compared[i, j] = T.if_then_else(0.5 < x[i, j], x[i, j], T.if_then_else(x[i, j] != y[i, j], y[i, j], two))  # noqa: SIM300
                argmax[i, j] = T.if_then_else(x[i, j] == row_max[i], by * BM + i, -1)
                # int32 data against a scalar and an index expression
                picked[i, j] = T.if_then_else((argmax[i, j] >= 70 or argmax[i, j] <= -1) and argmax[i, j] != by * BM + i, argmax[i, j], j)
            T.copy(relu, Relu[by * BM, bx * BN])
            T.copy(masked, Masked[by * BM, bx * BN])
            T.copy(combined, Combined[by * BM, bx * BN])
            T.copy(compared, Compared[by * BM, bx * BN])
            T.copy(argmax, ArgMax[by * BM, bx * BN])
            T.copy(picked, Picked[by * BM, bx * BN])

    return selects


@pytest.mark.usefixtures("toolchain")
@pytest.mark.parametrize(("dtype", "BM"), [("float32", 128), ("float16", 63), ("bfloat16", 65)])
def test_data_dependent_selects(dtype: str, BM: int) -> None:
    """Tile vs tile, vs a per-row vector, vs scalars on either side; ``>=``, ``<=``, ``!=``,
    ``&&``, ``||``, ``!`` mixed with an index comparison; int32 values from indices; ReLU.
    ``Y`` holds NaNs: every comparison with NaN is false except ``!=``, and ``-0 == 0`` (IEEE)."""
    M, N, BN, valid = 130, 100, 64, 90
    kernel = tilelang.compile(_selects(M, N, BM, BN, dtype, valid), target="tpu", out_idx=[3, 4, 5, 6, 7, 8])
    tdt = DTYPES[dtype]
    x = _distinct_rows(M, N, dtype)
    y = torch.randn(M, N).to(tdt)
    y[::7, ::5] = float("nan")
    y[:, 3] = x[:, 3]  # equal values for == and !=
    x[::2, 4], y[::2, 4] = -0.0, 0.0  # -0 == 0 (IEEE)
    lowest = torch.finfo(tdt).min  # -inf and the lowest finite value: the edges of the NaN test
    x[::2, 5], y[::3, 5], x[1::2, 6], y[::3, 6] = -float("inf"), -float("inf"), lowest, lowest
    unused = torch.randn(N).to(tdt)
    relu, masked, combined, compared, argmax, picked = _run(kernel, y, unused, x)
    zero, minus_one, two = (torch.tensor(v, dtype=tdt) for v in (0.0, -1.0, 2.0))
    columns = torch.arange(N)[None, :]
    # The tiles overhang the tensor (130 x 100 in 64-wide blocks): out-of-range elements
    # read 0, so the row maximum of a block is at least 0.
    padded = torch.zeros(-(-M // BM) * BM, -(-N // BN) * BN, dtype=tdt)
    padded[:M, :N] = x
    blocks = padded.unflatten(1, (-1, BN))
    row_max = blocks.amax(2, keepdim=True).expand_as(blocks).flatten(1)[:M, :N]
    rows = torch.arange(M)[:, None].expand(M, N)
    _exactly(relu, torch.where(x > 0, x, zero))
    _exactly(masked, torch.where(x > y, x, zero))
    _exactly(combined, torch.where(((x >= 0.25) & (x <= y)) | ~(columns < valid), y, minus_one))
    _exactly(compared, torch.where(x > 0.5, x, torch.where(x != y, y, two)))
    _exactly(argmax, torch.where(x == row_max, rows, -1).int())
    in_tile = (columns % BN).expand(M, N).int()  # j is the index inside the tile
    _exactly(picked, torch.where(((argmax >= 70) | (argmax <= -1)) & (argmax != rows), argmax, in_tile))


# ---------------------------------------------------------------------------- int32 reductions


def _int_reductions(M: int, N: int, BM: int) -> Any:
    blocks = T.ceildiv(M, BM)

    @T.prim_func
    def int_reductions(
        Unused: T.Tensor((M,), "int32"),
        X: T.Tensor((M, N), "int32"),
        RowSum: T.Tensor((M,), "int32"),
        RowMax: T.Tensor((M,), "int32"),
        RowMin: T.Tensor((M,), "int32"),
        RowSumPlus7: T.Tensor((M,), "int32"),
        ColSum: T.Tensor((blocks * N,), "int32"),
        ColMax: T.Tensor((blocks * N,), "int32"),
        ColMin: T.Tensor((blocks * N,), "int32"),
        BlockMax: T.Tensor((blocks,), "int32"),
    ):
        with T.Kernel(blocks, threads=128) as bx:
            x = T.alloc_shared((BM, N), "int32")
            row_sum = T.alloc_fragment((BM,), "int32")
            row_max = T.alloc_fragment((BM,), "int32")
            row_min = T.alloc_fragment((BM,), "int32")
            plus7 = T.alloc_fragment((BM,), "int32")
            col_sum = T.alloc_fragment((N,), "int32")
            col_max = T.alloc_fragment((N,), "int32")
            col_min = T.alloc_fragment((N,), "int32")
            block_max = T.alloc_fragment((1,), "int32")
            T.copy(X[bx * BM, 0], x)
            T.reduce_sum(x, row_sum, dim=1)
            T.reduce_max(x, row_max, dim=1)
            T.reduce_min(x, row_min, dim=-1)
            T.fill(plus7, 7)
            T.reduce_sum(x, plus7, dim=1, clear=False)
            T.reduce_sum(x, col_sum, dim=0)
            T.reduce_max(x, col_max, dim=0)
            T.reduce_min(x, col_min, dim=0)
            T.reduce_max(row_max, block_max, dim=0)  # a 1-D tile
            T.copy(row_sum, RowSum[bx * BM])
            T.copy(row_max, RowMax[bx * BM])
            T.copy(row_min, RowMin[bx * BM])
            T.copy(plus7, RowSumPlus7[bx * BM])
            T.copy(col_sum, ColSum[bx * N])
            T.copy(col_max, ColMax[bx * N])
            T.copy(col_min, ColMin[bx * N])
            T.copy(block_max, BlockMax[bx])

    return int_reductions


@pytest.mark.usefixtures("toolchain")
def test_int32_reductions_are_exact() -> None:
    """Row and column sum/max/min, ``clear=False`` and a 1-D tile, with values up to 2^24 so
    that the sums (up to ~2^30) are beyond what fp32 holds exactly.  65-row tiles (two row
    groups; the column reduction transposes with ``transpose_wc``, the 1-D one with
    ``transpose_cw``), 100 columns (an odd fold), and the last block overhangs the tensor:
    its missing rows read 0, as TileLang defines."""
    M, N, BM = 130, 100, 65
    kernel = tilelang.compile(_int_reductions(M, N, BM), target="tpu", out_idx=[2, 3, 4, 5, 6, 7, 8, 9])
    x = torch.randint(-(1 << 24), 1 << 24, (M, N), dtype=torch.int32)
    unused = torch.randint(-5, 5, (M,), dtype=torch.int32)
    row_sum, row_max, row_min, plus7, col_sum, col_max, col_min, block_max = _run(kernel, unused, x)
    wide = x.long()
    assert int(wide.sum(1).abs().max()) > 1 << 24  # fp32 pooling would round these
    assert torch.equal(row_sum.long(), wide.sum(1))
    assert torch.equal(row_max, x.amax(1))
    assert torch.equal(row_min, x.amin(1))
    assert torch.equal(plus7.long(), wide.sum(1) + 7)
    blocks = torch.zeros(-(-M // BM) * BM, N, dtype=torch.long)
    blocks[:M] = wide
    blocks = blocks.unflatten(0, (-1, BM))
    assert torch.equal(col_sum.long(), blocks.sum(1).flatten())
    assert torch.equal(col_max.long(), blocks.amax(1).flatten())
    assert torch.equal(col_min.long(), blocks.amin(1).flatten())
    assert torch.equal(block_max.long(), blocks.amax((1, 2)))


# ---------------------------------------------------------------------------- refused by name


def _reduce_of(dtype: str, kind: str) -> Any:
    @T.prim_func
    def reduce_of(X: T.Tensor((64, 64), dtype), Y: T.Tensor((64,), dtype)):
        with T.Kernel(1, threads=1) as _:
            x = T.alloc_fragment((64, 64), dtype)
            y = T.alloc_fragment((64,), dtype)
            T.copy(X, x)
            getattr(T, f"reduce_{kind}")(x, y, dim=1)
            T.copy(y, Y)

    return reduce_of


def _select_of(dtype: str) -> Any:
    @T.prim_func
    def select_of(X: T.Tensor((64, 64), dtype), Y: T.Tensor((64, 64), dtype)):
        with T.Kernel(1, threads=1) as _:
            x = T.alloc_fragment((64, 64), dtype)
            y = T.alloc_fragment((64, 64), dtype)
            T.copy(X, x)
            T.copy(Y, y)
            for i, j in T.Parallel(64, 64):
                y[i, j] = T.if_then_else(x[i, j] > y[i, j], x[i, j], y[i, j])
            T.copy(y, Y)

    return select_of


def _generate(func: Any) -> str:
    from tilelang.backend.target import determine_target
    from tvm import IRModule
    from tvm.ir import CallingConv

    target = determine_target("tpu", return_object=True)
    lowered = lowering.lower(IRModule({func.attrs["global_symbol"]: func}), target)
    kernels = {
        g: f
        for g, f in lowered.functions.items()
        if f.attrs is not None and f.attrs.get("calling_conv") == CallingConv.DEVICE_KERNEL_LAUNCH
    }
    return codegen.generate(IRModule(kernels), target, "bm1690")


@pytest.mark.parametrize(
    ("func", "construct", "fix"),
    [
        (lambda: _reduce_of("int8", "sum"), "T.reduce_sum of int8 data", "int32"),
        (lambda: _reduce_of("int16", "absmax"), "T.reduce_absmax of int16 data", "int32"),
        (lambda: _select_of("uint32"), "T.if_then_else of uint32 values", "int32"),
    ],
)
def test_integer_constructs_beyond_int32_are_refused_by_name(func: Any, construct: str, fix: str) -> None:
    with pytest.raises(codegen.TpuCodegenError) as info:
        _generate(func())
    message = str(info.value)
    assert construct in message
    assert "fix:" in message and fix in message.split("fix:", 1)[1]
