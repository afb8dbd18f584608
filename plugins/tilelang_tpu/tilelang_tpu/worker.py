"""The emulator worker process: ``python -m tilelang_tpu.worker CHIP LIBRARY_DIR [LIBRARY SYMBOL]``.

SophGo's runtimes never run in the user's process.  Each runs in a worker
that the parent (:mod:`tilelang_tpu.runtime`) starts on first use and stops
when it has been idle for a while, because

* once initialised, the emulators' threads poll for the life of the process
  (about one CPU core for BM1690, a third of one per BM1684X library) and the
  runtimes have no call to stop them: only ending the process does;
* the BM1684X cmodel runs the kernels of one library per process (see
  :mod:`tilelang_tpu.bmlib_worker`);
* a fault that aborts the emulator (an assertion, ``SIGABRT``) ends the worker,
  not the user's process, and the parent reports it as an exception.

This module is stdlib-only so the worker starts quickly (no torch).

Protocol (the worker's stdin/stdout pipes; fd 1 is pointed at the worker's
stderr log first, so the emulators' chatter, which goes to fd 1, cannot corrupt
replies):

* request: a JSON header line ``{"library": ..., "symbol": ..., "sizes": [...]}`` (plus
  ``"scalars": [[slot, dtype, value], ...]`` for a kernel with scalar parameters and
  ``"cores": N`` for a kernel launched on N cores)
  followed by the tensors' bytes concatenated, in parameter order;
* reply: ``{"ok": true}`` plus every tensor's bytes, or ``{"ok": false,
  "error": "..."}``.  The first reply (``{"ok": true, "ready": true}``) says the
  runtime started; before it, ``{"progress": "..."}`` lines say the worker is
  waiting for another process's emulator to start (the parent's start-up
  deadline counts silence, not that wait).

The worker dies with its parent, whatever it is doing (:mod:`tilelang_tpu.lifeline`).
"""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, BinaryIO, Protocol

from tilelang_tpu import lifeline


class Device(Protocol):
    def run(self, *arguments: Any, **options: Any) -> None: ...  # library, symbol, buffers[, scalars=, cores=]


def open_device(chip: str, library_dir: str, arguments: Sequence[str], waiting: Callable[[float], None] | None = None) -> Device:
    if chip == "bm1690":
        from tilelang_tpu.tpuv7 import Tpuv7Device

        return Tpuv7Device(library_dir, waiting)
    if chip == "bm1684x":
        from tilelang_tpu.bmlib_worker import Bmlib

        library, symbol = arguments
        return Bmlib(library_dir, library, symbol)
    raise ValueError(f"unknown chip {chip!r}")


def _read_exact(stream: io.BufferedIOBase, size: int) -> bytearray:
    buffer = bytearray(size)
    view = memoryview(buffer)
    done = 0
    while done < size:
        got = stream.readinto(view[done:])
        if not got:
            raise EOFError("parent closed the pipe")
        done += got
    return buffer


def serve(chip: str, library_dir: str, arguments: Sequence[str], requests: io.BufferedIOBase, replies: BinaryIO) -> None:
    def waiting(seconds: float) -> None:
        replies.write(json.dumps({"progress": f"waiting {seconds:.0f} s for another process's emulator to start"}).encode() + b"\n")
        replies.flush()

    try:
        device = open_device(chip, library_dir, arguments, waiting)
    except Exception as err:
        replies.write(json.dumps({"ok": False, "error": f"worker start-up: {err}"}).encode() + b"\n")
        replies.flush()
        return
    ready: dict[str, Any] = {"ok": True, "ready": True}
    # How long each start-up step took, so that the parent can tell a stalled start from a slow one.
    ready["startup"] = getattr(device, "startup_seconds", {})
    ready["start_locked"] = getattr(device, "start_locked", None)
    stale_lock = getattr(device, "stale_lock", None)
    if stale_lock is not None:
        ready["stale_lock"] = stale_lock.describe()
    replies.write(json.dumps(ready).encode() + b"\n")
    replies.flush()
    while True:
        header = requests.readline()
        if not header:
            return
        request = json.loads(header)
        buffers = [_read_exact(requests, size) for size in request["sizes"]]
        try:
            # Only bm1690 kernels with scalar parameters send "scalars", only multi-core ones "cores".
            options = {key: request[key] for key in ("scalars", "cores") if request.get(key)}
            device.run(request["library"], request["symbol"], buffers, **options)
        except Exception as err:
            replies.write(json.dumps({"ok": False, "error": str(err)}).encode() + b"\n")
        else:
            replies.write(b'{"ok": true}\n')
            for buffer in buffers:
                replies.write(buffer)
        replies.flush()


def main() -> None:
    lifeline.die_with_parent()
    chip, library_dir, *arguments = sys.argv[1:]
    # Keep the protocol on a private duplicate of stdout, then point fd 1 at stderr so that
    # C-level prints of the emulators cannot corrupt replies.
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    serve(chip, library_dir, arguments, sys.stdin.buffer, replies)  # type: ignore[arg-type]  # a BufferedReader


if __name__ == "__main__":
    main()
