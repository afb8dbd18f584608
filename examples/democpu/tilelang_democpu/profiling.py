"""Profiling: kernels run synchronously on the host, so wall-clock timing is exact."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tilecore import ResolvedTarget
from tilecore.kit.timing import timing_method, wall_clock_bench

#: tilelang's do_bench(backend=...) names this backend can honour: both mean host wall clock here.
METHODS = ("event", "wall")


def bench(
    target: ResolvedTarget, fn: Callable[[], Any], warmup: float, rep: float, n_warmup: int, n_repeat: int, backend: str = "event"
) -> list[float]:
    timing_method(target, backend, METHODS)
    return wall_clock_bench(fn, warmup=warmup, rep=rep, n_warmup=n_warmup, n_repeat=n_repeat)
