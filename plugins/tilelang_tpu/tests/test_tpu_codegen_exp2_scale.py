"""``T.exp2`` of a constant-scaled argument: the scale is folded into the one multiply by
ln 2 that exp2 needs anyway (``exp2(s * c - m * c)`` -> ``fsub``, ``fmul(c * ln 2)``,
``fexp``), as a PPL programmer writes flash attention.  Checked on the emitted PPL of
upstream's flash attention and, for every recognised form and one that must not be
folded, against torch on the emulator."""

import math
import re
from typing import Any

import pytest
import tilelang
import tilelang.language as T
import torch
from tilelang_tpu import setup
from tpu_upstream_kernels import LOG2E, flash_attention_kernel

C, D = 0.7, -0.3


def exp2_scales_kernel(M: int, N: int, BM: int, BN: int) -> Any:
    """Four outputs, parameters unsorted: a*c - b*c, a*c + b*c, c*a (folded) and a*c - b*d (not)."""

    @T.prim_func
    def exp2_scales(
        Y_sub: T.Tensor((M, N), "float32"),
        B: T.Tensor((M, N), "float32"),
        Y_add: T.Tensor((M, N), "float32"),
        A: T.Tensor((M, N), "float32"),
        Y_left: T.Tensor((M, N), "float32"),
        Y_mixed: T.Tensor((M, N), "float32"),
    ):
        with T.Kernel(T.ceildiv(N, BN), T.ceildiv(M, BM), threads=1) as (bx, by):
            a = T.alloc_shared((BM, BN), "float32")
            b = T.alloc_shared((BM, BN), "float32")
            y_sub = T.alloc_fragment((BM, BN), "float32")
            y_add = T.alloc_fragment((BM, BN), "float32")
            y_left = T.alloc_fragment((BM, BN), "float32")
            y_mixed = T.alloc_fragment((BM, BN), "float32")
            T.copy(A[by * BM, bx * BN], a)
            T.copy(B[by * BM, bx * BN], b)
            for i, j in T.Parallel(BM, BN):
                y_sub[i, j] = T.exp2(a[i, j] * C - b[i, j] * C)
                y_add[i, j] = T.exp2(a[i, j] * C + b[i, j] * C)
                y_left[i, j] = T.exp2(C * a[i, j])
                y_mixed[i, j] = T.exp2(a[i, j] * C - b[i, j] * D)
            T.copy(y_sub, Y_sub[by * BM, bx * BN])
            T.copy(y_add, Y_add[by * BM, bx * BN])
            T.copy(y_left, Y_left[by * BM, bx * BN])
            T.copy(y_mixed, Y_mixed[by * BM, bx * BN])

    return exp2_scales


def _float(text: str) -> float:
    return float(text.rstrip("f"))


def test_flash_attention_exp2_is_one_subtract_and_one_multiply(toolchain: setup.TpuToolchain) -> None:
    source = tilelang.compile(flash_attention_kernel(1, 2, 256, 64, False), target="tpu", out_idx=[3]).get_kernel_source()
    scale_ln2 = (1.0 / 64) ** 0.5 * LOG2E * math.log(2)
    # Both exp2 of the online softmax (the row rescale and the score tile): fsub, fmul, fexp.
    chains = re.findall(r"tiu::fsub\((\w+), [^;]+\);\s*auto (\w+) = [^;]+;\s*tiu::fmul\(\2, \1, ([-0-9.e]+f)\);\s*fexp\(\w+, \2,", source)
    assert len(chains) == 2, source
    assert all(_float(constant) == pytest.approx(scale_ln2, rel=1e-7) for _, _, constant in chains)
    assert source.count("fexp(") == 2 and "0.6931471805599453f" not in source


def test_exp2_scale_forms_match_torch(toolchain: setup.TpuToolchain) -> None:
    M, N = 130, 100  # 65-row tiles (two lane groups, a short last one) and 64-column tiles that do not divide
    kernel = tilelang.compile(exp2_scales_kernel(M, N, 65, 64), target="tpu", out_idx=[0, 2, 4, 5])
    source = kernel.get_kernel_source()
    assert source.count(f"{C * math.log(2)!r}f") == 3, "three of the four forms fold c into the multiply by ln 2"
    a, b = torch.randn(M, N) * 2, torch.randn(M, N) * 2
    a_before, b_before = a.clone(), b.clone()
    y_sub, y_add, y_left, y_mixed = kernel(b, a)
    # fexp is PPL's range-reduced exp (2^k * e^r with a polynomial e^r): a few fp32 ulps.
    tolerance = {"rtol": 2e-6, "atol": 1e-6}
    torch.testing.assert_close(y_sub, torch.exp2(a * C - b * C), **tolerance)
    torch.testing.assert_close(y_add, torch.exp2(a * C + b * C), **tolerance)
    torch.testing.assert_close(y_left, torch.exp2(C * a), **tolerance)
    torch.testing.assert_close(y_mixed, torch.exp2(a * C - b * D), **tolerance)
    assert torch.equal(a, a_before) and torch.equal(b, b_before)
