"""Work the value ranges (``codegen.ranges``) let the code generator leave out, and the results
that must not change because of it:

* the fp32 -> fp16 overflow fix of flash attention's ``T.copy(acc_s, acc_s_cast)``: the
  probabilities ``exp2(s * c - rowmax(s) * c)`` lie in [0, 1].  Run on the emulator against torch,
  causal and not, with tile heights 1, 63, 64, 65 and 128 over lengths they do not divide;
* where the ranges prove nothing (another reduction, a negative scale, the tile changed after its
  row max, a cast that really overflows) the fix stays, and overflow still gives inf as in torch;
* ``T.rsqrt`` (lowered to ``1 / sqrt``) as ``tiu::frsqrt`` where its argument is proven >= 2^-124:
  RMSNorm in fp32, fp16 and bf16 against torch; an unconstrained argument keeps ``fsqrt`` and
  ``fdiv`` and stays right at 2^-126, where ``frsqrt`` is not.

Every emulator test also checks that the inputs are left untouched.
"""

from typing import Any

import pytest
import tilelang
import tilelang.language as T
import torch
import torch.nn.functional as F
from tpu_upstream_kernels import LOG2E, flash_attention_kernel, rmsnorm_kernel

pytestmark = pytest.mark.usefixtures("toolchain")


def _source(func: Any, out_idx: list[int]) -> str:
    return str(tilelang.compile(func, target="tpu:cores=1", out_idx=out_idx).get_kernel_source())


def _run(kernel: Any, *inputs: torch.Tensor) -> Any:
    before = [t.clone() for t in inputs]
    out = kernel(*inputs)
    for original, tensor in zip(before, inputs, strict=True):
        assert torch.equal(original.nan_to_num(7.0), tensor.nan_to_num(7.0)), "the kernel wrote one of its inputs"
    return out


def attention(seq_len: int, dim: int, block_M: int, block_N: int, causal: bool) -> Any:
    """Flash attention as upstream's current example writes it (bshd, 1 batch, 2 heads, fp16: the
    running max kept with ``T.max``, the causal key loop ending at the diagonal), for any length:
    the keys past ``seq_len`` (the zero-filled rest of the last key block) are masked out."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    shape = [1, seq_len, 2, dim]
    accum, dtype = "float32", "float16"

    @T.prim_func
    def attn(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype), Output: T.Tensor(shape, dtype)):
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
            blocks = T.ceildiv(seq_len, block_N)
            loop_range = T.min(blocks, T.ceildiv((bx + 1) * block_M, block_N)) if causal else blocks
            for k in T.Pipelined(loop_range, num_stages=1):
                T.copy(K[0, k * block_N : (k + 1) * block_N, by, :], K_shared)
                if causal:  # the keys past seq_len are past every query row too
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.if_then_else(bx * block_M + i >= k * block_N + j, 0, -T.infinity(accum))
                else:
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.if_then_else(k * block_N + j < seq_len, 0, -T.infinity(accum))
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True)
                T.copy(scores_max, scores_max_prev)
                T.fill(scores_max, -T.infinity(accum))
                T.reduce_max(acc_s, scores_max, dim=1, clear=False)
                for i in T.Parallel(block_M):  # current upstream: a row masked in this block keeps its max
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

    return attn


def test_flash_attention_casts_its_probabilities_without_the_overflow_fix() -> None:
    """Upstream's kernel: no ``gt_select`` on ``acc_s_cast`` (P in [0, 1]); the output's cast,
    whose range the ranges do not bound (``acc_o / logsum`` after the key loop), keeps its fix."""
    for causal in (False, True):
        source = _source(flash_attention_kernel(1, 2, 512, 64, is_causal=causal), [3])
        assert "tiu::cast(acc_s_cast, acc_s);" in source
        assert "gt_select(acc_s_cast" not in source
        assert source.count("gt_select(O_shared") == 2


@pytest.mark.parametrize(("block_M", "seq_len"), [(1, 100), (63, 130), (64, 128), (65, 200), (128, 300)])
@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_on_the_emulator(block_M: int, seq_len: int, causal: bool) -> None:
    dim = 64
    kernel = tilelang.compile(attention(seq_len, dim, block_M, 64, causal), target="tpu", out_idx=[3])
    assert "gt_select(acc_s_cast" not in kernel.get_kernel_source()
    q, k, v = (torch.randn(1, seq_len, 2, dim).half() for _ in range(3))
    out = _run(kernel, q, k, v)
    qf, kf, vf = (t.float().transpose(1, 2) for t in (q, k, v))
    expected = F.scaled_dot_product_attention(qf, kf, vf, is_causal=causal).transpose(1, 2)
    # P is rounded to fp16 before the second matmul, as upstream does (test_tpu_kernels_upstream's tolerance).
    torch.testing.assert_close(out.float(), expected, rtol=1e-2, atol=1e-2)


def exp_cast(M: int, N: int, form: str) -> Any:
    """``y = exp2(x * c - m * c)`` cast to fp16, ``m`` a row statistic of ``x``: ``form`` says which."""
    c = -1.0 if form == "negative" else 1.0

    @T.prim_func
    def kernel(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float16")):
        with T.Kernel(1, threads=1) as bx:
            x = T.alloc_fragment((M, N), "float32")
            m = T.alloc_fragment((M,), "float32")
            y = T.alloc_fragment((M, N), "float16")
            T.copy(X[bx * M, 0], x)
            if form == "min":
                T.reduce_min(x, m, dim=1)
            else:
                T.reduce_max(x, m, dim=1)
            if form == "changed":
                for i, j in T.Parallel(M, N):
                    x[i, j] = x[i, j] * 2.0
            for i, j in T.Parallel(M, N):
                x[i, j] = T.exp2(x[i, j] * c - m[i] * c)
            T.copy(x, y)
            T.copy(y, Y[bx * M, 0])

    return kernel


@pytest.mark.parametrize("form", ["max", "min", "negative", "changed"])
def test_the_overflow_fix_stays_unless_the_row_max_proves_it_useless(form: str) -> None:
    source = _source(exp_cast(64, 128, form), [1])
    assert ("gt_select(y" in source) == (form != "max")


def test_a_cast_that_overflows_still_gives_inf() -> None:
    """``exp2(x - rowmin(x))`` beyond 65504: the fix stays and gives inf, as torch does."""
    kernel = tilelang.compile(exp_cast(64, 128, "min"), target="tpu", out_idx=[1])
    x = torch.randn(64, 128) * 8
    x[:, 0] = -20.0  # exp2(x + 20) passes 2^16 where x > -4
    out = _run(kernel, x)
    expected = torch.exp2(x - x.min(1, keepdim=True).values).half()
    assert torch.isinf(expected).any()
    torch.testing.assert_close(out, expected, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize(("M", "blk_m", "dtype"), [(130, 64, "float32"), (65, 63, "float16"), (200, 128, "bfloat16"), (3, 1, "bfloat16")])
def test_rmsnorm_uses_frsqrt(M: int, blk_m: int, dtype: str) -> None:
    """``sum(x * x) / N + eps >= eps``: ``tiu::frsqrt`` (within 1.17 ulp in fp32 there)."""
    N = 96
    kernel = tilelang.compile(rmsnorm_kernel(M, N, blk_m, dtype), target="tpu", out_idx=[-1])
    source = kernel.get_kernel_source()
    if blk_m > 1:  # a one-row tile's norm is scalar code (1 / sqrtf)
        assert "tiu::frsqrt" in source and "tiu::fsqrt" not in source
    tdt = getattr(torch, dtype)
    x, w = torch.randn(M, N).to(tdt), torch.randn(N).to(tdt)
    xf = x.float()
    expected = (xf * torch.rsqrt(xf.pow(2).mean(1, keepdim=True) + 1e-6) * w.float()).to(tdt)
    tol = {"float32": 1e-5, "float16": 1e-2, "bfloat16": 3e-2}[dtype]
    torch.testing.assert_close(_run(kernel, x, w), expected, rtol=tol, atol=tol)


def test_rsqrt_of_an_unbounded_argument_keeps_the_division() -> None:
    """``T.rsqrt(x)`` of a loaded tile: no proof, so ``fsqrt`` and ``fdiv``, as before; right at 0
    and the ordinary values.  (Below 2^-124 ``frsqrt`` gives inf; the division form, with
    ``T.sqrt``'s fix-ups, is right down to 2^-126 and at inf: test_tpu_float_extremes.)"""

    @T.prim_func
    def rsqrt(X: T.Tensor((64, 64), "float32"), Y: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=1) as bx:
            x = T.alloc_fragment((64, 64), "float32")
            T.copy(X[bx * 64, 0], x)
            for i, j in T.Parallel(64, 64):
                x[i, j] = T.rsqrt(x[i, j])
            T.copy(x, Y[bx * 64, 0])

    kernel = tilelang.compile(rsqrt, target="tpu", out_idx=[1])
    assert "tiu::frsqrt" not in kernel.get_kernel_source()
    x = torch.rand(64, 64) * 100 + 0.01
    x[0, :2] = torch.tensor([0.0, 2.0**-100])
    out = _run(kernel, x)
    torch.testing.assert_close(out, torch.rsqrt(x), rtol=1e-5, atol=0)


def test_softmax_row_sum_needs_no_division_fix() -> None:
    """``y / sum(exp(x - max(x)))``: the row sum is proven >= 1, so the plain ``tiu::fdiv``; a
    division by a loaded tile keeps the rescaling (``tiu::fdiv`` is wrong for |b| < 2^-125)."""

    @T.prim_func
    def softmax(X: T.Tensor((64, 128), "float32"), Y: T.Tensor((64, 128), "float32")):
        with T.Kernel(1, threads=1) as _:
            x = T.alloc_shared((64, 128), "float32")
            y = T.alloc_fragment((64, 128), "float32")
            m = T.alloc_fragment((64,), "float32")
            s = T.alloc_fragment((64,), "float32")
            T.copy(X[0, 0], x)
            T.reduce_max(x, m, dim=1)
            for i, j in T.Parallel(64, 128):
                y[i, j] = T.exp(x[i, j] - m[i])
            T.reduce_sum(y, s, dim=1)
            for i, j in T.Parallel(64, 128):
                y[i, j] = y[i, j] / s[i]
            T.copy(y, Y[0, 0])

    @T.prim_func
    def divide(X: T.Tensor((64, 128), "float32"), Y: T.Tensor((64, 128), "float32")):
        with T.Kernel(1, threads=1) as _:
            x = T.alloc_fragment((64, 128), "float32")
            T.copy(X[0, 0], x)
            for i, j in T.Parallel(64, 128):
                x[i, j] = 1.0 / x[i, j]
            T.copy(x, Y[0, 0])

    kernel = tilelang.compile(softmax, target="tpu", out_idx=[1])
    assert "lt_select" not in kernel.get_kernel_source()
    x = torch.randn(64, 128) * 30
    torch.testing.assert_close(_run(kernel, x), torch.softmax(x, dim=1), rtol=1e-4, atol=1e-6)
    assert "lt_select" in _source(divide, [1])


def test_a_product_of_two_tiles_is_no_square() -> None:
    """``sum(x * y) / N + eps`` of two tiles of one shape may be negative or tiny: no ``frsqrt``
    (``structural_equal`` equated ``x[i, j] * y[i, j]`` with ``x[i, j] * x[i, j]``; the same
    confusion made the differential run's WRONG results in ``codegen.emit.staging``).  The
    square of one tile still gets ``frsqrt``."""

    def kernel(square: bool) -> Any:
        @T.prim_func
        def dot_norm(X: T.Tensor((64, 32), "float32"), Z: T.Tensor((64, 32), "float32"), Y: T.Tensor((64, 32), "float32")):
            with T.Kernel(1, threads=1) as bx:
                x = T.alloc_fragment((64, 32), "float32")
                z = T.alloc_fragment((64, 32), "float32")
                p = T.alloc_fragment((64, 32), "float32")
                s = T.alloc_fragment((64,), "float32")
                T.copy(X[bx * 64, 0], x)
                T.copy(Z[bx * 64, 0], z)
                for i, j in T.Parallel(64, 32):
                    p[i, j] = x[i, j] * (x[i, j] if square else z[i, j])
                T.reduce_sum(p, s, dim=1)
                for i in T.Parallel(64):
                    s[i] = T.rsqrt(s[i] / 32 + 1e-6)
                for i, j in T.Parallel(64, 32):
                    x[i, j] = x[i, j] * s[i]
                T.copy(x, Y[bx * 64, 0])

        return dot_norm

    assert "tiu::frsqrt" in _source(kernel(True), [2])
    assert "tiu::frsqrt" not in _source(kernel(False), [2])
