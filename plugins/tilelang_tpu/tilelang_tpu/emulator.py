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
one entry stays in ``/tmp``.

A process killed with ``SIGKILL`` runs no exit handler, and its workers die
with it (``PR_SET_PDEATHSIG``, :mod:`tilelang_tpu.lifeline`), so neither can
remove the directory.  :func:`ensure_workdir` therefore starts a *janitor*
with it: a ``/bin/sh`` in its own session blocked reading a pipe whose write
end only this process and its emulator workers hold (:func:`keepalive_fd`).
End-of-file means every one of them is gone, however they ended; the janitor
then removes the directory and exits.  It uses no CPU while it waits.  As a
second line (the janitor itself killed, e.g. with its whole process group),
the next process that starts the emulator removes directories whose owner is
dead (:func:`remove_stale_workdirs`): the owner's pid and its start time are
recorded in the directory, so a reused pid does not keep a dead owner's
directory alive.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

from tilecore import Owner, TilecoreError
from tilecore.kit.paths import UNIX_SOCKET_PATH_MAX, cache_write_error, socket_scratch_parent
from tilelang_tpu.chips import error_owner

#: Spelled as SophGo's emulator spells it ("SCALAER").
WORKDIR_ENV = "TPU_SCALAER_EMULATOR_WORKDIR"
#: The FIFO the emulator always creates, whatever the workdir.
WAKEUP_FIFO = "/tmp/sg_wakeup_stream"
#: Bytes kept free below the scratch directory for the emulator's socket names
#: (``/<pid>-<core>/server_<pid>_<n>`` is at most about 35 with 7-digit pids).
SOCKET_NAME_RESERVE = 40

_PREFIX = "tlt-"
#: The file in a scratch directory naming its owner: ``<pid> <start time in clock ticks>``.
OWNER_FILE = ".owner"
#: Removes the scratch directory ($1) once its stdin (the keep-alive pipe) reaches end-of-file.
_JANITOR = 'cat >/dev/null 2>&1; exec rm -rf -- "$1"'
_lock = threading.Lock()
_workdir: Path | None = None
_keepalive: int | None = None


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
            try:
                Path(explicit).mkdir(parents=True, exist_ok=True)
            except OSError as err:
                error = cache_write_error(err, Path(explicit), WORKDIR_ENV)
                if error is None:
                    raise
                raise error from err
            _workdir = Path(explicit)
            return _workdir
        name_length = len(f"/{_PREFIX}{os.getpid()}-") + 8
        parent = socket_scratch_parent(name_length + SOCKET_NAME_RESERVE, _where())
        remove_stale_workdirs(parent)
        path = Path(tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-", dir=parent))
        (path / OWNER_FILE).write_text(f"{os.getpid()} {_start_time(os.getpid())}\n")
        atexit.register(_remove, path)
        _start_janitor(path)
        _workdir = path
        return path


def keepalive_fd() -> int | None:
    """The write end of the scratch directory's keep-alive pipe (pass it to every process that
    uses the directory: the janitor removes it when the last holder is gone), or ``None``."""
    return _keepalive


def _start_janitor(path: Path) -> None:
    global _keepalive
    read_end, write_end = os.pipe()  # both close-on-exec: only processes given write_end hold it
    try:
        subprocess.Popen(
            ["/bin/sh", "-c", _JANITOR, "tilelang-tpu-janitor", str(path)],
            stdin=read_end,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd="/",
            start_new_session=True,  # survives a signal to this process's group (Ctrl-C, killpg)
        )
    except OSError:  # no /bin/sh: the next start's sweep removes the directory of a killed process
        os.close(write_end)
        return
    finally:
        os.close(read_end)
    _keepalive = write_end


def _remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def _start_time(pid: int) -> str:
    """Process ``pid``'s start time in clock ticks since boot (``/proc/<pid>/stat``), or ``""``."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    return True


def _owner_gone(entry: Path, pid: int) -> bool:
    """Whether the process that created scratch directory ``entry`` (named after ``pid``) has ended.

    With an owner file, a live process of that pid with another start time is a reused pid:
    the owner is gone.  Without one (being created right now, or an older release), only a
    pid that is not alive counts."""
    try:
        recorded = (entry / OWNER_FILE).read_text().split()
    except OSError:
        recorded = []
    if not _alive(pid):
        return True
    if len(recorded) == 2 and recorded[0] == str(pid) and recorded[1]:
        current = _start_time(pid)
        return bool(current) and current != recorded[1]
    return False


def remove_stale_workdirs(parent: Path | None = None) -> list[Path]:
    """Remove scratch directories left by processes of this user that died without cleaning up.

    The atexit handler does not run when a process is killed, or when the
    emulator itself ends the process (an assertion in ``libtpuv7_emulator``
    calls ``exit`` from C, which skips Python's atexit); the janitor normally
    removes those (see the module's docstring), this sweep is the fallback.
    Each scratch directory carries its owner's pid and start time; a directory
    whose owner has ended is removed by the next process that starts the emulator.
    """
    parent = Path(tempfile.gettempdir()) if parent is None else parent
    removed: list[Path] = []
    for entry in parent.glob(f"{_PREFIX}*"):
        pid_text = entry.name.removeprefix(_PREFIX).split("-", 1)[0]
        try:
            owned = entry.is_dir() and not entry.is_symlink() and entry.stat().st_uid == os.getuid()
        except OSError:
            continue
        if owned and pid_text.isdigit() and _owner_gone(entry, int(pid_text)):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed
