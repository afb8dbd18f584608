"""Kernel factories for the per-element tests (test_tpu_scalar.py), written the way
tile-ai/tilelang's ``examples/`` and its CPU tests write per-element code: scalar loads and
stores of tile and tensor elements in ``T.serial`` loops, ``T.alloc_var`` accumulators,
a hand-written GEMM, scalar atomics, runtime-length loops and ``while``.
"""

from __future__ import annotations

from typing import Any

import tilelang
import tilelang.language as T


def hinted_scale(M: int, N: int, BM: int, BN: int, dtype: str) -> Any:
    """``C = A * 2`` decorated with every other target's hints (all must be ignored on tpu)."""

    @T.prim_func
    def hinted(A: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, BN), T.ceildiv(M, BM), threads=128) as (bx, by):
            T.annotate_restrict_buffers(A, C)
            a = T.alloc_shared((BM, BN), dtype)
            c = T.alloc_fragment((BM, BN), dtype)
            T.use_swizzle(panel_size=10)
            T.annotate_layout({a: tilelang.layout.make_swizzled_layout(a)})
            T.annotate_min_blocks_per_sm(2)
            T.disable_warp_group_reg_alloc()
            T.no_set_max_nreg()
            T.copy(A[by * BM, bx * BN], a)
            T.sync_threads()
            for i, j in T.Parallel(BM, BN):
                c[i, j] = a[i, j] * 2
            T.copy(c, C[by * BM, bx * BN])

    return hinted


def thread_gemv(N: int, K: int, BN: int) -> Any:
    """Upstream's naive GEMV: one thread per output row (``T.get_thread_binding``)."""

    @T.prim_func
    def gemv(A: T.Tensor((K,), "float32"), B: T.Tensor((N, K), "float32"), C: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, BN), threads=BN) as bn:
            tn = T.get_thread_binding(0)
            acc = T.alloc_local((1,), "float32")
            acc[0] = 0
            for k in T.serial(K):
                acc[0] += A[k] * B[bn * BN + tn, k]
            C[bn * BN + tn] = acc[0]

    return gemv


def serial_gemm(M: int, N: int, K: int, BM: int, BN: int, dtype: str, accum: str) -> Any:
    """A hand-written GEMM: tiles staged with T.copy, the product in T.serial loops on
    a T.alloc_local accumulator (upstream's CPU GEMM test)."""

    @T.prim_func
    def gemm(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), accum)):
        with T.Kernel(T.ceildiv(N, BN), T.ceildiv(M, BM), threads=1) as (bx, by):
            a = T.alloc_shared((BM, K), dtype)
            b = T.alloc_shared((K, BN), dtype)
            c = T.alloc_local((BM, BN), accum)
            T.copy(A[by * BM, 0], a)
            T.copy(B[0, bx * BN], b)
            for i, j in T.grid(BM, BN):
                c[i, j] = 0
                for k in T.serial(K):
                    c[i, j] += a[i, k] * b[k, j]
            T.copy(c, C[by * BM, bx * BN])

    return gemm


def row_sum_var(M: int, N: int, dtype: str) -> Any:
    """One row per block, summed by a ``T.alloc_var`` over direct reads of the tensor."""

    @T.prim_func
    def row_sum(A: T.Tensor((M, N), dtype), S: T.Tensor((M,), dtype)):
        with T.Kernel(M, threads=1) as bx:
            acc = T.alloc_var(dtype)
            acc = 0
            for j in T.serial(N):
                acc += A[bx, j]
            S[bx] = acc

    return row_sum


def row_argmax(M: int, N: int, BM: int) -> Any:
    """Per-row argmax by scanning a tile's elements with scalar accumulators; rows past the
    end of the tensor are not stored."""

    @T.prim_func
    def argmax(X: T.Tensor((M, N), "float32"), Idx: T.Tensor((M,), "int32"), V: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            x = T.alloc_shared((BM, N), "float32")
            best = T.alloc_var("float32")
            where = T.alloc_var("int32")
            T.copy(X[bx * BM, 0], x)
            for i in T.serial(BM):
                best = x[i, 0]
                where = 0
                for j in T.serial(1, N):
                    if x[i, j] > best:
                        best = x[i, j]
                        where = j
                if bx * BM + i < M:
                    Idx[bx * BM + i] = where
                    V[bx * BM + i] = best

    return argmax


def prefix_len(M: int, N: int) -> Any:
    """Runtime-length loops: the first ``n`` columns summed (``n`` a scalar argument), and a
    ``while`` loop counting the leading positive elements of each row."""

    @T.prim_func
    def prefix(A: T.Tensor((M, N), "float32"), n: T.int32, S: T.Tensor((M,), "float32"), L: T.Tensor((M,), "int32")):
        with T.Kernel(M, threads=1) as bx:
            acc = T.alloc_var("float32")
            k = T.alloc_var("int32")
            acc = 0.0
            for j in T.serial(n):
                acc += A[bx, j]
            S[bx] = acc
            k = 0
            while k < N and A[bx, k] > 0:
                k += 1
            L[bx] = k

    return prefix


def histogram(M: int, bins: int, BM: int) -> Any:
    """Scalar ``T.atomic_add`` / ``T.atomic_max`` into a data-dependent element, from every block."""

    @T.prim_func
    def hist(ids: T.Tensor((M,), "int32"), w: T.Tensor((M,), "float32"), H: T.Tensor((bins,), "float32"), X: T.Tensor((bins,), "float32")):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            for i in T.serial(BM):
                if bx * BM + i < M:
                    T.atomic_add(H[ids[bx * BM + i]], w[bx * BM + i])
                    T.atomic_max(X[ids[bx * BM + i]], w[bx * BM + i])

    return hist
