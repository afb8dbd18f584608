"""Environment facts for bug reports, gathered without importing torch or tilelang.

Compare ``python -m torch.utils.collect_env``: OS, libc, Python, package versions,
the torch build flavour (the local version label of the installed wheel, e.g.
``+cpu``), host compilers on ``PATH``, device-visibility variables and CPU count.
Backend toolchains and devices are reported by each backend's own setup and probe.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
from typing import Any

#: Packages whose versions matter in every report (read from metadata).
PACKAGES = ("tilecore", "tilelang", "apache-tvm-ffi", "torch", "pluggy", "numpy")
#: Host compilers looked up on PATH (the C/C++ compilers TVM's C host code and backends use).
HOST_COMPILERS = ("cc", "c++", "gcc", "g++", "clang", "clang++")
_VISIBILITY = re.compile(r"^[A-Z0-9_]*(VISIBLE_DEVICES|DEVICE_ORDER)$")


def torch_flavour(version: str | None) -> str | None:
    """``"cpu"`` for ``2.13.0+cpu``: the wheel's local version label, or ``"default"`` without one."""
    if version is None:
        return None
    return version.partition("+")[2] or "default (no local version label)"


def compiler_version(path: str) -> str:
    try:
        result = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"{path} (--version failed: {type(err).__name__})"
    first = (result.stdout or result.stderr).strip().splitlines()
    return f"{path}: {first[0]}" if first else path


def collect() -> dict[str, Any]:
    from tilecore.cli.report import version_of
    from tilecore.kit.paths import cache_root
    from tilecore.remote import printable_env

    libc_name, libc_version = platform.libc_ver()
    packages = {name: version_of(name) for name in PACKAGES}
    compilers = {}
    for name in HOST_COMPILERS:
        path = shutil.which(name)
        if path is not None:
            compilers[name] = compiler_version(path)
    return {
        "os": platform.platform(),
        "machine": platform.machine(),
        "libc": f"{libc_name} {libc_version}".strip() or None,
        "python": f"{platform.python_implementation()} {platform.python_version()} ({sys.executable})",
        "packages": packages,
        "torch_build": torch_flavour(packages["torch"]),
        "host_compilers": compilers,
        "cpu_count": os.cpu_count(),
        "device_visibility": {k: v for k, v in sorted(os.environ.items()) if _VISIBILITY.match(k)},
        # printable_env hides the remote cache's signing key and URL credentials.
        "tilecore_env": {k: printable_env(k, v) for k, v in sorted(os.environ.items()) if k.startswith(("TILECORE_", "TILELANG_"))},
        "cache_dir": str(cache_root()),
    }
