"""Matrix multiply on a SophGo TPU: the original TPU fork's matmul example, unmodified TileLang.

fp16 inputs, fp32 accumulation (PPL's mm2 unit), compiled with
``tilelang.compile(func, target="tpu", out_idx=[-1])``; runs on the BM1690
emulator when no card is present (sized for seconds).

    python examples/tpu/matmul.py
"""

import tilelang
import tilelang.language as T
import torch


def matmul(M: int, N: int, K: int, block_M: int, block_N: int, block_K: int, dtype: str = "float16", accum_dtype: str = "float32"):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), accum_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=1) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


def main() -> None:
    M = N = K = 256
    kernel = tilelang.compile(matmul(M, N, K, 128, 128, 64), target="tpu", out_idx=[-1])
    a = torch.randn(M, K).half()
    b = torch.randn(K, N).half()
    c = kernel(a, b)
    # Products of fp16 values are exact in fp32; only the summation order differs from torch.
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-4, atol=1e-3)
    print("matmul: matches torch")

    profiler = kernel.get_profiler()
    latency = profiler.do_bench(n_warmup=1, n_repeat=3)
    print(f"matmul {M}x{N}x{K} fp16 -> fp32: {latency:.3f} ms per call (emulator wall time when no card is present)")


if __name__ == "__main__":
    main()
