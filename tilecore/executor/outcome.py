"""A sweep's outcome: the best config that passed, chosen as tilelang's tuner chooses it."""

from __future__ import annotations

from typing import Any


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
