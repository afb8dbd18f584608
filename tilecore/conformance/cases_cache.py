"""Conformance case: a kernel compiled in one process is loaded from disk in another."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tilecore.conformance.runner import KernelBuilder

pytestmark = pytest.mark.tilecore_device


@pytest.mark.tilecore_requires("disk_cache", "copy", "out_idx")
def test_disk_cache_second_process(conformance_kernels: KernelBuilder, tilecore_target_text: str) -> None:
    """A second process with the same TILELANG_CACHE_DIR loads the kernel without compiling it."""
    truthy = ("1", "true", "yes", "on")
    if os.environ.get("TILELANG_DISABLE_CACHE", "").strip().lower() in truthy:
        pytest.skip("tilelang's disk cache is disabled by TILELANG_DISABLE_CACHE")
    kernel = conformance_kernels.get("copy")
    conformance_kernels.check("copy")
    entry = getattr(kernel, "_tilelang_cache_path", None)
    assert entry, "tilelang did not record a disk-cache entry for the compiled kernel"
    assert Path(entry).is_dir(), f"the disk-cache entry {entry} was not written"

    env = {**os.environ, "TILELANG_PRINT_ON_COMPILATION": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "tilecore.conformance._cache_probe", tilecore_target_text, "copy", conformance_kernels.style],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert proc.returncode == 0 and lines, f"second process failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
    seen = json.loads(lines[-1])
    assert not seen["compiled"], f"the second process compiled again instead of loading {entry}: {seen['compiled']}"
    assert seen["cache_path"] == entry, f"the second process used cache entry {seen['cache_path']}, not {entry}"
    assert not seen["mismatch"], f"the kernel loaded from disk computes a wrong result: {seen['mismatch']}"
