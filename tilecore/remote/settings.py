"""The remote tier's settings: defaults, the URL query and ``configure()`` keywords."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from tilecore.remote.url import RemoteURLError, redact

DAY = 24 * 3600


@dataclass(frozen=True)
class Settings:
    #: Seconds an entry lives after its last hit (0: until evicted or pruned).
    ttl: int = 30 * DAY
    #: Seconds one read or write to the store may block.  A hit of a few hundred KiB on a LAN
    #: takes milliseconds; a compile takes a second or more.
    timeout: float = 0.5
    #: Seconds one remote lookup may take in total (size check, download, renewal or removal):
    #: one deadline, not per read, so a trickling or silent store costs a compile at most this.
    deadline: float = 1.0
    #: Seconds to open a connection.
    connect_timeout: float = 0.25
    #: Entries larger than this are neither published nor fetched.
    max_entry_bytes: int = 64 * 1024 * 1024
    #: Default size cap that ``tilecore cache prune`` trims this tilecore version's entries to.
    max_bytes: int | None = None
    #: Name prefix of every entry; the tilecore version and the cache key follow it.
    prefix: str = "tilecore:v1:"
    #: After a store failure, seconds without remote calls (no further warning).
    retry_after: float = 60.0
    #: Seconds the process waits at exit for publications still queued.
    flush_timeout: float = 5.0
    #: Publications queued at most; more are dropped (the entry stays local).
    max_pending: int = 64
    #: False: only read from the store (machines whose store user may not write).
    publish: bool = True


def build(url: str, query: Mapping[str, str], overrides: Mapping[str, Any]) -> Settings:
    """Defaults, then the URL's query options, then keyword overrides; values checked."""
    settings = Settings()
    types = {f.name: f.type for f in fields(Settings)}
    for source, values in (("URL", query), ("configure()", overrides)):
        for name, raw in values.items():
            if name not in types:
                raise RemoteURLError(f"remote cache option {name!r} from {source} is unknown; valid: {', '.join(sorted(types))}")
            try:
                value = _convert(name, raw)
            except (TypeError, ValueError):
                raise RemoteURLError(
                    f"remote cache {redact(url)!r}: option {name}={raw!r} from {source} is not a valid {types[name]}"
                ) from None
            settings = replace(settings, **{name: value})
    return settings


def _convert(name: str, raw: Any) -> Any:
    if name == "prefix":
        return str(raw)
    if name == "publish":
        if isinstance(raw, bool):
            return raw
        text = str(raw).lower()
        if text not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
            raise ValueError(name)
        return text in ("1", "true", "yes", "on")
    if name in ("timeout", "deadline", "connect_timeout", "retry_after", "flush_timeout"):
        value = float(raw)
        if not value > 0:
            raise ValueError(name)
        return value
    if name == "max_bytes" and raw in (None, "", "none"):
        return None
    value = int(raw)
    if value < 0:
        raise ValueError(name)
    return value
