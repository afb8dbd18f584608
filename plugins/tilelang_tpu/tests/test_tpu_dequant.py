"""Dequantisation constructs on the BM1690 emulator against torch (issue 18): narrow integer
arithmetic in ``T.Parallel`` (int8/uint8/int16/uint16, computed as C computes it: promoted to
int, wrapped on the store), ``T.reinterpret`` between integers of one width, repeating reads
``x[i, j // c + b]`` / ``x[i, j >> k]``, and upstream's int4 unpacking (``examples/dequantize_gemm``)
with per-group scales.  Written as upstream's examples write kernels, over tiles of 1, 63, 64, 65
and 128 rows and shapes they do not divide, with an unused parameter; inputs checked untouched.
"""

from typing import Any

import pytest
import tilelang
import tilelang.language as T
import torch
from tpu_checks import FLOATS, run_checked

pytestmark = pytest.mark.usefixtures("toolchain")

#: dtype -> (torch dtype, bits, signed)
NARROW = {
    "int8": (torch.int8, 8, True),
    "uint8": (torch.uint8, 8, False),
    "int16": (torch.int16, 16, True),
    "uint16": (torch.uint16, 16, False),
}


def _wrap(x: torch.Tensor, dtype: str) -> torch.Tensor:
    """int64 values wrapped to ``dtype`` (two's complement), as C's narrowing store does."""
    _, bits, signed = NARROW[dtype]
    x = x % 2**bits
    return torch.where(x >= 2 ** (bits - 1), x - 2**bits, x) if signed else x


def narrow_kernel(M: int, N: int, BM: int, dtype: str) -> Any:
    @T.prim_func
    def narrow_ops(
        A: T.Tensor((M, N), dtype),
        unused: T.Tensor((3,), "float32"),
        B: T.Tensor((M, N), dtype),
        S: T.Tensor((M, N), dtype),
        L: T.Tensor((M, N), dtype),
        F: T.Tensor((M, N), "float32"),
    ):
        with T.Kernel(T.ceildiv(M, BM), threads=128) as bx:
            a = T.alloc_shared((BM, N), dtype)
            b = T.alloc_shared((BM, N), dtype)
            s = T.alloc_fragment((BM, N), dtype)
            sh = T.alloc_fragment((BM, N), dtype)
            f = T.alloc_fragment((BM, N), "float32")
            T.copy(A[bx * BM, 0], a)
            T.copy(B[bx * BM, 0], b)
            for i, j in T.Parallel(BM, N):
                s[i, j] = (a[i, j] + b[i, j]) * T.Cast(dtype, 3) - (a[i, j] & b[i, j]) ^ (b[i, j] | T.Cast(dtype, 5))
                sh[i, j] = (a[i, j] << T.Cast(dtype, j % 4 + 1)) + (b[i, j] >> T.Cast(dtype, 2)) + ~a[i, j]
                f[i, j] = T.Cast("float32", a[i, j] - b[i, j])
            T.copy(s, S[bx * BM, 0])
            T.copy(sh, L[bx * BM, 0])
            T.copy(f, F[bx * BM, 0])

    return narrow_ops


@pytest.mark.parametrize("dtype", list(NARROW))
@pytest.mark.parametrize(("M", "N", "BM"), [(1, 20, 1), (130, 48, 63), (100, 64, 64), (65, 33, 65), (130, 100, 128)])
def test_narrow_integer_arithmetic_wraps_as_c_does(dtype: str, M: int, N: int, BM: int) -> None:
    torch_dtype, bits, signed = NARROW[dtype]
    lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1)) if signed else (0, 2**bits)
    a64 = torch.randint(lo, hi, (M, N), dtype=torch.int64)
    b64 = torch.randint(lo, hi, (M, N), dtype=torch.int64)
    a64.view(-1)[:4] = torch.tensor([lo, hi - 1, 0, -1 if signed else 1])[: a64.numel()]
    a, b = a64.to(torch_dtype), b64.to(torch_dtype)
    s, sh, f = torch.zeros(M, N, dtype=torch_dtype), torch.zeros(M, N, dtype=torch_dtype), torch.zeros(M, N)
    kernel = tilelang.compile(narrow_kernel(M, N, BM, dtype), target="tpu")
    run_checked(kernel, a, torch.zeros(3), b, s, sh, f, inputs=(0, 1, 2))
    j = torch.arange(N)[None, :]
    # C (TileLang's c target): operands promoted to int, the value truncated where it is stored.
    ref_s = _wrap(((a64 + b64) * 3 - (a64 & b64)) ^ (b64 | 5), dtype)
    ref_sh = _wrap((a64 << (j % 4 + 1)) + (b64 >> 2) + ~a64, dtype)
    torch.testing.assert_close(s.to(torch.int64), ref_s, rtol=0, atol=0)
    torch.testing.assert_close(sh.to(torch.int64), ref_sh, rtol=0, atol=0)
    torch.testing.assert_close(f, (a64 - b64).float(), rtol=0, atol=0)


def repeat_kernel(M: int, N: int, BM: int, c: int, dtype: str, offset: int, shift: bool) -> Any:
    src_cols = -(-N // c) + offset + 1

    @T.prim_func
    def repeat_reads(X: T.Tensor((M, src_cols), dtype), unused: T.Tensor((2,), "int32"), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, BM), threads=128) as bx:
            x = T.alloc_shared((BM, src_cols), dtype)
            y = T.alloc_fragment((BM, N), dtype)
            T.copy(X[bx * BM, 0], x)
            for i, j in T.Parallel(BM, N):
                y[i, j] = x[i, (j >> (c.bit_length() - 1)) + offset] if shift else x[i, j // c + offset]
            T.copy(y, Y[bx * BM, 0])

    return repeat_reads


@pytest.mark.parametrize(
    ("M", "N", "BM", "c", "dtype", "offset", "shift"),
    [
        (1, 64, 1, 2, "float32", 0, False),
        (130, 100, 63, 3, "float16", 1, False),
        (100, 128, 64, 2, "uint8", 0, True),
        (65, 96, 65, 32, "bfloat16", 2, False),
        (130, 70, 128, 4, "int8", 0, True),
        (64, 50, 64, 7, "int32", 0, False),
    ],
)
def test_repeating_read_spreads_each_source_column(M: int, N: int, BM: int, c: int, dtype: str, offset: int, shift: bool) -> None:
    src_cols = -(-N // c) + offset + 1
    torch_dtype = FLOATS.get(dtype) or NARROW.get(dtype, (getattr(torch, dtype),))[0]
    x = (torch.randn(M, src_cols) * 50).to(torch_dtype) if dtype in FLOATS else torch.randint(0, 100, (M, src_cols)).to(torch_dtype)
    y = torch.zeros(M, N, dtype=torch_dtype)
    kernel = tilelang.compile(repeat_kernel(M, N, BM, c, dtype, offset, shift), target="tpu")
    run_checked(kernel, x, torch.zeros(2, dtype=torch.int32), y, inputs=(0, 1))
    ref = x[:, offset + torch.arange(N) // c]
    torch.testing.assert_close(y, ref, rtol=0, atol=0)


def int4_kernel(N: int, K: int, BN: int, BK: int, group: int, signed: bool, out_dtype: str) -> Any:
    @T.prim_func
    def unpack(
        B: T.Tensor((N, K // 2), "uint8" if signed else "int8"),
        Scale: T.Tensor((N, K // group), out_dtype),
        C: T.Tensor((N, K), out_dtype),
    ):
        with T.Kernel(T.ceildiv(N, BN), threads=128) as bx:
            b_s = T.alloc_shared((BN, BK // 2), "uint8" if signed else "int8")
            s_s = T.alloc_shared((BN, BK // group), out_dtype)
            d = T.alloc_fragment((BN, BK), out_dtype)
            for k in T.Pipelined(K // BK, num_stages=1):
                T.copy(B[bx * BN, k * BK // 2], b_s)
                T.copy(Scale[bx * BN, k * BK // group], s_s)
                for i, j in T.Parallel(BN, BK):
                    if signed:  # upstream's _tir_u8_to_i4_to_i8
                        i4 = (b_s[i, j // 2] >> (T.Cast("uint8", j % 2) * T.uint8(4))) & T.uint8(15)
                        d[i, j] = T.Cast(out_dtype, T.reinterpret("int8", i4 << T.uint8(4)) >> T.int8(4)) * s_s[i, j // group]
                    else:  # unsigned nibbles with a zero point of 8
                        d[i, j] = (T.Cast(out_dtype, (b_s[i, j // 2] >> T.Cast("int8", (j % 2) * 4)) & T.int8(15)) - 8.0) * s_s[
                            i, j // group
                        ]
                T.copy(d, C[bx * BN, k * BK])

    return unpack


@pytest.mark.parametrize(
    ("N", "K", "BN", "BK", "group", "signed", "out_dtype"),
    [
        (100, 256, 64, 128, 32, True, "float16"),
        (63, 128, 63, 64, 64, False, "bfloat16"),
        (130, 128, 128, 128, 16, True, "float32"),
        (1, 64, 1, 64, 64, False, "float16"),
    ],
)
def test_int4_unpacking_as_upstream_writes_it(N: int, K: int, BN: int, BK: int, group: int, signed: bool, out_dtype: str) -> None:
    packed = torch.randint(0, 256, (N, K // 2), dtype=torch.uint8)
    scale = (torch.rand(N, K // group) + 0.5).to(FLOATS[out_dtype])
    nibbles = torch.stack((packed & 0xF, packed >> 4), dim=-1).reshape(N, K).to(torch.int16)
    values = torch.where(nibbles >= 8, nibbles - 16, nibbles) if signed else nibbles - 8
    ref = (values.float() * scale.float().repeat_interleave(group, dim=1)).to(FLOATS[out_dtype])
    b = packed if signed else packed.view(torch.int8)
    c = torch.zeros(N, K, dtype=FLOATS[out_dtype])
    kernel = tilelang.compile(int4_kernel(N, K, BN, BK, group, signed, out_dtype), target="tpu")
    run_checked(kernel, b, scale, c, inputs=(0, 1))
    torch.testing.assert_close(c, ref, rtol=0, atol=0)
