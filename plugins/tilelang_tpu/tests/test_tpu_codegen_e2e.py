"""Generated PPL run on SophGo's emulator through plain ``tilelang.compile`` /
``@tilelang.jit(target="tpu")``, compared with torch on random data.

Tolerances: fp32 element-wise and copies are exact or within 1e-5 (PPL's exp
and divide are iterative approximations: 1e-5 relative); fp16 results are
compared with the torch result computed in fp32 from the same fp16 inputs and
rounded to fp16, within rtol = atol = 2e-3 (fp16 has an 11-bit significand,
~4.9e-4 relative rounding per operation); matmuls compare with an fp32 matmul
of the same (rounded) inputs, relative to the output's magnitude.
"""

from typing import Any

import pytest
import tilelang
import tilelang.language as T
import torch
from tilelang_tpu import setup
from tpu_kernels import copy_kernel, matmul_kernel, row_reduce_kernel, softmax_kernel

pytestmark = pytest.mark.usefixtures("toolchain")


def _rel(actual: torch.Tensor, expected: torch.Tensor) -> float:
    return float((actual.float() - expected.float()).abs().max() / expected.float().abs().max().clamp_min(1e-30))


# ---------------------------------------------------------------------------- copies, element-wise, fill


@pytest.mark.parametrize(("dtype", "torch_dtype"), [("float32", torch.float32), ("float16", torch.float16)])
def test_copy_odd_shape(dtype: str, torch_dtype: torch.dtype) -> None:
    kernel = tilelang.compile(copy_kernel(130, 301, 64, 128, dtype), target="tpu", out_idx=[-1])
    x = torch.randn(130, 301).to(torch_dtype)
    torch.testing.assert_close(kernel(x), x, rtol=0, atol=0)


def _elementwise(M: int, N: int, BM: int, BN: int, dtype: str) -> Any:
    @T.prim_func
    def elementwise(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, BN), T.ceildiv(M, BM), threads=1) as (bx, by):
            a = T.alloc_shared((BM, BN), dtype)
            b = T.alloc_shared((BM, BN), dtype)
            c = T.alloc_fragment((BM, BN), dtype)
            T.copy(A[by * BM, bx * BN], a)
            T.copy(B[by * BM, bx * BN], b)
            for i, j in T.Parallel(BM, BN):
                c[i, j] = T.max(a[i, j] * 2.0 - b[i, j], b[i, j] / 4.0) + T.min(a[i, j], 0.5)
            T.copy(c, C[by * BM, bx * BN])

    return elementwise


def _elementwise_ref(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    af, bf = a.float(), b.float()
    return (torch.maximum(af * 2.0 - bf, bf / 4.0) + torch.clamp(af, max=0.5)).to(a.dtype)


def test_elementwise_fp32_odd_shape() -> None:
    kernel = tilelang.compile(_elementwise(100, 200, 64, 128, "float32"), target="tpu", out_idx=[-1])
    a, b = torch.randn(100, 200), torch.randn(100, 200)
    torch.testing.assert_close(kernel(a, b), _elementwise_ref(a, b), rtol=1e-5, atol=1e-5)


def test_elementwise_fp16_jit() -> None:
    M, N, BM, BN = 128, 256, 64, 128

    @tilelang.jit(target="tpu", out_idx=[-1])
    @T.prim_func
    def elementwise_f16(A: T.Tensor((M, N), "float16"), B: T.Tensor((M, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, BN), T.ceildiv(M, BM), threads=1) as (bx, by):
            a = T.alloc_shared((BM, BN), "float16")
            b = T.alloc_shared((BM, BN), "float16")
            c = T.alloc_fragment((BM, BN), "float16")
            T.copy(A[by * BM, bx * BN], a)
            T.copy(B[by * BM, bx * BN], b)
            for i, j in T.Parallel(BM, BN):
                c[i, j] = T.max(a[i, j] * 2.0 - b[i, j], b[i, j] / 4.0) + T.min(a[i, j], 0.5)
            T.copy(c, C[by * BM, bx * BN])

    a, b = torch.randn(M, N).half(), torch.randn(M, N).half()
    torch.testing.assert_close(elementwise_f16(a, b), _elementwise_ref(a, b), rtol=2e-3, atol=2e-3)


def test_fill_cast_exp() -> None:
    M, N = 64, 200

    @T.prim_func
    def fill_exp(A: T.Tensor((M, N), "float16"), C: T.Tensor((M, N), "float32"), D: T.Tensor((M, N), "bfloat16")):
        with T.Kernel(1, threads=1) as _:
            a = T.alloc_shared((M, N), "float16")
            c = T.alloc_fragment((M, N), "float32")
            d = T.alloc_fragment((M, N), "bfloat16")
            T.fill(c, 0.75)
            T.copy(A, a)
            for i, j in T.Parallel(M, N):
                c[i, j] = T.exp(T.cast(a[i, j], "float32")) - c[i, j]
            for i, j in T.Parallel(M, N):
                d[i, j] = T.cast(c[i, j], "bfloat16")
            T.copy(c, C)
            T.copy(d, D)

    kernel = tilelang.compile(fill_exp, target="tpu", out_idx=[1, 2])
    a = torch.randn(M, N).half()
    c, d = kernel(a)
    expected = torch.exp(a.float()) - 0.75
    torch.testing.assert_close(c, expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(d, expected.to(torch.bfloat16), rtol=1e-2, atol=1e-2)  # bf16: 8-bit significand


def test_clear_and_fill_only() -> None:
    M, N = 70, 33

    @T.prim_func
    def fill_only(C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=1) as _:
            c = T.alloc_fragment((M, N), "float32")
            T.clear(c)
            for i, j in T.Parallel(M, N):
                c[i, j] = c[i, j] + 3.25
            T.copy(c, C)

    kernel = tilelang.compile(fill_only, target="tpu", out_idx=[-1])
    torch.testing.assert_close(kernel(), torch.full((M, N), 3.25), rtol=0, atol=0)


def test_scalar_variable_and_serial_loop() -> None:
    M, N = 64, 128

    @T.prim_func
    def scaled(A: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=1) as _:
            a = T.alloc_shared((M, N), "float32")
            s = T.alloc_var("float32")
            s = 0.5
            for _k in T.serial(3):
                s = s + 1.0
            T.copy(A, a)
            for i, j in T.Parallel(M, N):
                a[i, j] = a[i, j] * s  # a runtime scalar operand: tiu::fmul(a, a, (float)(s))
            T.copy(a, C)

    kernel = tilelang.compile(scaled, target="tpu", out_idx=[-1])
    assert "float s = 0;" in kernel.get_kernel_source()
    x = torch.randn(M, N)
    torch.testing.assert_close(kernel(x), x * 3.5, rtol=0, atol=0)


# ---------------------------------------------------------------------------- reductions


_TORCH_REDUCE = {
    "max": lambda x: x.amax(1),
    "min": lambda x: x.amin(1),
    "sum": lambda x: x.sum(1),
    "abssum": lambda x: x.abs().sum(1),
    "absmax": lambda x: x.abs().amax(1),
}


@pytest.mark.parametrize("kind", sorted(_TORCH_REDUCE))
def test_row_reduce(kind: str) -> None:
    # 130 rows: the last block fills only 2 of the 64 lanes; 300 columns pad to 320 in local memory.
    kernel = tilelang.compile(row_reduce_kernel(130, 300, 64, kind), target="tpu", out_idx=[-1])
    x = torch.randn(130, 300)
    torch.testing.assert_close(kernel(x)[:, 0], _TORCH_REDUCE[kind](x), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize(("kind", "combine"), [("sum", torch.add), ("max", torch.maximum)])
def test_row_reduce_accumulates_when_not_cleared(kind: str, combine: Any) -> None:
    kernel = tilelang.compile(row_reduce_kernel(64, 100, 64, kind, clear=False), target="tpu", out_idx=[-1])
    x = torch.randn(64, 100)
    expected = combine(torch.ones(64), _TORCH_REDUCE[kind](x))
    torch.testing.assert_close(kernel(x)[:, 0], expected, rtol=1e-5, atol=1e-4)


# ---------------------------------------------------------------------------- gemm


@pytest.mark.parametrize(
    ("dtype", "torch_dtype", "transpose_b"),
    [
        ("float32", torch.float32, False),
        ("float16", torch.float16, False),
        ("float16", torch.float16, True),
        ("bfloat16", torch.bfloat16, False),
    ],
)
def test_gemm(dtype: str, torch_dtype: torch.dtype, transpose_b: bool) -> None:
    M, N, K = 128, 96, 192
    kernel = tilelang.compile(matmul_kernel(M, N, K, 64, 48, 64, dtype, transpose_b), target="tpu", out_idx=[-1])
    a = torch.randn(M, K).to(torch_dtype)
    b = torch.randn(N, K).to(torch_dtype) if transpose_b else torch.randn(K, N).to(torch_dtype)
    expected = a.float() @ (b.float().T if transpose_b else b.float())
    # fp32 accumulation of exactly representable products: only summation order differs.
    assert _rel(kernel(a, b), expected) < 1e-5


def _clear_then_gemm(M: int, N: int, K: int, dtype: str, transpose_b: bool, transpose_a: bool = False) -> Any:
    a_shape = (K, M) if transpose_a else (M, K)
    b_shape = (N, K) if transpose_b else (K, N)

    @T.prim_func
    def clear_then_gemm(
        A: T.Tensor(a_shape, dtype), B: T.Tensor(b_shape, dtype), C: T.Tensor((M, N), "float32"), D: T.Tensor((M, N), "float32")
    ):
        with T.Kernel(1, threads=1) as _:
            a = T.alloc_shared(a_shape, dtype)
            b = T.alloc_shared(b_shape, dtype)
            c = T.alloc_fragment((M, N), "float32")
            d = T.alloc_fragment((M, N), "float32")
            T.copy(A[0, 0], a)
            T.copy(B[0, 0], b)
            T.fill(c, 1)
            T.fill(c[0 : M // 2, :], 0)  # part of the tile: kept, the GEMM accumulates onto it
            T.gemm(a, b, c, transpose_A=transpose_a, transpose_B=transpose_b)
            T.copy(c, C[0, 0])
            T.fill(d, 5)
            T.clear(d)  # the whole tile: dropped, the GEMM overwrites d
            T.gemm(a, b, d, transpose_A=transpose_a, transpose_B=transpose_b)
            T.copy(d, D[0, 0])

    return clear_then_gemm


@pytest.mark.parametrize(
    ("dtype", "torch_dtype", "transpose_a", "transpose_b"),
    [
        ("float16", torch.float16, False, False),
        ("bfloat16", torch.bfloat16, False, True),
        ("float16", torch.float16, True, False),
        ("float32", torch.float32, False, False),
        ("float32", torch.float32, True, True),
    ],
)
def test_gemm_after_clear(dtype: str, torch_dtype: torch.dtype, transpose_a: bool, transpose_b: bool) -> None:
    """A zero fill right before a GEMM into the same tile: dropped (the GEMM overwrites) only
    when it covers the whole tile; a fill of part of it is kept and the GEMM accumulates."""
    M, N, K = 64, 64, 64
    kernel = tilelang.compile(_clear_then_gemm(M, N, K, dtype, transpose_b, transpose_a), target="tpu")
    a = (torch.randn(K, M) if transpose_a else torch.randn(M, K)).to(torch_dtype)
    b = (torch.randn(N, K) if transpose_b else torch.randn(K, N)).to(torch_dtype)
    c, d = torch.zeros(M, N), torch.zeros(M, N)
    kernel(a, b, c, d)
    product = (a.float().T if transpose_a else a.float()) @ (b.float().T if transpose_b else b.float())
    offset = torch.ones(M, N)
    offset[: M // 2] = 0
    assert _rel(c, product + offset) < 1e-5
    assert _rel(d, product) < 1e-5


# ---------------------------------------------------------------------------- fused kernels


def test_softmax() -> None:
    M, N, BM = 100, 200, 64
    kernel = tilelang.compile(softmax_kernel(M, N, BM), target="tpu", out_idx=[-1])
    x = torch.randn(M, N) * 4
    torch.testing.assert_close(kernel(x), torch.softmax(x, dim=1), rtol=1e-5, atol=1e-6)


def test_rmsnorm_fp16_io() -> None:
    M, N, BM, eps = 96, 256, 64, 1e-6

    @T.prim_func
    def rmsnorm(X: T.Tensor((M, N), "float16"), Y: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            x = T.alloc_fragment((BM, N), "float32")
            sq = T.alloc_fragment((BM, N), "float32")
            r = T.alloc_fragment((BM,), "float32")
            T.copy(X[bx * BM, 0], x)  # fp16 -> fp32 on the way in
            for i, j in T.Parallel(BM, N):
                sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(sq, r, dim=1)
            for i in T.Parallel(BM):
                r[i] = T.rsqrt(r[i] / N + eps)
            for i, j in T.Parallel(BM, N):
                x[i, j] = x[i, j] * r[i]
            T.copy(x, Y[bx * BM, 0])  # fp32 -> fp16 on the way out

    kernel = tilelang.compile(rmsnorm, target="tpu", out_idx=[-1])
    x = torch.randn(M, N).half()
    xf = x.float()
    expected = (xf * torch.rsqrt(xf.pow(2).mean(1, keepdim=True) + eps)).half()
    torch.testing.assert_close(kernel(x), expected, rtol=2e-3, atol=2e-3)


# ---------------------------------------------------------------------------- BM1684X


def test_bm1684x_elementwise_and_reduce(toolchain: setup.TpuToolchain) -> None:
    if toolchain.missing_libraries("bm1684x"):
        pytest.skip(f"toolchain lacks the BM1684X cmodel: {toolchain.missing_libraries('bm1684x')}")
    add = tilelang.compile(_elementwise(100, 200, 64, 128, "float32"), target="tpu:bm1684x", out_idx=[-1])
    a, b = torch.randn(100, 200), torch.randn(100, 200)
    torch.testing.assert_close(add(a, b), _elementwise_ref(a, b), rtol=1e-5, atol=1e-5)
    red = tilelang.compile(row_reduce_kernel(130, 300, 64, "sum"), target="tpu:bm1684x", out_idx=[-1])
    x = torch.randn(130, 300)
    torch.testing.assert_close(red(x)[:, 0], x.sum(1), rtol=1e-5, atol=1e-4)


# ---------------------------------------------------------------------------- limits


def test_tile_larger_than_local_memory_is_a_clear_error() -> None:
    from tilelang_tpu.runtime import LocalMemoryError

    # One 64 x 65536 fp32 tile puts one 256 KiB row on each lane: all of a BM1690 lane's
    # local memory, which ppl-compile cannot place (exit status 17).
    with pytest.raises(LocalMemoryError, match=r"do not fit in .*local memory"):
        tilelang.compile(copy_kernel(64, 65536, 64, 65536, "float32"), target="tpu", out_idx=[-1])
