"""The store interface and how stores are found: entry-point group ``tilecore.remote_stores``.

A store keeps opaque blobs under string names.  A distribution ships one by naming
a factory in its metadata, keyed by the URL scheme it serves::

    [project.entry-points."tilecore.remote_stores"]
    s3 = "my_pkg.s3_store:S3Store"      # then TILECORE_REMOTE_CACHE=s3://bucket/prefix

The factory is called as ``factory(url, options)`` with the URL (tier options
removed, credentials intact) and :class:`StoreOptions`, and returns a
:class:`Store`.  Every failure of the store itself (unreachable, timeout, full,
bad reply) must surface as an exception; the tier turns it into one warning and
carries on without the remote tier.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from importlib import metadata

from tilecore.remote.url import RemoteURLError, redact

GROUP = "tilecore.remote_stores"

#: Stores that ship inside tilecore.  They are also declared in tilecore's own entry points;
#: this table keeps a source checkout working when its installed metadata predates them.
BUILTIN = {
    "redis": "tilecore.remote.redis_store:RedisStore",
    "rediss": "tilecore.remote.redis_store:RedisStore",
    "unix": "tilecore.remote.redis_store:RedisStore",
}


class StoreError(Exception):
    """The store failed (as opposed to an entry being bad); ``kind`` says how."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind  # "unreachable" | "timeout" | "full" | "protocol" | "denied" | "error"


@dataclass(frozen=True)
class StoreOptions:
    connect_timeout: float  # seconds to establish a connection
    timeout: float  # seconds any single read or write may block


@dataclass(frozen=True)
class StoredEntry:
    name: str
    size: int
    idle_s: float | None  # seconds since last access, if the store knows


class Store(abc.ABC):
    """Blob storage behind the remote tier.  Implementations must be thread-safe."""

    @abc.abstractmethod
    def get(self, name: str, ttl_s: int | None) -> bytes | None:
        """The blob stored under ``name`` or ``None``; ``ttl_s`` (if given) restarts its lifetime.
        The tier passes ``None`` and renews only verified entries (:meth:`touch`)."""

    def size(self, name: str) -> int | None:
        """Bytes stored under ``name`` (0: absent) without downloading it, or ``None`` if the
        store cannot tell; lets the tier refuse an oversize entry before fetching it."""
        return None

    def touch(self, name: str, ttl_s: int) -> None:  # noqa: B027 - optional hook
        """Restart ``name``'s lifetime (called only for entries that passed verification, so
        a refused entry is never kept alive by its readers).  The default does nothing."""

    @abc.abstractmethod
    def put_if_absent(self, name: str, blob: bytes, ttl_s: int | None) -> bool:
        """Store ``blob`` unless ``name`` exists (atomically); ``True`` if this call stored it."""

    @abc.abstractmethod
    def delete(self, names: Iterable[str]) -> int:
        """Remove ``names``; returns how many existed."""

    def delete_if_same(self, name: str, blob: bytes) -> bool:
        """Remove ``name`` only if it still holds ``blob`` (drops a bad entry without racing a
        good replacement).  The default does nothing: a bad entry then lives until its TTL."""
        return False

    @abc.abstractmethod
    def scan(self, prefix: str) -> Iterator[StoredEntry]:
        """Every entry whose name starts with ``prefix``."""

    @abc.abstractmethod
    def ping(self) -> float:
        """Round-trip time of a no-op request, in seconds."""

    def info(self) -> dict[str, object]:
        """Store-specific facts for ``tilecore doctor`` / ``cache stats`` (memory, limits...)."""
        return {}

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""

    def abort(self) -> None:
        """Called from another thread when a call overran the lookup deadline: make calls in
        progress fail now (close their sockets).  The tier drops the store afterwards."""
        self.close()


StoreFactory = Callable[[str, StoreOptions], Store]


def _load(value: str) -> StoreFactory:
    module, _, attr = value.partition(":")
    obj: object = __import__(module, fromlist=[attr or "_"])
    for part in attr.split(".") if attr else []:
        obj = getattr(obj, part)
    return obj  # type: ignore[return-value]


def factories() -> dict[str, tuple[str, str]]:
    """scheme -> (entry-point value, distribution) for every store known, built-ins included."""
    found: dict[str, tuple[str, str]] = {scheme: (value, "tilecore") for scheme, value in BUILTIN.items()}
    claimed: dict[str, list[str]] = {}
    for ep in metadata.entry_points(group=GROUP):
        dist = ep.dist.name if ep.dist is not None else "?"
        scheme = ep.name.lower()
        if dist != "tilecore":
            claimed.setdefault(scheme, []).append(dist)
        found[scheme] = (ep.value, dist)
    for scheme, dists in claimed.items():
        if len(dists) > 1 or (scheme in BUILTIN and dists):
            owners = sorted({*dists, *(["tilecore"] if scheme in BUILTIN else [])})
            raise RemoteURLError(
                f"remote cache scheme {scheme!r} is claimed by several distributions ({', '.join(owners)}) in "
                f"entry-point group {GROUP!r}; uninstall all but one."
            )
    return found


def open_store(scheme: str, url: str, options: StoreOptions) -> Store:
    """The store serving ``scheme``, connected lazily by the store itself."""
    known = factories()
    if scheme not in known:
        raise RemoteURLError(
            f"no remote cache store serves {redact(url)!r}: scheme {scheme!r} is not in entry-point group {GROUP!r}. "
            f"Known schemes: {', '.join(sorted(known))}. Install the distribution that ships it, or fix TILECORE_REMOTE_CACHE."
        )
    value, dist = known[scheme]
    try:
        factory = _load(value)
    except Exception as err:
        raise RemoteURLError(f"remote cache store {value!r} for scheme {scheme!r} (distribution {dist}) failed to import: {err}") from err
    store = factory(url, options)
    if not isinstance(store, Store):
        raise RemoteURLError(f"remote cache store {value!r} ({dist}) returned {type(store).__name__}, not a tilecore.remote.Store")
    return store
