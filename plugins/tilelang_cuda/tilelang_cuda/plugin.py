"""Hook implementations: the entry point ``cuda = "tilelang_cuda.plugin"``.

The target is delegated upstream (``cuda_target.TARGET.upstream``), so this module
implements no ``tilecore_lower``/``tilecore_codegen``/``tilecore_create_adapter``:
tilecore calls those only for targets a backend compiles itself; upstream's
CUDA backend lowers, generates CUDA C++, builds with nvcc and launches
(docs/backends/cuda.md, "what upstream owns").
Importing it stays cheap: no GPU or nvcc probing until a hook runs.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tilecore import ResolvedTarget, TargetSpec, TensorParam, Toolchain, hookimpl
from tilecore.errors import TilecoreError
from tilelang_cuda import __version__, setup
from tilelang_cuda import target as cuda_target

if TYPE_CHECKING:
    import torch

tilecore_api_version = "1.1"  # 1.1: tilecore_doctor_target


@hookimpl
def tilecore_declare_targets() -> list[TargetSpec]:
    return [cuda_target.TARGET]


@hookimpl
def tilecore_setup(target: ResolvedTarget) -> Toolchain:
    toolchain = setup.find_nvcc(target.error_owner)
    notes = list(toolchain.notes)
    arch = target["arch"]
    variant = setup.variant_note(arch)
    if variant is not None:
        warnings.warn(f"{target.error_owner}: {variant}", stacklevel=2)
        notes.append(variant)
    notes.append("execution backends: " + ", ".join(b.describe() for b in setup.execution_backends(arch)))
    return dataclasses.replace(toolchain, notes=tuple(notes))


@hookimpl
def tilecore_doctor_target(spec: Any) -> str:
    return cuda_target.doctor_target()


def _require_gpu(resolved: ResolvedTarget, action: str) -> None:
    problem = cuda_target.gpu_problem()
    if problem is not None:
        raise TilecoreError(
            f"cannot {action}: {problem}. Kernels compiled without a GPU can be inspected "
            "(kernel.get_kernel_source()) but run only on a machine with an NVIDIA GPU.",
            owner=resolved.error_owner,
        )


@hookimpl
def tilecore_supply_tensor(target: ResolvedTarget, param: TensorParam, supply: str) -> torch.Tensor:
    from tilecore.kit.supply import make_tensor  # here: torch is imported only where tensors are made

    _require_gpu(target, "make input tensors")
    return make_tensor(param, supply, target.device)


@hookimpl
def tilecore_bench(
    target: ResolvedTarget, fn: Callable[[], Any], warmup: float, rep: float, n_warmup: int, n_repeat: int, backend: str
) -> list[float]:
    from tilelang_cuda import profiling

    _require_gpu(target, "time kernels")
    return profiling.bench(target, fn, warmup, rep, n_warmup, n_repeat, backend)


__all__ = ["__version__"]
