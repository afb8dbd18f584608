"""The emulator's scratch directory.

SophGo's emulators (``libcdm_daemon_emulator`` behind ``libtpuv7_rt``, the
BM1684X cmodel) keep per-process scratch state on disk: a ``<pid>/`` folder,
``<pid>-0..7/`` folders (one per emulated core) and unix sockets
``server_<pid>_<n>`` / ``client_<pid>_<n>``, about 33 entries per process.
Their parent is read from ``TPU_SCALAER_EMULATOR_WORKDIR`` (the library's own
spelling) when the runtime initialises, and is ``/tmp`` otherwise.

:func:`ensure_workdir` creates a private directory for this process (removed
at exit) and the emulator worker processes get it through that variable.  Unix
socket paths are limited to 107 bytes, and the emulator does not check: a
scratch directory of about 90 characters (a ``$TMPDIR`` of 52, as pytest's
``tmp_path`` or a CI job folder easily is) makes it die with ``buffer overflow
detected`` (``SIGABRT``).  So the directory is a short one (``tlt-<pid>-XXXXXXXX``)
under the first of ``$TMPDIR``, ``$XDG_RUNTIME_DIR`` and ``/tmp`` that leaves
:data:`SOCKET_NAME_RESERVE` bytes for the emulator's names, and a
``TPU_SCALAER_EMULATOR_WORKDIR`` the user set that is too long is refused with
an error saying so.  The emulator also always creates the FIFO
``/tmp/sg_wakeup_stream`` (a fixed, shared name that no setting moves); that
one entry stays in ``/tmp``.  Directories of processes that died without
running their exit handlers are removed by the next process that starts the
emulator (:func:`remove_stale_workdirs`).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
from pathlib import Path

from tilecore import Owner, TilecoreError
from tilecore.kit.paths import UNIX_SOCKET_PATH_MAX, socket_scratch_parent
from tilelang_tpu.chips import error_owner

#: Spelled as SophGo's emulator spells it ("SCALAER").
WORKDIR_ENV = "TPU_SCALAER_EMULATOR_WORKDIR"
#: The FIFO the emulator always creates, whatever the workdir.
WAKEUP_FIFO = "/tmp/sg_wakeup_stream"
#: Bytes kept free below the scratch directory for the emulator's socket names
#: (``/<pid>-<core>/server_<pid>_<n>`` is at most about 35 with 7-digit pids).
SOCKET_NAME_RESERVE = 40

_PREFIX = "tlt-"
_lock = threading.Lock()
_workdir: Path | None = None


def _where() -> Owner:
    return error_owner()


def ensure_workdir() -> Path:
    """The scratch directory of this process's emulators (created once, removed at exit)."""
    global _workdir
    with _lock:
        if _workdir is not None:
            return _workdir
        explicit = os.environ.get(WORKDIR_ENV)
        if explicit:
            if len(explicit) > UNIX_SOCKET_PATH_MAX - SOCKET_NAME_RESERVE:
                raise TilecoreError(
                    f"the SophGo emulator creates unix sockets under {WORKDIR_ENV}={explicit!r} ({len(explicit)} characters); socket "
                    f"paths are limited to {UNIX_SOCKET_PATH_MAX} bytes, so it must be at most "
                    f"{UNIX_SOCKET_PATH_MAX - SOCKET_NAME_RESERVE} characters. Unset it (tilelang-tpu then picks a short "
                    "private directory) or point it at a shorter path.",
                    owner=_where(),
                )
            _workdir = Path(explicit)
            _workdir.mkdir(parents=True, exist_ok=True)
            return _workdir
        name_length = len(f"/{_PREFIX}{os.getpid()}-") + 8
        parent = socket_scratch_parent(name_length + SOCKET_NAME_RESERVE, _where())
        remove_stale_workdirs(parent)
        path = Path(tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-", dir=parent))
        atexit.register(_remove, path)
        _workdir = path
        return path


def _remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    return True


def remove_stale_workdirs(parent: Path | None = None) -> list[Path]:
    """Remove scratch directories left by processes of this user that died without cleaning up.

    The atexit handler does not run when a process is killed, or when the
    emulator itself ends the process (an assertion in ``libtpuv7_emulator``
    calls ``exit`` from C, which skips Python's atexit).  Each scratch
    directory carries its owner's pid; a directory whose owner is no longer
    alive is removed by the next process that starts the emulator.
    """
    parent = Path(tempfile.gettempdir()) if parent is None else parent
    removed: list[Path] = []
    for entry in parent.glob(f"{_PREFIX}*"):
        pid_text = entry.name.removeprefix(_PREFIX).split("-", 1)[0]
        try:
            owned = entry.is_dir() and not entry.is_symlink() and entry.stat().st_uid == os.getuid()
        except OSError:
            continue
        if owned and pid_text.isdigit() and not _alive(int(pid_text)):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed
