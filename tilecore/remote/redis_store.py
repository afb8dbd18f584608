"""The Redis store (``redis://``, ``rediss://``, ``unix://``), on the maintained ``redis`` client.

One Redis string per entry.  Publication is ``SET name blob NX EX ttl``, so concurrent
publishers of one key leave exactly one entry.  A lookup is ``STRLEN`` (an oversize
entry is refused without being downloaded), then ``GET``; only after the entry passed
verification does the tier renew it with ``EXPIRE``, so readers never keep a refused
entry alive.  The client never retries; the tier bounds a whole lookup with one
deadline (:mod:`tilecore.remote.deadline`), which :meth:`RedisStore.abort` enforces by
closing the client's sockets.  A store user without ``STRLEN`` or ``EXPIRE`` permission
still works: sizes are then checked after the download, entries are not renewed.

Size the server for the fleet (``maxmemory`` with ``maxmemory-policy allkeys-lru``
evicts the least recently used kernels when it is full); ``tilecore cache prune
--max-bytes`` trims the same way from the client side.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Any

from tilecore.remote.store import Store, StoredEntry, StoreError, StoreOptions

# Compare-and-delete: drop a bad entry only if nobody replaced it meanwhile.
_DELETE_IF_SAME = "if redis.sha1hex(redis.call('GET', KEYS[1]) or '') == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"
_GLOB_SPECIAL = "*?[]\\"


def _escape_glob(text: str) -> str:
    return "".join("\\" + ch if ch in _GLOB_SPECIAL else ch for ch in text)


class RedisStore(Store):
    def __init__(self, url: str, options: StoreOptions) -> None:
        try:
            import redis
            from redis.backoff import NoBackoff
            from redis.retry import Retry
        except ImportError as err:
            raise StoreError(
                "error", f"the redis client is not installed ({err}); pip install 'tilecore[remote]' (or `pip install redis`)"
            ) from None
        self._redis = redis
        self._client = redis.Redis.from_url(
            url,
            socket_connect_timeout=options.connect_timeout,
            socket_timeout=options.timeout,
            retry=Retry(NoBackoff(), 0),
            retry_on_timeout=False,
            health_check_interval=0,
        )
        self._getex = True
        self._strlen = True
        self._expire = True

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Run one client call, mapping the client's exceptions onto :class:`StoreError`."""
        redis = self._redis
        try:
            return fn(*args, **kwargs)
        except redis.exceptions.TimeoutError as err:
            raise StoreError("timeout", f"{what}: {err}") from None
        except redis.exceptions.OutOfMemoryError as err:
            raise StoreError("full", f"{what}: {err}") from None
        except (redis.exceptions.AuthenticationError, redis.exceptions.NoPermissionError) as err:
            raise StoreError("denied", f"{what}: {err}") from None
        except redis.exceptions.ConnectionError as err:
            raise StoreError("unreachable", f"{what}: {err}") from None
        except redis.exceptions.ResponseError as err:
            kind = "full" if str(err).startswith("OOM") else "error"
            raise StoreError(kind, f"{what}: {err}") from None
        except (redis.exceptions.RedisError, ValueError, UnicodeDecodeError) as err:
            raise StoreError("protocol", f"{what}: {type(err).__name__}: {err}") from None

    def get(self, name: str, ttl_s: int | None) -> bytes | None:
        if ttl_s and self._getex:
            try:
                value = self._call("GETEX", self._client.getex, name, ex=ttl_s)
            except StoreError as err:
                if "unknown command" not in str(err).lower():
                    raise
                self._getex = False  # Redis < 6.2
            else:
                return self._checked_bytes(value)
        return self._checked_bytes(self._call("GET", self._client.get, name))

    def size(self, name: str) -> int | None:
        if not self._strlen:
            return None
        try:
            return int(self._call("STRLEN", self._client.strlen, name))
        except StoreError as err:
            if err.kind != "denied":
                raise
            self._strlen = False  # an ACL without STRLEN: check the size after the download
            return None

    def touch(self, name: str, ttl_s: int) -> None:
        if self._expire:
            try:
                self._call("EXPIRE", self._client.expire, name, ttl_s)
            except StoreError as err:
                if err.kind != "denied":
                    raise
                self._expire = False  # an ACL without EXPIRE: entries live their first TTL

    def abort(self) -> None:
        # Closes every socket of the pool, the one a blocked call is reading from included.
        self._client.connection_pool.disconnect(inuse_connections=True)

    @staticmethod
    def _checked_bytes(value: Any) -> bytes | None:
        if value is None or isinstance(value, bytes):
            return value
        raise StoreError("protocol", f"server returned {type(value).__name__} for a string value")

    def put_if_absent(self, name: str, blob: bytes, ttl_s: int | None) -> bool:
        return bool(self._call("SET NX", self._client.set, name, blob, nx=True, ex=ttl_s or None))

    def delete(self, names: Iterable[str]) -> int:
        total = 0
        batch: list[str] = []
        for name in names:
            batch.append(name)
            if len(batch) == 500:
                total += int(self._call("UNLINK", self._client.unlink, *batch))
                batch = []
        if batch:
            total += int(self._call("UNLINK", self._client.unlink, *batch))
        return total

    def delete_if_same(self, name: str, blob: bytes) -> bool:
        import hashlib

        return bool(self._call("EVAL", self._client.eval, _DELETE_IF_SAME, 1, name, hashlib.sha1(blob).hexdigest()))

    def scan(self, prefix: str) -> Iterator[StoredEntry]:
        cursor: Any = 0
        while True:
            cursor, names = self._call("SCAN", self._client.scan, cursor, match=_escape_glob(prefix) + "*", count=1000)
            if names:
                pipe = self._client.pipeline(transaction=False)
                for name in names:
                    pipe.strlen(name)
                    pipe.object("idletime", name)
                replies = self._call("STRLEN", pipe.execute, raise_on_error=False)
                for index, name in enumerate(names):
                    size, idle = replies[2 * index], replies[2 * index + 1]
                    if isinstance(size, int) and size > 0:  # 0: expired or deleted meanwhile
                        yield StoredEntry(
                            name.decode() if isinstance(name, bytes) else str(name), size, float(idle) if isinstance(idle, int) else None
                        )
            if int(cursor) == 0:
                return

    def ping(self) -> float:
        start = time.perf_counter()
        self._call("PING", self._client.ping)
        return time.perf_counter() - start

    def info(self) -> dict[str, object]:
        memory = self._call("INFO", self._client.info, "memory")
        server = self._call("INFO", self._client.info, "server")
        return {
            "server": f"redis {server.get('redis_version', '?')}",
            "used_memory": memory.get("used_memory"),
            "maxmemory": memory.get("maxmemory"),
            "maxmemory_policy": memory.get("maxmemory_policy"),
        }

    def close(self) -> None:
        self._client.close()
