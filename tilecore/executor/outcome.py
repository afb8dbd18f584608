"""A sweep's outcome and placement: the best config that passed, chosen as tilelang's tuner
chooses it; where the target's benchmarks may run (its :class:`tilecore.Placement`)."""

from __future__ import annotations

from typing import Any

from tilecore.targets import Placement


def placement(target: str) -> Placement:
    """The placement ``target`` declares; the default (one exclusive slot per host) when it names
    no tilecore target or cannot be resolved here."""
    import tilecore

    try:
        resolved = tilecore.resolve_target(target)
    except Exception:
        return Placement()
    return resolved.spec.placement if resolved is not None else Placement()


def bench_slots(place: Placement) -> int:
    """How many benchmarks of the target this machine may run at once (its ``bench`` resource)."""
    if place.per == "device" and place.devices is not None:
        return max(0, int(place.devices()))
    return 1


def best(results: list[dict[str, Any]], executor: str) -> dict[str, Any]:
    """The result with the least latency among those that passed (the first such config on a tie).

    Raises tilelang's ``RuntimeError`` when no config passed."""
    passed = [r for r in results if r["status"] == "ok"]
    if not passed:
        raise RuntimeError(
            "Auto-tuning failed: No configuration successfully compiled and passed benchmarking/validation "
            f"(tilecore executor {executor!r}: {', '.join(sorted({r['status'] for r in results}))})."
        )
    return min(passed, key=lambda r: (r["latency"], r["index"]))
