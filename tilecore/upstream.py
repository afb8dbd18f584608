"""Pieces of upstream tilelang that backends commonly reuse, behind tilecore's API.

Backends may import tilelang themselves; these helpers exist so the common
cases do not depend on where tilelang keeps them (the bridge tracks that).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tilecore import _bridge


def lower_with_host_pipeline(
    mod: Any,
    tvm_target: Any,
    host_kind: str = "c",
    vectorize: bool = False,
    passes: Callable[[Any, Any], Any] | None = None,
) -> Any:
    """tilelang's portable CPU lowering (or the backend's own ``passes(mod, dummy_target)``)
    under a dummy host target, with the kernels marked as device functions of ``tvm_target``
    (see :func:`tilecore._bridge.lower_with_host_pipeline`)."""
    return _bridge.lower_with_host_pipeline(mod, tvm_target, host_kind, vectorize, passes)


def c_source(device_mod: Any, tvm_target: Any) -> str:
    """C source of a device module lowered by :func:`lower_with_host_pipeline`."""
    return _bridge.c_source(device_mod, tvm_target)


def template_include_dir() -> str:
    """Directory holding tilelang's ``tl_templates`` headers (for compiling C sources)."""
    return _bridge.template_include_dir()
