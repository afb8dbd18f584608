"""Device-generic tensor supply and benchmarking helpers for backends.

``make_tensor`` implements every tensor supply kind for any torch device, with
the same value distributions as tilelang's own supply, so a backend's
``tilecore_supply_tensor`` is usually one call.  ``timed_samples`` is the one
timing loop (device events or the host clock), ``wall_clock_bench`` the default
``tilecore_bench``, and ``timing_method`` validates ``do_bench(backend=...)``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from tilecore.errors import TilecoreError
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


class TimingEvent(Protocol):
    """A timestamp on the device's timeline (a torch device module's ``Event(enable_timing=True)`` is one)."""

    def record(self) -> None: ...

    def elapsed_time(self, end: Any) -> float:
        """Milliseconds from this event to ``end`` (both recorded)."""
        ...


class HostEvent:
    """A :class:`TimingEvent` on the host clock; ``record`` first waits for the device (``synchronize``)."""

    __slots__ = ("_synchronize", "stamp")

    def __init__(self, synchronize: Callable[[], None] = lambda: None) -> None:
        self._synchronize = synchronize
        self.stamp = 0.0

    def record(self) -> None:
        self._synchronize()
        self.stamp = time.perf_counter()

    def elapsed_time(self, end: HostEvent) -> float:
        return (end.stamp - self.stamp) * 1e3


def timed_samples(
    fn: Callable[[], Any],
    *,
    new_event: Callable[[], TimingEvent],
    synchronize: Callable[[], None] = lambda: None,
    before_each: Callable[[], object] = lambda: None,
    warmup: float = 25.0,
    rep: float = 100.0,
    n_warmup: int = 0,
    n_repeat: int = 0,
    estimate_calls: int = 5,
    untimed_first_call: bool = True,
    max_repeat: int = 10_000,
) -> list[float]:
    """Milliseconds of each timed call of ``fn``: the one timing loop every backend uses.

    tilelang's ``do_bench`` budget: ``estimate_calls`` calls (each after
    ``before_each``, e.g. a cache flush) estimate the cost, then the ``warmup``
    and ``rep`` millisecond budgets set the counts unless ``n_warmup`` /
    ``n_repeat`` give them.  Each timed call is bracketed by two events from
    ``new_event`` (device events, or :class:`HostEvent` for the host clock) and
    ``synchronize`` waits for the device once at the end.  ``untimed_first_call``:
    one call before the estimate (compilation, lazy loading).
    """
    if untimed_first_call:
        fn()
    synchronize()
    start, end = new_event(), new_event()
    start.record()
    for _ in range(estimate_calls):
        before_each()
        fn()
    end.record()
    synchronize()
    estimate_ms = max(start.elapsed_time(end) / estimate_calls, 1e-4)
    warmups = n_warmup if n_warmup > 0 else max(1, int(warmup / estimate_ms))
    repeats = min(n_repeat if n_repeat > 0 else max(1, int(rep / estimate_ms)), max_repeat)
    for _ in range(min(warmups, max_repeat)):
        fn()
    synchronize()
    pairs = [(new_event(), new_event()) for _ in range(repeats)]
    for begin, finish in pairs:
        before_each()
        begin.record()
        fn()
        finish.record()
    synchronize()
    return [begin.elapsed_time(finish) for begin, finish in pairs]


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
    """Milliseconds of each timed call of ``fn`` on the host clock (``synchronize`` before each reading).

    :func:`timed_samples` with :class:`HostEvent`; the default ``tilecore_bench``.
    """
    return timed_samples(
        fn,
        new_event=lambda: HostEvent(synchronize),
        synchronize=synchronize,
        warmup=warmup,
        rep=rep,
        n_warmup=n_warmup,
        n_repeat=n_repeat,
        estimate_calls=1,
        untimed_first_call=False,  # one estimate call, as before: emulated devices are slow
        max_repeat=max_repeat,
    )


def timing_method(target: ResolvedTarget, requested: str, methods: Sequence[str], *, env_var: str | None = None) -> str:
    """Validate ``profiler.do_bench(backend=...)`` against the timing methods a target supports.

    ``methods[0]`` is the default; tilelang's default name ``"event"`` selects it, or the
    value of ``env_var`` when that is set.  Anything else raises :class:`TilecoreError`
    naming the target, its distribution and version, and the valid methods.
    """
    import os

    chosen, source = requested, f"do_bench(backend={requested!r})"
    if requested == "event" and env_var and os.environ.get(env_var, "").strip():
        chosen, source = os.environ[env_var].strip().lower(), f"{env_var}={os.environ[env_var].strip()!r}"
    elif requested == "event" and "event" not in methods:
        chosen = methods[0]
    if chosen not in methods:
        raise TilecoreError(
            f"target {target} ({target.owner}): {source} is not a timing method of this backend. "
            f"Valid: {', '.join(methods)} (default {methods[0]})."
        )
    return chosen


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
