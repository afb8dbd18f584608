"""The parent's side of a worker's pipes: every wait bounded, every worker tied to this process.

:class:`Channel` reads and writes a worker's pipes with a deadline on each
call, so no wait on a worker can last forever (a worker stuck inside SophGo's
code never answers, and a full pipe would block a plain ``write``).

:class:`Spawner` starts worker processes from one long-lived thread and hands
each the read end of this process's lifeline pipe (see
:mod:`tilelang_tpu.lifeline` for the worker's side: ``PR_SET_PDEATHSIG``
fires when the *thread* that started a child ends, so a worker started from a
short-lived user thread would be killed when that thread returns).  After an
``os.fork`` the child drops both (:meth:`Spawner.after_fork_in_child`), so the
parent's workers still see end-of-file when the parent dies.
"""

from __future__ import annotations

import contextlib
import os
import queue
import select
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from tilelang_tpu import lifeline

_READ_CHUNK = 1 << 20


class Channel:
    """Non-blocking pipe ends (requests: write, replies: read) with deadline-bounded calls.

    Every call takes ``deadline`` (a ``time.monotonic()`` value) and raises
    ``TimeoutError`` when it passes; a write to a worker that is gone raises
    ``BrokenPipeError``; a read at end-of-file returns what there was.
    """

    def __init__(self, requests: int, replies: int) -> None:
        os.set_blocking(requests, False)
        os.set_blocking(replies, False)
        self._requests, self._replies = requests, replies
        self._buffer = bytearray()

    @staticmethod
    def _wait(fd: int, events: int, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        poller = select.poll()
        poller.register(fd, events)
        if not poller.poll(remaining * 1000):
            raise TimeoutError

    def send(self, chunks: Iterable[bytes | memoryview], deadline: float) -> None:
        for chunk in chunks:
            view = memoryview(chunk).cast("B")
            while view:
                self._wait(self._requests, select.POLLOUT, deadline)
                try:
                    written = os.write(self._requests, view)
                except BlockingIOError:
                    continue
                view = view[written:]

    def _fill(self, deadline: float) -> bool:
        """Read what the worker has sent (waiting until ``deadline``); False at end-of-file."""
        self._wait(self._replies, select.POLLIN, deadline)
        try:
            data = os.read(self._replies, _READ_CHUNK)
        except BlockingIOError:
            return True
        self._buffer += data
        return bool(data)

    def readline(self, deadline: float) -> bytes:
        """The next line (with its newline), or what was left (maybe ``b""``) at end-of-file."""
        while (end := self._buffer.find(b"\n")) < 0:
            if not self._fill(deadline):
                end = len(self._buffer) - 1
                break
        line = bytes(self._buffer[: end + 1])
        del self._buffer[: end + 1]
        return line

    def read(self, size: int, deadline: float) -> bytearray:
        """Exactly ``size`` bytes, or fewer at end-of-file."""
        while len(self._buffer) < size:
            if not self._fill(deadline):
                break
        data = self._buffer[:size]
        del self._buffer[:size]
        return data


class _Job:
    def __init__(self, call: Callable[[], subprocess.Popen[bytes]]) -> None:
        self.call = call
        self.done = threading.Event()
        self.result: subprocess.Popen[bytes] | None = None
        self.error: BaseException | None = None


class Spawner:
    """Starts worker processes from one daemon thread that lives as long as this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[_Job] | None = None
        self._lifeline: tuple[int, int] | None = None  # (read end, write end), both close-on-exec

    def popen(self, command: Sequence[str], env: dict[str, str], **options: Any) -> subprocess.Popen[bytes]:
        """``subprocess.Popen(command, env=env, **options)``, run on the spawner thread, with the
        worker's end of the lifeline and this process's pid in ``env``."""
        with self._lock:
            if self._lifeline is None:
                self._lifeline = os.pipe()
            if self._jobs is None:
                self._jobs = queue.SimpleQueue()
                threading.Thread(target=_serve, args=(self._jobs,), name="tilelang-tpu-spawner", daemon=True).start()
            jobs, lifeline_read = self._jobs, self._lifeline[0]
        env = {**env, lifeline.PARENT_ENV: str(os.getpid()), lifeline.LIFELINE_ENV: str(lifeline_read)}
        pass_fds = (lifeline_read, *options.pop("pass_fds", ()))
        job = _Job(lambda: subprocess.Popen(command, env=env, pass_fds=pass_fds, **options))
        jobs.put(job)
        job.done.wait()
        if job.error is not None:
            raise job.error
        assert job.result is not None
        return job.result

    def after_fork_in_child(self) -> None:
        """In a forked child: drop the parent's lifeline (it would keep the parent's workers alive)
        and its spawner thread (not running in the child)."""
        if self._lifeline is not None:
            for fd in self._lifeline:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._lock = threading.Lock()
        self._jobs = None
        self._lifeline = None


def _serve(jobs: queue.SimpleQueue[_Job]) -> None:
    while True:
        job = jobs.get()
        try:
            job.result = job.call()
        except BaseException as err:  # handed to the caller
            job.error = err
        job.done.set()
