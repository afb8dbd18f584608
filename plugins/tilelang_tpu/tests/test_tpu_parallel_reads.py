"""``T.Parallel`` reads that are not the destination's own element, on the BM1690 emulator
against torch (issue 18, item 3): offsets (RoPE's rotate-half), rows shifted onto other lanes,
rows indexed by a serial loop under ``T.vectorized``, per-row conv taps ``w[i, k]``.  Tiles of 2,
63, 64 and 65 rows over shapes they do not divide, random data, inputs checked untouched.
"""

from typing import Any

import pytest
import tilelang
import tilelang.language as T
import torch
from tpu_checks import FLOATS, run_checked

pytestmark = pytest.mark.usefixtures("toolchain")


def rope_kernel(M: int, D: int, BM: int, dtype: str) -> Any:
    half = D // 2

    @T.prim_func
    def rope(X: T.Tensor((M, D), dtype), Cos: T.Tensor((M, D), dtype), Sin: T.Tensor((M, D), dtype), Y: T.Tensor((M, D), dtype)):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            x = T.alloc_shared((BM, D), dtype)
            c = T.alloc_shared((BM, D), dtype)
            s = T.alloc_shared((BM, D), dtype)
            y = T.alloc_fragment((BM, D), dtype)
            T.copy(X[bx * BM, 0], x)
            T.copy(Cos[bx * BM, 0], c)
            T.copy(Sin[bx * BM, 0], s)
            for i, j in T.Parallel(BM, half):
                y[i, j] = x[i, j] * c[i, j] - x[i, j + half] * s[i, j]
                y[i, j + half] = x[i, j + half] * c[i, j + half] + x[i, j] * s[i, j + half]
            T.copy(y, Y[bx * BM, 0])

    return rope


@pytest.mark.parametrize(("M", "D", "BM", "dtype"), [(130, 64, 64, "float32"), (65, 32, 63, "float16"), (5, 16, 1, "bfloat16")])
def test_rope_rotate_half_reads_at_offsets(M: int, D: int, BM: int, dtype: str) -> None:
    kernel = tilelang.compile(rope_kernel(M, D, BM, dtype), target="tpu")
    t = FLOATS[dtype]
    x, angle = torch.randn(M, D).to(t), torch.rand(M, D) * 6
    cos, sin = angle.cos().to(t), angle.sin().to(t)
    Y = torch.zeros(M, D, dtype=t)
    run_checked(kernel, x, cos, sin, Y, inputs=(0, 1, 2))
    half = D // 2
    rotated = torch.cat([-x[:, half:], x[:, :half]], 1)
    expected = (x.float() * cos.float() + rotated.float() * sin.float()).to(t)
    tolerance = {"float32": 1e-6, "float16": 2e-3, "bfloat16": 1.6e-2}[dtype]
    torch.testing.assert_close(Y, expected, rtol=tolerance, atol=tolerance)


def shift_rows_kernel(M: int, N: int, BM: int) -> Any:
    @T.prim_func
    def shift_rows(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32"), Z: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            x = T.alloc_shared((BM, N), "float32")
            y = T.alloc_fragment((BM, N), "float32")
            z = T.alloc_fragment((BM, N), "float32")
            T.copy(X[bx * BM, 0], x)
            T.fill(y, 0)
            for i, j in T.Parallel(BM - 1, N):
                y[i, j] = x[i + 1, j] - x[i, j]  # rows moved onto other lanes
            for i in T.serial(BM):
                for j in T.vectorized(N):
                    z[i, j] = x[i, j] * 2.0 + x[0, j]  # one row per iteration, row 0 broadcast read
            T.copy(y, Y[bx * BM, 0])
            T.copy(z, Z[bx * BM, 0])

    return shift_rows


@pytest.mark.parametrize(("M", "N", "BM"), [(130, 40, 64), (7, 9, 2)])
def test_row_shifted_reads_and_vectorized_rows(M: int, N: int, BM: int) -> None:
    kernel = tilelang.compile(shift_rows_kernel(M, N, BM), target="tpu")
    x = torch.randn(M, N)
    Y, Z = torch.full((M, N), 7.0), torch.zeros(M, N)
    run_checked(kernel, x, Y, Z, inputs=(0,))
    blocks = x.split(BM)
    padded = [torch.cat([b, torch.zeros(BM - b.shape[0], N)]) for b in blocks]  # a block's overhang is zero-filled
    expected_y = torch.cat([torch.cat([p[1:] - p[:-1], torch.zeros(1, N)])[: b.shape[0]] for p, b in zip(padded, blocks, strict=True)])
    expected_z = torch.cat([b * 2.0 + b[0] for b in blocks])
    torch.testing.assert_close(Y, expected_y, rtol=0, atol=0)
    torch.testing.assert_close(Z, expected_z, rtol=0, atol=0)


def conv_kernel(M: int, N: int, taps: int, BM: int) -> Any:
    @T.prim_func
    def conv(X: T.Tensor((M, N + taps - 1), "float32"), W: T.Tensor((M, taps), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            x = T.alloc_shared((BM, N + taps - 1), "float32")
            w = T.alloc_shared((BM, taps), "float32")
            y = T.alloc_fragment((BM, N), "float32")
            T.copy(X[bx * BM, 0], x)
            T.copy(W[bx * BM, 0], w)
            T.clear(y)
            for k in T.serial(taps):
                for i, t in T.Parallel(BM, N):
                    y[i, t] += w[i, k] * x[i, t + k]
            T.copy(y, Y[bx * BM, 0])

    return conv


@pytest.mark.parametrize(("M", "N", "taps", "BM"), [(130, 40, 4, 64), (63, 21, 3, 63)])
def test_depthwise_conv_taps_read_a_column_and_shifted_rows(M: int, N: int, taps: int, BM: int) -> None:
    """Causal conv1d's inner loop: a per-row tap ``w[i, k]`` broadcast along the row, ``x[i, t + k]`` shifted."""
    kernel = tilelang.compile(conv_kernel(M, N, taps, BM), target="tpu")
    x, w = torch.randn(M, N + taps - 1), torch.randn(M, taps)
    Y = torch.zeros(M, N)
    run_checked(kernel, x, w, Y, inputs=(0, 1))
    expected = sum(w[:, k : k + 1] * x[:, k : k + N] for k in range(taps))
    torch.testing.assert_close(Y, expected, rtol=1e-5, atol=1e-5)


def test_rank4_fp32_gemm_operands_run_or_are_refused_by_name() -> None:
    """Issue 18 item 8: fp32 attention scores on bshd operands failed with a bare ValueError; they
    must either run and match torch or be refused naming the target, the kernel and the fix."""
    B, S, H, D = 1, 64, 2, 32

    @T.prim_func
    def bshd(Q: T.Tensor((B, S, H, D), "float32"), K: T.Tensor((B, S, H, D), "float32"), Out: T.Tensor((H, S, S), "float32")):
        with T.Kernel(H, threads=1) as by:
            q = T.alloc_shared((S, D), "float32")
            k = T.alloc_shared((S, D), "float32")
            o = T.alloc_fragment((S, S), "float32")
            T.copy(Q[0, :, by, :], q)
            T.copy(K[0, :, by, :], k)
            T.gemm(q, k, o, transpose_B=True, clear_accum=True)
            T.copy(o, Out[by, :, :])

    try:
        kernel = tilelang.compile(bshd, target="tpu")
    except ValueError as err:
        text = str(err)
        assert "target tpu (tilelang-tpu" in text and "kernel 'bshd'" in text and "fix:" in text, text
        assert "report it to the authors" not in text
        return
    q, k = torch.randn(B, S, H, D), torch.randn(B, S, H, D)
    out = torch.zeros(H, S, S)
    run_checked(kernel, q, k, out, inputs=(0, 1))
    torch.testing.assert_close(out, torch.einsum("shd,thd->hst", q[0], k[0]), rtol=1e-4, atol=1e-4)
