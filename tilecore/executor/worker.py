"""A process-pool worker: runs compile and bench tasks sent by :mod:`tilecore.executor.pool`.

Started as ``python -m tilecore.executor.worker FD`` (never through ``multiprocessing``'s
spawn, which would import the user's ``__main__`` again); FD is one end of a socket pair that
carries pickled ``(kind, args)`` requests and the task's result dict back.  A crash of the
task (a TVM segfault, an emulator abort) ends this process and nothing else.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from multiprocessing.connection import Connection
from typing import Any


def _end_with_parent() -> None:
    """Exit when the driver is gone (even ``kill -9``ed), so a worker stuck in a hung kernel is not
    left behind (this thread runs while the kernel call has released the GIL, as tilelang's
    kernel calls do)."""
    parent = os.getppid()
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(0)


def main(argv: list[str]) -> int:
    fd = int(argv[0])
    os.set_inheritable(fd, False)  # no program this worker starts holds it: the driver sees this process's death
    conn = Connection(fd)
    threading.Thread(target=_end_with_parent, name="tilecore-parent-watch", daemon=True).start()
    import tilecore
    from tilecore.executor.tasks import bench_task, compile_task

    tilecore.activate()
    conn.send("ready")
    tasks: dict[str, Any] = {"compile": compile_task, "bench": bench_task}
    while True:
        try:
            kind, args = conn.recv()
        except EOFError:  # the driver closed its end (or died): nothing more to do
            return 0
        conn.send(tasks[kind](*args))


if __name__ == "__main__":
    os.environ.pop("TILECORE_EXECUTOR", None)  # a worker never hands sweeps on
    raise SystemExit(main(sys.argv[1:]))
