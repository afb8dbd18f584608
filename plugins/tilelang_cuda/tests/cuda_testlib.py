"""Kernels and artifact helpers shared by the CUDA tests (and their subprocesses).

Loaded by path through the ``lib`` fixture (the tests run with
``--import-mode=importlib``), or by a subprocess after putting this folder on
``sys.path``.
"""

# No `from __future__ import annotations`: T.prim_func evaluates the parameter annotations.
import struct
from pathlib import Path

import tilelang.language as T


def cubins(cache_dir: Path) -> list[Path]:
    """Cubins upstream's CUDA binary cache holds under ``cache_dir`` (``$TILELANG_CACHE_DIR``)."""
    return sorted(cache_dir.glob("*/cuda-binaries/*/kernel.cubin"))


def cubin_sm(path: Path) -> int:
    """The SM number a cubin was built for: bits 8-15 of its ELF64 ``e_flags``."""
    data = path.read_bytes()
    assert data[:4] == b"\x7fELF" and data[4] == 2, f"{path} is not an ELF64 file"
    return (struct.unpack_from("<I", data, 0x30)[0] >> 8) & 0xFF


def gemm(M: int, N: int, K: int, block_M: int = 128, block_N: int = 128, block_K: int = 32, threads: int = 128, dtype: str = "float16"):
    """C = A @ B with a float32 accumulator, GPU style (shared tiles, fragment, pipelined K loop)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


def axpy_and_diff(M: int, N: int, block: int = 32, dtype: str = "float32"):
    """Two outputs: S = 2 * A + B and D = A - B (element-wise)."""

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), S: T.Tensor((M, N), dtype), D: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=128) as (bx, by):
            for i, j in T.Parallel(block, block):
                row = by * block + i
                col = bx * block + j
                if row < M and col < N:
                    S[row, col] = A[row, col] * 2.0 + B[row, col]
                    D[row, col] = A[row, col] - B[row, col]

    return main


def add(N: int, block: int = 256, dtype: str = "float32"):
    """C = A + B on a vector: the tiny kernel of the per-call cost benchmark."""

    @T.prim_func
    def main(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype), C: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < N:
                    C[bx * block + i] = A[bx * block + i] + B[bx * block + i]

    return main
