"""Kernels as TileLang users write them (tile-ai/tilelang ``examples/`` style), on the
BM1690 emulator against torch: norms with weights, LayerNorm's per-row outputs,
online softmax, masks and math functions, flash attention (bshd and bhsd, causal and not).

Every test also checks that the inputs are left untouched.
"""

from __future__ import annotations

import pytest
import tilelang
import tilelang.language as T
import torch
import torch.nn.functional as F
from tpu_upstream_kernels import (
    flash_attention_bhsd_kernel,
    flash_attention_kernel,
    layernorm_kernel,
    online_softmax_kernel,
    rmsnorm_kernel,
)

pytestmark = pytest.mark.usefixtures("toolchain")


def _run(kernel: object, *inputs: torch.Tensor) -> object:
    before = [t.clone() for t in inputs]
    out = kernel(*inputs)  # type: ignore[operator]
    for original, tensor in zip(before, inputs, strict=True):
        assert torch.equal(original, tensor), "the kernel wrote one of its inputs"
    return out


@pytest.mark.parametrize(("M", "blk_m", "dtype"), [(130, 64, "float32"), (3, 1, "float32"), (200, 128, "float16")])
def test_rmsnorm_with_weight(M: int, blk_m: int, dtype: str) -> None:
    """``w[j]`` broadcast down the rows (column vector), 1-row tiles, > 64-row tiles."""
    N = 96
    tdt = getattr(torch, dtype)
    kernel = tilelang.compile(rmsnorm_kernel(M, N, blk_m, dtype), target="tpu", out_idx=[-1])
    x, w = torch.randn(M, N).to(tdt), torch.randn(N).to(tdt)
    xf = x.float()
    expected = (xf * torch.rsqrt(xf.pow(2).mean(1, keepdim=True) + 1e-6) * w.float()).to(tdt)
    tol = 1e-5 if dtype == "float32" else 1e-2
    torch.testing.assert_close(_run(kernel, x, w), expected, rtol=tol, atol=tol)


@pytest.mark.parametrize(("M", "blk_m"), [(200, 96), (5, 1)])
def test_layernorm_mean_rstd(M: int, blk_m: int) -> None:
    """Weight and bias as column vectors, a temporary inside T.Parallel, and per-row
    ``Mean``/``Rstd`` stored to global memory from inside T.Parallel (edge tile clipped)."""
    N = 96
    kernel = tilelang.compile(layernorm_kernel(M, N, blk_m), target="tpu", out_idx=[3, 4, 5])
    x, w, b = torch.randn(M, N) * 2 + 1, torch.randn(N), torch.randn(N)
    y, mean, rstd = _run(kernel, x, w, b)  # type: ignore[misc]
    torch.testing.assert_close(y, F.layer_norm(x, (N,), w, b, 1e-5), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(mean, x.mean(1), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(rstd, torch.rsqrt(x.var(1, unbiased=False) + 1e-5), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("blk_m", "dtype"), [(128, "float32"), (64, "float16")])
def test_online_softmax_named_softmax_kernel(blk_m: int, dtype: str) -> None:
    M, N = 130, 256
    tdt = getattr(torch, dtype)
    kernel = tilelang.compile(online_softmax_kernel(M, N, blk_m, 64, dtype), target="tpu", out_idx=[-1])
    x = (torch.randn(M, N) * 3).to(tdt)
    tol = 1e-5 if dtype == "float32" else 2e-3
    torch.testing.assert_close(_run(kernel, x), torch.softmax(x.float(), 1).to(tdt), rtol=tol, atol=tol)


def _masks_and_math(M: int, N: int, BM: int, BN: int, valid: int) -> object:
    @T.prim_func
    def masks_math(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32"), Z: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, BN), T.ceildiv(M, BM), threads=128) as (bx, by):
            x = T.alloc_fragment((BM, BN), "float32")
            y = T.alloc_fragment((BM, BN), "float32")
            z = T.alloc_fragment((BM, BN), "float32")
            T.copy(X[by * BM, bx * BN], x)
            for i, j in T.Parallel(BM, BN):
                # a causal mask on block + loop indices, and a sequence-length mask
                y[i, j] = T.if_then_else(by * BM + i >= bx * BN + j, T.exp2(x[i, j]), T.log2(T.abs(x[i, j]) + 1.0))
                z[i, j] = T.if_then_else(bx * BN + j < valid, T.tanh(x[i, j]) + T.sigmoid(x[i, j]) + T.log(T.abs(x[i, j]) + 2.0), -1.0)
            T.copy(y, Y[by * BM, bx * BN])
            T.copy(z, Z[by * BM, bx * BN])

    return masks_math


def test_masks_and_math_functions() -> None:
    """``T.if_then_else`` on comparisons of block and loop indices (rows past 64 included),
    ``T.exp2``, ``T.log2``, ``T.log``, ``T.tanh``, ``T.sigmoid``."""
    M, N, valid = 200, 160, 150
    kernel = tilelang.compile(_masks_and_math(M, N, 128, 96, valid), target="tpu", out_idx=[1, 2])
    x = torch.randn(M, N)
    y, z = _run(kernel, x)  # type: ignore[misc]
    rows, cols = torch.arange(M)[:, None], torch.arange(N)[None, :]
    expected_y = torch.where(rows >= cols, torch.exp2(x), torch.log2(x.abs() + 1.0))
    expected_z = torch.where(cols < valid, torch.tanh(x) + torch.sigmoid(x) + torch.log(x.abs() + 2.0), torch.full_like(x, -1.0))
    torch.testing.assert_close(y, expected_y, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(z, expected_z, rtol=1e-5, atol=1e-5)


def _attention_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    qf, kf, vf = (t.float().transpose(1, 2) for t in (q, k, v))
    return F.scaled_dot_product_attention(qf, kf, vf, is_causal=causal).transpose(1, 2)


@pytest.mark.parametrize(
    ("is_causal", "dtype", "block", "dim"),
    [(True, "float16", 128, 64), (False, "bfloat16", 128, 64), (True, "bfloat16", 64, 64), (False, "float16", 128, 128)],
)
def test_flash_attention_bshd(is_causal: bool, dtype: str, block: int, dim: int) -> None:
    """Upstream's default 128 x 128 blocks fit BM1690's local memory, at dim 64 and 128."""
    batch, heads, seq_len = 1, 2, 256
    tdt = getattr(torch, dtype)
    kernel = tilelang.compile(flash_attention_kernel(batch, heads, seq_len, dim, is_causal, block, block, dtype), target="tpu", out_idx=[3])
    q, k, v = (torch.randn(batch, seq_len, heads, dim).to(tdt) for _ in range(3))
    out = _run(kernel, q, k, v)
    expected = _attention_reference(q, k, v, is_causal)
    # P is rounded to fp16/bf16 before the second matmul, as upstream does.
    tol = 1e-2 if dtype == "float16" else 3e-2
    torch.testing.assert_close(out.float(), expected, rtol=tol, atol=tol)  # type: ignore[union-attr]


def _attention_bhsd_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    """Upstream's reference for the bhsd example: the causal mask is offset by ``seq_kv - seq_q``."""
    scores = torch.einsum("bhqd,bhkd->bhqk", q.float(), k.float()) / q.shape[-1] ** 0.5
    if causal:
        seq_q, seq_kv = q.shape[2], k.shape[2]
        keep = torch.ones(seq_q, seq_kv).tril(seq_kv - seq_q)
        scores = scores.masked_fill(keep == 0, float("-inf"))
    return torch.einsum("bhqk,bhkd->bhqd", scores.softmax(-1), v.float())


@pytest.mark.parametrize(("is_causal", "seq_q", "seq_kv"), [(True, 64, 192), (False, 64, 128)])
def test_flash_attention_bhsd(is_causal: bool, seq_q: int, seq_kv: int) -> None:
    """Each block is a 2-D slice ``Q[bz, by, rows, :]`` of a 4-D tensor whose rows run along
    its third axis: loaded through a permuted, strided view.  The causal case has fewer
    queries than keys (upstream's ``past_len``)."""
    batch, heads, dim = 2, 2, 64
    kernel = tilelang.compile(flash_attention_bhsd_kernel(batch, heads, seq_q, seq_kv, dim, is_causal), target="tpu", out_idx=[3])
    q = torch.randn(batch, heads, seq_q, dim).half()
    k, v = (torch.randn(batch, heads, seq_kv, dim).half() for _ in range(2))
    out = _run(kernel, q, k, v)
    # fp16 P before the second matmul, as upstream does; upstream checks with 1e-2 too.
    torch.testing.assert_close(out.float(), _attention_bhsd_reference(q, k, v, is_causal), rtol=1e-2, atol=1e-2)  # type: ignore[union-attr]
