"""Conformance cases: kernels compiled for the target and checked against torch."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tilecore.conformance.kernels import KERNELS, axpy_kernel, compare, copy_kernel, make_inputs
from tilecore.conformance.runner import KernelBuilder, as_list, check_device

pytestmark = pytest.mark.tilecore_device


@pytest.mark.tilecore_requires("copy", "out_idx")
def test_copy(conformance_kernels: KernelBuilder) -> None:
    """``tilelang.compile(..., out_idx=-1)``: one output, returned as a tensor."""
    out = conformance_kernels.get("copy")(*conformance_kernels.inputs("copy"))
    assert isinstance(out, torch.Tensor), f"a kernel with one out_idx output must return a tensor, got {type(out).__name__}"
    conformance_kernels.check("copy")


@pytest.mark.parametrize(
    "dtype",
    [
        pytest.param("float32"),
        pytest.param("float16", marks=pytest.mark.tilecore_requires("float16")),
        pytest.param("bfloat16", marks=pytest.mark.tilecore_requires("bfloat16")),
    ],
)
@pytest.mark.tilecore_requires("elementwise", "out_idx")
def test_elementwise(conformance_kernels: KernelBuilder, dtype: str) -> None:
    """``C = A * B + A`` in each floating dtype."""
    conformance_kernels.check(f"elementwise_{dtype}")


@pytest.mark.tilecore_requires("elementwise", "odd_shape", "out_idx")
def test_odd_shape(conformance_kernels: KernelBuilder) -> None:
    """50 x 37 tensors with 16 x 16 tiles: partial tiles on both edges."""
    conformance_kernels.check("elementwise_odd_shape")


@pytest.mark.tilecore_requires("copy", "elementwise", "odd_shape", "out_idx")
def test_param_order(conformance_kernels: KernelBuilder) -> None:
    """Parameters declared ``(Out, x, Unused, Bias)``: not in sorted-name order, the
    output first, one never read.  The result is right and no input is written."""
    kernel = conformance_kernels.get("param_order")
    inputs = conformance_kernels.inputs("param_order", seed=6)
    before = [t.detach().cpu().clone() for t in inputs]
    outputs = as_list(kernel(*inputs))
    compare(conformance_kernels.case("param_order"), outputs, inputs)
    for name, tensor, original in zip(("x", "Unused", "Bias"), inputs, before, strict=True):
        assert torch.equal(tensor.cpu(), original), f"the kernel wrote its input {name}"


@pytest.mark.tilecore_requires("copy", "elementwise", "odd_shape")
def test_param_order_in_place(conformance_kernels: KernelBuilder) -> None:
    """The same kernel without ``out_idx``: the caller passes all four tensors in declared order."""
    kernel = conformance_kernels.get("param_order_in_place")
    out, x, unused, bias = conformance_kernels.inputs("param_order_in_place", seed=7)
    before = [t.detach().cpu().clone() for t in (x, unused, bias)]
    kernel(out, x, unused, bias)
    expected = x.detach().cpu().float() * 2.0 + bias.detach().cpu().float()
    torch.testing.assert_close(out.cpu(), expected, atol=1e-5, rtol=1e-5)
    for name, tensor, original in zip(("x", "Unused", "Bias"), (x, unused, bias), before, strict=True):
        assert torch.equal(tensor.cpu(), original), f"the kernel wrote its input {name}"


@pytest.mark.tilecore_requires("reduce", "out_idx")
def test_row_reduce(conformance_kernels: KernelBuilder) -> None:
    """Row sums and row maxima of one tile per block."""
    conformance_kernels.check("row_reduce")


@pytest.mark.tilecore_requires("gemm", "float16", "out_idx")
def test_gemm(conformance_kernels: KernelBuilder) -> None:
    """64 x 64 x 64 float16 GEMM with float32 accumulation over two K tiles."""
    conformance_kernels.check("gemm")


@pytest.mark.tilecore_requires("reduce", "out_idx")
def test_out_idx(conformance_kernels: KernelBuilder, tilecore_device: torch.device) -> None:
    """``out_idx=[-2, -1]``: both outputs allocated by the kernel, on the device, returned as a list."""
    kernel = conformance_kernels.get("row_reduce")
    (a,) = conformance_kernels.inputs("row_reduce")
    result = kernel(a)
    assert isinstance(result, (list, tuple)) and len(result) == 2, f"expected a list of 2 outputs, got {result!r:.200}"
    for out, shape in zip(result, [(a.shape[0],), (a.shape[0],)], strict=True):
        assert tuple(out.shape) == shape and out.dtype == a.dtype, f"output {out.dtype}{list(out.shape)}"
    check_device(result, tilecore_device)


@pytest.mark.tilecore_requires("copy")
def test_in_place(conformance_kernels: KernelBuilder) -> None:
    """No ``out_idx``: the caller passes every tensor and the kernel writes the output in place.

    It returns nothing: ``None`` (tilecore's launcher) or an empty list (tilelang's own GPU
    runtime adapters, for targets delegated upstream)."""
    kernel = conformance_kernels.get("copy_in_place")
    (a,) = conformance_kernels.inputs("copy_in_place")
    b = torch.full_like(a, -7.0)
    result = kernel(a, b)
    assert result is None or (isinstance(result, (list, tuple)) and not result), (
        f"a kernel without out_idx returns nothing, got {type(result).__name__}"
    )
    torch.testing.assert_close(b.cpu(), a.cpu(), atol=0.0, rtol=0.0)


@pytest.mark.tilecore_requires("jit", "elementwise", "out_idx")
def test_jit_factory(tilecore_target_text: str, tilecore_device: torch.device) -> None:
    """``@tilelang.jit(target=...)`` on a kernel factory, compiled on first call."""
    import tilelang

    @tilelang.jit(target=tilecore_target_text, out_idx=[-1])  # type: ignore[untyped-decorator]  # tilelang ships no type information
    def axpy(M: int, N: int, alpha: float) -> Any:
        return axpy_kernel(M, N, 16, 16, alpha, "float32")

    generator = torch.Generator().manual_seed(3)
    a, b = (torch.randn(32, 48, generator=generator).to(tilecore_device) for _ in range(2))
    out = axpy(32, 48, 0.5)(a, b)
    torch.testing.assert_close(out.cpu(), (a.cpu() * 0.5 + b.cpu()), atol=1e-5, rtol=1e-5)


@pytest.mark.tilecore_requires("jit", "copy", "out_idx")
def test_jit_prim_func(tilecore_target_text: str, tilecore_device: torch.device) -> None:
    """``@tilelang.jit(target=...)`` stacked on a ``@T.prim_func``, called directly."""
    import tilelang

    kernel = tilelang.jit(target=tilecore_target_text, out_idx=[-1])(copy_kernel(64, 64, 32, 32, "float32"))
    (a,) = make_inputs(KERNELS["copy"], tilecore_device, seed=4)
    torch.testing.assert_close(kernel(a).cpu(), a.cpu(), atol=0.0, rtol=0.0)


@pytest.mark.tilecore_requires("grid", "copy", "out_idx")
def test_grid_syntax(conformance_kernels: KernelBuilder) -> None:
    """``kernel[(1,)](...)`` and ``kernel[1](...)`` launch the kernel; a bad grid is a TypeError."""
    kernel = conformance_kernels.get("copy")
    (a,) = conformance_kernels.inputs("copy", seed=5)
    for grid in ((1,), 1):
        torch.testing.assert_close(as_list(kernel[grid](a))[0].cpu(), a.cpu(), atol=0.0, rtol=0.0)
    with pytest.raises(TypeError):
        kernel[(0,)]


@pytest.mark.tilecore_requires("copy", "out_idx")
def test_kernel_source(conformance_kernels: KernelBuilder) -> None:
    """``kernel.get_kernel_source()`` returns the generated source text."""
    source = conformance_kernels.get("copy").get_kernel_source()
    assert isinstance(source, str) and source.strip(), f"get_kernel_source() returned {source!r:.80}"
