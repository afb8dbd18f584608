"""Finding ROCm: where, which version, and the refusals that replace confusing compiler errors.

The ROCm trees built under ``tmp_path`` are plain directories with the files
this module reads (``bin/hipcc``, headers); they test the search order and
the header check.  ``test_real_rocm_on_this_machine`` runs against whatever
ROCm is installed (Debian 12's ``hipcc`` 5.2.3 in the experiment of
docs/backends/hip.md) and is skipped without one.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from tilelang_hip import setup

import tilecore
from tilecore import ToolchainError

HIP_VERSION_H = """\
#ifndef HIP_VERSION_H
#define HIP_VERSION_H
#define HIP_VERSION_MAJOR 6
#define HIP_VERSION_MINOR 3
#define HIP_VERSION_PATCH 42131
#endif
"""


def rocm_tree(root: Path, headers: tuple[str, ...] = setup.TEMPLATE_HEADERS, release: str | None = None) -> Path:
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "hipcc").write_text("#!/bin/sh\nexit 1\n")
    (root / "bin" / "hipcc").chmod(0o755)
    for header in (*headers, "hip/hip_version.h"):
        path = root / "include" / header
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(HIP_VERSION_H if header.endswith("hip_version.h") else "#pragma once\n")
    if release is not None:
        (root / ".info").mkdir()
        (root / ".info" / "version").write_text(release + "\n")
    return root


def env(**values: str) -> dict[str, str]:
    return {"PATH": os.defpath, **values}


def test_rocm_path_without_hipcc_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ToolchainError, match=r"ROCM_PATH=.* has no bin/hipcc"):
        setup.locate_rocm(env(ROCM_PATH=str(tmp_path)))


def test_rocm_path_wins_and_reports_the_release(tmp_path: Path) -> None:
    root = rocm_tree(tmp_path / "rocm", release="6.3.1-48")
    toolchain = setup.find_toolchain(env(ROCM_PATH=str(root), HIP_PLATFORM="amd"))
    assert (toolchain.name, toolchain.version, toolchain.found_by) == ("rocm", "6.3.1-48", "$ROCM_PATH")
    assert toolchain.location == str(root / "bin" / "hipcc")
    assert "6.3.1-48" in toolchain.fingerprint


def test_hipcc_on_path_and_version_from_the_header(tmp_path: Path) -> None:
    root = rocm_tree(tmp_path / "usr")
    install = setup.locate_rocm(env(PATH=str(root / "bin")))
    assert (install.root, install.found_by) == (root, "PATH")
    assert setup.rocm_version(install) == "HIP 6.3.42131"


def test_missing_template_headers_are_named(tmp_path: Path) -> None:
    root = rocm_tree(tmp_path / "old", headers=("hip/hip_runtime.h",))
    with pytest.raises(ToolchainError) as info:
        setup.find_toolchain(env(ROCM_PATH=str(root), HIP_PLATFORM="amd"))
    text = str(info.value)
    assert "hip/hip_bf16.h, hip/amd_detail/amd_hip_fp8.h, rocwmma/rocwmma.hpp" in text
    assert "tilelang-hip" in text and "ROCm >= 6.3" in text


def test_headers_on_cpath_count(tmp_path: Path) -> None:
    root = rocm_tree(tmp_path / "rocm", headers=("hip/hip_runtime.h", "hip/hip_bf16.h", "hip/amd_detail/amd_hip_fp8.h"))
    extra = tmp_path / "rocwmma-include"
    (extra / "rocwmma").mkdir(parents=True)
    (extra / "rocwmma" / "rocwmma.hpp").write_text("#pragma once\n")
    install = setup.locate_rocm(env(ROCM_PATH=str(root)))
    assert setup.missing_headers(install, env()) == ["rocwmma/rocwmma.hpp"]
    assert setup.missing_headers(install, env(CPATH=str(extra))) == []


@pytest.mark.parametrize(("value", "shown"), [("nvidia", "nvidia"), ("", "''")])
def test_platform_other_than_amd_is_refused(tmp_path: Path, value: str, shown: str) -> None:
    root = rocm_tree(tmp_path / "rocm")
    with pytest.raises(ToolchainError, match=rf"HIP_PLATFORM={shown}, not for AMD GPUs.*Set HIP_PLATFORM=amd"):
        setup.find_toolchain(env(ROCM_PATH=str(root), HIP_PLATFORM=value))


def test_no_rocm_anywhere(tmp_path: Path) -> None:
    if (setup.DEFAULT_ROCM_PATH / "bin" / "hipcc").exists():
        pytest.skip(f"{setup.DEFAULT_ROCM_PATH} holds a ROCm installation")
    with pytest.raises(ToolchainError) as info:
        setup.locate_rocm(env(PATH=str(tmp_path)))
    assert "no ROCm installation found" in str(info.value) and "install ROCm >= 6.3" in str(info.value)


def test_setup_hook_goes_through_tilecore() -> None:
    """``tilecore.setup_target`` runs this package's hook: a Toolchain, or the ToolchainError saying why not."""
    try:
        install = setup.locate_rocm()
    except ToolchainError as err:
        with pytest.raises(ToolchainError, match="no ROCm installation found"):
            tilecore.setup_target("hip:gfx90a")
        assert "tilelang-hip" in str(err)
        return
    try:
        expected = setup.find_toolchain()
    except ToolchainError as err:
        with pytest.raises(ToolchainError, match=re.escape(str(install.root))):
            tilecore.setup_target("hip:gfx90a")
        assert "tilelang-hip" in str(err)
        return
    assert tilecore.setup_target("hip:gfx90a") == expected


def test_real_rocm_on_this_machine() -> None:
    try:
        install = setup.locate_rocm()
    except ToolchainError as err:
        pytest.skip(str(err))
    version = setup.rocm_version(install)
    assert version != "unknown", f"no version found under {install.root}"
    missing = setup.missing_headers(install)
    platform = setup.hip_platform(install)
    if platform != "amd":
        with pytest.raises(ToolchainError, match=f"HIP_PLATFORM={platform}"):
            setup.find_toolchain()
    elif missing:
        with pytest.raises(ToolchainError, match=re.escape(", ".join(missing))):
            setup.find_toolchain()
    else:
        assert setup.find_toolchain().version == version
