"""Mixture-of-experts routing on a SophGo TPU, written as TileLang users write it: a top-k
router (upstream's ``examples/topk``: ``T.reduce_max``, the arg-max by index with
``T.if_then_else``, the chosen logit masked out, k times), then a grouped GEMM by expert id
(upstream's ``examples/fusedmoe``: each block reads its expert from ``group_idx_for_bx[bx]``
and copies that expert's weights, ``W[expert, :, :]``), its token rows gathered by id.

The host side is torch, as upstream's: tokens sorted by expert, each expert's rows padded
to whole blocks, and the weighted sum of each token's expert outputs.

    python examples/tpu/moe_routing.py
"""

import tilelang
import tilelang.language as T
import torch


def topk_router(num_tokens, num_experts, topk, blk_m, dtype="float32"):
    @T.prim_func
    def router(
        Logits: T.Tensor((num_tokens, num_experts), dtype),
        TopkGates: T.Tensor((num_tokens, topk), dtype),
        TopkIds: T.Tensor((num_tokens, topk), "int32"),
    ):
        with T.Kernel(T.ceildiv(num_tokens, blk_m), threads=128) as bx:
            logits = T.alloc_fragment((blk_m, num_experts), dtype)
            max_val = T.alloc_fragment((blk_m,), dtype)
            expand_idx = T.alloc_fragment((blk_m, num_experts), "int32")
            max_idx = T.alloc_fragment((blk_m,), "int32")
            T.copy(Logits[bx * blk_m, 0], logits)
            for k in T.serial(topk):
                T.fill(expand_idx, -1)
                T.reduce_max(logits, max_val, dim=1, clear=True)
                for i, j in T.Parallel(blk_m, num_experts):
                    expand_idx[i, j] = T.if_then_else(max_val[i] == logits[i, j], j, expand_idx[i, j])
                T.reduce_max(expand_idx, max_idx, dim=1, clear=True)
                for i, j in T.Parallel(blk_m, num_experts):
                    logits[i, j] = T.if_then_else(max_val[i] == logits[i, j], -10000.0, logits[i, j])
                for i in T.Parallel(blk_m):
                    TopkGates[bx * blk_m + i, k] = max_val[i]
                    TopkIds[bx * blk_m + i, k] = max_idx[i]

    return router


def expert_gemm(num_tokens, num_blocks, num_experts, d_in, d_out, block_token, block_n, block_k, dtype="float16"):
    rows = num_blocks * block_token

    @T.prim_func
    def grouped(
        X: T.Tensor((num_tokens, d_in), dtype),
        W: T.Tensor((num_experts, d_out, d_in), dtype),
        SortedTokens: T.Tensor((rows,), "int32"),
        group_idx_for_bx: T.Tensor((num_blocks,), "int32"),
        Y: T.Tensor((rows, d_out), dtype),
    ):
        with T.Kernel(num_blocks, T.ceildiv(d_out, block_n), threads=128) as (bx, by):
            x_s = T.alloc_shared((block_token, block_k), dtype)
            w_s = T.alloc_shared((block_n, block_k), dtype)
            acc = T.alloc_fragment((block_token, block_n), "float32")
            expert = group_idx_for_bx[bx]
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(d_in, block_k), num_stages=2):
                for i, j in T.Parallel(block_token, block_k):  # the block's token rows, gathered by id
                    x_s[i, j] = X[SortedTokens[bx * block_token + i], k * block_k + j]
                T.copy(W[expert, by * block_n : (by + 1) * block_n, k * block_k : (k + 1) * block_k], w_s)
                T.gemm(x_s, w_s, acc, transpose_B=True)
            T.copy(acc, Y[bx * block_token, by * block_n])

    return grouped


def group_by_expert(ids: torch.Tensor, num_experts: int, block_token: int):
    """(token of each padded row, expert of each block, each row's (token, k) slot or -1)."""
    flat = ids.flatten()
    order = torch.argsort(flat, stable=True)
    counts = torch.bincount(flat, minlength=num_experts).tolist()
    tokens, slots, group_idx_for_bx = [], [], []
    start = 0
    for expert, count in enumerate(counts):
        blocks = -(-count // block_token)
        chosen = order[start : start + count].tolist()
        start += count
        padded = chosen + [-1] * (blocks * block_token - count)
        slots += padded
        tokens += [s // ids.shape[1] if s >= 0 else 0 for s in padded]
        group_idx_for_bx += [expert] * blocks
    as_int = lambda v: torch.tensor(v, dtype=torch.int32)  # noqa: E731
    return as_int(tokens), as_int(group_idx_for_bx), torch.tensor(slots)


def moe(x, router_logits, w, topk, block_token=64, block_n=64, block_k=64):
    num_tokens, d_in = x.shape
    num_experts, d_out, _ = w.shape
    router = tilelang.compile(topk_router(num_tokens, num_experts, topk, 64), target="tpu", out_idx=[1, 2])
    gates, ids = router(router_logits)
    gates = gates.softmax(dim=-1)
    tokens, groups, slots = group_by_expert(ids, num_experts, block_token)
    grouped = tilelang.compile(
        expert_gemm(num_tokens, len(groups), num_experts, d_in, d_out, block_token, block_n, block_k), target="tpu", out_idx=[-1]
    )
    y = grouped(x, w, tokens, groups).float()
    out = torch.zeros(num_tokens, d_out)
    valid = slots >= 0
    weight = gates.flatten()[slots[valid]]
    out.index_add_(0, tokens[valid].long(), y[valid] * weight[:, None])
    return out.to(x.dtype), gates, ids


def reference(x, router_logits, w, topk):
    gates, ids = router_logits.topk(topk, dim=1)
    gates = gates.softmax(dim=-1)
    out = torch.zeros(x.shape[0], w.shape[1])
    for k in range(topk):
        per_token = torch.einsum("td,tod->to", x.float(), w[ids[:, k]].float())
        out += per_token * gates[:, k : k + 1]
    return out.to(x.dtype), gates, ids.to(torch.int32)


def main() -> None:
    num_tokens, num_experts, topk, d_in, d_out = 100, 8, 2, 128, 96
    x = torch.randn(num_tokens, d_in, dtype=torch.float16)
    w = torch.randn(num_experts, d_out, d_in, dtype=torch.float16) / d_in**0.5
    router_logits = torch.randn(num_tokens, num_experts)
    out, gates, ids = moe(x, router_logits, w, topk)
    ref, ref_gates, ref_ids = reference(x, router_logits, w, topk)
    torch.testing.assert_close(ids, ref_ids, rtol=0, atol=0)
    torch.testing.assert_close(gates, ref_gates, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(out, ref, rtol=1e-2, atol=1e-2)
    print("moe_routing: matches torch")

    import time

    start = time.perf_counter()
    moe(x, router_logits, w, topk)
    print(
        f"moe_routing {num_tokens} tokens x {num_experts} experts, top-{topk}: {(time.perf_counter() - start) * 1e3:.3f} ms per call (emulator wall time when no card is present)"
    )


if __name__ == "__main__":
    main()
