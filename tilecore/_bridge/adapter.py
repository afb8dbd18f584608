"""The adapter of a backend-owned kernel: what ``JITKernel.adapter`` is for tilecore targets.

It wraps the backend's :class:`~tilecore.kernel.KernelAdapter` behind tilecore's argument
checks (:class:`~tilecore._launch.Launcher`) and carries the attributes tilelang's JIT and
disk cache read.  What happens to a kernel that faults is injected (``on_fault``), so this
module knows no cache.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tilecore.errors import KernelFaultError

if TYPE_CHECKING:
    from tilecore._launch import Launcher
    from tilecore.kernel import CompiledKernel


class TilecoreAdapter:
    """What ``JITKernel.adapter`` is for backend-owned targets.

    It has the attributes tilelang's JIT and disk cache read from adapters:
    ``func``, ``params``, ``result_idx``, ``libpath``, and the source getters.
    """

    #: The tilelang disk-cache entry holding this kernel (set by the cache), removed if it faults.
    tilelang_cache_path: str | None = None

    def __init__(
        self,
        kernel: CompiledKernel,
        launcher: Launcher,
        params: list[Any],
        host_source: str,
        on_fault: Callable[[TilecoreAdapter], None] = lambda adapter: None,
    ) -> None:
        self.kernel = kernel
        self._on_fault = on_fault
        self.launcher = launcher
        self.func = self.__call__  # what JITKernel calls: faults go through the eviction below
        self.params = params
        self.result_idx = list(kernel.out_idx)
        self.libpath: str | None = getattr(launcher.adapter, "library_path", None)
        self.kernel_global_source = kernel.source
        self._host_source = host_source

    def __call__(self, *args: Any) -> Any:
        try:
            return self.launcher(*args)
        except KernelFaultError:
            self._on_fault(self)
            raise

    def get_kernel_source(self, kernel_only: bool = True) -> str:
        return self.kernel.source

    def get_host_source(self) -> str:
        return self._host_source or getattr(self.launcher.adapter, "host_source", "") or ""
