"""tilelang values -> tilecore values: kernel parameters, kernel names, cached source texts.

Only tilecore values cross into the registry and the backends; this module (with
:mod:`~tilecore._bridge.tvm_targets` for targets) is where tilelang objects are converted.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from tilecore.kernel import TensorParam


def tensor_params(params: Sequence[Any], func: Any) -> tuple[TensorParam, ...]:
    """tilelang ``KernelParam``s -> tilecore :class:`TensorParam`s (names from the PrimFunc when known)."""
    names: list[str] = []
    if func is not None and hasattr(func, "buffer_map"):
        names = [str(func.buffer_map[var].name) if var in func.buffer_map else str(var.name) for var in func.params]
    result = []
    for index, param in enumerate(params):
        shape = tuple(str(d.name) if hasattr(d, "name") else int(d) for d in param.shape)
        name = names[index] if index < len(names) else f"arg{index}"
        result.append(TensorParam(name, param.torch_dtype(), shape))
    return tuple(result)


def kernel_name(func: Any) -> str:
    """The ``global_symbol`` of a PrimFunc, else ``"main"``."""
    attrs = getattr(func, "attrs", None)
    if attrs is not None and "global_symbol" in attrs:
        return str(attrs["global_symbol"])
    return "main"


def read_cached_text(source: Any) -> str:
    """Text of tilelang's ``CachedTextSource`` (inline text or a file path) or of a plain string."""
    if source is None or isinstance(source, str):
        return source or ""
    if getattr(source, "text", None) is not None:
        return str(source.text)
    path = getattr(source, "path", None)
    if path and os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    return ""
