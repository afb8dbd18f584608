"""Pieces of upstream tilelang that backends reuse, behind tilecore's API.

Backends import tilelang internals only through this module: where tilelang
keeps them is the bridge's business (each name is a row of
:data:`tilecore._bridge.seams.SEAMS`, checked by the same gate as the patched
seams before first use), so a tilelang release that moves one changes the
bridge and no backend.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from tilecore._bridge import gate, helpers

if TYPE_CHECKING:
    from tvm.ir import IRModule
    from tvm.target import Target

__all__ = ["c_source", "determine_target", "lower_with_host_pipeline", "should_force_let_inline", "template_include_dir"]


def lower_with_host_pipeline(
    mod: IRModule,
    tvm_target: Target,
    host_kind: str = "c",
    vectorize: bool = False,
    passes: Callable[[IRModule, Target], IRModule] | None = None,
) -> IRModule:
    """tilelang's portable CPU lowering (or the backend's own ``passes(mod, dummy_target)``)
    under a dummy ``host_kind`` target, with the kernels marked as device functions of
    ``tvm_target`` (``calling_conv = DEVICE_KERNEL_LAUNCH``, ``target = tvm_target``)."""
    gate.check()
    return helpers.lower_with_host_pipeline(mod, tvm_target, host_kind, vectorize, passes)


def c_source(device_mod: IRModule, tvm_target: Target) -> str:
    """C source of a device module lowered by :func:`lower_with_host_pipeline`."""
    gate.check()
    return helpers.c_source(device_mod, tvm_target)


def template_include_dir() -> str:
    """Directory holding tilelang's ``tl_templates`` headers (for compiling C sources)."""
    gate.check()
    return helpers.template_include_dir()


def should_force_let_inline() -> bool:
    """Whether a backend's own pass list should run tilelang's ``LetInline`` (tilelang's policy)."""
    gate.check()
    return helpers.should_force_let_inline()


def determine_target(target: object) -> Target:
    """The TVM target tilelang compiles for when given ``target`` (a name, dict or TVM target)."""
    gate.check()
    return helpers.determine_target(target)
