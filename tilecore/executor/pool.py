"""A pool of worker processes on this machine: crash isolation for a sweep's tasks.

Each worker (:mod:`tilecore.executor.worker`) runs one task at a time.  A worker that dies
mid-task (a segfault in TVM, an aborting emulator, ``os._exit``) is noticed at once (its end
of the socket pair closes), its task is retried on a fresh worker up to ``max_retries`` times
and then recorded ``lost``; a task past its deadline has its worker killed and is recorded
``lost`` without a retry (a hung kernel would hang again).  The driver process never runs
a task, so its own tilelang state is never touched by a crashing config.
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any


@dataclass
class Task:
    """One unit of work: ``kind`` (``compile`` / ``bench``) with its arguments."""

    index: int
    kind: str
    args: tuple[Any, ...]
    deadline_s: float = 0.0  # > 0: the task is killed and recorded lost after this many seconds of running
    attempts: int = 0


class _Worker:
    def __init__(self) -> None:
        ours, theirs = socket.socketpair()
        env = {k: v for k, v in os.environ.items() if k != "TILECORE_EXECUTOR"}
        # The driver's import path: ``ref_prog``'s module imports in the worker as it does here.
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tilecore.executor.worker", str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            env=env,
        )
        theirs.close()  # the worker holds the only other end: its death is an EOF here
        self.conn = Connection(ours.detach())
        self.task: Task | None = None
        self.ready = False  # the worker says so once tilelang is imported: its start is no task's time
        self.started = 0.0

    def give(self, task: Task) -> None:
        task.attempts += 1
        self.task, self.started = task, time.monotonic()
        self.conn.send((task.kind, task.args))

    def stop(self, kill: bool = False) -> int | None:
        """End the worker (``kill``: SIGKILL at once) and return its exit status."""
        self.conn.close()
        if kill:
            self.process.kill()
        try:
            return self.process.wait(timeout=None if kill else 10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()


def death(status: int | None) -> str:
    """A worker's exit status in words: ``killed by SIGSEGV``, ``exit status 70``."""
    if status is not None and status < 0:
        try:
            return f"killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"killed by signal {-status}"
    return f"exit status {status}"


class ProcessPool:
    """Up to ``size`` worker processes, started on demand and kept for later sweeps."""

    def __init__(self, size: int, max_retries: int = 2) -> None:
        if size < 1:
            raise ValueError(f"a process pool needs at least one process, not {size}")
        self.size, self.max_retries = size, max_retries
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()  # one sweep at a time uses the workers
        atexit.register(self.close)

    def run(self, tasks: list[Task], width: int) -> dict[int, dict[str, Any]]:
        """Every task's result by index, at most ``width`` (<= size) running at once."""
        width = max(1, min(width, self.size))
        results: dict[int, dict[str, Any]] = {}
        queue: deque[Task] = deque(tasks)
        busy: dict[Any, _Worker] = {}  # by connection
        with self._lock:
            try:
                self._sweep(queue, busy, results, width)
            finally:  # an interrupted sweep leaves no worker behind running its task
                for worker in busy.values():
                    worker.stop(kill=True)
        return results

    def _take(self) -> _Worker:
        """An idle worker that is still alive, else a new one."""
        while self._idle:
            worker = self._idle.pop()
            if worker.process.poll() is None:
                return worker
            worker.stop()
        return _Worker()

    def _sweep(self, queue: deque[Task], busy: dict[Any, _Worker], results: dict[int, dict[str, Any]], width: int) -> None:
        while queue or busy:
            while queue and len(busy) < width:
                worker = self._take()
                worker.give(queue.popleft())
                busy[worker.conn] = worker
            for conn in wait(list(busy), timeout=self._wait_s(busy.values())):
                worker = busy.pop(conn)
                task = worker.task
                assert task is not None
                try:
                    message: Any = worker.conn.recv()
                    if not worker.ready:  # "ready": the task starts now
                        worker.ready, worker.started = True, time.monotonic()
                        busy[conn] = worker
                        continue
                    results[task.index] = message
                    worker.task = None
                    self._idle.append(worker)
                except (EOFError, OSError):  # the worker died running the task
                    how = death(worker.stop())
                    if task.attempts <= self.max_retries:
                        queue.appendleft(task)
                    else:
                        results[task.index] = lost(task, f"the worker process died ({how}) on each of {task.attempts} attempts")
            now = time.monotonic()
            for conn, worker in list(busy.items()):
                task = worker.task
                if worker.ready and task is not None and task.deadline_s > 0 and now - worker.started > task.deadline_s:
                    del busy[conn]
                    worker.stop(kill=True)
                    results[task.index] = lost(
                        task, f"timed out: still running after {task.deadline_s:g} s (tilelang's timeout); its worker was killed"
                    )

    @staticmethod
    def _wait_s(workers: Any) -> float | None:
        left = [
            w.started + w.task.deadline_s - time.monotonic() for w in workers if w.ready and w.task is not None and w.task.deadline_s > 0
        ]
        return max(0.0, min(left)) + 0.01 if left else None

    def close(self) -> None:
        """End the idle workers (busy ones end with their sweep)."""
        while self._idle:
            self._idle.pop().stop()


def lost(task: Task, why: str) -> dict[str, Any]:
    return {"status": "lost", "error": f"{task.kind} task: {why}", "attempts": task.attempts}
