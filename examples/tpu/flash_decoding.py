"""Flash decoding (split-KV attention, then a combine) on a SophGo TPU, written as TileLang
users write it: upstream's ``examples/flash_decoding`` structure in its two-kernel form.

The first kernel gives each of ``num_split`` blocks a slice of the keys and values: an online
softmax over it (``T.gemm``, ``T.reduce_max``, ``T.exp2``, ``T.reduce_sum``) writes a partial
output and its log-sum-exp.  The second kernel combines the splits, weighting each partial
output by ``exp2(lse_split - lse_total)``.  Q, K, V and the output are ``[batch, seq, heads,
dim]`` (bshd) and the partial outputs ``[batch, seq, heads, num_split, dim]`` (rank 5): each
block copies its head's ``[rows, dim]`` slice.

Upstream writes both kernels in one ``prim_func`` with the partial results in
``T.alloc_global`` workspaces; the tpu target compiles one ``T.Kernel`` per ``prim_func``, so
here the workspaces are tensors the caller allocates and passes to both kernels.

    python examples/tpu/flash_decoding.py
"""

import tilelang
import tilelang.language as T
import torch


def split_kv(batch, heads, seqlen_q, seqlen_kv, dim, num_split, block_M, block_N, dtype="float16"):
    scale = (1.0 / dim) ** 0.5 * 1.44269504  # log2(e): exp2 instead of exp
    accum = "float32"
    part = seqlen_kv // num_split

    @T.prim_func
    def split(
        Q: T.Tensor((batch, seqlen_q, heads, dim), dtype),
        K: T.Tensor((batch, seqlen_kv, heads, dim), dtype),
        V: T.Tensor((batch, seqlen_kv, heads, dim), dtype),
        Lse: T.Tensor((batch, heads, num_split, seqlen_q), accum),
        Partial: T.Tensor((batch, seqlen_q, heads, num_split, dim), accum),
    ):
        with T.Kernel(T.ceildiv(seqlen_q, block_M), heads * batch, num_split, threads=128) as (bx, by, bz):
            q_s = T.alloc_shared((block_M, dim), dtype)
            k_s = T.alloc_shared((block_N, dim), dtype)
            v_s = T.alloc_shared((block_N, dim), dtype)
            acc_s = T.alloc_fragment((block_M, block_N), accum)
            acc_s_cast = T.alloc_fragment((block_M, block_N), dtype)
            acc_o = T.alloc_fragment((block_M, dim), accum)
            m = T.alloc_fragment((block_M,), accum)
            m_prev = T.alloc_fragment((block_M,), accum)
            rescale = T.alloc_fragment((block_M,), accum)
            row_sum = T.alloc_fragment((block_M,), accum)
            logsum = T.alloc_fragment((block_M,), accum)
            hid = by % heads
            bid = by // heads

            T.copy(Q[bid, bx * block_M : (bx + 1) * block_M, hid, :], q_s)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(T.ceildiv(part, block_N), num_stages=2):
                T.copy(K[bid, part * bz + k * block_N : part * bz + (k + 1) * block_N, hid, :], k_s)
                T.clear(acc_s)
                T.gemm(q_s, k_s, acc_s, transpose_B=True)
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    rescale[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale)
                T.reduce_sum(acc_s, row_sum, dim=1)
                for i in T.Parallel(block_M):
                    logsum[i] = logsum[i] * rescale[i] + row_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= rescale[i]
                T.copy(V[bid, part * bz + k * block_N : part * bz + (k + 1) * block_N, hid, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= logsum[i]
            for i in T.Parallel(block_M):
                logsum[i] = T.log2(logsum[i]) + m[i] * scale
            T.copy(logsum, Lse[bid, hid, bz, bx * block_M : (bx + 1) * block_M])
            T.copy(acc_o, Partial[bid, bx * block_M : (bx + 1) * block_M, hid, bz, :])

    return split


def combine(batch, heads, seqlen_q, dim, num_split, block_M, dtype="float16"):
    accum = "float32"

    @T.prim_func
    def merge(
        Lse: T.Tensor((batch, heads, num_split, seqlen_q), accum),
        Partial: T.Tensor((batch, seqlen_q, heads, num_split, dim), accum),
        Output: T.Tensor((batch, seqlen_q, heads, dim), dtype),
    ):
        with T.Kernel(T.ceildiv(seqlen_q, block_M), heads, batch, threads=128) as (bx, by, bz):
            po = T.alloc_fragment((block_M, dim), accum)
            o = T.alloc_fragment((block_M, dim), accum)
            lse = T.alloc_fragment((num_split, block_M), accum)
            lse_split = T.alloc_fragment((block_M,), accum)
            lse_max = T.alloc_fragment((block_M,), accum)
            lse_total = T.alloc_fragment((block_M,), accum)
            weight = T.alloc_fragment((block_M,), accum)

            T.clear(lse_total)
            T.clear(o)
            T.copy(Lse[bz, by, :, bx * block_M : (bx + 1) * block_M], lse)
            T.reduce_max(lse, lse_max, dim=0, clear=True)
            for k in T.Pipelined(num_split):
                T.copy(lse[k, :], lse_split)
                for i in T.Parallel(block_M):
                    lse_total[i] += T.exp2(lse_split[i] - lse_max[i])
            for i in T.Parallel(block_M):
                lse_total[i] = T.log2(lse_total[i]) + lse_max[i]
            for k in T.Pipelined(num_split, num_stages=2):
                T.copy(Partial[bz, bx * block_M : (bx + 1) * block_M, by, k, :], po)
                for i in T.Parallel(block_M):
                    lse_split[i] = lse[k, i]
                for i in T.Parallel(block_M):
                    weight[i] = T.exp2(lse_split[i] - lse_total[i])
                for i, j in T.Parallel(block_M, dim):
                    o[i, j] += po[i, j] * weight[i]
            T.copy(o, Output[bz, bx * block_M : (bx + 1) * block_M, by, :])

    return merge


def flash_decoding(batch, heads, seqlen_q, seqlen_kv, dim, num_split=4, block_M=64, block_N=64):
    """``attention(q, k, v)`` as the two compiled kernels, with the workspaces allocated per call."""
    first = tilelang.compile(split_kv(batch, heads, seqlen_q, seqlen_kv, dim, num_split, block_M, block_N), target="tpu")
    second = tilelang.compile(combine(batch, heads, seqlen_q, dim, num_split, block_M), target="tpu", out_idx=[-1])

    def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        lse = torch.empty(batch, heads, num_split, seqlen_q)
        partial = torch.empty(batch, seqlen_q, heads, num_split, dim)
        first(q, k, v, lse, partial)
        return second(lse, partial)

    return attention


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    scores = torch.einsum("bqhd,bkhd->bhqk", q.float(), k.float()) / q.shape[-1] ** 0.5
    return torch.einsum("bhqk,bkhd->bqhd", scores.softmax(dim=-1), v.float()).to(q.dtype)


def main() -> None:
    batch, heads, seqlen_q, seqlen_kv, dim = 1, 2, 64, 512, 64
    attention = flash_decoding(batch, heads, seqlen_q, seqlen_kv, dim)
    q = torch.randn(batch, seqlen_q, heads, dim, dtype=torch.float16)
    k = torch.randn(batch, seqlen_kv, heads, dim, dtype=torch.float16)
    v = torch.randn(batch, seqlen_kv, heads, dim, dtype=torch.float16)
    out = attention(q, k, v)
    torch.testing.assert_close(out, reference(q, k, v), rtol=1e-2, atol=1e-2)
    print("flash_decoding: matches torch")

    import time

    start = time.perf_counter()
    attention(q, k, v)
    print(
        f"flash_decoding {batch}x{heads}x{seqlen_q}x{seqlen_kv}x{dim}: {(time.perf_counter() - start) * 1e3:.3f} ms per call (emulator wall time when no card is present)"
    )


if __name__ == "__main__":
    main()
