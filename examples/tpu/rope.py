"""Rotary position embedding (RoPE, rotate-half form) on a SophGo TPU, written as TileLang
users write it: a block of rows staged in a tile, the rotation in one ``T.Parallel`` whose
operands are read at an offset (``x[i, j + half]``) and per position (``cos[i, j]``).

    python examples/tpu/rope.py
"""

import tilelang
import tilelang.language as T
import torch


def rope(S: int, D: int, block_S: int, dtype: str = "float32"):
    half = D // 2

    @T.prim_func
    def main(X: T.Tensor((S, D), dtype), Cos: T.Tensor((S, half), dtype), Sin: T.Tensor((S, half), dtype), Y: T.Tensor((S, D), dtype)):
        with T.Kernel(T.ceildiv(S, block_S), threads=128) as bx:
            x = T.alloc_shared((block_S, D), dtype)
            c = T.alloc_shared((block_S, half), dtype)
            s = T.alloc_shared((block_S, half), dtype)
            y = T.alloc_fragment((block_S, D), dtype)
            T.copy(X[bx * block_S, 0], x)
            T.copy(Cos[bx * block_S, 0], c)
            T.copy(Sin[bx * block_S, 0], s)
            for i, j in T.Parallel(block_S, half):
                y[i, j] = x[i, j] * c[i, j] - x[i, j + half] * s[i, j]
                y[i, j + half] = x[i, j + half] * c[i, j] + x[i, j] * s[i, j]
            T.copy(y, Y[bx * block_S, 0])

    return main


def reference(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[1] // 2
    x1, x2 = x[:, :half], x[:, half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=1)


def main() -> None:
    S, D, block_S = 130, 64, 64
    kernel = tilelang.compile(rope(S, D, block_S), target="tpu", out_idx=[-1])
    position = torch.arange(S, dtype=torch.float32)[:, None]
    freq = 10000.0 ** (-torch.arange(D // 2, dtype=torch.float32) / (D // 2))
    cos, sin = torch.cos(position * freq), torch.sin(position * freq)
    x = torch.randn(S, D)
    y = kernel(x, cos, sin)
    torch.testing.assert_close(y, reference(x, cos, sin), rtol=1e-5, atol=1e-5)
    print("rope: matches torch")

    profiler = kernel.get_profiler()
    latency = profiler.do_bench(n_warmup=1, n_repeat=3)
    print(f"rope {S}x{D}: {latency:.3f} ms per call (emulator wall time when no card is present)")


if __name__ == "__main__":
    main()
