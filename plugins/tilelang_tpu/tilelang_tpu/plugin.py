"""Hook implementations: the entry point ``tpu = "tilelang_tpu.plugin"``.

Importing this module stays cheap: everything that probes the toolchain,
imports TVM or loads SophGo's libraries is imported inside the hooks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tilecore import CompiledKernel, KernelAdapter, ResolvedTarget, TargetSpec, TensorParam, Toolchain, hookimpl
from tilelang_tpu import __version__
from tilelang_tpu.lowering import TILELANG_SEAMS

if TYPE_CHECKING:
    import torch
    from tvm.ir import IRModule
    from tvm.target import Target

tilecore_api_version = "1.0"
#: The tilelang passes this backend's lowering calls; tilecore checks them when the backend loads.
tilecore_tilelang_seams = TILELANG_SEAMS


@hookimpl
def tilecore_declare_targets() -> list[TargetSpec]:
    from tilelang_tpu.target import TARGET

    return [TARGET]


@hookimpl
def tilecore_setup(target: ResolvedTarget) -> Toolchain:
    from tilelang_tpu import setup
    from tilelang_tpu.target import cores_of

    cores_of(target["chip"], target["cores"])  # a count beyond the chip is refused before anything is built
    return setup.find_toolchain().as_toolchain()


@hookimpl
def tilecore_lower(target: ResolvedTarget, mod: IRModule, tvm_target: Target) -> IRModule:
    from tilelang_tpu import lowering

    return lowering.lower(mod, tvm_target)


@hookimpl
def tilecore_codegen(target: ResolvedTarget, device_mod: IRModule, tvm_target: Target) -> str:
    from tilelang_tpu import codegen
    from tilelang_tpu.target import cores_of

    return codegen.generate(device_mod, tvm_target, target["chip"], cores_of(target["chip"], target["cores"]))


@hookimpl
def tilecore_create_adapter(target: ResolvedTarget, kernel: CompiledKernel) -> KernelAdapter:
    from tilelang_tpu import runtime, setup

    return runtime.create_adapter(kernel, setup.find_toolchain())


@hookimpl
def tilecore_supply_tensor(target: ResolvedTarget, param: TensorParam, supply: str) -> torch.Tensor:
    from tilelang_tpu import devices

    return devices.supply(param, supply, target["mode"])


@hookimpl
def tilecore_bench(
    target: ResolvedTarget, fn: Callable[[], Any], warmup: float, rep: float, n_warmup: int, n_repeat: int, backend: str
) -> list[float]:
    from tilecore.kit.timing import timing_method
    from tilelang_tpu import profiling

    timing_method(target, backend, profiling.METHODS)
    return profiling.bench(fn, target["mode"], warmup, rep, n_warmup, n_repeat)


__all__ = ["__version__"]
