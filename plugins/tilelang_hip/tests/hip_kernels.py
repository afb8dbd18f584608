"""The two kernels of the tilelang-hip tests, as the issue names them: an element-wise add
and an fp16 GEMM written GPU-style (shared tiles, a fragment accumulator, ``T.gemm``).

Imports nothing but tilelang (inside the factories), so subprocess scripts that must run
without tilecore can import it too.
"""

# No ``from __future__ import annotations`` here: tilelang evaluates the kernels' annotations.
from typing import Any

N_ADD = 4096
BLOCK = 256


def make_add(n: int = N_ADD, block: int = BLOCK, dtype: str = "float32") -> Any:
    import tilelang.language as T  # here, not at the top: the runtime tests must import without tilelang

    @T.prim_func
    def add(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype), C: T.Tensor((n,), dtype)):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                C[bx * block + i] = A[bx * block + i] + B[bx * block + i]

    return add


def make_gemm(m: int = 512, n: int = 512, k: int = 512, bm: int = 64, bn: int = 64, bk: int = 32, threads: int = 256) -> Any:
    import tilelang.language as T

    @T.prim_func
    def gemm(A: T.Tensor((m, k), "float16"), B: T.Tensor((k, n), "float16"), C: T.Tensor((m, n), "float16")):
        with T.Kernel(T.ceildiv(n, bn), T.ceildiv(m, bm), threads=threads) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            C_l = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_l)
            for ko in T.Pipelined(T.ceildiv(k, bk), num_stages=2):
                T.copy(A[by * bm, ko * bk], A_s)
                T.copy(B[ko * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * bm, bx * bn])

    return gemm
