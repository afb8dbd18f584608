"""Kernels written the way tile-ai/tilelang's ``examples/`` write them (norms, online
softmax, flash attention in the bshd and bhsd layouts), shared by the TPU tests, examples/tpu
and benchmarks/tpu_vs_ppl.py.  Importable from the tests folder (conftest.py puts it
on ``sys.path``)."""

from typing import Any

import tilelang.language as T

LOG2E = 1.44269504


def rmsnorm_kernel(M: int, N: int, blk_m: int, dtype: str = "float32", eps: float = 1e-6) -> Any:
    """``Y = X * rsqrt(mean(X^2) + eps) * W`` with the norm weight read as ``w[j]``."""

    @T.prim_func
    def rms_norm(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, blk_m), threads=128) as bx:
            x_shared = T.alloc_shared((blk_m, N), dtype)
            w_shared = T.alloc_shared((N,), dtype)
            x_local = T.alloc_fragment((blk_m, N), "float32")
            sq = T.alloc_fragment((blk_m, N), "float32")
            powsum = T.alloc_fragment((blk_m,), "float32")
            T.copy(X[bx * blk_m : (bx + 1) * blk_m, :], x_shared)
            T.copy(W, w_shared)
            T.copy(x_shared, x_local)
            for i, j in T.Parallel(blk_m, N):
                sq[i, j] = x_local[i, j] * x_local[i, j]
            T.reduce_sum(sq, powsum, dim=1)
            for i in T.Parallel(blk_m):
                powsum[i] = T.rsqrt(powsum[i] / N + eps)
            for i, j in T.Parallel(blk_m, N):
                x_local[i, j] = x_local[i, j] * powsum[i] * w_shared[j]
            T.copy(x_local, Y[bx * blk_m : (bx + 1) * blk_m, :])

    return rms_norm


def layernorm_kernel(M: int, N: int, blk_m: int, dtype: str = "float32", eps: float = 1e-5) -> Any:
    """LayerNorm with weight and bias, also storing the per-row ``Mean`` and ``Rstd``
    from inside ``T.Parallel`` (as upstream's layer-norm forward does)."""

    @T.prim_func
    def layer_norm(
        X: T.Tensor((M, N), dtype),
        Weight: T.Tensor((N,), dtype),
        Bias: T.Tensor((N,), dtype),
        Y: T.Tensor((M, N), dtype),
        Mean: T.Tensor((M,), "float32"),
        Rstd: T.Tensor((M,), "float32"),
    ):
        with T.Kernel(T.ceildiv(M, blk_m), threads=128) as bx:
            x = T.alloc_fragment((blk_m, N), "float32")
            w = T.alloc_shared((N,), dtype)
            b = T.alloc_shared((N,), dtype)
            centered = T.alloc_fragment((blk_m, N), "float32")
            mean = T.alloc_fragment((blk_m,), "float32")
            var = T.alloc_fragment((blk_m,), "float32")
            T.copy(X[bx * blk_m, 0], x)
            T.copy(Weight, w)
            T.copy(Bias, b)
            T.reduce_sum(x, mean, dim=1)
            for i in T.Parallel(blk_m):
                mean[i] = mean[i] / N
            for i, j in T.Parallel(blk_m, N):
                diff = x[i, j] - mean[i]  # a temporary inside T.Parallel
                centered[i, j] = diff * diff
            T.reduce_sum(centered, var, dim=1)
            for i in T.Parallel(blk_m):
                var[i] = T.rsqrt(var[i] / N + eps)
            for i in T.Parallel(blk_m):
                Mean[bx * blk_m + i] = mean[i]
                Rstd[bx * blk_m + i] = var[i]
            for i, j in T.Parallel(blk_m, N):
                x[i, j] = (x[i, j] - mean[i]) * var[i] * w[j] + b[j]
            T.copy(x, Y[bx * blk_m, 0])

    return layer_norm


def online_softmax_kernel(M: int, N: int, blk_m: int, blk_n: int, dtype: str = "float32") -> Any:
    """Softmax over rows of any length in ``blk_n`` column blocks: a first pass keeps a
    running max and a rescaled running sum (``T.exp2`` with ``log2(e)``), a second
    pass writes ``exp2((x - max) * log2 e) / sum``.  Named ``softmax_kernel`` like
    upstream's online softmax example."""
    n_blocks = N // blk_n

    @T.prim_func
    def softmax_kernel(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, blk_m), threads=128) as bx:
            x = T.alloc_fragment((blk_m, blk_n), "float32")
            y = T.alloc_fragment((blk_m, blk_n), dtype)
            m = T.alloc_fragment((blk_m,), "float32")
            m_prev = T.alloc_fragment((blk_m,), "float32")
            blk_max = T.alloc_fragment((blk_m,), "float32")
            blk_sum = T.alloc_fragment((blk_m,), "float32")
            lse = T.alloc_fragment((blk_m,), "float32")
            T.fill(m, -T.infinity("float32"))
            T.fill(lse, 0.0)
            for k in T.Pipelined(n_blocks, num_stages=1):
                T.copy(X[bx * blk_m, k * blk_n], x)
                T.copy(m, m_prev)
                T.reduce_max(x, blk_max, dim=1)
                for i in T.Parallel(blk_m):
                    m[i] = T.max(m_prev[i], blk_max[i])
                for i, j in T.Parallel(blk_m, blk_n):
                    x[i, j] = T.exp2((x[i, j] - m[i]) * LOG2E)
                T.reduce_sum(x, blk_sum, dim=1)
                for i in T.Parallel(blk_m):
                    lse[i] = lse[i] * T.exp2((m_prev[i] - m[i]) * LOG2E) + blk_sum[i]
            for k in T.Pipelined(n_blocks, num_stages=1):
                T.copy(X[bx * blk_m, k * blk_n], x)
                for i, j in T.Parallel(blk_m, blk_n):
                    y[i, j] = T.exp2((x[i, j] - m[i]) * LOG2E) / lse[i]
                T.copy(y, Y[bx * blk_m, k * blk_n])

    return softmax_kernel


def flash_attention_kernel(
    batch: int, heads: int, seq_len: int, dim: int, is_causal: bool, block_M: int = 128, block_N: int = 128, dtype: str = "float16"
) -> Any:
    """Flash attention forward, bshd layout, as upstream's example_mha_fwd_bshd writes it:
    ``T.gemm(..., transpose_B=True)``, per-row ``scores_max``/``scores_scale``/``logsum``
    fragments, ``T.exp2`` with ``log2(e) / sqrt(dim)``, a causal mask with
    ``T.if_then_else`` on block and loop indices, the K/V loop in ``T.Pipelined``."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    shape = [batch, seq_len, heads, dim]
    accum = "float32"

    @T.prim_func
    def flash_attention(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype), Output: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=128) as (bx, by, bz):
            Q_shared = T.alloc_shared([block_M, dim], dtype)
            K_shared = T.alloc_shared([block_N, dim], dtype)
            V_shared = T.alloc_shared([block_N, dim], dtype)
            O_shared = T.alloc_shared([block_M, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            scores_max = T.alloc_fragment([block_M], accum)
            scores_max_prev = T.alloc_fragment([block_M], accum)
            scores_scale = T.alloc_fragment([block_M], accum)
            scores_sum = T.alloc_fragment([block_M], accum)
            logsum = T.alloc_fragment([block_M], accum)

            T.copy(Q[bz, bx * block_M : (bx + 1) * block_M, by, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(accum))
            loop_range = (
                T.min(T.ceildiv(seq_len, block_N), T.ceildiv((bx + 1) * block_M, block_N)) if is_causal else T.ceildiv(seq_len, block_N)
            )
            for k in T.Pipelined(loop_range, num_stages=1):
                T.copy(K[bz, k * block_N : (k + 1) * block_N, by, :], K_shared)
                if is_causal:
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.if_then_else(bx * block_M + i >= k * block_N + j, 0, -T.infinity(accum))
                else:
                    T.clear(acc_s)
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True)
                T.copy(scores_max, scores_max_prev)
                T.fill(scores_max, -T.infinity(accum))
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

    return flash_attention


def flash_attention_bhsd_kernel(
    batch: int, heads: int, seq_q: Any, seq_kv: Any, dim: int, is_causal: bool, block_M: int = 64, block_N: int = 64, dtype: str = "float16"
) -> Any:
    """Flash attention forward, bhsd layout, as upstream's example_mha_fwd_bhsd writes it: the
    steps in ``T.macro``s, queries and keys of their own lengths (the causal mask offset by
    ``past_len = seq_kv - seq_q``), each block a 2-D slice ``Q[bz, by, rows, :]`` of a 4-D tensor."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    q_shape = [batch, heads, seq_q, dim]
    kv_shape = [batch, heads, seq_kv, dim]
    accum = "float32"
    past_len = seq_kv - seq_q

    @T.macro
    def scores(K: T.Tensor(kv_shape, dtype), Q_shared: Any, K_shared: Any, acc_s: Any, k: Any, bx: Any, by: Any, bz: Any):
        T.copy(K[bz, by, k * block_N : (k + 1) * block_N, :], K_shared)
        if is_causal:
            for i, j in T.Parallel(block_M, block_N):
                q_idx = bx * block_M + i + past_len
                k_idx = k * block_N + j
                acc_s[i, j] = T.if_then_else(q_idx >= k_idx, 0, -T.infinity(accum))
        else:
            T.clear(acc_s)
        T.gemm(Q_shared, K_shared, acc_s, transpose_B=True)

    @T.macro
    def online_softmax(acc_s: Any, acc_s_cast: Any, scores_max: Any, scores_max_prev: Any, scores_scale: Any, scores_sum: Any, logsum: Any):
        T.copy(scores_max, scores_max_prev)
        T.fill(scores_max, -T.infinity(accum))
        T.reduce_max(acc_s, scores_max, dim=1, clear=False)
        for i in T.Parallel(block_M):
            scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
        for i, j in T.Parallel(block_M, block_N):
            acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
        T.reduce_sum(acc_s, scores_sum, dim=1)
        for i in T.Parallel(block_M):
            logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
        T.copy(acc_s, acc_s_cast)

    @T.prim_func
    def flash_attention_bhsd(
        Q: T.Tensor(q_shape, dtype), K: T.Tensor(kv_shape, dtype), V: T.Tensor(kv_shape, dtype), Output: T.Tensor(q_shape, dtype)
    ):
        with T.Kernel(T.ceildiv(seq_q, block_M), heads, batch, threads=128) as (bx, by, bz):
            Q_shared = T.alloc_shared([block_M, dim], dtype)
            K_shared = T.alloc_shared([block_N, dim], dtype)
            V_shared = T.alloc_shared([block_N, dim], dtype)
            O_shared = T.alloc_shared([block_M, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            scores_max = T.alloc_fragment([block_M], accum)
            scores_max_prev = T.alloc_fragment([block_M], accum)
            scores_scale = T.alloc_fragment([block_M], accum)
            scores_sum = T.alloc_fragment([block_M], accum)
            logsum = T.alloc_fragment([block_M], accum)

            T.copy(Q[bz, by, bx * block_M : (bx + 1) * block_M, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(accum))
            loop_range = (
                T.min(T.ceildiv(seq_kv, block_N), T.ceildiv((bx + 1) * block_M + past_len, block_N))
                if is_causal
                else T.ceildiv(seq_kv, block_N)
            )
            for k in T.Pipelined(loop_range, num_stages=1):
                scores(K, Q_shared, K_shared, acc_s, k, bx, by, bz)
                online_softmax(acc_s, acc_s_cast, scores_max, scores_max_prev, scores_scale, scores_sum, logsum)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= scores_scale[i]
                T.copy(V[bz, by, k * block_N : (k + 1) * block_N, :], V_shared)
                T.gemm(acc_s_cast, V_shared, acc_o)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= logsum[i]
            T.copy(acc_o, O_shared)
            T.copy(O_shared, Output[bz, by, bx * block_M : (bx + 1) * block_M, :])

    return flash_attention_bhsd


def topk_kernel(M: int, N: int, topk: int, blk_m: int, dtype: str = "float32") -> Any:
    """The k largest of each row with their indices, as upstream's examples/topk writes it:
    a loop of ``T.reduce_max``, the argmax as the ``T.reduce_max`` of an int32 tile of
    ``T.if_then_else(max_val[i] == logits[i, j], j, -1)``, the found maxima masked with
    ``-10000``, and per-row results stored from inside ``T.Parallel``.

    On a row with tied values the kernel returns the highest index of the tie and masks
    every tied element at once (the same on every target): it matches ``torch.topk`` on
    rows of distinct values."""

    @T.prim_func
    def topk_kernel(
        logits: T.Tensor([M, N], dtype),
        topk_gates: T.Tensor([M, topk], dtype),
        topk_indices: T.Tensor([M, topk], "int32"),
    ):
        with T.Kernel(T.ceildiv(M, blk_m), threads=128) as bx:
            logits_frag = T.alloc_fragment([blk_m, N], dtype=dtype)
            max_val = T.alloc_fragment([blk_m], dtype=dtype)
            expand_max_idx = T.alloc_fragment([blk_m, N], "int32")
            max_idx = T.alloc_fragment([blk_m], "int32")

            T.copy(logits[bx * blk_m, 0], logits_frag)

            for k in T.serial(topk):
                T.fill(expand_max_idx, -1)
                T.reduce_max(logits_frag, max_val, dim=1, clear=True)

                for i, j in T.Parallel(blk_m, N):
                    expand_max_idx[i, j] = T.if_then_else(max_val[i] == logits_frag[i, j], j, expand_max_idx[i, j])

                T.reduce_max(expand_max_idx, max_idx, dim=1, clear=True)

                for i, j in T.Parallel(blk_m, N):
                    logits_frag[i, j] = T.if_then_else(max_val[i] == logits_frag[i, j], -10000.0, logits_frag[i, j])

                for i in T.Parallel(blk_m):
                    topk_gates[bx * blk_m + i, k] = max_val[i]
                    topk_indices[bx * blk_m + i, k] = max_idx[i]

    return topk_kernel
