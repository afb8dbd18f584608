"""A process-pool worker: runs compile and bench tasks sent by :mod:`tilecore.executor.pool`.

Started as ``python -m tilecore.executor.worker FD`` (never through ``multiprocessing``'s
spawn, which would import the user's ``__main__`` again); FD is one end of a socket pair that
carries pickled ``(kind, args)`` requests and the task's result dict back.  A crash of the
task (a TVM segfault, an emulator abort) ends this process and nothing else.
"""

from __future__ import annotations

import os
import sys
from multiprocessing.connection import Connection
from typing import Any


def main(argv: list[str]) -> int:
    conn = Connection(int(argv[0]))
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
