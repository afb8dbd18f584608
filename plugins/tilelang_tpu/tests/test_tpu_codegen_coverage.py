"""Constructs beyond the basic tile ops, run on the BM1690 emulator against torch:
scalar kernel parameters, ... (issue 10, "accept what users write").

Every kernel is written the way TileLang users write them (unsorted and unused
parameters, shapes that do not divide the tile) and every run checks that the
inputs are left untouched.  Each kernel is compiled once per module and reused.
"""

import ctypes
from functools import cache
from typing import Any

import pytest
import tilelang
import tilelang.language as T
import torch
from tilelang_tpu import abi, codegen, lowering

from tilecore import KernelArgumentError

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def _device_module(func: Any, target: str = "tpu") -> tuple[Any, Any]:
    from tilelang.backend.target import determine_target
    from tvm import IRModule
    from tvm.ir import CallingConv

    tvm_target = determine_target(target, return_object=True)
    lowered = lowering.lower(IRModule({func.attrs["global_symbol"]: func}), tvm_target)
    kernels = {
        g: f
        for g, f in lowered.functions.items()
        if f.attrs is not None and f.attrs.get("calling_conv") == CallingConv.DEVICE_KERNEL_LAUNCH
    }
    return IRModule(kernels), tvm_target


def _untouched(inputs: list[torch.Tensor], copies: list[torch.Tensor]) -> None:
    for x, x0 in zip(inputs, copies, strict=True):
        assert torch.equal(x, x0), "the kernel modified an input"


# ---------------------------------------------------------------------------- scalar parameters


def _scale_mask(M: int, N: int, BM: int, BN: int, dtype: str, scalar: Any = T.float32) -> Any:
    @T.prim_func
    def scale_mask(X: T.Tensor((M, N), dtype), alpha: scalar, unused: T.int32, n_valid: T.int32, Out: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, BN), T.ceildiv(M, BM), threads=1) as (bx, by):
            x = T.alloc_shared((BM, BN), dtype)
            y = T.alloc_fragment((BM, BN), dtype)
            T.copy(X[by * BM, bx * BN], x)
            for i, j in T.Parallel(BM, BN):
                y[i, j] = T.if_then_else(bx * BN + j < n_valid, x[i, j] * alpha + n_valid, x[i, j])
            T.copy(y, Out[by * BM, bx * BN])

    return scale_mask


@cache
def _scale_mask_kernel(dtype: str) -> Any:
    return tilelang.compile(_scale_mask(100, 200, 64, 128, dtype), target="tpu", out_idx=[-1])


@pytest.mark.usefixtures("toolchain")
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_scalar_parameters_float_and_int(dtype: str) -> None:
    kernel = _scale_mask_kernel(dtype)
    assert "float arg_1, int arg_2, int arg_3" in kernel.get_kernel_source()
    x = torch.randn(100, 200).to(DTYPES[dtype])
    x0 = x.clone()
    for alpha, n_valid in [(1.5, 7), (-0.25, 150), (3.0, 0)]:
        out = kernel(x, alpha, 99, n_valid)
        ref = x.float().clone()
        ref[:, :n_valid] = ref[:, :n_valid] * alpha + n_valid
        torch.testing.assert_close(
            out, ref.to(x.dtype), rtol=1e-3 if dtype == "float16" else 1e-6, atol=1e-3 if dtype == "float16" else 1e-5
        )
        _untouched([x], [x0])
    with pytest.raises(KernelArgumentError, match="integer scalar"):
        kernel(x, 1.0, 0, 2.5)


def test_scalar_parameter_of_other_type_is_refused() -> None:
    device, target = _device_module(_scale_mask(64, 64, 64, 64, "float32", scalar=T.float16))
    with pytest.raises(codegen.TpuCodegenError, match=r"alpha has type float16.*T\.float32, T\.int32"):
        codegen.generate(device, target, "bm1690")


def test_scalar_parameters_refused_on_bm1684x() -> None:
    device, target = _device_module(_scale_mask(64, 64, 64, 64, "float32"), "tpu:bm1684x")
    with pytest.raises(codegen.TpuCodegenError, match="scalar kernel parameters on bm1684x"):
        codegen.generate(device, target, "bm1684x")


def test_entry_arguments_use_c_layout() -> None:
    """ppl-compile's struct for (fp32 *, float, int, fp32 *): natural C alignment."""
    types = abi.slot_ctypes([(torch.float32, False), (torch.float32, True), (torch.int32, True), (torch.float16, False)])
    args = abi.entry_arguments([0x1000, 2.5, -3, 0x2000], types)
    assert ctypes.sizeof(args) == 24
    assert [getattr(type(args), f).offset for f in ("a0", "a1", "a2", "a3")] == [0, 8, 12, 16]
    assert (args.a0, args.a1, args.a2, args.a3) == (0x1000, 2.5, -3, 0x2000)
    with pytest.raises(TypeError, match="float32 or int32"):
        abi.slot_ctypes([(torch.float64, True)])


# ---------------------------------------------------------------------------- reductions along dim 0, of 1-D tiles


def _column_reduce(M: int, N: int, BN: int, dtype: str) -> Any:
    @T.prim_func
    def column_reduce(
        X: T.Tensor((M, N), dtype),
        Total: T.Tensor((T.ceildiv(N, BN),), dtype),
        ColMax: T.Tensor((N,), dtype),
        Unused: T.Tensor((N,), dtype),
        ColSum: T.Tensor((N,), dtype),
        ColMin: T.Tensor((N,), dtype),
    ):
        with T.Kernel(T.ceildiv(N, BN), threads=1) as bx:
            x = T.alloc_shared((M, BN), dtype)
            s = T.alloc_fragment((BN,), dtype)
            mx = T.alloc_fragment((BN,), dtype)
            mn = T.alloc_fragment((BN,), dtype)
            tot = T.alloc_fragment((1,), dtype)
            T.copy(X[0, bx * BN], x)
            T.reduce_sum(x, s, dim=0)
            T.reduce_max(x, mx, dim=0)
            T.reduce_min(x, mn, dim=0)
            T.reduce_sum(s, tot, dim=0)  # a 1-D tile: the sum of the block's columns
            T.copy(s, ColSum[bx * BN])
            T.copy(mx, ColMax[bx * BN])
            T.copy(mn, ColMin[bx * BN])
            T.copy(tot, Total[bx])

    return column_reduce


@pytest.mark.usefixtures("toolchain")
@pytest.mark.parametrize(("dtype", "M", "atol"), [("float32", 96, 1e-4), ("float16", 65, 0.05), ("bfloat16", 1, 0.0)])
def test_reduce_along_dim0_and_1d(dtype: str, M: int, atol: float) -> None:
    """Column sum/max/min of an [M, 128] tile (the lanes reduced) and the sum of a 1-D tile,
    200 columns in blocks of 128 (the last block overhangs)."""
    N, BN = 200, 128
    kernel = tilelang.compile(_column_reduce(M, N, BN, dtype), target="tpu")
    tdt = DTYPES[dtype]
    x = torch.randn(M, N).to(tdt)
    x0 = x.clone()
    total, colmax, unused, colsum, colmin = (torch.zeros(n, dtype=tdt) for n in (2, N, N, N, N))
    kernel(x, total, colmax, unused, colsum, colmin)
    _untouched([x], [x0])
    xf = x.float()
    torch.testing.assert_close(colmax, xf.amax(0).to(tdt), rtol=0, atol=0)
    torch.testing.assert_close(colmin, xf.amin(0).to(tdt), rtol=0, atol=0)
    torch.testing.assert_close(colsum.float(), xf.sum(0), rtol=0, atol=atol)
    # The 1-D sum accumulates in the tile's dtype: its error bound is relative to sum |x|.
    parts = (colsum[:BN].float(), colsum[BN:].float())
    bound = 2 * torch.finfo(tdt).eps * max(float(p.abs().sum()) for p in parts)
    torch.testing.assert_close(total.float(), torch.stack([p.sum() for p in parts]), rtol=0, atol=bound)
    assert not unused.any()


# ---------------------------------------------------------------------------- T.gemm(transpose_A=True)


def _gemm_transpose_a(M: int, N: int, K: int, BM: int, BN: int, BK: int, dtype: str, transpose_b: bool) -> Any:
    b_shape, b_tile = ((N, K), (BN, BK)) if transpose_b else ((K, N), (BK, BN))

    @T.prim_func
    def gemm_ta(B: T.Tensor(b_shape, dtype), A: T.Tensor((K, M), dtype), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, BN), T.ceildiv(M, BM), threads=1) as (bx, by):
            a = T.alloc_shared((BK, BM), dtype)
            b = T.alloc_shared(b_tile, dtype)
            c = T.alloc_fragment((BM, BN), "float32")
            T.clear(c)
            for k in T.Pipelined(T.ceildiv(K, BK), num_stages=2):
                T.copy(A[k * BK, by * BM], a)
                if transpose_b:
                    T.copy(B[bx * BN, k * BK], b)
                else:
                    T.copy(B[k * BK, bx * BN], b)
                T.gemm(a, b, c, transpose_A=True, transpose_B=transpose_b)
            T.copy(c, C[by * BM, bx * BN])

    return gemm_ta


@pytest.mark.usefixtures("toolchain")
@pytest.mark.parametrize(("dtype", "transpose_b"), [("float16", False), ("bfloat16", True)])
def test_gemm_transpose_a(dtype: str, transpose_b: bool) -> None:
    """A stored [K, M]; M, K do not divide the tiles (the overhang is zero-filled)."""
    M, N, K = 100, 96, 150
    kernel = tilelang.compile(_gemm_transpose_a(M, N, K, 64, 48, 64, dtype, transpose_b), target="tpu", out_idx=[-1])
    tdt = DTYPES[dtype]
    a = torch.randn(K, M).to(tdt)
    b = (torch.randn(N, K) if transpose_b else torch.randn(K, N)).to(tdt)
    a0, b0 = a.clone(), b.clone()
    c = kernel(b, a)
    expected = a.float().T @ (b.float().T if transpose_b else b.float())
    # fp32 accumulation of exactly representable products: only summation order differs.
    assert float((c - expected).abs().max() / expected.abs().max()) < 1e-5
    _untouched([a, b], [a0, b0])


# ---------------------------------------------------------------------------- split-K GEMM with T.atomic_add


def _gemm_splitk(M: int, N: int, K: int, BM: int, BN: int, BK: int, split: int, dtype: str) -> Any:
    """Upstream's examples/gemm_splitk: each split accumulates its partial product into C."""

    @T.prim_func
    def gemm_splitk(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, BN), T.ceildiv(M, BM), split, threads=1) as (bx, by, bz):
            a = T.alloc_shared((BM, BK), dtype)
            b = T.alloc_shared((BK, BN), dtype)
            c = T.alloc_fragment((BM, BN), "float32")
            T.clear(c)
            SK = T.ceildiv(K, split)
            for ko in T.Pipelined(T.ceildiv(SK, BK), num_stages=2):
                T.copy(A[by * BM, bz * SK + ko * BK], a)
                T.copy(B[bz * SK + ko * BK, bx * BN], b)
                T.gemm(a, b, c)
            T.atomic_add(C[by * BM, bx * BN], c)

    return gemm_splitk


@pytest.mark.usefixtures("toolchain")
@pytest.mark.parametrize(("dtype", "split", "K"), [("float16", 2, 512), ("float32", 4, 256)])
def test_gemm_splitk_atomic_add(dtype: str, split: int, K: int) -> None:
    """C += A @ B over `split` K-slices (fp32: one K tile per split, a single-trip pipelined loop);
    M and N do not divide the tiles; C starts non-zero."""
    M, N = 100, 90
    kernel = tilelang.compile(_gemm_splitk(M, N, K, 64, 48, 64, split, dtype), target="tpu")
    tdt = DTYPES[dtype]
    a, b = torch.randn(M, K).to(tdt), torch.randn(K, N).to(tdt)
    a0, b0 = a.clone(), b.clone()
    c = torch.randn(M, N)
    expected = c + a.float() @ b.float()
    kernel(a, b, c)
    assert float((c - expected).abs().max() / expected.abs().max()) < 1e-5
    _untouched([a, b], [a0, b0])


# ---------------------------------------------------------------------------- T.cumsum


def _cumsum(M: int, N: int, BM: int, dtype: str, reverse: bool, fragment: bool) -> Any:
    @T.prim_func
    def cumsum(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            x = T.alloc_shared((BM, N), dtype)
            T.copy(X[bx * BM, 0], x)
            if fragment:
                y = T.alloc_fragment((BM, N), dtype)
                T.copy(x, y)
                T.cumsum(y, dim=1, reverse=reverse)
                T.copy(y, Y[bx * BM, 0])
            else:
                T.cumsum(x, dim=1, reverse=reverse)
                T.copy(x, Y[bx * BM, 0])

    return cumsum


@pytest.mark.usefixtures("toolchain")
@pytest.mark.parametrize(("dtype", "reverse", "fragment"), [("float32", False, False), ("float32", True, True), ("float16", True, True)])
def test_cumsum_along_rows(dtype: str, reverse: bool, fragment: bool) -> None:
    """200 columns (not a power of two), 100 rows in tiles of 64 (the last overhangs)."""
    M, N = 100, 200
    kernel = tilelang.compile(_cumsum(M, N, 64, dtype, reverse, fragment), target="tpu", out_idx=[-1])
    tdt = DTYPES[dtype]
    x = torch.randn(M, N).to(tdt)
    x0 = x.clone()
    y = kernel(x)
    _untouched([x], [x0])
    xf = x.float().flip(1) if reverse else x.float()
    expected, magnitude = xf.cumsum(1), xf.abs().cumsum(1)
    if reverse:
        expected, magnitude = expected.flip(1), magnitude.flip(1)
    # log2(n) rounds of additions in the tile's dtype: error bound relative to the partial sums of |x|.
    bound = 8 * torch.finfo(tdt).eps * magnitude + 1e-6
    assert bool(((y.float() - expected).abs() <= bound).all())
