"""Timing helpers for a backend's ``tilecore_bench``: one timing loop, the wall-clock default, method checks.

``timed_samples`` is the one timing loop (device events or the host clock),
``wall_clock_bench`` the default ``tilecore_bench``, ``event_bench`` the loop on a torch
device's own events, and ``timing_method`` validates ``do_bench(backend=...)`` against
what a target supports.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, Unpack

from tilecore.errors import TilecoreError

if TYPE_CHECKING:
    import torch

    from tilecore.targets import ResolvedTarget


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


class Budget(TypedDict, total=False):
    """How long to time (the keyword arguments of :func:`timed_samples` that :func:`wall_clock_bench`
    and :func:`event_bench` pass on): tilelang's ``do_bench`` ``warmup`` and ``rep`` budgets in
    milliseconds, or the counts ``n_warmup`` and ``n_repeat``; at most ``max_repeat`` timed calls."""

    warmup: float
    rep: float
    n_warmup: int
    n_repeat: int
    max_repeat: int


def wall_clock_bench(fn: Callable[[], Any], *, synchronize: Callable[[], None] = lambda: None, **budget: Unpack[Budget]) -> list[float]:
    """Milliseconds of each timed call of ``fn`` on the host clock (``synchronize`` before each reading).

    :func:`timed_samples` with :class:`HostEvent`; the default ``tilecore_bench``.
    """
    return timed_samples(
        fn,
        new_event=lambda: HostEvent(synchronize),
        synchronize=synchronize,
        estimate_calls=1,
        untimed_first_call=False,  # one estimate call, as before: emulated devices are slow
        **budget,
    )


def event_bench(fn: Callable[[], Any], device: torch.device, *, flush_bytes: int = 0, **budget: Unpack[Budget]) -> list[float]:
    """Milliseconds of each timed call of ``fn`` on ``device``, timed with the device's own events.

    tilelang's ``do_bench`` "event" method for any device torch drives through a device module
    (``torch.get_device_module(device)``: its ``Event(enable_timing=True)``, ``synchronize`` and
    ``device`` context): :func:`timed_samples` on ``device``'s current stream, with a buffer of
    ``flush_bytes`` zeroed before every call (one larger than the device's caches: every call starts cold).
    """
    import torch

    module = torch.get_device_module(device)
    with module.device(device):
        flush = torch.empty(flush_bytes // 4, dtype=torch.int32, device=device)
        return timed_samples(
            fn,
            new_event=lambda: module.Event(enable_timing=True),
            synchronize=lambda: module.synchronize(device),
            before_each=flush.zero_,
            **budget,
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
            f"{source} is not a timing method of this backend. Valid: {', '.join(methods)} (default {methods[0]}).",
            owner=target.error_owner,
        )
    return chosen
