"""Target declaration: ``cuda`` with an ``arch`` option.

Accepted forms: ``"cuda"`` (arch of the current GPU), ``"cuda:sm_90a"``,
``"cuda:arch=sm_90a"`` and ``{"kind": "cuda", "arch": "sm_90a", ...}``; a dict
may carry further TVM target attributes (``max_num_threads``, ``code``, ...),
which tilecore passes to upstream untouched.

The default arch is the current GPU's, spelled exactly as upstream TileLang
spells it (``sm_<major><minor>``, plus ``a`` from compute capability 9.0 on:
upstream's Hopper code static-asserts ``sm_90a``), so the TVM target, the
generated source and upstream's cubin cache key are the same with and without
tilecore.  Without a usable GPU there is no default: compile-only use names
the arch explicitly, and the error says so.  (Upstream alone would compile for
TVM's fallback ``sm_50`` there, which TileLang's GEMM and copy code does not
support.)
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Mapping

from tilecore import Availability, TargetOption, TargetOptionError, TargetSpec, Upstream
from tilelang_cuda import __version__, setup

NAME = "cuda"
OWNER = f"tilelang-cuda {__version__}"
ARCH_PATTERN = r"sm_\d{2,3}[af]?"
#: Common values, listed in errors; any value matching ARCH_PATTERN is accepted too.
ARCH_EXAMPLES = ("sm_75", "sm_80", "sm_86", "sm_89", "sm_90a", "sm_100a", "sm_120a")
ARCH_DOC = (
    "The SM architecture to compile for, as nvcc spells it: sm_80 (A100), sm_86/sm_89 (RTX 30xx/40xx), "
    "sm_90a (H100/H200), sm_100a (B200), sm_120a (RTX 50xx). Hopper and newer need the 'a' variant, which "
    "TileLang's wgmma/TMA code requires. Default: the current GPU's arch."
)


def arch_for_capability(major: int, minor: int) -> str:
    """The arch upstream TileLang compiles for on a GPU of compute capability ``major.minor``.

    Same rule as ``tilelang.contrib.nvcc.get_target_arch``: ``sm_<major><minor>``
    with the arch-specific ``a`` suffix from 9.0 on.
    """
    return f"sm_{major * 10 + minor}" + ("a" if major >= 9 else "")


def gpu_problem() -> str | None:
    """Why this process cannot use a CUDA GPU, or ``None`` when it can."""
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError as err:
        return f"no NVIDIA driver: libcuda.so.1 cannot be loaded ({err})"
    import torch

    if torch.version.cuda is None:
        return f"torch {torch.__version__} is built without CUDA; install a CUDA build of torch"
    if not torch.cuda.is_available():
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        hint = f" (CUDA_VISIBLE_DEVICES={visible!r})" if visible is not None else ""
        return f"the NVIDIA driver is installed but torch sees no GPU{hint}"
    return None


def detect_arch() -> str:
    """Default ``arch``: the current GPU's.  Raises when no GPU can be used."""
    problem = gpu_problem()
    if problem is not None:
        raise TargetOptionError(
            f"target {NAME!r} ({OWNER}) cannot choose an arch: {problem}. To compile without a GPU, name the arch, "
            f"e.g. target='cuda:sm_90a' or target={{'kind': 'cuda', 'arch': 'sm_90a'}}. Common values: "
            f"{', '.join(ARCH_EXAMPLES)}."
        )
    import torch

    major, minor = torch.cuda.get_device_capability(torch.cuda.current_device())
    return arch_for_capability(major, minor)


def device(options: Mapping[str, str]) -> str:
    """Kernels take tensors on the current CUDA device (``cuda:<index>``)."""
    import torch

    if torch.cuda.is_available():
        return f"cuda:{torch.cuda.current_device()}"
    return "cuda"


def probe() -> Availability:
    """Whether kernels can run here: driver, GPU and nvcc, the first missing one named."""
    problem = gpu_problem()
    if problem is not None:
        return Availability.no(f"{problem}; compile-only use still works with an explicit arch, e.g. target='cuda:sm_90a'")
    located = setup.locate_nvcc()
    if located is None:
        return Availability.no(f"no nvcc found (looked at {setup.describe_search()}); {setup.INSTALL_HINT}")
    import torch

    index = torch.cuda.current_device()
    return Availability.yes(f"{torch.cuda.get_device_name(index)} ({detect_arch()}) as cuda:{index}; nvcc {located.path}")


#: The upstream TVM target kind this backend delegates to (upstream lowers, generates, builds, launches).
UPSTREAM_KIND = "cuda"


def tvm_attrs(options: Mapping[str, str]) -> dict[str, str]:
    """TVM target attributes for resolved options: exactly what upstream builds for the same GPU,
    so the source and the cubin cache key do not change when tilecore is active."""
    return {"arch": options["arch"]}


def doctor_target() -> str:
    """The explicit target ``tilecore doctor`` checks when no arch can be detected (no GPU):
    the newest common arch the installed nvcc supports, e.g. ``"cuda:sm_90a"``."""
    return f"{NAME}:{setup.arch_to_check(ARCH_EXAMPLES)}"


TARGET = TargetSpec(
    name=NAME,
    description="NVIDIA GPUs through upstream TileLang's CUDA backend (tilelang-cuda)",
    options=(TargetOption("arch", ARCH_DOC, choices=ARCH_EXAMPLES, default=detect_arch, pattern=ARCH_PATTERN),),
    device=device,
    probe=probe,
    priority=100,
    upstream=Upstream(UPSTREAM_KIND, attrs=tvm_attrs),
    # "cuda" is also tilelang's own kind: this backend takes it over on purpose (same compiler,
    # plus arch validation, setup and profiling), and lists it in its tilecore.targets metadata.
    replaces_builtin=True,
)
