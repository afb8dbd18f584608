"""Profiling: CUDA-event timing with an L2 flush before every timed call.

The algorithm is upstream's ``tilelang.profiler.do_bench`` ("event" backend,
``profiler/bench.py`` and ``profiler/torch_bench.py``): one call, a 256 MiB
int32 buffer zeroed before each call to evict L2, a five-call estimate that
turns the ``warmup``/``rep`` millisecond budgets into counts, then one pair of
CUDA events around each timed call.  It is written out here rather than called
because upstream's entry point returns one reduced number; this one returns
every sample, so tilecore applies the caller's ``return_mode``/``quantiles``.

``profiler.do_bench(backend="cudagraph")`` captures the repeats in a CUDA
graph and replays it ten times (upstream's "cudagraph" method), which removes
host launch cost from the measurement.  ``TILELANG_CUDA_BENCH`` changes the
default ("event") for code that cannot pass the argument.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import torch

ENV_METHOD = "TILELANG_CUDA_BENCH"
METHODS = ("event", "cudagraph")
FLUSH_BYTES = 256 * 1024 * 1024
GRAPH_REPLAYS = 10


def method(requested: str = "event") -> str:
    """The timing method: ``do_bench(backend=...)``, else ``TILELANG_CUDA_BENCH``, else ``event``."""
    if requested == "event":
        chosen, source = os.environ.get(ENV_METHOD, "event").strip().lower() or "event", ENV_METHOD
    else:
        chosen, source = requested, "do_bench(backend=...)"
    if chosen not in METHODS:
        from tilelang_cuda import __version__

        raise ValueError(
            f"target 'cuda' (tilelang-cuda {__version__}): {source}={chosen!r} is not a timing method of this backend. "
            f"Valid: {', '.join(METHODS)}."
        )
    return chosen


def bench(fn: Callable[[], Any], warmup: float, rep: float, n_warmup: int, n_repeat: int, backend: str = "event") -> list[float]:
    """Milliseconds per call of ``fn`` on the current CUDA device, one sample per timed call (or replay)."""
    chosen = method(backend)
    device = torch.device("cuda", torch.cuda.current_device())
    fn()
    torch.cuda.synchronize(device)
    flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device=device)
    flush.zero_()
    torch.cuda.synchronize(device)

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        flush.zero_()
        fn()
    end.record()
    end.synchronize()
    estimate = max(start.elapsed_time(end) / 5, 1e-6)
    warmups = n_warmup if n_warmup > 0 else max(1, int(warmup / estimate))
    repeats = n_repeat if n_repeat > 0 else max(1, int(rep / estimate))
    for _ in range(warmups):
        fn()
    if chosen == "cudagraph":
        return _graph_samples(fn, flush, repeats, device)
    return _event_samples(fn, flush, repeats, device)


def _event_samples(fn: Callable[[], Any], flush: torch.Tensor, repeats: int, device: torch.device) -> list[float]:
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    for start, end in zip(starts, ends, strict=True):
        flush.zero_()
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize(device)
    return [start.elapsed_time(end) for start, end in zip(starts, ends, strict=True)]


def _graph_samples(fn: Callable[[], Any], flush: torch.Tensor, repeats: int, device: torch.device) -> list[float]:
    stream = torch.cuda.Stream(device=device)
    with torch.cuda.stream(stream):
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(repeats):
                fn()
        torch.cuda.synchronize(device)
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(GRAPH_REPLAYS)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(GRAPH_REPLAYS)]
        for start, end in zip(starts, ends, strict=True):
            flush.zero_()
            start.record()
            graph.replay()
            end.record()
        torch.cuda.synchronize(device)
    return [start.elapsed_time(end) / repeats for start, end in zip(starts, ends, strict=True)]
