"""BM1690 execution through SophGo's tpuv7 runtime (``libtpuv7_rt.so``) with ctypes.

Runs inside an emulator worker process (:mod:`tilelang_tpu.worker`), never in
the user's process: the runtime has no de-initialisation call and, once
initialised, its emulator threads poll (about one CPU core) for the life of the
process, so the parent stops the worker when it is idle.  This module is
stdlib-only so the worker starts quickly.

One :class:`Tpuv7Device` per worker: ``tpuRtInit``/``tpuRtSetDevice``/
``tpuRtStreamCreate`` happen once, each kernel library is loaded once with
``tpuRtKernelLoadModuleFile`` (the runtime looks the entry up in that module,
so several libraries exporting the same entry name coexist), and every launch
allocates device memory, copies the buffers in, launches, synchronises, copies
them back and frees.
"""

from __future__ import annotations

import ctypes
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from tilelang_tpu import device_lock, start_lock

#: Longest wait (seconds) for the start lock (start_lock.py) before starting without it: its
#: holder's parent stops a start that makes no progress long before this.
START_LOCK_WAIT_S = 120.0
#: ``TILELANG_TPU_START_LOCK=0`` starts without the lock: only to reproduce the port race
#: (benchmarks/tpu_start_race.py --without-lock), never needed otherwise.
START_LOCK_ENV = "TILELANG_TPU_START_LOCK"

#: ctypes of a scalar kernel argument by dtype, and of a device address: tilelang_tpu.abi's
#: SCALAR_TYPES / ENTRY_ARG_CTYPE, repeated here to keep the worker process free of torch.
_SCALAR_CTYPES: dict[str, type] = {"float32": ctypes.c_float, "int32": ctypes.c_int32}
_ADDRESS_CTYPE = ctypes.c_uint64

_STATUS = {
    1: "device not ready", 2: "general failure", 3: "timeout", 4: "invalid parameters", 5: "out of memory",
    6: "data error", 7: "busy", 8: "not supported yet", 9: "not supported", 10: "initialisation error",
    11: "no device", 12: "no stream", 13: "invalid value", 14: "invalid resource handle", 15: "memory allocation",
}  # fmt: skip


class Tpuv7Device:
    """Device 0 of the tpuv7 runtime (emulator build), one stream."""

    def __init__(self, library_dir: str, waiting: Callable[[float], None] | None = None) -> None:
        """Start the runtime on device 0; ``waiting(seconds)`` is called while another process's
        emulator is starting (see :mod:`tilelang_tpu.start_lock`)."""
        #: Seconds each start-up step took (``load``, ``tpuRtInit``, ``tpuRtSetDevice``,
        #: ``tpuRtStreamCreate``): a slow start is attributed to the step that stalled.
        self.startup_seconds: dict[str, float] = {}
        started = time.perf_counter()
        # RTLD_GLOBAL: kernel libraries the runtime dlopen()s resolve emulator symbols against it.
        rt = ctypes.CDLL(f"{library_dir}/libtpuv7_rt.so", mode=ctypes.RTLD_GLOBAL)
        c_void_pp = ctypes.POINTER(ctypes.c_void_p)
        rt.tpuRtInit.argtypes = []
        rt.tpuRtSetDevice.argtypes = [ctypes.c_int]
        rt.tpuRtStreamCreate.argtypes = [c_void_pp]
        rt.tpuRtStreamSynchronize.argtypes = [ctypes.c_void_p]
        rt.tpuRtKernelLoadModuleFile.restype = ctypes.c_void_p
        rt.tpuRtKernelLoadModuleFile.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
        rt.tpuRtKernelLaunch.argtypes = [
            ctypes.c_void_p,
            ctypes.c_char_p,
            ctypes.c_void_p,
            ctypes.c_uint32,
            ctypes.c_uint64,
            ctypes.c_uint64,
            ctypes.c_void_p,
        ]
        rt.tpuRtMalloc.argtypes = [c_void_pp, ctypes.c_ulonglong, ctypes.c_int]
        rt.tpuRtFree.argtypes = [c_void_pp, ctypes.c_int]
        rt.tpuRtMemcpyS2D.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_ulonglong]
        rt.tpuRtMemcpyD2S.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_ulonglong]
        for fn in (rt.tpuRtInit, rt.tpuRtSetDevice, rt.tpuRtStreamCreate, rt.tpuRtStreamSynchronize, rt.tpuRtKernelLaunch,
                   rt.tpuRtMalloc, rt.tpuRtFree, rt.tpuRtMemcpyS2D, rt.tpuRtMemcpyD2S):  # fmt: skip
            fn.restype = ctypes.c_int
        self._rt = rt
        self._modules: dict[str, int] = {}
        self._stream = ctypes.c_void_p()
        self.startup_seconds["load"] = time.perf_counter() - started
        # tpuRtSetDevice takes a machine-wide lock that a process dying inside it leaves locked,
        # which costs the next start on the machine 31 s (device_lock.py): release a dead holder's.
        started = time.perf_counter()
        # One emulator start at a time on this machine (network namespace): two at once can pick the
        # same TCP port and then talk to each other's daemon, which hangs or crashes (start_lock.py).
        with start_lock.held(START_LOCK_WAIT_S, waiting, enabled=os.environ.get(START_LOCK_ENV) != "0") as lock:
            self.start_locked = lock.acquired
            self.startup_seconds["start_lock_wait"] = time.perf_counter() - started
            started = time.perf_counter()
            #: The dead holder's lock this worker released before starting (None: there was none).
            self.stale_lock = device_lock.clear_stale()
            self.startup_seconds["stale_lock_check"] = time.perf_counter() - started
            steps: tuple[tuple[str, Callable[[], int]], ...] = (
                ("tpuRtInit", lambda: int(rt.tpuRtInit())),
                ("tpuRtSetDevice", lambda: int(rt.tpuRtSetDevice(0))),
                ("tpuRtStreamCreate", lambda: int(rt.tpuRtStreamCreate(ctypes.byref(self._stream)))),
            )
            # A process that ignores the lock (another SophGo program) can still take the port: the
            # daemon says so in this worker's output, and the worker exits to be started again.
            # The lock is released as soon as the daemon listens on its port (start_lock.watch).
            stop_watching = start_lock.watch(lock, f"/proc/{os.getpid()}/fd/2")
            try:
                for step, call in steps:
                    started = time.perf_counter()
                    _check(call(), step)
                    self.startup_seconds[step] = time.perf_counter() - started
            finally:
                stop_watching()

    def _module(self, library: str) -> int:
        module = self._modules.get(library)
        if module is None:
            module = self._rt.tpuRtKernelLoadModuleFile(library.encode(), self._stream)
            if not module:
                raise RuntimeError(f"tpuRtKernelLoadModuleFile could not load the kernel library {library}")
            self._modules[library] = module
        return module

    def run(self, library: str, symbol: str, buffers: Sequence[bytearray], scalars: Sequence[Sequence[Any]] = (), cores: int = 1) -> None:
        """Launch ``symbol`` of ``library`` on ``buffers`` (copied in and back out, in place), on ``cores`` cores.

        ``cores`` is the launch's ``block_num``: every core runs the entry with the same
        arguments and picks its part of the grid with ``get_core_index()``, as ppl-compile's
        own host glue launches a kernel that calls ``set_core_num``.

        Every buffer is copied both ways: a kernel may read or write any
        parameter (an output it writes only partly keeps the caller's values
        elsewhere), and on the emulator the copies cost little next to the
        emulated execution.
        """
        module = self._module(library)
        pointers: list[ctypes.c_void_p] = []
        try:
            for buffer in buffers:
                pointer = ctypes.c_void_p()
                _check(self._rt.tpuRtMalloc(ctypes.byref(pointer), max(len(buffer), 1), 1), f"tpuRtMalloc({len(buffer)} bytes)")
                pointers.append(pointer)
            for buffer, pointer in zip(buffers, pointers, strict=True):
                if buffer:
                    _check(self._rt.tpuRtMemcpyS2D(pointer, _address(buffer), len(buffer)), "tpuRtMemcpyS2D")
            # Scalars ([slot, dtype, value]) sit by value in their declared slots (abi.entry_arguments).
            by_slot = {int(slot): (_SCALAR_CTYPES[dtype], value) for slot, dtype, value in scalars}
            addresses = iter(p.value or 0 for p in pointers)
            slots = [by_slot.get(i) or (_ADDRESS_CTYPE, next(addresses)) for i in range(len(pointers) + len(by_slot))]
            # ppl-compile's argument struct: natural C alignment, as a ctypes.Structure lays it out.
            fields = [(f"a{i}", t) for i, (t, _v) in enumerate(slots)] or [("a0", _ADDRESS_CTYPE)]
            args = type("EntryArguments", (ctypes.Structure,), {"_fields_": fields})(*(v for _t, v in slots))
            _check(
                self._rt.tpuRtKernelLaunch(module, symbol.encode(), ctypes.byref(args), ctypes.sizeof(args), 1, cores, self._stream),
                f"tpuRtKernelLaunch({symbol})",
            )
            _check(self._rt.tpuRtStreamSynchronize(self._stream), f"tpuRtStreamSynchronize after {symbol}")
            for buffer, pointer in zip(buffers, pointers, strict=True):
                if buffer:
                    _check(self._rt.tpuRtMemcpyD2S(_address(buffer), pointer, len(buffer)), "tpuRtMemcpyD2S")
        finally:
            for pointer in pointers:
                self._rt.tpuRtFree(ctypes.byref(pointer), 1)


def _check(status: int, call: str) -> None:
    if status != 0:
        raise RuntimeError(f"SophGo runtime call {call} failed with status {status} ({_STATUS.get(status, 'unknown status')})")


def _address(buffer: bytearray) -> int:
    return ctypes.addressof((ctypes.c_char * len(buffer)).from_buffer(buffer))
