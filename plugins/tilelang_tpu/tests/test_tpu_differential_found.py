"""Programs the differential run (c vs tpu vs torch, seeds 4001-4020 on the device machine) found
WRONG on tpu, shrunk to the construct, on the BM1690 emulator against torch.

* Two global tensors of one shape read inside one ``T.Parallel`` (seeds 4013 and 4009): the
  staging of global reads (``codegen.emit.staging``) took ``X1[r, c]`` for ``X0[r, c]``
  (``structural_equal`` maps one buffer onto the other) and read X0's tile twice.
* A 1-row tile ``o[0, j] = T.cast(X[bx, j], "bfloat16")`` of an integer tensor (seed 4019): the
  per-element loop stayed software-pipelined (a nested hoist shifted the prologue index that
  ``walk._unpipeline_per_element`` relies on): -6.27e18 for every element.
* A guarded store of a broadcast row vector (seeds 7001-7030): the row guard's select took the
  broadcast view as its value operand and the emulator aborted (src2 not TPU_ALIGN).

Tiles of 1, 63, 64 and 65 rows over 65 and 133 rows, random data, inputs checked untouched.
"""

from typing import Any

import pytest
import tilelang
import tilelang.language as T
import torch
from tpu_checks import run_checked

pytestmark = pytest.mark.usefixtures("toolchain")

INTS = {"int8": torch.int8, "int32": torch.int32}
HALVES = {"float16": torch.float16, "bfloat16": torch.bfloat16}


def min_of_two_tensors_kernel(M: int, N: int, BM: int) -> Any:
    """Seed 4013, n34 (as found: M = N = BM = 65)."""

    @T.prim_func
    def min_of_two(X0: T.Tensor((M, N), "int32"), Out: T.Tensor((M, N), "float32"), X1: T.Tensor((M, N), "int32")):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            for i, j in T.Parallel(BM, N):
                if bx * BM + i < M:
                    a = T.cast(T.if_then_else(bx * BM + i < M, X0[bx * BM + i, j], 0), "float32")
                    b = T.cast(T.if_then_else(bx * BM + i < M, X1[bx * BM + i, j], 0), "float32")
                    Out[bx * BM + i, j] = T.min(a, a / (T.abs(b) + T.float32(1.0)))

    return min_of_two


@pytest.mark.parametrize("BM", [1, 63, 64, 65])
def test_found_two_global_tensors_of_one_shape_in_parallel(BM: int) -> None:
    M, N = 65, 65
    kernel = tilelang.compile(min_of_two_tensors_kernel(M, N, BM), target="tpu")
    x0 = torch.randint(-500, 500, (M, N), dtype=torch.int32)
    x1 = torch.randint(-500, 500, (M, N), dtype=torch.int32)
    out = torch.zeros(M, N)
    run_checked(kernel, x0, out, x1, inputs=(0, 2))
    a, b = x0.float(), x1.float()
    torch.testing.assert_close(out, torch.minimum(a, a / (b.abs() + 1)), rtol=1e-6, atol=1e-6)


def int8_select_kernel(M: int, N: int, BM: int) -> Any:
    """Seed 4009, n99 to n103 (as found: M = 133, N = 7, BM = 64)."""

    @T.prim_func
    def int8_select(
        X0: T.Tensor((M, N), "int8"), X1: T.Tensor((M, N), "int8"), Out: T.Tensor((M, N), "bfloat16"), X2: T.Tensor((N,), "float32")
    ):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            x2_t = T.alloc_shared((N,), "float32")
            T.copy(X2, x2_t)
            for i, j in T.Parallel(BM, N):
                if bx * BM + i < M:
                    a = T.if_then_else(bx * BM + i < M, X0[bx * BM + i, j], T.cast(0, "int8"))
                    b = T.if_then_else(bx * BM + i < M, X1[bx * BM + i, j], T.cast(0, "int8"))
                    Out[bx * BM + i, j] = T.if_then_else(
                        (T.cast(i, "float32") >= x2_t[j]) & (T.cast(a, "int32") < T.cast(x2_t[j], "int32")),
                        -T.abs(T.cast(i, "bfloat16")),
                        T.cast(a, "bfloat16") * T.cast(b, "bfloat16") + T.cast(x2_t[j], "bfloat16"),
                    )

    return int8_select


@pytest.mark.parametrize("BM", [63, 64, 65])
def test_found_two_int8_tensors_under_a_compound_condition(BM: int) -> None:
    M, N = 133, 7
    kernel = tilelang.compile(int8_select_kernel(M, N, BM), target="tpu")
    x0 = torch.randint(-8, 9, (M, N), dtype=torch.int8)
    x1 = torch.randint(-8, 9, (M, N), dtype=torch.int8)
    x2 = torch.randn(N) * 20
    out = torch.zeros(M, N, dtype=torch.bfloat16)
    run_checked(kernel, x0, x1, out, x2, inputs=(0, 1, 3))
    i = (torch.arange(M) % BM).float()[:, None].expand(M, N)
    cond = (i >= x2) & (x0.int() < x2.to(torch.int32))
    bf = torch.bfloat16
    expected = torch.where(cond, -i.to(bf).abs(), x0.to(bf) * x1.to(bf) + x2.to(bf))
    torch.testing.assert_close(out, expected, rtol=0, atol=0)


def int_to_half_rows_kernel(M: int, N: int, BM: int, src: str, dst: str, guarded: bool) -> Any:
    """Seed 4019, n197 (as found: int32 -> bfloat16, M = 3, N = 40, BM = 1, guarded)."""

    @T.prim_func
    def int_to_half(X1: T.Tensor((M, N), src), Out: T.Tensor((M, N), dst)):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            o_t = T.alloc_fragment((BM, N), dst)
            for i, j in T.Parallel(BM, N):
                if guarded:
                    o_t[i, j] = T.cast(T.if_then_else(bx * BM + i < M, X1[bx * BM + i, j], T.cast(0, src)), dst)
                else:
                    o_t[i, j] = T.cast(X1[bx * BM + i, j], dst)
            T.copy(o_t, Out[bx * BM, 0])

    return int_to_half


@pytest.mark.parametrize(
    ("src", "dst", "BM", "guarded"),
    [
        ("int32", "bfloat16", 1, True),
        ("int32", "bfloat16", 1, False),
        ("int32", "float16", 1, False),
        ("int8", "bfloat16", 1, False),
        ("int32", "bfloat16", 2, True),
    ],
)
def test_found_integer_tensor_cast_to_16_bit_floats_per_row(src: str, dst: str, BM: int, guarded: bool) -> None:
    M, N = 3, 40
    kernel = tilelang.compile(int_to_half_rows_kernel(M, N, BM, src, dst, guarded), target="tpu")
    bound = 8 if src == "int8" else 500
    x = torch.randint(-bound, bound + 1, (M, N), dtype=INTS[src])
    out = torch.zeros(M, N, dtype=HALVES[dst])
    run_checked(kernel, x, out, inputs=(0,))
    torch.testing.assert_close(out, x.to(HALVES[dst]), rtol=0, atol=0)


def guarded_row_broadcast_kernel(M: int, N: int, BM: int, dtype: str) -> Any:
    """Device run of seeds 7001-7030 (as found: M = 133, N = 16, BM = 64, fp32): a guarded store of
    a broadcast row vector.  The row guard became an index-mask select whose value operand was the
    broadcast view itself, and the emulator aborted ("src2's layout must be TPU_ALIGN")."""

    @T.prim_func
    def guarded_row_broadcast(Out: T.Tensor((M, N), dtype), Unused: T.Tensor((M, N), dtype), X0: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            x0_t = T.alloc_shared((N,), dtype)
            T.copy(X0, x0_t)
            for i, j in T.Parallel(BM, N):
                if bx * BM + i < M:
                    Out[bx * BM + i, j] = x0_t[j]

    return guarded_row_broadcast


@pytest.mark.parametrize("BM", [1, 63, 64, 65, 128])
@pytest.mark.parametrize(("N", "dtype"), [(16, "float32"), (7, "float32"), (16, "bfloat16")])
def test_found_guarded_store_of_a_broadcast_row(BM: int, N: int, dtype: str) -> None:
    M = 133
    kernel = tilelang.compile(guarded_row_broadcast_kernel(M, N, BM, dtype), target="tpu")
    torch_dtype = getattr(torch, dtype)
    out = torch.full((M, N), 7.0, dtype=torch_dtype)
    unused = torch.randn(M, N).to(torch_dtype)
    x0 = torch.randn(N).to(torch_dtype)
    run_checked(kernel, out, unused, x0, inputs=(1, 2))
    torch.testing.assert_close(out, x0.expand(M, N), rtol=0, atol=0)
