"""Runtime: build the C source into a shared library (cached per user) and call it with ctypes."""

from __future__ import annotations

import ctypes
import hashlib
import re
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from tilecore import CompiledKernel, ToolchainError
from tilecore.paths import atomic_write, cache_dir, private_tempdir
from tilecore.upstream import template_include_dir
from tilelang_democpu import __version__

if TYPE_CHECKING:
    import torch  # annotations only: importing the backend (tilecore list) must not import torch

_ENTRY = re.compile(r"int32_t\s+(\w+)\s*\(")


def entry_symbol(kernel: CompiledKernel) -> str:
    """The C function upstream's codegen emitted for the kernel (``<name>_kernel``)."""
    names = _ENTRY.findall(kernel.source)
    if not names:
        raise ToolchainError(f"target {kernel.target} ({kernel.target.owner}): no kernel function in the generated C source")
    wanted = f"{kernel.name}_kernel"
    return wanted if wanted in names else names[0]


def build(kernel: CompiledKernel, compiler: str) -> Path:
    """Compile ``kernel.source``; the library is cached by source, flags, compiler and plugin version."""
    flags = [f"-{kernel.target['opt']}", "-std=c++17", "-fPIC", "-shared", f"-I{template_include_dir()}"]
    key = hashlib.sha256("\0".join([kernel.source, *flags, compiler, __version__]).encode()).hexdigest()[:32]
    library = cache_dir("democpu", "libs") / f"{key}.so"
    if library.exists():
        return library
    with private_tempdir("tilelang-democpu-") as work:
        source = work / "kernel.cc"
        source.write_text(kernel.source)
        output = work / "kernel.so"
        result = subprocess.run([compiler, *flags, str(source), "-o", str(output)], capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise ToolchainError(
                f"target {kernel.target} ({kernel.target.owner}): {compiler} failed to build kernel {kernel.name!r}:\n{result.stderr[-2000:]}"
            )
        atomic_write(library, output.read_bytes())
    return library


class CAdapter:
    """Calls ``int32_t <name>_kernel(T* arg0, ...)`` with the tensors' data pointers."""

    def __init__(self, kernel: CompiledKernel, library: Path) -> None:
        self.library_path = str(library)
        self._lib = ctypes.CDLL(str(library))
        self._fn = getattr(self._lib, entry_symbol(kernel))
        self._fn.restype = ctypes.c_int32
        self._fn.argtypes = [ctypes.c_void_p] * len(kernel.params)
        self._name = kernel.name

    def __call__(self, *tensors: torch.Tensor) -> None:
        status = self._fn(*(t.data_ptr() for t in tensors))
        if status != 0:
            raise RuntimeError(f"democpu kernel {self._name!r} returned {status}")
