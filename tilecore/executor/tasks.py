"""The task bodies that run on cluster nodes or pool workers: compile one candidate, benchmark one.

Each returns a few hundred bytes of plain data; the compiled kernel travels through the
signed remote cache (``tilelang.compile`` publishes it, :func:`tilecore.remote.flush` makes
sure it is there before the task reports), never through the executor.  The node's own
configuration decides the cache URL, signing key file and toolchain: nothing of it is
shipped with the task.
"""

from __future__ import annotations

import faulthandler
import os
import socket
import sys
import time
import traceback
from pathlib import Path
from typing import Any

#: ``(mode, marker)`` for a test of crash handling: ``"always"`` kills the worker process on every
#: attempt, ``"once"`` only until ``marker`` exists (see RayExecutor's ``inject_crash`` option).
Fault = tuple[str, str] | None


def _crash_if_asked(fault: Fault) -> None:
    if fault is None:
        return
    mode, marker = fault
    if mode == "always" or not Path(marker).exists():
        Path(marker).touch()
        os._exit(70)  # a worker dying as a TVM segfault would: no exception, no cleanup


def _where() -> dict[str, Any]:
    """Where the task ran: the Ray node id on a cluster, else the host (a pool worker)."""
    ray: Any = sys.modules.get("ray")
    node = ray.get_runtime_context().get_node_id() if ray is not None and ray.is_initialized() else socket.gethostname()
    return {"node": node, "host": socket.gethostname(), "pid": os.getpid()}


def compile_task(program: bytes, fault: Fault = None) -> dict[str, Any]:
    """Compile one candidate; its entry is published to the remote cache before this returns."""
    _crash_if_asked(fault)
    import tilecore
    from tilecore import remote
    from tilecore._bridge.tuner import compile_candidate, toolchain_error

    start = time.perf_counter()
    tilecore.activate()
    result: dict[str, Any] = _where()
    try:
        compile_candidate(program)
        result["status"] = "compiled"
    except Exception as err:
        missing = toolchain_error(err)
        result["status"] = "toolchain" if missing is not None else "compile_error"
        result["error"] = str(missing) if missing is not None else traceback.format_exc(limit=4)[-2000:]
    finally:
        result["published"] = remote.flush()
    result["seconds"] = time.perf_counter() - start
    return result


def bench_task(program: bytes, profile: bytes, warmup: int, rep: int, deadline_s: float = 0.0) -> dict[str, Any]:
    """Load one candidate (a cache hit), check it against ``ref_prog`` and time it.

    ``deadline_s`` > 0 (tilelang's per-config ``timeout``): a benchmark still running then ends
    this process (faulthandler's watchdog is a C thread: it fires even when a hung kernel holds
    the GIL, and prints where the task hung), so the executor sees the worker die and the hung
    kernel holds no slot.  The process pool kills the worker itself at the same deadline."""
    if deadline_s > 0:
        faulthandler.dump_traceback_later(deadline_s, exit=True)
    try:
        return _bench(program, profile, warmup, rep)
    finally:
        if deadline_s > 0:
            faulthandler.cancel_dump_traceback_later()


def _bench(program: bytes, profile: bytes, warmup: int, rep: int) -> dict[str, Any]:
    import tilecore
    from tilecore import remote
    from tilecore._bridge.tuner import benchmark_candidate

    start = time.perf_counter()
    tilecore.activate()
    hits = remote.counters().get("hits", 0)
    result: dict[str, Any] = _where()
    try:
        latency, ref_latency = benchmark_candidate(program, profile, warmup, rep)
        result.update(status="ok", latency=latency, ref_latency=ref_latency)
    except AssertionError as err:
        result.update(status="check_failed", error=str(err)[-2000:])
    except Exception:
        result.update(status="bench_error", error=traceback.format_exc(limit=4)[-2000:])
    result["remote_hit"] = remote.counters().get("hits", 0) > hits
    result["seconds"] = time.perf_counter() - start
    return result
