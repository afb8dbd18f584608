"""Profiling: CUDA-event timing with an L2 flush before every timed call.

The algorithm is upstream's ``tilelang.profiler.do_bench`` ("event" backend,
``profiler/bench.py`` and ``profiler/torch_bench.py``): one call, a 256 MiB
int32 buffer zeroed before each call to evict L2, a five-call estimate that
turns the ``warmup``/``rep`` millisecond budgets into counts, then one pair of
CUDA events around each timed call.  The loop is tilecore's
(:func:`tilecore.kit.timing.event_bench`, shared by every backend timing with
device events) with CUDA events and the flush; it returns every sample, so tilecore applies the
caller's ``return_mode``/``quantiles``.  :func:`tilecore.kit.timing.timing_method`
validates ``backend``.

``profiler.do_bench(backend="cudagraph")`` captures the repeats in a CUDA
graph and replays it ten times (upstream's "cudagraph" method), which removes
host launch cost from the measurement.  ``TILELANG_CUDA_BENCH`` changes the
default ("event") for code that cannot pass the argument.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from tilecore import ResolvedTarget
from tilecore.kit.timing import event_bench, timing_method

ENV_METHOD = "TILELANG_CUDA_BENCH"
METHODS = ("event", "cudagraph")
FLUSH_BYTES = 256 * 1024 * 1024
GRAPH_REPLAYS = 10


def bench(
    target: ResolvedTarget, fn: Callable[[], Any], warmup: float, rep: float, n_warmup: int, n_repeat: int, backend: str = "event"
) -> list[float]:
    """Milliseconds per call of ``fn`` on the current CUDA device, one sample per timed call (or replay)."""
    chosen = timing_method(target, backend, METHODS, env_var=ENV_METHOD)
    device = torch.device("cuda", torch.cuda.current_device())
    if chosen == "cudagraph":
        # Budgets from the event loop's estimate, then the repeats captured in one graph.
        estimate = event_bench(fn, device, flush_bytes=FLUSH_BYTES, n_warmup=1, n_repeat=5)
        per_call = max(sum(estimate) / len(estimate), 1e-6)
        repeats = n_repeat if n_repeat > 0 else max(1, int(rep / per_call))
        return _graph_samples(fn, repeats, device)
    return event_bench(fn, device, flush_bytes=FLUSH_BYTES, warmup=warmup, rep=rep, n_warmup=n_warmup, n_repeat=n_repeat)


def _graph_samples(fn: Callable[[], Any], repeats: int, device: torch.device) -> list[float]:
    flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device=device)

    def new_event() -> torch.cuda.Event:
        return torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]

    stream = torch.cuda.Stream(device=device)  # type: ignore[no-untyped-call]
    with torch.cuda.stream(stream):
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(repeats):
                fn()
        torch.cuda.synchronize(device)
        pairs = [(new_event(), new_event()) for _ in range(GRAPH_REPLAYS)]
        for start, end in pairs:
            flush.zero_()
            start.record()
            graph.replay()
            end.record()
        torch.cuda.synchronize(device)
    return [start.elapsed_time(end) / repeats for start, end in pairs]
