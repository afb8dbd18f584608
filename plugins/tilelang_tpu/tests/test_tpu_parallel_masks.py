"""Conditions, math and atomics in ``T.Parallel`` on the BM1690 emulator against torch (issue 18,
items 5-6): ``&``/``|`` in ``T.if_then_else`` (band masks), ``T.clamp``, exact GELU (``T.erf``),
``T.sin``/``T.cos``, ``T.atomic_add`` inside ``T.Parallel`` (upstream's split-K), and the scalar
float ``max`` the differential run found wrong.  Tiles of 1, 63, 64, 65 and 128 rows, random
data, inputs checked untouched.
"""

from typing import Any

import pytest
import tilelang
import tilelang.language as T
import torch
from tpu_checks import FLOATS, run_checked

pytestmark = pytest.mark.usefixtures("toolchain")


def band_kernel(M: int, N: int, BM: int, window: int, dtype: str) -> Any:
    @T.prim_func
    def band(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            x = T.alloc_shared((BM, N), dtype)
            y = T.alloc_fragment((BM, N), dtype)
            T.copy(X[bx * BM, 0], x)
            for i, j in T.Parallel(BM, N):
                y[i, j] = T.if_then_else(((bx * BM + i >= j) & (bx * BM + i - j < window)) | (j == 0), T.clamp(x[i, j], -0.5, 0.75), 0)
            T.copy(y, Y[bx * BM, 0])

    return band


@pytest.mark.parametrize(("M", "N", "BM", "dtype"), [(130, 70, 64, "float32"), (65, 33, 63, "float16"), (200, 40, 128, "bfloat16")])
def test_band_mask_with_bitwise_and_or_and_clamp(M: int, N: int, BM: int, dtype: str) -> None:
    """Upstream's sliding-window spelling, ``(a) & (b) | (c)``, and ``T.clamp`` (NaN propagates)."""
    window = 5
    func = band_kernel(M, N, BM, window, dtype)
    kernel = tilelang.compile(func, target="tpu")
    x = torch.randn(M, N).to(FLOATS[dtype])
    if "T.clamp(" in func.script():
        # tilelang 0.1.15 keeps T.clamp, whose NaN propagates as in torch; 0.1.14's frontend writes it
        # as T.min(T.max(...)), whose NaN handling is max/min's (the tpu vector max drops a NaN).
        x[1, 0] = float("nan")
    Y = torch.zeros(M, N, dtype=FLOATS[dtype])
    run_checked(kernel, x, Y, inputs=(0,))
    row, col = torch.arange(M)[:, None], torch.arange(N)[None, :]
    keep = ((row >= col) & (row - col < window)) | (col == 0)
    expected = torch.where(keep, x.clamp(-0.5, 0.75), torch.zeros((), dtype=x.dtype))
    torch.testing.assert_close(Y, expected, rtol=0, atol=0, equal_nan=True)


def math_kernel(M: int, N: int, BM: int) -> Any:
    @T.prim_func
    def math(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32"), Z: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            x = T.alloc_shared((BM, N), "float32")
            y = T.alloc_fragment((BM, N), "float32")
            z = T.alloc_fragment((BM, N), "float32")
            T.copy(X[bx * BM, 0], x)
            for i, j in T.Parallel(BM, N):
                y[i, j] = 0.5 * x[i, j] * (1.0 + T.erf(x[i, j] * 0.7071067811865476))  # exact GELU
                z[i, j] = T.sin(x[i, j]) * T.cos(x[i, j] * 0.5)
            T.copy(y, Y[bx * BM, 0])
            T.copy(z, Z[bx * BM, 0])

    return math


@pytest.mark.parametrize(("M", "N", "BM"), [(130, 50, 65)])
def test_exact_gelu_sin_and_cos(M: int, N: int, BM: int) -> None:
    kernel = tilelang.compile(math_kernel(M, N, BM), target="tpu")
    x = torch.randn(M, N) * 3
    Y, Z = torch.zeros(M, N), torch.zeros(M, N)
    run_checked(kernel, x, Y, Z, inputs=(0,))
    torch.testing.assert_close(Y, torch.nn.functional.gelu(x), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(Z, torch.sin(x) * torch.cos(x * 0.5), rtol=1e-4, atol=2e-5)


def splitk_kernel(M: int, N: int, K: int, BM: int, BK: int, dtype: str, tile_form: bool = False) -> Any:
    @T.prim_func
    def splitk(A: T.Tensor((M, K), dtype), C: T.Tensor((M, N), dtype), B: T.Tensor((K, N), dtype)):
        with T.Kernel(T.ceildiv(M, BM), T.ceildiv(K, BK), threads=1) as (bx, bz):
            a = T.alloc_shared((BM, BK), dtype)
            b = T.alloc_shared((BK, N), dtype)
            c = T.alloc_fragment((BM, N), "float32")
            c_s = T.alloc_shared((BM, N), dtype)
            T.copy(A[bx * BM, bz * BK], a)
            T.copy(B[bz * BK, 0], b)
            T.gemm(a, b, c, clear_accum=True)
            T.copy(c, c_s)
            if tile_form:
                T.atomic_add(C[bx * BM, 0], c_s)
            else:
                for i, j in T.Parallel(BM, N):
                    T.atomic_add(C[bx * BM + i, j], c_s[i, j])

    return splitk


@pytest.mark.parametrize(
    ("M", "N", "K", "BM", "BK", "dtype", "tile_form"),
    [(130, 48, 96, 64, 32, "float32", False), (65, 32, 64, 65, 16, "float16", False), (65, 32, 64, 64, 16, "float16", True)],
)
def test_atomic_add_inside_parallel_as_upstream_splitk_writes_it(
    M: int, N: int, K: int, BM: int, BK: int, dtype: str, tile_form: bool
) -> None:
    """Every K slice adds into C, the K slices in the innermost grid loop (consecutive blocks add
    into one region: that loop is not pipelined); under the default ``cores=max`` the grid runs on
    one core."""
    kernel = tilelang.compile(splitk_kernel(M, N, K, BM, BK, dtype, tile_form), target="tpu")
    t = FLOATS[dtype]
    a, b = torch.randn(M, K).to(t), torch.randn(K, N).to(t)
    c = torch.randn(M, N).to(t)
    start = c.clone()
    run_checked(kernel, a, c, b, inputs=(0, 2))
    expected = start.float() + a.float() @ b.float()
    tolerance = {"float32": 1e-4, "float16": 2e-2}[dtype]
    torch.testing.assert_close(c.float(), expected, rtol=tolerance, atol=tolerance)


def serial_max_kernel(dtype: str) -> Any:
    @T.prim_func
    def serial_max(X0: T.Tensor((1, 16), dtype), Out: T.Tensor((1,), dtype), Unused: T.Tensor((1, 16), dtype)):
        with T.Kernel(T.ceildiv(1, 1), threads=1) as bx:
            x0_t = T.alloc_shared((1, 16), dtype)
            T.copy(X0[bx * 1, 0], x0_t)
            r_t = T.alloc_fragment((1,), dtype)
            acc = T.alloc_var(dtype)
            for i in T.serial(1):
                acc = T.cast(-10000.0, dtype)
                for j in T.serial(16):
                    acc = T.max(acc, T.cast(j, dtype) / (T.abs(T.cast(1.0, dtype)) + T.cast(1.0, dtype)))
                r_t[i] = acc
            T.copy(r_t, Out[bx * 1])

    return serial_max


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_scalar_float_max_keeps_the_fraction(dtype: str) -> None:
    """tpu-diff's W1: PPL declares only ``int max(int, int)``, so a scalar float ``T.max`` was truncated."""
    kernel = tilelang.compile(serial_max_kernel(dtype), target="tpu")
    x, out, unused = torch.randn(1, 16).to(FLOATS[dtype]), torch.zeros(1, dtype=FLOATS[dtype]), torch.zeros(1, 16, dtype=FLOATS[dtype])
    run_checked(kernel, x, out, unused, inputs=(0, 2))
    assert out.item() == 7.5
