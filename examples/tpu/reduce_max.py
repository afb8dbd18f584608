"""Row max on a SophGo TPU: the original TPU fork's reduce_max example, unmodified TileLang.

Written as in the fork (``@tilelang.jit(target="tpu", out_idx=[-1])`` stacked on
``@T.prim_func``, launched with grid syntax ``reduce_max[(1,)](x, y)``).  With
``pip install tilelang-tpu`` (before the first upload: ``pip install ./plugins/tilelang_tpu``
in the repository) and ``tilelang-tpu toolchain install`` it runs on the
BM1690 emulator when no card is present.  Sized to finish in seconds there.

    python examples/tpu/reduce_max.py
"""

import tilelang
import tilelang.language as T
import torch

M, N = 512, 1020
block_M = 128
dtype = "float32"


@tilelang.jit(target="tpu", out_idx=[-1])
@T.prim_func
def reduce_max(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, 1), dtype)):
    with T.Kernel(1, T.ceildiv(M, block_M), threads=1) as (bx, by):
        X_shared = T.alloc_shared((block_M, N), dtype)
        Y_shared = T.alloc_shared((block_M, 1), dtype)
        T.copy(X[by * block_M, 0], X_shared)
        T.reduce_max(X_shared, Y_shared, dim=1)
        T.copy(Y_shared, Y[by * block_M, bx])


def main() -> None:
    x = torch.randn(M, N)
    y = torch.empty(M, 1)
    reduce_max[(1,)](x, y)
    torch.testing.assert_close(y, x.amax(dim=1, keepdim=True), rtol=0, atol=0)
    print("reduce_max: matches torch")

    profiler = reduce_max.get_profiler()
    latency = profiler.do_bench(n_warmup=1, n_repeat=3)
    print(f"reduce_max {M}x{N}: {latency:.3f} ms per call (emulator wall time when no card is present)")


if __name__ == "__main__":
    main()
