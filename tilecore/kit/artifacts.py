"""Build once, verify, reuse: the build products a backend keeps in the per-user cache.

A backend that turns kernel source into a file (a shared library, a device
image) keeps it under ``<tilecore cache>/<backend>/<kind>/<key>/`` so the next
process does not build it again.  A file that is merely *present* is not
trusted: a disk that filled up, a killed copy or a hand edit leaves a truncated
or zero-filled library, and loading that one gives a crash (``SIGBUS``,
"invalid ELF header") or, worse, garbage results.  So :class:`ArtifactStore`

* builds under a per-key file lock (``filelock``), so concurrent processes build
  a key once and the others wait for it;
* builds in a private staging directory next to the entry and publishes it
  with one rename, so nobody ever sees half an entry;
* records the file's size and SHA-256 in ``artifact.json`` at build time and
  checks both on every reuse; an entry that does not match (or has no record)
  is removed and rebuilt;
* repairs a copy of the artifact kept elsewhere (tilelang's disk cache stores
  one in its entry) that does not match the verified file, see
  :meth:`ArtifactStore.repair_copy`;
* forgets an entry whose kernel faulted at run time (:meth:`ArtifactStore.discard`),
  so it is rebuilt rather than trusted next time.

Nothing here knows about a particular device: the backend supplies the key
(everything that affects the bytes) and a ``build`` function that writes the
file into the staging directory.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tilecore.errors import KernelFaultError, Owner, TilecoreError
from tilecore.kit.paths import CacheDirectoryError, atomic_write, cache_dir, cache_root, cache_write_error, full_cache_error

logger = logging.getLogger("tilecore.kit.artifacts")

#: The record written next to every artifact at build time.
RECORD = "artifact.json"
RECORD_VERSION = 1
#: How long a process waits for another one building the same key before giving up.
LOCK_TIMEOUT_S = 900.0
_CHUNK = 1 << 20


class ArtifactError(TilecoreError):
    """A cached build product could not be built, verified or locked."""


def file_digest(path: Path) -> str:
    """SHA-256 of ``path``'s content (hex)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass(frozen=True)
class Artifact:
    """A verified build product.

    ``built`` is true when this call built it (``seconds`` is then the build
    time) and false for a verified reuse.  ``details`` holds what the backend's
    ``build`` function returned (recorded with the file and returned on reuse).
    """

    path: Path
    sha256: str
    size: int
    built: bool
    seconds: float = 0.0
    details: Mapping[str, Any] = field(default_factory=dict)


Builder = Callable[[Path], Mapping[str, Any] | None]


def adopt(copy: Path | None, into: Path) -> bool:
    """Copy ``copy`` to ``into`` instead of building it, if it is a non-empty file; whether it did.

    ``copy`` is this very artifact kept, and already checked against a content hash, by
    another cache (tilelang's disk-cache entry, checked against its manifest before the
    adapter is created; a remote-cache entry is verified before it is installed there):
    a kernel served by a cache never pays the build again.
    """
    if copy is None or not copy.is_file() or copy.stat().st_size == 0:
        return False
    shutil.copyfile(copy, into)
    return True


class ArtifactStore:
    """Verified build products of one backend, one entry folder per key.

    ``ArtifactStore("mychip", "kernels")`` keeps its entries in
    ``<tilecore cache>/mychip/kernels/<key>/``.
    """

    def __init__(self, *parts: str) -> None:
        if not parts:
            raise ValueError("ArtifactStore needs at least one folder name (the backend's name)")
        self._parts = parts

    @property
    def root(self) -> Path:
        """The store's folder (created on first use; follows ``TILECORE_CACHE_DIR`` at each call)."""
        return cache_dir(*self._parts)

    def entry(self, key: str) -> Path:
        if not key or "/" in key or key.startswith("."):
            raise ValueError(f"artifact key {key!r} must be a non-empty file name (e.g. a hex digest)")
        return self.root / key

    def lookup(self, key: str, filename: str, *, quiet: bool = False) -> Artifact | None:
        """The verified artifact of ``key``, or ``None`` if absent, unrecorded or damaged."""
        entry = self.entry(key)
        path = entry / filename
        try:
            record = json.loads((entry / RECORD).read_text())
            expected_size, expected_sha = int(record["size"]), str(record["sha256"])
            if record.get("file") != filename:
                return None
            size = path.stat().st_size
            if size != expected_size or file_digest(path) != expected_sha:
                if not quiet:
                    logger.warning("artifact %s does not match its build record (size or SHA-256): rebuilding it", path)
                return None
        except (OSError, ValueError, KeyError, TypeError):  # no record, an unreadable one, or no file
            return None
        return Artifact(path, expected_sha, size, built=False, details=record.get("details") or {})

    def obtain(self, key: str, filename: str, build: Builder, *, what: Owner | str = "artifact", copy: Path | None = None) -> Artifact:
        """The verified artifact of ``key``: reused when its record matches, else built once.

        ``build(staging)`` must write ``staging/filename`` (it may write other
        files next to it, they are published with it) and may return a JSON-able
        mapping kept in the record.  It runs while this process holds the key's
        lock; other processes asking for the same key wait and then reuse it.
        ``what`` owns the errors (an :class:`~tilecore.errors.Owner`, or a name such as "artifact").
        ``copy``: a copy of this artifact kept elsewhere (tilelang's disk-cache entry), which
        ``build`` may :func:`adopt`; it is repaired afterwards if it differs (:meth:`repair_copy`).
        """
        found = self._obtain(key, filename, build, what)
        if copy is not None:
            self.repair_copy(copy, found)
        return found

    def _obtain(self, key: str, filename: str, build: Builder, what: Owner | str) -> Artifact:
        found = self.lookup(key, filename)
        if found is not None:
            return found
        import filelock  # here, not at module level: activation imports this module for KernelFaultError

        entry = self.entry(key)
        lock = filelock.FileLock(str(entry.parent / f".{key}.lock"))
        try:
            with lock.acquire(timeout=LOCK_TIMEOUT_S):
                found = self.lookup(key, filename, quiet=True)  # another process may have built it meanwhile
                if found is not None:
                    return found
                return self._build(key, filename, build, what)
        except filelock.Timeout:
            raise ArtifactError.about(
                what,
                f"another process has been building it for more than {LOCK_TIMEOUT_S:.0f} s (lock {lock.lock_file}). "
                "If no such process is running, delete the lock file and retry.",
            ) from None
        except CacheDirectoryError:
            raise
        except Exception as err:  # a read-only or full cache: say which directory and what moves it
            error = cache_write_error(err, cache_root()) if isinstance(err, OSError) else None
            error = error or full_cache_error(entry.parent)  # e.g. the backend's compiler ran out of space
            if error is None:
                raise
            raise CacheDirectoryError.about(what, error.message, fix=error.fix, errno=error.errno) from err

    def _build(self, key: str, filename: str, build: Builder, what: Owner | str) -> Artifact:
        entry = self.entry(key)
        started = time.perf_counter()
        # ignore_cleanup_errors: on success the staging folder has been renamed away.
        with tempfile.TemporaryDirectory(prefix=f".staging-{key}-", dir=entry.parent, ignore_cleanup_errors=True) as name:
            staging = Path(name)
            details = dict(build(staging) or {})
            output = staging / filename
            if not output.is_file() or output.stat().st_size == 0:
                raise ArtifactError.about(what, f"the build finished without producing {filename} (or produced an empty file).")
            sha, size = file_digest(output), output.stat().st_size
            record = {"version": RECORD_VERSION, "file": filename, "size": size, "sha256": sha, "details": details}
            (staging / RECORD).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
            # No fsync: every lookup checks size and SHA-256, so what a crash could leave is rebuilt,
            # never loaded; the fsync was most of adopting a cache hit's library on a busy disk.
            shutil.rmtree(entry, ignore_errors=True)  # a damaged or unrecorded entry (we hold the lock)
            os.rename(staging, entry)
        seconds = time.perf_counter() - started
        logger.debug("%s: built %s in %.3f s", what, entry / filename, seconds)
        return Artifact(entry / filename, sha, size, built=True, seconds=seconds, details=details)

    def discard(self, key: str) -> None:
        """Forget ``key`` (e.g. its kernel faulted): the next :meth:`obtain` rebuilds it."""
        import filelock

        entry = self.entry(key)
        with filelock.FileLock(str(entry.parent / f".{key}.lock")).acquire(timeout=LOCK_TIMEOUT_S):
            shutil.rmtree(entry, ignore_errors=True)

    @staticmethod
    def repair_copy(copy: Path, artifact: Artifact) -> bool:
        """Make ``copy`` (a copy of ``artifact`` kept elsewhere, e.g. in tilelang's
        cache entry) hold the verified bytes again; returns whether it had to.

        The copy is replaced atomically.  Whoever owns the copy's folder and
        recorded its own checksum of the old bytes sees the mismatch and
        discards its entry, which is what should happen to a damaged one.
        """
        try:
            if copy.stat().st_size == artifact.size and file_digest(copy) == artifact.sha256:
                return False
        except OSError:
            pass
        logger.warning("%s differs from the verified artifact %s: replacing it", copy, artifact.path)
        atomic_write(copy, artifact.path.read_bytes())
        return True


__all__ = ["RECORD", "Artifact", "ArtifactError", "ArtifactStore", "KernelFaultError", "adopt", "file_digest"]
