"""Pieces of tilelang's internals that backends reuse (exposed as :mod:`tilecore.upstream`).

Each looks up tilelang names listed in :data:`tilecore._bridge.seams.SEAMS`, so the
gate checks them together with the patched seams.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tvm.ir import IRModule
    from tvm.target import Target

#: TVM global of tilelang's C device codegen.
C_CODEGEN_GLOBAL = "target.build.tilelang_c"


def lower_with_host_pipeline(
    mod: IRModule,
    tvm_target: Target,
    host_kind: str = "c",
    vectorize: bool = False,
    passes: Callable[[IRModule, Target], IRModule] | None = None,
) -> IRModule:
    """Run tilelang's CPU pass pipeline (or ``passes(mod, dummy_target)``, a backend's own
    pass list) under a dummy ``host_kind`` target, then mark the kernel functions as
    device functions of ``tvm_target``.

    This is the standard lowering for a backend whose tile ops are expressed
    with upstream's portable (CPU) lowering and whose codegen walks the
    resulting loops: the host/device split then treats the kernels as device
    code for the backend's target.
    """
    from tilelang.cpu.pipeline import CPUPassPipelineBody
    from tvm import tirx, transform
    from tvm.ir import CallingConv
    from tvm.target import Target

    host = Target(host_kind)
    dummy = Target(host_kind, host)
    current = transform.PassContext.current()
    config = dict(current.config)
    if not vectorize:
        # Vector types (float4, ...) are a CPU codegen detail a device codegen rarely wants,
        # and the C codegen cannot express every vectorised op (max, casts) anyway.
        config["tirx.disable_vectorize"] = True
    with transform.PassContext(opt_level=current.opt_level, config=config, instruments=list(current.instruments)), dummy:
        lowered = (passes or CPUPassPipelineBody)(mod, dummy)
    updated = {}
    for gvar, func in lowered.functions.items():
        if not isinstance(func, tirx.PrimFunc) or func.attrs is None:
            continue
        attrs = func.attrs
        is_packed = "calling_conv" in attrs and attrs["calling_conv"] == CallingConv.C_PACKED_FUNC
        if "target" in attrs and attrs["target"].kind.name == host_kind and not is_packed:
            func = func.with_attr("calling_conv", CallingConv.DEVICE_KERNEL_LAUNCH)
            updated[gvar] = func.with_attr("target", Target(tvm_target, host))
    for gvar, func in updated.items():
        lowered[gvar] = func
    return lowered


def c_source(device_mod: IRModule, tvm_target: Target) -> str:
    """Run tilelang's C device codegen (``target.build.tilelang_c``) and return its text."""
    import tvm_ffi

    return str(tvm_ffi.get_global_func(C_CODEGEN_GLOBAL)(device_mod, tvm_target).inspect_source())


def template_include_dir() -> str:
    """Directory holding tilelang's ``tl_templates`` headers."""
    from tilelang.env import TILELANG_TEMPLATE_PATH

    return os.path.normpath(TILELANG_TEMPLATE_PATH)


def should_force_let_inline() -> bool:
    """Whether tilelang's pipelines inline every ``let`` (its ``LetInline`` pass policy)."""
    from tilelang.backend.pass_pipeline.pipeline_utils import should_force_let_inline as policy

    return bool(policy())


def determine_target(target: object) -> Target:
    """The TVM target ``tilelang.compile(..., target=target)`` would use (registered normalizers included)."""
    from tilelang.backend.target import determine_target as determine

    return determine(target, return_object=True)
