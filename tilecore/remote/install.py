"""Local side of a remote entry: reading a finished local entry, installing a fetched one atomically."""

from __future__ import annotations

import errno
import os
import shutil
import uuid
from collections.abc import Mapping
from pathlib import Path


def read_entry(entry_dir: Path, limit: int) -> dict[str, bytes] | None:
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


def install(files: Mapping[str, bytes], entry_dir: Path, staging_root: Path) -> None:
    """Write ``files`` into a private staging dir and rename it to ``entry_dir`` in one step.

    If another process installed ``entry_dir`` first, theirs stays and ours is dropped.

    No ``fsync``: the rename makes the entry appear whole to every other process, and what a
    crash could leave behind (a file cut short or empty) is refused on load -- tilelang checks
    every file of an entry against its manifest (sizes; SHA-256 of the library and params) and
    a backend's adapter checks its library again (``tilecore.kit.artifacts``) -- so it is a miss,
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
