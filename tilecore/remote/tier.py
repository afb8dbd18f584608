"""The remote tier: lookups that install into the local cache, background publication,
one warning per process when the store fails, counters and store maintenance."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tilecore._version import __version__ as TILECORE_VERSION
from tilecore.remote import entry
from tilecore.remote.deadline import call_within
from tilecore.remote.install import install, read_entry
from tilecore.remote.publisher import Job, Publisher, Verifier
from tilecore.remote.settings import Settings
from tilecore.remote.store import Store, StoreError, StoreOptions, open_store
from tilecore.remote.url import ParsedURL, RemoteURLError, redact, scrub

logger = logging.getLogger("tilecore.remote")


class Tier:
    """One configured remote cache (URL, signing key, settings) and its process-local state."""

    def __init__(self, url: str, parsed: ParsedURL, secret: bytes | None, key_source: str, settings: Settings) -> None:
        self.url = redact(url)
        self._raw_url = url
        self.parsed = parsed
        self.secret = secret
        self.key_source = key_source
        self.settings = settings
        self.counters: Counter[str] = Counter()
        self._store: Store | None = None
        self._lock = threading.Lock()
        self._down_until = 0.0
        self._warned = False
        self._publish_denied = False
        self._publisher: Publisher | None = None

    # -- naming -------------------------------------------------------------------------
    @property
    def namespace(self) -> str:
        """Name prefix of this tilecore version's entries."""
        return f"{self.settings.prefix}{TILECORE_VERSION}:"

    def name(self, key: str) -> str:
        return self.namespace + key

    def full_versions(self, versions: Mapping[str, str]) -> dict[str, str]:
        return {**versions, "tilecore": TILECORE_VERSION}

    # -- store and failures ---------------------------------------------------------------
    def scrub(self, text: str) -> str:
        """``text`` with every credential of the configured URL masked (client errors may quote it)."""
        return scrub(scrub(text, self.parsed.store_url), self._raw_url)

    def store(self) -> Store:
        with self._lock:
            if self._store is None:
                options = StoreOptions(connect_timeout=self.settings.connect_timeout, timeout=self.settings.timeout)
                try:
                    self._store = open_store(self.parsed.scheme, self.parsed.store_url, options)
                except RemoteURLError:
                    raise  # tilecore's own text: already redacted
                except Exception as err:  # a client's URL parser may quote the password
                    raise StoreError("error", self.scrub(f"opening the store: {type(err).__name__}: {err}")) from None
            return self._store

    def drop_store(self, store: Store) -> None:
        """Forget ``store`` (it overran a deadline and was aborted); the next call opens a new one."""
        with self._lock:
            if self._store is store:
                self._store = None

    def available(self) -> bool:
        return time.monotonic() >= self._down_until

    def failed(self, during: str, err: BaseException) -> None:
        """A store failure: stop asking for ``retry_after`` s; warn once per process."""
        self.counters["store_errors"] += 1
        with self._lock:
            self._down_until = time.monotonic() + self.settings.retry_after
            first, self._warned = not self._warned, True
        detail = f"{type(err).__name__}: {err}" if not isinstance(err, entry.EntryRejected) else str(err)
        if first:
            logger.warning(
                "tilecore remote cache %s: %s failed (%s); compiling locally without the remote tier "
                "(retrying after %.0f s; this warning is shown once per process).",
                self.url,
                during,
                self.scrub(detail),
                self.settings.retry_after,
            )
        else:
            logger.debug("remote cache %s: %s failed again (%s)", self.url, during, self.scrub(detail))

    # -- lookup ---------------------------------------------------------------------------
    def lookup_into(self, entry_dir: str, key: str, versions: Mapping[str, str], staging_dir: str | None = None) -> bool:
        """Fetch ``key``, verify it and install it as the local entry ``entry_dir``.

        ``True`` when ``entry_dir`` now holds the verified entry.  Never raises for store
        failures or bad entries: those are counted and logged, and the caller compiles.
        """
        if not self.available():
            self.counters["skipped"] += 1
            return False
        self.counters["lookups"] += 1
        name = self.name(key)
        try:
            store = self.store()  # local work (importing the client, once per process), not timed against the store
        except Exception as err:
            self.failed("lookup", err)
            return False
        # One deadline (monotonic clock) for connecting, every read and the verification; only
        # installing a verified hit (local disk work) comes after it.
        start = time.perf_counter()
        deadline = time.monotonic() + self.settings.deadline
        full_versions = self.full_versions(versions)

        def fetch_and_verify() -> tuple[bytes, entry.Entry | entry.EntryRejected] | None:
            blob = self._fetch(store, name)
            if blob is None:
                return None
            try:
                return blob, entry.decode(blob, key, full_versions, self.secret)
            except entry.EntryRejected as bad:
                return blob, bad

        try:
            fetched_blob = self._bounded(deadline, store, fetch_and_verify)
        except entry.EntryRejected as big:  # oversize: refused unread; not a store failure, not deleted
            self.counters["rejected"] += 1
            self.counters["rejected_size"] += 1
            logger.warning("tilecore remote cache %s: refused entry %s (%s); compiling locally.", self.url, key[:16], big)
            return False
        except Exception as err:
            self.counters["lookup_us"] += int((time.perf_counter() - start) * 1e6)
            self.failed("lookup", err)
            return False
        if fetched_blob is None:
            self.counters["misses"] += 1
            self.counters["lookup_us"] += int((time.perf_counter() - start) * 1e6)
            logger.debug("remote cache miss %s (%.1f ms)", key[:16], (time.perf_counter() - start) * 1e3)
            return False
        blob, found = fetched_blob
        if isinstance(found, entry.EntryRejected):
            self._reject(name, key, blob, found, deadline)
            return False
        fetched = time.perf_counter()
        try:
            install(found.files, Path(entry_dir), Path(staging_dir) if staging_dir else Path(entry_dir).parent)
        except OSError as err:
            self.counters["install_errors"] += 1
            logger.warning("tilecore remote cache: could not install entry %s into %s (%s); compiling locally.", key[:16], entry_dir, err)
            return False
        if self.settings.ttl and time.monotonic() >= deadline:
            self.counters["renew_skipped"] += 1  # a slow but complete hit: not renewed this time
        elif self.settings.ttl:  # renew only what passed verification
            try:
                self._bounded(deadline, store, lambda: store.touch(name, self.settings.ttl))
            except Exception as err:
                self.failed("renewing a hit", err)
        self.counters["hits"] += 1
        self.counters["bytes_in"] += len(blob)
        self.counters["hit_fetch_verify_us"] += int((fetched - start) * 1e6)
        self.counters["hit_install_us"] += int((time.perf_counter() - fetched) * 1e6)
        self.counters["lookup_us"] += int((time.perf_counter() - start) * 1e6)
        logger.debug(
            "remote cache hit %s: %d bytes, %d files, %.1f ms", key[:16], len(blob), len(found.files), (time.perf_counter() - start) * 1e3
        )
        return True

    def _bounded(self, deadline: float, store: Store, work: Callable[[], Any]) -> Any:
        """``work()`` within the lookup's deadline; past it the store is aborted and dropped."""
        try:
            return call_within(deadline, self.settings.deadline, store.abort, work)
        except StoreError as err:
            if err.kind == "timeout" and "lookup deadline" in str(err):
                self.counters["deadline_exceeded"] += 1
                self.drop_store(store)
            raise

    def _fetch(self, store: Store, name: str) -> bytes | None:
        """The blob under ``name``; its size is checked first where the store can tell it."""
        limit = self.settings.max_entry_bytes
        size = store.size(name)
        if size == 0:
            return None
        if size is not None and size > limit:
            raise entry.EntryRejected("size", f"{size} bytes exceeds max_entry_bytes={limit}; not downloaded")
        blob = store.get(name, None)
        if blob is not None and len(blob) > limit:
            raise entry.EntryRejected("size", f"{len(blob)} bytes exceeds max_entry_bytes={limit}")
        return blob

    def _reject(self, name: str, key: str, blob: bytes, bad: entry.EntryRejected, deadline: float) -> None:
        """Count and report a refused entry and delete it (compare-and-delete, so a good entry
        published meanwhile stays), so that the recompiled kernel can be published in its place.
        Unsigned and wrongly signed entries go too: fleets with different keys need different
        ``prefix`` settings (docs/remote-cache.md)."""
        self.counters["rejected"] += 1
        self.counters[f"rejected_{bad.reason}"] += 1
        logger.warning("tilecore remote cache %s: refused entry %s (%s); deleting it and recompiling locally.", self.url, key[:16], bad)
        if time.monotonic() >= deadline:
            self.counters["drop_skipped"] += 1  # no time left: it stays, unrenewed, until its TTL
            return
        try:
            store = self.store()
            if self._bounded(deadline, store, lambda: store.delete_if_same(name, blob)):
                self.counters["dropped_bad"] += 1
        except Exception as err:
            self.failed("removing a bad entry", err)

    # -- publication ----------------------------------------------------------------------
    def publish_async(self, entry_dir: str, key: str, versions: Mapping[str, str], verify: Verifier | None = None) -> bool:
        """Queue the finished local entry ``entry_dir`` for publication; never blocks.

        ``False`` if it was not queued (publishing off or refused, store down, queue full)."""
        if not self.settings.publish or self._publish_denied:
            return False
        if not self.available():
            self.counters["publish_skipped"] += 1
            return False
        with self._lock:
            if self._publisher is None:
                self._publisher = Publisher(self)
            publisher = self._publisher
        return publisher.submit(Job(entry_dir, key, dict(versions), verify))

    def publish_now(self, job: Job) -> None:
        """Read, sign and store one entry (the publisher thread's work)."""
        if not self.available():
            self.counters["publish_skipped"] += 1
            return
        if job.verify is not None and not job.verify(job.entry_dir):
            self.counters["publish_unverified"] += 1
            logger.debug("remote cache: local entry %s failed its integrity check; not published", job.key[:16])
            return
        try:
            files = read_entry(Path(job.entry_dir), self.settings.max_entry_bytes)
        except OSError as err:
            logger.debug("remote cache: cannot read local entry %s (%s); not published", job.entry_dir, err)
            return
        if files is None:
            self.counters["publish_too_big"] += 1
            logger.debug("remote cache: entry %s exceeds max_entry_bytes=%d; not published", job.key[:16], self.settings.max_entry_bytes)
            return
        blob = entry.encode(job.key, self.full_versions(job.versions), files, self.secret)
        start = time.perf_counter()
        try:
            stored = self.store().put_if_absent(self.name(job.key), blob, self.settings.ttl or None)
        except StoreError as err:
            if err.kind != "denied":
                self.failed("publish", err)
                return
            # A read-only store user: keep reading, stop publishing (one warning).
            self._publish_denied = True
            self.counters["publish_denied"] += 1
            logger.warning(
                "tilecore remote cache %s: publishing refused (%s); using the remote cache read-only in this process "
                "(add ?publish=0 to the URL to skip publishing).",
                self.url,
                self.scrub(str(err)),
            )
            return
        except Exception as err:
            self.failed("publish", err)
            return
        if stored:
            self.counters["published"] += 1
            self.counters["bytes_out"] += len(blob)
        else:
            self.counters["publish_exists"] += 1
        logger.debug(
            "remote cache %s %s: %d bytes, %.1f ms",
            "published" if stored else "already holds",
            job.key[:16],
            len(blob),
            (time.perf_counter() - start) * 1e3,
        )

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until queued publications are done (at most ``timeout`` s); ``True`` if drained."""
        publisher = self._publisher
        return True if publisher is None else publisher.flush(self.settings.flush_timeout if timeout is None else timeout)

    def forget_publisher(self) -> None:
        """After ``fork()``: the child has no publisher thread; start a new one when needed."""
        self._publisher = None
        self._lock = threading.Lock()

    # -- maintenance ------------------------------------------------------------------------
    def usage(self) -> dict[str, Any]:
        """Entries and bytes of this tilecore version, and of other versions under the prefix."""
        mine = other = mine_bytes = other_bytes = 0
        for stored in self.store().scan(self.settings.prefix):
            if stored.name.startswith(self.namespace):
                mine += 1
                mine_bytes += stored.size
            else:
                other += 1
                other_bytes += stored.size
        return {"entries": mine, "bytes": mine_bytes, "other_versions_entries": other, "other_versions_bytes": other_bytes}

    def clear(self, all_versions: bool = False) -> int:
        prefix = self.settings.prefix if all_versions else self.namespace
        return self.store().delete(s.name for s in list(self.store().scan(prefix)))

    def prune(self, max_bytes: int | None = None) -> dict[str, int]:
        """Drop other tilecore versions' entries, then the least recently used of this version's
        entries until they fit in ``max_bytes`` (default: the ``max_bytes`` setting)."""
        cap = self.settings.max_bytes if max_bytes is None else max_bytes
        store = self.store()
        entries = list(store.scan(self.settings.prefix))
        stale = [s.name for s in entries if not s.name.startswith(self.namespace)]
        removed_other = store.delete(stale) if stale else 0
        mine = [s for s in entries if s.name.startswith(self.namespace)]
        total = sum(s.size for s in mine)
        evict: list[str] = []
        if cap is not None:
            for stored in sorted(mine, key=lambda s: -(s.idle_s or 0.0)):
                if total <= cap:
                    break
                evict.append(stored.name)
                total -= stored.size
        removed_lru = store.delete(evict) if evict else 0
        return {"removed_other_versions": removed_other, "removed_lru": removed_lru, "bytes_left": total}
