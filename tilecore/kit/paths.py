"""Per-user cache directories and atomic file publication for backends.

Nothing tilecore or a well-behaved backend writes goes to the current
directory or stays in a shared temporary directory: build products live under
``$TILECORE_CACHE_DIR`` (default: ``platformdirs``' user cache directory for
"tilecore", i.e. ``$XDG_CACHE_HOME/tilecore`` or ``~/.cache/tilecore`` on
Linux), one folder per backend, and are published with an atomic rename so
concurrent processes see either nothing or a whole file.  Verified reuse of
build products is :mod:`tilecore.kit.artifacts`.

Unix-domain sockets have a short path limit (``sun_path``: 108 bytes on Linux,
104 on macOS, including the NUL), which a long ``$TMPDIR`` (pytest's
``tmp_path``, CI job folders) easily exceeds; :func:`socket_scratch_parent`
picks a parent that leaves room for the socket names a runtime creates.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tilecore.errors import Owner, TilecoreError

#: Longest unix socket path the kernel accepts (``sizeof(sun_path)`` minus the NUL).
UNIX_SOCKET_PATH_MAX = 103 if sys.platform == "darwin" else 107


def cache_root() -> Path:
    """``$TILECORE_CACHE_DIR``, else the per-user cache directory of "tilecore" (``platformdirs``)."""
    explicit = os.environ.get("TILECORE_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    import platformdirs  # only when no directory is configured: activation imports this module

    return Path(platformdirs.user_cache_dir("tilecore", appauthor=False))


class CacheDirectoryError(TilecoreError):
    """A cache directory cannot be written (read-only, full, no permission): names the
    directory and the environment variable that moves it.  ``errno`` is the cause's."""

    def __init__(self, message: str = "", *, fix: str = "", errno: int | None = None, owner: Owner | None = None) -> None:
        super().__init__(message, fix=fix, owner=owner)
        self.errno = errno


#: Errors that mean "this directory cannot take writes", as opposed to a bug or a missing tool.
_UNWRITABLE = {errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.ENOTDIR, errno.EEXIST}
_FULL = {errno.ENOSPC, errno.EDQUOT}


def cache_write_error(err: OSError, directory: Path, variable: str = "TILECORE_CACHE_DIR") -> CacheDirectoryError | None:
    """The error to raise for ``err`` met while writing under the cache ``directory`` (which
    ``variable`` moves), or ``None`` if ``err`` is not about that directory being unwritable.

    Errors naming a file (``err.filename``) count only when the file lies under ``directory``;
    a full disk counts whatever it names (a write reports no file name)."""
    if err.errno not in _UNWRITABLE:
        return None
    named = Path(str(err.filename)) if err.filename else None
    inside = named is not None and (named == directory or directory in named.parents)
    if not inside and not (err.errno in _FULL and named is None):
        return None
    cause = os.strerror(err.errno) if err.errno is not None else type(err).__name__
    if err.errno in _FULL:
        fix = f"free space there, or set {variable} to a directory on a file system with room"
    else:
        fix = f"set {variable} to a directory you can write to (the cache must be writable)"
    where = f" ({named})" if named is not None and named != directory else ""
    shown = f"{variable}={os.environ[variable]}" if os.environ.get(variable) else f"the default; {variable} is not set"
    return CacheDirectoryError(f"cache directory {directory} cannot be written: {cause}{where} ({shown}).", fix=fix, errno=err.errno)


#: Below this many free bytes, a failed build in the cache is blamed on the full file system.
NEARLY_FULL_BYTES = 1 << 20


def full_cache_error(directory: Path, variable: str = "TILECORE_CACHE_DIR") -> CacheDirectoryError | None:
    """A :class:`CacheDirectoryError` if the file system holding ``directory`` is (nearly) full:
    a build that failed there (a compiler's "No space left on device") gets this explanation."""
    try:
        free = shutil.disk_usage(directory).free
    except OSError:
        return None
    if free >= NEARLY_FULL_BYTES:
        return None
    shown = f"{variable}={os.environ[variable]}" if os.environ.get(variable) else f"the default; {variable} is not set"
    return CacheDirectoryError(
        f"cache directory {directory} is full ({free} bytes free; {shown}).",
        fix=f"free space there, or set {variable} to a directory on a file system with room",
        errno=errno.ENOSPC,
    )


def cache_dir(*parts: str) -> Path:
    """``cache_root()/parts...``, created with user-only permissions; a read-only, full or
    foreign directory raises :class:`CacheDirectoryError` naming it and ``TILECORE_CACHE_DIR``."""
    root = cache_root()
    path = root.joinpath(*parts)
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as err:
        error = cache_write_error(err, root) or cache_write_error(err, Path(str(err.filename or path)))
        if error is None:
            raise
        raise error from err
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
    with tempfile.TemporaryDirectory(prefix=prefix, ignore_cleanup_errors=True) as name:
        yield Path(name)


def socket_scratch_parent(reserve: int, where: Owner | str | None = None) -> Path:
    """A writable directory under which a folder of ``reserve`` more bytes still fits
    a unix socket path (:data:`UNIX_SOCKET_PATH_MAX`).

    Tried in order: ``$TMPDIR`` (``tempfile.gettempdir()``), ``$XDG_RUNTIME_DIR``
    (per user, mode 0700) and ``/tmp``; the first one short enough wins.  If none
    is, raises :class:`TilecoreError` of ``where`` saying what to set.
    """
    candidates = [tempfile.gettempdir(), os.environ.get("XDG_RUNTIME_DIR") or "", "/tmp"]
    limit = UNIX_SOCKET_PATH_MAX - reserve
    tried = []
    for text in dict.fromkeys(c for c in candidates if c):
        path = Path(text)
        tried.append(f"{text} ({len(text)} characters)")
        if len(text) <= limit and path.is_dir() and os.access(path, os.W_OK | os.X_OK):
            return path
    raise TilecoreError.about(
        where,
        f"needs a scratch directory for unix sockets whose path is at most {limit} characters long "
        f"(the socket path limit is {UNIX_SOCKET_PATH_MAX}); none of {', '.join(tried)} is usable. "
        "Set TMPDIR to a short writable directory (e.g. /tmp).",
    )


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
