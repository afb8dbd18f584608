"""Autotuned kernels of the executor tests, written as tilelang users write them (unchanged code).

A module of its own so the test process, the processes it starts and the cluster's workers
(``ref_prog`` is pickled by reference) all see the same kernels.
"""

from __future__ import annotations

from typing import Any

import tilelang
import tilelang.language as T
import torch

#: Four configs: small tiles compile and run in about a second each (emulator included).
CONFIGS = [{"BM": bm, "BN": bn, "BK": bk} for bm, bn, bk in ((16, 16, 16), (32, 32, 16), (32, 16, 32), (16, 32, 32))]


def reference(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    return A @ B


#: Faults a config may carry (``fault=`` in a democpu config): C calls the kernel makes before its work.
#: ``segv``: ``raise(SIGSEGV)``, the process dies as on a segfault; ``hang``: ``pause()``, the kernel
#: never returns.  Real kernels that really crash or hang their process: no part of tilelang is faked.
FAULTS = {"segv": ("raise", 11), "hang": ("pause",)}


def make_matmul(target: str, rep: int = 3, configs: list[dict[str, Any]] | None = None, timeout: int = 100) -> Any:
    """``@tilelang.autotune`` over ``@tilelang.jit``: a GEMM tuned over block sizes for ``target``."""

    @tilelang.autotune(configs=configs or CONFIGS, warmup=1, rep=rep, timeout=timeout, ref_prog=reference, atol=1e-3, rtol=1e-3)
    @tilelang.jit(out_idx=[-1], target=target)
    def matmul(M: int, N: int, K: int, BM: int = 16, BN: int = 16, BK: int = 16, fault: str = "") -> Any:
        @T.prim_func
        def gemm(A: T.Tensor((M, K), "float32"), B: T.Tensor((K, N), "float32"), C: T.Tensor((M, N), "float32")) -> None:
            with T.Kernel(T.ceildiv(N, BN), T.ceildiv(M, BM), threads=128) as (bx, by):
                if fault:
                    T.evaluate(T.call_extern("int32", *FAULTS[fault]))
                a = T.alloc_local((BM, BK), "float32")
                b = T.alloc_local((BK, BN), "float32")
                c = T.alloc_local((BM, BN), "float32")
                T.clear(c)
                for k in T.Pipelined(T.ceildiv(K, BK), num_stages=2):
                    T.copy(A[by * BM, k * BK], a)
                    T.copy(B[k * BK, bx * BN], b)
                    T.gemm(a, b, c)
                T.copy(c, C[by * BM, bx * BN])

        return gemm

    return matmul


def check_tuned(kernel: Any, results: list[dict[str, Any]]) -> None:
    """The chosen config passed and has the least latency among those that passed; the kernel is
    right against torch and leaves its inputs untouched."""
    passed = [r for r in results if r["status"] == "ok"]
    best = min(passed, key=lambda r: r["latency"])
    assert kernel.config == best["config"] and kernel.latency == best["latency"]
    torch.manual_seed(0)
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    a0, b0 = a.clone(), b.clone()
    torch.testing.assert_close(kernel(a, b), a @ b, atol=1e-3, rtol=1e-3)
    assert torch.equal(a, a0) and torch.equal(b, b0)
