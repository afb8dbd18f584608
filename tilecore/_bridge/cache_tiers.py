"""Further cache tiers behind tilelang's local disk cache (e.g. a remote store shared by a fleet).

``KernelCache._load_kernel_from_disk`` / ``_save_kernel_to_disk`` (or ``register_cache_tier``
where tilelang has it): on a local miss each tier (:class:`CacheTier`, :func:`add_tier`) may
install the entry into the local cache directory, after a local save each tier may publish
it.  With no tier added both wrappers only call the original, except that a save into an
unwritable or full ``TILELANG_CACHE_DIR`` is explained (:func:`~tilecore._bridge.kernel_cache.cache_dir_error`).  This module knows no
particular tier: activation adds the remote one.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from tilecore._bridge.tvm_targets import owned_target
from tilecore.kit.paths import full_cache_error

if TYPE_CHECKING:
    from tilecore._registry import Registry

logger = logging.getLogger("tilecore")


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

        target = owned_target(self._registry, self._tvm_target)
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


def fetch_from_tiers(registry: Registry, cache: Any, tvm_target: Any, key: str, cache_path: str) -> bool:
    """Ask each tier, in order, to install the entry of ``key`` at ``cache_path``; ``True`` once one did."""
    context = TierContext(registry, cache, tvm_target)
    for tier in tuple(_tiers):
        try:
            if tier.fetch(key, cache_path, context):
                return True
        except Exception as err:  # a tier failure is a miss, never a failed compile
            logger.warning("tilecore: cache tier %r failed to fetch %s: %s", tier, key, err)
    return False


def publish_to_tiers(registry: Registry, cache: Any, tvm_target: Any, key: str, cache_path: str) -> None:
    """Offer the new local entry of ``key`` to every tier."""
    context = TierContext(registry, cache, tvm_target)
    for tier in tuple(_tiers):
        try:
            tier.publish(key, cache_path, context)
        except Exception as err:
            logger.warning("tilecore: cache tier %r failed to publish %s: %s", tier, key, err)


def wrap_load_kernel_from_disk(registry: Registry, original: Callable[..., Any]) -> Callable[..., Any]:
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
        from tilecore._bridge.kernel_cache import TILELANG_CACHE_ENV, cache_dir_error, tilelang_cache_root

        try:
            result = original(self, key, *args, **kwargs)
        except OSError as err:  # a read-only or misplaced TILELANG_CACHE_DIR: say which and what moves it
            error = cache_dir_error(err)
            if error is None:
                raise
            raise error from err
        cache_path = self._get_cache_path(key)
        if not self._is_complete_cache_dir(cache_path):  # tilelang logged a failed save and went on uncached
            full = full_cache_error(tilelang_cache_root(), TILELANG_CACHE_ENV)
            if full is not None:
                logger.warning("tilecore: the kernel was compiled but not cached: %s", full)
        if _tiers and os.path.isdir(cache_path):
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

    tier = _TilecoreTiers(registry)
    register_cache_tier(tier)
    return lambda: unregister_cache_tier(tier)
