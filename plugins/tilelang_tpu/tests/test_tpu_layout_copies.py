"""Copies whose addresses the analyzer cannot bound or whose tensors have no 4-D view, on the
BM1690 emulator against torch (issue 18): ``T.copy`` starts read from a tensor (a grouped
GEMM's expert id and row offset, clipped at both ends as TileLang's copy predicates do: rows
before 0 or past the end read zeros and are not stored), rank-5 tensors (upstream's flash
decoding keeps its partial outputs ``[batch, seq, heads, num_split, dim]``), and a row of a
2-D tile copied to a 1-D tile.  Tile heights 1, 63, 64, 65 and 128, shapes that do not divide,
an unused parameter; inputs checked untouched.
"""

from typing import Any

import pytest
import tilelang
import tilelang.language as T
import torch
from tpu_checks import FLOATS, run_checked

pytestmark = pytest.mark.usefixtures("toolchain")


def gather_blocks(M: int, N: int, E: int, BM: int, blocks: int, dtype: str) -> Any:
    @T.prim_func
    def by_id(
        X: T.Tensor((M, N), dtype),
        W: T.Tensor((E, BM, N), dtype),
        Rows: T.Tensor((blocks,), "int32"),
        unused: T.Tensor((2,), "float32"),
        Experts: T.Tensor((blocks,), "int32"),
        Y: T.Tensor((blocks * BM, N), dtype),
        Back: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(blocks, threads=128) as bx:
            x = T.alloc_shared((BM, N), dtype)
            w = T.alloc_shared((BM, N), dtype)
            y = T.alloc_fragment((BM, N), dtype)
            r = Rows[bx]
            e = Experts[bx]
            T.copy(X[r, 0], x)
            T.copy(W[e, 0, 0], w)
            for i, j in T.Parallel(BM, N):
                y[i, j] = x[i, j] + w[i, j]
            T.copy(y, Y[bx * BM, 0])
            T.copy(x, Back[r, 0])  # a store at the same clipped rows: nothing outside the tensor

    return by_id


@pytest.mark.parametrize(
    ("M", "N", "BM", "dtype"),
    [(100, 48, 64, "float32"), (130, 100, 65, "float16"), (70, 20, 1, "float32"), (200, 64, 128, "bfloat16"), (90, 33, 63, "float32")],
)
def test_copy_start_read_from_a_tensor_is_clipped_at_both_ends(M: int, N: int, BM: int, dtype: str) -> None:
    E = 3
    rows = [0, M - BM // 2 - 1, -(BM // 2) - 1, M + 5, -BM - 3, M - BM]  # inside, past the end, before 0, wholly outside
    experts = [0, 2, 1, -1, 3, 1]  # -1 and 3: no such expert (zeros)
    blocks = len(rows)
    x = torch.randn(M, N).to(FLOATS[dtype])
    w = torch.randn(E, BM, N).to(FLOATS[dtype])
    y = torch.zeros(blocks * BM, N, dtype=FLOATS[dtype])
    back = torch.full((M, N), 7.0, dtype=FLOATS[dtype])
    kernel = tilelang.compile(gather_blocks(M, N, E, BM, blocks, dtype), target="tpu")
    rows_t, experts_t = torch.tensor(rows, dtype=torch.int32), torch.tensor(experts, dtype=torch.int32)
    run_checked(kernel, x, w, rows_t, torch.zeros(2), experts_t, y, back, inputs=(0, 1, 2, 3, 4))
    ref = torch.zeros(blocks * BM, N)
    ref_back = torch.full((M, N), 7.0)
    for b, (r, e) in enumerate(zip(rows, experts, strict=True)):
        for i in range(BM):
            xi = x[r + i].float() if 0 <= r + i < M else torch.zeros(N)
            wi = w[e, i].float() if 0 <= e < E else torch.zeros(N)
            ref[b * BM + i] = xi + wi
            if 0 <= r + i < M:
                ref_back[r + i] = x[r + i].float()
    torch.testing.assert_close(y.float(), ref.to(FLOATS[dtype]).float(), rtol=0, atol=0)
    torch.testing.assert_close(back.float(), ref_back, rtol=0, atol=0)


def rank5_kernel(B: int, S: int, H: int, P: int, D: int, BS: int, dtype: str) -> Any:
    @T.prim_func
    def rank5(
        Part: T.Tensor((B, S, H, P, D), dtype),
        unused: T.Tensor((2,), "int32"),
        Lse: T.Tensor((B, H, P, S), dtype),
        Out: T.Tensor((B, S, H, P, D), dtype),
        RowSum: T.Tensor((B, H, P, S), dtype),
    ):
        with T.Kernel(T.ceildiv(S, BS), H * B, P, threads=128) as (bx, by, bz):
            t = T.alloc_shared((BS, D), dtype)
            v = T.alloc_fragment((BS,), dtype)
            h = by % H
            b = by // H
            T.copy(Part[b, bx * BS : (bx + 1) * BS, h, bz, :], t)
            T.copy(Lse[b, h, bz, bx * BS : (bx + 1) * BS], v)
            for i, j in T.Parallel(BS, D):
                t[i, j] = t[i, j] * 2 + v[i]
            T.reduce_sum(t, v, dim=1)
            T.copy(t, Out[b, bx * BS : (bx + 1) * BS, h, bz, :])
            T.copy(v, RowSum[b, h, bz, bx * BS : (bx + 1) * BS])

    return rank5


@pytest.mark.parametrize(
    ("B", "S", "H", "P", "D", "BS", "dtype"),
    [
        (2, 100, 3, 4, 64, 64, "float32"),
        (1, 65, 2, 3, 32, 65, "float16"),
        (1, 130, 1, 2, 16, 128, "float32"),
        (2, 5, 2, 2, 64, 1, "bfloat16"),
        (1, 70, 2, 2, 48, 63, "float32"),
    ],
)
def test_rank5_tensor_slices_copy_both_ways(B: int, S: int, H: int, P: int, D: int, BS: int, dtype: str) -> None:
    part = torch.randn(B, S, H, P, D).to(FLOATS[dtype])
    lse = torch.randn(B, H, P, S).to(FLOATS[dtype])
    out = torch.zeros(B, S, H, P, D, dtype=FLOATS[dtype])
    row_sum = torch.zeros(B, H, P, S, dtype=FLOATS[dtype])
    kernel = tilelang.compile(rank5_kernel(B, S, H, P, D, BS, dtype), target="tpu")
    run_checked(kernel, part, torch.zeros(2, dtype=torch.int32), lse, out, row_sum, inputs=(0, 1, 2))
    ref = (part.float() * 2 + lse.float().permute(0, 3, 1, 2)[..., None]).to(FLOATS[dtype])
    torch.testing.assert_close(out, ref, rtol=0, atol=0)
    tol = 1e-5 if dtype == "float32" else 3e-2
    torch.testing.assert_close(row_sum.float(), ref.float().sum(-1).permute(0, 2, 3, 1), rtol=tol, atol=tol * D)


def row_to_vector(R: int, N: int, dtype: str) -> Any:
    @T.prim_func
    def rows(X: T.Tensor((R, N), dtype), Y: T.Tensor((R, N), dtype)):
        with T.Kernel(1, threads=128) as _:
            x = T.alloc_fragment((R, N), dtype)
            v = T.alloc_fragment((N,), dtype)
            y = T.alloc_fragment((R, N), dtype)
            T.copy(X[0, 0], x)
            for k in T.serial(R):
                T.copy(x[k, :], v)
                for i in T.Parallel(N):
                    v[i] = v[i] * 3
                T.copy(v, y[R - 1 - k, :])
            T.copy(y, Y[0, 0])

    return rows


@pytest.mark.parametrize(
    ("R", "N", "dtype"), [(4, 64, "float32"), (3, 65, "float16"), (2, 1, "float32"), (5, 128, "bfloat16"), (1, 63, "int32")]
)
def test_row_of_a_tile_to_a_vector_and_back(R: int, N: int, dtype: str) -> None:
    torch_dtype = FLOATS.get(dtype, torch.int32)
    x = torch.randn(R, N).to(torch_dtype) if dtype in FLOATS else torch.randint(-1000, 1000, (R, N), dtype=torch.int32)
    y = torch.zeros(R, N, dtype=torch_dtype)
    kernel = tilelang.compile(row_to_vector(R, N, dtype), target="tpu")
    run_checked(kernel, x, y, inputs=(0,))
    torch.testing.assert_close(y, (x * 3).flip(0), rtol=0, atol=0)
