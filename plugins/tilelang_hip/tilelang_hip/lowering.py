"""Lowering: upstream's ROCm pass pipeline, used as is.

Because the ``hip`` target is declared with ``upstream=tilecore.Upstream("hip", ...)``,
tilecore never calls a lowering hook for it: ``tilelang.compile`` resolves the
TVM target kind ``hip`` to upstream's ``BackendModule`` named ``rocm``
(``tilelang/rocm/backend.py``), whose ``PassPipeline`` runs
``ROCMPassPipelineBody`` (``tilelang/rocm/pipeline.py``: layout inference, tile-op
lowering to MFMA/WMMA, software pipelining, shared-memory planning).  This
package contributes only the TVM target it runs under (``target.tvm_attrs``).

:func:`upstream_backend` is the one thing kept here: it finds that module and
fails with a clear message if a tilelang release moves or renames it, instead
of letting a compile fall through to "No backend registered for target kind".
"""

from __future__ import annotations

from typing import Any

from tilecore import ToolchainError
from tilecore._version import TILELANG_REQUIREMENT
from tilelang_hip import DISTRIBUTION, __version__

UPSTREAM_BACKEND = "rocm"
TVM_KIND = "hip"


def upstream_backend() -> Any:
    """tilelang's registered ``BackendModule`` for TVM kind ``hip`` (it owns pipeline, codegen, adapters)."""
    from tilelang.backend import list_backends

    backends = list_backends()
    found = backends.get(UPSTREAM_BACKEND)
    if found is None or TVM_KIND not in found.target_kinds:
        import tilelang

        raise ToolchainError(
            f"target 'hip' ({DISTRIBUTION} {__version__}) delegates to tilelang's '{UPSTREAM_BACKEND}' backend for TVM kind "
            f"'{TVM_KIND}', which tilelang {tilelang.__version__} does not register (registered: {', '.join(sorted(backends))}). "
            f"Install a tilelang release this package supports (pip install 'tilelang{TILELANG_REQUIREMENT}')."
        )
    return found
