"""Runtime: build the C source into a shared library (cached per user) and call it with ctypes."""

from __future__ import annotations

import ctypes
import hashlib
import re
from pathlib import Path
from typing import TYPE_CHECKING

from tilecore import CompiledKernel, ToolchainError
from tilecore.errors import KernelFaultError
from tilecore.kit.artifacts import Artifact, ArtifactStore, adopt
from tilecore.kit.tools import check_tool
from tilecore.upstream import template_include_dir
from tilelang_democpu import __version__

if TYPE_CHECKING:
    import torch  # annotations only: importing the backend (tilecore list) must not import torch

_ENTRY = re.compile(r"int32_t\s+(\w+)\s*\(")


def entry_symbol(kernel: CompiledKernel) -> str:
    """The C function upstream's codegen emitted for the kernel (``<name>_kernel``)."""
    names = _ENTRY.findall(kernel.source)
    if not names:
        raise ToolchainError("no kernel function in the generated C source", owner=kernel.target.error_owner)
    wanted = f"{kernel.name}_kernel"
    return wanted if wanted in names else names[0]


#: Kernel libraries: ``<tilecore cache>/democpu/kernels/<key>/`` (built once, verified at each reuse).
STORE = ArtifactStore("democpu", "kernels")


def obtain(kernel: CompiledKernel, compiler: str, verified_copy: Path | None = None) -> Artifact:
    """The kernel's shared library, keyed by source, flags, compiler and plugin version.

    Reused only when its SHA-256 matches the one recorded when it was built
    (a truncated or zero-filled file is rebuilt, never loaded); built once
    under a lock when several processes ask at the same time.

    ``verified_copy``: tilelang's copy of this very library (a disk-cache hit), adopted
    instead of running the compiler when the store has no intact entry (on a remote hit that
    build was the whole cost, seconds; docs/benchmarks/cache.md), and repaired if it differs.
    """
    flags = [f"-{kernel.target['opt']}", "-std=c++17", "-fPIC", "-shared", f"-I{template_include_dir()}"]
    key = hashlib.sha256("\0".join([kernel.source, *flags, compiler, __version__]).encode()).hexdigest()[:32]
    where = kernel.error_owner

    def compile_into(staging: Path) -> None:
        if adopt(verified_copy, staging / f"lib{key}.so"):
            return
        source = staging / "kernel.cc"
        source.write_text(kernel.source)
        check_tool([compiler, *flags, source, "-o", staging / f"lib{key}.so"], owner=where, what=compiler)

    return STORE.obtain(key, f"lib{key}.so", compile_into, what=where, copy=verified_copy)


def key_of(artifact: Artifact) -> str:
    return artifact.path.parent.name


def build(kernel: CompiledKernel, compiler: str) -> Path:
    """Path of the kernel's verified shared library (see :func:`obtain`)."""
    return obtain(kernel, compiler).path


class CAdapter:
    """Calls ``int32_t <name>_kernel(T* arg0, ...)`` with the tensors' data pointers."""

    def __init__(self, kernel: CompiledKernel, library: Path, key: str | None = None) -> None:
        # tilecore copies this file into tilelang's disk cache; on a cache hit in a new
        # process, tilecore_create_adapter receives that copy back as kernel.library_path.
        self.library_path: str | None = str(library)  # KernelAdapter declares it Optional
        self._key = key
        self._lib = ctypes.CDLL(str(library))
        self._fn = getattr(self._lib, entry_symbol(kernel))
        self._fn.restype = ctypes.c_int32
        self._fn.argtypes = [ctypes.c_void_p] * len(kernel.params)
        self._where = kernel.error_owner

    def __call__(self, *tensors: torch.Tensor) -> None:
        status = self._fn(*(t.data_ptr() for t in tensors))
        if status != 0:
            # A kernel that faulted is never reused: drop its library from our cache (tilecore
            # then drops tilelang's cache entry of the kernel).
            if self._key is not None:
                STORE.discard(self._key)
            raise KernelFaultError(f"returned status {status} (a fault); its library was dropped from the cache.", owner=self._where)
