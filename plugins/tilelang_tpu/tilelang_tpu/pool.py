"""The emulator worker processes of this process: started on demand, bounded in every wait, stopped when idle.

One worker runs every BM1690 library of this process and one worker per
BM1684X library (see :mod:`tilelang_tpu.worker` for why SophGo's runtimes run
in workers at all), at most :data:`MAX_WORKERS` at once, each stopped after
:func:`idle_timeout` seconds without a launch.

Reliability rules, each one a fix of a defect seen under load:

* **Every wait has a deadline.**  A start-up must show progress within
  ``TILELANG_TPU_START_TIMEOUT`` seconds (default 60; waiting for another
  process's emulator to start counts as progress), a launch must finish
  within ``TILELANG_TPU_LAUNCH_TIMEOUT`` (default 600), and a stop waits 10 s
  before killing.  A worker that misses a deadline is killed.
* **A failed start is retried once**; a second failure raises
  :class:`WorkerStartError` with both causes and what to do.  Why starts
  failed under concurrency, and the lock that fixes it:
  :mod:`tilelang_tpu.start_lock`.
* **Workers die with this process** (:mod:`tilelang_tpu.lifeline`,
  :class:`tilelang_tpu.channel.Spawner`), and a forked child never talks to
  (or keeps alive) its parent's workers.
* **A worker lost mid-launch** (killed, crashed, out of time) raises
  :class:`WorkerLostError`, a :class:`KernelFaultError`, with the outputs
  untouched; the next call starts a new worker.  The library is only evicted
  when it no longer matches its recorded hash (the adapter checks,
  :mod:`tilelang_tpu.runtime`).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import torch

from tilecore import TilecoreError
from tilecore.kit.artifacts import KernelFaultError
from tilelang_tpu import emulator, lifeline, start_lock
from tilelang_tpu.channel import Channel, Spawner
from tilelang_tpu.chips import error_owner, owner
from tilelang_tpu.setup import TpuToolchain

logger = logging.getLogger("tilelang_tpu")

#: A worker idle this long (seconds) is stopped: its emulator threads poll while it lives.
IDLE_TIMEOUT_ENV = "TILELANG_TPU_IDLE_TIMEOUT"
DEFAULT_IDLE_TIMEOUT_S = 2.0
#: Seconds a worker's start may go without progress before it is killed (and retried once).
START_TIMEOUT_ENV = "TILELANG_TPU_START_TIMEOUT"
DEFAULT_START_TIMEOUT_S = 60.0
#: Seconds one launch may take (sending the tensors, running, replying) before its worker is killed.
LAUNCH_TIMEOUT_ENV = "TILELANG_TPU_LAUNCH_TIMEOUT"
DEFAULT_LAUNCH_TIMEOUT_S = 600.0
#: Seconds a stopping worker gets to exit after its requests pipe is closed, and a dying one to be reaped.
STOP_TIMEOUT_S = 10.0
#: At most this many workers live at once (BM1684X needs one per kernel library); the least
#: recently used idle one is stopped to make room.
MAX_WORKERS = 4
#: A worker start slower than this (seconds, not counting the wait for another process's start) is logged.
SLOW_STARTUP_S = 10.0
#: What SophGo's runtimes print when a kernel faults while every runtime call still returns 0.
FAULT_LINE = re.compile(r"^.*(?:has error|ERROR: ASSERT|assert(?:ion)? fail).*$", re.MULTILINE | re.IGNORECASE)
_EXIT_CAUSES = {
    start_lock.EXIT_PORT_COLLISION: "another process took the emulator's TCP port (a SophGo program that does not take "
    "tilelang-tpu's start lock)",
    lifeline.EXIT_ORPHANED: "it saw its parent process end",
}


class WorkerStartError(TilecoreError):
    """An emulator worker failed to start twice in a row."""


class WorkerLostError(KernelFaultError):
    """The worker died or ran out of time during a launch; the library itself is not blamed."""


class _StartFailure(Exception):
    """One failed start attempt (retried once by :meth:`WorkerPool._start`)."""


def _seconds(name: str, default: float) -> float:
    text = os.environ.get(name, "")
    try:
        return max(float(text), 0.0) if text else default
    except ValueError:
        raise TilecoreError(f"{name}={text!r} is not a number of seconds.", owner=error_owner()) from None


def idle_timeout() -> float:
    return _seconds(IDLE_TIMEOUT_ENV, DEFAULT_IDLE_TIMEOUT_S)


def _status(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"signal {signal.Signals(-code).name}"
    cause = _EXIT_CAUSES.get(code)
    return f"exit status {code}" + (f": {cause}" if cause else "")


SPAWNER = Spawner()


class _Worker:
    """Parent side of one emulator worker process (:mod:`tilelang_tpu.worker`)."""

    def __init__(self, chip: str, arguments: list[str], toolchain: TpuToolchain, where: str) -> None:
        library_dir = next(iter(toolchain.require_libraries(chip).values())).parent
        self._lock = threading.Lock()
        self.busy = 0
        self.last_used = time.monotonic()
        workdir = emulator.ensure_workdir()
        self._log_path = Path(workdir) / f"{chip}-worker-{os.getpid()}-{id(self):x}.log"
        env = toolchain.process_env()
        env[emulator.WORKDIR_ENV] = str(workdir)
        if chip == "bm1684x":
            env["TPUKERNEL_FIRMWARE_PATH"] = arguments[0]  # read by bm_dev_request: this worker's one library
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[1]), env.get("PYTHONPATH", "")]))
        self._log: IO[bytes] = open(self._log_path, "wb")  # noqa: SIM115 - lives as long as the worker
        command = [sys.executable, "-m", "tilelang_tpu.worker", chip, str(library_dir), *arguments]
        # Own session: a Ctrl-C in the terminal interrupts the user's process, which then stops the worker.
        # The worker holds the scratch directory's keep-alive pipe too: its janitor waits for it.
        keepalive = emulator.keepalive_fd()
        self._process = SPAWNER.popen(
            command, env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, cwd=workdir, start_new_session=True,
            pass_fds=() if keepalive is None else (keepalive,),
        )  # fmt: skip
        assert self._process.stdin is not None and self._process.stdout is not None
        self._channel = Channel(self._process.stdin.fileno(), self._process.stdout.fileno())
        try:
            # A BM1684X worker loads its kernel library at start-up: an error reported there is that kernel's fault.
            self.ready = self._await_ready(where, library_fault=chip == "bm1684x")
        except BaseException:
            self.close()
            raise

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def alive(self) -> bool:
        return self._process.poll() is None

    def _log_text(self, offset: int = 0) -> str:
        with contextlib.suppress(OSError), open(self._log_path, "rb") as handle:
            handle.seek(offset)
            return handle.read().decode(errors="replace")
        return ""

    def _with_output(self, text: str, offset: int = 0) -> str:
        output = self._log_text(offset).strip()[-2000:]
        return text + (f" The emulator's output:\n{output}" if output else "")

    def _reap(self) -> str:
        """The status of a worker that closed its pipe (killed if it does not exit within the stop timeout)."""
        try:
            code = self._process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._process.kill()
            code = self._process.wait()
        return _status(code)

    def _await_ready(self, where: str, library_fault: bool) -> dict[str, Any]:
        limit = _seconds(START_TIMEOUT_ENV, DEFAULT_START_TIMEOUT_S)
        started = time.monotonic()
        give_up = started + 2 * limit + 180.0  # progress lines stop after the worker's 120 s wait for the lock
        deadline = min(started + limit, give_up)
        while True:
            try:
                line = self._channel.readline(deadline)
            except TimeoutError:
                self._process.kill()
                self._process.wait()
                raise _StartFailure(
                    self._with_output(f"no progress for {limit:.0f} s ({START_TIMEOUT_ENV}); the worker (pid {self.pid}) was killed.")
                ) from None
            if not line:
                raise _StartFailure(self._with_output(f"the worker (pid {self.pid}) died during start-up ({self._reap()})."))
            reply = json.loads(line)
            if "progress" in reply:
                deadline = min(time.monotonic() + limit, give_up)
                continue
            if reply.get("ok"):
                return dict(reply)
            message = self._with_output(f"{where}: the emulator reported an error during start-up: {reply.get('error')}.")
            if library_fault:
                raise KernelFaultError(message)
            raise _StartFailure(message)

    def _lost(self, what: str, where: str, offset: int) -> WorkerLostError:
        return WorkerLostError(
            self._with_output(
                f"{where}: {what}. The outputs were left untouched; the next call starts a new emulator worker.",
                offset,
            )
        )

    def run(
        self, library: Path, symbol: str, tensors: tuple[torch.Tensor, ...], where: str, scalars: Sequence[Any] = (), cores: int = 1
    ) -> None:
        sizes = [t.numel() * t.element_size() for t in tensors]
        limit = _seconds(LAUNCH_TIMEOUT_ENV, DEFAULT_LAUNCH_TIMEOUT_S)
        with self._lock:
            deadline = time.monotonic() + limit
            offset = self._log_path.stat().st_size if self._log_path.exists() else 0
            header: dict[str, Any] = {"library": str(library), "symbol": symbol, "sizes": sizes}
            if scalars:
                header["scalars"] = list(scalars)  # [slot, dtype, value] of each scalar parameter (abi.py)
            if cores > 1:
                header["cores"] = cores  # a multi-core kernel (grid.launch_cores)
            try:
                self._channel.send(
                    [json.dumps(header).encode() + b"\n", *(_bytes_of(t) for t, s in zip(tensors, sizes, strict=True) if s)], deadline
                )
                line = self._channel.readline(deadline)
                if not line:
                    raise self._lost(
                        f"the emulator worker process (pid {self.pid}) died during the launch of {symbol} ({self._reap()})", where, offset
                    )
                reply = json.loads(line)
                if not reply.get("ok"):
                    raise KernelFaultError(
                        self._with_output(
                            f"{where}: the emulator reported an error during the launch of {symbol}: {reply.get('error')}.", offset
                        )
                    )
                outputs = [self._channel.read(size, deadline) for size in sizes]
            except BrokenPipeError:
                raise self._lost(f"the emulator worker process (pid {self.pid}) is gone ({self._reap()})", where, offset) from None
            except TimeoutError:
                self._process.kill()
                self._process.wait()
                raise self._lost(
                    f"the launch of {symbol} did not finish within {limit:.0f} s ({LAUNCH_TIMEOUT_ENV}; raise it for a kernel "
                    f"that runs longer on the emulator), so its worker (pid {self.pid}) was killed",
                    where,
                    offset,
                ) from None
            except BaseException:
                # Interrupted mid-exchange (Ctrl-C): the pipes are out of step, so this worker is never reused.
                self._process.kill()
                raise
            if any(len(data) != size for data, size in zip(outputs, sizes, strict=True)):
                raise self._lost(f"the emulator worker (pid {self.pid}) died while replying ({self._reap()})", where, offset)
            faults = FAULT_LINE.findall(self._log_text(offset))
            if faults:
                # The runtime returned success but reported a fault on its error channel: the
                # outputs are garbage, so they are not handed back.
                lines = "\n".join(dict.fromkeys(line.strip() for line in faults))
                raise KernelFaultError(
                    f"{where}: the SophGo emulator reported a fault while running {symbol} although every runtime call "
                    f"returned success:\n{lines}\nThe outputs were discarded and the kernel library is dropped from the "
                    "cache. This is a bug in the tpu codegen or in a hand-written kernel; please report it with the source "
                    "(kernel.get_kernel_source())."
                )
            for tensor, data in zip(tensors, outputs, strict=True):
                if data:
                    _bytes_of(tensor)[:] = data

    def close(self) -> None:
        assert self._process.stdin is not None and self._process.stdout is not None
        with contextlib.suppress(OSError):
            self._process.stdin.close()
        self._reap()
        with contextlib.suppress(OSError):
            self._process.stdout.close()
        self._log.close()
        with contextlib.suppress(OSError):
            self._log_path.unlink()

    def abandon(self) -> None:
        """In a forked child: close this process's copies of the pipes, leave the worker to its parent."""
        for stream in (self._process.stdin, self._process.stdout, self._log):
            with contextlib.suppress(OSError, AttributeError):
                stream.close()  # type: ignore[union-attr]
        self._process.returncode = 0  # not this process's child: never waited for here


def _report_startup(ready: dict[str, Any], where: str) -> None:
    """Log what the worker's start-up found: a released dead holder's lock, or a stalled step."""
    steps: dict[str, float] = {k: v for k, v in (ready.get("startup") or {}).items() if k != "start_lock_wait"}
    if ready.get("stale_lock"):
        logger.info(
            "%s: released the BM1690 runtime's start-up lock left by a process that died holding it (%s); "
            "without this the start would have waited 31 s (tilelang_tpu/device_lock.py)",
            where,
            ready["stale_lock"],
        )
    if ready.get("start_locked") is False:
        logger.warning("%s: started the emulator without tilelang-tpu's start lock (another process held it too long)", where)
    if sum(steps.values()) > SLOW_STARTUP_S:
        times = ", ".join(f"{step} {seconds:.2f} s" for step, seconds in steps.items())
        logger.warning("%s: the emulator took %.1f s to start (%s)", where, sum(steps.values()), times)


def _bytes_of(tensor: torch.Tensor) -> memoryview:
    """A writable byte view of a contiguous host tensor's storage (no copy)."""
    return tensor.reshape(-1).view(torch.uint8).numpy().data


class WorkerPool:
    """The emulator workers of this process: started on first use, stopped when idle.

    A reaper thread, alive only while workers are, stops every worker that has
    not run a kernel for :func:`idle_timeout` seconds, so an idle process costs
    no CPU; the next launch starts a fresh worker (about 0.1-0.3 s).
    """

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._workers: dict[tuple[str, ...], _Worker] = {}
        self._reaper: threading.Thread | None = None
        self._exit_hook = False

    def __len__(self) -> int:
        return len(self._workers)

    def pids(self) -> list[int]:
        """Process ids of the live workers (for tests and the soak benchmark)."""
        with self._lock:
            return [w.pid for w in self._workers.values()]

    def _start(self, chip: str, arguments: list[str], toolchain: TpuToolchain, where: str) -> _Worker:
        causes = []
        for attempt in (1, 2):
            try:
                worker = _Worker(chip, arguments, toolchain, where)
            except _StartFailure as failure:
                causes.append(str(failure))
                if attempt == 1:
                    logger.info("%s: the %s emulator worker failed to start; starting it again: %s", where, chip, failure)
                continue
            _report_startup(worker.ready, where)
            return worker
        raise WorkerStartError(
            f"{where}: the {chip.upper()} emulator worker failed to start twice.\nFirst attempt: {causes[0]}\n"
            f"Second attempt: {causes[1]}\nWhat to do: retry. On a slow or overloaded machine raise {START_TIMEOUT_ENV} "
            f"(now {_seconds(START_TIMEOUT_ENV, DEFAULT_START_TIMEOUT_S):.0f} s); if it keeps failing, look for other SophGo "
            f"emulator processes (`ps -ef | grep -e tilelang_tpu.worker -e tpuv7`) and report it to {owner()} with this message."
        )

    def run(self, key: tuple[str, ...], chip: str, arguments: list[str], toolchain: TpuToolchain,
            library: Path, symbol: str, tensors: tuple[torch.Tensor, ...], where: str, scalars: Sequence[Any] = (),
            cores: int = 1) -> None:  # fmt: skip
        with self._lock:
            worker = self._workers.get(key)
            if worker is not None and not worker.alive:
                del self._workers[key]  # died since its last launch (killed, or its emulator ended it): start a new one
                worker.close()
                worker = None
            if worker is None:
                self._make_room()
                if not self._exit_hook:
                    # Registered after the scratch directory's removal, so it runs before it (atexit is LIFO).
                    emulator.ensure_workdir()
                    atexit.register(self.close)
                    self._exit_hook = True
                worker = self._workers[key] = self._start(chip, arguments, toolchain, where)
            worker.busy += 1
            if self._reaper is None and idle_timeout() > 0:
                self._reaper = threading.Thread(target=self._reap, name="tilelang-tpu-worker-reaper", daemon=True)
                self._reaper.start()
        try:
            worker.run(library, symbol, tensors, where, scalars, cores)
        except KernelFaultError:
            with self._lock:
                if self._workers.get(key) is worker:
                    del self._workers[key]  # a worker that faulted or was lost is not reused
            worker.close()
            raise
        finally:
            with self._lock:
                worker.busy -= 1
                worker.last_used = time.monotonic()

    def _make_room(self) -> None:
        idle = sorted((w.last_used, k) for k, w in self._workers.items() if not w.busy)
        while len(self._workers) >= MAX_WORKERS and idle:
            self._workers.pop(idle.pop(0)[1]).close()

    def _reap(self) -> None:
        with self._lock:
            while self._workers:
                timeout = idle_timeout()
                now = time.monotonic()
                for key, worker in list(self._workers.items()):
                    if not worker.busy and now - worker.last_used >= timeout:
                        del self._workers[key]
                        worker.close()
                if self._workers:
                    self._lock.wait(timeout=max(timeout / 2, 0.05))
            self._reaper = None

    def close(self) -> None:
        """Stop every worker of this process (also run at exit)."""
        with self._lock:
            workers = list(self._workers.values())
            self._workers.clear()
            self._lock.notify_all()
        for worker in workers:
            worker.close()

    def after_fork_in_child(self) -> None:
        """In a forked child: the parent's workers belong to the parent; this process starts its own."""
        for worker in self._workers.values():
            worker.abandon()
        self._lock = threading.Condition()
        self._workers = {}
        self._reaper = None


WORKERS = WorkerPool()


def _after_fork_in_child() -> None:
    SPAWNER.after_fork_in_child()
    WORKERS.after_fork_in_child()


os.register_at_fork(after_in_child=_after_fork_in_child)


def close_workers() -> None:
    """Stop every emulator worker of this process (also run at exit)."""
    WORKERS.close()
