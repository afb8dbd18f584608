"""``T.reduce_abssum`` and ``T.reduce_absmax`` of int32 tiles (issue 18: the device differential run
found them refused while ``c`` ran them), reduced exactly by ``codegen.emit.reduce_int``.

torch's semantics for the declared dtype: ``|x|`` of int32 wraps (``|-2^31|`` is ``-2^31``), and the
int32 sum of the absolute values wraps too (``x.abs().sum(dtype=torch.int32)``).  Data over the
whole int32 range with ``-2^31`` planted, tiles of 1, 63, 64, 65 and 128 rows over 133 rows
(shapes that do not divide), rows of 1, 7, 40 and 65 elements, along ``dim=1`` and ``dim=0``,
absmax's ``clear=False`` over a filled destination; inputs checked untouched, compared with torch exactly.
"""

import functools
from typing import Any

import pytest
import tilelang
import tilelang.language as T
import torch
from tpu_checks import run_checked

pytestmark = pytest.mark.usefixtures("toolchain")

M = 133
INT_MIN = -(2**31)


def _wrap(x: torch.Tensor) -> torch.Tensor:
    """int64 values as int32 two's complement (the low 32 bits)."""
    return ((x + 2**31) % 2**32 - 2**31).to(torch.int32)


def _data(shape: tuple[int, ...]) -> torch.Tensor:
    x = torch.randint(INT_MIN, 2**31 - 1, shape, dtype=torch.int64).to(torch.int32)
    x.view(-1)[:: max(1, x.numel() // 5)] = INT_MIN  # |x| wraps to itself
    return x


def _expected(kind: str, x: torch.Tensor, dim: int) -> torch.Tensor:
    magnitude = x.abs()  # torch: |-2^31| is -2^31 in int32
    if kind == "absmax":
        return magnitude.amax(dim)
    return _wrap(magnitude.to(torch.int64).sum(dim))


def rows_kernel(N: int, BM: int, kind: str) -> Any:
    """``r = reduce_<kind>(x, dim=1)``, then into ``s`` filled with 5: combined with it (absmax,
    ``clear=False``) or over it (abssum, which has no ``clear``)."""
    reduce = getattr(T, f"reduce_{kind}")
    again = functools.partial(T.reduce_absmax, clear=False) if kind == "absmax" else T.reduce_abssum

    @T.prim_func
    def rows(Unused: T.Tensor((3,), "float32"), R: T.Tensor((M,), "int32"), X: T.Tensor((M, N), "int32"), S: T.Tensor((M,), "int32")):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            x_t = T.alloc_fragment((BM, N), "int32")
            T.copy(X[bx * BM, 0], x_t)
            r_t = T.alloc_fragment((BM,), "int32")
            s_t = T.alloc_fragment((BM,), "int32")
            reduce(x_t, r_t, dim=1)
            T.fill(s_t, 5)
            again(x_t, s_t, dim=1)
            T.copy(r_t, R[bx * BM])
            T.copy(s_t, S[bx * BM])

    return rows


@pytest.mark.parametrize("kind", ["abssum", "absmax"])
@pytest.mark.parametrize(("BM", "N"), [(1, 7), (63, 40), (64, 65), (65, 1), (128, 40)])
def test_int32_abs_reduction_along_rows(BM: int, N: int, kind: str) -> None:
    kernel = tilelang.compile(rows_kernel(N, BM, kind), target="tpu")
    x = _data((M, N))
    assert bool((x == INT_MIN).any())
    r, s = torch.zeros(M, dtype=torch.int32), torch.zeros(M, dtype=torch.int32)
    run_checked(kernel, torch.randn(3), r, x, s, inputs=(0, 2))
    expected = _expected(kind, x, 1)
    torch.testing.assert_close(r, expected, rtol=0, atol=0)
    five = torch.full_like(expected, 5)
    combined = torch.maximum(expected, five) if kind == "absmax" else expected
    torch.testing.assert_close(s, combined, rtol=0, atol=0)


def columns_kernel(N: int, BM: int, kind: str) -> Any:
    """``r = reduce_<kind>(x, dim=0)``: each block's column reductions, ``N`` elements of ``R`` per block."""
    reduce = getattr(T, f"reduce_{kind}")
    blocks = -(-M // BM)

    @T.prim_func
    def columns(X: T.Tensor((M, N), "int32"), R: T.Tensor((blocks * N,), "int32")):
        with T.Kernel(blocks, threads=1) as bx:
            x_t = T.alloc_fragment((BM, N), "int32")
            T.copy(X[bx * BM, 0], x_t)
            r_t = T.alloc_fragment((N,), "int32")
            reduce(x_t, r_t, dim=0)
            T.copy(r_t, R[bx * N])

    return columns


@pytest.mark.parametrize("kind", ["abssum", "absmax"])
@pytest.mark.parametrize(("BM", "N"), [(63, 7), (128, 40)])
def test_int32_abs_reduction_along_columns(BM: int, N: int, kind: str) -> None:
    kernel = tilelang.compile(columns_kernel(N, BM, kind), target="tpu")
    x = _data((M, N))
    blocks = -(-M // BM)
    r = torch.zeros(blocks * N, dtype=torch.int32)
    run_checked(kernel, x, r, inputs=(0,))
    padded = torch.zeros(blocks * BM, N, dtype=torch.int32)  # rows past M: the zeros T.copy fills in
    padded[:M] = x
    expected = torch.stack([_expected(kind, padded[b * BM : (b + 1) * BM], 0) for b in range(blocks)])
    torch.testing.assert_close(r.view(blocks, N), expected, rtol=0, atol=0)


def test_int32_absmax_of_a_row_of_int_min_after_a_zero_fill_is_int_min() -> None:
    """``T.fill(m, 0); T.reduce_absmax(x, m, clear=False)``: the fill is kept (0 is no identity of an
    int32 absmax: ``|-2^31|`` wraps below it), so a row of ``-2^31`` gives 0, as the c target and torch do."""

    @T.prim_func
    def zero_fill(X: T.Tensor((64, 8), "int32"), R: T.Tensor((64,), "int32")):
        with T.Kernel(1, threads=1):
            x_t = T.alloc_fragment((64, 8), "int32")
            T.copy(X, x_t)
            r_t = T.alloc_fragment((64,), "int32")
            T.fill(r_t, 0)
            T.reduce_absmax(x_t, r_t, dim=1, clear=False)
            T.copy(r_t, R)

    kernel = tilelang.compile(zero_fill, target="tpu")
    x = _data((64, 8))
    x[:3] = INT_MIN
    r = torch.full((64,), -7, dtype=torch.int32)
    run_checked(kernel, x, r, inputs=(0,))
    torch.testing.assert_close(r, torch.maximum(x.abs().amax(1), torch.zeros(64, dtype=torch.int32)), rtol=0, atol=0)
