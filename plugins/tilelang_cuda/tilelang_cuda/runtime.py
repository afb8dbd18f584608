"""Runtime: upstream TileLang's CUDA execution backends launch the kernels.

``tilecore_create_adapter`` is never called for this target.  The adapter is
the one upstream picks from ``tilelang.compile(..., execution_backend=...)``:

``tvm_ffi`` (what ``"auto"`` resolves to)
    TVM generates the host wrapper, builds it with the cubin embedded into a
    shared library, and each call goes through TVM-FFI: tensors cross as DLPack
    (through torch's C exchange API when present) and the kernel is launched
    on torch's current stream.  ``out_idx`` outputs are allocated by the host
    function itself.
``cython``
    A C++ wrapper compiled by nvcc and linked against ``libcuda``, so building
    it needs the NVIDIA driver library even when nothing runs.
``nvrtc``
    Compiles at load time with NVRTC; needs ``cuda-python`` (``cuda.bindings``).

The plugin adds nothing to the call path: ``JITKernel.__call__`` reaches the
upstream adapter directly, so the per-call host cost with tilecore active is
upstream's.  The measured costs are in ``docs/benchmarks/cuda.md``
(``benchmarks/cuda_gemm.py``).  What this module does own is reporting which
of these backends upstream offers for a target and which can run here
(shown in the toolchain notes of ``tilecore doctor``).
"""

from __future__ import annotations

from dataclasses import dataclass

#: What each backend needs beyond upstream TileLang itself.
REQUIREMENTS = {
    "tvm_ffi": "nothing beyond tilelang",
    "cython": "libcuda (the NVIDIA driver library) at build time",
    "nvrtc": "cuda-python (pip install cuda-python)",
}


@dataclass(frozen=True, slots=True)
class ExecutionBackend:
    name: str
    available: bool
    default: bool

    def describe(self) -> str:
        state = "default" if self.default else ("available" if self.available else "unavailable")
        return f"{self.name} ({state}; needs {REQUIREMENTS.get(self.name, 'see upstream')})"


def execution_backends(arch: str) -> tuple[ExecutionBackend, ...]:
    """Upstream's CUDA execution backends for ``arch``, in upstream's order of preference."""
    from tilelang.backend import get_backend
    from tvm.target import Target

    module = get_backend("cuda")
    target = Target({"kind": "cuda", "arch": arch})
    available = set(module.allowed_execution_backends(target, include_unavailable=False))
    default = module.resolve_execution_backend("auto", target).name if available else None
    return tuple(
        ExecutionBackend(name, name in available, name == default) for name in module.allowed_execution_backends(target)
    )
