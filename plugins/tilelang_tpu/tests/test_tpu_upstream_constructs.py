"""Constructs upstream's own example and test kernels use that tpu refused, crashed on or got
wrong while tilelang's ``c`` target ran them (issue 18, benchmarks/upstream_kernels.py), written
the way users write kernels and run on the BM1690 emulator against torch: ``T.infinity`` in
fills, stores and selects; row reductions of 32-byte rows.  Tiles of 1, 63, 64, 65 and 128
rows, shapes that do not divide, every float dtype, inputs checked untouched.
"""

from typing import Any

import pytest
import tilelang
import tilelang.language as T
import torch
from tpu_checks import FLOATS, run_checked

pytestmark = pytest.mark.usefixtures("toolchain")


def infinity_kernel(M: int, N: int, BM: int, dtype: str, sign: int) -> Any:
    """``T.fill`` of a tile and of a global tensor with ±inf, and a select of ±inf in T.Parallel."""

    @T.prim_func
    def infinity(
        Unused: T.Tensor((3,), "int32"),
        X: T.Tensor((M, N), dtype),
        Filled: T.Tensor((M, N), dtype),
        Selected: T.Tensor((M, N), dtype),
        Stored: T.Tensor((M,), "float32"),
    ):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            f = T.alloc_fragment((BM, N), dtype)
            x = T.alloc_shared((BM, N), dtype)
            T.fill(f, sign * T.infinity(dtype))
            T.copy(f, Filled[bx * BM, 0])
            T.copy(X[bx * BM, 0], x)
            for i, j in T.Parallel(BM, N):
                x[i, j] = T.if_then_else(x[i, j] > 0, sign * T.infinity(dtype), x[i, j])
            T.copy(x, Selected[bx * BM, 0])
            T.fill(Stored[bx * BM : bx * BM + BM], sign * T.infinity("float32"))

    return infinity


@pytest.mark.parametrize(
    ("M", "N", "BM", "dtype", "sign"),
    [
        (1, 5, 1, "float32", 1),
        (130, 33, 64, "float32", -1),
        (63, 16, 63, "float16", 1),
        (65, 40, 65, "bfloat16", -1),
        (200, 8, 128, "float16", -1),
    ],
)
def test_infinity_is_infinite_in_fills_selects_and_stores(M: int, N: int, BM: int, dtype: str, sign: int) -> None:
    """tpu printed T.infinity as the largest finite value (65504 in fp16): a wrong result
    wherever the value reaches the user (upstream's test_tilelang_language_infinity)."""
    kernel = tilelang.compile(infinity_kernel(M, N, BM, dtype, sign), target="tpu")
    x = torch.randn(M, N).to(FLOATS[dtype])
    filled, selected = torch.zeros(M, N, dtype=FLOATS[dtype]), torch.zeros(M, N, dtype=FLOATS[dtype])
    stored = torch.zeros(M)
    run_checked(kernel, torch.arange(3, dtype=torch.int32), x, filled, selected, stored, inputs=(0, 1))
    inf = torch.tensor(sign * float("inf"), dtype=FLOATS[dtype])
    assert torch.equal(filled, torch.full_like(filled, sign * float("inf")))
    assert torch.equal(selected, torch.where(x > 0, inf, x))
    assert torch.equal(stored, torch.full_like(stored, sign * float("inf")))


def reduce_kernel(M: int, N: int, BM: int, dtype: str, kind: str, dim: int) -> Any:
    out_shape = (M,) if dim == 1 else (N,)
    reducer = {"sum": T.reduce_sum, "max": T.reduce_max, "min": T.reduce_min, "abssum": T.reduce_abssum, "absmax": T.reduce_absmax}[kind]

    @T.prim_func
    def reduce(X: T.Tensor((M, N), dtype), Y: T.Tensor(out_shape, dtype)):
        with T.Kernel(T.ceildiv(M, BM) if dim == 1 else 1, threads=1) as bx:
            x = T.alloc_fragment((BM, N), dtype)
            y = T.alloc_fragment((BM,) if dim == 1 else (N,), dtype)
            T.copy(X[bx * BM, 0], x)
            reducer(x, y, dim=dim)
            if dim == 1:
                T.copy(y, Y[bx * BM])
            else:
                T.copy(y, Y)

    return reduce


@pytest.mark.parametrize(
    ("M", "N", "BM", "dtype", "kind", "dim"),
    [
        (4, 8, 4, "float32", "sum", 1),
        (130, 8, 64, "float32", "min", 1),
        (63, 16, 63, "float16", "sum", 1),
        (65, 16, 65, "bfloat16", "absmax", 1),
        (1, 16, 1, "float16", "max", 1),
        (8, 24, 8, "float32", "abssum", 0),
        (16, 5, 16, "bfloat16", "max", 0),
        (200, 8, 128, "float32", "max", 1),
    ],
)
def test_reduce_of_rows_of_32_bytes(M: int, N: int, BM: int, dtype: str, kind: str, dim: int) -> None:
    """Rows of 8 fp32 / 16 fp16 elements (reduced along dim 1, or 8/16 rows along dim 0) killed the
    emulator (upstream's CPU reduce tests; K1 of the differential run)."""
    kernel = tilelang.compile(reduce_kernel(M, N, BM, dtype, kind, dim), target="tpu", out_idx=[-1])
    x = torch.randn(M, N).to(FLOATS[dtype])
    before = x.clone()
    y = kernel(x)
    assert torch.equal(x, before)
    ref = {"sum": x.float().sum(dim), "max": x.float().amax(dim), "min": x.float().amin(dim)}.get(kind)
    if ref is None:
        ref = x.float().abs().sum(dim) if kind == "abssum" else x.float().abs().amax(dim)
    tol = 1e-5 if dtype == "float32" else 3e-2
    torch.testing.assert_close(y.float(), ref, rtol=tol, atol=tol * max(1, N if dim == 1 else M) ** 0.5)
