"""BM1690 execution through SophGo's tpuv7 runtime (``libtpuv7_rt.so``) with ctypes.

One :class:`Tpuv7Runtime` per process: ``tpuRtInit``/``tpuRtSetDevice``/
``tpuRtStreamCreate`` happen once, each kernel library is loaded once with
``tpuRtKernelLoadModuleFile`` (the runtime looks the entry up in that module,
so several libraries exporting the same entry name coexist), and every launch
allocates device memory, copies the tensors in, launches, synchronises, copies
them back and frees.  The runtime library of the tpu_mlir wheel is the
emulator build: device memory is emulated in this process.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
from collections.abc import Sequence
from pathlib import Path

import torch

from tilecore import TilecoreError
from tilelang_tpu import abi, emulator
from tilelang_tpu.setup import TpuToolchain

_STATUS = {
    1: "device not ready", 2: "general failure", 3: "timeout", 4: "invalid parameters", 5: "out of memory",
    6: "data error", 7: "busy", 8: "not supported yet", 9: "not supported", 10: "initialisation error",
    11: "no device", 12: "no stream", 13: "invalid value", 14: "invalid resource handle", 15: "memory allocation",
}  # fmt: skip


class TpuRuntimeError(TilecoreError):
    """A call into SophGo's runtime failed."""


class Tpuv7Runtime:
    """The process's tpuv7 runtime, device 0, one stream.

    ``where`` arguments name the kernel and target in error messages.
    """

    _instance: Tpuv7Runtime | None = None
    _instance_lock = threading.Lock()

    @classmethod
    def get(cls, toolchain: TpuToolchain, where: str) -> Tpuv7Runtime:
        with cls._instance_lock:
            if cls._instance is None:
                cls._instance = cls(toolchain, where)
            return cls._instance

    def __init__(self, toolchain: TpuToolchain, where: str) -> None:
        self._where = where
        libraries = toolchain.require_libraries("bm1690")
        workdir = emulator.ensure_workdir()  # before the runtime reads TPU_SCALAER_EMULATOR_WORKDIR
        self._log = workdir / f"tpuv7-runtime-{os.getpid()}.log"
        with emulator.captured_output(self._log):
            self._start(libraries["libtpuv7_rt.so"])

    def _start(self, library: Path) -> None:
        # RTLD_GLOBAL: kernel libraries the runtime dlopen()s resolve emulator symbols against it.
        rt = ctypes.CDLL(str(library), mode=ctypes.RTLD_GLOBAL)
        c_void_pp = ctypes.POINTER(ctypes.c_void_p)
        rt.tpuRtInit.argtypes = []
        rt.tpuRtSetDevice.argtypes = [ctypes.c_int]
        rt.tpuRtStreamCreate.argtypes = [c_void_pp]
        rt.tpuRtStreamSynchronize.argtypes = [ctypes.c_void_p]
        rt.tpuRtKernelLoadModuleFile.restype = ctypes.c_void_p
        rt.tpuRtKernelLoadModuleFile.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
        rt.tpuRtKernelLaunch.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_void_p]
        rt.tpuRtMalloc.argtypes = [c_void_pp, ctypes.c_ulonglong, ctypes.c_int]
        rt.tpuRtFree.argtypes = [c_void_pp, ctypes.c_int]
        rt.tpuRtMemcpyS2D.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_ulonglong]
        rt.tpuRtMemcpyD2S.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_ulonglong]
        for fn in (rt.tpuRtInit, rt.tpuRtSetDevice, rt.tpuRtStreamCreate, rt.tpuRtStreamSynchronize, rt.tpuRtKernelLaunch,
                   rt.tpuRtMalloc, rt.tpuRtFree, rt.tpuRtMemcpyS2D, rt.tpuRtMemcpyD2S):  # fmt: skip
            fn.restype = ctypes.c_int
        self._rt = rt
        self._lock = threading.Lock()
        self._modules: dict[str, int] = {}
        self._check(rt.tpuRtInit(), "tpuRtInit")
        self._check(rt.tpuRtSetDevice(0), "tpuRtSetDevice(0)")
        self._stream = ctypes.c_void_p()
        self._check(rt.tpuRtStreamCreate(ctypes.byref(self._stream)), "tpuRtStreamCreate")

    def _check(self, status: int, call: str, where: str | None = None) -> None:
        if status != 0:
            meaning = _STATUS.get(status, "unknown status")
            log = ""
            with contextlib.suppress(OSError):
                log = self._log.read_text(errors="replace")[-2000:]
            raise TpuRuntimeError(
                f"{where or self._where}: SophGo runtime call {call} failed with status {status} ({meaning})."
                + (f" Runtime start-up output:\n{log}" if log else "")
            )

    def load(self, library: Path, where: str) -> int:
        """Handle of kernel library ``library`` (loaded once per process)."""
        key = str(library)
        with self._lock:
            module = self._modules.get(key)
            if module is None:
                module = self._rt.tpuRtKernelLoadModuleFile(key.encode(), self._stream)
                if not module:
                    raise TpuRuntimeError(f"{where}: tpuRtKernelLoadModuleFile could not load the kernel library {library}.")
                self._modules[key] = module
            return module

    def run(self, module: int, symbol: str, tensors: Sequence[torch.Tensor | int | float], where: str, types: Sequence[type] | None = None) -> None:
        """Launch ``symbol`` of ``module`` on host ``tensors`` (and scalars, passed by value
        as ``types`` says: :func:`tilelang_tpu.abi.slot_ctypes`; all tensors when ``None``).

        Every tensor is copied in and back out: a kernel may read or write any
        parameter (an output it writes only partly keeps the caller's values
        elsewhere), and on the emulator the copies cost little next to the
        emulated execution.
        """
        scalars = {i: v for i, v in enumerate(tensors) if not isinstance(v, torch.Tensor)}
        tensors = [t for t in tensors if isinstance(t, torch.Tensor)]
        sizes = [t.numel() * t.element_size() for t in tensors]
        with self._lock:
            pointers: list[ctypes.c_void_p] = []
            try:
                for size in sizes:
                    pointer = ctypes.c_void_p()
                    self._check(self._rt.tpuRtMalloc(ctypes.byref(pointer), max(size, 1), 1), f"tpuRtMalloc({size} bytes)", where)
                    pointers.append(pointer)
                for tensor, pointer, size in zip(tensors, pointers, sizes, strict=True):
                    if size:
                        self._check(self._rt.tpuRtMemcpyS2D(pointer, tensor.data_ptr(), size), "tpuRtMemcpyS2D", where)
                addresses = iter(p.value or 0 for p in pointers)
                values = [scalars[i] if i in scalars else next(addresses) for i in range(len(pointers) + len(scalars))]
                args = abi.entry_arguments(values, types or [abi.ENTRY_ARG_CTYPE] * len(values))
                self._check(
                    self._rt.tpuRtKernelLaunch(module, symbol.encode(), ctypes.byref(args), ctypes.sizeof(args), 1, 1, self._stream),
                    f"tpuRtKernelLaunch({symbol})",
                    where,
                )
                self._check(self._rt.tpuRtStreamSynchronize(self._stream), f"tpuRtStreamSynchronize after {symbol}", where)
                for tensor, pointer, size in zip(tensors, pointers, sizes, strict=True):
                    if size:
                        self._check(self._rt.tpuRtMemcpyD2S(tensor.data_ptr(), pointer, size), "tpuRtMemcpyD2S", where)
            finally:
                for pointer in pointers:
                    self._rt.tpuRtFree(ctypes.byref(pointer), 1)
