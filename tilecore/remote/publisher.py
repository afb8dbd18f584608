"""Background publication: one daemon thread per process draining a bounded queue of finished
local entries; flushed for a bounded time at exit, never on the compile's critical path."""

from __future__ import annotations

import atexit
import logging
import os
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from tilecore.remote.settings import Settings

logger = logging.getLogger("tilecore.remote")

#: ``verify(entry_dir) -> bool``: the local cache's own integrity check of a finished entry.
Verifier = Callable[[str], bool]


@dataclass
class Job:
    entry_dir: str
    key: str
    versions: dict[str, str]
    verify: Verifier | None


class PublishingTier(Protocol):
    """What the publisher needs of its tier (:class:`tilecore.remote.tier.Tier`), without importing it back."""

    settings: Settings
    counters: Counter[str]
    _publisher: Publisher | None

    def publish_now(self, job: Job) -> None: ...


class Publisher:
    """One daemon thread draining a bounded queue; flushed for a bounded time at exit."""

    def __init__(self, tier: PublishingTier) -> None:
        self.tier = tier
        self.jobs: queue.Queue[Job] = queue.Queue(maxsize=tier.settings.max_pending)
        self.pid = os.getpid()
        self.thread = threading.Thread(target=self._run, name="tilecore-remote-publish", daemon=True)
        self.thread.start()
        atexit.register(self._at_exit)

    def submit(self, job: Job) -> bool:
        try:
            self.jobs.put_nowait(job)
        except queue.Full:
            self.tier.counters["publish_dropped"] += 1
            logger.debug("remote cache: publish queue full; entry %s stays local", job.key[:16])
            return False
        return True

    def _run(self) -> None:
        while True:
            job = self.jobs.get()
            try:
                self.tier.publish_now(job)
            except Exception:  # a publisher bug must not kill the thread or the process
                logger.debug("remote cache: publishing %s failed", job.key[:16], exc_info=True)
            finally:
                self.jobs.task_done()

    def flush(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self.jobs.all_tasks_done:
            while self.jobs.unfinished_tasks:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.jobs.all_tasks_done.wait(left)
        return True

    def _at_exit(self) -> None:
        if os.getpid() != self.pid or self.tier._publisher is not self:
            return
        if not self.flush(self.tier.settings.flush_timeout):
            logger.debug("remote cache: %d publication(s) abandoned at exit", self.jobs.unfinished_tasks)
