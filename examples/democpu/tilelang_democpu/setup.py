"""Environment/toolchain setup: find the host C++ compiler and its version."""

from __future__ import annotations

import os
import shutil
import subprocess

from tilecore import Toolchain, ToolchainError


def find_compiler() -> Toolchain:
    explicit = os.environ.get("CXX")
    path = shutil.which(explicit) if explicit else (shutil.which("g++") or shutil.which("c++"))
    if path is None:
        wanted = f"CXX={explicit}" if explicit else "g++ or c++ on PATH"
        raise ToolchainError(
            f"target 'democpu' (tilelang-democpu) needs a C++ compiler and found none ({wanted}). "
            "Install one (apt-get install g++) or point CXX at it."
        )
    banner = subprocess.run([path, "--version"], capture_output=True, text=True, check=False).stdout.splitlines()
    version = banner[0].strip() if banner else "unknown"
    return Toolchain(
        name="c++",
        version=version,
        location=path,
        found_by="$CXX" if explicit else "PATH",
    )
