"""Integer ``T.gemm`` on the BM1690 emulator against torch (issue 18): int8 x int8 and uint8 x
uint8 into an int32 accumulator (``tiu::mm2_nn/nt``), exact.  The kernel is written as upstream's
``testing/python/kernel/test_tilelang_kernel_gemm.py`` writes ``matmul`` (``T.clear``, a
``T.Pipelined`` K loop, ``transpose_A`` / ``transpose_B``), over tiles of 1, 63, 64, 65 and 128
rows, K not a multiple of the block, several K blocks, and values at the dtype's extremes (so the
int32 sums are large); inputs checked untouched.
"""

from typing import Any

import pytest
import tilelang
import tilelang.language as T
import torch
from tpu_checks import run_checked

from tilecore import TilecoreError

pytestmark = pytest.mark.usefixtures("toolchain")

#: TileLang integer dtype -> (torch dtype, lowest value, highest value).
INTS = {"int8": (torch.int8, -128, 127), "uint8": (torch.uint8, 0, 255)}


def matmul(
    M: int, N: int, K: int, block_M: int, block_N: int, block_K: int, trans_A: bool, trans_B: bool, in_dtype: str, accum_dtype: str
) -> Any:
    A_shape = (K, M) if trans_A else (M, K)
    B_shape = (N, K) if trans_B else (K, N)
    A_shared_shape = (block_K, block_M) if trans_A else (block_M, block_K)
    B_shared_shape = (block_N, block_K) if trans_B else (block_K, block_N)

    @T.prim_func
    def main(
        A: T.Tensor(A_shape, in_dtype),
        unused: T.Tensor((3,), "float32"),
        B: T.Tensor(B_shape, in_dtype),
        C: T.Tensor((M, N), accum_dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared(A_shared_shape, in_dtype)
            B_shared = T.alloc_shared(B_shared_shape, in_dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                if trans_A:
                    T.copy(A[k * block_K, by * block_M], A_shared)
                else:
                    T.copy(A[by * block_M, k * block_K], A_shared)
                if trans_B:
                    T.copy(B[bx * block_N, k * block_K], B_shared)
                else:
                    T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local, trans_A, trans_B)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


def _check(M: int, N: int, K: int, BM: int, BN: int, BK: int, ta: bool, tb: bool, dtype: str, a: torch.Tensor, b: torch.Tensor) -> None:
    c = torch.full((M, N), 7, dtype=torch.int32)
    kernel = tilelang.compile(matmul(M, N, K, BM, BN, BK, ta, tb, dtype, "int32"), target="tpu")
    run_checked(kernel, a, torch.zeros(3), b, c, inputs=(0, 1, 2))
    a64, b64 = a.to(torch.int64), b.to(torch.int64)
    ref = (a64.T if ta else a64) @ (b64.T if tb else b64)
    assert ref.abs().max() < 2**31
    torch.testing.assert_close(c.to(torch.int64), ref, rtol=0, atol=0)


@pytest.mark.parametrize(
    ("M", "N", "K", "BM", "BN", "BK", "ta", "tb", "dtype"),
    [
        (128, 128, 64, 128, 128, 32, False, False, "int8"),  # upstream's sizes: two K blocks
        (1, 64, 96, 1, 64, 32, False, False, "uint8"),
        (130, 100, 200, 63, 64, 64, False, False, "int8"),  # K = 3 blocks + 8
        (130, 100, 200, 65, 48, 64, False, True, "int8"),
        (130, 100, 200, 64, 64, 48, True, False, "uint8"),
        (130, 100, 200, 64, 64, 64, True, True, "int8"),
        (256, 128, 300, 128, 128, 128, False, True, "uint8"),
    ],
)
def test_integer_gemm_is_exact(M: int, N: int, K: int, BM: int, BN: int, BK: int, ta: bool, tb: bool, dtype: str) -> None:
    torch_dtype, lo, hi = INTS[dtype]
    a = torch.randint(lo, hi + 1, (K, M) if ta else (M, K)).to(torch_dtype)
    b = torch.randint(lo, hi + 1, (N, K) if tb else (K, N)).to(torch_dtype)
    a.view(-1)[:4] = torch.tensor([lo, hi, lo, 0]).to(torch_dtype)
    _check(M, N, K, BM, BN, BK, ta, tb, dtype, a, b)


@pytest.mark.parametrize("dtype", list(INTS))
def test_integer_gemm_at_the_extremes(dtype: str) -> None:
    # Every product lo*lo (or hi*hi) and lo*hi: the largest int32 sums the tile reaches.
    torch_dtype, lo, hi = INTS[dtype]
    M, N, K = 65, 64, 300
    a = torch.full((M, K), lo, dtype=torch_dtype)
    a[1::2] = hi
    b = torch.full((K, N), hi, dtype=torch_dtype)
    b[:, ::3] = lo
    _check(M, N, K, 65, 64, 128, False, False, dtype, a, b)


def test_mixed_or_float_accumulated_integer_gemm_is_refused_by_name() -> None:
    with pytest.raises(TilecoreError) as err:
        tilelang.compile(matmul(64, 64, 64, 64, 64, 64, False, False, "int8", "float32"), target="tpu")
    assert "T.gemm accumulating int8 into float32" in str(err.value) and "int32" in str(err.value)
