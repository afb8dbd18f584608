"""Target declaration: ``hip`` (alias ``rocm``) with an ``arch`` option, delegated to upstream.

``"hip:gfx942"``, ``{"kind": "hip", "arch": "gfx942"}`` and ``"hip"`` (the local
GPU's architecture, detected) resolve to the TVM target upstream's own HIP
normalizer builds for that architecture —
``{"kind": "hip", "mcpu": arch, "mtriple": "amdgcn-amd-amdhsa-hcc",
"thread_warp_size": 64 or 32}`` — so lowering, codegen and the cache key are
exactly upstream's.  Upstream's TVM-style inputs (``{"kind": "hip", "mcpu":
...}`` or a ``tvm.target.Target``) keep working and map back to ``arch``.
"""

from __future__ import annotations

import contextlib
import functools
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tilecore import Availability, TargetOption, TargetOptionError, TargetSpec, ToolchainError, Upstream
from tilecore.kit.tools import run_tool
from tilelang_hip import DISTRIBUTION, __version__, runtime, setup

#: Architectures tilelang 0.1.15's HIP backend generates matrix-core code for (MFMA on CDNA, WMMA on RDNA3/4).
#: gfx900/gfx906 (no matrix cores), the pre-release gfx940/gfx941 and RDNA2 (GEMM unsupported upstream) are left out.
KNOWN_ARCHS: dict[str, str] = {
    "gfx908": "CDNA1, Instinct MI100, MFMA",
    "gfx90a": "CDNA2, Instinct MI210/MI250/MI250X, MFMA",
    "gfx942": "CDNA3, Instinct MI300A/MI300X/MI325X, MFMA",
    "gfx950": "CDNA4, Instinct MI350X/MI355X, MFMA",
    "gfx1100": "RDNA3, Radeon RX 7900 XT/XTX, PRO W7900, WMMA",
    "gfx1101": "RDNA3, Radeon RX 7800 XT/7700 XT, WMMA",
    "gfx1102": "RDNA3, Radeon RX 7600, WMMA",
    "gfx1151": "RDNA3.5, Ryzen AI Max 'Strix Halo', WMMA",
    "gfx1200": "RDNA4, Radeon RX 9060 XT, WMMA",
    "gfx1201": "RDNA4, Radeon RX 9070/9070 XT, WMMA",
}

OWNER = f"{DISTRIBUTION} {__version__}"
_ROCMINFO_AGENT = re.compile(r"^\s*Name:\s*(gfx[0-9a-f]+)\s*$", re.MULTILINE)


def known_archs_text() -> str:
    return "; ".join(f"{arch} [{what}]" for arch, what in KNOWN_ARCHS.items())


# -- detection --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Detection:
    """The local AMD GPU's architecture (or ``None``), where it came from, and what was tried."""

    arch: str | None
    source: str
    tried: tuple[str, ...]


def parse_rocminfo(text: str) -> str | None:
    """The first GPU agent's architecture in ``rocminfo`` output (CPU agents have marketing names)."""
    match = _ROCMINFO_AGENT.search(text)
    return match.group(1) if match else None


def _from_torch() -> tuple[str | None, str]:
    build = runtime.torch_build()
    if build.kind != "rocm":
        return None, f"{build.describe()} cannot see AMD GPUs"
    import torch

    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        return None, f"{build.describe()} sees no AMD GPU"
    index = torch.cuda.current_device()
    arch = runtime.device_arch(index)
    if arch is None:
        return None, f"{build.describe()} reports no gcnArchName for cuda:{index}"
    return arch, f"{build.describe()}, device cuda:{index}"


def _from_rocminfo() -> tuple[str | None, str]:
    tool: str | None = None
    with contextlib.suppress(ToolchainError):  # no ROCm root: rocminfo may still be on PATH
        found = setup.locate_rocm().tool("rocminfo")
        tool = str(found) if found is not None else None
    tool = tool or shutil.which("rocminfo")
    if tool is None:
        return None, "rocminfo not found"
    result = run_tool([tool], timeout=60)
    if result.returncode is None:
        return None, f"{tool} failed: {result.failure}"
    arch = parse_rocminfo(result.stdout)
    if arch is None:
        return None, f"{tool} lists no GPU agent"
    return arch, tool


@functools.lru_cache(maxsize=1)
def detect_arch() -> Detection:
    """The local AMD GPU's architecture: a ROCm torch build's current device first, then ``rocminfo``.

    Cached for the process (``detect_arch.cache_clear()`` to probe again).
    """
    tried: list[str] = []
    for source in (_from_torch, _from_rocminfo):
        arch, note = source()
        if arch is not None:
            return Detection(arch, note, tuple(tried))
        tried.append(note)
    return Detection(None, "", tuple(tried))


def default_arch() -> str:
    """The ``arch`` option's default: the detected architecture, which must be a known one."""
    found = detect_arch()
    if found.arch is None:
        raise TargetOptionError(
            f"target 'hip' ({OWNER}) needs option 'arch' and could not detect the local AMD GPU ({'; '.join(found.tried)}). "
            f"Name the architecture to compile for, e.g. target='hip:gfx942' or {{'kind': 'hip', 'arch': 'gfx90a'}}. "
            f"Known architectures: {known_archs_text()}."
        )
    if found.arch not in KNOWN_ARCHS:
        raise TargetOptionError(
            f"target 'hip' ({OWNER}) detected a {found.arch} GPU ({found.source}), which tilelang's HIP backend does not "
            f"generate code for. Name a supported architecture explicitly (target='hip:<arch>'). Known architectures: "
            f"{known_archs_text()}."
        )
    return found.arch


# -- availability -----------------------------------------------------------------------------


def probe() -> Availability:
    """Whether ``hip`` kernels can be compiled and run here: a ROCm torch build, a known GPU, ROCm's hipcc."""
    build = runtime.torch_build()
    reason = runtime.wrong_build_reason(build, "no AMD GPU usable through torch")
    if reason is not None:
        return Availability.no(reason)
    arch, note = _from_torch()
    if arch is None:
        return Availability.no(f"{note}; check rocminfo, the amdgpu driver and HIP_VISIBLE_DEVICES")
    if arch not in KNOWN_ARCHS:
        return Availability.no(f"{note} is {arch}, which tilelang's HIP backend does not support (known: {', '.join(KNOWN_ARCHS)})")
    try:
        install = setup.locate_rocm()
    except ToolchainError as err:
        return Availability.no(str(err))
    return Availability.yes(f"{arch} GPU via {note}; hipcc {install.hipcc}")


# -- the TVM target upstream compiles for ------------------------------------------------------


def tvm_attrs(options: Mapping[str, str]) -> dict[str, Any]:
    """The attributes upstream's ``tilelang.rocm.target`` sets for an architecture (``_target_from_arch``)."""
    from tilecore.upstream import internal

    arch = options["arch"]
    attrs: dict[str, Any] = {"mcpu": arch, "mtriple": internal("tilelang.rocm.target:ROCM_MTRIPLE")}
    warp = internal("tilelang.rocm.target:rocm_warp_size_for_arch")(arch)
    if warp is not None:
        attrs["thread_warp_size"] = warp
    return attrs


def options_from_tvm_attrs(attrs: Mapping[str, Any]) -> dict[str, str]:
    """Inverse of :func:`tvm_attrs`: ``mcpu`` (with feature flags removed) is ``arch``."""
    arch = runtime.normalize_arch(attrs["mcpu"]) if "mcpu" in attrs else None
    return {"arch": arch} if arch is not None else {}


#: The architecture ``tilecore doctor`` checks the toolchain with when no GPU can be detected.
DOCTOR_ARCH = "gfx942"


def doctor_target() -> str:
    """The explicit target ``tilecore doctor`` checks when no AMD GPU tells it an arch."""
    return f"hip:{DOCTOR_ARCH}"


TARGET = TargetSpec(
    name="hip",
    description=f"AMD GPUs through ROCm/HIP, compiled by upstream tilelang's HIP backend ({DISTRIBUTION})",
    aliases=("rocm",),
    options=(
        TargetOption(
            "arch",
            "The AMD GPU architecture (gfx name) to compile for; by default the local GPU's, detected.",
            choices=tuple(KNOWN_ARCHS),
            default=default_arch,
        ),
    ),
    # A ROCm build of torch names AMD GPUs "cuda:<i>"; runtime.require_device refuses any other build.
    device="cuda",
    probe=probe,
    # Only one of hip/cuda can be available at once (the probe needs a ROCm torch build, CUDA's a CUDA build).
    priority=100,
    upstream=Upstream("hip", attrs=tvm_attrs, options_from_attrs=options_from_tvm_attrs),
    # "hip" and "rocm" are also tilelang's own kinds: taken over on purpose (same compiler, plus
    # arch checks, setup and profiling); both are listed in the tilecore.targets metadata.
    replaces_builtin=True,
)
