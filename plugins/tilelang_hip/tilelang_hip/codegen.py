"""Codegen: upstream's HIP device codegen, plus HIP source generation without ROCm.

Upstream owns the codegen (``tilelang/rocm/codegen.py``): the TVM global
functions ``target.build.tilelang_hip`` (source, then hipcc through the
``tilelang_callback_hip_compile`` callback, giving an HSACO code object) and
``target.build.tilelang_hip_without_compile`` (source only).  tilecore calls
no codegen hook for the ``hip`` target.

:func:`generate_source` is the HIP-specific addition: the kernel's HIP C++
source for any architecture on any machine, without ROCm — what
``kernel.get_kernel_source()`` would show after a compile that needs hipcc.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tilecore import TargetOptionError
from tilelang_hip import DISTRIBUTION, __version__


def generate_source(func: Any, target: str | Mapping[str, Any] = "hip", pass_configs: Mapping[str, Any] | None = None) -> str:
    """HIP source of ``func`` (a ``T.prim_func``) for ``target``, e.g. ``"hip:gfx942"``.

    Runs upstream's lowering and ``target.build.tilelang_hip_without_compile``
    under the same pass context as ``tilelang.compile`` (opt level 3 and
    ``pass_configs``), so the text is what a compile would hand to hipcc.
    """
    import tilelang
    from tvm import transform

    from tilecore.upstream import determine_target

    tvm_target = determine_target(target)
    if tvm_target.kind.name != "hip":
        raise TargetOptionError(
            f"{DISTRIBUTION} {__version__}: generate_source makes HIP source, but target {target!r} resolves to TVM kind "
            f"{tvm_target.kind.name!r}. Pass target='hip:<arch>'."
        )
    with transform.PassContext(opt_level=3, config=dict(pass_configs or {})), tvm_target:
        artifact = tilelang.lower(func, target=tvm_target)
    return str(artifact.kernel_source)
