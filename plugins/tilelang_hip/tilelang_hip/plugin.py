"""Hook implementations: the entry point ``hip = "tilelang_hip.plugin"``.

The ``hip`` target is delegated upstream (``target.TARGET.upstream``), so
tilecore calls no ``lower``, ``codegen`` or ``create_adapter`` hook for it:
upstream tilelang's ROCm backend lowers, generates HIP, compiles with hipcc
and launches (see :func:`tilelang_hip.setup.upstream_backend`, :mod:`tilelang_hip.codegen`,
:mod:`tilelang_hip.runtime`).  The hooks below are the HIP-specific
remainder.  Importing this module stays cheap: no probing, no subprocess.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tilecore import ResolvedTarget, TargetSpec, TensorParam, Toolchain, hookimpl
from tilelang_hip import __version__, runtime, setup, target

if TYPE_CHECKING:
    import torch

tilecore_api_version = "1.1"  # 1.1: tilecore_doctor_target


@hookimpl
def tilecore_declare_targets() -> list[TargetSpec]:
    return [target.TARGET]


@hookimpl
def tilecore_doctor_target(spec: Any) -> str:
    return target.doctor_target()


@hookimpl
def tilecore_setup(target: ResolvedTarget) -> Toolchain:
    setup.upstream_backend()
    return setup.find_toolchain()


@hookimpl
def tilecore_supply_tensor(target: ResolvedTarget, param: TensorParam, supply: str) -> torch.Tensor:
    from tilecore.kit.supply import make_tensor  # here: torch is imported only where tensors are made

    return make_tensor(param, supply, runtime.require_device(target))


@hookimpl
def tilecore_bench(
    target: ResolvedTarget, fn: Callable[[], Any], warmup: float, rep: float, n_warmup: int, n_repeat: int, backend: str
) -> list[float]:
    from tilelang_hip import profiling

    return profiling.bench(target, fn, warmup, rep, n_warmup, n_repeat, backend)


__all__ = ["__version__"]
