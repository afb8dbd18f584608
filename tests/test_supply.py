"""tilecore.kit.supply: the one timing loop and the timing-method check every backend uses."""

from __future__ import annotations

import time

import pytest

import tilecore
from tilecore.kit.timing import HostEvent, timed_samples, timing_method, wall_clock_bench
from tilecore.targets import ResolvedTarget, TargetSpec


def _target() -> ResolvedTarget:
    return ResolvedTarget(TargetSpec("acme", "test target"), {}, "acme", "tilelang-acme", "2.1")


class Recorder:
    def __init__(self) -> None:
        self.log: list[str] = []

    def fn(self) -> None:
        self.log.append("call")
        time.sleep(0.001)

    def flush(self) -> None:
        self.log.append("flush")


def test_explicit_counts_and_a_flush_before_every_timed_call() -> None:
    rec = Recorder()
    samples = timed_samples(rec.fn, new_event=HostEvent, before_each=rec.flush, n_warmup=2, n_repeat=4)
    assert len(samples) == 4 and all(s >= 0.9 for s in samples)
    # untimed first call, 5 flushed estimate calls, 2 warm-ups, 4 flushed timed calls
    assert rec.log == ["call"] + ["flush", "call"] * 5 + ["call"] * 2 + ["flush", "call"] * 4


def test_budgets_set_the_counts() -> None:
    rec = Recorder()
    samples = timed_samples(rec.fn, new_event=HostEvent, warmup=1.0, rep=3.0, max_repeat=50)
    assert 1 <= len(samples) <= 3  # ~1 ms per call, 3 ms budget
    many = timed_samples(lambda: None, new_event=HostEvent, rep=1000.0, max_repeat=50)
    assert len(many) == 50


def test_wall_clock_keeps_one_estimate_call() -> None:
    rec = Recorder()
    samples = wall_clock_bench(rec.fn, n_warmup=1, n_repeat=3)
    assert len(samples) == 3 and rec.log.count("call") == 1 + 1 + 3


def test_host_event_waits_for_the_device_before_reading_the_clock() -> None:
    order: list[str] = []
    start, end = HostEvent(lambda: order.append("sync")), HostEvent(lambda: order.append("sync"))
    start.record()
    time.sleep(0.002)
    end.record()
    assert order == ["sync", "sync"] and start.elapsed_time(end) >= 1.9


def test_timing_method_default_env_and_refusal(monkeypatch: pytest.MonkeyPatch) -> None:
    target = _target()
    assert timing_method(target, "event", ("event", "cudagraph")) == "event"
    assert timing_method(target, "event", ("wall",)) == "wall"  # tilelang's default name picks the target's default
    assert timing_method(target, "cudagraph", ("event", "cudagraph")) == "cudagraph"
    monkeypatch.setenv("ACME_BENCH", "cudagraph")
    assert timing_method(target, "event", ("event", "cudagraph"), env_var="ACME_BENCH") == "cudagraph"
    monkeypatch.setenv("ACME_BENCH", "bogus")
    with pytest.raises(tilecore.TilecoreError, match=r"target acme \(tilelang-acme 2\.1\): ACME_BENCH='bogus' is not a timing method"):
        timing_method(target, "event", ("event", "cudagraph"), env_var="ACME_BENCH")
    with pytest.raises(
        tilecore.TilecoreError,
        match=r"target acme \(tilelang-acme 2\.1\): do_bench\(backend='cupti'\) .* Valid: event, cudagraph \(default event\)",
    ):
        timing_method(target, "cupti", ("event", "cudagraph"))
