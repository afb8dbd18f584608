"""Hook implementations: the entry point ``democpu = "tilelang_democpu.plugin"``.

Importing this module must stay cheap (no compiler probing): tilecore imports
it the first time target "democpu" is named.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

import tilecore
from tilecore import CompiledKernel, KernelAdapter, ResolvedTarget, TargetSpec, TensorParam, Toolchain, hookimpl
from tilecore.kit.supply import make_tensor
from tilelang_democpu import __version__, codegen, lowering, profiling, runtime, setup, target

tilecore_api_version = "1.0"


@hookimpl
def tilecore_declare_targets() -> list[TargetSpec]:
    return [target.TARGET]


@hookimpl
def tilecore_setup(target: ResolvedTarget) -> Toolchain:
    return setup.find_compiler()


@hookimpl
def tilecore_lower(target: ResolvedTarget, mod: Any, tvm_target: Any) -> Any:
    return lowering.lower(mod, tvm_target)


@hookimpl
def tilecore_codegen(target: ResolvedTarget, device_mod: Any, tvm_target: Any) -> str:
    return codegen.generate(device_mod, tvm_target)


@hookimpl
def tilecore_create_adapter(target: ResolvedTarget, kernel: CompiledKernel) -> KernelAdapter:
    # tilecore caches the setup hook's result (one probe per target, never None here because
    # this backend implements tilecore_setup; require_toolchain checks it).
    toolchain = tilecore.require_toolchain(target)
    compiler = toolchain.location
    # Reused only when it matches the checksum recorded at build time (else rebuilt, once); on a
    # tilelang disk-cache hit tilelang's copy of the library is adopted, never loaded itself.
    copy = Path(kernel.library_path) if kernel.library_path is not None else None
    artifact = runtime.obtain(kernel, compiler, verified_copy=copy)
    return runtime.CAdapter(kernel, artifact.path, runtime.key_of(artifact))


@hookimpl
def tilecore_supply_tensor(target: ResolvedTarget, param: TensorParam, supply: str) -> torch.Tensor:
    return make_tensor(param, supply, target.device)


@hookimpl
def tilecore_bench(
    target: ResolvedTarget, fn: Callable[[], Any], warmup: float, rep: float, n_warmup: int, n_repeat: int, backend: str
) -> list[float]:
    return profiling.bench(target, fn, warmup, rep, n_warmup, n_repeat, backend)


__all__ = ["__version__"]
