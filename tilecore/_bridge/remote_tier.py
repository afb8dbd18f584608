"""The remote tier as one of the bridge's cache tiers (``tilecore._bridge.cache.CacheTier``).

The bridge registers one instance at activation; both methods return at once unless a
remote cache URL is configured (``TILECORE_REMOTE_CACHE`` or :func:`tilecore.remote.configure`).
It lives outside :mod:`tilecore.remote` so that activation imports nothing of that package.
"""

from __future__ import annotations

from typing import Any


class RemoteCacheTier:
    # tilecore.remote (hmac, the store registry, URL parsing) is imported on the first local miss,
    # not when activation registers the tier.
    def fetch(self, key: str, cache_path: str, context: Any) -> bool:
        from tilecore import remote

        if not remote.enabled():
            return False
        return remote.lookup_into(cache_path, key, context.versions, staging_dir=context.staging_dir)

    def publish(self, key: str, cache_path: str, context: Any) -> None:
        from tilecore import remote

        if remote.enabled():
            remote.publish_async(cache_path, key, context.versions, verify=context.verify)

    def __repr__(self) -> str:
        return "<tilecore remote cache tier>"

    # One remote tier per process, however often the bridge is installed.
    def __eq__(self, other: object) -> bool:
        return isinstance(other, RemoteCacheTier)

    def __hash__(self) -> int:
        return hash(RemoteCacheTier)
