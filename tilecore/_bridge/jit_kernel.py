"""The JITKernel seams: creating a backend-owned kernel's adapter after a compile and from the disk cache.

tilelang picks a kernel adapter with a hard-coded if-chain over its own execution
backends (after a compile and on a disk-cache hit) and reads kernel sources through an
allow-list of adapter names.  The wrappers here take the ``tilecore`` execution backend
out of those chains and fall through to the original for every other kernel; where
tilelang has ``ExecutionBackendSpec(adapter_factory=...)``, :func:`adapter_factory` is
the same path without a patch.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tilecore._bridge.adapter import TilecoreAdapter
from tilecore._bridge.convert import kernel_name, read_cached_text, tensor_params
from tilecore._bridge.kernel_cache import evict_faulted_kernel
from tilecore._bridge.tvm_targets import NAME, own_target
from tilecore._launch import Launcher, output_indices
from tilecore.errors import TilecoreError
from tilecore.kernel import CompiledKernel

if TYPE_CHECKING:
    from tilecore._registry import Registry
    from tilecore.targets import ResolvedTarget


def make_adapter(
    registry: Registry, target: ResolvedTarget, kernel: CompiledKernel, params: list[Any], host_source: str
) -> TilecoreAdapter:
    """Ask the target's backend for its adapter and put tilecore's argument checks in front of it."""
    adapter = registry.call(target, "tilecore_create_adapter", kernel=kernel)
    if adapter is None:
        raise TilecoreError("the backend has no tilecore_create_adapter hook implementation.", owner=target.error_owner)
    return TilecoreAdapter(kernel, Launcher(kernel, adapter), params, host_source, on_fault=evict_faulted_kernel)


def adapter_from_artifact(registry: Registry, jit_kernel: Any, tilelang_func: Any, out_idx: Any, artifact: Any) -> TilecoreAdapter:
    """The adapter of a kernel tilelang has just compiled for a backend-owned target."""
    target = own_target(registry, jit_kernel.target)
    params = tensor_params(artifact.params, tilelang_func)
    kernel = CompiledKernel(
        name=kernel_name(tilelang_func),
        source=artifact.kernel_source,
        params=params,
        out_idx=output_indices(out_idx, len(params)),
        target=target,
        device_mod=artifact.device_mod,
    )
    return make_adapter(registry, target, kernel, artifact.params, str(artifact.host_mod))


def adapter_from_database(
    registry: Registry,
    jit_kernel: Any,
    params: Any,
    result_idx: Any,
    func_or_mod: Any,
    host_kernel_source: Any,
    device_kernel_source: Any,
    kernel_lib_path: str,
) -> TilecoreAdapter:
    """The adapter of a backend-owned kernel tilelang loads from its disk cache."""
    resolved = own_target(registry, jit_kernel.target)
    registry.setup(resolved)
    tparams = tensor_params(params, func_or_mod)
    library = kernel_lib_path if kernel_lib_path and os.path.getsize(kernel_lib_path) > 0 else None
    kernel = CompiledKernel(
        name=kernel_name(func_or_mod),
        source=read_cached_text(device_kernel_source),
        params=tparams,
        out_idx=output_indices(result_idx, len(tparams)),
        target=resolved,
        library_path=library,
    )
    adapter = make_adapter(registry, resolved, kernel, params, read_cached_text(host_kernel_source))
    if kernel_lib_path:
        adapter.tilelang_cache_path = os.path.dirname(kernel_lib_path)
    return adapter


def adapter_factory(registry: Registry) -> Callable[..., TilecoreAdapter]:
    """``ExecutionBackendSpec(adapter_factory=...)`` for a tilelang with that field
    (docs/upstream/adapter-factory.md): tilelang calls it after a compile (``artifact``)
    and on a disk-cache hit (``params`` and the cached sources)."""

    def factory(
        *,
        kernel: Any,
        func: Any,
        out_idx: Any,
        artifact: Any = None,
        params: Any = None,
        host_kernel_source: Any = None,
        device_kernel_source: Any = None,
        kernel_lib_path: str = "",
        **_compile_options: Any,  # pass_configs, compile_flags: already applied by tilelang's compile
    ) -> TilecoreAdapter:
        if artifact is not None:
            return adapter_from_artifact(registry, kernel, func, out_idx, artifact)
        return adapter_from_database(registry, kernel, params, out_idx, func, host_kernel_source, device_kernel_source, kernel_lib_path)

    return factory


def for_tilecore_kernels(instead: Callable[[Registry, Any, dict[str, Any]], Any]) -> Callable[..., Callable[..., Any]]:
    """A ``JITKernel`` seam's wrapper factory: the original method for every kernel but a
    ``tilecore`` one, which gets ``instead(registry, kernel, arguments)`` (the call's arguments
    by name, defaults applied)."""

    def wrap(registry: Registry, original: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(original)

        @functools.wraps(original)
        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            if self.execution_backend != NAME:
                return original(self, *args, **kwargs)
            bound = signature.bind(self, *args, **kwargs)
            bound.apply_defaults()
            return instead(registry, self, bound.arguments)

        return method

    return wrap


_FROM_DATABASE = ("params", "result_idx", "func_or_mod", "host_kernel_source", "device_kernel_source", "kernel_lib_path")

wrap_create_adapter_from_artifact = for_tilecore_kernels(
    lambda registry, kernel, given: adapter_from_artifact(registry, kernel, given["tilelang_func"], given["out_idx"], given["artifact"])
)
wrap_create_adapter_from_database = for_tilecore_kernels(
    lambda registry, kernel, given: adapter_from_database(registry, kernel, *(given[name] for name in _FROM_DATABASE))
)
wrap_get_kernel_source = for_tilecore_kernels(
    lambda _, kernel, given: str(kernel.adapter.get_kernel_source(kernel_only=given["kernel_only"]))
)
wrap_get_host_source = for_tilecore_kernels(lambda _, kernel, given: str(kernel.adapter.get_host_source()))
