"""Runtime: upstream's adapters launch the kernels; this module decides *where* tensors live.

What upstream owns (tilelang 0.1.15, ``tilelang/rocm/execution_backend.py``):
the execution backends of TVM kind ``hip`` — ``tvm_ffi`` (the default: the
HSACO code object that hipcc produced is loaded through TVM's ROCm runtime
module) and ``cython`` — and the JIT adapters that call a kernel with torch
tensors.  tilecore does not wrap them: a ``hip`` kernel is called exactly as
it is without tilecore, and this package implements no adapter hook.

What is here is the torch side.  A ROCm build of torch exposes AMD GPUs
through ``torch.cuda`` and names them ``cuda:<i>``; a CUDA build uses the same
names for NVIDIA GPUs.  So before tilelang-hip puts a tensor on ``cuda:<i>``
(profiler inputs) or times a kernel there, it checks that torch is a ROCm
build, that a device is visible, and that the device's architecture is the
one the kernel was compiled for.  Anything else is refused with the reason
and the fix instead of silently using another vendor's device.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tilecore import ResolvedTarget, TilecoreError

if TYPE_CHECKING:
    import torch

ROCM_TORCH_INSTALL = "https://pytorch.org/get-started/locally/ (choose 'ROCm')"


class RocmDeviceError(TilecoreError):
    """No suitable AMD GPU for a ``hip`` kernel: wrong torch build, no device, or another architecture."""


@dataclass(frozen=True, slots=True)
class TorchBuild:
    """Which GPU vendor the installed torch was built for (``torch.version``)."""

    version: str
    hip: str | None
    cuda: str | None

    @property
    def kind(self) -> str:
        """``"rocm"``, ``"cuda"`` (NVIDIA) or ``"cpu"``."""
        if self.hip is not None:
            return "rocm"
        return "cuda" if self.cuda is not None else "cpu"

    def describe(self) -> str:
        if self.kind == "rocm":
            return f"torch {self.version} (ROCm build, HIP {self.hip})"
        if self.kind == "cuda":
            return f"torch {self.version} (CUDA build for NVIDIA GPUs, CUDA {self.cuda})"
        return f"torch {self.version} (CPU-only build)"


def torch_build() -> TorchBuild:
    """The installed torch's build, read from ``torch/version.py`` without importing torch (~1 s),
    so ``tilecore list`` on a machine without a ROCm build stays cheap."""
    import sys

    module = sys.modules.get("torch.version")
    if module is None:
        import importlib.util

        spec = importlib.util.find_spec("torch")
        locations = list(spec.submodule_search_locations or ()) if spec is not None else []
        if not locations:
            return TorchBuild("not installed", None, None)
        version_spec = importlib.util.spec_from_file_location("_tilelang_hip_torch_version", f"{locations[0]}/version.py")
        if version_spec is None or version_spec.loader is None:
            import torch

            module = torch.version
        else:
            module = importlib.util.module_from_spec(version_spec)
            version_spec.loader.exec_module(module)
    return TorchBuild(str(getattr(module, "__version__", "unknown")), getattr(module, "hip", None), getattr(module, "cuda", None))


def normalize_arch(name: object) -> str | None:
    """``"gfx90a:sramecc+:xnack-"`` -> ``"gfx90a"``; ``None`` for anything that is not a gfx name."""
    if name is None:
        return None
    arch = str(name).strip().split(":", maxsplit=1)[0].lower()
    return arch if arch.startswith("gfx") and len(arch) > 3 else None


def build_problem(build: TorchBuild) -> str | None:
    """Why ``build`` cannot run HIP kernels (``None`` for a ROCm build)."""
    if build.kind == "rocm":
        return None
    if build.kind == "cuda":
        return (
            f"{build.describe()} is installed; its 'cuda' devices are NVIDIA GPUs, which cannot run AMD HIP "
            f"code objects, so tilelang-hip refuses to put tensors or launch work there. To run on an AMD GPU, install "
            f"a ROCm build of torch ({ROCM_TORCH_INSTALL}) on a machine with one; to run on this NVIDIA GPU, compile "
            f"for target='cuda' instead."
        )
    return f"{build.describe()} is installed, and HIP kernels need a ROCm build of torch. Install one ({ROCM_TORCH_INSTALL}) on a machine with an AMD GPU."


def wrong_build_reason(build: TorchBuild, what: str) -> str | None:
    """:func:`build_problem` after ``what``, which names the caller."""
    problem = build_problem(build)
    return None if problem is None else f"{what}: {problem}"


def device_arch(index: int) -> str | None:
    """The gfx architecture of ROCm torch device ``index`` (``gcnArchName`` without feature flags)."""
    import torch

    return normalize_arch(getattr(torch.cuda.get_device_properties(index), "gcnArchName", None))


def require_device(target: ResolvedTarget) -> torch.device:
    """The torch device for ``target``'s kernels: ``cuda:<current>`` of a ROCm build, checked.

    Raises :class:`RocmDeviceError` naming the cause and the fix when torch is
    not a ROCm build, no AMD GPU is visible, or the current device is of
    another architecture than ``target['arch']``.
    """
    import torch

    owner = target.error_owner
    problem = build_problem(torch_build())
    if problem is not None:
        raise RocmDeviceError(problem, owner=owner)
    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        raise RocmDeviceError(
            f"{torch_build().describe()} sees no AMD GPU. Check that `rocminfo` lists one, that the amdgpu "
            f"driver is loaded, that this user may open /dev/kfd and /dev/dri (groups 'render' and 'video'), and "
            f"that HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES do not hide it.",
            owner=owner,
        )
    index = torch.cuda.current_device()
    arch = device_arch(index)
    wanted = target["arch"]
    if arch != wanted:
        name = torch.cuda.get_device_name(index)
        raise RocmDeviceError(
            f"the current device cuda:{index} ({name}) is {arch}, but the kernel is compiled for {wanted}, "
            f"whose code object does not load there. Compile for target='hip:{arch}' (or target='hip' to use the "
            f"detected architecture), or make a {wanted} device current (torch.cuda.set_device, HIP_VISIBLE_DEVICES).",
            owner=owner,
        )
    return torch.device("cuda", index)
