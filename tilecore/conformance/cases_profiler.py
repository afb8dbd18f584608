"""Conformance cases: tensor supply and the profiler."""

from __future__ import annotations

import math

import pytest
import torch

from tilecore.conformance.runner import KernelBuilder, check_device

pytestmark = [pytest.mark.tilecore_device]


def _supply_types() -> list[str]:
    from tilelang.profiler import TensorSupplyType

    return [member.name for member in TensorSupplyType]


def _check_values(kind: str, tensor: torch.Tensor) -> None:
    values = tensor.detach().to("cpu", torch.float32)
    assert torch.isfinite(values).all(), f"{kind}: non-finite values"
    if kind == "Zero":
        assert (values == 0).all(), f"{kind}: not all zero"
    elif kind == "One":
        assert (values == 1).all(), f"{kind}: not all one"
    elif kind == "Integer":
        assert (values == values.round()).all(), f"{kind}: non-integer values in a float tensor"
        assert values.abs().max() <= 16 and torch.unique(values).numel() > 1, f"{kind}: values {torch.unique(values)[:8].tolist()}"
    elif kind == "Uniform":
        assert values.min() >= -1 and values.max() <= 1 and values.std() > 0.1, f"{kind}: not uniform in [-1, 1]"
    else:  # Normal, Randn, Auto: random floats with spread
        assert values.std() > 0.1, f"{kind}: std {values.std():.3g}, expected random values"


@pytest.mark.parametrize("kind", _supply_types())
@pytest.mark.tilecore_requires("tensor_supply", "elementwise", "out_idx")
def test_tensor_supply(conformance_kernels: KernelBuilder, tilecore_device: torch.device, kind: str) -> None:
    """``get_profiler(tensor_supply_type=...)`` makes every input, on the device, filled as asked."""
    from tilelang.profiler import TensorSupplyType

    name = "elementwise_float32"
    case = conformance_kernels.case(name)
    profiler = conformance_kernels.get(name).get_profiler(tensor_supply_type=TensorSupplyType[kind])
    inputs = profiler._get_inputs()
    assert len(inputs) == len(case.inputs), f"{len(inputs)} inputs supplied; the kernel takes {len(case.inputs)} (out_idx excluded)"
    check_device(inputs, tilecore_device)
    for tensor, (shape, dtype) in zip(inputs, case.inputs, strict=True):
        assert tuple(tensor.shape) == shape and tensor.dtype == dtype, f"supplied {tensor.dtype}{list(tensor.shape)}"
        _check_values(kind, tensor)


@pytest.mark.tilecore_requires("profiler", "elementwise", "out_idx")
def test_do_bench(conformance_kernels: KernelBuilder) -> None:
    """``profiler.do_bench`` returns a positive time in milliseconds, with supplied or given inputs."""
    name = "elementwise_float32"
    profiler = conformance_kernels.get(name).get_profiler()
    for kwargs in ({}, {"input_tensors": conformance_kernels.inputs(name)}):
        ms = profiler.do_bench(n_warmup=1, n_repeat=3, **kwargs)
        assert isinstance(ms, float) and math.isfinite(ms) and ms > 0, f"do_bench returned {ms!r}"


@pytest.mark.tilecore_requires("profiler", "elementwise", "out_idx")
def test_assert_allclose(conformance_kernels: KernelBuilder) -> None:
    """``profiler.assert_allclose`` accepts torch's result and rejects a wrong one."""
    profiler = conformance_kernels.get("elementwise_float32").get_profiler()
    profiler.assert_allclose(lambda a, b: a * b + a, atol=1e-4, rtol=1e-4)
    with pytest.raises(AssertionError):
        profiler.assert_allclose(lambda a, b: a * b - a, atol=1e-4, rtol=1e-4)
