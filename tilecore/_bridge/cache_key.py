"""The key salt of tilelang's kernel cache: backend identity mixed into every tilecore target's key.

``KernelCache._generate_key`` (or ``register_cache_key_salt`` where tilelang has it) gets the
owning backend's distribution, version and toolchain fingerprint, so a new backend or
compiler never serves a stale binary; for an editable install also a fingerprint of its
sources (:mod:`tilecore._registry.identity`).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tilecore._bridge.tvm_targets import NAME, owned_target

if TYPE_CHECKING:
    from tilecore._registry import Registry


def cache_salt(registry: Registry, tvm_target: Any) -> str | None:
    """Backend identity mixed into tilelang's cache key: distribution, version and toolchain fingerprint."""
    if tvm_target is None or isinstance(tvm_target, str):
        return None
    target = owned_target(registry, tvm_target)
    if target is None:
        return None
    toolchain = registry.setup(target)
    fingerprint = toolchain.fingerprint if toolchain is not None else ""
    salt = f"tilecore:{target.distribution}=={target.version};{target};{fingerprint}"
    # An editable install changes without a new version: key on its sources too.
    from tilecore._registry.identity import editable_source_fingerprint  # here: not on the activation path

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

    register_cache_key_salt(NAME, lambda target: cache_salt(registry, target), override=True)
    return lambda: unregister_cache_key_salt(NAME)
