"""Profiling: HIP-event timing through torch's device API, with a cache flush before every call.

A ROCm build of torch implements ``torch.cuda.Event`` with HIP events
(``hipEventRecord``/``hipEventElapsedTime``), so tilecore's device-event loop
(:func:`tilecore.kit.timing.event_bench`) is HIP-event timing on the kernel's stream, as
tilelang's ``do_bench`` does for CUDA.  Each
timed call is preceded by writing a buffer larger than the device's caches, so
every call starts cold.  On CDNA3/CDNA4 (MI300, MI350) the last level is the
256 MB AMD Infinity Cache in front of HBM, so the flush buffer is twice that;
elsewhere it is upstream's 256 MB.  :func:`bench` refuses to time anything on
a device that is not a ROCm device of the kernel's architecture
(:func:`tilelang_hip.runtime.require_device`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tilecore import ResolvedTarget
from tilecore.kit.timing import event_bench, timing_method
from tilelang_hip import runtime

MIB = 1 << 20
#: Flush buffer bytes per architecture prefix (Infinity Cache, MALL, is 256 MB on gfx94x/gfx95x).
FLUSH_BYTES = {"gfx94": 512 * MIB, "gfx95": 512 * MIB}
DEFAULT_FLUSH_BYTES = 256 * MIB


def flush_bytes(arch: str) -> int:
    for prefix, size in FLUSH_BYTES.items():
        if arch.startswith(prefix):
            return size
    return DEFAULT_FLUSH_BYTES


#: tilelang's do_bench(backend=...) names this backend honours (HIP events; the default first).
METHODS = ("event",)


def bench(
    target: ResolvedTarget, fn: Callable[[], Any], warmup: float, rep: float, n_warmup: int, n_repeat: int, backend: str = "event"
) -> list[float]:
    """``tilecore_bench`` for ``hip``: HIP-event timing on the checked ROCm device; ``backend`` is validated."""
    timing_method(target, backend, METHODS)
    device = runtime.require_device(target)
    return event_bench(fn, device, flush_bytes=flush_bytes(target["arch"]), warmup=warmup, rep=rep, n_warmup=n_warmup, n_repeat=n_repeat)
