"""``T.if_then_else`` choosing between two scalar values (constants, block-index expressions)
into an fp16/bf16 result inside ``T.Parallel``, on the BM1690 emulator against torch.

The device differential run on f85a373 (12,041 programs) lost the emulator worker on 24 of
them: a PPL compare-select whose two values are scalars takes them as fp32, and the emulator
aborts the process on an fp16/bf16 destination ("The dst and src2/src3 operands should be
same type").  The first three kernels are those programs as found (a 1-row tile, a guarded
65-row store into a global tensor); the user-style kernel varies the tile height (1, 63, 64,
65 rows over 130 rows, so tiles overhang), the result dtype and the compared data (int8, int32,
fp16, fp32, ``!=``, ``&``, ``or``).  Every run checks that the inputs are left untouched.
"""

from typing import Any

import pytest
import tilelang
import tilelang.language as T
import torch
from tpu_checks import FLOATS, run_checked

pytestmark = pytest.mark.usefixtures("toolchain")


def found_one_row_kernel(compare_in_float: bool) -> Any:
    """Device differential run (as found): a 1-row tile, the int8 element cast to int32 (or fp32)
    compared with the block index, two constant fp16 values."""

    @T.prim_func
    def diff_kernel(X0: T.Tensor((2,), "int8"), Unused: T.Tensor((2, 40), "float32"), Out: T.Tensor((2, 40), "float16")):
        with T.Kernel(T.ceildiv(2, 1), threads=1) as bx:
            x0_t = T.alloc_fragment((1,), "int8")
            T.copy(X0[bx * 1], x0_t)
            o_t = T.alloc_fragment((1, 40), "float16")
            for i, j in T.Parallel(1, 40):
                if compare_in_float:
                    o_t[i, j] = T.if_then_else(
                        (
                            (T.cast(x0_t[i], "float32") > T.cast((bx * 1 + i), "float32"))
                            or (T.cast(x0_t[i], "int32") < T.cast(x0_t[i], "int32"))
                        ),
                        T.cast(T.cast(T.cast(T.float32(0.5), "bfloat16"), "float32"), "float16"),
                        T.float16(-3.0),
                    )
                else:
                    o_t[i, j] = T.if_then_else(
                        ((T.cast(x0_t[i], "int32") > (bx * 1 + i)) or (T.cast(x0_t[i], "int32") < T.cast(x0_t[i], "int32"))),
                        T.cast(T.cast(T.cast(T.float32(0.5), "bfloat16"), "float32"), "float16"),
                        T.float16(-3.0),
                    )
            T.copy(o_t, Out[bx * 1, 0])

    return diff_kernel


@pytest.mark.parametrize("compare_in_float", [False, True])
def test_found_one_row_select_of_constants(compare_in_float: bool) -> None:
    kernel = tilelang.compile(found_one_row_kernel(compare_in_float), target="tpu")
    x0 = torch.tensor([5, -7], dtype=torch.int8)
    unused = torch.randn(2, 40)
    out = torch.zeros(2, 40, dtype=torch.float16)
    run_checked(kernel, x0, unused, out, inputs=(0, 1))
    expected = torch.where(x0.to(torch.int32) > torch.arange(2, dtype=torch.int32), 0.5, -3.0)[:, None].expand(2, 40)
    torch.testing.assert_close(out, expected.to(torch.float16), rtol=0, atol=0)


def found_guarded_kernel() -> Any:
    """Device differential run (as found): a guarded 65-row store into a global tensor, the
    condition built from int8 -> fp16 / fp32 casts with ``!=`` and ``&``."""

    @T.prim_func
    def diff_kernel(
        X0: T.Tensor((65, 7), "int8"),
        X1: T.Tensor((65, 7), "int8"),
        Out: T.Tensor((65, 7), "float16"),
        Unused: T.Tensor((65, 7), "float32"),
    ):
        with T.Kernel(T.ceildiv(65, 65), threads=1) as bx:
            for i, j in T.Parallel(65, 7):
                if bx * 65 + i < 65:
                    x = T.if_then_else(bx * 65 + i < 65, X0[bx * 65 + i, j], T.cast(0, "int8"))
                    Out[bx * 65 + i, j] = T.if_then_else(
                        ((T.cast(x, "float16") != T.cast((bx * 65 + i), "float16")) & (T.float32(1.0) >= T.cast(x, "float32"))),
                        T.float16(0.25),
                        T.float16(0.0),
                    )

    return diff_kernel


def test_found_guarded_store_of_constants() -> None:
    kernel = tilelang.compile(found_guarded_kernel(), target="tpu")
    x0 = torch.randint(-128, 128, (65, 7), dtype=torch.int8)
    x0[:, 0] = torch.arange(65, dtype=torch.int8)  # the != side: equal to the row index
    x1 = torch.randint(-128, 128, (65, 7), dtype=torch.int8)
    out = torch.full((65, 7), -1.0, dtype=torch.float16)
    unused = torch.randn(65, 7)
    run_checked(kernel, x0, x1, out, unused, inputs=(0, 1, 3))
    rows = torch.arange(65)[:, None].to(torch.float16)
    keep = (x0.to(torch.float16) != rows) & (x0.float() <= 1.0)
    torch.testing.assert_close(out, torch.where(keep, 0.25, 0.0).to(torch.float16), rtol=0, atol=0)


#: name -> (the condition on the int8 element ``q``, the fp32 element ``s`` and the row ``r``; torch's).
CONDITIONS: dict[str, tuple[Any, Any]] = {
    "int8_gt_row": (lambda q, s, r: T.cast(q, "int32") > r, lambda q, s, r: q.int() > r),
    "fp16_ne": (lambda q, s, r: T.cast(q, "float16") != T.cast(s, "float16"), lambda q, s, r: q.half() != s.half()),
    "fp32_and": (
        lambda q, s, r: (s > T.float32(0.0)) & (T.cast(q, "float32") <= s),
        lambda q, s, r: (s > 0) & (q.float() <= s),
    ),
    "or_le": (lambda q, s, r: T.Or(s <= T.float32(-1.0), q == T.int8(3)), lambda q, s, r: (s <= -1) | (q == 3)),
}


def scalar_values_kernel(M: int, N: int, BM: int, dtype: str, condition: Any) -> Any:
    """A user's mask written as a select of two scalars: a constant where the condition holds,
    else a value of the block index (``bx * 0.5 - 1``), into a tile then stored."""

    @T.prim_func
    def scalar_values(
        Q: T.Tensor((M, N), "int8"), Unused: T.Tensor((M, N), "float32"), Out: T.Tensor((M, N), dtype), S: T.Tensor((M, N), "float32")
    ):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            q_t = T.alloc_fragment((BM, N), "int8")
            T.copy(Q[bx * BM, 0], q_t)
            s_t = T.alloc_shared((BM, N), "float32")
            T.copy(S[bx * BM, 0], s_t)
            o_t = T.alloc_fragment((BM, N), dtype)
            for i, j in T.Parallel(BM, N):
                o_t[i, j] = T.if_then_else(
                    condition(q_t[i, j], s_t[i, j], bx * BM + i),
                    T.cast(0.75, dtype),
                    T.cast(bx, dtype) * T.cast(0.5, dtype) - T.cast(1.0, dtype),
                )
            T.copy(o_t, Out[bx * BM, 0])

    return scalar_values


#: Every tile height with every result dtype, the conditions taken in turn (each meets all dtypes).
CASES = [
    (BM, dtype, list(CONDITIONS)[n % len(CONDITIONS)])
    for n, (BM, dtype) in enumerate((BM, dtype) for BM in (1, 63, 64, 65) for dtype in ("float16", "bfloat16", "float32"))
]


@pytest.mark.parametrize(("BM", "dtype", "name"), CASES)
def test_select_of_two_scalars(BM: int, dtype: str, name: str) -> None:
    M, N = 130, 24
    condition, reference = CONDITIONS[name]
    kernel = tilelang.compile(scalar_values_kernel(M, N, BM, dtype, condition), target="tpu")
    g = torch.Generator().manual_seed(BM * 7 + len(name))
    q = torch.randint(-5, 6, (M, N), generator=g, dtype=torch.int8)
    s = torch.randint(-4, 5, (M, N), generator=g).float() * 0.5  # ties with q on purpose
    out = torch.zeros(M, N, dtype=FLOATS[dtype])
    unused = torch.randn(M, N)
    run_checked(kernel, q, unused, out, s, inputs=(0, 1, 3))
    rows = torch.arange(M)[:, None].expand(M, N)
    other = ((rows // BM).float() * 0.5 - 1.0).to(FLOATS[dtype])
    expected = torch.where(reference(q, s, rows), torch.tensor(0.75, dtype=FLOATS[dtype]), other)
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
