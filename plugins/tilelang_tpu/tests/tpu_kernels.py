"""TileLang kernels shared by the TPU codegen tests (the emitted-PPL checks in
test_tpu_codegen.py and the emulator runs in test_tpu_codegen_e2e.py).

Importable because this folder's conftest.py puts it on ``sys.path``.
"""

from typing import Any

import tilelang.language as T


def copy_kernel(M: int, N: int, BM: int, BN: int, dtype: str = "float32") -> Any:
    @T.prim_func
    def copy(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, BN), T.ceildiv(M, BM), threads=1) as (bx, by):
            a = T.alloc_shared((BM, BN), dtype)
            T.copy(A[by * BM, bx * BN], a)
            T.copy(a, B[by * BM, bx * BN])

    return copy


def row_reduce_kernel(M: int, N: int, BM: int, kind: str, clear: bool = True) -> Any:
    reducer = {"max": T.reduce_max, "sum": T.reduce_sum, "min": T.reduce_min, "abssum": T.reduce_abssum, "absmax": T.reduce_absmax}[kind]

    @T.prim_func
    def row_reduce(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, 1), "float32")):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            x = T.alloc_shared((BM, N), "float32")
            y = T.alloc_fragment((BM, 1), "float32")
            T.copy(X[bx * BM, 0], x)
            if not clear:
                T.fill(y, 1.0)
            if clear:
                reducer(x, y, dim=1)  # reduce_abssum/absmax have no clear argument
            else:
                reducer(x, y, dim=1, clear=False)
            T.copy(y, Y[bx * BM, 0])

    return row_reduce


def matmul_kernel(M: int, N: int, K: int, BM: int, BN: int, BK: int, dtype: str, transpose_b: bool = False) -> Any:
    b_shape = (N, K) if transpose_b else (K, N)
    b_tile = (BN, BK) if transpose_b else (BK, BN)

    @T.prim_func
    def matmul(A: T.Tensor((M, K), dtype), B: T.Tensor(b_shape, dtype), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, BN), T.ceildiv(M, BM), threads=1) as (bx, by):
            a = T.alloc_shared((BM, BK), dtype)
            b = T.alloc_shared(b_tile, dtype)
            c = T.alloc_fragment((BM, BN), "float32")
            T.clear(c)
            for k in T.Pipelined(T.ceildiv(K, BK), num_stages=2):
                T.copy(A[by * BM, k * BK], a)
                if transpose_b:
                    T.copy(B[bx * BN, k * BK], b)
                else:
                    T.copy(B[k * BK, bx * BN], b)
                T.gemm(a, b, c, transpose_B=transpose_b)
            T.copy(c, C[by * BM, bx * BN])

    return matmul


def softmax_kernel(M: int, N: int, BM: int) -> Any:
    @T.prim_func
    def softmax(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            x = T.alloc_shared((BM, N), "float32")
            m = T.alloc_fragment((BM,), "float32")
            s = T.alloc_fragment((BM,), "float32")
            T.copy(X[bx * BM, 0], x)
            T.reduce_max(x, m, dim=1)
            for i, j in T.Parallel(BM, N):
                x[i, j] = T.exp(x[i, j] - m[i])
            T.reduce_sum(x, s, dim=1)
            for i, j in T.Parallel(BM, N):
                x[i, j] = x[i, j] / s[i]
            T.copy(x, Y[bx * BM, 0])

    return softmax
