"""The tpu target's kernel adapters: build (or reuse, verified) a kernel library and launch it on the emulator.

Build and cache: :mod:`tilelang_tpu.build`.  Launch: in emulator worker
processes (:mod:`tilelang_tpu.pool` on this side, :mod:`tilelang_tpu.worker`
on theirs), one for every BM1690 library and one per BM1684X library.

What a failed launch does to the kernel's library:

* the emulator reports a fault (on its output, as ``has error``, while every
  call returns 0) or an error: :class:`tilecore.errors.KernelFaultError`
  naming the target and the kernel, and the library is dropped from the cache
  (a kernel that faulted is never served again);
* the worker is lost (killed, crashed, out of time):
  :class:`tilelang_tpu.pool.WorkerLostError`, also a ``KernelFaultError``,
  with the outputs untouched.  The library is evicted only if it no longer
  matches its recorded SHA-256; otherwise the kernel object keeps working and
  its next call starts a new worker.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from tilecore import CompiledKernel, TilecoreError
from tilecore.errors import KernelFaultError
from tilelang_tpu import abi
from tilelang_tpu import build as _build_module
from tilelang_tpu.build import Build, LocalMemoryError, PplCompileError, build, forget, kernel_where, still_intact
from tilelang_tpu.grid import launch_cores
from tilelang_tpu.pool import IDLE_TIMEOUT_ENV, WORKERS, WorkerLostError, WorkerStartError, close_workers
from tilelang_tpu.setup import TpuToolchain
from tilelang_tpu.target import CHIP_CORES, pcie_unsupported


def __getattr__(name: str) -> Any:
    if name == "ppl_compile_runs":  # ppl-compile runs in this process (tests: a cache hit leaves it unchanged)
        return _build_module.ppl_compile_runs
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class EmulatorAdapter:
    """Runs a kernel library on SophGo's emulator in a worker process (see :mod:`tilelang_tpu.worker`)."""

    chip = ""
    mode = "cmodel"

    def __init__(self, kernel: CompiledKernel, build: Build, toolchain: TpuToolchain) -> None:
        self.library_path: str | None = str(build.library)  # KernelAdapter declares it Optional
        self._build = build
        self._toolchain = toolchain
        self._where = kernel_where(self.chip, self.mode, kernel.name)
        self._symbol = abi.launch_symbol(kernel.name)
        #: slot -> dtype of each scalar parameter (a 0-d param, passed as a Python number)
        self._scalars = {i: str(p.dtype).removeprefix("torch.") for i, p in enumerate(kernel.params) if not p.shape}
        #: (entry slot, parameter index, axis) of each symbolic dimension: its value is that
        #: tensor's size along that axis (abi.shape_symbols; tilecore's Launcher has already
        #: checked that every tensor naming the symbol agrees)
        self._params = kernel.params
        self._shape_sources = [
            (len(kernel.params) + k, *next((i, p.shape.index(name)) for i, p in enumerate(kernel.params) if name in p.shape))
            for k, name in enumerate(abi.shape_symbols([p.shape for p in kernel.params]))
        ]
        try:
            #: cores to launch on: exactly those the library was compiled for (its set_core_num)
            self.cores = launch_cores(kernel.source, CHIP_CORES[self.chip])
        except ValueError as err:
            raise TilecoreError(f"{err}.", owner=self._where) from None
        toolchain.require_libraries(self.chip)

    def _key(self) -> tuple[tuple[str, ...], list[str]]:
        raise NotImplementedError

    def __call__(self, *args: torch.Tensor | int | float) -> None:
        key, arguments = self._key()
        tensors = tuple(a for a in args if isinstance(a, torch.Tensor))
        scalars = [[i, self._scalars[i], args[i]] for i in self._scalars]
        for slot, index, axis in self._shape_sources:
            size = args[index].shape[axis]  # type: ignore[union-attr]  # a tensor parameter
            if size > abi.SHAPE_MAX:
                param = self._params[index]
                raise TilecoreError(
                    f"argument {index} ({param.describe()}) has {param.shape[axis]}={size} on axis {axis}, "
                    f"more than the {abi.SHAPE_MAX} an {abi.SHAPE_DTYPE} dimension parameter holds. Split the call.",
                    owner=self._where,
                )
            scalars.append([slot, abi.SHAPE_DTYPE, int(size)])
        try:
            WORKERS.run(
                key,
                self.chip,
                arguments,
                self._toolchain,
                self._build.library,
                self._symbol,
                tensors,
                str(self._where),
                scalars,
                self.cores,
            )
        except WorkerLostError as err:
            # Lost, not faulted: blame the library only if it no longer matches its recorded hash.
            if still_intact(self._build):
                raise WorkerLostError(f"{err} The kernel library still matches its recorded SHA-256 and is kept.") from None
            forget(self._build)
            raise WorkerLostError(f"{err} The kernel library no longer matches its recorded SHA-256 and was evicted.") from None
        except KernelFaultError:
            forget(self._build)
            raise


class Bm1690Adapter(EmulatorAdapter):
    """BM1690 through ``libtpuv7_rt``: one worker runs every BM1690 library of this process."""

    chip = "bm1690"

    def _key(self) -> tuple[tuple[str, ...], list[str]]:
        return ("bm1690",), []


class Bm1684xAdapter(EmulatorAdapter):
    """BM1684X through ``libbmlib``: one worker per kernel library (see :mod:`tilelang_tpu.bmlib_worker`)."""

    chip = "bm1684x"

    def _key(self) -> tuple[tuple[str, ...], list[str]]:
        return ("bm1684x", str(self._build.library)), [str(self._build.library), self._symbol]


ADAPTERS = {"bm1690": Bm1690Adapter, "bm1684x": Bm1684xAdapter}


def create_adapter(kernel: CompiledKernel, toolchain: TpuToolchain) -> EmulatorAdapter:
    """Build (or reuse, verified) ``kernel``'s library and wrap it in the chip's adapter.

    On a tilelang disk-cache hit ``kernel.library_path`` is tilelang's copy of the
    library: it is never loaded itself; the verified library of the same key is (adopted
    from that copy, which tilelang checked against its manifest, when the store has no
    intact one), and the copy is repaired if it differs.
    """
    chip, mode = kernel.target["chip"], kernel.target["mode"]
    if mode != "cmodel":
        raise pcie_unsupported()
    copy = Path(kernel.library_path) if kernel.library_path is not None else None
    built = build(kernel.source, kernel.name, chip, mode, toolchain, verified_copy=copy)
    return ADAPTERS[chip](kernel, built, toolchain)


__all__ = [
    "IDLE_TIMEOUT_ENV",
    "WORKERS",
    "Bm1684xAdapter",
    "Bm1690Adapter",
    "Build",
    "EmulatorAdapter",
    "LocalMemoryError",
    "PplCompileError",
    "WorkerLostError",
    "WorkerStartError",
    "build",
    "close_workers",
    "create_adapter",
]
