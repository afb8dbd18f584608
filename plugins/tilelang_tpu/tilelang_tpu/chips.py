"""The SophGo chips the tpu target knows: names, TPU cores, PPL chip codes (a leaf module).

:mod:`tilelang_tpu.target` (the target declaration) and :mod:`tilelang_tpu.setup` (the
toolchain) both read these; keeping them here lets neither import the other at module level.
"""

from __future__ import annotations

from collections.abc import Mapping

from tilecore import Owner, TargetOptionError
from tilelang_tpu import __version__

__all__ = [
    "CHIPS",
    "CHIP_CORES",
    "DEFAULT_CHIP",
    "DEFAULT_CORES",
    "DIST",
    "FALLBACK_CHIP_CODES",
    "MAX_CORES",
    "TARGET_NAME",
    "check_cores",
    "cores_of",
    "error_owner",
    "owner",
]

DIST = "tilelang-tpu"
TARGET_NAME = "tpu"
CHIPS = ("bm1690", "bm1684x")
DEFAULT_CHIP = "bm1690"
#: TPU cores a kernel's grid can be split over, per chip.  BM1690 has 8 (tpuRtKernelLaunch's
#: block_num); BM1684X kernels launch through bmlib's tpu_kernel_launch, which has no core count.
CHIP_CORES: Mapping[str, int] = {"bm1690": 8, "bm1684x": 1}
#: ``cores=max``: every core of the chip.  The default: on the emulator a kernel's wall time
#: falls to 0.36-0.90x of one core's with 8 (docs/benchmarks/tpu.md, "Multi-core"), and a
#: card runs its cores in parallel.
MAX_CORES = "max"
DEFAULT_CORES = MAX_CORES

#: PPL chip codes, used when the toolchain has no ``deps/chip/chip_map.json``.
FALLBACK_CHIP_CODES: Mapping[str, str] = {"bm1690": "tpub_7_1", "bm1684x": "tpu_6_0"}


def owner() -> str:
    return f"{DIST} {__version__}"


def error_owner(target: str = TARGET_NAME, kernel: str = "") -> Owner:
    """The :class:`tilecore.Owner` of an error about ``target`` (and ``kernel``)."""
    return Owner(DIST, __version__, target=target, kernel=kernel)


def cores_of(chip: str, value: str) -> int:
    """The core count the ``cores`` option's ``value`` means on ``chip`` (``max``: all of them)."""
    return CHIP_CORES.get(chip, 1) if value == MAX_CORES else check_cores(chip, int(value))


def check_cores(chip: str, cores: int) -> int:
    """``cores`` if ``chip`` has that many TPU cores to split a grid over, else a TargetOptionError."""
    most = CHIP_CORES.get(chip, 1)
    if not 1 <= cores <= most:
        why = (
            "its kernels launch through bmlib's tpu_kernel_launch, which runs a kernel on one core"
            if most == 1
            else f"it has {most} TPU cores"
        )
        raise TargetOptionError(
            f"chip {chip} cannot run a kernel on cores={cores}: {why}. "
            f"Use cores=1{f'..{most}' if most > 1 else ''} (e.g. target='{TARGET_NAME}:chip={chip},cores=1').",
            owner=error_owner(),
        )
    return cores
