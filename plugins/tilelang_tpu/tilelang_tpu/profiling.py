"""Profiling on the tpu target.

On the emulator (mode ``cmodel``) a "device time" does not exist: what can be
measured is the host wall time of copy-in, emulated execution and copy-out,
which is orders of magnitude slower than a card and says nothing about card
performance beyond relative comparisons on the same machine.  So timings are
reported as emulator wall time (logged once per process, through ``logging``),
and the repetition count is kept small: tilelang's millisecond budgets
(``warmup=25, rep=100``) are ignored and ``n_repeat`` is capped at
:data:`MAX_EMULATOR_REPEAT`.  Nothing here touches ``torch.cuda``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from tilecore.kit.timing import wall_clock_bench

logger = logging.getLogger("tilelang_tpu")

MAX_EMULATOR_WARMUP = 1
MAX_EMULATOR_REPEAT = 10
_warned = False


def _warn_once() -> None:
    global _warned
    if not _warned:
        _warned = True
        logger.warning(
            "tpu target in cmodel mode: do_bench timings are SophGo emulator wall time on the host CPU "
            "(copy-in + emulation + copy-out), not TPU device time; at most %d timed runs.",
            MAX_EMULATOR_REPEAT,
        )


def emulator_counts(n_warmup: int, n_repeat: int) -> tuple[int, int]:
    """Warm-up and timed run counts on the emulator (explicit counts honoured up to the caps)."""
    warmups = min(n_warmup, MAX_EMULATOR_WARMUP) if n_warmup > 0 else MAX_EMULATOR_WARMUP
    repeats = min(n_repeat, MAX_EMULATOR_REPEAT) if n_repeat > 0 else MAX_EMULATOR_REPEAT
    return warmups, repeats


#: tilelang's do_bench(backend=...) names honoured: launches are synchronous, so both are host wall time.
METHODS = ("event", "wall")


def bench(fn: Callable[[], Any], mode: str, warmup: float, rep: float, n_warmup: int, n_repeat: int) -> list[float]:
    """Milliseconds of each timed call of ``fn`` (launches are synchronous, so wall time is complete)."""
    if mode == "cmodel":
        _warn_once()
        warmups, repeats = emulator_counts(n_warmup, n_repeat)
        return wall_clock_bench(fn, n_warmup=warmups, n_repeat=repeats)
    return wall_clock_bench(fn, warmup=warmup, rep=rep, n_warmup=n_warmup, n_repeat=n_repeat)
