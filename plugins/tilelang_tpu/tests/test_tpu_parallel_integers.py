"""Integer ``T.Parallel`` bodies on the BM1690 emulator against torch (issue 18, items 1-2):
int32 arithmetic with C's wrap-around, bit operations, shifts, floor and truncating division by
constants, loop indices used as values, casts between integers and floats (in ``T.Parallel`` and a
casting ``T.copy``: upstream's w8a16 dequantisation).  Written the way tile-ai/tilelang's examples
write kernels, over tiles of 1, 64, 65 and 128 rows and shapes they do not divide, on random data
with int32 edge values; inputs are checked untouched; integer results compared exactly.
"""

from typing import Any

import pytest
import tilelang
import tilelang.language as T
import torch
from tpu_checks import FLOATS, run_checked

pytestmark = pytest.mark.usefixtures("toolchain")


def _wrap32(x: torch.Tensor) -> torch.Tensor:
    """int64 values wrapped to int32 as C's int32 arithmetic does."""
    return ((x + 2**31) % 2**32) - 2**31


def _int32_data(M: int, N: int) -> torch.Tensor:
    a = torch.randint(-(2**31), 2**31 - 1, (M, N), dtype=torch.int32)
    edges = torch.tensor([0, 1, -1, 2**31 - 1, -(2**31), 5, -5, 7, -7, 123456789], dtype=torch.int32)
    a.view(-1)[: edges.numel()] = edges[: a.numel()]
    return a


def int_kernel(M: int, N: int, BM: int) -> Any:
    @T.prim_func
    def int_ops(
        A: T.Tensor((M, N), "int32"),
        unused: T.Tensor((4,), "float32"),
        B: T.Tensor((M, N), "int32"),
        C: T.Tensor((M, N), "int32"),
        D: T.Tensor((M, N), "int32"),
    ):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            a = T.alloc_shared((BM, N), "int32")
            b = T.alloc_fragment((BM, N), "int32")
            c = T.alloc_fragment((BM, N), "int32")
            d = T.alloc_fragment((BM, N), "int32")
            T.copy(A[bx * BM, 0], a)
            for i, j in T.Parallel(BM, N):
                b[i, j] = ((a[i, j] * 3 + 7) // 4) ^ (a[i, j] >> 2) | (a[i, j] % 8) & j
                c[i, j] = a[i, j] // 3 + a[i, j] % 5 - T.truncdiv(a[i, j], 7) * 10 + T.truncmod(a[i, j], 7)
                d[i, j] = (a[i, j] << 3) + T.min(a[i, j], j) - T.max(a[i, j], bx * BM + i) + (a[i, j] << (j % 4))
            T.copy(b, B[bx * BM, 0])
            T.copy(c, C[bx * BM, 0])
            T.copy(d, D[bx * BM, 0])

    return int_ops


@pytest.mark.parametrize(("M", "N", "BM"), [(130, 48, 64), (3, 33, 1), (200, 16, 128)])
def test_int32_arithmetic_bits_shifts_and_division_wrap_like_c(M: int, N: int, BM: int) -> None:
    kernel = tilelang.compile(int_kernel(M, N, BM), target="tpu")
    a = _int32_data(M, N)
    unused = torch.randn(4)
    B, C, D = (torch.zeros(M, N, dtype=torch.int32) for _ in range(3))
    run_checked(kernel, a, unused, B, C, D, inputs=(0, 1))
    x = a.long()
    j = torch.arange(N)[None, :]
    row = torch.arange(M)[:, None]
    expected_b = _wrap32(_wrap32(x * 3 + 7) // 4) ^ (x >> 2) | ((x % 8) & j)
    trunc = torch.div(x, 7, rounding_mode="trunc")
    expected_c = _wrap32(x // 3 + x % 5 - trunc * 10 + torch.fmod(x, 7))
    expected_d = _wrap32(_wrap32(x << 3) + torch.minimum(x, j) - torch.maximum(x, row) + _wrap32(x << (j % 4)))
    assert torch.equal(B.long(), expected_b)
    assert torch.equal(C.long(), expected_c)
    assert torch.equal(D.long(), expected_d)


def shifted_division_kernel(M: int, N: int, BM: int) -> Any:
    @T.prim_func
    def shifted(
        A: T.Tensor((M, N + 2), "int32"),
        Q: T.Tensor((M, N), "int32"),
        unused: T.Tensor((2,), "int8"),
        R: T.Tensor((M, N), "int32"),
        F: T.Tensor((M, N), "int32"),
    ):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            a = T.alloc_fragment((BM, N + 2), "int32")
            q = T.alloc_fragment((BM, N), "int32")
            r = T.alloc_fragment((BM, N), "int32")
            f = T.alloc_fragment((BM, N), "int32")
            T.copy(A[bx * BM, 0], a)
            for i, j in T.Parallel(BM, N):
                q[i, j] = T.truncdiv(a[i, j + 2], 3)
                r[i, j] = T.truncmod(a[i, j + 2], 3)
                f[i, j] = a[i, j + 2] // 3 + a[i, j + 1] % 3
            T.copy(q, Q[bx * BM, 0])
            T.copy(r, R[bx * BM, 0])
            T.copy(f, F[bx * BM, 0])

    return shifted


@pytest.mark.parametrize(("M", "N", "BM"), [(130, 16, 64), (3, 33, 1), (65, 30, 65)])
def test_truncating_division_of_a_shifted_window(M: int, N: int, BM: int) -> None:
    """``a[i, j + 2]`` is a view of the tile at an unaligned offset; the sign fix-up of a truncating
    division is a compare-select, which takes whole tiles only (the emulator aborted: device
    differential seed 10012 #112, "src0's layout must be TPU_ALIGN")."""
    kernel = tilelang.compile(shifted_division_kernel(M, N, BM), target="tpu")
    a = _int32_data(M, N + 2)
    unused = torch.zeros(2, dtype=torch.int8)
    Q, R, F = (torch.zeros(M, N, dtype=torch.int32) for _ in range(3))
    run_checked(kernel, a, Q, unused, R, F, inputs=(0, 2))
    x = a.long()
    assert torch.equal(Q.long(), torch.div(x[:, 2:], 3, rounding_mode="trunc"))
    assert torch.equal(R.long(), torch.fmod(x[:, 2:], 3))
    assert torch.equal(F.long(), _wrap32(x[:, 2:] // 3 + x[:, 1:-1] % 3))


def cast_kernel(M: int, N: int, BM: int) -> Any:
    @T.prim_func
    def casts(
        X: T.Tensor((M, N), "float32"),
        Ints: T.Tensor((M, N), "int32"),
        B: T.Tensor((M, N), "int8"),
        U: T.Tensor((M, N), "uint8"),
        F: T.Tensor((M, N), "float16"),
    ):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            x = T.alloc_shared((BM, N), "float32")
            i32 = T.alloc_fragment((BM, N), "int32")
            i8 = T.alloc_fragment((BM, N), "int8")
            u8 = T.alloc_fragment((BM, N), "uint8")
            f16 = T.alloc_fragment((BM, N), "float16")
            T.copy(X[bx * BM, 0], x)
            for i, j in T.Parallel(BM, N):
                i32[i, j] = T.cast(x[i, j], "int32")
                i8[i, j] = T.cast(T.cast(x[i, j], "int32"), "int8")
                u8[i, j] = T.cast(T.cast(x[i, j], "int8"), "uint8")
                f16[i, j] = T.cast(T.cast(x[i, j], "int32") * 3, "float16")
            T.copy(i32, Ints[bx * BM, 0])
            T.copy(i8, B[bx * BM, 0])
            T.copy(u8, U[bx * BM, 0])
            T.copy(f16, F[bx * BM, 0])

    return casts


@pytest.mark.parametrize(("M", "N", "BM"), [(130, 36, 64), (1, 9, 1)])
def test_casts_follow_c_truncation_and_wrap_around(M: int, N: int, BM: int) -> None:
    kernel = tilelang.compile(cast_kernel(M, N, BM), target="tpu")
    x = torch.randn(M, N) * 300
    x[0, :4] = torch.tensor([-0.5, 0.99, -127.9, 255.5])[: min(4, N)]
    outs = [torch.zeros(M, N, dtype=d) for d in (torch.int32, torch.int8, torch.uint8, torch.float16)]
    run_checked(kernel, x, *outs, inputs=(0,))
    truncated = x.to(torch.int32)
    assert torch.equal(outs[0], truncated)
    assert torch.equal(outs[1], truncated.to(torch.int8))
    assert torch.equal(outs[2], truncated.to(torch.int8).to(torch.uint8))
    assert torch.equal(outs[3], (truncated * 3).to(torch.float16))


def dequant_kernel(M: int, N: int, BM: int, dtype: str) -> Any:
    @T.prim_func
    def dequant(
        Q: T.Tensor((M, N), "int8"),
        W: T.Tensor((M, N), dtype),
        S: T.Tensor((M,), dtype),
        H: T.Tensor((M, N), dtype),
        J: T.Tensor((M, N), "float32"),
    ):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            q = T.alloc_shared((BM, N), "int8")
            s = T.alloc_shared((BM,), dtype)
            w = T.alloc_fragment((BM, N), dtype)
            h = T.alloc_shared((BM, N), dtype)
            jf = T.alloc_fragment((BM, N), "float32")
            T.copy(Q[bx * BM, 0], q)
            T.copy(S[bx * BM], s)
            T.copy(Q[bx * BM, 0], h)  # a casting copy, int8 -> dtype
            for i, j in T.Parallel(BM, N):
                w[i, j] = T.cast(q[i, j], dtype) * s[i]
                jf[i, j] = T.cast(j, "float32") + T.cast(bx * BM + i, "float32") * 0.5
            T.copy(w, W[bx * BM, 0])
            T.copy(h, H[bx * BM, 0])
            T.copy(jf, J[bx * BM, 0])

    return dequant


@pytest.mark.parametrize(("M", "N", "BM", "dtype"), [(130, 40, 64, "float16"), (65, 24, 65, "bfloat16"), (63, 17, 1, "float32")])
def test_int8_dequantisation_in_parallel_and_casting_copy(M: int, N: int, BM: int, dtype: str) -> None:
    """w8a16 as SophGo's fork ran it: int8 weights times a per-row scale, and loop indices as floats."""
    kernel = tilelang.compile(dequant_kernel(M, N, BM, dtype), target="tpu")
    q = torch.randint(-128, 128, (M, N), dtype=torch.int8)
    s = torch.rand(M).to(FLOATS[dtype])
    W, H = torch.zeros(M, N, dtype=FLOATS[dtype]), torch.zeros(M, N, dtype=FLOATS[dtype])
    J = torch.zeros(M, N)
    run_checked(kernel, q, W, s, H, J, inputs=(0, 2))
    torch.testing.assert_close(W, q.to(FLOATS[dtype]) * s[:, None], rtol=0, atol=0)
    assert torch.equal(H, q.to(FLOATS[dtype]))
    assert torch.equal(J, torch.arange(N)[None, :].float() + torch.arange(M)[:, None].float() * 0.5)


def test_division_by_a_variable_is_refused_with_the_rewrite() -> None:
    M, N = 64, 16

    @T.prim_func
    def divide(A: T.Tensor((M, N), "int32"), B: T.Tensor((M, N), "int32"), k: T.int32):
        with T.Kernel(1, threads=1) as _:
            a = T.alloc_shared((M, N), "int32")
            b = T.alloc_fragment((M, N), "int32")
            T.copy(A[0, 0], a)
            for i, j in T.Parallel(M, N):
                b[i, j] = a[i, j] // k
            T.copy(b, B[0, 0])

    with pytest.raises(ValueError, match=r"integer division by k[\s\S]*fix: divide by a positive integer constant"):
        tilelang.compile(divide, target="tpu")
