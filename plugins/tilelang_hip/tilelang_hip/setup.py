"""Environment/toolchain setup: find ROCm (hipcc) and check it can build tilelang's HIP.

Upstream compiles through ``tilelang.contrib.hipcc.compile_hip``, which runs
the first ``hipcc`` it finds (``$ROCM_PATH``, ``PATH``, ``/opt/rocm``).  This
module finds the same installation, reports its version, and refuses it up
front — with the reason and the fix — in the two cases measured to fail later
with a confusing compiler message:

* ``hipcc`` would compile for NVIDIA: before ROCm 6, hipcc picks the NVIDIA
  platform when ``HIP_PLATFORM`` is unset and ``nvcc`` is on ``PATH`` (Debian
  12's hipcc 5.2.3 then fails with ``nvcc fatal: Unknown option
  '-gline-tables-only'``);
* the installation lacks headers that tilelang's ``tl_templates/hip`` include
  unconditionally (``hip/hip_bf16.h``, ``hip/amd_detail/amd_hip_fp8.h``,
  ``rocwmma/rocwmma.hpp``), as Debian 12's ROCm 5.2.3 does.

See docs/backends/hip.md for the experiment behind both.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tilecore import Owner, Toolchain, ToolchainError
from tilecore.kit.tools import run_tool
from tilelang_hip import DISTRIBUTION, __version__

DEFAULT_ROCM_PATH = Path("/opt/rocm")

#: Headers tilelang 0.1.15's ``tl_templates/hip/common.h`` and ``hip_fp8.h`` include (relative to an include dir).
TEMPLATE_HEADERS: tuple[str, ...] = ("hip/hip_runtime.h", "hip/hip_bf16.h", "hip/amd_detail/amd_hip_fp8.h", "rocwmma/rocwmma.hpp")

_HIP_VERSION_RE = re.compile(r"#define\s+HIP_VERSION_(MAJOR|MINOR|PATCH)\s+(\d+)")


@dataclass(frozen=True, slots=True)
class RocmInstall:
    """A ROCm installation: its root, its hipcc and how it was found."""

    root: Path
    hipcc: Path
    found_by: str

    @property
    def include_dir(self) -> Path:
        return self.root / "include"

    def tool(self, name: str) -> Path | None:
        path = self.root / "bin" / name
        return path if path.exists() else None


OWNER = Owner(DISTRIBUTION, __version__, target="hip")


def locate_rocm(environ: Mapping[str, str] | None = None) -> RocmInstall:
    """Find ROCm as upstream does: ``$ROCM_PATH``, then ``hipcc`` on ``PATH``, then ``/opt/rocm``."""
    environ = os.environ if environ is None else environ
    explicit = environ.get("ROCM_PATH")
    if explicit:
        root = Path(explicit).expanduser()
        hipcc = root / "bin" / "hipcc"
        if not hipcc.exists():
            raise ToolchainError(
                f"ROCM_PATH={explicit} has no bin/hipcc. Point ROCM_PATH at a ROCm installation "
                f"(the directory holding bin/hipcc, usually /opt/rocm) or unset it to search PATH.",
                owner=OWNER,
            )
        return RocmInstall(root, hipcc, "$ROCM_PATH")
    on_path = shutil.which("hipcc", path=environ.get("PATH"))
    if on_path is not None:
        hipcc = Path(on_path).resolve()
        return RocmInstall(hipcc.parent.parent, hipcc, "PATH")
    if (DEFAULT_ROCM_PATH / "bin" / "hipcc").exists():
        return RocmInstall(DEFAULT_ROCM_PATH, DEFAULT_ROCM_PATH / "bin" / "hipcc", str(DEFAULT_ROCM_PATH))
    raise ToolchainError(
        f"no ROCm installation found (no $ROCM_PATH, no hipcc on PATH, no {DEFAULT_ROCM_PATH}/bin/hipcc). "
        f"Compiling HIP kernels needs ROCm's hipcc; generating HIP source alone needs no ROCm (see "
        f"tilelang_hip.codegen.generate_source).",
        fix="install ROCm >= 6.3 (https://rocm.docs.amd.com, 'Install') and set ROCM_PATH, or put hipcc on PATH.",
        owner=OWNER,
    )


def rocm_version(install: RocmInstall) -> str:
    """The ROCm release (``<root>/.info/version``), else the HIP version from ``hip/hip_version.h``."""
    info = install.root / ".info" / "version"
    if info.is_file():
        text = info.read_text().strip()
        if text:
            return text
    header = install.include_dir / "hip" / "hip_version.h"
    if header.is_file():
        parts = dict(_HIP_VERSION_RE.findall(header.read_text()))
        if {"MAJOR", "MINOR", "PATCH"} <= parts.keys():
            return f"HIP {parts['MAJOR']}.{parts['MINOR']}.{parts['PATCH']}"
    return "unknown"


def missing_headers(install: RocmInstall, environ: Mapping[str, str] | None = None) -> list[str]:
    """:data:`TEMPLATE_HEADERS` found neither in the ROCm include dir nor in ``CPATH``/``CPLUS_INCLUDE_PATH``."""
    environ = os.environ if environ is None else environ
    dirs = [install.include_dir]
    for var in ("CPATH", "CPLUS_INCLUDE_PATH"):
        dirs += [Path(p) for p in environ.get(var, "").split(os.pathsep) if p]
    return [h for h in TEMPLATE_HEADERS if not any((d / h).is_file() for d in dirs)]


def hip_platform(install: RocmInstall, environ: Mapping[str, str] | None = None) -> str:
    """The platform hipcc compiles for (``amd`` or ``nvidia``), as ``hipconfig --platform`` reports it."""
    environ = os.environ if environ is None else environ
    if "HIP_PLATFORM" in environ:  # even when empty: hipcc then stops with "unknown HIP_PLATFORM = ''"
        return environ["HIP_PLATFORM"].strip().lower()
    hipconfig = install.tool("hipconfig")
    if hipconfig is None:
        return "amd"  # nothing to ask; upstream runs hipcc as is, and a wrong platform shows in its first error
    lines = run_tool([hipconfig, "--platform"], env=environ, timeout=60).stdout.strip().splitlines()
    return lines[-1].strip().lower() if lines else "unknown"


def find_toolchain(environ: Mapping[str, str] | None = None) -> Toolchain:
    """The ROCm toolchain upstream's hipcc callback will use, checked; raises :class:`ToolchainError`."""
    install = locate_rocm(environ)
    version = rocm_version(install)
    platform = hip_platform(install, environ)
    if platform != "amd":
        raise ToolchainError(
            f"{install.hipcc} (ROCm {version}) would compile for HIP_PLATFORM={platform or repr(platform)}, not "
            f"for AMD GPUs (hipcc before ROCm 6 picks NVIDIA when HIP_PLATFORM is unset and nvcc is on PATH). Set "
            f"HIP_PLATFORM=amd in the environment of the process that compiles.",
            owner=OWNER,
        )
    missing = missing_headers(install, environ)
    if missing:
        raise ToolchainError(
            f"ROCm {version} at {install.root} lacks {', '.join(missing)}, which tilelang's HIP templates "
            f"(tl_templates/hip/common.h, hip_fp8.h) include, so no generated kernel can compile with it. Install "
            f"ROCm >= 6.3 with rocWMMA (https://rocm.docs.amd.com) and point ROCM_PATH at it. Generating HIP source "
            f"needs no ROCm: see tilelang_hip.codegen.generate_source.",
            owner=OWNER,
        )
    return Toolchain(
        name="rocm",
        version=version,
        location=str(install.hipcc),
        found_by=install.found_by,
        fingerprint=f"rocm=={version};hipcc={install.hipcc}",
        notes=(f"ROCm root {install.root}", f"HIP_PLATFORM={platform}"),
    )


# -- the upstream backend this package delegates to ------------------------------------------------

#: tilelang's backend module that owns TVM kind ``hip`` (pipeline ``ROCMPassPipelineBody``, HIP
#: codegen, hipcc callback, execution adapters); tilecore calls no lower/codegen/adapter hook for it.
UPSTREAM_BACKEND = "rocm"
TVM_KIND = "hip"


def upstream_backend() -> Any:
    """tilelang's registered ``BackendModule`` for TVM kind ``hip``; a clear error if a tilelang
    release moves or renames it (instead of "No backend registered for target kind" at compile)."""
    from tilelang.backend import list_backends

    from tilecore.upstream import TILELANG_REQUIREMENT

    backends = list_backends()
    found = backends.get(UPSTREAM_BACKEND)
    if found is None or TVM_KIND not in found.target_kinds:
        import tilelang

        raise ToolchainError(
            f"delegates to tilelang's '{UPSTREAM_BACKEND}' backend for TVM kind '{TVM_KIND}', which tilelang "
            f"{tilelang.__version__} does not register (registered: {', '.join(sorted(backends))}). "
            f"Install a tilelang release this package supports (pip install 'tilelang{TILELANG_REQUIREMENT}').",
            owner=OWNER,
        )
    return found
