"""Flash attention forward on a SophGo TPU, written as tile-ai/tilelang's
``examples/flash_attention/example_mha_fwd_bshd.py`` writes it, compiled with
``tilelang.compile(func, target="tpu", out_idx=[3])``.

bshd tensors, ``T.gemm(Q, K, S, transpose_B=True)`` (PPL ``fmm2_nt``), per-row
``scores_max``/``scores_scale``/``logsum`` fragments, ``T.exp2`` with
``log2(e) / sqrt(dim)``, a causal mask with ``T.if_then_else`` on block and loop
indices, the K/V loop in ``T.Pipelined``; upstream's default 128 x 128 blocks fit
BM1690's local memory at dim 64.  Runs on the BM1690 emulator when no card is
present (sized for seconds).

    python examples/tpu/flash_attention.py
"""

import tilelang
import tilelang.language as T
import torch
import torch.nn.functional as F


def flashattn(
    batch: int, heads: int, seq_len: int, dim: int, is_causal: bool, block_M: int = 128, block_N: int = 128, dtype: str = "float16"
):
    scale = (1.0 / dim) ** 0.5 * 1.44269504  # log2(e)
    shape = [batch, seq_len, heads, dim]
    accum_dtype = "float32"

    @T.prim_func
    def main(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype), Output: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=128) as (bx, by, bz):
            Q_shared = T.alloc_shared([block_M, dim], dtype)
            K_shared = T.alloc_shared([block_N, dim], dtype)
            V_shared = T.alloc_shared([block_N, dim], dtype)
            O_shared = T.alloc_shared([block_M, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum_dtype)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum_dtype)
            scores_max = T.alloc_fragment([block_M], accum_dtype)
            scores_max_prev = T.alloc_fragment([block_M], accum_dtype)
            scores_scale = T.alloc_fragment([block_M], accum_dtype)
            scores_sum = T.alloc_fragment([block_M], accum_dtype)
            logsum = T.alloc_fragment([block_M], accum_dtype)

            T.copy(Q[bz, bx * block_M : (bx + 1) * block_M, by, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(accum_dtype))
            loop_range = (
                T.min(T.ceildiv(seq_len, block_N), T.ceildiv((bx + 1) * block_M, block_N)) if is_causal else T.ceildiv(seq_len, block_N)
            )
            for k in T.Pipelined(loop_range, num_stages=1):
                T.copy(K[bz, k * block_N : (k + 1) * block_N, by, :], K_shared)
                if is_causal:
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.if_then_else(bx * block_M + i >= k * block_N + j, 0, -T.infinity(acc_s.dtype))
                else:
                    T.clear(acc_s)
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True)
                T.copy(scores_max, scores_max_prev)
                T.fill(scores_max, -T.infinity(accum_dtype))
                T.reduce_max(acc_s, scores_max, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
                T.reduce_sum(acc_s, scores_sum, dim=1)
                for i in T.Parallel(block_M):
                    logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= scores_scale[i]
                T.copy(V[bz, k * block_N : (k + 1) * block_N, by, :], V_shared)
                T.gemm(acc_s_cast, V_shared, acc_o)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= logsum[i]
            T.copy(acc_o, O_shared)
            T.copy(O_shared, Output[bz, bx * block_M : (bx + 1) * block_M, by, :])

    return main


def ref_program(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, is_causal: bool) -> torch.Tensor:
    q, k, v = (t.float().transpose(1, 2) for t in (Q, K, V))
    return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal).transpose(1, 2).to(Q.dtype)


def main() -> None:
    batch, heads, seq_len, dim = 1, 2, 256, 64
    for is_causal in (False, True):
        kernel = tilelang.compile(flashattn(batch, heads, seq_len, dim, is_causal), target="tpu", out_idx=[3])
        q, k, v = (torch.randn(batch, seq_len, heads, dim).half() for _ in range(3))
        torch.testing.assert_close(kernel(q, k, v), ref_program(q, k, v, is_causal), rtol=1e-2, atol=1e-2)
        profiler = kernel.get_profiler()
        latency = profiler.do_bench(n_warmup=1, n_repeat=3)
        kind = "causal" if is_causal else "non-causal"
        print(
            f"flash_attention {kind} b{batch} h{heads} s{seq_len} d{dim} fp16, 128x128 blocks: {latency:.3f} ms per call (emulator wall time when no card is present)"
        )
    print("flash_attention: matches torch")


if __name__ == "__main__":
    main()
