"""Read-only and full cache directories: the error names the directory and the variable that
moves it (issue 19, item 11), instead of "report it to the authors / upgrade" or tilelang's bare
``OSError``: tilecore's cache (``TILECORE_CACHE_DIR``) and tilelang's (``TILELANG_CACHE_DIR``,
created when tilelang is imported and written after each compile).  The tpu backend's
directories are in plugins/tilelang_tpu/tests/test_tpu_cache_dirs.py.

A real democpu compile runs in a fresh interpreter.  Read-only and full file systems are real
ones: a read-only tmpfs and a 12 KiB tmpfs, mounted in a private mount namespace
(``unshare --mount``: root with CAP_SYS_ADMIN, as in this project's containers; skipped
elsewhere), so nothing outside the test sees them.  "A path under a file" needs no privilege.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

WORKER = Path(__file__).with_name("remote_worker.py")
BAD_ADVICE = ("report it to", "upgrade")


def _can_unshare() -> bool:
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return False
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"], capture_output=True)
    return probe.returncode == 0


def compile_with(tmp_path: Path, tilecore_cache: str, mounts: str = "", tilelang_cache: str = "") -> subprocess.CompletedProcess[str]:
    """A democpu compile with ``TILECORE_CACHE_DIR=tilecore_cache`` and tilelang's cache in
    ``tilelang_cache`` (set after ``import tilelang``), after the ``mounts`` shell lines."""
    cwd = tmp_path / "cwd"
    cwd.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TILECORE_REMOTE_CACHE")}
    env["TILECORE_CACHE_DIR"] = tilecore_cache
    plan = f'[{{"compile": 1.0, "cache": "{tilelang_cache or tmp_path / "tilelang"}"}}]'
    command = [sys.executable, str(WORKER), plan]
    if mounts:
        script = f'set -e\n{mounts}\nexec "$@"\n'
        command = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", *command]
    return subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=300)


def last_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode != 0, "the compile must fail"
    return proc.stderr.strip().splitlines()[-1]


def assert_names_directory_and_variable(error: str, directory: Path, variable: str = "TILECORE_CACHE_DIR") -> None:
    assert "CacheDirectoryError" in error and str(directory) in error, error
    assert variable in error, error
    assert not any(advice in error for advice in BAD_ADVICE), error


def test_cache_dir_under_a_file(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    error = last_error(compile_with(tmp_path, str(blocker / "cache")))
    assert_names_directory_and_variable(error, blocker / "cache")
    assert "set TILECORE_CACHE_DIR to a directory you can write to" in error


@pytest.mark.skipif(not _can_unshare(), reason="needs `unshare --mount` (root with CAP_SYS_ADMIN) for a real read-only file system")
def test_read_only_cache_dir(tmp_path: Path) -> None:
    mount = tmp_path / "ro"
    mount.mkdir()
    error = last_error(compile_with(tmp_path, str(mount / "cache"), f"mount -t tmpfs -o size=1m,ro tmpfs {mount}"))
    assert_names_directory_and_variable(error, mount / "cache")
    assert "Read-only file system" in error


@pytest.mark.skipif(not _can_unshare(), reason="needs `unshare --mount` (root with CAP_SYS_ADMIN) for a real full file system")
def test_full_cache_dir(tmp_path: Path) -> None:
    mount = tmp_path / "full"
    mount.mkdir()
    error = last_error(compile_with(tmp_path, str(mount / "cache"), f"mount -t tmpfs -o size=12k tmpfs {mount}"))
    assert_names_directory_and_variable(error, mount / "cache")
    assert "is full" in error or "No space left" in error, error
    assert "free space there, or set TILECORE_CACHE_DIR" in error


# -- tilelang's cache (TILELANG_CACHE_DIR) ------------------------------------------------------


def test_tilelang_cache_dir_under_a_file_at_import(tmp_path: Path) -> None:
    """tilelang creates its cache directories while it is imported: that error is explained too."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    env = {**os.environ, "TILELANG_CACHE_DIR": str(blocker / "cache")}
    proc = subprocess.run([sys.executable, "-c", "import tilelang"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    error = last_error(proc)
    assert_names_directory_and_variable(error, blocker / "cache", "TILELANG_CACHE_DIR")
    assert "set TILELANG_CACHE_DIR to a directory you can write to" in error


def test_tilelang_cache_dir_under_a_file_at_compile(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    error = last_error(compile_with(tmp_path, str(tmp_path / "tilecore"), tilelang_cache=str(blocker / "cache")))
    assert_names_directory_and_variable(error, blocker / "cache", "TILELANG_CACHE_DIR")
    assert "set TILELANG_CACHE_DIR to a directory you can write to" in error


@pytest.mark.skipif(not _can_unshare(), reason="needs `unshare --mount` (root with CAP_SYS_ADMIN) for a real read-only file system")
def test_read_only_tilelang_cache_dir(tmp_path: Path) -> None:
    mount = tmp_path / "ro"
    mount.mkdir()
    proc = compile_with(tmp_path, str(tmp_path / "tilecore"), f"mount -t tmpfs -o size=1m,ro tmpfs {mount}", str(mount / "cache"))
    error = last_error(proc)
    assert_names_directory_and_variable(error, mount / "cache", "TILELANG_CACHE_DIR")
    assert "Read-only file system" in error


@pytest.mark.skipif(not _can_unshare(), reason="needs `unshare --mount` (root with CAP_SYS_ADMIN) for a real full file system")
def test_full_tilelang_cache_dir_compiles_uncached_and_says_why(tmp_path: Path) -> None:
    """tilelang catches a failed save and compiles on uncached: the kernel runs (checked against
    torch by the worker) and one warning names the full directory and the variable."""
    mount = tmp_path / "full"
    mount.mkdir()
    proc = compile_with(tmp_path, str(tmp_path / "tilecore"), f"mount -t tmpfs -o size=12k tmpfs {mount}", str(mount / "cache"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    step = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("STEP "))[5:])
    assert step["ok"] and step["served"] == "compiled", step
    warning = next((line for line in proc.stderr.splitlines() if "compiled but not cached" in line), "")
    assert f"cache directory {mount / 'cache'} is full" in warning, proc.stderr[-3000:]
    assert "free space there, or set TILELANG_CACHE_DIR" in warning, warning
