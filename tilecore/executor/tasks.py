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
from typing import Any


def _where() -> dict[str, Any]:
    """Where the task ran: the Ray node id on a cluster, else the host (a pool worker)."""
    ray: Any = sys.modules.get("ray")
    node = ray.get_runtime_context().get_node_id() if ray is not None and ray.is_initialized() else socket.gethostname()
    return {"node": node, "host": socket.gethostname(), "pid": os.getpid()}


def compile_task(program: bytes) -> dict[str, Any]:
    """Compile one candidate; its entry is published to the remote cache before this returns."""
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

    ``deadline_s`` > 0 (tilelang's per-config ``timeout``): a check and benchmark still running
    then end this process (faulthandler's watchdog is a C thread: it fires even while a hung
    kernel holds the GIL, and prints where the task hung), so the executor sees the worker die
    and a hung kernel holds no benchmark slot.  The process pool kills its worker itself."""
    import tilecore
    from tilecore import remote
    from tilecore._bridge.tuner import benchmark_candidate

    start = time.perf_counter()
    tilecore.activate()  # a fresh worker's start is no part of the deadline
    hits, misses = remote.counters().get("hits", 0), remote.counters().get("misses", 0)
    result: dict[str, Any] = _where()
    if deadline_s > 0:
        faulthandler.dump_traceback_later(deadline_s, exit=True)
    try:
        latency, ref_latency = benchmark_candidate(program, profile, warmup, rep)
        result.update(status="ok", latency=latency, ref_latency=ref_latency)
    except AssertionError as err:
        result.update(status="check_failed", error=str(err)[-2000:])
    except Exception:
        result.update(status="bench_error", error=traceback.format_exc(limit=4)[-2000:])
    finally:
        if deadline_s > 0:
            faulthandler.cancel_dump_traceback_later()
    result["remote_hit"] = remote.counters().get("hits", 0) > hits
    result["compiled"] = remote.counters().get("misses", 0) > misses  # not in the cache: loading it compiled it
    result["seconds"] = time.perf_counter() - start
    return result
