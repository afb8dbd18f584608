"""Profiling: kernels run synchronously on the host, so wall-clock timing is exact."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tilecore.supply import wall_clock_bench


def bench(fn: Callable[[], Any], warmup: float, rep: float, n_warmup: int, n_repeat: int) -> list[float]:
    return wall_clock_bench(fn, warmup=warmup, rep=rep, n_warmup=n_warmup, n_repeat=n_repeat)
