"""Row sum on a SophGo TPU: the original TPU fork's reduce_sum example, unmodified TileLang.

Compiled with ``tilelang.compile(func, target="tpu", out_idx=[-1])`` as in the
fork; runs on the BM1690 emulator when no card is present (sized for seconds).

    python examples/tpu/reduce_sum.py
"""

import tilelang
import tilelang.language as T
import torch


def reduce_sum(M: int, N: int, block_M: int, dtype: str = "float32"):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, 1), dtype)):
        with T.Kernel(1, T.ceildiv(M, block_M), threads=1) as (bx, by):
            X_shared = T.alloc_shared((block_M, N), dtype)
            Y_local = T.alloc_fragment((block_M, 1), dtype)
            T.copy(X[by * block_M, 0], X_shared)
            T.reduce_sum(X_shared, Y_local, dim=1)
            T.copy(Y_local, Y[by * block_M, bx])

    return main


def main() -> None:
    M, N, block_M = 512, 1024, 128
    kernel = tilelang.compile(reduce_sum(M, N, block_M), target="tpu", out_idx=[-1])
    x = torch.randn(M, N)
    y = kernel(x)
    # fp32 sums of 1024 terms in a different order than torch: compare with a relative tolerance.
    torch.testing.assert_close(y, x.sum(dim=1, keepdim=True), rtol=1e-5, atol=1e-4)
    print("reduce_sum: matches torch")

    profiler = kernel.get_profiler()
    latency = profiler.do_bench(n_warmup=1, n_repeat=3)
    print(f"reduce_sum {M}x{N}: {latency:.3f} ms per call (emulator wall time when no card is present)")


if __name__ == "__main__":
    main()
