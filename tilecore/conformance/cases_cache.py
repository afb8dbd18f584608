"""Conformance cases: a kernel compiled in one process is loaded from disk in another, and a
cache hit runs no compiler (not even when the backend's own build store is empty)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tilecore.conformance.runner import KernelBuilder
from tilecore.kit.paths import private_tempdir

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

    seen = _second_process(conformance_kernels, tilecore_target_text)
    assert not seen["compiled"], f"the second process compiled again instead of loading {entry}: {seen['compiled']}"
    assert seen["cache_path"] == entry, f"the second process used cache entry {seen['cache_path']}, not {entry}"
    assert not seen["mismatch"], f"the kernel loaded from disk computes a wrong result: {seen['mismatch']}"


def _second_process(kernels: KernelBuilder, target_text: str, fresh_store: str = "") -> dict[str, Any]:
    """What ``_cache_probe`` saw loading the ``copy`` kernel in a new process (``fresh_store``: the
    backend's build stores empty there)."""
    proc = subprocess.run(
        [sys.executable, "-m", "tilecore.conformance._cache_probe", target_text, "copy", kernels.style, fresh_store],
        capture_output=True,
        text=True,
        env={**os.environ, "TILELANG_PRINT_ON_COMPILATION": "1"},
        timeout=600,
        check=False,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert proc.returncode == 0 and lines, f"second process failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
    seen: dict[str, Any] = json.loads(lines[-1])
    return seen


@pytest.mark.tilecore_requires("disk_cache", "copy", "out_idx")
@pytest.mark.parametrize("store", ["kept", "empty"])
def test_cache_hit_runs_no_compiler(conformance_kernels: KernelBuilder, tilecore_target_text: str, store: str) -> None:
    """A process that loads a cached kernel starts no program while loading it: no compiler, no
    linker, no vendor build script (Python's audit events see every process it starts; the
    target's toolchain check runs before, it is no build).  ``empty``: the backend's own build
    store (under ``TILECORE_CACHE_DIR``) is empty, as on a machine that got the entry from the
    remote cache: the backend adopts the library in tilelang's entry instead of building again."""
    if os.environ.get("TILELANG_DISABLE_CACHE", "").strip().lower() in ("1", "true", "yes", "on"):
        pytest.skip("tilelang's disk cache is disabled by TILELANG_DISABLE_CACHE")
    conformance_kernels.get("copy")
    with private_tempdir("tilecore-conformance-") as scratch:  # removed at the end: the suite leaves nothing behind
        seen = _second_process(conformance_kernels, tilecore_target_text, str(scratch / "fresh") if store == "empty" else "")
    assert not seen["compiled"], f"tilelang compiled the kernel again instead of loading it: {seen['compiled']}"
    assert not seen["started"], (
        f"loading a cached kernel for {tilecore_target_text} started a program (a build on a cache hit: adopt the library "
        f"kept in tilelang's cache entry instead): {seen['started']}"
    )
    assert not seen["mismatch"], f"the kernel loaded from the cache computes a wrong result: {seen['mismatch']}"
