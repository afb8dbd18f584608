"""The local tier's maintenance: usage, clear and prune of one kernel-cache directory.

The directory (one sub-directory per cache key) comes from the bridge, which is the
only part of tilecore that knows where tilelang keeps its cache.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any


def _entries(root: Path) -> list[tuple[Path, int, float]]:
    """(entry dir, bytes, last use) of every entry; last use = newest access or change time."""
    found: list[tuple[Path, int, float]] = []
    if not root.is_dir():
        return found
    for path in root.iterdir():
        if not path.is_dir() or path.name.startswith("."):
            continue
        size, used = 0, 0.0
        for file in path.iterdir():
            try:
                stat = file.stat()
            except OSError:
                continue
            size += stat.st_size
            used = max(used, stat.st_atime, stat.st_mtime)
        found.append((path, size, used))
    return found


def usage(root: Path) -> dict[str, Any]:
    entries = _entries(root)
    return {"dir": str(root), "entries": len(entries), "bytes": sum(size for _, size, _ in entries)}


def _remove(path: Path) -> None:
    # Rename first so a concurrent reader sees the entry either whole or absent.
    doomed = path.with_name(f".{path.name}.removing.{os.getpid()}")
    try:
        os.rename(path, doomed)
    except OSError:
        return
    shutil.rmtree(doomed, ignore_errors=True)


def clear(root: Path) -> int:
    entries = _entries(root)
    for path, _, _ in entries:
        _remove(path)
    return len(entries)


def prune(root: Path, max_age_s: float | None = None, max_bytes: int | None = None) -> dict[str, int]:
    """Remove entries unused for ``max_age_s``, then least recently used ones above ``max_bytes``."""
    now = time.time()
    entries = sorted(_entries(root), key=lambda item: item[2])  # oldest first
    removed = 0
    kept = []
    for path, size, used in entries:
        if max_age_s is not None and now - used > max_age_s:
            _remove(path)
            removed += 1
        else:
            kept.append((path, size, used))
    total = sum(size for _, size, _ in kept)
    for path, size, _ in kept:
        if max_bytes is None or total <= max_bytes:
            break
        _remove(path)
        removed += 1
        total -= size
    return {"removed": removed, "bytes_left": total}
