"""Why BM1690 emulator start-ups hung under concurrency, and the lock that prevents it.

Worker side (stdlib only).  ``tpuRtSetDevice`` starts the emulated device's
daemon on a TCP port: ``find_available_port`` (``libtpuv7_rt.so``) binds
``0.0.0.0:10000``, ``10001``, ... and *closes* the first socket that binds,
and the daemon (``libcdm_daemon_emulator.so``) later binds ``127.0.0.1`` on
that port and listens; the runtime then connects to ``127.0.0.1:port``.
Between the probe and the daemon's bind nothing holds the port, so two
processes starting at once can pick the same one.  The loser's daemon fails
(``[ap] bind tcp server IP:127.0.0.1, port:10023 failed, errno:98``,
``EADDRINUSE``) and its runtime connects to the *winner's* daemon: the
stream creation waits forever for a reply that goes to another process
(the hang, found with gdb in ``find_response_id`` < ``sg_stream_create``),
or crashes on the other emulator's addresses (the SIGSEGVs).

SophGo's own start-up lock (:mod:`tilelang_tpu.device_lock`) is meant to
serialise this section but does not: ``unlock_port`` removes the segment
(``IPC_RMID``) while waiters are still attached, a newcomer then creates a
fresh, unlocked segment under the same key, and two processes are inside
the section at once (the loser's log shows ``unlock_port: error happened
when shmctl``).  And a private System V IPC namespace does not help: the
ports are shared through the network namespace.

So every tilelang-tpu worker takes :func:`held` around the emulator's
start: a Linux abstract unix socket name.  Binding it succeeds for one
process at a time; the kernel releases it when the holder closes it or
dies (no file, no stale state, nothing in ``/tmp``), and its scope, the
network namespace, is exactly the scope of the ports it protects.  The
holder lets it go as soon as its daemon listens on ``127.0.0.1`` (seen in
``/proc/self/net/tcp``), not at the end of the start: the rest of the start
(memory, 85 threads) runs in parallel with the next process's.
Processes that do not take it (other SophGo programs) can still collide:
the worker then notices the daemon's bind failure in its own log and
exits, and the parent starts it again (:mod:`tilelang_tpu.pool`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import random
import socket
import threading
import time
from collections.abc import Callable, Iterator

#: The abstract socket name (leading NUL: not a file) held while an emulator starts.
NAME = b"\0tilelang-tpu/bm1690-emulator-start"
#: What the emulator's daemon prints when another process already listens on its port.
COLLISION_MARK = b"bind tcp server"
#: Exit status of a worker that saw its emulator lose the port to another process.
EXIT_PORT_COLLISION = 75


class StartLock:
    """The start lock, held from :func:`held` until :meth:`release` (or the end of the ``with``)."""

    def __init__(self, sock: socket.socket | None) -> None:
        self._sock = sock
        self._guard = threading.Lock()

    @property
    def acquired(self) -> bool:
        return self._sock is not None

    def release(self) -> None:
        with self._guard:
            if self._sock is not None:
                self._sock.close()
                self._sock = None


@contextlib.contextmanager
def held(wait_s: float, waiting: Callable[[float], None] | None = None, beat_s: float = 2.0, enabled: bool = True) -> Iterator[StartLock]:
    """Hold the start lock, or give up waiting after ``wait_s`` seconds (``acquired`` is then False).

    ``waiting(seconds_waited)`` is called every ``beat_s`` seconds while another
    process holds it (the worker reports it to its parent as progress).
    ``enabled=False`` does not take it (to reproduce the race).
    """
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    started = time.monotonic()
    beat = started + beat_s
    acquired = False
    while enabled:
        try:
            sock.bind(NAME)
            acquired = True
            break
        except OSError as err:
            if err.errno != errno.EADDRINUSE:
                break  # no abstract sockets here: go on unlocked, as SophGo's code would
        now = time.monotonic()
        if now - started >= wait_s:
            break
        if waiting is not None and now >= beat:
            waiting(now - started)
            beat = now + beat_s
        time.sleep(random.uniform(0.005, 0.02))
    if not acquired:
        sock.close()
    lock = StartLock(sock if acquired else None)
    try:
        yield lock
    finally:
        lock.release()


def _listening_on_loopback() -> bool:
    """Whether this process has a TCP socket listening on 127.0.0.1 (the emulator daemon's)."""
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/self/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
    if not inodes:
        return False
    with contextlib.suppress(OSError), open("/proc/self/net/tcp") as table:
        next(table, None)
        for row in table:
            fields = row.split()
            # local address 0100007F:PORT (127.0.0.1, little-endian hex), state 0A (LISTEN), inode
            if len(fields) > 9 and fields[1].startswith("0100007F:") and fields[3] == "0A" and fields[9] in inodes:
                return True
    return False


def watch(lock: StartLock, log_path: str) -> Callable[[], None]:
    """While the emulator starts: release ``lock`` once its daemon listens, and exit the process
    with :data:`EXIT_PORT_COLLISION` as soon as ``log_path`` (the worker's own output) shows the
    daemon's bind failure.  Returns a function that stops watching."""
    stop = threading.Event()

    def run() -> None:
        with contextlib.suppress(OSError), open(log_path, "rb") as log:
            seen = b""
            while not stop.wait(0.01):
                seen = seen[-200:] + log.read()
                if COLLISION_MARK in seen and b"failed" in seen.split(COLLISION_MARK, 1)[1][:80]:
                    os.write(
                        2,
                        b"\ntilelang-tpu worker: another process took the emulator's TCP port (EADDRINUSE); "
                        b"exiting so that the parent starts a new worker\n",
                    )
                    os._exit(EXIT_PORT_COLLISION)
                if lock.acquired and _listening_on_loopback():
                    lock.release()  # the port is ours now: the next process may pick its own

    threading.Thread(target=run, name="tilelang-tpu-start-watch", daemon=True).start()
    return stop.set
