"""Remote cache URLs: parsing, tilecore's own query options, and redaction for messages.

A remote cache is named by one URL, e.g. ``redis://cache.internal:6379/0?ttl=604800``.
The scheme picks the store (see :mod:`tilecore.remote.store`); the query may carry
tilecore's tier options (:data:`TIER_OPTIONS`), which are removed before the URL is
handed to the store.  Everything else in the URL belongs to the store.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from tilecore.errors import TilecoreError

#: Query keys that configure the tier itself (not the store); values in seconds or bytes.
TIER_OPTIONS = (
    "ttl",
    "timeout",
    "connect_timeout",
    "max_entry_bytes",
    "max_bytes",
    "prefix",
    "retry_after",
    "flush_timeout",
    "max_pending",
    "publish",
)

#: Query keys whose values are secrets (never printed).
_SECRET_QUERY_KEYS = ("password", "pass", "token", "secret", "key", "access_key", "secret_key")


class RemoteURLError(TilecoreError):
    """A remote cache URL that cannot be used."""


@dataclass(frozen=True)
class ParsedURL:
    scheme: str
    store_url: str  # the URL without tilecore's tier options, credentials intact
    options: dict[str, str]  # tilecore's tier options found in the query


def parse(url: str) -> ParsedURL:
    """Split ``url`` into its scheme, the store's URL and tilecore's tier options."""
    parts = urlsplit(url.strip())
    if not parts.scheme or "://" not in url:
        raise RemoteURLError(
            f"remote cache URL {redact(url)!r} has no scheme; write e.g. redis://host:6379/0 "
            f"(TILECORE_REMOTE_CACHE or tilecore.remote.configure(url=...))."
        )
    store_query = []
    options: dict[str, str] = {}
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name in TIER_OPTIONS:
            options[name] = value
        else:
            store_query.append((name, value))
    store_url = _unsplit(parts.scheme, parts.netloc, parts.path, urlencode(store_query), parts.fragment)
    return ParsedURL(parts.scheme.lower(), store_url, options)


def _unsplit(scheme: str, netloc: str, path: str, query: str, fragment: str) -> str:
    """``urlunsplit`` that keeps ``//`` for host-less URLs (``dir:///srv/cache``)."""
    text = urlunsplit((scheme, netloc, path, query, fragment))
    if not netloc:
        text = f"{scheme}://{text[len(scheme) + 1 :]}"
    return text


def redact(url: str) -> str:
    """``url`` without user name, password and secret query values: safe for logs and warnings."""
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname or ""
        if ":" in host:  # IPv6 literal
            host = f"[{host}]"
        try:
            port = parts.port
        except ValueError:
            port = None
        netloc = f"{host}:{port}" if port is not None else host
        query = [(k, "***" if k.lower() in _SECRET_QUERY_KEYS else v) for k, v in parse_qsl(parts.query, keep_blank_values=True)]
        return _unsplit(parts.scheme, netloc, parts.path, urlencode(query, safe="*"), "")
    except Exception:  # never let a message crash on a malformed URL
        return "<unparseable remote cache URL>"
