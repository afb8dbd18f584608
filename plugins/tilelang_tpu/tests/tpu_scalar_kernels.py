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
                if bx * BM + i < M and ids[bx * BM + i] < bins:
                    T.atomic_add(H[ids[bx * BM + i]], w[bx * BM + i])
                    T.atomic_max(X[ids[bx * BM + i]], w[bx * BM + i])

    return hist


def tile_scans(M: int, N: int, BM: int, dtype: str) -> Any:
    """``T.cummax`` along both axes (one in place, one reversed into another tile),
    ``T.transpose`` of a whole tile and ``T.atomic_max`` of a tile into a running maximum."""

    @T.prim_func
    def scans(
        X: T.Tensor((M, N), dtype),
        Row: T.Tensor((M, N), dtype),
        Col: T.Tensor((M, N), dtype),
        Tr: T.Tensor((N, M), dtype),
        Mx: T.Tensor((BM, N), dtype),
    ):
        with T.Kernel(T.ceildiv(M, BM), threads=128) as bx:
            x = T.alloc_shared((BM, N), dtype)
            r = T.alloc_fragment((BM, N), dtype)
            c = T.alloc_fragment((BM, N), dtype)
            t = T.alloc_shared((N, BM), dtype)
            T.copy(X[bx * BM, 0], x)
            T.copy(x, r)
            T.cummax(r, dim=1)
            T.cummax(x, c, dim=0, reverse=True)
            T.transpose(x, t)
            T.copy(r, Row[bx * BM, 0])
            T.copy(c, Col[bx * BM, 0])
            T.copy(t, Tr[0, bx * BM])
            if dtype == "float32":  # (tile atomics take float tiles)
                T.atomic_max(Mx[0, 0], x)

    return scans


def bit_reduce(M: int, N: int, BM: int) -> Any:
    @T.prim_func
    def bits(X: T.Tensor((M, N), "int32"), Xo: T.Tensor((M,), "int32"), Ao: T.Tensor((M,), "int32"), Oo: T.Tensor((M,), "int32")):
        with T.Kernel(T.ceildiv(M, BM), threads=128) as bx:
            x = T.alloc_fragment((BM, N), "int32")
            a = T.alloc_fragment((BM,), "int32")
            o = T.alloc_fragment((BM,), "int32")
            e = T.alloc_fragment((BM,), "int32")
            T.copy(X[bx * BM, 0], x)
            T.reduce_bitxor(x, e, dim=1)
            T.reduce_bitand(x, a, dim=1)
            T.reduce_bitor(x, o, dim=1)
            T.copy(e, Xo[bx * BM])
            T.copy(a, Ao[bx * BM])
            T.copy(o, Oo[bx * BM])

    return bits


def global_parallel(M: int, N: int, BM: int, dtype: str) -> Any:
    """Global tensors used directly: ``T.fill`` of a tensor region and a ``T.Parallel`` that reads
    and writes tensor elements with an offset (upstream's element-wise examples without tiles)."""

    @T.prim_func
    def direct(A: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype), F: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, BM), threads=128) as bx:
            T.fill(F[bx * BM : (bx + 1) * BM, :], T.cast(3, dtype))
            for i, j in T.Parallel(BM, N):
                if bx * BM + i < M:
                    C[bx * BM + i, j] = A[bx * BM + i, j] * 2 + A[bx * BM + i, (j + 1) % N]

    return direct


def scalar_float_max(N: int, dtype: str) -> Any:
    """``acc = T.max(acc, T.cast(j, f) / 2)`` over a T.serial loop (tpu-diff's W1: PPL's scalar
    ``max`` is ``int(int, int)`` and truncated the fraction)."""

    @T.prim_func
    def fmax(X: T.Tensor((1, N), dtype), Out: T.Tensor((1,), dtype)):
        with T.Kernel(1, threads=1) as bx:
            x = T.alloc_shared((1, N), dtype)
            r = T.alloc_fragment((1,), dtype)
            acc = T.alloc_var(dtype)
            T.copy(X[bx, 0], x)
            for i in T.serial(1):
                acc = T.cast(-10000.0, dtype)
                for j in T.serial(N):
                    acc = T.max(acc, T.cast(j, dtype) / (T.abs(T.cast(1.0, dtype)) + T.cast(1.0, dtype)))
                r[i] = acc
            T.copy(r, Out[bx])

    return fmax


def layernorm_rows(N: int, D: int, blk_m: int, dtype: str, eps: float = 1e-5) -> Any:
    """LayerNorm as upstream's examples/norm writes it: mean and variance over the row from two
    row sums, ``T.Let``-bound temporaries, affine weight and bias, per-row Mean/Rstd outputs
    stored from a ``T.Parallel(blk_m)`` (issue 18 item 7: ppl-compile 1.30.2 crashed on it)."""
    acc = "float32"

    @T.prim_func
    def layernorm(
        X: T.Tensor((N, D), dtype),
        G: T.Tensor((D,), dtype),
        B: T.Tensor((D,), dtype),
        Y: T.Tensor((N, D), dtype),
        Mean: T.Tensor((N,), acc),
        Rstd: T.Tensor((N,), acc),
    ):
        with T.Kernel(T.ceildiv(N, blk_m), threads=256) as bx:
            xs = T.alloc_shared((blk_m, D), dtype)
            gs = T.alloc_shared((D,), dtype)
            bs = T.alloc_shared((D,), dtype)
            xl = T.alloc_fragment((blk_m, D), acc)
            xq = T.alloc_fragment((blk_m, D), acc)
            s1 = T.alloc_fragment((blk_m,), acc)
            s2 = T.alloc_fragment((blk_m,), acc)
            mu = T.alloc_fragment((blk_m,), acc)
            rs = T.alloc_fragment((blk_m,), acc)
            T.copy(X[bx * blk_m, 0], xs)
            T.copy(G, gs)
            T.copy(B, bs)
            for i, j in T.Parallel(blk_m, D):
                xl[i, j] = T.Cast(acc, xs[i, j])
            for i, j in T.Parallel(blk_m, D):
                xq[i, j] = xl[i, j] * xl[i, j]
            T.reduce_sum(xl, s1, dim=1)
            T.reduce_sum(xq, s2, dim=1)
            inv = T.float32(1.0) / T.Cast(acc, D)
            for i in T.Parallel(blk_m):
                mu[i] = s1[i] * inv
                rs[i] = T.rsqrt(s2[i] * inv - mu[i] * mu[i] + T.Cast(acc, eps))
                Mean[bx * blk_m + i] = mu[i]
                Rstd[bx * blk_m + i] = rs[i]
            for i, j in T.Parallel(blk_m, D):
                centred = (xl[i, j] - mu[i]) * rs[i]
                xs[i, j] = T.Cast(dtype, centred * T.Cast(acc, gs[j]) + T.Cast(acc, bs[j]))
            T.copy(xs, Y[bx * blk_m, 0])

    return layernorm
