"""Square roots and divisions at the extremes of fp32, fp16 and bf16 on the BM1690 emulator
and ``T.exp`` above its overflow threshold (issue 18), against torch.

PPL's ``tiu::fsqrt`` is ``x * frsqrt(x)``: NaN for ``x = +inf`` and 3x too large below
2^-125; ``tiu::fdiv`` takes the reciprocal of its divisor: ±inf for ``|b| < 2^-125``, 0 for
``|b| >= 2^126`` (so ``1e38 / 1e38`` was 0).  The code generator fixes both up
(``codegen.emit.operands``).  Kernels as users write them: ``T.sqrt``, ``T.rsqrt``,
``1 / T.sqrt``, ``a / b`` and ``1 / b`` in ``T.Parallel``, over infinities, NaN, signed
zeros, the largest and the smallest normal values and random values of every magnitude.

The hardware flushes subnormals to zero (docs/backends/tpu.md, "Floating-point behaviour"):
no input here is subnormal, and where torch's result is below twice the smallest normal
value, 0 of the same sign is accepted too (as is a result within two subnormal steps: fp16
keeps subnormal results).
"""

import math
from typing import Any

import pytest
import tilelang
import tilelang.language as T
import torch

M, N = 64, 64

#: Relative tolerance of each dtype: a few ulp (``fsqrt`` then ``fdiv`` round twice in fp16,
#: to 2.3e-3 measured; bf16 ``fdiv`` is off by up to 1.7e-2, two ulp, at any magnitude).
_RTOL = {"float32": 1e-5, "float16": 3e-3, "bfloat16": 2.4e-2}


def _kernel(dtype: str) -> Any:
    @T.prim_func
    def extremes(
        A: T.Tensor((M, N), dtype),
        B: T.Tensor((M, N), dtype),
        Sqrt: T.Tensor((M, N), dtype),
        Rsqrt: T.Tensor((M, N), dtype),
        InvSqrt: T.Tensor((M, N), dtype),
        Div: T.Tensor((M, N), dtype),
        Inv: T.Tensor((M, N), dtype),
        Exp: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(1) as _:
            a = T.alloc_shared((M, N), dtype)
            b = T.alloc_shared((M, N), dtype)
            c = T.alloc_fragment((M, N), dtype)
            T.copy(A, a)
            T.copy(B, b)
            for i, j in T.Parallel(M, N):
                c[i, j] = T.sqrt(b[i, j])
            T.copy(c, Sqrt)
            for i, j in T.Parallel(M, N):
                c[i, j] = T.rsqrt(b[i, j])
            T.copy(c, Rsqrt)
            for i, j in T.Parallel(M, N):
                c[i, j] = 1.0 / T.sqrt(b[i, j])
            T.copy(c, InvSqrt)
            for i, j in T.Parallel(M, N):
                c[i, j] = a[i, j] / b[i, j]
            T.copy(c, Div)
            for i, j in T.Parallel(M, N):
                c[i, j] = 1.0 / b[i, j]
            T.copy(c, Inv)
            for i, j in T.Parallel(M, N):
                c[i, j] = T.exp(b[i, j])
            T.copy(c, Exp)

    return extremes


def _inputs(dtype: torch.dtype, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Edge values in the first rows of ``A`` and ``B`` (every pair of them meets in ``A / B``),
    random normal values of every magnitude of the dtype, with both signs, in the rest."""
    info = torch.finfo(dtype)
    edges = [float("inf"), float("-inf"), float("nan"), 0.0, -0.0, info.max, -info.max, info.tiny, -info.tiny]
    edges += [2 * info.tiny, 4 * info.tiny, info.max / 2, 1.0, -1.0, 2.0, 3.0, 1e-3, 1e3]
    edges += [11.0, 11.1, 12.0, 80.0, 88.0, 88.8, 89.0, -80.0]  # exp's overflow thresholds (fp16, fp32)
    g = torch.Generator().manual_seed(seed)
    low, high = math.log2(info.tiny), math.log2(info.max) - 1
    exponent = torch.empty(2, M, N, dtype=torch.float64).uniform_(low, high, generator=g)
    sign = torch.where(torch.rand(2, M, N, generator=g) < 0.3, -1.0, 1.0).double()
    a, b = (sign * torch.exp2(exponent)).to(dtype).unbind(0)
    values = torch.tensor(edges, dtype=dtype)
    count = len(edges)
    grid_a, grid_b = values.repeat_interleave(count), values.repeat(count)  # every (a, b) pair
    rows = (count * count + N - 1) // N
    flat_a, flat_b = a[:rows].flatten(), b[:rows].flatten()
    flat_a[: count * count], flat_b[: count * count] = grid_a, grid_b
    a[:rows], b[:rows] = flat_a.view(rows, N), flat_b.view(rows, N)
    return a.contiguous(), b.contiguous()


def _bits(t: torch.Tensor) -> torch.Tensor:
    """The bit patterns of ``t`` (NaN compares equal to itself)."""
    return t.view(torch.int32 if t.element_size() == 4 else torch.int16)


def _check(name: str, got: torch.Tensor, want: torch.Tensor, dtype: torch.dtype, rtol: float) -> None:
    """NaN where torch has NaN, the same infinities, finite values within ``rtol``; where torch's
    result is below twice the smallest normal value, 0 of its sign is accepted too (flushing)."""
    got, want = got.double(), want.to(dtype).double()
    tiny = torch.finfo(dtype).tiny
    nan = want.isnan()
    assert torch.equal(got.isnan(), nan), f"{name}: NaN at {(got.isnan() != nan).nonzero()[:8].tolist()}"
    inf = want.isinf()
    assert torch.equal(got[inf], want[inf]) and not got[~inf & ~nan].isinf().any(), f"{name}: infinities differ"
    finite = ~inf & ~nan
    small = want.abs() < 2 * tiny
    flushed = small & (got == 0) & (got.signbit() == want.signbit())
    # fp16 keeps subnormal results, within two of its smallest subnormal steps (measured: one).
    close = ((got - want).abs() <= rtol * want.abs()) | (small & ((got - want).abs() <= 2 * tiny * torch.finfo(dtype).eps))
    bad = finite & ~close & ~flushed
    where = bad.nonzero()[:8].tolist()
    assert not bad.any(), f"{name}: {int(bad.sum())} wrong, e.g. at {where}: got {got[bad][:8].tolist()}, torch {want[bad][:8].tolist()}"


@pytest.mark.usefixtures("toolchain")
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_sqrt_and_division_at_the_extremes_match_torch(dtype: str) -> None:
    kernel = tilelang.compile(_kernel(dtype), target="tpu", out_idx=[2, 3, 4, 5, 6, 7])
    torch_dtype = getattr(torch, dtype)
    a, b = _inputs(torch_dtype, seed=18)
    a_before, b_before = a.clone(), b.clone()
    sqrt, rsqrt, inv_sqrt, div, inv, exp = kernel(a, b)
    assert torch.equal(_bits(a), _bits(a_before)) and torch.equal(_bits(b), _bits(b_before)), "inputs changed"
    wide_a, wide_b = a.double(), b.double()
    rtol = _RTOL[dtype]
    _check("T.sqrt", sqrt, torch.sqrt(wide_b), torch_dtype, rtol)
    _check("T.rsqrt", rsqrt, torch.rsqrt(wide_b), torch_dtype, rtol)
    _check("1 / T.sqrt", inv_sqrt, 1.0 / torch.sqrt(wide_b), torch_dtype, rtol)
    _check("a / b", div, wide_a / wide_b, torch_dtype, rtol)
    _check("1 / b", inv, 1.0 / wide_b, torch_dtype, rtol)
    # Open (docs/backends/tpu.md, "Floating-point behaviour"), left out: exp(NaN) is 0; fp32/bf16
    # exp of some arguments below -88 is NaN; bf16 exp is off by up to 23 % for 2 < |x| < 89.
    numbers = ~b.isnan()
    if dtype != "float16":
        numbers &= b >= -88
    if dtype == "bfloat16":
        numbers &= (b.abs() <= 2) | (b >= 89)
    # fp16 fexp is off by up to 4.5e-3 (measured) at any magnitude
    _check("T.exp", exp[numbers], torch.exp(wide_b)[numbers], torch_dtype, 8e-3 if dtype == "float16" else rtol)
