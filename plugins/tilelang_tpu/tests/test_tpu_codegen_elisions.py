"""Instructions the code generator leaves out, and the results that must not change because of it:

* the causal mask of flash attention only in the key blocks it can touch (``codegen.masked_gemm``):
  run on the emulator against torch with blocks that are unmasked, partially masked (64 x 128,
  128 x 64, 64 x 64 blocks) and fully masked (the loop over every key block, mask still applied);
* the zero fill before a K loop whose first GEMM overwrites (``codegen.plan.first_step_gemm``);
* the identity fill before ``T.reduce_*(clear=False)`` (``codegen.plan.clearing_reduce``), and
  the fill kept where it is not the reduction's identity.
"""

import re
from typing import Any

import pytest
import tilelang
import tilelang.language as T
import torch
import torch.nn.functional as F
from tpu_upstream_kernels import LOG2E, flash_attention_kernel

pytestmark = pytest.mark.usefixtures("toolchain")


def _source(func: Any, out_idx: list[int]) -> str:
    return str(tilelang.compile(func, target="tpu:cores=1", out_idx=out_idx).get_kernel_source())


def masked_attention(seq_len: int, dim: int, block_M: int, block_N: int, every_block: bool) -> Any:
    """Causal flash attention (bshd, 1 batch, 2 heads, fp16) as upstream writes it; with
    ``every_block`` the key loop visits every key block, the ones past the diagonal fully masked."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    shape = [1, seq_len, 2, dim]
    accum, dtype = "float32", "float16"

    @T.prim_func
    def attention(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype), Output: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), 2, threads=1) as (bx, by):
            Q_shared = T.alloc_shared([block_M, dim], dtype)
            K_shared = T.alloc_shared([block_N, dim], dtype)
            V_shared = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            scores_max = T.alloc_fragment([block_M], accum)
            scores_max_prev = T.alloc_fragment([block_M], accum)
            scores_scale = T.alloc_fragment([block_M], accum)
            scores_sum = T.alloc_fragment([block_M], accum)
            logsum = T.alloc_fragment([block_M], accum)
            T.copy(Q[0, bx * block_M : (bx + 1) * block_M, by, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(accum))
            loop_range = T.ceildiv(seq_len, block_N) if every_block else T.ceildiv((bx + 1) * block_M, block_N)
            for k in T.Pipelined(loop_range, num_stages=1):
                T.copy(K[0, k * block_N : (k + 1) * block_N, by, :], K_shared)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(bx * block_M + i >= k * block_N + j, 0, -T.infinity(accum))
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True)
                T.copy(scores_max, scores_max_prev)
                T.fill(scores_max, -T.infinity(accum))
                T.reduce_max(acc_s, scores_max, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    scores_max[i] = T.max(scores_max[i], scores_max_prev[i])
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
                T.copy(V[0, k * block_N : (k + 1) * block_N, by, :], V_shared)
                T.gemm(acc_s_cast, V_shared, acc_o)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= logsum[i]
            T.copy(acc_o, Output[0, bx * block_M : (bx + 1) * block_M, by, :])

    return attention


def test_causal_mask_only_where_it_can_change_something() -> None:
    causal = _source(flash_attention_kernel(1, 2, 256, 64, True), [3])
    loop = causal[causal.index("for (int k") :]
    start = loop.index("if ((((bx * 128) - ((k * 128) + 127)) >= 0)) {")  # every key of the block <= every query
    then = loop[start : loop.index("} else {")]
    assert "tiu::fmm2_nt(acc_s, Q_shared, K_shared, false);" in then and "gt_select" not in then
    after_else = loop[loop.index("} else {") :]
    assert after_else.index("tiu::gt_select(acc_s, mask_index") < after_else.index("tiu::fmm2_nt(acc_s, Q_shared, K_shared, true);")
    assert loop.count("tiu::gt_select(acc_s, ") == 1  # only in the else branch


def test_identity_fill_before_reduce_max_is_dropped() -> None:
    for causal in (False, True):
        src = _source(flash_attention_kernel(1, 2, 256, 64, causal), [3])
        loop = src[src.index("for (int k") :]
        assert "tiu::fill(scores_max" not in loop and "racc" not in loop and "tiu::fmax(scores_max" not in loop
        assert re.search(r"quick_pooling\(scores_max, acc_s, ", loop)
        assert "tiu::fill(scores_max, " in src[: src.index("for (int k")]  # the fill before the loop stays


@pytest.mark.parametrize(("block_M", "block_N", "every_block"), [(64, 128, False), (128, 64, False), (64, 64, True), (128, 128, True)])
def test_causal_attention_on_the_emulator(block_M: int, block_N: int, every_block: bool) -> None:
    seq_len, dim = 256, 64
    kernel = tilelang.compile(masked_attention(seq_len, dim, block_M, block_N, every_block), target="tpu", out_idx=[3])
    src = kernel.get_kernel_source()
    assert "the mask keeps every element" in src
    torch.manual_seed(block_M + block_N + every_block)
    q, k, v = (torch.randn(1, seq_len, 2, dim).half() for _ in range(3))
    before = [t.clone() for t in (q, k, v)]
    out = kernel(q, k, v)
    qf, kf, vf = (t.float().transpose(1, 2) for t in (q, k, v))
    expected = F.scaled_dot_product_attention(qf, kf, vf, is_causal=True).transpose(1, 2)
    torch.testing.assert_close(out.float(), expected, rtol=1e-2, atol=1e-2)
    assert all(torch.equal(a, b) for a, b in zip((q, k, v), before, strict=True))


def reduce_after_fill(M: int, N: int, block: int, kind: str, fill: float) -> Any:
    @T.prim_func
    def reduce(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block), threads=1) as bx:
            x = T.alloc_shared((block, N), "float32")
            r = T.alloc_fragment((block,), "float32")
            T.copy(X[bx * block, 0], x)
            T.fill(r, fill)
            if kind == "max":
                T.reduce_max(x, r, dim=1, clear=False)
            else:
                T.reduce_sum(x, r, dim=1, clear=False)
            T.copy(r, Y[bx * block])

    return reduce


@pytest.mark.parametrize(
    ("kind", "fill", "dropped"),
    [("max", float("-inf"), True), ("sum", 0.0, True), ("max", 0.5, False), ("sum", 1.0, False)],
)
@pytest.mark.parametrize(("M", "block"), [(100, 64), (63, 63), (128, 128)])
def test_fill_before_a_reduction(kind: str, fill: float, dropped: bool, M: int, block: int) -> None:
    N = 96
    kernel = tilelang.compile(reduce_after_fill(M, N, block, kind, fill), target="tpu", out_idx=[1])
    src = kernel.get_kernel_source()
    assert ("tiu::fill(r," not in src) is dropped
    assert ("racc" not in src) is dropped  # the combining fmax/fadd goes with the fill
    x = torch.randn(M, N) * 4
    x0 = x.clone()
    y = kernel(x)
    expected = torch.maximum(x.amax(1), torch.tensor(fill)) if kind == "max" else x.sum(1) + fill
    torch.testing.assert_close(y, expected, rtol=1e-5, atol=1e-5)
    assert torch.equal(x, x0)


def halving_matmul(M: int, N: int, K: int, BK: int, halve_first: bool) -> Any:
    """C = sum over K steps of (C / 2 + A_k B_k) when ``halve_first``, else the plain GEMM; the
    clear before the K loop may be dropped only in the plain one (the halving reads C first)."""

    @T.prim_func
    def matmul(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=1) as _bx:
            a = T.alloc_shared((M, BK), "float16")
            b = T.alloc_shared((BK, N), "float16")
            c = T.alloc_fragment((M, N), "float32")
            T.clear(c)
            # The in-place halving before the loads gave wrong sums when pipelined (ppl-compile
            # 1.30.2); the codegen now leaves such a loop unpipelined (codegen.ir.updates_in_place_before_loading).
            for k in T.Pipelined(K // BK, num_stages=2):
                if halve_first:
                    for i, j in T.Parallel(M, N):
                        c[i, j] = c[i, j] * 0.5
                T.copy(A[0, k * BK], a)
                T.copy(B[k * BK, 0], b)
                T.gemm(a, b, c)
            T.copy(c, C[0, 0])

    return matmul


@pytest.mark.parametrize(("K", "halve_first"), [(64, False), (192, False), (192, True)])
def test_clear_before_the_k_loop(K: int, halve_first: bool) -> None:
    M, N, BK = 64, 128, 64
    kernel = tilelang.compile(halving_matmul(M, N, K, BK, halve_first), target="tpu", out_idx=[2])
    src = kernel.get_kernel_source()
    assert ("tiu::fill(c," in src) is halve_first
    if K // BK > 1:  # (a loop of one trip is never pipelined)
        assert ("ppl::enable_pipeline();" in src) is not halve_first
    assert bool(re.search(r"tiu::fmm2_nn\(c, a, b, \(k\w* != 0\)\);", src)) is not halve_first
    a, b = torch.randn(M, K).half(), torch.randn(K, N).half()
    a0, b0 = a.clone(), b.clone()
    expected = torch.zeros(M, N)
    for step in range(K // BK):
        part = a[:, step * BK : (step + 1) * BK].float() @ b[step * BK : (step + 1) * BK].float()
        expected = (expected * 0.5 if halve_first else expected) + part
    torch.testing.assert_close(kernel(a, b), expected, rtol=1e-3, atol=1e-3)
    assert torch.equal(a, a0) and torch.equal(b, b0)
