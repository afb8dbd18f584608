"""The emulator's scratch directory.

SophGo's BM1690 emulator (``libcdm_daemon_emulator`` behind ``libtpuv7_rt``)
keeps per-process scratch state on disk: a ``<pid>/`` folder, ``<pid>-0..7/``
folders (one per emulated core) and unix sockets ``server_<pid>_<n>`` /
``client_<pid>_<n>``, about 33 entries per process.  Their parent is read from
``TPU_SCALAER_EMULATOR_WORKDIR`` (the library's own spelling) when the runtime
initialises, and is ``/tmp`` otherwise.

:func:`ensure_workdir` points it at a private directory created for this
process and removed at exit, *before* the runtime library is loaded.  If the
user already set the variable, their directory is used and left alone.  The
emulator also always creates the FIFO ``/tmp/sg_wakeup_stream`` (a fixed,
shared name that no setting moves); that one entry stays in ``/tmp``.
Directories of processes that died without running their exit handlers are
removed by the next process that starts the emulator
(:func:`remove_stale_workdirs`).

:func:`captured_output` keeps the runtime's start-up chatter (about 20
lines printed by C code) out of the user's terminal; it goes to a log in the
scratch directory, quoted in errors.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

#: Spelled as SophGo's emulator spells it ("SCALAER").
WORKDIR_ENV = "TPU_SCALAER_EMULATOR_WORKDIR"
#: The FIFO the emulator always creates, whatever the workdir.
WAKEUP_FIFO = "/tmp/sg_wakeup_stream"

_PREFIX = "tilelang-tpu-emulator-"
_lock = threading.Lock()
_workdir: Path | None = None


def ensure_workdir() -> Path:
    """The scratch directory of this process's emulators (created once, removed at exit)."""
    global _workdir
    with _lock:
        if _workdir is not None:
            return _workdir
        explicit = os.environ.get(WORKDIR_ENV)
        if explicit:
            _workdir = Path(explicit)
            _workdir.mkdir(parents=True, exist_ok=True)
            return _workdir
        remove_stale_workdirs()
        path = Path(tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-"))
        # The emulator reads the variable with getenv() when it initialises, so it must be in
        # this process's environment (and is inherited by the BM1684X workers).
        os.environ[WORKDIR_ENV] = str(path)
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
    removed = []
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


@contextlib.contextmanager
def captured_output(log: Path) -> Iterator[None]:
    """Send whatever is written to file descriptors 1 and 2 meanwhile to ``log``.

    For the runtime's start-up chatter, printed by C code (``[ap] ...`` lines on
    stderr, ``device id:0 / 1`` on stdout).  Python's and C's stdio buffers are
    flushed on both sides of the switch, so nothing written before lands in the
    log and nothing written inside leaks out later.
    """
    libc = ctypes.CDLL(None)
    sys.stdout.flush()
    sys.stderr.flush()
    libc.fflush(None)
    saved = [os.dup(1), os.dup(2)]
    try:
        with open(log, "ab") as sink:
            os.dup2(sink.fileno(), 1)
            os.dup2(sink.fileno(), 2)
            try:
                yield
            finally:
                libc.fflush(None)
                os.dup2(saved[0], 1)
                os.dup2(saved[1], 2)
    finally:
        for fd in saved:
            os.close(fd)
