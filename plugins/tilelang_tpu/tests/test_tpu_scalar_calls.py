"""Calls in scalar expressions: ``T.if_then_else`` (the guarded load
``T.if_then_else(bx * BM + i < M, X[bx * BM + i, j], 0)``), ``T.clamp``, ``T.exp`` / ``T.log`` /
``T.sqrt`` / ``T.abs`` of scalars and ``&`` / ``|`` of conditions, in ``T.serial`` code and as
scalar operands of ``T.Parallel`` bodies, on the BM1690 emulator against torch.

The device differential run on f85a373 refused them ("scalar expression Call (...)", about 400
of 12,041 programs) while tilelang's ``c`` target ran them right.  The first kernels are found
programs as found; the user-style kernel runs tiles of 1, 63, 64 and 65 rows over 131 rows
(the last block's rows past the tensor read 0 through the guard) in fp16, bf16 and fp32.
Every run checks that the inputs are left untouched.
"""

from typing import Any

import pytest
import tilelang
import tilelang.language as T
import torch
from packaging.version import Version
from tpu_checks import FLOATS, run_checked

pytestmark = pytest.mark.usefixtures("toolchain")


def found_guarded_sum_kernel() -> Any:
    """Device differential run (as found): a guarded load of int32 elements in a row sum."""

    @T.prim_func
    def diff_kernel(Out: T.Tensor((135,), "float32"), X0: T.Tensor((135, 7), "int32"), Unused: T.Tensor((135, 7), "float32")):
        with T.Kernel(T.ceildiv(135, 65), threads=1) as bx:
            r_t = T.alloc_fragment((65,), "float32")
            acc = T.alloc_var("float32")
            for i in T.serial(65):
                acc = T.float32(0.0)
                for j in T.serial(7):
                    acc = acc + T.cast(T.if_then_else(bx * 65 + i < 135, X0[bx * 65 + i, j], 0), "float32")
                r_t[i] = acc
            T.copy(r_t, Out[bx * 65])

    return diff_kernel


def test_found_guarded_load_in_a_row_sum() -> None:
    kernel = tilelang.compile(found_guarded_sum_kernel(), target="tpu")
    x0 = torch.randint(-1000, 1000, (135, 7), dtype=torch.int32)
    out, unused = torch.zeros(135), torch.randn(135, 7)
    run_checked(kernel, out, x0, unused, inputs=(1, 2))
    torch.testing.assert_close(out, x0.float().sum(1), rtol=0, atol=0)


def found_exp_clamp_kernel() -> Any:
    """Device differential run (as found): the running maximum of ``exp(clamp(2 x, -4, 4))`` of
    int8 elements, 128-row tiles over 261 rows."""

    @T.prim_func
    def diff_kernel(Unused: T.Tensor((261, 7), "float32"), X0: T.Tensor((261, 7), "int8"), Out: T.Tensor((261,), "float32")):
        with T.Kernel(T.ceildiv(261, 128), threads=1) as bx:
            x0_t = T.alloc_local((128, 7), "int8")
            T.copy(X0[bx * 128, 0], x0_t)
            r_t = T.alloc_local((128,), "float32")
            acc = T.alloc_var("float32")
            for i in T.serial(128):
                acc = T.float32(-10000.0)
                for j in T.serial(7):
                    x = T.cast(x0_t[i, 6 - j], "float32")
                    acc = T.max(acc, T.exp(T.clamp(x + x, T.float32(-4.0), T.float32(4.0))))
                r_t[i] = acc
            T.copy(r_t, Out[bx * 128])

    return diff_kernel


def test_found_exp_of_clamp_in_a_running_max() -> None:
    kernel = tilelang.compile(found_exp_clamp_kernel(), target="tpu")
    x0 = torch.randint(-3, 4, (261, 7), dtype=torch.int8)
    unused, out = torch.randn(261, 7), torch.zeros(261)
    run_checked(kernel, unused, x0, out, inputs=(0, 1))
    torch.testing.assert_close(out, torch.exp((2 * x0.float()).clamp(-4, 4)).amax(1), rtol=1e-6, atol=0)


def found_parallel_clamp_kernel() -> Any:
    """Device differential run (as found): ``T.clamp`` of constants as the scalar operand of a
    guarded ``T.Parallel`` store."""

    @T.prim_func
    def diff_kernel(
        X1: T.Tensor((66, 65), "int32"),
        X0: T.Tensor((66, 65), "float32"),
        Unused: T.Tensor((66, 65), "float32"),
        Out: T.Tensor((66, 65), "float32"),
    ):
        with T.Kernel(T.ceildiv(66, 65), threads=1) as bx:
            for i, j in T.Parallel(65, 65):
                if bx * 65 + i < 66:
                    x0 = T.if_then_else(bx * 65 + i < 66, X0[bx * 65 + i, j], T.float32(0.0))
                    x1 = T.cast(T.if_then_else(bx * 65 + i < 66, X1[bx * 65 + i, j], 0), "float32")
                    Out[bx * 65 + i, j] = (x0 * x1) * T.clamp(T.float32(2.0), T.float32(0.0), T.float32(1.0))

    return diff_kernel


def test_found_clamp_of_constants_as_a_parallel_operand() -> None:
    kernel = tilelang.compile(found_parallel_clamp_kernel(), target="tpu")
    x1, x0 = torch.randint(-50, 50, (66, 65), dtype=torch.int32), torch.randn(66, 65)
    unused, out = torch.randn(66, 65), torch.zeros(66, 65)
    run_checked(kernel, x1, x0, unused, out, inputs=(0, 1, 2))
    torch.testing.assert_close(out, x0 * x1.float(), rtol=0, atol=0)


def row_math_kernel(M: int, N: int, BM: int, dtype: str) -> Any:
    """Per row, with the guarded load ``v`` of ``dtype``: the sum of ``exp(clamp(v, -4, 4))``,
    the maximum of ``log(|v| + 1)`` and the sum of ``sqrt(|v|)`` where ``v > 0 | v < -2`` (fp32
    accumulators, each function's result of ``dtype``)."""

    @T.prim_func
    def row_math(X: T.Tensor((M, N), dtype), Unused: T.Tensor((M,), "float32"), Out: T.Tensor((M, 3), "float32")):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            r_t = T.alloc_local((BM, 3), "float32")
            s1 = T.alloc_var("float32")
            s2 = T.alloc_var("float32")
            s3 = T.alloc_var("float32")
            for i in T.serial(BM):
                s1 = T.float32(0.0)
                s2 = T.float32(-1.0)
                s3 = T.float32(0.0)
                for j in T.serial(N):
                    v = T.if_then_else(bx * BM + i < M, X[bx * BM + i, j], T.cast(0.0, dtype))
                    s1 = s1 + T.cast(T.exp(T.clamp(v, T.cast(-4.0, dtype), T.cast(4.0, dtype))), "float32")
                    s2 = T.max(s2, T.cast(T.log(T.abs(v) + T.cast(1.0, dtype)), "float32"))
                    keep = T.bitwise_or(v > T.cast(0.0, dtype), v < T.cast(-2.0, dtype))
                    s3 = s3 + T.cast(T.if_then_else(keep, T.sqrt(T.abs(v)), T.cast(0.0, dtype)), "float32")
                r_t[i, 0] = s1
                r_t[i, 1] = s2
                r_t[i, 2] = s3
            T.copy(r_t, Out[bx * BM, 0])

    return row_math


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("BM", [1, 63, 64, 65])
def test_guarded_loads_and_math_in_serial_code(BM: int, dtype: str) -> None:
    M, N = 131, 7
    kernel = tilelang.compile(row_math_kernel(M, N, BM, dtype), target="tpu")
    t = FLOATS[dtype]
    g = torch.Generator().manual_seed(BM)
    x = (torch.randn(M, N, generator=g) * 3).to(t)
    x[:, 0] = torch.tensor([4.0, -4.0, 0.0, -2.0] * 33)[:M].to(t)  # the bounds, 0, the condition's edge
    unused, out = torch.randn(M), torch.zeros(M, 3)
    run_checked(kernel, x, unused, out, inputs=(0, 1))
    one = torch.tensor(1.0, dtype=t)
    s1 = torch.exp(x.clamp(-4, 4)).float().sum(1)
    s2 = torch.log(x.abs() + one).float().amax(1).clamp(min=-1.0)
    s3 = torch.where((x > 0) | (x < -2), torch.sqrt(x.abs()), torch.zeros((), dtype=t)).float().sum(1)
    # fp16/bf16: each function rounded once from float, as torch does; sums in fp32.
    tolerance = {"rtol": 1e-5, "atol": 1e-5} if dtype == "float32" else {"rtol": 0, "atol": 0}
    torch.testing.assert_close(out, torch.stack([s1, s2, s3], 1), **tolerance)


def clamp_kernel(M: int, dtype: str) -> Any:
    @T.prim_func
    def clamp(X: T.Tensor((M,), dtype), Lo: T.Tensor((M,), dtype), Hi: T.Tensor((M,), dtype), Y: T.Tensor((M,), dtype)):
        with T.Kernel(1, threads=1):
            for i in T.serial(M):
                Y[i] = T.clamp(X[i], Lo[i], Hi[i])

    return clamp


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int32"])
def test_scalar_clamp_as_torch(dtype: str) -> None:
    """``T.clamp`` of scalars as TileLang defines it and ``torch.clamp`` computes it: ``lo > hi``
    gives ``hi``; floats: NaN in the value or a bound propagates."""
    M = 40
    kernel = tilelang.compile(clamp_kernel(M, dtype), target="tpu")
    t = getattr(torch, dtype)
    x, lo = torch.randint(-6, 7, (M,)).to(t), torch.randint(-4, 1, (M,)).to(t)
    hi = torch.where(torch.arange(M) % 5 == 0, lo - 2, lo + 3).to(t)  # every fifth: lo > hi
    if dtype != "int32":
        x[1] = float("nan")
        # tilelang 0.1.15 keeps T.clamp one call, which tpu computes as torch.clamp (a NaN bound
        # propagates); 0.1.14's frontend writes it as T.max/T.min, whose NaN bounds targets differ on.
        if Version(tilelang.__version__) >= Version("0.1.15"):
            lo[2], hi[3] = float("nan"), float("nan")
    y = torch.zeros(M, dtype=t)
    run_checked(kernel, x, lo, hi, y, inputs=(0, 1, 2))
    torch.testing.assert_close(y, torch.minimum(torch.maximum(x, lo), hi), rtol=0, atol=0, equal_nan=True)


@T.prim_func
def _math_functions(X: T.Tensor((64,), "float32"), Y: T.Tensor((64, 5), "float32")):
    with T.Kernel(1, threads=1):
        for i in T.serial(64):
            Y[i, 0] = T.floor(X[i])
            Y[i, 1] = T.ceil(X[i])
            Y[i, 2] = T.exp2(X[i])
            Y[i, 3] = T.log2(T.abs(X[i]) + T.float32(0.5))
            Y[i, 4] = T.abs(X[i])


def test_scalar_math_functions_as_torch() -> None:
    """``T.floor``/``T.ceil`` (halves, -0), ``T.exp2``, ``T.log2``, ``T.abs`` of fp32 scalars."""
    kernel = tilelang.compile(_math_functions, target="tpu")
    x = torch.randn(64) * 5
    x[:8] = torch.tensor([-2.5, -0.5, 0.5, 2.5, -0.0, 3.0, -3.0, 1e-8])
    y = torch.zeros(64, 5)
    run_checked(kernel, x, y, inputs=(0,))
    expected = torch.stack([x.floor(), x.ceil(), torch.exp2(x), torch.log2(x.abs() + 0.5), x.abs()], 1)
    torch.testing.assert_close(y, expected, rtol=1e-6, atol=0)
