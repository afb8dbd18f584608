"""Conformance cases: calls with wrong arguments fail before reaching the device."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import tilecore
from tilecore.conformance.runner import KernelBuilder

pytestmark = [pytest.mark.tilecore_device, pytest.mark.tilecore_requires("argument_checks", "copy", "out_idx")]


def _expect_error(target: tilecore.ResolvedTarget, call: Callable[[], Any]) -> BaseException:
    """Backend-owned targets raise KernelArgumentError naming the target; targets delegated to
    tilelang's own runtime (``Upstream``) raise whatever its argument checks raise."""
    caught: pytest.ExceptionInfo[Exception]
    if target.spec.upstream is None:
        with pytest.raises(tilecore.KernelArgumentError) as caught:
            call()
        assert target.name in str(caught.value), f"the error does not name the target: {caught.value}"
    else:
        with pytest.raises((TypeError, ValueError, RuntimeError)) as caught:
            call()
    return caught.value


def test_wrong_dtype(conformance_kernels: KernelBuilder, tilecore_target: tilecore.ResolvedTarget) -> None:
    kernel = conformance_kernels.get("copy")
    (a,) = conformance_kernels.inputs("copy")
    error = _expect_error(tilecore_target, lambda: kernel(a.to(torch.float64)))
    if tilecore_target.spec.upstream is None:
        assert "float32" in str(error), str(error)


def test_wrong_shape(conformance_kernels: KernelBuilder, tilecore_target: tilecore.ResolvedTarget) -> None:
    kernel = conformance_kernels.get("copy")
    (a,) = conformance_kernels.inputs("copy")
    _expect_error(tilecore_target, lambda: kernel(a[:, :-1].contiguous()))


def test_wrong_arg_count(conformance_kernels: KernelBuilder, tilecore_target: tilecore.ResolvedTarget) -> None:
    kernel = conformance_kernels.get("copy")
    (a,) = conformance_kernels.inputs("copy")
    _expect_error(tilecore_target, lambda: kernel(a, a, a))
