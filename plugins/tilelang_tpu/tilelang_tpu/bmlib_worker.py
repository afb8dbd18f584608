"""BM1684X execution through ``libbmlib.so``: one emulator worker process per kernel library.

Runs inside an emulator worker process (:mod:`tilelang_tpu.worker`, stdlib only).
Why a process per library: the BM1684X cmodel build of bmlib takes the kernel
library from ``TPUKERNEL_FIRMWARE_PATH`` when the device is requested
(``bm_dev_request``) and looks kernel functions up with ``dlsym`` in *that*
library, not in the module ``tpu_kernel_load_module_file`` loaded.  Without the
variable a launch dereferences a NULL function pointer.  So a process can run
the kernels of one library only, and the first library would win for every
later kernel.  Each kernel library therefore gets its own worker, started on
first use with ``TPUKERNEL_FIRMWARE_PATH`` set to it.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Sequence


class _Device(ctypes.Structure):
    _fields_ = (("device_addr", ctypes.c_ulong), ("reserved", ctypes.c_uint), ("dmabuf_fd", ctypes.c_int))


class _Union(ctypes.Union):
    _fields_ = (("device", _Device),)


class DeviceMemory(ctypes.Structure):
    """``bm_device_mem_t`` (bmlib_runtime.h): passed by value."""

    _fields_ = (("u", _Union), ("flags", ctypes.c_uint), ("size", ctypes.c_uint))


class Bmlib:
    """bmlib device 0 with one kernel module loaded."""

    def __init__(self, library_dir: str, module_path: str, symbol: str) -> None:
        lib = ctypes.CDLL(os.path.join(library_dir, "libbmlib.so"), mode=ctypes.RTLD_GLOBAL)
        handle_p = ctypes.POINTER(ctypes.c_void_p)
        lib.bm_dev_request.argtypes = [handle_p, ctypes.c_int]
        lib.bm_dev_request.restype = ctypes.c_int
        lib.tpu_kernel_load_module_file.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        lib.tpu_kernel_load_module_file.restype = ctypes.c_void_p
        lib.tpu_kernel_get_function.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p]
        lib.tpu_kernel_get_function.restype = ctypes.c_int
        lib.tpu_kernel_launch.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
        lib.tpu_kernel_launch.restype = ctypes.c_int
        lib.bm_malloc_device_byte.argtypes = [ctypes.c_void_p, ctypes.POINTER(DeviceMemory), ctypes.c_uint]
        lib.bm_malloc_device_byte.restype = ctypes.c_int
        lib.bm_free_device.argtypes = [ctypes.c_void_p, DeviceMemory]
        lib.bm_free_device.restype = None
        lib.bm_memcpy_s2d.argtypes = [ctypes.c_void_p, DeviceMemory, ctypes.c_void_p]
        lib.bm_memcpy_s2d.restype = ctypes.c_int
        lib.bm_memcpy_d2s.argtypes = [ctypes.c_void_p, ctypes.c_void_p, DeviceMemory]
        lib.bm_memcpy_d2s.restype = ctypes.c_int
        lib.bm_mem_get_device_addr.argtypes = [DeviceMemory]
        lib.bm_mem_get_device_addr.restype = ctypes.c_ulonglong
        self._lib = lib
        self._handle = ctypes.c_void_p()
        self._check(lib.bm_dev_request(ctypes.byref(self._handle), 0), "bm_dev_request(0)")
        module = lib.tpu_kernel_load_module_file(self._handle, module_path.encode())
        if not module:
            raise RuntimeError(f"tpu_kernel_load_module_file({module_path}) failed")
        self._function = lib.tpu_kernel_get_function(self._handle, module, symbol.encode())
        if self._function < 0:
            raise RuntimeError(f"tpu_kernel_get_function({symbol}) failed: {self._function}")
        self._symbol = symbol
        self._library = module_path

    @staticmethod
    def _check(status: int, call: str) -> None:
        if status != 0:
            raise RuntimeError(f"{call} failed with bm_status {status}")

    def run(self, library: str, symbol: str, buffers: Sequence[bytearray]) -> None:
        if (library, symbol) != (self._library, self._symbol):
            raise RuntimeError(f"this BM1684X worker runs {self._symbol} of {self._library} only, not {symbol} of {library}")
        memories: list[DeviceMemory] = []
        try:
            for buffer in buffers:
                memory = DeviceMemory()
                self._check(
                    self._lib.bm_malloc_device_byte(self._handle, ctypes.byref(memory), max(len(buffer), 1)), "bm_malloc_device_byte"
                )
                memories.append(memory)
            for buffer, memory in zip(buffers, memories, strict=True):
                if buffer:
                    self._check(self._lib.bm_memcpy_s2d(self._handle, memory, _address(buffer)), "bm_memcpy_s2d")
            args = (ctypes.c_uint64 * max(len(memories), 1))(*(self._lib.bm_mem_get_device_addr(m) for m in memories))
            self._check(
                self._lib.tpu_kernel_launch(self._handle, self._function, ctypes.byref(args), ctypes.sizeof(args)),
                f"tpu_kernel_launch({self._symbol})",
            )
            for buffer, memory in zip(buffers, memories, strict=True):
                if buffer:
                    self._check(self._lib.bm_memcpy_d2s(self._handle, _address(buffer), memory), "bm_memcpy_d2s")
        finally:
            for memory in memories:
                self._lib.bm_free_device(self._handle, memory)


def _address(buffer: bytearray) -> int:
    return ctypes.addressof((ctypes.c_char * len(buffer)).from_buffer(buffer))
