"""tilelang's kernel disk cache for tilecore targets: entry layout, key salt, extra tiers.

* ``tilelang.cache._dispatch_map["tilecore"]``: the cache layout of backend-owned
  kernels (source, params and the library the adapter published).  Without an
  entry tilelang refuses the execution backend before compiling.
* ``KernelCache._generate_key``: mixes the backend's distribution, version and
  toolchain fingerprint into the key of every tilecore target (delegated ones
  included), so a new backend or compiler never serves a stale binary; for an
  editable install also a fingerprint of its sources (:mod:`tilecore._registry.identity`).
* ``KernelCache._load_kernel_from_disk`` / ``_save_kernel_to_disk``: the place
  for further cache tiers (:class:`CacheTier`, :func:`add_tier`): on a local miss
  each tier may install the entry into the local cache directory, after a local
  save each tier may publish it.  With no tier added both wrappers only call the
  original.
* :func:`cache_dir_error`: a read-only, full or misplaced ``TILELANG_CACHE_DIR`` raises
  :class:`~tilecore.kit.paths.CacheDirectoryError` naming the directory, the variable
  and the fix, instead of tilelang's bare ``OSError``.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tilecore._bridge.adapter import TilecoreAdapter
from tilecore._bridge.tvm_targets import NAME
from tilecore.kit.paths import CacheDirectoryError, cache_write_error

if TYPE_CHECKING:
    from tilecore._registry import Registry

logger = logging.getLogger("tilecore")


#: The ``KernelCache`` :func:`kernel_cache` made last (for evicting a faulted kernel).
_own_caches: list[Any] = []


def kernel_cache(registry: Registry, _original: object = None) -> Any:
    """The ``KernelCache`` instance for the ``tilecore`` execution backend."""
    from tilelang.cache.kernel_cache import KernelCache

    class TilecoreKernelCache(KernelCache):  # type: ignore[misc]  # tilelang ships no type information
        """Disk-cache layout of backend-owned kernels: source, params and the adapter's library."""

        execution_backend = NAME
        device_kernel_path = "device_kernel.src"
        host_kernel_path = "host_kernel.src"
        kernel_lib_path = "kernel_lib.bin"

        def _save_so_cubin_to_disk(self, kernel: Any, cache_path: str, verbose: bool = False) -> None:
            src = getattr(kernel.adapter, "libpath", None)
            data = KernelCache._load_binary(src) if src else b""
            KernelCache._safe_write_file(os.path.join(cache_path, self.kernel_lib_path), "wb", lambda f: f.write(data))

        def _set_adapter_cache_path(self, kernel: Any, cache_path: str) -> None:
            if isinstance(kernel.adapter, TilecoreAdapter):
                kernel.adapter.tilelang_cache_path = cache_path

    try:
        cache = TilecoreKernelCache()  # creates tilelang's cache directories
    except OSError as err:
        error = cache_dir_error(err)
        if error is None:
            raise
        raise error from err
    _own_caches[:] = [cache]  # the one in use: each install makes a new one
    return cache


# ----------------------------------------------------------------------------------------
# Further cache tiers (e.g. a remote store shared by a fleet)
# ----------------------------------------------------------------------------------------


#: The variable that moves tilelang's kernel cache (tilelang.env.TILELANG_CACHE_DIR).
TILELANG_CACHE_ENV = "TILELANG_CACHE_DIR"


def tilelang_cache_root() -> Path:
    """``TILELANG_CACHE_DIR`` as tilelang reads it (default ``~/.tilelang/cache``)."""
    from tilelang import env

    return Path(str(env.TILELANG_CACHE_DIR)).expanduser()


def cache_dir_error(err: OSError) -> CacheDirectoryError | None:
    """The :class:`CacheDirectoryError` for ``err`` met while tilelang wrote its kernel cache
    (naming the directory and ``TILELANG_CACHE_DIR``), or ``None`` if ``err`` is about something else."""
    return cache_write_error(err, tilelang_cache_root(), TILELANG_CACHE_ENV)


def local_cache_dir() -> str:
    """The directory holding tilelang's kernel-cache entries (one sub-directory per key)."""
    from tilelang.cache.kernel_cache import KernelCache

    return str(KernelCache._get_cache_root())


def evict_faulted_kernel(adapter: TilecoreAdapter) -> None:
    """Remove a kernel whose launch faulted from tilelang's caches (its disk entry and
    the in-memory map), so that no later compile is served the faulty kernel."""
    from tilelang.cache import _dispatch_map

    if adapter.tilelang_cache_path:
        shutil.rmtree(adapter.tilelang_cache_path, ignore_errors=True)
    # tilelang's caches by execution-backend name, and tilecore's own when tilelang takes it from
    # ExecutionBackendSpec(kernel_cache=...) instead (docs/upstream/adapter-factory.md).
    for cache in {id(c): c for c in [*_dispatch_map.values(), *_own_caches]}.values():
        with cache._lock:
            for key, kernel in list(cache._memory_cache.items()):
                if getattr(kernel, "adapter", None) is adapter:
                    del cache._memory_cache[key]
