"""The remote tier: lookups that install into the local cache, background publication,
one warning per process when the store fails, counters and store maintenance."""

from __future__ import annotations

import atexit
import errno
import logging
import os
import queue
import shutil
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tilecore._version import __version__ as TILECORE_VERSION
from tilecore.remote import entry
from tilecore.remote.settings import Settings
from tilecore.remote.store import Store, StoreError, StoreOptions, open_store
from tilecore.remote.url import ParsedURL, redact

logger = logging.getLogger("tilecore.remote")

#: ``verify(entry_dir) -> bool``: the local cache's own integrity check of a finished entry.
Verifier = Callable[[str], bool]


@dataclass
class _Job:
    entry_dir: str
    key: str
    versions: dict[str, str]
    verify: Verifier | None


class Tier:
    """One configured remote cache (URL, signing key, settings) and its process-local state."""

    def __init__(self, url: str, parsed: ParsedURL, secret: bytes | None, key_source: str, settings: Settings) -> None:
        self.url = redact(url)
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
        self._publisher: _Publisher | None = None

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
    def store(self) -> Store:
        with self._lock:
            if self._store is None:
                options = StoreOptions(connect_timeout=self.settings.connect_timeout, timeout=self.settings.timeout)
                self._store = open_store(self.parsed.scheme, self.parsed.store_url, options)
            return self._store

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
                _strip(detail, self.parsed.store_url),
                self.settings.retry_after,
            )
        else:
            logger.debug("remote cache %s: %s failed again (%s)", self.url, during, _strip(detail, self.parsed.store_url))

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
        start = time.perf_counter()
        name = self.name(key)
        try:
            blob = self.store().get(name, self.settings.ttl or None)
        except Exception as err:
            self.failed("lookup", err)
            return False
        if blob is None:
            self.counters["misses"] += 1
            logger.debug("remote cache miss %s (%.1f ms)", key[:16], (time.perf_counter() - start) * 1e3)
            return False
        try:
            if len(blob) > self.settings.max_entry_bytes:
                raise entry.EntryRejected("size", f"{len(blob)} bytes exceeds max_entry_bytes={self.settings.max_entry_bytes}")
            found = entry.decode(blob, key, self.full_versions(versions), self.secret)
        except entry.EntryRejected as bad:
            self._reject(name, key, blob, bad)
            return False
        fetched = time.perf_counter()
        try:
            _install(found.files, Path(entry_dir), Path(staging_dir) if staging_dir else Path(entry_dir).parent)
        except OSError as err:
            self.counters["install_errors"] += 1
            logger.warning("tilecore remote cache: could not install entry %s into %s (%s); compiling locally.", key[:16], entry_dir, err)
            return False
        self.counters["hits"] += 1
        self.counters["bytes_in"] += len(blob)
        self.counters["hit_fetch_verify_us"] += int((fetched - start) * 1e6)
        self.counters["hit_install_us"] += int((time.perf_counter() - fetched) * 1e6)
        logger.debug(
            "remote cache hit %s: %d bytes, %d files, %.1f ms", key[:16], len(blob), len(found.files), (time.perf_counter() - start) * 1e3
        )
        return True

    def _reject(self, name: str, key: str, blob: bytes, bad: entry.EntryRejected) -> None:
        self.counters["rejected"] += 1
        self.counters[f"rejected_{bad.reason}"] += 1
        logger.warning("tilecore remote cache %s: refused entry %s (%s); recompiling locally.", self.url, key[:16], bad)
        if bad.reason != "signature":  # a signature mismatch may be another key's fleet: leave it alone
            try:
                if self.store().delete_if_same(name, blob):
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
                self._publisher = _Publisher(self)
            publisher = self._publisher
        return publisher.submit(_Job(entry_dir, key, dict(versions), verify))

    def publish_now(self, job: _Job) -> None:
        """Read, sign and store one entry (the publisher thread's work)."""
        if not self.available():
            self.counters["publish_skipped"] += 1
            return
        if job.verify is not None and not job.verify(job.entry_dir):
            self.counters["publish_unverified"] += 1
            logger.debug("remote cache: local entry %s failed its integrity check; not published", job.key[:16])
            return
        try:
            files = _read_entry(Path(job.entry_dir), self.settings.max_entry_bytes)
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
                _strip(str(err), self.parsed.store_url),
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


class _Publisher:
    """One daemon thread draining a bounded queue; flushed for a bounded time at exit."""

    def __init__(self, tier: Tier) -> None:
        self.tier = tier
        self.jobs: queue.Queue[_Job] = queue.Queue(maxsize=tier.settings.max_pending)
        self.pid = os.getpid()
        self.thread = threading.Thread(target=self._run, name="tilecore-remote-publish", daemon=True)
        self.thread.start()
        atexit.register(self._at_exit)

    def submit(self, job: _Job) -> bool:
        try:
            self.jobs.put_nowait(job)
        except queue.Full:
            self.tier.counters["publish_dropped"] += 1
            logger.debug("remote cache: publish queue full; entry %s stays local", job.key[:16])
            return False
        return True

    def _run(self) -> None:
        while True:
            job = self.jobs.get()
            try:
                self.tier.publish_now(job)
            except Exception:  # a publisher bug must not kill the thread or the process
                logger.debug("remote cache: publishing %s failed", job.key[:16], exc_info=True)
            finally:
                self.jobs.task_done()

    def flush(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self.jobs.all_tasks_done:
            while self.jobs.unfinished_tasks:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.jobs.all_tasks_done.wait(left)
        return True

    def _at_exit(self) -> None:
        if os.getpid() != self.pid or self.tier._publisher is not self:
            return
        if not self.flush(self.tier.settings.flush_timeout):
            logger.debug("remote cache: %d publication(s) abandoned at exit", self.jobs.unfinished_tasks)


def _strip(text: str, secret_url: str) -> str:
    """Error texts from clients may quote the URL; never let credentials through."""
    return text.replace(secret_url, redact(secret_url)) if secret_url else text


def _read_entry(entry_dir: Path, limit: int) -> dict[str, bytes] | None:
    files: dict[str, bytes] = {}
    total = 0
    for path in sorted(entry_dir.iterdir()):
        if path.name.startswith(".") or not path.is_file() or path.is_symlink():
            continue  # temporary siblings of an atomic write, or anything that is not plain data
        data = path.read_bytes()
        total += len(data)
        if total > limit:
            return None
        files[path.name] = data
    if not files:
        raise OSError(errno.ENOENT, "empty cache entry", str(entry_dir))
    return files


def _install(files: Mapping[str, bytes], entry_dir: Path, staging_root: Path) -> None:
    """Write ``files`` into a private staging dir and rename it to ``entry_dir`` in one step.

    If another process installed ``entry_dir`` first, theirs stays and ours is dropped.

    No ``fsync``: the rename makes the entry appear whole to every other process, and what a
    crash could leave behind (a file cut short or empty) is refused on load -- tilelang checks
    every file of an entry against its manifest (sizes; SHA-256 of the library and params) and
    a backend's adapter checks its library again (``tilecore.artifacts``) -- so it is a miss,
    never a wrong kernel.  The fsyncs were 26-44 ms of a ~75 ms remote hit on a loaded disk
    (docs/benchmarks/cache.md, "what a hit costs")."""
    staging_root.mkdir(parents=True, exist_ok=True)
    staging = staging_root / f"{entry_dir.name}_remote_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    staging.mkdir(mode=0o700)
    try:
        for name, data in files.items():
            (staging / name).write_bytes(data)
        entry_dir.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(staging, entry_dir)
        except OSError as err:
            if err.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
