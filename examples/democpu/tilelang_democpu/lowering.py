"""Lowering: upstream's portable CPU pipeline, kernels marked as device functions."""

from __future__ import annotations

from typing import Any

from tilecore.upstream import lower_with_host_pipeline


def lower(mod: Any, tvm_target: Any) -> Any:
    return lower_with_host_pipeline(mod, tvm_target)
