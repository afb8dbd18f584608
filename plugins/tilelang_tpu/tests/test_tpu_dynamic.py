"""Symbolic (dynamic) dimensions and 3-D/4-D tiles on the tpu target, on the BM1690 emulator
against torch.

One compiled kernel per test serves every size (``T.symbolic``/``T.dynamic`` dims bound from
the tensors at each call): ppl-compile must not run again after the first call.  Every
input is checked to be left untouched.  The refusals at the end are codegen-only.
(No ``from __future__ import annotations``: tilelang evaluates the ``T.Tensor`` annotations,
whose symbolic dims are the factories' locals.)
"""

from collections.abc import Callable
from typing import Any

import pytest
import tilelang
import tilelang.language as T
import torch
from test_tpu_codegen import device_module, ppl_of
from tilelang_tpu import codegen, runtime
from tpu_upstream_kernels import flash_attention_kernel, layernorm_kernel, rmsnorm_kernel

from tilecore import KernelArgumentError


def _run(kernel: Any, *args: torch.Tensor) -> Any:
    before = [a.clone() for a in args]
    out = kernel(*args)
    for original, arg in zip(before, args, strict=True):
        assert torch.equal(original, arg), "the kernel wrote one of its inputs"
    return out


def _scaled_add(BM: int, BN: int) -> Any:
    """``out = float(x) * 2 + residual`` over (M, N), both dynamic (``M`` spelled ``T.symbolic``,
    deprecated upstream in favour of ``T.dynamic``, which spells ``N``), ``x`` fp16 and the rest fp32;
    parameters out of sorted-name order with an unused one (whose dim N is still the second
    symbol of the ABI)."""
    with pytest.warns(DeprecationWarning, match=r"T\.symbolic\(\.\.\.\) is deprecated"):  # checked, not printed by make test
        M = T.symbolic("M")
    N = T.dynamic("N")

    @T.prim_func
    def scaled_add(
        x: T.Tensor((M, N), "float16"),
        unused: T.Tensor((N,), "float32"),
        residual: T.Tensor((M, N), "float32"),
        out: T.Tensor((M, N), "float32"),
    ):
        with T.Kernel(T.ceildiv(N, BN), T.ceildiv(M, BM), threads=128) as (bx, by):
            a = T.alloc_shared((BM, BN), "float32")
            r = T.alloc_shared((BM, BN), "float32")
            c = T.alloc_fragment((BM, BN), "float32")
            T.copy(x[by * BM, bx * BN], a)
            T.copy(residual[by * BM, bx * BN], r)
            for i, j in T.Parallel(BM, BN):
                c[i, j] = a[i, j] * 2.0 + r[i, j]
            T.copy(c, out[by * BM, bx * BN])

    return scaled_add


def test_elementwise_one_kernel_serves_every_size(toolchain: object) -> None:
    """1 row, around one 64-row tile, many tiles, columns that 128 does not divide: exact
    (fp16 -> fp32 is exact, then one fp32 multiply-add as torch does it).  The output is
    allocated by ``out_idx`` from the sizes the inputs give.  Mismatched sizes are refused
    before any launch, naming both arguments, the dimension and both sizes."""
    kernel = tilelang.compile(_scaled_add(64, 128), target="tpu", out_idx=[-1])
    assert "int M, int N)" in kernel.get_kernel_source()
    builds = runtime.ppl_compile_runs
    for m, n in [(1, 1), (63, 130), (65, 300), (1000, 97)]:
        x, unused, residual = torch.randn(m, n).half(), torch.randn(n), torch.randn(m, n)
        out = _run(kernel, x, unused, residual)
        torch.testing.assert_close(out, x.float() * 2 + residual, rtol=0, atol=0)
    assert runtime.ppl_compile_runs == builds, "a size recompiled the kernel"
    x = torch.randn(65, 300).half()
    with pytest.raises(
        KernelArgumentError, match=r"'scaled_add'.*argument 2 \(residual: .*\[M, N\]\) has M=64 on axis 0, but argument 0 \(x: "
    ):
        kernel(x, torch.randn(300), torch.randn(64, 300))
    with pytest.raises(
        KernelArgumentError, match=r"argument 1 \(unused: .*\[N\]\) has N=299 on axis 0, but argument 0 .* has N=300 on axis 1"
    ):
        kernel(x, torch.randn(299), torch.randn(65, 300))


def test_norms_with_a_dynamic_row_count(toolchain: object) -> None:
    """RMSNorm with a weight (fp16 I/O, fp32 math: 1e-2) and LayerNorm with per-row
    ``Mean``/``Rstd`` stored from inside ``T.Parallel`` (fp32: 1e-5), rows dynamic."""
    M = T.dynamic("M")
    rms = tilelang.compile(rmsnorm_kernel(M, 256, 64, "float16"), target="tpu", out_idx=[-1])
    layer = tilelang.compile(layernorm_kernel(M, 96, 96), target="tpu", out_idx=[3, 4, 5])
    builds = runtime.ppl_compile_runs
    for m in (1, 1000):
        x, w = torch.randn(m, 256).half(), torch.randn(256).half()
        xf = x.float()
        expected = (xf * torch.rsqrt(xf.pow(2).mean(1, keepdim=True) + 1e-6) * w.float()).half()
        torch.testing.assert_close(_run(rms, x, w), expected, rtol=1e-2, atol=1e-2)
    for m in (200,):
        x, w, b = torch.randn(m, 96) * 2 + 1, torch.randn(96), torch.randn(96)
        y, mean, rstd = _run(layer, x, w, b)
        torch.testing.assert_close(y, torch.nn.functional.layer_norm(x, (96,), w, b, 1e-5), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(mean, x.mean(1), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(rstd, torch.rsqrt(x.var(1, unbiased=False) + 1e-5), rtol=1e-5, atol=1e-6)
    assert runtime.ppl_compile_runs == builds


def test_flash_attention_bshd_dynamic_sequence(toolchain: object) -> None:
    """Upstream's bshd flash attention (causal, fp16, 64 x 64 blocks) with the sequence length
    ``T.dynamic``: the grid, the causal K/V loop bound and the edge tiles follow the call.
    Sequence lengths that 64 does not divide are exact for the causal kernel (the padded keys
    are masked).  fp16 P before the second matmul, as upstream: 1e-2."""
    seq_len = T.dynamic("seq_len")
    kernel = tilelang.compile(flash_attention_kernel(1, 2, seq_len, 64, True, 64, 64, "float16"), target="tpu", out_idx=[3])
    builds = runtime.ppl_compile_runs
    for s in (1, 130):
        q, k, v = (torch.randn(1, s, 2, 64).half() for _ in range(3))
        out = _run(kernel, q, k, v)
        qf, kf, vf = (t.float().transpose(1, 2) for t in (q, k, v))
        expected = torch.nn.functional.scaled_dot_product_attention(qf, kf, vf, is_causal=True).transpose(1, 2)
        torch.testing.assert_close(out.float(), expected, rtol=1e-2, atol=1e-2)
    assert runtime.ppl_compile_runs == builds


def _tiles_3d_4d(B: int, H: int, D: int, bs: int) -> Any:
    """A 4-D tile (element-wise, natural view) and a 3-D tile ``[H, bs, D]`` taken from a 4-D
    bhsd tensor through a permuted view, reduced along its last axis; sequence dynamic."""
    S = T.dynamic("S")

    @T.prim_func
    def tiles_3d_4d(Y: T.Tensor((B, H, S, D), "float32"), X: T.Tensor((B, H, S, D), "float32"), R: T.Tensor((B, H, S, 1), "float32")):
        with T.Kernel(T.ceildiv(S, bs), B, threads=128) as (bx, bz):
            x4 = T.alloc_shared((1, H, bs, D), "float32")
            y4 = T.alloc_fragment((1, H, bs, D), "float32")
            x3 = T.alloc_shared((H, bs, D), "float32")
            sq = T.alloc_fragment((H, bs, D), "float32")
            r = T.alloc_fragment((H, bs, 1), "float32")
            T.copy(X[bz, 0, bx * bs, 0], x4)
            for a, h, i, j in T.Parallel(1, H, bs, D):
                y4[a, h, i, j] = x4[a, h, i, j] * 2.0 - 1.0
            T.copy(y4, Y[bz, 0, bx * bs, 0])
            T.copy(X[bz, 0:H, bx * bs : (bx + 1) * bs, 0:D], x3)
            for h, i, j in T.Parallel(H, bs, D):
                sq[h, i, j] = x3[h, i, j] * x3[h, i, j]
            T.reduce_sum(sq, r, dim=2)
            T.copy(r, R[bz, 0:H, bx * bs : (bx + 1) * bs, 0])

    return tiles_3d_4d


def test_3d_and_4d_tiles(toolchain: object) -> None:
    """fp32: the element-wise result exact, the row sums to 1e-5."""
    B, H, D = 2, 3, 96
    kernel = tilelang.compile(_tiles_3d_4d(B, H, D, 64), target="tpu", out_idx=[0, 2])
    for s in (1, 130):
        x = torch.randn(B, H, s, D)
        y, r = _run(kernel, x)
        torch.testing.assert_close(y, x * 2 - 1, rtol=0, atol=0)
        torch.testing.assert_close(r, x.pow(2).sum(-1, keepdim=True), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------- refusals


def _dim_expression() -> Any:
    M = T.dynamic("M")

    @T.prim_func
    def doubled(A: T.Tensor((M * 2, 64), "float32"), B: T.Tensor((M * 2, 64), "float32")):
        with T.Kernel(1, threads=1) as _:
            a = T.alloc_shared((64, 64), "float32")
            T.copy(A[0, 0], a)
            T.copy(a, B[0, 0])

    return doubled


def _two_vars_one_name() -> Any:
    M1, M2 = T.dynamic("M"), T.dynamic("M")

    @T.prim_func
    def two_m(A: T.Tensor((M1, 64), "float32"), B: T.Tensor((M2, 64), "float32")):
        with T.Kernel(T.ceildiv(M1, 64), threads=1) as bx:
            a = T.alloc_shared((64, 64), "float32")
            T.copy(A[bx * 64, 0], a)
            T.copy(a, B[bx * 64, 0])

    return two_m


def _int64_dimension() -> Any:
    M = T.dynamic("M", "int64")

    @T.prim_func
    def wide(A: T.Tensor((M, 64), "float32"), B: T.Tensor((M, 64), "float32")):
        with T.Kernel(T.ceildiv(M, 64), threads=1) as bx:
            a = T.alloc_shared((64, 64), "float32")
            T.copy(A[bx * 64, 0], a)
            T.copy(a, B[bx * 64, 0])

    return wide


def _symbolic_tile() -> Any:
    M = T.dynamic("M")

    @T.prim_func
    def whole(A: T.Tensor((M, 64), "float32"), B: T.Tensor((M, 64), "float32")):
        with T.Kernel(1, threads=1) as _:
            a = T.alloc_shared((M, 64), "float32")
            T.copy(A, a)
            T.copy(a, B)

    return whole


def _reduce_4d_tile() -> Any:
    @T.prim_func
    def reduce4(X: T.Tensor((1, 2, 64, 32), "float32"), R: T.Tensor((1, 2, 64, 1), "float32")):
        with T.Kernel(1, threads=1) as _:
            x = T.alloc_fragment((1, 2, 64, 32), "float32")
            r = T.alloc_fragment((1, 2, 64, 1), "float32")
            T.copy(X, x)
            T.reduce_sum(x, r, dim=3)
            T.copy(r, R)

    return reduce4


def _strided_columns() -> Any:
    @T.prim_func
    def columns(X: T.Tensor((2, 64, 4, 32), "float32"), Y: T.Tensor((2, 64, 4, 32), "float32")):
        with T.Kernel(1, threads=1) as _:
            x = T.alloc_shared((64, 4), "float32")
            T.copy(X[0, 0:64, 0:4, 0], x)  # the tile's columns run along the heads axis, stride 32
            T.copy(x, Y[0, 0:64, 0:4, 0])

    return columns


def _gemm_3d_tiles() -> Any:
    # tilelang's frontend itself refuses a batch > 1; a [1, m, k] tile reaches the codegen.
    @T.prim_func
    def gemm3(A: T.Tensor((1, 64, 32), "float16"), B: T.Tensor((1, 32, 64), "float16"), C: T.Tensor((1, 64, 64), "float32")):
        with T.Kernel(1, threads=128) as _:
            a = T.alloc_shared((1, 64, 32), "float16")
            b = T.alloc_shared((1, 32, 64), "float16")
            c = T.alloc_fragment((1, 64, 64), "float32")
            T.copy(A, a)
            T.copy(B, b)
            T.gemm(a, b, c, clear_accum=True)
            T.copy(c, C)

    return gemm3


@pytest.mark.parametrize(
    ("factory", "construct", "fix"),
    [
        (_dim_expression, "whose dimension 0 is the expression M * 2", "its own variable"),
        (_two_vars_one_name, "two different symbolic variables named M", "create each symbolic dimension once"),
        (_int64_dimension, "symbolic dimension M has type int64", "symbolic dimensions as int32"),
        (_symbolic_tile, "tile a of symbolic shape [M, 64]", "block-sized tiles"),
        (_reduce_4d_tile, "T.reduce_sum of the 4-D tile x[1, 2, 64, 32], whose third axis is not 1", "3-D tile"),
        (_gemm_3d_tiles, "a batched T.gemm on the rank-3 tile a[1, 64, 32]", "T.copy each batch's 2-D slice into 2-D tiles"),
        (_strided_columns, "T.copy whose tile [64, 4] takes its columns from axis 2 of a rank-4 tensor", "last axis"),
    ],
)
def test_refused_by_name(factory: Callable[[], Any], construct: str, fix: str) -> None:
    with pytest.raises(codegen.TpuCodegenError) as info:
        ppl_of(factory())
    assert construct in str(info.value) and fix in str(info.value)


def test_symbolic_dimensions_refused_on_bm1684x() -> None:
    """BM1684X's runtime packs no scalar arguments, so it cannot receive the sizes."""
    device, tvm_target = device_module(_scaled_add(64, 128), "tpu:bm1684x")
    with pytest.raises(codegen.TpuCodegenError, match=r"(?s)symbolic dimensions \(M, N\) on bm1684x.*fix: run on chip bm1690"):
        codegen.generate(device, tvm_target, "bm1684x")
