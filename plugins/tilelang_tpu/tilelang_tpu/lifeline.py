"""A worker process dies with its parent, whatever state it is in.

Worker side (stdlib only: the emulator worker imports it first thing).  Two
independent mechanisms, because either alone has a hole:

* ``prctl(PR_SET_PDEATHSIG, SIGKILL)``: the kernel kills the worker when the
  *thread* that started it ends.  SIGKILL cannot be caught or blocked, so it
  works while the worker is deep inside SophGo's C code (start-up, a launch)
  with 85 emulator threads polling.  The parent starts workers from one
  long-lived thread (:mod:`tilelang_tpu.pool`), so a short-lived user thread
  ending does not kill them.  A parent that dies between ``fork`` and the
  ``prctl`` call is caught by comparing ``getppid()`` with the pid the parent
  wrote into :data:`PARENT_ENV`.
* a lifeline pipe: the parent holds its write end (close-on-exec, and closed
  in the child after an ``os.fork``), the worker a thread blocked reading the
  read end.  End-of-file means every holder of the write end is gone: the
  worker exits at once with :data:`EXIT_ORPHANED`.
"""

from __future__ import annotations

import ctypes
import os
import signal
import threading

#: The parent's pid, as the parent saw it when it started the worker.
PARENT_ENV = "TILELANG_TPU_PARENT_PID"
#: The worker's file descriptor of the lifeline pipe's read end.
LIFELINE_ENV = "TILELANG_TPU_LIFELINE_FD"
#: Exit status of a worker whose parent is gone.
EXIT_ORPHANED = 70
_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Arm both mechanisms (call first in the worker); exit now if the parent is already gone."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    libc.prctl.restype = ctypes.c_int
    libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    expected = os.environ.get(PARENT_ENV, "")
    if expected.isdigit() and os.getppid() != int(expected):
        os._exit(EXIT_ORPHANED)  # the parent died before the prctl call: reparented already
    fd = os.environ.get(LIFELINE_ENV, "")
    if fd.isdigit():
        threading.Thread(target=_watch, args=(int(fd),), name="tilelang-tpu-lifeline", daemon=True).start()


def _watch(fd: int) -> None:
    while True:
        try:
            if not os.read(fd, 1):
                break
        except InterruptedError:
            continue
        except OSError:
            break
    os._exit(EXIT_ORPHANED)
