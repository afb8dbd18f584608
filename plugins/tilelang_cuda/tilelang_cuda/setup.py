"""Environment/toolchain setup: find nvcc and its version.

nvcc is looked for where upstream TileLang looks when it is imported:
``$CUDA_HOME``/``$CUDA_PATH``, ``nvcc`` on ``PATH``, the ``nvidia-cuda-nvcc``
wheel (13.0 and newer ship nvcc itself), then ``/usr/local/cuda``.  Upstream
runs the compiler, so the :class:`~tilecore.Toolchain` reports the nvcc it will
run (``tilelang.contrib.nvcc.get_nvcc_compiler()``) and notes any disagreement
with this search.  Its fingerprint, ``nvcc==<version>``, salts tilecore's
compile-cache key.  No GPU is needed: compile-only use works wherever nvcc is.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from tilecore import Owner, Toolchain, ToolchainError
from tilecore.kit.tools import run_tool

INSTALL_HINT = (
    "install the CUDA toolkit (https://developer.nvidia.com/cuda-downloads) or `pip install nvidia-cuda-nvcc` (13.0 or newer), "
    "or point CUDA_HOME at an existing toolkit"
)
_VERSION = re.compile(r"release\s+[\d.]+,\s+V([\d.]+)")


@dataclass(frozen=True, slots=True)
class NvccLocation:
    path: Path
    found_by: str


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _wheel_nvcc() -> Path | None:
    try:
        files = importlib.metadata.files("nvidia-cuda-nvcc") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in files:
        if file.name == "nvcc":
            return Path(str(file.locate()))
    return None


def _candidates() -> list[NvccLocation]:
    found: list[NvccLocation] = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        home = os.environ.get(var)
        if home:
            found.append(NvccLocation(Path(home) / "bin" / "nvcc", f"${var}"))
    on_path = shutil.which("nvcc")
    if on_path:
        found.append(NvccLocation(Path(on_path), "PATH"))
    wheel = _wheel_nvcc()
    if wheel is not None:
        found.append(NvccLocation(wheel, "the nvidia-cuda-nvcc wheel"))
    found.append(NvccLocation(Path("/usr/local/cuda/bin/nvcc"), "/usr/local/cuda"))
    return found


def describe_search() -> str:
    """Where :func:`locate_nvcc` looks, for error messages."""
    return "$CUDA_HOME/bin, $CUDA_PATH/bin, PATH, the nvidia-cuda-nvcc wheel, /usr/local/cuda/bin"


def locate_nvcc() -> NvccLocation | None:
    """The first nvcc in search order, without running it (cheap enough for probes)."""
    return next((c for c in _candidates() if _executable(c.path)), None)


def tilelang_cuda_home() -> str | None:
    """The CUDA_HOME upstream TileLang resolved when it was imported (not necessarily ``$CUDA_HOME``)."""
    from tilecore.upstream import internal

    home = internal("tilelang.env:CUDA_HOME")
    return str(home) if home else None


def upstream_nvcc() -> Path | None:
    """The nvcc upstream TileLang will run (its CUDA_HOME is fixed when tilelang is imported)."""
    home = tilelang_cuda_home()
    if not home:
        return None
    path = Path(home) / "bin" / "nvcc"
    return path if _executable(path) else None


def nvcc_version(nvcc: Path, owner: Owner) -> str:
    """``13.0.88`` from ``nvcc --version``."""
    result = run_tool([nvcc, "--version"], timeout=60)
    match = _VERSION.search(result.stdout)
    if result.returncode is None:
        raise ToolchainError(f"running {nvcc} --version failed ({result.failure}); {INSTALL_HINT}", owner=owner)
    if result.returncode != 0 or match is None:
        raise ToolchainError(
            f"{nvcc} --version exited with {result.returncode} and printed no version "
            f"({(result.stdout + result.stderr).strip()[-300:]!r}); {INSTALL_HINT}",
            owner=owner,
        )
    return match.group(1)


def supported_archs(nvcc: Path) -> set[str]:
    """``sm_XX`` numbers ``nvcc --list-gpu-arch`` accepts (empty when it cannot say)."""
    output = run_tool([nvcc, "--list-gpu-arch"], timeout=60).stdout
    return {f"sm_{n}" for n in re.findall(r"compute_(\d+)", output, flags=re.ASCII)}


def arch_to_check(candidates: tuple[str, ...]) -> str:
    """The arch ``tilecore doctor`` checks the toolchain with when no GPU tells it one: the newest
    of ``candidates`` the nvcc found here supports (the newest candidate when there is no nvcc,
    so setup still runs and says what is missing)."""
    located = locate_nvcc()
    supported = supported_archs(located.path) if located is not None else set()
    usable = [arch for arch in candidates if arch.rstrip("af") in supported]
    return (usable or list(candidates))[-1]


def find_nvcc(owner: Owner) -> Toolchain:
    """The nvcc upstream compiles with, its version and how it was found (errors belong to ``owner``)."""
    located = locate_nvcc()
    compiler = upstream_nvcc()
    if compiler is None:
        if located is None:
            raise ToolchainError(f"needs nvcc and found none (looked at {describe_search()}); {INSTALL_HINT}.", owner=owner)
        cuda_home = tilelang_cuda_home()
        home = f"CUDA_HOME={cuda_home}, which has no bin/nvcc" if cuda_home else "no CUDA_HOME"
        raise ToolchainError(
            f"upstream TileLang compiles with $CUDA_HOME/bin/nvcc, and when it was imported it resolved {home}; "
            f"nvcc exists at {located.path} (found by {located.found_by}). Set CUDA_HOME={located.path.parent.parent} "
            "(or unset a wrong one) before importing tilelang.",
            owner=owner,
        )
    notes: list[str] = []
    if located is not None and os.path.realpath(located.path) == os.path.realpath(compiler):
        found_by = located.found_by
    else:
        found_by = "tilelang's CUDA_HOME"
        if located is not None:
            notes.append(f"nvcc search order finds {located.path} ({located.found_by}), but tilelang compiles with {compiler}")
    version = nvcc_version(compiler, owner)
    return Toolchain(
        name="nvcc",
        version=version,
        location=str(compiler),
        found_by=found_by,
        fingerprint=f"nvcc=={version}",
        notes=tuple(notes),
    )


# -- setup notes: what the toolchain report says about the arch and upstream's runtimes -----------

_ARCH = re.compile(r"sm_(\d+)([af]?)")


def variant_note(arch: str) -> str | None:
    """A warning for Hopper-or-newer archs given without the ``a``/``f`` variant, else ``None``.

    For sm_90 and newer upstream's pipeline emits TMA bulk copies, ``wgmma`` and
    warp-group register reallocation, and the emitted code static-asserts the
    arch-specific ``sm_90a`` (``sm_100a``, ...) feature set, so plain ``sm_90``
    fails in nvcc for such kernels; this says so at setup time instead.
    """
    match = _ARCH.fullmatch(arch)
    if match is None or match.group(2) or int(match.group(1)) < 90:
        return None
    return (
        f"arch {arch} has no arch-specific variant: kernels that TileLang lowers to wgmma/TMA (GEMMs, bulk copies) "
        f"static-assert {arch}a and fail in nvcc; use arch={arch}a unless the kernels avoid those instructions"
    )


#: What each of upstream's CUDA execution backends needs beyond tilelang itself.
REQUIREMENTS = {
    "tvm_ffi": "nothing beyond tilelang",
    "cython": "libcuda (the NVIDIA driver library) at build time",
    "nvrtc": "cuda-python (pip install cuda-python)",
}


@dataclass(frozen=True, slots=True)
class ExecutionBackend:
    """One of upstream's execution backends for a CUDA target (it owns the adapters and the call path)."""

    name: str
    available: bool
    default: bool

    def describe(self) -> str:
        state = "default" if self.default else ("available" if self.available else "unavailable")
        return f"{self.name} ({state}; needs {REQUIREMENTS.get(self.name, 'see upstream')})"


def execution_backends(arch: str) -> tuple[ExecutionBackend, ...]:
    """Upstream's CUDA execution backends for ``arch``, in upstream's order of preference."""
    from tilelang.backend import get_backend
    from tvm.target import Target

    module = get_backend("cuda")
    target = Target({"kind": "cuda", "arch": arch})
    available = set(module.allowed_execution_backends(target, include_unavailable=False))
    default = module.resolve_execution_backend("auto", target).name if available else None
    return tuple(ExecutionBackend(name, name in available, name == default) for name in module.allowed_execution_backends(target))
