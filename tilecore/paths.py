"""Per-user cache directories and atomic file publication for backends.

Nothing tilecore or a well-behaved backend writes goes to the current
directory or stays in a shared temporary directory: build products live under
``$TILECORE_CACHE_DIR`` (default ``$XDG_CACHE_HOME/tilecore``, else
``~/.cache/tilecore``), one folder per backend, and are published with an
atomic rename so concurrent processes see either nothing or a whole file.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path


def cache_root() -> Path:
    explicit = os.environ.get("TILECORE_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "tilecore"


def cache_dir(*parts: str) -> Path:
    """``cache_root()/parts...``, created with user-only permissions."""
    path = cache_root().joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def atomic_write(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` via a temporary file in the same directory and ``os.replace``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return path


@contextlib.contextmanager
def private_tempdir(prefix: str = "tilecore-") -> Iterator[Path]:
    """A private temporary directory that is removed on exit, whatever happens."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def publish_dir(staging: Path, final: Path) -> Path:
    """Atomically move a fully built ``staging`` directory to ``final``.

    If another process published ``final`` first, keep theirs and drop ours.
    """
    final.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.rename(staging, final)
    except OSError:
        if not final.is_dir():
            raise
        shutil.rmtree(staging, ignore_errors=True)
    return final
