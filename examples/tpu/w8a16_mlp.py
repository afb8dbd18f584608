"""A weight-only int8 (w8a16) MLP on a SophGo TPU, written as TileLang users write it: fp16
activations, int8 weights with a per-output-channel fp16 scale, each GEMM dequantising its
weight tile in ``T.Parallel`` (int8 -> fp16) before ``T.gemm``, the scale applied to the fp32
accumulator.  The MLP is LLaMA's: ``down(silu(gate(x)) * up(x))``, the gate and up
projections fused in one kernel (two accumulators, SiLU in the epilogue).

    python examples/tpu/w8a16_mlp.py
"""

import tilelang
import tilelang.language as T
import torch


def gate_up(M, N, K, block_M=64, block_N=64, block_K=64, dtype="float16"):
    @T.prim_func
    def fused(
        X: T.Tensor((M, K), dtype),
        Wg: T.Tensor((N, K), "int8"),
        Sg: T.Tensor((N,), dtype),
        Wu: T.Tensor((N, K), "int8"),
        Su: T.Tensor((N,), dtype),
        H: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            x_s = T.alloc_shared((block_M, block_K), dtype)
            wg_q = T.alloc_shared((block_N, block_K), "int8")
            wu_q = T.alloc_shared((block_N, block_K), "int8")
            wg_s = T.alloc_shared((block_N, block_K), dtype)
            wu_s = T.alloc_shared((block_N, block_K), dtype)
            sg = T.alloc_shared((block_N,), dtype)
            su = T.alloc_shared((block_N,), dtype)
            gate = T.alloc_fragment((block_M, block_N), "float32")
            up = T.alloc_fragment((block_M, block_N), "float32")
            h = T.alloc_fragment((block_M, block_N), dtype)
            T.copy(Sg[bx * block_N], sg)
            T.copy(Su[bx * block_N], su)
            T.clear(gate)
            T.clear(up)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(X[by * block_M, k * block_K], x_s)
                T.copy(Wg[bx * block_N, k * block_K], wg_q)
                T.copy(Wu[bx * block_N, k * block_K], wu_q)
                for i, j in T.Parallel(block_N, block_K):
                    wg_s[i, j] = T.cast(wg_q[i, j], dtype)
                    wu_s[i, j] = T.cast(wu_q[i, j], dtype)
                T.gemm(x_s, wg_s, gate, transpose_B=True)
                T.gemm(x_s, wu_s, up, transpose_B=True)
            for i, j in T.Parallel(block_M, block_N):
                gate[i, j] = gate[i, j] * sg[j]
                h[i, j] = gate[i, j] / (1.0 + T.exp(-gate[i, j])) * (up[i, j] * su[j])
            T.copy(h, H[by * block_M, bx * block_N])

    return fused


def w8a16_gemm(M, N, K, block_M=64, block_N=64, block_K=64, dtype="float16"):
    @T.prim_func
    def gemm(A: T.Tensor((M, K), dtype), W: T.Tensor((N, K), "int8"), Scale: T.Tensor((N,), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            a_s = T.alloc_shared((block_M, block_K), dtype)
            w_q = T.alloc_shared((block_N, block_K), "int8")
            w_s = T.alloc_shared((block_N, block_K), dtype)
            scale = T.alloc_shared((block_N,), dtype)
            acc = T.alloc_fragment((block_M, block_N), "float32")
            c = T.alloc_fragment((block_M, block_N), dtype)
            T.copy(Scale[bx * block_N], scale)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], a_s)
                T.copy(W[bx * block_N, k * block_K], w_q)
                for i, j in T.Parallel(block_N, block_K):
                    w_s[i, j] = T.cast(w_q[i, j], dtype)
                T.gemm(a_s, w_s, acc, transpose_B=True)
            for i, j in T.Parallel(block_M, block_N):
                c[i, j] = acc[i, j] * scale[j]
            T.copy(c, C[by * block_M, bx * block_N])

    return gemm


def quantize(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric per-output-channel int8: ``w ~ q * scale[:, None]``."""
    scale = w.float().abs().amax(dim=1).clamp(min=1e-8) / 127
    q = torch.round(w.float() / scale[:, None]).clamp(-127, 127).to(torch.int8)
    return q, scale.to(torch.float16)


def reference(x, wg, sg, wu, su, wd, sd):
    def linear(a, q, s):
        return (a.float() @ q.float().T) * s.float()

    gate, up = linear(x, wg, sg), linear(x, wu, su)
    h = (torch.nn.functional.silu(gate) * up).to(torch.float16)
    return linear(h, wd, sd).to(torch.float16)


def main() -> None:
    tokens, hidden, inter = 65, 128, 192
    x = torch.randn(tokens, hidden, dtype=torch.float16)
    wg, sg = quantize(torch.randn(inter, hidden) / hidden**0.5)
    wu, su = quantize(torch.randn(inter, hidden) / hidden**0.5)
    wd, sd = quantize(torch.randn(hidden, inter) / inter**0.5)
    first = tilelang.compile(gate_up(tokens, inter, hidden), target="tpu", out_idx=[-1])
    second = tilelang.compile(w8a16_gemm(tokens, hidden, inter), target="tpu", out_idx=[-1])
    y = second(first(x, wg, sg, wu, su), wd, sd)
    torch.testing.assert_close(y, reference(x, wg, sg, wu, su, wd, sd), rtol=2e-2, atol=2e-2)
    print("w8a16_mlp: matches torch")

    profiler = second.get_profiler()
    latency = profiler.do_bench(n_warmup=1, n_repeat=3)
    print(f"w8a16_mlp down projection {tokens}x{inter} -> {hidden}: {latency:.3f} ms per call (emulator wall time when no card is present)")


if __name__ == "__main__":
    main()
