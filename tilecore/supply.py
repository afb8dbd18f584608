"""Device-generic tensor supply and benchmarking helpers for backends.

``make_tensor`` implements every tensor supply kind for any torch device, with
the same value distributions as tilelang's own supply, so a backend's
``tilecore_supply_tensor`` is usually one call.  ``wall_clock_bench`` is the
default ``tilecore_bench``: host timing around a device synchronisation.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tilecore.kernel import SUPPLY_TYPES, TensorParam

if TYPE_CHECKING:
    import torch

    from tilecore.registry import Registry
    from tilecore.targets import ResolvedTarget

def make_tensor(param: TensorParam, supply: str, device: str | torch.device) -> torch.Tensor:
    """A tensor for ``param`` on ``device`` filled according to ``supply``."""
    import torch  # here, not at module level: importing this module must not import torch

    if supply not in SUPPLY_TYPES:
        raise ValueError(f"unknown tensor supply {supply!r}; valid: {', '.join(SUPPLY_TYPES)}")
    if not param.is_static:
        raise ValueError(
            f"cannot supply a tensor for {param.describe()}: its shape is dynamic. "
            "Pass input tensors explicitly (profiler.do_bench(input_tensors=...))."
        )
    shape = tuple(int(d) for d in param.shape)
    dtype = param.dtype
    if supply == "zero":
        return torch.zeros(shape, dtype=dtype, device=device)
    if supply == "one":
        return torch.ones(shape, dtype=dtype, device=device)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, device=device).to(dtype)
    is_float = dtype.is_floating_point
    if supply == "integer" or (supply == "auto" and not is_float):
        low, high = (0, 3) if not dtype.is_signed and not is_float else (-2, 3)
        return torch.randint(low, high, shape, device=device).to(dtype)
    if not is_float and supply in ("uniform", "normal"):
        return torch.ones(shape, dtype=dtype, device=device)
    if supply in ("uniform", "auto"):
        return torch.empty(shape, dtype=torch.float32, device=device).uniform_(-1.0, 1.0).to(dtype)
    if supply == "normal":
        return torch.empty(shape, dtype=torch.float32, device=device).normal_(-1.0, 1.0).to(dtype)
    return torch.randn(shape, device=device).to(dtype)  # "randn"


def wall_clock_bench(
    fn: Callable[[], Any],
    *,
    warmup: float = 25.0,
    rep: float = 100.0,
    n_warmup: int = 0,
    n_repeat: int = 0,
    synchronize: Callable[[], None] = lambda: None,
    max_repeat: int = 10_000,
) -> list[float]:
    """Milliseconds of each timed call of ``fn``.

    Same budget semantics as tilelang's ``do_bench``: one call estimates the
    cost, then ``warmup``/``rep`` milliseconds decide the counts unless
    ``n_warmup``/``n_repeat`` give them explicitly.
    """
    synchronize()
    start = time.perf_counter()
    fn()
    synchronize()
    estimate_ms = max((time.perf_counter() - start) * 1e3, 1e-4)
    warmups = n_warmup if n_warmup > 0 else max(1, int(warmup / estimate_ms))
    repeats = n_repeat if n_repeat > 0 else max(1, int(rep / estimate_ms))
    repeats = min(repeats, max_repeat)
    for _ in range(min(warmups, max_repeat)):
        fn()
    synchronize()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        synchronize()
        samples.append((time.perf_counter() - start) * 1e3)
    return samples


def bench_samples(
    registry: Registry,
    target: ResolvedTarget,
    fn: Callable[[], Any],
    *,
    warmup: float,
    rep: float,
    n_warmup: int,
    n_repeat: int,
    backend: str,
) -> float | list[float]:
    """What ``profiler.do_bench`` times: the target's ``tilecore_bench`` hook, else :func:`wall_clock_bench`."""
    result = registry.call(target, "tilecore_bench", fn=fn, warmup=warmup, rep=rep, n_warmup=n_warmup, n_repeat=n_repeat, backend=backend)
    if result is None:
        return wall_clock_bench(fn, warmup=warmup, rep=rep, n_warmup=n_warmup, n_repeat=n_repeat)
    return result  # type: ignore[no-any-return]  # the hook contract: samples or one number


def reduce_samples(samples: list[float], return_mode: str = "mean", quantiles: list[float] | None = None) -> float | list[float]:
    """Reduce per-call timings like tilelang's ``do_bench`` does."""
    if quantiles is not None:
        ordered = sorted(samples)
        return [ordered[min(len(ordered) - 1, int(q * len(ordered)))] for q in quantiles]
    reducers: dict[str, Callable[[list[float]], float]] = {
        "mean": statistics.fmean,
        "median": statistics.median,
        "min": min,
        "max": max,
    }
    if return_mode not in reducers:
        raise ValueError(f"return_mode must be one of {', '.join(reducers)}, got {return_mode!r}")
    return reducers[return_mode](samples)
