"""Generated-kernel corpus: the classes of bug that give silently wrong results.

Every kernel here is run on the emulator and compared with torch on random data,
and every input (and every declared-but-unused tensor) is checked to be left
untouched.  The corpus crosses:

* **parameter binding** -- parameters declared in an order that is *not* their
  sorted-name order (tilelang's SplitHostDevice sorts the device function's
  parameters and drops unread ones), with unused tensors in the middle;
* **tile heights** 1, 16, 63, 64, 65, 96, 128, 256 (64 is the lane count of a
  TPU core: rows ``r`` and ``r + 64`` share a lane), over row counts that the
  tile does not divide, so the last tile is an edge tile;
* **dtypes** fp32, fp16, bf16 for arithmetic, every integer dtype for copies;
* per-row broadcast ``x[i, j] op v[i]``, row reductions, casts, edge-tile copies.

Kernels are grouped so that one compile covers many constructs (the cost of
this file is dominated by ppl-compile; see the budget note in issue 10).
"""

from __future__ import annotations

from typing import Any

import pytest
import tilelang
import tilelang.language as T
import torch

pytestmark = pytest.mark.usefixtures("toolchain")

TILE_HEIGHTS = (1, 16, 63, 64, 65, 96, 128, 256)
FLOATS = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
INTS = {
    "int8": torch.int8,
    "uint8": torch.uint8,
    "int16": torch.int16,
    "uint16": torch.uint16,
    "int32": torch.int32,
    "uint32": torch.uint32,
}
#: (rtol, atol) against an fp32 torch reference rounded to the dtype; a fp16/bf16 kernel
#: rounds after every operation, the reference once.
TOLERANCE = {"float32": (1e-5, 1e-5), "float16": (1e-2, 1e-2), "bfloat16": (6e-2, 6e-2)}
COLS = 40  # not a multiple of the 16 (fp32) / 32 (fp16) elements of an execution unit


def _rows(bm: int) -> int:
    """A row count that ``bm`` does not divide (the last tile is an edge tile)."""
    return 2 * bm + 5 if bm > 1 else 3


def rowwise_kernel(M: int, N: int, BM: int, dtype: str) -> Any:
    """Reductions, per-row broadcasts and a per-row output on [BM, N] tiles.

    Declared ``(Out, X, Unused, Bias, RowMax)``; sorted by name that is
    ``(Bias, Out, RowMax, Unused, X)`` and SplitHostDevice keeps only four.
    """

    @T.prim_func
    def rowwise(
        Out: T.Tensor((M, N), dtype),
        X: T.Tensor((M, N), dtype),
        Unused: T.Tensor((M, N), dtype),
        Bias: T.Tensor((M, N), dtype),
        RowMax: T.Tensor((M,), dtype),
    ):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            x = T.alloc_shared((BM, N), dtype)
            b = T.alloc_shared((BM, N), dtype)
            y = T.alloc_fragment((BM, N), dtype)
            m = T.alloc_fragment((BM,), dtype)
            s = T.alloc_fragment((BM, 1), dtype)
            T.copy(X[bx * BM, 0], x)
            T.copy(Bias[bx * BM, 0], b)
            T.reduce_max(x, m, dim=1)
            T.reduce_sum(b, s, dim=1)
            for i, j in T.Parallel(BM, N):
                y[i, j] = (x[i, j] - m[i]) * 0.5 + b[i, j]
            for i, j in T.Parallel(BM, N):
                y[i, j] = y[i, j] - s[i, 0] * 0.125
            T.copy(y, Out[bx * BM, 0])
            T.copy(m, RowMax[bx * BM])

    return rowwise


def rowwise_reference(x: torch.Tensor, bias: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    xf, bf = x.float(), bias.float()
    m = xf.amax(1, keepdim=True)
    s = bf.sum(1, keepdim=True)
    return ((xf - m) * 0.5 + bf - s * 0.125).to(x.dtype), m[:, 0].to(x.dtype)


def mixed_kernel(M: int, N: int, BM: int, BN: int, dtype: str) -> Any:
    """Casts (storage dtype <-> fp32 compute), element-wise ops and 2-D edge tiles.

    Declared ``(c, scale_unused, b, a)``: sorted ``(a, b, c, scale_unused)``.
    """

    @T.prim_func
    def mixed(
        c: T.Tensor((M, N), dtype),
        scale_unused: T.Tensor((N,), "float32"),
        b: T.Tensor((M, N), dtype),
        a: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(N, BN), T.ceildiv(M, BM), threads=1) as (bx, by):
            a_tile = T.alloc_shared((BM, BN), dtype)
            b_f32 = T.alloc_fragment((BM, BN), "float32")
            acc = T.alloc_fragment((BM, BN), "float32")
            T.copy(a[by * BM, bx * BN], a_tile)
            T.copy(b[by * BM, bx * BN], b_f32)  # a casting load
            for i, j in T.Parallel(BM, BN):
                acc[i, j] = T.max(T.cast(a_tile[i, j], "float32") * b_f32[i, j], b_f32[i, j] - 1.0) / 2.0
            T.copy(acc, c[by * BM, bx * BN])  # a casting store

    return mixed


def mixed_reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    af, bf = a.float(), b.float()
    return (torch.maximum(af * bf, bf - 1.0) / 2.0).to(a.dtype)


def copy_kernel(M: int, N: int, BM: int, BN: int, dtype: str) -> Any:
    """An edge-tiled copy declared ``(Dst, Ignored, Src)``: sorted ``(Dst, Ignored, Src)``
    minus ``Ignored`` would put Src second."""

    @T.prim_func
    def copy_edges(Dst: T.Tensor((M, N), dtype), Ignored: T.Tensor((M, N), dtype), Src: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, BN), T.ceildiv(M, BM), threads=1) as (bx, by):
            t = T.alloc_shared((BM, BN), dtype)
            T.copy(Src[by * BM, bx * BN], t)
            T.copy(t, Dst[by * BM, bx * BN])

    return copy_edges


def _random(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    if dtype.is_floating_point:
        return torch.randn(shape).to(dtype)
    info = torch.iinfo(dtype)
    low, high = max(info.min, -(2**31)), min(info.max, 2**31 - 1)
    return torch.randint(low, high, shape, dtype=torch.int64).to(dtype)


def _sentinel(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    return torch.full(shape, 7, dtype=dtype)


@pytest.mark.parametrize("dtype", sorted(FLOATS))
@pytest.mark.parametrize("bm", TILE_HEIGHTS)
def test_rowwise_broadcast_and_reduce(bm: int, dtype: str) -> None:
    M, N = _rows(bm), COLS
    tdt = FLOATS[dtype]
    kernel = tilelang.compile(rowwise_kernel(M, N, bm, dtype), target="tpu")
    x, bias = _random((M, N), tdt), _random((M, N), tdt)
    out, unused, row_max = _sentinel((M, N), tdt), _sentinel((M, N), tdt), _sentinel((M,), tdt)
    x0, bias0 = x.clone(), bias.clone()
    kernel(out, x, unused, bias, row_max)
    expected, expected_max = rowwise_reference(x, bias)
    rtol, atol = TOLERANCE[dtype]
    torch.testing.assert_close(row_max, expected_max, rtol=0, atol=0)
    torch.testing.assert_close(out, expected, rtol=rtol, atol=atol)
    assert torch.equal(x, x0) and torch.equal(bias, bias0), "an input was written"
    assert torch.equal(unused, _sentinel((M, N), tdt)), "the unused tensor was written"


@pytest.mark.parametrize("dtype", sorted(FLOATS))
@pytest.mark.parametrize(("bm", "bn"), [(1, 48), (63, 32), (65, 96), (128, 64)])
def test_casts_and_edge_tiles(bm: int, bn: int, dtype: str) -> None:
    M, N = _rows(bm), 3 * bn - 7
    tdt = FLOATS[dtype]
    kernel = tilelang.compile(mixed_kernel(M, N, bm, bn, dtype), target="tpu")
    a, b = _random((M, N), tdt), _random((M, N), tdt)
    c, scale = _sentinel((M, N), tdt), _sentinel((N,), torch.float32)
    a0, b0 = a.clone(), b.clone()
    kernel(c, scale, b, a)
    rtol, atol = TOLERANCE[dtype]
    torch.testing.assert_close(c, mixed_reference(a, b), rtol=rtol, atol=atol)
    assert torch.equal(a, a0) and torch.equal(b, b0), "an input was written"
    assert torch.equal(scale, _sentinel((N,), torch.float32)), "the unused tensor was written"


@pytest.mark.parametrize("dtype", sorted({**FLOATS, **INTS}))
def test_copy_every_dtype(dtype: str) -> None:
    tdt = {**FLOATS, **INTS}[dtype]
    M, N, BM, BN = 133, 70, 65, 64
    kernel = tilelang.compile(copy_kernel(M, N, BM, BN, dtype), target="tpu")
    src = _random((M, N), tdt)
    dst, ignored = _sentinel((M, N), tdt), _sentinel((M, N), tdt)
    src0 = src.clone()
    kernel(dst, ignored, src)
    assert torch.equal(dst, src)
    assert torch.equal(src, src0) and torch.equal(ignored, _sentinel((M, N), tdt))


def test_prim_func_named_like_its_entry() -> None:
    """A prim_func whose name already ends in ``_kernel`` (upstream's online softmax
    is ``softmax_kernel``): the PPL entry and the runtime agree on its symbol."""
    M, N, BM = 96, 40, 96

    @T.prim_func
    def scale_kernel(Y: T.Tensor((M, N), "float32"), X: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            x = T.alloc_shared((BM, N), "float32")
            T.copy(X[bx * BM, 0], x)
            for i, j in T.Parallel(BM, N):
                x[i, j] = x[i, j] * 3.0
            T.copy(x, Y[bx * BM, 0])

    kernel = tilelang.compile(scale_kernel, target="tpu", out_idx=[0])
    assert "__KERNEL__ void scale_kernel(fp32 *ptr_0, fp32 *ptr_1)" in kernel.get_kernel_source()
    x = torch.randn(M, N)
    torch.testing.assert_close(kernel(x), x * 3.0, rtol=0, atol=0)
