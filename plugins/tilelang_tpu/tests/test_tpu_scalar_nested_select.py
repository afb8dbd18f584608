"""Nested ``T.min``/``T.max``/``T.Select`` of float values in per-element code (``T.serial``
loops, ``T.alloc_var`` accumulators), on the BM1690 emulator against torch.

The scalar printer writes float min/max and selects as C ``?:``.  ppl-compile 1.30.2 types a
``?:`` of two variables as a reference to them, and a ``?:`` with such a branch failed to
verify ("'arith.select' op failed to verify that all of {true_value, false_value, result}
have same type") or crashed the compiler (SIGSEGV): the device differential run on f85a373
found both (the first two kernels, as found).  The user-style kernels clamp and select per
element in fp16, bf16 and fp32 (and a nested select of int32) over tiles of 1, 63, 64 and 65
rows of a 130-row tensor.  Every run checks that the inputs are left untouched.
"""

from typing import Any

import pytest
import tilelang
import tilelang.language as T
import torch
from tpu_checks import FLOATS, run_checked

pytestmark = pytest.mark.usefixtures("toolchain")


def found_kernel(same_operands: bool) -> Any:
    """Device differential run (as found): ``acc = max(acc, min(cast(j), x0[i]))`` failed to
    verify; ``acc = max(acc, min(x0[i], x0[i]))`` crashed ppl-compile with SIGSEGV."""

    def inner(j: Any, x: Any) -> Any:
        return T.min(x, x) if same_operands else T.min(T.cast(j, "float16"), x)

    @T.prim_func
    def diff_kernel(Out: T.Tensor((65,), "float16"), Unused: T.Tensor((65, 65), "float32"), X0: T.Tensor((65,), "float16")):
        with T.Kernel(T.ceildiv(65, 64), threads=1) as bx:
            x0_t = T.alloc_local((64,), "float16")
            T.copy(X0[bx * 64], x0_t)
            r_t = T.alloc_fragment((64,), "float16")
            acc = T.alloc_var("float16")
            for i in T.serial(64):
                acc = T.float16(-10000.0)
                for j in T.serial(65):
                    acc = T.max(acc, inner(j, x0_t[i]))
                r_t[i] = acc
            T.copy(r_t, Out[bx * 64])

    return diff_kernel


@pytest.mark.parametrize("same_operands", [False, True])
def test_found_nested_min_max(same_operands: bool) -> None:
    kernel = tilelang.compile(found_kernel(same_operands), target="tpu")
    x0 = (torch.randn(65) * 40).to(torch.float16)
    out = torch.zeros(65, dtype=torch.float16)
    unused = torch.randn(65, 65)
    run_checked(kernel, out, unused, x0, inputs=(1, 2))
    expected = x0 if same_operands else torch.minimum(x0.float(), torch.tensor(64.0)).to(torch.float16)
    torch.testing.assert_close(out, torch.maximum(expected, torch.tensor(-10000.0, dtype=torch.float16)), rtol=0, atol=0)


def clamp_scan_kernel(M: int, N: int, BM: int, dtype: str) -> Any:
    """Per row: the running maximum of ``x`` clamped to ``[lo[i], hi[i]]`` (``T.min(T.max(..))``)
    and per element a nested select: ``x > 1 ? (x > hi ? hi : x) : min(x, lo)``."""

    @T.prim_func
    def clamp_scan(
        X: T.Tensor((M, N), dtype),
        Unused: T.Tensor((M,), "float32"),
        Lo: T.Tensor((M,), dtype),
        Out: T.Tensor((M,), dtype),
        Hi: T.Tensor((M,), dtype),
        Sel: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            x_t = T.alloc_shared((BM, N), dtype)
            T.copy(X[bx * BM, 0], x_t)
            lo_t = T.alloc_fragment((BM,), dtype)
            T.copy(Lo[bx * BM], lo_t)
            hi_t = T.alloc_local((BM,), dtype)
            T.copy(Hi[bx * BM], hi_t)
            r_t = T.alloc_fragment((BM,), dtype)
            s_t = T.alloc_fragment((BM, N), dtype)
            acc = T.alloc_var(dtype)
            for i in T.serial(BM):
                acc = T.cast(-1000.0, dtype)
                for j in T.serial(N):
                    acc = T.max(acc, T.min(T.max(x_t[i, j], lo_t[i]), hi_t[i]))
                    s_t[i, j] = T.Select(
                        x_t[i, j] > T.cast(1.0, dtype),
                        T.Select(x_t[i, j] > hi_t[i], hi_t[i], x_t[i, j]),
                        T.min(x_t[i, j], lo_t[i]),
                    )
                r_t[i] = acc
            T.copy(r_t, Out[bx * BM])
            T.copy(s_t, Sel[bx * BM, 0])

    return clamp_scan


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("BM", [1, 63, 64, 65])
def test_nested_min_max_and_select_in_serial_code(BM: int, dtype: str) -> None:
    M, N = 130, 9
    kernel = tilelang.compile(clamp_scan_kernel(M, N, BM, dtype), target="tpu")
    t = FLOATS[dtype]
    g = torch.Generator().manual_seed(BM)
    x = (torch.randn(M, N, generator=g) * 3).to(t)
    lo = (torch.randn(M, generator=g) - 1).to(t)
    hi = lo + torch.rand(M, generator=g).to(t) * 4
    x[:, 0] = lo  # ties with the bounds
    x[:, 1] = hi
    unused, out, sel = torch.randn(M), torch.zeros(M, dtype=t), torch.zeros(M, N, dtype=t)
    run_checked(kernel, x, unused, lo, out, hi, sel, inputs=(0, 1, 2, 4))
    clamped = torch.minimum(torch.maximum(x, lo[:, None]), hi[:, None])
    expected = torch.maximum(clamped.amax(1), torch.tensor(-1000.0, dtype=t))
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
    inner = torch.where(x > hi[:, None], hi[:, None].expand(M, N), x)
    torch.testing.assert_close(sel, torch.where(x > 1, inner, torch.minimum(x, lo[:, None])), rtol=0, atol=0)


def int_select_kernel(M: int, N: int, BM: int) -> Any:
    """A nested select of int32 elements: ``x > 0 ? (x > y ? x : y) : (y < 0 ? y : x)``."""

    @T.prim_func
    def int_select(X: T.Tensor((M, N), "int32"), Y: T.Tensor((M, N), "int32"), Out: T.Tensor((M, N), "int32")):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            x_t = T.alloc_shared((BM, N), "int32")
            T.copy(X[bx * BM, 0], x_t)
            y_t = T.alloc_fragment((BM, N), "int32")
            T.copy(Y[bx * BM, 0], y_t)
            o_t = T.alloc_fragment((BM, N), "int32")
            for i in T.serial(BM):
                for j in T.serial(N):
                    o_t[i, j] = T.Select(
                        x_t[i, j] > 0, T.Select(x_t[i, j] > y_t[i, j], x_t[i, j], y_t[i, j]), T.Select(y_t[i, j] < 0, y_t[i, j], x_t[i, j])
                    )
            T.copy(o_t, Out[bx * BM, 0])

    return int_select


@pytest.mark.parametrize("BM", [1, 65])
def test_nested_int_select_in_serial_code(BM: int) -> None:
    M, N = 130, 9
    kernel = tilelang.compile(int_select_kernel(M, N, BM), target="tpu")
    x, y = torch.randint(-9, 10, (M, N), dtype=torch.int32), torch.randint(-9, 10, (M, N), dtype=torch.int32)
    out = torch.zeros(M, N, dtype=torch.int32)
    run_checked(kernel, x, y, out, inputs=(0, 1))
    expected = torch.where(x > 0, torch.maximum(x, y), torch.where(y < 0, y, x))
    torch.testing.assert_close(out, expected, rtol=0, atol=0)


def while_kernel(M: int, N: int) -> Any:
    """A ``while`` whose condition is a guarded load inside nested float ``T.min``/``T.max``:
    evaluated afresh each iteration (nothing of it is computed ahead of the loop)."""

    @T.prim_func
    def leading(A: T.Tensor((M, N), "float32"), L: T.Tensor((M,), "int32")):
        with T.Kernel(M, threads=1) as bx:
            k = T.alloc_var("int32")
            k = 0
            while T.max(T.min(T.if_then_else(k < N, A[bx, k], T.float32(-1.0)), T.float32(1.0)), T.float32(-1.0)) > T.float32(0.25):
                k += 1
            L[bx] = k

    return leading


def test_while_condition_with_nested_min_max_and_a_guarded_load() -> None:
    M, N = 65, 40
    kernel = tilelang.compile(while_kernel(M, N), target="tpu")
    a = torch.rand(M, N) * 3 - 0.5
    a[:, :3] = 2.0
    a[3] = 2.0  # a row with no stop: the guard ends it at N
    length = torch.zeros(M, dtype=torch.int32)
    run_checked(kernel, a, length, inputs=(0,))
    assert torch.equal(length, (a > 0.25).int().cumprod(1).sum(1).int())
