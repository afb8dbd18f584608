"""Data-dependent row gathers (embedding), layout-changing copies and fp32 transposed
GEMM on the tpu target, written as tile-ai/tilelang's ``examples/`` write them, run on
the BM1690 emulator against torch on random data.

To keep the suite fast, several cases share one compiled kernel (one output each).
Every test checks that the inputs are left untouched.
"""

from typing import Any

import pytest
import tilelang
import tilelang.language as T
import torch
from test_tpu_codegen import ppl_of
from tilelang_tpu import codegen

pytestmark = pytest.mark.usefixtures("toolchain")


def _run(kernel: Any, *inputs: torch.Tensor) -> Any:
    before = [t.clone() for t in inputs]
    out = kernel(*inputs)
    for original, tensor in zip(before, inputs, strict=True):
        assert torch.equal(original, tensor), "the kernel wrote one of its inputs"
    return out


# ---------------------------------------------------------------------- fp32 transposed GEMM


def _gemm_transposes(M: int, N: int, K: int, BM: int, BN: int, BK: int) -> Any:
    """Three fp32 GEMMs in one kernel: ``transpose_A``, ``transpose_B`` and both, with a K loop;
    one result is copied to an ordinary tile and summed per row of each block."""

    @T.prim_func
    def gemm_transposes(
        At: T.Tensor((K, M), "float32"),
        B: T.Tensor((K, N), "float32"),
        Unused: T.Tensor((M, N), "float32"),
        A: T.Tensor((M, K), "float32"),
        Bt: T.Tensor((N, K), "float32"),
        C_tn: T.Tensor((M, N), "float32"),
        C_nt: T.Tensor((M, N), "float32"),
        C_tt: T.Tensor((M, N), "float32"),
        RowSums: T.Tensor((M, T.ceildiv(N, BN)), "float32"),
    ):
        with T.Kernel(T.ceildiv(N, BN), T.ceildiv(M, BM), threads=128) as (bx, by):
            a_t = T.alloc_shared((BK, BM), "float32")
            a = T.alloc_shared((BM, BK), "float32")
            b = T.alloc_shared((BK, BN), "float32")
            b_t = T.alloc_shared((BN, BK), "float32")
            c_tn = T.alloc_fragment((BM, BN), "float32")
            c_nt = T.alloc_fragment((BM, BN), "float32")
            c_tt = T.alloc_fragment((BM, BN), "float32")
            c_rows = T.alloc_shared((BM, BN), "float32")
            row_sum = T.alloc_fragment((BM,), "float32")
            T.clear(c_tn)
            T.clear(c_nt)
            T.clear(c_tt)
            for k in T.Pipelined(T.ceildiv(K, BK), num_stages=2):
                T.copy(At[k * BK, by * BM], a_t)
                T.copy(A[by * BM, k * BK], a)
                T.copy(B[k * BK, bx * BN], b)
                T.copy(Bt[bx * BN, k * BK], b_t)
                T.gemm(a_t, b, c_tn, transpose_A=True)
                T.gemm(a, b_t, c_nt, transpose_B=True)
                T.gemm(a_t, b_t, c_tt, transpose_A=True, transpose_B=True)
            T.copy(c_tn, C_tn[by * BM, bx * BN])
            T.copy(c_nt, C_nt[by * BM, bx * BN])
            T.copy(c_tt, C_tt[by * BM, bx * BN])
            # The fp32 matmul tile (a whole row per lane) copied to an ordinary tile and reduced.
            T.copy(c_nt, c_rows)
            T.reduce_sum(c_rows, row_sum, dim=1)
            T.copy(row_sum, RowSums[by * BM : (by + 1) * BM, bx])

    return gemm_transposes


@pytest.mark.parametrize(("M", "N", "K", "BM", "BN", "BK"), [(130, 70, 100, 65, 64, 63)])
def test_fp32_gemm_transposed_operands(M: int, N: int, K: int, BM: int, BN: int, BK: int) -> None:
    """fp32 ``T.gemm`` with ``transpose_A``, ``transpose_B`` and both: the transposed operand
    goes through DMA transposes into tiu::fmm's layout.  Shapes divide no block edge.
    Tolerance: 1e-5 relative to torch's fp32 matmul."""
    kernel = tilelang.compile(_gemm_transposes(M, N, K, BM, BN, BK), target="tpu", out_idx=[5, 6, 7, 8])
    a, b = torch.randn(M, K), torch.randn(K, N)
    unused = torch.randn(M, N)
    c_tn, c_nt, c_tt, row_sums = _run(kernel, a.T.contiguous(), b, unused, a, b.T.contiguous())
    expected = a @ b
    for got in (c_tn, c_nt, c_tt):
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5 * float(expected.abs().max()))
    block_sums = torch.stack([expected[:, n : n + BN].sum(1) for n in range(0, N, BN)], dim=1)
    torch.testing.assert_close(row_sums, block_sums, rtol=1e-5, atol=1e-5 * float(expected.abs().max()) * BN)


# ---------------------------------------------------------------------- embedding / row gathers


def _embedding_forms(N: int, V: int, D: int, BM: int, id_dtype: str) -> Any:
    """The three ways users write an embedding lookup, one table dtype each, in one kernel:
    through an index tile, reading the ids tensor directly, and one ``T.copy`` per row."""

    @T.prim_func
    def embedding(
        table_f16: T.Tensor((V, D), "float16"),
        ids: T.Tensor((N,), id_dtype),
        Unused: T.Tensor((N,), id_dtype),
        table_f32: T.Tensor((V, D), "float32"),
        table_bf16: T.Tensor((V, D), "bfloat16"),
        out_f32: T.Tensor((N, D), "float32"),
        out_f16: T.Tensor((N, D), "float16"),
        out_bf16: T.Tensor((N, D), "bfloat16"),
    ):
        with T.Kernel(T.ceildiv(N, BM), threads=128) as bx:
            ids_shared = T.alloc_shared((BM,), id_dtype)
            rows_f32 = T.alloc_shared((BM, D), "float32")
            rows_f16 = T.alloc_fragment((BM, D), "float16")
            rows_bf16 = T.alloc_shared((BM, D), "bfloat16")
            T.copy(ids[bx * BM : (bx + 1) * BM], ids_shared)
            for i, j in T.Parallel(BM, D):
                rows_f32[i, j] = table_f32[ids_shared[i], j]
            for i, j in T.Parallel(BM, D):
                rows_f16[i, j] = table_f16[ids[bx * BM + i], j]
            for k in T.serial(BM):
                T.copy(table_bf16[ids_shared[k], :], rows_bf16[k, :])
            T.copy(rows_f32, out_f32[bx * BM : (bx + 1) * BM, :])
            T.copy(rows_f16, out_f16[bx * BM, 0])
            T.copy(rows_bf16, out_bf16[bx * BM, 0])

    return embedding


@pytest.mark.parametrize(("N", "V", "D", "BM", "id_dtype"), [(130, 50, 70, 64, "int32"), (200, 300, 96, 128, "int64")])
def test_embedding_gathers(N: int, V: int, D: int, BM: int, id_dtype: str) -> None:
    """Ids out of order and repeated, a block count that does not divide the ids; fp32, fp16
    and bf16 tables; int32 and int64 ids.  Gathers copy bits, so the result is exact.  Ids
    outside ``[0, V)`` give rows of zeros, the documented out-of-range behaviour; for int64
    that includes ids whose low 32 bits are a valid row."""
    kernel = tilelang.compile(_embedding_forms(N, V, D, BM, id_dtype), target="tpu", out_idx=[5, 6, 7])
    ids = torch.randint(0, V, (N,), dtype=getattr(torch, id_dtype))
    ids[1] = ids[N - 1] = ids[0]
    ids[N // 2], ids[N // 3] = -1, V
    if id_dtype == "int64":
        ids[N // 4], ids[N // 5] = 2**32 + 3, -(2**32) + 5
    table = torch.randn(V, D)
    tables = (table.half(), table, table.bfloat16())
    out_f32, out_f16, out_bf16 = _run(kernel, tables[0], ids, torch.zeros_like(ids), tables[1], tables[2])
    valid = (ids >= 0) & (ids < V)
    for out, source in ((out_f32, tables[1]), (out_f16, tables[0]), (out_bf16, tables[2])):
        assert torch.equal(out[valid], source[ids[valid].long()])
        assert torch.equal(out[~valid], torch.zeros_like(out[~valid]))


def _embedding_batched(B: int, S: int, V: int, D: int, BS: int, id_dtype: str, dtype: str) -> Any:
    """Ids of shape (batch, seq) read directly: ``table[ids[b, s0 + i], j]``."""

    @T.prim_func
    def embedding_batched(ids: T.Tensor((B, S), id_dtype), table: T.Tensor((V, D), dtype), out: T.Tensor((B, S, D), dtype)):
        with T.Kernel(T.ceildiv(S, BS), B, threads=128) as (bx, by):
            rows = T.alloc_fragment((BS, D), dtype)
            for i, j in T.Parallel(BS, D):
                rows[i, j] = table[ids[by, bx * BS + i], j]
            T.copy(rows, out[by, bx * BS, 0])

    return embedding_batched


def test_embedding_batched_ids() -> None:
    """(batch, seq) ids with a 63-row block over a sequence it does not divide; bf16 table; exact."""
    B, S, V, D, BS = 3, 100, 70, 48, 63
    kernel = tilelang.compile(_embedding_batched(B, S, V, D, BS, "int32", "bfloat16"), target="tpu", out_idx=[2])
    ids = torch.randint(0, V, (B, S), dtype=torch.int32)
    ids[1, 0] = V + 7
    table = torch.randn(V, D).bfloat16()
    out = _run(kernel, ids, table)
    valid = ids < V
    assert torch.equal(out[valid], table[ids[valid].long()])
    assert torch.equal(out[~valid], torch.zeros_like(out[~valid]))


# ---------------------------------------------------------------------- layout-changing copies


def _layout_copies(M: int, N: int, BM: int, BN: int, dtype: str) -> Any:
    """A tile transposed into another (``t[j, i] = a[i, j]``), a block read transposed straight
    from global memory, and every other column of a block, in one kernel."""
    half = (N + 1) // 2

    @T.prim_func
    def layout_copies(
        A: T.Tensor((M, N), dtype),
        Unused: T.Tensor((M, N), dtype),
        At_tile: T.Tensor((N, M), dtype),
        At_global: T.Tensor((N, M), dtype),
        Even: T.Tensor((M, half), dtype),
    ):
        with T.Kernel(T.ceildiv(N, BN), T.ceildiv(M, BM), threads=128) as (bx, by):
            a = T.alloc_shared((BM, BN), dtype)
            t = T.alloc_shared((BN, BM), dtype)
            t_global = T.alloc_fragment((BN, BM), dtype)
            even = T.alloc_shared((BM, BN // 2), dtype)
            T.copy(A[by * BM, bx * BN], a)
            for i, j in T.Parallel(BM, BN):
                t[j, i] = a[i, j]
            for i, j in T.Parallel(BN, BM):
                t_global[i, j] = A[by * BM + j, bx * BN + i]
            for i, j in T.Parallel(BM, BN // 2):
                even[i, j] = A[by * BM + i, bx * BN + 2 * j]
            T.copy(t, At_tile[bx * BN, by * BM])
            T.copy(t_global, At_global[bx * BN, by * BM])
            T.copy(even, Even[by * BM, bx * (BN // 2)])

    return layout_copies


@pytest.mark.parametrize(("M", "N", "BM", "BN", "dtype"), [(130, 70, 64, 32, "float32"), (200, 100, 65, 64, "bfloat16")])
def test_layout_changing_copies(M: int, N: int, BM: int, BN: int, dtype: str) -> None:
    """Copies move bits: exact.  Edge blocks overhang the tensor in both directions."""
    kernel = tilelang.compile(_layout_copies(M, N, BM, BN, dtype), target="tpu", out_idx=[2, 3, 4])
    a = torch.randn(M, N).to(getattr(torch, dtype))
    at_tile, at_global, even = _run(kernel, a, torch.zeros_like(a))
    assert torch.equal(at_tile, a.T)
    assert torch.equal(at_global, a.T)
    assert torch.equal(even, a[:, 0::2])


# ---------------------------------------------------------------------- refused by name


def _scatter(N: int = 64, V: int = 50, D: int = 32) -> Any:
    @T.prim_func
    def scatter(rows: T.Tensor((N, D), "float32"), ids: T.Tensor((N,), "int32"), table: T.Tensor((V, D), "float32")):
        with T.Kernel(N, threads=1) as bx:
            ids_local = T.alloc_local((1,), "int32")
            row = T.alloc_shared((1, D), "float32")
            T.copy(ids[bx : bx + 1], ids_local)
            T.copy(rows[bx, :], row)
            T.copy(row, table[ids_local[0], :])

    return scatter


def _in_place_transpose(M: int = 64) -> Any:
    @T.prim_func
    def in_place(A: T.Tensor((M, M), "float32"), B: T.Tensor((M, M), "float32")):
        with T.Kernel(1, threads=1) as _:
            a = T.alloc_shared((M, M), "float32")
            T.copy(A, a)
            for i, j in T.Parallel(M, M):
                a[j, i] = a[i, j]
            T.copy(a, B)

    return in_place


def _int64_arithmetic(N: int = 64) -> Any:
    @T.prim_func
    def int64_math(ids: T.Tensor((N,), "int64"), out: T.Tensor((N,), "int64")):
        with T.Kernel(1, threads=1) as _:
            t = T.alloc_shared((N,), "int64")
            T.copy(ids, t)
            for i in T.Parallel(N):
                t[i] = t[i] + 1
            T.copy(t, out)

    return int64_math


def _gather_by_computed_index(N: int = 64, V: int = 50, D: int = 32) -> Any:
    @T.prim_func
    def computed(table: T.Tensor((V, D), "float32"), ids: T.Tensor((N,), "int32"), out: T.Tensor((N, D), "float32")):
        with T.Kernel(1, threads=1) as _:
            ids_shared = T.alloc_shared((N,), "int32")
            rows = T.alloc_shared((N, D), "float32")
            T.copy(ids, ids_shared)
            for i, j in T.Parallel(N, D):
                rows[i, j] = table[ids_shared[i] + 1, j]
            T.copy(rows, out)

    return computed


def test_gather_by_computed_index_runs_per_element() -> None:
    """``table[ids_shared[i] + 1, j]`` has no DMA gather form; it runs on the scalar unit (it was refused)."""
    N, V, D = 64, 50, 32
    kernel = tilelang.compile(_gather_by_computed_index(N, V, D), target="tpu", out_idx=[2])
    table, ids = torch.randn(V, D), torch.randint(0, V - 1, (N,), dtype=torch.int32)
    table0, ids0 = table.clone(), ids.clone()
    torch.testing.assert_close(kernel(table, ids), table[ids.long() + 1], rtol=0, atol=0)
    assert torch.equal(table, table0) and torch.equal(ids, ids0)


@pytest.mark.parametrize(
    ("factory", "construct"),
    [
        (_scatter, "T.copy to table at a data-dependent position (a scatter)"),
        (_in_place_transpose, "in-place transpose of tile a"),
        (_int64_arithmetic, "T.Parallel store to int64 tile t"),
    ],
)
def test_refused_by_name(factory: Any, construct: str) -> None:
    """What the gather and layout code cannot do is a named TpuCodegenError with a fix."""
    with pytest.raises(codegen.TpuCodegenError) as info:
        ppl_of(factory())
    assert construct in str(info.value)
    assert "fix: " in str(info.value)
