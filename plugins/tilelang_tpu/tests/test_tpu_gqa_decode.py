"""GQA decoding (bshd K and V) as upstream's ``examples/flash_decoding`` writes them,
on the BM1690 emulator against torch (issue 18: "rank 3 tiles have no PPL row layout", fp32
attention on rank-4 bshd operands): the query heads of one KV head as one ``[block_H, dim]`` block of
a ``[batch, heads, dim]`` tensor (``block_H`` may exceed the heads: the rows past them are
clipped), K and V sliced per KV head from ``[batch, seq, groups, dim]``, the per-key mask a
``[block_N]`` vector sliced from ``[batch, seq, groups]`` (a strided column), fp16 and fp32.
Also: ``T.alloc_global`` (upstream's one-prim_func split-KV form) is refused by name with the
two-kernel rewrite.
"""

from typing import Any

import pytest
import tilelang
import tilelang.language as T
import torch
from tpu_checks import FLOATS, run_checked

from tilecore import TilecoreError

pytestmark = pytest.mark.usefixtures("toolchain")


def gqa_decode(batch: int, heads: int, groups: int, seqlen: int, dim: int, block_N: int, block_H: int, dtype: str) -> Any:
    scale = (1.0 / dim) ** 0.5 * 1.44269504
    per_kv = heads // groups
    valid_H = min(block_H, per_kv)
    accum = "float32"

    @T.prim_func
    def decode(
        Q: T.Tensor((batch, heads, dim), dtype),
        K: T.Tensor((batch, seqlen, groups, dim), dtype),
        V: T.Tensor((batch, seqlen, groups, dim), dtype),
        mask: T.Tensor((batch, seqlen, groups), "uint8"),
        unused: T.Tensor((3,), "int32"),
        Output: T.Tensor((batch, heads, dim), dtype),
    ):
        with T.Kernel(batch, heads // valid_H, threads=128) as (bx, by):
            q_s = T.alloc_shared((block_H, dim), dtype)
            k_s = T.alloc_shared((block_N, dim), dtype)
            v_s = T.alloc_shared((block_N, dim), dtype)
            o_s = T.alloc_shared((valid_H, dim), dtype)
            acc_s = T.alloc_fragment((block_H, block_N), accum)
            acc_s_cast = T.alloc_fragment((block_H, block_N), dtype)
            mask_local = T.alloc_fragment((block_N,), "uint8")
            acc_o = T.alloc_fragment((block_H, dim), accum)
            m = T.alloc_fragment((block_H,), accum)
            m_prev = T.alloc_fragment((block_H,), accum)
            rescale = T.alloc_fragment((block_H,), accum)
            row_sum = T.alloc_fragment((block_H,), accum)
            logsum = T.alloc_fragment((block_H,), accum)
            kv = by // (per_kv // valid_H)
            T.copy(Q[bx, by * valid_H : by * valid_H + block_H, :], q_s)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(T.ceildiv(seqlen, block_N), num_stages=2):
                T.copy(K[bx, k * block_N : (k + 1) * block_N, kv, :], k_s)
                T.copy(mask[bx, k * block_N : (k + 1) * block_N, kv], mask_local)
                T.clear(acc_s)
                T.gemm(q_s, k_s, acc_s, transpose_B=True)
                for i, j in T.Parallel(block_H, block_N):
                    acc_s[i, j] = T.if_then_else(mask_local[j] != 0, acc_s[i, j], -T.infinity(accum))
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_H):
                    rescale[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(block_H, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale)
                T.reduce_sum(acc_s, row_sum, dim=1)
                for i in T.Parallel(block_H):
                    logsum[i] = logsum[i] * rescale[i] + row_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_H, dim):
                    acc_o[i, j] *= rescale[i]
                T.copy(V[bx, k * block_N : (k + 1) * block_N, kv, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o)
            for i, j in T.Parallel(block_H, dim):
                acc_o[i, j] /= logsum[i]
            T.copy(acc_o[:valid_H, :], o_s)
            T.copy(o_s, Output[bx, by * valid_H : (by + 1) * valid_H, :])

    return decode


def _reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    heads, groups = q.shape[1], k.shape[2]
    kv = torch.arange(heads) // (heads // groups)
    scores = torch.einsum("bhd,bshd->bhs", q.float(), k.float()[:, :, kv]) / q.shape[-1] ** 0.5
    scores = scores.masked_fill(mask[:, :, kv].permute(0, 2, 1) == 0, float("-inf"))
    return torch.einsum("bhs,bshd->bhd", scores.softmax(-1), v.float()[:, :, kv])


@pytest.mark.parametrize(
    ("batch", "heads", "groups", "seqlen", "dim", "block_N", "block_H", "dtype"),
    [
        (1, 8, 2, 256, 64, 32, 64, "float16"),  # upstream's block_H = 64 over 4 heads per KV head
        (2, 4, 4, 100, 32, 64, 1, "float16"),  # one head per block, a sequence the blocks do not divide
        (1, 16, 2, 200, 64, 64, 8, "bfloat16"),
        (1, 8, 2, 128, 64, 64, 4, "float32"),  # fp32: the scores and output, also reduced, on the lanes
    ],
)
def test_gqa_decode_as_upstream_writes_it(
    batch: int, heads: int, groups: int, seqlen: int, dim: int, block_N: int, block_H: int, dtype: str
) -> None:
    q = torch.randn(batch, heads, dim).to(FLOATS[dtype])
    k = torch.randn(batch, seqlen, groups, dim).to(FLOATS[dtype])
    v = torch.randn(batch, seqlen, groups, dim).to(FLOATS[dtype])
    mask = torch.randint(0, 2, (batch, seqlen, groups), dtype=torch.uint8)
    mask[:, 0] = 1  # every row keeps a key
    out = torch.zeros(batch, heads, dim, dtype=FLOATS[dtype])
    kernel = tilelang.compile(gqa_decode(batch, heads, groups, seqlen, dim, block_N, block_H, dtype), target="tpu")
    run_checked(kernel, q, k, v, mask, torch.zeros(3, dtype=torch.int32), out, inputs=(0, 1, 2, 3, 4))
    tol = 2e-2 if dtype != "float32" else 1e-4
    torch.testing.assert_close(out.float(), _reference(q, k, v, mask), rtol=tol, atol=tol)


def _workspace_program() -> Any:
    @T.prim_func
    def two_kernels(X: T.Tensor((64, 64), "float32"), Y: T.Tensor((64, 64), "float32")):
        work = T.alloc_global((64, 64), "float32")
        with T.Kernel(1, threads=128) as _:
            t = T.alloc_fragment((64, 64), "float32")
            T.copy(X[0, 0], t)
            T.copy(t, work[0, 0])
        with T.Kernel(1, threads=128) as _:
            u = T.alloc_fragment((64, 64), "float32")
            T.copy(work[0, 0], u)
            T.copy(u, Y[0, 0])

    return two_kernels


def test_alloc_global_is_refused_by_name_with_the_two_kernel_rewrite() -> None:
    with pytest.raises(TilecoreError) as err:
        tilelang.compile(_workspace_program(), target="tpu")
    text = str(err.value)
    assert "T.alloc_global workspace work" in text
    assert "one prim_func per T.Kernel" in text and "examples/tpu/flash_decoding.py" in text
