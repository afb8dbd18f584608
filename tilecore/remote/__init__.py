"""The remote compile-cache tier: tilelang's local disk cache, shared by a fleet through a store.

On a local miss the kernel cache asks :func:`lookup_into`, which fetches the entry
under the same key tilelang and tilecore already compute, verifies it (format,
key, versions, content hashes, HMAC signature) and installs it into the local
cache atomically, so tilelang then loads it as a local hit.  After a cold compile
the kernel cache hands the new local entry to :func:`publish_async`, which
publishes it from a background thread.

Configuration: ``TILECORE_REMOTE_CACHE=redis://host:6379/0`` (or :func:`configure`),
signing key in ``TILECORE_REMOTE_CACHE_KEY`` or ``TILECORE_REMOTE_CACHE_KEY_FILE``.
Stores are found by URL scheme in the entry-point group ``tilecore.remote_stores``.
Nothing here is imported, and no connection is made, unless a URL is configured.
See docs/remote-cache.md.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping
from typing import Any

from tilecore.remote.store import GROUP, Store, StoredEntry, StoreError, StoreOptions

__all__ = [
    "ENV",
    "GROUP",
    "Store",
    "StoreError",
    "StoreOptions",
    "StoredEntry",
    "clear",
    "configure",
    "counters",
    "doctor_report",
    "enabled",
    "flush",
    "get_record",
    "healthy",
    "lookup_into",
    "printable_env",
    "prune",
    "publish_async",
    "put_record",
    "reset",
    "stats",
]

ENV = "TILECORE_REMOTE_CACHE"
#: Seconds ``tilecore doctor`` gives the store for its probe (ping, entry count, server facts).
DOCTOR_DEADLINE_S = 10.0
logger = logging.getLogger("tilecore.remote")

_UNSET: Any = object()
_code_url: Any = _UNSET  # set by configure(); _UNSET means "follow the environment"
_code_key: str | bytes | None = None
_code_options: dict[str, Any] = {}
_tier: Any = None  # the Tier for _tier_id, built lazily
_tier_id: tuple[Any, ...] | None = None
_config_error: str | None = None
_lock = threading.Lock()


def configure(url: str | None, *, key: str | bytes | None = None, **options: Any) -> None:
    """Use the remote cache at ``url`` in this process (``None`` or ``""``: no remote tier),
    overriding ``TILECORE_REMOTE_CACHE``.  ``key`` overrides the signing key from the
    environment; ``options`` override the URL's tier options (``ttl``, ``timeout``, ``deadline``,
    ``connect_timeout``, ``max_entry_bytes``, ``max_bytes``, ``prefix``, ``retry_after``,
    ``flush_timeout``, ``max_pending``).  Raises on a bad URL, option or key."""
    global _code_url, _code_key, _code_options
    with _lock:
        _code_url, _code_key, _code_options = (url or ""), key, dict(options)
        _drop_tier()
    if url:
        _current(strict=True)


def reset() -> None:
    """Forget :func:`configure`: follow the environment again."""
    global _code_url, _code_key, _code_options
    with _lock:
        _code_url, _code_key, _code_options = _UNSET, None, {}
        _drop_tier()


def _drop_tier() -> None:
    global _tier, _tier_id, _config_error
    if _tier is not None:
        _tier.flush(_tier.settings.flush_timeout)
    _tier, _tier_id, _config_error = None, None, None


def _configured_url() -> str:
    return os.environ.get(ENV, "") if _code_url is _UNSET else _code_url


def enabled() -> bool:
    """Whether a remote cache URL is configured (cheap: no import, no connection)."""
    return bool(_configured_url().strip())


def _current(strict: bool = False) -> Any:
    """The :class:`~tilecore.remote.tier.Tier` for the current configuration, or ``None``.

    A configuration error is raised when ``strict``; otherwise it is logged once as a
    warning and the remote tier stays off (a broken setting never breaks compiling)."""
    global _tier, _tier_id, _config_error
    url = _configured_url().strip()
    if not url:
        return None
    from tilecore.remote import signing

    ident = (url, _code_key, tuple(sorted(_code_options.items())), os.environ.get(signing.KEY_ENV), os.environ.get(signing.KEY_FILE_ENV))
    with _lock:
        if ident == _tier_id:
            if _config_error is not None and strict:
                raise _config_exception(_config_error)
            return _tier
        from tilecore.errors import TilecoreError
        from tilecore.remote import settings as settings_mod
        from tilecore.remote import url as url_mod
        from tilecore.remote.tier import Tier

        try:
            parsed = url_mod.parse(url)
            settings = settings_mod.build(url, parsed.options, _code_options)
            secret, source = signing.load_key(_code_key)
            tier = Tier(url, parsed, secret, source, settings)
            from tilecore.remote.store import factories

            if parsed.scheme not in factories():
                tier.store()  # raises the unknown-scheme error with the list of known ones
        except Exception as err:  # a configuration error (TilecoreError), or a bug: never breaks compiling
            if not isinstance(err, TilecoreError):
                err = TilecoreError(f"remote cache {url_mod.redact(url)!r}: {type(err).__name__}: {err}")
            text = url_mod.scrub(str(err), url)
            _tier, _tier_id, _config_error = None, ident, text
            if strict:
                raise type(err)(text) if text != str(err) else err from None
            logger.warning("tilecore remote cache disabled: %s", text)
            return None
        _tier, _tier_id, _config_error = tier, ident, None
        return tier


def _config_exception(text: str) -> Exception:
    from tilecore.errors import TilecoreError

    return TilecoreError(text)


def lookup_into(local_entry_dir: str, key: str, versions: Mapping[str, str], staging_dir: str | None = None) -> bool:
    """On a local miss: install the remote entry for ``key`` as ``local_entry_dir``.

    ``versions`` names the producer identity the entry must match (``tilelang``,
    ``backend``; tilecore's own version is added).  ``True`` if the entry is now
    installed locally; ``False`` on a miss, a refused entry or a store failure."""
    tier = _current()
    return False if tier is None else tier.lookup_into(local_entry_dir, key, versions, staging_dir)


def publish_async(local_entry_dir: str, key: str, versions: Mapping[str, str], verify: Any = None) -> bool:
    """After a cold compile: publish the local entry in the background (never blocks).

    ``verify(local_entry_dir) -> bool`` is the local cache's own integrity check; an
    entry failing it is not published."""
    tier = _current()
    return False if tier is None else tier.publish_async(local_entry_dir, key, versions, verify)


def flush(timeout: float | None = None) -> bool:
    """Wait for queued publications (at most ``timeout`` s; default the ``flush_timeout`` setting)."""
    tier = _current()
    return True if tier is None else tier.flush(timeout)


def healthy() -> bool:
    """Whether a remote cache is configured and its store has not failed recently (no I/O)."""
    tier = _current()
    return tier is not None and bool(tier.available())


def _record_name(tier: Any, key: str) -> str:
    return f"{tier.namespace}tune:{key}"


def get_record(key: str) -> dict[str, Any] | None:
    """The verified tuning record stored under ``key`` (:mod:`tilecore.remote.records`), or ``None``
    on a miss, a refused record or a store failure (counted; a failure warns once)."""
    tier = _current()
    if tier is None or not tier.available():
        return None
    from tilecore.remote import records

    try:
        blob = tier.store().get(_record_name(tier, key), None)
    except Exception as err:
        tier.failed("reading a tuning record", err)
        return None
    if blob is None:
        tier.counters["record_misses"] += 1
        return None
    try:
        record = records.decode(blob, key, tier.secret)
    except records.RecordRejected as bad:
        tier.counters["record_rejected"] += 1
        logger.warning("tilecore remote cache %s: refused tuning record %s (%s); tuning again.", tier.url, key[:16], bad)
        return None
    tier.counters["record_hits"] += 1
    return record


def put_record(key: str, record: Mapping[str, Any]) -> bool:
    """Store the tuning record ``record`` under ``key``, signed (unless one is there); ``True`` if stored."""
    tier = _current()
    if tier is None or not tier.available():
        return False
    from tilecore.remote import records

    try:
        stored = tier.store().put_if_absent(_record_name(tier, key), records.encode(key, dict(record), tier.secret), tier.settings.ttl)
    except Exception as err:
        tier.failed("storing a tuning record", err)
        return False
    tier.counters["records_published" if stored else "record_exists"] += 1
    return bool(stored)


def counters() -> dict[str, int]:
    """This process's remote-tier counters: lookups, hits, misses, rejected, published, bytes..."""
    tier = _current()
    return {} if tier is None else dict(tier.counters)


def stats() -> dict[str, Any]:
    """The remote store's usage for this tilecore version (queries the store)."""
    tier = _current(strict=True)
    if tier is None:
        return {"configured": False}

    def query() -> dict[str, Any]:
        data: dict[str, Any] = {"configured": True, "url": tier.url, "namespace": tier.namespace}
        data.update(tier.usage())
        data["server"] = tier.store().info()
        data["counters"] = dict(tier.counters)
        return data

    return dict(_scrubbed(tier, query))


def clear(all_versions: bool = False) -> int:
    """Delete this tilecore version's remote entries (every version's with ``all_versions``)."""
    tier = _current(strict=True)
    return 0 if tier is None else int(_scrubbed(tier, lambda: tier.clear(all_versions)))


def prune(max_bytes: int | None = None) -> dict[str, int]:
    """Delete other tilecore versions' remote entries and trim this version's to ``max_bytes``."""
    tier = _current(strict=True)
    return {} if tier is None else dict(_scrubbed(tier, lambda: tier.prune(max_bytes)))


def _scrubbed(tier: Any, work: Any) -> Any:
    """``work()``; a failure is re-raised as :class:`StoreError` with the URL's credentials masked
    (not chained: a traceback would show the client's original text)."""
    try:
        return work()
    except StoreError as err:
        raise StoreError(err.kind, tier.scrub(str(err).split(": ", 1)[-1])) from None
    except Exception as err:
        raise StoreError("error", tier.scrub(f"{type(err).__name__}: {err}")) from None


def doctor_report() -> dict[str, Any]:
    """What ``tilecore doctor`` shows: URL without credentials, signing, reachability,
    round-trip time and the entry count for this tilecore version.  Never raises."""
    url = _configured_url().strip()
    if not url:
        return {"configured": False, "hint": f"set {ENV}=redis://host:6379/0 to share compiled kernels"}
    from tilecore.remote.deadline import call_within
    from tilecore.remote.url import redact, scrub

    report: dict[str, Any] = {"configured": True, "url": redact(url)}
    try:
        tier = _current(strict=True)
    except Exception as err:
        report.update(reachable=False, error=scrub(str(err), url))
        return report
    assert tier is not None
    report["signing"] = tier.key_source if tier.secret else "off (entries are not authenticated)"
    report["settings"] = {
        "ttl": tier.settings.ttl,
        "timeout": tier.settings.timeout,
        "deadline": tier.settings.deadline,
        "connect_timeout": tier.settings.connect_timeout,
        "max_entry_bytes": tier.settings.max_entry_bytes,
    }
    try:
        store = tier.store()

        def probe() -> dict[str, Any]:
            found: dict[str, Any] = {"rtt_ms": round(min(store.ping() for _ in range(3)) * 1e3, 3), "reachable": True}
            found.update(tier.usage())
            found["server"] = store.info()
            return found

        # A trickling or silent store must not hang the diagnostics either.
        limit = max(DOCTOR_DEADLINE_S, tier.settings.deadline)
        report.update(call_within(time.monotonic() + limit, limit, store.abort, probe, "deadline of the doctor's probe"))
    except Exception as err:
        report["reachable"] = False
        report["error"] = tier.scrub(f"{type(err).__name__}: {err}")
    return report


def printable_env(name: str, value: str) -> str:
    """``value`` of environment variable ``name`` as diagnostics may print it: the signing key
    hidden, credentials stripped from the remote cache URL."""
    from tilecore.remote import signing
    from tilecore.remote.url import redact

    if name == signing.KEY_ENV:
        return "<hidden>"
    if name == ENV:
        return redact(value)
    return value


def _after_fork_in_child() -> None:
    if _tier is not None:
        _tier.forget_publisher()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
