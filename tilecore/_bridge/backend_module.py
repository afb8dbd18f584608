"""The ``BackendModule("tilecore")`` registered with tilelang for backend-owned targets.

It owns ``ext_dev`` targets keyed ``tilecore``: a ``PassPipeline`` that calls the
owning backend's ``tilecore_lower`` hook, a ``DeviceCodegen`` that calls its
``tilecore_codegen`` hook (text wrapped in a TVM source module), tilelang's
standard host codegens, and one execution backend named ``tilecore``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tilecore._bridge import gate
from tilecore._bridge.jit_kernel import adapter_factory
from tilecore._bridge.kernel_cache import kernel_cache
from tilecore._bridge.tvm_targets import NAME, own_target
from tilecore.errors import TilecoreError

if TYPE_CHECKING:
    from tvm.target import Target

    from tilecore._registry import Registry


def build(registry: Registry) -> Any:
    """The ``tilelang.backend.BackendModule`` that routes owned targets to their backend's hooks."""
    from tilelang.backend import BackendModule, DeviceCodegen, ExecutionBackendSpec, PassPipeline
    from tilelang.backend.host_codegen import STANDARD_HOST_CODEGENS

    def lower(mod: Any, tvm_target: Target) -> Any:
        target = own_target(registry, tvm_target)
        registry.setup(target)
        lowered = registry.call(target, "tilecore_lower", mod=mod, tvm_target=tvm_target)
        if lowered is None:
            raise TilecoreError(
                "the backend has no tilecore_lower hook implementation. "
                "It must implement it, or declare the target with upstream=tilecore.Upstream(kind).",
                owner=target.error_owner,
            )
        return lowered

    def codegen(mod: Any, tvm_target: Target) -> Any:
        target = own_target(registry, tvm_target)
        source = registry.call(target, "tilecore_codegen", device_mod=mod, tvm_target=tvm_target)
        if not isinstance(source, str):
            raise TilecoreError(
                f"tilecore_codegen returned {type(source).__name__}; it must return the kernel source text.", owner=target.error_owner
            )
        import tvm_ffi

        # A TVM runtime.Module holding the source text (what tilelang's codegen contract returns).
        return tvm_ffi.get_global_func("runtime.SourceModuleCreate")(source, target.name)

    def supports(tvm_target: Target) -> bool:
        return NAME in list(tvm_target.keys)

    own_adapters: dict[str, Any] = {}
    if gate.proposal_merged("adapter-factory.md"):
        # tilelang takes the adapter and the cache layout from the spec; nothing is patched for them.
        own_adapters = {"adapter_factory": adapter_factory(registry), "kernel_cache": kernel_cache(registry)}

    return BackendModule(
        name=NAME,
        target_kinds=("ext_dev",),
        supports_target=supports,
        pipelines={"ext_dev": PassPipeline("ext_dev", lower)},
        device_codegens={"ext_dev": DeviceCodegen("ext_dev", build=codegen, build_without_compile=codegen)},
        host_codegens=STANDARD_HOST_CODEGENS,
        execution_backends=(ExecutionBackendSpec(NAME, supports_target=supports, **own_adapters),),
    )


def register(registry: Registry, _original: object = None) -> None:
    from tilelang.backend import register_backend

    register_backend(build(registry))
