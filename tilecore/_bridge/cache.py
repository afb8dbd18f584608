"""tilelang's kernel disk cache for tilecore targets: entry layout, key salt, extra tiers.

* ``tilelang.cache._dispatch_map["tilecore"]``: the cache layout of backend-owned
  kernels (source, params and the library the adapter published).  Without an
  entry tilelang refuses the execution backend before compiling.
* ``KernelCache._generate_key``: mixes the backend's distribution, version and
  toolchain fingerprint into the key of every tilecore target (delegated ones
  included), so a new backend or compiler never serves a stale binary; for an
  editable install also a fingerprint of its sources (:mod:`tilecore.source_fingerprint`).
* ``KernelCache._load_kernel_from_disk`` / ``_save_kernel_to_disk``: the place
  for further cache tiers (:class:`CacheTier`, :func:`add_tier`): on a local miss
  each tier may install the entry into the local cache directory, after a local
  save each tier may publish it.  With no tier added both wrappers only call the
  original.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from tilecore._bridge.backend_module import EXECUTION_BACKEND
from tilecore._bridge.targets import resolve_tvm
from tilecore.errors import TilecoreError

if TYPE_CHECKING:
    from tilecore.registry import Registry

logger = logging.getLogger("tilecore")


def cache_salt(registry: Registry, tvm_target: Any) -> str | None:
    """Backend identity mixed into tilelang's cache key: distribution, version and toolchain fingerprint."""
    if tvm_target is None or isinstance(tvm_target, str):
        return None
    try:
        target = resolve_tvm(registry, tvm_target)
    except TilecoreError:
        return None
    if target is None:
        return None
    toolchain = registry.setup(target)
    fingerprint = toolchain.fingerprint if toolchain is not None else ""
    salt = f"tilecore:{target.distribution}=={target.version};{target};{fingerprint}"
    # An editable install changes without a new version: key on its sources too.
    from tilecore.source_fingerprint import editable_source_fingerprint  # here: not on the activation path

    editable = [editable_source_fingerprint(name) for name in (target.distribution, "tilecore")]
    return ";".join([salt, *filter(None, editable)])


def wrap_generate_key(registry: Registry, original: Callable[..., str]) -> Callable[..., str]:
    @functools.wraps(original)
    def generate_key(self: Any, *args: Any, **kwargs: Any) -> str:
        key = original(self, *args, **kwargs)
        salt = cache_salt(registry, kwargs.get("target"))
        if salt is None:
            return key
        return hashlib.sha256(f"{key}|{salt}".encode()).hexdigest()

    return generate_key


def register_salt(registry: Registry) -> Callable[[], None]:
    """The public path (tilelang with ``register_cache_key_salt``, docs/upstream/cache-key-salt.md)."""
    from tilelang.cache.kernel_cache import register_cache_key_salt, unregister_cache_key_salt

    register_cache_key_salt("tilecore", lambda target: cache_salt(registry, target), override=True)
    return lambda: unregister_cache_key_salt("tilecore")


_own_caches: list[Any] = []


def own_kernel_caches() -> tuple[Any, ...]:
    """The ``KernelCache`` instances :func:`kernel_cache` made (for evicting a faulted kernel)."""
    return tuple(_own_caches)


def kernel_cache(registry: Registry, _original: object = None) -> Any:
    """The ``KernelCache`` instance for the ``tilecore`` execution backend."""
    from tilelang.cache.kernel_cache import KernelCache

    class TilecoreKernelCache(KernelCache):  # type: ignore[misc]  # tilelang ships no type information
        """Disk-cache layout of backend-owned kernels: source, params and the adapter's library."""

        execution_backend = EXECUTION_BACKEND
        device_kernel_path = "device_kernel.src"
        host_kernel_path = "host_kernel.src"
        kernel_lib_path = "kernel_lib.bin"

        def _save_so_cubin_to_disk(self, kernel: Any, cache_path: str, verbose: bool = False) -> None:
            src = getattr(kernel.adapter, "libpath", None)
            data = KernelCache._load_binary(src) if src else b""
            KernelCache._safe_write_file(os.path.join(cache_path, self.kernel_lib_path), "wb", lambda f: f.write(data))

        def _set_adapter_cache_path(self, kernel: Any, cache_path: str) -> None:
            from tilecore._bridge.adapter import TilecoreAdapter

            if isinstance(kernel.adapter, TilecoreAdapter):
                kernel.adapter.tilelang_cache_path = cache_path

    cache = TilecoreKernelCache()
    _own_caches[:] = [cache]  # the one in use: each install makes a new one
    return cache


# ----------------------------------------------------------------------------------------
# Further cache tiers (e.g. a remote store shared by a fleet)
# ----------------------------------------------------------------------------------------


class TierContext:
    """What a tier may need besides the key, computed only when asked for.

    ``versions``: producer identity an entry must match (``tilelang``; ``backend`` =
    owning distribution==version, or ``tilelang`` for targets no backend owns);
    ``staging_dir``: where to build an entry before renaming it into place (same
    filesystem); ``verify(cache_path)``: tilelang's own integrity check of an entry.
    """

    def __init__(self, registry: Registry, cache: Any, tvm_target: Any) -> None:
        self._registry, self._cache, self._tvm_target = registry, cache, tvm_target

    @functools.cached_property
    def versions(self) -> dict[str, str]:
        import tilelang

        try:
            target = resolve_tvm(self._registry, self._tvm_target)
        except TilecoreError:
            target = None
        backend = f"{target.distribution}=={target.version}" if target is not None else "tilelang"
        return {"tilelang": str(tilelang.__version__), "backend": backend}

    @property
    def staging_dir(self) -> str:
        return str(self._cache._get_staging_root())

    def verify(self, cache_path: str) -> bool:
        return bool(self._cache._is_complete_cache_dir(cache_path) and self._cache._verify_cache_dir_integrity(cache_path))


class CacheTier(Protocol):
    """A cache behind tilelang's local disk cache.  Methods must not raise for a miss."""

    def fetch(self, key: str, cache_path: str, context: TierContext) -> bool:
        """On a local miss: install the entry of ``key`` at ``cache_path`` (atomically); ``True`` if it did."""
        ...

    def publish(self, key: str, cache_path: str, context: TierContext) -> None:
        """After tilelang saved the entry of ``key`` at ``cache_path``: offer it to this tier."""
        ...


_tiers: list[CacheTier] = []
_tiers_lock = threading.Lock()


def add_tier(tier: CacheTier) -> None:
    """Consult ``tier`` on every local miss and offer it every new entry (no-op if already added)."""
    with _tiers_lock:
        if tier not in _tiers:
            _tiers.append(tier)


def remove_tier(tier: CacheTier) -> None:
    with _tiers_lock:
        if tier in _tiers:
            _tiers.remove(tier)


def tiers() -> tuple[CacheTier, ...]:
    return tuple(_tiers)


def local_cache_dir() -> str:
    """The directory holding tilelang's kernel-cache entries (one sub-directory per key)."""
    from tilelang.cache.kernel_cache import KernelCache

    return str(KernelCache._get_cache_root())


def fetch_from_tiers(registry: Registry, cache: Any, tvm_target: Any, key: str, cache_path: str) -> bool:
    """Ask each tier, in order, to install the entry of ``key`` at ``cache_path``; ``True`` once one did."""
    context = TierContext(registry, cache, tvm_target)
    for tier in tiers():
        try:
            if tier.fetch(key, cache_path, context):
                return True
        except Exception as err:  # a tier failure is a miss, never a failed compile
            logger.warning("tilecore: cache tier %r failed to fetch %s: %s", tier, key, err)
    return False


def publish_to_tiers(registry: Registry, cache: Any, tvm_target: Any, key: str, cache_path: str) -> None:
    """Offer the new local entry of ``key`` to every tier."""
    context = TierContext(registry, cache, tvm_target)
    for tier in tiers():
        try:
            tier.publish(key, cache_path, context)
        except Exception as err:
            logger.warning("tilecore: cache tier %r failed to publish %s: %s", tier, key, err)


def _add_remote_tier() -> None:
    # The remote tier (tilecore.remote) is always registered; it is a no-op unless a URL is configured.
    from tilecore._bridge.remote_tier import RemoteCacheTier

    add_tier(RemoteCacheTier())


def wrap_load_kernel_from_disk(registry: Registry, original: Callable[..., Any]) -> Callable[..., Any]:
    _add_remote_tier()

    @functools.wraps(original)
    def load_kernel_from_disk(self: Any, key: str, *args: Any, **kwargs: Any) -> Any:
        kernel = original(self, key, *args, **kwargs)
        if kernel is not None or not _tiers:
            return kernel
        backend_context = kwargs.get("backend_context", args[0] if args else None)
        if fetch_from_tiers(registry, self, getattr(backend_context, "target", None), key, self._get_cache_path(key)):
            return original(self, key, *args, **kwargs)
        return None

    return load_kernel_from_disk


def wrap_save_kernel_to_disk(registry: Registry, original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def save_kernel_to_disk(self: Any, key: str, *args: Any, **kwargs: Any) -> Any:
        result = original(self, key, *args, **kwargs)
        if _tiers:
            cache_path = self._get_cache_path(key)
            if os.path.isdir(cache_path):
                kernel = kwargs.get("kernel", args[0] if args else None)
                publish_to_tiers(registry, self, getattr(kernel, "target", None), key, cache_path)
        return result

    return save_kernel_to_disk


class _TilecoreTiers:
    """tilecore's tiers (:func:`add_tier`) as one tier of tilelang's public registry."""

    def __init__(self, registry: Registry) -> None:
        self._registry = registry

    def fetch(self, key: str, cache_path: str, context: Any) -> bool:
        return fetch_from_tiers(self._registry, context.cache, context.target, key, cache_path)

    def publish(self, key: str, cache_path: str, context: Any) -> None:
        publish_to_tiers(self._registry, context.cache, context.target, key, cache_path)


def register_tiers(registry: Registry) -> Callable[[], None]:
    """The public path (tilelang with ``register_cache_tier``, docs/upstream/cache-tiers.md)."""
    from tilelang.cache.kernel_cache import register_cache_tier, unregister_cache_tier

    _add_remote_tier()
    tier = _TilecoreTiers(registry)
    register_cache_tier(tier)
    return lambda: unregister_cache_tier(tier)
