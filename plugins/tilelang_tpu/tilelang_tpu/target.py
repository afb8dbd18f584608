"""Target declaration: ``tpu`` with a chip (positional) and an execution mode.

``tpu`` / ``tpu:bm1690`` / ``tpu:bm1684x`` / ``{"kind": "tpu", "chip": ..., "mode": ...}``.

The mode says where kernels run:

``pcie``
    a SophGo card driven by SophGo's runtime; tensors live on ``tpu:0``
    (SophGo's ``torch_tpu``).
``cmodel``
    SophGo's emulator (the "cmodel") on the host CPU; tensors are host tensors
    that the adapter copies into and out of emulated device memory.

The default mode is detected: ``pcie`` when a card and SophGo's runtime library
are present, else ``cmodel``.  ``TILELANG_TPU_MODE`` overrides the detection and
an explicit ``mode=`` option overrides both.
"""

from __future__ import annotations

import ctypes.util
import functools
import glob
import os
from collections.abc import Mapping
from pathlib import Path

from tilecore import Availability, TargetOption, TargetOptionError, TargetSpec, ToolchainError
from tilelang_tpu import __version__
from tilelang_tpu.chips import (
    CHIP_CORES,
    CHIPS,
    DEFAULT_CHIP,
    DEFAULT_CORES,
    DIST,
    FALLBACK_CHIP_CODES,
    MAX_CORES,
    TARGET_NAME,
    check_cores,
    cores_of,
    error_owner,
    owner,
)

__all__ = [
    "CHIPS",
    "CHIP_CORES",
    "DEFAULT_CHIP",
    "DEFAULT_CORES",
    "DIST",
    "FALLBACK_CHIP_CODES",
    "MAX_CORES",
    "MODES",
    "MODE_ENV",
    "PCIE_UNSUPPORTED",
    "TARGET",
    "TARGET_NAME",
    "card_runtime",
    "check_cores",
    "cores_of",
    "default_mode",
    "device_of",
    "owner",
    "pcie_unsupported",
    "probe",
]

MODES = ("pcie", "cmodel")
MODE_ENV = "TILELANG_TPU_MODE"

#: Device nodes of SophGo's PCIe driver (BM1684X: bm-sophon<N>; BM1690/tpuv7: bmdev-ctl).
_CARD_NODES = ("/dev/bm-sophon*", "/dev/bmdev-ctl")
#: Where SophGo's installers put the host runtime libraries of a card.
_CARD_RUNTIMES = (
    "/opt/sophon/libsophon-current/lib/libbmlib.so",
    "/opt/tpuv7/tpuv7-current/lib/libtpuv7_rt.so",
)


@functools.cache
def card_runtime() -> tuple[tuple[str, ...], str | None]:
    """(device nodes found, path or soname of a SophGo host runtime library found).

    Probed once per process (``card_runtime.cache_clear()`` to probe again): the library search
    (``ctypes.util.find_library``) runs ``ldconfig``/``gcc``/``ld`` subprocesses, ~28 ms a call,
    and the mode default is chosen on every target resolution -- several times per compile, a
    cache hit's included (docs/benchmarks/cache.md, "what a hit costs").  A card or a runtime
    installed while the process runs is seen by the next process.
    """
    nodes = tuple(sorted(n for pattern in _CARD_NODES for n in glob.glob(pattern)))
    library = next((p for p in _CARD_RUNTIMES if Path(p).is_file()), None)
    if library is None:
        library = ctypes.util.find_library("bmlib") or ctypes.util.find_library("tpuv7_rt")
    return nodes, library


def default_mode() -> str:
    """``$TILELANG_TPU_MODE`` if set, else ``pcie`` with a card and its runtime, else ``cmodel``."""
    explicit = os.environ.get(MODE_ENV, "").strip().lower()
    if explicit:
        if explicit not in MODES:
            raise TargetOptionError(
                f"{MODE_ENV}={os.environ[MODE_ENV]!r} is not a valid mode. "
                f"Valid modes: {', '.join(MODES)}. Unset it to detect the mode (pcie with a SophGo card, else cmodel).",
                owner=error_owner(),
            )
        return explicit
    nodes, library = card_runtime()
    return "pcie" if nodes and library else "cmodel"


def device_of(options: Mapping[str, str]) -> str:
    """Torch device of the target's tensors: the card, or host memory for the emulator."""
    return "tpu:0" if options.get("mode") == "pcie" else "cpu"


def probe() -> Availability:
    """Whether kernels for ``tpu`` with default options can be built and run here (never raises)."""
    from tilelang_tpu import setup

    try:
        mode = default_mode()
    except TargetOptionError as err:
        return Availability.no(str(err))
    if mode == "pcie":
        return Availability.no(PCIE_UNSUPPORTED)
    try:
        toolchain = setup.find_toolchain(source_scripts=False)  # listing never runs an SDK's envsetup.sh
    except ToolchainError as err:
        return Availability.no(str(err))
    chips = [c for c in CHIPS if not toolchain.missing_libraries(c)]
    if not chips:
        return Availability.no(f"toolchain {toolchain.version} ({toolchain.found_by}) has no emulator libraries for {', '.join(CHIPS)}")
    return Availability.yes(
        f"cmodel: SophGo emulator for {', '.join(chips)} on the host CPU; PPL toolchain {toolchain.version} found by {toolchain.found_by}"
    )


PCIE_UNSUPPORTED = (
    f"target {TARGET_NAME!r} ({DIST} {__version__}): mode=pcie (a SophGo card) is detected but not implemented in this release: "
    "device kernels for a card must be cross-compiled with SophGo's RISC-V toolchain and linked with libfirmware_core.a, "
    "neither of which the tpu_mlir wheel ships. Use the emulator: target='tpu:mode=cmodel' or TILELANG_TPU_MODE=cmodel."
)


def pcie_unsupported() -> ToolchainError:
    """The refusal of mode=pcie, owned by the tpu target (its text names it already)."""
    error = ToolchainError(PCIE_UNSUPPORTED)
    error.owner = error_owner()
    return error


TARGET = TargetSpec(
    name=TARGET_NAME,
    description=f"SophGo TPU (BM1690, BM1684X) via PPL; on a card (pcie) or SophGo's emulator (cmodel) ({DIST})",
    aliases=("sophgo", "sophgo-tpu"),
    options=(
        TargetOption("chip", "SophGo chip to compile for.", choices=CHIPS, default=DEFAULT_CHIP),
        TargetOption(
            "mode",
            f"Where kernels run: pcie (a card) or cmodel (SophGo's emulator); default detected, overridable by ${MODE_ENV}.",
            choices=MODES,
            default=default_mode,
        ),
        TargetOption(
            "cores",
            f"TPU cores the T.Kernel grid is split over: {MAX_CORES} (every core of the chip) or a count (BM1690: 1..8; "
            "BM1684X: 1). Blocks that T.atomic_add into one region stay on one core.",
            pattern=rf"[1-9][0-9]?|{MAX_CORES}",
            default=DEFAULT_CORES,
        ),
    ),
    device=device_of,
    probe=probe,
    priority=-10,  # an emulator is slower than any real device target="auto" may find
)
